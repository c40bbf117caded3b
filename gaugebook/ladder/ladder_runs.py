r"""The size ladder of the matrix-sensing zoo (the paper's GPU appendix), and two arms.

The zoo of :mod:`gaugebook.sensing.sensing_runs` (Table 2's nine optimizers plus ScaledGD),
trained with the same factor-training loop and sweep engine, at growing sizes

.. math::  n \in \{40, 64, 96, 128, 192, 256, 384\},\quad r = 3,\ k = n,\
           m = 2\,r(2n - r)\ \text{(twice the degrees of freedom)},

in float64, 40,000 steps (60,000 at n = 384), tolerance 1e-7 checked every 200 steps, 200
held-out measurements, initial scale 1e-3, seeds 42, 123, 456; and two arms at n = 64: the
*rank arm* ``r ∈ {2, 5, 8, 12}`` (m = 2·dof) and the *measurement arm*
``m / dof ∈ {1.25, 1.5, 2, 3, 4}`` (r = 3). The run protocol (divergence, interpolation,
schedules: cosine decay for Muon, signum, Lion and RMSProp) is the zoo's, Table 2's; the paper's
ladder decays Muon, signum and Lion only (:data:`PAPER_LADDER_COSINE`), so our RMSProp runs
are not its runs (see :data:`PAPER_LADDER_PROTOCOL` for every difference).

Learning rates. Each method's grid is its base grid at n = 40 (:data:`LADDER_BASE_GRIDS`, the
registry's ``ladder_lr_grid``, the paper's ladder) times a factor of ``n``
(:func:`lr_scale`), the paper's rule:

* GD ``× 40/n``: the curvature of the loss in ``U`` is of the order of ``‖X_star‖₂``, which
  grows like ``n / r`` (the columns of ``U_star`` have norm about ``√(n/r)``), and a stable
  constant step is below twice its inverse;
* Muon, Shampoo and ScaledGD ``× √(40/n)``;
* Adam, the sign methods (signum, Lion), shared-scale Adam, RMSProp and Adafactor
  ``× √(n/40)`` (every other rule: the paper's ``scale_factor`` in
  ``experiments/nibi/zoo_ladder.py``; their step per entry is about ``lr``, as Adam's is).

Scaled values are rounded to three significant digits (the run ids are then readable and
stable; the paper rounds to 12 decimals, so its lrs differ from ours in the fourth digit). The
arms use the grids of their ``n`` (64), whatever ``r`` or ``m``.

Selection. The paper's ladder (its ``collect.py``, ``best_lr``) chooses per method the lr of
lowest mean rec among those whose mean training loss over the selection seeds 42, 123, 456 is
below 1e-4 (:data:`~gaugebook.engine.selection.ORACLE_LOOSE`), then reports the mean over
10 seeds at that lr (3 at n = 40, 5 on the arms); the book's default is Table 2's gate, every
seed below the tolerance. :func:`size_rows` takes either (``protocol``).

Parts, one per size or arm value, each all seeds, and one per seed of each (``n96_s42``), so a
slow size can be run seed by seed: ``n40`` … ``n384``, ``rank2`` … ``rank12``,
``mdof1.25`` … ``mdof4``. Runs shared between parts (``mdof2`` is ``n64``) are computed once.
Quick scale: n ∈ {8, 12, 16}, r = 2, arms at n = 12 (r ∈ {1, 3}; m / dof ∈ {1.5, 2, 3}),
1,000 steps, tol 1e-6 checked every 100 steps, 50 held-out measurements, one seed, the same
grids scaled by the same rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gaugebook.engine import collection
from gaugebook.engine.scales import ScaleConfig, Scales
from gaugebook.engine.spec import RunSpec
from gaugebook.sensing.measurements import default_num_measurements
from gaugebook.sensing.run_specs import Budget, Problem, factored_run
from gaugebook.sensing.sensing_runs import (
    PAPER_HPARAMS,
    TABLE2_COSINE,
    TABLE2_METHODS,
    MatrixSensingZoo,
    selection_rows,
)

NAME = "ladder"

#: The ladder's optimizers: Table 2's nine, then ScaledGD.
LADDER_METHODS: tuple[str, ...] = (*TABLE2_METHODS, "scaled_gd")
#: Hyperparameters besides ``lr``: the zoo's, and ScaledGD with the paper script's relative
#: damping 1e-4 and its order (``V``'s Gram from the updated ``U``).
LADDER_HPARAMS: dict[str, dict[str, Any]] = {
    **PAPER_HPARAMS,
    "scaled_gd": {"damping": 1e-4, "relative_damping": True, "sequential": True},
}
#: The base grids at ``n = 40``: the registry's ``ladder_lr_grid`` (the paper's ladder), pinned
#: here so that a change in the registry changes neither the ladder nor its run ids.
LADDER_BASE_GRIDS: dict[str, tuple[float, ...]] = {
    "muon": (3e-3, 1e-2, 3e-2, 0.1, 0.3),
    "gd": (1e-3, 3e-3, 1e-2, 3e-2, 0.1),
    "scalar_adam": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
    "shampoo": (1e-2, 3e-2, 0.1, 0.3),
    "lion": (1e-4, 3e-4, 1e-3, 3e-3),
    "signum": (1e-4, 3e-4, 1e-3, 3e-3),
    "rmsprop": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
    "adafactor": (3e-4, 1e-3, 3e-3, 1e-2),
    "adam": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    "scaled_gd": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
}
#: How a method's lr grid scales with ``n`` from ``n0 = 40``: exponent ``p`` of ``(n/n0)^p``.
LR_SCALING: dict[str, float] = {
    "gd": -1.0,
    "muon": -0.5, "shampoo": -0.5, "scaled_gd": -0.5,
    "adam": 0.5, "scalar_adam": 0.5, "rmsprop": 0.5, "adafactor": 0.5,
    "signum": 0.5, "lion": 0.5,
}
#: The size the base grids belong to.
BASE_N = 40
#: A run "recovers exactly" when its mean ``rec`` prints as 0.0000 at the paper's four decimals,
#: i.e. is below this (the paper's Table 11 prints Muon's and signum's exact cells as 0.0000).
EXACT_REC = 5e-5

#: The methods the paper's ladder decays with a cosine (``DECAYED_PROTOCOL`` of its
#: ``experiments/nibi/common.py``): not RMSProp, which Table 2 and our ladder decay.
PAPER_LADDER_COSINE: frozenset[str] = frozenset({"muon", "signum", "lion"})
#: The paper's ladder protocol (``experiments/nibi/zoo_ladder.py``, ``common.py``, ``collect.py``)
#: beside which the chapter sets ours: seeds, selection, schedule, grid, budget, precision.
PAPER_LADDER_PROTOCOL: dict[str, Any] = {
    "seeds": "10 (3 at n = 40, 5 on the arms)",
    "selection_seeds": (42, 123, 456),
    "protocol": "oracle_loose",
    "cosine": PAPER_LADDER_COSINE,
    "lr_rounding": "12 decimals",
    "num_steps": 40_000,  # the script's default (its n = 384 budget is not recorded)
    "dtype": "float64",
    "device": "GPU (H100)",
}
#: The digits the paper prints its ladder means with (its ``SUMMARY.md``: ``0.0000`` is a mean
#: below 5e-5, which this constant stores as 0.0).
PUBLISHED_LADDER_DIGITS = 4
#: The paper's ladder (arXiv 2608.05136, Table 11; its ``experiments/nibi_results/SUMMARY.md``):
#: mean rec over the seeds of :data:`PUBLISHED_LADDER_SEEDS` at the lr its selection chose, per
#: method and size. n = 40 is its 3-seed canary (``zoo_n40_canary.jsonl``; issue 13 quoted GD,
#: shared-scale Adam and Adam there as 0.108, 0.143, 0.550); n = 384 has five methods only.
#: Printed to :data:`PUBLISHED_LADDER_DIGITS` decimals.
PUBLISHED_LADDER_REC: dict[str, dict[int, float]] = {
    "gd": {40: 0.1078, 64: 0.1429, 96: 0.2018, 128: 0.2481, 192: 0.3462, 256: 0.4099,
           384: 0.5146},
    "scalar_adam": {40: 0.1425, 64: 0.1947, 96: 0.2787, 128: 0.3447, 192: 0.4684, 256: 0.5483,
                    384: 0.6656},
    "muon": {40: 0.0, 64: 0.0, 96: 0.0, 128: 0.0, 192: 0.0, 256: 0.0, 384: 0.6044},
    "shampoo": {40: 0.2856, 64: 0.6459, 96: 0.5952, 128: 0.6587, 192: 0.8383, 256: 0.9176,
                384: 0.9698},
    "adam": {40: 0.5498, 64: 0.5742, 96: 0.6090, 128: 0.6426, 192: 0.6964, 256: 0.7407,
             384: 0.8045},
    "rmsprop": {40: 0.0172, 64: 0.5958, 96: 0.6147, 128: 0.6166, 192: 0.6692, 256: 0.7078},
    "signum": {40: 0.0131, 64: 0.0, 96: 0.0, 128: 0.0, 192: 0.0, 256: 0.0},
    "lion": {40: 0.4240, 64: 0.4834, 96: 0.5476, 128: 0.6017, 192: 0.7596, 256: 0.8953},
    "adafactor": {40: 0.5430, 64: 0.6123, 96: 0.6874, 128: 0.7448, 192: 0.8172, 256: 0.8672},
}
#: Seeds behind each published size (the arms: 5).
PUBLISHED_LADDER_SEEDS: dict[int, int] = {40: 3, 64: 10, 96: 10, 128: 10, 192: 10, 256: 10,
                                          384: 10}
#: The seeds behind each published value of the two arms (rank and m/dof, at n = 64).
PUBLISHED_ARM_SEEDS = 5
#: The methods whose arm values Table 11 gives.
PUBLISHED_ARM_METHODS: dict[str, tuple[str, ...]] = {
    "rank": ("gd", "scalar_adam", "adam", "muon", "shampoo"),
    "mdof": ("gd", "scalar_adam", "adam", "muon"),
}
#: The rank arm of Table 11 (n = 64, m = 2 dof, 5 seeds): r → method → mean rec.
PUBLISHED_LADDER_RANK: dict[int, dict[str, float]] = {
    2: {"gd": 0.1906, "scalar_adam": 0.2589, "adam": 0.6407, "muon": 0.0, "shampoo": 0.4731},
    5: {"gd": 0.0736, "scalar_adam": 0.1043, "adam": 0.4694, "muon": 0.0, "shampoo": 0.2600},
    8: {"gd": 0.0224, "scalar_adam": 0.0316, "adam": 0.3000, "muon": 0.0, "shampoo": 0.3618},
    12: {"gd": 0.0083, "scalar_adam": 0.0098, "adam": 0.1407, "muon": 0.0, "shampoo": 0.4866},
}
#: The measurement arm of Table 11 (n = 64, r = 3, 5 seeds): m / dof → method → mean rec
#: (m / dof = 2 is the ladder's n = 64).
PUBLISHED_LADDER_MDOF: dict[float, dict[str, float]] = {
    1.25: {"gd": 0.6069, "scalar_adam": 0.6362, "adam": 0.7896, "muon": 0.0},
    1.5: {"gd": 0.4206, "scalar_adam": 0.4681, "adam": 0.7179, "muon": 0.0},
    3.0: {"gd": 0.0144, "scalar_adam": 0.0233, "adam": 0.3466, "muon": 0.0},
    4.0: {"gd": 0.0033, "scalar_adam": 0.0051, "adam": 0.1952, "muon": 0.0},
}
#: The paper's public *record* (not its table) of seed 42 at n = 96 (``zoo_n96.jsonl``): per
#: method, the lr its selection chose (on seeds 42, 123, 456; unrounded) and seed 42's rec
#: there. A seed-to-seed reference for our ``n96_s42`` part, labelled as a record.
PAPER_RECORDS_N96_SEED42: dict[str, tuple[float, float]] = {
    "gd": (0.000416666667, 0.13321516766017777),
    "scalar_adam": (0.000154919334, 0.2047514701659424),
    "muon": (0.19364916731, 2.1880191404920974e-06),
    "shampoo": (0.006454972244, 0.5393316247849769),
    "adam": (0.000154919334, 0.5326662895040866),
    "rmsprop": (0.015491933385, 0.5863579019054063),
    "signum": (0.004647580015, 3.6100010881506023e-06),
    "lion": (0.000154919334, 0.46467847691763714),
    "adafactor": (0.000464758002, 0.6209072400635206),
}
#: The paper's qualitative findings on the ladder, in the words of
#: :func:`gaugebook.ladder.ladder_paper.claims`.
PUBLISHED_LADDER_CLAIMS: dict[str, str] = {
    "muon_exact": "exact up to n = 256, fails at n = 384",
    "signum_exact": "exact from n = 64 up",
    "clean_split": "fails at every size",
    "adam_worst_of_three": "holds at every size",
}


def lr_scale(method: str, n: int, n0: int = BASE_N) -> float:
    """The factor ``(n / n0)^p`` of ``method``'s lr grid at size ``n`` (:data:`LR_SCALING`)."""
    if method not in LR_SCALING:
        raise ValueError(f"Invalid method: {method!r}; expected one of {sorted(LR_SCALING)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"Invalid n: {n!r}; expected an integer >= 1")
    return (n / n0) ** LR_SCALING[method]


def ladder_lr_grid(method: str, n: int, n0: int = BASE_N) -> tuple[float, ...]:
    """``method``'s base grid (:data:`LADDER_BASE_GRIDS`) times :func:`lr_scale`, each value
    rounded to three significant digits."""
    factor = lr_scale(method, n, n0)
    return tuple(float(f"{lr * factor:.3g}") for lr in LADDER_BASE_GRIDS[method])


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LadderPart:
    """One part: the ladder's zoo on one problem and budget, ``seeds``; ``arm`` is ``"size"``,
    ``"rank"`` or ``"mdof"`` and ``value`` its coordinate (``n``, ``r`` or ``m / dof``)."""

    name: str
    description: str
    arm: str
    value: float
    problem: Problem
    budget: Budget
    seeds: tuple[int, ...]
    methods: tuple[str, ...] = LADDER_METHODS
    dtype: str = "float64"

    def lr_grid(self, method: str) -> tuple[float, ...]:
        return ladder_lr_grid(method, self.problem.n)

    def schedule(self, method: str) -> str:
        return "cosine" if method in TABLE2_COSINE else "constant"

    def specs(self) -> list[RunSpec]:
        """The runs of the part, ordered method, lr, seed (the zoo's config shape)."""
        problem = self.problem.to_config()
        return [RunSpec(NAME, self.name, *factored_run(
                    problem, method, LADDER_HPARAMS[method], lr, self.schedule(method),
                    self.budget, seed, self.dtype))
                for method in self.methods for lr in self.lr_grid(method) for seed in self.seeds]


@dataclass(frozen=True)
class LadderConfig(ScaleConfig):
    """The ladder at one scale: ``parts`` (all seeds each) and ``seed_parts`` (one seed each),
    both parts of the experiment (:class:`~gaugebook.engine.scales.ScaleConfig`)."""

    scale: str
    parts: tuple[LadderPart, ...]
    seed_parts: tuple[LadderPart, ...]
    persist_records: bool

    @property
    def part_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in (*self.parts, *self.seed_parts))

    def part(self, name: str) -> LadderPart:
        for part in (*self.parts, *self.seed_parts):
            if part.name == name:
                return part
        raise ValueError(f"Invalid part: {name!r}; expected one of {self.part_names}")

    def arm(self, arm: str) -> tuple[LadderPart, ...]:
        """The all-seed parts of one arm, in order of their value."""
        return tuple(p for p in self.parts if p.arm == arm)


