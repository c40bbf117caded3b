"""The library's command line, ``gaugekit`` (or ``python -m gaugekit``): audit an optimizer.

::

    gaugekit --version
    gaugekit list        # the registry: name, gauge class, schedule, why
    gaugekit audit CLASS [KEY=VALUE ...] [--steps N]
                         [--dtype float64|float32]
                         [--create-graph | --no-create-graph]
                         [--group orthogonal|general] [--layout UV|AB]
                         [--condition-number KAPPA]

``audit`` runs the equivariance audit (:func:`gaugekit.audit.factors.audit_equivariance`) on any
importable optimizer class (``torch.optim.AdamW``, ``gaugekit.optim.Muon``) or registry name
(``adam``, ``adamw``, a class name; see :func:`gaugekit.optim.get_spec`), built with the
``KEY=VALUE`` hyperparameters, and prints the audit table and its verdict line. ``--create-graph``
/ ``--no-create-graph`` force the backward pass of a Hessian-vector optimizer (Sophia-H,
AdaHessian); by default the audit detects it. ``--group general`` audits the ``GL(r)`` twin
``(U R, V R⁻ᵀ)`` with a random ``R`` of condition number ``--condition-number`` (default 4)
instead of the orthogonal one; ``--layout AB`` hands the optimizer LoRA's pair ``[A, B]``
(``W = B A``) instead of the paper's ``[U, V]``.

Values are read strictly (``parse_hyperparameters``): a Python literal (``1e-3``, ``10``,
``True``, ``None``, ``(0.9, 0.95)``, ``'text'``), or a bare word (``dopri5``) where the argument
takes a string; each value must have the type the constructor's signature gives the argument
(its annotation, else its default). A bad value is a usage error (exit status 2) naming the key,
the value and what was expected, e.g. ``gaugekit: error: Invalid lr: 'abc'; expected a number
(the default is 0.001)``.

The book's own commands (running and reporting its experiments) live in the book's package,
``python -m gaugebook``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import math
import re
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
                       help="an importable class (torch.optim.AdamW, gaugekit.optim.Muon), or a "
                       "registry name, alias or class name of gaugekit.optim (adam, adamw, "
                       "SharedScaleAdam; see `list`)")
    audit.add_argument("hyperparameters", nargs="*", metavar="KEY=VALUE",
                       help="constructor arguments, values as Python literals of the argument's "
                       "type (lr=1e-3 betas=(0.9,0.95) nesterov=True), a bare word where it "
                       "takes a string (flow_method=dopri5)")
    audit.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    audit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                       help="dtype of the audit (default float64)")
    audit.add_argument("--create-graph", action=argparse.BooleanOptionalAction, default=None,
                       help="backward with create_graph=True, as a Hessian-vector optimizer "
                       "(Sophia-H, AdaHessian) needs (default: detected)")
    audit.add_argument("--group", choices=("orthogonal", "general"), default="orthogonal",
                       help="the gauge twin: orthogonal (U Q, V Q), Q Haar in O(r), or general "
                       "(U R, V R⁻ᵀ), R random in GL(r) (default orthogonal)")
    audit.add_argument("--layout", choices=("UV", "AB"), default="UV",
                       help="the factor pair the optimizer gets: the paper's [U, V] with "
                       "W = U Vᵀ, or LoRA's [A, B] with W = B A (default UV)")
    audit.add_argument("--condition-number", type=float, default=4.0, metavar="KAPPA",
                       help="cond(R) of the general twin's R, >= 1 (default 4)")


#: annotation word → the kind of value it admits (``float`` admits an ``int`` too)
_ANNOTATION_KINDS = {"bool": "bool", "int": "int", "float": "float", "Hyper": "float",
                     "Tensor": "float", "str": "str", "tuple": "tuple", "None": "None"}
_KIND_WORDS = {"bool": "a bool (True or False)", "int": "an integer", "float": "a number",
               "str": "a string", "tuple": "a tuple", "None": "None"}


def _accepted_kinds(param: inspect.Parameter) -> set[str] | None:
    """The kinds of value a constructor argument takes: from its annotation (its top level:
    ``tuple[float, float]`` is a tuple), else from the type of its default; ``None`` when
    neither says (``Any``, a callable, no annotation and a ``None`` default)."""
    annotation, default = param.annotation, param.default
    if annotation is not param.empty:
        text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
        text = re.sub(r"\bOptional\[(.*)\]", r"\1 | None", text)
        while "[" in text:  # keep the top level
            text = re.sub(r"\[[^\[\]]*\]", "", text)
        words = set(re.findall(r"\w+", text))
        kinds = {_ANNOTATION_KINDS[w] for w in words if w in _ANNOTATION_KINDS}
        return kinds if kinds and not {"Any", "Callable", "object"} & words else None
    by_type = {bool: "bool", int: "float", float: "float", str: "str", tuple: "tuple"}
    kind = by_type.get(type(default))
    return {kind} if kind else None


def _kind(value: Any) -> str:
    return "None" if value is None else "tuple" if isinstance(value, tuple) else type(
        value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_value(key: str, text: str, value: Any, param: inspect.Parameter) -> Any:
    """``value`` if it has a kind ``param`` takes (a tuple of the default's length, of numbers
    where the default holds numbers), else ``ValueError`` naming the key, the text and what
    was expected."""
    kinds = _accepted_kinds(param)
    if kinds is None:
        return value
    default = param.default
    words = [_KIND_WORDS[k] for k in sorted(kinds, key=list(_KIND_WORDS).index)]
    expected = " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
    kind = _kind(value)
    ok = kind in kinds or (kind == "int" and "float" in kinds)
    if ok and kind == "tuple" and isinstance(default, tuple):
        numbers = all(_is_number(d) for d in default)
        one_length = str(param.annotation).count("tuple") <= 1  # not tuple[a, b] | tuple[a, b, c]
        ok = (not one_length or len(value) == len(default)) and (
            not numbers or all(map(_is_number, value)))
        what = "numbers" if numbers else "values"
        expected = expected.replace(
            "a tuple", f"a tuple of {len(default)} {what}" if one_length else f"a tuple of {what}")
    if not ok:
        if default is not param.empty:
            expected += f" (the default is {default!r})"
        raise ValueError(f"Invalid {key}: {text!r}; expected {expected}")
    return value


def parse_hyperparameters(items: Sequence[str], cls: type | None = None) -> dict[str, Any]:
    """``["lr=1e-3", "betas=(0.9, 0.95)", "mode=fast"]`` as keyword arguments, strictly.

    A value is read with :func:`ast.literal_eval` (numbers, tuples, booleans, ``None``, quoted
    strings; a list becomes a tuple); text that is no literal is a bare string. With ``cls``,
    every value of an argument of ``cls``'s constructor must have the type its signature gives
    (the annotation's top level, else the type of the default): ``float`` takes an int or a
    float, ``int`` an int, ``bool`` ``True``/``False``, ``str`` a quoted string or a bare word,
    a tuple a tuple (of the default's length, of numbers where the default holds numbers);
    ``None`` only where the annotation allows it. A key ``cls`` does not take is left to the
    constructor (an unexpected keyword is its ``TypeError``).

    Raises ``ValueError``: ``Invalid hyperparameter: 'lr'; expected KEY=VALUE`` for an item
    without ``=`` or whose key is not a Python identifier, ``Invalid lr: 'abc'; expected a
    number (the default is 0.001)`` for a value of the wrong type.
    """
    params = inspect.signature(cls).parameters if cls is not None else {}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"Invalid hyperparameter: {item!r}; expected KEY=VALUE")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = text
        if isinstance(value, list):
            value = tuple(value)
        param = params.get(key)
        if param is not None and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            value = _check_value(key, text, value, param)
        out[key] = value
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

    if "." in args.optimizer:  # a class path, else a registry name
        cls = resolve_optimizer_class(args.optimizer)
        kwargs = parse_hyperparameters(args.hyperparameters, cls)
        factory = lambda params: cls(params, **kwargs)
    else:
        from gaugekit.optim.registry import get_spec

        spec = get_spec(args.optimizer)  # an unknown name: ValueError listing the allowed ones
        kwargs = parse_hyperparameters(args.hyperparameters, spec.cls)
        factory = lambda params: spec.make(params, **kwargs)
    if not (math.isfinite(args.condition_number) and args.condition_number >= 1):
        raise ValueError(f"Invalid --condition-number: {args.condition_number!r}; expected a "
                         "finite float >= 1")
    dtype = getattr(torch, args.dtype)
    shapes = [(7, 3), (5, 3)] if args.layout == "UV" else [(3, 5), (7, 3)]
    probe = [torch.zeros(*shape, dtype=dtype, requires_grad=True) for shape in shapes]
    try:  # a bad key or value is a usage error, before any step is taken
        factory(probe)
    except (TypeError, ValueError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"Invalid hyperparameters for {args.optimizer}: {message}") from exc
    print(f"Equivariance audit of {args.optimizer}: {args.steps} steps, {args.dtype}, "
          f"{_audit_problem(args)} and a noise twin (seed 0)")
    if "." not in args.optimizer:  # a registry entry: the registry's verdict and its scope
        for line in spec.verdict_lines(**kwargs):
            print(f"registry: {line}")
    try:
        result = audit_equivariance(factory, num_steps=args.steps, dtype=dtype,
                                    create_graph=args.create_graph, group=args.group,
                                    layout=args.layout, condition_number=args.condition_number)
    except AuditError as exc:
        print(format_audit_table([AuditRow(args.optimizer, "error", error=str(exc))]))
        return 1
    print(format_audit_table([AuditRow(args.optimizer, result.verdict, result)]))
    return 0


def _audit_problem(args: argparse.Namespace) -> str:
    """The audit's problem in words: the loss, the pair and the gauge element."""
    pair = ("matrix sensing L(U Vᵀ) with U 7x3, V 5x3" if args.layout == "UV" else
            "matrix sensing L(B A) with LoRA's A 3x5, B 7x3")
    gauge = ("a Haar Q" if args.group == "orthogonal" else
             f"a random R in GL(3) with cond(R) = {args.condition_number:g}")
    return f"{pair}, {gauge}"


def _cmd_list(args: argparse.Namespace) -> int:
    from gaugekit.optim.registry import ALIASES, all_specs

    print("optimizers:")
    for spec in all_specs():
        kind = "equivariant" if spec.equivariant else "coordinate-wise"
        print(f"  {spec.name:<12} {kind:<16} {spec.lr_schedule:<9} {spec.reason}")
    print("aliases (class names are accepted too, in any case):")
    for name, spec in ALIASES.items():
        options = ", ".join(f"{k}={v!r}" for k, v in spec.options.items())
        print(f"  {name:<12} {spec.cls.__name__}({options})")
        for value in spec.on_a_model:
            for line in spec.verdict_lines(**{spec.routed_by: value})[1:]:
                print(f"  {'':<12} {line}")
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
