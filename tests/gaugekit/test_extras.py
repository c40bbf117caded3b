"""The lean library: with every optional dependency absent, every module of gaugekit imports and
works without loading the book, and each part that needs an extra says which one
(gaugekit._extras)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gaugekit
from gaugekit._extras import EXTRAS, LIBRARY_EXTRAS, MissingExtra, require_extra

ROOT = Path(__file__).resolve().parents[2]

#: modules absent in the child process: every extra's, and what the book and tests add
ABSENT = sorted({m for mods in EXTRAS.values() for m in mods}
                | {"dask", "pandas", "bs4", "yaml", "hypothesis", "jupytext", "IPython"})


def _without_extras(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (this checkout's gaugekit first on the path) where
    the :data:`ABSENT` modules cannot be imported, as in ``pip install gaugekit``."""
    prelude = f"import sys\nfor name in {ABSENT!r}:\n    sys.modules[name] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=ROOT, capture_output=True,
        text=True, timeout=300,
    )


def test_the_library_imports_and_trains_without_any_extra_and_never_loads_the_book():
    done = _without_extras("""
        import importlib, pkgutil
        import torch
        import gaugekit
        from gaugekit import audit, optim

        names = [m.name for m in pkgutil.walk_packages(gaugekit.__path__, "gaugekit.")
                 if m.name != "gaugekit.__main__"]
        for name in names:
            importlib.import_module(name)
        U = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
        V = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
        opt = optim.FlowAdam([U, V])                     # the default flow: no torchdiffeq
        for _ in range(3):
            opt.zero_grad()
            (U @ V.T).pow(2).sum().backward()
            opt.step()
        result = audit.audit_equivariance(lambda p: optim.SharedScaleAdam(p, lr=1e-2))
        print(result.verdict, len(names), "gaugekit.cli" in names)
        print(sorted(m for m in sys.modules if m.startswith("gaugebook")))
    """)
    assert done.returncode == 0, done.stderr
    verdict, count, cli = done.stdout.splitlines()[0].split()
    assert (verdict, cli) == ("equivariant", "True") and int(count) > 25
    assert done.stdout.splitlines()[1] == "[]"


@pytest.mark.parametrize("statement, part, extra, install", [
    ("import gaugebook", "gaugebook", "experiments", "pip install -e '.[experiments]'"),
    ("gaugekit.optim.FlowAdam([torch.zeros(2, 2, requires_grad=True)], flow_method='rk4')",
     "FlowAdam(flow_method='rk4')", "flow", "pip install 'gaugekit[flow]'"),
    ("gaugekit.optim.FlowAdam([torch.zeros(2, 2, requires_grad=True)], flow_method='dopri5')",
     "FlowAdam(flow_method='dopri5')", "flow", "pip install 'gaugekit[flow]'"),
])
def test_a_part_without_its_extra_names_it(statement, part, extra, install):
    done = _without_extras(f"""
        import torch
        import gaugekit
        from gaugekit._extras import MissingExtra
        try:
            {statement}
        except MissingExtra as err:
            print(err)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{part} needs the {extra!r} extra (missing: ")
    assert install in done.stdout


def test_flow_adams_ode_option_asks_for_the_flow_extra_alone():
    """torchdiffeq is the one module FlowAdam's multi-stage flow needs: the error names the
    library's ``flow`` extra and that module, never the book's ``experiments`` extra (cvxpy,
    matplotlib, ...), from Python and from the command line."""
    assert EXTRAS["flow"] == ("torchdiffeq",) and "flow" in LIBRARY_EXTRAS
    done = _without_extras("""
        import torch
        import gaugekit
        from gaugekit.cli import main
        try:
            gaugekit.optim.FlowAdam([torch.zeros(2, 2, requires_grad=True)],
                                    flow_method="dopri5")
        except ImportError as err:
            print(type(err).__name__, err.name, err.extra, err.missing)
            print(err)
        print("status", main(["audit", "flow_adam", "flow_method=dopri5"]))
    """)
    assert done.returncode == 0, done.stderr
    kind, message, status = done.stdout.splitlines()
    assert kind == "MissingExtra torchdiffeq flow ('torchdiffeq',)"
    assert message == ("FlowAdam(flow_method='dopri5') needs the 'flow' extra (missing: "
                       "torchdiffeq): pip install 'gaugekit[flow]'; flow_method='euler' needs "
                       "nothing")
    assert status == "status 2"
    assert done.stderr == f"gaugekit: error: {message}\n"
    # not the book's extra (that one names the checkout: the gaugebook case above)
    assert "experiments" not in done.stdout + done.stderr and "cvxpy" not in done.stdout


def test_the_command_line_needs_no_extra():
    done = _without_extras("""
        from gaugekit.cli import main
        print("version", main(["--version"]))
        print("list", main(["list"]))
    """)
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"gaugekit {gaugekit.__version__}", "version 0"]
    assert lines[-1] == "list 0" and "optimizers:" in lines
    assert done.stderr == ""


def test_require_extra_names_the_missing_module_and_the_extra():
    with pytest.raises(MissingExtra, match=r"^the thing needs the 'cluster' extra \(missing: "
                       r"no_such_module_1, no_such_module_2\): in a checkout of the book"):
        require_extra("the thing", "cluster", "no_such_module_1", "torch", "no_such_module_2")
    with pytest.raises(ImportError, match="; only a note$"):
        require_extra("x", "experiments", "no_such_module_3", note="only a note")
    with pytest.raises(ValueError, match="Invalid extra: 'nope'"):
        require_extra("x", "nope")
    assert require_extra("torch itself", "experiments", "torch") is None
