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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["torch.optim.AdamW", "lr=abc"],
         "Invalid lr: 'abc'; expected a number (the default is 0.001)"),
        (["torch.optim.AdamW", "lr=None"], "Invalid lr: 'None'; expected a number"),
        (["torch.optim.AdamW", "betas=(0.9,)"],
         "Invalid betas: '(0.9,)'; expected a tuple of 2 numbers (the default is (0.9, 0.999))"),
        (["torch.optim.AdamW", "betas=(0.9,x)"], "Invalid betas: '(0.9,x)'; expected a tuple"),
        (["torch.optim.AdamW", "amsgrad=1"],
         "Invalid amsgrad: '1'; expected a bool (True or False) (the default is False)"),
        (["torch.optim.AdamW", "foreach=yes"],
         "Invalid foreach: 'yes'; expected a bool (True or False) or None (the default is None)"),
        (["torch.optim.Muon", "ns_steps=5.0"],
         "Invalid ns_steps: '5.0'; expected an integer (the default is 5)"),
        (["gaugekit.optim.SGD", "lr=abc"], "gaugekit.optim has no SGD"),
        (["adam", "lr=1e-3x"], "Invalid lr: '1e-3x'; expected a number (the default is 0.001)"),
        (["SharedScaleAdam", "eps=[1]"], "Invalid eps: '[1]'; expected a number"),
        (["flow_adam", "flow_method=5"],
         "Invalid flow_method: '5'; expected a string (the default is 'euler')"),
        (["eigen_adam", "update_freq=ten"],
         "Invalid update_freq: 'ten'; expected an integer or None (the default is 10)"),
    ],
)
def test_audit_bad_value_names_key_value_and_type_exit_2(capsys, argv, message):
    assert cli.main(["audit", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("gaugekit: error: ") and message in captured.err


def test_a_bad_value_from_the_shell_exits_2_with_one_line_on_stderr():
    done = subprocess.run([sys.executable, "-m", "gaugekit", "audit", "torch.optim.AdamW",
                           "lr=abc"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("gaugekit: error: Invalid lr: 'abc'; expected a number (the default "
                           "is 0.001)\n")


def test_values_of_the_right_type_pass_as_typed():
    import torch

    from gaugekit.optim import EigenAdam, FlowAdam

    assert cli.parse_hyperparameters(
        ["lr=1", "betas=[0.9, 0.95]", "foreach=None", "amsgrad=False"], torch.optim.AdamW
    ) == {"lr": 1, "betas": (0.9, 0.95), "foreach": None, "amsgrad": False}
    assert cli.parse_hyperparameters(["adjust_lr_fn=match_rms_adamw"], torch.optim.Muon) == {
        "adjust_lr_fn": "match_rms_adamw"}  # a bare word where the argument takes a string
    assert cli.parse_hyperparameters(["flow_method=dopri5", "flow_warmup=3"], FlowAdam) == {
        "flow_method": "dopri5", "flow_warmup": 3}
    assert cli.parse_hyperparameters(["update_freq=None", "side='left'"], EigenAdam) == {
        "update_freq": None, "side": "left"}
    # a keyword the class does not take is left to the class (its TypeError, a usage error)
    assert cli.parse_hyperparameters(["foo=bar"], torch.optim.AdamW) == {"foo": "bar"}


def test_audit_takes_class_names_and_aliases(capsys):
    assert cli.main(["audit", "SharedScaleAdam", "lr=0.01", "--steps", "3"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "gaugekit.optim.SharedScaleAdam(lr=0.01," in last
    assert ": keeps the gauge: " in last
    assert cli.main(["audit", "adamw", "--steps", "3"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "weight_decay=0.01, decoupled_weight_decay=True" in last
    assert ": breaks the gauge: " in last


@pytest.mark.parametrize(("flag", "passed"), [([], None), (["--create-graph"], True),
                                              (["--no-create-graph"], False)])
def test_audit_passes_create_graph_through(monkeypatch, capsys, flag, passed):
    from gaugekit.audit import factors

    seen = []
    original = factors.audit_equivariance

    def spy(*args, **kwargs):
        seen.append(kwargs["create_graph"])
        return original(*args, **kwargs)

    monkeypatch.setattr(factors, "audit_equivariance", spy)
    assert cli.main(["audit", "torch.optim.SGD", "lr=0.01", "--steps", "2", *flag]) == 0
    assert seen == [passed] and ": keeps the gauge: " in capsys.readouterr().out


def test_list_shows_the_aliases(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "  adamw        Adam(decoupled_weight_decay=True, weight_decay=0.01)\n" in out


def test_parse_hyperparameters_reads_literals_and_keeps_strings():
    parsed = cli.parse_hyperparameters(["lr=1e-3", "betas=(0.9,0.95)", "nesterov=True",
                                        "eps=None", "mode=fast", "name='x=y'"])
    assert parsed == {"lr": 1e-3, "betas": (0.9, 0.95), "nesterov": True, "eps": None,
                      "mode": "fast", "name": "x=y"}
    assert cli.parse_hyperparameters([]) == {}
