"""Reader notebooks (gaugebook.present.notebooks) on small notebooks made here: every glue role
and directive is replaced by its value (a number formatted by its spec as myst-nb formats it, a
Markdown text, a table's HTML, a figure attached to its cell with its caption), no ``{glue`` is
left, and a name with no value is an error naming the page and the name."""

from __future__ import annotations

import json

import pytest

from gaugebook.present.myst_markdown import MystError
from gaugebook.present.notebooks import (
    GlueError,
    Rewritten,
    count_glue,
    figure_numbers,
    format_plain,
    glue_from_outputs,
    main,
    reader_notebook,
    rewrite_build,
)

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAfbLI3wAAAABJRU5"
       "ErkJggg==")
TABLE = '<div class="gb-scroll"><table><tr><td>Muon</td><td>0.25</td></tr></table></div>'
GLUE = {
    "rate": {"data": {"text/plain": "0.123456"}},
    "runs": {"data": {"text/plain": "20000"}},
    "name": {"data": {"text/plain": "'Muon'"}},
    "gap": {"data": {"text/plain": "nan"}},
    "note": {"data": {"text/plain": "<IPython.core.display.Markdown object>",
                      "text/markdown": "read from `results/x`; see {ref}`§4 <ch-sensing>`"}},
    "tab_zoo": {"data": {"text/plain": "<IPython.core.display.HTML object>",
                         "text/html": TABLE}},
    "fig_loss": {"data": {"text/plain": "<Figure size 640x360 with 1 Axes>", "image/png": PNG}},
}


def _notebook(*markdown: str, outputs: list | None = None) -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in markdown]
    cells.append({"cell_type": "code", "metadata": {}, "source": "x = 1", "execution_count": 1,
                  "outputs": outputs or []})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _markdown(notebook: dict, i: int = 0) -> str:
    source = notebook["cells"][i]["source"]
    return source if isinstance(source, str) else "".join(source)


def test_text_roles_are_formatted_by_their_spec():
    nb = _notebook("rate {glue:text}`rate:.3f`, {glue:text}`rate:.1%`, runs "
                   "{glue:text}`runs:,d`, {glue:text}`name`, gap {glue:text}`gap:+.2f`.")
    out = reader_notebook(nb, GLUE, page="chapters/x")
    assert _markdown(out) == "rate 0.123, 12.3%, runs 20,000, Muon, gap \u2014."
    assert count_glue(out) == 0 and count_glue(nb) == 5
    assert _markdown(nb).startswith("rate {glue:text}")   # the input is left as it was


def test_format_plain_matches_myst_nb():
    """An independent reference: myst-nb's own formatter, on every spec the book uses."""
    variables = pytest.importorskip("myst_nb.core.variables")
    for text, spec in [("0.123456", ".3f"), ("20000", ",d"), ("'Muon'", ""), ("0.5", ".1%"),
                       ("3", "s"), ("1234.5", ".3g"), ("'a b'", "s"), ("2.5e-06", ".1e")]:
        assert format_plain(text, spec) == variables.format_plain_text(text, spec)


def test_markdown_role_and_directive_paste_markdown():
    nb = _notebook("Records: {glue:md}`note`.", "```{glue:md} note\n:format: myst\n```\n")
    out = reader_notebook(nb, GLUE, page="chapters/x")
    assert _markdown(out) == "Records: read from `results/x`; see §4."
    assert _markdown(out, 1).strip() == "read from `results/x`; see §4"


