"""Gradient descent and heavy-ball momentum."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import functional as F
from gaugekit.optim._validation import DECAY, LR, WEIGHT_DECAY, Hyper, bool_check
from gaugekit.optim.base import ZooOptimizer


class GD(ZooOptimizer):
    r"""Plain gradient descent.

    Example:
        >>> import torch
        >>> from gaugekit.optim import GD
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = GD(model.parameters(), lr=0.1)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math:: θ_{t} = θ_{t-1} − \mathrm{lr}\,(g_t + λ θ_{t-1})

    with torch SGD's coupled weight decay λ (L2; ``maximize`` uses ``−g_t``): the numbers of
    ``torch.optim.SGD`` without momentum.

    Deviations: none (the paper's ``gd``, ``λ = 0``). Stateless.

    Gauge: equivariant — the update is linear in ``G`` and in ``θ`` (``λθ`` is the gradient of
    the invariant ``λ/2 ‖θ‖²``), so ``G → G Q``, ``θ → θ Q`` give ``ΔU → ΔU Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        weight_decay: L2 coefficient ``λ >= 0`` (per run).
    """

    weight_decay_kind = "coupled"
    nonfinite_default = "propagate"  # per coordinate: torch's behaviour by default
    hyper_checks = {"lr": LR, "weight_decay": WEIGHT_DECAY, "maximize": bool_check}

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, *, weight_decay: Hyper = 0.0,
        maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {"lr": lr, "weight_decay": weight_decay, "maximize": maximize,
                    "nonfinite": nonfinite}
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            F.gd_(
                p, g, lr=self._hyper(group, "lr", p),
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )


class Momentum(ZooOptimizer):
    r"""Heavy-ball momentum (torch's SGD convention with ``dampening = 0``).

    Example:
        >>> import torch
        >>> from gaugekit.optim import Momentum
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = Momentum(model.parameters(), lr=0.1, momentum=0.9)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math:: b_t = μ\, b_{t-1} + g_t + λ θ_{t-1},\qquad θ_t = θ_{t-1} − \mathrm{lr}\, b_t

    with ``b_0 = 0`` (so ``b_1 = g_1 + λθ_0``, as torch's first-step ``clone``) and torch SGD's
    coupled weight decay λ (L2; ``maximize`` uses ``−g_t``). ``nesterov=True`` uses
    ``g_t + λθ_{t-1} + μ b_t`` instead of ``b_t``. State: ``momentum_buffer``.

    Deviations: the paper's momentum (Section 4) is the same un-damped buffer (``λ = 0``); no
    dampening option.

    Gauge: equivariant — ``b_t`` is a linear combination of past gradients and iterates, each
    of which transforms as ``G → G Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        momentum: ``μ`` in ``[0, 1)`` (per run).
        weight_decay: L2 coefficient ``λ >= 0`` (per run).
        nesterov: use the Nesterov look-ahead.
    """

    weight_decay_kind = "coupled"
    nonfinite_default = "propagate"  # per coordinate: torch's behaviour by default
    hyper_checks = {
        "lr": LR, "momentum": DECAY, "weight_decay": WEIGHT_DECAY, "nesterov": bool_check,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, momentum: Hyper = 0.9, *,
        weight_decay: Hyper = 0.0, nesterov: bool = False, maximize: bool = False,
        batch_dims: int = 0, nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov,
            "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "momentum_buffer")
            F.momentum_(
                p, g, state["momentum_buffer"], lr=self._hyper(group, "lr", p),
                momentum=self._hyper(group, "momentum", p), nesterov=group["nesterov"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )
