"""ScaledGD on factor pairs ``W = U Vᵀ`` (Tong, Ma & Chi, 2021)."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import functional as F
from gaugekit.optim._validation import LR, WEIGHT_DECAY, Hyper, bool_check, invalid, real_check
from gaugekit.optim.base import ZooOptimizer


class ScaledGD(ZooOptimizer):
    r"""Scaled gradient descent on a factor pair; each param group holds exactly one ``[U, V]``.

    Example:
        >>> import torch
        >>> from gaugekit.optim import ScaledGD
        >>> U, V = (torch.randn(n, 3, requires_grad=True) for n in (10, 8))
        >>> optimizer = ScaledGD([U, V], lr=0.1)
        >>> (U @ V.T - torch.eye(10, 8)).square().sum().backward()
        >>> optimizer.step()

    .. math::
        U_t = U_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\, G_U (V^\top V + λ_V I)^{-1},

        V_t = V_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\, G_V (U^\top U + λ_U I)^{-1}

    with decoupled weight decay ``w = weight_decay`` (``maximize`` uses ``−G``), ``U`` of shape
    ``(..., n, k)``, ``V`` of shape ``(..., m, k)`` (same ``k``, same batch dims) and both Grams
    taken before the step. ``λ`` is relative by default, as in the paper's
    script: ``λ_V = damping · (tr(VᵀV)/k + 10⁻³⁰) + 10⁻¹²`` with ``damping = 1e-4``;
    ``relative_damping=False`` uses ``λ = damping``. Several pairs: one group per pair,
    ``ScaledGD([{"params": [U1, V1]}, {"params": [U2, V2]}])``. Stateless.

    Deviations from the paper's script: the script updates ``U`` first and builds ``V``'s Gram
    from the NEW ``U`` (``sequential=True`` reproduces that); it inverts the Gram, we solve.
    Tong et al. use ``λ = 0``. The paper's ``w = 0``.

    Gauge: equivariant — under ``(U, V) → (UQ, VQ)``: ``G_U → G_U Q``, ``VᵀV → Qᵀ VᵀV Q``, ``λ``
    is invariant (a trace), so ``G_U (VᵀV + λI)⁻¹ → G_U (VᵀV + λI)⁻¹ Q``; the same for ``V``;
    the decay is a scalar multiple of the factor.

    Distributed: sharded DTensor factors (FSDP2) and their gradients are gathered (four
    all-gathers per pair and step); the directions are computed whole on every rank and each
    rank applies its block.

    Args:
        params: ``[U, V]`` or a list of groups ``{"params": [U, V], ...}``.
        lr: learning rate ``>= 0`` (per run).
        damping: ``λ`` (absolute) or its factor on ``tr/k`` (relative), ``>= 0``.
        relative_damping: scale ``damping`` by the mean Gram diagonal.
        sequential: build ``V``'s Gram from the already-updated ``U``.
        weight_decay: decoupled weight decay ``w >= 0`` (per run).
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "damping": real_check(0.0, per_run=False),
        "relative_damping": bool_check,
        "sequential": bool_check,
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, *, damping: float = 1e-4,
        relative_damping: bool = True, sequential: bool = False, weight_decay: Hyper = 0.0,
        maximize: bool = False, batch_dims: int = 0, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "damping": damping, "relative_damping": relative_damping,
            "sequential": sequential, "weight_decay": weight_decay, "maximize": maximize,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        params = group["params"]
        if len(params) != 2:
            raise invalid(
                "params", f"a group of {len(params)} tensors",
                "exactly one pair [U, V] per param group (one group per pair)",
            )
        U, V = params
        b = group["batch_dims"]
        if U.shape[:b] != V.shape[:b] or U.shape[-1] != V.shape[-1]:
            raise invalid(
                "params", f"a pair of shapes {tuple(U.shape)}, {tuple(V.shape)}",
                "U (..., n, k) and V (..., m, k) with the same k and batch dims",
            )

    def _update_group(self, group: dict[str, Any]) -> None:
        U, V = group["params"]
        for G in (U.grad, V.grad):
            if G is not None and G.is_sparse:
                raise RuntimeError("gaugekit optimizers do not support sparse gradients")
        F.scaled_gd_(
            U, V, U.grad, V.grad, lr_U=self._hyper(group, "lr", U),
            lr_V=self._hyper(group, "lr", V), damping=group["damping"],
            relative_damping=group["relative_damping"], sequential=group["sequential"],
            weight_decay_U=self._hyper(group, "weight_decay", U),
            weight_decay_V=self._hyper(group, "weight_decay", V), maximize=group["maximize"],
        )
