"""Reader notebooks: the notebook a reader downloads from a page shows what the page shows.

A chapter pastes its computed numbers, tables and figures into its prose with myst-nb's glue:
the roles ``{glue:text}`name:.3f```, ``{glue:md}`name```, ``{glue}`name``` (or ``{glue:any}``)
and the directives ``glue``, ``glue:any``, ``glue:figure``, ``glue:md`` and ``glue:math``. Sphinx
resolves them on the HTML page; the executed notebook the page offers as a download
(``_build/html/_sources/PAGE.ipynb``) keeps the raw markup, and its glued values live apart from
it, in ``_build/jupyter_execute/PAGE.glue.json`` (myst-nb moves them out of the code cells'
outputs; a notebook executed elsewhere keeps them there, as outputs marked ``scrapbook``).

:func:`reader_notebook` takes a notebook and its glued values and returns a notebook whose
markdown carries the values themselves: a ``{glue:text}`` value formatted by its format spec as
myst-nb does (a non-finite number as an em dash, as the page's ``missing_values`` extension
does), a glued Markdown text as Markdown, a table as its HTML, a figure as an image attached to
its cell, a figure's caption below it. A name with no glued value is an error that names the page
and the name, never a blank.

:func:`rewrite_notebook` then writes the rest of the page's MyST markup (references, citations,
statements, exercises, dropdowns, admonitions) as the page shows it
(:mod:`gaugebook.present.myst_markdown`), with the numbers, titles, citations and addresses read
from the built HTML pages (:mod:`gaugebook.present.book_html`). A first cell defines the TeX
macros the page's MathJax configuration holds (``\\Fro``, ``\\GL``: :func:`with_macros`).
``python -m gaugebook.present.notebooks _build`` rewrites every downloadable notebook of a built
book (``dev.py book`` runs it after the build).
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import re
import sys
from ast import literal_eval
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from gaugebook.present.book_html import Page, Target, book_targets, page_targets, read_pages
from gaugebook.present.myst_markdown import MystError, PageView, count_left, myst_notebook

#: what is left of glue markup in a text: any ``{glue`` (a role or a directive)
GLUE = "{glue"
#: a glue role: ``{glue:text}`name:spec```, ``{glue:md}`name```, ``{glue}`name```, ...
ROLE = re.compile(r"\{glue(?::(?P<kind>\w*))?\}`(?P<text>[^`]*)`")
#: the opening line of a glue directive, fenced by backticks or colons
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{glue(?::(?P<kind>\w*))?\}"
                       r"[ \t]*(?P<arg>.*?)\s*$")
#: how a pasted value is chosen among its mime types (myst-nb's order for HTML, the widgets and
#: scripts a notebook cannot show in Markdown left out)
PRIORITY = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown",
            "text/latex", "text/plain")
#: a glued value is stored under this prefix in a scrapbook output's data
SCRAPBOOK_PREFIX = "application/papermill.record/"
DASH = "\u2014"
#: how a format spec prints a non-finite float (``format(nan, "+.1%")`` is ``+nan%``)
MISSING = {"nan", "inf", "infinity"}
#: a figure whose label starts so is a table (book/_ext/table_numbers.py)
TABLE_PREFIX = "tab-"


class GlueError(ValueError):
    """A glue reference of a page that cannot be resolved (no value of that name, no value of
    the kind it asks for, or one its format spec cannot format)."""


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def glue_from_outputs(notebook: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The values glued in ``notebook``'s code cells that are still there as outputs (metadata
    ``{"scrapbook": {"name": ...}}``): ``name → {"data": {mime: value}, "metadata": ...}``, the
    shape of a ``*.glue.json`` file."""
    out: dict[str, dict[str, Any]] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            scrap = output.get("metadata", {}).get("scrapbook")
            if not scrap or "name" not in scrap:
                continue
            prefix = scrap.get("mime_prefix", SCRAPBOOK_PREFIX)
            data = {mime.removeprefix(prefix): value
                    for mime, value in output.get("data", {}).items()}
            out[scrap["name"]] = {"data": data, "metadata": output.get("metadata", {})}
    return out


