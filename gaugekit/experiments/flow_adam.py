r"""The anisotropy dial and FlowAdam as optimizers (the chapter ``ch-flowadam``).

Three measurements on the paper's matrix-sensing testbed (:mod:`gaugekit.problems.matrix_sensing`,
``W = U Vᵀ`` with ``U, V`` n×k, planted ``X_star`` of rank ``r``, ``m = 2 r (2n − r)``):

1. **the dial** ``p``: :func:`train_on_instance` runs one optimizer on one instance (to compare the
   dial's endpoints with Adam and shared-scale Adam), :func:`per_entry_log_lr` evaluates the
   per-entry learning rate ``lr / (s_i^p s̄^{1−p} + ε)`` on one frozen second moment, and
   :func:`dial_gauge_residuals` / :func:`audit_flow_adam` run the equivariance audit;
2. **the trigger rate** of the flow path: :func:`train_variants` trains every variant of
   :func:`ablation_variants` on every (seed, lr) of the config on the stacked factor trainer
   (:mod:`gaugekit.train.factors`), with the paper's stop rule, and keeps the flow counters at
   the stop; :func:`trigger_rates` divides the flow steps by the :func:`eligible_steps`;
3. **the ablation**: FlowAdam against the dial alone at smaller learning rates, plain GD at
   ``lr·T`` and :class:`DialThenClippedGD` (FlowAdam written out by hand for the case where the
   flow fires at every eligible step), compared with the paper's selection protocol
   (:func:`select_lr`, the ``ORACLE`` rule of :mod:`gaugekit.runs.selection`).

Sizes, seeds, grids and budgets live in :class:`FlowAdamConfig`, one per scale
(:func:`flow_adam_config`); the chapter never looks at the scale.
"""

# Developer note (layers, DESIGN.md): floor 3.

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gaugekit.audit.factors import AuditResult, FactorRun, audit_equivariance, run_factor_optimizer
from gaugekit.config import get_device, get_scale
from gaugekit.experiments.matrix_sensing import Budget, Problem
from gaugekit.gauge import relative_distance
from gaugekit.optim import FlowAdam, make_optimizer, per_run
from gaugekit.optim.flow_adam import (
    FLOW_ADAM_PRESETS,
    clip_gradients,
    dial_coefficient,
    shared_scale_statistic,
)
from gaugekit.problems.matrix_sensing import (
    default_num_measurements,
    init_factors,
    make_instance,
    sensing_loss,
)
from gaugekit.runs.selection import ORACLE, select
from gaugekit.runs.spec import RunSpec
from gaugekit.train.factors import train_factored_batch

__all__ = [
    "AUDIT_CASES",
    "CONFIGS",
    "FLOW_LABEL",
    "GD_LABEL",
    "FLOW_COUNTERS",
    "HAND_METHOD",
    "INVARIANT",
    "PROTOTYPE",
    "PUBLISHED_FLOW_VS_DIAL",
    "DialThenClippedGD",
    "FlowAdamConfig",
    "FlowAudit",
    "RunColumns",
    "Variant",
    "ablation_labels",
    "ablation_numbers",
    "ablation_rows",
    "ablation_variants",
    "audit_cases",
    "audit_flow_adam",
    "audit_numbers",
    "audit_rows",
    "best_selection",
    "dial_gauge_residuals",
    "describe",
    "dial_label",
    "distance_from_init",
    "eligible_steps",
    "final_factor_gap",
    "flow_counts",
    "flow_adam_config",
    "hand_numbers",
    "interpolated_by_lr",
    "lower_rec_count",
    "make_variant_optimizer",
    "mean_by_lr",
    "per_entry_log_lr",
    "relative_gap",
    "run_columns",
    "select_lr",
    "spread_ratios",
    "stiffness_label",
    "train_on_instance",
    "train_runs",
    "train_variants",
    "trigger_lines",
    "trigger_numbers",
    "trigger_rates",
    "trigger_share",
]

#: The gauge-invariant preset (p = 0, RMS scalar, global-norm clip c = 10) and the prototype's
#: configuration (p = 1, geometric mean, per-coordinate clip), both with the paper's triggers.
INVARIANT: Mapping[str, Any] = FLOW_ADAM_PRESETS["invariant"]
PROTOTYPE: Mapping[str, Any] = FLOW_ADAM_PRESETS["prototype"]

#: arXiv 2608.05136, Section 10: rec of FlowAdam-p = 0 (RMS, global-norm clip c = 10) and of the
#: dial alone (RMS, p = 0), both at lr = 1e-3 on the n = 40 testbed (3 seeds, 30 000 steps).
PUBLISHED_FLOW_VS_DIAL: Mapping[str, float] = {"flow": 0.1691, "dial": 0.2010, "lr": 1e-3}

#: Per-run counters kept at the stop by :func:`train_runs` (zero for non-flow variants).
FLOW_COUNTERS: tuple[str, ...] = ("flow_steps", "plateau_triggers", "stiff_triggers")

