"""The ecosystem audit: isolation (a hanging or crashing optimizer becomes a row within the
limit), verdicts under both gauge groups, LoRA's layout, the sweep's records and resume, and
the pinned catalog."""

from __future__ import annotations

import time

import ecosystem_fakes
import pytest

from gaugebook.ecosystem import ecosystem_runs as ecosystem
from gaugebook.engine.records import read_records_dir
from gaugebook.engine.sweep import run_sweep
from gaugebook.experiments import get_experiment

TARGET = ecosystem.audit_class
LIMIT = 4.0


def _isolated(cls_name: str, limit: float = LIMIT) -> ecosystem.Isolated:
    return ecosystem.run_isolated(TARGET, ("ecosystem_fakes", cls_name, 5), limit)


def test_a_hanging_optimizer_is_killed_within_the_limit():
    t0 = time.perf_counter()
    iso = _isolated("Hangs", limit=2.0)
    assert iso.status == "timeout" and "timed out after 2 s" in iso.message
    assert time.perf_counter() - t0 < 2.0 + 8.0


@pytest.mark.parametrize(("name", "how"), [("Segfaults", "signal 11"), ("Exits", "exit code 3")])
def test_a_crashing_optimizer_becomes_a_crash(name, how):
    iso = _isolated(name)
    assert iso.status == "crashed" and how in iso.message
    verdict, note = ecosystem.classify({"isolation": iso.status, "reason": iso.message})
    assert verdict == "could not run" and how in note


def test_run_isolated_reports_an_exception_and_validates_its_limit():
    iso = ecosystem.run_isolated(TARGET, ("no_such_module_here", "X", 5), LIMIT)
    assert iso.status == "raised" and "ModuleNotFoundError" in iso.message
    with pytest.raises(ValueError, match="^Invalid timeout_s"):
        ecosystem.run_isolated(TARGET, (), 0.0)


def _verdict(cls_name: str) -> tuple[str, str, dict]:
    iso = _isolated(cls_name)
    assert iso.status == "ok", iso.message
    metrics = {"isolation": "ok", **iso.value}
    return (*ecosystem.classify(metrics), metrics)


def test_verdicts_of_an_equivariant_and_a_coordinatewise_rule():
    verdict, note, m = _verdict("PlainSGD")
    assert verdict == "equivariant" and note == "" and m["result"]["dtype"] == "float64"
    assert m["result"]["residual"] < 1e-12
    verdict, _, m = _verdict("SignDescent")
    assert verdict == "not" and m["result"]["residual"] > ecosystem.APPROXIMATE_BOUND


def test_float64_refusal_falls_back_to_float32_and_says_so():
    verdict, note, m = _verdict("Float32Only")
    assert verdict == "equivariant" and m["result"]["dtype"] == "float32"
    assert m["result"]["threshold"] == 1e-3 and note.startswith("refuses float64")


def test_a_raising_or_model_only_optimizer_could_not_run_with_its_reason():
    verdict, note, _ = _verdict("Raises")
    assert verdict == "could not run" and "this optimizer always fails" in note
    verdict, note, _ = _verdict("NeedsModel")
    assert verdict == "could not run" and note.startswith("needs a model")


def test_approximate_band():
    result = {"static": False, "residual": 4e-3, "threshold": 1e-8, "dtype": "float64",
              "num_steps": 20}
    assert ecosystem.classify({"result": result})[0] == "approximately"
    assert ecosystem.classify({"result": {**result, "residual": 0.5}})[0] == "not"
    assert ecosystem.classify({"result": {**result, "static": True}})[0] == "could not run"


def test_a_run_that_did_not_move_has_no_verdict_whatever_its_residual():
    """A run that stands still leaves a zero residual: the rule says "could not run", not
    "equivariant", and names the settings it ran with."""
    still = {"result": {"static": True, "residual": 0.0, "threshold": 1e-8,
                        "dtype": "float64", "num_steps": 20}}
    assert ecosystem.classify(still) == ("could not run",
                                         "did not move in 20 steps with its defaults")
    assert ecosystem.classify(still, "the investigation's settings")[1].endswith(
        "with the investigation's settings")