def test_figure_directives_paste_the_table_and_the_image_with_captions():
    nb = _notebook("Before.\n\n```{glue:figure} tab_zoo\n:name: tab-zoo\n\nThe zoo, rate "
                   "{glue:text}`rate:.2f`.\n```\n\nAfter.",
                   ":::{glue:figure} fig_loss\n:name: fig-loss\n:figwidth: 80%\n\nLoss.\n:::\n")
    out = reader_notebook(nb, GLUE, page="chapters/x",
                          numbers={"tab-zoo": "Table 4.1", "fig-loss": "Fig. 4.2"})
    first = _markdown(out)
    assert TABLE in first and "*Table 4.1* The zoo, rate 0.12." in first
    assert first.startswith("Before.") and first.endswith("After.")
    assert '<a id="tab-zoo"></a>' in first
    second = out["cells"][1]
    assert "![fig_loss](attachment:fig_loss.png)" in _markdown(out, 1)
    assert second["attachments"] == {"fig_loss.png": {"image/png": PNG}}
    assert "*Fig. 4.2* Loss." in _markdown(out, 1)
    assert count_glue(out) == 0


def test_any_role_and_directive_and_nested_fences():
    nb = _notebook("Best: {glue}`name`; {glue:}`rate`; {glue:any}`runs`.",
                   "````{dropdown} Runs\n```{glue} tab_zoo\n```\n````\n")
    out = reader_notebook(nb, GLUE, page="chapters/x")
    assert _markdown(out) == "Best: Muon; 0.123456; 20000."
    assert _markdown(out, 1) == f"````{{dropdown}} Runs\n{TABLE}\n````\n"


def test_a_missing_name_is_an_error_naming_the_page_and_the_name():
    nb = _notebook("{glue:text}`rate:.2f` and {glue:text}`lost:.2f`",
                   "```{glue:figure} fig_gone\n```\n")
    with pytest.raises(GlueError, match=r"chapters/x: no glued value named 'lost', 'fig_gone'"):
        reader_notebook(nb, GLUE, page="chapters/x")


def test_a_value_of_the_wrong_kind_is_an_error():
    with pytest.raises(GlueError, match=r"chapters/x: glued value 'name' cannot be formatted"):
        reader_notebook(_notebook("{glue:text}`name:.2f`"), GLUE, page="chapters/x")
    with pytest.raises(GlueError, match="no text/markdown"):
        reader_notebook(_notebook("{glue:md}`rate`"), GLUE, page="chapters/x")
    with pytest.raises(GlueError, match="not closed"):
        reader_notebook(_notebook("```{glue:figure} tab_zoo\n:name: t\n"), GLUE, page="p")


def test_values_still_in_the_outputs_are_read():
    """A notebook executed outside the book keeps its glued values as scrapbook outputs."""
    output = {"output_type": "display_data",
              "metadata": {"scrapbook": {"name": "late",
                                         "mime_prefix": "application/papermill.record/"}},
              "data": {"application/papermill.record/text/plain": "2.5"}}
    nb = _notebook("late {glue:text}`late:.1f`", outputs=[output])
    assert glue_from_outputs(nb) == {"late": {"data": {"text/plain": "2.5"},
                                              "metadata": output["metadata"]}}
    assert _markdown(reader_notebook(nb, {}, page="p")) == "late 2.5"


def test_a_pasted_text_is_literal_markdown():
    glue = {"cell": {"data": {"text/plain": "'[2.280] a_b $x$'"}}}
    out = reader_notebook(_notebook("{glue:text}`cell`"), glue, page="p")
    assert _markdown(out) == r"\[2.280\] a\_b \$x\$"


def test_figure_numbers_from_a_built_page():
    page = ('<figure class="align-default" id="tab-a"><div>t</div><figcaption><p>'
            '<span class="caption-number">Table 11.2 </span>x</p></figcaption></figure>'
            '<figure id="fig-b"><img/><figcaption><span class="caption-number">Fig. 1.1 '
            "</span></figcaption></figure><figure id=\"plain\"><img/></figure>")
    assert figure_numbers(page) == {"tab-a": "Table 11.2", "fig-b": "Fig. 1.1"}


