"""Figures and tables of the dial and FlowAdam chapter (chapter 5), in the style of
:mod:`gaugebook.present.viz`.

Each figure function takes rows from :mod:`gaugebook.dial.dial_summary` (:func:`dial_rows`,
:func:`fixed_lr_table`, :func:`lr_edge_rows`) or the ablation's columns
(:mod:`gaugebook.dial.flow_summary`) and returns the figure. Filled markers: every seed
reached the interpolation bar; hollow: some did not (the value is measured at a larger training
loss). Published values are drawn as black crosses; a value of the dial ``p`` has the colour of
:func:`power_color`. The ``*_html`` functions give the chapter's tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure

from gaugebook.dial import flow_runs as fx
from gaugebook.dial import flow_summary as fn
from gaugebook.present.tables import Row, finite, table_html
from gaugebook.present.viz import (
    COORDINATEWISE_COLOR,
    EQUIVARIANT_COLOR,
    _axes,
    legend_below,
    legend_beside,
    log_ticks,
    method_color,
)

#: ``'rms'`` (gauge-invariant at p = 0) in the equivariant blue, ``'geomean'`` in orange.
SCALAR_COLORS: dict[str, str] = {"rms": EQUIVARIANT_COLOR, "geomean": COORDINATEWISE_COLOR}


def _dial_panel(ax: Axes, rows_by_scalar: Mapping[str, Sequence[Row]], metric: str,
                reference: float, planted: float | None = None) -> None:
    """``row[metric]`` of the selected lr against ``p`` on ``ax``, one line per shared scalar,
    with seed standard deviations for ``rec``, a horizontal ``reference`` (GD) and ``planted``
    (the planted rank, for ``effective_rank``) line, and the published values
    (``row["published"]``, rec only) as crosses."""
    for scalar, rows in rows_by_scalar.items():
        color = SCALAR_COLORS.get(scalar, "0.4")
        xs = [r["p"] for r in rows if finite(r.get(metric))]
        ys = [r[metric] for r in rows if finite(r.get(metric))]
        ax.plot(xs, ys, "-", color=color, lw=1.3, label=f"'{scalar}' (ours)")
        for r in rows:
            if not finite(r.get(metric)):
                continue
            filled = bool(r.get("all_interpolated"))
            sd = r.get("rec_sd") if metric == "rec" else None
            ax.errorbar(r["p"], r[metric], yerr=sd if finite(sd) else None, fmt="o",
                        color=color, mfc=color if filled else "white", ms=6, capsize=3)
        if metric == "rec":
            pub = [(r["p"], r["published"]) for r in rows if finite(r.get("published"))]
            if pub:
                ax.plot(*zip(*pub, strict=True), "x", color=color, mec="k", ms=7, mew=1.5,
                        label=f"'{scalar}' (published)")
    if finite(reference):
        ax.axhline(reference, color="0.3", ls="--", lw=1, label="GD")
    if planted is not None:
        ax.axhline(planted, color="0.3", ls=":", lw=1, label="planted rank")
    ax.set_xlabel("dial $p$ (0: shared scale, 1: Adam)")
    ax.set_ylabel({"rec": "recovery error rec", "effective_rank": "effective rank"}[metric])
    ax.invert_xaxis()


def fixed_lr_heatmap(table: Mapping[str, Any], *, ax: Axes | None = None) -> Figure:
    """The fixed-lr arm as a heat map: mean rec ``table["rec"][i][j]`` at lr ``i`` (rows) and
    ``p`` ``j`` (columns, 1 to 0), each cell annotated; a cell where some seed missed the bar
    is hatched. Lrs where rec falls monotonically in ``p`` are marked ``✓`` on the right."""
    fig, ax = _axes(ax, (7.0, 3.6))
    values = table["rec"]
    lrs, powers = table["lrs"], table["powers"]
    shown = [v for row in values for v in row if finite(v)]
    lo, hi = (min(shown), max(shown)) if shown else (0.0, 1.0)
    im = ax.imshow(values, cmap="viridis", aspect="auto", vmin=lo, vmax=hi)
    for i in range(len(lrs)):
        for j in range(len(powers)):
            v = values[i][j]
            if not finite(v):
                continue
            light = (v - lo) / (hi - lo + 1e-300) < 0.5
            ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=8,
                    color="white" if light else "black")
            if not table["interpolated"][i][j]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//",
                                           ec="0.8", lw=0))
    ax.set_xticks(range(len(powers)), [f"{p:g}" for p in powers])
    ax.set_yticks(range(len(lrs)), [f"{lr:g}" + ("  ✓" if table["monotone_rec"][i] else "")
                                     for i, lr in enumerate(lrs)])
    ax.set_xlabel("dial $p$")
    ax.set_ylabel("learning rate (✓: monotone in p)")
    fig.colorbar(im, ax=ax, label="mean rec")
    return fig


def lr_edge(rows: Sequence[Row], *, published: Mapping[str, float] | None = None,
            reference: float | None = None, ax: Axes | None = None) -> Figure:
    """Mean rec ± sd over seeds against lr, one line per ``p`` (:func:`power_color`); hollow
    where some seed missed the bar; ``published`` (``{"p", "lr", "rec", "rec_sd"}``) as a cross
    with its error bar; ``reference`` (GD) as a dashed line."""
    fig, ax = _axes(ax, (7.0, 3.6))
    for p in sorted({r["p"] for r in rows}, reverse=True):
        color = power_color(p)
        mine = [r for r in rows if r["p"] == p and finite(r["rec"])]
        ax.plot([r["lr"] for r in mine], [r["rec"] for r in mine], "-", color=color, lw=1.2,
                label=f"$p = {p:g}$")
        for r in mine:
            full = r["interpolated"] == r["seeds"]
            ax.errorbar(r["lr"], r["rec"], yerr=r["rec_sd"] if finite(r["rec_sd"]) else None,
                        fmt="o", color=color, mfc=color if full else "white", ms=6, capsize=3)
    if published:
        ax.errorbar(published["lr"], published["rec"], yerr=published.get("rec_sd"), fmt="x",
                    color="k", ms=8, mew=1.5, capsize=3,
                    label=f"published, $p = {published['p']:g}$")
    if finite(reference):
        ax.axhline(reference, color="0.3", ls="--", lw=1, label="GD")
    log_ticks(ax, sorted({r["lr"] for r in rows}))
    ax.set_xlabel("learning rate")
    ax.set_ylabel("mean rec over seeds (± sd)")
    legend_beside(ax)
    return fig


def power_color(p: float) -> str:
    """The colour of dial value ``p``: shared-scale Adam's at ``p = 0``, Adam's at ``p = 1``
    (:func:`gaugebook.present.viz.method_color`), blended linearly between."""
    a, b = to_rgb(method_color("scalar_adam")), to_rgb(method_color("adam"))
    t = min(max(float(p), 0.0), 1.0)
    return to_hex(tuple((1 - t) * x + t * y for x, y in zip(a, b, strict=True)))


def spread_cdf(log_steps: Mapping[float, Any], *, ax: Axes | None = None) -> Figure:
    """Empirical CDF of ``log₁₀`` of the per-entry learning rate at each ``p`` (the output of
    :func:`gaugebook.dial.flow_runs.per_entry_log_lr`), the ends drawn thicker, the
    legend beside the axes."""
    fig, ax = _axes(ax, (7.0, 3.4))
    for p, values in log_steps.items():
        v = torch.sort(values).values
        cdf = torch.arange(1, v.numel() + 1, dtype=torch.float64) / v.numel()
        ax.plot(v, cdf, color=power_color(p), label=f"$p = {p:g}$",
                lw=2.2 if p in (0.0, 1.0) else 1.3)
    ax.set_xlabel(r"$\log_{10}$ per-entry learning rate")
    ax.set_ylabel("fraction of entries")
    legend_beside(ax)
    return fig


def gauge_residuals(powers: Sequence[float], residuals: Mapping[str, Sequence[float]],
                    threshold: float, *, ax: Axes | None = None) -> Figure:
    """The dial's audit residual against ``p`` (log–log; ``p = 0`` drawn a decade left of the
    smallest positive ``p``), one line per shared scalar, the audit's threshold dotted. Only
    ``p = 0`` and the decades of ``p`` are labelled, so that the labels do not overlap."""
    fig, ax = _axes(ax, (7.0, 3.4))
    x = [p if p > 0 else powers[1] / 10 for p in powers]
    for scalar, marker in (("rms", "o"), ("geomean", "s")):
        ax.loglog(x, residuals[scalar], marker=marker, color=SCALAR_COLORS[scalar],
                  label=f"shared scalar: {scalar}")
    ax.axhline(threshold, color="k", ls=":", lw=1, label="audit threshold")
    decades = {10.0 ** k for k in range(-12, 1)}
    ax.set_xticks(x, ["0" if p == 0 else f"{p:g}" if p in decades or p == powers[1] else ""
                      for p in powers])
    ax.minorticks_off()
    ax.set_xlabel("dial $p$")
    ax.set_ylabel("gauge residual")
    legend_beside(ax)
    return fig


def trigger_figure(results: Mapping[str, Any], lrs: Sequence[float],
                   kappas: Sequence[float], paper_kappa: float, warmup: int) -> Figure:
    """How often the flow path fires: the invariant preset's share of flow steps among its
    eligible steps (mean over seeds, one line per learning rate, darker for larger rates)
    against the stiffness threshold κ, the paper's first. At the paper's κ every run of both
    presets sits at the top, which the text says in numbers; the lines show where it stops."""
    rates = fn.trigger_rates(results, warmup)
    inv = results["FlowAdam (invariant)"]
    fig, ax = plt.subplots(figsize=(5.2, 3.4), layout="constrained")
    axis = (paper_kappa, *kappas)
    labels = ["FlowAdam (invariant)", *[fx.stiffness_label(k) for k in kappas]]
    shades = plt.get_cmap("viridis_r")([0.25 + 0.65 * i / max(len(lrs) - 1, 1)
                                        for i in range(len(lrs))])
    for lr, shade in zip(lrs, shades, strict=True):
        mask = inv["base_lr"] == lr
        ax.plot(axis, [rates[lab][mask].mean().item() for lab in labels], "o-",
                color=shade, label=f"lr {lr:g}")
    ax.axvline(paper_kappa, color="0.6", lw=0.8, ls=":")
    log_ticks(ax, axis)
    ax.set_xlabel(r"stiffness threshold $\kappa$ (dotted: the paper's)")
    ax.set_ylabel("flow steps / eligible steps")
    ax.set_ylim(-0.03, 1.08)
    legend_beside(ax)
    return fig


def ablation_figure(results: Mapping[str, Any], labels: Sequence[str],
                    lrs: Sequence[float]) -> Figure:
    """Mean rec at the stop against the nominal learning rate for each variant of the
    ablation (FlowAdam in its colour, the dial alone in shared-scale Adam's, lighter as its
    factor shrinks, GD at ``lr·T`` in GD's); hollow where some seed did not reach the bar;
    the legend beside the axes."""
    fig, ax = _axes(ax=None, figsize=(7.0, 3.6))
    dial_shades = ("1.0", "0.72", "0.5", "0.35")
    for i, (label, marker) in enumerate(zip(labels, "o^vs<>D", strict=False)):
        if label == fx.FLOW_LABEL:
            color = method_color("flow_adam")
        elif label == fx.GD_LABEL:
            color = method_color("gd")
        else:
            shade = float(dial_shades[min(i - 1, len(dial_shades) - 1)])
            base = to_rgb(method_color("scalar_adam"))
            color = to_hex(tuple(1 - shade * (1 - c) for c in base))
        recs = fn.mean_by_lr(results[label], lrs)
        oks = fn.interpolated_by_lr(results[label], lrs)
        ax.plot(lrs, recs, "-", lw=1.0, color=color, marker=marker, ms=7, mfc=color,
                label=label, markevery=[j for j, ok in enumerate(oks) if ok] or [])
        for lr, rec, ok in zip(lrs, recs, oks, strict=True):
            if not ok:
                ax.plot(lr, rec, marker, color=color, mfc="none", ms=7)
    log_ticks(ax, lrs)
    ax.set_xlabel("nominal learning rate")
    ax.set_ylabel("recovery error rec")
    legend_beside(ax)
    return fig


def dial_figure(dial: Mapping[str, Sequence[Row]], gd_rec: float, gd_erank: float,
                planted: float) -> Figure:
    """The dial's recovery table as two panels (:func:`_dial_panel` of rec and of the
    effective rank) with one legend below both."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(7.0, 3.9), layout="constrained")
    _dial_panel(ax0, dial, "rec", gd_rec)
    _dial_panel(ax1, dial, "effective_rank", gd_erank, planted)
    legend_below(fig, ax0, ax1, ncol=3)
    return fig


