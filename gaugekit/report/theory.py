"""Figures of the theory chapters (1–3) and of the appendix's eigenbasis Adam, in the book's style.

Each function takes the tensors a chapter has just computed (float64, on the CPU), draws one
figure of the book and returns it; the chapter cell is then one call. Optimizers are coloured
with :func:`gaugekit.report.viz.method_color` (one colour per registry name across the book); lines
that are not optimizers (gradient flow, a path, a formula) are black or grey. Legends sit
outside the axes, below the figure, so that they never cover a curve.
"""

# Developer note (layers, DESIGN.md): beside floor 3 (draws for the book, reads no records).

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gaugekit.report.viz import COORDINATEWISE_COLOR, EQUIVARIANT_COLOR, method_color

__all__ = [
    "adam_defect",
    "audit_bars",
    "balancedness",
    "clock_free",
    "factor_pairs",
    "gap_collision",
    "orbit_circle",
    "plane_runs",
    "time_change",
    "transfer_curves",
]

WIDTH = 7.0  # inches: the text column (see gaugekit.report.viz.BOOK_STYLE)


def _np(x: Any) -> Any:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


def _label(method: str) -> str:
    from gaugekit.optim.registry import get_spec

    try:
        return get_spec(method).label
    except ValueError:
        return method


def _below(fig: Figure, handles: Sequence[Any], ncol: int) -> None:
    """One legend for the whole figure, under the axes (constrained layout makes room)."""
    fig.legend(handles=list(handles), loc="outside lower center", ncol=ncol)


# --------------------------------------------------------------------------------------------
# chapter 1: gauge symmetry
# --------------------------------------------------------------------------------------------


def factor_pairs(pairs: Sequence[tuple[str, torch.Tensor, torch.Tensor]]) -> Figure:
    """Rows: factor pairs ``(label, U, V)``; columns: ``U``, ``V`` and ``W = U Vᵀ``, each column
    on one symmetric colour scale with its colour bar; the row label gives
    ``‖U‖_F² + ‖V‖_F²``."""
    mats = [[U, V, U @ V.T] for _, U, V in pairs]
    fig, axes = plt.subplots(len(pairs), 3, figsize=(WIDTH, 1.5 * len(pairs) + 0.9),
                             layout="constrained", squeeze=False)
    for col, title in enumerate(["$U$", "$V$", "$W = UV^\\top$"]):
        lim = max(row[col].abs().max().item() for row in mats)
        for row, (label, U, V) in enumerate(pairs):
            ax = axes[row, col]
            image = ax.imshow(_np(mats[row][col]), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                size = (U.square().sum() + V.square().sum()).item()
                ax.set_ylabel(f"{label}\nsize {size:.2f}")
        axes[0, col].set_title(title)
        fig.colorbar(image, ax=axes[:, col], location="bottom", shrink=0.8, aspect=15)
    return fig


def orbit_circle(
    u0: torch.Tensor,
    thetas: torch.Tensor,
    paths: Mapping[str, torch.Tensor],
    *,
    marks: int = 8,
) -> Figure:
    """Left: the loss ``½(‖u‖² − 1)²`` on the plane, its level set through ``u0`` (white), the
    orbit ``{u0 R(θ)}`` (dashed) with ``marks`` points on it. Right: ``paths[label]``, a loss
    along the angles ``thetas`` (radians), the first drawn thick in black."""
    from gaugekit.theory import rotation_2d

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.5), layout="constrained",
                                   width_ratios=[1.15, 1.0])
    grid = torch.linspace(-1.6, 1.6, 241, dtype=u0.dtype)
    X1, X2 = torch.meshgrid(grid, grid, indexing="xy")
    plane = 0.5 * (X1**2 + X2**2 - 1.0) ** 2
    levels = torch.linspace(0, 1.2, 25).tolist()
    filled = ax0.contourf(_np(X1), _np(X2), _np(plane), levels=levels, extend="max")
    fig.colorbar(filled, ax=ax0, shrink=0.9, label="loss", ticks=[0, 0.4, 0.8, 1.2])
    level_u0 = 0.5 * (u0.square().sum() - 1.0) ** 2
    ax0.contour(_np(X1), _np(X2), _np(plane), levels=[level_u0.item()], colors="w",
                linewidths=1.0)
    circle = (u0 @ rotation_2d(thetas)).squeeze(1)
    ax0.plot(_np(circle[:, 0]), _np(circle[:, 1]), "k--", lw=1.2, dashes=(3, 4))
    angles = torch.linspace(0, 2 * math.pi, marks + 1, dtype=u0.dtype)[:-1]
    dots = (u0 @ rotation_2d(angles)).squeeze(1)
    ax0.plot(_np(dots[:, 0]), _np(dots[:, 1]), "o", color="0.85", ms=5)
    ax0.plot(u0[0, 0].item(), u0[0, 1].item(), "ko", ms=6)
    ax0.set_aspect("equal")
    ax0.set_xticks([-1.5, 0, 1.5])
    ax0.set_yticks([-1.5, 0, 1.5])
    ax0.set_xlabel("$u_1$")
    ax0.set_ylabel("$u_2$")
    ax0.set_title("the orbit of $u_0$ inside one level set")
    degrees = _np(thetas * 180 / math.pi)
    styles = [("k", "-", 2.6), ("0.45", "--", 1.6), ("0.6", ":", 2.0)]
    for (label, loss), (color, ls, lw) in zip(paths.items(), styles, strict=False):
        ax1.plot(degrees, _np(loss), color=color, ls=ls, lw=lw, label=label)
    ax1.set_xlabel(r"rotation angle $\theta$ (degrees)")
    ax1.set_ylabel("sensing loss")
    ax1.set_xticks([0, 90, 180, 270, 360])
    ax1.set_title("the loss along three paths")
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1)
    return fig


