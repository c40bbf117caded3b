"""The attention chapter's glued values (gaugebook.attention.attention_summary): the live gauge
check holds to round-off, the numbers follow the head summary (dashes where records are missing,
collapsed runs left out), and the twin audit splits Adam's gauge twins only."""

from __future__ import annotations

import math

import pytest

from gaugebook.attention import attention_runs as att
from gaugebook.attention import attention_summary as page
from gaugebook.present import roundoff


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
    # float64 round-off of order-one logits and products: floor 1e-12, thousands of units
    assert roundoff.at_floor(live["logits"], 1e-12) and roundoff.at_floor(live["M"], 1e-12)
    assert roundoff.exceeds(live["W_Q"], 0.1, 1e-12)  # the rotation really moved the weights


def _twin(method, init, twin, *, logit=None, m=None, step1=None, acc=None, base_acc=None,
          collapsed=False):
    kind, _, rest = twin.partition(" ")
    return {"method": method, "init_seed": init, "twin": twin, "kind": kind,
            "noise_scale": float(rest) if kind == "noise" else None, "status": "ok",
            "collapsed": collapsed, "final_logit_drift": logit, "final_m_drift": m,
            "step1_logit_drift": step1, "val_acc": acc, "base_val_acc": base_acc,
            "acc_gap": None if acc is None else abs(acc - base_acc)}


def test_final_numbers_ratios_words_and_dashes():
    head = _head(gauge_final_m=0.5, noise7_final_m=0.001, noise5_final_m=0.01,
                 identity_max=0.0)
    head["momentum"] |= {"gauge_final_m": 1e-6, "noise7_final_m": 1e-3}
    head["scalar_adam"] |= {"gauge_final_m": 1e-2, "noise7_final_m": 1e-3}
    head["twins"] = [
        _twin("adam", 42, "gauge 777", m=0.5), _twin("adam", 42, "gauge 999", m=0.6),
        _twin("adam", 42, "noise 1e-07", m=0.001), _twin("adam", 42, "noise 1e-05", m=0.01),
        _twin("muon_adam", 42, "gauge 777", m=0.2), _twin("muon_adam", 42, "noise 1e-07", m=0.1)]
    out = page.final_numbers(head)
    # the closest gauge twin (0.5) over the farthest noise twin (1e-2), not the 1e-7 one
    assert out["adam_vs_noise"] == "50"
    assert out["final_m_adam"] == "0.5" and out["noise7_m_adam"] == "0.001"
    assert out["muon_ratio"] == "2.0" and out["muon_logit_ratio"] == "—"  # no logit drifts
    assert out["identity_all"] == "0" and out["pub_adam_m"] == "0.56"
    assert out["cmpm_adam"].endswith(")") and "orders of magnitude" in out["cmpm_adam"]
    head["scalar_adam"]["gauge_final_m"] = None
    assert page.final_numbers(head)["final_m_scalar_adam"] == "—"


def test_the_structural_ratio_is_min_over_max_to_the_digits_of_its_spread():
    rows = [_twin("adam", 42, "gauge 777", logit=0.80),
            _twin("adam", 42, "gauge 999", logit=0.78),
            _twin("adam", 123, "gauge 777", logit=0.74),
            _twin("adam", 42, "noise 1e-07", logit=1e-5),
            _twin("adam", 42, "noise 1e-05", logit=1.4e-3),
            _twin("adam", 123, "noise 1e-05", logit=1.5e-3),
            _twin("adam", 123, "noise 1e-07", logit=0.9, collapsed=True)]  # left out
    s = page.structural_ratio(rows, "adam")
    assert s["ratio"] == pytest.approx(0.74 / 1.5e-3)
    assert s["per_init"] == pytest.approx({42: 0.78 / 1.4e-3, 123: 0.74 / 1.5e-3})
    assert s["num_gauge"] == 3 and s["num_noise"] == 3
    # per-init ratios 557 and 493: a spread of 45 prints the ratio to the tens
    assert s["text"] == "490"
    paper = page.structural_ratio(rows, "adam", noise_inits=(42,))
    assert paper["ratio"] == pytest.approx(0.74 / 1.4e-3)
    sevens = page.structural_ratio(rows, "adam", noise_scales=(1e-7,), inits=(42,))
    assert sevens["ratio"] == pytest.approx(0.78 / 1e-5) and sevens["text"] == "78,000"
    assert page.structural_ratio(rows, "momentum")["text"] == "—"


