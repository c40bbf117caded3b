r"""Spectral tails, Muon and sign methods (Section 8 of arXiv 2608.05136; chapter 6).

Three parts, all trained by :func:`gaugebook.engine.factor_trainer.train_factored_batch`
through the sweep engine (no loop of their own):

``phase``           the phase diagram: recovery error of the full target
                    ``X = √(1−τ²) X_3 + τ E_⊥`` (:mod:`gaugebook.tails.tail_problem`, problem
                    kind ``"spectral_tail"``) against ``τ`` for gradient descent, Adam,
                    shared-scale Adam, Muon and Shampoo, over Table 2's lr grids
                    (:data:`~gaugebook.sensing.sensing_runs.PAPER_LR_GRIDS`, three to
                    five values per method; the paper's phase script tried two,
                    :data:`PAPER_PHASE_LR_GRIDS`, which are in them but for Adam's 3e-3) and
                    seeds, cosine decay for Muon only (the others constant). The lr is chosen
                    per method and ``τ`` by :func:`phase_rows`: by default with Table 2's gate
                    (every seed below the tolerance, the oracle rule of
                    :func:`~gaugebook.sensing.sensing_runs.selection_rows`); the phase
                    script's own rule is the loose gate on its two lrs
                    (``phase_rows(records, "oracle_loose", PAPER_PHASE_LR_GRIDS)``).
``signum_horizon``  the signum audit on the plain sensing problem (the zoo's instances):
                    signum at lr 3e-3 with cosine and linear decay to zero over budgets ``T``.
``balancedness``    ``‖UᵀU − VᵀV‖_F`` at the end for GD, shared-scale Adam, Muon and Shampoo: the
                    runs of ``phase`` for those methods (same run ids: computed once, stored in
                    ``phase.jsonl``), read per ``τ`` at the selected lr (:func:`balancedness_rows`).

Paper scale: n = 40, r = 3, k = 40, m = 462, 200 validation measurements, init 1e-3, 20,000
steps, tol 1e-7 checked every 200 steps, seeds 42, 123, 456, ``τ ∈ {0, 0.05, 0.1, 0.2, 0.35,
0.5}``, signum budgets ``T ∈ {1e4, 2e4, 4e4, 6e4}``. Quick scale: n = 20, r = 2, m = 152,
3,000 steps, tol 1e-6 checked every 100 steps, the same seeds and ``τ``, signum budgets
``{1e3, 2e3, 4e3, 6e3}``.

Published values (:data:`PUBLISHED_TAU_STAR`, :data:`PUBLISHED_SIGNUM`,
:data:`PUBLISHED_BALANCEDNESS`) are the paper's, kept apart from anything computed here.
:func:`crossings` estimates ``τ*`` from the records twice: by the paper's definition (its
selection, its grid estimator) and by ours (Table 2's selection, linear interpolation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gaugebook.engine import collection
from gaugebook.engine.scales import ScaleConfig, Scales
from gaugebook.engine.selection import mean_metric
from gaugebook.engine.spec import RunSpec
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.measurements import default_num_measurements
from gaugebook.sensing.run_specs import Budget, Problem, factored_run
from gaugebook.tails.tail_problem import TAILS
from gaugebook.tails.tail_theory import Crossing, estimate_crossing

NAME = "spectral_tails"
TAIL_KIND = "spectral_tail"

#: The methods of the phase diagram, and of the balancedness probe.
PHASE_METHODS: tuple[str, ...] = ("gd", "adam", "scalar_adam", "muon", "shampoo")
PROBE_METHODS: tuple[str, ...] = ("gd", "scalar_adam", "muon", "shampoo")

#: The lr grids of the paper's CPU phase script (``experiments/muon_phase_diagram.py``, two
#: values per method, no shared-scale Adam); its GPU script (``experiments/nibi/phase_fine.py``)
#: adds shared-scale Adam on (1e-3, 3e-3). All but Adam's 3e-3 are points of Table 2's grids,
#: so the records of ``phase`` hold them.
PAPER_PHASE_LR_GRIDS: dict[str, tuple[float, ...]] = {
    "gd": (0.01, 0.03), "adam": (3e-3, 0.01), "muon": (0.03, 0.1), "shampoo": (0.03, 0.1),
}
#: The paper's estimator of ``τ*`` (its ``phase_tables`` in ``experiments/nibi/collect.py``,
#: and ``muon_phase_diagram.py``): the first grid ``τ`` at which mean(Muon) − mean(GD) over the
#: seeds turns from ``< 0`` to ``≥ 0``, each method at the lr of its selection per ``τ``:
#: lowest mean rec among the lrs whose mean training loss is below 1e-4.
PAPER_TAU_STAR_RULE: dict[str, str] = {
    "estimator": "grid", "protocol": "oracle_loose",
}
#: Published crossing of the Muon and GD curves (arXiv 2608.05136, Section 8 and Appendix C8):
#: ``τ*`` and the setting it was measured in (Muon beats GD for ``τ < τ*``), both by the rule of
#: :data:`PAPER_TAU_STAR_RULE`. ``cpu``: ``muon_phase_diagram.py``, 3 seeds, six ``τ``, the
#: grids of :data:`PAPER_PHASE_LR_GRIDS`, float32, 20,000 steps (the grid and seeds of this
#: experiment). ``gpu``: ``nibi/phase_fine.py`` + ``collect.py`` (``SUMMARY.md``), 10 seeds on a
#: finer grid of 14 ``τ``, the same lr grids plus shared-scale Adam (1e-3, 3e-3), float64,
#: 20,000 steps; its means at ``τ = 0.2``, where Muon first stops beating GD: GD 0.3512,
#: Muon 0.3538 (at ``τ = 0.15``: GD 0.2827, Muon 0.2725).
PUBLISHED_TAU_STAR: dict[str, dict[str, Any]] = {
    "cpu": {"tau_star": 0.35, "seeds": 3, "grid": (0.0, 0.05, 0.1, 0.2, 0.35, 0.5),
            "lr_grids": dict(PAPER_PHASE_LR_GRIDS), "num_steps": 20_000, "dtype": "float32",
            "note": "CPU, 3 seeds, 6 τ (the grid of this experiment)"},
    "gpu": {"tau_star": 0.2, "seeds": 10,
            "grid": (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.325, 0.35, 0.375, 0.4, 0.45, 0.5,
                     0.6),
            "lr_grids": {**PAPER_PHASE_LR_GRIDS, "scalar_adam": (1e-3, 3e-3)},
            "num_steps": 20_000, "dtype": "float64",
            "means_at_tau_star": {"gd": 0.3512, "muon": 0.3538},
            "means_before_tau_star": {"tau": 0.15, "gd": 0.2827, "muon": 0.2725},
            "note": "GPU, 10 seeds, 14 τ from 0 to 0.6"},
}
#: The paper's CPU phase-diagram *log* (``logs/muon_phase_diagram_cpu.txt``, the run behind the
#: published CPU ``τ*``; a public record, printed to four decimals): ``τ`` → method → mean rec
#: over seeds 42, 123, 456 at the lr its rule chose (:data:`PAPER_TAU_STAR_RULE`'s selection on
#: :data:`PAPER_PHASE_LR_GRIDS`).
PAPER_PHASE_LOG: dict[float, dict[str, float]] = {
    0.0: {"gd": 0.1313, "adam": 0.5810, "muon": 0.0, "shampoo": 0.2881},
    0.05: {"gd": 0.1677, "adam": 0.5821, "muon": 0.0945, "shampoo": 0.2976},
    0.1: {"gd": 0.2310, "adam": 0.5980, "muon": 0.1846, "shampoo": 0.3233},
    0.2: {"gd": 0.3687, "adam": 0.6435, "muon": 0.3588, "shampoo": 0.4056},
    0.35: {"gd": 0.5675, "adam": 0.7210, "muon": 0.5873, "shampoo": 0.5723},
    0.5: {"gd": 0.7464, "adam": 0.7993, "muon": 0.7649, "shampoo": 0.7332},
}
#: Published signum audit: lr 3e-3, cosine or linear decay to zero; recovers X_star exactly at
#: budgets T ≥ 6e4 and not below (T ∈ {1e4, 2e4, 4e4, 6e4}); Table 2's 2e4 cosine run: 0.4454.
PUBLISHED_SIGNUM: dict[str, Any] = {
    "lr": 3e-3,
    "recovers_from": 60_000,
    "recovers": {10_000: False, 20_000: False, 40_000: False, 60_000: True},
    "table2_rec_at_2e4": 0.4454,
}
#: Published balancedness probe (qualitative, no numbers given): Muon's and Shampoo's
#: ‖UᵀU − VᵀV‖ stays large, GD's and shared-scale Adam's near zero.
PUBLISHED_BALANCEDNESS: dict[str, str] = {
    "muon": "large", "shampoo": "large", "gd": "near zero", "scalar_adam": "near zero",
}
#: Our threshold for "recovers X_star exactly" (the paper's word): mean rec below this.
EXACT_REC = 1e-3

SIGNUM_LR = 3e-3
SIGNUM_SCHEDULES: tuple[str, ...] = ("cosine", "linear")


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhasePart:
    """Methods × lr grid × ``τ`` × seeds on the tail problem (``problem`` gives the sizes)."""

    name: str
    description: str
    problem: Problem
    budget: Budget
    seeds: tuple[int, ...]
    taus: tuple[float, ...]
    methods: tuple[str, ...]
    lr_grids: Mapping[str, tuple[float, ...]]
    schedules: Mapping[str, str]

    def specs(self) -> list[RunSpec]:
        """The runs, ordered ``τ``, method, lr, seed."""
        return [
            RunSpec(NAME, self.name, *factored_run(
                {"kind": TAIL_KIND, **self.problem.to_config(), "tau": float(tau)}, method,
                ms.PAPER_HPARAMS[method], lr, self.schedules.get(method, "constant"),
                self.budget, seed))
            for tau in self.taus
            for method in self.methods
            for lr in self.lr_grids[method]
            for seed in self.seeds
        ]


@dataclass(frozen=True)
class HorizonPart:
    """One method at one lr, several decaying schedules × budgets ``T`` × seeds, on the plain
    sensing problem (the zoo's instances)."""

    name: str
    description: str
    problem: Problem
    seeds: tuple[int, ...]
    horizons: tuple[int, ...]
    schedules: tuple[str, ...]
    tol: float
    check_every: int
    method: str = "signum"
    lr: float = SIGNUM_LR

    def budget(self, horizon: int) -> Budget:
        return Budget(horizon, tol=self.tol, check_every=self.check_every)

    def specs(self) -> list[RunSpec]:
        """The runs, ordered budget, schedule, seed."""
        return [
            RunSpec(NAME, self.name, *factored_run(
                self.problem.to_config(), self.method, ms.PAPER_HPARAMS[self.method], self.lr,
                schedule, self.budget(T), seed))
            for T in self.horizons
            for schedule in self.schedules
            for seed in self.seeds
        ]


@dataclass(frozen=True)
class TailsConfig(ScaleConfig):
    """The parts at one scale; ``persist_records`` as in the sensing experiment."""

    scale: str
    phase: PhasePart
    horizon: HorizonPart
    probe_methods: tuple[str, ...]
    persist_records: bool

    @property
    def part_names(self) -> tuple[str, ...]:
        return (self.phase.name, self.horizon.name, "balancedness")

    def specs(self, part: str) -> list[RunSpec]:
        if part == self.phase.name:
            return self.phase.specs()
        if part == self.horizon.name:
            return self.horizon.specs()
        if part == "balancedness":
            return [s for s in self.phase.specs() if s.config["method"] in self.probe_methods]
        raise ValueError(f"Invalid part: {part!r}; expected one of {self.part_names}")


TAUS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5)


def _build(scale: str, problem: Problem, budget: Budget, horizons: tuple[int, ...],
           persist: bool) -> TailsConfig:
    seeds = (42, 123, 456)
    schedules = {m: ("cosine" if m == "muon" else "constant") for m in PHASE_METHODS}
    phase = PhasePart(
        "phase", "rec of the full target against τ, five optimizers, Table 2's lr grids",
        problem, budget, seeds, TAUS, PHASE_METHODS,
        {m: ms.PAPER_LR_GRIDS[m] for m in PHASE_METHODS}, schedules)
    horizon = HorizonPart(
        "signum_horizon", "signum, lr 3e-3, cosine and linear decay to zero over budgets T",
        problem, seeds, horizons, SIGNUM_SCHEDULES, budget.tol, budget.check_every)
    return TailsConfig(scale, phase, horizon, PROBE_METHODS, persist)


def _paper_config() -> TailsConfig:
    problem = Problem(40, 3, 40, default_num_measurements(40, 3), 200, 1e-3)
    return _build("paper", problem, Budget(20_000), (10_000, 20_000, 40_000, 60_000), True)


def _quick_config() -> TailsConfig:
    problem = Problem(20, 2, 20, default_num_measurements(20, 2), 100, 1e-3)
    budget = Budget(3_000, tol=1e-6, check_every=100)
    return _build("quick", problem, budget, (1_000, 2_000, 4_000, 6_000), False)


get_config = Scales(paper=_paper_config, quick=_quick_config)


def published_applies(config: TailsConfig) -> bool:
    """Whether ``config`` is the paper's setting (sizes, budgets, seeds, grids, schedules):
    the published values describe only that setting."""
    paper = _paper_config()
    return (config.phase, config.horizon) == (paper.phase, paper.horizon)


# --------------------------------------------------------------------------------------------
# the experiment object
# --------------------------------------------------------------------------------------------


class SpectralTails(ms.MatrixSensingZoo):
    """The spectral-tail and signum sweeps as a sweep experiment. Batching, splitting, the
    cost guess and training are the sensing experiment's
    (:class:`~gaugebook.sensing.sensing_runs.MatrixSensingZoo`); only the parts and their runs
    differ."""

    name = NAME
    description = "spectral tails: Muon vs GD across τ, the signum horizon, balancedness"
    families = {**ms.MatrixSensingZoo.families, "spectral_tail": TAILS}

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).part_names

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)


EXPERIMENT = SpectralTails()


# --------------------------------------------------------------------------------------------
# records in, rows out
# --------------------------------------------------------------------------------------------


def _by_tau(records: Sequence[Mapping[str, Any]]) -> dict[float, list[Mapping[str, Any]]]:
    out: dict[float, list[Mapping[str, Any]]] = {}
    for r in records:
        out.setdefault(float(r["config"]["problem"]["tau"]), []).append(r)
    return dict(sorted(out.items()))


