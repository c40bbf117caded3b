"""Floor 3: helpers for training many runs as one stack of parameters.

Runs that share a problem are stacked along a leading batch dimension and trained by one
optimizer built with ``batch_dims=1`` (see :mod:`gaugekit.optim`), so that every reduction
of the update rule stays inside its run. When some runs finish (interpolated, diverged or out
of budget) the stack is *compacted*: the finished runs are removed from the parameters and from
every optimizer state tensor, and training goes on with the others. The remaining runs are
unaffected: nothing of a run depends on another run of the stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor
from torch.optim import Optimizer

__all__ = ["take_runs", "transfer_state"]


def take_runs(value: Any, keep: Tensor, num_runs: int) -> Any:
    """Keep the runs ``keep`` of every tensor in ``value`` whose first dimension is the runs.

    Tensors with first dimension ``num_runs`` are indexed (a new tensor); tuples and lists are
    mapped; anything else (a step counter, a 0-d tensor, a float) is returned unchanged. A
    state tensor whose first dimension is not the run dimension must therefore not happen to
    have length ``num_runs``: every stacked optimizer of the zoo keeps its state per run.
    """
    if isinstance(value, Tensor):
        if value.ndim >= 1 and value.shape[0] == num_runs:
            return value.index_select(0, keep.to(value.device))
        return value
    if isinstance(value, tuple):
        return tuple(take_runs(v, keep, num_runs) for v in value)
    if isinstance(value, list):
        return [take_runs(v, keep, num_runs) for v in value]
    return value


def transfer_state(
    old: Optimizer,
    new: Optimizer,
    pairs: Sequence[tuple[Tensor, Tensor]],
    keep: Tensor,
    num_runs: int,
) -> None:
    """Copy the state of each old parameter to its new one in ``new``, keeping runs ``keep``.

    ``pairs`` lists ``(old_param, new_param)``; ``num_runs`` is the old number of runs.
    """
    for old_p, new_p in pairs:
        state = old.state.get(old_p)
        if state:
            new.state[new_p] = {k: take_runs(v, keep, num_runs) for k, v in state.items()}
