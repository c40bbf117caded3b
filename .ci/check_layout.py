#!/usr/bin/env python3
"""Check the layout of a built Jupyter Book as a reader's browser lays it out; exit 1 on a problem.

    python .ci/check_layout.py _build/html            (also: python3 dev.py layout)

Every page is opened in headless Chromium at a 1280 px wide window; a script measures, after the
page's styles have applied:

``table``   a table wider than the box it sits in (the text column, or the sideways-scrolling
            box a table helper put around it): its last columns are hidden from a reader
``code``    a code cell, an output or any ``pre`` block whose text runs past its box (a reader
            must scroll sideways to see it)

Each problem is printed as ``page: kind: width > box px: context``, then a count per kind. A
problem listed in ``.ci/layout_known.txt`` (one per line: ``page | kind | context prefix |
reason``) is printed as known with its reason and does not fail the check; the list says why
each is left. The check needs Chromium (Debian: ``apt-get install chromium``); the search and
index pages are skipped.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

SKIP_PAGES = {"search.html", "genindex.html", "py-modindex.html"}
WIDTH = 1280
MARK = "gaugekit-layout"

#: Runs at the end of the page body, after the stylesheets (which block scripts) are applied.
MEASURE = r"""
<script>
(function () {
  var out = [];
  function context(el) {
    var fig = el.closest("figure, .cell, .output, div.highlight, section");
    var cap = fig && fig.querySelector("figcaption, .caption-text");
    var text = (cap ? cap.textContent : el.textContent) || "";
    return text.replace(/\s+/g, " ").trim().slice(0, 70);
  }
  document.querySelectorAll("table").forEach(function (t) {
    if (t.closest("pre, .highlight")) return;
    var box = t.parentElement.clientWidth;
    var col = t.closest("article, main, .bd-article") || document.body;
    box = Math.min(box, col.clientWidth);
    if (t.scrollWidth > box + 1) {
      out.push({kind: "table", width: t.scrollWidth, box: box, context: context(t)});
    }
  });
  document.querySelectorAll("pre").forEach(function (p) {
    if (p.scrollWidth > p.clientWidth + 1) {
      out.push({kind: "code", width: p.scrollWidth, box: p.clientWidth, context: context(p)});
    }
  });
  var node = document.createElement("pre");
  node.id = "MARK";
  node.textContent = JSON.stringify(out);
  document.body.appendChild(node);
})();
</script>
""".replace("MARK", MARK)


def find_browser() -> str | None:
    """The Chromium (or Chrome) executable on PATH, if any."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def measure(page: Path, browser: str) -> list[dict]:
    """The layout problems of one built page (see the module docstring)."""
    html = page.read_text(encoding="utf-8")
    if "</body>" not in html:
        return []
    probe = page.with_name(f".{page.stem}.layout.html")  # beside it: relative links resolve
    probe.write_text(html.replace("</body>", MEASURE + "</body>", 1), encoding="utf-8")
    try:
        with tempfile.TemporaryDirectory() as profile:
            done = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--no-first-run", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", f"--user-data-dir={profile}",
                 f"--window-size={WIDTH},2000", "--virtual-time-budget=5000",
                 "--dump-dom", probe.as_uri()],
                capture_output=True, text=True, timeout=120, check=False)
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(rf'<pre id="{MARK}"[^>]*>(.*?)</pre>', done.stdout, re.S)
    if found is None:
        return [{"kind": "browser", "width": 0, "box": 0,
                 "context": f"the measuring script did not run ({done.stderr.strip()[:80]})"}]
    text = found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace(
        "&lt;", "<").replace("&gt;", ">")
    return json.loads(text)


KNOWN = Path(__file__).with_name("layout_known.txt")


def known_problems(path: Path = KNOWN) -> list[tuple[str, str, str, str]]:
    """``(page, kind, context prefix, reason)`` of every problem left on purpose."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            page, kind, prefix, reason = (x.strip() for x in line.split("|", 3))
            out.append((page, kind, prefix, reason))
    return out


def pages(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.html")
                  if p.name not in SKIP_PAGES and "_static" not in p.parts
                  and "_sources" not in p.parts and not p.name.startswith("."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="the built book's html folder")
    args = parser.parse_args(argv)
    browser = find_browser()
    if browser is None:
        print("check_layout: no Chromium on PATH (Debian: apt-get install chromium)")
        return 2
    counts: Counter[str] = Counter()
    known = known_problems(KNOWN)
    left = 0
    checked = 0
    for page in pages(args.html.resolve()):
        checked += 1
        name = str(page.relative_to(args.html.resolve()))
        for p in measure(page, browser):
            why = next((k[3] for k in known if k[0] == name and k[1] == p["kind"]
                        and p["context"].startswith(k[2])), None)
            where = f"{name}: {p['kind']}: {p['width']} > {p['box']} px: {p['context']}"
            if why is None:
                counts[p["kind"]] += 1
                print(where)
            else:
                left += 1
                print(f"known, {why}: {where}")
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "0 problems"
    print(f"check_layout: {summary} on {checked} pages ({left} known, each with its reason)")
    return 1 if counts else 0


if __name__ == "__main__":
    sys.exit(main())
