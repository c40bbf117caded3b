"""What a built page of the book shows, read from its HTML: the numbers, titles and addresses of
its labelled targets, its rendered citations, its table of contents.

The reader notebooks (:mod:`gaugebook.present.notebooks`) write a cross-reference the way the
page writes it; Sphinx computes those texts ("Table 11.2", "(1.2)", "Lemma 1.1", a section's
title, "Singh [2026]") only while building, so they are read back from the pages it wrote:

- a figure or a glued table (``<figure id=LABEL>``, its ``caption-number`` span), a table with
  a caption, a display equation (``id="equation-LABEL"``, its ``eqno``), a ``prf:`` statement or
  an exercise (``<div class="proof lemma" id=LABEL>``, the caption number and the title in
  parentheses), a section (``<section id>``, or an empty ``<span id=LABEL>`` before its
  heading, the heading's ``section-number``), an API object (``<dt id="gaugekit.optim.X">``);
- each page's published address, from its ``<link rel="canonical">`` (Sphinx writes it from
  ``html.baseurl`` in ``_config.yml``, the one place the book's address is set).

Every function here but :func:`read_pages` takes a page's HTML text and returns plain data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from bs4 import BeautifulSoup, NavigableString, Tag

#: pages that hold no targets of the book's text
SKIP_PAGES = {"search", "genindex", "py-modindex", "prf-prf", "index"}


@dataclass(frozen=True)
class Target:
    """A labelled place of the book, as its page shows it.

    ``kind``: ``figure``, ``table``, ``equation``, ``statement``, ``section``, ``object`` or
    ``page``; ``shown``: what ``{numref}``/``{eq}``/``{prf:ref}`` write for it ("Fig. 4.2", "(1.2)",
    "Lemma 1.1", "Section 1.1"); ``number``: the number alone ("4.2"); ``title``: what
    ``{ref}`` writes (a section's heading without its number, a figure's caption, a
    statement's title), as Markdown; ``url``: its published address with the anchor."""

    label: str
    page: str
    url: str
    kind: str = ""
    shown: str = ""
    number: str = ""
    title: str = ""


@dataclass(frozen=True)
class Citation:
    """One rendered citation of a page (``<span class="bibtex-citation">``): its text as Markdown
    (the links to the bibliography absolute) and how many works it cites."""

    markdown: str
    works: int


def soup(page_html: str) -> Tag:
    """The main content of a page (``<main>``, else the whole document)."""
    document = BeautifulSoup(page_html, "html.parser")
    return document.find("main") or document


def canonical_url(page_html: str, page: str) -> str:
    """The published address of a page (its ``<link rel="canonical">``); ``PAGE.html`` when the
    book has no ``html.baseurl``."""
    match = re.search(r'<link rel="canonical" href="([^"]+)"', page_html)
    return match.group(1) if match else f"{page}.html"


def escape(text: str) -> str:
    """Plain text as literal Markdown (the characters Markdown reads as markup escaped)."""
    return re.sub(r"([\\`*_\[\]<>$|])", r"\\\1", text)


def inline_markdown(node: Tag | NavigableString, base: str = "") -> str:
    """A piece of a rendered page as inline Markdown: code as code, math as ``$…$``, emphasis,
    links made absolute against ``base`` (the page's address); header links and section
    numbers left out."""
    if isinstance(node, NavigableString):
        return escape(str(node))
    classes = set(node.get("class") or ())
    if classes & {"headerlink", "section-number", "caption-number"}:
        return ""
    if "math" in classes:
        tex = node.get_text().strip()
        return f"${tex.removeprefix(chr(92) + '(').removesuffix(chr(92) + ')').strip()}$"
    if node.name == "code":
        return f"`{node.get_text()}`"
    inner = "".join(inline_markdown(child, base) for child in node.children)
    if node.name in ("em", "i"):
        return f"*{inner}*" if inner.strip() else inner
    if node.name in ("strong", "b"):
        return f"**{inner}**" if inner.strip() else inner
    if node.name == "a" and node.get("href") and base:
        return f"[{inner}]({urljoin(base, node['href'])})"
    return inner


def _clean(text: str) -> str:
    return " ".join(text.split())


def _caption_number(node: Tag) -> str:
    number = node.find(class_="caption-number")
    return _clean(number.get_text()) if number else ""


def _number(shown: str) -> str:
    match = re.search(r"\d+(?:\.\d+)*", shown)
    return match.group(0) if match else ""


def _figures(main: Tag, page: str, url: str) -> list[Target]:
    out = []
    for node in main.select("figure[id], table[id], div.figure[id]"):
        shown = _caption_number(node)
        caption = node.find(("figcaption", "caption"))
        title = _clean(inline_markdown(caption)) if caption else ""
        if shown:
            kind = "table" if node.name == "table" or shown.startswith("Table") else "figure"
            out.append(Target(node["id"], page, f"{url}#{node['id']}", kind, shown,
                              _number(shown), title))
    return out


def _equations(main: Tag, page: str, url: str) -> list[Target]:
    out = []
    for node in main.select('[id^="equation-"]'):
        eqno = node.find(class_="eqno")
        shown = _clean("".join(eqno.find_all(string=True, recursive=False))) if eqno else ""
        if shown:
            out.append(Target(node["id"].removeprefix("equation-"), page,
                              f"{url}#{node['id']}", "equation", shown, _number(shown)))
    return out


def _statements(main: Tag, page: str, url: str) -> list[Target]:
    """``prf:`` statements and exercises: "Lemma 1.1" and the title in parentheses."""
    out = []
    for node in main.select("div.proof[id], div.exercise[id]"):
        head = node.find(class_="admonition-title")
        if head is None:
            continue
        shown = _caption_number(head)
        title = _clean(inline_markdown(head))
        if title.startswith("(") and title.endswith(")"):
            title = title[1:-1]
        if shown:
            out.append(Target(node["id"], page, f"{url}#{node['id']}", "statement", shown,
                              _number(shown), title))
    return out


def _sections(main: Tag, page: str, url: str) -> list[Target]:
    """Sections, under their own id and every label placed before their heading."""
    out = []
    for section in main.select("section[id]"):
        heading = section.find(re.compile(r"^h[1-6]$"), recursive=False)
        if heading is None:
            continue
        number = heading.find(class_="section-number")
        digits = _number(number.get_text()) if number else ""
        title = _clean(inline_markdown(heading))
        labels = [section["id"]]
        for child in section.children:
            if child is heading:
                break
            if isinstance(child, Tag) and child.name == "span" and child.get("id"):
                labels.append(child["id"])
        out.extend(Target(label, page, f"{url}#{label}", "section",
                          f"Section {digits}" if digits else "", digits, title)
                   for label in labels)
    return out


def _objects(main: Tag, page: str, url: str) -> list[Target]:
    """API objects documented by autodoc (``<dt id="gaugekit.optim.Adam">``)."""
    return [Target(node["id"], page, f"{url}#{node['id']}", "object", node["id"], "", node["id"])
            for node in main.select("dt.sig[id]")]


@dataclass(frozen=True)
class Page:
    """What a built page shows that its notebook needs: its address and title, its labelled
    targets, its rendered citations in order, its table of contents (Markdown, or empty)."""

    page: str
    url: str
    title: str
    targets: dict[str, Target]
    citations: list[Citation]
    toc: str

    @property
    def doc(self) -> Target:
        """The page as a ``{doc}`` reference shows it: its title, linking to its address."""
        return Target(self.page, self.page, self.url, "page", title=self.title)


def read_page(page_html: str, page: str) -> Page:
    """A built page (``page``: its path without ``.html``), its HTML parsed once."""
    main = soup(page_html)
    url = canonical_url(page_html, page)
    heading = main.find("h1")
    return Page(page, url, _clean(inline_markdown(heading)) if heading else "",
                _targets(main, page, url), _citations(main, url), _toc(main, url))


def _targets(main: Tag, page: str, url: str) -> dict[str, Target]:
    out: dict[str, Target] = {}
    for found in (_figures, _equations, _statements, _objects, _sections):
        for target in found(main, page, url):
            out.setdefault(target.label, target)
    return out


def page_targets(page_html: str, page: str) -> dict[str, Target]:
    """``label → Target`` for every labelled figure, table, equation, statement, exercise,
    section and API object of a page (``page``: its path without ``.html``)."""
    return read_page(page_html, page).targets


def _citations(main: Tag, base: str) -> list[Citation]:
    return [Citation(_clean(inline_markdown(span, base)), len(span.find_all("a")))
            for span in main.select("span.bibtex-citation")]


def page_citations(page_html: str, page: str) -> list[Citation]:
    """The page's rendered citations in the order they appear, as Markdown."""
    return read_page(page_html, page).citations


def _toc(main: Tag, base: str) -> str:
    blocks = []
    for wrapper in main.select("div.toctree-wrapper"):
        caption = wrapper.find(class_="caption-text")
        lines = [f"**{_clean(caption.get_text())}**", ""] if caption else []
        for ul in wrapper.find_all("ul", recursive=False):
            lines.extend(_toc_list(ul, base, 0))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def page_toc(page_html: str, page: str) -> str:
    """The page's table of contents (a ``tableofcontents`` directive) as a Markdown list of
    links, captions as bold lines; empty if the page has none."""
    return read_page(page_html, page).toc


def _toc_list(ul: Tag, base: str, depth: int) -> list[str]:
    lines = []
    for item in ul.find_all("li", recursive=False):
        link = item.find("a", recursive=False)
        if link is not None:
            lines.append(f"{'  ' * depth}- {_clean(inline_markdown(link, base))}")
        for sub in item.find_all("ul"):
            if sub.find_parent("li") is item:
                lines.extend(_toc_list(sub, base, depth + 1))
    return lines


def read_pages(html_dir: Path) -> dict[str, Page]:
    """Every page of a built book (``"chapters/11_lora" → Page``), the search, index and
    redirect pages left out."""
    pages = {}
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir).with_suffix("").as_posix()
        if rel in SKIP_PAGES or rel.split("/")[0] in ("_static", "_sources", "_images"):
            continue
        pages[rel] = read_page(path.read_text(encoding="utf-8"), rel)
    return pages


def book_targets(pages: Mapping[str, Page]) -> tuple[dict[str, Target], dict[str, Target]]:
    """Every labelled target of the book (``label → Target``, the first page defining a label
    wins) and every page as a ``{doc}`` reference shows it (``page → Target``)."""
    targets: dict[str, Target] = {}
    for page in pages.values():
        for label, target in page.targets.items():
            targets.setdefault(label, target)
    return targets, {name: page.doc for name, page in pages.items()}
