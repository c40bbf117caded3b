r"""The matrix-sensing optimizer zoo — Table 2, Figure 1 and their controls.

The experiment trains the factorization ``W = U Vᵀ`` of :mod:`gaugebook.sensing.measurements`
with every optimizer of the paper's zoo, over a learning-rate grid and several seeds, and
records where each run ends: recovery error ``rec``, held-out residual ``val_rec``, effective
rank, nuclear norm, balancedness, steps.

Protocol of a run (the paper's, ``experiments/optimizer_zoo_bias.py``). At step ``t = 1, 2, …``
the loss is evaluated first; a non-finite loss or one above ``diverge_above`` (1e8) ends the
run as *diverged* at step ``t``. Otherwise the gradients are taken, the learning rate is
``lr · lr_factor(schedule, t, num_steps)`` (cosine decay to zero over the budget for Muon,
signum, Lion and RMSProp in Table 2; constant for the others) and the optimizer steps. Every
``check_every`` (200) steps, a run whose loss *at the start of that step* was below ``tol``
(1e-7) has *interpolated* and stops; this pre-update loss is the record's ``train_loss`` (the
paper's ``train``). The final metrics are taken at the factors after the last update.

Batching. All runs of a part that share the problem and the budget are one stack of the
stacked trainer (:mod:`gaugebook.engine.factor_trainer`, problem family
:data:`~gaugebook.engine.factor_families.SENSING`). A batched run equals the same run done alone: to
round-off in float64, bit for bit in float32 on the CPU except for Shampoo (its ``pow`` rounds
the last bit differently in stacks of different sizes); tested in
``tests/gaugebook/sensing/test_sensing_runs.py``.

Parts (each a grid; the quick and the paper scale differ only in their numbers):

``zoo``          Table 2: nine optimizers, the paper's grids and schedules, 3 seeds.
``cosine_all``   the same with cosine decay for every optimizer.
``init_1e-2``    the zoo from initial scale 1e-2 instead of 1e-3.
``second_size``  a second size (paper: n = 60, r = 5, k = 60, m = 1150).
``wide``         wider lr grids (a decade beyond the paper's on both sides): lr sensitivity,
                 and the honest selection protocols.
``convex``       the convex reference: min ‖X‖_* subject to A vec(X) = y (cvxpy), per seed.
``convex_second_size``  the convex reference at the second size.

Paper scale: n = 40, r = 3, k = 40, m = 462, 200 validation measurements, 20,000 steps,
tol 1e-7, seeds 42, 123, 456. Quick scale: n = 20, r = 2, k = 20, m = 152, 100 validation
measurements, 3,000 steps, tol 1e-6 (second size n = 30, r = 3, m = 342), same seeds and grids.

The module runs past 500 lines because the ladder, the spectral tails, the dial and the eigenbasis
experiments build on it (the zoo's pinned hyperparameters and grids, its experiment object, its
selection rows), beside its own parts and the paper's published values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gaugebook.engine import collection, sweep
from gaugebook.engine.factor_families import FactorFamily
from gaugebook.engine.factor_trainer import member_key, train_factored_batch
from gaugebook.engine.scales import ScaleConfig, Scales
from gaugebook.engine.selection import PROTOCOLS, Selection, select
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.sensing.measurements import (
    SENSING,
    default_num_measurements,
    make_instance,
    min_nuclear_norm_solution,
    recovery_metrics,
)
from gaugebook.sensing.run_specs import Budget, Problem, factored_run
from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS
from gaugekit.optim.registry import get_spec

NAME = "matrix_sensing"

#: Table 2's nine optimizers, in the paper's order (best published recovery first).
TABLE2_METHODS: tuple[str, ...] = (
    "muon", "gd", "scalar_adam", "shampoo", "lion", "signum", "rmsprop", "adafactor", "adam",
)
#: Rules the paper's Table 2 run decays with a cosine schedule (constant-norm updates and
#: RMSProp, whose ε-bounded denominator cannot reach 1e-7 at a constant step).
TABLE2_COSINE: frozenset[str] = frozenset({"muon", "signum", "lion", "rmsprop"})
#: The published Table 2 (arXiv 2608.05136): method → (mean rec over 3 seeds, selected lr).
PUBLISHED_TABLE2: dict[str, tuple[float, float]] = {
    "muon": (6.8e-6, 0.1),
    "gd": (0.1312, 0.01),
    "scalar_adam": (0.2010, 1e-3),
    "shampoo": (0.2856, 0.03),
    "lion": (0.4248, 3e-4),
    "signum": (0.4454, 3e-3),
    "rmsprop": (0.5266, 1e-4),
    "adafactor": (0.5430, 3e-4),
    "adam": (0.5734, 0.01),
}
#: The paper's hyperparameters besides ``lr`` (pinned here, so that a change of a registry
#: default can neither change Table 2 nor the run ids of its records).
PAPER_HPARAMS: dict[str, dict[str, Any]] = {
    "gd": {},
    "adam": {"betas": (0.9, 0.999), "eps": 1e-8},
    "scalar_adam": {"betas": (0.9, 0.999), "eps": 1e-8},
    "rmsprop": {"alpha": 0.99, "eps": 1e-8},
    "lion": {"betas": (0.9, 0.99)},
    "signum": {"momentum": 0.9},
    "adafactor": {"beta2": 0.999, "eps": 1e-8},
    "muon": {"momentum": 0.9, "nesterov": False, "ns_steps": 5, "eps": 1e-7},
    "shampoo": {"damping": 1.0, "update_freq": 20, "eig_floor": 1e-6},
}
#: The same for the rules outside Table 2 that a :class:`Part` may sweep (EigenAdam's sweep of
#: :mod:`gaugebook.ecosystem.eigenbasis_runs`): the registry's defaults besides ``lr`` when those
#: runs were first recorded, pinned so that neither a registry nor a class default can change
#: them or their run ids. Any other rule runs at its class defaults.
EXTRA_HPARAMS: dict[str, dict[str, Any]] = {
    "momentum": {"momentum": 0.9},
    "scaled_gd": {"damping": 1e-4},
    "gram": {"power": 0.5, "damping": 1e-6},
    "eigen_adam": {"betas": (0.9, 0.999), "eps": 1e-8, "gram_beta": 0.95, "update_freq": 10},
    "flow_adam": dict(FLOW_ADAM_PRESETS["invariant"]),
    "flow_adam_prototype": dict(FLOW_ADAM_PRESETS["prototype"]),
}
#: The paper's check values: nuclear norm of X_star (n = 40, r = 3) for seeds 42, 123, 456.
PUBLISHED_NUCLEAR_NORMS: dict[int, float] = {42: 33.941225, 123: 41.082738, 456: 38.508539}
#: The paper's learning-rate grids (Table 2), pinned like the hyperparameters above.
PAPER_LR_GRIDS: dict[str, tuple[float, ...]] = {
    "muon": (3e-3, 1e-2, 3e-2, 0.1),
    "gd": (0.01, 0.03, 0.1, 0.3),
    "scalar_adam": (1e-3, 3e-3, 1e-2, 3e-2),
    "shampoo": (0.03, 0.1, 0.3, 1.0),
    "lion": (1e-4, 3e-4, 1e-3, 3e-3),
    "signum": (1e-4, 3e-4, 1e-3, 3e-3),
    "rmsprop": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
    "adafactor": (3e-4, 1e-3, 3e-3, 1e-2),
    "adam": (1e-3, 1e-2, 3e-2),
}


@dataclass(frozen=True)
class DecayArm:
    """One arm of the weight-decay part: a registry ``method``, its extra hyperparameters, and
    how the grid's ``wd`` enters the run. ``"loss"``: the paper's penalty
    ``wd·(‖U‖_F² + ‖V‖_F²)`` added to the loss, whose gradient ``2·wd·θ`` is exactly the rule's
    coupled ``weight_decay = 2·wd``; ``"decoupled"``: ``θ ← θ − lr·wd·θ`` before the update."""

    method: str
    label: str
    decay: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def hparams(self, wd: float) -> dict[str, Any]:
        """The optimizer hyperparameters (besides ``lr``) of this arm at decay ``wd``."""
        factor = 2.0 if self.decay == "loss" else 1.0
        return {**PAPER_HPARAMS[self.method], **self.extra, "weight_decay": factor * wd}


#: The weight-decay part: the paper's "Adam + tuned weight decay" ceiling (the L2 penalty in
#: the loss, ``experiments/flowadam_upgrade.py``), AdamW's decoupled decay, and the equivariant
#: rules with decay (GD with the same L2, shared-scale Adam and Muon with decoupled decay).
DECAY_ARMS: dict[str, DecayArm] = {
    "adam_l2": DecayArm("adam", "Adam + L2 in the loss (the paper's ceiling)", "loss"),
    "adamw": DecayArm("adam", "AdamW (decoupled decay)", "decoupled",
                      {"decoupled_weight_decay": True}),
    "gd_l2": DecayArm("gd", "GD + L2 in the loss", "loss"),
    "scalar_adam_wd": DecayArm("scalar_adam", "Shared-scale Adam, decoupled decay",
                               "decoupled"),
    "muon_wd": DecayArm("muon", "Muon, decoupled decay", "decoupled"),
}
#: The ceiling's grids (``flowadam_upgrade.py``): wd × Adam's lr; the equivariant arms take
#: Table 2's lr grid of their rule.
DECAY_WDS: tuple[float, ...] = (1e-4, 1e-3, 1e-2)
DECAY_ADAM_LRS: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2)
#: The paper's ceiling (``flowadam_upgrade.py``, "Adam + TUNED wd (ceiling)"): 30,000 steps,
#: the mean final training loss over seeds below 1e-7, selected lr and wd, mean and per-seed
#: recovery error.
PUBLISHED_DECAY_CEILING: dict[str, Any] = {
    "arm": "adam_l2", "lr": 1e-2, "wd": 1e-4, "rec": 0.4838,
    "seeds": {42: 0.512, 123: 0.451, 456: 0.489}, "num_steps": 30_000,
}
#: The published convex reference: rec of the min-nuclear-norm solution for seeds 42, 123, 456.
PUBLISHED_CONVEX_REC: dict[int, float] = {42: 0.0, 123: 0.0, 456: 0.1005}


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One sweep of the experiment: methods × lr grid × seeds on one problem and budget.

    ``kind`` is ``"factored"`` (train ``U Vᵀ``) or ``"convex"`` (the nuclear-norm reference;
    ``methods``, ``lr_grids`` and ``schedules`` are then unused).
    """

    name: str
    description: str
    problem: Problem
    budget: Budget
    seeds: tuple[int, ...]
    methods: tuple[str, ...] = ()
    lr_grids: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    schedules: Mapping[str, str] = field(default_factory=dict)
    dtype: str = "float32"
    kind: str = "factored"
    #: weight-decay arms (arm name → :class:`DecayArm`; ``lr_grids`` and ``schedules`` are then
    #: keyed by arm) and the decays each runs
    decay_arms: Mapping[str, DecayArm] = field(default_factory=dict)
    weight_decays: tuple[float, ...] = ()

    def specs(self) -> list[RunSpec]:
        """The runs of the part, ordered method (or decay arm), [weight decay,] lr, seed."""
        problem = self.problem.to_config()
        if self.kind == "convex":
            return [
                RunSpec(
                    NAME,
                    self.name,
                    {"kind": "convex", "problem": problem, "method": "nuclear_norm_min",
                     "seed": seed, "dtype": "float64"},
                    {"instance": seed},
                )
                for seed in self.seeds
            ]
        # (grid key: method or decay arm, method, hparams besides lr, extra config keys)
        cells: list[tuple[str, str, dict[str, Any], dict[str, Any]]]
        if self.decay_arms:
            cells = [(arm, spec.method, spec.hparams(wd), {"arm": arm, "wd": wd})
                     for arm, spec in self.decay_arms.items() for wd in self.weight_decays]
        else:
            cells = [(m, m, PAPER_HPARAMS.get(m, EXTRA_HPARAMS.get(m, {})), {})
                     for m in self.methods]
        return [RunSpec(NAME, self.name, *factored_run(
                    problem, method, fixed, lr, self.schedules.get(key, "constant"),
                    self.budget, seed, self.dtype, **tags))
                for key, method, fixed, tags in cells for lr in self.lr_grids[key]
                for seed in self.seeds]


