"""The built wheel, installed with no extras into a clean virtual environment (no system site
packages): it brings only torch (installed first, as a user does) and numpy, the README's
"Use the library" section runs there, and the command line says what it cannot do without an
extra. Slow (a torch install): left out of the default run; ``pytest -m slow`` runs it, and CI
does, on the wheel ``python -m build`` made (``GAUGEKIT_WHEEL``) or on one built here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from readme_blocks import script, section_blocks, skip_reason

import gaugekit

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

#: what the wheel may add to an environment that holds torch already
ALLOWED_NEW = {"gaugekit", "numpy"}

_DISTRIBUTIONS = (
    "import json, importlib.metadata as m; "
    "print(json.dumps(sorted({d.metadata['Name'].lower().replace('_', '-') "
    "for d in m.distributions()})))"
)
_FOOTPRINT = (
    "import json, sys, importlib.metadata as m\n"
    "names = set(json.loads(sys.argv[1]))\n"
    "size = sum(d.locate_file(f).stat().st_size for d in m.distributions()\n"
    "           if d.metadata['Name'].lower() in names for f in d.files or []\n"
    "           if d.locate_file(f).is_file())\n"
    "print(size)\n"
)


def _torch_requirement() -> str:
    """The torch requirement dev.py installs (``GAUGEKIT_TORCH``, else its pinned default)."""
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return os.environ.get("GAUGEKIT_TORCH", dev.DEFAULT_TORCH)


def _env() -> dict[str, str]:
    """The environment of the commands run in the clean venv: nothing pointing at the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GAUGEKIT_"))}
    env.pop("VIRTUAL_ENV", None)
    return env


def _run(cmd: list[str | Path], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=1200)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``$GAUGEKIT_WHEEL`` when set (CI: the one ``python -m build`` made), else one built
    here the same way: the sdist, then the wheel from the unpacked sdist (so it also shows that
    the sdist is complete, and no stale ``build/`` folder of the checkout gets in)."""
    given = os.environ.get("GAUGEKIT_WHEEL")
    if given:
        return Path(given).resolve()
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], out)
    (found,) = out.glob("gaugekit-*.whl")
    return found


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory, wheel) -> dict:
    """A new venv: torch installed first, then the wheel with its declared dependencies.
    Returns its python, its folder, a work folder outside the checkout, and the distribution
    sets before and after the wheel."""
    where = tmp_path_factory.mktemp("clean")
    venv, work = where / "venv", where / "work"
    work.mkdir()
    _run([sys.executable, "-m", "venv", venv], where)
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "--quiet", _torch_requirement()], work)
    before = set(json.loads(_run([python, "-c", _DISTRIBUTIONS], work).stdout))
    _run([python, "-m", "pip", "install", "--quiet", wheel], work)
    after = set(json.loads(_run([python, "-c", _DISTRIBUTIONS], work).stdout))
    return {"python": python, "venv": venv, "work": work, "before": before, "after": after}


def test_the_wheel_holds_the_package_its_types_and_its_license(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "gaugekit/py.typed" in names and "gaugekit/optim/__init__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # the library alone: not the book's machinery, its pages, records or tests
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "gaugekit"}
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert f"Version: {gaugekit.__version__}\n" in text and "License-Expression: MIT\n" in text
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert core == ["Requires-Dist: torch>=2.3", "Requires-Dist: numpy>=1.26"]


def test_the_sdist_holds_the_package_and_its_metadata_only(wheel):
    sdists = list(wheel.parent.glob("gaugekit-*.tar.gz"))
    if not sdists:
        pytest.skip(f"no sdist beside {wheel}")
    names = {n.split("/", 1)[-1] for n in tarfile.open(sdists[0]).getnames()}
    assert {"LICENSE", "CITATION.cff", "README.md", "pyproject.toml", "gaugekit/py.typed",
            "gaugekit/__init__.py"} <= names
    assert not [n for n in names
                if n.split("/")[0] in ("tests", "chapters", "results", "book", "gaugebook")]


def test_the_wheel_adds_only_gaugekit_and_numpy(clean_venv):
    added = clean_venv["after"] - clean_venv["before"]
    assert "torch" in clean_venv["before"]
    assert added <= ALLOWED_NEW and "gaugekit" in added, sorted(added)
    assert clean_venv["before"] <= clean_venv["after"]  # nothing replaced or removed
    size = int(_run([clean_venv["python"], "-c", _FOOTPRINT, json.dumps(sorted(added))],
                    clean_venv["work"]).stdout)
    print(f"\nthe wheel added {len(added)} distributions ({', '.join(sorted(added))}), "
          f"{size / 1e6:.0f} MB on disk")


def test_the_installed_package_is_the_wheel(clean_venv):
    where = _run([clean_venv["python"], "-c",
                  "import gaugekit, importlib.metadata as m; "
                  "print(gaugekit.__file__); print(m.version('gaugekit'))"],
                 clean_venv["work"]).stdout.splitlines()
    assert Path(where[0]).is_relative_to(clean_venv["venv"])
    assert where[1] == gaugekit.__version__


@pytest.mark.parametrize("index", range(len(section_blocks())))
def test_the_readme_library_section_runs_from_the_wheel(clean_venv, index):
    block = section_blocks()[index]
    reason = skip_reason(block)
    if reason:
        pytest.skip(reason)
    if "from peft import" in block:  # the block of the peft extra: the clean venv has no peft
        has_peft = _run([clean_venv["python"], "-c", "import peft"], clean_venv["work"],
                        check=False).returncode == 0
        assert not has_peft, "the wheel pulled in peft"
        pytest.skip("needs the peft extra; the wheel's clean environment has torch and numpy")
    path = clean_venv["work"] / f"readme_block_{index}.py"
    path.write_text(script(block), encoding="utf-8")
    _run([clean_venv["python"], path], clean_venv["work"])


def test_the_installed_command_line(clean_venv):
    work, venv = clean_venv["work"], clean_venv["venv"]
    version = f"gaugekit {gaugekit.__version__}\n"
    assert _run([venv / "bin" / "gaugekit", "--version"], work).stdout == version
    assert _run([clean_venv["python"], "-m", "gaugekit", "--version"], work).stdout == version
    listed = _run([venv / "bin" / "gaugekit", "list"], work).stdout
    assert listed.startswith("optimizers:\n") and "scalar_adam" in listed
    audited = _run([venv / "bin" / "gaugekit", "audit", "adam", "lr=0.01", "--steps", "3"],
                   work).stdout
    assert "breaks the gauge" in audited.splitlines()[-1]
    for command in (["headline"], ["run", "matrix_sensing"]):  # the book's, not the library's
        done = _run([venv / "bin" / "gaugekit", *command], work, check=False)
        assert done.returncode == 2, (command, done.stderr)
        assert "invalid choice" in done.stderr and "Traceback" not in done.stderr
