"""The ecosystem audit: isolation (a hanging or crashing optimizer becomes a row within the
limit), verdicts, the sweep's records and resume, and the pinned catalog."""

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


def test_every_fake_becomes_one_row_through_the_sweep_and_resume_skips_them(tmp_path,
                                                                            monkeypatch):
    """The experiment on a fake library: a hang and two crashes are rows, the sweep goes on,
    and a second sweep finds every run recorded."""
    fake = ecosystem.Library("fakes", "fakes", "0", "ecosystem_fakes")
    monkeypatch.setitem(ecosystem.LIBRARIES, "fakes", fake)
    monkeypatch.setitem(ecosystem.CATALOG, "fakes", ecosystem_fakes.NAMES)
    monkeypatch.setitem(ecosystem.TIMEOUT_S, "paper", 2.0)
    monkeypatch.setattr(ecosystem, "library_available", lambda library: True)
    exp = get_experiment("ecosystem")
    t0 = time.perf_counter()
    report = run_sweep(exp, tmp_path, scale="paper", parts=["fakes"], progress=False)
    assert time.perf_counter() - t0 < 60
    assert report.ran == len(ecosystem_fakes.NAMES) and report.statuses["ok"] == report.ran
    rows = {r["optimizer"]: r for r in ecosystem.table_rows(read_records_dir(tmp_path))}
    assert set(rows) == set(ecosystem_fakes.NAMES)
    assert rows["PlainSGD"]["verdict"] == "equivariant"
    assert rows["SignDescent"]["verdict"] == "not"
    for name, why in (("Hangs", "timed out"), ("Segfaults", "crashed"), ("Exits", "crashed")):
        assert rows[name]["verdict"] == "could not run" and why in rows[name]["reason"]
    assert ecosystem.counts(list(rows.values()))["could not run"] == 5
    again = run_sweep(exp, tmp_path, scale="paper", parts=["fakes"], progress=False)
    assert again.ran == 0 and again.skipped == len(ecosystem_fakes.NAMES)


def test_a_missing_library_is_an_error_record_not_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(ecosystem, "library_available", lambda library: False)
    report = run_sweep(get_experiment("ecosystem"), tmp_path, scale="quick",
                       parts=["heavyball"], progress=False)
    assert report.statuses["error"] == ecosystem.QUICK_CLASSES
    (record, *_) = read_records_dir(tmp_path)
    assert "pip install 'heavyball==3.2.1'" in record["message"]


@pytest.mark.parametrize("library", sorted(ecosystem.LIBRARIES))
def test_pinned_catalog_is_what_the_installed_library_exports(library):
    if not ecosystem.library_available(library):
        pytest.skip(f"{library} is not installed at its pinned version (the ecosystem extra)")
    assert ecosystem.exported_optimizers(library) == ecosystem.CATALOG[library]


def test_specs_cover_the_catalog_once():
    exp = get_experiment("ecosystem")
    for library, names in ecosystem.CATALOG.items():
        specs = exp.specs(library, "paper")
        assert [s.config["optimizer"] for s in specs] == list(names)
        assert len({s.run_id for s in specs}) == len(names)
        assert len(exp.specs(library, "quick")) == ecosystem.QUICK_CLASSES