def _build(
    scale: str, sizes: Sequence[int], r: int, arm_n: int, ranks: Sequence[int],
    mdofs: Sequence[float], budget: Any, seeds: tuple[int, ...], num_val: int, persist: bool,
) -> LadderConfig:
    def problem(n: int, rank: int, oversampling: float) -> Problem:
        return Problem(n, rank, n, default_num_measurements(n, rank, oversampling), num_val,
                       1e-3)

    parts = []
    for n in sizes:
        parts.append(LadderPart(f"n{n}", f"n = {n}, r = {r}, m = 2 dof", "size", n,
                                problem(n, r, 2.0), budget(n), seeds))
    for rank in ranks:
        parts.append(LadderPart(f"rank{rank}", f"n = {arm_n}, r = {rank}, m = 2 dof", "rank",
                                rank, problem(arm_n, rank, 2.0), budget(arm_n), seeds))
    for ratio in mdofs:
        parts.append(LadderPart(f"mdof{ratio:g}",
                                f"n = {arm_n}, r = {r}, m = {ratio:g} dof", "mdof", ratio,
                                problem(arm_n, r, ratio), budget(arm_n), seeds))
    seed_parts = tuple(
        LadderPart(f"{p.name}_s{s}", f"{p.description}, seed {s}", p.arm, p.value, p.problem,
                   p.budget, (s,))
        for p in parts for s in p.seeds
    )
    return LadderConfig(scale, tuple(parts), seed_parts, persist)