#: Per-run result columns (:func:`run_columns`): column name → tensor of shape ``(runs,)``.
RunColumns = dict[str, Tensor]


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowAdamConfig:
    """Everything the chapter measures, at one scale.

    ``problem``/``budget``: the testbed and the paper's stop rule (a run stops after the update
    of the first check step, every ``budget.check_every`` steps, at which its loss is below
    ``budget.tol``). ``seeds`` × ``lrs``: the runs of every variant. ``dial_factors``: the dial
    alone is run at ``lr × factor``. ``stiffness_grid``: the larger ``κ`` tried with the invariant
    preset. ``anisotropy_steps``: the Adam run whose second moment the dial is evaluated on.
    ``audit_powers``, ``audit_steps``, ``audit_lr``: the equivariance audit of the dial.
    """

    scale: str
    problem: Problem
    budget: Budget
    seeds: tuple[int, ...]
    lrs: tuple[float, ...]
    dial_factors: tuple[float, ...]
    stiffness_grid: tuple[float, ...]
    anisotropy_steps: int
    audit_powers: tuple[float, ...]
    audit_steps: int
    audit_lr: float = 1e-2
    dtype: torch.dtype = torch.float64


def _problem(n: int, r: int, k: int) -> Problem:
    return Problem(n=n, r=r, k=k, m=default_num_measurements(n, r), num_val=0, init_scale=1e-3)


#: paper: the paper's testbed and protocol (n = 40, r = 3, k = 40, m = 2·dof, initial scale 1e-3,
#: seeds 42/123/456, its FlowAdam lr grid, 30 000 steps, stop at a loss below 1e-7 checked every
#: 200 steps). quick: the same protocol on a smaller instance.
CONFIGS: dict[str, FlowAdamConfig] = {
    "quick": FlowAdamConfig(
        scale="quick", problem=_problem(20, 2, 20), budget=Budget(3000, 1e-7, 200),
        seeds=(42, 123), lrs=(1e-2, 3e-2), dial_factors=(1.0, 0.5, 0.25),
        stiffness_grid=(0.5, 1.0, 2.0), anisotropy_steps=200,
        audit_powers=(0.0, 1e-3, 1e-2, 0.1, 0.25, 0.5, 1.0), audit_steps=25,
    ),
    "paper": FlowAdamConfig(
        scale="paper", problem=_problem(40, 3, 40), budget=Budget(30000, 1e-7, 200),
        seeds=(42, 123, 456), lrs=(1e-3, 3e-3, 1e-2, 3e-2), dial_factors=(1.0, 0.5, 0.25),
        stiffness_grid=(0.5, 1.0, 2.0), anisotropy_steps=1000,
        audit_powers=(0.0, 1e-4, 1e-3, 1e-2, 0.1, 0.25, 0.5, 0.75, 1.0), audit_steps=25,
    ),
}


def flow_adam_config(scale: str | None = None) -> FlowAdamConfig:
    """The config at ``scale``; ``None`` reads :func:`gaugekit.get_scale` (``$GAUGEKIT_SCALE``)."""
    return CONFIGS[get_scale(scale)]


# --------------------------------------------------------------------------------------------
# the dial on one instance
# --------------------------------------------------------------------------------------------


def train_on_instance(
    make_optimizer: Callable[[list[Tensor]], Any],
    config: FlowAdamConfig,
    num_steps: int,
    *,
    seed: int | None = None,
    device: torch.device | str | None = None,
) -> FactorRun:
    """``num_steps`` steps of ``make_optimizer([U, V])`` on the testbed instance ``seed``.

    ``seed`` defaults to the config's first; ``(U₀, V₀)`` are that seed's initial factors and
    the loss is ``L(U, V) = mean_i (⟨A_i, U Vᵀ⟩ − y_i)²`` in ``config.dtype``, differentiated by
    autograd (:func:`gaugekit.audit.run_factor_optimizer`). ``result.iterates[-1]`` is
    ``(U_T, V_T)`` and ``result.optimizer`` keeps its state.
    """
    seed = config.seeds[0] if seed is None else seed
    p = config.problem
    on = {"dtype": config.dtype, "device": device}
    inst = make_instance(seed, p.n, p.r, p.m, **on)
    U0, V0 = init_factors(seed, p.n, p.k, p.init_scale, **on)
    return run_factor_optimizer(
        make_optimizer, U0, V0, lambda U, V: sensing_loss(U, V, inst.A, inst.y), num_steps
    )


def final_factor_gap(run: FactorRun, reference: FactorRun) -> float:
    """``max(‖U_T − U_T^ref‖_F / ‖U_T^ref‖_F, same for V)`` at the last step of two runs."""
    (U, V), (U_ref, V_ref) = run.iterates[-1], reference.iterates[-1]
    return max(relative_distance(U, U_ref).item(), relative_distance(V, V_ref).item())


def distance_from_init(run: FactorRun, config: FlowAdamConfig, *, seed: int | None = None) -> float:
    """``√(‖U_T − U₀‖²_F + ‖V_T − V₀‖²_F)``: how far a :func:`train_on_instance` run carried the
    factors from the initial ``(U₀, V₀)`` of instance ``seed`` (default: the config's first)."""
    seed = config.seeds[0] if seed is None else seed
    U, V = run.iterates[-1]
    p = config.problem
    U0, V0 = init_factors(seed, p.n, p.k, p.init_scale, dtype=U.dtype, device=U.device)
    return math.sqrt((U - U0).square().sum().item() + (V - V0).square().sum().item())


def per_entry_log_lr(
    optimizer: torch.optim.Optimizer, powers: Iterable[float]
) -> dict[float, Tensor]:
    r"""``log₁₀`` of the per-entry learning rate ``lr / (s_i^p s̄^{1−p} + ε)`` for each ``p``.

    Evaluated on the frozen state of ``optimizer`` (FlowAdam or Adam with the keys ``step`` and
    ``exp_avg_sq``, one group, no stacked runs): ``s_i = √v̂_i`` with ``v̂ = v / (1 − β₂ᵗ)`` and the
    RMS scalar ``s̄ = √(mean v̂)`` over every entry of every parameter. Returns ``p`` → a 1-D
    tensor over all entries (parameters concatenated in order). The ``log₁₀`` spread (standard
    deviation) of the ``p`` entry is ``p`` times Adam's, up to ε.
    """
    group = optimizer.param_groups[0]
    states = [optimizer.state[q] for q in group["params"]]
    v_all = [s["exp_avg_sq"] for s in states]
    step = int(states[0]["step"])
    beta2 = group["betas"][1]
    s_bar = shared_scale_statistic(v_all, [1 - beta2**step] * len(v_all), "rms", 0)
    out = {}
    for power in powers:
        coefs = [
            dial_coefficient(v, step=step, lr=group["lr"], beta1=0.0, beta2=beta2,
                             eps=group["eps"], power=power, shared=s_bar).expand_as(v)
            for v in v_all
        ]
        out[power] = torch.cat([(-c).log10().reshape(-1) for c in coefs])
    return out


# --------------------------------------------------------------------------------------------
# the gauge audit
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowAudit:
    """An audit of FlowAdam: the audit's result and the flow steps of its two runs (plain from
    ``(U₀, V₀)``, rotated from ``(U₀Q, V₀Q)``)."""

    result: AuditResult
    flow_steps: tuple[int, int]

    @property
    def min_flow_steps(self) -> int:
        """Flow steps of the run that took fewer: the flow fired at least this often in both."""
        return min(self.flow_steps)


def audit_flow_adam(config: FlowAdamConfig, **options: Any) -> FlowAudit:
    """Audit ``FlowAdam(params, lr=config.audit_lr, **options)`` for gauge equivariance.

    :func:`gaugekit.audit.audit_equivariance` on its default float64 sensing loss, for
    ``config.audit_steps`` steps, with ``torch.Generator().manual_seed(0)``; the residual is
    ``max_t ‖ΔU_t^Q − ΔU_t Q‖ / ‖ΔU_t Q‖`` (and ``V``).
    """
    made: list[FlowAdam] = []

    def factory(params: list[Tensor]) -> FlowAdam:
        made.append(FlowAdam(params, lr=config.audit_lr, **options))
        return made[-1]

    result = audit_equivariance(factory, num_steps=config.audit_steps,
                                generator=torch.Generator().manual_seed(0))
    # made: the plain, the rotated and the noise run, in that order
    plain, rotated = (int(opt.flow_counters()["flow_steps"]) for opt in made[:2])
    return FlowAudit(result, (plain, rotated))


def dial_gauge_residuals(config: FlowAdamConfig, scalar: str) -> list[float]:
    """The audit residual of the dial (flow off) with shared scalar ``scalar`` at each ``p`` of
    ``config.audit_powers``."""
    return [
        audit_flow_adam(config, precond_power=p, precond_scalar=scalar, flow=False).result.residual
        for p in config.audit_powers
    ]


# --------------------------------------------------------------------------------------------
# FlowAdam by hand, and the variants of the ablation
# --------------------------------------------------------------------------------------------