# --------------------------------------------------------------------------------------------
# chapter 2: which optimizers keep the gauge
# --------------------------------------------------------------------------------------------


def adam_defect(
    lrs: Sequence[float],
    epss: Sequence[float],
    delta: torch.Tensor,
    measured: Mapping[tuple[float, float], float],
    eps_sweep: Sequence[float],
    delta_small_lr: torch.Tensor,
    grad_scale: float,
) -> Figure:
    """Left: ``delta[i]`` (closed form) against ``lrs`` for each ``epss[i]``, with the measured
    ``measured[(lr, eps)]`` as dots. Right: the small-step defect against ``eps_sweep``, with a
    dotted line at ``grad_scale``."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.6), layout="constrained")
    colors = plt.cm.viridis(torch.linspace(0, 0.85, len(epss)).tolist())
    for i, eps in enumerate(epss):
        ax0.loglog(lrs, _np(delta[i]), color=colors[i], label=rf"$\varepsilon$ = {eps:g}")
        points = sorted((lr, v) for (lr, e), v in measured.items() if e == eps)
        ax0.loglog(*zip(*points, strict=True), "o", color=colors[i], ms=5)
    ax0.set_xlabel(r"step size $\eta$")
    ax0.set_ylabel(r"relative defect $\delta$")
    ax0.set_title("against the step size")
    ax1.loglog(eps_sweep, _np(delta_small_lr), color="k")
    ax1.axvline(grad_scale, color="0.5", ls=":")
    ax1.annotate("mean |gradient entry|", (grad_scale, 0.04), xytext=(-5, 0),
                 textcoords="offset points", color="0.35", fontsize=9, ha="right",
                 xycoords=("data", "axes fraction"))
    ax1.set_xlabel(r"$\varepsilon$")
    ax1.set_ylabel(r"$\delta$ as $\eta \to 0$")
    ax1.set_title(r"against $\varepsilon$ ($\eta = 10^{-6}$)")
    handles, _ = ax0.get_legend_handles_labels()
    handles.append(Line2D([], [], color="k", marker="o", ls="", ms=5, label="library's Adam"))
    _below(fig, handles, ncol=3)
    return fig


def plane_runs(
    paths: Mapping[str, Sequence[torch.Tensor]],
    products: Mapping[str, torch.Tensor],
    *,
    widths: Mapping[str, float] | None = None,
) -> Figure:
    """Left: the paths ``paths[method][j]`` (``steps × 1 × 2`` factors ``u_t``) on the plane with
    the solution circle ``‖u‖ = 1``; right: ``products[method]`` (``starts × steps``) against the
    step. One colour per method; ``widths[method]`` a line width (thick lines under thin)."""
    widths = dict(widths or {})
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.5), layout="constrained")
    arc = torch.linspace(0, math.pi / 2, 100)
    ax0.plot(_np(arc.cos()), _np(arc.sin()), "k--", lw=1)
    for method, runs in paths.items():
        for U in runs:
            ax0.plot(_np(U[:, 0, 0]), _np(U[:, 0, 1]), color=method_color(method), lw=1.4)
    for U in next(iter(paths.values())):
        ax0.plot(U[0, 0, 0].item(), U[0, 0, 1].item(), "ko", ms=4)
    ax0.set_aspect("equal")
    ax0.set_xlim(-0.05, 1.1)
    ax0.set_ylim(-0.05, 1.1)
    ax0.set_xlabel("$u_1$")
    ax0.set_ylabel("$u_2$")
    ax0.set_title("paths of $u_t$")
    for method, W in products.items():
        for curve in W:
            ax1.plot(_np(curve), color=method_color(method), lw=widths.get(method, 1.3),
                     ls="--" if method not in paths else "-")
    ax1.set_xlabel("step")
    ax1.set_ylabel("$W_t$")
    ax1.set_title("the seven products")
    handles = [Line2D([], [], color=method_color(m), lw=widths.get(m, 1.3),
                      ls="--" if m not in paths else "-", label=_label(m)) for m in products]
    handles.append(Line2D([], [], color="k", marker="o", ls="", ms=4, label="start"))
    _below(fig, handles, ncol=len(handles))
    return fig


def audit_bars(
    panels: Sequence[tuple[str, Sequence[str], Sequence[float], Sequence[bool]]],
    threshold: float,
    *,
    floor: float = 1e-17,
) -> Figure:
    """One horizontal bar chart per panel ``(title, names, residuals, passed)`` (stacked), bars
    in the book's class colours (blue: passes the audit, orange: fails), log axis from ``floor``
    (a residual of exactly 0 is drawn at it), the verdict threshold dashed."""
    counts = [len(names) for _, names, _, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH, 0.22 * sum(counts) + 1.6),
                             layout="constrained", sharex=True, height_ratios=counts,
                             squeeze=False)
    for ax, (title, names, residuals, passed) in zip(axes[:, 0], panels, strict=True):
        colors = [EQUIVARIANT_COLOR if ok else COORDINATEWISE_COLOR for ok in passed]
        ax.barh(range(len(names)), [max(r, floor) for r in residuals], color=colors)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlim(floor, 10)
        ax.axvline(threshold, color="k", ls="--", lw=1)
        ax.set_title(title)
    axes[-1, 0].set_xlabel("audit residual")
    _below(fig, [Patch(color=EQUIVARIANT_COLOR, label="passes (equivariant)"),
                 Patch(color=COORDINATEWISE_COLOR, label="fails"),
                 Line2D([], [], color="k", ls="--", lw=1, label="threshold")], ncol=3)
    return fig


# --------------------------------------------------------------------------------------------
# chapter 3: what equivariance allows
# --------------------------------------------------------------------------------------------


def transfer_curves(
    curves: Sequence[tuple[str, str, str, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor]],
    muon: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
) -> Figure:
    """Left: transfer functions ``(label, method, linestyle, s, h(s), s measured, h measured)``
    on log axes, in the method's colour. Right: Muon's ``(x, p(x), x measured, h measured)``
    beside the polar factor's ``h ≡ 1``."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.9), layout="constrained")
    for label, method, ls, s, h, s_meas, h_meas in curves:
        color = method_color(method)
        ax0.loglog(_np(s), _np(h), color=color, ls=ls, label=label)
        ax0.loglog(_np(s_meas), _np(h_meas), "o", color=color, ms=4)
    ax0.set_xlabel("singular value $s$")
    ax0.set_ylabel("$h(s)$")
    ax0.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    x, p, x_meas, h_meas = muon
    ax1.plot(_np(x), _np(p), color=method_color("muon"), label=r"Muon: $p(x)$, five steps")
    ax1.axhline(1.0, color=method_color("gram"), lw=1.2, ls="-.", label=r"polar factor: $h = 1$")
    ax1.plot(_np(x_meas), _np(h_meas), "o", color=method_color("muon"), ms=4)
    ax1.set_xlabel(r"$x = s / \|G\|_F$")
    ax1.set_ylabel("$h$")
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    return fig


def time_change(
    t_flow: torch.Tensor,
    loss_flow: torch.Tensor,
    T: torch.Tensor,
    loss_pre: torch.Tensor,
    tau: torch.Tensor,
    tau_wrong: torch.Tensor,
) -> Figure:
    """Left: gradient flow's loss on ``t_flow`` (up to ``T[-1]``) and the preconditioned flow's
    ``loss_pre`` on ``T``. Right: the preconditioned losses placed at gradient-flow times
    ``tau`` (dots) and ``tau_wrong`` (crosses) on gradient flow's whole curve."""
    pre = "#7570B3"  # not an optimizer of the registry: a scalar-preconditioned flow
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.4), layout="constrained",
                                   sharey=True)
    keep = t_flow <= T[-1]
    ax0.semilogy(_np(t_flow[keep]), _np(loss_flow[keep]), color="k")
    ax0.semilogy(_np(T), _np(loss_pre), color=pre, ls="--")
    ax0.set_xlabel("physical time $t$")
    ax0.set_ylabel("loss")
    ax0.set_title("on each flow's own clock")
    ax1.semilogy(_np(t_flow), _np(loss_flow), color="k")
    ax1.semilogy(_np(tau), _np(loss_pre), "o", color=pre, ms=4)
    ax1.semilogy(_np(tau_wrong), _np(loss_pre), "x", color="#D95F02", ms=5)
    ax1.set_xlabel("gradient-flow time")
    ax1.set_title("on gradient flow's clock")
    _below(fig, [Line2D([], [], color="k", label="gradient flow"),
                 Line2D([], [], color=pre, ls="--", label="preconditioned, $a(t)$"),
                 Line2D([], [], color=pre, marker="o", ls="", ms=4,
                        label=r"placed at $\tau(T)$"),
                 Line2D([], [], color="#D95F02", marker="x", ls="", ms=5,
                        label=r"placed at $\int_0^T a$")], ncol=2)
    return fig


