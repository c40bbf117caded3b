r"""The anisotropy dial's recovery table and FlowAdam's sensing rows (chapter 5).

The dial is FlowAdam with the flow path off (:class:`~gaugekit.optim.FlowAdam`,
``flow=False``): Adam whose denominator is ``s_i^p s̄^{1−p} + ε`` with ``s_i = √v̂_i`` and one
shared scalar ``s̄`` per run, ``'rms'`` (``√(mean v̂)``, gauge-invariant) or ``'geomean'``
(``exp(mean log s_i)``). ``p = 1`` is Adam, ``p = 0`` with ``'rms'`` is shared-scale Adam. The
runs are ordinary matrix-sensing runs (``W = U Vᵀ``, :mod:`gaugekit.problems.matrix_sensing`)
trained by the stacked factor-training loop (:func:`train_factored_batch`) through the sweep
engine, so they obey the zoo's protocol: pre-update loss, a check every ``check_every`` steps,
stop below ``tol``, divergence above ``diverge_above``.

Parts (the quick and the paper scale differ only in their numbers):

``dial_rms``      every ``p`` × every lr × seeds, ``'rms'`` scalar: the dial table (with a
                  selection over lrs) *and* the fixed-lr arm (the same records, read per lr).
``dial_geomean``  the same with ``'geomean'``. At ``p = 1`` the scalar does not enter the step
                  (``s̄^0``), so that run is configured with ``'rms'`` and shared with
                  ``dial_rms`` (one run id, computed once).
``gd_reference``  plain GD on its Table 2 grid at the dial's budget: the reference line.
``lr_edge``       a finer, lower lr grid and more seeds for ``p`` at both ends.
``flow_rows``     FlowAdam (Euler, plateau 0.9, stiffness 0.1, T = 0.5) over its lr grid:
                  per-coordinate clip p = 1 (the prototype), global-norm clip c = 10 at
                  p = 1, global-norm p = 0 ``'geomean'``, global-norm p = 0 ``'rms'``.
``flow_long``     global-norm p = 0 ``'rms'`` at one lr with more seeds and a 10× budget.

Selection. The paper's CPU dial script (``experiments/precond_dial_scalar_check.py``) picks, per
``p``, the lr with the lowest mean ``rec`` among the lrs at which no seed diverged and the
*mean* training loss is below ``1e-4`` (:data:`PAPER_PROTOCOL`); its FlowAdam script
(``experiments/flowadam_upgrade.py``, newest version) asks for a mean below the bar ``1e-7``
(:data:`FLOW_ROWS_PROTOCOL`; an older version used ``1e-4``, which on the paper's runs picks
the same lrs, not on ours); the book's :data:`~gaugekit.runs.selection.ORACLE` rule asks
that *every* seed be below the bar. :func:`dial_rows` and :func:`flow_rows` take any of them.

Spread. :func:`seed_stats` gives the sample standard deviation (``ddof=1``) by default; the
paper's ``collect.py`` prints the population one (``np.std``, ``ddof=0``) and its
``dial_flowlong.py`` the sample one, so each published spread carries its ``sd_ddof`` and is
compared with ours computed the same way.
"""

# Developer note (layers, DESIGN.md): floor 3.

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gaugekit.config import get_scale
from gaugekit.experiments import flow_adam as fx
from gaugekit.experiments.matrix_sensing import PAPER_HPARAMS, PAPER_LR_GRIDS, Budget, Problem
from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS
from gaugekit.problems.matrix_sensing import INIT_SEED_OFFSET, default_num_measurements
from gaugekit.runs import collection, sweep
from gaugekit.runs.collection import Collected, MissingRecords
from gaugekit.runs.selection import (
    ORACLE,
    ORACLE_MEAN,
    Protocol,
    Selection,
    mean_metric,
    select,
)
from gaugekit.runs.spec import RunResult, RunSpec
from gaugekit.train.factors import train_factored_batch

__all__ = [
    "CONFIGS",
    "EXPERIMENT",
    "FLOW_ROWS",
    "FLOW_ROWS_PROTOCOL",
    "PAPER_PROTOCOL",
    "PUBLISHED_DIAL",
    "PUBLISHED_DIAL_STEPS",
    "PUBLISHED_FIXED_LR",
    "PUBLISHED_FLOW_LONG",
    "PUBLISHED_FLOW_ROWS",
    "PUBLISHED_FLOW_SHORT_RMS",
    "PUBLISHED_GD",
    "PUBLISHED_LR_EDGE",
    "SEEDS_10",
    "ABLATION_KIND",
    "Collected",
    "MissingRecords",
    "DialConfig",
    "DialExperiment",
    "ablation_results",
    "ablation_specs",
    "collect",
    "collect_chapter",
    "dial_numbers",
    "dial_table",
    "fixed_lr_numbers",
    "flow_numbers",
    "flow_published",
    "flow_table",
    "gd_reference",
    "lr_edge_numbers",
    "lr_edge_table",
    "dial_hparams",
    "dial_rows",
    "fixed_lr_table",
    "flow_hparams",
    "flow_row_name",
    "get_config",
    "is_paper_setting",
    "lr_edge_rows",
    "published_lr_edge",
    "flow_rows",
    "records_dir",
    "run_ablation",
    "seed_stats",
]

NAME = "dial"

# --------------------------------------------------------------------------------------------
# published values (arXiv 2608.05136 and its repository idevender/loss-basis-adam)
# --------------------------------------------------------------------------------------------

