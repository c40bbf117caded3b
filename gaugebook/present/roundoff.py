r"""Comparisons of numbers computed live, read above an explicit round-off floor.

Two values computed while a page builds (a residual, a drift, a loss at a random point) carry
the round-off of the machine that computed them: another CPU, another thread count or another
instruction set sums in another order and moves their last bits. Once both sit at the floor,
``a > b`` is a coin toss, and a check written as a strict comparison passes on one machine and
stops the book on the next. Every comparison of live values in the book's checks goes through
this module, with the floor ``f`` stated where it is used:

* :func:`at_floor`: ``|x| ≤ f``, the value is round-off;
* :func:`exceeds`: ``a − b > f``, a difference resolved above the floor;
* :func:`falls_to_floor`: a sequence that falls until it reaches ``f`` and then stays below it.

The floor is the size below which a value says nothing on this computation: for a float64
residual of order one it is a few hundred units of round-off (``u = 2^{-53} ≈ 1.1e-16``), for
float32 a few hundred of ``2^{-24} ≈ 6e-8``. Choose it from the computation, not from what one
machine printed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["at_floor", "exceeds", "falls_to_floor"]


def _check_floor(floor: float) -> float:
    floor = float(floor)
    if not (math.isfinite(floor) and floor >= 0):
        raise ValueError(f"Invalid floor: {floor!r}; expected a finite number >= 0")
    return floor


def at_floor(x: float, floor: float) -> bool:
    """Whether ``x`` is round-off: ``|x| ≤ floor`` (``False`` for a non-finite ``x``)."""
    floor = _check_floor(floor)
    return math.isfinite(x) and abs(x) <= floor


def exceeds(a: float, b: float, floor: float) -> bool:
    r"""Whether ``a`` exceeds ``b`` by more than the round-off floor: ``a − b > floor``.

    Two values at the floor never exceed each other, whichever bits they happen to carry: the
    strict ``a > b`` that this replaces decides an order that round-off chose. Against a fixed
    threshold (``exceeds(residual, 0.1, floor)``) it asks for the threshold plus the floor."""
    floor = _check_floor(floor)
    return math.isfinite(a) and math.isfinite(b) and a - b > floor


def falls_to_floor(values: Sequence[float], floor: float) -> bool:
    r"""Whether ``values`` fall until they reach the floor and then stay there.

    Each step from ``a`` to ``b`` either falls by more than the floor (``a − b > floor``) or
    lands at the floor (``|b| ≤ floor``): a sequence that reaches round-off may wander inside
    it, and one that is above it must fall by a resolved amount. A value that climbs back above
    the floor, or a fall smaller than the floor above it, fails."""
    floor = _check_floor(floor)
    xs = [float(x) for x in values]
    if not all(math.isfinite(x) for x in xs):
        return False
    return all(abs(b) <= floor or a - b > floor for a, b in zip(xs, xs[1:], strict=False))
