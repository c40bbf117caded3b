"""The book's table of contents and its chapter files agree, and chapters follow the house rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".md", ".py", ".ipynb")


def _toc_files() -> list[str]:
    """Every file the toc names: the root, each part's chapters and their sections, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def walk(entries: list[dict]) -> list[str]:
        out = []
        for entry in entries:
            out.append(entry["file"])
            out += walk(entry.get("sections", []))
        return out

    files = [toc["root"]]
    for part in toc["parts"]:
        files += walk(part["chapters"])
    return files


def _resolve(stem: str) -> Path | None:
    for suffix in (".md", ".py"):
        if (ROOT / f"{stem}{suffix}").exists():
            return ROOT / f"{stem}{suffix}"
    return None


def _chapter_files() -> list[Path]:
    return sorted(p for p in (ROOT / "chapters").iterdir() if p.suffix in (".md", ".py"))


def test_every_toc_entry_exists():
    missing = [stem for stem in _toc_files() if _resolve(stem) is None]
    assert missing == []


def test_every_chapter_file_is_in_the_toc():
    listed = {str(_resolve(stem).relative_to(ROOT)) for stem in _toc_files()}
    unlisted = [
        str(p.relative_to(ROOT)) for p in _chapter_files() if str(p.relative_to(ROOT)) not in listed
    ]
    assert unlisted == []


def test_toc_has_the_parts_in_order_with_the_results_and_notation_first():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    assert [part["caption"] for part in toc["parts"]] == [
        "Start here",
        "Theory",
        "Experiments",
        "Library and appendix",
    ]
    assert [c["file"] for c in toc["parts"][0]["chapters"]] == ["book/results", "book/notation"]
    assert toc["options"]["numbered"] is True


@pytest.mark.parametrize("path", _chapter_files(), ids=lambda p: p.name)
def test_chapter_is_an_executable_notebook_that_imports_the_library_or_the_book(path):
    text = path.read_text()
    assert text.startswith("---\njupytext:"), "chapter needs a jupytext header"
    assert "kernelspec:" in text.split("---")[1]
    assert re.search(r"```\{code-cell\}", text), "chapter has no code cell"
    assert re.search(r"^(import gaugekit|from gaugekit|from gaugebook import)", text,
                     flags=re.M), "chapter must import gaugekit or the book's package"


#: how a chapter imports the two packages: the library as ``import gaugekit`` or by name
#: (``from gaugekit.audit import audit_twins``), the book by its packages
#: (``from gaugebook import sensing``) and the presentation by its modules
#: (``from gaugebook.present import roundoff, stats, viz``), never by a function's name
_IMPORT = re.compile(r"^\s*(?:from|import) (gauge(?:kit|book))\b(.*)$", re.M)
_PRESENT_MODULES = {p.stem for p in (ROOT / "gaugebook" / "present").glob("[a-z]*.py")}


def _import_problems(text: str) -> list[str]:
    problems = []
    for package, rest in _IMPORT.findall(text):
        line = f"{package}{rest}"
        present = re.fullmatch(r"\.present import ([a-z_]+(?:, [a-z_]+)*)", rest)
        if " as " in rest:
            problems.append(f"aliased: {line}")
        elif present and not set(present[1].split(", ")) <= _PRESENT_MODULES:
            problems.append(f"not a module of gaugebook.present: {line}")
        elif package == "gaugebook" and not present and not re.fullmatch(
                r"(?: import [a-z_]+(?:, [a-z_]+)*|)", rest):
            problems.append(f"not the book's convention: {line}")
    return problems


@pytest.mark.parametrize("path", _chapter_files(), ids=lambda p: p.name)
def test_chapter_imports_by_the_one_convention(path):
    """No aliasing around clashing names; the book's code by its packages only."""
    assert _import_problems(path.read_text()) == []


def test_the_import_convention_check_sees_an_alias_and_a_deep_import():
    """Negative control: the two ways of importing that the convention rules out are found."""
    text = ("import gaugekit\nfrom gaugebook import sensing, dial\n"
            "from gaugebook.present import roundoff, viz\n"
            "from gaugekit.report import theory as viz_theory\n"
            "from gaugebook.sensing.sensing_runs import collect\n"
            "from gaugebook.present import check_prose, viz\n")
    assert _import_problems(text) == [
        "aliased: gaugekit.report import theory as viz_theory",
        "not the book's convention: gaugebook.sensing.sensing_runs import collect",
        "not a module of gaugebook.present: gaugebook.present import check_prose, viz"]


@pytest.mark.parametrize("path", _chapter_files(), ids=lambda p: p.name)
def test_chapter_does_not_branch_on_scale(path):
    """Scale lives in each experiment's config, never as an `if` in a chapter."""
    assert not re.search(r"if\s+.*(get_scale\(\)|GAUGEKIT_SCALE|scale\s*==)", path.read_text())


@pytest.mark.parametrize("path", _chapter_files(), ids=lambda p: p.name)
def test_chapter_citations_exist_in_bibliography(path):
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    cited = set()
    for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", path.read_text()):
        cited.update(k.strip() for k in group.split(","))
    assert cited - keys == set()


def test_no_paired_notebooks_are_committed():
    """The .md text is the source of truth; .ipynb pairs are ignored by git and by the build."""
    gitignore = (ROOT / ".gitignore").read_text().splitlines()
    assert "*.ipynb" in gitignore
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "**.ipynb" in config["exclude_patterns"]


def test_book_executes_from_scratch_and_fails_on_cell_errors():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "force"
    assert config["execute"]["raise_on_error"] is True


def test_figure_and_target_labels_are_unique_across_the_book():
    """Sphinx labels are global: a name reused in two chapters fails the -W build."""
    counts: dict[str, list[str]] = {}
    pages = _chapter_files() + sorted((ROOT / "book").glob("*.md"))
    pattern = r"^\(([^)]+)\)=|^\s*:label:\s*(\S+)|^\s*:?name:\s*(fig-\S+|tab-\S+|eq-\S+)"
    for path in pages:
        for groups in re.findall(pattern, path.read_text(), flags=re.M):
            for label in filter(None, groups):
                counts.setdefault(label, []).append(path.name)
    assert {k: v for k, v in counts.items() if len(v) > 1} == {}


# --------------------------------------------------------------------------------------------
# the API reference (book/api/): one page per public module, every public name on it
# --------------------------------------------------------------------------------------------

API_PAGES = sorted((ROOT / "book" / "api").glob("*.md"))


def _public_names(module_name: str) -> set[str]:
    """Classes and functions a user imports from the module: its ``__all__`` (else those it
    defines), the same rule the pages were written with."""
    import importlib
    import inspect

    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(module).items() if not n.startswith("_")
                 and getattr(obj, "__module__", None) == module_name]
    return {n for n in names
            if inspect.isclass(getattr(module, n)) or inspect.isfunction(getattr(module, n))}


def _summaries(text: str) -> dict[str, set[str]]:
    """module -> names listed in the page's ``autosummary`` tables (after ``currentmodule``)."""
    out: dict[str, set[str]] = {}
    for module, body in re.findall(
        r"\.\. currentmodule:: (\S+)\n\n\.\. autosummary::\n   :nosignatures:\n\n((?:   \S+\n)+)",
        text,
    ):
        out[module] = {line.strip() for line in body.splitlines()}
    return out


def test_every_api_page_is_in_the_toc_under_the_reference_chapter():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = [c for part in toc["parts"] for c in part["chapters"]]
    reference, = (c for c in chapters if c["file"] == "chapters/12_api_reference")
    listed = [s["file"] for s in reference.get("sections", [])]
    assert sorted(listed) == [f"book/api/{p.stem}" for p in API_PAGES]
    assert len(API_PAGES) >= 6


@pytest.mark.parametrize("page", API_PAGES, ids=lambda p: p.name)
def test_api_page_summarizes_and_documents_every_public_name(page):
    text = page.read_text()
    summaries = _summaries(text)
    assert summaries, "an API page needs an autosummary table"
    for module, listed in summaries.items():
        assert f".. automodule:: {module}\n   :members:" in text, module
        # every name listed is one the module makes public (none stale); that every public
        # name is listed somewhere is the next test's
        assert listed <= _public_names(module), module


