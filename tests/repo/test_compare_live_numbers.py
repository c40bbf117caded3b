"""CI's second numerical environment must move some glued number, and the comparison says which:
the glue log written by `glue_page` and `.ci/compare_live_numbers.py` that reads two of them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gaugebook.present import tables

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("compare_live_numbers",
                                                  ROOT / ".ci" / "compare_live_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_glued_values_are_logged_exactly_when_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(tables.GLUE_LOG_ENV, raising=False)
    tables.log_glued("eigen_simple", 1.5e-15)
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(tables.GLUE_LOG_ENV, str(tmp_path / "log"))
    tables.log_glued("eigen_simple", 6.605108e-15)
    tables.log_glued("eigen_reason", "keeps the gauge")
    tables.log_glued("tab", "<table>" + "x" * 300 + "</table>")
    tables.log_glued("flag", True)
    [log] = (tmp_path / "log").glob("glue-*.jsonl")
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries[0] == {"name": "eigen_simple", "number": "6.605108e-15"}
    assert entries[1] == {"name": "eigen_reason", "text": "keeps the gauge"}
    assert "sha256" in entries[2] and entries[3] == {"name": "flag", "text": "True"}


def _write(folder: Path, pid: int, values: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"glue-{pid}.jsonl", "w") as f:
        for name, v in values.items():
            key = "number" if isinstance(v, float) else "text"
            f.write(json.dumps({"name": name, key: repr(v) if key == "number" else v}) + "\n")


def test_the_comparison_names_what_moved_and_fails_when_nothing_did(tmp_path, capsys):
    script = _script()
    a, b = tmp_path / "a", tmp_path / "b"
    # chapter 13's collision residuals (its source names coll_exact, eigen_simple, ...)
    _write(a, 11, {"eigen_simple": 1.2e-15, "coll_exact": 0.2726, "eigen_reason": "keeps"})
    _write(a, 12, {"rec_muon": 7.4e-6, "rec_gd": 0.1312})
    _write(b, 98, {"rec_muon": 7.4e-6, "rec_gd": 0.1312})
    _write(b, 99, {"eigen_simple": 1.4e-15, "coll_exact": 0.2726, "eigen_reason": "keeps"})
    assert script.main([str(a), str(b), "--require-change"]) == 0
    out = capsys.readouterr().out
    assert "chapters/13_ecosystem.md: 1 of 3 glued values differ" in out
    assert "eigen_simple: 1.2e-15 -> 1.4e-15" in out
    assert "1 of 4 glued numbers differ" in out
    # negative control: identical builds fail --require-change
    assert script.main([str(a), str(a), "--require-change"]) == 1
    assert "changed no glued number" in capsys.readouterr().out


def test_an_empty_log_is_an_error(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(SystemExit):
        _script().main([])
    assert _script().main([str(tmp_path / "a"), str(tmp_path / "a")]) == 1
