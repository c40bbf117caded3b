"""The generic sweep runner every experiment of the book uses.

An *experiment* (one module per experiment) says what to run; this module says how:

1. ``experiment.specs(part, scale)`` expands a part's grid into :class:`RunSpec` objects, each a
   semantic config whose hash is the run id (:func:`gaugekit.runs.records.run_id`);
2. runs whose latest record in the output folder is ``ok`` or ``diverged`` are skipped, so a
   rerun resumes and never duplicates a finished run (a run id asked twice is run once);
3. the remaining runs are grouped by ``experiment.batch_key(spec)`` and cut into batches of at
   most ``max_batch_size`` runs; ``experiment.run_batch(specs, device=..., progress=...)``
   trains a batch and returns one :class:`RunResult` per spec;
4. each batch's records are appended to ``<out_dir>/<part>.jsonl`` as soon as it ends (flush
   and fsync). An exception in a batch becomes ``error`` records carrying its message for the
   runs of that batch, and the sweep goes on.

A *backend* (:mod:`gaugekit.runs.backends`) runs the batches: ``local`` (default) in
this process or, with ``workers > 1``, in that many processes (each with ``threads //
workers`` torch threads); ``dask`` on a Dask distributed cluster, joined by ``address`` or
started for the run. Whatever the backend, it only returns results: this process alone writes
the records. With more than one batch running at once an experiment may cut each batch into
that many balanced pieces (optional ``split_batch(specs, parts)``) and rank batches by an
estimated cost (optional ``batch_cost(specs)``, largest first); a batch that needs no
splitting is left whole.

Every record of a folder counts for skipping, whichever part wrote it: parts that share runs
(the same semantic config) compute them once.
"""

# Developer note (layers, DESIGN.md): floor 3.

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from gaugekit.config import get_device, get_records_mode, get_scale
from gaugekit.runs.records import (
    STATUSES,
    append_records,
    finished_run_ids,
    latest_by_run_id,
    make_record,
    read_records_dir,
    run_id,
)

__all__ = [
    "Collected",
    "Experiment",
    "MissingRecords",
    "RunResult",
    "RunSpec",
    "SweepReport",
    "balanced_bins",
    "collect",
    "collector",
    "load_part",
    "plan_batches",
    "project_root",
    "records_dir",
    "run_command",
    "run_sweep",
    "scale_records_dir",
    "wrap_command",
]


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


def _error_results(count: int, err: BaseException) -> list[RunResult]:
    message = f"{type(err).__name__}: {err}"
    return [RunResult("error", message=message) for _ in range(count)]


