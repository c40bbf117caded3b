r"""How Muon's Newton–Schulz runs on the matrices of a step: each parameter oriented as a stack
of ``out × in`` matrices (``transposed`` for a layer stored ``(in, out)``: transformers'
``Conv1D``, a transposed convolution), cut into its row blocks (a fused ``[W_Q; W_K; W_V]``,
per block or per head), and same-shape matrices stacked into one call where that pays. The
iteration itself is :func:`gaugekit.linalg.newton_schulz`; nothing here changes its result
(stacking and cutting give each matrix its own iteration).

Row blocks (``split_rows``): an integer ``s`` (``s`` consecutive blocks of equal size), a
tuple of integers (consecutive blocks of those sizes), or a tuple of tuples of row indices (a
partition of the rows: the query rows of a per-head ``[q_h | k_h | v_h]`` layout, say).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from gaugekit.linalg import NS_COEFFICIENTS, newton_schulz

RowBlocks = int | tuple[int, ...] | tuple[tuple[int, ...], ...]

_FORCED: list[bool | None] = [None]


@contextlib.contextmanager
def stacking(on: bool | None) -> Iterator[None]:
    """Force stacking on or off inside the block (``None``: where it pays); for tests and
    benchmarks."""
    before = _FORCED[0]
    _FORCED[0] = on
    try:
        yield
    finally:
        _FORCED[0] = before


def _stacking_pays(t: Tensor, ns_dtype: torch.dtype | None) -> bool:
    """Whether one Newton–Schulz call on a stack of same-shape matrices beats one call each:
    off the CPU, and on the CPU for a 16-bit iteration (measured with 2 threads on 512 × 2048
    matrices, ``bench/bench_optimizer_step.py``: a stack of 10 in bfloat16 takes about 0.6 of
    the loop, in float32 about 1.5 times it)."""
    if _FORCED[0] is not None:
        return _FORCED[0]
    dtype = ns_dtype or t.dtype
    return t.device.type != "cpu" or dtype.itemsize <= 2


def oriented(t: Tensor, batch_dims: int, transposed: bool = False) -> Tensor:
    """``t`` as the stack ``(-1, rows, cols)`` of the matrices Muon sees: after the batch dims
    the first dimension is the rows (the second with ``transposed``) and the others are the
    columns (a kernel ``(out, in, kh, kw)`` is ``out × in·kh·kw``)."""
    if transposed:
        t = t.transpose(batch_dims, batch_dims + 1)
    return t.reshape(-1, t.shape[batch_dims], math.prod(t.shape[batch_dims + 1:]))


def unoriented(m: Tensor, like: Tensor, batch_dims: int, transposed: bool = False) -> Tensor:
    """The inverse of :func:`oriented`: ``m`` in ``like``'s shape and orientation."""
    if not transposed:
        return m.reshape(like.shape)
    shape = list(like.shape)
    shape[batch_dims], shape[batch_dims + 1] = shape[batch_dims + 1], shape[batch_dims]
    return m.reshape(shape).transpose(batch_dims, batch_dims + 1)


def row_blocks(rows: int, split: RowBlocks) -> list[slice | Tensor]:
    """The row blocks of ``rows`` rows under ``split`` (module doc) as slices or index tensors.

    Raises:
        ValueError: blocks that do not partition the rows.
    """
    if isinstance(split, int) and not isinstance(split, bool):
        if split < 1 or rows % split:
            raise ValueError(f"Invalid split_rows: {split!r}; expected a divisor of the {rows} "
                             "rows")
        size = rows // split
        return [slice(i * size, (i + 1) * size) for i in range(split)]
    split = tuple(split)
    if split and all(isinstance(b, int) and not isinstance(b, bool) for b in split):
        if any(b < 1 for b in split) or sum(split) != rows:
            raise ValueError(f"Invalid split_rows: {split!r}; expected block sizes >= 1 summing "
                             f"to the {rows} rows")
        starts = [sum(split[:i]) for i in range(len(split))]
        return [slice(a, a + b) for a, b in zip(starts, split, strict=True)]
    blocks = [tuple(b) for b in split]
    flat = sorted(i for b in blocks for i in b)
    if not blocks or any(not b for b in blocks) or flat != list(range(rows)):
        raise ValueError(f"Invalid split_rows: a partition of {len(flat)} indices; expected the "
                         f"row blocks to partition the {rows} rows")
    return [torch.tensor(b) for b in blocks]


