"""The layout check (.ci/check_layout.py) in headless Chromium on a page written here, at a desk's
width and at a phone's: a table wider than its box, a code block or a display equation that runs
past its box and a page wider than the window are found; the same content that fits is not; on a
phone a wide block may scroll inside the text column but may not widen the page, an equation may
not be clipped, and a table or an equation that scrolls must show that it does (the book's own
stylesheet gives both that cue). Skipped where no Chromium is installed (CI installs it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_layout", ROOT / ".ci" / "check_layout.py")
check_layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layout)

BROWSER = check_layout.find_browser()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH")

WIDE = "wide " * 40
#: a sideways-scrolling box that shows it scrolls (a fading edge), as the book's stylesheet does
CUE = "-webkit-mask-image: linear-gradient(to left, transparent, #000 2em)"
BOOK_CSS = ROOT / "book" / "_static" / "gaugebook.css"


def _page(tmp_path: Path, body: str, css: Path | None = None) -> Path:
    path = tmp_path / "page.html"
    link = f'<link rel="stylesheet" href="{css.as_uri()}">' if css else ""
    path.write_text(f"<html><head>{link}<style>article {{max-width: 600px}} pre {{overflow: auto}}"
                    f"</style></head><body><article>{body}</article></body></html>",
                    encoding="utf-8")
    return path


def test_overflowing_table_and_code_are_found(tmp_path):
    body = (f'<div style="overflow-x: auto; {CUE}"><table><tr><td style="white-space: nowrap">'
            f"{WIDE}</td></tr></table></div><pre>{'x' * 200}</pre>")
    page = _page(tmp_path, body)
    kinds = sorted(p["kind"] for p in check_layout.measure(page, BROWSER, 1280))
    assert kinds == ["code", "table"]
    # on a phone both scroll inside the text column, which is allowed (the table with its cue)
    assert check_layout.measure(page, BROWSER, 390) == []
    assert check_layout.main([str(tmp_path)]) == 1


def test_content_that_fits_passes(tmp_path):
    body = f"<table><tr><td>{WIDE}</td></tr></table><pre>{'x' * 20}</pre><p>{WIDE}</p>"
    for width in check_layout.WIDTHS:
        assert check_layout.measure(_page(tmp_path, body), BROWSER, width) == []
    assert check_layout.main([str(tmp_path)]) == 0
    assert not list(tmp_path.glob(".*.layout.html"))      # the probe copy is removed


def test_a_known_problem_with_its_reason_does_not_fail(tmp_path, monkeypatch, capsys):
    body = (f'<figure><div style="overflow-x: auto; {CUE}"><table><tr>'
            '<td style="white-space: nowrap">'
            f"{WIDE}</td></tr></table></div><figcaption>Table 9: wide on purpose</figcaption>"
            "</figure>")
    _page(tmp_path, body)
    known = tmp_path / "known.txt"
    known.write_text("# page | kind | context | reason\n"
                     "page.html | table | Table 9 | a reason given here\n")
    monkeypatch.setattr(check_layout, "KNOWN", known)
    assert check_layout.main([str(tmp_path)]) == 0
    assert "known, a reason given here" in capsys.readouterr().out
    known.write_text("page.html | table | Table 8 | another table\n")
    assert check_layout.main([str(tmp_path)]) == 1


def test_the_measurement_is_read_back_when_the_theme_marks_scrolling_blocks(tmp_path):
    """The book's theme gives every sideways-scrolling <pre> a tabindex once the page has
    loaded, the measurement's own block included when it reports problems."""
    theme = ('<script>document.addEventListener("DOMContentLoaded", function () {'
             'document.querySelectorAll("pre").forEach(function (p) {'
             'if (p.scrollWidth > p.clientWidth) p.setAttribute("tabindex", "0");});});'
             "</script>")
    body = theme + f"<pre>{'x' * 200}</pre>" + "".join(f"<pre>{'y' * 120}</pre>" for _ in range(3))
    kinds = [p["kind"] for p in check_layout.measure(_page(tmp_path, body), BROWSER, 1280)]
    assert kinds == ["code"] * 4


def test_a_wide_equation_and_a_wide_page(tmp_path):
    """MathJax draws a display equation as ``mjx-container[display=true]``: one wider than the
    text column is found at a desk, and allowed to scroll inside the column on a phone; a block
    of fixed width that fits a desk widens a phone's page."""
    math = (f'<mjx-container display="true" style="display: block; overflow-x: auto; {CUE}">'
            '<span style="display: inline-block; width: 900px">x</span></mjx-container>')
    page = _page(tmp_path, math)
    assert [p["kind"] for p in check_layout.measure(page, BROWSER, 1280)] == ["math"]
    assert check_layout.measure(page, BROWSER, 390) == []   # scrolls inside the column
    fixed = _page(tmp_path, '<div style="width: 480px">a block of fixed width</div>')
    assert check_layout.measure(fixed, BROWSER, 1280) == []
    assert [p["kind"] for p in check_layout.measure(fixed, BROWSER, 390)] == ["page"]


def _equation(width: int, style: str, around: str = "") -> str:
    """A display equation ``width`` px wide in a ``div.math`` (as Sphinx writes it) styled
    ``around``, its ``mjx-container`` styled ``style``."""
    return (f'<div class="math" style="{around}"><mjx-container display="true" style="display: '
            f'block; {style}"><mjx-math style="display: inline-block; width: {width}px">x'
            "</mjx-math></mjx-container></div>")


def test_a_clipped_equation_on_a_phone(tmp_path):
    """An equation whose box hides what runs past its edge is clipped: the reader sees its start
    and cannot swipe to its end (as the theme's ``overflow: hidden`` on ``div.math`` would
    do). One that scrolls in its box with a cue is not; one cut off past the window is."""
    hidden = _page(tmp_path, _equation(600, "overflow: hidden"))
    found = check_layout.measure(hidden, BROWSER, 390)
    assert [p["kind"] for p in found] == ["math"]
    assert found[0]["context"].startswith("clipped by mjx-container")
    outer = _page(tmp_path, _equation(600, "overflow: visible", around="overflow: hidden"))
    found = check_layout.measure(outer, BROWSER, 390)
    assert [p["kind"] for p in found] == ["math"]
    assert found[0]["context"].startswith("clipped by div.math")
    scrolled = _page(tmp_path, _equation(600, f"overflow-x: auto; {CUE}", "overflow: hidden"))
    assert check_layout.measure(scrolled, BROWSER, 390) == []
    fits = _page(tmp_path, _equation(200, "overflow: hidden"))
    assert check_layout.measure(fits, BROWSER, 390) == []


def test_a_scrolling_box_without_a_cue_on_a_phone(tmp_path):
    """A wide table or equation that scrolls in its own box but does not show it is reported
    as ``cue``; the same box with a fading edge, or with a shadow, is not; a box that does not
    scroll needs no cue."""
    table = (f'<div style="overflow-x: auto{{}}"><table><tr><td style="white-space: nowrap">'
             f"{WIDE}</td></tr></table></div>")
    bare = _page(tmp_path, table.format("") + _equation(600, "overflow-x: auto"))
    found = check_layout.measure(bare, BROWSER, 390)
    assert sorted(p["kind"] for p in found) == ["cue", "cue"]
    assert sorted(p["context"].split(":")[0] for p in found) == ["math", "table"]
    shadow = "; box-shadow: inset -8px 0 6px -6px rgba(0, 0, 0, 0.4)"
    cued = _page(tmp_path, table.format(shadow) + _equation(600, f"overflow-x: auto; {CUE}"))
    assert check_layout.measure(cued, BROWSER, 390) == []
    short = _page(tmp_path, '<div style="overflow-x: auto"><table><tr><td>a</td></tr></table>'
                  "</div>" + _equation(100, "overflow-x: auto"))
    assert check_layout.measure(short, BROWSER, 390) == []


def test_the_book_stylesheet_gives_a_wide_table_and_equation_their_cue(tmp_path):
    """With the book's stylesheet (book/_static/gaugebook.css), a table in the box
    ``table_html`` writes and a display equation too wide for a phone scroll with a fading
    edge, and neither is clipped, inside the theme's ``div.math`` of ``overflow: hidden``."""
    from gaugebook.present.tables import table_html

    rows = [{f"column {i}": f"value\u00a0{i}" * 3 for i in range(8)}]
    table = table_html(rows, [f"column {i}" for i in range(8)])
    assert 'class="gb-scroll"' in table
    body = table + _equation(600, "", around="overflow: hidden; display: flex")
    assert check_layout.measure(_page(tmp_path, body, css=BOOK_CSS), BROWSER, 390) == []
    # negative control: without the stylesheet both scroll with no cue, or are clipped
    kinds = sorted(p["kind"] for p in check_layout.measure(_page(tmp_path, body), BROWSER, 390))
    assert kinds == ["cue", "math"]
