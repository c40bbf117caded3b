"""The one collector: what a page shows, from committed records or a fresh small sweep.

At paper scale a page reads the committed records under ``results/<experiment>/paper``; at
quick scale everything is computed afresh in a temporary folder. :func:`collect` returns a
:class:`Collected`: the latest record of every run per part, where they came from and the
command that makes them; :func:`collector` binds it to one experiment for its module.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gaugebook.engine.records import finished_run_ids, latest_by_run_id, read_records_dir
from gaugebook.engine.settings import get_records_mode, get_scale
from gaugebook.engine.spec import Experiment
from gaugebook.engine.sweep import SweepReport, run_sweep

__all__ = [
    "COMMAND_WIDTH",
    "Collected",
    "MissingRecords",
    "collect",
    "collector",
    "load_part",
    "project_root",
    "records_dir",
    "run_command",
    "wrap_command",
]


def load_part(
    experiment: Experiment, part: str, out_dir: str | Path, *, scale: str | None = None
) -> list[dict[str, Any]]:
    """The latest record of every run of ``part`` found under ``out_dir``, in the part's order.

    Runs that have no record yet are left out (run :func:`run_sweep` first).
    """
    scale = get_scale(scale)
    latest = latest_by_run_id(read_records_dir(out_dir))
    ids = dict.fromkeys(spec.run_id for spec in experiment.specs(part, scale))  # in order, once
    return [latest[rid] for rid in ids if rid in latest]


class MissingRecords(RuntimeError):
    """A paper-scale page asked for runs that have no committed record (mode ``read``)."""


def project_root(experiment: str) -> Path:
    """The folder whose ``results/<experiment>`` holds the committed records.

    First the checkout that holds ``gaugebook`` (the book's machinery lives only in a
    checkout), then the first folder upwards from the working directory with ``results/``, then
    the working directory.
    """
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "results").is_dir():
        return checkout
    here = Path.cwd().resolve()
    return next((d for d in (here, *here.parents) if (d / "results").is_dir()), here)


def records_dir(experiment: str, scale: str, root: str | Path | None = None) -> Path:
    """``<root>/results/<experiment>/<scale>``; ``root`` defaults to :func:`project_root`."""
    base = Path(root) if root is not None else project_root(experiment)
    return base / "results" / experiment / scale


def run_command(experiment: str, scale: str, parts: Sequence[str] | None = None,
                workers: int = 1) -> str:
    """The CLI command that makes (or resumes) the records of ``parts`` at ``scale``."""
    cmd = f"python -m gaugebook run {experiment} --scale {scale}"
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
    #: part → runs without a record (with ``allow_missing``, or of a part that cannot run here)
    missing: dict[str, int] = field(default_factory=dict)
    #: the scale's configuration the parts were planned from (:func:`collector` keeps it)
    config: Any = None

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

    def _read(self, folder: str) -> str:
        total = len({r["run_id"] for runs in self.records.values() for r in runs})
        return (f"{self.scale} scale: {total} run records read from the committed folder "
                f"{folder} ({self.report.ran} computed while building this page), made")

    def _recomputed(self) -> str:
        return (
            f"{self.scale} scale: {self.report.ran} runs recomputed for this page in "
            f"{self.seconds:.0f} s on {self.report.batches} batches (records in a temporary "
            f"folder). The numbers on this page are these small runs'; its sentences describe "
            f"the committed paper-scale records, which `python3 dev.py book` shows."
        )

    def note(self) -> str:
        """One sentence for a terminal: which records a page shows and where they came from.

        Commands are between backticks; a page shows :meth:`note_markdown` instead (through
        :func:`gaugebook.present.viz.records_note`), where each command is a code block.
        """
        if not self.persisted:
            return self._recomputed()
        versions = ", ".join(self.code_versions()) or "none"
        text = (f"{self._read(f'results/{self.experiment}/{self.scale}')} at code version "
                f"{versions} by `{self.command}`.")
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
        text = (f"{self._read(f'`results/{self.experiment}/{self.scale}`')} by\n\n"
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
    todo = {part: {spec.run_id for spec in experiment.specs(part, scale)} - done for part in parts}
    return {part: len(ids) for part, ids in todo.items() if ids}


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
    every_part: Sequence[str] | None = None,
    config: Any = None,
) -> Collected:
    """The records a page shows (:class:`Collected`), per part of ``experiment``.

    ``persist`` (default: ``scale == "paper"``) says whether the scale keeps committed records
    under ``results/<experiment>/<scale>``. Then, in records mode ``read`` (the default, see
    :func:`gaugebook.engine.settings.get_records_mode`), the records are read and nothing is
    computed: a
    part with missing runs raises :class:`MissingRecords` naming the command that makes them;
    in mode ``make`` the missing runs are computed and appended first. A scale that does not
    persist (quick) computes everything afresh in a temporary folder, deleted once read.
    ``out_dir`` overrides the folder (and then always runs what is missing). With
    ``allow_missing`` a page that can show part of its records gets them instead of the error,
    and :meth:`Collected.note` names the missing runs and the command that makes them.

    ``every_part``: the parts to collect when ``parts`` is not given, in order, also those the
    experiment cannot run here (not among ``experiment.parts(scale)``); with it, such a part is
    read as far as the folder holds it, never computed, and its runs without a record are
    counted in :attr:`Collected.missing`. ``config`` is kept as :attr:`Collected.config`.
    """
    scale = get_scale(scale)
    names = list(parts if parts is not None else
                 every_part if every_part is not None else experiment.parts(scale))
    runnable = names if every_part is None else experiment.parts(scale)
    read_only = [p for p in names if p not in runnable]
    persist = (scale == "paper") if persist is None else persist
    command = run_command(experiment.name, scale, None if parts is None else names, workers)

    def gather(folder: Path, compute: bool) -> Collected:
        t0 = time.perf_counter()
        report = SweepReport()
        if compute:
            report = run_sweep(experiment, folder, scale=scale, device=device,
                               parts=[p for p in names if p not in read_only],
                               progress=progress, workers=workers)
        records = {p: load_part(experiment, p, folder, scale=scale) for p in names}
        left = _missing(experiment, scale, read_only, folder) if compute and read_only else {}
        return Collected(experiment.name, scale, records, folder, report,
                         time.perf_counter() - t0, command, persist and out_dir is None, left,
                         config)

    if out_dir is not None:
        return gather(Path(out_dir), True)
    if persist:
        folder = records_dir(experiment.name, scale)
        if get_records_mode(mode) == "make":
            return gather(folder, True)
        missing = _missing(experiment, scale, names, folder)
        if missing and not allow_missing:
            counts = ", ".join(f"{p}: {n}" for p, n in missing.items())
            make = run_command(experiment.name, scale, list(missing), workers)
            raise MissingRecords(
                f"{experiment.name} at {scale} scale: runs without a committed record in "
                f"{folder} ({counts}). Make them with `{make}` "
                f"(resumable), or build the book with `python3 dev.py book --make-records`; "
                f"`--scale quick` recomputes everything small instead."
            )
        collected = gather(folder, False)
        collected.missing = missing
        return collected
    with tempfile.TemporaryDirectory(prefix=f"gaugekit-{experiment.name}-{scale}-") as folder:
        collected = gather(Path(folder), True)
    collected.folder = None
    return collected


def collector(
    experiment: Experiment,
    get_config: Callable[[str | None], Any] | None = None,
    *,
    allow_missing: bool = False,
    default_parts: Callable[[Any], Sequence[str]] | None = None,
    every_part: Callable[[Any], Sequence[str]] | None = None,
) -> Callable[..., Collected]:
    """The ``collect`` function of an experiment's package: :func:`collect` with the scale's
    settings filled in from ``get_config(scale)`` (a :class:`~gaugebook.engine.scales.Scales`:
    its ``scale`` name and ``persist_records``, ``every_part(config)`` when given; the config
    is kept as :attr:`Collected.config`). Without ``get_config`` (an experiment whose parts
    follow the scale's name alone) the scale is :func:`~gaugebook.engine.settings.get_scale`'s
    and only paper keeps its records.

    The function returned takes ``(scale=None, out_dir=None, *, parts=None, device=None,
    progress=False, workers=1, mode=None)`` (its docstring says what it reads or computes);
    ``parts`` defaults to ``default_parts(config)``, else every part.
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
        config = get_config(scale) if get_config is not None else None
        if parts is None and default_parts is not None:
            parts = list(default_parts(config))
        return collect(experiment, config.scale if config is not None else scale, parts=parts,
                       out_dir=out_dir, device=device, progress=progress, workers=workers,
                       mode=mode, persist=config.persist_records if config is not None else None,
                       allow_missing=allow_missing,
                       every_part=every_part(config) if every_part else None, config=config)

    missing = ("a part with missing runs is returned as far as it is recorded, and "
               ":meth:`~gaugebook.engine.collection.Collected.note` names the missing runs and "
               "the command that makes them" if allow_missing else
               "a part with missing runs raises "
               ":class:`~gaugebook.engine.collection.MissingRecords` naming the command that "
               "makes them")
    collect_records.__name__ = collect_records.__qualname__ = "collect"
    collect_records.__doc__ = (
        f"The records of the ``{experiment.name}`` parts at ``scale`` "
        "(:func:`gaugebook.engine.collection.collect`).\n\n"
        "At a scale that keeps committed records (paper) they are read and nothing is "
        f"trained; {missing}. At quick scale everything is computed afresh in a temporary "
        "folder. ``out_dir`` reads and completes the records of that folder instead."
        + (" A part that cannot run here is read as far as its records go." if every_part else ""))
    return collect_records
