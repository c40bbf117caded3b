"""The live checks and figures of the gauge (chapter 1), of the dynamics of chapter 3 (time change,
balancedness, the clock-free view) and of the appendix's EigenAdam.

Each ``*_check`` function runs one small float64 experiment of a chapter on the tensors the cell
has drawn and returns its :class:`Findings`; each figure function draws one figure of the book
and returns it, so that a chapter cell is one call. Lines that are not optimizers (gradient flow,
a path, a formula) are black or grey. Legends sit outside the axes, beside them or below the
figure, so that they never cover a curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import Tensor

from gaugebook.present.viz import glue_page
from gaugekit import theory
from gaugekit.gauge import (
    chain_product,
    gl_act,
    head_logit_bilinears,
    interface_act,
    relative_distance,
    rotate_factors,
    rotate_heads,
)
from gaugekit.optim import make_optimizer

LossFn = Callable[[Tensor, Tensor], Tensor]

WIDTH = 7.0  # inches: the text column (see gaugebook.present.viz.BOOK_STYLE)


def _np(x: Any) -> Any:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


def _trajectory(name: str, loss: LossFn, U0: Tensor, V0: Tensor, steps: int,
                **hparams: float) -> tuple[Tensor, Tensor]:
    """The factors along ``steps`` steps of the registry's optimizer ``name`` (``hparams``)."""
    return theory.optimizer_trajectory(lambda p: make_optimizer(name, p, **hparams), loss, U0,
                                       V0, steps)


@dataclass
class Findings:
    """What one live check found: ``values`` (numbers and tables the text cites, by glue name),
    ``lines`` (what the page prints), ``figure`` (the keyword arguments of the figure that
    follows) and ``data`` (other results a later cell uses)."""

    values: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    figure: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def show(self) -> None:
        """Print the lines (if any) and glue the values for the page's ``{glue:text}`` roles."""
        if self.lines:
            print("\n".join(self.lines))
        glue_page(self.values)


def _size(U: Tensor, V: Tensor) -> float:
    return (U.square().sum() + V.square().sum()).item()


# --------------------------------------------------------------------------------------------
# chapter 1: gauge symmetry
# --------------------------------------------------------------------------------------------


def orbit_check(loss: LossFn, U0: Tensor, V0: Tensor, thetas: Tensor) -> Findings:
    r"""The loss along three closed paths of rotations ``R(θ)``, ``θ ∈ thetas``: the gauge path
    ``(U₀R(θ), V₀R(θ))``, on which ``ℓ(UVᵀ)`` is constant, and the paths that turn ``U`` or ``V``
    alone. ``orbit_spread``: the largest relative change along the gauge path;
    ``U_only_range``: the range of the loss when ``U`` alone turns, over its start value."""
    R = theory.rotation_2d(thetas)
    gauge = loss(U0 @ R, V0 @ R)
    U_only = loss(U0 @ R, V0.expand_as(V0 @ R))
    V_only = loss(U0.expand_as(U0 @ R), V0 @ R)
    start = loss(U0, V0)
    v = {"orbit_spread": ((gauge - start).abs().max() / start).item(),
         "U_only_range": ((U_only.max() - U_only.min()) / start).item()}
    return Findings(v, [
        f"along the gauge orbit: largest relative change {v['orbit_spread']:.1e}",
        f"when only U turns:     range / start = {v['U_only_range']:.2f}"],
        figure={"paths": {"gauge: $(U_0R, V_0R)$": gauge, "$U_0R$ only": U_only,
                          "$V_0R$ only": V_only}})


def gradient_covariance_check(loss: LossFn, U: Tensor, V: Tensor, Q: Tensor,
                              A: Tensor) -> Findings:
    r"""Lemma 4.1 by autograd: the gradients at ``(UQ, VQ)`` against ``(G_U Q, G_V Q)``
    (``covariance_Q``), at ``(UA, VA^{-⊤})`` against ``(G_U A^{-⊤}, G_V A)`` (``covariance_A``)
    and against the wrong law ``G_U A`` (``wrong_law``); relative residuals, the larger factor's."""
    G_U, G_V = theory.loss_gradients(loss, U, V)
    G_UQ, G_VQ = theory.loss_gradients(loss, *rotate_factors(U, V, Q))
    G_UA, G_VA = theory.loss_gradients(loss, *gl_act(U, V, A))
    v = {"covariance_Q": max(relative_distance(G_UQ, G_U @ Q).item(),
                             relative_distance(G_VQ, G_V @ Q).item()),
         "covariance_A": max(relative_distance(G_UA, G_U @ torch.linalg.inv(A).T).item(),
                             relative_distance(G_VA, G_V @ A).item()),
         "wrong_law": relative_distance(G_UA, G_U @ A).item()}
    return Findings(v, [
        f"orthogonal gauge, (G_U Q, G_V Q):   residual {v['covariance_Q']:.1e}",
        f"general gauge, (G_U A^-T, G_V A):   residual {v['covariance_A']:.1e}",
        f"general gauge, wrong law G_U A:     residual {v['wrong_law']:.2f}"])


def _relative_change(new: Tensor, old: Tensor) -> float:
    return (abs(new - old) / abs(old)).item()


def interface_gauge_check(weights: Sequence[Tensor], X: Tensor, Y: Tensor,
                          Qs: Sequence[Tensor], As: Sequence[Tensor]) -> Findings:
    r"""The interface gauge ``W_j → A_j W_j A_{j−1}^{-1}`` of a chain ``W = W_L ⋯ W_1`` under the
    least-squares loss ``½ mean (X Wᵀ − Y)²``: the change of the product (``Q_j`` and ``A_j``),
    of the loss (``A_j``), the gradient law ``Q_j G_j Q_{j−1}ᵀ`` and the layer norms."""
    def chain_loss(*ws: Tensor) -> Tensor:
        return 0.5 * (X @ chain_product(ws).T - Y).square().mean()

    gauged_Q, gauged_A = interface_act(weights, Qs), interface_act(weights, As)
    grads = theory.loss_gradients(chain_loss, *weights)
    grads_Q = theory.loss_gradients(chain_loss, *gauged_Q)
    eye = [torch.eye(d, dtype=X.dtype) for d in (weights[0].shape[1], weights[-1].shape[0])]
    ends = [eye[0], *Qs, eye[1]]
    v = {"chain_covariance": max(
            relative_distance(grads_Q[j], ends[j + 1] @ grads[j] @ ends[j].T).item()
            for j in range(len(weights))),
         "chain_product_change": max(
            relative_distance(chain_product(g), chain_product(weights)).item()
            for g in (gauged_Q, gauged_A)),
         "chain_loss_change": _relative_change(chain_loss(*gauged_A), chain_loss(*weights)),
         "norm_change_Q": max(_relative_change(g.norm(), w.norm())
                              for g, w in zip(gauged_Q, weights, strict=True)),
         "norm_change_A": max(_relative_change(g.norm(), w.norm())
                              for g, w in zip(gauged_A, weights, strict=True))}
    return Findings(v, [
        f"product change (Q and A):         {v['chain_product_change']:.1e}",
        f"loss change (A):                  {v['chain_loss_change']:.1e}",
        f"gradient law Q_j G_j Q_(j-1)^T:   residual {v['chain_covariance']:.1e}",
        f"largest change of a layer norm:   Q {v['norm_change_Q']:.1e}   "
        f"A {v['norm_change_A']:.2f}"])


def head_gauge_check(tokens: Tensor, W_Q: Tensor, W_K: Tensor, R_heads: Tensor,
                     num_heads: int) -> Findings:
    r"""The per-head gauge ``(W_{Q,h}, W_{K,h}) → (R_h W_{Q,h}, R_h W_{K,h})``: the relative
    change of the logits of ``tokens`` (``logit_change``), of the bilinear forms
    ``W_{Q,h}ᵀ W_{K,h}`` (``bilinear_change``) and of the logits when only the queries turn."""
    W_Q_rot, W_K_rot = rotate_heads(W_Q, W_K, R_heads, num_heads)

    def logits(W_Q: Tensor, W_K: Tensor) -> Tensor:
        return theory.attention_logits(tokens, W_Q, W_K, num_heads).flatten()

    def bilinears(W_Q: Tensor, W_K: Tensor) -> Tensor:
        return head_logit_bilinears(W_Q, W_K, num_heads).flatten()

    v = {"logit_change": relative_distance(logits(W_Q_rot, W_K_rot), logits(W_Q, W_K)).item(),
         "bilinear_change": relative_distance(bilinears(W_Q_rot, W_K_rot),
                                              bilinears(W_Q, W_K)).item(),
         "query_only_change": relative_distance(logits(W_Q_rot, W_K), logits(W_Q, W_K)).item()}
    return Findings(v, [
        f"logits, both rotated:    relative change {v['logit_change']:.1e}",
        f"W_Q^T W_K per head:      relative change {v['bilinear_change']:.1e}",
        f"logits, queries only:    relative change {v['query_only_change']:.2f}"])


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
            ax.set(xticks=[], yticks=[])
            if col == 0:
                ax.set_ylabel(f"{label}\nsize {_size(U, V):.2f}")
        axes[0, col].set_title(title)
        fig.colorbar(image, ax=axes[:, col], location="bottom", shrink=0.8, aspect=15)
    return fig


def orbit_circle(
    u0: torch.Tensor,
    thetas: torch.Tensor,
    paths: Mapping[str, torch.Tensor],
) -> Figure:
    """Left: the loss ``½(‖u‖² − 1)²`` on the plane, its level set through ``u0`` (white), the
    orbit ``{u0 R(θ)}`` (dashed) with eight points on it. Right: ``paths[label]``, a loss
    along the angles ``thetas`` (radians), the first drawn thick in black."""
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
    circle = (u0 @ theory.rotation_2d(thetas)).squeeze(1)
    ax0.plot(_np(circle[:, 0]), _np(circle[:, 1]), "k--", lw=1.2, dashes=(3, 4))
    angles = torch.linspace(0, 2 * math.pi, 9, dtype=u0.dtype)[:-1]
    dots = (u0 @ theory.rotation_2d(angles)).squeeze(1)
    ax0.plot(_np(dots[:, 0]), _np(dots[:, 1]), "o", color="0.85", ms=5)
    ax0.plot(u0[0, 0].item(), u0[0, 1].item(), "ko", ms=6)
    ax0.set(aspect="equal", xticks=[-1.5, 0, 1.5], yticks=[-1.5, 0, 1.5], xlabel="$u_1$",
            ylabel="$u_2$", title="the orbit of $u_0$ inside one level set")
    degrees = _np(thetas * 180 / math.pi)
    styles = [("k", "-", 2.6), ("0.45", "--", 1.6), ("0.6", ":", 2.0)]
    for (label, loss), (color, ls, lw) in zip(paths.items(), styles, strict=False):
        ax1.plot(degrees, _np(loss), color=color, ls=ls, lw=lw, label=label)
    ax1.set(xlabel=r"rotation angle $\theta$ (degrees)", ylabel="sensing loss",
            xticks=[0, 90, 180, 270, 360], title="the loss along three paths")
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1)
    return fig
