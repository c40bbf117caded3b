"""The layout check (.ci/check_layout.py) in headless Chromium on a page written here, at a desk's
width and at a phone's: a table wider than its box, a code block or a display equation that runs
past its box and a page wider than the window are found; the same content that fits is not; on a
phone a wide block may scroll inside the text column but may not widen the page. Skipped where no
Chromium is installed (CI installs it)."""

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


def _page(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "page.html"
    path.write_text("<html><head><style>article {max-width: 600px} pre {overflow: auto}</style>"
                    f"</head><body><article>{body}</article></body></html>", encoding="utf-8")
    return path


def test_overflowing_table_and_code_are_found(tmp_path):
    body = (f'<div style="overflow-x: auto"><table><tr><td style="white-space: nowrap">{WIDE}'
            f"</td></tr></table></div><pre>{'x' * 200}</pre>")
    page = _page(tmp_path, body)
    kinds = sorted(p["kind"] for p in check_layout.measure(page, BROWSER, 1280))
    assert kinds == ["code", "table"]
    # on a phone both scroll inside the text column, which is allowed
    assert check_layout.measure(page, BROWSER, 390) == []
    assert check_layout.main([str(tmp_path)]) == 1


def test_content_that_fits_passes(tmp_path):
    body = f"<table><tr><td>{WIDE}</td></tr></table><pre>{'x' * 20}</pre><p>{WIDE}</p>"
    for width in check_layout.WIDTHS:
        assert check_layout.measure(_page(tmp_path, body), BROWSER, width) == []
    assert check_layout.main([str(tmp_path)]) == 0
    assert not list(tmp_path.glob(".*.layout.html"))      # the probe copy is removed


def test_a_known_problem_with_its_reason_does_not_fail(tmp_path, monkeypatch, capsys):
    body = (f'<figure><div style="overflow-x: auto"><table><tr><td style="white-space: nowrap">'
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
    math = ('<mjx-container display="true" style="display: block; overflow-x: auto">'
            '<span style="display: inline-block; width: 900px">x</span></mjx-container>')
    page = _page(tmp_path, math)
    assert [p["kind"] for p in check_layout.measure(page, BROWSER, 1280)] == ["math"]
    assert check_layout.measure(page, BROWSER, 390) == []   # scrolls inside the column
    fixed = _page(tmp_path, '<div style="width: 480px">a block of fixed width</div>')
    assert check_layout.measure(fixed, BROWSER, 1280) == []
    assert [p["kind"] for p in check_layout.measure(fixed, BROWSER, 390)] == ["page"]