class DialThenClippedGD(FlowAdam):
    r"""FlowAdam written out for a flow path that fires at every eligible step.

    Steps ``t = 1 … warmup + 1``: the dial (``p = 0``, RMS, flow off, i.e. shared-scale Adam).
    Steps ``t > warmup + 1``: one Euler step of the clipped gradient flow,
    ``θ ← θ − lr · T · g · min(1, c / ‖g‖)`` with ``T = time_scale``, ``c = clip`` and ``‖g‖`` over
    all parameters of a run. FlowAdam's momentum blend never reaches ``θ`` then, so this equals
    ``FlowAdam(**INVARIANT, flow_warmup=warmup)`` whenever its flow fires at every step from
    ``warmup + 2`` on. Works from ``.grad`` (``step()`` takes no closure); ``lr`` is a float or a
    tensor of shape ``param.shape[:batch_dims]``. The step count is optimizer-wide state
    (``state["hand"]``), so it survives a compaction of the stack (:mod:`gaugekit.train.batching`).
    """

    def __init__(
        self,
        params: Sequence[Tensor],
        lr: float | Tensor,
        *,
        warmup: int,
        time_scale: float,
        clip: float,
        batch_dims: int = 0,
    ) -> None:
        super().__init__(params, lr=lr, precond_power=0.0, precond_scalar="rms", flow=False,
                         batch_dims=batch_dims)
        self.hand_lr, self.warmup, self.time_scale, self.clip = lr, warmup, time_scale, clip
        self.hand_batch_dims = batch_dims

    @torch.no_grad()
    def step(self, closure: None = None) -> None:
        """One dial step during the warm-up, one clipped gradient step after it."""
        hand = self.state["hand"]
        hand["steps"] = hand.get("steps", 0) + 1
        if hand["steps"] <= self.warmup + 1:
            super().step()
            return
        params = [p for group in self.param_groups for p in group["params"]]
        grads, b = [p.grad for p in params], self.hand_batch_dims
        dims = [tuple(range(b, g.ndim)) for g in grads]
        norm = sum(g.square().sum(dim=d) for g, d in zip(grads, dims, strict=True)).sqrt()
        clipped = clip_gradients(grads, "globalnorm", self.clip, norm, b)
        for p, c in zip(params, clipped, strict=True):
            p.sub_(per_run(self.hand_lr, p, b) * self.time_scale * c)


#: Method name of :class:`DialThenClippedGD` for :func:`make_variant_optimizer`.
HAND_METHOD = "dial_then_clipped_gd"


@dataclass(frozen=True)
class Variant:
    """One optimizer of the ablation: ``method`` (a registry name or :data:`HAND_METHOD`) with
    ``hparams`` besides ``lr``, trained at the config's learning rates times ``lr_factor``."""

    method: str
    hparams: Mapping[str, Any] = field(default_factory=dict)
    lr_factor: float = 1.0


def dial_label(factor: float) -> str:
    """Label of the dial alone (``p = 0``, flow off) at ``lr × factor``."""
    return f"dial p = 0, lr × {factor:g}"


def stiffness_label(kappa: float) -> str:
    """Label of the invariant preset with stiffness threshold ``κ``."""
    return f"FlowAdam (invariant, κ = {kappa:g})"


def ablation_variants(config: FlowAdamConfig) -> dict[str, Variant]:
    """The chapter's variants, by label: FlowAdam with the invariant preset and with the
    prototype's configuration, the invariant preset at each ``κ`` of ``config.stiffness_grid``,
    the dial alone at each ``lr × factor`` (:func:`dial_label`), GD at ``lr · T``, and
    :class:`DialThenClippedGD` (``"dial warm-up, then clipped GD"``)."""
    T, warmup, clip = INVARIANT["flow_time_scale"], INVARIANT["flow_warmup"], INVARIANT["flow_clip"]
    return {
        "FlowAdam (invariant)": Variant("flow_adam", dict(INVARIANT)),
        "FlowAdam (prototype)": Variant("flow_adam", dict(PROTOTYPE)),
        **{stiffness_label(kappa): Variant("flow_adam", {**INVARIANT, "flow_stiffness": kappa})
           for kappa in config.stiffness_grid},
        **{dial_label(c): Variant("flow_adam", {"precond_power": 0.0, "flow": False}, c)
           for c in config.dial_factors},
        "GD, lr × T": Variant("gd", {}, T),
        "dial warm-up, then clipped GD": Variant(
            HAND_METHOD, {"warmup": warmup, "time_scale": T, "clip": clip}),
    }


# --------------------------------------------------------------------------------------------
# the variants on the stacked trainer, with the paper's stop rule
# --------------------------------------------------------------------------------------------


def make_variant_optimizer(method: str, params: list[Tensor], **options: Any) -> Any:
    """The trainer's optimizer factory: :class:`DialThenClippedGD` for :data:`HAND_METHOD`,
    the zoo's registry otherwise."""
    if method == HAND_METHOD:
        return DialThenClippedGD(params, **options)
    return make_optimizer(method, params, **options)


def flow_counts(optimizer: Any) -> dict[str, Tensor]:
    """The :data:`FLOW_COUNTERS` of a FlowAdam with the flow path on, zeros for any other."""
    if isinstance(optimizer, FlowAdam) and optimizer.defaults["flow"]:
        counters = optimizer.flow_counters()
        return {key: counters[key] for key in FLOW_COUNTERS}
    first = optimizer.param_groups[0]["params"][0]
    return dict.fromkeys(FLOW_COUNTERS, torch.zeros(first.shape[0], dtype=torch.int64))


