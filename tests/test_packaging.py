"""The conda environment mirrors pyproject.toml, and the package metadata is coherent."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _normalize(req: str) -> str:
    name, spec = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req).groups()
    return re.sub(r"[-_.]+", "-", name).lower() + spec.replace(" ", "")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pyproject_requirements() -> set[str]:
    project = _pyproject()["project"]
    reqs = set(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs.update(extra)
    return {_normalize(r) for r in reqs}


def _environment_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_normalize(r) for r in pip_section if not r.startswith("-e")}


def test_environment_yml_mirrors_pyproject():
    in_pyproject, in_env = _pyproject_requirements(), _environment_requirements()
    assert in_pyproject - in_env == set(), "in pyproject.toml but not environment.yml"
    assert in_env - in_pyproject == set(), "in environment.yml but not pyproject.toml"


def test_environment_yml_pins_the_same_python_as_ci():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]


def test_jupyter_book_stays_on_1x():
    book = _pyproject()["project"]["optional-dependencies"]["book"]
    assert any(_normalize(r) == "jupyter-book>=1.0.4,<2" for r in book)


def test_version_matches_package():
    import gaugekit

    assert _pyproject()["project"]["version"] == gaugekit.__version__
