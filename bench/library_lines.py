"""How large the packages are: files and lines per folder, and what the lines are.

Usage::

    python bench/library_lines.py [REV ...]                      # gaugekit/, the library
    python bench/library_lines.py --package gaugebook [REV ...]  # the book's machinery

Each revision is a git revision (default: the working tree). Each line of a ``*.py`` file is
one of: ``blank`` (also inside a docstring), ``doc`` (in the docstring of a module, class or
function), ``comment`` (a line that starts with ``#``), or ``code`` (the rest). The folders are
the package's subpackages; ``top`` is the modules directly in the package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("code", "doc", "comment", "blank")


def line_kinds(source: str) -> Counter[str]:
    """How many lines of ``source`` are code, docstring, comment and blank."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                docs.update(range(first.lineno, first.end_lineno + 1))
    kinds: Counter[str] = Counter()
    for number, line in enumerate(source.splitlines(), start=1):
        text = line.strip()
        kinds["blank" if not text else "doc" if number in docs
              else "comment" if text.startswith("#") else "code"] += 1
    return kinds


def sources(rev: str | None, package: str = "gaugekit") -> dict[str, str]:
    """``path → text`` of the package's modules in ``rev`` (``None``: the working tree)."""
    if rev is None:
        return {p.relative_to(ROOT).as_posix(): p.read_text()
                for p in sorted((ROOT / package).rglob("*.py"))}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, f"{package}/"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
            for n in names if n.endswith(".py")}


def folder(path: str) -> str:
    """The subpackage a module is in, ``top`` for the package's own modules."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 else "top"


def main(argv: list[str]) -> None:
    package = "gaugekit"
    if argv[:1] == ["--package"]:
        package, argv = argv[1], argv[2:]
    for rev in argv or [None]:
        files: Counter[str] = Counter()
        lines: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        for path, text in sources(rev, package).items():
            files[folder(path)] += 1
            lines[folder(path)] += len(text.splitlines())
            kinds.update(line_kinds(text))
        print(f"{package}/ at {rev or 'working tree'}: {sum(files.values())} files, "
              f"{sum(lines.values()):,} lines ("
              + ", ".join(f"{kinds[k]:,} {k}" for k in KINDS) + ")")
        for name in sorted(files):
            print(f"  {name:<12} {files[name]:>3} files {lines[name]:>7,} lines")


if __name__ == "__main__":
    main(sys.argv[1:])