def clock_free(
    runs: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    *,
    widths: Mapping[str, float] | None = None,
    styles: Mapping[str, str] | None = None,
) -> Figure:
    """``runs[method] = (losses, rec)``: recovery error against loss on log axes, the loss
    decreasing to the right, one colour per method."""
    widths, styles = dict(widths or {}), dict(styles or {})
    fig, ax = plt.subplots(figsize=(WIDTH * 0.75, 3.4), layout="constrained")
    for method, (losses, rec) in runs.items():
        ax.loglog(_np(losses), _np(rec), color=method_color(method),
                  lw=widths.get(method, 1.5), ls=styles.get(method, "-"), label=_label(method))
    ax.invert_xaxis()
    ax.set_xlabel("loss (decreasing to the right)")
    ax.set_ylabel("recovery error rec")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def balancedness(
    imbalance: Mapping[str, Sequence[torch.Tensor]],
    step_sizes: Sequence[float],
    scalar_class: Sequence[str],
    horizon: float,
) -> Figure:
    """``imbalance[method][j]``: the relative imbalance along the run at ``step_sizes[j]``.
    Left: along the run at the smallest step size against ``η · step``; right: its final value
    against the step size, with a slope-1 guide. Solid: ``scalar_class``; dashed: the others."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.9), layout="constrained")
    finals = {m: [c[-1].item() for c in curves] for m, curves in imbalance.items()}
    for method, curves in imbalance.items():
        ls = "-" if method in scalar_class else "--"
        color = method_color(method)
        curve = curves[-1]
        times = torch.arange(len(curve)) * step_sizes[-1]
        ax0.semilogy(_np(times), _np(curve.clamp_min(1e-18)), color=color, ls=ls,
                     label=_label(method))
        ax1.loglog(step_sizes, finals[method], "o", color=color, ls=ls)
    guide = next(iter(scalar_class))
    ref = [0.4 * finals[guide][-1] * eta / step_sizes[-1] for eta in step_sizes]
    ax1.loglog(step_sizes, ref, "k:", lw=1)
    ax0.set_ylim(1e-4, 1.0)
    ax0.set_xlabel(r"time $\eta \cdot$ step")
    ax0.set_ylabel("relative imbalance")
    ax0.set_title(rf"along the run, $\eta$ = {step_sizes[-1]:g}")
    ax1.set_xlabel(r"step size $\eta$")
    ax1.set_title(f"at T = {horizon:g}; dotted: slope 1")
    handles, _ = ax0.get_legend_handles_labels()
    _below(fig, handles, ncol=4)
    return fig


# --------------------------------------------------------------------------------------------
# chapter 11: EigenAdam near an eigenvalue collision
# --------------------------------------------------------------------------------------------


def gap_collision(
    gaps: Sequence[float],
    residuals: Sequence[float],
    threshold: float,
    *,
    anchor: float = 1e-8,
) -> Figure:
    """EigenAdam's audit residual against the eigenvalue gap (``gaps[0] == 0`` is the exact
    collision, drawn as a horizontal line), a ``1/δ`` guide through the point at ``anchor`` and
    the verdict threshold."""
    fig, ax = plt.subplots(figsize=(WIDTH * 0.8, 3.4), layout="constrained")
    color = method_color("eigen_adam")
    pos = [g for g in gaps if g > 0]
    values = [r for g, r in zip(gaps, residuals, strict=True) if g > 0]
    at = values[pos.index(anchor)]
    ax.loglog(pos, values, "o-", color=color, label="EigenAdam, gap δ")
    ax.axhline(residuals[gaps.index(0.0)], color="k", ls=":", label="δ = 0 (collision)")
    ax.loglog(pos, [at * anchor / g for g in pos], color="0.5", ls="--", lw=1, label="∝ 1/δ")
    ax.axhline(threshold, color="0.6", lw=0.8, label="verdict threshold")
    ax.set_xlabel("eigenvalue gap δ at the refresh")
    ax.set_ylabel("audit residual")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