def _within(records: Sequence[Mapping[str, Any]],
            lr_grids: Mapping[str, Sequence[float]] | None) -> list[Mapping[str, Any]]:
    """The records whose lr is in their method's grid of ``lr_grids`` (a method not named there
    keeps every lr)."""
    if lr_grids is None:
        return list(records)
    return [r for r in records if r["config"]["method"] not in lr_grids
            or any(math.isclose(r["config"]["hparams"]["lr"], lr, rel_tol=1e-9)
                   for lr in lr_grids[r["config"]["method"]])]


def _metric(record: Mapping[str, Any], key: str) -> float:
    """``record``'s metric ``key`` as a float, NaN when the run has none (a failed run)."""
    value = record.get("metrics", {}).get(key)
    return math.nan if value is None else float(value)


def phase_rows(records: Sequence[Mapping[str, Any]], protocol: str = "oracle",
               lr_grids: Mapping[str, Sequence[float]] | None = None) -> list[dict[str, Any]]:
    """One row per ``(τ, method)``: the selection row of
    :func:`~gaugebook.sensing.sensing_runs.selection_rows` under ``protocol`` on the runs
    of that ``τ`` (chosen lr, mean metrics, rec per seed, whether the gate passed, under
    ``interpolated``), plus ``tau`` and ``head_rec``, ``tail_rec`` means, ``seeds`` (the
    seeds, in the order of ``rec_seeds``) and, per seed, the rec and the final balancedness
    (``rec_by_seed``, ``balancedness_by_seed``: ``{seed: value}``, what
    :func:`gaugebook.present.stats.compare_runs` pairs). ``lr_grids`` restricts a method's
    candidates to the lrs named there (``missing_lrs``: those of its grid without a record)."""
    out = []
    for tau, recs in _by_tau(_within(records, lr_grids)).items():
        for row in ms.selection_rows(recs, protocol):
            chosen = [r for r in recs if r["config"]["method"] == row["method"]
                      and r["config"]["hparams"]["lr"] == row["lr"]]
            seeds = [r["config"]["seed"] for r in chosen]
            wanted = (lr_grids or {}).get(row["method"], ())
            missing = [lr for lr in wanted
                       if not any(math.isclose(lr, g, rel_tol=1e-9) for g in row["grid"])]
            means = {k: mean_metric(chosen, k) for k in ("head_rec", "tail_rec", "nuclear_norm")}
            per_seed = {f"{k}_by_seed": {r["config"]["seed"]: _metric(r, k) for r in chosen}
                        for k in ("rec", "balancedness")}
            out.append({**row, "tau": tau, "seeds": seeds, **means, **per_seed,
                        "missing_lrs": missing})
    return out


def log_comparison(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Ours under the paper's phase rule (its lrs, its gate) beside the paper's CPU log
    (:data:`PAPER_PHASE_LOG`), per ``(τ, method)`` of the log: our mean rec and lr, the log's
    rec, their difference, and ``missing_lrs``, the lrs of the paper's grid we have no run at
    (where one of them was the log's choice, the two selections cannot agree)."""
    rows = {(r["tau"], r["method"]): r
            for r in phase_rows(records, PAPER_TAU_STAR_RULE["protocol"], PAPER_PHASE_LR_GRIDS)}
    return [{"tau": tau, "method": method, "ours": r["rec"], "lr": r["lr"], "log": logged,
             "diff": r["rec"] - logged, "missing_lrs": r["missing_lrs"]}
            for tau, by_method in PAPER_PHASE_LOG.items() for method, logged in by_method.items()
            if (r := rows.get((tau, method))) is not None]


def crossings(records: Sequence[Mapping[str, Any]], *, num_boot: int = 2000,
              level: float = 0.9, seed: int = 0) -> dict[str, Crossing]:
    """``τ*`` of Muon against GD from the ``phase`` records, twice, each with its bootstrap over
    seeds (the lrs stay those chosen on all seeds):

    ``"paper"``  the paper's definition (:data:`PAPER_TAU_STAR_RULE`): lrs chosen on the paper's
                 phase grids (:data:`PAPER_PHASE_LR_GRIDS`) with the loose gate, ``τ*`` the
                 first grid ``τ`` at which mean(Muon) − mean(GD) turns from ``< 0`` to ``≥ 0``;
    ``"ours"``   Table 2's gate on Table 2's grids (:func:`phase_rows` by default), ``τ*``
                 linearly interpolated between the two grid points of that change.
    """
    settings = {
        "paper": (PAPER_TAU_STAR_RULE["protocol"], PAPER_PHASE_LR_GRIDS,
                  PAPER_TAU_STAR_RULE["estimator"]),
        "ours": ("oracle", None, "interpolate"),
    }
    out = {}
    for key, (protocol, grids, estimator) in settings.items():
        rows = phase_rows(records, protocol, grids)
        taus, rec_muon, seeds_m = rec_matrix(rows, "muon")
        taus_g, rec_gd, seeds_g = rec_matrix(rows, "gd")
        if taus != taus_g or seeds_m != seeds_g:
            raise ValueError("Invalid records: Muon and GD differ in their τ or seeds")
        out[key] = estimate_crossing(taus, rec_muon, rec_gd, num_boot=num_boot, level=level,
                                     seed=seed, estimator=estimator)
    return out


def rec_matrix(rows: Sequence[Mapping[str, Any]], method: str
               ) -> tuple[list[float], list[list[float]], list[int]]:
    """``(taus, rec[τ][seed], seeds)`` of ``method`` from :func:`phase_rows` (seed order of
    the first ``τ``; a missing or non-finite seed value is NaN)."""
    mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["tau"])
    if not mine:
        return [], [], []
    seeds = list(mine[0]["seeds"])
    taus, recs = [], []
    for r in mine:
        by_seed = dict(zip(r["seeds"], r["rec_seeds"], strict=True))
        taus.append(r["tau"])
        recs.append([math.nan if by_seed.get(s) is None else float(by_seed[s]) for s in seeds])
    return taus, recs, seeds


def horizon_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per ``(T, schedule)`` of the signum part: mean and per-seed rec (``rec_seeds``
    of the runs that ended, ``rec_by_seed`` of every run, NaN where one failed), whether every
    seed interpolated, steps, balancedness, ``exact``: mean rec below :data:`EXACT_REC`, and
    ``exact_seeds``: how many seeds are below it."""
    groups: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
    for r in records:
        c = r["config"]
        groups.setdefault((c["budget"]["num_steps"], c["schedule"]), []).append(r)
    out = []
    for (T, schedule), recs in sorted(groups.items()):
        ok = [r for r in recs if r["status"] == "ok"]
        recs_ = [r["metrics"]["rec"] for r in ok]
        mean = mean_metric(ok, "rec") if len(ok) == len(recs) else math.nan
        out.append({
            "T": T, "schedule": schedule, "rec": mean, "rec_seeds": recs_,
            "rec_by_seed": {r["config"]["seed"]: _metric(r, "rec") for r in recs},
            "interpolated": (len(ok) == len(recs)
                             and all(r["metrics"].get("interpolated") for r in ok)),
            "steps": mean_metric(ok, "steps"),
            "balancedness": mean_metric(ok, "balancedness"),
            "exact": bool(mean < EXACT_REC),
            "exact_seeds": sum(v < EXACT_REC for v in recs_),
        })
    return out


def balancedness_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per ``(τ, method)`` of the probe: mean final ``‖UᵀU − VᵀV‖_F`` over seeds at the
    selected lr (and per seed, ``balancedness_by_seed``), the mean rec, and
    ``relative_balancedness``, the balancedness divided by the
    mean nuclear norm ``‖W‖_*`` (balanced factors of ``W`` have ``‖U‖_F² = ‖V‖_F² = ‖W‖_*``,
    so this compares the imbalance with the size of the factors)."""
    keys = ("tau", "method", "label", "equivariant", "lr", "balancedness", "rec", "interpolated",
            "balancedness_by_seed")
    out = []
    for row in phase_rows(records):
        if row["method"] in PROBE_METHODS:
            nuc = row.get("nuclear_norm")
            ok = nuc and math.isfinite(nuc) and nuc > 0
            out.append({**{k: row[k] for k in keys},
                        "relative_balancedness": row["balancedness"] / nuc if ok else math.nan})
    return out


# --------------------------------------------------------------------------------------------
# for the chapter and the CLI
# --------------------------------------------------------------------------------------------


collect = collection.collector(EXPERIMENT, get_config)
