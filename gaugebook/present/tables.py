"""Tables, numbers and words of a page, and the glue that puts them there; no figures.

What every chapter module writes the same way lives here once, from the em dash of a missing
number (:func:`fmt`) to :func:`table_html`, :func:`records_note` and :func:`glue_page`. It
imports no plotting library, so that modules of numbers can use it without matplotlib;
:mod:`gaugebook.present.viz` shows the same names beside the figures.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: A run record (:mod:`gaugebook.engine.records`) and a row of a table, as the modules read them.
Record = Mapping[str, Any]
Row = Mapping[str, Any]
#: Joins the words of a table cell that should not wrap (:func:`table_html`).
NBSP = "\u00a0"


def label(method: str) -> str:
    """The display name of optimizer ``method`` (the registry's; the name itself if unknown)."""
    from gaugekit.optim.registry import get_spec

    try:
        return get_spec(method).label
    except ValueError:
        return method


def gauge_class(equivariant: bool) -> str:
    """``'equivariant'`` or ``'coordinate-wise'``: an optimizer's gauge class in a table."""
    return "equivariant" if equivariant else "coordinate-wise"


def _missing(x: Any) -> bool:
    """Whether ``x`` is a value a page shows as an em dash: ``None`` or a non-finite float."""
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def finite(x: Any) -> bool:
    """Whether ``x`` is a number a figure can draw (not ``None``, finite)."""
    return x is not None and math.isfinite(float(x))


def _short_e(x: float) -> str:
    """``3.3e-6``: one decimal, the exponent unpadded (a narrow cell does not wrap)."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


#: The book's named number styles (beside any format spec) for :func:`fmt`.
STYLES: dict[str, Callable[[float], str]] = {
    # a recovery error: four decimals, else 7.4e-06 (Table 2, the README)
    "rec": lambda x: f"{x:.4f}" if abs(x) >= 1e-3 else f"{x:.1e}",
    # three or four decimals, else 3.3e-6 (the ladder's narrow cells)
    "rec3": lambda x: f"{x:.3f}" if x >= 1e-3 else _short_e(x),
    "rec4": lambda x: f"{x:.4f}" if x >= 1e-3 else _short_e(x),
    # a fraction as a signed percentage: +43.0 %
    "pct": lambda x: f"{100 * x:+.1f} %",
    # a ratio: whole above 100, else two significant digits
    "ratio": lambda x: f"{x:.0f}" if abs(x) >= 100 else f"{x:.2g}",
}


def fmt(x: Any, spec: str = ".2e") -> str:
    """``x`` formatted with ``spec``, a format spec or a name of :data:`STYLES`; an em dash
    for ``None`` or a non-finite number. The one number format of the book's pages."""
    if _missing(x):
        return "—"
    return STYLES[spec](x) if spec in STYLES else format(x, spec)


def formatter(spec: str) -> Callable[[Any], str]:
    """:func:`fmt` with ``spec`` fixed, for a table column or a sentence helper."""
    return lambda x: fmt(x, spec)


def yes_no(flag: Any) -> str:
    """``'yes'`` / ``'no'`` for a flag in a table or a sentence (a dash for ``None``)."""
    return "—" if flag is None else ("yes" if flag else "no")


def rec_lr(rec: float | None, lr: float | None, mark: str = "") -> str | None:
    """A selection in one table cell, ``"0.1234*\u00a0(0.01)"``: its mean rec (``.4f``), a
    ``mark`` and its learning rate; ``None`` (the table's dash) without a rec."""
    return None if _missing(rec) else f"{rec:.4f}{mark}{NBSP}({lr:g})"


def value_text(value: Any) -> str:
    """A setting as a reader writes it: ``yes`` / ``no``, ``0.9 / 0.999`` for a tuple, ``1e-08``
    for a float, ``none``; anything else as ``str``."""
    if isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, tuple):
        return " / ".join(f"{x:g}" for x in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


def join_words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def wrapped(text: str, width: int = 77) -> str:
    """``text`` with its lines longer than ``width`` wrapped (continuations indented), for a
    page that prints it."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent="    ")
                      if len(line) > width else line for line in text.splitlines())


def table_html(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    headers: Mapping[str, str] | None = None,
    formats: Mapping[str, str | Callable[[Any], str]] | None = None,
) -> str:
    """An HTML table of ``rows`` (``columns`` in order); ``formats[col]`` is a format spec or a
    function; ``None`` and non-finite numbers show as an em dash. The table is set a little
    smaller than the text, in a box that scrolls sideways when it is still wider than the text
    column, instead of running over the page's margin (the box's class ``gb-scroll`` gives it,
    in the book's stylesheet, a fading edge on the side where more of the table lies). A cell
    with no space in it is one word and is never broken (a browser would otherwise break
    ``5.3e-6`` at its hyphen); a no-break space (:data:`NBSP`) joins words into one such cell
    (``"Lion\u00a05.3e-6"``)."""
    headers = headers or {}
    formats = formats or {}

    def cell(col: str, value: Any) -> str:
        spec = formats.get(col)
        if _missing(value):
            return "—"
        if callable(spec):
            return html.escape(spec(value))
        return html.escape(str(value) if spec is None else fmt(value, spec))

    pad = 'style="padding: 2px 6px"'
    one_word = 'style="padding: 2px 6px; white-space: nowrap"'

    def td(text: str) -> str:
        breaks = any(ch.isspace() and ch != NBSP for ch in text)
        return f"<td {pad if breaks else one_word}>{text}</td>"

    head = "".join(f"<th {pad}>{html.escape(headers.get(c, c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(td(cell(c, r.get(c))) for c in columns) + "</tr>" for r in rows
    )
    return (f'<div class="gb-scroll" style="overflow-x: auto"><table style="font-size: 0.85em">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def records_note(source: Any) -> Any:
    """Which records a page shows and the command that made them, as Markdown for the page.

    ``source`` is what a chapter's ``collect()`` returned (anything with ``note_markdown()``,
    such as :class:`gaugebook.engine.collection.Collected`, whose commands come as
    copy-pasteable code blocks) or a Markdown string. The result is an
    :class:`IPython.display.Markdown`: glue it (:func:`glue_page`) and paste it with the
    ``glue:md`` directive and ``:format: myst``, so the command shows as a code block, its
    ``--`` intact, instead of text between backticks.
    """
    from IPython.display import Markdown

    text = source.note_markdown() if hasattr(source, "note_markdown") else source
    if not isinstance(text, str):
        raise ValueError(
            f"Invalid source: {type(source).__name__}; expected a collected result with "
            f"note_markdown() or a Markdown string"
        )
    return Markdown(text)


def as_markdown(text: str) -> Any:
    """``text`` as an :class:`IPython.display.Markdown`, for ``{glue:md}``: words that a page
    pastes as ordinary text (IPython is imported only when called)."""
    from IPython.display import Markdown

    return Markdown(text)


def _is_scalar(value: Any) -> bool:
    """A numpy scalar or a 0-d numpy array or tensor, whose printed form (``np.int64(20000)``)
    a page could not format as a number."""
    return (type(value).__module__ in ("numpy", "torch")
            and getattr(value, "ndim", None) == 0 and hasattr(value, "item"))


def glue_page(values: Mapping[str, Any], prefix: str = "", *, markdown: bool = False) -> None:
    """Glue every ``name → value`` of a page (as ``prefix + name``) for ``{glue:text}``,
    ``{glue:md}`` and ``glue:figure``, without showing it (``display=False``).

    A string holding an HTML table (from :func:`table_html`) is glued as HTML, any other string
    as text (as Markdown with ``markdown``, for ``{glue:md}``); a matplotlib figure as the
    figure (then closed); a number as the number, for the page to format
    (``{glue:text}`name:.3f```); an IPython display object as it is. ``None``, a value this
    scale lacks, glues as a dash; a page that formats it as a number (``:.3f``) fails to build,
    so such a value is glued already formatted (:func:`fmt`: a dash where it is missing). This
    is the one glue helper of the book's pages."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, Markdown
    from matplotlib.figure import Figure
    from myst_nb import glue

    for name, value in values.items():
        if value is None:  # a value this scale lacks: a dash, never "None"
            value = "—"
        if _is_scalar(value):  # a numpy or torch scalar glues as the plain number it is
            value = value.item()
        if isinstance(value, str) and "<table" in value:
            value = HTML(value)
        elif isinstance(value, str) and markdown:
            value = Markdown(value)
        glue(prefix + name, value, display=False)
        log_glued(prefix + name, value)
        if isinstance(value, Figure):
            plt.close(value)


