"""Figures of the dial sweep (chapter 5), in the style of :mod:`gaugekit.viz`.

Each function takes rows from :mod:`gaugekit.experiments.dial` (:func:`dial_rows`,
:func:`fixed_lr_table`, :func:`lr_edge_rows`), draws on a given ``ax`` (or a new figure) and
returns the figure. Filled markers: every seed reached the interpolation bar; hollow: some did
not (the value is measured at a larger training loss). Published values are drawn as black
crosses.
"""

# Developer note (layers, DESIGN.md): beside floor 3 (reads records, draws for the book).

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit._extras import require_extra

require_extra("gaugekit.viz_dial", "experiments", "matplotlib")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from gaugekit.viz import COORDINATEWISE_COLOR, EQUIVARIANT_COLOR, _axes, _finite

__all__ = ["SCALAR_COLORS", "dial_curve", "fixed_lr_heatmap", "lr_edge"]

#: ``'rms'`` (gauge-invariant at p = 0) in the equivariant blue, ``'geomean'`` in orange.
SCALAR_COLORS: dict[str, str] = {"rms": EQUIVARIANT_COLOR, "geomean": COORDINATEWISE_COLOR}
Row = Mapping[str, Any]


def dial_curve(
    rows_by_scalar: Mapping[str, Sequence[Row]],
    *,
    metric: str = "rec",
    reference: float | None = None,
    reference_label: str = "GD",
    planted: float | None = None,
    published: bool = True,
    ax: Axes | None = None,
) -> Figure:
    """``row[metric]`` of the selected lr against ``p``, one line per shared scalar, with seed
    standard deviations for ``rec``, a horizontal ``reference`` (GD) and ``planted`` (the
    planted rank, for ``effective_rank``) line, and the published values (``row["published"]``,
    rec only) as crosses."""
    fig, ax = _axes(ax, (5.6, 3.6))
    for scalar, rows in rows_by_scalar.items():
        color = SCALAR_COLORS.get(scalar, "0.4")
        xs = [r["p"] for r in rows if _finite(r.get(metric))]
        ys = [r[metric] for r in rows if _finite(r.get(metric))]
        ax.plot(xs, ys, "-", color=color, lw=1.3, label=f"'{scalar}' (ours)")
        for r in rows:
            if not _finite(r.get(metric)):
                continue
            filled = bool(r.get("all_interpolated"))
            sd = r.get("rec_sd") if metric == "rec" else None
            ax.errorbar(r["p"], r[metric], yerr=sd if _finite(sd) else None, fmt="o",
                        color=color, mfc=color if filled else "white", ms=6, capsize=3)
        if published and metric == "rec":
            pub = [(r["p"], r["published"]) for r in rows if _finite(r.get("published"))]
            if pub:
                ax.plot(*zip(*pub, strict=True), "x", color=color, mec="k", ms=7, mew=1.5,
                        label=f"'{scalar}' (published)")
    if reference is not None and _finite(reference):
        ax.axhline(reference, color="0.3", ls="--", lw=1, label=reference_label)
    if planted is not None:
        ax.axhline(planted, color="0.3", ls=":", lw=1, label="planted rank")
    ax.set_xlabel("dial $p$ (0: shared scale, 1: Adam)")
    ax.set_ylabel({"rec": "recovery error rec", "effective_rank": "effective rank"}.get(
        metric, metric))
    ax.invert_xaxis()
    ax.legend(fontsize=7)
    return fig


def fixed_lr_heatmap(table: Mapping[str, Any], *, key: str = "rec",
                     ax: Axes | None = None, cmap: str = "viridis") -> Figure:
    """The fixed-lr arm as a heat map: ``table[key][i][j]`` at lr ``i`` (rows) and ``p`` ``j``
    (columns, 1 to 0), each cell annotated; a cell where some seed missed the bar is hatched.
    Lrs where the values fall monotonically in ``p`` are marked ``✓`` on the right."""
    fig, ax = _axes(ax, (5.6, 3.6))
    values = table[key]
    lrs, powers = table["lrs"], table["powers"]
    finite = [v for row in values for v in row if _finite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    im = ax.imshow(values, cmap=cmap, aspect="auto", vmin=lo, vmax=hi)
    for i in range(len(lrs)):
        for j in range(len(powers)):
            v = values[i][j]
            if not _finite(v):
                continue
            light = (v - lo) / (hi - lo + 1e-300) < 0.5
            ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=7,
                    color="white" if light else "black")
            if not table["interpolated"][i][j]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//",
                                           ec="0.8", lw=0))
    mono = table.get(f"monotone_{key}" if key != "rec" else "monotone_rec")
    ax.set_xticks(range(len(powers)), [f"{p:g}" for p in powers])
    ax.set_yticks(range(len(lrs)), [f"{lr:g}" + ("  ✓" if mono and mono[i] else "")
                                     for i, lr in enumerate(lrs)])
    ax.set_xlabel("dial $p$")
    ax.set_ylabel("learning rate (✓: monotone in p)")
    fig.colorbar(im, ax=ax, label={"rec": "mean rec", "effective_rank": "mean effective rank"}
                 .get(key, key))
    return fig


def lr_edge(rows: Sequence[Row], *, published: Mapping[str, float] | None = None,
            reference: float | None = None, ax: Axes | None = None) -> Figure:
    """Mean rec ± sd over seeds against lr, one line per ``p``; hollow where some seed missed
    the bar; ``published`` (``{"p", "lr", "rec", "rec_sd"}``) as a cross with its error bar;
    ``reference`` (GD) as a dashed line."""
    fig, ax = _axes(ax, (5.6, 3.6))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    powers = sorted({r["p"] for r in rows}, reverse=True)
    for index, p in enumerate(powers):
        color = {1.0: COORDINATEWISE_COLOR, 0.0: EQUIVARIANT_COLOR}.get(p, palette[index + 2])
        mine = [r for r in rows if r["p"] == p and _finite(r["rec"])]
        ax.plot([r["lr"] for r in mine], [r["rec"] for r in mine], "-", color=color, lw=1.2,
                label=f"$p = {p:g}$")
        for r in mine:
            full = r["interpolated"] == r["seeds"]
            ax.errorbar(r["lr"], r["rec"], yerr=r["rec_sd"] if _finite(r["rec_sd"]) else None,
                        fmt="o", color=color, mfc=color if full else "white", ms=6, capsize=3)
    if published:
        ax.errorbar(published["lr"], published["rec"], yerr=published.get("rec_sd"), fmt="x",
                    color="k", ms=8, mew=1.5, capsize=3,
                    label=f"published, $p = {published['p']:g}$")
    if reference is not None and _finite(reference):
        ax.axhline(reference, color="0.3", ls="--", lw=1, label="GD")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("mean rec over seeds (± sd)")
    ax.legend(fontsize=7)
    return fig
