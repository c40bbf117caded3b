"""Muon: momentum, then quintic Newton–Schulz orthogonalization."""

from __future__ import annotations

from typing import Any

from gaugekit.linalg import NS_COEFFICIENTS
from gaugekit.optim import functional as F
from gaugekit.optim._validation import (
    DECAY,
    LR,
    WEIGHT_DECAY,
    Hyper,
    bool_check,
    choice_check,
    coefficients_check,
    int_check,
    real_check,
)
from gaugekit.optim.base import ZooOptimizer


class Muon(ZooOptimizer):
    r"""Muon (Jordan et al., 2024) in the paper's convention.

    .. math::
        M_t = μ M_{t-1} + G_t,\qquad
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\cdot ρ\cdot \mathrm{NS}_5(M_t)

    with decoupled weight decay λ (torch.optim.Muon's; ``maximize`` uses ``−G_t``).

    ``NS₅`` is :func:`gaugekit.linalg.newton_schulz`: ``X₀ = M/(‖M‖_F + ε)`` per matrix (ε = 1e-7),
    then 5 quintic steps with ``(a, b, c) = (3.4445, −4.7750, 2.0315)``, tall matrices transposed.
    ``ρ = 1`` by default; ``adjust_lr_fn`` = ``"original"`` (``√max(1, n/k)``) or
    ``"match_rms_adamw"`` (``0.2 √max(n, k)``) are torch's shape factors. ``nesterov=True``
    orthogonalizes ``G_t + μ M_t``. State: ``momentum_buffer``.

    Deviations from ``torch.optim.Muon``: un-damped buffer ``μ M + G`` (torch: ``μ M + (1−μ) G``,
    i.e. ``(1−μ)`` times ours, which NS undoes up to ε); ``nesterov=False``, ``ρ = 1`` and no
    weight decay by default; ``‖M‖ + ε`` instead of ``max(‖M‖, ε)``; the NS iteration runs in the
    parameter's dtype (torch runs it in bfloat16). From the paper: none (μ = 0.9, no Nesterov,
    λ = 0).

    Gauge: equivariant — ``M`` is linear in past gradients and ``NS(M Q) = NS(M) Q`` for every
    orthogonal ``Q`` (odd matrix polynomial; ``‖M Q‖_F = ‖M‖_F``), with or without the transpose;
    the decay is a scalar multiple of the factor.

    Distributed: a sharded DTensor parameter (FSDP2) is handled by gathering ``M``
    (``full_tensor()``, one all-gather per matrix and step); every rank runs ``NS₅`` on the whole
    matrix and applies its own block; the buffer stays sharded.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        momentum: ``μ`` in ``[0, 1)`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
        nesterov: orthogonalize the Nesterov look-ahead ``G + μ M``.
        ns_steps: number of Newton–Schulz steps ``>= 0``.
        ns_coefficients: quintic coefficients ``(a, b, c)``.
        eps: ``ε >= 0`` added to the Frobenius norm before the iteration.
        adjust_lr_fn: ``None`` (paper), ``"original"`` or ``"match_rms_adamw"`` (torch).
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "momentum": DECAY,
        "nesterov": bool_check,
        "ns_steps": int_check(0),
        "ns_coefficients": coefficients_check,
        "eps": real_check(0.0, per_run=False),
        "adjust_lr_fn": choice_check(None, "original", "match_rms_adamw"),
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, momentum: Hyper = 0.9, *,
        weight_decay: Hyper = 0.0, nesterov: bool = False, ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, eps: float = 1e-7,
        adjust_lr_fn: str | None = None, maximize: bool = False, batch_dims: int = 0,
        **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov,
            "ns_steps": ns_steps, "ns_coefficients": ns_coefficients, "eps": eps,
            "adjust_lr_fn": adjust_lr_fn, "maximize": maximize,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "momentum_buffer")
            F.muon_(
                p, g, state["momentum_buffer"], lr=self._hyper(group, "lr", p),
                momentum=self._hyper(group, "momentum", p), nesterov=group["nesterov"],
                ns_steps=group["ns_steps"], ns_coefficients=group["ns_coefficients"],
                eps=group["eps"], adjust_lr_fn=group["adjust_lr_fn"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )
