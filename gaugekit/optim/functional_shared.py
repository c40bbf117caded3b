r"""The rules with Adam's first moment and a coarse second moment, their math written once:
shared-scale Adam (one scalar over all parameters) and Adam-mini (one value per block).

Each is a statistic (:func:`shared_scale_`, :func:`adam_mini_coefficient_`) and the moment pass
they share (:func:`moment_step_`): ``m ← m + (1 − β₁)(g − m)``, ``θ ← θ d + c m`` with the
decoupled decay ``d = 1 − lr λ`` and the step's coefficient ``c = −lr/((1 − β₁ᵗ) s)``. How the
pass runs (a loop, multi-tensor calls, one compiled pass, torch's fused SGD kernel) is
:mod:`gaugekit.optim.execution`. Notation as in :mod:`gaugekit.optim.functional`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from gaugekit.optim import distributed as D
from gaugekit.optim.functional import Hyper, bias_corrected, ema_, is_zero


def moment_step_(param: Tensor, grad: Tensor, exp_avg: Tensor, *, weight: Hyper,
                 coefficient: Hyper, decay: Hyper | None = None) -> None:
    r"""``m ← m + w (g − m)`` (``lerp_``), then ``θ ← θ d + c m`` (``d`` skipped when ``None``;
    ``w``, ``c``, ``d`` broadcast against ``θ``)."""
    exp_avg.lerp_(grad, weight)
    if decay is not None:
        param.mul_(decay)
    param.addcmul_(exp_avg, coefficient)


def decay_factor(lr: Hyper, weight_decay: Hyper) -> Hyper | None:
    r"""``1 − lr λ``, the decoupled decay as a factor; ``None`` when ``λ`` is the float 0."""
    return None if is_zero(weight_decay) else 1 - lr * weight_decay


def run_sums_of_squares(tensors: list[Tensor], batch_dims: int) -> list[Tensor]:
    r"""``Σ x²`` over all entries of each tensor, one value per run (shape ``batch_shape``).

    One pass over each tensor, no temporary: a BLAS ``dot`` of the flattened tensor when it is
    one run of float32/float64 (three times faster than ``vector_norm`` on the CPU), else
    ``vector_norm`` (in float32 for half precision, whose ``Σ x²`` overflows from
    ``‖x‖ = 256``). DTensor (sharded) ``tensors`` are summed over their local blocks and
    all-reduced once for all of them (:func:`gaugekit.optim.distributed.param_sums`).
    """
    partials = []
    for t in map(D.local, tensors):
        dims = tuple(range(batch_dims, t.ndim))
        if batch_dims == 0 and t.dtype in (torch.float32, torch.float64) and t.numel():
            flat = t.reshape(-1)
            partials.append(torch.dot(flat, flat))
        elif t.dtype.itemsize < 4:
            partials.append(torch.linalg.vector_norm(t, dim=dims, dtype=torch.float32).square()
                            if dims else t.float() * t.float())
        else:
            partials.append(torch.linalg.vector_norm(t, dim=dims).square() if dims else t * t)
    return D.param_sums(partials, tensors)


def shared_scale_(v: Any, q: Any, n: Any, b: Any, t: Any, eps: Any) -> tuple[Any, Any]:
    r"""Shared-scale Adam's statistic, on arrays whose rows are the parameters (``torch`` or
    ``numpy``: the same operations; :mod:`gaugekit.optim.execution` picks). Per parameter
    ``i`` (``nᵢ`` entries per run, its own step ``tᵢ``), the mean of what Adam's second
    moment would be follows its own recurrence (the mean is linear), and the scale pools them:

    ``v̄ᵢ ← β₂ v̄ᵢ + (1 − β₂) Σgᵢ²/nᵢ``,  ``s = √(Σᵢ nᵢ v̄ᵢ / (1 − β₂^{tᵢ}) / Σᵢ nᵢ) + ε``.

    ``v``: the ``v̄ᵢ`` (rows ``i``, then one entry per run), ``q`` the sums ``Σgᵢ²``, ``n``,
    ``b``, ``t`` the counts, ``β₂`` and steps (broadcast against ``v``). Returns the new ``v``
    and ``s`` (one value per run)."""
    v = b * v + (1 - b) * (q / n)
    total = (n * (v / (1 - b**t))).sum(0)
    return v, (total / n.sum(0)) ** 0.5 + eps


def shared_scale_coefficients(scale: Hyper, params: list[Tensor], *, lrs: list[Hyper],
                              beta1s: list[Hyper], steps: list[int],
                              batch_dims: int) -> list[Hyper]:
    r"""``c = −lr / ((1 − β₁ᵗ) s)`` per parameter, ``s`` viewed against it (one value per
    run); parameters that share ``(lr, β₁, t)`` as floats share one value (a float when ``s``
    is one)."""
    if not isinstance(scale, Tensor):
        return [(-lr / (1 - beta1**step)) / scale if scale else -math.inf
                for lr, beta1, step in zip(lrs, beta1s, steps, strict=True)]
    out, shared = [], {}
    for p, lr, beta1, step in zip(params, lrs, beta1s, steps, strict=True):
        floats = not isinstance(lr, Tensor) and not isinstance(beta1, Tensor)
        key = (lr, beta1, step, p.ndim if scale.ndim else 0) if floats else None
        if key is None or key not in shared:
            s = scale if scale.ndim == 0 else scale.reshape(
                scale.shape + (1,) * (p.ndim - batch_dims))
            value = (-lr / (1 - beta1**step)) / s
            if key is None:
                out.append(value)
                continue
            shared[key] = value
        out.append(shared[key])
    return out


# ---------------------------------------------------------------------------------- Adam-mini
def block_mean_sq(grad: Tensor, blocks: int | str, batch_dims: int) -> Tensor:
    r"""``mean(g²)`` over each block of ``grad`` (one value per block and run).

    ``blocks``: an integer ``k`` cuts the first dimension after the ``batch_dims`` into
    consecutive blocks of ``k`` (rows of a matrix, entries of a vector), each block with all of
    its trailing entries; ``"tensor"`` is one block; ``"entry"`` is every entry its own block
    (Adam). The result has shape ``(*runs, rows // k)`` for an integer ``k`` (``(*runs, 1)``
    for a 0-d ``grad``: one block of one entry), ``grad``'s dimensions reduced to size 1 for
    ``"tensor"``, ``grad``'s shape for ``"entry"``. One pass, no temporary the size of ``grad``.
    """
    if blocks == "entry":
        return grad * grad
    lead = grad.shape[:batch_dims]
    if blocks == "tensor":
        if grad.ndim == batch_dims:
            return grad * grad
        flat = grad.reshape(*lead, -1)
        mean = torch.linalg.vector_norm(flat, dim=-1).square() / flat.shape[-1]
        return mean.reshape(lead + (1,) * (grad.ndim - batch_dims))
    if grad.ndim == batch_dims:
        return (grad * grad).unsqueeze(-1)
    rows = grad.shape[batch_dims]
    flat = grad.reshape(*lead, rows // blocks, -1)
    return torch.linalg.vector_norm(flat, dim=-1).square() / flat.shape[-1]


def expand_blocks(block_value: Tensor, like: Tensor, blocks: int | str, batch_dims: int) -> Tensor:
    r"""A per-block value (:func:`block_mean_sq`'s layout) broadcast to the shape of ``like``
    (materialized: for a parameter without a view of its blocks)."""
    if blocks in ("entry", "tensor"):
        return block_value
    if like.ndim == batch_dims:
        return block_value.reshape(like.shape)
    rows = like.shape[batch_dims]
    trailing = like.ndim - batch_dims - 1
    v = block_value.reshape(*block_value.shape, 1, *([1] * trailing))
    v = v.expand(*block_value.shape, rows // block_value.shape[-1], *like.shape[batch_dims + 1:])
    return v.reshape(like.shape[:batch_dims] + (rows,) + like.shape[batch_dims + 1:])


def block_view(value: Hyper, batch_dims: int) -> Hyper:
    """A hyperparameter broadcast against a parameter (:func:`gaugekit.optim.per_run`), viewed
    against the blocks ``(*runs, blocks)`` instead."""
    if isinstance(value, Tensor) and value.ndim and value.ndim >= batch_dims:
        return value.reshape(*value.shape[:batch_dims], 1)
    return value


def adam_mini_coefficient_(block_sq: Tensor, block_mean: Tensor, *, step: int, lr: Hyper,
                           beta1: Hyper, beta2: Hyper, eps: Hyper) -> Tensor:
    r"""Adam-mini's statistic and coefficient: ``v_b ← β₂ v_b + (1 − β₂) mean_{i∈b} g_i²`` (in
    place), ``c_b = −lr / ((1 − β₁ᵗ)(√(v_b/(1 − β₂ᵗ)) + ε))``, one per block (``block_sq``'s
    layout; the hyperparameters broadcast against it)."""
    ema_(block_sq, block_mean, beta2)
    return (-lr / (1 - beta1**step)) / (bias_corrected(block_sq, beta2, step).sqrt() + eps)


def adam_mini_rows(param: Tensor, grad: Tensor, exp_avg: Tensor, coefficient: Tensor, *,
                   blocks: int | str, batch_dims: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(θ, g, m, c)`` for the moment pass: with integer blocks, the blocks ``(*runs, b, -1)``
    as views of a contiguous parameter and ``c`` as ``(*runs, b, 1)``; a parameter without
    such a view gets ``c`` expanded to its shape (:func:`expand_blocks`)."""
    if isinstance(blocks, str):
        return param, grad, exp_avg, coefficient
    if param.is_contiguous() and exp_avg.is_contiguous():
        view = (*param.shape[:batch_dims], coefficient.shape[-1], -1)
        return (param.view(view), grad.reshape(view), exp_avg.view(view),
                coefficient.unsqueeze(-1))
    return param, grad, exp_avg, expand_blocks(coefficient, param, blocks, batch_dims)


def param_count(t: Tensor, batch_dims: int) -> int:
    """The entries of one run of ``t``."""
    return math.prod(t.shape[batch_dims:])
