"""Check that a change of shape changed nothing else: the book's numbers and quick records.

Two checks, each in two steps (``snapshot`` on the old code, ``snapshot`` on the new, then
``compare``):

* ``book``: every value the built book shows. It reads the executed notebooks of a
  ``python3 dev.py book`` build (``_build/jupyter_execute/chapters``): every text or HTML output
  of a code cell, and each ``glue``d value (kept beside the notebook in ``<page>.glue.json``).
  Figures are compared by count only (their PNG bytes carry matplotlib's metadata); a page's
  printed text is compared as one string (``nb_merge_streams`` joins it on the page anyway).
* ``html``: the same on the built pages (``_build/html/chapters``): the text a reader reads
  (prose with its glued values, outputs, tables and captions; not the code of the cells) and
  where each figure stands. This is what the page shows, whichever cell printed it.
* ``quick``: a re-run of parts of every factor experiment, of the attention ``single`` part and
  of the language model at quick scale, into a fresh records folder. ``compare`` then asks that the
  same runs exist with the same statuses and step counts, and that every number agrees to round-off
  (relative 1e-9, absolute 1e-12); records' code stamps and timings are not compared.

Usage::

    python bench/shape_check.py book snapshot _build/jupyter_execute/chapters before.json
    python bench/shape_check.py quick snapshot OUTDIR
    python bench/shape_check.py html snapshot _build/html/chapters before.json
    python bench/shape_check.py book compare before.json after.json [--ignore-module-paths]
                                [--rename OLD_PAGE=NEW_PAGE ...]
    python bench/shape_check.py quick compare OLD_OUTDIR NEW_OUTDIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: One part of every factor experiment (two where an experiment has two trainers), the
#: attention ``single`` part and the language model, at quick scale.
QUICK_PARTS: dict[str, list[str]] = {
    "matrix_sensing": ["zoo", "decay"],
    "dial": ["dial_rms", "flow_rows", "flow_ablation"],
    "spectral_tails": ["phase", "balancedness"],
    "hyperspectral": ["synthetic_low"],
    "ladder": ["n8"],
    "eigenbasis": ["sensing"],
    "attention": ["single"],
    "language_model": ["timing", "tuned"],
}

#: Record fields that say when, where and how fast a run was made, not what it computed.
_VOLATILE = {"code", "timing", "wall_s", "elapsed_s", "created", "host", "seconds", "time_s",
             "wall_time_s", "batch", "model_steps_per_s", "timed_wall_s", "ms_per_step"}


# ---------------------------------------------------------------- the book
def _outputs(nb: dict) -> list[str]:
    shown: list[str] = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if out.get("output_type") == "stream":
                shown.append("stream:" + "".join(out.get("text", "")))
            for mime in ("text/markdown", "text/html", "text/plain", "text/latex"):
                if mime in data:
                    text = data[mime]
                    text = "".join(text) if isinstance(text, list) else text
                    shown.append(f"{name or ''}|{mime}:{text}")
                    break
            if "image/png" in data:
                shown.append(f"{name or ''}|image/png")
    return shown


def book_snapshot(folder: Path, out: Path) -> None:
    snap = {}
    for path in sorted(folder.glob("*.ipynb")):
        shown = _outputs(json.loads(path.read_text()))
        glue = path.with_name(path.stem + ".glue.json")
        if glue.exists():  # myst-nb keeps the glued values beside the notebook
            for name, value in sorted(json.loads(glue.read_text()).items()):
                cell = {"outputs": [value]}
                shown += [f"glue {name}|{line}" for line in _outputs({"cells": [cell]})]
        snap[path.stem] = shown
    out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    print(f"{out}: {sum(map(len, snap.values()))} outputs on {len(snap)} pages")


def _page(shown: list[str]) -> list[str]:
    """A page's outputs with its printed text joined into one string: a print that moves from
    one cell to the next (or one output block split in two) shows the reader the same text."""
    streams = "".join(s[len("stream:"):] for s in shown if s.startswith("stream:"))
    return [s for s in shown if not s.startswith("stream:")] + ["printed:" + streams]


def book_compare(a: Path, b: Path, paths: bool = True, renames: list[str] = ()) -> int:
    old, new = _renamed(json.loads(a.read_text()), renames), json.loads(b.read_text())
    norm = (lambda x: x) if paths else _without_paths
    old = {k: [norm(s) for s in _page(v)] for k, v in old.items()}
    new = {k: [norm(s) for s in _page(v)] for k, v in new.items()}
    bad = 0
    for page in sorted(set(old) | set(new)):
        x, y = old.get(page), new.get(page)
        if x == y:
            continue
        bad += 1
        if x is None or y is None:
            print(f"{page}: only in {'after' if x is None else 'before'}")
            continue
        print(f"{page}: {len(x)} outputs before, {len(y)} after")
        for i, (p, q) in enumerate(zip(x, y, strict=False)):
            if p != q:
                print(f"  first difference at output {i}:")
                print(f"    before {p[:300]!r}\n    after  {q[:300]!r}")
                break
    total = sum(map(len, old.values()))
    print(f"book: {total} outputs on {len(old)} pages before; {bad} pages differ")
    return 1 if bad else 0


def _page_text(html: str) -> str:
    """What a reader reads on a built page: its article (prose with the glued values, cell
    outputs, tables, captions) without the code of the cells, whitespace normalized; each
    figure as ``[figure]``."""
    from bs4 import BeautifulSoup

    article = BeautifulSoup(html, "html.parser").select_one("article.bd-article")
    if article is None:
        return ""
    for tag in article.select(".cell_input, script, style"):
        tag.decompose()
    for img in article.find_all("img"):
        img.replace_with(" [figure] ")
    return " ".join(article.get_text(" ").split())


def html_snapshot(folder: Path, out: Path) -> None:
    snap = {p.stem: _page_text(p.read_text()) for p in sorted(folder.glob("*.html"))}
    out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    print(f"{out}: {sum(len(v.split()) for v in snap.values())} words on {len(snap)} pages")


def _without_paths(text: str) -> str:
    """``text`` with every module path (``gaugekit.x.y``, ``gaugebook.x.y``) written as
    ``‹module›`` and every ``python -m gaugekit`` / ``python -m gaugebook`` as ``python -m
    ‹package›``: a redesign that moves modules changes the paths and commands the prose names,
    not its numbers."""
    import re

    text = re.sub(r"python -m gauge(?:kit|book)\b", "python -m ‹package›", text)
    return re.sub(r"gauge(?:kit|book)(?:\.[A-Za-z_]\w*)+", "‹module›", text)


def _renamed(snap: dict[str, Any], renames: list[str]) -> dict[str, Any]:
    """``snap`` with its pages renamed by ``OLD=NEW`` items (a chapter file renamed)."""
    pairs = dict(item.split("=", 1) for item in renames)
    return {pairs.get(page, page): value for page, value in snap.items()}


def html_compare(a: Path, b: Path, paths: bool = True, renames: list[str] = ()) -> int:
    import difflib

    old, new = _renamed(json.loads(a.read_text()), renames), json.loads(b.read_text())
    if not paths:
        old = {k: _without_paths(v) for k, v in old.items()}
        new = {k: _without_paths(v) for k, v in new.items()}
    bad = 0
    for page in sorted(set(old) | set(new)):
        x, y = old.get(page, "").split(), new.get(page, "").split()
        if x == y:
            continue
        bad += 1
        print(f"{page}: {len(x)} words before, {len(y)} after")
        sm = difflib.SequenceMatcher(a=x, b=y, autojunk=False)
        for op, i1, i2, j1, j2 in [o for o in sm.get_opcodes() if o[0] != "equal"][:5]:
            print(f"  {op}: before {' '.join(x[max(i1 - 5, 0):i2 + 5])!r}")
            print(f"  {' ' * len(op)}  after  {' '.join(y[max(j1 - 5, 0):j2 + 5])!r}")
    what = "" if paths else " (module paths aside)"
    print(f"html: {len(old)} pages before; {bad} differ{what}")
    return 1 if bad else 0


# ---------------------------------------------------------------- quick records
def quick_snapshot(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GAUGEKIT_SCALE="quick")
    for experiment, parts in QUICK_PARTS.items():
        cmd = [sys.executable, "-m", "gaugebook", "run", experiment, "--scale", "quick",
               "--out", str(out / experiment), "--workers", "1", "--quiet"]
        for part in parts:
            cmd += ["--part", part]
        print("+", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True, env=env)


def _strip(rec: Any) -> Any:
    if isinstance(rec, dict):
        return {k: _strip(v) for k, v in rec.items() if k not in _VOLATILE}
    if isinstance(rec, list):
        return [_strip(v) for v in rec]
    return rec


def _close(x: Any, y: Any, where: str, diffs: list[str]) -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            diffs.append(f"{where}: keys {sorted(set(x) ^ set(y))}")
        for k in set(x) & set(y):
            _close(x[k], y[k], f"{where}.{k}", diffs)
    elif isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            diffs.append(f"{where}: length {len(x)} != {len(y)}")
        for i, (p, q) in enumerate(zip(x, y, strict=False)):
            _close(p, q, f"{where}[{i}]", diffs)
    elif isinstance(x, float) and isinstance(y, float):
        if math.isnan(x) and math.isnan(y):
            return
        if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
            diffs.append(f"{where}: {x!r} != {y!r}")
    elif x != y:
        diffs.append(f"{where}: {x!r} != {y!r}")


def _read(folder: Path) -> dict[tuple[str, str], dict]:
    runs = {}
    for path in sorted(folder.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                runs[(path.relative_to(folder).as_posix(), rec["run_id"])] = _strip(rec)
    return runs


def quick_compare(a: Path, b: Path) -> int:
    old, new = _read(a), _read(b)
    problems: list[str] = []
    for key in sorted(set(old) ^ set(new)):
        problems.append(f"{key}: only {'before' if key in old else 'after'}")
    exact = 0
    for key in sorted(set(old) & set(new)):
        x, y = old[key], new[key]
        if (x.get("status"), x.get("metrics", {}).get("steps")) != (
                y.get("status"), y.get("metrics", {}).get("steps")):
            before = f"{x.get('status')}/{x.get('metrics', {}).get('steps')}"
            after = f"{y.get('status')}/{y.get('metrics', {}).get('steps')}"
            problems.append(f"{key}: status/steps {before} -> {after}")
        diffs: list[str] = []
        _close(x, y, "", diffs)
        problems += [f"{key}{d}" for d in diffs[:3]]
        exact += x == y
    print(f"quick: {len(old)} runs before, {len(new)} after; {exact} identical to the bit; "
          f"{len(problems)} problems")
    for p in problems[:40]:
        print("  " + p)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["book", "html", "quick"])
    ap.add_argument("action", choices=["snapshot", "compare"])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--ignore-module-paths", action="store_true",
                    help="book and html compare: write every module path and `python -m` "
                    "package as a placeholder first")
    ap.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                    help="book and html compare: the page OLD of the first snapshot is NEW")
    args = ap.parse_args(argv)
    if args.what == "html":
        if args.action == "snapshot":
            html_snapshot(args.paths[0], args.paths[1])
            return 0
        return html_compare(*args.paths[:2], paths=not args.ignore_module_paths,
                            renames=args.rename)
    if args.what == "book":
        if args.action == "snapshot":
            book_snapshot(args.paths[0], args.paths[1])
            return 0
        return book_compare(*args.paths[:2], paths=not args.ignore_module_paths,
                            renames=args.rename)
    if args.action == "snapshot":
        quick_snapshot(args.paths[0])
        return 0
    return quick_compare(*args.paths[:2])


if __name__ == "__main__":
    raise SystemExit(main())
