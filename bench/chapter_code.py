"""How much of the chapters is code: lines inside ``{code-cell}`` blocks over all lines.

Usage::

    python bench/chapter_code.py [REV ...]    # each git revision (default: the working tree)

The chapters are MyST notebooks (``chapters/*.md``); a code cell runs from a line starting
```` ```{code-cell} ```` to the next line starting ```` ``` ````.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def code_lines(text: str) -> tuple[int, int]:
    """``(code lines, all lines)`` of one chapter."""
    inside, code, lines = False, 0, text.splitlines()
    for line in lines:
        if line.startswith("```{code-cell}"):
            inside = True
        elif inside and line.startswith("```"):
            inside = False
        elif inside:
            code += 1
    return code, len(lines)


def chapters(rev: str | None) -> dict[str, str]:
    if rev is None:
        return {p.name: p.read_text() for p in sorted((ROOT / "chapters").glob("*.md"))}
    names = subprocess.run(["git", "ls-tree", "--name-only", rev, "chapters/"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split()
    return {Path(n).name: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True,
                                         capture_output=True, text=True).stdout
            for n in names if n.endswith(".md")}


def main(argv: list[str]) -> None:
    for rev in argv or [None]:
        counts = [code_lines(text) for text in chapters(rev).values()]
        code, total = sum(c for c, _ in counts), sum(t for _, t in counts)
        print(f"{rev or 'working tree'}: {code:,} code lines of {total:,} ({code / total:.1%})")


if __name__ == "__main__":
    main(sys.argv[1:])