def audit_html(rows: Sequence[Row]) -> str:
    """The audits of FlowAdam with the flow path on (rows of
    :func:`gaugebook.dial.flow_summary.audit_rows`)."""
    return table_html(
        rows, ["name", "residual", "verdict", "flow_steps"],
        headers={"name": "FlowAdam configuration", "residual": "gauge residual",
                 "flow_steps": "flow steps (plain / rotated run)"},
        formats={"residual": ".2e"})


def ablation_html(rows: Sequence[Row], lrs: Sequence[float]) -> str:
    """The ablation (rows of :func:`gaugebook.dial.flow_summary.ablation_rows`): mean rec
    per learning rate and Table 2's selection."""
    columns = ["variant", *[f"lr{i}" for i in range(len(lrs))], "selected"]
    headers = {"variant": "variant", "selected": "selected: rec (lr)",
               **{f"lr{i}": f"lr {lr:g}" for i, lr in enumerate(lrs)}}
    return table_html(rows, columns, headers=headers)


def dial_html(rows: Sequence[Row]) -> str:
    """The dial's recovery table (rows of :func:`gaugebook.dial.dial_summary.dial_table`)."""
    return table_html(
        rows, ["scalar", "p", "lr_text", "rec_text", "published", "steps", "train_loss_mean",
               "strict_text"],
        headers={"lr_text": "lr", "rec_text": "rec ± sd", "published": "rec, paper",
                 "train_loss_mean": "train loss",
                 "strict_text": "every seed < bar: rec (lr)"},
        formats={"p": "g", "published": ".4f", "steps": ".0f", "train_loss_mean": ".1e"})


def lr_edge_html(rows: Sequence[Row]) -> str:
    """The lr-edge grid (rows of :func:`gaugebook.dial.dial_summary.lr_edge_table`)."""
    return table_html(
        rows, ["p", "lr", "rec_text", "below", "steps"],
        headers={"rec_text": "rec ± sd", "below": "seeds below the bar",
                 "steps": "steps (mean)"},
        formats={"p": "g", "lr": "g", "steps": ".0f"})


def flow_html(rows: Sequence[Row]) -> str:
    """FlowAdam's rows (rows of :func:`gaugebook.dial.flow_summary.flow_table`)."""
    return table_html(
        rows, ["label", "lr_text", "rec_text", "published_text", "steps", "train_loss_mean",
               "interp", "loose_text"],
        headers={"label": "FlowAdam row", "lr_text": "lr", "rec_text": "rec ± sd",
                 "published_text": "rec, paper", "train_loss_mean": "train loss",
                 "interp": "every seed < bar", "loose_text": "older gate: rec (lr)"},
        formats={"steps": ".0f", "train_loss_mean": ".1e"})
