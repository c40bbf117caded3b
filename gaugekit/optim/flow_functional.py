r"""Functional core of :class:`~gaugekit.optim.FlowAdam`: the dial and the flow path on tensors.

The counterpart of :mod:`gaugekit.optim.functional` for FlowAdam: the math, written once, as
tensor functions that keep no state of their own. :mod:`gaugekit.optim.flow_adam` creates the
state, broadcasts the hyperparameters, keeps the trigger's running averages and chooses the path
of each run; the multi-stage (torchdiffeq) integration of the flow is
:mod:`gaugekit.optim.flow_ode`. Hyperparameters are Python floats or tensors already broadcast
against the parameter (one value per stacked run); results "per run" have shape ``batch_shape``.

**The anisotropy dial** ``p = precond_power``. With ``s_i = √v̂_i`` the per-entry scale and ``s̄``
one scalar shared by every entry of every parameter of every group (one per run),

.. math::  θ ← θ − \mathrm{lr}\; \hat m_i \,/\, \big(s_i^{\,p}\, \bar s^{\,1-p} + ε\big).

``p = 1`` is Adam, ``p = 0`` is shared-scale Adam, and ``p`` in between interpolates the geometry
of the denominator. ``s̄`` is ``'rms'``, ``√(mean v̂)``, a function of the gradients' Frobenius
norms only (gauge-invariant), or ``'geomean'``, ``exp(mean log s_i)``, which depends on the basis
(:func:`shared_scale_statistic`, :func:`dial_coefficient`).

**The flow path.** Every step updates ``n_t = ‖g_t‖`` and ``c_t = ‖g_t − g_{t−1}‖`` (norms over all
parameters, ``g_0 = 0``, :func:`gradient_statistics_`) and their EMAs ``n̄_t``, ``c̄_t`` (factor
``flow_stat_beta``, started at the first value, current value included,
:func:`trigger_averages`). Once more than ``flow_warmup`` steps are done, the step is a *flow
step* when ``n_t < flow_plateau · n̄_t`` (plateau) or ``c_t > flow_stiffness · c̄_t`` (stiff). A
flow step integrates the clipped gradient flow of group ``j`` (learning rate ``lr_j``)

.. math::  \frac{dθ_j}{dτ} = −\mathrm{lr}_j\, \mathrm{clip}(∇L(θ))_j, \qquad τ ∈ [0, T],\;
           T = \texttt{flow\_time\_scale},

(one group: the prototype's ``dθ/dt = −clip(∇L)`` on ``[0, lr·T]``), sets ``θ`` to the end point
and blends the flow velocity ``u_j = −Δθ_j / lr_j`` into the first moment,
``m ← (1 − γ) m + γ u`` with ``γ = flow_blend`` and ``u`` rescaled per parameter to
``‖u‖ ≤ flow_velocity_cap · ‖m‖`` (:func:`velocity_cap_factor`); there is no dial step on a flow
step. ``clip`` is ``'globalnorm'`` (``g · min(1, c / ‖g‖)``, ``‖g‖`` over all parameters: keeps the
direction) or ``'percoord'`` (each entry clamped to ``[−c, c]``: changes the direction),
``c = flow_clip`` (:func:`clip_gradients`, :func:`flow_directions`). ``flow_method='euler'``
takes one Euler step from the gradient already in ``.grad``, so ``θ ← θ − lr_j T clip(g)_j`` and
``u = T clip(g)``: no closure and no second gradient evaluation (:func:`euler_flow_`).
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
The moments are ``lerp_`` updates (:func:`lerp_moments_`), which round differently from
:func:`gaugekit.optim.functional.adam_moments_`; the decay and ``maximize`` are the zoo's
:func:`~gaugekit.optim.functional.decoupled_decay_` and :func:`~gaugekit.optim.functional.signed`.

Stacked runs (``batch_dims = b``): every norm, ``s̄``, the clip and the trigger are per run (every
reduction runs over the non-batch dimensions), and each run takes its own path (a flow step in
one run, a dial step in another), so a stack updates like its runs one by one. Multi-stage
methods need ``batch_dims = 0``.

Gauge: equivariant with ``p = 0``, ``'rms'`` and ``'globalnorm'`` (the preset ``'invariant'``):
``s̄``, ``n_t``, ``c_t``, the clip factor and the velocity cap are Frobenius norms, invariant under
``G → G Q``, so each step is a covariant gradient or moment times invariant scalars. ``p > 0``,
``'geomean'`` or ``'percoord'`` each break it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from gaugekit.optim import distributed as D
from gaugekit.optim._validation import Hyper, invalid
from gaugekit.optim.base import per_run

__all__ = [
    "CLIP_MODES",
    "GEOMEAN_FLOOR",
    "PRECOND_SCALARS",
    "cap_velocity",
    "clip_gradients",
    "dial_coefficient",
    "euler_flow_",
    "flow_directions",
    "global_clip_factor",
    "gradient_statistics_",
    "lerp_moments_",
    "paths_taken",
    "run_norm",
    "run_sum",
    "run_value",
    "run_view",
    "shared_scale_statistic",
    "sharded_statistics_",
    "trigger_averages",
    "velocity_cap_factor",
]

PRECOND_SCALARS: tuple[str, ...] = ("rms", "geomean")
CLIP_MODES: tuple[str, ...] = ("globalnorm", "percoord")
#: floor of ``s_i`` inside the log of the ``'geomean'`` statistic (guards ``log 0``).
GEOMEAN_FLOOR = 1e-30


# ------------------------------------------------------------------------------- per-run views
def run_sum(x: Tensor, batch_dims: int) -> Tensor:
    """Sum over the non-batch dimensions: shape ``x.shape[:batch_dims]``."""
    dims = tuple(range(batch_dims, x.ndim))
    return x.sum(dim=dims) if dims else x


def run_norm(x: Tensor, batch_dims: int) -> Tensor:
    """Frobenius norm over the non-batch dimensions (no temporary the size of ``x``)."""
    dims = tuple(range(batch_dims, x.ndim))
    return torch.linalg.vector_norm(x, dim=dims) if dims else x.abs()


def run_view(s: Tensor, like: Tensor, batch_dims: int) -> Tensor:
    """View a per-run tensor (shape ``like.shape[:batch_dims]`` or 0-d) to broadcast on ``like``."""
    if s.ndim == 0:
        return s
    return s.reshape(tuple(s.shape) + (1,) * (like.ndim - batch_dims))


def run_value(value: Hyper, like: Tensor) -> Hyper:
    """A per-run hyperparameter in run shape (not broadcast), on ``like``'s device and dtype."""
    return value.to(device=like.device, dtype=like.dtype) if isinstance(value, Tensor) else value


# ------------------------------------------------------------------------------------ moments
def lerp_moments_(
    grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, *, beta1: Hyper, beta2: Hyper
) -> None:
    r"""``m ← m + (1 − β₁)(g − m)``, ``v ← v + (1 − β₂)(g² − v)`` (``lerp_``).

    Adam's moments, as :func:`gaugekit.optim.functional.adam_moments_` in exact arithmetic but
    not in floating point (``lerp_`` rounds once per entry, differently from ``β m + (1 − β) g``).
    """
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad * grad, 1 - beta2)


# ------------------------------------------------------------------------------------ the dial
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
        total = sum(run_sum(v, batch_dims) / bias2 for v, bias2 in pairs)
        return (total / count).sqrt()
    if kind == "geomean":
        logs = (
            (v / per_run(bias2, v, batch_dims)).sqrt_().clamp_min_(GEOMEAN_FLOOR).log_()
            for v, bias2 in pairs
        )
        return (sum(run_sum(x, batch_dims) for x in logs) / count).exp()
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


# --------------------------------------------------------------------------- the flow's numbers
def gradient_statistics_(
    grads: list[Tensor], previous: list[Tensor], batch_dims: int
) -> tuple[list[Tensor], Tensor, Tensor]:
    r"""Per-parameter ``‖g_i‖``, then ``n = ‖g‖`` and ``c = ‖g − g_prev‖`` over all parameters.

    Overwrites ``previous`` with ``grads`` (in place, no temporaries the size of a parameter).
    """
    norms = [run_norm(g, batch_dims) for g in grads]
    change_sq = 0
    for g, q in zip(grads, previous, strict=True):
        change_sq = change_sq + run_norm(q.sub_(g), batch_dims).square()
        q.copy_(g)
    return norms, sum(n.square() for n in norms).sqrt(), change_sq.sqrt()


def trigger_averages(
    averages: tuple[Tensor, Tensor], values: tuple[Tensor, Tensor], beta: float, first: bool
) -> tuple[Tensor, Tensor]:
    r"""The trigger's EMAs ``(n̄, c̄) ← β (n̄, c̄) + (1 − β)(n, c)``; ``(n, c)`` itself when
    ``first`` (the averages start at the first value)."""
    if first:
        return values
    (norm_avg, change_avg), (norm, change) = averages, values
    return beta * norm_avg + (1 - beta) * norm, beta * change_avg + (1 - beta) * change


def clip_gradients(
    grads: list[Tensor], mode: str, threshold: float, grad_norm: Tensor, batch_dims: int
) -> list[Tensor]:
    r"""``clip(g)``: ``'globalnorm'`` ``g · min(1, c / ‖g‖)`` (``grad_norm = ‖g‖`` per run, over all
    parameters); ``'percoord'`` each entry clamped to ``[−c, c]``."""
    if mode == "globalnorm":
        factor = global_clip_factor(threshold, grad_norm)
        return [g * run_view(factor, g, batch_dims) for g in grads]
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
        run_norm(velocity, batch_dims), run_norm(exp_avg, batch_dims), cap
    )
    return velocity * run_view(factor, velocity, batch_dims)


def flow_directions(
    grads: list[Tensor], param_norms: list[Tensor], norm: Tensor, *, mode: str, clip: float,
    time_scale: float, batch_dims: int, direction_norms: list[Tensor] | None = None,
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    r"""``(κ, [d_i], [T κ ‖d_i‖])`` of the Euler step, ``clip(g)_i = κ d_i``.

    ``'globalnorm'``: ``κ = min(1, c / ‖g‖)`` per run (``norm = ‖g‖``), ``d_i = g_i`` and the
    speed ``T κ ‖g_i‖`` from ``param_norms``; ``'percoord'``: ``κ = 1``, ``d_i = g_i`` clamped to
    ``[−c, c]`` and the speed ``T ‖d_i‖`` (``direction_norms``: the ``‖d_i‖`` already reduced).
    """
    if mode == "globalnorm":
        kappa = global_clip_factor(clip, norm)
        return kappa, list(grads), [time_scale * kappa * n for n in param_norms]
    kappa = torch.ones_like(norm)
    directions = [g.clamp(-clip, clip) for g in grads]
    if direction_norms is None:
        direction_norms = [run_norm(d, batch_dims) for d in directions]
    return kappa, directions, [time_scale * n for n in direction_norms]


def paths_taken(fire: Tensor, read: bool) -> tuple[bool, bool]:
    r"""``(some run takes the dial step, some run takes the flow step)`` for the per-run mask
    ``fire``, read on the host when ``read`` (where the read costs nothing: the CPU);
    ``(True, True)`` otherwise, where a read would stall the queue of kernels.

    The Euler step skips a term whose weight is 0 for every run: ``(1 − f)·r·m`` when every run
    fires (:func:`euler_flow_` with ``dial=None``), the flow terms when none does. Each would
    have added an exact zero (``0 · x = ±0`` for finite ``x``), so every finite value is
    unchanged, up to the sign of an exact zero; on 10M float32 entries this saves about 3 of the
    27 streams over memory on a flow step and 9 on a dial step.
    """
    if not read:
        return True, True
    return not bool(fire.all()), bool(fire.any())


def euler_flow_(
    param: Tensor, exp_avg: Tensor, direction: Tensor, *, dial: Tensor | None, lr: Hyper,
    fired: Tensor, kappa: Tensor, phi: Tensor, weight: Tensor, time_scale: float,
    batch_dims: int,
) -> None:
    r"""One parameter of the Euler step, per run ``f ∈ {0, 1}`` (``fired``):

    ``θ ← θ + dial ⊙ m − lr T κ f · d`` and ``m ← (1 − w) m + w T κ φ · d``, where ``d`` is the
    direction (``g``, or the clamped ``g`` with ``κ = 1``), ``dial`` the dial coefficient with
    ``lr (1 − f)`` in place of ``lr`` (``None``: that term is skipped, every run fires),
    ``w = γ f`` (``weight``) and ``φ`` the velocity cap; ``fired``, ``kappa``, ``phi`` and
    ``weight`` are per run. Fused in-place updates; a zero weight adds an exact zero, so a run
    with ``f = 0`` takes exactly the dial step.
    """
    if dial is not None:
        param.addcmul_(exp_avg, dial)
    f = run_view(fired, param, batch_dims)
    param.addcmul_(direction, -(lr * time_scale) * run_view(kappa, param, batch_dims) * f)
    exp_avg.mul_(run_view(1 - weight, param, batch_dims))
    exp_avg.addcmul_(direction, run_view(weight * time_scale * kappa * phi, param, batch_dims))


# ------------------------------------------------------------------------- sharded parameters
def sharded_statistics_(
    grads: Sequence[Tensor], exp_avgs: Sequence[Tensor], exp_avg_sqs: Sequence[Tensor],
    prev_grads: Sequence[Tensor | None], *, beta2s: Sequence[Hyper], steps: Sequence[int],
    numel: int, scalar: str | None, flow: bool, eligible: bool, percoord: bool, clip: float,
) -> dict[str, Any]:
    r"""Every reduction of a step over DTensor (FSDP2) parameters, from their local blocks.

    ``Σ v̂`` (``scalar='rms'``) or ``Σ log max(s_i, 10⁻³⁰)`` (``'geomean'``) for ``s̄``
    (``None``: no ``s̄``), and with ``flow``: ``‖g_i‖²``, ``‖g_i − g_prev,i‖²`` (``prev_grads``
    overwritten with ``grads``) and, when ``eligible`` (the flow may fire), ``‖m_i‖²`` and
    (``percoord``) ``‖clip(g)_i‖²``. All sums over entries, reduced across the shards in ONE
    :func:`~gaugekit.optim.distributed.param_sums` call (one ``all_reduce`` of a few scalars, no
    host sync); ``numel`` is the number of entries of all parameters. Returns ``shared`` (``s̄``)
    and, with ``flow``, ``param_norms``, ``norm``, ``change`` and (eligible) ``momentum_norms``,
    ``direction_norms``: the quantities of one process, up to round-off (sums of squares instead
    of ``vector_norm``); ``batch_dims = 0``.
    """
    keys: list[str] = []
    partials: list[Tensor] = []
    refs: list[Tensor] = []

    def add(key: str, value: Tensor, ref: Tensor) -> None:
        keys.append(key)
        partials.append(value)
        refs.append(ref)

    rows = zip(grads, exp_avgs, exp_avg_sqs, prev_grads, beta2s, steps, strict=True)
    for g, exp_avg, exp_avg_sq, prev_grad, beta2, step in rows:
        if scalar is not None:
            v = D.local(exp_avg_sq)
            bias2 = 1 - run_value(beta2, v) ** step
            if scalar == "rms":
                add("shared", v.sum() / bias2, exp_avg_sq)
            else:
                logs = (v / bias2).sqrt_().clamp_min_(GEOMEAN_FLOOR).log_()
                add("shared", logs.sum(), exp_avg_sq)
        if flow:
            assert prev_grad is not None
            g_local, prev = D.local(g), D.local(prev_grad)
            add("grad", (g_local * g_local).sum(), g)
            add("change", prev.sub_(g_local).square_().sum(), g)
            prev.copy_(g_local)
            if eligible:
                m = D.local(exp_avg)
                add("momentum", (m * m).sum(), exp_avg)
                if percoord:
                    d = g_local.clamp(-clip, clip)
                    add("direction", (d * d).sum(), g)
    sums: dict[str, list[Tensor]] = {}
    for key, value in zip(keys, D.param_sums(partials, refs), strict=True):
        sums.setdefault(key, []).append(value)
    stats: dict[str, Any] = {"shared": None, "momentum_norms": None, "direction_norms": None}
    if scalar is not None:
        mean = sum(sums["shared"]) / numel
        stats["shared"] = mean.sqrt() if scalar == "rms" else mean.exp()
    if flow:
        stats["param_norms"] = [x.sqrt() for x in sums["grad"]]
        stats["norm"] = sum(sums["grad"]).sqrt()
        stats["change"] = sum(sums["change"]).sqrt()
        if eligible:
            stats["momentum_norms"] = [x.sqrt() for x in sums["momentum"]]
            if percoord:
                stats["direction_norms"] = [x.sqrt() for x in sums["direction"]]
    return stats


def fresh_flow_state(like: Tensor, batch_dims: int) -> dict[str, Any]:
    """A new FlowAdam ``state["flow"]``: zero averages and counters, per run on ``like``'s
    device."""
    batch_shape = like.shape[:batch_dims]
    stats = torch.zeros(batch_shape, dtype=like.dtype, device=like.device)
    count = torch.zeros(batch_shape, dtype=torch.int64, device=like.device)
    return {
        "step": 0, "grad_norm_avg": stats, "grad_change_avg": stats.clone(),
        "flow_steps": count, "plateau_triggers": count.clone(),
        "stiff_triggers": count.clone(), "failures": 0, "extra_grad_evals": 0,
    }


def flow_counters(flow: dict[str, Any]) -> dict[str, Tensor | int]:
    """FlowAdam's counters from its ``state["flow"]`` (copies; see ``FlowAdam.flow_counters``)."""
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