@dataclass(frozen=True)
class SensingConfig(ScaleConfig):
    """The parts at one scale (:class:`~gaugebook.engine.scales.ScaleConfig`)."""

    scale: str
    parts: tuple[Part, ...]
    persist_records: bool


def wide_grid(grid: Sequence[float], factor: float = 10.0) -> tuple[float, ...]:
    """``grid`` plus every ``{1, 3}·10^e`` in ``[min(grid)/factor, max(grid)·factor]``, sorted.

    Values are built from decimal literals (``3e-4`` is the float ``3e-4``), so the points of
    the paper's grid keep their run ids.
    """
    lo, hi = min(grid) / factor, max(grid) * factor
    values = set(float(v) for v in grid)
    for exponent in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for mantissa in (1, 3):
            v = float(f"{mantissa}e{exponent}")
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                values.add(v)
    return tuple(sorted(values))


def _build_config(
    scale: str,
    base: Problem,
    second: Problem,
    budget: Budget,
    persist: bool,
    decay_budget: Budget,
) -> SensingConfig:
    methods, grids, seeds = TABLE2_METHODS, PAPER_LR_GRIDS, (42, 123, 456)
    table2 = {m: ("cosine" if m in TABLE2_COSINE else "constant") for m in methods}
    all_cosine = dict.fromkeys(methods, "cosine")
    wide = {m: wide_grid(grids[m]) for m in methods}
    init_problem = Problem(base.n, base.r, base.k, base.m, base.num_val, 1e-2)
    decay_grids = {a: DECAY_ADAM_LRS if d.method == "adam" else grids[d.method]
                   for a, d in DECAY_ARMS.items()}
    decay_schedules = {a: table2[d.method] for a, d in DECAY_ARMS.items()}
    parts = (
        Part("zoo", "Table 2: the paper's grids and schedules", base, budget, seeds,
             methods, grids, table2),
        Part("cosine_all", "cosine decay to zero for every optimizer", base, budget, seeds,
             methods, grids, all_cosine),
        Part("init_1e-2", "initial scale 1e-2 instead of 1e-3", init_problem, budget, seeds,
             methods, grids, table2),
        Part("second_size", f"a second size: n = {second.n}, r = {second.r}, m = {second.m}",
             second, budget, seeds, methods, grids, table2),
        Part("wide", "lr grids widened 10x on both sides", base, budget, seeds,
             methods, wide, table2),
        Part("decay", "weight decay: the paper's Adam ceiling, AdamW, the equivariant rules",
             base, decay_budget, seeds, lr_grids=decay_grids, schedules=decay_schedules,
             decay_arms=DECAY_ARMS, weight_decays=DECAY_WDS),
        Part("convex", "min nuclear norm subject to the measurements (cvxpy)", base, budget,
             seeds, kind="convex"),
        Part("convex_second_size", "the convex reference at the second size", second, budget,
             seeds, kind="convex"),
    )
    return SensingConfig(scale, parts, persist)


