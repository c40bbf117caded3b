"""Figures from run records: each figure of the book has one producer.

Every function takes records (the dicts of :mod:`gaugebook.engine.records`) or rows
derived from them, draws on a given ``ax`` (or a new figure) and returns the figure. Colours say
the gauge class of an optimizer: equivariant (blue) or coordinate-wise (orange), read from the
optimizer registry; the book's legends sit beside or below the axes (:func:`legend_beside`,
:func:`legend_below`). The tables, words and glue of a page (:func:`table_html`,
:func:`records_note`, :func:`glue_page`) are :mod:`gaugebook.present.tables`', shown here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gaugebook.present.prose import check_prose as check_prose
from gaugebook.present.tables import Record, finite
from gaugebook.present.tables import as_markdown as as_markdown
from gaugebook.present.tables import glue_page as glue_page
from gaugebook.present.tables import label as _label
from gaugebook.present.tables import records_note as records_note
from gaugebook.present.tables import table_html as table_html

EQUIVARIANT_COLOR = "#1f77b4"
COORDINATEWISE_COLOR = "#ff7f0e"


def class_color(method: str) -> str:
    """Blue for a gauge-equivariant optimizer, orange for a coordinate-wise one, grey else."""
    from gaugekit.optim.registry import get_spec

    try:
        return EQUIVARIANT_COLOR if get_spec(method).equivariant else COORDINATEWISE_COLOR
    except ValueError:
        return "0.5"


#: One colour per optimizer across the book (registry names; colour-blind-friendly: Okabe–Ito
#: first, then Tableau). Equivariant rules get the cool colours, coordinate-wise the warm ones.
METHOD_COLORS: dict[str, str] = {
    "gd": "#0072B2", "momentum": "#56B4E9", "scalar_adam": "#009E73", "muon": "#332288",
    "shampoo": "#1B1B1B", "scaled_gd": "#7570B3", "gram": "#117733", "eigen_adam": "#999933",
    "adam": "#D55E00", "rmsprop": "#E69F00", "lion": "#CC79A7", "signum": "#882255",
    "adafactor": "#AA4499", "flow_adam": "#661100", "adam_mini": "#225555",
}


#: The book's figure style (:func:`use_book_style`): figures sized for the text column (about
#: 7 inches at 100 dpi, drawn at twice the pixels for high-density screens), text no smaller
#: than 9 pt as rendered, legends without frames, no top and right spines.
BOOK_STYLE: dict[str, Any] = {
    "figure.figsize": (7.0, 3.4), "figure.dpi": 100, "savefig.dpi": 200,
    "figure.constrained_layout.use": True,
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "figure.titlesize": 11,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "legend.fontsize": 9,
    "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
    "lines.linewidth": 1.6, "lines.markersize": 5, "image.cmap": "viridis",
}


def use_book_style() -> None:
    """Apply :data:`BOOK_STYLE` to matplotlib and, inside IPython, show inline figures at twice
    the pixels (``retina``) so that they stay sharp on high-density screens."""
    plt.rcParams.update(BOOK_STYLE)
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not inside IPython: nothing more to set
        return
    set_matplotlib_formats("retina")


def method_color(method: str) -> str:
    """The book's colour of optimizer ``method`` (a registry name); grey for an unknown one."""
    return METHOD_COLORS.get(method, "0.5")


def class_legend(ax: Axes, extra: Sequence[Any] = (), **kwargs: Any) -> None:
    """A legend with the two gauge classes (plus ``extra`` handles)."""
    handles = [Patch(color=EQUIVARIANT_COLOR, label="gauge-equivariant"),
               Patch(color=COORDINATEWISE_COLOR, label="coordinate-wise"), *extra]
    ax.legend(handles=handles, **kwargs)


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is None:
        return plt.subplots(figsize=figsize, layout="constrained")
    return ax.figure, ax


def legend_beside(ax: Axes, *args: Any, **kwargs: Any) -> None:
    """The legend of ``ax`` (``args``: its handles and labels) to the right of the axes, top
    edges level."""
    ax.legend(*args, loc="upper left", bbox_to_anchor=(1.01, 1.0), **kwargs)


def legend_below(fig: Figure, *axes: Axes, handles: Sequence[Any] = (), ncol: int = 1) -> None:
    """One legend for the whole figure, under its axes (constrained layout makes room): the
    handles of ``axes`` (each label once, in order), then ``handles``."""
    found: dict[str, Any] = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(text, handle)
    fig.legend(handles=[*found.values(), *handles], loc="outside lower center", ncol=ncol)


def log_ticks(ax: Axes, values: Sequence[float]) -> None:
    """A log x axis with a tick labelled ``:g`` at each of ``values``, and no minor ticks."""
    ax.set_xscale("log")
    ax.set_xticks(list(values), [f"{v:g}" for v in values])
    ax.minorticks_off()


def recovery_bars(
    rows: Sequence[Mapping[str, Any]],
    *,
    metric: str = "rec",
    published: Mapping[str, float] | None = None,
    ax: Axes | None = None,
    log: bool = False,
    ylabel: str = "recovery error rec",
) -> Figure:
    """Bars of ``row[metric]`` per method (rows in order), coloured by gauge class.

    ``row[metric + "_seeds"]`` (if present) is drawn as dots, ``published[method]`` as a black
    diamond. ``log=True`` uses a log axis (values below 1e-6 are drawn at 1e-6).
    """
    fig, ax = _axes(ax, (7.0, 3.2))
    floor = 1e-6 if log else 0.0
    for i, row in enumerate(rows):
        method = row["method"]
        value = row.get(metric)
        if finite(value):
            ax.bar(i, max(float(value), floor), color=class_color(method), alpha=0.85)
        seeds = [v for v in row.get(f"{metric}_seeds", []) if finite(v)]
        ax.plot([i] * len(seeds), [max(float(v), floor) for v in seeds], "k.", ms=4)
        if published and method in published:
            ax.plot(i, max(published[method], floor), "kD", ms=5, mfc="white")
    ax.set_xticks(range(len(rows)), [_label(r["method"]) for r in rows], rotation=30,
                  ha="right")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    extra = [Line2D([], [], color="k", marker=".", ls="", label="each seed")]
    if published:
        extra.append(Line2D([], [], color="k", marker="D", mfc="white", ls="",
                            label="published"))
    class_legend(ax, extra, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def lr_sensitivity(
    records: Sequence[Record],
    *,
    metric: str = "rec",
    methods: Sequence[str] | None = None,
    ax: Axes | None = None,
    marks: Mapping[str, float] | None = None,
    log: bool = True,
    floor: float = 1e-6,
) -> Figure:
    """Mean ``metrics[metric]`` over seeds against ``lr`` (log axes), one line per method.

    Each method gets the book's colour (:func:`method_color`; use one call per gauge class to
    keep classes apart). A filled marker: every seed interpolated; hollow: some seed did not; an
    ``x`` at the top: some seed diverged. ``marks[method]`` (a selected lr) is circled. With
    ``log``, values below ``floor`` are drawn at ``floor``.
    """
    fig, ax = _axes(ax, (7.0, 3.6))
    grouped: dict[str, dict[float, list[Record]]] = {}
    for r in records:
        c = r["config"]
        grouped.setdefault(c["method"], {}).setdefault(c["hparams"]["lr"], []).append(r)
    order = list(methods) if methods is not None else list(grouped)
    top = 0.0
    diverged_at: dict[str, list[float]] = {}
    for method in order:
        by_lr = grouped.get(method, {})
        xs, ys, filled, diverged = [], [], [], []
        for lr, runs in sorted(by_lr.items()):
            if any(r["status"] != "ok" for r in runs):
                diverged.append(lr)
                continue
            values = [r["metrics"].get(metric) for r in runs]
            if not all(finite(v) for v in values):
                continue
            xs.append(lr)
            mean = sum(values) / len(values)
            ys.append(max(mean, floor) if log else mean)
            filled.append(all(r["metrics"].get("interpolated") for r in runs))
        color = method_color(method)
        ax.plot(xs, ys, "-", color=color, lw=1.2, label=_label(method))
        for x, y, f in zip(xs, ys, filled, strict=True):
            ax.plot(x, y, "o", color=color, mfc=color if f else "white", ms=5)
        if marks and method in marks and marks[method] in xs:
            ax.plot(marks[method], ys[xs.index(marks[method])], "o", ms=11, mfc="none", mec="k")
        top = max([top, *ys])
        diverged_at[method] = (diverged, color)
    for diverged, color in diverged_at.values():
        y_top = (top * 1.6 if log else top * 1.08) if top else 1.0
        ax.plot(diverged, [y_top] * len(diverged), "x", color=color, ms=6)
    ax.set(xscale="log", xlabel="learning rate", ylabel=f"mean {metric} over seeds")
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7, ncol=3)
    return fig


def training_curves(
    records: Sequence[Record],
    *,
    metric: str = "rec",
    ax: Axes | None = None,
    label: Callable[[Record], str] | None = None,
    log: bool = False,
    color_by: str = "class",
    annotate: bool = True,
) -> Figure:
    """``curves[metric]`` against ``curves["step"]`` for each record, coloured by gauge class
    (``color_by="class"``) or in the book's colour of each optimizer (``"method"``), each line
    labelled at its end (``annotate``; turn it off and use a legend when the ends crowd)."""
    fig, ax = _axes(ax, (7.0, 3.4))
    colour = method_color if color_by == "method" else class_color
    for r in records:
        curve = r.get("curves") or {}
        steps, values = curve.get("step", []), curve.get(metric, [])
        pts = [(s, v) for s, v in zip(steps, values, strict=False) if finite(v)]
        if not pts:
            continue
        method = r["config"]["method"]
        text = label(r) if label else _label(method)
        ax.plot(*zip(*pts, strict=True), color=colour(method), lw=1.2, label=text)
        if annotate:
            ax.annotate(text, pts[-1], fontsize=7, color=colour(method),
                        xytext=(3, 0), textcoords="offset points", va="center")
    ax.set(xlabel="optimizer steps", ylabel=metric)
    if log:
        ax.set_yscale("log")
    return fig


def scatter_metrics(
    records: Sequence[Record], x: str, y: str, *, ax: Axes | None = None, logx: bool = True
) -> Figure:
    """``metrics[x]`` against ``metrics[y]`` for every finished run, coloured by gauge class."""
    fig, ax = _axes(ax, (4.8, 3.6))
    for r in records:
        if r["status"] != "ok":
            continue
        vx, vy = r["metrics"].get(x), r["metrics"].get(y)
        if finite(vx) and finite(vy):
            ax.plot(vx, vy, "o", ms=3.5, alpha=0.7, color=class_color(r["config"]["method"]))
    if logx:
        ax.set_xscale("log")
    ax.set(xlabel=x, ylabel=y)
    class_legend(ax)
    return fig


def protocol_comparison(
    rows_by_protocol: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    metric: str = "rec",
    ax: Axes | None = None,
    floor: float = 1e-6,
) -> Figure:
    """One marker per (method, protocol): ``row[metric]`` of each protocol's selection, on a
    log axis (values below ``floor`` drawn at ``floor``)."""
    fig, ax = _axes(ax, (7.0, 3.2))
    markers = "osD^v"
    protocols = list(rows_by_protocol)
    methods = list(dict.fromkeys(r["method"] for rows in rows_by_protocol.values() for r in rows))
    width = 0.6 / max(len(protocols), 1)
    handles = []
    for j, protocol in enumerate(protocols):
        rows = {r["method"]: r for r in rows_by_protocol[protocol]}
        marker = markers[j % len(markers)]
        for i, method in enumerate(methods):
            value = rows.get(method, {}).get(metric)
            if finite(value):
                ax.plot(i - 0.3 + (j + 0.5) * width, max(float(value), floor), marker,
                        color=class_color(method), mec="k", mew=0.5, ms=6)
        handles.append(Line2D([], [], color="0.4", marker=marker, ls="", label=protocol))
    ax.set_xticks(range(len(methods)), [_label(m) for m in methods], rotation=30, ha="right")
    ax.set(ylabel=metric, yscale="log")
    class_legend(ax, handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


_MARKERS = "osD^vP*Xp<>h"


def value_curves(
    x: Sequence[float],
    values: Mapping[str, Sequence[float | None]],
    *,
    published: Mapping[str, Mapping[float, float]] | None = None,
    ax: Axes | None = None,
    log: bool = True,
    floor: float = 1e-7,
    ticks: Sequence[float] | None = None,
    xlabel: str = "n",
    ylabel: str = "recovery error rec",
    legend: bool = True,
) -> Figure:
    """One line per method of ``values[method][i]`` against ``x[i]`` (``None`` gaps skipped),
    in the book's colour of the method (:func:`method_color`) with one marker per method;
    ``published[method][x]`` as large hollow markers of the same method. ``log``: log axis,
    values below ``floor`` drawn at it; ``ticks``: the x ticks (default ``x``), so that sizes
    without values keep their place. ``legend=False`` leaves the legend to the caller (say
    one ``fig.legend`` for several panels); the legend's "published" entry shows the hollow
    markers actually drawn."""
    fig, ax = _axes(ax, (7.0, 3.6))
    hollow = []
    for i, (method, ys) in enumerate(values.items()):
        pts = [(xi, max(float(y), floor) if log else float(y))
               for xi, y in zip(x, ys, strict=True) if finite(y)]
        marker = _MARKERS[i % len(_MARKERS)]
        color = method_color(method)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker=marker, ms=4, lw=1.2, color=color,
                    label=_label(method))
        for xp, yp in (published or {}).get(method, {}).items():
            ax.plot(xp, max(yp, floor) if log else yp, marker=marker, ms=10, ls="",
                    mfc="none", mec=color, mew=1.5)
        if (published or {}).get(method):
            hollow.append(Line2D([], [], marker=marker, ms=7, ls="", mfc="none", mec=color,
                                 mew=1.2))
    ticks = list(ticks if ticks is not None else x)
    log_ticks(ax, ticks)
    if ticks:
        ax.set_xlim(min(ticks) / 1.15, max(ticks) * 1.15)
    if log:
        ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    if legend:
        handles, labels = ax.get_legend_handles_labels()
        if hollow:
            handles.append(tuple(hollow))
            labels.append("published")
        legend_beside(ax, handles, labels, fontsize=7,
                      handler_map={tuple: HandlerTuple(ndivide=None, pad=0.0)})
    return fig
