r"""The anisotropy dial's recovery table and FlowAdam's sensing rows (chapter 5).

The dial is FlowAdam with the flow path off (:class:`~gaugekit.optim.FlowAdam`,
``flow=False``): Adam whose denominator is ``s_i^p s̄^{1−p} + ε`` with ``s_i = √v̂_i`` and one
shared scalar ``s̄`` per run, ``'rms'`` (``√(mean v̂)``, gauge-invariant) or ``'geomean'``
(``exp(mean log s_i)``). ``p = 1`` is Adam, ``p = 0`` with ``'rms'`` is shared-scale Adam. The
runs are ordinary matrix-sensing runs (``W = U Vᵀ``, :mod:`gaugebook.sensing.measurements`)
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
the same lrs, not on ours); the book's :data:`~gaugebook.engine.selection.ORACLE` rule asks
that *every* seed be below the bar. The chapter's summaries (:mod:`gaugebook.dial.dial_summary`:
:func:`~gaugebook.dial.dial_summary.dial_rows`, :func:`~gaugebook.dial.dial_summary.flow_rows`)
take any of them.

Spread. :func:`~gaugebook.dial.dial_summary.seed_stats` gives the sample standard deviation
(``ddof=1``) by default; the paper's ``collect.py`` prints the population one (``np.std``,
``ddof=0``) and its ``dial_flowlong.py`` the sample one, so each published spread carries its
``sd_ddof`` and is compared with ours computed the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gaugebook.dial import flow_runs as fx
from gaugebook.engine import collection, sweep
from gaugebook.engine.scales import ScaleConfig, Scales
from gaugebook.engine.selection import ORACLE_MEAN, Protocol, mean_metric
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.measurements import INIT_SEED_OFFSET, default_num_measurements
from gaugebook.sensing.run_specs import Budget, Problem, factored_run
from gaugebook.sensing.sensing_runs import PAPER_HPARAMS, PAPER_LR_GRIDS
from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS

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


#: The selections of the paper's dial and FlowAdam scripts (the module docstring's "Selection").
PAPER_PROTOCOL = Protocol(
    "paper_dial",
    "lowest mean rec among lrs with no diverged seed and mean train loss < 1e-4 (the paper's "
    "dial script)",
    score=lambda runs: mean_metric(runs, "rec"),
    fallback=lambda runs: mean_metric(runs, "rec") + 10.0,
    gate=_paper_gate,
    gate_text="mean training loss over seeds below 1e-4",
)
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
class DialConfig(ScaleConfig):
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

    @property
    def part_names(self) -> tuple[str, ...]:
        return ("dial_rms", "dial_geomean", "gd_reference", "lr_edge", "flow_rows", "flow_long",
                "flow_ablation")

    def _spec(self, part: str, method: str, hparams: Mapping[str, Any], lr: float, seed: int,
              budget: Budget) -> RunSpec:
        return RunSpec(NAME, part, *factored_run(self.problem.to_config(), method, hparams, lr,
                                                 "constant", budget, seed, self.dtype))

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
            return ablation_specs(fx.flow_adam_config(self.scale))
        raise ValueError(f"Invalid part: {part!r}; expected one of {self.part_names}")


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


get_config = Scales(paper=_paper_config, quick=_quick_config)


# --------------------------------------------------------------------------------------------
# the ablation of the chapter's earlier sections, as records
# --------------------------------------------------------------------------------------------

#: Config kind of an ablation run: one (variant, seed, lr) of
#: :func:`gaugebook.dial.flow_runs.train_runs`.
ABLATION_KIND = "flow_ablation"


def ablation_specs(config: fx.FlowAdamConfig) -> list[RunSpec]:
    """One run per (variant of :func:`~gaugebook.dial.flow_runs.ablation_variants`, seed,
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
        fx.flow_adam_config("paper"), scale="records", problem=Problem(**c["problem"]),
        budget=Budget(**c["budget"]), seeds=tuple(sorted({s.config["seed"] for s in specs})),
        lrs=tuple(sorted({s.config["lr"] for s in specs})),
        dial_factors=tuple(c["dial_factors"]), stiffness_grid=tuple(c["stiffness_grid"]),
        dtype=getattr(torch, c["dtype"]),
    )


def run_ablation(specs: Sequence[RunSpec], *, device: torch.device | str | None = None
                 ) -> list[RunResult]:
    """Train the ablation runs ``specs`` stacked (:func:`~gaugebook.dial.flow_runs.
    train_runs`) and return one record per spec: its metrics (``steps`` is its stop)."""
    config = _ablation_config(specs)
    variants = fx.ablation_variants(config)
    runs = [(variants[s.config["variant"]], s.config["seed"], s.config["lr"]) for s in specs]
    return [RunResult("ok", m) for m in fx.train_runs(runs, config, device=device)]


def ablation_results(records: Sequence[Mapping[str, Any]]) -> dict[str, fx.RunColumns]:
    """The records of ``flow_ablation`` as :func:`~gaugebook.dial.flow_runs.train_variants`
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
    """Guessed flops of a run: sensing products per step times the expected steps (the dial
    needs about 4/lr steps, the flow path, GD at lr·T, about 60/lr; never over the budget; an
    ablation run steps through the whole budget)."""
    c = spec.config
    p = c["problem"]
    steps = float(c["budget"]["num_steps"])
    if c["kind"] != ABLATION_KIND:
        flow = bool(c["hparams"].get("flow", False)) or c["method"] == "gd"
        steps = min(steps, (60.0 if flow else 4.0) / c["hparams"]["lr"])
    return 4.0 * p["n"] ** 2 * p["m"] * steps


class DialExperiment(ms.MatrixSensingZoo):
    """The dial and FlowAdam on the sensing testbed as a sweep experiment: the zoo's batch key,
    training and split for the factored runs (:class:`~gaugebook.sensing.sensing_runs.
    MatrixSensingZoo`), the ablation's own."""

    name = NAME
    description = "the anisotropy dial (p, 'rms'/'geomean') and FlowAdam rows on matrix sensing"

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).part_names

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)

    def run_batch(
        self, specs: Sequence[RunSpec], *, device: torch.device, progress: bool
    ) -> list[RunResult]:
        if specs[0].config["kind"] == ABLATION_KIND:
            return run_ablation(specs, device=device)
        return super().run_batch(specs, device=device, progress=progress)

    def batch_cost(self, specs: Sequence[RunSpec]) -> float:
        return sum(_run_cost(s) for s in specs)

    def split_batch(self, specs: Sequence[RunSpec], parts: int) -> list[list[RunSpec]]:
        """The zoo's split by :meth:`batch_cost`; the ablation's into whole variants (all their
        seeds and lrs together)."""
        if specs[0].config["kind"] != ABLATION_KIND:
            return super().split_batch(specs, parts)
        if parts <= 1:
            return [list(specs)]
        groups: dict[str, list[RunSpec]] = {}
        for spec in specs:
            groups.setdefault(spec.config["variant"], []).append(spec)
        return sweep.balanced_bins(list(groups.values()), parts, self.batch_cost)


EXPERIMENT = DialExperiment()

# --------------------------------------------------------------------------------------------
# records for the chapter
# --------------------------------------------------------------------------------------------


collect = collection.collector(EXPERIMENT, get_config)
