"""Which numbers of the book another numerical environment moves, and by how much.

    python .ci/compare_live_numbers.py LOG_A LOG_B [--require-change]

LOG_A and LOG_B are the folders that two builds of the book wrote their glued values to
(``GAUGEBOOK_GLUE_LOG``, see ``gaugebook.present.tables.log_glued``): one file per page's
kernel. Pages are matched by the names they glue and named by the source file that uses most of
those names. Prints every glued number that differs between the builds (absolute and relative
change) and every text that differs; with ``--require-change`` exits 1 when no number moved,
so that CI knows its second environment really changed the arithmetic.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def read_log(folder: Path) -> list[dict[str, dict]]:
    """One dict per page kernel: name → its last logged entry, in glue order."""
    pages = []
    for path in sorted(folder.glob("glue-*.jsonl")):
        entries: dict[str, dict] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                entries[entry["name"]] = entry
        if entries:
            pages.append(entries)
    return pages


def page_name(names: set[str]) -> str:
    """The source page whose text names the most of ``names`` (a kernel does not know its
    page; its glued names do)."""
    best, hits = "?", 0
    for src in sorted([*ROOT.glob("chapters/*.md"), *ROOT.glob("book/*.md")]):
        text = src.read_text(encoding="utf-8")
        used = set(re.findall(r"`([A-Za-z0-9_\-.]+)(?::[^`]*)?`", text))
        used |= set(re.findall(r"\{glue(?::\w+)?\}\s+([A-Za-z0-9_\-.]+)", text))
        n = len(names & used)
        if n > hits:
            best, hits = str(src.relative_to(ROOT)), n
    return best


def match(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of pages of the two builds, by the overlap of their glued names."""
    pairs, free = [], list(b)
    for page in a:
        if not free:
            break
        other = max(free, key=lambda p: len(page.keys() & p.keys()) / len(page.keys() | p.keys()))
        if page.keys() & other.keys():
            pairs.append((page, other))
            free.remove(other)
    return pairs


def differences(a: dict, b: dict) -> list[tuple[str, str, float | None]]:
    """``(name, description, relative change)`` for every value that differs."""
    out = []
    for name in a.keys() & b.keys():
        x, y = a[name], b[name]
        if x == y:
            continue
        if "number" in x and "number" in y:
            u, v = float(x["number"]), float(y["number"])
            if u == v or (math.isnan(u) and math.isnan(v)):
                continue
            rel = abs(u - v) / max(abs(u), abs(v)) if math.isfinite(u - v) else math.inf
            out.append((name, f"{x['number']} -> {y['number']} (abs {abs(u - v):.1e}, "
                              f"rel {rel:.1e})", rel))
        else:
            show = {k: v for k, v in x.items() if k != "name"}
            other = {k: v for k, v in y.items() if k != "name"}
            out.append((name, f"{show} -> {other}", None))
    return sorted(out, key=lambda d: (d[2] is None, -(d[2] or 0.0), d[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log_a", type=Path)
    parser.add_argument("log_b", type=Path)
    parser.add_argument("--require-change", action="store_true",
                        help="exit 1 when no glued number differs between the two builds")
    args = parser.parse_args(argv)
    a, b = read_log(args.log_a), read_log(args.log_b)
    if not a or not b:
        print(f"no glue log in {args.log_a if not a else args.log_b}")
        return 1
    moved_numbers, total = 0, 0
    for page_a, page_b in match(a, b):
        total += sum("number" in e for e in page_a.values())
        diffs = differences(page_a, page_b)
        if not diffs:
            continue
        print(f"{page_name(set(page_a))}: {len(diffs)} of {len(page_a)} glued values differ")
        for name, text, rel in diffs:
            moved_numbers += rel is not None
            print(f"  {name}: {text}")
    print(f"{moved_numbers} of {total} glued numbers differ between the two builds "
          f"({len(a)} and {len(b)} pages)")
    if args.require_change and moved_numbers == 0:
        print("the second environment changed no glued number: it does not test round-off")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
