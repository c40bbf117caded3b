"""The book's command line, ``python -m gaugebook``: list, run (resumable), report; exit codes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest

from gaugebook import commands
from gaugebook.engine.records import read_records_dir
from gaugebook.engine.spec import RunResult, RunSpec


class TinyZoo:
    """Two 'optimizers' × two lrs × two seeds; rec = lr · seed for gd, 2 · lr · seed for adam."""

    name = "tinyzoo"
    description = "a toy"

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("main",)

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return [
            RunSpec(self.name, part, {"method": m, "hparams": {"lr": lr}, "seed": s})
            for m in ("gd", "adam") for lr in (0.1, 0.2) for s in (1, 2)
        ]

    def batch_key(self, spec: RunSpec):
        return 0

    def run_batch(self, specs: Sequence[RunSpec], *, device, progress) -> list[RunResult]:
        out = []
        for spec in specs:
            c = spec.config
            factor = 1.0 if c["method"] == "gd" else 2.0
            rec = factor * c["hparams"]["lr"] * c["seed"]
            out.append(RunResult("ok", {"rec": rec, "val_rec": rec, "steps": 10,
                                        "train_loss": 0.0, "interpolated": True}))
        return out


@pytest.fixture
def tiny(monkeypatch):
    from gaugebook import experiments

    toy = TinyZoo()
    monkeypatch.setattr(experiments, "get_experiment",
                        lambda name: toy if name == "tinyzoo" else experiments.EXPERIMENTS[name])
    return toy


def test_list_prints_the_experiments_and_their_parts(capsys):
    assert commands.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "matrix_sensing" in out and "parts zoo, cosine_all" in out
    assert "language_model" in out and "optimizers:" not in out  # those are the library's


def test_bad_arguments_return_2(capsys):
    assert commands.main([]) == 2
    assert commands.main(["run", "no_such_experiment"]) == 2
    assert "Invalid experiment" in capsys.readouterr().err
    assert commands.main(["run", "matrix_sensing", "--scale", "huge"]) == 2


def test_run_resumes_and_report_selects(tiny, tmp_path, capsys):
    out = tmp_path / "records"
    assert commands.main(["run", "tinyzoo", "--out", str(out), "--quiet"]) == 0
    assert len(read_records_dir(out)) == 8
    assert "8 ran" in capsys.readouterr().out
    assert commands.main(["run", "tinyzoo", "--out", str(out), "--quiet"]) == 0
    assert "0 ran" in capsys.readouterr().out
    assert len(read_records_dir(out)) == 8  # resumed: nothing duplicated
    assert commands.main(["run", "tinyzoo", "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert len(read_records_dir(out)) == 8
    capsys.readouterr()
    assert commands.main(["report", "tinyzoo", "--out", str(out)]) == 0
    report = capsys.readouterr().out
    lines = [line.split() for line in report.splitlines()[2:]]
    chosen = {row[0]: float(row[1]) for row in lines}
    assert chosen == {"gd": 0.1, "adam": 0.1}
    assert commands.main(["report", "tinyzoo", "--out", str(tmp_path / "empty")]) == 1
    assert commands.main(["report", "tinyzoo", "--out", str(out), "--protocol", "magic"]) == 2


def test_module_entry_point_returns_an_exit_code():
    done = subprocess.run([sys.executable, "-m", "gaugebook", "list"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "matrix_sensing" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "gaugebook", "frobnicate"], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2
    # the library's command line knows only its audit
    lib = subprocess.run([sys.executable, "-m", "gaugekit", "run", "matrix_sensing"],
                         capture_output=True, text=True, timeout=120)
    assert lib.returncode == 2 and "invalid choice: 'run'" in lib.stderr
