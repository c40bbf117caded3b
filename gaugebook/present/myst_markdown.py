"""MyST Markdown as the Markdown a reader's Jupyter renders, written the way the page shows it.

A chapter's prose is MyST: roles (``{numref}`tab-x```, ``{ref}``, ``{eq}``, ``{prf:ref}``,
``{doc}``, ``{cite:p}``, ``{math}``, ``{py:class}`` …), directives fenced by backticks or colons
(``prf:lemma``, ``prf:proof``, ``exercise``, ``solution``, ``dropdown``, ``note`` …, nested),
labelled equations (``$$ … $$ (label)``), targets (``(label)=``) and definition lists. Jupyter
shows all of it as raw text. :func:`myst_notebook` rewrites a notebook's Markdown cells:

- a reference becomes the text the page shows ("Table 11.2", "(1.2)", "Lemma 1.1", a section's
  title), a Markdown link to the published page when the target is on another page;
- a citation becomes the page's rendered citation ("Singh [2026]"), matched in order (the n-th
  ``{cite}`` of the notebook is the n-th citation of the page); when the page's citations do
  not match the notebook's, ``[key]``;
- a statement or exercise becomes a bold heading with its number ("**Lemma 1.1** (title)")
  and its body; a solution or dropdown a ``<details>`` block; an admonition a block quote
  with a bold title; a labelled equation gets its number as ``\\tag``; targets are dropped,
  as are directive options; a definition list becomes a bullet list with bold terms.

What the page shows is read from the built HTML (:mod:`gaugebook.present.book_html`) and
passed in as :class:`PageView`. Markup it cannot resolve (an unknown role or directive, a label
no page defines) is a :class:`MystError` naming the page and the markup.
"""

from __future__ import annotations

import copy
import html
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gaugebook.present.book_html import Citation, Target

#: a MyST role: ``{name}`content```
ROLE = re.compile(r"\{(?P<name>[a-z][\w:+-]*)\}`(?P<content>[^`]*)`")
#: a fence's opening line: backticks or colons, then the info string
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})[ \t]*(?P<info>.*?)[ \t]*$")
#: the info string of a directive: ``{name} argument``
DIRECTIVE = re.compile(r"^\{(?P<name>[a-z][\w:-]*)\}[ \t]*(?P<arg>.*)$")
#: what is left of MyST markup in a text (a role, or a directive's fence)
LEFT = re.compile(r"\{[a-z][\w:+-]*\}`|^[ \t]*(?:`{3,}|:{3,})[ \t]*\{[a-z][\w:-]*\}", re.M)
#: a target line: ``(label)=``
TARGET_LINE = re.compile(r"^[ \t]*\([^()\s]+\)=[ \t]*$")
#: a labelled display equation's closing: ``$$ (label)``
MATH_LABEL = re.compile(r"(?P<pre>.*?)\$\$[ \t]*\((?P<label>[^()\s]+)\)[ \t]*$")
OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):[ \t]*(?P<value>.*?)[ \t]*$")
ADMONITIONS = {"note": "Note", "warning": "Warning", "tip": "Tip", "hint": "Hint",
               "important": "Important", "caution": "Caution", "attention": "Attention",
               "danger": "Danger", "error": "Error", "seealso": "See also", "admonition": "",
               "margin": "", "sidebar": "", "topic": ""}
CODE_DIRECTIVES = {"code", "code-block", "sourcecode"}
#: roles of Python objects (the book's default domain is py)
PY_ROLES = {"class", "func", "meth", "mod", "attr", "obj", "data", "exc", "const"}
CITE_ROLES = {"cite", "cite:p", "cite:t", "cite:ps", "cite:ts", "cite:ct", "cite:cp",
              "cite:alp", "cite:al", "cite:author", "cite:year", "cite:yearpar", "cite:label",
              "cite:text", "cite:empty"}


class MystError(ValueError):
    """MyST markup of a page that cannot be written as the page shows it."""


@dataclass(frozen=True)
class PageView:
    """What resolving one page's markup needs from the built book.

    ``targets``: every labelled place of the book (``label → Target``); ``docs``: each page's
    title and address (``"book/results" → Target``); ``citations``: the page's rendered
    citations in order; ``toc``: its table of contents as Markdown."""

    page: str
    targets: Mapping[str, Target]
    docs: Mapping[str, Target] = field(default_factory=dict)
    citations: Sequence[Citation] = ()
    toc: str = ""


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def normalize(label: str) -> str:
    """A label as docutils writes it into an id (``tab_zoo`` → ``tab-zoo``)."""
    return re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-")