def is_missing(text: str) -> bool:
    """Whether ``text`` is a non-finite float as a format spec prints it."""
    return text.strip().lower().lstrip("+-").rstrip("%") in MISSING


def format_plain(text: str, spec: str) -> str:
    """A glued ``text/plain`` value formatted by ``spec`` as myst-nb's ``{glue:text}`` does:
    the printed value read back as a Python literal (quotes dropped), converted to the type
    the spec's last character asks for, then formatted; a non-finite number reads as an em
    dash."""
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if spec == "":
        out = str(value)
    else:
        kind = spec[-1]
        if kind == "s":
            value = str(value)
        elif kind in "bcdoxX":
            value = int(value)
        elif kind in "eEfFgGn%":
            value = float(value)
        out = format(value, spec)
    return DASH if is_missing(out) else out


def escape_markdown(text: str) -> str:
    """``text`` as literal Markdown: the characters Markdown (and a notebook's ``$`` math) would
    read as markup are backslash-escaped, as the page shows a pasted text literally."""
    return re.sub(r"([\\`*_\[\]<>$|{}])", r"\\\1", text)


def myst_to_markdown(text: str) -> str:
    """Glued MyST Markdown as Markdown a notebook shows: a ``dropdown`` directive becomes an
    HTML ``<details>`` block, a ``{ref}`` or ``{numref}`` role its text."""
    def dropdown(match: re.Match[str]) -> str:
        title = match.group("title").strip() or "Details"
        return (f"<details><summary>{html.escape(title)}</summary>\n\n"
                f"{match.group('body').strip()}\n\n</details>")

    text = re.sub(r"^(?P<fence>`{3,}|:{3,})\{dropdown\}(?P<title>[^\n]*)\n"
                  r"(?P<body>.*?)\n(?P=fence)[ \t]*$", dropdown, text, flags=re.S | re.M)
    return re.sub(r"\{(?:ref|numref)\}`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`",
                  lambda m: (m.group(1) or m.group(2)).strip(), text)


class _Page:
    """The glued values of one page and what resolving its references needs."""

    def __init__(self, page: str, glue: Mapping[str, Mapping[str, Any]],
                 numbers: Mapping[str, str] | None) -> None:
        self.page = page
        self.glue = glue
        self.numbers = numbers or {}
        self.missing: list[str] = []

    def data(self, name: str) -> Mapping[str, Any] | None:
        entry = self.glue.get(name)
        if entry is None:
            if name not in self.missing:
                self.missing.append(name)
            return None
        return entry.get("data", {})

    def fail(self, name: str, why: str) -> GlueError:
        return GlueError(f"{self.page}: glued value {name!r} {why}")

    def role(self, kind: str | None, text: str) -> str:
        """The Markdown a glue role stands for (``kind``: ``text``, ``md``, ``any``, ``""``
        or None)."""
        if kind == "text":
            name, _, spec = text.rpartition(":") if ":" in text else (text, "", "")
            data = self.data(name.strip())
            if data is None:
                return ""
            if "text/plain" not in data:
                raise self.fail(name, "has no text/plain value for {glue:text}")
            try:
                return escape_markdown(format_plain(data["text/plain"], spec))
            except (TypeError, ValueError) as err:
                raise self.fail(name, f"cannot be formatted with {spec!r}: {err}") from None
        if kind == "md":
            name = text.rpartition(":")[0] if ":" in text else text
            data = self.data(name.strip())
            if data is None:
                return ""
            if "text/markdown" not in data:
                raise self.fail(name, "has no text/markdown value for {glue:md}")
            return myst_to_markdown(_text(data["text/markdown"])).strip()
        if kind in (None, "", "any"):
            name = text.strip()
            data = self.data(name)
            return "" if data is None else self.paste(name, data, inline=True)[0]
        raise GlueError(f"{self.page}: unknown glue role {{glue:{kind}}} for {text!r}")

    def paste(self, name: str, data: Mapping[str, Any], *,
              inline: bool = False) -> tuple[str, dict[str, Any]]:
        """A glued output as Markdown, and the attachments its image needs."""
        mime = next((m for m in PRIORITY if m in data), None)
        if mime is None:
            raise self.fail(name, f"has no output a notebook can show ({sorted(data)})")
        value = _text(data[mime])
        if mime == "text/html":
            return value.strip(), {}
        if mime.startswith("image/"):
            ext = {"image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpg"}[mime]
            file = f"{name}.{ext}"
            return f"![{name}](attachment:{file})", {file: {mime: value}}
        if mime == "text/markdown":
            return myst_to_markdown(value).strip(), {}
        if mime == "text/latex":
            return (value.strip() if inline else f"$$\n{value.strip().strip('$')}\n$$"), {}
        text = format_plain(value, "")
        return (escape_markdown(text) if inline else f"```\n{text}\n```"), {}

    def directive(self, kind: str | None, arg: str, body: list[str]) -> tuple[str, dict]:
        """The Markdown a glue directive stands for, and its attachments (``body``: the
        directive's lines between its fences, options first)."""
        options: dict[str, str] = {}
        rest = list(body)
        while rest and re.match(r"^\s*:[\w-]+:", rest[0]):
            key, _, value = rest.pop(0).strip()[1:].partition(":")
            options[key] = value.strip()
        caption = "".join(rest).strip()
        name = arg.strip()
        data = self.data(name)
        if data is None:
            return "", {}
        if kind == "md":
            if "text/markdown" not in data:
                raise self.fail(name, "has no text/markdown value for the glue:md directive")
            return myst_to_markdown(_text(data["text/markdown"])).strip(), {}
        if kind == "math":
            if "text/latex" not in data:
                raise self.fail(name, "has no text/latex value for the glue:math directive")
            return f"$$\n{_text(data['text/latex']).strip().strip('$')}\n$$", {}
        if kind not in (None, "", "any", "figure"):
            raise GlueError(f"{self.page}: unknown glue directive {{glue:{kind}}} for {name!r}")
        shown, attachments = self.paste(name, data)
        parts = []
        label = options.get("name", "")
        if label:
            parts.append(f'<a id="{html.escape(label)}"></a>')
        parts.append(shown)
        if kind == "figure" and caption:
            number = self.numbers.get(label)
            caption = myst_to_markdown(caption)
            parts.append(f"*{number}* {caption}" if number else caption)
        return "\n\n".join(parts), attachments


def resolve_markdown(source: str, page: _Page) -> tuple[str, dict[str, Any]]:
    """A markdown cell's text with every glue directive and role replaced by what it stands
    for, and the attachments its images need."""
    lines = _lines(source)
    out: list[str] = []
    attachments: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        fence = match.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        if end is None:
            raise GlueError(f"{page.page}: the glue directive {lines[i].strip()!r} is not "
                            "closed")
        text, files = page.directive(match.group("kind"), match.group("arg"), lines[i + 1:end])
        indent = match.group("indent")
        out.extend(indent + line if line.strip() else line for line in _lines(text + "\n"))
        attachments.update(files)
        i = end + 1
    text = ROLE.sub(lambda m: page.role(m.group("kind"), m.group("text")), "".join(out))
    return text, attachments


