"""Gradient descent and heavy-ball momentum."""

from __future__ import annotations

from typing import Any

import torch

from gaugekit.optim import functional as F
from gaugekit.optim.base import ZooOptimizer
from gaugekit.optim.validation import DECAY, LR, Hyper, bool_check


class GD(ZooOptimizer):
    r"""Plain gradient descent.

    .. math:: θ_{t} = θ_{t-1} − \mathrm{lr}\, g_t

    Deviations: none (the paper's ``gd``; no weight decay). Stateless.

    Gauge: equivariant — the update is linear in ``G``, so ``G → G Q`` gives ``ΔU → ΔU Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    hyper_checks = {"lr": LR}

    def __init__(self, params: Any, lr: Hyper = 1e-2, *, batch_dims: int = 0) -> None:
        super().__init__(params, {"lr": lr}, batch_dims=batch_dims)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            F.gd_(p, g, lr=self._hyper(group, "lr", p))


class Momentum(ZooOptimizer):
    r"""Heavy-ball momentum (torch's SGD convention with ``dampening = 0``).

    .. math:: b_t = μ\, b_{t-1} + g_t,\qquad θ_t = θ_{t-1} − \mathrm{lr}\, b_t

    with ``b_0 = 0`` (so ``b_1 = g_1``, as torch's first-step ``clone``). ``nesterov=True`` uses
    ``g_t + μ b_t`` instead of ``b_t``. State: ``momentum_buffer``.

    Deviations: the paper's momentum (Section 4) is the same un-damped buffer; no weight decay,
    no dampening option.

    Gauge: equivariant — ``b_t`` is a linear combination of past gradients, each of which
    transforms as ``G → G Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        momentum: ``μ`` in ``[0, 1)`` (per run).
        nesterov: use the Nesterov look-ahead.
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    hyper_checks = {"lr": LR, "momentum": DECAY, "nesterov": bool_check}

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, momentum: Hyper = 0.9, *, nesterov: bool = False,
        batch_dims: int = 0,
    ) -> None:
        defaults = {"lr": lr, "momentum": momentum, "nesterov": nesterov}
        super().__init__(params, defaults, batch_dims=batch_dims)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self.state[p]
            if not state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            F.momentum_(
                p, g, state["momentum_buffer"], lr=self._hyper(group, "lr", p),
                momentum=self._hyper(group, "momentum", p), nesterov=group["nesterov"],
            )
