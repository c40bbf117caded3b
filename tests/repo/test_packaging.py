"""The conda environment mirrors pyproject.toml, and the package metadata is coherent: a core
of torch and numpy, the extras, one version, the license and the citation."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _name(req: str) -> str:
    """The normalized distribution name of a requirement (extras and version left out)."""
    return re.sub(r"[-_.]+", "-", re.match(r"^\s*([A-Za-z0-9_.\-]+)", req).group(1)).lower()


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
    # an extra that pulls another one (gaugekit[experiments]) is no package of its own
    return {_normalize(r) for r in reqs if _name(r) != "gaugekit"}


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


def test_the_core_needs_torch_and_numpy_only():
    assert {_name(r) for r in _pyproject()["project"]["dependencies"]} == {"torch", "numpy"}


def test_the_book_and_the_tests_pull_the_experiments():
    extras = _pyproject()["project"]["optional-dependencies"]
    for name in ("book", "test"):
        assert "gaugekit[experiments]" in extras[name], name


def test_extras_registry_matches_pyproject():
    from gaugekit._extras import EXTRAS

    extras = _pyproject()["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    # the experiments' modules are named like their distributions
    assert set(EXTRAS["experiments"]) == {_name(r) for r in extras["experiments"]}
    assert len(EXTRAS["cluster"]) == len(extras["cluster"])
    assert len(EXTRAS["ecosystem"]) == len(extras["ecosystem"])


def test_dev_py_installs_existing_extras():
    text = (ROOT / "dev.py").read_text()
    installed = re.search(r'^EXTRAS = "([^"]+)"$', text, flags=re.MULTILINE).group(1).split(",")
    assert set(installed) <= set(_pyproject()["project"]["optional-dependencies"])
    assert {"experiments", "book", "test", "dev"} <= set(installed)


def test_version_is_written_once():
    import gaugekit

    pyproject = _pyproject()
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "gaugekit.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", gaugekit.__version__)


def test_license_is_an_spdx_expression_with_its_file():
    project = _pyproject()["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 gaugebook contributors" in text
    requires = _pyproject()["build-system"]["requires"]
    assert any(_normalize(r) == "setuptools>=77" for r in requires)  # SPDX license needs it


def test_py_typed_ships_as_package_data():
    assert (ROOT / "gaugekit" / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["gaugekit"]


def test_citation_cites_the_software_and_the_paper():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["license"] == "MIT" and "version" not in cff  # the version lives in gaugekit
    paper = next(r for r in cff["references"] if r["type"] == "article")
    assert paper["title"] == "The Loss Does Not See the Basis, but Adam Does"
    assert {"type": "other", "value": "arXiv:2608.05136",
            "description": "arXiv preprint"} in paper["identifiers"]
    assert paper["repository-code"] == "https://github.com/idevender/loss-basis-adam"
    assert paper["authors"] == [{"family-names": "Singh", "given-names": "Devender"}]
