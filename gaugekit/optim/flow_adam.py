r"""FlowAdam: Adam with the anisotropy dial and a clipped gradient-flow path, and its presets.

From the paper's FlowAdam prototype (arXiv 2608.05136, Section 10; ``flowadam/optimizer.py`` of
``idevender/loss-basis-adam``); the class's docstring says what it does. The math is
:mod:`gaugekit.optim.flow_functional`, the multi-stage integration :mod:`gaugekit.optim.flow_ode`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from gaugekit.optim import distributed as D
from gaugekit.optim import flow_functional as FF
from gaugekit.optim import functional as F
from gaugekit.optim import functional_shared as FS
from gaugekit.optim._validation import (
    EPS,
    LR,
    WEIGHT_DECAY,
    Hyper,
    betas_check,
    bool_check,
    check_common_batch_shape,
    check_optimizer_wide,
    choice_check,
    int_check,
    invalid,
    real_check,
)
from gaugekit.optim.base import NONFINITE, ZooOptimizer
from gaugekit.optim.flow_functional import (
    CLIP_MODES,
    FLOW_ADAM_PRESETS,
    PRECOND_SCALARS,
    clip_gradients,
    dial_coefficient,
    gradient_statistics_,
    shared_scale_statistic,
    velocity_cap_factor,
)
from gaugekit.optim.flow_ode import (
    FLOW_METHODS,
    MULTI_STAGE_METHODS,
    integrate_clipped_flow,
    require_torchdiffeq,
    take_flow_step_,
)

__all__ = [
    "CLIP_MODES",
    "FLOW_ADAM_PRESETS",
    "FLOW_METHODS",
    "MULTI_STAGE_METHODS",
    "PRECOND_SCALARS",
    "FlowAdam",
    "clip_gradients",
    "dial_coefficient",
    "gradient_statistics_",
    "shared_scale_statistic",
    "velocity_cap_factor",
]


def _host_reads_are_free(device: torch.device) -> bool:
    """Whether reading a value of ``device`` on the host costs no stall: the CPU only."""
    return device.type == "cpu"


class FlowAdam(ZooOptimizer):
    r"""Adam with the anisotropy dial and a clipped gradient-flow path (the math and its
    conventions: :mod:`gaugekit.optim.flow_functional`).

    Example:
        >>> import torch
        >>> from gaugekit.optim import FlowAdam
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = FlowAdam(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math::
        m ← β_1 m + (1-β_1) g,\qquad v ← β_2 v + (1-β_2) g^2,

        θ ← θ − \mathrm{lr}\,\frac{m/(1-β_1^t)}{s^p \bar s^{1-p} + ε},\qquad s = \sqrt{v/(1-β_2^t)}

    on dial steps; on flow steps (plateau or stiff gradient statistics after the warm-up)
    ``θ`` follows the clipped gradient flow for time ``flow_time_scale`` and the flow velocity
    is blended into ``m``. ``s̄``, the gradient norms, the trigger and the global-norm clip are
    taken over ALL parameters of ALL groups, once per step (one value per run).

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with the flow path on,
    ``prev_grad``. Optimizer-wide state ``state["flow"]``: ``step`` (int), ``grad_norm_avg``,
    ``grad_change_avg`` (per run), the counters ``flow_steps``, ``plateau_triggers``,
    ``stiff_triggers`` (int64 per run), ``failures`` and ``extra_grad_evals`` (ints); read them
    with :meth:`flow_counters`. Off the CPU nothing on the hot path synchronises with the host
    (Euler) but the non-finite check (below; ``nonfinite="propagate"`` drops it); on the CPU,
    where a read is free, the Euler step reads the trigger to skip the terms that every run
    weights by 0. A multi-stage method reads the trigger once per step after the
    warm-up.

    Deviations from the paper's prototype: any number of param groups (per-group ``lr``,
    ``betas``, ``eps``, ``weight_decay``, ``precond_power``; ``s̄``, the norms and the clip over
    all groups, which is what invariance needs); no closure for Euler, and the gradient already
    computed is the flow's first stage; the moments and ``step`` advance on flow steps (the
    prototype froze ``v`` and ``step``); one ε (the prototype added it in three places); per-run
    masks instead of ``.item()`` and flattening; counters instead of per-trigger lists; defaults
    are the gauge-invariant preset (the prototype's were ``'geomean'`` and ``'percoord'``, see
    ``FLOW_ADAM_PRESETS``).

    Gauge: equivariant for ``precond_power=0, precond_scalar='rms', flow_clip_mode='globalnorm'``
    (the defaults, preset ``'invariant'``); not equivariant otherwise.

    Non-finite gradients (``nonfinite``, ``gaugekit.optim.base``): ``s̄``, the norms and the
    clip are shared by all parameters, so one NaN or inf would reach every parameter. By
    default (``batch_dims = 0``) a step whose gradients are not all finite is skipped — no
    parameter, moment, counter or step count changes — with a ``RuntimeWarning`` naming the
    offending parameters; ``"raise"`` raises instead; ``"propagate"`` (the default for stacked
    runs) checks nothing. The check sums ``g²`` over every gradient before the moments (one pass
    over the gradients; with DTensor parameters one more ``all_reduce``) and reads the total on
    the host: one read per step, which off the CPU is a synchronisation (``"propagate"`` keeps
    the hot path free of it).

    Distributed: with DTensor parameters (FSDP2 ``fully_shard``) every reduction of a step —
    ``s̄``, ``‖g‖``, ``‖g − g_prev‖``, the per-parameter norms of the clip and the velocity cap —
    is summed over each rank's block and all-reduced in ONE ``all_reduce`` per step, without a
    host sync, so every rank takes the one-process step (to round-off), trigger decisions
    included; replicated parameters (DDP) communicate nothing. DTensor parameters need
    ``batch_dims = 0`` and ``flow_method='euler'`` (a multi-stage method is refused).

    Args:
        params: tensors or param-group dicts (all sharing ``param.shape[:batch_dims]``).
        lr: learning rate ``>= 0`` (per group, per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per group, per run).
        eps: ``ε >= 0``, added once to the blended denominator (per group, per run).
        weight_decay: decoupled weight decay ``>= 0`` (per group, per run).
        precond_power: the dial ``p`` in ``[0, 1]`` (per group, per run).
        precond_scalar: ``'rms'`` or ``'geomean'``.
        flow: whether the flow path is on (off: the dial alone).
        flow_method: ``'euler'`` (no closure needed) or a torchdiffeq method (needs a closure
            and torchdiffeq; ``batch_dims = 0``).
        flow_time_scale: ``T > 0``, the flow's duration in units of ``lr``.
        flow_plateau: plateau threshold ``>= 0`` on ``n_t / n̄_t`` (0 never fires).
        flow_stiffness: stiffness threshold ``>= 0`` on ``c_t / c̄_t``.
        flow_clip_mode: ``'globalnorm'`` or ``'percoord'``.
        flow_clip: the clip threshold ``c > 0``.
        flow_blend: ``γ`` in ``[0, 1]``.
        flow_velocity_cap: ``> 0``, the cap on ``‖u‖ / ‖m‖``.
        flow_warmup: steps (``>= 0``) after which the flow path may fire (it may fire from step
            ``flow_warmup + 2`` on, as in the prototype).
        flow_stat_beta: EMA factor in ``[0, 1)`` of the trigger statistics.
        flow_tol: ``rtol = atol > 0`` of adaptive torchdiffeq methods.
        maximize: maximize the objective (``−g`` everywhere ``g`` enters, flow included).
        nonfinite: ``"skip"``, ``"raise"``, ``"propagate"`` or ``None`` (``"skip"`` for one run,
            ``"propagate"`` for stacked runs): what a non-finite gradient does.
    """

    rule_keys = ("precond_power", "precond_scalar", "flow")
    pools_all_params = True
    hyper_checks = {
        "lr": LR, "betas": betas_check(), "eps": EPS, "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check, "precond_power": real_check(0.0, 1.0),
        "precond_scalar": choice_check(*PRECOND_SCALARS), "flow": bool_check,
        "flow_method": choice_check(*FLOW_METHODS),
        "flow_time_scale": real_check(0.0, low_open=True, per_run=False),
        "flow_plateau": real_check(0.0, per_run=False),
        "flow_stiffness": real_check(0.0, per_run=False),
        "flow_clip_mode": choice_check(*CLIP_MODES),
        "flow_clip": real_check(0.0, low_open=True, per_run=False),
        "flow_blend": real_check(0.0, 1.0, per_run=False),
        "flow_velocity_cap": real_check(0.0, low_open=True, per_run=False),
        "flow_warmup": int_check(0),
        "flow_stat_beta": real_check(0.0, 1.0, high_open=True, per_run=False),
        "flow_tol": real_check(0.0, low_open=True, per_run=False),
        "nonfinite": NONFINITE,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, weight_decay: Hyper = 0.0, *, precond_power: Hyper = 0.0,
        precond_scalar: str = "rms", flow: bool = True, flow_method: str = "euler",
        flow_time_scale: float = 0.5, flow_plateau: float = 0.9, flow_stiffness: float = 0.1,
        flow_clip_mode: str = "globalnorm", flow_clip: float = 10.0, flow_blend: float = 0.5,
        flow_velocity_cap: float = 5.0, flow_warmup: int = 10, flow_stat_beta: float = 0.9,
        flow_tol: float = 1e-4, maximize: bool = False, nonfinite: str | None = None,
        batch_dims: int = 0, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "precond_power": precond_power, "precond_scalar": precond_scalar, "flow": flow,
            "flow_method": flow_method, "flow_time_scale": flow_time_scale,
            "flow_plateau": flow_plateau, "flow_stiffness": flow_stiffness,
            "flow_clip_mode": flow_clip_mode, "flow_clip": flow_clip, "flow_blend": flow_blend,
            "flow_velocity_cap": flow_velocity_cap, "flow_warmup": flow_warmup,
            "flow_stat_beta": flow_stat_beta, "flow_tol": flow_tol, "maximize": maximize,
            "nonfinite": nonfinite,
        }
        if flow is True and flow_method in MULTI_STAGE_METHODS:
            if batch_dims != 0:
                raise invalid(
                    "batch_dims", batch_dims,
                    f"0 with flow_method={flow_method!r} (multi-stage flows integrate one run); "
                    "use flow_method='euler' for stacked runs",
                )
            require_torchdiffeq(flow_method)
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    @classmethod
    def from_preset(cls, params: Any, preset: str = "invariant", **overrides: Any) -> FlowAdam:
        """``FlowAdam(params, **FLOW_ADAM_PRESETS[preset], **overrides)``."""
        if preset not in FLOW_ADAM_PRESETS:
            raise invalid("preset", preset, f"one of {tuple(FLOW_ADAM_PRESETS)!r}")
        return cls(params, **{**FLOW_ADAM_PRESETS[preset], **overrides})

    # ----------------------------------------------------------------------------- validation
    def _check_group(self, group: dict[str, Any]) -> None:
        # the options that define the shared quantities: one value for the whole optimizer
        wide = ("batch_dims", "precond_scalar", "nonfinite",
                *(k for k in self.defaults if k.startswith("flow")))
        check_optimizer_wide(group, self.defaults, wide, "it cannot differ by group")
        check_common_batch_shape(self.param_groups, group)
        if self._multi_stage and any(D.is_dtensor(p) for p in group["params"]):
            raise invalid(
                "flow_method", self.defaults["flow_method"],
                "'euler' for DTensor (FSDP2/sharded) parameters: multi-stage flows re-evaluate "
                "the closure on whole tensors",
            )

    @property
    def couples_param_groups(self) -> bool:  # type: ignore[override]
        """Whether the groups interact from the first step: the dial pools ``s̄`` over all of
        them unless every group has ``precond_power == 1``. (The flow path's norms and clip pool
        all groups too, but only once the flow may fire, from step ``flow_warmup + 2`` on.)"""
        return self._needs_shared(self.param_groups)

    @property
    def _multi_stage(self) -> bool:
        return bool(self.defaults["flow"]) and self.defaults["flow_method"] in MULTI_STAGE_METHODS

    # ----------------------------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One FlowAdam step of every parameter with a gradient; returns ``closure()`` if given.

        Euler (and ``flow=False``) works from ``.grad`` alone. A multi-stage ``flow_method``
        needs ``closure`` (it zeroes the gradients, evaluates the loss and calls ``backward``);
        after a multi-stage flow step ``.grad`` holds the gradient of its last stage.
        """
        if closure is None and self._multi_stage:
            raise RuntimeError(
                f"FlowAdam(flow_method={self.defaults['flow_method']!r}) needs a closure: its "
                "stages re-evaluate the gradient. Call step(closure), or use flow_method='euler', "
                "which works from .grad alone"
            )
        return super().step(closure)

    def _update_all(self, closure: Callable[[], Any] | None = None) -> None:
        opts = self.defaults
        entries: list[tuple[dict[str, Any], Tensor, Tensor, dict[str, Any]]] = []
        keys = ("exp_avg", "exp_avg_sq", "prev_grad")[: 3 if opts["flow"] else 2]
        pairs = [(group, p, g) for group in self.param_groups
                 for p, g in self._with_grad(group["params"])]
        if not pairs:
            return
        if self._nonfinite_policy() != "propagate" and not self._finite_or_skip(
            FS.run_sums_of_squares([g for *_, g in pairs], opts["batch_dims"]),
            [p for _, p, _ in pairs],
        ):
            return
        for group, p, g in pairs:
            state = self._state(p, *keys, step=True)
            entries.append((group, p, F.signed(g, group["maximize"]), state))

        for group, p, g, state in entries:
            F.decoupled_decay_(p, lr=self._hyper(group, "lr", p),
                               weight_decay=self._hyper(group, "weight_decay", p))
            beta1, beta2 = self._hyper(group, "betas", p)
            FF.lerp_moments_(g, state["exp_avg"], state["exp_avg_sq"], beta1=beta1, beta2=beta2)

        stats = self._distributed_statistics(entries)
        shared = self._shared_scale(entries, stats)
        fire, param_norms, norm = (
            self._flow_trigger(entries, stats) if opts["flow"] else (None, [], None)
        )
        if fire is not None and not self._multi_stage:
            self._euler_or_dial(entries, shared, fire, param_norms, norm, stats)
        elif fire is not None and bool(fire):
            self._integrated_flow(entries, shared, closure)
        else:
            self._dial_step(entries, shared)

    # ----------------------------------------------------------------------------- the dial
    def _dial_step(self, entries: list, shared: Tensor | None, fired: Tensor | None = None) -> None:
        """``θ += r · m`` for every entry; with the per-run mask ``fired``, ``lr (1 − f)``."""
        for group, p, _, state in entries:
            lr = None
            if fired is not None:
                f = FF.run_view(fired, p, self.defaults["batch_dims"])
                lr = self._hyper(group, "lr", p) * (1 - f)
            p.addcmul_(state["exp_avg"], self._coefficient(group, p, state, shared, lr))

    def _shared_scale(self, entries: list, stats: dict[str, Any] | None = None) -> Tensor | None:
        """``s̄`` per run, or ``None`` when every group has ``p`` equal to the float 1."""
        if not self._needs_shared(group for group, *_ in entries):
            return None
        if stats is not None:
            return stats["shared"]
        bias2 = [1 - FF.run_value(group["betas"][1], p) ** state["step"]
                 for group, p, _, state in entries]
        return shared_scale_statistic(
            [state["exp_avg_sq"] for *_, state in entries], bias2,
            self.defaults["precond_scalar"], self.defaults["batch_dims"],
        )

    @staticmethod
    def _needs_shared(groups: Iterable[dict[str, Any]]) -> bool:
        """Whether the dial needs ``s̄``: some ``precond_power`` is not the float 1."""
        powers = [group["precond_power"] for group in groups]
        return any(isinstance(q, Tensor) or q != 1 for q in powers)

    def _coefficient(
        self, group: dict[str, Any], p: Tensor, state: dict[str, Any], shared: Tensor | None,
        lr: Hyper | None = None,
    ) -> Tensor:
        beta1, beta2 = self._hyper(group, "betas", p)
        return dial_coefficient(
            state["exp_avg_sq"], step=state["step"],
            lr=self._hyper(group, "lr", p) if lr is None else lr,
            beta1=beta1, beta2=beta2, eps=self._hyper(group, "eps", p),
            power=self._hyper(group, "precond_power", p),
            shared=None if shared is None else FF.run_view(shared, p, self.defaults["batch_dims"]),
        )

    def _distributed_statistics(self, entries: list) -> dict[str, Any] | None:
        """Every reduction of the step in one ``all_reduce`` for DTensor (FSDP2) parameters
        (:func:`~gaugekit.optim.flow_functional.sharded_statistics_`; overwrites
        ``prev_grad``); ``None`` for plain ones."""
        if not any(D.is_dtensor(p) for _, p, _, _ in entries):
            return None
        opts = self.defaults
        flow = self.state.get("flow")
        states = [state for *_, state in entries]
        needs_shared = self._needs_shared(group for group, *_ in entries)
        return FF.sharded_statistics_(
            [g for _, _, g, _ in entries], [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states], [s.get("prev_grad") for s in states],
            beta2s=[group["betas"][1] for group, *_ in entries],
            steps=[s["step"] for s in states],
            numel=sum(math.prod(p.shape) for _, p, _, _ in entries),
            scalar=opts["precond_scalar"] if needs_shared else None,
            flow=opts["flow"],
            eligible=opts["flow"] and flow is not None and flow["step"] > opts["flow_warmup"],
            percoord=opts["flow_clip_mode"] == "percoord", clip=opts["flow_clip"],
        )

    # ------------------------------------------------------------------------- the trigger
    def _fresh_flow_state(self, like: Tensor) -> dict[str, Any]:
        """A new ``state["flow"]`` (:func:`~gaugekit.optim.flow_functional.fresh_flow_state`)."""
        return FF.fresh_flow_state(like, self.defaults["batch_dims"])

    def _flow_trigger(
        self, entries: list, stats: dict[str, Any] | None = None
    ) -> tuple[Tensor | None, list[Tensor], Tensor]:
        """Update the trigger statistics. Returns the per-run flow mask (``None`` during the
        warm-up), the per-parameter gradient norms and the global gradient norm."""
        opts = self.defaults
        if "flow" not in self.state:  # the first step
            self.state["flow"] = self._fresh_flow_state(entries[0][1])
        flow = self.state["flow"]
        if stats is None:
            param_norms, norm, change = gradient_statistics_(
                [g for _, _, g, _ in entries], [state["prev_grad"] for *_, state in entries],
                opts["batch_dims"],
            )
        else:  # already reduced, and prev_grad already overwritten
            param_norms, norm, change = stats["param_norms"], stats["norm"], stats["change"]
        flow["grad_norm_avg"], flow["grad_change_avg"] = FF.trigger_averages(
            (flow["grad_norm_avg"], flow["grad_change_avg"]), (norm, change),
            opts["flow_stat_beta"], first=flow["step"] == 0,
        )
        eligible = flow["step"] > opts["flow_warmup"]
        flow["step"] += 1
        if not eligible:
            return None, param_norms, norm
        plateau = norm < opts["flow_plateau"] * flow["grad_norm_avg"]
        stiff = change > opts["flow_stiffness"] * flow["grad_change_avg"]
        flow["plateau_triggers"] = flow["plateau_triggers"] + plateau
        flow["stiff_triggers"] = flow["stiff_triggers"] + stiff
        return plateau | stiff, param_norms, norm

    # ---------------------------------------------------------------------------- the flow
    def _euler_or_dial(
        self, entries: list, shared: Tensor | None, fire: Tensor, param_norms: list[Tensor],
        norm: Tensor, stats: dict[str, Any] | None = None,
    ) -> None:
        """Per run: one Euler step of the clipped flow where ``fire``, the dial step elsewhere
        (:func:`~gaugekit.optim.flow_functional.euler_flow_`: exact, a zero weight adds
        nothing, for the runs that take the dial step). Terms whose weight is 0 for every run
        are skipped when the trigger can be read for free (the CPU)."""
        opts = self.defaults
        batch_dims = opts["batch_dims"]
        dial_terms, flow_terms = FF.paths_taken(fire, _host_reads_are_free(fire.device))
        fired = fire.to(norm.dtype)
        time_scale = opts["flow_time_scale"]
        weight = opts["flow_blend"] * fired
        if not flow_terms:  # no run fires: the dial step, with the flow-step code's numbers
            self._dial_step(entries, shared, fired)
            return
        kappa, directions, speeds = FF.flow_directions(
            [g for _, _, g, _ in entries], param_norms, norm, mode=opts["flow_clip_mode"],
            clip=opts["flow_clip"], time_scale=time_scale, batch_dims=batch_dims,
            direction_norms=None if stats is None else stats["direction_norms"],
        )
        momentum_norms = [None] * len(entries) if stats is None else stats["momentum_norms"]
        rows = zip(entries, directions, speeds, momentum_norms, strict=True)
        for (group, p, _, state), direction, speed, m_norm in rows:
            exp_avg = state["exp_avg"]
            lr = self._hyper(group, "lr", p)
            if m_norm is None:
                m_norm = FF.run_norm(exp_avg, batch_dims)
            phi = velocity_cap_factor(speed, m_norm, opts["flow_velocity_cap"])
            dial = None
            if dial_terms:
                f = FF.run_view(fired, p, batch_dims)
                dial = self._coefficient(group, p, state, shared, lr * (1 - f))
            FF.euler_flow_(p, exp_avg, direction, dial=dial, lr=lr, fired=fired, kappa=kappa,
                           phi=phi, weight=weight, time_scale=time_scale, batch_dims=batch_dims)
        flow = self.state["flow"]
        flow["flow_steps"] = flow["flow_steps"] + fire

    def _integrated_flow(
        self, entries: list, shared: Tensor | None, closure: Callable[[], Any] | None
    ) -> None:
        """A multi-stage flow step (``batch_dims = 0``, :mod:`gaugekit.optim.flow_ode`); the
        dial step if integration fails."""
        assert closure is not None
        opts = self.defaults
        flow = self.state["flow"]
        params = [p for _, p, _, _ in entries]
        lrs = [self._hyper(group, "lr", p) for group, p, _, _ in entries]
        solution = integrate_clipped_flow(
            params, [g for _, _, g, _ in entries], lrs,
            [group["maximize"] for group, *_ in entries], closure,
            method=opts["flow_method"], time_scale=opts["flow_time_scale"],
            clip_mode=opts["flow_clip_mode"], clip=opts["flow_clip"], tol=opts["flow_tol"],
        )
        flow["extra_grad_evals"] += max(solution.calls - 1, 0)
        if solution.error is not None:
            exc = solution.error
            flow["failures"] += 1
            warnings.warn(
                f"FlowAdam: flow integration ({opts['flow_method']}) failed at step "
                f"{flow['step']} ({type(exc).__name__}: {exc}); parameters restored and the dial "
                "step taken instead", RuntimeWarning, stacklevel=3,
            )
            for p, p0 in zip(params, solution.start, strict=True):
                p.copy_(p0)
            self._dial_step(entries, shared)
            return
        take_flow_step_(
            params, [state["exp_avg"] for *_, state in entries], solution, lrs,
            time_scale=opts["flow_time_scale"], velocity_cap=opts["flow_velocity_cap"],
            blend=opts["flow_blend"],
        )
        flow["flow_steps"] = flow["flow_steps"] + 1

    # ------------------------------------------------------------------------------ counters
    def flow_counters(self) -> dict[str, Tensor | int]:
        """Counts since construction (copies; per-run tensors have shape ``batch_shape``).

        ``steps`` (steps with a gradient), ``flow_steps`` (steps that took the flow path),
        ``plateau_triggers`` and ``stiff_triggers`` (each test that fired, after the warm-up;
        a step can fire both), ``failures`` (integrations that fell back to the dial step),
        ``extra_grad_evals`` (closure calls by multi-stage stages) and ``trigger_rate``
        (``flow_steps / steps``, float). Reading a tensor value (``.item()``) synchronises.
        """
        flow = self.state.get("flow")
        if flow is None:
            flow = self._fresh_flow_state(
                next(p for group in self.param_groups for p in group["params"]))
        return FF.flow_counters(flow)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's loader, plus a private copy of ``state["flow"]`` on the parameters' device."""
        super().load_state_dict(state_dict)
        flow = self.state.get("flow")
        if flow is not None:
            device = next(p for group in self.param_groups for p in group["params"]).device
            self.state["flow"] = {
                key: value.detach().clone().to(device) if isinstance(value, Tensor) else value
                for key, value in flow.items()
            }