def _paper_config() -> SensingConfig:
    base = Problem(40, 3, 40, default_num_measurements(40, 3), 200, 1e-3)
    second = Problem(60, 5, 60, default_num_measurements(60, 5), 200, 1e-3)
    return _build_config(
        "paper", base, second, Budget(20_000), persist=True,
        decay_budget=Budget(PUBLISHED_DECAY_CEILING["num_steps"], check_every=100),
    )


def _quick_config() -> SensingConfig:
    base = Problem(20, 2, 20, default_num_measurements(20, 2), 100, 1e-3)
    second = Problem(30, 3, 30, default_num_measurements(30, 3), 100, 1e-3)
    return _build_config(
        "quick", base, second, Budget(3_000, tol=1e-6, check_every=100), persist=False,
        decay_budget=Budget(3_000, tol=1e-6, check_every=100),
    )


get_config = Scales(paper=_paper_config, quick=_quick_config)


def _run_cost(spec: RunSpec) -> float:
    """Guessed flops of one run: sensing products (and Muon's Newton–Schulz) per step times the
    expected steps (a quarter of the budget at a constant rate, all of it under a decay)."""
    c = spec.config
    p = c["problem"]
    if c["kind"] == "convex":
        return float(p["n"] ** 6)
    per_step = 4.0 * p["n"] ** 2 * p["m"]
    if c["method"] == "muon":
        per_step += 60.0 * p["n"] * p["k"] * min(p["n"], p["k"])
    steps = c["budget"]["num_steps"] * (0.25 if c["schedule"] == "constant" else 1.0)
    return per_step * steps


# --------------------------------------------------------------------------------------------
# the convex reference
# --------------------------------------------------------------------------------------------


def _run_convex(spec: RunSpec) -> RunResult:
    p = spec.config["problem"]
    instance = make_instance(spec.config["seed"], p["n"], p["r"], p["m"], num_val=p["num_val"],
                             dtype=torch.float64)
    X = min_nuclear_norm_solution(instance)
    eye = torch.eye(p["n"], dtype=torch.float64)
    # W = X as U Vᵀ with U = X, V = I: every metric but balancedness is a function of W
    m = recovery_metrics(X, eye, instance.X_star, instance.A_val, instance.y_val)
    residual = instance.A @ X.reshape(-1) - instance.y
    metrics = {k: float(m[k]) for k in ("rec", "val_rec", "effective_rank", "nuclear_norm")}
    metrics["nuclear_norm_star"] = float(torch.linalg.svdvals(instance.X_star).sum())
    metrics["feasibility"] = float(residual.norm() / instance.y.norm())
    return RunResult("ok", metrics)


# --------------------------------------------------------------------------------------------
# the experiment object
# --------------------------------------------------------------------------------------------


class MatrixSensingZoo:
    """The matrix-sensing zoo as a sweep experiment (see :mod:`gaugebook.engine.sweep`)."""

    name = NAME
    description = "nine optimizers on the paper's matrix-sensing testbed (Table 2, Figure 1)"
    #: the problem families of its factored runs, by the problem configs' ``"kind"`` (the
    #: spectral tails' subclass adds its own)
    families: Mapping[str, FactorFamily] = {"sensing": SENSING}

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).part_names

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)

    def batch_key(self, spec: RunSpec) -> Hashable:
        c = spec.config
        if c["kind"] == "convex":
            return ("convex", spec.run_id)
        return (c["kind"], repr(c["problem"]), repr(c["budget"]), c["dtype"])

    def run_batch(
        self, specs: Sequence[RunSpec], *, device: torch.device, progress: bool
    ) -> list[RunResult]:
        if specs[0].config["kind"] == "convex":
            return [_run_convex(s) for s in specs]
        family = self.families[specs[0].config["problem"].get("kind", "sensing")]
        return train_factored_batch(specs, family, device=device, progress=progress)

    def batch_cost(self, specs: Sequence[RunSpec]) -> float:
        """A rough flop count of a batch, used only to balance parallel workers."""
        return sum(_run_cost(s) for s in specs)

    def split_batch(self, specs: Sequence[RunSpec], parts: int) -> list[list[RunSpec]]:
        """:func:`split_factored` by :meth:`batch_cost` (a convex batch stays whole)."""
        if specs[0].config["kind"] == "convex":
            return [list(specs)]
        return split_factored(specs, parts, self.batch_cost)


