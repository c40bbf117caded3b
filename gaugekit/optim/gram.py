"""The Gram-function family of the paper's Theorem 4.5: ``Φ(G) = H(G Gᵀ) G``."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import functional_matrix as FM
from gaugekit.optim._validation import (
    LR,
    WEIGHT_DECAY,
    Hyper,
    bool_check,
    callable_or_none_check,
    choice_check,
    real_check,
)
from gaugekit.optim.base import ZooOptimizer


class GramPreconditioned(ZooOptimizer):
    r"""Stateless Gram-preconditioned descent, the form of the paper's Theorem 4.5.

    Example:
        >>> import torch
        >>> from gaugekit.optim import GramPreconditioned
        >>> U, V = (torch.randn(n, 3, requires_grad=True) for n in (10, 8))
        >>> optimizer = GramPreconditioned([U, V], lr=0.01)
        >>> (U @ V.T - torch.eye(10, 8)).square().sum().backward()
        >>> optimizer.step()

    .. math::
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\,Φ(G_t),

        Φ(G) = H(G G^\top)\, G \ \ (\texttt{side="left"}),

        Φ(G) = G\, H(G^\top G) \ \ (\texttt{side="right"})

    ``w = weight_decay`` is a decoupled weight decay (``maximize`` uses ``−G_t``). ``H`` is
    ``gram_fn``, any callable from a stack of symmetric matrices (shape
    ``(..., n, n)``; leading dims are runs) to a stack of matrices; by default
    ``H(P) = (P + λI)^{-s}`` (eigh, eigenvalues clamped at 1e-6) with ``s = power = 1/2``,
    ``λ = damping = 1e-6`` — a damped polar factor, ``≈ msign(G)``. ``power`` and ``damping``
    are ignored when ``gram_fn`` is given.

    Which Gram: the gauge ``U → U Q`` acts on the right of an ``n × k`` factor, ``G → G Q``.
    The left Gram ``G Gᵀ`` is invariant under it, so ``H(G Gᵀ) G → H(G Gᵀ) G Q`` for ANY
    ``H`` — this is the default. The right form needs ``H(Qᵀ P Q) = Qᵀ H(P) Q`` (a spectral
    ``H``, e.g. the default), and then equals the left one (``G f(GᵀG) = f(GGᵀ) G``); use it for
    a gauge acting on the left of ``G`` (a parameter stored transposed, ``k × n``), or because
    ``GᵀG`` is the smaller matrix.

    Deviations: the paper states the theorem, not an optimizer; no state, no momentum.

    Gauge: equivariant for ``side="left"`` and any ``H`` (``G Gᵀ`` is gauge-invariant); for
    ``side="right"`` only when ``H`` is spectral (the decay is a scalar multiple of the factor).

    Distributed: a sharded DTensor gradient (FSDP2) is gathered (one all-gather per matrix and
    step); ``Φ(G)`` is computed whole on every rank and each rank applies its block.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        gram_fn: ``H``, or ``None`` for ``(P + λI)^{-s}``.
        power: ``s >= 0`` of the default ``H``.
        damping: ``λ >= 0`` of the default ``H``.
        side: ``"left"`` (``H(GGᵀ) G``) or ``"right"`` (``G H(GᵀG)``).
        weight_decay: decoupled weight decay ``w >= 0`` (per run).
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "gram_fn": callable_or_none_check,
        "power": real_check(0.0, per_run=False),
        "damping": real_check(0.0, per_run=False),
        "side": choice_check("left", "right"),
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, *, gram_fn: FM.GramFn | None = None,
        power: float = 0.5, damping: float = 1e-6, side: str = "left",
        weight_decay: Hyper = 0.0, maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "gram_fn": gram_fn, "power": power, "damping": damping, "side": side,
            "weight_decay": weight_decay, "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        if group["gram_fn"] is None:
            self._check_eigh_dtypes(group, "default Gram function (gram_fn=None)")

    def _update_group(self, group: dict[str, Any]) -> None:
        gram_fn = group["gram_fn"] or FM.damped_inverse_power(group["power"], group["damping"])
        for p, g in self._with_grad(group["params"]):
            FM.gram_(
                p, g, lr=self._hyper(group, "lr", p), gram_fn=gram_fn, side=group["side"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )
