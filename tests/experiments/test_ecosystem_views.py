"""The ecosystem appendix's tables (:mod:`gaugekit.report.ecosystem`): every row is
read from the records, settings read as words, and the committed records give full tables."""

from __future__ import annotations

import pytest

from gaugekit.experiments import ecosystem as eco
from gaugekit.report import ecosystem as views


def _row(optimizer, verdict, residual=1e-15, library="heavyball", **extra):
    row = {"library": library, "optimizer": optimizer, "verdict": verdict,
           "residual": residual, "dtype": "float64", "supplied": {}, "reason": "",
           "note": "", "key": None}
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
    assert kept[0]["why"].startswith(eco.REASONS[("heavyball", "SGD")])
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


def test_the_committed_records_give_every_table():
    collected = eco.collect("paper", mode="read")
    rows = eco.table_rows([r for lib in eco.LIBRARIES for r in collected.records[lib]])
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
