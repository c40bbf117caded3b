"""RMSprop (Hinton, 2012), without momentum."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import functional as F
from gaugekit.optim._validation import DECAY, EPS, LR, WEIGHT_DECAY, Hyper, bool_check
from gaugekit.optim.base import ZooOptimizer


class RMSprop(ZooOptimizer):
    r"""RMSprop, coordinate-wise, no momentum, no centering, no bias correction.

    Example:
        >>> import torch
        >>> from gaugekit.optim import RMSprop
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = RMSprop(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math::
        d_t = g_t + λ θ_{t-1},\qquad v_t = α v_{t-1} + (1-α) d_t^2,

        θ_t = θ_{t-1} − \mathrm{lr}\, d_t / (\sqrt{v_t} + ε)

    with torch RMSprop's coupled weight decay λ (L2; ``maximize`` uses ``−g_t``). State:
    ``step``, ``square_avg`` (torch's names). Same numbers as ``torch.optim.RMSprop``
    (``momentum=0, centered=False``) up to rounding.

    Deviations: none from the paper's ``rmsprop`` (α = 0.99, ε = 1e-8 outside the root, λ = 0).

    Gauge: not equivariant — the per-entry denominator ``√v`` does not commute with ``G → G Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        alpha: smoothing constant ``α`` in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v`` (per run).
        weight_decay: L2 coefficient ``λ >= 0`` (per run).
    """

    weight_decay_kind = "coupled"
    nonfinite_default = "propagate"  # per coordinate: torch's behaviour by default
    hyper_checks = {
        "lr": LR, "alpha": DECAY, "eps": EPS, "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, alpha: Hyper = 0.99, eps: Hyper = 1e-8,
        weight_decay: Hyper = 0.0, *, maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "square_avg", step=True)
            F.rmsprop_(
                p, g, state["square_avg"], lr=self._hyper(group, "lr", p),
                alpha=self._hyper(group, "alpha", p), eps=self._hyper(group, "eps", p),
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )
