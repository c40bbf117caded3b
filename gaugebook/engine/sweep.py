"""The generic sweep runner every experiment of the book uses.

An *experiment* (one module per experiment) says what to run; this module says how:

1. ``experiment.specs(part, scale)`` expands a part's grid into :class:`RunSpec` objects, each a
   semantic config whose hash is the run id (:func:`gaugebook.engine.records.run_id`);
2. runs whose latest record in the output folder is ``ok`` or ``diverged`` are skipped, so a
   rerun resumes and never duplicates a finished run (a run id asked twice is run once);
3. the remaining runs are grouped by ``experiment.batch_key(spec)`` and cut into batches of at
   most ``max_batch_size`` runs; ``experiment.run_batch(specs, device=..., progress=...)``
   trains a batch and returns one :class:`RunResult` per spec;
4. each batch's records are appended to ``<out_dir>/<part>.jsonl`` as soon as it ends (flush
   and fsync). An exception in a batch becomes ``error`` records carrying its message for the
   runs of that batch, and the sweep goes on.

A *backend* (:mod:`gaugebook.engine.backends`: local processes or a Dask cluster) runs the
batches and only returns results: this process alone writes the records. With more than one
batch running at once an experiment may cut each batch into that many balanced pieces
(optional ``split_batch(specs, parts)``) and rank batches by an estimated cost (optional
``batch_cost(specs)``, largest first); a batch that needs no splitting is left whole.

Every record of a folder counts for skipping, whichever part wrote it: parts that share runs
(the same semantic config) compute them once.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gaugebook.engine.backends import make_backend
from gaugebook.engine.records import (
    STATUSES,
    append_records,
    finished_run_ids,
    make_record,
    read_records_dir,
)
from gaugebook.engine.settings import get_device, get_scale
from gaugebook.engine.spec import Experiment, RunResult, RunSpec

__all__ = ["SweepReport", "balanced_bins", "instance_bins", "plan_batches", "run_sweep"]


@dataclass
class SweepReport:
    """Counts and timing of one :func:`run_sweep` call: runs ``planned`` over all parts, of
    which ``shared`` repeat a run of an earlier part and ``skipped`` were already recorded;
    ``first_error``: the message of the first run that ended ``error`` in this call."""

    planned: int = 0
    shared: int = 0
    skipped: int = 0
    ran: int = 0
    statuses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    batches: int = 0
    wall_time_s: float = 0.0
    files: list[str] = field(default_factory=list)
    first_error: str | None = None

    def __str__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.statuses.items())
        return (
            f"{self.planned} runs planned ({self.shared} shared between parts), "
            f"{self.skipped} already recorded, {self.ran} ran in {self.batches} batches "
            f"({counts}) in {self.wall_time_s:.1f} s"
        )


def plan_batches(
    experiment: Experiment, specs: Sequence[RunSpec], max_batch_size: int | None = None
) -> list[list[RunSpec]]:
    """Group specs by ``experiment.batch_key`` (first-seen order) and cut to ``max_batch_size``."""
    if max_batch_size is not None and max_batch_size < 1:
        raise ValueError(f"Invalid max_batch_size: {max_batch_size!r}; expected an integer >= 1")
    groups: dict[Hashable, list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault(experiment.batch_key(spec), []).append(spec)
    batches = []
    for group in groups.values():
        size = max_batch_size or len(group)
        batches.extend(group[i : i + size] for i in range(0, len(group), size))
    return batches


def balanced_bins(groups: Sequence[Sequence[RunSpec]], parts: int,
                  cost: Any) -> list[list[RunSpec]]:
    """Cut a batch, given as ``groups`` of runs that must stay together, into at most ``parts``
    pieces balanced by ``cost(group)``: largest group first into the lightest piece."""
    bins: list[list[RunSpec]] = [[] for _ in range(parts)]
    _deal(groups, bins, [0.0] * parts, cost)
    return [b for b in bins if b]


def instance_bins(instances: Sequence[Sequence[Sequence[RunSpec]]], parts: int,
                  cost: Any) -> list[list[RunSpec]]:
    """Like :func:`balanced_bins`, keeping the runs of one problem instance in one piece where
    the balance allows. ``instances[i]`` lists instance ``i``'s groups of runs that must stay
    together (the runs of one optimizer, say).

    Runs of one instance share its operator: its products are one matrix product for all of
    them, which is cheaper per run for more rows, and a piece with fewer instances keeps fewer
    operators in cache. So whole instances go, largest first, into the lightest piece while
    it stays within an equal share (the total cost over ``parts``). The instances left over
    are then dealt onto those loads as in :func:`balanced_bins`: run by run when the pieces
    already hold whole instances (the finest balance; a piece then gains no new kind of group,
    when every instance has the same kinds, as a zoo's optimizers), group by group when none
    fitted. Three equal instances on two workers: one whole instance and half of the third
    each."""
    bins: list[list[RunSpec]] = [[] for _ in range(parts)]
    loads = [0.0] * parts
    share = sum(cost(g) for groups in instances for g in groups) / parts
    left: list[Sequence[RunSpec]] = []
    for groups in sorted(instances, key=lambda gs: sum(map(cost, gs)), reverse=True):
        i = loads.index(min(loads))
        whole = sum(map(cost, groups))
        if loads[i] + whole <= share * (1 + 1e-9):
            for group in groups:
                bins[i].extend(group)
            loads[i] += whole
        else:
            left.extend(groups)
    if any(bins):
        left = [[run] for group in left for run in group]
    _deal(left, bins, loads, cost)
    return [b for b in bins if b]


def _deal(groups: Sequence[Sequence[RunSpec]], bins: list[list[RunSpec]], loads: list[float],
          cost: Any) -> None:
    """Largest group first into the lightest bin (``bins`` and ``loads`` updated in place)."""
    for group in sorted(groups, key=cost, reverse=True):
        i = loads.index(min(loads))
        bins[i].extend(group)
        loads[i] += cost(group)


def run_sweep(
    experiment: Experiment,
    out_dir: str | Path,
    *,
    scale: str | None = None,
    parts: Sequence[str] | None = None,
    device: str | torch.device | None = None,
    max_batch_size: int | None = None,
    resume: bool = True,
    progress: bool = True,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
) -> SweepReport:
    """Run the parts of ``experiment`` at ``scale`` and append their records under ``out_dir``.

    With ``resume`` (the default) runs already finished in ``out_dir`` are skipped; without it
    the part files are deleted first and everything runs again. ``scale`` and ``device``
    default to :func:`gaugebook.engine.settings.get_scale` /
    :func:`~gaugebook.engine.settings.get_device`.
    ``backend`` (``local`` or ``dask``) runs the batches, ``workers`` of them in parallel; the
    dask backend joins the scheduler at ``address`` (then the cluster's size sets the
    parallelism, and ``device`` need not exist on this machine) or starts a local cluster of
    ``workers`` processes (see :mod:`gaugebook.engine.backends`).
    """
    from tqdm import tqdm

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"Invalid workers: {workers!r}; expected an integer >= 1")
    scale = get_scale(scale)
    remote = backend == "dask" and address is not None and device is not None
    dev = torch.device(device) if remote else get_device(device)
    engine = make_backend(backend, workers=workers, address=address, device=dev)
    out = Path(out_dir)
    all_parts = experiment.parts(scale)
    parts = list(all_parts if parts is None else parts)
    for part in parts:
        if part not in all_parts:
            raise ValueError(f"Invalid part: {part!r}; expected one of {all_parts}")
    if not resume:
        for part in parts:
            (out / f"{part}.jsonl").unlink(missing_ok=True)

    report = SweepReport()
    start = time.perf_counter()
    done = finished_run_ids(read_records_dir(out))
    todo: list[RunSpec] = []
    seen: set[str] = set()
    for part in parts:
        for spec in experiment.specs(part, scale):
            report.planned += 1
            rid = spec.run_id
            if rid in seen:
                report.shared += 1
            elif rid in done:
                report.skipped += 1
            else:
                todo.append(spec)
            seen.add(rid)

    batches = plan_batches(experiment, todo, max_batch_size)
    if batches:  # a backend holds processes or a cluster: start it only when there is work
        bar = tqdm(total=len(todo), unit="run", desc=experiment.name, disable=not progress)
        with engine:
            slots = engine.slots()
            if slots > 1:  # balanced pieces of each batch (split_batch), costliest first
                split = getattr(experiment, "split_batch", None)
                if split is not None:
                    batches = [piece for batch in batches for piece in split(batch, slots) if piece]
                batches = sorted(batches, key=getattr(experiment, "batch_cost", len), reverse=True)
            for batch, results, wall in engine.stream(experiment, batches, dev, progress):
                _record_batch(experiment, out, scale, dev, batch, results, wall, report)
                bar.update(len(batch))
        bar.close()
    report.wall_time_s = time.perf_counter() - start
    return report


def _record_batch(experiment: Experiment, out: Path, scale: str, dev: torch.device,
                  batch: Sequence[RunSpec], results: Sequence[RunResult], wall: float,
                  report: SweepReport) -> None:
    """Append the records of one finished batch (flush and fsync): the driver's only write."""
    by_file: dict[Path, list[dict[str, Any]]] = {}
    for spec, result in zip(batch, results, strict=True):
        record = make_record(
            run_id=spec.run_id,
            experiment=experiment.name,
            part=spec.part,
            config=spec.config,
            seeds=spec.seeds,
            scale=scale,
            dtype=spec.dtype,
            device=str(dev),
            status=result.status,
            metrics=result.metrics,
            curves=result.curves,
            message=result.message,
            wall_time_s=wall / len(batch),
            batch={"size": len(batch), "wall_time_s": wall},
        )
        by_file.setdefault(out / f"{spec.part}.jsonl", []).append(record)
        report.statuses[result.status] += 1
        if result.status == "error" and report.first_error is None:
            report.first_error = f"part {spec.part!r}: {result.message}"
    for path, records in by_file.items():
        append_records(path, records)
        if str(path) not in report.files:
            report.files.append(str(path))
    report.ran += len(batch)
    report.batches += 1
