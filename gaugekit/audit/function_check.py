r"""Is a twin the same function as its base? Judged against the model's own round-off.

A gauge twin is built in float64 and rounded back to the parameters' dtype, so even an exact
symmetry leaves the twin's output a little off its base's. How little depends on the model: a
fixed tolerance such as ``√ε`` (3.5e-4 in float32) accepts a twin that is off by 1e-5 although
the model resolves 1e-7, and refuses a float64 model that computes parts in float32 (its twin
is off by 1e-8 against a tolerance of 1.5e-8 or less). The yardstick here is measured instead:

- the **round-off twin** moves every entry of the gauge's tensors by one rounding of precision
  ``ε``, ``w → w (1 ± ε)`` with a random sign per entry (computed in float64, rounded back);
  its output drift ``r(ε)`` is what rounding the gauge's tensors alone does to the output;
- the twin passes in a precision when ``drift ≤ FUNCTION_FACTOR · κ · max(r(ε), ε)``
  (measured: an exact orthogonal gauge twin sits at 0.9–1.1 ``r(ε)`` on GPT-2, Llama and
  Cohere), where ``κ`` is the condition number of the gauge element (1 for an orthogonal one:
  rounding ``R⁻¹ A`` and ``B R`` errs by up to ``κ`` times one rounding of ``B A``);
- it is judged in the model's dtype **and** on a float64 copy (the twin built again there), so
  a twin off by a true 1e-6 passes neither where float64 resolves it. A float64 model that does
  not resolve float64 on these tensors is judged at float32's ``ε``, and the check says so: its
  output moves by less than ``ε₆₄`` under the float64 round-off twin, and by less than
  ``LINEAR_SHARE`` of the float32 round-off twin's drift scaled by ``ε₆₄/ε₃₂`` (a model that
  computes in float64 responds in proportion, one that casts to float32 hardly at all).

:func:`same_function` is the one function-identity check of the head and LoRA twin audits.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from gaugekit.gauge import relative_distance

__all__ = ["FUNCTION_FACTOR", "LINEAR_SHARE", "FunctionCheck", "cast_floats", "roundoff_twin",
           "same_function"]

#: How many times its round-off twin's drift a twin may be off its base and pass.
FUNCTION_FACTOR: float = 10.0
#: A float64 model computes the gauge's tensors in float32 when its output moves by less than
#: this share of what float32's rounding moves it, scaled down to float64's ``ε`` (a model
#: that computes in float64 responds in proportion; one that casts to float32 hardly at all).
LINEAR_SHARE: float = 0.01

Measure = Callable[[nn.Module], Tensor]
Tensors = Callable[[nn.Module], Iterable[Tensor]]


@dataclass(frozen=True)
class FunctionCheck:
    """One precision's verdict: the twin's drift, the round-off twin's, and the precision
    ``eps`` both were judged at (``judged_at`` names it; it differs from ``dtype`` when the
    model does not resolve its own dtype)."""

    dtype: str
    judged_at: str
    drift: float
    roundoff: float
    eps: float
    amplification: float = 1.0

    @property
    def limit(self) -> float:
        return FUNCTION_FACTOR * self.amplification * max(self.roundoff, self.eps)

    @property
    def passed(self) -> bool:
        return self.drift <= self.limit

    def __str__(self) -> str:
        at = "" if self.judged_at == self.dtype else f", judged at {self.judged_at}'s ε"
        return (f"rel = {self.drift:.2g} in {self.dtype} against {self.roundoff:.2g} for its "
                f"round-off twin (limit {self.limit:.2g}{at})")


def cast_floats(obj: Any, dtype: torch.dtype) -> Any:
    """``obj`` with every floating tensor in it (through tuples, lists and dicts) cast to
    ``dtype``; integer tensors (token ids) and everything else as they are."""
    if isinstance(obj, Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, tuple | list):
        return type(obj)(cast_floats(x, dtype) for x in obj)
    if isinstance(obj, dict):
        return {k: cast_floats(v, dtype) for k, v in obj.items()}
    return obj


def roundoff_twin(model: nn.Module, tensors: Tensors, eps: float, *, seed: int) -> nn.Module:
    """A deep copy with each entry ``w`` of ``tensors(copy)`` set to ``w (1 ± eps)``, the sign
    drawn per entry from ``seed`` (computed in float64, rounded back to the dtype)."""
    twin = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in tensors(twin):
            sign = torch.randint(0, 2, tuple(t.shape), generator=generator) * 2 - 1
            w = t.double()
            t.copy_(w + eps * w * sign.to(device=t.device, dtype=torch.float64))
    return twin


def _dtype_of(model: nn.Module, tensors: Tensors) -> torch.dtype:
    return next(iter(tensors(model))).dtype


def _judge(base: nn.Module, twin: nn.Module, tensors: Tensors, measure: Measure,
           seeds: int, amplification: float) -> FunctionCheck:
    dtype = _dtype_of(base, tensors)
    reference = measure(base).double().reshape(-1)

    def drift(m: nn.Module) -> float:
        return relative_distance(measure(m).double().reshape(-1), reference,
                                 symmetric=True).item()

    def roundoff(eps: float) -> float:
        return max(drift(roundoff_twin(base, tensors, eps, seed=s)) for s in range(seeds))

    eps = torch.finfo(dtype).eps
    r, judged_at = roundoff(eps), dtype
    if dtype == torch.float64 and r < eps:
        eps32 = torch.finfo(torch.float32).eps
        r32 = roundoff(eps32)
        if r < LINEAR_SHARE * r32 * eps / eps32:  # it computes these tensors in float32
            eps, judged_at, r = eps32, torch.float32, r32
    name = str(dtype).removeprefix("torch.")
    return FunctionCheck(dtype=name, judged_at=str(judged_at).removeprefix("torch."),
                         drift=drift(twin), roundoff=r, eps=eps, amplification=amplification)


def same_function(
    base: nn.Module,
    make_twin: Callable[[nn.Module], nn.Module],
    tensors: Tensors,
    measure: Callable[[nn.Module, torch.dtype], Tensor],
    *,
    seeds: int = 2,
    amplification: float = 1.0,
) -> list[FunctionCheck]:
    """Judge ``make_twin(base)`` against ``base`` in ``base``'s dtype and, for another floating
    dtype, on a float64 copy with the twin built again there (see the module doc).

    Args:
        base: the model (not modified).
        make_twin: builds the twin of a model (deterministic: called on ``base`` and on its
            float64 copy).
        tensors: the gauge's tensors of a model (views into its parameters).
        measure: ``measure(model, dtype) -> Tensor``, the output (or loss) compared; ``dtype``
            is the model's, for casting floating inputs (:func:`cast_floats`).
        seeds: round-off twins drawn per precision (their largest drift is the yardstick).
        amplification: ``κ``, the condition number of the gauge element (1: orthogonal).

    Returns:
        One :class:`FunctionCheck` per precision judged; every one must pass. A model that
        cannot run in float64 is judged in its dtype alone, with a warning.
    """
    def measured(dtype: torch.dtype) -> Measure:
        return lambda m: measure(m, dtype)

    dtype = _dtype_of(base, tensors)
    checks = [_judge(base, make_twin(base), tensors, measured(dtype), seeds, amplification)]
    if dtype != torch.float64:
        try:
            wide = copy.deepcopy(base).to(torch.float64)
            checks.append(_judge(wide, make_twin(wide), tensors, measured(torch.float64),
                                 seeds, amplification))
        except (RuntimeError, TypeError) as error:  # e.g. a device without float64
            warnings.warn(f"the twin was judged in {dtype} only: a float64 copy of the model "
                          f"did not run ({error})", stacklevel=3)
    return checks