def _execute(
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
        results = _error_results(len(batch), err)
    return results, time.perf_counter() - t0


def balanced_bins(groups: Sequence[Sequence[RunSpec]], parts: int,
                  cost: Any) -> list[list[RunSpec]]:
    """Cut a batch, given as ``groups`` of runs that must stay together, into at most ``parts``
    pieces balanced by ``cost(group)``: largest group first into the lightest piece."""
    bins: list[list[RunSpec]] = [[] for _ in range(parts)]
    loads = [0.0] * parts
    for group in sorted(groups, key=cost, reverse=True):
        i = loads.index(min(loads))
        bins[i].extend(group)
        loads[i] += cost(group)
    return [b for b in bins if b]


def _parallel_batches(
    experiment: Experiment, batches: list[list[RunSpec]], workers: int
) -> list[list[RunSpec]]:
    split = getattr(experiment, "split_batch", None)
    if split is not None:
        pieces: list[list[RunSpec]] = []
        for batch in batches:
            pieces.extend(p for p in split(batch, workers) if p)
        batches = pieces
    cost = getattr(experiment, "batch_cost", len)
    return sorted(batches, key=cost, reverse=True)


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
    default to :func:`gaugekit.config.get_scale` / :func:`~gaugekit.config.get_device`.
    ``backend`` (``local`` or ``dask``) runs the batches, ``workers`` of them in parallel; the
    dask backend joins the scheduler at ``address`` (then the cluster's size sets the
    parallelism, and ``device`` need not exist on this machine) or starts a local cluster of
    ``workers`` processes (see :mod:`gaugekit.runs.backends`).
    """
    from tqdm import tqdm

    from gaugekit.runs.backends import make_backend

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
                continue
            if rid in done:
                report.skipped += 1
                seen.add(rid)
                continue
            seen.add(rid)
            todo.append(spec)

    batches = plan_batches(experiment, todo, max_batch_size)
    if batches:  # a backend holds processes or a cluster: start it only when there is work
        bar = tqdm(total=len(todo), unit="run", desc=experiment.name, disable=not progress)
        with engine:
            slots = engine.slots()
            if slots > 1:
                batches = _parallel_batches(experiment, batches, slots)
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


def load_part(
    experiment: Experiment, part: str, out_dir: str | Path, *, scale: str | None = None
) -> list[dict[str, Any]]:
    """The latest record of every run of ``part`` found under ``out_dir``, in the part's order.

    Runs that have no record yet are left out (run :func:`run_sweep` first).
    """
    scale = get_scale(scale)
    latest = latest_by_run_id(read_records_dir(out_dir))
    out, seen = [], set()
    for spec in experiment.specs(part, scale):
        rid = spec.run_id
        if rid in latest and rid not in seen:
            seen.add(rid)
            out.append(latest[rid])
    return out


# --------------------------------------------------------------------------------------------
# what a page shows: committed records at paper scale, a fresh small sweep at quick scale
# --------------------------------------------------------------------------------------------


class MissingRecords(RuntimeError):
    """A paper-scale page asked for runs that have no committed record (mode ``read``)."""


def project_root(experiment: str) -> Path:
    """The folder whose ``results/<experiment>`` holds the committed records.

    First the checkout that holds the imported ``gaugekit`` (an editable install, the book),
    then the first folder upwards from the working directory with ``results/``, then the
    working directory.
    """
    import gaugekit

    checkout = Path(gaugekit.__file__).resolve().parents[1]
    if (checkout / "results").is_dir():
        return checkout
    here = Path.cwd().resolve()
    return next((d for d in (here, *here.parents) if (d / "results").is_dir()), here)


def records_dir(experiment: str, scale: str, root: str | Path | None = None) -> Path:
    """``<root>/results/<experiment>/<scale>``; ``root`` defaults to :func:`project_root`."""
    base = Path(root) if root is not None else project_root(experiment)
    return base / "results" / experiment / scale


def scale_records_dir(experiment: str, scale: str, persist: bool,
                      root: str | Path | None = None) -> Path:
    """Where an experiment's records of ``scale`` go: the committed :func:`records_dir` when
    the scale persists its records (paper), else a fresh temporary folder (quick)."""
    if not persist:
        return Path(tempfile.mkdtemp(prefix=f"gaugekit-{experiment}-{scale}-"))
    return records_dir(experiment, scale, root)


def run_command(experiment: str, scale: str, parts: Sequence[str] | None = None,
                workers: int = 1) -> str:
    """The CLI command that makes (or resumes) the records of ``parts`` at ``scale``."""
    cmd = f"python -m gaugekit run {experiment} --scale {scale}"
    cmd += "".join(f" --part {p}" for p in parts or ())
    return cmd + (f" --workers {workers}" if workers > 1 else "")


@dataclass
class Collected:
    """What :func:`collect` returns: the latest record of every run per part, their folder,
    what was computed now, and the command that makes the records."""

    experiment: str
    scale: str
    records: dict[str, list[dict[str, Any]]]
    folder: Path | None
    report: SweepReport
    seconds: float
    command: str
    persisted: bool
    #: part → runs without a record (only with ``collect(..., allow_missing=True)``)
    missing: dict[str, int] = field(default_factory=dict)

    def code_versions(self) -> list[str]:
        """The distinct short git shas (``+dirty`` when so) that made the records shown."""
        out: list[str] = []
        for runs in self.records.values():
            for r in runs:
                code = r.get("code") or {}
                sha = (code.get("git_sha") or "unknown")[:10]
                tag = sha + ("+dirty" if code.get("git_dirty") else "")
                if tag not in out:
                    out.append(tag)
        return out

    def _missing_parts(self) -> tuple[str, str] | None:
        """``(what is missing, the command that makes it)``, or ``None`` when nothing is."""
        if not self.missing:
            return None
        count = sum(self.missing.values())
        make = run_command(self.experiment, self.scale, list(self.missing))
        what = (f"{count} planned runs have no record yet "
                f"({', '.join(f'{p}: {n}' for p, n in self.missing.items())})")
        return what, make

    def _lead(self, folder: str) -> str:
        total = len({r["run_id"] for runs in self.records.values() for r in runs})
        versions = ", ".join(self.code_versions()) or "none"
        return (f"{self.scale} scale: {total} run records read from the committed folder "
                f"{folder} ({self.report.ran} computed while building this page), made at code "
                f"version {versions}")

    def _recomputed(self) -> str:
        return (
            f"{self.scale} scale: {self.report.ran} runs recomputed for this page in "
            f"{self.seconds:.0f} s on {self.report.batches} batches (records in a temporary "
            f"folder); build with `python3 dev.py book` to see the committed paper-scale records."
        )

    def note(self) -> str:
        """One sentence for a terminal: which records a page shows and where they came from.

        Commands are between backticks; a page shows :meth:`note_markdown` instead (through
        :func:`gaugekit.report.viz.records_note`), where each command is a code block.
        """
        if not self.persisted:
            return self._recomputed()
        text = f"{self._lead(f'results/{self.experiment}/{self.scale}')} by `{self.command}`."
        missing = self._missing_parts()
        if missing is not None:
            text += f" {missing[0]}; make them with `{missing[1]}` (it resumes)."
        return text

    def note_markdown(self) -> str:
        """:meth:`note` as Markdown for a page: every command in a copy-pasteable code block
        (a long one broken into lines of at most :data:`COMMAND_WIDTH` characters with
        ``\\``), and the details a reader rarely needs (the code versions that made the
        records, the missing runs per part) in a collapsed ``{dropdown}``."""
        if not self.persisted:
            return self._recomputed()
        total = len({r["run_id"] for runs in self.records.values() for r in runs})
        folder = f"`results/{self.experiment}/{self.scale}`"
        text = (f"{self.scale} scale: {total} run records read from the committed folder "
                f"{folder} ({self.report.ran} computed while building this page), made by\n\n"
                f"```bash\n{wrap_command(self.command)}\n```\n")
        missing = self._missing_parts()
        if missing is not None:
            count = sum(self.missing.values())
            text += (f"\n{count} planned runs have no record yet; make them with (it resumes)"
                     f"\n\n```bash\n{wrap_command(missing[1])}\n```\n")
        versions = self.code_versions() or ["none"]
        plural = "s" if len(versions) > 1 else ""
        details = [f"Made at code version{plural} " + ", ".join(f"`{v}`" for v in versions)
                   + " (short git commits of the library that wrote the records; `+dirty`: "
                   "with uncommitted changes, `unknown`: written outside a git checkout)."]
        if missing is not None:
            details.append("Runs without a record, per part: " + ", ".join(
                f"{p} {n}" for p, n in self.missing.items()) + ".")
        title = f"Code version{plural}" + (" and missing runs" if missing is not None else "")
        text += f"\n````{{dropdown}} {title}\n" + "\n\n".join(details) + "\n````\n"
        return text


#: The longest line of a command in a page's code block (:func:`wrap_command`): a book's code
#: block holds about 80 characters without scrolling sideways.
COMMAND_WIDTH = 72


def wrap_command(command: str, width: int = COMMAND_WIDTH) -> str:
    """``command`` as shell lines of at most ``width`` characters, continued with ``\\``:
    broken before an option (``--part n40``), never inside one; a short command is one line."""
    if len(command) <= width:
        return command
    tokens: list[str] = []
    for word in command.split():  # an option and its value stay together
        if (tokens and tokens[-1].startswith("--") and " " not in tokens[-1]
                and not word.startswith("-")):
            tokens[-1] += " " + word
        else:
            tokens.append(word)
    lines, line = [], ""
    for token in tokens:
        if line and len(line) + 1 + len(token) + 2 > width:  # room for " \\"
            lines.append(line + " \\")
            line = "    " + token
        else:
            line = f"{line} {token}" if line else token
    lines.append(line)
    return "\n".join(lines)


def _missing(experiment: Experiment, scale: str, parts: Sequence[str], folder: Path) -> dict[
        str, int]:
    done = finished_run_ids(read_records_dir(folder))
    out = {}
    for part in parts:
        ids = {spec.run_id for spec in experiment.specs(part, scale)}
        if ids - done:
            out[part] = len(ids - done)
    return out


def collect(
    experiment: Experiment,
    scale: str | None = None,
    *,
    parts: Sequence[str] | None = None,
    out_dir: str | Path | None = None,
    device: str | torch.device | None = None,
    progress: bool = False,
    workers: int = 1,
    mode: str | None = None,
    persist: bool | None = None,
    allow_missing: bool = False,
) -> Collected:
    """The records a page shows (:class:`Collected`), per part of ``experiment``.

    ``persist`` (default: ``scale == "paper"``) says whether the scale keeps committed records
    under ``results/<experiment>/<scale>``. Then, in records mode ``read`` (the default, see
    :func:`gaugekit.config.get_records_mode`), the records are read and nothing is computed: a
    part with missing runs raises :class:`MissingRecords` naming the command that makes them;
    in mode ``make`` the missing runs are computed and appended first. A scale that does not
    persist (quick) computes everything afresh in a temporary folder, deleted once read.
    ``out_dir`` overrides the folder (and then always runs what is missing). With
    ``allow_missing`` a page that can show part of its records gets them instead of the error,
    and :meth:`Collected.note` names the missing runs and the command that makes them.
    """
    scale = get_scale(scale)
    names = list(parts) if parts is not None else list(experiment.parts(scale))
    persist = (scale == "paper") if persist is None else persist
    command = run_command(experiment.name, scale, None if parts is None else names, workers)

    def gather(folder: Path, compute: bool) -> Collected:
        t0 = time.perf_counter()
        report = SweepReport()
        if compute:
            report = run_sweep(experiment, folder, scale=scale, parts=names, device=device,
                               progress=progress, workers=workers)
        records = {p: load_part(experiment, p, folder, scale=scale) for p in names}
        return Collected(experiment.name, scale, records, folder, report,
                         time.perf_counter() - t0, command, persist and out_dir is None)

    if out_dir is not None:
        return gather(Path(out_dir), True)
    if persist:
        folder = records_dir(experiment.name, scale)
        if get_records_mode(mode) == "make":
            return gather(folder, True)
        missing = _missing(experiment, scale, names, folder)
        if missing and allow_missing:
            collected = gather(folder, False)
            collected.missing = missing
            return collected
        if missing:
            counts = ", ".join(f"{p}: {n}" for p, n in missing.items())
            make = run_command(experiment.name, scale, list(missing), workers)
            raise MissingRecords(
                f"{experiment.name} at {scale} scale: runs without a committed record in "
                f"{folder} ({counts}). Make them with `{make}` "
                f"(resumable), or build the book with `python3 dev.py book --make-records`; "
                f"`--scale quick` recomputes everything small instead."
            )
        return gather(folder, False)
    with tempfile.TemporaryDirectory(prefix=f"gaugekit-{experiment.name}-{scale}-") as folder:
        collected = gather(Path(folder), True)
    collected.folder = None
    return collected


def collector(
    experiment: Experiment,
    get_config: Callable[[str | None], Any],
    *,
    allow_missing: bool = False,
    default_parts: Callable[[Any], Sequence[str]] | None = None,
) -> Callable[..., Collected]:
    """The ``collect`` function of an experiment module: :func:`collect` with the scale's
    settings filled in from ``get_config(scale)`` (its ``scale`` name and ``persist_records``).

    The function returned takes ``(scale=None, out_dir=None, *, parts=None, device=None,
    progress=False, workers=1, mode=None)``: at a scale that persists its records (paper) they
    are read and nothing is trained (a part with missing runs raises :class:`MissingRecords`
    naming the command that makes them, or, with ``allow_missing``, is returned with
    :meth:`Collected.note` naming them); at quick scale everything is computed afresh in a
    temporary folder. ``parts`` defaults to ``default_parts(config)``, else every part.
    """

    def collect_records(
        scale: str | None = None,
        out_dir: str | Path | None = None,
        *,
        parts: Sequence[str] | None = None,
        device: str | torch.device | None = None,
        progress: bool = False,
        workers: int = 1,
        mode: str | None = None,
    ) -> Collected:
        config = get_config(scale)
        if parts is None and default_parts is not None:
            parts = list(default_parts(config))
        return collect(experiment, config.scale, parts=parts, out_dir=out_dir, device=device,
                       progress=progress, workers=workers, mode=mode,
                       persist=config.persist_records, allow_missing=allow_missing)

    missing = ("a part with missing runs is returned as far as it is recorded, and "
               ":meth:`~gaugekit.runs.sweep.Collected.note` names the missing runs and "
               "the command that makes them" if allow_missing else
               "a part with missing runs raises "
               ":class:`~gaugekit.runs.sweep.MissingRecords` naming the command that "
               "makes them")
    collect_records.__name__ = collect_records.__qualname__ = "collect"
    collect_records.__doc__ = (
        f"The records of the ``{experiment.name}`` parts at ``scale`` "
        "(:func:`gaugekit.runs.sweep.collect`).\n\n"
        "At a scale that keeps committed records (paper) they are read and nothing is "
        f"trained; {missing}. At quick scale everything is computed afresh in a temporary "
        "folder. ``out_dir`` reads and completes the records of that folder instead.")
    return collect_records