#: The dial table (paper, Section 6; ``experiments/precond_dial_scalar_check.py``): scalar →
#: p → mean rec over seeds 42, 123, 456 at the selected lr (lr grid 1e-3 … 0.1, 30k budget).
#: ``'geomean'`` at p = 1 is Adam, the ``'rms'`` entry.
PUBLISHED_DIAL: dict[str, dict[float, float]] = {
    "rms": {1.0: 0.5704, 0.75: 0.4588, 0.5: 0.3481, 0.25: 0.2595, 0.0: 0.2010},
    "geomean": {0.75: 0.4604, 0.5: 0.3551, 0.25: 0.2766, 0.0: 0.2292},
}
#: Mean steps to interpolation of the published ``'rms'`` dial at its ends (p = 1, p = 0).
PUBLISHED_DIAL_STEPS: dict[float, int] = {1.0: 400, 0.0: 3200}
#: The published fixed-lr arm (``experiments/precond_dial_fixed_lr.log`` of the repository,
#: ``'rms'``, 3 seeds): lr → p → mean rec. Its claim: monotone in p at every lr but 0.1.
PUBLISHED_FIXED_LR: dict[float, dict[float, float]] = {
    1e-3: {1.0: 0.5764, 0.75: 0.4588, 0.5: 0.3481, 0.25: 0.2595, 0.0: 0.2010},
    3e-3: {1.0: 0.5704, 0.75: 0.4730, 0.5: 0.3824, 0.25: 0.3083, 0.0: 0.2559},
    1e-2: {1.0: 0.5734, 0.75: 0.5000, 0.5: 0.4405, 0.25: 0.3922, 0.0: 0.3566},
    3e-2: {1.0: 0.5809, 0.75: 0.5359, 0.5: 0.5135, 0.25: 0.4996, 0.0: 0.4929},
    0.1: {1.0: 0.6003, 0.75: 0.5458, 0.5: 0.5545, 0.25: 0.5756, 0.0: 0.6174},
}
#: The lr-edge finding (paper, Appendix C8, GPU, float64): the p = 0 dial with 10 seeds at
#: lr 3e-4 (below the CPU grid, where every p < 1 selection sat at its lowest lr).
PUBLISHED_LR_EDGE: dict[str, float] = {"p": 0.0, "lr": 3e-4, "seeds": 10, "rec": 0.1432,
                                       "rec_sd": 0.0341, "sd_ddof": 0}
#: FlowAdam rows (paper, Section 10; ``logs/flowadam_upgrade_cpu.txt``; 3 seeds, 30k budget,
#: the selection of :data:`FLOW_ROWS_PROTOCOL` over lr 1e-3 … 3e-2: each chosen lr has every
#: seed below the 1e-7 bar): row name → mean rec.
PUBLISHED_FLOW_ROWS: dict[str, float] = {
    "percoord_p1": 0.3466, "globalnorm_p1": 0.3058, "globalnorm_p0_geomean": 0.2691,
}
#: The long global-norm p = 0 ``'rms'`` run (paper, Appendix D.9): 10 seeds, lr 1e-3, 300k
#: budget; every seed interpolated, in 38k to 59k steps. ``sd_ddof``: its script prints the
#: sample standard deviation (``np.std(ddof=1)``), the lr-edge value the population one.
PUBLISHED_FLOW_LONG: dict[str, float] = {"lr": 1e-3, "seeds": 10, "num_steps": 300_000,
                                         "rec": 0.1475, "rec_sd": 0.0357, "sd_ddof": 1,
                                         "steps_min": 38_000, "steps_max": 59_000}
#: The figure quoted for the same row at the 30k budget, and the training loss it stopped at
#: (it never reached the 1e-7 bar).
PUBLISHED_FLOW_SHORT_RMS: dict[str, float] = {"lr": 1e-3, "rec": 0.169, "train_loss": 7e-6}
#: Plain GD on the same testbed (Table 2).
PUBLISHED_GD: float = 0.1312

#: The ten seeds of the paper's GPU runs (``experiments/nibi/dial_scale.py``).
SEEDS_10: tuple[int, ...] = (42, 123, 456, 789, 1011, 1213, 1415, 1617, 1819, 2021)

#: FlowAdam rows: name → (label, options on top of the preset named first).
FLOW_ROWS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "percoord_p1": ("per-coordinate clip c = 1, p = 1 (prototype)", "prototype", {}),
    "globalnorm_p1": ("global-norm clip c = 10, p = 1", "prototype",
                      {"flow_clip_mode": "globalnorm", "flow_clip": 10.0}),
    "globalnorm_p0_geomean": ("global-norm clip, p = 0, 'geomean'", "invariant",
                              {"precond_scalar": "geomean"}),
    "globalnorm_p0_rms": ("global-norm clip, p = 0, 'rms' (invariant)", "invariant", {}),
}


def _paper_gate(runs: Sequence[Mapping[str, Any]]) -> bool:
    loss = mean_metric(runs, "train_loss")
    return loss == loss and loss < 1e-4


#: The paper's dial/FlowAdam selection: lowest mean rec among lrs whose seeds all finished
#: (none diverged) with mean training loss below 1e-4.
PAPER_PROTOCOL = Protocol(
    "paper_dial",
    "lowest mean rec among lrs with no diverged seed and mean train loss < 1e-4 (the paper's "
    "dial script)",
    score=lambda runs: mean_metric(runs, "rec"),
    fallback=lambda runs: mean_metric(runs, "rec") + 10.0,
    gate=_paper_gate,
    gate_text="mean training loss over seeds below 1e-4",
)
#: The selection of the paper's FlowAdam rows (``flowadam_upgrade.py``, newest version): mean
#: training loss below the bar (1e-7), the newer zoo controls' gate.
FLOW_ROWS_PROTOCOL = ORACLE_MEAN


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


def dial_hparams(power: float, scalar: str) -> dict[str, Any]:
    """The dial's hyperparameters besides ``lr`` (Adam's betas and ε, flow off). At ``p = 1``
    the scalar is set to ``'rms'`` whatever ``scalar`` is: it does not enter the step."""
    return {"betas": (0.9, 0.999), "eps": 1e-8, "precond_power": float(power),
            "precond_scalar": "rms" if power == 1 else scalar, "flow": False}


def flow_hparams(row: str) -> dict[str, Any]:
    """FlowAdam's hyperparameters besides ``lr`` for a row of :data:`FLOW_ROWS`."""
    _, preset, options = FLOW_ROWS[row]
    return {"betas": (0.9, 0.999), "eps": 1e-8, **FLOW_ADAM_PRESETS[preset], **options}


@dataclass(frozen=True)
class DialConfig:
    """Every number of the experiment at one scale.

    ``powers`` × ``lrs`` × ``seeds`` for both dial parts; ``gd_lrs`` for the GD reference;
    ``edge_powers`` × ``edge_lrs`` × ``edge_seeds`` for ``lr_edge``; ``flow_lrs`` × ``seeds``
    for ``flow_rows``; ``long_lr`` × ``edge_seeds`` at ``long_budget`` for ``flow_long``.
    """

    scale: str
    problem: Problem
    budget: Budget
    long_budget: Budget
    seeds: tuple[int, ...]
    powers: tuple[float, ...]
    lrs: tuple[float, ...]
    gd_lrs: tuple[float, ...]
    edge_powers: tuple[float, ...]
    edge_lrs: tuple[float, ...]
    edge_seeds: tuple[int, ...]
    flow_lrs: tuple[float, ...]
    long_lr: float
    persist_records: bool
    dtype: str = "float32"
    flow_rows: tuple[str, ...] = field(default=tuple(FLOW_ROWS))

    def parts(self) -> tuple[str, ...]:
        return ("dial_rms", "dial_geomean", "gd_reference", "lr_edge", "flow_rows", "flow_long",
                "flow_ablation")

    def _spec(self, part: str, method: str, hparams: Mapping[str, Any], lr: float, seed: int,
              budget: Budget) -> RunSpec:
        config = {
            "kind": "factored",
            "problem": self.problem.to_config(),
            "method": method,
            "hparams": {**hparams, "lr": float(lr)},
            "schedule": "constant",
            "budget": budget.to_config(),
            "seed": seed,
            "dtype": self.dtype,
        }
        return RunSpec(NAME, part, config, {"instance": seed, "init": seed + INIT_SEED_OFFSET})

    def specs(self, part: str) -> list[RunSpec]:
        """The runs of ``part``, ordered row (p or FlowAdam row), lr, seed."""
        b = self.budget
        if part in ("dial_rms", "dial_geomean"):
            scalar = part.removeprefix("dial_")
            return [self._spec(part, "flow_adam", dial_hparams(p, scalar), lr, s, b)
                    for p in self.powers for lr in self.lrs for s in self.seeds]
        if part == "gd_reference":
            return [self._spec(part, "gd", PAPER_HPARAMS["gd"], lr, s, b)
                    for lr in self.gd_lrs for s in self.seeds]
        if part == "lr_edge":
            return [self._spec(part, "flow_adam", dial_hparams(p, "rms"), lr, s, b)
                    for p in self.edge_powers for lr in self.edge_lrs for s in self.edge_seeds]
        if part == "flow_rows":
            return [self._spec(part, "flow_adam", flow_hparams(row), lr, s, b)
                    for row in self.flow_rows for lr in self.flow_lrs for s in self.seeds]
        if part == "flow_long":
            return [self._spec(part, "flow_adam", flow_hparams("globalnorm_p0_rms"),
                               self.long_lr, s, self.long_budget) for s in self.edge_seeds]
        if part == "flow_ablation":
            return ablation_specs(fx.CONFIGS[self.scale])
        raise ValueError(f"Invalid part: {part!r}; expected one of {self.parts()}")


def _paper_config() -> DialConfig:
    n, r = 40, 3
    problem = Problem(n, r, n, default_num_measurements(n, r), 200, 1e-3)
    return DialConfig(
        scale="paper", problem=problem, budget=Budget(30_000), long_budget=Budget(300_000),
        seeds=(42, 123, 456), powers=(1.0, 0.75, 0.5, 0.25, 0.0),
        lrs=(1e-3, 3e-3, 1e-2, 3e-2, 0.1), gd_lrs=PAPER_LR_GRIDS["gd"],
        edge_powers=(0.0, 1.0), edge_lrs=(1e-4, 2e-4, 3e-4, 5e-4, 1e-3), edge_seeds=SEEDS_10,
        flow_lrs=(1e-3, 3e-3, 1e-2, 3e-2), long_lr=1e-3, persist_records=True,
    )


def _quick_config() -> DialConfig:
    n, r = 20, 2
    problem = Problem(n, r, n, default_num_measurements(n, r), 100, 1e-3)
    return DialConfig(
        scale="quick", problem=problem, budget=Budget(3_000, tol=1e-6, check_every=100),
        long_budget=Budget(10_000, tol=1e-6, check_every=100),
        seeds=(42, 123), powers=(1.0, 0.5, 0.0), lrs=(3e-3, 1e-2, 3e-2, 0.1),
        gd_lrs=(0.03, 0.1), edge_powers=(0.0, 1.0), edge_lrs=(1e-3, 3e-3),
        edge_seeds=(42, 123, 456), flow_lrs=(1e-2, 3e-2), long_lr=1e-2, persist_records=False,
    )


CONFIGS = {"paper": _paper_config, "quick": _quick_config}


def get_config(scale: str | None = None) -> DialConfig:
    """The experiment's configuration at ``scale`` (default: :func:`gaugekit.config.get_scale`)."""
    return CONFIGS[get_scale(scale)]()


# --------------------------------------------------------------------------------------------
# the ablation of the chapter's earlier sections, as records
# --------------------------------------------------------------------------------------------

#: Config kind of an ablation run: one (variant, seed, lr) of
#: :func:`gaugekit.experiments.flow_adam.train_runs`.
ABLATION_KIND = "flow_ablation"


def ablation_specs(config: fx.FlowAdamConfig) -> list[RunSpec]:
    """One run per (variant of :func:`~gaugekit.experiments.flow_adam.ablation_variants`, seed,
    lr) of ``config``: the runs of the chapter's trigger-rate and ablation sections."""
    base = {
        "kind": ABLATION_KIND, "problem": config.problem.to_config(),
        "budget": config.budget.to_config(), "dtype": str(config.dtype).removeprefix("torch."),
        "dial_factors": list(config.dial_factors),
        "stiffness_grid": list(config.stiffness_grid),
    }
    return [
        RunSpec(NAME, "flow_ablation", {**base, "variant": label, "seed": seed, "lr": float(lr)},
                {"instance": seed, "init": seed + INIT_SEED_OFFSET})
        for label in fx.ablation_variants(config) for seed in config.seeds for lr in config.lrs
    ]


def _ablation_config(specs: Sequence[RunSpec]) -> fx.FlowAdamConfig:
    c = specs[0].config
    return dataclasses.replace(
        fx.CONFIGS["paper"], scale="records", problem=Problem(**c["problem"]),
        budget=Budget(**c["budget"]), seeds=tuple(sorted({s.config["seed"] for s in specs})),
        lrs=tuple(sorted({s.config["lr"] for s in specs})),
        dial_factors=tuple(c["dial_factors"]), stiffness_grid=tuple(c["stiffness_grid"]),
        dtype=getattr(torch, c["dtype"]),
    )


def run_ablation(specs: Sequence[RunSpec], *, device: torch.device | str | None = None
                 ) -> list[RunResult]:
    """Train the ablation runs ``specs`` stacked (:func:`~gaugekit.experiments.flow_adam.
    train_runs`) and return one record per spec: its metrics (``steps`` is its stop)."""
    config = _ablation_config(specs)
    variants = fx.ablation_variants(config)
    runs = [(variants[s.config["variant"]], s.config["seed"], s.config["lr"]) for s in specs]
    return [RunResult("ok", m) for m in fx.train_runs(runs, config, device=device)]


def ablation_results(records: Sequence[Mapping[str, Any]]) -> dict[str, fx.RunColumns]:
    """The records of ``flow_ablation`` as :func:`~gaugekit.experiments.flow_adam.train_variants`
    returns them: label → columns over the runs (seed-major, then lr)."""
    by_label: dict[str, list[tuple[int, float, Mapping[str, Any]]]] = {}
    for r in records:
        c = r["config"]
        by_label.setdefault(c["variant"], []).append((c["seed"], c["lr"], r["metrics"]))
    return {label: fx.run_columns(runs) for label, runs in by_label.items()}


# --------------------------------------------------------------------------------------------
# the experiment object
# --------------------------------------------------------------------------------------------


def _run_cost(spec: RunSpec) -> float:
    if spec.config["kind"] == ABLATION_KIND:  # every run steps through the whole budget
        p = spec.config["problem"]
        return 4.0 * p["n"] ** 2 * p["m"] * spec.config["budget"]["num_steps"]
    return _factored_cost(spec)


def _factored_cost(spec: RunSpec) -> float:
    """Guessed flops of a run: sensing products per step times the expected steps (the dial
    needs about 4/lr steps, the flow path, GD at lr·T, about 60/lr; never over the budget)."""
    c = spec.config
    p = c["problem"]
    lr = c["hparams"]["lr"]
    flow = bool(c["hparams"].get("flow", False)) or c["method"] == "gd"
    steps = min(float(c["budget"]["num_steps"]), (60.0 if flow else 4.0) / lr)
    return 4.0 * p["n"] ** 2 * p["m"] * steps


class DialExperiment:
    """The dial and FlowAdam on the sensing testbed as a sweep experiment."""

    name = NAME
    description = "the anisotropy dial (p, 'rms'/'geomean') and FlowAdam rows on matrix sensing"

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).parts()

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)

    def batch_key(self, spec: RunSpec) -> Hashable:
        c = spec.config
        return (c["kind"], repr(c["problem"]), repr(c["budget"]), c["dtype"])

    def run_batch(
        self, specs: Sequence[RunSpec], *, device: torch.device, progress: bool
    ) -> list[RunResult]:
        if specs[0].config["kind"] == ABLATION_KIND:
            return run_ablation(specs, device=device)
        return train_factored_batch(specs, device=device, progress=progress)

    def batch_cost(self, specs: Sequence[RunSpec]) -> float:
        """A rough flop count of a batch, used only to balance parallel workers."""
        return sum(_run_cost(s) for s in specs)

    def split_batch(self, specs: Sequence[RunSpec], parts: int) -> list[list[RunSpec]]:
        """Cut a batch into ``parts`` pieces of whole optimizers (same method and non-lr
        hyperparameters; for the ablation, whole variants), balanced by :meth:`batch_cost`.
        Runs never interact, so results do not depend on the cut (up to round-off)."""
        if parts <= 1:
            return [list(specs)]
        groups: dict[str, list[RunSpec]] = {}
        for spec in specs:
            c = spec.config
            if c["kind"] == ABLATION_KIND:  # one variant: all its seeds and lrs together
                key = c["variant"]
            else:
                key = repr((c["method"], sorted((k, v) for k, v in c["hparams"].items()
                                                if k != "lr")))
            groups.setdefault(key, []).append(spec)
        return sweep.balanced_bins(list(groups.values()), parts, self.batch_cost)


EXPERIMENT = DialExperiment()

# --------------------------------------------------------------------------------------------
# records for the chapter
# --------------------------------------------------------------------------------------------


def records_dir(scale: str | None = None, root: str | Path | None = None) -> Path:
    """``<root>/results/dial/<scale>`` (:func:`gaugekit.runs.collection.records_dir`)."""
    return collection.records_dir(NAME, get_config(scale).scale, root)


collect = collection.collector(EXPERIMENT, get_config)


# --------------------------------------------------------------------------------------------
# summaries
# --------------------------------------------------------------------------------------------


def seed_stats(values: Sequence[float], ddof: int = 1) -> tuple[float, float]:
    """Mean and standard deviation: the sample one for ``ddof=1`` (``nan`` for fewer than two
    values), the population one (``np.std``, the paper's ``collect.py``) for ``ddof=0``."""
    if ddof not in (0, 1):
        raise ValueError(f"Invalid ddof: {ddof!r}; expected 0 or 1")
    vals = [float(v) for v in values]
    if not vals or any(v is None or not math.isfinite(v) for v in vals):
        return math.nan, math.nan
    if ddof == 0:
        return statistics.fmean(vals), statistics.pstdev(vals)
    return statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else math.nan


def _power(record: Mapping[str, Any]) -> float:
    return float(record["config"]["hparams"]["precond_power"])


def _row(s: Selection) -> dict[str, Any]:
    recs = [r["metrics"]["rec"] for r in s.runs]
    mean, sd = seed_stats(recs) if s.runs else (math.nan, math.nan)
    return {
        "lr": s.value, "gated": s.gated, "at_grid_edge": s.at_grid_edge,
        "at_lowest_lr": bool(s.grid) and s.value == s.grid[0],
        "rec": mean, "rec_sd": sd, "rec_seeds": recs,
        "effective_rank": s.mean("effective_rank"), "steps": s.mean("steps"),
        "train_loss_mean": s.mean("train_loss"),
        "all_interpolated": bool(s.runs) and all(r["metrics"]["interpolated"] for r in s.runs),
    }


def is_paper_setting(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every record is on the paper's problem at the paper's budget (or its 10×
    budget): published values describe only that setting, so summaries show them only then."""
    cfg = _paper_config()
    problem = cfg.problem.to_config()
    budgets = (cfg.budget.to_config(), cfg.long_budget.to_config())
    return bool(records) and all(r["config"]["problem"] == problem
                                 and r["config"]["budget"] in budgets for r in records)


def dial_rows(records: Sequence[Mapping[str, Any]], scalar: str,
              protocol: Protocol = PAPER_PROTOCOL) -> list[dict[str, Any]]:
    """One row per ``p`` (descending) of a dial part: the selection of ``protocol`` over lrs
    (:func:`_row` columns) and the published rec of that ``(scalar, p)`` (``nan`` if none, or
    if the records are not in the paper's setting)."""
    chosen = select(records, protocol, group_by="config.hparams.precond_power")
    published = PUBLISHED_DIAL.get(scalar, {}) if is_paper_setting(records) else {}
    if scalar == "geomean" and published:
        published = {1.0: PUBLISHED_DIAL["rms"][1.0], **published}
    rows = []
    for p in sorted(chosen, reverse=True):
        rows.append({"p": float(p), "scalar": scalar, **_row(chosen[p]),
                     "published": published.get(float(p), math.nan)})
    return rows


def fixed_lr_table(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The fixed-lr arm of a dial part: mean rec and effective rank per (lr, p), whether every
    seed interpolated, and per lr whether rec and effective rank fall monotonically as ``p``
    goes from 1 to 0 over the cells where every seed interpolated."""
    cells: dict[tuple[float, float], list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((float(r["config"]["hparams"]["lr"]), _power(r)), []).append(r)
    lrs = sorted({lr for lr, _ in cells})
    powers = sorted({p for _, p in cells}, reverse=True)

    def grid(metric: str) -> list[list[float]]:
        return [[mean_metric(cells.get((lr, p), []), metric) for p in powers] for lr in lrs]

    ok = [[bool(cells.get((lr, p))) and all(x["status"] == "ok" and x["metrics"]["interpolated"]
                                            for x in cells[(lr, p)]) for p in powers]
          for lr in lrs]
    rec, erank = grid("rec"), grid("effective_rank")
    paper = is_paper_setting(records)

    def monotone(row: list[float], flags: list[bool]) -> bool:
        vals = [v for v, f in zip(row, flags, strict=True) if f]
        return len(vals) >= 2 and all(b < a for a, b in zip(vals, vals[1:], strict=False))

    return {
        "lrs": lrs, "powers": powers, "rec": rec, "effective_rank": erank,
        "interpolated": ok,
        "monotone_rec": [monotone(rec[i], ok[i]) for i in range(len(lrs))],
        "monotone_erank": [monotone(erank[i], ok[i]) for i in range(len(lrs))],
        "published": [[(PUBLISHED_FIXED_LR.get(lr, {}).get(p, math.nan) if paper else math.nan)
                       for p in powers] for lr in lrs],
    }


def published_lr_edge(records: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """:data:`PUBLISHED_LR_EDGE` when ``records`` are in the paper's setting, else ``None``."""
    return dict(PUBLISHED_LR_EDGE) if is_paper_setting(records) else None


def lr_edge_rows(records: Sequence[Mapping[str, Any]], ddof: int = 1) -> list[dict[str, Any]]:
    """Per (p, lr) of ``lr_edge``: mean ± sd of rec over seeds (``ddof`` as in
    :func:`seed_stats`), effective rank, steps, how many seeds interpolated (below ``tol``) and
    how many finished ``ok``."""
    cells: dict[tuple[float, float], list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((_power(r), float(r["config"]["hparams"]["lr"])), []).append(r)
    rows = []
    for (p, lr), runs in sorted(cells.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        done = [r for r in runs if r["status"] == "ok"]
        mean, sd = (seed_stats([r["metrics"]["rec"] for r in done], ddof) if done
                    else (math.nan,) * 2)
        rows.append({
            "p": p, "lr": lr, "seeds": len(runs), "ok": len(done),
            "interpolated": sum(bool(r["metrics"]["interpolated"]) for r in done),
            "rec": mean, "rec_sd": sd, "effective_rank": mean_metric(done, "effective_rank"),
            "steps": mean_metric(done, "steps"), "train_loss_max": max(
                (r["metrics"]["train_loss"] for r in done), default=math.nan),
        })
    return rows


def flow_row_name(record: Mapping[str, Any]) -> str:
    """The name in :data:`FLOW_ROWS` of a FlowAdam record (by its hyperparameters), or
    ``"other"``."""
    hp = {k: v for k, v in record["config"]["hparams"].items() if k != "lr"}
    for name in FLOW_ROWS:
        want = flow_hparams(name)
        if all(_same(hp.get(k), v) for k, v in want.items()):
            return name
    return "other"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b


def flow_rows(records: Sequence[Mapping[str, Any]],
              protocol: Protocol = FLOW_ROWS_PROTOCOL) -> list[dict[str, Any]]:
    """One row per FlowAdam row of ``flow_rows`` (order of :data:`FLOW_ROWS`): the selection of
    ``protocol`` over lrs (by default the paper's for these rows, :data:`FLOW_ROWS_PROTOCOL`)
    and the published value (``nan`` if none)."""
    tagged = [{**r, "row": flow_row_name(r)} for r in records]
    chosen = select(tagged, protocol, group_by="row")
    published = PUBLISHED_FLOW_ROWS if is_paper_setting(records) else {}
    rows = []
    for name, (label, _, _) in FLOW_ROWS.items():
        if name not in chosen:
            continue
        rows.append({"row": name, "label": label, **_row(chosen[name]),
                     "published": published.get(name, math.nan)})
    return rows


def strict_protocol() -> Protocol:
    """The book's rule (:data:`~gaugekit.runs.selection.ORACLE`): every seed below the
    interpolation bar."""
    return ORACLE


# --------------------------------------------------------------------------------------------
# what the chapter says: numbers and sentences (glue names as keys), rows for its tables
# --------------------------------------------------------------------------------------------

_NBSP = "\u00a0"


def _fmt(x: Any, spec: str = ".4f") -> str | None:
    """``x`` formatted, or ``None`` (a table's dash) when it is missing or not finite."""
    return None if x is None or not math.isfinite(x) else format(x, spec)


def collect_chapter(config: DialConfig | None = None) -> tuple[dict[str, list], Any, Any]:
    """The records of every part the chapter shows (the long FlowAdam part may be missing:
    then it is empty) and what its two records notes say: ``(records, note, long_note)``,
    each note a :class:`~gaugekit.runs.collection.Collected` or a Markdown string for
    :func:`gaugekit.report.viz.records_note`."""
    config = config or get_config()
    data = collect(parts=[p for p in config.parts() if p != "flow_long"])
    records = dict(data.records)
    try:
        long_data = collect(parts=["flow_long"])
    except MissingRecords as missing:
        records["flow_long"] = []
        return records, data, f"The long FlowAdam part is not recorded yet: {missing}"
    records["flow_long"] = long_data.records["flow_long"]
    return records, data, long_data


def gd_reference(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[float, float]:
    """Plain GD at the dial's budget, selected by :data:`PAPER_PROTOCOL`: ``(rec, eff.
    rank)``, means over seeds (``nan`` if it has no selection)."""
    chosen = select(records["gd_reference"], PAPER_PROTOCOL)
    if "gd" not in chosen:
        return math.nan, math.nan
    return chosen["gd"].mean("rec"), chosen["gd"].mean("effective_rank")


def dial_table(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The dial's recovery table, one row per (scalar, p): the paper's dial rule's lr (a star
    when it is the grid's lowest), ``rec ± sd`` over seeds beside the published rec, steps,
    mean training loss, and the stricter rule's ``rec (lr)`` (every seed below the bar)."""
    rows = []
    for s in ("rms", "geomean"):
        strict = {r["p"]: r for r in dial_rows(records[f"dial_{s}"], s, ORACLE)}
        for r in dial_rows(records[f"dial_{s}"], s):
            other = strict.get(r["p"], {})
            rows.append({
                **r, "lr_text": (None if r["lr"] is None else
                                 f"{r['lr']:g}" + ("*" if r["at_lowest_lr"] else "")),
                "rec_text": (None if _fmt(r["rec"]) is None else
                             f"{r['rec']:.4f}{_NBSP}±{_NBSP}{_fmt(r['rec_sd']) or '—'}"),
                "strict_text": (None if _fmt(other.get("rec")) is None else
                                f"{other['rec']:.4f}{_NBSP}({other['lr']:g})"),
            })
    return rows


def dial_numbers(records: Mapping[str, Sequence[Mapping[str, Any]]],
                 config: DialConfig | None = None) -> dict[str, Any]:
    """The dial table's numbers for the text: the protocol and budget, GD's reference, the
    published claim, per (scalar, p) the selection's rec, published rec, steps and effective
    rank (``dial_<scalar>_p<100 p>_…``), whether the RMS column falls at every step, the
    largest difference from a published cell and how many selections sit at the lowest lr."""
    config = config or get_config()
    gd_rec, _ = gd_reference(records)
    out: dict[str, Any] = {
        "dial_check": config.budget.check_every, "dial_tol": config.budget.tol,
        "dial_budget": config.budget.num_steps, "dial_planted": config.problem.r,
        "dial_gd_rec": gd_rec, "dial_gd_published": PUBLISHED_GD,
        "dial_pub_steps_p1": PUBLISHED_DIAL_STEPS[1.0],
        "dial_pub_steps_p0": PUBLISHED_DIAL_STEPS[0.0],
    }
    for p, value in PUBLISHED_DIAL["rms"].items():  # the claim quotes every published p
        out[f"dial_claim_p{round(100 * p)}"] = value
    dial = {s: dial_rows(records[f"dial_{s}"], s) for s in ("rms", "geomean")}
    for s, rows in dial.items():
        for r in rows:
            tag = f"dial_{s}_p{round(100 * r['p'])}"
            out.update({f"{tag}_rec": r["rec"], f"{tag}_pub": r["published"],
                        f"{tag}_steps": r["steps"], f"{tag}_erank": r["effective_rank"]})
    recs = [r["rec"] for r in dial["rms"]]  # p from 1 down to 0
    falls = all(b < a for a, b in zip(recs, recs[1:], strict=False))
    out["dial_monotone"] = "falls at every step" if falls else "does not fall at every step"
    gaps = [abs(r["rec"] - r["published"]) for rows in dial.values() for r in rows
            if math.isfinite(r["published"]) and math.isfinite(r["rec"])]
    out["dial_max_gap"] = max(gaps) if gaps else math.nan
    out["dial_num_compared"] = len(gaps)
    lowest = [r for rows in dial.values() for r in rows if r["p"] < 1]
    out["dial_lowest_count"] = sum(r["at_lowest_lr"] for r in lowest)
    out["dial_lowest_total"] = len(lowest)
    out["dial_lowest_verdict"] = (
        "for these the grid does not bracket the optimum, which the next two sections look at"
        if out["dial_lowest_count"] else "the grid brackets every optimum")
    return out


def fixed_lr_numbers(fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The fixed-lr arm (:func:`fixed_lr_table`) for the text: at how many lrs rec and the
    effective rank fall monotonically in ``p`` (and at which not), how many cells reached the
    bar on every seed, and the two largest differences from the published matrix."""
    not_mono = [lr for lr, ok in zip(fixed["lrs"], fixed["monotone_rec"], strict=True)
                if not ok]
    gaps = sorted((abs(a - b), lr, p)
                  for lr, ra, rb in zip(fixed["lrs"], fixed["rec"], fixed["published"],
                                        strict=True)
                  for p, a, b in zip(fixed["powers"], ra, rb, strict=True)
                  if math.isfinite(a) and math.isfinite(b))
    worst = gaps[-1] if gaps else (math.nan, math.nan, math.nan)
    return {
        "fixed_mono_count": len(fixed["lrs"]) - len(not_mono),
        "fixed_num_lrs": len(fixed["lrs"]),
        "fixed_not_mono": ", ".join(f"{lr:g}" for lr in not_mono) or "none",
        "fixed_erank_mono_count": sum(fixed["monotone_erank"]),
        "fixed_cells_ok": sum(v for row in fixed["interpolated"] for v in row),
        "fixed_cells": len(fixed["lrs"]) * len(fixed["powers"]),
        "fixed_max_gap": worst[0],
        "fixed_max_gap_cell": f"lr {worst[1]:g}, p = {worst[2]:g}" if gaps else "—",
        "fixed_second_gap": gaps[-2][0] if len(gaps) > 1 else math.nan,
    }


def lr_edge_table(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``lr_edge`` grid as table rows: p, lr, ``rec ± sd`` (sample sd), seeds below the
    bar out of seeds run, mean steps."""
    return [{**r, "rec_text": (None if _fmt(r["rec"]) is None else
                               f"{r['rec']:.4f}{_NBSP}±{_NBSP}{_fmt(r['rec_sd']) or '—'}"),
             "below": f"{r['interpolated']} of {r['seeds']}"}
            for r in lr_edge_rows(records)]


def lr_edge_numbers(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The lr edge for the text: the published cell and ours computed as the paper's
    (population sd), the best cell of each ``p`` where every seed reached the bar, the
    change of rec across the grid per ``p``, and where the best ``p = 0`` cell sits."""
    edge = lr_edge_rows(records)
    pub = PUBLISHED_LR_EDGE
    at_pub = next((r for r in lr_edge_rows(records, ddof=pub["sd_ddof"])
                   if (r["p"], r["lr"]) == (pub["p"], pub["lr"])), {})
    out: dict[str, Any] = {
        "edge_pub_rec": pub["rec"], "edge_pub_sd": pub["rec_sd"], "edge_pub_lr": pub["lr"],
        "edge_pub_seeds": pub["seeds"],
        "edge_sd_kind": "population" if pub["sd_ddof"] == 0 else "sample",
        "edge_rec": at_pub.get("rec", math.nan), "edge_sd": at_pub.get("rec_sd", math.nan),
        "edge_interp": at_pub.get("interpolated", 0), "edge_seeds": at_pub.get("seeds", 0),
        "edge_steps": at_pub.get("steps", math.nan),
        "edge_min_lr": min((r["lr"] for r in edge), default=math.nan),
        "edge_detail": (f"{at_pub['interpolated']} of them below the bar, in "
                        f"{at_pub['steps']:.0f} steps on average" if at_pub.get("seeds")
                        else "this scale's grid has no run at that learning rate"),
    }
    full = [r for r in edge if r["interpolated"] == r["seeds"] and r["seeds"]]
    for p in sorted({r["p"] for r in edge}):
        rows_p = [r for r in full if r["p"] == p]
        best = min(rows_p, key=lambda r: r["rec"]) if rows_p else {}
        tag = f"p{round(100 * p)}"
        out[f"edge_best_{tag}_rec"] = best.get("rec", math.nan)
        out[f"edge_best_{tag}_sd"] = best.get("rec_sd", math.nan)
        out[f"edge_best_{tag}_lr"] = best.get("lr", math.nan)
    for p in (0.0, 1.0):
        rows_p = sorted((r for r in edge if r["p"] == p), key=lambda r: r["lr"])
        out[f"edge_change_p{round(100 * p)}"] = (rows_p[0]["rec"] - rows_p[-1]["rec"]
                                                 if rows_p else math.nan)
    gap = abs(out.get("edge_best_p100_rec", math.nan) - out.get("edge_best_p0_rec", math.nan))
    change = max(abs(out["edge_change_p0"]), abs(out["edge_change_p100"]))
    out["edge_gap_verdict"] = (
        "stays far larger than either change" if gap >= 3 * change else
        "stays larger than either change" if gap > change else
        "is not larger than the larger change" if gap <= change else
        "cannot be compared at this scale")
    best_p0 = min((r for r in full if r["p"] == 0.0), key=lambda r: r["rec"], default={})
    out["edge_best_p0_where"] = (
        "again the lowest learning rate tried"
        if best_p0 and best_p0["lr"] == out["edge_min_lr"] else "inside the grid")
    return out


def flow_published(name: str) -> tuple[float, str]:
    """``(value, mark)``: the published rec of FlowAdam row ``name`` as the chapter quotes it
    (``nan`` if none). The selected rows of :data:`PUBLISHED_FLOW_ROWS` have no mark; the
    invariant row has the figure quoted at one lr and 30k steps
    (:data:`PUBLISHED_FLOW_SHORT_RMS`), marked ``"†"``: its runs did not reach the bar, so it
    is no selection."""
    if name in PUBLISHED_FLOW_ROWS:
        return PUBLISHED_FLOW_ROWS[name], ""
    if name == "globalnorm_p0_rms":
        return PUBLISHED_FLOW_SHORT_RMS["rec"], "†"
    return math.nan, ""


def flow_table(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """FlowAdam's rows as table rows: the paper's rule for them (:data:`FLOW_ROWS_PROTOCOL`)
    with lr, ``rec ± sd``, the published rec (:func:`flow_published`, in the paper's setting
    only), steps, mean training loss and whether every seed reached the bar; then the older,
    looser gate (:data:`PAPER_PROTOCOL`): ``rec (lr)``, a star when some seed stayed above
    the bar."""
    loose = {r["row"]: r for r in flow_rows(records, PAPER_PROTOCOL)}
    paper = is_paper_setting(records)
    rows = []
    for r in flow_rows(records):
        value, mark = flow_published(r["row"])
        s = loose.get(r["row"], {})
        rows.append({
            **r, "lr_text": _fmt(r["lr"], "g") if r["lr"] is not None else None,
            "rec_text": (None if _fmt(r["rec"]) is None else
                         f"{r['rec']:.4f}{_NBSP}±{_NBSP}{_fmt(r['rec_sd']) or '—'}"),
            "published_text": (f"{value:g}{mark}" if mark else _fmt(value)) if paper else None,
            "published_quoted": value,
            "interp": "yes" if r["all_interpolated"] else "no",
            "loose_text": (None if _fmt(s.get("rec")) is None else
                           f"{s['rec']:.4f}" + ("" if s["all_interpolated"] else "*")
                           + f"{_NBSP}({s['lr']:g})"),
            "loose_rec": s.get("rec", math.nan), "loose_lr": s.get("lr"),
        })
    return rows


def flow_numbers(records: Mapping[str, Sequence[Mapping[str, Any]]],
                 config: DialConfig | None = None) -> dict[str, Any]:
    """FlowAdam's rows, its invariant row at the quoted lr and 30k steps, and its long run,
    for the text: per row of :data:`FLOW_ROWS` the selection's rec and lr under both gates
    and the published value (the same as the table's, :func:`flow_published`); the quoted
    cell's mean rec, worst training loss and seeds below the bar; the long run's mean ± sd,
    seeds below the bar and steps, beside the published ones."""
    config = config or get_config()
    table = {r["row"]: r for r in flow_table(records["flow_rows"])}
    out: dict[str, Any] = {}
    for name in FLOW_ROWS:
        r = table.get(name, {})
        out[f"flowrow_{name}_rec"] = r.get("rec", math.nan)
        out[f"flowrow_{name}_lr"] = r.get("lr") or math.nan
        out[f"flowrow_{name}_pub"] = flow_published(name)[0]
        out[f"flowrow_{name}_interp"] = "yes" if r.get("all_interpolated") else "no"
        out[f"flowrow_{name}_loose_rec"] = r.get("loose_rec", math.nan)
        out[f"flowrow_{name}_loose_lr"] = r.get("loose_lr") or math.nan
    paper = is_paper_setting(records["flow_rows"])  # published rows describe only that
    compared = [abs(r["rec"] - value) for name, r in table.items()
                for value in [PUBLISHED_FLOW_ROWS.get(name, math.nan)]
                if paper and math.isfinite(value) and math.isfinite(r["rec"])]
    out["flow_max_gap"] = max(compared) if compared else math.nan
    out["flow_num_compared"] = len(compared)
    out["flow_loose_above"] = sum(1 for r in table.values()
                                  if math.isfinite(r["loose_rec"])
                                  and "*" in (r["loose_text"] or ""))
    out["flow_rows_n"] = len(table)
    short_cfg = PUBLISHED_FLOW_SHORT_RMS
    short = [x for x in records["flow_rows"]
             if flow_row_name(x) == "globalnorm_p0_rms"
             and x["config"]["hparams"]["lr"] == short_cfg["lr"] and x["status"] == "ok"]
    out.update({
        "short_rec": seed_stats([x["metrics"]["rec"] for x in short])[0] if short
        else math.nan,
        "short_loss_max": max((x["metrics"]["train_loss"] for x in short),
                              default=math.nan),
        "short_interp": sum(bool(x["metrics"]["interpolated"]) for x in short),
        "short_seeds": len(short),
        # the quoted figure, as the table shows it (its invariant row)
        "short_pub_rec": flow_published("globalnorm_p0_rms")[0],
        "short_lr": short_cfg["lr"], "short_pub_loss": short_cfg["train_loss"],
    })
    below = bool(short) and out["short_interp"] == len(short)
    out["short_verdict"] = ("has no run at this scale" if not short else
                            "reaches the bar" if below else "does not reach the bar")
    out["short_reading"] = ("this scale has no run at that learning rate" if not short else
                            "there every seed interpolates" if below else
                            "that number is not an interpolating run's")
    long_runs = [x for x in records["flow_long"] if x["status"] == "ok"]
    mean, sd = (seed_stats([x["metrics"]["rec"] for x in long_runs]) if long_runs
                else (math.nan, math.nan))
    steps = [x["metrics"]["steps"] for x in long_runs]
    pub = PUBLISHED_FLOW_LONG
    out.update({
        "long_rec": mean, "long_sd": sd,
        "long_interp": sum(bool(x["metrics"]["interpolated"]) for x in long_runs),
        "long_seeds": len(config.specs("flow_long")), "long_done": len(long_runs),
        "long_steps_min": min(steps, default=math.nan),
        "long_steps_max": max(steps, default=math.nan),
        "long_budget": config.long_budget.num_steps, "long_lr": config.long_lr,
        "long_pub_rec": pub["rec"], "long_pub_seeds": pub["seeds"],
        "long_pub_sd": pub["rec_sd"], "long_pub_budget": pub["num_steps"],
        "long_pub_steps_min": pub["steps_min"], "long_pub_steps_max": pub["steps_max"],
    })
    return out
