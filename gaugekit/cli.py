"""The command line, ``python -m gaugekit`` (or ``gaugekit``). Thin: parse, then call.

::

    python -m gaugekit --version
    python -m gaugekit list
    python -m gaugekit run EXPERIMENT [--scale quick|paper] [--device cpu|cuda] [--out PATH]
                                      [--part NAME ...] [--workers N] [--overwrite]
                                      [--backend local|dask] [--address tcp://HOST:PORT]
    python -m gaugekit report EXPERIMENT [--scale ...] [--out PATH] [--part NAME]
                                         [--protocol oracle|validation|train_speed]
    python -m gaugekit headline [--check]     # the README's results block, from the records
    python -m gaugekit hyperspectral FILE --key KEY [--layout cube|bands_pixels]
                                     [--scale ...] [--out PATH] [--workers N]  # a user's scene
    python -m gaugekit audit CLASS [KEY=VALUE ...] [--steps N] [--dtype float64|float32]

``run`` resumes by default: runs already recorded under ``--out`` are skipped. ``--out``
defaults to ``results/EXPERIMENT/SCALE`` under the working directory. ``--backend dask``
runs the batches on a Dask cluster: the one at ``--address``, or a local one of ``--workers``
processes started for the run (``pip install gaugekit[cluster]``); this process still writes
every record.

A run whose batches failed prints the first failure and exits 1. ``headline``, and ``run`` or
``report`` at paper scale on the default ``results/`` folder, work in a gaugebook checkout (the
committed records and the README live there); elsewhere they say so and exit 2.

``audit`` runs the equivariance audit (:func:`gaugekit.audit.audit_equivariance`) on any
importable optimizer class (``torch.optim.AdamW``, ``gaugekit.optim.Muon``) or registry name
(``adam``), built with the ``KEY=VALUE`` hyperparameters (values read as Python literals,
strings otherwise), and prints the audit table and its verdict line.
"""

# Developer note (layers, gaugekit/__init__.py): floor 10, the command line.

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gaugekit import __version__
from gaugekit._extras import MissingExtra
from gaugekit.config import SCALES, get_scale

if TYPE_CHECKING:
    from gaugekit.runs.sweep import SweepReport

__all__ = ["build_parser", "main", "parse_hyperparameters", "resolve_optimizer_class"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gaugekit", description="Experiments of the gaugebook: run sweeps, list, report."
    )
    parser.add_argument("--version", action="version", version=f"gaugekit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the experiments (with their parts) and the optimizers")

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
                     "(pip install gaugekit[cluster])")
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
    _add_audit_parser(sub)
    return parser


# --------------------------------------------------------------------------------------------
# audit: any optimizer class, from the command line
# --------------------------------------------------------------------------------------------


def _add_audit_parser(sub: Any) -> None:
    audit = sub.add_parser(
        "audit", help="audit any optimizer class (or registry name) for gauge equivariance",
        description="Run the equivariance audit on an optimizer built with the given "
        "hyperparameters; print the audit table and its verdict line.",
    )
    audit.add_argument("optimizer", metavar="CLASS",
                       help="an importable class (torch.optim.AdamW, gaugekit.optim.Muon) or a "
                       "registry name (adam; see `list`)")
    audit.add_argument("hyperparameters", nargs="*", metavar="KEY=VALUE",
                       help="constructor arguments, values as Python literals (lr=1e-3 "
                       "betas=(0.9,0.95) nesterov=True), strings otherwise")
    audit.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    audit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                       help="dtype of the audit (default float64)")


def parse_hyperparameters(items: Sequence[str]) -> dict[str, Any]:
    """``["lr=1e-3", "betas=(0.9, 0.95)", "mode=fast"]`` as keyword arguments.

    A value is read with :func:`ast.literal_eval` (numbers, tuples, booleans, ``None``) and
    kept as a string when it is not a literal. Raises ``ValueError`` for an item without ``=``
    or whose key is not a Python identifier.
    """
    import ast

    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"Invalid hyperparameter: {item!r}; expected KEY=VALUE")
        try:
            out[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            out[key] = text.strip()
    return out


def resolve_optimizer_class(path: str) -> type:
    """The ``torch.optim.Optimizer`` subclass at the dotted ``path`` (``torch.optim.AdamW``).

    Raises ``ValueError`` when no module of the path imports, the attribute is missing, or it
    is not an optimizer class.
    """
    import importlib

    import torch

    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            raise ValueError(
                f"Invalid optimizer: {path!r}; {'.'.join(parts[:i])} has no {'.'.join(parts[i:])}"
            ) from None
        if not (isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer)):
            raise ValueError(
                f"Invalid optimizer: {path!r} is not a torch.optim.Optimizer subclass"
            )
        return obj
    raise ValueError(f"Invalid optimizer: {path!r}; no module of this path can be imported")


