"""The lean core: with every optional dependency absent, the core imports and works, and each
part that needs an extra says which one (gaugekit._extras)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gaugekit
from gaugekit._extras import EXTRAS, MissingExtra, require_extra

ROOT = Path(__file__).resolve().parents[1]

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


def test_core_imports_and_trains_without_any_extra():
    done = _without_extras("""
        import torch
        import gaugekit
        from gaugekit import audit, gauge, linalg, optim, twins
        import gaugekit.problems.matrix_sensing

        U = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
        V = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
        opt = optim.FlowAdam([U, V])                     # the default flow: no torchdiffeq
        for _ in range(3):
            opt.zero_grad()
            (U @ V.T).pow(2).sum().backward()
            opt.step()
        result = audit.audit_equivariance(lambda p: optim.SharedScaleAdam(p, lr=1e-2))
        print(result.verdict, audit.audit_twins.__name__, twins.audit_twins is audit.audit_twins)
        print(sorted(m for m in sys.modules if m.startswith(("gaugekit.experiments",
                                                             "gaugekit.report"))))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["equivariant audit_twins True", "[]"]


def test_every_module_but_the_experiments_and_figures_imports_without_extras():
    done = _without_extras("""
        import importlib, pkgutil
        import gaugekit

        needs_extra = ("gaugekit.experiments", "gaugekit.report", "gaugekit.__main__")
        names = [m.name for m in pkgutil.walk_packages(gaugekit.__path__, "gaugekit.")
                 if not m.name.startswith(needs_extra)]
        for name in names:
            importlib.import_module(name)
        print(len(names), "gaugekit.cli" in names, "gaugekit.problems.attention" in names)
    """)
    assert done.returncode == 0, done.stderr
    count, cli, problems = done.stdout.split()
    assert int(count) > 30 and cli == problems == "True"


@pytest.mark.parametrize("statement, part", [
    ("import gaugekit.experiments", "gaugekit.experiments"),
    ("import gaugekit.report.viz", "gaugekit.report.viz"),
    ("gaugekit.optim.FlowAdam([torch.zeros(2, 2, requires_grad=True)], flow_method='rk4')",
     "FlowAdam(flow_method='rk4')"),
    ("from gaugekit.problems.matrix_sensing import min_nuclear_norm_solution as f; f(None)",
     "min_nuclear_norm_solution"),
    ("from gaugekit.data.scenes import load_mat_scene; load_mat_scene('x.mat', 'k')",
     "load_mat_scene"),
])
def test_a_part_without_its_extra_names_it(statement, part):
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
    assert done.stdout.startswith(f"{part} needs the 'experiments' extra (missing: ")
    assert "pip install 'gaugekit[experiments]'" in done.stdout


def test_the_command_line_without_extras_says_what_to_install():
    done = _without_extras("""
        from gaugekit.cli import main
        print("version", main(["--version"]))
        print("list", main(["list"]))
    """)
    assert done.stdout.splitlines() == [f"gaugekit {gaugekit.__version__}", "version 0", "list 2"]
    assert "gaugekit.experiments needs the 'experiments' extra" in done.stderr
    assert "Traceback" not in done.stderr


def test_require_extra_names_the_missing_module_and_the_extra():
    with pytest.raises(MissingExtra, match=r"^the thing needs the 'cluster' extra \(missing: "
                       r"no_such_module_1, no_such_module_2\): pip install 'gaugekit\[cluster\]'"):
        require_extra("the thing", "cluster", "no_such_module_1", "torch", "no_such_module_2")
    with pytest.raises(ImportError, match="; only a note$"):
        require_extra("x", "experiments", "no_such_module_3", note="only a note")
    with pytest.raises(ValueError, match="Invalid extra: 'nope'"):
        require_extra("x", "nope")
    assert require_extra("torch itself", "experiments", "torch") is None
