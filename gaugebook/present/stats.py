"""Small statistics of records for the pages: mean ± sd over seeds, a curve read between
its checkpoints."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["curve_at", "mean_sd"]


def mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the finite values (``None`` when there are none;
    the sd is ``None`` for one value)."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def curve_at(curves: Mapping[str, Sequence[Any]], key: str, step: float) -> float | None:
    """``curves[key]`` at ``step``, linear between checkpoints (``None`` past the last)."""
    xs, ys = curves["step"], curves[key]
    if step > xs[-1] or step < xs[0]:
        return None
    for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False):
        if x0 <= step <= x1:
            if y0 is None or y1 is None:
                return None
            w = 0.0 if x1 == x0 else (step - x0) / (x1 - x0)
            return (1 - w) * y0 + w * y1
    return ys[-1]