def _cmd_audit(args: argparse.Namespace) -> int:
    import torch

    from gaugekit.audit.factors import AuditError, AuditRow, audit_equivariance, format_audit_table

    kwargs = parse_hyperparameters(args.hyperparameters)
    if "." in args.optimizer:  # a class path, else a registry name
        cls = resolve_optimizer_class(args.optimizer)
        factory = lambda params: cls(params, **kwargs)
    else:
        from gaugekit.optim.registry import get_spec, make_optimizer

        get_spec(args.optimizer)  # an unknown name raises ValueError listing the known ones
        factory = lambda params: make_optimizer(args.optimizer, params, **kwargs)
    dtype = getattr(torch, args.dtype)
    probe = [torch.zeros(7, 3, dtype=dtype, requires_grad=True),
             torch.zeros(5, 3, dtype=dtype, requires_grad=True)]
    try:  # a bad key or value is a usage error, before any step is taken
        factory(probe)
    except (TypeError, ValueError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"Invalid hyperparameters for {args.optimizer}: {message}") from exc
    print(f"Equivariance audit of {args.optimizer}: {args.steps} steps, {args.dtype}, "
          f"matrix sensing L(U Vᵀ) with U 7x3, V 5x3, a Haar Q and a noise twin (seed 0)")
    try:
        result = audit_equivariance(factory, num_steps=args.steps, dtype=dtype)
    except AuditError as exc:
        print(format_audit_table([AuditRow(args.optimizer, "error", error=str(exc))]))
        return 1
    print(format_audit_table([AuditRow(args.optimizer, result.verdict, result)]))
    return 0


def _cmd_hyperspectral(args: argparse.Namespace) -> int:
    from gaugekit.experiments.hyperspectral import run_scene
    from gaugekit.report.hyperspectral import report_lines

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
    print(f"gaugekit: error: {errors} run(s) failed; the first, {report.first_error}",
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
    from gaugekit.experiments import get_experiment

    scale = get_scale(args.scale)
    exp = get_experiment(args.experiment)
    if scale == "paper" and args.out is None:
        _require_checkout(Path.cwd(), f"`gaugekit {args.command} --scale paper` {verb} the "
                          "committed records under results/, so it", ", or pass --out DIR")
    return scale, exp, args.out or Path("results") / exp.name / scale


def _format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "nan" if math.isnan(value) else f"{value:.4g}"
        return str(value)

    table = [[c for c in columns]] + [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    lines = ("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in table)
    return "\n".join(lines)


def _cmd_list(args: argparse.Namespace) -> int:
    from gaugekit.experiments import experiment_names, get_experiment
    from gaugekit.optim.registry import all_specs

    print("experiments:")
    for name in experiment_names():
        exp = get_experiment(name)
        print(f"  {name}: {exp.description}")
        for scale in SCALES:
            print(f"    {scale}: parts {', '.join(exp.parts(scale))}")
    print("optimizers:")
    for spec in all_specs():
        kind = "equivariant" if spec.equivariant else "coordinate-wise"
        print(f"  {spec.name:<12} {kind:<16} {spec.lr_schedule:<9} {spec.reason}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from gaugekit.runs.sweep import run_sweep

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
    from gaugekit.runs.collection import load_part
    from gaugekit.runs.selection import PROTOCOLS, select

    scale, exp, out = _experiment_out(args, "reads")
    part = args.part or exp.parts(scale)[0]
    if args.protocol not in PROTOCOLS:
        raise ValueError(f"Invalid protocol: {args.protocol!r}; expected one of {list(PROTOCOLS)}")
    records = load_part(exp, part, out, scale=scale)
    if not records:
        print(f"no records of part {part!r} under {out}; run `gaugekit run {exp.name}` first")
        return 1
    rows = [
        {"method": key, "lr": s.value, "interpolated": s.gated, "at_grid_edge": s.at_grid_edge,
         "rec": s.mean("rec"), "val_rec": s.mean("val_rec"), "steps": s.mean("steps")}
        for key, s in select(
            [r for r in records if r.get("config", {}).get("hparams")], PROTOCOLS[args.protocol]
        ).items()
    ]
    print(f"{exp.name} [{scale}] part {part}, protocol {args.protocol} ({len(records)} records)")
    print(_format_table(rows, ["method", "lr", "interpolated", "at_grid_edge", "rec", "val_rec",
                               "steps"]))
    return 0


def _cmd_headline(args: argparse.Namespace) -> int:
    from gaugekit.report import headline
    from gaugekit.runs.collection import project_root

    _require_checkout(project_root("headline"), "`gaugekit headline` rewrites README.md from "
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
             "headline": _cmd_headline, "hyperspectral": _cmd_hyperspectral, "audit": _cmd_audit}


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
        print(f"gaugekit: error: {err}", file=sys.stderr)
        return 2