#: Where :func:`glue_page` logs what it glues (one JSON line per value, one file per kernel),
#: when this environment variable names a folder: ``.ci/compare_live_numbers.py`` reads two
#: builds' logs to show which numbers another numerical environment moves.
GLUE_LOG_ENV = "GAUGEBOOK_GLUE_LOG"


def log_glued(name: str, value: Any) -> None:
    """Append ``name`` and ``value`` to ``$GAUGEBOOK_GLUE_LOG/glue-<pid>.jsonl`` (nothing when
    the variable is unset): a number as its exact ``repr``, a string as itself (an HTML table
    as its SHA-256), anything else (a figure) by its type only."""
    import hashlib
    import json
    import os

    folder = os.environ.get(GLUE_LOG_ENV)
    if not folder:
        return
    text = getattr(value, "data", value)  # IPython's HTML and Markdown wrap a string
    if isinstance(value, int | float) and not isinstance(value, bool):
        entry = {"name": name, "number": repr(value)}
    elif isinstance(text, str) and len(text) > 200:
        entry = {"name": name, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    elif isinstance(text, str | bool):
        entry = {"name": name, "text": str(text)}
    else:
        entry = {"name": name, "type": type(value).__name__}
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"glue-{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def rate_grid_table(rows: Sequence[Mapping[str, Any]], loss: str) -> str:
    """One row per optimizer of a rate selection: every rate of its grid with the mean score of
    its selection seeds (``"diverged"`` when not finite), the chosen one in brackets, and whether
    the choice is at an edge of the grid. ``rows``: one per optimizer and rate, with ``method``,
    ``label``, ``lr``, ``mean_val_loss``, ``chosen`` and ``at_edge``; ``loss`` names the score
    in the header."""
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        row = by.setdefault(r["method"], {"optimizer": r["label"], "edge": yes_no(r["at_edge"]),
                                          "grid": []})
        text = "diverged" if not math.isfinite(r["mean_val_loss"]) else f"{r['mean_val_loss']:.3f}"
        row["grid"].append(f"{r['lr']:g}:{NBSP}" + (f"[{text}]" if r["chosen"] else text))
    out = [{**row, "grid": "  ".join(row["grid"])} for row in by.values()]
    return table_html(out, ["optimizer", "grid", "edge"],
                      headers={"grid": f"rate: {loss} ([chosen])", "edge": "chosen at an edge"})
