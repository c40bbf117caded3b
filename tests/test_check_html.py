"""The rendered-page check (.ci/check_html.py) on small pages written here: each kind of breakage
is found, and the same content rendered correctly (math in MathJax spans, code in pre) is not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_html", ROOT / ".ci" / "check_html.py")
check_html = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_html)


def _page(tmp_path: Path, body: str, name: str = "page.html") -> Path:
    path = tmp_path / name
    path.write_text(f"<html><body><main>{body}</main></body></html>", encoding="utf-8")
    return path


def _kinds(tmp_path: Path, body: str) -> list[str]:
    return [kind for kind, _ in check_html.check_page(_page(tmp_path, body), tmp_path)]


GOOD = """
<p>The invariant <span class="math notranslate nohighlight">\\(W_Q^\\top W_K\\)</span> costs $5.</p>
<div class="math notranslate nohighlight">\\[\\frac{a}{b}\\]</div>
<div class="cell_input"><pre>x = "$\\\\top"  # ??</pre></div>
<figure><img src="fig.png"><figcaption>Figure 1</figcaption></figure>
<table><tr><th>a</th></tr><tr><td>1</td></tr></table>
<p>Adam ends <span class="pasted-text">0.56</span> apart.</p>
<p>Runs flagged as collapsed: <span class="pasted-text">none</span>.</p>
"""


def test_a_correct_page_passes(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"png")
    assert _kinds(tmp_path, GOOD) == []


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("<ul><li><em>U^\\top G_W V) = 0: the balancedness</em></li></ul>", "tex"),
        ("<p>the rate $\\eta$ is small</p>", "tex"),
        ("<p>see Section ??</p>", "ref"),
        ("<p>as shown by [missing]</p>", "ref"),
        ("<figure><figcaption>Figure 2</figcaption></figure>", "figure"),
        ("<figure><img src='absent.png'></figure>", "figure"),
        ("<div class='cell_output'><div class='output traceback'>ValueError</div></div>", "error"),
        ("<div class='cell_output'><div class='output stderr'><pre>warn</pre></div></div>",
         "error"),
        ("<p>ends <span class='pasted-text'>nan</span> apart</p>", "glue"),
        ("<p>ends <span class='pasted-text'>None</span> apart</p>", "glue"),
        ("<p><span class='pasted-text'>&lt;Figure size 640x480 with 1 Axes&gt;</span></p>",
         "glue"),
        ("<table><caption>Table 5</caption><tr><th>a</th></tr></table>", "table"),
    ],
)
def test_each_breakage_is_found(tmp_path, body, kind):
    assert kind in _kinds(tmp_path, body)


def test_the_book_check_reports_pages_and_fails_on_none(tmp_path):
    assert check_html.check_book(tmp_path)[0].endswith("no pages found (build the book first: "
                                                        "python3 dev.py book)")
    _page(tmp_path, "<p>see ??</p>", "a.html")
    _page(tmp_path, "<p>fine</p>", "b.html")
    (tmp_path / "search.html").write_text("<main>??</main>")
    problems = check_html.check_book(tmp_path)
    assert problems == ["a.html: ref: see ??"]
    assert check_html.main(["check", str(tmp_path)]) == 1
