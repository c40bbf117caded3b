r"""The anisotropy dial and FlowAdam as optimizers (the chapter ``ch-flowadam``).

Three measurements on the paper's matrix-sensing testbed (:mod:`gaugekit.problems.matrix_sensing`,
``W = U Vᵀ`` with ``U, V`` n×k, planted ``X_star`` of rank ``r``, ``m = 2 r (2n − r)``):

1. **the dial** ``p``: :func:`train_on_instance` runs one optimizer on one instance (to compare the
   dial's endpoints with Adam and shared-scale Adam), :func:`per_entry_log_lr` evaluates the
   per-entry learning rate ``lr / (s_i^p s̄^{1−p} + ε)`` on one frozen second moment, and
   :func:`dial_gauge_residuals` / :func:`audit_flow_adam` run the equivariance audit;
2. **the trigger rate** of the flow path: :func:`train_variants` trains every variant of
   :func:`ablation_variants` on every (seed, lr) of the config, stacked, with the paper's stop
   rule, and keeps the flow counters at the stop; :func:`trigger_rates` divides the flow steps by
   the :func:`eligible_steps`;
3. **the ablation**: FlowAdam against the dial alone at smaller learning rates, plain GD at
   ``lr·T`` and :class:`DialThenClippedGD` (FlowAdam written out by hand for the case where the
   flow fires at every eligible step), compared with the paper's selection protocol
   (:func:`select_lr`, the ``ORACLE`` rule of :mod:`gaugekit.experiments.selection`).

Sizes, seeds, grids and budgets live in :class:`FlowAdamConfig`, one per scale
(:func:`flow_adam_config`); the chapter never looks at the scale.
"""

# Developer note (layers, DESIGN.md): floor 3.

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gaugekit.audit import AuditResult, FactorRun, audit_equivariance, run_factor_optimizer
from gaugekit.config import get_device, get_scale
from gaugekit.experiments.matrix_sensing import Budget, Problem
from gaugekit.experiments.selection import ORACLE, select
from gaugekit.gauge import relative_distance
from gaugekit.optim import FlowAdam, make_optimizer, per_run
from gaugekit.optim.flow_adam import (
    FLOW_ADAM_PRESETS,
    clip_gradients,
    dial_coefficient,
    shared_scale_statistic,
)
from gaugekit.problems.matrix_sensing import (
    SensingBatch,
    default_num_measurements,
    init_factors,
    make_instance,
    sensing_loss,
)

__all__ = [
    "CONFIGS",
    "FLOW_COUNTERS",
    "INVARIANT",
    "PROTOTYPE",
    "PUBLISHED_FLOW_VS_DIAL",
    "DialThenClippedGD",
    "FlowAdamConfig",
    "FlowAudit",
    "RunColumns",
    "StackedFactory",
    "Variant",
    "ablation_variants",
    "audit_flow_adam",
    "best_selection",
    "dial_gauge_residuals",
    "dial_label",
    "distance_from_init",
    "eligible_steps",
    "final_factor_gap",
    "flow_adam_config",
    "interpolated_by_lr",
    "lower_rec_count",
    "mean_by_lr",
    "per_entry_log_lr",
    "select_lr",
    "stiffness_label",
    "train_on_instance",
    "train_variants",
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

#: Per-run counters kept at the stop by :func:`train_variants` (zero for non-flow variants).
FLOW_COUNTERS: tuple[str, ...] = ("flow_steps", "plateau_triggers", "stiff_triggers")

#: Per-run result columns of :func:`train_variants`: column name → tensor of shape ``(runs,)``.
RunColumns = dict[str, Tensor]
#: ``make(params, lr)`` → an optimizer over stacked parameters (``batch_dims = 1``), ``lr`` per run.
StackedFactory = Callable[[list[Tensor], Tensor], Any]


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


class DialThenClippedGD:
    r"""FlowAdam written out for a flow path that fires at every eligible step.

    Steps ``t = 1 … warmup + 1``: the dial (``p = 0``, RMS, flow off, i.e. shared-scale Adam).
    Steps ``t > warmup + 1``: one Euler step of the clipped gradient flow,
    ``θ ← θ − lr · T · g · min(1, c / ‖g‖)`` with ``T = time_scale``, ``c = clip`` and ``‖g‖`` over
    all parameters of a run. FlowAdam's momentum blend never reaches ``θ`` then, so this equals
    ``FlowAdam(**INVARIANT, flow_warmup=warmup)`` whenever its flow fires at every step from
    ``warmup + 2`` on. Works from ``.grad`` (``step()`` takes no closure); ``lr`` is a float or a
    tensor of shape ``param.shape[:batch_dims]``. Not a ``torch.optim.Optimizer``: no state dict.
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
        self.params = list(params)
        self.lr, self.warmup, self.time_scale, self.clip = lr, warmup, time_scale, clip
        self.batch_dims = batch_dims
        self.num_steps = 0
        self.dial = FlowAdam(self.params, lr=lr, precond_power=0.0, precond_scalar="rms",
                             flow=False, batch_dims=batch_dims)

    @torch.no_grad()
    def step(self) -> None:
        """One dial step during the warm-up, one clipped gradient step after it."""
        self.num_steps += 1
        if self.num_steps <= self.warmup + 1:
            self.dial.step()
            return
        grads = [p.grad for p in self.params]
        dims = [tuple(range(self.batch_dims, g.ndim)) for g in grads]
        norm = sum(g.square().sum(dim=d) for g, d in zip(grads, dims, strict=True)).sqrt()
        clipped = clip_gradients(grads, "globalnorm", self.clip, norm, self.batch_dims)
        for p, c in zip(self.params, clipped, strict=True):
            p.sub_(per_run(self.lr, p, self.batch_dims) * self.time_scale * c)


@dataclass(frozen=True)
class Variant:
    """One optimizer of the ablation: ``make(params, lr)`` over stacked runs, trained at the
    config's learning rates times ``lr_factor``."""

    make: StackedFactory
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

    def flow_adam(**options: Any) -> StackedFactory:
        return lambda params, lr: FlowAdam(params, lr=lr, batch_dims=1, **options)

    return {
        "FlowAdam (invariant)": Variant(make=flow_adam(**INVARIANT)),
        "FlowAdam (prototype)": Variant(make=flow_adam(**PROTOTYPE)),
        **{stiffness_label(kappa): Variant(make=flow_adam(**{**INVARIANT, "flow_stiffness": kappa}))
           for kappa in config.stiffness_grid},
        **{dial_label(c): Variant(make=flow_adam(precond_power=0.0, flow=False), lr_factor=c)
           for c in config.dial_factors},
        "GD, lr × T": Variant(
            make=lambda params, lr: make_optimizer("gd", params, lr=lr, batch_dims=1),
            lr_factor=T),
        "dial warm-up, then clipped GD": Variant(
            make=lambda params, lr: DialThenClippedGD(params, lr, warmup=warmup, time_scale=T,
                                                      clip=clip, batch_dims=1)),
    }


# --------------------------------------------------------------------------------------------
# stacked training with the paper's stop rule
# --------------------------------------------------------------------------------------------


def train_variants(
    variants: Mapping[str, Variant],
    config: FlowAdamConfig,
    *,
    clip_threshold: float = INVARIANT["flow_clip"],
    device: torch.device | str | None = None,
) -> dict[str, RunColumns]:
    """Train every variant on every (seed, lr) of ``config``, all runs stacked in one loop.

    Each step evaluates ``(L, G_U, G_V)`` of all runs at once (one product per instance,
    :class:`~gaugekit.problems.matrix_sensing.SensingBatch`). As in the paper's protocol a run
    stops after the update of the first check step at which its loss, evaluated before that
    update, is below ``config.budget.tol``; its factors and flow counters are kept there.

    Returns label → columns over the runs (seed-major, then lr): ``seed``, ``base_lr``, ``lr``
    (``base_lr × lr_factor``), ``stop`` (updates taken), ``train_loss`` (at the stop),
    ``interpolated``, ``rec``, ``effective_rank``, ``clip_bound`` (steps with ``‖g‖ >
    clip_threshold`` before the stop) and the :data:`FLOW_COUNTERS` (zero unless a FlowAdam with
    the flow path on). Tensors on the CPU.
    """
    device = get_device(device)
    p, budget = config.problem, config.budget
    on = {"dtype": config.dtype, "device": device}
    instances = [make_instance(s, p.n, p.r, p.m, **on) for s in config.seeds]
    inits = [init_factors(s, p.n, p.k, p.init_scale, **on) for s in config.seeds]
    runs = [(i, lr) for i in range(len(config.seeds)) for lr in config.lrs]
    per = len(runs)
    batch = SensingBatch(instances, [i for i, _ in runs] * len(variants))
    members = []
    for label, variant in variants.items():
        U = torch.stack([inits[i][0] for i, _ in runs]).requires_grad_()
        V = torch.stack([inits[i][1] for i, _ in runs]).requires_grad_()
        lr = torch.tensor([lr * variant.lr_factor for _, lr in runs], **on)
        members.append((label, U, V, variant.make([U, V], lr), lr))
    total = per * len(members)
    done = torch.zeros(total, dtype=torch.bool, device=device)
    stop = torch.full((total,), budget.num_steps, device=device)
    loss_end = torch.full((total,), math.nan, **on)
    U_end = torch.empty(total, p.n, p.k, **on)
    V_end = torch.empty_like(U_end)
    counters = {key: torch.zeros(total, dtype=torch.int64, device=device)
                for key in FLOW_COUNTERS}
    clip_bound = torch.zeros(total, dtype=torch.int64, device=device)

    def keep(mask: Tensor) -> None:
        """Store the factors and flow counters of the runs in ``mask`` (over all rows)."""
        for j, (_, U, V, opt, _) in enumerate(members):
            rows = slice(j * per, (j + 1) * per)
            sel = torch.nonzero(mask[rows]).flatten()
            if sel.numel() == 0:
                continue
            U_end[rows][sel], V_end[rows][sel] = U.detach()[sel], V.detach()[sel]
            if isinstance(opt, FlowAdam) and opt.defaults["flow"]:
                snap = opt.flow_counters()
                for key in counters:
                    counters[key][rows][sel] = snap[key][sel]

    for t in range(1, budget.num_steps + 1):
        U_all = torch.cat([U.detach() for _, U, _, _, _ in members])
        V_all = torch.cat([V.detach() for _, _, V, _, _ in members])
        loss, G_U, G_V = batch.loss_and_grads(U_all, V_all)
        grad_norm = (G_U.square().sum((1, 2)) + G_V.square().sum((1, 2))).sqrt()
        clip_bound += (grad_norm > clip_threshold) & ~done
        for j, (_, U, V, opt, _) in enumerate(members):
            U.grad, V.grad = G_U[j * per:(j + 1) * per], G_V[j * per:(j + 1) * per]
            opt.step()
        if t % budget.check_every == 0:  # the paper's stop: pre-update loss, after the update
            new = (loss < budget.tol) & ~done
            keep(new)
            done |= new
            stop[new], loss_end[new] = t, loss[new]
    keep(~done)
    final = batch.metrics(U_end, V_end)
    loss_end[~done] = final["train_loss"][~done]
    out = {}
    for j, (label, _, _, _, lr) in enumerate(members):
        rows = slice(j * per, (j + 1) * per)
        columns = {
            "lr": lr, "stop": stop[rows], "train_loss": loss_end[rows],
            "interpolated": done[rows] | (loss_end[rows] < budget.tol),
            "rec": final["rec"][rows], "effective_rank": final["effective_rank"][rows],
            "clip_bound": clip_bound[rows], **{key: c[rows] for key, c in counters.items()},
        }
        out[label] = {
            "seed": torch.tensor([config.seeds[i] for i, _ in runs]),
            "base_lr": torch.tensor([lr for _, lr in runs], dtype=config.dtype),
            **{key: value.cpu() for key, value in columns.items()},
        }
    return out


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
    """The runs as minimal records for :func:`gaugekit.experiments.selection.select`."""
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
    when there is none. The ``ORACLE`` rule of :mod:`gaugekit.experiments.selection` (the
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