def train_runs(
    runs: Sequence[tuple[Variant, int, float]],
    config: FlowAdamConfig,
    *,
    clip_threshold: float = INVARIANT["flow_clip"],
    device: torch.device | str | None = None,
) -> list[dict[str, Any]]:
    """Train the runs ``(variant, seed, base lr)`` stacked, with
    :func:`gaugekit.train.factors.train_factored_batch`, and return each run's metrics.

    As in the paper's protocol a run stops after the update of the first check step at which
    its loss, evaluated before that update, is below ``config.budget.tol``; its factors and
    flow counters are kept there. Metrics: ``steps`` (updates taken), ``train_loss`` (at the
    stop: before its update if the run stopped at a check, after the last update if it ran out
    of budget), ``interpolated``, ``rec``, ``effective_rank``, ``clip_bound`` (steps with
    ``‖g‖ > clip_threshold`` up to the stop), ``lr`` (``base lr × lr_factor``) and the
    :data:`FLOW_COUNTERS`.
    """
    budget = {**config.budget.to_config(), "count_grad_norm_above": clip_threshold}
    base = {"kind": "factored", "problem": config.problem.to_config(), "schedule": "constant",
            "budget": budget, "dtype": str(config.dtype).removeprefix("torch.")}
    specs = [RunSpec("flow_adam", "variants", {
        **base, "method": v.method, "hparams": {**v.hparams, "lr": lr * v.lr_factor},
        "seed": seed}) for v, seed, lr in runs]
    results = train_factored_batch(specs, device=get_device(device),
                                   make_optimizer=make_variant_optimizer,
                                   optimizer_metrics=flow_counts)
    b = config.budget
    out = []
    for spec, result in zip(specs, results, strict=True):
        if result.status != "ok":
            raise RuntimeError(f"Invalid run {spec.config}: {result.status} {result.message}")
        m = result.metrics
        stopped = m["interpolated"] and m["steps"] % b.check_every == 0
        loss = m["train_loss"] if stopped else m["final_loss"]
        out.append({
            "train_loss": loss, "interpolated": stopped or loss < b.tol, "rec": m["rec"],
            "effective_rank": m["effective_rank"], "clip_bound": m["grad_norm_above"],
            "lr": spec.config["hparams"]["lr"], **{key: m[key] for key in FLOW_COUNTERS},
            "steps": m["steps"],
        })
    return out


def run_columns(runs: Sequence[tuple[int, float, Mapping[str, Any]]]) -> RunColumns:
    """Columns over the runs ``(seed, base lr, metrics of train_runs)``, sorted by seed, then
    lr: ``seed``, ``base_lr``, ``stop`` (the metrics' ``steps``) and every metric."""
    runs = sorted(runs, key=lambda run: run[:2])
    m = [metrics for _, _, metrics in runs]
    ints = ("stop", "clip_bound", *FLOW_COUNTERS)
    return {
        "seed": torch.tensor([seed for seed, _, _ in runs]),
        "base_lr": torch.tensor([lr for _, lr, _ in runs], dtype=torch.float64),
        "stop": torch.tensor([x["steps"] for x in m], dtype=torch.int64),
        **{k: torch.tensor([x[k] for x in m], dtype=torch.int64) for k in ints[1:]},
        **{k: torch.tensor([math.nan if x[k] is None else x[k] for x in m], dtype=torch.float64)
           for k in ("train_loss", "rec", "effective_rank", "lr")},
        "interpolated": torch.tensor([bool(x["interpolated"]) for x in m]),
    }


def train_variants(
    variants: Mapping[str, Variant], config: FlowAdamConfig, *,
    device: torch.device | str | None = None,
) -> dict[str, RunColumns]:
    """:func:`train_runs` of every variant on every (seed, lr) of ``config``, as label →
    :func:`run_columns`."""
    grid = [(seed, lr) for seed in config.seeds for lr in config.lrs]
    metrics = iter(train_runs([(v, s, lr) for v in variants.values() for s, lr in grid], config,
                              device=device))
    return {label: run_columns([(s, lr, next(metrics)) for s, lr in grid]) for label in variants}


# --------------------------------------------------------------------------------------------
# trigger rates
# --------------------------------------------------------------------------------------------


def eligible_steps(runs: RunColumns, warmup: int = INVARIANT["flow_warmup"]) -> Tensor:
    """Per run, the updates at which the flow could fire: those after step ``warmup + 1`` up to
    the stop, ``max(stop − warmup − 1, 1)``."""
    return (runs["stop"] - (warmup + 1)).clamp_min(1)


