r"""The rows of a stacked factor batch: the factors, the optimizers over blocks of rows, the curves.

The factors of ``B`` runs are one stack: ``P`` of shape ``(B, 2, n, k)`` (``P[:, 0] =
U``, ``P[:, 1] = V``) when ``U`` and ``V`` have one shape, else two stacks ``(B, n₁, k)`` and
``(B, n₂, k)``. Runs of one optimizer (method, schedule, non-lr hyperparameters) form a
*member*, a contiguous block of rows with one optimizer and a per-run ``lr`` tensor, built with
``batch_dims=2`` on the ``(b, 2, n, k)`` block when the rule acts on each matrix separately
(:data:`PER_MATRIX_RULES`, square factors only) and with ``batch_dims=1`` on ``[U, V]``
otherwise (shared-scale Adam pools over both factors of a run). Finished runs are removed from
the stack and from every optimizer state (:func:`transfer_state`, below), so a diverged
run never touches the others, and a batched run equals the same run done alone (tested per
experiment). The training loop over them is :mod:`gaugebook.engine.factor_trainer`.

Optimizer state comes in two kinds, and compaction carries both over: the state of each parameter
(``optimizer.state[param]``: moments, step counts) and *optimizer-wide* state kept under a
key that is not a parameter (FlowAdam's ``optimizer.state["flow"]``: the trigger's running
averages and per-run counters). Dropping the second kind would restart, say, FlowAdam's
warm-up for the runs that remain, so a run's trajectory would depend on when its neighbours
finished.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

from gaugebook.engine.records import downsample_indices, round_sig
from gaugekit.optim.schedules import lr_factor

__all__ = ["CURVE_DIGITS", "CURVE_POINTS", "PER_MATRIX_RULES", "Curves", "FactorStack", "Member",
           "member_key", "optimizer_wide_state", "take_runs", "transfer_state"]

CURVE_POINTS = 33
CURVE_DIGITS = 5

#: Rules whose update treats each matrix on its own (entrywise, or reductions over one matrix):
#: for them U and V of a run are one ``(2, n, k)`` stack trained with ``batch_dims=2``, which
#: halves the calls per step and gives the same numbers as ``[U, V]`` with ``batch_dims=1``
#: (tested). Shared-scale Adam pools over U and V of a run, so it keeps ``[U, V]``.
PER_MATRIX_RULES: frozenset[str] = frozenset({
    "gd", "momentum", "adam", "rmsprop", "lion", "signum", "adafactor", "muon", "shampoo", "gram",
})


# --------------------------------------------------------------------------------------------
# dropping finished runs from a stack (parameters and optimizer state)
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# members: the runs of one optimizer
# --------------------------------------------------------------------------------------------


@dataclass
class Member:
    """Runs of one optimizer (same method, schedule and non-lr hyperparameters): a contiguous
    block ``[start, stop)`` of the stack."""

    method: str
    schedule: str
    hparams: dict[str, Any]
    base_lr: Tensor
    make: Callable[..., torch.optim.Optimizer]  # make(method, params, batch_dims=…, lr=…, …)
    square: bool = True
    per_matrix: bool = False
    start: int = 0
    stop: int = 0
    params: list[Tensor] = field(default_factory=list)
    optimizer: torch.optim.Optimizer | None = None

    def __post_init__(self) -> None:
        self.per_matrix = self.square and self.method in PER_MATRIX_RULES
        self._shaped_lr = self._shape(self.base_lr)

    def _shape(self, lr: Tensor) -> Tensor:
        return lr[:, None].expand(-1, 2).contiguous() if self.per_matrix else lr

    @property
    def size(self) -> int:
        return self.base_lr.numel()

    def lr(self, factor: float = 1.0) -> Tensor:
        """The per-run learning rate times ``factor``, shaped like the params' batch dims."""
        return self._shaped_lr * factor if factor != 1.0 else self._shaped_lr

    def place(self, stack: FactorStack, start: int) -> None:
        """Point the member at rows ``[start, start + size)`` of ``stack`` (no optimizer change)."""
        self.start, self.stop = start, start + self.size
        self.params = stack.params(self.start, self.stop, self.per_matrix)

    def build(self, stack: FactorStack, start: int) -> None:
        self.place(stack, start)
        self.optimizer = self.make(
            self.method, self.params, batch_dims=2 if self.per_matrix else 1,
            **{**self.hparams, "lr": self.lr()},
        )

    def set_grads(self, G_U: Tensor, G_V: Tensor, G: Tensor | None) -> None:
        a, b = self.start, self.stop
        if self.per_matrix:
            self.params[0].grad = G[a:b]
        else:
            self.params[0].grad, self.params[1].grad = G_U[a:b], G_V[a:b]

    def step(self, t: int, num_steps: int) -> None:
        if self.schedule != "constant":
            self.optimizer.param_groups[0]["lr"] = self.lr(lr_factor(self.schedule, t, num_steps))
        self.optimizer.step()

    def keep(self, stack: FactorStack, start: int, local: Tensor) -> None:
        """Keep the runs ``local`` (indices within the member) after the stack was compacted."""
        old_opt, old_params, old_size = self.optimizer, self.params, self.size
        self.base_lr = self.base_lr.index_select(0, local.to(self.base_lr.device))
        self._shaped_lr = self._shape(self.base_lr)
        if old_opt is None:
            self.place(stack, start)
            return
        self.build(stack, start)
        transfer_state(old_opt, self.optimizer, list(zip(old_params, self.params, strict=True)),
                       local, old_size)


