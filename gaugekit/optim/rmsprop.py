"""RMSprop (Hinton, 2012), without momentum."""

from __future__ import annotations

from typing import Any

import torch

from gaugekit.optim import functional as F
from gaugekit.optim.base import ZooOptimizer
from gaugekit.optim.validation import DECAY, EPS, LR, Hyper


class RMSprop(ZooOptimizer):
    r"""RMSprop, coordinate-wise, no momentum, no centering, no bias correction.

    .. math::
        v_t = α v_{t-1} + (1-α) g_t^2,\qquad θ_t = θ_{t-1} − \mathrm{lr}\, g_t / (\sqrt{v_t} + ε)

    State: ``step``, ``square_avg`` (torch's names). Same numbers as ``torch.optim.RMSprop``
    (``momentum=0, centered=False, weight_decay=0``) up to rounding.

    Deviations: none from the paper's ``rmsprop`` (α = 0.99, ε = 1e-8 outside the root).

    Gauge: not equivariant — the per-entry denominator ``√v`` does not commute with ``G → G Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        alpha: smoothing constant ``α`` in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v`` (per run).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    hyper_checks = {"lr": LR, "alpha": DECAY, "eps": EPS}

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, alpha: Hyper = 0.99, eps: Hyper = 1e-8, *,
        batch_dims: int = 0,
    ) -> None:
        defaults = {"lr": lr, "alpha": alpha, "eps": eps}
        super().__init__(params, defaults, batch_dims=batch_dims)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            F.rmsprop_(
                p, g, state["square_avg"], lr=self._hyper(group, "lr", p),
                alpha=self._hyper(group, "alpha", p), eps=self._hyper(group, "eps", p),
            )
