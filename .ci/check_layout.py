#!/usr/bin/env python3
"""Check the layout of a built Jupyter Book as a reader's browser lays it out; exit 1 on a problem.

    python .ci/check_layout.py _build/html            (also: python3 dev.py layout)

Every page is opened in headless Chromium twice, at a desk's width (1280 px) and at a phone's
(390 px); a script measures, after the page's styles and its math have been laid out:

``table``   a table wider than the text column it sits in (at 1280 px also: wider than the
            sideways-scrolling box a table helper put around it). At 390 px a wide table may
            scroll sideways inside its own box, which the reader sees and can swipe; it may not
            widen the page
``code``    a code cell, an output or any ``pre`` block whose text runs past its box (a reader
            must scroll sideways to see it); at 390 px, where no code line of 77 characters
            fits, a block whose box runs past the text column
``math``    a display equation wider than its box: clipped, or scrolled, where it should break
            over lines; at 390 px, an equation whose box runs past the text column, or one
            that is clipped: part of it cut off by a box that hides what runs past its edge
            (overflow hidden or clip) or past the window, where no swipe reaches it (inside the
            column, one too long for a phone scrolls in its own box, as code does)
``cue``     at 390 px, a display equation or a table that scrolls sideways in its box without
            showing that it does: the box has no fading edge (a mask) and no shadow (a
            gradient background or an inset box shadow), so a reader sees it cut off
``page``    the page itself wider than the window: everything scrolls sideways

Each problem is printed as ``page @width: kind: width > box px: context``, then a count per
kind and width. A problem listed in ``.ci/layout_known.txt`` (one per line: ``page | kind |
context prefix | reason``, the kind optionally as ``kind@390``) is printed as known with its
reason and does not fail the check; the list says why each is left. The check needs Chromium
(Debian: ``apt-get install chromium``); the search and index pages are skipped.
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
#: a desk's window and a phone's
WIDTHS = (1280, 390)
MARK = "gaugekit-layout"

#: Runs at the end of the page body, after the stylesheets (which block scripts) are applied.
MEASURE = r"""
<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = [];
  var phone = window.innerWidth < 600;
  function context(el) {
    var fig = el.closest("figure, .cell, .output, div.highlight, section");
    var cap = fig && fig.querySelector("figcaption, .caption-text");
    var text = (cap ? cap.textContent : el.textContent) || "";
    return text.replace(/\s+/g, " ").trim().slice(0, 70);
  }
  var col = document.querySelector("article, main, .bd-article") || document.body;
  function scrolls(el) {
    var x = getComputedStyle(el).overflowX;
    return x === "auto" || x === "scroll";
  }
  // the nearest box at or above el that scrolls sideways, or null
  function scrollerOf(el) {
    for (var e = el; e && e !== document.body; e = e.parentElement) {
      if (scrolls(e)) return e;
    }
    return null;
  }
  // where el's content is cut off where no swipe reaches it: the tag of the first box above it
  // that hides what runs past its edge (overflow hidden or clip), or "the window" for content
  // past the window's right edge; null when every part of it can be seen or scrolled to
  function clipped(el) {
    var r = el.getBoundingClientRect();
    var left = r.left, rightEdge = r.right;
    for (var e = el.parentElement; e && e !== document.documentElement; e = e.parentElement) {
      var b = e.getBoundingClientRect();
      if (scrolls(e)) {           // reachable inside e: from here on, e's box is what shows
        left = b.left; rightEdge = b.right;
        continue;
      }
      var x = getComputedStyle(e).overflowX;
      if ((x === "hidden" || x === "clip") && (rightEdge > b.right + 1 || left < b.left - 1)) {
        return e.tagName.toLowerCase() + (e.className ? "." + String(e.className).split(" ")[0]
                                                     : "");
      }
    }
    return rightEdge > window.innerWidth + 1 ? "the window" : null;
  }
  // a box that scrolls sideways shows that it does: a fading edge (mask) or a shadow
  // (a gradient background or an inset box shadow)
  function hasCue(el) {
    var s = getComputedStyle(el);
    var mask = s.maskImage || s.webkitMaskImage || "none";
    return mask !== "none" || /gradient/.test(s.backgroundImage) || /inset/.test(s.boxShadow);
  }
  document.querySelectorAll("table").forEach(function (t) {
    if (t.closest("pre, .highlight")) return;
    var box = Math.min(t.parentElement.clientWidth, col.clientWidth);
    var swipes = scrolls(t.parentElement);
    if (phone && swipes) box = col.clientWidth + t.scrollWidth;  // swipes inside its box
    if (phone && swipes && t.parentElement.getBoundingClientRect().right
        > col.getBoundingClientRect().right + 1) box = 0;          // but the box widens the page
    if (t.scrollWidth > box + 1) {
      out.push({kind: "table", width: t.scrollWidth, box: box, context: context(t)});
    } else if (phone && swipes && t.parentElement.scrollWidth > t.parentElement.clientWidth + 1
               && !hasCue(t.parentElement)) {
      out.push({kind: "cue", width: t.parentElement.scrollWidth,
                box: t.parentElement.clientWidth, context: "table: " + context(t)});
    }
  });
  var right = col.getBoundingClientRect().right + 1;
  document.querySelectorAll("pre").forEach(function (p) {
    // on a phone a code line may be swiped inside its box, which may not leave the column
    var over = phone ? p.getBoundingClientRect().right > right
                     : p.scrollWidth > p.clientWidth + 1;
    if (over) {
      out.push({kind: "code", width: p.scrollWidth, box: p.clientWidth, context: context(p)});
    }
  });
  document.querySelectorAll('mjx-container[display="true"]').forEach(function (m) {
    var inner = m.firstElementChild;
    var width = Math.max(m.scrollWidth, inner ? inner.getBoundingClientRect().width : 0);
    var box = Math.min(m.clientWidth, col.clientWidth);
    var eqno = m.parentElement && m.parentElement.querySelector(".eqno");
    var spoken = m.querySelector("mjx-assistive-mml");
    var label = ((eqno ? eqno.textContent.replace("#", "").trim() + " " : "")
                 + (m.getAttribute("aria-label") || (spoken && spoken.textContent.trim())
                    || context(m))).slice(0, 70);
    if (!phone) {
      if (width > box + 1) {
        out.push({kind: "math", width: Math.round(width), box: box, context: label});
      }
      return;
    }
    // on a phone a long equation may be swiped inside its box, with a cue that it scrolls; it
    // may not leave the column, and no part of it may be cut off where no swipe reaches it
    var cut = clipped(inner || m);
    if (m.getBoundingClientRect().right > right || cut) {
      out.push({kind: "math", width: Math.round(width), box: box,
                context: (cut ? "clipped by " + cut + ": " : "") + label});
    } else {
      var scroller = scrollerOf(inner || m);
      if (scroller && scroller.scrollWidth > scroller.clientWidth + 1 && !hasCue(scroller)) {
        out.push({kind: "cue", width: scroller.scrollWidth, box: scroller.clientWidth,
                  context: "math: " + label});
      }
    }
  });
  var page = document.documentElement.scrollWidth;
  if (page > window.innerWidth + 1) {
    out.push({kind: "page", width: page, box: window.innerWidth, context: document.title});
  }
  var node = document.createElement("pre");
  node.id = "MARK";
  node.textContent = JSON.stringify(out);
  document.body.appendChild(node);
  if (window.parent !== window) window.parent.postMessage(JSON.stringify(out), "*");
}, 1500); });
</script>
""".replace("MARK", MARK)


def find_browser() -> str | None:
    """The Chromium (or Chrome) executable on PATH, if any."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


