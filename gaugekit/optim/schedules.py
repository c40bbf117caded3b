"""Learning-rate schedules of the paper's protocol (applied by the caller, between steps)."""

from __future__ import annotations

import math
from typing import Literal

from torch import Tensor

from gaugekit.optim._validation import invalid

Schedule = Literal["constant", "cosine", "linear"]
SCHEDULES: tuple[str, ...] = ("constant", "cosine", "linear")


def lr_factor(schedule: str, step: int, num_steps: int) -> float:
    r"""The multiplier of the base ``lr`` at step ``step`` (1-based) of ``num_steps``.

    ``constant`` → 1. ``cosine`` → ``½ (1 + cos(π step / num_steps))``: decays to exactly 0 at
    the last step; the paper applies the factor of step ``t`` to the update of step ``t``, so
    even the first step is slightly below the base ``lr``. ``linear`` → ``1 − step / num_steps``:
    the straight line from 1 to exactly 0 at the last step, applied the same way.
    """
    if schedule not in SCHEDULES:
        raise invalid("schedule", schedule, f"one of {SCHEDULES}")
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        raise invalid("num_steps", num_steps, "an integer >= 1")
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - step / num_steps
    return 0.5 * (1.0 + math.cos(math.pi * step / num_steps))


def scheduled_lr(
    base_lr: float | Tensor, schedule: str, step: int, num_steps: int
) -> float | Tensor:
    """``base_lr · lr_factor(schedule, step, num_steps)``; a per-run tensor stays a tensor.

    Assign it to ``group["lr"]`` before the step (torch's schedulers cannot hold a per-run lr
    tensor with more than one element)::

        for t in range(1, num_steps + 1):
            group["lr"] = scheduled_lr(base_lr, spec.lr_schedule, t, num_steps)
            ...; optimizer.step()
    """
    return base_lr * lr_factor(schedule, step, num_steps)
