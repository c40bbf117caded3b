"""Hyperparameter checks shared by every optimizer of the zoo.

Each check raises ``ValueError(f"Invalid {name}: {value!r}; expected ...")`` naming the argument
and the allowed range. Float hyperparameters marked *per-run* may also be a floating tensor of
shape ``param.shape[:batch_dims]`` (one value per stacked run) or a 0-d tensor; the range check
then applies to every entry (this reads the tensor once, at construction).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

#: A float hyperparameter: a Python number or, for per-run hyperparameters, a tensor.
Hyper = float | Tensor

Check = Callable[[str, Any], None]


def invalid(name: str, value: Any, expected: str) -> ValueError:
    """The one error format of the package."""
    return ValueError(f"Invalid {name}: {value!r}; expected {expected}")


def real_check(
    low: float,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
    per_run: bool = True,
) -> Check:
    """A check for a float in the given interval; ``per_run`` also admits floating tensors."""
    if math.isinf(high):
        expected = f"a finite float {'>' if low_open else '>='} {low:g}"
    else:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        expected = f"a float in {left}{low:g}, {high:g}{right}"
    if per_run:
        expected += " (or a floating tensor of such values, one per run)"

    def check(name: str, value: Any) -> None:
        if isinstance(value, bool):
            raise invalid(name, value, expected)
        if isinstance(value, Tensor):
            if not per_run or not value.is_floating_point():
                raise invalid(name, value, expected)
        elif not isinstance(value, (int, float)):
            raise invalid(name, value, expected)
        t = torch.as_tensor(value).detach().to(torch.float64)
        ok = torch.isfinite(t) & ((t > low) if low_open else (t >= low))
        if not math.isinf(high):
            ok = ok & ((t < high) if high_open else (t <= high))
        if not bool(ok.all()):
            raise invalid(name, value, expected)

    return check


def betas_check(per_run: bool = True) -> Check:
    """A pair ``(beta1, beta2)`` with each entry in ``[0, 1)``."""
    entry = real_check(0.0, 1.0, high_open=True, per_run=per_run)

    def check(name: str, value: Any) -> None:
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise invalid(name, value, "a pair (beta1, beta2) of floats in [0, 1)")
        for i, beta in enumerate(value):
            entry(f"{name}[{i}]", beta)

    return check


def int_check(low: int) -> Check:
    """An integer ``>= low`` (``bool`` is refused)."""

    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise invalid(name, value, f"an integer >= {low}")

    return check


def bool_check(name: str, value: Any) -> None:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise invalid(name, value, "True or False")


def choice_check(*choices: Any) -> Check:
    """One of a fixed set of values."""

    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise invalid(name, value, f"one of {choices!r}")

    return check


def coefficients_check(name: str, value: Any) -> None:
    """Three finite floats ``(a, b, c)``."""
    ok = isinstance(value, (tuple, list)) and len(value) == 3
    ok = ok and all(
        isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in value
    )
    if not ok:
        raise invalid(name, value, "three finite floats (a, b, c)")


def callable_or_none_check(name: str, value: Any) -> None:
    """A callable or ``None``."""
    if value is not None and not callable(value):
        raise invalid(name, value, "a callable or None")


#: ``lr >= 0``, per run.
LR = real_check(0.0)
#: ``eps >= 0``, per run.
EPS = real_check(0.0)
#: a decay coefficient in ``[0, 1)``, per run.
DECAY = real_check(0.0, 1.0, high_open=True)
#: ``weight_decay >= 0``, per run.
WEIGHT_DECAY = real_check(0.0)
#: ``batch_dims >= 0``.
BATCH_DIMS = int_check(0)

#: Every constructor argument of torch.optim's Adam, AdamW, SGD, RMSprop and Adagrad (besides
#: ``params`` and ``lr``), with the values at which it asks for nothing beyond the plain rule:
#: an optimizer that does not implement the argument accepts exactly these (``()``: none).
#: ``decoupled_weight_decay`` is special: accepted when it names the rule's own kind of decay.
TORCH_OPTIM_OFF: dict[str, tuple[Any, ...]] = {
    "amsgrad": (False,),
    "foreach": (None, False),
    "fused": (None, False),
    "capturable": (False,),
    "differentiable": (False,),
    "maximize": (False,),
    "momentum": (0,),
    "dampening": (0,),
    "nesterov": (False,),
    "centered": (False,),
    "lr_decay": (0,),
    "initial_accumulator_value": (0,),
    "weight_decay": (0,),
    "decoupled_weight_decay": (),
    "betas": (),
    "eps": (),
    "alpha": (),
}


def _is_one_of(value: Any, accepted: tuple[Any, ...]) -> bool:
    if isinstance(value, Tensor) or not isinstance(value, (bool, int, float, type(None))):
        return False
    return any(value is a or (value is not None and a is not None and value == a)
               for a in accepted)


def check_torch_option(
    optimizer: str, name: str, value: Any, accepted: tuple[Any, ...] | None = None
) -> None:
    """Refuse a torch.optim argument ``name`` that ``optimizer`` does not implement, unless its
    value asks for nothing (one of ``accepted``, by default :data:`TORCH_OPTIM_OFF`'s)."""
    accepted = TORCH_OPTIM_OFF[name] if accepted is None else accepted
    if _is_one_of(value, accepted):
        return
    allowed = " or ".join(repr(a) for a in accepted) if accepted else f"no {name}"
    raise invalid(
        name, value, f"{allowed}: {optimizer} does not implement torch.optim's {name!r}"
    )


def check_optimizer_wide(
    group: dict[str, Any], defaults: dict[str, Any], keys: tuple[str, ...], why: str
) -> None:
    """Refuse a param group that overrides a hyperparameter shared by all groups.

    Rules whose statistics are pooled over every parameter (a shared scalar, a global norm)
    need one value of ``keys`` for the whole optimizer; ``why`` says which pooled quantity.
    """
    for key in keys:
        value, default = group[key], defaults[key]
        tensors = isinstance(value, Tensor) or isinstance(default, Tensor)
        if value is not default and (tensors or value != default):
            raise invalid(key, value, f"the optimizer-wide value {default!r} ({why})")


def check_common_batch_shape(param_groups: list[dict[str, Any]], group: dict[str, Any]) -> None:
    """Refuse a group whose parameters stack a different set of runs than the others."""
    batch_dims = group["batch_dims"]
    shapes = {tuple(p.shape[:batch_dims]) for g in param_groups for p in g["params"]}
    shapes |= {tuple(p.shape[:batch_dims]) for p in group["params"]}
    if len(shapes) > 1:
        raise invalid(
            "params",
            f"batch shapes {sorted(shapes)}",
            "one common param.shape[:batch_dims] for all parameters",
        )