def reader_notebook(notebook: Mapping[str, Any], glue: Mapping[str, Mapping[str, Any]], *,
                    page: str, numbers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A copy of ``notebook`` whose markdown shows its glued values in place (see the module
    docstring). ``glue`` maps a name to ``{"data": {mime: value}}`` (a ``*.glue.json``), to which
    the values still in the notebook's outputs are added; ``numbers`` maps a figure's label to
    its number on the page (``"Table 11.2"``), put before its caption. Raises
    :class:`GlueError` naming ``page`` and every name it references without a value."""
    values = {**glue_from_outputs(notebook), **glue}
    state = _Page(page, values, numbers)
    out = copy.deepcopy(dict(notebook))
    for cell in out.get("cells", []):
        if cell.get("cell_type") != "markdown" or GLUE not in _text(cell.get("source", "")):
            continue
        text, attachments = resolve_markdown(_text(cell["source"]), state)
        cell["source"] = _lines(text)
        if attachments:
            cell["attachments"] = {**cell.get("attachments", {}), **attachments}
    if state.missing:
        raise GlueError(f"{page}: no glued value named {', '.join(map(repr, state.missing))}")
    return out


def count_markup(notebook: Mapping[str, Any]) -> int:
    """How much MyST markup (roles, directive fences, glue included) ``notebook``'s markdown
    cells hold."""
    return count_left(notebook)


def count_glue(notebook: Mapping[str, Any]) -> int:
    """How many times ``{glue`` occurs in ``notebook``'s markdown cells."""
    return sum(_text(c.get("source", "")).count(GLUE) for c in notebook.get("cells", [])
               if c.get("cell_type") == "markdown")


def figure_numbers(page_html: str) -> dict[str, str]:
    """``label → number`` (``"tab-lora-fresh" → "Table 11.3"``) of the numbered figures and
    tables of a built HTML page (:func:`~gaugebook.present.book_html.page_targets` reads every
    numbered target: equations, statements and sections too)."""
    return {label: target.shown for label, target in page_targets(page_html, "").items()
            if target.kind in ("figure", "table")}


def downloadable_notebooks(build: Path) -> list[Path]:
    """The notebooks a built book offers for download (``_build/html/_sources/**.ipynb``)."""
    return sorted((build / "html" / "_sources").rglob("*.ipynb"))


class Rewritten(NamedTuple):
    """One rewritten notebook: its page, its MyST markup before and after, and how many of
    its citations were written as ``[key]``."""

    page: str
    before: int
    after: int
    unmatched_citations: int = 0


def page_view(page: str, pages: Mapping[str, Page], targets: Mapping[str, Target],
              docs: Mapping[str, Target]) -> PageView:
    """What ``page`` shows that its notebook needs: every target of the book (``targets``,
    ``docs``: :func:`~gaugebook.present.book_html.book_targets`), the page's own citations and
    table of contents (none when the page was not built)."""
    built = pages.get(page)
    return PageView(page, targets, docs, built.citations if built else [],
                    built.toc if built else "")


def page_glue(build: Path, page: str) -> dict[str, Any]:
    """A page's glued values (``build/jupyter_execute/PAGE.glue.json``; none if absent)."""
    path = build / "jupyter_execute" / f"{page}.glue.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def rewrite_notebook(notebook: Mapping[str, Any], glue: Mapping[str, Mapping[str, Any]],
                     view: PageView) -> tuple[dict[str, Any], int]:
    """The reader notebook of one page: its glued values pasted (:func:`reader_notebook`, the
    numbers before the captions read from the page), then its MyST markup written as the page
    shows it (:func:`~gaugebook.present.myst_markdown.myst_notebook`); and the number of
    citations written as ``[key]``."""
    numbers = {label: target.shown for label, target in view.targets.items()}
    reader = reader_notebook(notebook, glue, page=view.page, numbers=numbers)
    return myst_notebook(reader, view)


#: The tag of the first cell of a reader notebook, which defines the page's TeX macros.
MACRO_TAG = "gaugebook-tex-macros"
_MATHJAX = "window.MathJax = "


def tex_macros(page_html: str) -> dict[str, Any]:
    """The TeX macros of the page's MathJax configuration (``{name: body}`` or ``{name:
    [body, arguments]}``, as ``_config.yml`` sets them); none without one."""
    at = page_html.find(_MATHJAX)
    if at < 0:
        return {}
    config, _ = json.JSONDecoder().raw_decode(page_html, at + len(_MATHJAX))
    return dict(config.get("tex", {}).get("macros", {}))


def _newcommand(name: str, body: str | list[Any]) -> str:
    if isinstance(body, list):
        return f"\\newcommand{{\\{name}}}[{int(body[1])}]{{{body[0]}}}"
    return f"\\newcommand{{\\{name}}}{{{body}}}"


def with_macros(notebook: Mapping[str, Any], macros: Mapping[str, Any]) -> dict[str, Any]:
    """``notebook`` with a first Markdown cell defining ``macros`` (``\\newcommand``), since a
    page defines them in its MathJax configuration, which its notebook does not carry and
    without which a reader's Jupyter shows ``\\Fro`` in red; unchanged without macros or
    when that cell is there."""
    out = copy.deepcopy(dict(notebook))
    cells = out.get("cells", [])
    if not macros or (cells and MACRO_TAG in cells[0].get("metadata", {}).get("tags", [])):
        return out
    defs = "".join(_newcommand(n, b) for n, b in macros.items())
    cell: dict[str, Any] = {"cell_type": "markdown", "metadata": {"tags": [MACRO_TAG]},
                            "source": ["<!-- the book's TeX macros, for the cells below -->\n",
                                       f"${defs}$"]}
    if (out.get("nbformat"), out.get("nbformat_minor", 0)) >= (4, 5):
        cell["id"] = MACRO_TAG
    out["cells"] = [cell, *cells]
    return out


def rewrite_build(build: Path) -> list[Rewritten]:
    """Rewrite every downloadable notebook of a built book in place as a reader notebook
    (:func:`rewrite_notebook`); a :class:`Rewritten` for each (markup counted by
    :func:`count_markup`). Raises :class:`GlueError` or :class:`MystError` on the first page
    with a reference it cannot resolve, before writing that page."""
    sources = build / "html" / "_sources"
    pages = read_pages(build / "html")
    targets, docs = book_targets(pages)
    report = []
    for path in downloadable_notebooks(build):
        rel = path.relative_to(sources).with_suffix("").as_posix()
        notebook = json.loads(path.read_text(encoding="utf-8"))
        view = page_view(rel, pages, targets, docs)
        reader, unmatched = rewrite_notebook(notebook, page_glue(build, rel), view)
        page_html = build / "html" / f"{rel}.html"
        if page_html.is_file():
            reader = with_macros(reader, tex_macros(page_html.read_text(encoding="utf-8")))
        if reader != notebook:
            path.write_text(json.dumps(reader, indent=1, ensure_ascii=False) + "\n",
                            encoding="utf-8")
        report.append(Rewritten(rel, count_markup(notebook), count_markup(reader), unmatched))
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m gaugebook.present.notebooks _build``: rewrite a built book's downloadable
    notebooks; exit 1 on a reference that cannot be resolved, or on MyST markup left over."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("build", type=Path, help="the book's _build folder")
    args = parser.parse_args(argv)
    try:
        report = rewrite_build(args.build)
    except (GlueError, MystError) as err:
        print(f"reader notebooks: {err}", file=sys.stderr)
        return 1
    before = sum(r.before for r in report)
    after = sum(r.after for r in report)
    for r in report:
        if r.after:
            print(f"reader notebooks: {r.page}: {r.after} MyST markup left", file=sys.stderr)
        if r.unmatched_citations:
            print(f"reader notebooks: {r.page}: {r.unmatched_citations} citations written as "
                  "[key] (the page's citations do not match the notebook's)", file=sys.stderr)
    print(f"reader notebooks: {len(report)} notebooks, MyST markup {before} -> {after}")
    return 1 if after else 0


if __name__ == "__main__":
    sys.exit(main())