def test_rewrite_build_rewrites_the_downloads_in_place(tmp_path):
    sources = tmp_path / "html" / "_sources" / "chapters"
    sources.mkdir(parents=True)
    (tmp_path / "jupyter_execute" / "chapters").mkdir(parents=True)
    nb = _notebook("rate {glue:text}`rate:.2f`, see {numref}`fig-b` in {ref}`ch-b`")
    (sources / "a.ipynb").write_text(json.dumps(nb))
    (tmp_path / "jupyter_execute" / "chapters" / "a.glue.json").write_text(json.dumps(GLUE))
    (sources / "b.ipynb").write_text(json.dumps(_notebook("no glue here")))
    (tmp_path / "html" / "chapters").mkdir()
    (tmp_path / "html" / "chapters" / "b.html").write_text(
        '<link rel="canonical" href="https://book.example/chapters/b.html" /><main>'
        '<section id="beta"><span id="ch-b"></span><h1><span class="section-number">2. </span>'
        'Beta</h1><figure id="fig-b"><img/><figcaption><span class="caption-number">Fig. 2.1 '
        "</span>Loss.</figcaption></figure></section></main>")
    assert rewrite_build(tmp_path) == [Rewritten("chapters/a", 3, 0), Rewritten("chapters/b", 0, 0)]
    assert _markdown(json.loads((sources / "a.ipynb").read_text())) == (
        "rate 0.12, see [Fig. 2.1](https://book.example/chapters/b.html#fig-b) in "
        "[Beta](https://book.example/chapters/b.html#ch-b)")
    # a page whose glue file is missing names the page and the value
    (sources / "c.ipynb").write_text(json.dumps(_notebook("{glue:text}`rate`")))
    with pytest.raises(GlueError, match="chapters/c: no glued value named 'rate'"):
        rewrite_build(tmp_path)
    # a reference to a label no page defines names the page and the markup
    (sources / "c.ipynb").write_text(json.dumps(_notebook("see {numref}`fig-gone`")))
    with pytest.raises(MystError, match=r"chapters/c: cannot resolve \{numref\}`fig-gone`"):
        rewrite_build(tmp_path)
    assert main([str(tmp_path)]) == 1


def test_main_reports_the_markup_before_and_after(tmp_path, capsys):
    sources = tmp_path / "html" / "_sources"
    sources.mkdir(parents=True)
    (sources / "a.ipynb").write_text(json.dumps(_notebook("x {math}`a^2` y")))
    assert main([str(tmp_path)]) == 0
    assert "1 notebooks, MyST markup 1 -> 0" in capsys.readouterr().out
    assert _markdown(json.loads((sources / "a.ipynb").read_text())) == "x $a^2$ y"


PAGE_WITH_MACROS = ('<script>window.MathJax = {"tex": {"macros": {"R": "\\\\mathbb{R}", '
                    '"Fro": ["\\\\lVert #1 \\\\rVert_F", 1]}}, "options": {}}</script>')


def test_the_pages_tex_macros_are_defined_in_a_first_cell_once():
    """The page defines ``\\R`` and ``\\Fro`` in its MathJax configuration, which a notebook
    does not carry: the reader notebook's first cell defines them, and rewriting again does
    not add a second; a page without macros adds nothing (the control)."""
    from gaugebook.present.notebooks import MACRO_TAG, tex_macros, with_macros

    macros = tex_macros(PAGE_WITH_MACROS)
    assert macros == {"R": "\\mathbb{R}", "Fro": ["\\lVert #1 \\rVert_F", 1]}
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                "cells": [{"cell_type": "markdown", "id": "a", "metadata": {},
                           "source": ["$\\Fro{X} \\in \\R$"]}]}
    once = with_macros(notebook, macros)
    first = "".join(once["cells"][0]["source"])
    assert "\\newcommand{\\R}{\\mathbb{R}}" in first
    assert "\\newcommand{\\Fro}[1]{\\lVert #1 \\rVert_F}" in first
    assert once["cells"][0]["metadata"]["tags"] == [MACRO_TAG] and len(once["cells"]) == 2
    assert with_macros(once, macros) == once
    assert with_macros(notebook, tex_macros("<html>no MathJax here</html>")) == notebook
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.from_dict(once))