def member_key(config: Mapping[str, Any]) -> tuple[str, str, str]:
    """Runs with equal keys share one optimizer in a stack: method, schedule, other hparams."""
    hparams = repr(sorted((k, v) for k, v in config["hparams"].items() if k != "lr"))
    return (config["method"], config["schedule"], hparams)


class FactorStack:
    """The factors of the runs: ``P`` ``(B, 2, n, k)`` when ``U`` and ``V`` share a shape, else
    ``PU`` ``(B, n₁, k)`` and ``PV`` ``(B, n₂, k)``."""

    def __init__(self, U: Tensor, V: Tensor) -> None:
        self.square = U.shape == V.shape
        if self.square:
            self.P: Tensor | None = torch.stack([U, V], dim=1)
        else:
            self.P, self.PU, self.PV = None, U, V

    @property
    def U(self) -> Tensor:
        return self.P[:, 0] if self.square else self.PU

    @property
    def V(self) -> Tensor:
        return self.P[:, 1] if self.square else self.PV

    def params(self, a: int, b: int, per_matrix: bool) -> list[Tensor]:
        if self.square:
            block = self.P[a:b]
            return [block] if per_matrix else [block[:, 0], block[:, 1]]
        return [self.PU[a:b], self.PV[a:b]]

    def grads(self, G_U: Tensor, G_V: Tensor) -> Tensor | None:
        """The ``(B, 2, n, k)`` gradient of ``P`` (square stacks only)."""
        return torch.stack([G_U, G_V], dim=1) if self.square else None

    def take(self, rows: Tensor) -> None:
        if self.square:
            self.P = self.P.index_select(0, rows)
        else:
            self.PU, self.PV = self.PU.index_select(0, rows), self.PV.index_select(0, rows)

    def rows(self, sel: Tensor) -> tuple[Tensor, Tensor]:
        """``(U, V)`` of the rows ``sel`` (new tensors)."""
        if self.square:
            P = self.P.index_select(0, sel)
            return P[:, 0], P[:, 1]
        return self.PU.index_select(0, sel), self.PV.index_select(0, sel)


# --------------------------------------------------------------------------------------------
# curves
# --------------------------------------------------------------------------------------------


class Curves:
    """Per-run lists of ``step`` and the batch's curve metrics."""

    def __init__(self, num_runs: int, names: Sequence[str]) -> None:
        self.names = ("step", *names)
        self.data = [{k: [] for k in self.names} for _ in range(num_runs)]

    def add(self, runs: Sequence[int], step: int | Sequence[int],
            values: Mapping[str, Tensor]) -> None:
        """Append a point at ``step`` (the number of updates applied; one for all, or one per
        run) to each run of ``runs``; a run whose last point already has this step keeps it."""
        columns = {k: values[k].tolist() for k in self.names[1:]}
        steps = [step] * len(runs) if isinstance(step, int) else list(step)
        for i, run in enumerate(runs):
            entry = self.data[run]
            if entry["step"] and entry["step"][-1] == steps[i]:
                continue
            entry["step"].append(steps[i])
            for k, col in columns.items():
                entry[k].append(col[i])

    def finish(self, run: int) -> dict[str, list[Any]]:
        entry = self.data[run]
        keep = downsample_indices(len(entry["step"]), CURVE_POINTS)
        out = {"step": [entry["step"][i] for i in keep]}
        for k in self.names[1:]:
            out[k] = [round_sig(float(entry[k][i]), CURVE_DIGITS) for i in keep]
        return out
