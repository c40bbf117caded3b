"""What a run is, what an experiment provides, and how one batch is executed.

A run is a :class:`RunSpec`: its semantic config (JSON data, whose hash is the run id,
:func:`gaugebook.engine.records.run_id`) and the generator seeds derived from it. An experiment
(:class:`Experiment`, one per chapter's package, named in :mod:`gaugebook.experiments`) expands its
parts into
specs, groups them into batches and trains a batch, returning one :class:`RunResult` per spec;
its configurations derive from :class:`gaugebook.engine.scales.ScaleConfig`.
:func:`execute_batch` runs one batch and never raises: an exception becomes ``error`` results.
The sweep engine (:mod:`gaugebook.engine.sweep`) and its backends (:mod:`gaugebook.engine.backends`)
both stand on this module.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from gaugebook.engine.records import STATUSES, run_id

__all__ = ["Experiment", "RunResult", "RunSpec", "error_results",
           "execute_batch"]



@dataclass(frozen=True)
class RunSpec:
    """One run: its semantic ``config`` (JSON data) and the generator ``seeds`` derived from it.

    ``part`` names the sweep that asked for the run; it is a label, not part of the identity.
    """

    experiment: str
    part: str
    config: Mapping[str, Any]
    seeds: Mapping[str, int] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return run_id(self.config)

    @property
    def dtype(self) -> str:
        return str(self.config.get("dtype", "float32"))


@dataclass
class RunResult:
    """What a batch returns for one run: status, final metrics, short curves, error message."""

    status: str
    metrics: dict[str, Any] = field(default_factory=dict)
    curves: dict[str, list[Any]] = field(default_factory=dict)
    message: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Invalid status: {self.status!r}; expected one of {STATUSES}")


class Experiment(Protocol):
    """What the runner needs from an experiment module's experiment object."""

    name: str
    description: str

    def parts(self, scale: str) -> tuple[str, ...]:
        """The part names of the experiment at this scale, in running order."""
        ...

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        """The runs of one part at this scale."""
        ...

    def batch_key(self, spec: RunSpec) -> Hashable:
        """Runs with equal keys may be trained together in one batch."""
        ...

    def run_batch(
        self, specs: Sequence[RunSpec], *, device: torch.device, progress: bool
    ) -> list[RunResult]:
        """Train the runs of one batch; one result per spec, in order."""
        ...


def error_results(count: int, err: BaseException) -> list[RunResult]:
    message = f"{type(err).__name__}: {err}"
    return [RunResult("error", message=message) for _ in range(count)]


def execute_batch(
    experiment: Experiment,
    batch: Sequence[RunSpec],
    device: torch.device,
    progress: bool,
    threads: int | None = None,
) -> tuple[list[RunResult], float]:
    """Run one batch; never raises: an exception becomes error results. Returns wall time."""
    if threads is not None:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        results = experiment.run_batch(batch, device=device, progress=progress)
        if len(results) != len(batch):
            raise RuntimeError(f"run_batch returned {len(results)} results for {len(batch)} runs")
    except Exception as err:  # noqa: BLE001 - recorded, the sweep goes on
        results = error_results(len(batch), err)
    return results, time.perf_counter() - t0
