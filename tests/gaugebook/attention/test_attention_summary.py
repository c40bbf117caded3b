"""The attention chapter's glued values (gaugebook.attention.attention_summary): the live gauge
check holds to round-off, the numbers follow the head summary (dashes where records are missing,
collapsed runs left out), and the twin audit splits Adam's gauge twins only."""

from __future__ import annotations

import pytest

from gaugebook.attention import attention_runs as att
from gaugebook.attention import attention_summary as page


def _head(**adam):
    blank = {"gauge_final_m": None, "gauge_final_logit": None, "gauge_step1_logit": None,
             "noise7_final_m": None, "noise7_final_logit": None, "noise7_step1_logit": None,
             "noise5_final_m": None, "acc_gap": None, "identity_max": None}
    head = {m: dict(blank) for m in att.METHODS}
    head["adam"] |= adam
    return head


def test_live_gauge_check_is_the_same_function_at_another_point():
    live = page.live_gauge_check()
    assert set(live) == {"logits", "M", "W_Q"}
    assert live["logits"] < 1e-12 and live["M"] < 1e-12  # float64 round-off
    assert live["W_Q"] > 0.1  # the rotation really moved the weights


def test_final_numbers_ratios_words_and_dashes():
    head = _head(gauge_final_m=0.5, noise7_final_m=0.001, noise5_final_m=0.01,
                 identity_max=0.0)
    head["momentum"] |= {"gauge_final_m": 1e-6, "noise7_final_m": 1e-3}
    head["scalar_adam"] |= {"gauge_final_m": 1e-2, "noise7_final_m": 1e-3}
    head["muon_adam"] |= {"gauge_final_m": 0.2, "noise7_final_m": 0.1}
    out = page.final_numbers(head)
    assert out["adam_vs_noise"] == "50"  # over the farther noise twin (1e-2), not 1e-3
    assert out["final_m_adam"] == "0.5" and out["noise7_m_adam"] == "0.001"
    assert out["muon_ratio"] == "2" and out["muon_logit_ratio"] == "—"  # no logit drifts
    assert out["identity_all"] == "0" and out["pub_adam_m"] == "0.56"
    head["scalar_adam"]["gauge_final_m"] = None
    assert page.final_numbers(head)["final_m_scalar_adam"] == "—"


def test_float64_numbers_only_count_the_equivariant_rules():
    head = _head(gauge_step1_logit=0.3)
    head["momentum"]["gauge_step1_logit"] = 2e-7
    head["float64_step1"] = {"adam": 0.25, "momentum": 3e-16, "scalar_adam": 5e-16,
                             "muon_adam": None}

    class Family:
        num_steps = 7

    class Config:
        def families(self, part):
            assert part == "float64"
            return [Family()]

    out = page.float64_numbers(head, Config())
    assert (out["f64_eq_min"], out["f64_eq_max"]) == ("3.00e-16", "5.00e-16")
    assert out["f64_adam"] == "2.50e-01" and out["f32_eq_max"] == "2.00e-07"
    assert out["f64_steps"] == "7" and " to " in out["pub_f64"]


def test_lm_numbers_leave_collapsed_runs_out():
    def row(method, twin, m, logit, collapsed=False, label="x"):
        return {"method": method, "twin": twin, "final_m_drift": m,
                "final_logit_drift": logit, "collapsed": collapsed,
                "status": "ok", "text_used": "tiny.txt", "label": label}

    rows = [row("adam", "gauge 777", 0.4, 0.6), row("adam", "noise 1e-07", 0.01, 0.02),
            row("momentum", "gauge 777", 0.9, 0.9, collapsed=True, label="SGD gauge")]

    class Family:
        num_steps, task = 11, {"batch_size": 5}

        class model:
            seq_len = 9

    out = page.lm_numbers(rows, Family())
    assert out["lm_adam_gauge"] == "0.4" and out["lm_logit_ratio"] == "30"
    assert out["lm_momentum_gauge"] == "—"  # collapsed: not a claim
    assert out["lm_collapsed"].data == "SGD gauge" and out["lm_text"] == "tiny.txt"
    assert (out["lm_steps"], out["lm_T"], out["lm_batch"]) == ("11", "9", "5")


@pytest.mark.parametrize("steps", [4])
def test_mha_audit_splits_adam_only(steps):
    from gaugekit.audit import audit_twins

    make, loss, x, y = page.mha_regression()
    results = {name: audit_twins(make(), loss, probe=(x, x, x), batch=(x, y), optimizer=name,
                                 optimizer_kwargs={"lr": 1e-3}, steps=steps,
                                 twins=("gauge", "identity"))
               for name in ("adam", "scalar_adam")}
    rows = page.twin_audit_rows(results)
    by = {(r["optimizer"], r["twin"]): r for r in rows}
    adam, shared = att.METHOD_LABELS["adam"], att.METHOD_LABELS["scalar_adam"]
    assert by[(adam, "identity")]["M_h drift"] == 0.0
    assert by[(adam, "gauge")]["M_h drift"] > 1e-8
    assert by[(shared, "gauge")]["M_h drift"] < 1e-12
