"""Helpers for training many runs as one stack of parameters.

Runs that share a problem are stacked along a leading batch dimension and trained by one
optimizer built with ``batch_dims=1`` (see :mod:`gaugekit.optim`), so that every reduction
of the update rule stays inside its run. When some runs finish (interpolated, diverged or out
of budget) the stack is *compacted*: the finished runs are removed from the parameters and from
every optimizer state tensor, and training goes on with the others. The remaining runs are
unaffected: nothing of a run depends on another run of the stack.

Optimizer state comes in two kinds, and both are carried over: the state of each parameter
(``optimizer.state[param]``: moments, step counts) and *optimizer-wide* state kept under a
key that is not a parameter (FlowAdam's ``optimizer.state["flow"]``: the trigger's running
averages and per-run counters). Dropping the second kind would restart, say, FlowAdam's
warm-up for the runs that remain, so a run's trajectory would depend on when its neighbours
finished.
"""

# Developer note (layers, gaugekit/__init__.py): floor 7, train/, on runs/, optim/ and problems/.

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor
from torch.optim import Optimizer

__all__ = ["optimizer_wide_state", "take_runs", "transfer_state"]


def take_runs(value: Any, keep: Tensor, num_runs: int) -> Any:
    """Keep the runs ``keep`` of every tensor in ``value`` whose first dimension is the runs.

    Tensors with first dimension ``num_runs`` are indexed (a new tensor); tuples, lists and
    dicts are mapped (dict keys kept); anything else (a step counter, a 0-d tensor, a float) is
    returned unchanged. A state tensor whose first dimension is not the run dimension must
    therefore not happen to have length ``num_runs``: every stacked optimizer of the zoo keeps
    its state per run.
    """
    if isinstance(value, Tensor):
        if value.ndim >= 1 and value.shape[0] == num_runs:
            return value.index_select(0, keep.to(value.device))
        return value
    if isinstance(value, tuple):
        return tuple(take_runs(v, keep, num_runs) for v in value)
    if isinstance(value, list):
        return [take_runs(v, keep, num_runs) for v in value]
    if isinstance(value, dict):
        return {k: take_runs(v, keep, num_runs) for k, v in value.items()}
    return value


def optimizer_wide_state(optimizer: Optimizer) -> dict[Any, Any]:
    """The entries of ``optimizer.state`` whose key is not a tensor (not a parameter's state),
    e.g. FlowAdam's ``"flow"``."""
    return {k: v for k, v in optimizer.state.items() if not isinstance(k, Tensor)}


def transfer_state(
    old: Optimizer,
    new: Optimizer,
    pairs: Sequence[tuple[Tensor, Tensor]],
    keep: Tensor,
    num_runs: int,
) -> None:
    """Copy the state of ``old`` to ``new``, keeping runs ``keep`` of every per-run tensor.

    ``pairs`` lists ``(old_param, new_param)``: each old parameter's state goes to its new one.
    Optimizer-wide state (entries of ``old.state`` under a key that is not a parameter, see
    :func:`optimizer_wide_state`) goes to the same key of ``new``. ``num_runs`` is the old
    number of runs.
    """
    for old_p, new_p in pairs:
        state = old.state.get(old_p)
        if state:
            new.state[new_p] = {k: take_runs(v, keep, num_runs) for k, v in state.items()}
    for key, value in optimizer_wide_state(old).items():
        new.state[key] = take_runs(value, keep, num_runs)
