r"""FlowAdam: Adam with the anisotropy dial and a clipped gradient-flow path.

Two additions to Adam, from the paper's FlowAdam prototype (arXiv 2608.05136, Section 10;
``flowadam/optimizer.py`` of ``idevender/loss-basis-adam``).

**The anisotropy dial** ``p = precond_power``. With ``s_i = √v̂_i`` the per-entry scale and ``s̄``
one scalar shared by every entry of every parameter of every group (one per run),

.. math::  θ ← θ − \mathrm{lr}\; \hat m_i \,/\, \big(s_i^{\,p}\, \bar s^{\,1-p} + ε\big).

``p = 1`` is Adam, ``p = 0`` is shared-scale Adam, and ``p`` in between interpolates the geometry
of the denominator. ``s̄`` is ``'rms'``, ``√(mean v̂)``, a function of the gradients' Frobenius
norms only (gauge-invariant), or ``'geomean'``, ``exp(mean log s_i)``, which depends on the basis.

**The flow path.** Every step updates ``n_t = ‖g_t‖`` and ``c_t = ‖g_t − g_{t−1}‖`` (norms over all
parameters, ``g_0 = 0``) and their EMAs ``n̄_t``, ``c̄_t`` (factor ``flow_stat_beta``, started at
the first value, current value included). Once more than ``flow_warmup`` steps are done, the step
is a *flow step* when ``n_t < flow_plateau · n̄_t`` (plateau) or ``c_t > flow_stiffness · c̄_t``
(stiff). A flow step integrates the clipped gradient flow of group ``j`` (learning rate ``lr_j``)

.. math::  \frac{dθ_j}{dτ} = −\mathrm{lr}_j\, \mathrm{clip}(∇L(θ))_j, \qquad τ ∈ [0, T],\;
           T = \texttt{flow\_time\_scale},

(one group: the prototype's ``dθ/dt = −clip(∇L)`` on ``[0, lr·T]``), sets ``θ`` to the end point
and blends the flow velocity ``u_j = −Δθ_j / lr_j`` into the first moment,
``m ← (1 − γ) m + γ u`` with ``γ = flow_blend`` and ``u`` rescaled per parameter to
``‖u‖ ≤ flow_velocity_cap · ‖m‖``; there is no dial step on a flow step. ``clip`` is
``'globalnorm'`` (``g · min(1, c / ‖g‖)``, ``‖g‖`` over all parameters: keeps the direction) or
``'percoord'`` (each entry clamped to ``[−c, c]``: changes the direction), ``c = flow_clip``.
``flow_method='euler'`` takes one Euler step from the gradient already in ``.grad``, so
``θ ← θ − lr_j T clip(g)_j`` and ``u = T clip(g)``: no closure and no second gradient evaluation.
Multi-stage methods (``'rk4'``, ``'dopri5'``, … from the optional package ``torchdiffeq``)
re-evaluate the gradient through the closure at their stages (counted in
``flow_counters()['extra_grad_evals']``); a failed integration (an exception or a non-finite end
point) restores ``θ``, warns, and takes the dial step instead.

Conventions (single ε): ``s̄`` carries no ε; ``ε`` is added once, after the blend, so the dial
is continuous in ``p`` and equals :class:`~gaugekit.optim.Adam` at ``p = 1`` and
:class:`~gaugekit.optim.SharedScaleAdam` at ``p = 0`` (``'rms'``). ``'geomean'`` floors ``s_i``
at ``1e-30`` before the log (a guard against ``log 0``, not an ε). Decoupled weight decay
``θ ← θ (1 − lr · weight_decay)`` precedes every step, dial or flow. Both moments and ``step``
advance on every step, flow steps included; on a flow step the blend acts on the updated ``m``.

Stacked runs (``batch_dims = b``): every norm, ``s̄``, the clip and the trigger are per run, and
each run takes its own path (a flow step in one run, a dial step in another), so a stack updates
like its runs one by one. Multi-stage methods need ``batch_dims = 0``.

Deviations from the prototype: any number of param groups (per-group ``lr``, ``betas``, ``eps``,
``weight_decay``, ``precond_power``; ``s̄``, the norms and the clip over all groups, which is what
invariance needs); no closure for Euler, and the gradient already computed is the flow's first
stage; the moments and ``step`` advance on flow steps (the prototype froze ``v`` and ``step``);
one ε (the prototype added it in three places); per-run masks instead of ``.item()`` and
flattening; counters instead of per-trigger lists; defaults are the gauge-invariant preset
(the prototype's were ``'geomean'`` and ``'percoord'``, see :data:`FLOW_ADAM_PRESETS`).

Gauge: equivariant with ``p = 0``, ``'rms'`` and ``'globalnorm'`` (the preset ``'invariant'``):
``s̄``, ``n_t``, ``c_t``, the clip factor and the velocity cap are Frobenius norms, invariant under
``G → G Q``, so each step is a covariant gradient or moment times invariant scalars. ``p > 0``,
``'geomean'`` or ``'percoord'`` each break it.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from gaugekit._extras import MissingExtra
from gaugekit.optim import distributed as D
from gaugekit.optim.base import ZooOptimizer
from gaugekit.optim.registry import OptimizerSpec, register_optimizer
from gaugekit.optim.validation import (
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

__all__ = [
    "CLIP_MODES",
    "FLOW_ADAM_PRESETS",
    "FLOW_METHODS",
    "GEOMEAN_FLOOR",
    "MULTI_STAGE_METHODS",
    "PRECOND_SCALARS",
    "FlowAdam",
    "cap_velocity",
    "clip_gradients",
    "dial_coefficient",
    "global_clip_factor",
    "gradient_statistics_",
    "shared_scale_statistic",
    "velocity_cap_factor",
]

PRECOND_SCALARS: tuple[str, ...] = ("rms", "geomean")
CLIP_MODES: tuple[str, ...] = ("globalnorm", "percoord")
#: torchdiffeq methods; each needs a closure (its stages re-evaluate the gradient).
MULTI_STAGE_METHODS: tuple[str, ...] = (
    "midpoint", "heun2", "heun3", "rk4", "bosh3", "fehlberg2", "adaptive_heun", "dopri5", "dopri8",
)
FLOW_METHODS: tuple[str, ...] = ("euler", *MULTI_STAGE_METHODS)
#: floor of ``s_i`` inside the log of the ``'geomean'`` statistic (guards ``log 0``).
GEOMEAN_FLOOR = 1e-30

#: Named configurations. ``'invariant'``: the gauge-invariant FlowAdam-p of the paper (p = 0,
#: RMS scalar, global-norm clip c = 10), also the class defaults. ``'prototype'``: the
#: configuration of the paper's FlowAdam runs (p = 1, geometric-mean scalar, per-coordinate clip
#: to [−1, 1]). Both use the paper's trigger settings: Euler, plateau 0.9, stiffness 0.1, T = 0.5.
FLOW_ADAM_PRESETS: dict[str, dict[str, Any]] = {
    "invariant": {
        "precond_power": 0.0, "precond_scalar": "rms", "flow": True, "flow_method": "euler",
        "flow_time_scale": 0.5, "flow_plateau": 0.9, "flow_stiffness": 0.1,
        "flow_clip_mode": "globalnorm", "flow_clip": 10.0, "flow_blend": 0.5,
        "flow_velocity_cap": 5.0, "flow_warmup": 10, "flow_stat_beta": 0.9,
    },
    "prototype": {
        "precond_power": 1.0, "precond_scalar": "geomean", "flow": True, "flow_method": "euler",
        "flow_time_scale": 0.5, "flow_plateau": 0.9, "flow_stiffness": 0.1,
        "flow_clip_mode": "percoord", "flow_clip": 1.0, "flow_blend": 0.5,
        "flow_velocity_cap": 5.0, "flow_warmup": 10, "flow_stat_beta": 0.9,
    },
}

#: Options that define the shared quantities, hence one value for the whole optimizer.
_OPTIMIZER_WIDE: tuple[str, ...] = (
    "batch_dims", "precond_scalar", "flow", "flow_method", "flow_time_scale", "flow_plateau",
    "flow_stiffness", "flow_clip_mode", "flow_clip", "flow_blend", "flow_velocity_cap",
    "flow_warmup", "flow_stat_beta", "flow_tol",
)
#: exceptions of a failed integration (torchdiffeq signals a step-size underflow by an assert)
_FAILURES = (RuntimeError, FloatingPointError, AssertionError)


# --------------------------------------------------------------------------------------------
# functional core
# --------------------------------------------------------------------------------------------


def _run_sum(x: Tensor, batch_dims: int) -> Tensor:
    """Sum over the non-batch dimensions: shape ``x.shape[:batch_dims]``."""
    dims = tuple(range(batch_dims, x.ndim))
    return x.sum(dim=dims) if dims else x


def _run_norm(x: Tensor, batch_dims: int) -> Tensor:
    """Frobenius norm over the non-batch dimensions (no temporary the size of ``x``)."""
    dims = tuple(range(batch_dims, x.ndim))
    return torch.linalg.vector_norm(x, dim=dims) if dims else x.abs()


def _run_view(s: Tensor, like: Tensor, batch_dims: int) -> Tensor:
    """View a per-run tensor (shape ``like.shape[:batch_dims]`` or 0-d) to broadcast on ``like``."""
    if s.ndim == 0:
        return s
    return s.reshape(tuple(s.shape) + (1,) * (like.ndim - batch_dims))


def _run_view_any(value: Hyper, like: Tensor, batch_dims: int) -> Hyper:
    return _run_view(value, like, batch_dims) if isinstance(value, Tensor) else value


def _run_value(value: Hyper, like: Tensor) -> Hyper:
    """A per-run hyperparameter in run shape (not broadcast), on ``like``'s device and dtype."""
    return value.to(device=like.device, dtype=like.dtype) if isinstance(value, Tensor) else value


def shared_scale_statistic(
    exp_avg_sqs: list[Tensor], bias_corrections2: list[Hyper], kind: str, batch_dims: int
) -> Tensor:
    r"""The shared scale ``s̄`` of the dial, one value per run (shape ``batch_shape``), no ε.

    ``v̂ = v / (1 − β₂ᵗ)`` per parameter (``bias_corrections2[i]`` in run shape). ``'rms'``:
    ``s̄ = √(Σ v̂ / N)`` over all ``N`` entries of all parameters; ``'geomean'``:
    ``s̄ = exp(Σ log max(√v̂, 10⁻³⁰) / N)``.
    """
    count = sum(v[(0,) * batch_dims].numel() for v in exp_avg_sqs)
    pairs = list(zip(exp_avg_sqs, bias_corrections2, strict=True))
    if kind == "rms":
        total = sum(_run_sum(v, batch_dims) / bias2 for v, bias2 in pairs)
        return (total / count).sqrt()
    if kind == "geomean":
        logs = (
            (v / _run_view_any(bias2, v, batch_dims)).sqrt_().clamp_min_(GEOMEAN_FLOOR).log_()
            for v, bias2 in pairs
        )
        return (sum(_run_sum(x, batch_dims) for x in logs) / count).exp()
    raise invalid("precond_scalar", kind, f"one of {PRECOND_SCALARS!r}")


def dial_coefficient(
    exp_avg_sq: Tensor, *, step: int, lr: Hyper, beta1: Hyper, beta2: Hyper, eps: Hyper,
    power: Hyper, shared: Tensor | None,
) -> Tensor:
    r"""``r`` with ``Δθ = r · m`` for the dial step: ``r = −lr / ((1 − β₁ᵗ)(s^p s̄^{1−p} + ε))``.

    ``s = √(v / (1 − β₂ᵗ))``. Hyperparameters are floats or tensors broadcast against the
    parameter; ``shared`` is ``s̄`` broadcast likewise (unused when ``power`` is the float 1).
    Returns a full tensor, or (``power`` the float 0) a per-run tensor that broadcasts.

    Between the ends the blend is taken in the log domain,
    ``s^p s̄^{1−p} = exp((p/2) log v + (1−p) log s̄ − (p/2) log(1 − β₂ᵗ))``: one ``log`` and one
    ``exp`` per entry cost less than half of one ``pow`` with a fractional exponent (37 ms
    against 16 ms on 10M float32 entries, 2 CPU threads), and agree with it to a few ulp. A zero
    ``v`` gives ``s^p = 0`` (``log 0 = −∞``); a per-run ``power`` of exactly 0 or 1 gives the
    factor ``1`` (``0 · log 0`` is taken as 0, as ``x⁰ = 1``).
    """
    bias1 = 1 - beta1**step
    bias2 = 1 - beta2**step
    if not isinstance(power, Tensor) and power == 1:
        denom = exp_avg_sq.sqrt().div_(bias2**0.5).add_(eps)
    elif not isinstance(power, Tensor) and power == 0:
        assert shared is not None
        return (-lr / bias1) / (shared + eps)
    else:
        assert shared is not None
        half = power / 2
        shared_log = _xlogy(1 - power, shared) - _xlogy(half, bias2)
        denom = torch.log(exp_avg_sq)
        if isinstance(half, Tensor):
            denom = torch.where(half > 0, denom.mul_(half), 0.0).add_(shared_log)
        else:
            torch.add(shared_log, denom, alpha=half, out=denom)
        denom.exp_().add_(eps)
    return torch.div(-lr / bias1, denom, out=denom)


def _xlogy(x: Hyper, y: Tensor | float) -> Tensor | float:
    """``x · log y`` with ``0 · log y = 0`` (for ``y = 0`` too): small per-run terms only."""
    if isinstance(x, Tensor) or isinstance(y, Tensor):
        return torch.xlogy(x, y)
    return 0.0 if x == 0 else x * math.log(y)


def gradient_statistics_(
    grads: list[Tensor], previous: list[Tensor], batch_dims: int
) -> tuple[list[Tensor], Tensor, Tensor]:
    r"""Per-parameter ``‖g_i‖``, then ``n = ‖g‖`` and ``c = ‖g − g_prev‖`` over all parameters.

    Overwrites ``previous`` with ``grads`` (in place, no temporaries the size of a parameter).
    """
    norms = [_run_norm(g, batch_dims) for g in grads]
    change_sq = 0
    for g, q in zip(grads, previous, strict=True):
        change_sq = change_sq + _run_norm(q.sub_(g), batch_dims).square()
        q.copy_(g)
    return norms, sum(n.square() for n in norms).sqrt(), change_sq.sqrt()


def clip_gradients(
    grads: list[Tensor], mode: str, threshold: float, grad_norm: Tensor, batch_dims: int
) -> list[Tensor]:
    r"""``clip(g)``: ``'globalnorm'`` ``g · min(1, c / ‖g‖)`` (``grad_norm = ‖g‖`` per run, over all
    parameters); ``'percoord'`` each entry clamped to ``[−c, c]``."""
    if mode == "globalnorm":
        factor = global_clip_factor(threshold, grad_norm)
        return [g * _run_view(factor, g, batch_dims) for g in grads]
    if mode == "percoord":
        return [g.clamp(-threshold, threshold) for g in grads]
    raise invalid("flow_clip_mode", mode, f"one of {CLIP_MODES!r}")


def global_clip_factor(threshold: float, grad_norm: Tensor) -> Tensor:
    r"""``min(1, c / ‖g‖)`` per run (1 when ``‖g‖ = 0``)."""
    return (threshold / grad_norm).clamp_(max=1.0)


def velocity_cap_factor(speed: Tensor, momentum_norm: Tensor, cap: float) -> Tensor:
    r"""``min(1, cap · ‖m‖ / ‖u‖)`` per run, given ``speed = ‖u‖`` (1 when ``u = 0``)."""
    limit = cap * momentum_norm
    return torch.where(speed > limit, limit / speed, torch.ones_like(speed))


def cap_velocity(velocity: Tensor, exp_avg: Tensor, cap: float, batch_dims: int) -> Tensor:
    r"""``u · min(1, cap · ‖m‖ / ‖u‖)`` per parameter and run (``u`` unchanged when ``u = 0``)."""
    factor = velocity_cap_factor(
        _run_norm(velocity, batch_dims), _run_norm(exp_avg, batch_dims), cap
    )
    return velocity * _run_view(factor, velocity, batch_dims)


def _paths_taken(fire: Tensor) -> tuple[bool, bool]:
    r"""``(some run takes the dial step, some run takes the flow step)`` for the per-run mask
    ``fire``, read on the host when ``fire`` lives on the CPU (where the read costs nothing);
    ``(True, True)`` on any other device, where a read would stall the queue of kernels.

    The Euler step skips a term whose weight is 0 for every run: ``(1 − f)·r·m`` when every run
    fires, the flow terms when none does. Each would have added an exact zero (``0 · x = ±0``
    for finite ``x``), so every finite value is unchanged, up to the sign of an exact zero; on
    10M float32 entries this saves about 3 of the 27 streams over memory on a flow step and 9
    on a dial step.
    """
    if not _host_reads_are_free(fire.device):
        return True, True
    return not bool(fire.all()), bool(fire.any())


def _host_reads_are_free(device: torch.device) -> bool:
    """Whether reading a value of ``device`` on the host costs no stall: the CPU only."""
    return device.type == "cpu"


def _odeint() -> Callable[..., Any]:
    """``torchdiffeq.odeint``, imported on first use (the package is optional)."""
    from torchdiffeq import odeint

    return odeint


def _require_torchdiffeq(method: str) -> None:
    if importlib.util.find_spec("torchdiffeq") is None:
        raise MissingExtra(f"FlowAdam(flow_method={method!r})", "experiments", ("torchdiffeq",),
                           note="flow_method='euler' needs nothing")


# --------------------------------------------------------------------------------------------
# the optimizer
# --------------------------------------------------------------------------------------------


class FlowAdam(ZooOptimizer):
    r"""Adam with the anisotropy dial and a clipped gradient-flow path (see the module doc).

    .. math::
        m ← β_1 m + (1-β_1) g,\quad v ← β_2 v + (1-β_2) g^2,\quad
        θ ← θ − \mathrm{lr}\,\frac{m/(1-β_1^t)}{s^p \bar s^{1-p} + ε},\quad s = \sqrt{v/(1-β_2^t)}

    on dial steps; on flow steps (plateau or stiff gradient statistics after the warm-up)
    ``θ`` follows the clipped gradient flow for time ``flow_time_scale`` and the flow velocity
    is blended into ``m``. ``s̄``, the gradient norms, the trigger and the global-norm clip are
    taken over ALL parameters of ALL groups, once per step (one value per run).

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with the flow path on,
    ``prev_grad``. Optimizer-wide state ``state["flow"]``: ``step`` (int), ``grad_norm_avg``,
    ``grad_change_avg`` (per run), the counters ``flow_steps``, ``plateau_triggers``,
    ``stiff_triggers`` (int64 per run), ``failures`` and ``extra_grad_evals`` (ints); read them
    with :meth:`flow_counters`. Off the CPU nothing on the hot path synchronises with the host
    (Euler); on the CPU, where a read is free, the Euler step reads the trigger to skip the terms
    that every run weights by 0. A multi-stage method reads the trigger once per step after the
    warm-up.

    Deviations from the paper's prototype: listed in the module docstring.

    Gauge: equivariant for ``precond_power=0, precond_scalar='rms', flow_clip_mode='globalnorm'``
    (the defaults, preset ``'invariant'``); not equivariant otherwise.

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
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    hyper_checks = {
        "lr": LR,
        "betas": betas_check(),
        "eps": EPS,
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
        "precond_power": real_check(0.0, 1.0),
        "precond_scalar": choice_check(*PRECOND_SCALARS),
        "flow": bool_check,
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
    }

    def __init__(
        self,
        params: Any,
        lr: Hyper = 1e-3,
        betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8,
        weight_decay: Hyper = 0.0,
        *,
        precond_power: Hyper = 0.0,
        precond_scalar: str = "rms",
        flow: bool = True,
        flow_method: str = "euler",
        flow_time_scale: float = 0.5,
        flow_plateau: float = 0.9,
        flow_stiffness: float = 0.1,
        flow_clip_mode: str = "globalnorm",
        flow_clip: float = 10.0,
        flow_blend: float = 0.5,
        flow_velocity_cap: float = 5.0,
        flow_warmup: int = 10,
        flow_stat_beta: float = 0.9,
        flow_tol: float = 1e-4,
        maximize: bool = False,
        batch_dims: int = 0,
        **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "precond_power": precond_power, "precond_scalar": precond_scalar, "flow": flow,
            "flow_method": flow_method, "flow_time_scale": flow_time_scale,
            "flow_plateau": flow_plateau, "flow_stiffness": flow_stiffness,
            "flow_clip_mode": flow_clip_mode, "flow_clip": flow_clip, "flow_blend": flow_blend,
            "flow_velocity_cap": flow_velocity_cap, "flow_warmup": flow_warmup,
            "flow_stat_beta": flow_stat_beta, "flow_tol": flow_tol, "maximize": maximize,
        }
        if flow is True and flow_method in MULTI_STAGE_METHODS:
            if batch_dims != 0:
                raise invalid(
                    "batch_dims", batch_dims,
                    f"0 with flow_method={flow_method!r} (multi-stage flows integrate one run); "
                    "use flow_method='euler' for stacked runs",
                )
            _require_torchdiffeq(flow_method)
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    @classmethod
    def from_preset(cls, params: Any, preset: str = "invariant", **overrides: Any) -> FlowAdam:
        """``FlowAdam(params, **FLOW_ADAM_PRESETS[preset], **overrides)``."""
        if preset not in FLOW_ADAM_PRESETS:
            raise invalid("preset", preset, f"one of {tuple(FLOW_ADAM_PRESETS)!r}")
        return cls(params, **{**FLOW_ADAM_PRESETS[preset], **overrides})

    # ----------------------------------------------------------------------------- validation
    def _check_group(self, group: dict[str, Any]) -> None:
        check_optimizer_wide(
            group, self.defaults, _OPTIMIZER_WIDE, "it cannot differ by group"
        )
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
        powers = [group["precond_power"] for group in self.param_groups]
        return any(isinstance(q, Tensor) or q != 1 for q in powers)

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
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._update_all(closure)
        return loss

    def _update_all(self, closure: Callable[[], Any] | None = None) -> None:
        opts = self.defaults
        entries: list[tuple[dict[str, Any], Tensor, Tensor, dict[str, Any]]] = []
        for group in self.param_groups:
            for p, g in self._with_grad(group["params"]):
                g = -g if group["maximize"] else g
                state = self.state[p]
                if not state:
                    keys = ("exp_avg", "exp_avg_sq", "prev_grad")[: 3 if opts["flow"] else 2]
                    state["step"] = 0
                    for key in keys:
                        state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                entries.append((group, p, g, state))
        if not entries:
            return

        for group, p, g, state in entries:
            weight_decay = group["weight_decay"]
            if isinstance(weight_decay, Tensor) or weight_decay != 0:
                p.mul_(1 - self._hyper(group, "lr", p) * self._hyper(group, "weight_decay", p))
            beta1, beta2 = self._hyper(group, "betas", p)
            state["exp_avg"].lerp_(g, 1 - beta1)
            state["exp_avg_sq"].lerp_(g * g, 1 - beta2)

        stats = self._distributed_statistics(entries)
        shared = self._shared_scale(entries, stats)
        fire, param_norms, norm = (
            self._flow_trigger(entries, stats) if opts["flow"] else (None, [], None)
        )
        if fire is None:
            for group, p, _, state in entries:
                p.addcmul_(state["exp_avg"], self._coefficient(group, p, state, shared))
        elif not self._multi_stage:
            self._euler_or_dial(entries, shared, fire, param_norms, norm, stats)
        elif bool(fire):
            self._integrated_flow(entries, shared, closure)
        else:
            for group, p, _, state in entries:
                p.addcmul_(state["exp_avg"], self._coefficient(group, p, state, shared))

    # ----------------------------------------------------------------------------- the dial
    def _shared_scale(self, entries: list, stats: dict[str, Any] | None = None) -> Tensor | None:
        """``s̄`` per run, or ``None`` when every group has ``p`` equal to the float 1."""
        powers = [group["precond_power"] for group, *_ in entries]
        if all(not isinstance(q, Tensor) and q == 1 for q in powers):
            return None
        if stats is not None:
            return stats["shared"]
        bias2 = []
        for group, p, _, state in entries:
            beta2 = _run_value(group["betas"][1], p)
            bias2.append(1 - beta2 ** state["step"])
        return shared_scale_statistic(
            [state["exp_avg_sq"] for *_, state in entries], bias2,
            self.defaults["precond_scalar"], self.defaults["batch_dims"],
        )

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
            shared=None if shared is None else _run_view(shared, p, self.defaults["batch_dims"]),
        )

    def _distributed_statistics(self, entries: list) -> dict[str, Any] | None:
        r"""Every reduction of the step, for DTensor (FSDP2) parameters; ``None`` for plain ones.

        From the local blocks: ``Σ v̂`` (or ``Σ log s_i``) for ``s̄``, ``‖g_i‖²``,
        ``‖g_i − g_prev,i‖²`` (``prev_grad`` is overwritten with ``g`` here) and, once the flow
        may fire, ``‖m_i‖²`` and (``'percoord'``) ``‖clip(g)_i‖²``: all sums over parameter
        entries, reduced across the shards in ONE
        :func:`~gaugekit.optim.distributed.param_sums` call (one ``all_reduce`` of a few
        scalars, no host sync). The same quantities as one process, up to round-off (sums of
        squares instead of ``vector_norm``); needs ``batch_dims = 0``.
        """
        if not any(D.is_dtensor(p) for _, p, _, _ in entries):
            return None
        opts = self.defaults
        flow = self.state.get("flow")
        eligible = opts["flow"] and flow is not None and flow["step"] > opts["flow_warmup"]
        percoord = opts["flow_clip_mode"] == "percoord"
        powers = [group["precond_power"] for group, *_ in entries]
        needs_shared = any(isinstance(q, Tensor) or q != 1 for q in powers)
        keys: list[str] = []
        partials: list[Tensor] = []
        refs: list[Tensor] = []

        def add(key: str, value: Tensor, ref: Tensor) -> None:
            keys.append(key)
            partials.append(value)
            refs.append(ref)

        for group, _, g, state in entries:
            if needs_shared:
                v = D.local(state["exp_avg_sq"])
                bias2 = 1 - _run_value(group["betas"][1], v) ** state["step"]
                if opts["precond_scalar"] == "rms":
                    add("shared", v.sum() / bias2, state["exp_avg_sq"])
                else:
                    logs = (v / bias2).sqrt_().clamp_min_(GEOMEAN_FLOOR).log_()
                    add("shared", logs.sum(), state["exp_avg_sq"])
            if opts["flow"]:
                g_local, prev = D.local(g), D.local(state["prev_grad"])
                add("grad", (g_local * g_local).sum(), g)
                add("change", prev.sub_(g_local).square_().sum(), g)
                prev.copy_(g_local)
                if eligible:
                    m = D.local(state["exp_avg"])
                    add("momentum", (m * m).sum(), state["exp_avg"])
                    if percoord:
                        d = g_local.clamp(-opts["flow_clip"], opts["flow_clip"])
                        add("direction", (d * d).sum(), g)
        sums: dict[str, list[Tensor]] = {}
        for key, value in zip(keys, D.param_sums(partials, refs), strict=True):
            sums.setdefault(key, []).append(value)
        stats: dict[str, Any] = {"shared": None, "momentum_norms": None, "direction_norms": None}
        if needs_shared:
            mean = sum(sums["shared"]) / sum(math.prod(p.shape) for _, p, _, _ in entries)
            stats["shared"] = mean.sqrt() if opts["precond_scalar"] == "rms" else mean.exp()
        if opts["flow"]:
            stats["param_norms"] = [x.sqrt() for x in sums["grad"]]
            stats["norm"] = sum(sums["grad"]).sqrt()
            stats["change"] = sum(sums["change"]).sqrt()
            if eligible:
                stats["momentum_norms"] = [x.sqrt() for x in sums["momentum"]]
                if percoord:
                    stats["direction_norms"] = [x.sqrt() for x in sums["direction"]]
        return stats

    # ------------------------------------------------------------------------- the trigger
    def _flow_state(self, like: Tensor) -> dict[str, Any]:
        flow = self.state.get("flow")
        if flow is None:
            batch_shape = like.shape[: self.defaults["batch_dims"]]
            stats = torch.zeros(batch_shape, dtype=like.dtype, device=like.device)
            count = torch.zeros(batch_shape, dtype=torch.int64, device=like.device)
            flow = {
                "step": 0, "grad_norm_avg": stats, "grad_change_avg": stats.clone(),
                "flow_steps": count, "plateau_triggers": count.clone(),
                "stiff_triggers": count.clone(), "failures": 0, "extra_grad_evals": 0,
            }
            self.state["flow"] = flow
        return flow

    def _flow_trigger(
        self, entries: list, stats: dict[str, Any] | None = None
    ) -> tuple[Tensor | None, list[Tensor], Tensor]:
        """Update the trigger statistics. Returns the per-run flow mask (``None`` during the
        warm-up), the per-parameter gradient norms and the global gradient norm."""
        opts = self.defaults
        batch_dims = opts["batch_dims"]
        flow = self._flow_state(entries[0][1])
        grads = [g for _, _, g, _ in entries]
        previous = [state["prev_grad"] for *_, state in entries]
        if stats is None:
            param_norms, norm, change = gradient_statistics_(grads, previous, batch_dims)
        else:  # already reduced, and prev_grad already overwritten
            param_norms, norm, change = stats["param_norms"], stats["norm"], stats["change"]
        beta = opts["flow_stat_beta"]
        if flow["step"] == 0:
            flow["grad_norm_avg"], flow["grad_change_avg"] = norm, change
        else:
            flow["grad_norm_avg"] = beta * flow["grad_norm_avg"] + (1 - beta) * norm
            flow["grad_change_avg"] = beta * flow["grad_change_avg"] + (1 - beta) * change
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
        """Per run: one Euler step of the clipped flow where ``fire``, the dial step elsewhere.

        With ``f ∈ {0, 1}`` per run, ``θ += (1 − f)·r·m + f·(−lr T κ)·d`` and
        ``m ← (1 − γf) m + γf·T κ φ·d``, where ``d`` is ``g`` (global-norm clip, factor ``κ``)
        or the clamped ``g`` (``κ = 1``) and ``φ`` the velocity cap: fused in-place updates,
        exact (a zero weight adds nothing) for the runs that take the dial step. Terms whose
        weight is 0 for every run are skipped when the trigger can be read for free
        (:func:`_paths_taken`); a skipped term would have added an exact zero.
        """
        opts = self.defaults
        batch_dims = opts["batch_dims"]
        dial_terms, flow_terms = _paths_taken(fire)
        fired = fire.to(norm.dtype)
        time_scale = opts["flow_time_scale"]
        weight = opts["flow_blend"] * fired
        if not flow_terms:  # no run fires: the dial step, with the flow-step code's numbers
            for group, p, _, state in entries:
                lr = self._hyper(group, "lr", p)
                f = _run_view(fired, p, batch_dims)
                p.addcmul_(state["exp_avg"], self._coefficient(group, p, state, shared,
                                                               lr * (1 - f)))
            return
        if opts["flow_clip_mode"] == "globalnorm":
            kappa = global_clip_factor(opts["flow_clip"], norm)
            directions = [g for _, _, g, _ in entries]
            speeds = [time_scale * kappa * n for n in param_norms]
        else:
            kappa = torch.ones_like(norm)
            directions = [g.clamp(-opts["flow_clip"], opts["flow_clip"]) for _, _, g, _ in entries]
            speeds = (
                [time_scale * _run_norm(d, batch_dims) for d in directions] if stats is None
                else [time_scale * n for n in stats["direction_norms"]]
            )
        momentum_norms = [None] * len(entries) if stats is None else stats["momentum_norms"]
        rows = zip(entries, directions, speeds, momentum_norms, strict=True)
        for (group, p, _, state), direction, speed, m_norm in rows:
            exp_avg = state["exp_avg"]
            f = _run_view(fired, p, batch_dims)
            lr = self._hyper(group, "lr", p)
            cap = opts["flow_velocity_cap"]
            if m_norm is None:
                m_norm = _run_norm(exp_avg, batch_dims)
            phi = velocity_cap_factor(speed, m_norm, cap)
            if dial_terms:
                p.addcmul_(exp_avg, self._coefficient(group, p, state, shared, lr * (1 - f)))
            p.addcmul_(direction, -(lr * time_scale) * _run_view(kappa, p, batch_dims) * f)
            exp_avg.mul_(_run_view(1 - weight, p, batch_dims))
            exp_avg.addcmul_(direction, _run_view(weight * time_scale * kappa * phi, p, batch_dims))
        flow = self.state["flow"]
        flow["flow_steps"] = flow["flow_steps"] + fire

    def _integrated_flow(
        self, entries: list, shared: Tensor | None, closure: Callable[[], Any] | None
    ) -> None:
        """A multi-stage flow step (``batch_dims = 0``); the dial step if integration fails."""
        assert closure is not None
        opts = self.defaults
        flow = self.state["flow"]
        params = [p for _, p, _, _ in entries]
        lrs = [self._hyper(group, "lr", p) for group, p, _, _ in entries]
        start = [p.detach().clone() for p in params]
        def clip(grads: list[Tensor]) -> list[Tensor]:
            norm = sum(g.square().sum() for g in grads).sqrt()
            return clip_gradients(grads, opts["flow_clip_mode"], opts["flow_clip"], norm, 0)

        clipped = clip([g for _, _, g, _ in entries])
        first_field = [-lr * c for lr, c in zip(lrs, clipped, strict=True)]
        calls = 0

        def field(tau: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
            nonlocal calls
            calls += 1
            if calls == 1:  # every torchdiffeq solver starts with f(0, y0): the known gradient
                return tuple(first_field)
            for p, y_p in zip(params, y, strict=True):
                p.copy_(y_p)
            with torch.enable_grad():
                closure()
            grads = [
                torch.zeros_like(p) if p.grad is None else -p.grad if group["maximize"] else p.grad
                for (group, *_), p in zip(entries, params, strict=True)
            ]
            return tuple(-lr * c for lr, c in zip(lrs, clip(grads), strict=True))

        horizon = torch.tensor([0.0, opts["flow_time_scale"]], dtype=params[0].dtype,
                               device=params[0].device)
        try:
            solution = _odeint()(field, tuple(start), horizon, method=opts["flow_method"],
                                 rtol=opts["flow_tol"], atol=opts["flow_tol"])
            end = [y[-1] for y in solution]
            if not all(bool(torch.isfinite(y).all()) for y in end):
                raise FloatingPointError("the flow's end point is not finite")
        except _FAILURES as exc:
            flow["extra_grad_evals"] += max(calls - 1, 0)
            flow["failures"] += 1
            warnings.warn(
                f"FlowAdam: flow integration ({opts['flow_method']}) failed at step "
                f"{flow['step']} ({type(exc).__name__}: {exc}); parameters restored and the dial "
                "step taken instead",
                RuntimeWarning,
                stacklevel=3,
            )
            for p, p0 in zip(params, start, strict=True):
                p.copy_(p0)
            for group, p, _, state in entries:
                p.addcmul_(state["exp_avg"], self._coefficient(group, p, state, shared))
            return
        flow["extra_grad_evals"] += calls - 1
        rows = zip(entries, start, end, lrs, first_field, strict=True)
        for (_, p, _, state), p0, y, lr, f0 in rows:
            p.copy_(y)
            lr_t = torch.as_tensor(lr, dtype=p.dtype, device=p.device)
            # u = −Δθ / lr; at lr = 0 the flow does not move and u is its lr → 0 limit T·clip(g)
            velocity = torch.where(lr_t > 0, (p0 - y) / lr_t, -f0 * opts["flow_time_scale"])
            capped = cap_velocity(velocity, state["exp_avg"], opts["flow_velocity_cap"], 0)
            state["exp_avg"].lerp_(capped, opts["flow_blend"])
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
            first = next(p for group in self.param_groups for p in group["params"])
            shape = first.shape[: self.defaults["batch_dims"]]
            zero = torch.zeros(shape, dtype=torch.int64, device=first.device)
            flow = {"step": 0, "flow_steps": zero, "plateau_triggers": zero,
                    "stiff_triggers": zero, "failures": 0, "extra_grad_evals": 0}
        steps = flow["step"]
        return {
            "steps": steps,
            "flow_steps": flow["flow_steps"].clone(),
            "plateau_triggers": flow["plateau_triggers"].clone(),
            "stiff_triggers": flow["stiff_triggers"].clone(),
            "failures": flow["failures"],
            "extra_grad_evals": flow["extra_grad_evals"],
            "trigger_rate": flow["flow_steps"].to(torch.float64) / max(steps, 1),
        }

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


# --------------------------------------------------------------------------------------------
# registry entries
# --------------------------------------------------------------------------------------------

_FLOW_LR_GRID = (1e-3, 3e-3, 1e-2, 3e-2)  # experiments/flowadam_upgrade.py

register_optimizer(
    OptimizerSpec(
        name="flow_adam", cls=FlowAdam, equivariant=True,
        reason="p = 0 with the RMS scale, Frobenius-norm triggers and global-norm clip: every "
        "step is a covariant gradient or moment times gauge-invariant scalars",
        lr_schedule="constant", label="FlowAdam (invariant)", paper_lr_grid=_FLOW_LR_GRID,
        ladder_lr_grid=(1e-3, 3e-3),
    ),
    replace=True,
)
register_optimizer(
    OptimizerSpec(
        name="flow_adam_prototype", cls=FlowAdam, equivariant=False,
        reason="Adam's per-entry denominator (p = 1) and the per-coordinate clip do not commute "
        "with rotations of the entries",
        lr_schedule="constant", label="FlowAdam (prototype)", paper_lr_grid=_FLOW_LR_GRID,
        options=FLOW_ADAM_PRESETS["prototype"],
    ),
    replace=True,
)