def trigger_rates(
    results: Mapping[str, RunColumns], warmup: int = INVARIANT["flow_warmup"]
) -> dict[str, Tensor]:
    """``flow_steps / eligible_steps`` per run (float64), for every label starting with
    ``"FlowAdam"``."""
    return {label: (r["flow_steps"] / eligible_steps(r, warmup)).to(torch.float64)
            for label, r in results.items() if label.startswith("FlowAdam")}


def trigger_share(runs: RunColumns, test: str) -> float:
    """Times the test ``test`` (``"stiff_triggers"`` or ``"plateau_triggers"``) fired over the
    flow steps taken, summed over runs (a step can fire both tests, so shares may add up to
    more than 1)."""
    return (runs[test].sum() / runs["flow_steps"].sum()).item()


# --------------------------------------------------------------------------------------------
# per-lr summaries and the paper's selection protocol
# --------------------------------------------------------------------------------------------


def mean_by_lr(runs: RunColumns, lrs: Sequence[float], key: str = "rec") -> list[float]:
    """Mean of column ``key`` over the seeds at each base learning rate of ``lrs``."""
    return [runs[key][runs["base_lr"] == lr].mean().item() for lr in lrs]


def interpolated_by_lr(runs: RunColumns, lrs: Sequence[float]) -> list[bool]:
    """Whether every seed reached the loss threshold, at each base learning rate of ``lrs``."""
    return [bool(runs["interpolated"][runs["base_lr"] == lr].all()) for lr in lrs]


def _records(runs: RunColumns) -> list[dict[str, Any]]:
    """The runs as minimal records for :func:`gaugekit.runs.selection.select`."""
    return [
        {"status": "ok", "config": {"method": "runs", "hparams": {"lr": lr}},
         "metrics": {"rec": rec, "interpolated": ok, "train_loss": loss}}
        for lr, rec, ok, loss in zip(runs["base_lr"].tolist(), runs["rec"].tolist(),
                                     runs["interpolated"].tolist(),
                                     runs["train_loss"].tolist(), strict=True)
    ]


def select_lr(runs: RunColumns) -> tuple[float, float]:
    """Table 2's rule: ``(mean rec, lr)`` at the base learning rate with the smallest mean
    ``rec`` among those at which every seed interpolated (ties: the smaller lr); ``(nan, nan)``
    when there is none. The ``ORACLE`` rule of :mod:`gaugekit.runs.selection` (the
    paper's FlowAdam script asks the mean over seeds to be below the bar instead:
    ``ORACLE_MEAN``)."""
    chosen = select(_records(runs), ORACLE)["runs"]
    if not chosen.gated:
        return math.nan, math.nan
    return chosen.score, chosen.value


def lower_rec_count(
    runs: RunColumns, reference: RunColumns, lrs: Sequence[float]
) -> tuple[int, int]:
    """``(wins, pairs)``: among the learning rates of ``lrs`` at which both sets of runs
    interpolated on every seed (``pairs``), those at which ``runs`` has the lower mean ``rec``."""
    both = [
        (a, b)
        for a, b, ok_a, ok_b in zip(mean_by_lr(runs, lrs), mean_by_lr(reference, lrs),
                                    interpolated_by_lr(runs, lrs),
                                    interpolated_by_lr(reference, lrs), strict=True)
        if ok_a and ok_b
    ]
    return sum(a < b for a, b in both), len(both)


def best_selection(results: Mapping[str, RunColumns], labels: Iterable[str]) -> tuple[float, float]:
    """The :func:`select_lr` with the smallest mean ``rec`` over the variants ``labels``
    (``(nan, nan)`` when none of them has a learning rate at which every seed interpolated)."""
    chosen = [select_lr(results[label]) for label in labels]
    finite = [c for c in chosen if not math.isnan(c[0])]
    return min(finite) if finite else (math.nan, math.nan)


# --------------------------------------------------------------------------------------------
# what the chapter says: numbers and sentences (glue names as keys), rows for its tables
# --------------------------------------------------------------------------------------------


def describe(config: FlowAdamConfig) -> str:
    """The testbed and grid of ``config`` in two short lines (for a page's setup output)."""
    p = config.problem
    seeds = ", ".join(str(s) for s in config.seeds)
    lrs = ", ".join(f"{lr:g}" for lr in config.lrs)
    return (f"testbed n = {p.n}, r = {p.r}, k = {p.k}; seeds {seeds}\n"
            f"lrs {lrs}; budget {config.budget.num_steps} steps")


def relative_gap(a: float, b: float) -> float:
    """``|a − b| / max(|a|, |b|)``: a relative difference that stays in ``[0, 1]`` for values
    of one sign (``0`` when both are ``0``), unlike ``|a − b| / |b|``, which a tiny ``b``
    blows up."""
    big = max(abs(a), abs(b))
    return abs(a - b) / big if big else 0.0


