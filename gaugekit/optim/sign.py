"""Sign-based rules: Signum and Lion."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import functional as F
from gaugekit.optim._validation import DECAY, LR, WEIGHT_DECAY, Hyper, betas_check, bool_check
from gaugekit.optim.base import ZooOptimizer


class Signum(ZooOptimizer):
    r"""Signum: sign of an exponential moving average (Bernstein et al., 2018).

    Example:
        >>> import torch
        >>> from gaugekit.optim import Signum
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = Signum(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math::
        m_t = β m_{t-1} + (1-β) g_t,\qquad
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\,\operatorname{sign}(m_t)

    with ``sign(0) = 0`` and decoupled weight decay λ (``maximize`` uses ``−g_t``). State:
    ``momentum_buffer`` (the average ``m``).

    Deviations: none from the paper's ``signum`` (β = 0.9, λ = 0); the paper decays ``lr`` by a
    cosine schedule, which is the registry's ``lr_schedule``, not part of the optimizer.

    Gauge: not equivariant — ``sign`` acts entry by entry, and ``sign(G Q) ≠ sign(G) Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        momentum: ``β`` in ``[0, 1)`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
    """

    nonfinite_default = "propagate"  # per coordinate: torch's behaviour by default
    hyper_checks = {
        "lr": LR, "momentum": DECAY, "weight_decay": WEIGHT_DECAY, "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, momentum: Hyper = 0.9, *,
        weight_decay: Hyper = 0.0, maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "maximize": maximize,
            "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "momentum_buffer")
            F.signum_(
                p, g, state["momentum_buffer"], lr=self._hyper(group, "lr", p),
                momentum=self._hyper(group, "momentum", p),
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )


class Lion(ZooOptimizer):
    r"""Lion (Chen et al., 2023).

    Example:
        >>> import torch
        >>> from gaugekit.optim import Lion
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = Lion(model.parameters(), lr=1e-4)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math::
        c_t = \operatorname{sign}(β_1 m_{t-1} + (1-β_1) g_t),\qquad
        m_t = β_2 m_{t-1} + (1-β_2) g_t,

        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\, c_t

    with decoupled weight decay λ, as in Lion's paper (``maximize`` uses ``−g_t``). State:
    ``exp_avg`` (the average ``m``).

    Deviations: none (the paper runs ``λ = 0``); β = (0.9, 0.99) as in the paper and in Lion's
    reference code.

    Gauge: not equivariant — ``sign`` acts entry by entry, and ``sign(G Q) ≠ sign(G) Q``.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
    """

    nonfinite_default = "propagate"  # per coordinate: torch's behaviour by default
    hyper_checks = {
        "lr": LR, "betas": betas_check(), "weight_decay": WEIGHT_DECAY, "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-4, betas: tuple[Hyper, Hyper] = (0.9, 0.99),
        weight_decay: Hyper = 0.0, *, maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "weight_decay": weight_decay, "maximize": maximize,
                    "nonfinite": nonfinite}
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "exp_avg")
            beta1, beta2 = self._hyper(group, "betas", p)
            F.lion_(
                p, g, state["exp_avg"], lr=self._hyper(group, "lr", p), beta1=beta1,
                beta2=beta2, weight_decay=self._hyper(group, "weight_decay", p),
                maximize=group["maximize"],
            )
