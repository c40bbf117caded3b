"""The shared specs of the sensing-type experiments: the sizes of a problem and a step budget.

Plain frozen dataclasses whose ``to_config()`` is the JSON of a run config (part of its run
id): :class:`Problem` is ``config["problem"]`` of the sensing runs (the spectral-tail runs add
``kind`` and ``tau``), :class:`Budget` is ``config["budget"]`` of a factored run
(``gaugebook.engine.factor_trainer``), and :func:`factored_run` is the whole config of one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gaugebook.sensing.measurements import INIT_SEED_OFFSET

__all__ = ["Budget", "Problem", "factored_run"]


@dataclass(frozen=True)
class Problem:
    """Sizes of the sensing problem: ``n``, planted rank ``r``, width ``k``, ``m`` measurements,
    ``num_val`` held-out measurements and the initial scale of the factors."""

    n: int
    r: int
    k: int
    m: int
    num_val: int
    init_scale: float

    def to_config(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """Step budget, interpolation tolerance, check period and divergence threshold."""

    num_steps: int
    tol: float = 1e-7
    check_every: int = 200
    diverge_above: float = 1e8

    def to_config(self) -> dict[str, Any]:
        return asdict(self)


def factored_run(problem: Mapping[str, Any], method: str, hparams: Mapping[str, Any], lr: float,
                 schedule: str, budget: Budget, seed: int, dtype: str = "float32",
                 **tags: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """``(config, seeds)`` of one factored run on the instance of ``seed``: ``problem`` is a
    :class:`Problem`'s ``to_config()`` (plus the tail's ``kind`` and ``tau``), ``hparams``
    the rule's besides ``lr``, ``tags`` extra config keys; the factors are drawn from
    ``seed + INIT_SEED_OFFSET``."""
    config = {"kind": "factored", "problem": problem, "method": method,
              "hparams": {**hparams, "lr": float(lr)}, "schedule": schedule,
              "budget": budget.to_config(), "seed": seed, "dtype": dtype, **tags}
    return config, {"instance": seed, "init": seed + INIT_SEED_OFFSET}