def spread_ratios(log_steps: Mapping[float, Tensor]) -> dict[float, float]:
    """The standard deviation of ``log₁₀`` of the per-entry learning rate at each ``p``
    (:func:`per_entry_log_lr`) over Adam's (``p = 1``)."""
    adam = log_steps[1.0].std().item()
    return {p: v.std().item() / adam for p, v in log_steps.items()}


#: The four FlowAdam configurations the chapter audits with the flow path on, and the short
#: names its glue keys use.
AUDIT_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "invariant preset": ("inv", dict(INVARIANT)),
    "invariant, per-coordinate clip": (
        "pc", {**INVARIANT, "flow_clip_mode": "percoord", "flow_clip": 0.05}),
    "invariant, geometric mean": ("geo", {**INVARIANT, "precond_scalar": "geomean"}),
    "prototype preset": ("proto", dict(PROTOTYPE)),
}


def audit_cases(config: FlowAdamConfig) -> dict[str, FlowAudit]:
    """:func:`audit_flow_adam` of each configuration of :data:`AUDIT_CASES`, by name."""
    return {name: audit_flow_adam(config, **options)
            for name, (_, options) in AUDIT_CASES.items()}


def audit_rows(audits: Mapping[str, FlowAudit]) -> list[dict[str, Any]]:
    """One table row per audit: residual, verdict, flow steps of the plain and rotated run."""
    return [{"name": name, "residual": a.result.residual,
             "verdict": a.result.verdict.replace(" ", "\u00a0"),
             "flow_steps": f"{a.flow_steps[0]} / {a.flow_steps[1]}"}
            for name, a in audits.items()]


def audit_numbers(config: FlowAdamConfig, residuals: Mapping[str, Sequence[float]],
                  audits: Mapping[str, FlowAudit]) -> dict[str, Any]:
    """The audit's numbers for the text: the dial's residual at ``p = 0`` for both scalars,
    at the smallest positive ``p`` and at ``p = 1``, the log–log slope over the first decade
    of ``p``, and the residual and flow steps of each audit of :data:`AUDIT_CASES`."""
    rms, powers = residuals["rms"], config.audit_powers
    out: dict[str, Any] = {
        "res_rms_p0": rms[0], "res_geo_p0": residuals["geomean"][0],
        "res_rms_small": rms[1], "p_small": powers[1], "res_rms_p1": rms[-1],
        "res_slope": math.log10(rms[2] / rms[1]) / math.log10(powers[2] / powers[1]),
        "audit_steps": config.audit_steps,
    }
    for name, audited in audits.items():
        key = AUDIT_CASES[name][0]
        out[f"audit_{key}_res"] = audited.result.residual
        out[f"audit_{key}_flows"] = audited.min_flow_steps
    others = [a for name, a in audits.items() if name != "invariant preset"]
    broken = sum(not a.result.equivariant for a in others)
    out["audit_broken_text"] = (
        "each non-invariant choice alone breaks the gauge" if broken == len(others) else
        f"{broken} of the {len(others)} non-invariant choices break the gauge")
    return out


def trigger_numbers(results: Mapping[str, RunColumns], config: FlowAdamConfig,
                    warmup: int = INVARIANT["flow_warmup"]) -> dict[str, Any]:
    """How often the flow path fired (:func:`trigger_rates`), for the text: the smallest rate
    of the invariant preset and of the prototype, the shares of the two tests, the mean rate at
    ``κ = 1`` and at the largest ``κ``, and the plateau test's share there."""
    rates = trigger_rates(results, warmup)
    inv = results["FlowAdam (invariant)"]
    kappa_max = config.stiffness_grid[-1]
    return {
        "rate_inv_min": rates["FlowAdam (invariant)"].min().item(),
        "rate_proto_min": rates["FlowAdam (prototype)"].min().item(),
        "stiff_share_inv": trigger_share(inv, "stiff_triggers"),
        "plateau_share_inv": trigger_share(inv, "plateau_triggers"),
        "num_runs": inv["rec"].numel(), "kappa_max": kappa_max,
        "rate_kappa_max": rates[stiffness_label(kappa_max)].mean().item(),
        "rate_kappa_1": rates[stiffness_label(1.0)].mean().item(),
        "plateau_share_kappa_max": trigger_share(results[stiffness_label(kappa_max)],
                                                 "plateau_triggers"),
    }


def trigger_lines(results: Mapping[str, RunColumns],
                  warmup: int = INVARIANT["flow_warmup"]) -> str:
    """The trigger rate of every FlowAdam variant, one short line each (min and mean over
    runs of flow steps / eligible steps)."""
    rates = trigger_rates(results, warmup)
    width = max(len(label) for label in rates)
    head = f"{'flow steps / eligible steps':<{width}}   min     mean"
    return "\n".join([head] + [f"{label:<{width}}  {r.min():.4f}  {r.mean():.4f}"
                               for label, r in rates.items()])


def hand_numbers(hand: RunColumns, flow: RunColumns) -> dict[str, Any]:
    """FlowAdam against "dial warm-up, then clipped GD": in how many runs they stop at the
    same step, their largest difference in rec (:func:`relative_gap`, bounded), and the
    fraction of FlowAdam's steps at which the global clip was active."""
    gaps = [relative_gap(a, b) for a, b in zip(hand["rec"].tolist(), flow["rec"].tolist(),
                                               strict=True)]
    return {"same_stop_runs": int((hand["stop"] == flow["stop"]).sum()),
            "gap_hand": max(gaps, default=math.nan),
            "clip_frac": (flow["clip_bound"].sum() / flow["stop"].sum()).item()}


FLOW_LABEL = "FlowAdam (invariant)"
GD_LABEL = "GD, lr × T"


def ablation_labels(config: FlowAdamConfig) -> list[str]:
    """The variants of the ablation, in the order of its figure and table: FlowAdam
    (invariant), the dial alone at each factor, GD at ``lr·T``."""
    return [FLOW_LABEL, *[dial_label(c) for c in config.dial_factors], GD_LABEL]


def ablation_numbers(results: Mapping[str, RunColumns],
                     config: FlowAdamConfig) -> dict[str, Any]:
    """The ablation's numbers for the text (glue names as keys): Table 2's selection for each
    variant (``sel_<name>_rec``, ``_lr``, ``_rec_text``), the best dial-alone selection and
    its ratio to FlowAdam's, FlowAdam against the dial whose step matches the flow step lr by
    lr, GD at ``lr·T``, the paper's single-lr comparison and ours at the smallest lr."""
    T = INVARIANT["flow_time_scale"]
    names = {FLOW_LABEL: "flow", GD_LABEL: "gd"}
    names.update({dial_label(c): f"dial{i}" for i, c in enumerate(config.dial_factors)})
    out: dict[str, Any] = {"dial_factor_min": min(config.dial_factors)}
    for label in ablation_labels(config):
        rec, lr = select_lr(results[label])
        out[f"sel_{names[label]}_rec"] = rec
        out[f"sel_{names[label]}_lr"] = lr
        out[f"sel_{names[label]}_rec_text"] = (
            f"{rec:.4f}" if math.isfinite(rec) else
            "— (no learning rate let every seed reach the threshold within the budget)")
    flow = results[FLOW_LABEL]
    dials = [dial_label(c) for c in config.dial_factors]
    best = best_selection(results, dials)
    wins, pairs = lower_rec_count(flow, results[dial_label(T)], config.lrs)
    gd = results[GD_LABEL]
    first = flow["base_lr"] == config.lrs[0]
    out.update({
        "best_dial_rec": best[0], "dial_over_flow": best[0] / select_lr(flow)[0],
        "matched_pairs": pairs, "matched_flow_wins": wins, "time_scale": T,
        "gd_rec_min": min(mean_by_lr(gd, config.lrs)),
        "gd_interp_count": sum(interpolated_by_lr(gd, config.lrs)),
        "published_flow": PUBLISHED_FLOW_VS_DIAL["flow"],
        "published_dial": PUBLISHED_FLOW_VS_DIAL["dial"],
        "published_lr": PUBLISHED_FLOW_VS_DIAL["lr"], "lr_first": config.lrs[0],
        "flow_rec_first": mean_by_lr(flow, config.lrs)[0],
        "dial_rec_first": mean_by_lr(results[dial_label(1.0)], config.lrs)[0],
        "dial_quarter_first": mean_by_lr(results[dial_label(min(config.dial_factors))],
                                         config.lrs)[0],
        "flow_interp_first": int(flow["interpolated"][first].sum()),
        "dial_quarter_first_ok": (
            "did reach it" if interpolated_by_lr(
                results[dial_label(min(config.dial_factors))], config.lrs)[0]
            else "did not reach it either"),
        "num_seeds": len(config.seeds), "num_lrs": len(config.lrs),
    })
    return out


def ablation_rows(results: Mapping[str, RunColumns],
                  config: FlowAdamConfig) -> list[dict[str, Any]]:
    """One table row per variant of :func:`ablation_labels`: the mean rec over seeds at each
    lr of the config (a star where some seed did not reach the threshold) and Table 2's
    selection (``"rec (lr)"``, or a dash)."""
    rows = []
    for label in ablation_labels(config):
        recs = mean_by_lr(results[label], config.lrs)
        oks = interpolated_by_lr(results[label], config.lrs)
        rec, lr = select_lr(results[label])
        row: dict[str, Any] = {"variant": label, "selected": (
            f"{rec:.4f}\u00a0({lr:g})" if math.isfinite(rec) else None)}
        for i, (value, ok) in enumerate(zip(recs, oks, strict=True)):
            row[f"lr{i}"] = f"{value:.4f}" + ("" if ok else "*")
        rows.append(row)
    return rows