def _paper_config() -> LadderConfig:
    return _build(
        "paper", (40, 64, 96, 128, 192, 256, 384), 3, 64, (2, 5, 8, 12),
        (1.25, 1.5, 2.0, 3.0, 4.0),
        lambda n: Budget(60_000 if n >= 384 else 40_000), (42, 123, 456), 200, persist=True,
    )


def _quick_config() -> LadderConfig:
    return _build(
        "quick", (8, 12, 16), 2, 12, (1, 3), (1.5, 2.0, 3.0),
        lambda n: Budget(1_000, tol=1e-6, check_every=100), (42,), 50, persist=False,
    )


get_config = Scales(paper=_paper_config, quick=_quick_config)


# --------------------------------------------------------------------------------------------
# the experiment object: the zoo's batching and training, the ladder's parts
# --------------------------------------------------------------------------------------------


class LadderExperiment(MatrixSensingZoo):
    """The ladder as a sweep experiment: the zoo's batch key, training, cost and split."""

    name = NAME
    description = ("the matrix-sensing zoo at n = 40 ... 384, and rank and m/dof arms at "
                   "n = 64 (the paper's GPU appendix)")

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).part_names

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)


EXPERIMENT = LadderExperiment()


collect = collection.collector(EXPERIMENT, get_config, allow_missing=True,
                          default_parts=lambda config: [p.name for p in config.parts])


# --------------------------------------------------------------------------------------------
# summaries for the chapter (pure functions of records)
# --------------------------------------------------------------------------------------------


def size_rows(config: LadderConfig, records: Mapping[str, Sequence[Mapping[str, Any]]],
              arm: str = "size", protocol: str = "oracle") -> list[dict[str, Any]]:
    """One row per part of ``arm``: its value, problem, seeds and runs recorded, and the
    selection of ``protocol`` (:func:`~gaugebook.sensing.sensing_runs.selection_rows`;
    ``"oracle"``: Table 2's gate, ``"oracle_loose"``: the paper ladder's) per method under
    ``rows``, for the methods whose whole lr grid is recorded at every seed used; the
    others are named under ``incomplete`` (a selection over part of a grid is not the paper's).

    The seeds used are those whose every run is recorded (a seed part cut by a time limit
    leaves its seed out, named under ``partial_seeds``), or every recorded seed when no seed
    is whole."""
    out = []
    for part in config.arm(arm):
        recorded = [r for r in records.get(part.name, ())
                    if r.get("status") in ("ok", "diverged")]
        planned = len(part.specs())
        per_seed = planned // len(part.seeds)
        counts = Counter(r["config"]["seed"] for r in recorded)
        whole_seeds = sorted(s for s, c in counts.items() if c == per_seed)
        seeds = whole_seeds or sorted(counts)
        recs = [r for r in recorded if r["config"]["seed"] in seeds]
        per_method = Counter(r["config"]["method"] for r in recs)
        whole = [m for m in part.methods if m in per_method
                 and per_method[m] == len(part.lr_grid(m)) * len(seeds)]
        chosen = [r for m in whole for r in recs if r["config"]["method"] == m]
        out.append({
            "part": part.name, "value": part.value, "n": part.problem.n, "r": part.problem.r,
            "m": part.problem.m, "steps": part.budget.num_steps, "dtype": part.dtype,
            "seeds": seeds, "runs": len(recorded), "planned": planned,
            "complete": len(recorded) == planned,
            "partial_seeds": sorted(s for s in counts if s not in seeds),
            "incomplete": [m for m in part.methods if m not in whole],
            "rows": ({row["method"]: row for row in selection_rows(chosen, protocol)}
                     if chosen else {}),
        })
    return out
