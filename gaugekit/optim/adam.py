"""Adam and its gauge-equivariant repair, shared-scale Adam."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gaugekit.optim import functional as F
from gaugekit.optim.base import ZooOptimizer
from gaugekit.optim.validation import (
    EPS,
    LR,
    Hyper,
    betas_check,
    check_common_batch_shape,
    check_optimizer_wide,
)


def _init_adam_state(state: dict[str, Any], p: Tensor) -> None:
    if not state:
        state["step"] = 0
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


class Adam(ZooOptimizer):
    r"""Adam (Kingma & Ba, 2015), coordinate-wise.

    .. math::
        m_t = β_1 m_{t-1} + (1-β_1) g_t,\quad v_t = β_2 v_{t-1} + (1-β_2) g_t^2,\\
        \hat m_t = m_t/(1-β_1^t),\quad \hat v_t = v_t/(1-β_2^t),\quad
        θ_t = θ_{t-1} − \mathrm{lr}\,\hat m_t / (\sqrt{\hat v_t} + ε)

    State: ``step``, ``exp_avg``, ``exp_avg_sq`` (torch's names). Same numbers as
    ``torch.optim.Adam`` (``weight_decay=0, amsgrad=False``) up to rounding.

    Deviations: none from the paper's ``adam`` (β = (0.9, 0.999), ε = 1e-8 outside the root,
    bias correction on both moments); no weight decay, no AMSGrad.

    Gauge: not equivariant — the per-entry denominator ``√v̂`` does not commute with ``G → G Q``
    (rotating ``G`` mixes the entries whose squares it divides by).

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v̂`` (per run).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    hyper_checks = {"lr": LR, "betas": betas_check(), "eps": EPS}

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, *, batch_dims: int = 0,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps}
        super().__init__(params, defaults, batch_dims=batch_dims)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self.state[p]
            _init_adam_state(state, p)
            state["step"] += 1
            beta1, beta2 = self._hyper(group, "betas", p)
            F.adam_(
                p, g, state["exp_avg"], state["exp_avg_sq"], step=state["step"],
                lr=self._hyper(group, "lr", p), beta1=beta1, beta2=beta2,
                eps=self._hyper(group, "eps", p),
            )


class SharedScaleAdam(ZooOptimizer):
    r"""Adam with ONE shared denominator per step (the paper's ``scalar_adam`` / ``adam_p0rms``).

    Moments as in :class:`Adam`; then, once per step, over all entries of all parameters of all
    groups (one value per run when ``batch_dims > 0``)

    .. math::
        s_t = \sqrt{\operatorname{mean}(\hat v_t)} + ε,\qquad
        θ_t = θ_{t-1} − \mathrm{lr}\,\hat m_t / s_t

    Only parameters with a gradient at this step enter the mean. ``eps`` and ``batch_dims`` are
    optimizer-wide (they define the shared scalar); ``lr`` and ``betas`` may differ by group.
    State: ``step``, ``exp_avg``, ``exp_avg_sq`` per parameter.

    Deviations: the paper's script sums with ``.item()`` (a host sync per step); here the mean
    stays on the device. Same numbers otherwise (β = (0.9, 0.999), ε = 1e-8 outside the root).

    Gauge: equivariant — ``mean(v̂)`` is a sum of squared Frobenius norms, invariant under
    ``G → G Q``, so the update is ``m̂`` times a gauge-invariant scalar.

    Distributed: with DTensor parameters (FSDP2 ``fully_shard``, ``Shard`` placements) ``Σ v̂``
    is summed over each rank's block and all-reduced once per step over the shard groups
    (:func:`gaugekit.optim.distributed.param_sums`, no host sync), so every rank applies the
    one-process update (to round-off); replicated parameters (DDP, ``Replicate()``) already hold
    every entry and communicate nothing. ``batch_dims = 0`` with DTensor parameters.

    Args:
        params: tensors or param-group dicts; all parameters share ``param.shape[:batch_dims]``.
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to the shared root (per run).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    couples_param_groups = True
    hyper_checks = {"lr": LR, "betas": betas_check(), "eps": EPS}

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, *, batch_dims: int = 0,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps}
        super().__init__(params, defaults, batch_dims=batch_dims)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_optimizer_wide(
            group, self.defaults, ("eps", "batch_dims"), "it defines the shared scalar"
        )
        check_common_batch_shape(self.param_groups, group)

    def _update_all(self) -> None:
        batch_dims = self.defaults["batch_dims"]
        entries = []
        for group in self.param_groups:
            for p, g in self._with_grad(group["params"]):
                state = self.state[p]
                _init_adam_state(state, p)
                state["step"] += 1
                beta1, beta2 = self._hyper(group, "betas", p)
                F.adam_moments_(g, state["exp_avg"], state["exp_avg_sq"], beta1=beta1, beta2=beta2)
                m_hat = F.bias_corrected(state["exp_avg"], beta1, state["step"])
                v_hat = F.bias_corrected(state["exp_avg_sq"], beta2, state["step"])
                entries.append((p, m_hat, v_hat, self._hyper(group, "lr", p)))
        if not entries:
            return
        params, m_hats, v_hats, lrs = (list(column) for column in zip(*entries, strict=True))
        F.shared_scale_adam_(
            params, m_hats, v_hats, lrs, batch_dims=batch_dims, eps=self.defaults["eps"]
        )