def _library_objects() -> dict[int, str]:
    """``id → "module.name"`` of every public class and function of every module of the
    library (``gaugekit``, ``__main__`` aside): what a user of the wheel can import."""
    import importlib
    import pkgutil

    import gaugekit

    out: dict[int, str] = {}
    for info in pkgutil.walk_packages(gaugekit.__path__, "gaugekit."):
        if info.name.rpartition(".")[2].startswith("_"):
            continue
        for name in _public_names(info.name):
            out.setdefault(id(getattr(importlib.import_module(info.name), name)),
                           f"{info.name}.{name}")
    return out


def _documented_objects(pages: list[Path]) -> set[int]:
    import importlib

    return {id(getattr(importlib.import_module(module), name))
            for page in pages for module, names in _summaries(page.read_text()).items()
            for name in names}


def test_every_public_name_of_the_library_is_on_an_api_page():
    """Every class and function a module of ``gaugekit`` makes public is in an autosummary
    table of some page (under the module that defines it or one that re-exports it)."""
    documented = _documented_objects(API_PAGES)
    missing = sorted(name for key, name in _library_objects().items() if key not in documented)
    assert missing == []


def test_the_coverage_check_sees_a_page_left_out():
    """Negative control: without the linear-algebra page, its functions are missing."""
    documented = _documented_objects([p for p in API_PAGES if p.stem != "linalg"])
    missing = {name for key, name in _library_objects().items() if key not in documented}
    assert "gaugekit.linalg.newton_schulz" in missing


def test_the_summary_check_sees_a_stale_name():
    """Negative control: a table that lists a name the module does not have is caught."""
    text = (".. currentmodule:: gaugekit.gauge\n\n.. autosummary::\n   :nosignatures:\n\n"
            "   product\n   no_such_function\n")
    assert _summaries(text) == {"gaugekit.gauge": {"product", "no_such_function"}}
    assert not _summaries(text)["gaugekit.gauge"] <= _public_names("gaugekit.gauge")



# --------------------------------------------------------------------------------------------
# code that fits the text column: every line of every code cell
# --------------------------------------------------------------------------------------------

#: every chapter is held to the rule (the layout check then measures what a browser shows)
NARROW_CHAPTERS = tuple(sorted(p.stem for p in (ROOT / "chapters").glob("*.md")))
#: what a rendered code box shows without scrolling (.ci/check_layout.py measured 684 px, about
#: 77 monospace characters; a ``hide-input`` cell's box is 666 px, about 75)
CODE_WIDTH = 77
HIDDEN_INPUT_WIDTH = 75


def _code_cell_lines(text: str) -> list[tuple[int, str, int]]:
    """(line number, line, allowed width) of every code line inside a ``code-cell`` block (its
    metadata, the ``---`` front matter and ``:key:`` options, is not shown as code)."""
    out, inside, meta, width = [], False, False, CODE_WIDTH
    for number, line in enumerate(text.splitlines(), 1):
        if not inside and line.startswith("```{code-cell}"):
            inside, meta, width, first = True, False, CODE_WIDTH, True
        elif inside and line.startswith("```"):
            inside = False
        elif inside and (meta or first) and line.strip() == "---":
            meta, first = not meta, False
        elif inside and (meta or line.startswith(":")):
            if "hide-input" in line:
                width = HIDDEN_INPUT_WIDTH
        elif inside:
            first = False
            out.append((number, line, width))
    return out


@pytest.mark.parametrize("stem", NARROW_CHAPTERS)
def test_code_cells_fit_the_text_column(stem):
    text = (ROOT / "chapters" / f"{stem}.md").read_text()
    long = [f"{stem}.md:{n}: {len(line)} > {width}" for n, line, width in _code_cell_lines(text)
            if len(line) > width]
    assert long == []


def test_the_code_width_check_sees_a_long_line():
    """Negative control: a code line of 78 characters is found, one outside a cell and the
    cell's metadata are not; in a ``hide-input`` cell 76 characters are already too many."""
    cell = "```{code-cell} ipython3\n---\ntags: [x]\n" + "c" * 90 + "\n---\n"
    text = cell + "x" * 78 + "\n```\n" + "y" * 90 + "\n"
    assert [(len(line), w) for _, line, w in _code_cell_lines(text)] == [(78, 77)]
    hidden = "```{code-cell} ipython3\n:tags: [hide-input]\n" + "z" * 76 + "\n```\n"
    assert [(len(line), w) for _, line, w in _code_cell_lines(hidden)] == [(76, 75)]


# --------------------------------------------------------------------------------------------
# captions of at most about three rendered lines
# --------------------------------------------------------------------------------------------

#: what about three lines of a caption hold at the text column's width, counted as written
#: (markdown and math source included, whitespace collapsed)
CAPTION_LIMIT = 300
_GLUE_FIGURE = re.compile(r"^\s*(`{3,}|:{3,})\{glue:figure\}[ \t]*(\S*)")
_CELL_METADATA = re.compile(r"^```\{code-cell\}[^\n]*\n---\n(.*?)\n---\n", re.M | re.S)


def _captions(text: str) -> list[tuple[str, str]]:
    """``(name, caption)`` of every figure and table caption of a chapter's text, whitespace
    collapsed: the body of each ``glue:figure`` block after its ``:option:`` lines (named by
    ``:name:``, else by the glued key) and the ``caption`` of each code cell's ``mystnb: figure:``
    metadata (named by the ``name`` beside it)."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _GLUE_FIGURE.match(lines[i])
        i += 1
        if not match:
            continue
        fence, name = match.groups()
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != fence:
            option = re.match(r"\s*:([\w-]+):(.*)$", lines[i])
            if option and not "".join(body).strip():
                name = option[2].strip() if option[1] == "name" else name
            else:
                body.append(lines[i])
            i += 1
        out.append((name, " ".join(" ".join(body).split())))
    for metadata in _CELL_METADATA.findall(text):
        figure = ((yaml.safe_load(metadata) or {}).get("mystnb") or {}).get("figure") or {}
        if "caption" in figure:
            out.append((figure.get("name", "?"), " ".join(str(figure["caption"]).split())))
    return out


def _long_captions(label: str, text: str) -> list[str]:
    return [f"{label}:{name}: {len(caption)} chars" for name, caption in _captions(text)
            if len(caption) > CAPTION_LIMIT]


def _caption_pages() -> list[Path]:
    return sorted((ROOT / "chapters").glob("*.md")) + sorted((ROOT / "book").glob("*.md"))


def test_captions_are_at_most_three_lines():
    """A caption says what is shown; protocol, definitions and conclusions belong to the text."""
    found = [c for path in _caption_pages() for c in _captions(path.read_text())]
    assert len(found) >= 50, "the caption parser found too few captions"
    long = [line for path in _caption_pages()
            for line in _long_captions(str(path.relative_to(ROOT)), path.read_text())]
    assert long == []


def test_the_caption_check_sees_a_long_caption():
    """Negative control: a 400-character caption of either kind is reported, a short one and
    a cell without a figure are not, and the ``:name:`` option is not caption text."""
    import textwrap

    caption = ("lorem ipsum " * 34)[:400]
    assert len(caption) == 400
    wrapped = textwrap.fill(caption, 90)
    text = (
        "# A chapter\n\n```{glue:figure} tab_long\n:name: tab-long\n\n" + wrapped + "\n```\n\n"
        "```{glue:figure} tab_short\n:name: tab-short\n\nA short caption.\n```\n\n"
        "```{code-cell} ipython3\n---\ntags: [hide-input]\nmystnb:\n  figure:\n"
        "    name: fig-long\n    caption: |\n"
        + textwrap.indent(wrapped, "      ") + "\n---\nplot()\n```\n\n"
        "```{code-cell} ipython3\n---\ntags: [hide-input]\n---\nprint(1)\n```\n")
    assert dict(_captions(text)) == {"tab-long": caption, "tab-short": "A short caption.",
                                     "fig-long": caption}
    assert _long_captions("synthetic.md", text) == [
        "synthetic.md:tab-long: 400 chars", "synthetic.md:fig-long: 400 chars"]
