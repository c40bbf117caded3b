r"""Reductions over parameters under ``torch.distributed``: DTensor (FSDP2) and DDP.

A rule that reduces over ALL parameters (shared-scale Adam's ``s = √mean(v̂) + ε``, FlowAdam's
``s̄``, ``‖g‖``, ``‖g − g_prev‖`` and the per-parameter norms of its clip and velocity cap) needs,
for a parameter sharded across ranks, the sum over every rank's shard. Three layouts:

* a plain tensor (one process, or DDP: every rank holds the whole parameter and, after DDP's
  all-reduce, the whole averaged gradient) — the local sum IS the sum; nothing is communicated;
* a DTensor with ``Replicate()`` on a mesh dimension — every rank of that dimension holds the
  same entries, so summing over it would count each entry once per rank: no reduction there;
* a DTensor with ``Shard(d)`` on a mesh dimension (``fully_shard`` puts ``Shard(0)`` on its
  mesh) — each rank holds a disjoint block, the sum is the all-reduce of the local sums over that
  mesh dimension's process group.

:func:`param_sums` takes the per-run local sums of one step, ``Σ_{local entries of θ_i} x``, and
returns ``Σ_{all entries of θ_i} x``: the sharded ones are concatenated into one small buffer per
(process group, dtype, device) and all-reduced once, so a step costs one ``all_reduce`` of a
few scalars per process group and no host synchronisation (no ``.item()``). For plain tensors it
returns its input unchanged: one-process use runs exactly the same floating-point operations as
before. A ``Partial`` placement (pending sums, not a parameter layout) is refused.

Matrix rules that need the whole matrix (Muon's Newton–Schulz, Shampoo's ``L``/``R``, the Gram
rule, ScaledGD's Grams) gather it with :func:`full` (``DTensor.full_tensor()``: one
``all_gather`` per matrix and step), compute the update on the full matrix (identical on every
rank) and apply only the local block with :func:`like_param` (local slicing, no communication).

``torch.distributed.tensor`` is never imported here: a tensor can only be a DTensor if that
module is already loaded, so one-process use pays no import and one ``isinstance`` per tensor.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "check_distributed_param",
    "full",
    "is_dtensor",
    "is_sharded",
    "like_param",
    "local",
    "param_sums",
    "shard_groups",
]


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor``."""
    cls = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    return cls is not None and isinstance(t, cls)


def local(t: Tensor) -> Tensor:
    """The local block of a DTensor (sharing its storage), or ``t`` itself."""
    return t.to_local() if is_dtensor(t) else t


def shard_groups(t: Tensor) -> tuple[Any, ...]:
    """Process groups of the mesh dimensions on which ``t`` is sharded (``()`` if none).

    Raises ``ValueError`` for a ``Partial`` placement: its local tensor is a pending sum, not a
    block of entries.
    """
    if not is_dtensor(t):
        return ()
    groups = []
    for mesh_dim, placement in enumerate(t.placements):
        if placement.is_partial():
            raise ValueError(
                f"Invalid placements: {tuple(t.placements)!r}; expected Shard or Replicate "
                "placements for a parameter, its gradient and its state (a Partial DTensor is "
                "an unreduced sum: call .redistribute(placements=[Replicate()]) first)"
            )
        if placement.is_shard():
            groups.append(t.device_mesh.get_group(mesh_dim))
    return tuple(groups)


def is_sharded(t: Tensor) -> bool:
    """Whether ``t`` is a DTensor sharded on at least one mesh dimension."""
    return bool(shard_groups(t))


def _all_reduce_(buffer: Tensor, group: Any) -> None:
    """In-place sum of ``buffer`` over ``group`` (asynchronous on GPU, no host sync)."""
    import torch.distributed as dist

    dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)


def param_sums(partials: Sequence[Tensor], refs: Sequence[Tensor]) -> list[Tensor]:
    r"""``Σ`` over ALL entries of ``refs[i]`` from ``partials[i]``, the sum over its LOCAL entries.

    ``partials[i]`` is a plain (per-run) tensor computed from ``local(refs[i])``; ``refs[i]`` is
    the tensor (parameter, gradient or state) it was computed from, and says how it is laid out.
    Plain and replicated ``refs`` keep their partial unchanged (the same tensor object); sharded
    ones are all-reduced over the process groups of their sharded mesh dimensions, all of one
    call in one ``all_reduce`` per (groups, dtype, device).
    """
    out = list(partials)
    buckets: dict[tuple[Any, ...], list[int]] = {}
    for i, (value, ref) in enumerate(zip(partials, refs, strict=True)):
        groups = shard_groups(ref)
        if groups:
            buckets.setdefault((groups, value.dtype, value.device), []).append(i)
    for (groups, _, _), indices in buckets.items():
        buffer = torch.cat([out[i].reshape(-1) for i in indices])
        for group in groups:
            _all_reduce_(buffer, group)
        pieces = buffer.split([out[i].numel() for i in indices])
        for i, piece in zip(indices, pieces, strict=True):
            out[i] = piece.reshape(partials[i].shape)
    return out


def full(t: Tensor) -> Tensor:
    """The whole tensor as a plain tensor: ``t.full_tensor()`` for a DTensor (an all-gather
    when sharded, free when replicated), else ``t`` itself."""
    return t.full_tensor() if is_dtensor(t) else t


def like_param(value: Tensor, param: Tensor) -> Tensor:
    """A full plain ``value`` (shape of ``param``) laid out like ``param``: for a DTensor, the
    DTensor holding this rank's block of ``value`` (sliced locally, no communication); else
    ``value`` itself. Every rank must hold the same ``value``."""
    if not is_dtensor(param):
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(value, param.device_mesh, param.placements, src_data_rank=None)


def check_distributed_param(param: Tensor, batch_dims: int) -> None:
    """Refuse what the distributed path does not support: stacked runs (``batch_dims > 0``) of
    DTensor parameters (per-run values would have to be DTensors too) and ``Partial``
    placements. Plain tensors always pass."""
    if not is_dtensor(param):
        return
    if batch_dims != 0:
        raise ValueError(
            f"Invalid batch_dims: {batch_dims!r}; expected 0 for DTensor (FSDP2/sharded) "
            "parameters: stacked runs are a one-process feature, train one run per process group"
        )
    shard_groups(param)
