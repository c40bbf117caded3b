"""The library's command line, ``gaugekit``: its version, the registry, and the audit of any
optimizer class (``gaugekit audit CLASS KEY=VALUE ...``); exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gaugekit
from gaugekit import cli


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"gaugekit {gaugekit.__version__}\n"
    done = subprocess.run([sys.executable, "-m", "gaugekit", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"gaugekit {gaugekit.__version__}\n")


def test_list_prints_the_registry_with_its_verdicts(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("optimizers:\n")
    assert "adam" in out and "coordinate-wise" in out and "equivariant" in out
    assert cli.main([]) == 2


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