def split_factored(specs: Sequence[RunSpec], parts: int,
                   cost: Callable[[Sequence[RunSpec]], float]) -> list[list[RunSpec]]:
    """Cut a batch of factored runs into ``parts`` pieces balanced by ``cost``: whole instances
    (the runs of one seed) where they fit, the rest run by run, or, when no instance fits, as
    whole optimizers (:func:`gaugebook.engine.sweep.instance_bins`). A piece's products then have
    more rows and it holds fewer operators, which is what makes the zoo's two workers fast
    (``bench/run.py --only zoo``).

    Results do not depend on the cut: runs never interact, and the padding of
    :class:`~gaugebook.sensing.measurements.SensingBatch` keeps the bits equal (all but the
    last bits of Shampoo runs)."""
    if parts <= 1:
        return [list(specs)]
    instances: dict[int, dict[tuple[str, str, str], list[RunSpec]]] = {}
    for spec in specs:
        groups = instances.setdefault(spec.seeds.get("instance", spec.config["seed"]), {})
        groups.setdefault(member_key(spec.config), []).append(spec)
    return sweep.instance_bins([list(g.values()) for g in instances.values()], parts, cost)


EXPERIMENT = MatrixSensingZoo()


# --------------------------------------------------------------------------------------------
# for the chapter and the CLI
# --------------------------------------------------------------------------------------------


collect = collection.collector(EXPERIMENT, get_config)


def published_table2(part: Part) -> dict[str, tuple[float, float]] | None:
    """The published Table 2 when ``part`` is the paper's setting (problem, budget, seeds,
    grids, schedules), else ``None``: published numbers describe only that setting."""
    paper = _paper_config().part("zoo")
    same = (part.problem, part.budget, part.seeds, dict(part.lr_grids), dict(part.schedules)) == (
        paper.problem, paper.budget, paper.seeds, dict(paper.lr_grids), dict(paper.schedules))
    return dict(PUBLISHED_TABLE2) if same else None


def published_convex(part: Part) -> dict[int, float] | None:
    """The published convex-reference rec per seed when ``part`` is the paper's setting."""
    return dict(PUBLISHED_CONVEX_REC) if published_table2(part) is not None else None


def split_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Is every gauge-equivariant method's rec below every coordinate-wise one's?

    Returns the worst equivariant and the best coordinate-wise method with their rec, the gap
    (best coordinate-wise minus worst equivariant; positive means a clean split), ``clean``,
    and how many selections sit at a grid edge or did not interpolate.
    """
    def finite(r: Mapping[str, Any]) -> bool:
        return r["rec"] is not None and math.isfinite(r["rec"])

    eq = [r for r in rows if r["equivariant"] and finite(r)]
    cw = [r for r in rows if not r["equivariant"] and finite(r)]
    worst = max(eq, key=lambda r: r["rec"]) if eq else None
    best = min(cw, key=lambda r: r["rec"]) if cw else None
    gap = best["rec"] - worst["rec"] if worst and best else math.nan
    return {
        "worst_equivariant": worst["method"] if worst else None,
        "worst_equivariant_rec": worst["rec"] if worst else math.nan,
        "best_coordinatewise": best["method"] if best else None,
        "best_coordinatewise_rec": best["rec"] if best else math.nan,
        "gap": gap,
        "clean": bool(gap > 0),
        "methods": len(eq) + len(cw),
        "at_grid_edge": sum(bool(r["at_grid_edge"]) for r in rows),
        "not_interpolated": sum(not r["interpolated"] for r in rows),
    }


def selection_rows(
    records: Sequence[Mapping[str, Any]], protocol: str = "oracle"
) -> list[dict[str, Any]]:
    """One row per method (Table 2 order first) under a selection protocol of
    :mod:`gaugebook.engine.selection`: chosen lr, gate, grid edge, mean metrics over seeds."""
    selections: dict[Hashable, Selection] = select(records, PROTOCOLS[protocol])
    order = [m for m in TABLE2_METHODS if m in selections] + [
        m for m in selections if m not in TABLE2_METHODS
    ]
    rows = []
    for method in order:
        s = selections[method]
        spec = get_spec(str(method))
        rows.append({
            "method": method,
            "label": spec.label,
            "equivariant": spec.equivariant,
            "lr": s.value,
            "interpolated": s.gated,
            "at_grid_edge": s.at_grid_edge,
            "grid": s.grid,
            "rec": s.mean("rec"),
            "rec_seeds": [r["metrics"]["rec"] for r in s.runs],
            **{k: s.mean(k) for k in ("val_rec", "effective_rank", "balancedness", "steps")},
        })
    return rows


def decay_rows(
    records: Sequence[Mapping[str, Any]], protocol: str = "oracle_mean"
) -> list[dict[str, Any]]:
    """One row per weight-decay arm of the ``decay`` part: the ``(lr, wd)`` a protocol of
    :mod:`gaugebook.engine.selection` chooses (default the ceiling script's: the mean
    training loss over seeds below the tolerance, lowest mean ``rec``), whether it passed the
    gate, whether lr or wd sits at an edge of its grid, and the mean metrics over seeds."""
    selections = select(records, PROTOCOLS[protocol], group_by="config.arm",
                        knob=("config.hparams.lr", "config.wd"))
    rows = []
    for arm, spec in DECAY_ARMS.items():
        s = selections.get(arm)
        if s is None:
            continue
        lr, wd = s.value if s.value is not None else (None, None)
        lrs = sorted({v[0] for v in s.grid})
        wds = sorted({v[1] for v in s.grid})
        rows.append({
            "arm": arm, "label": spec.label, "method": spec.method, "decay": spec.decay,
            "equivariant": get_spec(spec.method).equivariant, "lr": lr, "wd": wd,
            "interpolated": s.gated,
            "at_grid_edge": lr in (lrs[0], lrs[-1]) or wd in (wds[0], wds[-1]),
            "rec": s.mean("rec"), "rec_seeds": [r["metrics"]["rec"] for r in s.runs],
            **{k: s.mean(k) for k in ("effective_rank", "nuclear_norm", "balancedness", "steps")},
        })
    return rows


def decay_runs(records: Sequence[Mapping[str, Any]], arm: str, lr: float,
               wd: float) -> list[Mapping[str, Any]]:
    """The records of one weight-decay cell (arm, lr, wd), in seed order."""
    runs = [r for r in records if r["config"].get("arm") == arm
            and r["config"]["hparams"]["lr"] == lr and r["config"].get("wd") == wd]
    return sorted(runs, key=lambda r: r["config"]["seed"])
