r"""The anisotropy dial and FlowAdam as optimizers (the chapter ``ch-flowadam``).

Three measurements on the paper's matrix-sensing testbed (:mod:`gaugebook.sensing.measurements`,
``W = U Vᵀ`` with ``U, V`` n×k, planted ``X_star`` of rank ``r``, ``m = 2 r (2n − r)``):

1. **the dial** ``p``: :func:`train_on_instance` runs one optimizer on one instance (to compare the
   dial's endpoints with Adam and shared-scale Adam), :func:`per_entry_log_lr` evaluates the
   per-entry learning rate ``lr / (s_i^p s̄^{1−p} + ε)`` on one frozen second moment, and
   :func:`dial_gauge_residuals` / :func:`audit_flow_adam` run the equivariance audit;
2. **the trigger rate** of the flow path: :func:`train_variants` trains every variant of
   :func:`ablation_variants` on every (seed, lr) of the config on the stacked factor trainer
   (:mod:`gaugebook.engine.factor_trainer`), with the paper's stop rule, and keeps the flow
   counters at the stop (the chapter's :func:`~gaugebook.dial.flow_summary.trigger_rates` divides
   the flow steps by the eligible steps);
3. **the ablation**: FlowAdam against the dial alone at smaller learning rates, plain GD at
   ``lr·T`` and :class:`DialThenClippedGD` (FlowAdam written out by hand for the case where the
   flow fires at every eligible step), compared with the paper's selection protocol
   (:func:`~gaugebook.dial.flow_summary.oracle_choice`, the ``ORACLE`` rule of
   :mod:`gaugebook.engine.selection`).

Sizes, seeds, grids and budgets live in :class:`FlowAdamConfig`, one per scale
(:func:`flow_adam_config`); the chapter never looks at the scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gaugebook.engine.factor_trainer import train_factored_batch
from gaugebook.engine.scales import Scales
from gaugebook.engine.settings import get_device
from gaugebook.engine.spec import RunSpec
from gaugebook.sensing.measurements import (
    SENSING,
    default_num_measurements,
    init_factors,
    make_instance,
    sensing_loss,
)
from gaugebook.sensing.run_specs import Budget, Problem
from gaugekit.audit.factor_results import AuditResult
from gaugekit.audit.factors import FactorRun, audit_equivariance, run_factor_optimizer
from gaugekit.gauge import relative_distance
from gaugekit.optim import FlowAdam, make_optimizer, per_run
from gaugekit.optim.flow_adam import (
    FLOW_ADAM_PRESETS,
    clip_gradients,
    dial_coefficient,
    shared_scale_statistic,
)

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
QUICK = FlowAdamConfig(
    scale="quick", problem=_problem(20, 2, 20), budget=Budget(3000, 1e-7, 200),
    seeds=(42, 123), lrs=(1e-2, 3e-2), dial_factors=(1.0, 0.5, 0.25),
    stiffness_grid=(0.5, 1.0, 2.0), anisotropy_steps=200,
    audit_powers=(0.0, 1e-3, 1e-2, 0.1, 0.25, 0.5, 1.0), audit_steps=25,
)
PAPER = FlowAdamConfig(
    scale="paper", problem=_problem(40, 3, 40), budget=Budget(30000, 1e-7, 200),
    seeds=(42, 123, 456), lrs=(1e-3, 3e-3, 1e-2, 3e-2), dial_factors=(1.0, 0.5, 0.25),
    stiffness_grid=(0.5, 1.0, 2.0), anisotropy_steps=1000,
    audit_powers=(0.0, 1e-4, 1e-3, 1e-2, 0.1, 0.25, 0.5, 0.75, 1.0), audit_steps=25,
)
#: The config at a scale (default ``$GAUGEKIT_SCALE``): :data:`PAPER` or :data:`QUICK`.
flow_adam_config = Scales(paper=lambda: PAPER, quick=lambda: QUICK)


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
    return FlowAudit(result, tuple(int(opt.flow_counters()["flow_steps"]) for opt in made[:2]))


def dial_gauge_residuals(config: FlowAdamConfig, scalar: str) -> list[float]:
    """The audit residual of the dial (flow off) with shared scalar ``scalar`` at each ``p`` of
    ``config.audit_powers``."""
    return [
        audit_flow_adam(config, precond_power=p, precond_scalar=scalar, flow=False).result.residual
        for p in config.audit_powers
    ]


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
    (``state["hand"]``), so it survives a compaction of the stack
    (:mod:`gaugebook.engine.factor_stack`).
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
        norm = sum(g.square().sum(dim=tuple(range(b, g.ndim))) for g in grads).sqrt()
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


#: Labels of FlowAdam (invariant) and of GD at ``lr · T`` among the variants.
FLOW_LABEL = "FlowAdam (invariant)"
GD_LABEL = "GD, lr × T"


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
        FLOW_LABEL: Variant("flow_adam", dict(INVARIANT)),
        "FlowAdam (prototype)": Variant("flow_adam", dict(PROTOTYPE)),
        **{stiffness_label(kappa): Variant("flow_adam", {**INVARIANT, "flow_stiffness": kappa})
           for kappa in config.stiffness_grid},
        **{dial_label(c): Variant("flow_adam", {"precond_power": 0.0, "flow": False}, c)
           for c in config.dial_factors},
        GD_LABEL: Variant("gd", {}, T),
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
    device: torch.device | str | None = None,
) -> list[dict[str, Any]]:
    """Train the runs ``(variant, seed, base lr)`` stacked, with
    :func:`gaugebook.engine.factor_trainer.train_factored_batch`, and return each run's metrics.

    A run stops by the paper's rule (:class:`FlowAdamConfig`); its factors and flow counters
    are kept there. Metrics: ``steps`` (updates taken), ``train_loss`` (at the stop: before its
    update if the run stopped at a check, after the last update if it ran out of budget),
    ``interpolated``, ``rec``, ``effective_rank``, ``clip_bound`` (steps with ``‖g‖`` above the
    invariant preset's clip up to the stop), ``lr`` (``base lr × lr_factor``) and the
    :data:`FLOW_COUNTERS`. A run that does not end ``ok`` (diverged, error) raises.
    """
    budget = {**config.budget.to_config(), "count_grad_norm_above": INVARIANT["flow_clip"]}
    base = {"kind": "factored", "problem": config.problem.to_config(), "schedule": "constant",
            "budget": budget, "dtype": str(config.dtype).removeprefix("torch.")}
    specs = [RunSpec("flow_adam", "variants", {
        **base, "method": v.method, "hparams": {**v.hparams, "lr": lr * v.lr_factor},
        "seed": seed}) for v, seed, lr in runs]
    results = train_factored_batch(specs, SENSING, device=get_device(device),
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
    return {
        "seed": torch.tensor([seed for seed, _, _ in runs]),
        "base_lr": torch.tensor([lr for _, lr, _ in runs], dtype=torch.float64),
        "stop": torch.tensor([x["steps"] for x in m], dtype=torch.int64),
        **{k: torch.tensor([x[k] for x in m], dtype=torch.int64)
           for k in ("clip_bound", *FLOW_COUNTERS)},
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
