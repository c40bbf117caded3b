"""The library's command line, ``gaugekit`` (or ``python -m gaugekit``): audit an optimizer.

::

    gaugekit --version
    gaugekit list        # the registry: name, gauge class, schedule, why
    gaugekit audit CLASS [KEY=VALUE ...] [--steps N]
                         [--dtype float64|float32]

``audit`` runs the equivariance audit (:func:`gaugekit.audit.factors.audit_equivariance`) on any
importable optimizer class (``torch.optim.AdamW``, ``gaugekit.optim.Muon``) or registry name
(``adam``), built with the ``KEY=VALUE`` hyperparameters (values read as Python literals,
strings otherwise), and prints the audit table and its verdict line. The book's own commands
(running and reporting its experiments) live in the book's package, ``python -m gaugebook``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from gaugekit import __version__
from gaugekit._extras import MissingExtra

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gaugekit", description="Does an optimizer keep the gauge? Audit it."
    )
    parser.add_argument("--version", action="version", version=f"gaugekit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the optimizers of the registry and their verdicts")
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

    from gaugekit.audit.factor_results import AuditRow, format_audit_table
    from gaugekit.audit.factors import AuditError, audit_equivariance

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


def _cmd_list(args: argparse.Namespace) -> int:
    from gaugekit.optim.registry import all_specs

    print("optimizers:")
    for spec in all_specs():
        kind = "equivariant" if spec.equivariant else "coordinate-wise"
        print(f"  {spec.name:<12} {kind:<16} {spec.lr_schedule:<9} {spec.reason}")
    return 0


_COMMANDS = {"list": _cmd_list, "audit": _cmd_audit}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 the audit could not run, 2 bad
    arguments)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        return _COMMANDS[args.command](args)
    except (ValueError, MissingExtra) as err:
        print(f"gaugekit: error: {err}", file=sys.stderr)
        return 2
