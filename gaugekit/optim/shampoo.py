"""Two-sided Shampoo with periodically refreshed inverse fourth roots."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import distributed as D
from gaugekit.optim import functional_matrix as FM
from gaugekit.optim._validation import LR, WEIGHT_DECAY, Hyper, bool_check, int_check, real_check
from gaugekit.optim.base import ZooOptimizer


class Shampoo(ZooOptimizer):
    r"""Shampoo (Gupta, Koren & Singer, 2018), two-sided, in the paper's convention.

    Example:
        >>> import torch
        >>> from gaugekit.optim import Shampoo
        >>> U, V = (torch.randn(n, 3, requires_grad=True) for n in (10, 8))
        >>> optimizer = Shampoo([U, V], lr=0.1)
        >>> (U @ V.T - torch.eye(10, 8)).square().sum().backward()
        >>> optimizer.step()

    .. math::
        L_t = L_{t-1} + G_t G_t^\top,\quad R_t = R_{t-1} + G_t^\top G_t,\\
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\,(L_s + λI)^{-1/4}\, G_t\, (R_s + λI)^{-1/4}

    with decoupled weight decay ``w = weight_decay`` (``maximize`` uses ``−G_t``), where ``s``
    is the last refresh step: the inverse roots are recomputed at steps
    1, 1 + f, 1 + 2f, … (``f = update_freq = 20``) by ``eigh`` with eigenvalues clamped below at
    ``eig_floor = 1e-6``; ``λ = damping = 1``. State: ``step``, ``left_gram`` (``L``),
    ``right_gram`` (``R``), ``left_inv_root``, ``right_inv_root``.

    Deviations from Gupta et al.: ``λ`` is added at the root, not to the initial statistics; no
    grafting, no momentum. From the paper: none (``w = 0``).

    Gauge: equivariant — under ``G → G Q``: ``L`` is invariant, ``R → Qᵀ R Q`` so
    ``(R + λI)^{-1/4} → Qᵀ (R + λI)^{-1/4} Q``, and the update becomes ``L̃ G R̃ Q``; the decay is
    a scalar multiple of the factor.

    Distributed: a sharded DTensor parameter (FSDP2) has its gradient gathered
    (``full_tensor()``, one all-gather per matrix and step); ``L``, ``R`` and their roots are
    whole plain matrices, the same on every rank, and each rank applies its block of the update.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        damping: ``λ > 0`` added to ``L`` and ``R`` before the root.
        update_freq: refresh period ``f >= 1`` of the inverse roots.
        eig_floor: lower clamp ``> 0`` of the eigenvalues before the power.
        weight_decay: decoupled weight decay ``w >= 0`` (per run).
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "damping": real_check(0.0, low_open=True, per_run=False),
        "update_freq": int_check(1),
        "eig_floor": real_check(0.0, low_open=True, per_run=False),
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 0.1, *, damping: float = 1.0, update_freq: int = 20,
        eig_floor: float = 1e-6, weight_decay: Hyper = 0.0, maximize: bool = False,
        batch_dims: int = 0, nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "damping": damping, "update_freq": update_freq, "eig_floor": eig_floor,
            "weight_decay": weight_decay, "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_eigh_dtypes(group, "inverse fourth roots")

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, step=True)
            if "left_gram" not in state:
                n, k = p.shape[-2], p.shape[-1]
                batch = p.shape[:-2]
                block = D.local(p)  # DTensor p: plain full-size statistics on every rank
                state["left_gram"] = block.new_zeros(batch + (n, n))
                state["right_gram"] = block.new_zeros(batch + (k, k))
                state["left_inv_root"] = block.new_zeros(batch + (n, n))
                state["right_inv_root"] = block.new_zeros(batch + (k, k))
            FM.shampoo_(
                p, g, state["left_gram"], state["right_gram"], state["left_inv_root"],
                state["right_inv_root"], step=state["step"], lr=self._hyper(group, "lr", p),
                damping=group["damping"], update_freq=group["update_freq"],
                eig_floor=group["eig_floor"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )
