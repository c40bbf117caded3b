"""Every module of gaugekit says its floor of the house, and says it truly.

The floors are the layers of the import-linter contract "floors of the house" in
``pyproject.toml`` (CI's ``lint-imports`` holds the imports to them); the plan in
``gaugekit/__init__.py`` numbers them 10 (the command line) down to 1 (the ground). Each module
carries a developer note ``# Developer note (layers, gaugekit/__init__.py): floor N, ...``
under its docstring; this test checks that every module has one and that ``N`` is the floor of
the layer the module belongs to.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gaugekit"
NOTE = re.compile(r"^# Developer note \(layers, gaugekit/__init__\.py\): floor (\d+)\b", re.M)


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (floors,) = [c for c in contracts if c["name"] == "floors of the house"]
    return [[name.strip() for name in layer.split("|")] for layer in floors["layers"]]


def floor_of(module: str, layers: list[list[str]]) -> int:
    """The floor of ``module``: 10 for the first two layers (``__main__`` and ``cli``), then
    one less per layer down to 1."""
    for index, layer in enumerate(layers):
        if any(module == name or module.startswith(name + ".") for name in layer):
            return min(10, len(layers) - index)
    raise LookupError(f"{module} is in no layer of the contract")


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts in {("gaugekit", "__init__"), ("gaugekit", "__main__")}:
            continue  # the plan itself, and the two-line entry point
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def test_the_layers_number_ten_floors() -> None:
    layers = _layers()
    assert floor_of("gaugekit.cli", layers) == 10
    assert floor_of("gaugekit.report.viz", layers) == 9
    assert floor_of("gaugekit.gauge", layers) == 1


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_every_module_says_its_true_floor(module: str, path: Path) -> None:
    notes = NOTE.findall(path.read_text(encoding="utf-8"))
    assert len(notes) == 1, f"{path.relative_to(ROOT)}: expected one floor note, found {notes}"
    assert int(notes[0]) == floor_of(module, _layers()), (
        f"{path.relative_to(ROOT)} says floor {notes[0]}; the contract puts it on floor "
        f"{floor_of(module, _layers())}")


def test_a_wrong_floor_is_caught(tmp_path: Path) -> None:
    # the negative control: a report module that claimed the ground floor would fail above
    text = "# Developer note (layers, gaugekit/__init__.py): floor 1, the ground.\n"
    assert int(NOTE.findall(text)[0]) != floor_of("gaugekit.report.viz", _layers())
