"""Muon: momentum, then quintic Newton–Schulz orthogonalization."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gaugekit.linalg import NS_COEFFICIENTS
from gaugekit.optim import functional_matrix as FM
from gaugekit.optim._validation import (
    DECAY,
    LR,
    WEIGHT_DECAY,
    Hyper,
    bool_check,
    choice_check,
    coefficients_check,
    int_check,
    invalid,
    real_check,
)
from gaugekit.optim.base import ZooOptimizer
from gaugekit.optim.orthogonalize import RowBlocks, row_blocks


def _ns_dtype_check(name: str, value: Any) -> None:
    """``None`` or a real floating ``torch.dtype`` (the Newton–Schulz iteration's)."""
    if value is not None and not (isinstance(value, torch.dtype) and value.is_floating_point
                                  and not value.is_complex):
        raise invalid(name, value, "None (the parameter's dtype) or a floating torch.dtype, "
                                   "e.g. torch.bfloat16")


def _split_rows_check(name: str, value: Any) -> None:
    """An integer ``>= 1``, a tuple of block sizes or a tuple of tuples of row indices."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise invalid(name, value, "an integer >= 1, block sizes or row-index blocks")
        return
    ok = isinstance(value, (tuple, list)) and len(value) > 0 and (
        all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in value)
        or all(isinstance(b, (tuple, list)) and b and all(
            isinstance(i, int) and not isinstance(i, bool) for i in b) for b in value))
    if not ok:
        raise invalid(name, value, "an integer >= 1 (equal row blocks), a tuple of block sizes "
                      "or a tuple of tuples of row indices (a partition of the rows)")


def _check_split_rows(group: dict[str, Any], params: list[Tensor]) -> None:
    """Refuse a ``split_rows`` whose blocks do not partition the rows of a matrix of its group
    (the rows as Muon orients it, ``transposed`` included)."""
    split, batch_dims = group["split_rows"], group["batch_dims"]
    for p in params:
        if p.ndim < batch_dims + 2:
            continue
        rows = p.shape[batch_dims + 1] if group.get("transposed") else p.shape[batch_dims]
        try:
            row_blocks(rows, split)
        except ValueError:
            raise invalid("split_rows", split, "blocks that partition the rows of every matrix "
                          f"of its group (got a parameter of shape {tuple(p.shape)}, {rows} rows "
                          f"with batch_dims={batch_dims}"
                          f"{', transposed' if group.get('transposed') else ''})") from None


def _muon_group_step_(opt: ZooOptimizer, group: dict[str, Any], params: list[Tensor],
                      grads: list[Tensor], *, eps_key: str = "eps") -> None:
    """One Muon step of ``params`` (of ``group``) through
    :func:`gaugekit.optim.functional.muon_many_`; state ``momentum_buffer``. Shared by
    :class:`Muon` and :class:`~gaugekit.optim.MuonAdam`
    (whose Newton–Schulz ε is the group key ``ns_eps``)."""
    if not params:
        return
    bufs = [opt._state(p, "momentum_buffer")["momentum_buffer"] for p in params]
    FM.muon_many_(
        params, grads, bufs, lrs=[opt._hyper(group, "lr", p) for p in params],
        momentums=[opt._hyper(group, "momentum", p) for p in params],
        weight_decays=[opt._hyper(group, "weight_decay", p) for p in params],
        nesterov=group["nesterov"], ns_steps=group["ns_steps"],
        ns_coefficients=group["ns_coefficients"], eps=group[eps_key],
        adjust_lr_fn=group["adjust_lr_fn"], maximize=group["maximize"],
        batch_dims=group["batch_dims"], split_rows=group["split_rows"],
        transposed=group["transposed"], ns_dtype=group["ns_dtype"],
    )


class Muon(ZooOptimizer):
    r"""Muon (Jordan et al., 2024) in the paper's convention.

    Example:
        >>> import torch
        >>> from gaugekit.optim import Muon
        >>> U, V = (torch.randn(n, 3, requires_grad=True) for n in (10, 8))
        >>> optimizer = Muon([U, V], lr=0.02)
        >>> (U @ V.T - torch.eye(10, 8)).square().sum().backward()
        >>> optimizer.step()

    .. math::
        M_t = μ M_{t-1} + G_t,\qquad
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\cdot ρ\cdot \mathrm{NS}_5(M_t)

    with decoupled weight decay λ (torch.optim.Muon's; ``maximize`` uses ``−G_t``).

    ``NS₅`` is :func:`gaugekit.linalg.newton_schulz`: ``X₀ = M/(‖M‖_F + ε)`` per matrix (ε = 1e-7),
    then 5 quintic steps with ``(a, b, c) = (3.4445, −4.7750, 2.0315)``, tall matrices transposed.
    ``ρ = 1`` by default; ``adjust_lr_fn`` = ``"original"`` (``√max(1, n/k)``) or
    ``"match_rms_adamw"`` (``0.2 √max(n, k)``) are torch's shape factors. ``nesterov=True``
    orthogonalizes ``G_t + μ M_t``. State: ``momentum_buffer``.

    ``ns_dtype=torch.bfloat16`` runs the iteration in bfloat16 (torch.optim.Muon's and Keller
    Jordan's precision; faster where bfloat16 matrix products are, e.g. a CPU with AMX, see
    ``bench/bench_optimizer_step.py``): the update is equivariant only to bfloat16 round-off,
    and the factor audit says so (:mod:`gaugekit.audit.factor_results`). ``split_rows = s``
    orthogonalizes ``s`` row blocks of each matrix separately (a fused ``[W_Q; W_K; W_V]``:
    ``s = 3``), the shape factor taken on a block. Same-shape matrices of a group are stacked
    into one Newton–Schulz call where that pays
    (:func:`gaugekit.optim.orthogonalize.orthogonalize`).

    Deviations from ``torch.optim.Muon``: un-damped buffer ``μ M + G`` (torch: ``μ M + (1−μ) G``,
    i.e. ``(1−μ)`` times ours, which NS undoes up to ε); ``nesterov=False``, ``ρ = 1`` and no
    weight decay by default; ``‖M‖ + ε`` instead of ``max(‖M‖, ε)``; the NS iteration runs in the
    parameter's dtype by default (torch runs it in bfloat16: ``ns_dtype=torch.bfloat16``). From
    the paper: none (μ = 0.9, no Nesterov, λ = 0). Defaults side by side with torch's and Keller
    Jordan's: :class:`~gaugekit.optim.MuonAdam`, whose defaults are Keller Jordan's.

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
        ns_dtype: dtype of the Newton–Schulz iteration; ``None``: the parameter's.
        split_rows: row blocks per matrix, each orthogonalized alone: an integer (equal
            blocks), block sizes, or row-index blocks (:mod:`gaugekit.optim.orthogonalize`).
        transposed: the matrices are stored ``(in, out)`` (transformers' ``Conv1D``, transposed
            convolutions): Muon orients them ``out × in`` for the row blocks and ``ρ``.
    """

    matrix_only = True
    rule_keys = ("ns_dtype",)
    later_keys = {"split_rows": 1, "ns_dtype": None, "transposed": False}
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
        "ns_dtype": _ns_dtype_check,
        "split_rows": _split_rows_check,
        "transposed": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, momentum: Hyper = 0.9, *,
        weight_decay: Hyper = 0.0, nesterov: bool = False, ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, eps: float = 1e-7,
        adjust_lr_fn: str | None = None, ns_dtype: torch.dtype | None = None,
        split_rows: RowBlocks = 1, transposed: bool = False, maximize: bool = False,
        batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov,
            "ns_steps": ns_steps, "ns_coefficients": ns_coefficients, "eps": eps,
            "adjust_lr_fn": adjust_lr_fn, "ns_dtype": ns_dtype, "split_rows": split_rows,
            "transposed": transposed,
            "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        _check_split_rows(group, group["params"])

    def _update_group(self, group: dict[str, Any]) -> None:
        pairs = list(self._with_grad(group["params"]))
        _muon_group_step_(self, group, [p for p, _ in pairs], [g for _, g in pairs])
