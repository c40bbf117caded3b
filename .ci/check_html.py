#!/usr/bin/env python3
"""Check a built Jupyter Book for what a reader would see as broken; exit 1 when anything is.

    python .ci/check_html.py _build/html          (also: python3 dev.py check)

Sphinx's ``-W`` catches what Sphinx itself warns about. This looks at the pages as rendered, for
the failures that slip past it:

``tex``        TeX outside math: a backslash command (``\\top``, ``\\frac``, ``\\Fro``) or a
               ``$`` in running text; MathJax renders math from ``span.math``/``div.math``
               only, so anything else shows as raw source (a formula continuation line
               starting with ``+ `` becomes a bullet, for example)
``ref``        an unresolved reference or citation: ``??``, ``[missing]``, a ``pending_xref``
``figure``     a figure without an image, or an ``<img>`` whose file is not in the build
``error``      an error or traceback output, or anything a cell wrote to stderr
``glue``       a glued value that did not render: empty, ``nan``, ``None`` (the English word
               "none" is fine), or a Python repr
               such as ``<Figure size …>`` or ``<… object at 0x…>``
``table``      a table without data cells
``rest``       raw reStructuredText in the text: ````x```` literals or ``:class:``, ``:func:``,
               ``:mod:``, ``:meth:`` … roles that were shown instead of rendered (a docstring
               pasted into Markdown, say)
``markdown``   raw Markdown in the text: code between single backticks, ``**bold**`` markers
``dash``       a command-line option whose ``--`` was typeset as an en dash (``–scale``): the
               command is not copy-pasteable (Markdown/Sphinx "smart quotes" outside code)
``path``       a path of the machine that built the book (``/work/…``, ``/tmp/…``, ``/home/…``,
               ``/root/…``, ``/Users/…``, ``file://``, or the build folder itself), in text or
               in a cell's output
``notebook``   a notebook the reader downloads (``_sources/…/PAGE.ipynb``) whose Markdown
               still holds MyST markup that Jupyter shows raw: a role (``{glue:text}``,
               ``{numref}``, ``{cite:p}`` …), a directive's fence (``glue:figure``,
               ``prf:lemma``, ``dropdown`` …), a target ``(label)=`` or an equation label
               ``$$ (label)``, outside code blocks: ``dev.py book`` rewrites them
               (``gaugebook/present/notebooks.py``)

Code (``pre``, ``code``), scripts, styles and the search/genindex pages are not checked, except
that cell outputs are searched for machine paths too. Each problem is printed as
``page: kind: context``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

from bs4 import BeautifulSoup, NavigableString, Tag

SKIP_PAGES = {"search.html", "genindex.html", "py-modindex.html"}
SKIP_TAGS = {"pre", "code", "script", "style", "kbd", "samp", "textarea"}
MATH_CLASSES = {"math", "MathJax", "mjx-container"}
TEX_COMMAND = re.compile(r"\\[A-Za-z]{2,}")
DOLLAR = re.compile(r"(?<![\w])\$(?=[^\s\d])|(?<=[^\s])\$(?![\w])")
UNRESOLVED = re.compile(r"\?\?|\[missing\]")
REPR = re.compile(r"<Figure size|object at 0x[0-9a-f]+|<IPython\.|<matplotlib\.")
BAD_GLUE = {"", "nan", "null", "inf", "-inf"}  # compared lower-case; Python's None: below
REST = re.compile(r"``[^`\s](?:[^`]*[^`\s])?``|:(?:class|func|mod|meth|attr|data|exc|obj|ref|"
                  r"doc|term|math|numref|eq|cite(?::[a-z]+)?|py:[a-z]+):`")
MARKDOWN = re.compile(r"(?<![`:\w])`(?!`)[^`\n]+(?<!`)`(?!`)|\*\*[^*\s](?:[^*]*[^*\s])?\*\*")
DASH = re.compile(r"(?:(?<=\s)|^|(?<=[(\[`]))–[a-z][\w-]*")
#: MyST markup in a notebook's Markdown: a role (``{numref}`x```, ``{glue:text}`x```), a
#: directive's fence (```` ```{note} ````, ``:::{prf:proof}``), a target ``(label)=``, an
#: equation's label ``$$ (label)``
MYST = re.compile(r"\{[a-z][\w:+-]*\}`|^[ \t]*(?:`{3,}|:{3,})[ \t]*\{[a-z][\w:-]*\}"
                  r"|^[ \t]*\([^()\s]+\)=[ \t]*$|\$\$[ \t]*\([^()\s]+\)[ \t]*$", re.M)
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})[ \t]*(?P<info>.*)$")
MACHINE_PATH = re.compile(
    r"file://\S+|(?<![\w.~-])/(?:work|tmp|home|root|Users|private|mnt|scratch|var/folders)"
    r"(?:/[^\s'\"<>)\],;]*)?(?=[\s'\"<>)\],;:]|$)"
)


def _in_math_or_code(node: Tag | NavigableString) -> bool:
    for parent in node.parents:
        if not isinstance(parent, Tag):
            continue
        if parent.name in SKIP_TAGS or parent.name in ("math", "mjx-container", "svg"):
            return True
        classes = set(parent.get("class") or ())
        if classes & MATH_CLASSES:
            return True
        if "highlight" in classes or "cell_input" in classes:
            return True
    return False


def _in_input_or_script(node: Tag | NavigableString) -> bool:
    """Inside a cell's source, a script or a style: code the reader did not get from a run."""
    for parent in node.parents:
        if not isinstance(parent, Tag):
            continue
        if parent.name in ("script", "style"):
            return True
        classes = set(parent.get("class") or ())
        if "cell_input" in classes:
            return True
        if "cell_output" in classes:
            return False
        if parent.name in ("pre", "code") and not parent.find_parent(class_="cell_output"):
            return True  # a code example written in the page, not an output
    return False


def _build_folders(root: Path) -> list[str]:
    """The absolute build folder and the book's source folder (``…/_build/html`` → ``…``)."""
    html = root.resolve()
    folders = [str(html)]
    if html.name == "html" and html.parent.name == "_build":
        folders.append(str(html.parent.parent))
    return [f for f in folders if len(f) > 1]


def _paths(main: Tag, root: Path) -> Iterator[tuple[str, str]]:
    folders = _build_folders(root)
    for text in main.find_all(string=True):
        if not text.strip() or _in_input_or_script(text):
            continue
        s = str(text)
        m = MACHINE_PATH.search(s)
        if m is None:
            for folder in folders:
                i = s.find(folder)
                if i >= 0:
                    m = re.compile(re.escape(folder)).search(s, i)
                    break
        if m is not None:
            yield "path", _context(s, m)


def _context(text: str, match: re.Match[str], width: int = 40) -> str:
    a, b = max(0, match.start() - width), min(len(text), match.end() + width)
    return " ".join(text[a:b].split())


def check_page(path: Path, root: Path) -> Iterator[tuple[str, str]]:
    """Yield ``(kind, context)`` for every problem on the page at ``path``."""
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    main = soup.find("main") or soup.find("article") or soup.body or soup
    for text in main.find_all(string=True):
        if _in_math_or_code(text) or not text.strip():
            continue
        s = str(text)
        found = set()
        for pattern, kind in ((TEX_COMMAND, "tex"), (DOLLAR, "tex"), (UNRESOLVED, "ref"),
                              (REPR, "glue"), (REST, "rest"), (MARKDOWN, "markdown"),
                              (DASH, "dash")):
            m = pattern.search(s)
            if m and kind not in found:  # one report per text node and kind
                found.add(kind)
                yield kind, _context(s, m)
    yield from _paths(main, root)
    for node in main.select(".pending_xref, .xref.std-ref.missing"):
        yield "ref", node.get_text(" ", strip=True)[:80]
    for fig in main.select("figure, div.figure"):
        if not fig.find(("img", "svg", "table")):
            yield "figure", fig.get_text(" ", strip=True)[:80] or "(a figure with no image)"
    for img in main.find_all("img"):
        src = img.get("src") or ""
        if not src:
            yield "figure", "an <img> without src"
        elif not src.startswith(("data:", "http:", "https:")):
            target = (path.parent / src.split("#")[0].split("?")[0]).resolve()
            if not target.is_file():
                yield "figure", f"missing image file {src}"
    for out in main.select(".output.traceback, .output.error, .output.stderr, .stderr"):
        yield "error", out.get_text(" ", strip=True)[:120]
    for out in main.select(".cell_output pre, .output pre"):
        body = out.get_text()
        if "Traceback (most recent call last)" in body:
            yield "error", body.strip().splitlines()[-1][:120]
    for glued in main.select(".pasted-text, .pasted-inline"):
        value = glued.get_text(" ", strip=True)
        if value.lower() in BAD_GLUE or value == "None" or REPR.search(value):
            yield "glue", value or "(empty glued value)"
    for table in main.find_all("table"):
        if not table.find("td"):
            caption = table.find("caption")
            yield "table", caption.get_text(" ", strip=True)[:80] if caption else "(no caption)"


def _closes(m: re.Match[str], fence: str) -> bool:
    """Whether the fence line ``m`` closes a block opened by ``fence``."""
    return (not m.group("info").strip() and m.group("fence")[0] == fence[0]
            and len(m.group("fence")) >= len(fence))


def _outside_code(text: str) -> str:
    """Markdown without its code blocks (fences whose info string is not ``{directive}``),
    where MyST markup is shown literally; a bare fence that can close the innermost open
    directive closes it."""
    out: list[str] = []
    directives: list[str] = []  # the fences of the directives open here
    code = None  # the fence of the code block we are in
    for line in text.splitlines(keepends=True):
        m = FENCE.match(line)
        if code is not None:  # inside a code block only its closing fence counts
            code = None if m and _closes(m, code) else code
            continue
        if m and m.group("info").strip().startswith("{"):
            directives.append(m.group("fence"))
        elif m and directives and _closes(m, directives[-1]):
            directives.pop()
        elif m:
            code = m.group("fence")
            continue
        out.append(line)
    return "".join(out)


def check_notebook(path: Path) -> Iterator[tuple[str, str]]:
    """A downloadable notebook's Markdown cells that still hold MyST markup a reader's Jupyter
    shows raw: a role, a directive's fence, a target line or an equation label."""
    import json

    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    for i, cell in enumerate(cells):
        source = cell.get("source", "")
        text = _outside_code(source if isinstance(source, str) else "".join(source))
        found = MYST.findall(text) if cell.get("cell_type") == "markdown" else []
        if found:
            at = MYST.search(text).start()
            yield "notebook", f"cell {i}: {text[at:at + 60].strip()!r} ({len(found)} in it)"


def check_book(html_dir: Path) -> list[str]:
    """All problems of the book built in ``html_dir``, as printable lines."""
    pages = sorted(p for p in html_dir.rglob("*.html")
                   if p.name not in SKIP_PAGES and "_static" not in p.parts
                   and "_sources" not in p.parts)
    if not pages:
        return [f"{html_dir}: no pages found (build the book first: python3 dev.py book)"]
    lines = []
    for page in pages:
        rel = page.relative_to(html_dir)
        lines.extend(f"{rel}: {kind}: {context}" for kind, context in check_page(page, html_dir))
    for notebook in sorted((html_dir / "_sources").rglob("*.ipynb")):
        rel = notebook.relative_to(html_dir)
        lines.extend(f"{rel}: {kind}: {context}" for kind, context in check_notebook(notebook))
    return lines


def main(argv: list[str]) -> int:
    html_dir = Path(argv[1] if len(argv) > 1 else "_build/html")
    problems = check_book(html_dir)
    pages = sum(1 for _ in html_dir.rglob("*.html"))
    for line in problems:
        print(line)
    print(f"[check] {pages} pages checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
