"""Routing parameters between matrix rules and elementwise rules."""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor, nn


def split_matrix_params(
    model_or_params: nn.Module | Iterable[Tensor], *, batch_dims: int = 0
) -> tuple[list[Tensor], list[Tensor]]:
    """Split parameters into ``(matrices, others)``.

    A matrix has exactly ``batch_dims + 2`` dimensions (the shape Muon, Shampoo, ScaledGD and
    GramPreconditioned accept); everything else (biases, norms' scales, convolution kernels)
    goes to ``others``. Only parameters with ``requires_grad`` are kept; order is preserved::

        matrices, others = split_matrix_params(model)
        opt_matrix = Muon(matrices, lr=3e-2)
        opt_other = Adam(others, lr=1e-3)
    """
    if isinstance(model_or_params, nn.Module):
        params: Iterable[Tensor] = model_or_params.parameters()
    else:
        params = model_or_params
    matrices: list[Tensor] = []
    others: list[Tensor] = []
    for p in params:
        if not p.requires_grad:
            continue
        (matrices if p.ndim == batch_dims + 2 else others).append(p)
    return matrices, others