def split_explicit(content: str) -> tuple[str, str]:
    """``text <target>`` → ``(text, target)``; ``target`` → ``("", target)``."""
    match = re.fullmatch(r"\s*(?P<text>.*?)\s*<(?P<target>[^<>]+)>\s*", content, re.S)
    if match and match.group("text"):
        return match.group("text"), match.group("target").strip()
    return "", content.strip()


class _Resolver:
    """Resolves the markup of one page; collects what it cannot resolve."""

    def __init__(self, view: PageView, cite_keys: Sequence[list[str]]) -> None:
        self.view = view
        self.errors: list[str] = []
        self.unmatched_citations = 0
        self.citations = list(view.citations)
        self.cite_ok = ([c.works for c in self.citations] == [len(k) for k in cite_keys])
        self.cite_index = 0

    def fail(self, what: str, why: str) -> str:
        self.errors.append(f"{what} ({why})")
        return what

    def target(self, label: str, markup: str) -> Target | None:
        found = self.view.targets.get(label) or self.view.targets.get(normalize(label))
        if found is None:
            self.fail(markup, f"no page of the book defines the label {label!r}")
        return found

    def link(self, text: str, target: Target) -> str:
        if target.page == self.view.page:
            return text
        return f"[{text}]({target.url})"

    # -- roles -----------------------------------------------------------------------------

    def role(self, match: re.Match[str]) -> str:
        name, content, markup = match.group("name"), match.group("content"), match.group(0)
        handler = self.roles().get(name)
        if handler is None and name.removeprefix("py:") in PY_ROLES:
            handler = self.py_role
        if handler is None:
            return self.fail(markup, f"unknown role {{{name}}}")
        return handler(name, content, markup)

    def roles(self) -> dict[str, Callable[[str, str, str], str]]:
        ref = self.ref_role
        return {"numref": ref, "ref": ref, "eq": ref, "prf:ref": ref, "doc": self.doc_role,
                "math": lambda _n, c, _m: f"${c}$", "index": self.index_role,
                "abbr": lambda _n, c, _m: re.sub(r"\s*\([^()]*\)\s*$", "", c),
                "sub": lambda _n, c, _m: f"<sub>{c}</sub>",
                "sup": lambda _n, c, _m: f"<sup>{c}</sup>",
                **dict.fromkeys(CITE_ROLES, self.cite_role)}

    def ref_role(self, name: str, content: str, markup: str) -> str:
        text, label = split_explicit(content)
        target = self.target(label, markup)
        if target is None:
            return markup
        if name == "numref":
            shown = (text.replace("%s", target.number).replace("{number}", target.number)
                     .replace("{name}", target.title) if text else target.shown)
        elif name == "ref":  # a statement's or exercise's {ref} reads as its number
            shown = text or (target.shown if target.kind == "statement" else target.title)
        else:  # eq, prf:ref
            shown = text or target.shown
        if not shown:
            return self.fail(markup, f"the page shows no {'number' if name != 'ref' else 'title'}"
                             f" for {label!r}")
        return self.link(shown, target)

    def doc_role(self, _name: str, content: str, markup: str) -> str:
        text, path = split_explicit(content)
        path = path.removesuffix(".md").removesuffix(".ipynb")
        page = (path.lstrip("/") if path.startswith("/")
                else posixpath.normpath(posixpath.join(posixpath.dirname(self.view.page), path)))
        doc = self.view.docs.get(page)
        if doc is None:
            return self.fail(markup, f"no page {page!r} in the book")
        return self.link(text or doc.title, doc)

    def py_role(self, name: str, content: str, markup: str) -> str:
        text, path = split_explicit(content)
        short = path.startswith("~")
        path = path.lstrip("~.")
        target = self.target(path, markup)
        if target is None:
            return markup
        shown = text or (path.rsplit(".", 1)[-1] if short else path)
        if not text and name.removeprefix("py:") in ("func", "meth"):
            shown += "()"
        return self.link(f"`{shown}`", target)

    def index_role(self, _name: str, content: str, _markup: str) -> str:
        text, target = split_explicit(content)
        return text or target.lstrip("!")

    def cite_role(self, _name: str, content: str, markup: str) -> str:
        keys = [key.strip() for key in content.split(",")]
        if self.cite_ok and self.cite_index < len(self.citations):
            self.cite_index += 1
            return self.citations[self.cite_index - 1].markdown
        self.unmatched_citations += 1
        return "[" + ", ".join(keys) + "]"

    # -- text ------------------------------------------------------------------------------

    def prose(self, text: str) -> str:
        """Markdown outside fences: targets dropped, equations numbered, definition lists as
        bullet lists, roles resolved."""
        lines = [line for line in _lines(text) if not TARGET_LINE.match(line.rstrip("\n"))]
        lines = deflist_to_bullets([self.math_label(line) for line in lines])
        return ROLE.sub(self.role, "".join(lines))

    def math_label(self, line: str) -> str:
        match = MATH_LABEL.match(line.rstrip("\n"))
        if match is None:
            return line
        label = match.group("label")
        target = self.target(label, f"$$ ({label})")
        tag = f"\\tag{{{target.number}}}" if target and target.number else ""
        end = "\n" if line.endswith("\n") else ""
        pre = match.group("pre")
        if pre.strip():
            return f"{pre} {tag} $$" + end
        return (f"{pre}{tag}\n" if tag else "") + f"{pre}$$" + end


def deflist_to_bullets(lines: list[str]) -> list[str]:
    """MyST definition lists (a term line, then ``: definition``) as bullets with bold terms."""
    out: list[str] = []
    for i, line in enumerate(lines):
        term_ok = (i >= 1 and lines[i - 1].strip() and not lines[i - 1].startswith(" ")
                   and (i == 1 or not lines[i - 2].strip()))
        if line.startswith(": ") and term_ok and out and out[-1] == lines[i - 1]:
            term = out.pop().strip()
            out.append(f"- **{term}**: {line[2:]}")
        else:
            out.append(line)
    return out


def _closing(lines: list[str], start: int, fence: str) -> int | None:
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    return next((j for j in range(start, len(lines)) if closing.match(lines[j])), None)


def _options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's options (``:key: value`` lines, or a ``---`` block) and the rest."""
    options: dict[str, str] = {}
    rest = list(body)
    if rest and rest[0].strip() == "---":
        end = next((j for j in range(1, len(rest)) if rest[j].strip() == "---"), None)
        if end is not None:
            for line in rest[1:end]:
                key, _, value = line.partition(":")
                options[key.strip()] = value.strip()
            rest = rest[end + 1:]
    while rest and (match := OPTION.match(rest[0].rstrip("\n"))):
        options[match.group("key")] = match.group("value")
        rest.pop(0)
    while rest and not rest[0].strip():
        rest.pop(0)
    return options, rest


def _dedent(lines: list[str], indent: str) -> list[str]:
    return [line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")
            for line in lines]


def _quote(text: str) -> str:
    return "".join(f"> {line}" if line.strip() else ">\n" for line in _lines(text + "\n"))


def _details(summary: str, body: str, *, is_open: bool = False) -> str:
    attribute = " open" if is_open else ""
    return f"<details{attribute}><summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _headed(heading: str, title: str, body: str) -> str:
    title = f" ({title})" if title else ""
    return f"**{heading}**{title}\n\n{body.strip()}"


