"""MyST Markdown as a reader's Jupyter shows it (gaugebook.present.myst_markdown), on small
notebooks and hand-made targets: each role and directive is written the way the page shows it,
nothing of the markup is left, and markup that cannot be resolved is an error naming the page
and the markup. The last test runs over a built book when there is one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gaugebook.present.book_html import Citation, Target, book_targets, read_pages
from gaugebook.present.myst_markdown import (
    MystError,
    PageView,
    count_left,
    myst_notebook,
    outside_code,
)
from gaugebook.present.notebooks import (
    downloadable_notebooks,
    page_glue,
    page_view,
    rewrite_notebook,
)

ROOT = Path(__file__).resolve().parents[3]
BOOK = "https://book.example/"
TARGETS = {t.label: t for t in [
    Target("tab-fresh", "chapters/11", f"{BOOK}chapters/11.html#tab-fresh", "table",
           "Table 11.2", "11.2", "The fresh seeds."),
    Target("fig-loss", "chapters/01", f"{BOOK}chapters/01.html#fig-loss", "figure",
           "Fig. 1.1", "1.1", "Loss curves."),
    Target("gl-action", "chapters/01", f"{BOOK}chapters/01.html#equation-gl-action",
           "equation", "(1.2)", "1.2"),
    Target("lem-cov", "chapters/01", f"{BOOK}chapters/01.html#lem-cov", "statement",
           "Lemma 1.1", "1.1", "Gradient covariance"),
    Target("ex-one", "chapters/01", f"{BOOK}chapters/01.html#ex-one", "statement",
           "Exercise 1.1", "1.1", "The smallest pair"),
    Target("ch-taxonomy", "chapters/02", f"{BOOK}chapters/02.html#ch-taxonomy", "section",
           "Section 2", "2", "Which optimizers keep the gauge"),
    Target("gaugekit.optim.ScaledGD", "book/api/optim",
           f"{BOOK}book/api/optim.html#gaugekit.optim.ScaledGD", "object",
           "gaugekit.optim.ScaledGD", "", "gaugekit.optim.ScaledGD"),
]}
DOCS = {"book/results": Target("book/results", "book/results", f"{BOOK}book/results.html",
                               "page", title="Results at a glance")}
CITATIONS = [Citation(f"Singh \\[[2026]({BOOK}book/references.html#id2)\\]", 1),
             Citation("\\[Arora, 2018, Du, 2018\\]", 2)]
VIEW = PageView("chapters/01", TARGETS, DOCS, CITATIONS, "- [1. Gauge](https://x/1.html)")
#: what is left of MyST markup (the check of a built book's notebooks uses the same)
MARKUP = re.compile(r"\{[a-z][\w:-]*\}`|^[ \t]*(?:`{3,}|:{3,})\{[a-z][\w:-]*\}", re.M)


def _notebook(*markdown: str) -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in markdown]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _md(*markdown: str, view: PageView = VIEW) -> list[str]:
    """The cells of a notebook made of ``markdown``, rewritten; nothing of the markup left."""
    notebook = _notebook(*markdown)
    out, unmatched = myst_notebook(notebook, view)
    assert unmatched == 0
    assert count_left(out) == 0
    assert [c["source"] for c in notebook["cells"]] == list(markdown)  # the input is kept
    return ["".join(c["source"]) for c in out["cells"]]


def test_numref_writes_the_number_and_links_to_another_page():
    assert _md("{numref}`tab-fresh` and {numref}`Table %s <tab-fresh>`, "
               "{numref}`Tab. {number} ({name}) <tab-fresh>`; {numref}`fig-loss`.") == [
        f"[Table 11.2]({BOOK}chapters/11.html#tab-fresh) and "
        f"[Table 11.2]({BOOK}chapters/11.html#tab-fresh), "
        f"[Tab. 11.2 (The fresh seeds.)]({BOOK}chapters/11.html#tab-fresh); Fig. 1.1."]
    # on the page that holds the table, plain text
    view = PageView("chapters/11", TARGETS)
    assert _md("{numref}`tab-fresh`", view=view) == ["Table 11.2"]


def test_ref_eq_prf_ref_and_doc_write_what_the_page_shows():
    assert _md("{ref}`ch-taxonomy`, {ref}`its section <ch-taxonomy>`, {eq}`gl-action`, "
               "{prf:ref}`lem-cov`, {ref}`ex-one`, {doc}`../book/results`, "
               "{doc}`the results <../book/results>`") == [
        f"[Which optimizers keep the gauge]({BOOK}chapters/02.html#ch-taxonomy), "
        f"[its section]({BOOK}chapters/02.html#ch-taxonomy), (1.2), Lemma 1.1, Exercise 1.1, "
        f"[Results at a glance]({BOOK}book/results.html), "
        f"[the results]({BOOK}book/results.html)"]


def test_labels_are_found_as_docutils_writes_them():
    assert _md("{numref}`tab_fresh`") == [f"[Table 11.2]({BOOK}chapters/11.html#tab-fresh)"]


def test_citations_are_the_pages_in_order():
    assert _md("By {cite:t}`singh2026`.", "Both {cite:p}`arora2018, du2018`.") == [
        f"By Singh \\[[2026]({BOOK}book/references.html#id2)\\].",
        "Both \\[Arora, 2018, Du, 2018\\]."]


def test_citations_that_do_not_match_the_page_are_written_as_keys():
    out, unmatched = myst_notebook(_notebook("{cite}`a2020` and {cite:p}`b2021,c2022`"),
                                   PageView("p", {}, citations=CITATIONS[:1]))
    assert "".join(out["cells"][0]["source"]) == "[a2020] and [b2021, c2022]"
    assert unmatched == 2


def test_inline_roles_math_index_and_python_objects():
    assert _md("{math}`x^2`, {index}`gauge`, {index}`the orbit <single: orbit>`, "
               "{py:class}`gaugekit.optim.ScaledGD`, {class}`~gaugekit.optim.ScaledGD`, "
               "{py:func}`~gaugekit.optim.ScaledGD`") == [
        "$x^2$, gauge, the orbit, "
        f"[`gaugekit.optim.ScaledGD`]({BOOK}book/api/optim.html#gaugekit.optim.ScaledGD), "
        f"[`ScaledGD`]({BOOK}book/api/optim.html#gaugekit.optim.ScaledGD), "
        f"[`ScaledGD()`]({BOOK}book/api/optim.html#gaugekit.optim.ScaledGD)"]


def test_targets_dropped_and_labelled_equations_numbered():
    assert _md("(sec-x)=\n## Heading\n\n$$\nW = UV^\\top\n$$ (gl-action)\n\nand "
               "$$ x = 1 $$ (gl-action)\n") == [
        "## Heading\n\n$$\nW = UV^\\top\n\\tag{1.2}\n$$\n\nand $$ x = 1  \\tag{1.2} $$\n"]


def test_statements_proofs_and_nested_fences():
    text = ("````{prf:lemma} Gradient covariance\n:label: lem-cov\n\nThe body, see "
            "{eq}`gl-action`.\n````\n\n"
            "::::{prf:proof}\n:class: full\n\nBy the chain rule:\n\n```python\nx = "
            "'{numref}`kept`'\n```\n\n:::{note}\nA nested note.\n:::\n::::\n")
    assert _md(text) == [
        "**Lemma 1.1** (Gradient covariance)\n\nThe body, see (1.2).\n\n"
        "**Proof.**\n\nBy the chain rule:\n\n```python\nx = '{numref}`kept`'\n```\n\n"
        "> **Note**\n>\n> A nested note.\n\n∎\n"]


def test_exercises_solutions_and_dropdowns_fold():
    text = ("```{exercise} The smallest pair\n:label: ex-one\n\nShow it.\n```\n\n"
            "```{solution} ex-one\n:class: dropdown\n\nIt is so.\n```\n\n"
            ":::{dropdown} More runs\n:open:\nA table.\n:::\n")
    assert _md(text) == [
        "**Exercise 1.1** (The smallest pair)\n\nShow it.\n\n"
        "<details><summary>Solution to Exercise 1.1 (The smallest pair)</summary>\n\n"
        "It is so.\n\n</details>\n\n"
        "<details open><summary>More runs</summary>\n\nA table.\n\n</details>\n"]


def test_admonitions_are_block_quotes_with_a_bold_title():
    text = ("```{warning}\nSlow.\n```\n\n```{admonition} Why it holds\n:class: tip\n"
            "Because.\n```\n\n```{note}\n:class: dropdown\nFolded.\n```\n")
    assert _md(text) == [
        "> **Warning**\n>\n> Slow.\n\n> **Why it holds**\n>\n> Because.\n\n"
        "<details><summary>Note</summary>\n\nFolded.\n\n</details>\n"]


def test_containers_math_code_toc_and_definition_lists():
    text = ("````{container} glance\n| a |\n|---|\n| 1 |\n````\n\n"
            "```{math}\n:label: gl-action\nx = y\n```\n\n"
            "```{code-block} python\n:linenos:\nprint(1)\n```\n\n"
            "```{tableofcontents}\n```\n\n"
            "Adam {cite:t}`singh2026`\n: Entrywise.\n  **Not equivariant.**\n")
    view = PageView("chapters/01", TARGETS, citations=CITATIONS[:1], toc=VIEW.toc)
    assert _md(text, view=view) == [
        "| a |\n|---|\n| 1 |\n\n$$\nx = y\n\\tag{1.2}\n$$\n\n```python\nprint(1)\n```\n\n"
        "- [1. Gauge](https://x/1.html)\n\n"
        f"- **Adam Singh \\[[2026]({BOOK}book/references.html#id2)\\]**: Entrywise.\n"
        "  **Not equivariant.**\n"]


@pytest.mark.parametrize(("markdown", "why"), [
    ("see {unknownrole}`x`", r"\{unknownrole\}`x` \(unknown role \{unknownrole\}\)"),
    ("see {numref}`fig-gone`", r"no page of the book defines the label 'fig-gone'"),
    ("{doc}`../book/gone`", r"no page 'book/gone' in the book"),
    ("```{figure} a.png\n```\n", r"unknown directive \{figure\}"),
    ("```{glue:figure} fig\n```\n", r"glue markup left"),
    ("```{prf:lemma} No label\nBody.\n```\n", r"without a :label:"),
    ("```{note}\nnever closed\n", r"not closed"),
    ("```{tableofcontents}\n```\n", r"no table of contents"),
])
def test_what_cannot_be_resolved_is_an_error_naming_the_page(markdown, why):
    with pytest.raises(MystError, match=rf"^chapters/09: cannot resolve .*{why}"):
        myst_notebook(_notebook("fine {eq}`gl-action`", markdown),
                      PageView("chapters/09", TARGETS, DOCS))


def test_the_markup_count_sees_roles_and_fences_but_not_code():
    notebook = _notebook("{ref}`a` and\n:::{note}\nx\n:::\n",
                         "```markdown\n{numref}`shown-literally`\n```\n", "no markup")
    assert count_left(notebook) == 2
    assert outside_code("a\n```\n{eq}`x`\n```\nb\n") == "a\nb\n"
    # a directive's closing fence is not a code block's opening
    nested = "````{note}\n```python\n{eq}`x`\n```\n````\n{ref}`y`\n"
    assert outside_code(nested) == "````{note}\n````\n{ref}`y`\n"
    assert count_left(_notebook(nested)) == 2


BUILT = ROOT / "_build"


@pytest.mark.skipif(not (BUILT / "html" / "_sources").is_dir(), reason="no built book")
def test_every_built_notebook_is_left_without_markup():
    """Every downloadable notebook of the built book, rewritten in memory (the build is not
    touched): no MyST role or directive fence is left in its Markdown, outside code blocks."""
    pages = read_pages(BUILT / "html")
    targets, docs = book_targets(pages)
    notebooks = downloadable_notebooks(BUILT)
    assert notebooks
    for path in notebooks:
        page = path.relative_to(BUILT / "html" / "_sources").with_suffix("").as_posix()
        notebook = json.loads(path.read_text(encoding="utf-8"))
        out, unmatched = rewrite_notebook(notebook, page_glue(BUILT, page),
                                          page_view(page, pages, targets, docs))
        left = [m.group(0) for cell in out["cells"] if cell["cell_type"] == "markdown"
                for m in MARKUP.finditer(outside_code("".join(cell["source"])))]
        assert left == [], page
        assert unmatched == 0, page