def test_fmt_ratio_never_prints_more_than_two_digits():
    assert page.fmt_ratio(13_224.0) == "13,000"
    assert page.fmt_ratio(13_224.0, 1_518.0) == "13,000"
    assert page.fmt_ratio(527.7, 40.0) == "530"
    assert page.fmt_ratio(527.7, 400.0) == "500"  # a wide spread: fewer digits
    assert page.fmt_ratio(0.9130) == "0.91" and page.fmt_ratio(None) == "—"


def test_twin_comparison_is_in_orders_of_magnitude_paired_by_init_seed():
    rows = [_twin("adam", s, f"gauge {g}", logit=x * 10 ** (s / 1000))
            for s in (42, 123) for g, x in ((777, 0.8), (999, 0.7))]
    rows += [_twin("adam", 42, "noise 1e-07", logit=1e-5),
             _twin("adam", 123, "noise 1e-07", logit=3e-5)]
    c = page.twin_comparison(rows, "adam")
    assert c.paired_n == 2 and c.n_a == 2  # one value per init seed: the mean log of its twins
    assert c.diff == pytest.approx(
        sum(0.5 * (math.log10(0.8) + math.log10(0.7)) + s / 1000 for s in (42, 123)) / 2
        - 0.5 * (math.log10(1e-5) + math.log10(3e-5)))
    assert c.sign == 1 and page.magnitude_text(c).startswith("+5 orders of magnitude (95 % CI")
    # negative control: gauge and noise twins of the same size are level
    same = [dict(r, final_logit_drift=2e-5 + 1e-6 * i) for i, r in enumerate(rows)]
    assert page.twin_comparison(same, "adam").sign == 0
    assert page.twin_comparison(rows, "momentum") is None
    assert page.magnitude_text(None) == "—"


def test_accuracy_comparison_pairs_twins_with_their_base():
    rows = [_twin("adam", s, f"gauge {g}", acc=a, base_acc=b)
            for s, b, accs in ((42, 0.40, (0.401, 0.399)), (123, 0.41, (0.412, 0.409)))
            for g, a in zip((777, 999), accs, strict=True)]
    c = page.accuracy_comparison(rows)
    assert c.paired_n == 2 and c.diff == pytest.approx(0.00025) and c.sign == 0
    assert page.accuracy_comparison([]) is None


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
        return {**_twin(method, 42, twin, m=m, logit=logit, collapsed=collapsed),
                "text_used": "tiny.txt", "label": label}

    rows = [row("adam", "gauge 777", 0.4, 0.6), row("adam", "noise 1e-07", 0.01, 0.02),
            row("momentum", "gauge 777", 0.9, 0.9, collapsed=True, label="SGD gauge")]

    class Family:
        num_steps, task = 11, {"batch_size": 5}

        class model:
            seq_len = 9

    out = page.lm_numbers(rows, Family())
    assert out["lm_adam_gauge"] == "0.4" and out["lm_logit_ratio"] == "30"
    assert out["pub_lm_gauge"] == "0.36–0.37" and out["pub_lm_noise"] == "0.28–0.33"
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
    assert by[(adam, "identity")]["M_h drift"] == 0.0  # the same code path: bit for bit
    # float64 drifts of order-one products: floor 1e-12, thousands of units of round-off
    assert roundoff.exceeds(by[(adam, "gauge")]["M_h drift"], 1e-8, 1e-12)
    assert roundoff.at_floor(by[(shared, "gauge")]["M_h drift"], 1e-12)
