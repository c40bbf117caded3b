"""The ecosystem appendix's tables (:mod:`gaugebook.ecosystem.ecosystem_views`): every row is
read from the records, settings read as words, and the committed records give full tables."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("gaugebook.present.viz")

from gaugebook.ecosystem import ecosystem_runs as eco
from gaugebook.ecosystem import ecosystem_views as views
from gaugebook.ecosystem import eigenbasis_runs as eb
from gaugebook.engine.records import read_records_dir


def _row(optimizer, verdict, residual=1e-15, library="heavyball", **extra):
    row = {"library": library, "optimizer": optimizer, "verdict": verdict,
           "residual": residual, "dtype": "float64", "supplied": {}, "reason": "",
           "note": "", "key": None, "group": "orthogonal", "layout": "UV", "moved": 0.1}
    return {**row, **extra}


def test_settings_read_as_words_not_python():
    assert views.value_text(True) == "yes" and views.value_text(False) == "no"
    assert views.value_text(None) == "none" and views.value_text("float64") == "float64"


def test_counts_have_one_row_per_library_and_one_for_both():
    rows = [_row("A", "equivariant"), _row("B", "not", 0.5),
            _row("C", "could not run", None, library="pytorch_optimizer")]
    table = views.count_rows(rows)
    assert [r["library"] for r in table] == ["pytorch-optimizer 4.1.0", "heavyball 3.2.1",
                                            "both"]
    assert table[-1] == {"library": "both", "classes": 3, "equivariant": 1,
                         "approximately": 0, "not": 1, "could not run": 1}


def test_kept_rows_give_the_reason_the_supplied_arguments_and_a_float32_mark():
    rows = [_row("SGD", "approximately", 7e-8, dtype="float32",
                 supplied={"nesterov": True}), _row("AdamW", "not", 0.7)]
    kept = views.kept_rows(rows, "heavyball")
    assert [r["class"] for r in kept] == ["SGD"]
    assert kept[0]["residual"] == "7.0e-08 (float32)"
    assert kept[0]["why"].startswith(views.REASONS[("heavyball", "SGD")])
    assert kept[0]["why"].endswith("(given nesterov = yes)")
    missing = views.kept_rows([_row("NoSuchClass", "equivariant")], "heavyball")
    assert missing[0]["why"] == views.NO_REASON


def test_a_run_without_a_verdict_shows_no_residual_and_its_note_when_no_reason():
    still = _row("SaRA", "could not run", 0.0, library="pytorch_optimizer",
                 note="did not move in 20 steps with its defaults")
    assert views.residual_text(still) is None
    assert views.failed_rows([still])[0]["why"] == "did not move in 20 steps with its defaults"


@pytest.mark.parametrize(("key", "words"), [
    ("hb_sgd_f64_state", "storage_dtype = float64"),
    ("hb_unscaled_1_step", "1 step"),
    ("po_radam_5_steps", "5 steps"),
    ("po_muon_use_muon", "one param group with use_muon = yes"),
    ("po_schedulefreewrapper_train", "train mode"),
])
def test_each_follow_up_says_what_it_changed(key, words):
    inv = next(i for i in eco.INVESTIGATIONS if i.key == key)
    assert views.change_text(inv) == words


def test_rows_split_by_group_and_a_twin_names_its_group_and_layout():
    rows = [_row("A", "equivariant"), _row("A", "not", 0.9, group="general"),
            _row("LoRARite", "equivariant", group="general", layout="AB")]
    split = views.by_group(rows)
    assert list(split) == list(eco.GROUPS)
    assert [r["optimizer"] for r in split["general"]] == ["A", "LoRARite"]
    assert [views.twin_text(r) for r in rows] == ["O(r)", "GL(r)", "GL(r), (A, B)"]


def test_group_counts_and_the_pair_table_keep_a_class_that_keeps_either_group():
    rows = [_row("SGD", "equivariant"), _row("SGD", "not", 0.9, group="general"),
            _row("Adam", "not", 0.7), _row("Adam", "not", 1.1, group="general"),
            _row("Odd", "not", 0.5), _row("Odd", "equivariant", group="general")]
    counts = views.group_count_rows(rows)
    assert [(c["group"], c["classes"], c["equivariant"], c["not"]) for c in counts] == [
        ("O(r)", 3, 1, 2), ("GL(r)", 3, 1, 2)]
    pairs = views.group_pair_rows(rows)
    assert [(p["class"], p["o_verdict"], p["gl_verdict"]) for p in pairs] == [
        ("SGD", "equivariant", "not"), ("Odd", "not", "equivariant")]
    assert pairs[0]["gl_residual"] == "9.0e-01"


def test_the_committed_records_hold_both_groups_and_lora_rite_in_its_layout(committed):
    records, rows, followups = committed
    both = eco.table_rows([r for lib in eco.LIBRARIES for r in records[lib]])
    values = views.group_values(both, followups)
    counts = views.group_count_rows(both)
    assert [c["classes"] for c in counts] == [len(rows)] * len(eco.GROUPS)
    assert "<table" in values["group_count_table"] and "<table" in values["lora_rite_table"]
    assert values["eco_o_only"] + values["eco_gl_n_kept"] >= values["eco_o_n_kept"]
    rite = views.lora_rite_rows(both, followups)
    assert [(r["setting"], r["twin"]) for r in rite] == [
        ("defaults", "O(r), (A, B)"), ("defaults", "GL(r), (A, B)"),
        ("update_skipping = 0", "O(r), (A, B)"), ("update_skipping = 0", "GL(r), (A, B)")]
    assert [r["verdict"] for r in rite[:2]] == ["could not run"] * 2
    assert all(r["moved"] == 0 and "did not move" in r["note"] for r in rite[:2])
    assert values["rite_o_verdict"] == values["rite_gl_verdict"] == "equivariant"
    assert values["rite_gl"] <= views.FLOAT64_THRESHOLD


def test_the_committed_records_give_every_table():
    collected = eco.collect("paper", mode="read")
    rows = views.by_group(eco.table_rows(
        [r for lib in eco.LIBRARIES for r in collected.records[lib]]))["orthogonal"]
    assert views.count_rows(rows)[-1]["classes"] == len(rows) == sum(
        len(names) for names in eco.CATALOG.values())
    kept = [r for lib in eco.LIBRARIES for r in views.kept_rows(rows, lib)]
    assert kept and all(r["why"] != views.NO_REASON for r in kept)
    assert all(r["why"] for r in views.failed_rows(rows))
    follow = views.investigation_rows(eco.table_rows(collected.records["investigations"]))
    assert len(follow) == len(eco.INVESTIGATIONS)
    assert all(r["change"] != "as the main audit" for r in follow)


def test_the_eigen_adam_comparison_reads_every_row_from_the_records():
    comparison = views.eigen_adam_comparison("paper")
    labels = [r["method"] for r in comparison.rows]
    assert len(labels) == len(views.COMPARED) and labels[0] == "Adam"
    pooled = comparison.rows[-1]
    assert pooled["rec"] != pooled["rec"]  # NaN: the pooled variant ran on the twins only
    assert all(r["gauge"] == r["gauge"] for r in comparison.rows)  # every twin was run
    assert comparison.float64_twin("eigen_adam") is not None


@pytest.fixture(scope="module")
def committed():
    """The committed records, the main audits' ``O(r)`` rows and the follow-ups' rows."""
    collected = eco.collect("paper", mode="read")
    rows = views.by_group(eco.table_rows(
        [r for lib in eco.LIBRARIES for r in collected.records[lib]]))["orthogonal"]
    return collected.records, rows, eco.table_rows(collected.records["investigations"])


def test_the_verdict_values_glue_every_table_and_the_broken_residuals(committed):
    records, rows, _ = committed
    values = views.verdict_values(records, rows)
    for name in ("count_table", "failed_table", *(f"kept_table_{lib}" for lib in eco.LIBRARIES)):
        assert "<table" in values[name]
    broken = [r["residual"] for r in rows if r["verdict"] == "not"]
    assert values["min_not_residual"] == min(broken) <= values["median_not_residual"]
    assert values["n_total"] == len(rows)
    # the counts the closing note quotes add up to every class
    assert values["eco_n_not"] == len(broken)
    assert values["eco_n_not"] + values["eco_n_kept"] + values["eco_n_failed"] == len(rows)
    assert "`AdamW`" in values["not_hb"].data


def test_the_followup_values_have_every_key_and_nan_without_a_residual(committed):
    _, rows, followups = committed
    values = views.followup_values(rows, followups)
    for inv in eco.INVESTIGATIONS:
        assert {f"inv_{inv.key}", f"inv_{inv.key}_verdict", f"inv_{inv.key}_reason"} <= set(values)
    for r in followups:
        if r["residual"] is None:
            assert math.isnan(values[f"inv_{r['key']}"])
    assert values["main_hb_sgd_verdict"] == "approximately"
    assert len([k for k in values if k.startswith("main_") and not k.endswith("_verdict")]) == (
        sum(len(names) for names in views.NAMED_MAIN.values()))


def test_a_collision_breaks_eigen_adam_and_a_gap_heals_it():
    from gaugekit.optim import make_optimizer

    def eigen_adam(p):
        return make_optimizer("eigen_adam", p, lr=1e-2, update_freq=5)

    exact = views.collision_residual(eigen_adam, 0.0)
    gap = views.collision_residual(eigen_adam, 1e-1)
    assert exact > 1e-2 and gap < 1e-12
    assert views.COLLISION_GAPS[0] == 0.0 and list(views.COLLISION_GAPS) == sorted(
        views.COLLISION_GAPS)


def test_the_layer_0_query_gradient_at_the_start_is_rank_deficient():
    import torch

    grads = views.initial_q_gradients("paper")
    assert len(grads) >= 2 and all(g.dtype == torch.float64 for g in grads)
    sv = torch.linalg.svdvals(grads[0])
    assert int((sv > 1e-10 * sv[0]).sum()) < grads[0].shape[0]


def test_the_comparison_values_read_the_comparison():
    comparison = views.eigen_adam_comparison("paper")
    values = views.comparison_values(comparison)
    assert "<table" in values["compare_table"]
    assert values["cmp_eigen_adam_gauge64"] == comparison.rows[3]["gauge64"]
    edge = comparison.sensing["lr"] in (min(eb.SENSING_LR_GRID), max(eb.SENSING_LR_GRID))
    assert values["eigen_at_edge"] == edge
    assert values["eigen_lr"] == comparison.sensing["lr"]
    assert values["zoo_r"] == 3
    # EigenAdam's recovery error against the rules that have one (the pooled variant has none)
    recs = [r["rec"] for r in comparison.rows[:3]]
    assert values["eigen_others"] == 3 and values["eigen_rec"] == comparison.rows[3]["rec"]
    assert values["eigen_lower"] == sum(r < values["eigen_rec"] for r in recs)
    assert values["cmp_pooled_gauge64"] == comparison.rows[-1]["gauge64"]


def test_every_committed_kept_verdict_has_a_reason_line():
    """The book prints one line of reason per equivariant or approximate verdict."""
    from gaugebook.engine.collection import records_dir

    folder = records_dir("ecosystem", "paper")
    if not folder.is_dir():
        pytest.skip("no committed ecosystem records")
    records = [r for r in read_records_dir(folder) if r["part"] != "investigations"]
    rows = views.by_group(eco.table_rows(records))["orthogonal"]
    kept = [(r["library"], r["optimizer"]) for r in rows
            if r["verdict"] in ("equivariant", "approximately")]
    assert kept and all(k in views.REASONS for k in kept), set(kept) - set(views.REASONS)
    assert len(rows) == sum(len(v) for v in eco.CATALOG.values())