def test_a_pair_optimizer_runs_in_loras_layout_and_keeps_both_groups():
    """A fake that takes only LoRA's [A, B] (undamped ScaledGD) could not run on [U, V] and
    keeps O(r) and GL(r) in layout AB; plain SGD keeps O(r) only."""
    def run(name, **kw):
        out = ecosystem.audit_class("ecosystem_fakes", name, 5, **kw)
        return ecosystem.classify({"isolation": "ok", **out}), out["result"]

    (verdict, note), _ = run("PairScaledGD")
    assert verdict == "could not run" and "LoRA's pair" in note
    for gauge in ecosystem.GROUPS:
        (verdict, _), result = run("PairScaledGD", gauge=gauge, layout="AB")
        assert verdict == "equivariant" and result["layout"] == "AB"
        assert result["group"] == gauge and result["displacement"] > 1e-2
    (verdict, _), result = run("PlainSGD", gauge="general")
    assert verdict == "not" and result["condition_number"] == pytest.approx(
        ecosystem.CONDITION_NUMBER)
    assert run("PlainSGD")[0][0] == "equivariant"


@pytest.fixture
def fake_library(monkeypatch):
    """The experiment's library ``fakes``: the classes of :mod:`ecosystem_fakes`, the pair
    optimizer in LoRA's layout, a 2 s limit."""
    fake = ecosystem.Library("fakes", "fakes", "0", "ecosystem_fakes")
    monkeypatch.setitem(ecosystem.LIBRARIES, "fakes", fake)
    monkeypatch.setitem(ecosystem.CATALOG, "fakes", ecosystem_fakes.NAMES)
    monkeypatch.setitem(ecosystem.PAIR_LAYOUTS, ("fakes", "PairScaledGD"), "AB")
    monkeypatch.setitem(ecosystem.TIMEOUT_S, "paper", 2.0)
    monkeypatch.setattr(ecosystem, "library_available", lambda library: True)
    return get_experiment("ecosystem")


def test_every_fake_becomes_one_row_per_group_through_the_sweep_and_resume_skips_them(
        tmp_path, fake_library):
    """The experiment on a fake library: a hang and two crashes are rows, the sweep goes on,
    every class is recorded under both groups (the pair optimizer in layout AB), and a second
    sweep finds every run recorded."""
    names, groups = ecosystem_fakes.NAMES, ecosystem.GROUPS
    t0 = time.perf_counter()
    report = run_sweep(fake_library, tmp_path, scale="paper", parts=["fakes"], progress=False)
    assert time.perf_counter() - t0 < 90
    assert report.ran == len(names) * len(groups) and report.statuses["ok"] == report.ran
    records = read_records_dir(tmp_path)
    rows = {(r["optimizer"], r["group"]): r for r in ecosystem.table_rows(records)}
    assert set(rows) == {(n, g) for n in names for g in groups}
    general = [r for r in records if r["config"]["group"] == "general"]
    assert all(r["config"]["condition_number"] == ecosystem.CONDITION_NUMBER for r in general)
    assert rows["PlainSGD", "orthogonal"]["verdict"] == "equivariant"
    assert rows["PlainSGD", "general"]["verdict"] == "not"
    assert rows["PlainSGD", "general"]["cond"] == pytest.approx(ecosystem.CONDITION_NUMBER)
    for group in groups:
        pair = rows["PairScaledGD", group]
        assert pair["layout"] == "AB" and pair["verdict"] == "equivariant"
        assert rows["SignDescent", group]["verdict"] == "not"
        for name, why in (("Hangs", "timed out"), ("Segfaults", "crashed"),
                          ("Exits", "crashed")):
            row = rows[name, group]
            assert row["verdict"] == "could not run" and why in row["reason"]
        assert ecosystem.counts([r for r in rows.values() if r["group"] == group])[
            "could not run"] == 5
    again = run_sweep(fake_library, tmp_path, scale="paper", parts=["fakes"], progress=False)
    assert again.ran == 0 and again.skipped == len(names) * len(groups)


