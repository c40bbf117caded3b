"""The book's command line, ``python -m gaugebook``: run, list and report its experiments.

::

    python -m gaugebook list
    python -m gaugebook run EXPERIMENT [--scale quick|paper] [--device cpu|cuda] [--out PATH]
                                       [--part NAME ...] [--workers N] [--overwrite]
                                       [--backend local|dask] [--address tcp://HOST:PORT]
    python -m gaugebook report EXPERIMENT [--scale ...] [--out PATH] [--part NAME]
                                          [--protocol oracle|validation|train_speed]
    python -m gaugebook headline [--check]     # the README's results block, from the records
    python -m gaugebook hyperspectral FILE --key KEY [--layout cube|bands_pixels]
                                      [--scale ...] [--out PATH] [--workers N]  # a user's scene

``run`` resumes by default: runs already recorded under ``--out`` are skipped. ``--out``
defaults to ``results/EXPERIMENT/SCALE`` under the working directory. ``--backend dask``
runs the batches on a Dask cluster: the one at ``--address``, or a local one of ``--workers``
processes started for the run (the ``cluster`` extra); this process still writes every record.

A run whose batches failed prints the first failure and exits 1. ``headline``, and ``run`` or
``report`` at paper scale on the default ``results/`` folder, work in a gaugebook checkout (the
committed records and the README live there); elsewhere they say so and exit 2. The library's
own command, ``gaugekit audit``, audits one optimizer (:mod:`gaugekit.cli`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gaugebook.engine.settings import SCALES, get_scale
from gaugekit._extras import MissingExtra
from gaugekit.audit.factor_results import text_table

if TYPE_CHECKING:
    from gaugebook.engine.sweep import SweepReport

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gaugebook",
        description="Experiments of the gaugebook: run sweeps, list, report."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the experiments and their parts")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("experiment", help="experiment name (see `list`)")
        p.add_argument("--scale", choices=SCALES, default=None,
                       help="quick or paper (default: $GAUGEKIT_SCALE, else quick)")
        p.add_argument("--out", type=Path, default=None,
                       help="records folder (default: results/EXPERIMENT/SCALE)")

    run = sub.add_parser("run", help="run (or resume) an experiment's sweeps")
    common(run)
    run.add_argument("--device", default=None, help="torch device (default: $GAUGEKIT_DEVICE, "
                     "else cuda when available, else cpu)")
    run.add_argument("--part", action="append", default=None,
                     help="run only this part (repeatable; default: all parts)")
    run.add_argument("--workers", type=int, default=1, help="parallel worker processes")
    run.add_argument("--backend", choices=("local", "dask"), default="local",
                     help="where batches run: local processes (default) or a Dask cluster "
                     "(the cluster extra)")
    run.add_argument("--address", default=None,
                     help="with --backend dask: join the Dask scheduler at this address "
                     "(tcp://HOST:8786); default: start a local cluster of --workers processes")
    run.add_argument("--max-batch-size", type=int, default=None, help="cap on runs per batch")
    run.add_argument("--overwrite", action="store_true",
                     help="delete the parts' record files first instead of resuming")
    run.add_argument("--quiet", action="store_true", help="no progress bars")

    report = sub.add_parser("report", help="print the selected hyperparameters per method")
    common(report)
    report.add_argument("--part", default=None, help="part to report (default: the first)")
    report.add_argument("--protocol", default="oracle",
                        help="selection protocol: oracle, validation or train_speed")

    head = sub.add_parser("headline", help="regenerate the README's headline figure and table "
                          "from the committed paper-scale records")
    head.add_argument("--check", action="store_true",
                      help="only check that the README matches the records (exit 1 if stale)")
    hsi = sub.add_parser("hyperspectral", help="run the hyperspectral-completion protocol "
                         "(Table 5) on a scene of your own, from a .mat file")
    hsi.add_argument("file", type=Path, help="the .mat file (MATLAB v7 or older)")
    hsi.add_argument("--key", required=True, help="name of the array in the file")
    hsi.add_argument("--layout", default="cube", choices=("cube", "bands_pixels"),
                     help="cube: rows x cols x bands; bands_pixels: bands x (rows*cols), "
                     "column-major, with nRow/nCol in the file (default: cube)")
    hsi.add_argument("--n-rows", type=int, default=None, help="rows (bands_pixels without nRow)")
    hsi.add_argument("--n-cols", type=int, default=None, help="cols (bands_pixels without nCol)")
    hsi.add_argument("--scale", choices=SCALES, default=None,
                     help="quick or paper sizes, grids and seeds (default: $GAUGEKIT_SCALE)")
    hsi.add_argument("--out", type=Path, default=None,
                     help="records folder, resumable (default: a temporary folder)")
    hsi.add_argument("--device", default=None, help="torch device")
    hsi.add_argument("--workers", type=int, default=1, help="parallel worker processes")
    return parser


def _cmd_hyperspectral(args: argparse.Namespace) -> int:
    from gaugebook.hyperspectral.hyperspectral_runs import run_scene
    from gaugebook.hyperspectral.hyperspectral_views import report_lines

    collected = run_scene(args.file, args.key, args.layout, scale=args.scale, out_dir=args.out,
                          n_rows=args.n_rows, n_cols=args.n_cols, device=args.device,
                          workers=args.workers)
    for line in report_lines(collected):
        print(line)
    return _failed(collected.report)


def _failed(report: SweepReport) -> int:
    """Exit status of a sweep: 1, after printing the first failure, when some run ended
    ``error`` (its message also sits in the run's record), else 0."""
    errors = report.statuses.get("error", 0)
    if not errors:
        return 0
    print(f"gaugebook: error: {errors} run(s) failed; the first, {report.first_error}",
          file=sys.stderr)
    return 1


class NotACheckout(Exception):
    """A command needs a gaugebook checkout (its README.md and the records under results/)."""


def _require_checkout(folder: Path, what: str, otherwise: str) -> None:
    """Raise :class:`NotACheckout` saying that ``what`` needs a checkout unless ``folder`` is
    one (pyproject.toml, README.md and the committed records under results/); ``otherwise``
    says what to do instead."""
    if not all((folder / name).exists() for name in ("pyproject.toml", "README.md", "results")):
        raise NotACheckout(
            f"{what} works in a gaugebook checkout (a clone of the repository, with its "
            f"README.md and the committed records under results/), and {folder} is not one: "
            f"run it from the root of a clone{otherwise}"
        )


def _experiment_out(args: argparse.Namespace, verb: str) -> tuple[str, Any, Path]:
    """``(scale, experiment, records folder)`` of a ``run`` or ``report``: ``--out``, else
    ``results/EXPERIMENT/SCALE``; paper-scale records on that default folder belong to the
    checkout's results/."""
    from gaugebook.experiments import get_experiment

    scale = get_scale(args.scale)
    exp = get_experiment(args.experiment)
    if scale == "paper" and args.out is None:
        _require_checkout(Path.cwd(), f"`python -m gaugebook {args.command} --scale paper` "
                          f"{verb} the committed records under results/, so it",
                          ", or pass --out DIR")
    return scale, exp, args.out or Path("results") / exp.name / scale


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _cmd_list(args: argparse.Namespace) -> int:
    from gaugebook.experiments import experiment_names, get_experiment

    print("experiments:")
    for name in experiment_names():
        exp = get_experiment(name)
        print(f"  {name}: {exp.description}")
        for scale in SCALES:
            print(f"    {scale}: parts {', '.join(exp.parts(scale))}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from gaugebook.engine.sweep import run_sweep

    scale, exp, out = _experiment_out(args, "appends to")
    report = run_sweep(
        exp, out, scale=scale, parts=args.part, device=args.device,
        max_batch_size=args.max_batch_size, resume=not args.overwrite,
        progress=not args.quiet, workers=args.workers, backend=args.backend,
        address=args.address,
    )
    print(f"{exp.name} [{scale}] -> {out}: {report}")
    return _failed(report)


def _cmd_report(args: argparse.Namespace) -> int:
    from gaugebook.engine.collection import load_part
    from gaugebook.engine.selection import PROTOCOLS, select

    scale, exp, out = _experiment_out(args, "reads")
    part = args.part or exp.parts(scale)[0]
    if args.protocol not in PROTOCOLS:
        raise ValueError(f"Invalid protocol: {args.protocol!r}; expected one of {list(PROTOCOLS)}")
    records = load_part(exp, part, out, scale=scale)
    if not records:
        print(f"no records of part {part!r} under {out}; run `gaugebook run {exp.name}` first")
        return 1
    rows = [
        {"method": key, "lr": s.value, "interpolated": s.gated, "at_grid_edge": s.at_grid_edge,
         "rec": s.mean("rec"), "val_rec": s.mean("val_rec"), "steps": s.mean("steps")}
        for key, s in select(
            [r for r in records if r.get("config", {}).get("hparams")], PROTOCOLS[args.protocol]
        ).items()
    ]
    print(f"{exp.name} [{scale}] part {part}, protocol {args.protocol} ({len(records)} records)")
    columns = ["method", "lr", "interpolated", "at_grid_edge", "rec", "val_rec", "steps"]
    print(text_table(columns, [[_cell(r.get(c)) for c in columns] for r in rows], sep="  "))
    return 0


def _cmd_headline(args: argparse.Namespace) -> int:
    from gaugebook import headline
    from gaugebook.engine.collection import project_root

    _require_checkout(project_root("headline"), "`gaugebook headline` rewrites README.md from "
                      "the committed records, so it", "")
    if args.check:
        problems = headline.check_readme()
        for line in problems:
            print(line)
        return 1 if problems else 0
    changed = headline.update_readme()
    print(f"README.md headline {'updated' if changed else 'unchanged'}; figure {headline.FIGURE}")
    return 0


_COMMANDS = {"list": _cmd_list, "run": _cmd_run, "report": _cmd_report,
             "headline": _cmd_headline, "hyperspectral": _cmd_hyperspectral}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 some run failed or nothing to report,
    2 bad arguments)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        return _COMMANDS[args.command](args)
    except (ValueError, MissingExtra, NotACheckout) as err:
        print(f"gaugebook: error: {err}", file=sys.stderr)
        return 2