#: Chromium does not open a window narrower than this: a narrower width is measured inside a
#: frame of that width (:data:`FRAME`), which reports back to the window.
MIN_WINDOW = 500
FRAME = """<html><body style="margin: 0">
<iframe src="SRC" style="width: WIDTHpx; height: 2000px; border: 0"></iframe>
<script>
window.addEventListener("message", function (e) {
  var node = document.createElement("pre");
  node.id = "MARK";
  node.textContent = e.data;
  document.body.appendChild(node);
});
</script></body></html>""".replace("MARK", MARK)


def measure(page: Path, browser: str, width: int) -> list[dict]:
    """The layout problems of one built page at a window ``width`` px wide (see the module
    docstring)."""
    html = page.read_text(encoding="utf-8")
    if "</body>" not in html:
        return []
    probe = page.with_name(f".{page.stem}.layout.html")  # beside it: relative links resolve
    probe.write_text(html.replace("</body>", MEASURE + "</body>", 1), encoding="utf-8")
    opened, frame = probe, None
    if width < MIN_WINDOW:
        frame = page.with_name(f".{page.stem}.frame.html")
        frame.write_text(FRAME.replace("SRC", probe.name).replace("WIDTH", str(width)),
                         encoding="utf-8")
        opened = frame
    try:
        with tempfile.TemporaryDirectory() as profile:
            done = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--no-first-run", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", "--allow-file-access-from-files",
                 f"--user-data-dir={profile}",
                 f"--window-size={max(width, MIN_WINDOW)},2000", "--virtual-time-budget=10000",
                 "--dump-dom", opened.as_uri()],
                capture_output=True, text=True, timeout=120, check=False)
    finally:
        probe.unlink(missing_ok=True)
        if frame is not None:
            frame.unlink(missing_ok=True)
    found = re.search(rf'<pre id="{MARK}"[^>]*>(.*?)</pre>', done.stdout, re.S)
    if found is None:
        return [{"kind": "browser", "width": 0, "box": 0,
                 "context": f"the measuring script did not run ({done.stderr.strip()[:80]})"}]
    text = found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace(
        "&lt;", "<").replace("&gt;", ">")
    return json.loads(text)


KNOWN = Path(__file__).with_name("layout_known.txt")


def known_problems(path: Path = KNOWN) -> list[tuple[str, str, str, str]]:
    """``(page, kind, context prefix, reason)`` of every problem left on purpose (``kind`` is
    ``table``, ``code``, ``math``, ``cue`` or ``page``, for both widths, or ``kind@390`` for
    one)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            page, kind, prefix, reason = (x.strip() for x in line.split("|", 3))
            out.append((page, kind, prefix, reason))
    return out


def _is_known(known: list[tuple[str, str, str, str]], name: str, kind: str, width: int,
              context: str) -> str | None:
    return next((k[3] for k in known if k[0] == name and k[1] in (kind, f"{kind}@{width}")
                 and context.startswith(k[2])), None)


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
        for width in WIDTHS:
            for p in measure(page, browser, width):
                why = _is_known(known, name, p["kind"], width, p["context"])
                where = (f"{name} @{width}: {p['kind']}: {p['width']} > {p['box']} px: "
                         f"{p['context']}")
                if why is None:
                    counts[f"{p['kind']} @{width}"] += 1
                    print(where)
                else:
                    left += 1
                    print(f"known, {why}: {where}")
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "0 problems"
    print(f"check_layout: {summary} on {checked} pages at {' and '.join(map(str, WIDTHS))} px "
          f"({left} known, each with its reason)")
    return 1 if counts else 0


if __name__ == "__main__":
    sys.exit(main())
