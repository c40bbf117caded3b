r"""The factor problems as plain objects for the stacked trainer
(``gaugebook.engine.factor_trainer``).

A *problem family* turns a problem config (JSON data, part of every run id) and a list of seeds
into :class:`FactorInstances`: the initial factors ``(U₀, V₀)`` of each seed and a
:class:`FactorBatch` for any assignment of stack rows to seeds. The batch is all the trainer
knows of a problem: per-run loss and gradients, metrics, and how to keep a subset of its rows.

A :class:`FactorFamily` is one made of a ``draw(problem, seed, dtype, device)`` that makes the
instance of one seed and its initial factors, and the batch class that stacks runs on those
instances. The book's families live with their problems, and each experiment hands its own to
the trainer: :data:`~gaugebook.sensing.measurements.SENSING`,
:data:`~gaugebook.tails.tail_problem.TAILS` and
:data:`~gaugebook.hyperspectral.completion.HYPERSPECTRAL`.

Every draw uses its own seeded generators, so the instances of a list of seeds do not depend
on the order they are drawn in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

__all__ = [
    "FactorBatch",
    "FactorFamily",
    "FactorInstances",
    "FactorProblemFamily",
    "StackedInstances",
]


class FactorBatch(Protocol):
    """The problem of the runs in the stack, stacked along dimension 0.

    ``curve_names``: metrics recorded on the curves (each must be in ``metrics(spectral=False)``).
    ``metric_names``: the final metrics copied into a record besides ``train_loss`` (each in
    ``metrics(spectral=True)``; a diverged run gets ``None`` for each).
    """

    curve_names: tuple[str, ...]
    metric_names: tuple[str, ...]

    def loss_and_grads(self, U: Tensor, V: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Per-run loss ``(B,)`` and gradients ``G_U (B, n₁, k)``, ``G_V (B, n₂, k)``."""
        ...

    def metrics(self, U: Tensor, V: Tensor, *, spectral: bool = True) -> dict[str, Tensor]:
        """Per-run metrics ``(B,)`` at ``(U, V)``, ``train_loss`` among them."""
        ...

    def select(self, rows: Sequence[int]) -> FactorBatch:
        """The batch of the stack rows ``rows`` (indices into the current rows, in order)."""
        ...


class FactorInstances(Protocol):
    """The instances of one problem config, one per seed of a batch."""

    def batch(self, rows: Sequence[int]) -> FactorBatch:
        """The batch whose stack row ``i`` runs on seed index ``rows[i]``."""
        ...

    def init(self, index: int) -> tuple[Tensor, Tensor]:
        """The initial ``(U, V)`` of seed index ``index``."""
        ...


class FactorProblemFamily(Protocol):
    """A problem family: builds the instances of a problem config for some seeds."""

    def instances(
        self, problem: Mapping[str, Any], seeds: Sequence[int], dtype: torch.dtype,
        device: torch.device,
    ) -> FactorInstances:
        ...


#: ``draw(problem, seed, dtype, device) → (instance, (U₀, V₀))``
Draw = Callable[[Mapping[str, Any], int, torch.dtype, torch.device],
                tuple[Any, tuple[Tensor, Tensor]]]


@dataclass(frozen=True)
class StackedInstances:
    """The instances of some seeds, their initial factors, and the batch class that stacks runs
    on them (called as ``stack(instances, rows)``)."""

    instances: list[Any]
    inits: list[tuple[Tensor, Tensor]]
    stack: Callable[[Sequence[Any], list[int]], FactorBatch]

    def batch(self, rows: Sequence[int]) -> FactorBatch:
        return self.stack(self.instances, list(rows))

    def init(self, index: int) -> tuple[Tensor, Tensor]:
        return self.inits[index]


@dataclass(frozen=True)
class FactorFamily:
    """A problem family from the ``draw`` of one seed and the ``stack`` (batch class) of its
    runs (see the module docstring); ``kind`` is the problem configs' ``"kind"`` it draws."""

    kind: str
    draw: Draw
    stack: Callable[[Sequence[Any], list[int]], FactorBatch]

    def instances(
        self, problem: Mapping[str, Any], seeds: Sequence[int], dtype: torch.dtype,
        device: torch.device,
    ) -> StackedInstances:
        drawn = [self.draw(problem, s, dtype, device) for s in seeds]
        return StackedInstances([d[0] for d in drawn], [d[1] for d in drawn], self.stack)