class _Markdown(_Resolver):
    """Block structure: fences found, directives rendered, prose handed to :meth:`prose`."""

    def markdown(self, text: str) -> str:
        lines = _lines(text)
        out: list[str] = []
        prose: list[str] = []
        i = 0
        while i < len(lines):
            match = FENCE.match(lines[i].rstrip("\n"))
            if match is None:
                prose.append(lines[i])
                i += 1
                continue
            out.append(self.prose("".join(prose)))
            prose = []
            end = _closing(lines, i + 1, match.group("fence"))
            directive = DIRECTIVE.match(match.group("info"))
            if directive is None:  # a code block: left as it is
                stop = len(lines) if end is None else end + 1
                out.extend(lines[i:stop])
                i = stop
                continue
            if end is None:
                self.fail(lines[i].strip(), "the directive is not closed")
                out.extend(lines[i:])
                break
            body = _dedent(lines[i + 1:end], match.group("indent"))
            rendered = self.directive(directive.group("name"), directive.group("arg"), body,
                                      lines[i].strip())
            indent = match.group("indent")
            out.extend(indent + line if line.strip() else line
                       for line in _lines(rendered.rstrip("\n") + "\n"))
            i = end + 1
        out.append(self.prose("".join(prose)))
        return "".join(out)

    def directive(self, name: str, arg: str, body: list[str], markup: str) -> str:
        options, rest = _options(body)
        title = self.prose(arg).strip()
        if name in CODE_DIRECTIVES:
            return f"```{arg.strip()}\n{''.join(rest).rstrip()}\n```"
        content = self.markdown("".join(rest)).strip()
        dropdown = "dropdown" in options.get("class", "").split()
        if name == "prf:proof":
            return self.shown_as(dropdown, "Proof.", "", content + "\n\n∎")
        if name.startswith("prf:") or name == "exercise":
            return self.statement(name, title, options, content, markup, dropdown)
        if name == "solution":
            return self.solution(arg.strip(), options, content, markup, dropdown)
        if name == "dropdown":
            return _details(title or "Details", content, is_open="open" in options)
        if name in ADMONITIONS:
            return self.admonition(name, title, content, dropdown)
        if name == "container":
            return content
        if name == "index":
            return ""
        if name == "raw" and arg.strip() == "html":
            return "".join(rest).strip()
        if name == "math":
            return self.display_math(options, "".join(rest), markup)
        if name == "tableofcontents":
            return self.view.toc or self.fail(markup, "the page shows no table of contents")
        why = "glue markup left" if name.startswith("glue") else f"unknown directive {{{name}}}"
        return self.fail(markup, why)

    def shown_as(self, dropdown: bool, heading: str, title: str, content: str) -> str:
        if dropdown:
            summary = html.escape(heading) + (f" ({title})" if title else "")
            return _details(summary, content)
        return _headed(heading, title, content)

    def statement(self, name: str, title: str, options: Mapping[str, str], content: str,
                  markup: str, dropdown: bool) -> str:
        kind = name.removeprefix("prf:").capitalize()
        if "nonumber" in options:
            return self.shown_as(dropdown, kind, title, content)
        label = options.get("label")
        target = self.target(label, markup) if label else None
        if target is None:
            if not label:
                self.fail(markup, "a numbered statement without a :label: (its number cannot "
                                  "be read from the page)")
            return self.shown_as(dropdown, kind, title, content)
        return self.shown_as(dropdown, target.shown, title, content)

    def solution(self, label: str, options: Mapping[str, str], content: str, markup: str,
                 dropdown: bool) -> str:
        target = self.target(label, markup)
        heading = f"Solution to {target.shown}" if target else "Solution"
        return self.shown_as(dropdown, heading, target.title if target else "", content)

    def admonition(self, name: str, title: str, content: str, dropdown: bool) -> str:
        heading = ADMONITIONS[name]
        if not heading:  # the generic admonition: its argument is its title
            heading, title = title or name.capitalize(), ""
        elif title:  # a note's argument is its first line
            content = f"{title}\n\n{content}"
        if dropdown:
            return _details(html.escape(heading), content)
        return _quote(f"**{heading}**\n\n{content}")

    def display_math(self, options: Mapping[str, str], tex: str, markup: str) -> str:
        label = options.get("label")
        tag = ""
        if label:
            target = self.target(label, markup)
            tag = f"\n\\tag{{{target.number}}}" if target and target.number else ""
        return f"$$\n{tex.strip()}{tag}\n$$"


def cite_keys(notebook: Mapping[str, Any]) -> list[list[str]]:
    """The keys of each ``{cite…}`` role of ``notebook``'s Markdown cells, in order."""
    out = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for match in ROLE.finditer(_text(cell.get("source", ""))):
                if match.group("name") in CITE_ROLES:
                    out.append([k.strip() for k in match.group("content").split(",")])
    return out


def outside_code(text: str) -> str:
    """``text`` without its code blocks (fences whose info string is not a directive's), where
    MyST markup is shown literally, on the page as in the notebook. A bare fence that can close
    the innermost open directive closes it."""
    lines = _lines(text)
    out: list[str] = []
    directives: list[str] = []  # the fences of the directives open here
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].rstrip("\n"))
        fence = match.group("fence") if match else ""
        if match is None or DIRECTIVE.match(match.group("info")):
            directives += [fence] if match else []
        elif (not match.group("info") and directives and fence[0] == directives[-1][0]
              and len(fence) >= len(directives[-1])):
            directives.pop()
        else:  # a code block: left out up to its closing fence
            end = _closing(lines, i + 1, fence)
            i = len(lines) if end is None else end + 1
            continue
        out.append(lines[i])
        i += 1
    return "".join(out)


def count_left(notebook: Mapping[str, Any]) -> int:
    """How much MyST markup (roles and directive fences, outside code blocks) ``notebook``'s
    Markdown holds."""
    return sum(len(LEFT.findall(outside_code(_text(c.get("source", "")))))
               for c in notebook.get("cells", []) if c.get("cell_type") == "markdown")


def myst_notebook(notebook: Mapping[str, Any], view: PageView) -> tuple[dict[str, Any], int]:
    """A copy of ``notebook`` whose Markdown cells carry no MyST markup, written as the page
    ``view`` shows it (see the module docstring), and the number of citations written as
    ``[key]`` because the page's citations did not match. Raises :class:`MystError` naming the
    page and every piece of markup it cannot resolve."""
    resolver = _Markdown(view, cite_keys(notebook))
    out = copy.deepcopy(dict(notebook))
    for cell in out.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        source = _text(cell.get("source", ""))
        text = resolver.markdown(source)
        if text != source:
            cell["source"] = _lines(text)
    if resolver.errors:
        raise MystError(f"{view.page}: cannot resolve " + "; ".join(resolver.errors))
    return out, resolver.unmatched_citations
