r"""The factor problems as plain objects for the stacked trainer (``gaugekit.train.factors``).

A *problem family* turns a problem config (JSON data, part of every run id) and a list of seeds
into :class:`FactorInstances`: the initial factors ``(U₀, V₀)`` of each seed and a
:class:`FactorBatch` for any assignment of stack rows to seeds. The batch is all the trainer
knows of a problem: per-run loss and gradients, metrics, and how to keep a subset of its rows.

Every family here is one :class:`FactorFamily`: a ``draw(problem, seed, dtype, device)`` that
makes the instance of one seed and its initial factors, and the batch class that stacks runs on
those instances:

:data:`SENSING`        kind ``"sensing"`` (:mod:`gaugekit.problems.matrix_sensing`)
:data:`TAILS`          kind ``"spectral_tail"`` (:mod:`gaugekit.problems.spectral_tails`)
:data:`HYPERSPECTRAL`  kind ``"hyperspectral"`` (:mod:`gaugekit.problems.hyperspectral`)

Every draw uses its own seeded generators, so the instances of a list of seeds do not depend
on the order they are drawn in.
"""

# Developer note (layers, gaugekit/__init__.py): floor 3, problems/, on data/, gauge and linalg.

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from gaugekit.problems import hyperspectral as hs
from gaugekit.problems import matrix_sensing as ms
from gaugekit.problems.spectral_tails import TailBatch, make_tail_instance

__all__ = [
    "HYPERSPECTRAL",
    "SENSING",
    "TAILS",
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
    runs (see the module docstring)."""

    draw: Draw
    stack: Callable[[Sequence[Any], list[int]], FactorBatch]

    def instances(
        self, problem: Mapping[str, Any], seeds: Sequence[int], dtype: torch.dtype,
        device: torch.device,
    ) -> StackedInstances:
        drawn = [self.draw(problem, s, dtype, device) for s in seeds]
        return StackedInstances([d[0] for d in drawn], [d[1] for d in drawn], self.stack)


def _sensing_init(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
                  device: torch.device) -> tuple[Tensor, Tensor]:
    return ms.init_factors(seed, p["n"], p["k"], p["init_scale"], dtype=dtype, device=device)


def _draw_sensing(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
                  device: torch.device) -> tuple[ms.SensingInstance, tuple[Tensor, Tensor]]:
    """Problem config ``{"n", "r", "k", "m", "num_val", "init_scale"}``: the instance of
    :func:`~gaugekit.problems.matrix_sensing.make_instance` and its initial factors."""
    inst = ms.make_instance(seed, p["n"], p["r"], p["m"], num_val=p["num_val"], dtype=dtype,
                            device=device)
    return inst, _sensing_init(p, seed, dtype, device)


def _draw_tail(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
               device: torch.device) -> tuple[Any, tuple[Tensor, Tensor]]:
    """The sensing config plus ``"tau"``: the instance of
    :func:`~gaugekit.problems.spectral_tails.make_tail_instance`, the sensing initial factors."""
    inst = make_tail_instance(seed, p["tau"], p["n"], p["r"], p["m"], num_val=p["num_val"],
                              dtype=dtype, device=device)
    return inst, _sensing_init(p, seed, dtype, device)


def _draw_completion(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
                     device: torch.device) -> tuple[hs.CompletionInstance, tuple[Tensor, Tensor]]:
    """Problem config ``{"scene": {...}, "num_rows", "row_seed", "density", "centring",
    "rank", "init_scale"[, "data_dtype"]}``: the completion instance of seed ``seed`` on the
    scene's matrix (:func:`~gaugekit.problems.hyperspectral.scene_matrix_from_config`, cached)
    and its initial factors."""
    data_dtype = p.get("data_dtype", "float64")
    Y = hs.scene_matrix_from_config(p["scene"], p["num_rows"], p["row_seed"], data_dtype)
    inst = hs.make_instance(Y, p["density"], seed, p["centring"], dtype=dtype, device=device,
                            data_dtype=data_dtype)
    n, bands = inst.shape
    init = hs.init_factors(seed, n, bands, int(p["rank"]), float(p["init_scale"]),
                           dtype=inst.target.dtype, device=inst.target.device)
    return inst, init


#: kind ``"sensing"``: the zoo's planted low-rank sensing problem
SENSING = FactorFamily(_draw_sensing, ms.SensingBatch)
#: kind ``"spectral_tail"``: sensing of a low-rank head plus a spectral tail at ``tau``
TAILS = FactorFamily(_draw_tail, TailBatch)
#: kind ``"hyperspectral"``: completion of a scene's pixels × bands matrix
HYPERSPECTRAL = FactorFamily(_draw_completion, hs.CompletionBatch)
