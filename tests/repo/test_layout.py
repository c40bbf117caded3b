"""The repository's two packages keep their layout rules: no module file name twice across them,
no project module found by a string, the tests mirroring the packages, and chapter files named
in reading order. (That the library never imports the book, and that the book's engine and
presentation never import a chapter, is checked by ``lint-imports`` in CI.)"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gaugekit", "gaugebook")


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _twice(paths: list[Path]) -> dict[str, int]:
    names = Counter(p.name for p in paths if not (p.name.startswith("__")))
    return {name: n for name, n in names.items() if n > 1}


def test_no_module_file_name_twice_across_the_two_packages():
    assert _twice(_modules()) == {}


def test_the_file_name_check_sees_a_repeated_name():
    """Negative control: two ``views.py`` in two packages are found; ``__init__.py`` is not."""
    paths = [Path("gaugebook/a/views.py"), Path("gaugebook/b/views.py"),
             Path("gaugekit/__init__.py"), Path("gaugebook/__init__.py")]
    assert _twice(paths) == {"views.py": 2}


_PROJECT_MODULE = re.compile(r"^gauge(?:kit|book)(?:\.\w+)+(?::\w+)?$")


def _module_strings(source: str) -> list[str]:
    """String constants of ``source`` that name a project module (``"gaugebook.x.y"`` or
    ``"gaugebook.x:f"``), docstrings aside: a module found by a string the import contract
    cannot see."""
    tree = ast.parse(source)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and _PROJECT_MODULE.match(node.value)]


def test_no_project_module_is_found_by_a_string():
    found = {str(p.relative_to(ROOT)): s for p in _modules()
             if (s := _module_strings(p.read_text()))}
    assert found == {}


def test_the_module_string_check_sees_an_import_by_name():
    """Negative control: the registry's old ``"module:attribute"`` strings are found; a
    docstring naming a module is not."""
    source = ('"""See gaugebook.engine.sweep."""\n'
              'EXPERIMENTS = {"dial": "gaugebook.dial.dial_runs:EXPERIMENT"}\n')
    assert _module_strings(source) == ["gaugebook.dial.dial_runs:EXPERIMENT"]


def test_the_tests_mirror_the_packages():
    """Every test module sits under ``tests/gaugekit``, ``tests/gaugebook`` (in the folder of
    the subpackage it tests, where there is one) or ``tests/repo``."""
    tests = ROOT / "tests"
    homes = {"gaugekit", "gaugebook", "repo"}
    stray = [str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
             if p.relative_to(tests).parts[0] not in homes]
    assert stray == []
    for pkg in PACKAGES:
        for folder in (tests / pkg).rglob("*"):
            if folder.is_dir() and folder.name != "__pycache__":
                assert (ROOT / pkg / folder.relative_to(tests / pkg)).is_dir(), folder


def test_chapter_files_are_named_in_reading_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]
             if c["file"].startswith("chapters/")]
    numbers = [int(re.match(r"chapters/(\d+)_", f).group(1)) for f in files]
    assert numbers == list(range(1, len(files) + 1))
