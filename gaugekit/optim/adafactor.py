"""Adafactor with a factored (row × column) second moment."""

from __future__ import annotations

from typing import Any

from gaugekit.optim import functional as F
from gaugekit.optim._validation import DECAY, EPS, LR, WEIGHT_DECAY, Hyper, bool_check
from gaugekit.optim.base import ZooOptimizer


class Adafactor(ZooOptimizer):
    r"""Adafactor's factored second moment (Shazeer & Stern, 2018), the paper's simplified form.

    Example:
        >>> import torch
        >>> from gaugekit.optim import Adafactor
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = Adafactor(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    For a matrix gradient ``G`` (``n × k``, the last two dims after the batch dims):

    .. math::
        R_t = β_2 R_{t-1} + (1-β_2)\,\operatorname{rowmean}(G^2),

        C_t = β_2 C_{t-1} + (1-β_2)\,\operatorname{colmean}(G^2),

        \hat v_t = R_t C_t / (\operatorname{mean}(R_t) + 10^{-30}),

        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\, G / (\sqrt{\hat v_t} + ε)

    with decoupled weight decay λ (as ``torch.optim.Adafactor``'s; ``maximize`` uses ``−G``).

    A parameter with fewer than 2 dims after the batch dims keeps an unfactored
    ``v_t = β_2 v_{t-1} + (1-β_2) g^2`` instead; dims before the last two (after the batch dims)
    index independent factored moments (as torch's Adafactor). State: ``step``, ``row_var``
    (``(..., n, 1)``) and ``col_var`` (``(..., 1, k)``), or ``variance``.

    Deviations from Shazeer & Stern: constant ``β₂ = 0.999`` (no ``1 − t^{-0.8}`` schedule), no
    first moment, no bias correction, no update clipping, no relative step size, ``ε`` added to
    the root (as the paper's script); from ``torch.optim.Adafactor``: all of these, so the two
    are not comparable.

    Gauge: not equivariant — ``v̂`` is built from row and column sums of ``G²`` in the given
    basis; rotating ``G → G Q`` changes the column statistics.

    Distributed: with a sharded DTensor parameter the row and column means are left to DTensor's
    own sharding propagation (it all-gathers what they need): the same update as one process,
    with a few collectives per matrix and step.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        beta2: ``β₂`` in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v̂`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
    """

    hyper_checks = {
        "lr": LR, "beta2": DECAY, "eps": EPS, "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, beta2: Hyper = 0.999, eps: Hyper = 1e-8,
        weight_decay: Hyper = 0.0, *, maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "beta2": beta2, "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            factored = p.ndim - group["batch_dims"] >= 2
            state = self._state(p, *(() if factored else ("variance",)), step=True)
            if factored and "row_var" not in state:
                state["row_var"] = p.new_zeros(p.shape[:-1] + (1,))
                state["col_var"] = p.new_zeros(p.shape[:-2] + (1, p.shape[-1]))
            hypers = {
                name: self._hyper(group, name, p)
                for name in ("lr", "beta2", "eps", "weight_decay")
            }
            hypers["maximize"] = group["maximize"]
            if factored:
                F.adafactor_factored_(p, g, state["row_var"], state["col_var"], **hypers)
            else:
                F.adafactor_unfactored_(p, g, state["variance"], **hypers)
