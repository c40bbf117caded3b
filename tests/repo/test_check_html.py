"""The rendered-page check (.ci/check_html.py) on small pages written here: each kind of breakage
is found, and the same content rendered correctly (math in MathJax spans, code in pre) is not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
<p>Run <code class="docutils literal notranslate"><span class="pre">gaugekit</span>
<span class="pre">run</span> <span class="pre">x</span> <span class="pre">--scale</span></code>;
the query–key gauge on a log–log plot, steps 1–3, a – b; <strong>Holds.</strong> 2 ** 3 and
a * b * c; see https://example.org/home/page, results/tmp/x and the ~/tmp/x of a reader.</p>
<div class="highlight-bash"><pre>python -m gaugebook run x --out /tmp/records  # ``x`` `y`</pre>
</div>
<div class="cell_input"><pre>open("/work/data/x.mat")  # **not bold**</pre></div>
<div class="cell_output"><pre>rec 0.13 -- wall 5 s, `python -m gaugekit` printed as code</pre></div>
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
        ("<p>works on any ``torch.optim`` optimizer</p>", "rest"),
        ("<table><tr><td>Adam (:class:`gaugekit.optim.Adam`)</td></tr></table>", "rest"),
        ("<p>see :func:`audit_many` and :meth:`X.y`</p>", "rest"),
        ("<p>in the style of :mod:`gaugebook.present.viz`</p>", "rest"),
        ("<p>they were made by `python -m gaugebook run x` at version 1</p>", "markdown"),
        ("<p>**Holds exactly.** For any loss</p>", "markdown"),
        ("<p>made by python -m gaugebook run ladder –scale paper –part n40</p>", "dash"),
        ("<p><span class='pasted-text'>run (–part n40)</span></p>", "dash"),
        ("<div class='cell_output'><pre>{'data_dir': '/work/shared/data'}</pre></div>", "path"),
        ("<div class='cell_output'><pre>data folders searched: /tmp/data</pre></div>", "path"),
        ("<p>records in /tmp/gaugekit-ladder-paper-x1 (temporary)</p>", "path"),
        ("<p>the file /home/alice/book/x.mat</p>", "path"),
        ("<p>written to /root/.cache/gaugekit</p>", "path"),
        ("<p>open file:///srv/book/_build/html/index.html</p>", "path"),
    ],
)
def test_each_breakage_is_found(tmp_path, body, kind):
    assert kind in _kinds(tmp_path, body)


@pytest.mark.parametrize(
    ("body", "kinds"),
    [
        ("<p>works on any ``torch.optim`` optimizer</p>", ["rest"]),  # not markdown too
        ("<p>see :class:`A`</p>", ["rest"]),
        ("<p>made by `x –scale` here</p>", ["markdown", "dash"]),
        ("<p>the query–key and value–output gauges</p>", []),
    ],
)
def test_each_breakage_is_reported_once_per_kind(tmp_path, body, kinds):
    assert sorted(_kinds(tmp_path, body)) == sorted(kinds)


def test_the_build_folder_itself_is_a_machine_path(tmp_path):
    """A folder outside the usual prefixes is still found when it is where the book was built."""
    root = Path("/srv/book/_build/html")
    assert check_html._build_folders(root) == ["/srv/book/_build/html", "/srv/book"]
    page = _page(tmp_path, "<div class='cell_output'><pre>data in /srv/book/data</pre></div>")
    assert [kind for kind, _ in check_html.check_page(page, root)] == ["path"]
    # negative control: the same page checked for a book built elsewhere
    assert list(check_html.check_page(page, Path("/opt/other/_build/html"))) == []


def test_the_book_check_reports_pages_and_fails_on_none(tmp_path):
    assert check_html.check_book(tmp_path)[0].endswith("no pages found (build the book first: "
                                                        "python3 dev.py book)")
    _page(tmp_path, "<p>see ??</p>", "a.html")
    _page(tmp_path, "<p>fine</p>", "b.html")
    (tmp_path / "search.html").write_text("<main>??</main>")
    problems = check_html.check_book(tmp_path)
    assert problems == ["a.html: ref: see ??"]
    assert check_html.main(["check", str(tmp_path)]) == 1


def test_a_downloadable_notebook_with_glue_markup_is_found(tmp_path):
    """A notebook under ``_sources`` whose Markdown still holds ``{glue`` fails the check; the
    same notebook with its values pasted (and glue in a code cell) passes."""
    import json

    _page(tmp_path, "<p>fine</p>", "a.html")
    sources = tmp_path / "_sources" / "chapters"
    sources.mkdir(parents=True)

    def notebook(text: str) -> str:
        return json.dumps({"cells": [{"cell_type": "markdown", "source": [text]},
                                     {"cell_type": "code", "source": "glue_page({glue})"}]})

    (sources / "a.ipynb").write_text(notebook("rate {glue:text}`rate:.3f` and {glue}`b`"))
    problems = check_html.check_book(tmp_path)
    assert problems == ["_sources/chapters/a.ipynb: notebook: cell 0: "
                        "'{glue:text}`rate:.3f` and {glue}`b`' (2 in it)"]
    (sources / "a.ipynb").write_text(notebook("rate 0.123 and b"))
    assert check_html.check_book(tmp_path) == []


@pytest.mark.parametrize("markdown", [
    "see {numref}`tab-zoo`",
    "as {cite:p}`paper2026gauge` shows",
    "by {prf:ref}`lem-covariance`",
    "```{prf:lemma} Covariance\n:label: lem-covariance\nBody.\n```",
    ":::{dropdown} More\nBody.\n:::",
    "````{solution} ex-one\n:class: dropdown\n````",
    "(sec-orbit)=\n## The orbit",
    "$$\nx = y\n$$ (gl-action)",
])
def test_a_downloadable_notebook_with_any_myst_markup_is_found(tmp_path, markdown):
    """Any MyST role, directive fence, target or equation label left in a downloaded notebook's
    Markdown fails the check; the same text in a code block, or written out, passes."""
    import json

    _page(tmp_path, "<p>fine</p>", "a.html")
    sources = tmp_path / "_sources"
    sources.mkdir()

    def write(*texts: str) -> None:
        cells = [{"cell_type": "markdown", "source": text} for text in texts]
        (sources / "a.ipynb").write_text(json.dumps({"cells": cells}))

    write("fine", markdown)
    problems = check_html.check_book(tmp_path)
    assert len(problems) == 1 and problems[0].startswith("_sources/a.ipynb: notebook: cell 1: ")
    # negative controls: shown literally in a code block, or written as the page shows it
    write(f"````markdown\n{markdown}\n````", "see Table 4.1, **Lemma 1.1**, (1.2)")
    assert check_html.check_book(tmp_path) == []