def block_sizes(rows: int, split: RowBlocks) -> list[int]:
    """The number of rows of each block."""
    return [b.stop - b.start if isinstance(b, slice) else len(b) for b in row_blocks(rows, split)]


def orthogonalize(
    targets: Sequence[Tensor], *, batch_dims: int = 0,
    split_rows: RowBlocks | Sequence[RowBlocks] = 1,
    transposed: bool | Sequence[bool] = False, ratios: Sequence[Sequence[float]] | None = None,
    ns_steps: int = 5, ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    eps: float = 1e-7, ns_dtype: torch.dtype | None = None,
) -> list[Tensor]:
    r"""``NS₅`` (:func:`gaugekit.linalg.newton_schulz`) of every matrix of every target.

    Each target is viewed as its stack of matrices (:func:`oriented`), each matrix cut into
    its row blocks (``split_rows``, one for all targets or one per target); every block is
    orthogonalized alone and multiplied by its ``ratios[i][b]`` (Muon's shape factor, when
    given). The result has the target's shape. Where it pays (``_stacking_pays``) the blocks of
    all targets that share a shape (up to a transpose), dtype and device are stacked into one
    call, which gives each block's result (the normalisation and every product are per matrix).
    """
    n = len(targets)
    splits = list(split_rows) if _per_target(split_rows, n) else [split_rows] * n
    flips = list(transposed) if isinstance(transposed, Sequence) else [transposed] * n
    pieces: list[tuple[int, Any, Tensor]] = []  # (target, block, matrices)
    views = []
    for i, t in enumerate(targets):
        m = oriented(t, batch_dims, flips[i])
        views.append(m)
        blocks = row_blocks(m.shape[-2], splits[i])
        if all(isinstance(b, slice) for b in blocks) and len(
                {b.stop - b.start for b in blocks}) == 1:
            size = blocks[0].stop
            pieces.append((i, "equal", m.reshape(-1, size, m.shape[-1])))
        else:
            pieces.extend((i, b, m[:, b]) for b in blocks)

    def ns(x: Tensor) -> Tensor:
        return newton_schulz(x, steps=ns_steps, eps=eps, coefficients=ns_coefficients,
                             dtype=ns_dtype)

    results: list[Tensor | None] = [None] * len(pieces)
    stacks: dict[tuple, list[int]] = {}
    for k, (i, _, x) in enumerate(pieces):
        if _stacking_pays(targets[i], ns_dtype):
            shape = tuple(sorted(x.shape[1:]))
            key = (shape, x.shape[-2] > x.shape[-1], x.dtype, x.device)
            stacks.setdefault(key, []).append(k)
        else:
            results[k] = ns(pieces[k][2])
    for members in stacks.values():
        xs = [pieces[k][2] for k in members]
        outs = ns(torch.cat(xs)).split([x.shape[0] for x in xs]) if len(xs) > 1 else [ns(xs[0])]
        for k, o in zip(members, outs, strict=True):
            results[k] = o
    out = []
    for i, (t, m) in enumerate(zip(targets, views, strict=True)):
        own = [(b, r) for (j, b, _), r in zip(pieces, results, strict=True) if j == i]
        scale = list(ratios[i]) if ratios is not None else None
        if own[0][0] == "equal":
            o = own[0][1].reshape(m.shape[0], -1, *own[0][1].shape[-2:])
            if scale is not None and any(r != 1 for r in scale):
                o = o * torch.tensor(scale, dtype=o.dtype, device=o.device).view(1, -1, 1, 1)
            o = o.reshape(m.shape)
        else:
            o = torch.empty_like(m)
            for k, (b, r) in enumerate(own):
                o[:, b] = r if scale is None or scale[k] == 1 else r * scale[k]
        out.append(unoriented(o, t, batch_dims, flips[i]))
    return out


def _per_target(split: Any, n: int) -> bool:
    """Whether ``split`` is one row-block spec per target (a list) rather than one spec."""
    return isinstance(split, list) and len(split) == n