def test_a_sweep_that_has_one_group_resumes_with_the_other_only(tmp_path, fake_library,
                                                                monkeypatch):
    """Records of the orthogonal runs alone (an interrupted sweep): the next sweep runs the
    general ones and redoes none."""
    names = ("PlainSGD", "PairScaledGD")
    monkeypatch.setitem(ecosystem.CATALOG, "fakes", names)
    with monkeypatch.context() as only:
        only.setattr(ecosystem, "GROUPS", ("orthogonal",))
        first = run_sweep(fake_library, tmp_path, scale="paper", parts=["fakes"],
                          progress=False)
    assert first.ran == len(names)
    second = run_sweep(fake_library, tmp_path, scale="paper", parts=["fakes"], progress=False)
    assert second.skipped == len(names) and second.ran == len(names)
    groups = [r["config"]["group"] for r in read_records_dir(tmp_path)]
    assert sorted(groups) == sorted(ecosystem.GROUPS * len(names))


def test_a_missing_library_is_an_error_record_not_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(ecosystem, "library_available", lambda library: False)
    report = run_sweep(get_experiment("ecosystem"), tmp_path, scale="quick",
                       parts=["heavyball"], progress=False)
    assert report.statuses["error"] == ecosystem.QUICK_CLASSES * len(ecosystem.GROUPS)
    (record, *_) = read_records_dir(tmp_path)
    assert "pip install 'heavyball==3.2.1'" in record["message"]


@pytest.mark.parametrize("library", sorted(ecosystem.LIBRARIES))
def test_pinned_catalog_is_what_the_installed_library_exports(library):
    if not ecosystem.library_available(library):
        pytest.skip(f"{library} is not installed at its pinned version (the ecosystem extra)")
    assert ecosystem.exported_optimizers(library) == ecosystem.CATALOG[library]


def test_specs_cover_the_catalog_once_per_group():
    exp = get_experiment("ecosystem")
    for library, names in ecosystem.CATALOG.items():
        specs = exp.specs(library, "paper")
        assert [s.config["optimizer"] for s in specs] == list(names) * len(ecosystem.GROUPS)
        assert [s.config["group"] for s in specs] == [
            g for g in ecosystem.GROUPS for _ in names]
        assert len({s.run_id for s in specs}) == len(names) * len(ecosystem.GROUPS)
        assert len(exp.specs(library, "quick")) == ecosystem.QUICK_CLASSES * len(
            ecosystem.GROUPS)
        assert len({exp.batch_key(s) for s in specs}) == len(ecosystem.GROUPS)


def test_loras_pairs_go_to_lora_rite_only_and_its_follow_ups_cover_both_groups():
    exp = get_experiment("ecosystem")
    layouts = {(s.config["optimizer"], s.config["layout"])
               for s in exp.specs("pytorch_optimizer", "paper")}
    assert ("LoRARite", "AB") in layouts and ("LoRARite", "UV") not in layouts
    assert {name for name, layout in layouts if layout == "AB"} == {"LoRARite"}
    assert all(s.config["layout"] == "UV" for s in exp.specs("heavyball", "paper"))
    rite = [s.config for s in exp.specs("investigations", "paper")
            if s.config["optimizer"] == "LoRARite"]
    assert sorted(c["group"] for c in rite) == sorted(ecosystem.GROUPS)
    assert all(c["layout"] == "AB" and c["investigation"]["kwargs"] == {"update_skipping": 0.0}
               for c in rite)


@pytest.mark.skipif(not ecosystem.library_available("pytorch_optimizer"),
                    reason="pytorch-optimizer is not installed at its pinned version")
def test_lora_rite_in_loras_layout_stands_still_at_its_defaults_and_keeps_gl_without_skipping():
    """LoRA-RITE at its defaults skips every step of the audit problem (no verdict); with
    ``update_skipping=0`` it moves and keeps GL(r)."""
    def run(**kwargs):
        out = ecosystem.audit_class("pytorch_optimizer", "LoRARite", 5, gauge="general",
                                    layout="AB", **kwargs)
        return ecosystem.classify({"isolation": "ok", **out})[0], out["result"]

    verdict, result = run()
    assert verdict == "could not run" and result["static"]
    verdict, result = run(kwargs={"update_skipping": 0.0})
    assert verdict == "equivariant" and result["displacement"] > 1e-2
