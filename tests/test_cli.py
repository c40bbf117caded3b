"""The command line: list, run (resumable), report; exit codes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest

from gaugekit import cli
from gaugekit.runs.records import read_records_dir
from gaugekit.runs.spec import RunResult, RunSpec


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
    from gaugekit import experiments

    toy = TinyZoo()
    monkeypatch.setattr(experiments, "get_experiment",
                        lambda name: toy if name == "tinyzoo" else experiments.EXPERIMENTS[name])
    return toy


def test_list_prints_experiments_and_optimizers(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "matrix_sensing" in out and "zoo" in out
    assert "adam" in out and "coordinate-wise" in out and "equivariant" in out


def test_bad_arguments_return_2(capsys):
    assert cli.main([]) == 2
    assert cli.main(["run", "no_such_experiment"]) == 2
    assert "Invalid experiment" in capsys.readouterr().err
    assert cli.main(["run", "matrix_sensing", "--scale", "huge"]) == 2


def test_run_resumes_and_report_selects(tiny, tmp_path, capsys):
    out = tmp_path / "records"
    assert cli.main(["run", "tinyzoo", "--out", str(out), "--quiet"]) == 0
    assert len(read_records_dir(out)) == 8
    assert "8 ran" in capsys.readouterr().out
    assert cli.main(["run", "tinyzoo", "--out", str(out), "--quiet"]) == 0
    assert "0 ran" in capsys.readouterr().out
    assert len(read_records_dir(out)) == 8  # resumed: nothing duplicated
    assert cli.main(["run", "tinyzoo", "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert len(read_records_dir(out)) == 8
    capsys.readouterr()
    assert cli.main(["report", "tinyzoo", "--out", str(out)]) == 0
    report = capsys.readouterr().out
    lines = [line.split() for line in report.splitlines()[2:]]
    chosen = {row[0]: float(row[1]) for row in lines}
    assert chosen == {"gd": 0.1, "adam": 0.1}
    assert cli.main(["report", "tinyzoo", "--out", str(tmp_path / "empty")]) == 1
    assert cli.main(["report", "tinyzoo", "--out", str(out), "--protocol", "magic"]) == 2


def test_module_entry_point_returns_an_exit_code():
    done = subprocess.run([sys.executable, "-m", "gaugekit", "list"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "matrix_sensing" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "gaugekit", "frobnicate"], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2


# --------------------------------------------------------------------------------------------
# audit CLASS [KEY=VALUE ...]
# --------------------------------------------------------------------------------------------


def test_audit_a_torch_class_prints_table_hyperparameters_and_verdict(capsys):
    assert cli.main(["audit", "torch.optim.AdamW", "lr=1e-3", "weight_decay=0.1",
                     "betas=(0.9, 0.95)"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("Equivariance audit of torch.optim.AdamW: 10 steps, float64")
    assert lines[3].split()[:2] == ["torch.optim.AdamW", "not"]  # the table row
    last = lines[-1]
    assert last.startswith("torch.optim.AdamW(lr=0.001, betas=(0.9, 0.95), eps=1e-08, "
                           "weight_decay=0.1")
    assert ": breaks the gauge: gauge twin " in last and "noise twin" in last


def test_audit_an_equivariant_class_and_a_registry_name(capsys):
    assert cli.main(["audit", "gaugekit.optim.Muon", "lr=0.02", "--steps", "4"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("gaugekit.optim.Muon(lr=0.02,") and ": keeps the gauge: " in last
    assert cli.main(["audit", "adam", "lr=0.02", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    assert "threshold: 1e-03 (float32)" in out
    assert out.strip().splitlines()[-1].startswith("adam = gaugekit.optim.Adam(lr=0.02,")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["torch.optim.AdamX"], "Invalid optimizer: 'torch.optim.AdamX'; torch.optim has no AdamX"),
        (["nosuch.module.Opt"], "no module of this path can be imported"),
        (["torch.nn.Linear"], "is not a torch.optim.Optimizer subclass"),
        (["no_such_rule"], "Invalid name: 'no_such_rule'"),
        (["torch.optim.AdamW", "foo=1"], "unexpected keyword argument 'foo'"),
        (["torch.optim.AdamW", "lr"], "Invalid hyperparameter: 'lr'; expected KEY=VALUE"),
        (["torch.optim.AdamW", "1x=2"], "Invalid hyperparameter: '1x=2'"),
    ],
)
def test_audit_bad_class_or_key_is_one_line_and_exit_2(capsys, argv, message):
    assert cli.main(["audit", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gaugekit: error: ") and message in captured.err
    assert captured.err.count("\n") == 1


def test_parse_hyperparameters_reads_literals_and_keeps_strings():
    parsed = cli.parse_hyperparameters(["lr=1e-3", "betas=(0.9,0.95)", "nesterov=True",
                                        "eps=None", "mode=fast", "name='x=y'"])
    assert parsed == {"lr": 1e-3, "betas": (0.9, 0.95), "nesterov": True, "eps": None,
                      "mode": "fast", "name": "x=y"}
    assert cli.parse_hyperparameters([]) == {}
