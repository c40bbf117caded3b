r"""FlowAdam's multi-stage flow step: the clipped gradient flow integrated by an ODE solver.

On a flow step with a multi-stage ``flow_method`` (``'rk4'``, ``'dopri5'``, … of the optional
package ``torchdiffeq``), :class:`~gaugekit.optim.FlowAdam` integrates the clipped gradient flow
of one run (``batch_dims = 0``) and blends its velocity into the first moment, as written in
:mod:`gaugekit.optim.flow_functional`. The first stage uses the gradient already computed; every
other stage sets ``θ`` to the stage's point and calls the closure (zero the gradients, loss,
``backward``).

The solver is ``torchdiffeq.odeint``, imported on first use (the package is optional;
:class:`~gaugekit.optim.FlowAdam` checks for it at construction), or any ``odeint`` of its
signature.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gaugekit._extras import require_extra
from gaugekit.optim._validation import Hyper
from gaugekit.optim.flow_functional import cap_velocity, clip_gradients
from gaugekit.optim.functional import signed

__all__ = ["INTEGRATION_FAILURES", "MULTI_STAGE_METHODS", "FlowSolution", "integrate_clipped_flow",
           "require_torchdiffeq", "take_flow_step_"]

#: torchdiffeq methods; each needs a closure (its stages re-evaluate the gradient).
MULTI_STAGE_METHODS: tuple[str, ...] = (
    "midpoint", "heun2", "heun3", "rk4", "bosh3", "fehlberg2", "adaptive_heun", "dopri5", "dopri8",
)
#: every ``flow_method`` of FlowAdam: Euler and the multi-stage ones.
FLOW_METHODS: tuple[str, ...] = ("euler", *MULTI_STAGE_METHODS)
#: exceptions of a failed integration (torchdiffeq signals a step-size underflow by an assert)
INTEGRATION_FAILURES = (RuntimeError, FloatingPointError, AssertionError)


def require_torchdiffeq(method: str) -> None:
    """Raise ``MissingExtra`` (an ``ImportError``) when torchdiffeq, which ``method`` needs,
    is not installed."""
    require_extra(f"FlowAdam(flow_method={method!r})", "flow", "torchdiffeq",
                  note="flow_method='euler' needs nothing")


def _odeint() -> Callable[..., Any]:
    """``torchdiffeq.odeint``, imported on first use (the package is optional)."""
    from torchdiffeq import odeint

    return odeint


@dataclass
class FlowSolution:
    """What :func:`integrate_clipped_flow` found.

    Attributes:
        start: copies of ``θ`` at ``τ = 0``.
        end: ``θ`` at ``τ = T``, or ``None`` when the integration failed.
        first_field: the field at ``τ = 0``, ``−lr_i clip(g)_i`` (the known gradient).
        calls: evaluations of the field (the first needs no closure call).
        error: the exception of a failed integration (one of :data:`INTEGRATION_FAILURES`, or
            ``FloatingPointError`` for a non-finite end point), else ``None``.
    """

    start: list[Tensor]
    end: list[Tensor] | None
    first_field: list[Tensor]
    calls: int
    error: BaseException | None


def integrate_clipped_flow(
    params: Sequence[Tensor], grads: Sequence[Tensor], lrs: Sequence[Hyper],
    maximizes: Sequence[bool], closure: Callable[[], Any], *, method: str, time_scale: float,
    clip_mode: str, clip: float, tol: float, odeint: Callable[..., Any] | None = None,
) -> FlowSolution:
    r"""Integrate ``dθ_i/dτ = −lr_i clip(∇L(θ))_i`` on ``[0, T]`` (``rtol = atol = tol``) with
    ``odeint`` (default ``torchdiffeq.odeint``).

    ``grads`` are the (signed) gradients at ``θ``; a later stage reads ``.grad`` after
    ``closure()`` (``−.grad`` where ``maximizes[i]``, zero where it is ``None``). ``clip`` over
    all parameters (``batch_dims = 0``). On return ``θ`` holds the last stage's point (the
    caller sets the end point, or restores ``start`` after a failure).
    """
    params = list(params)
    start = [p.detach().clone() for p in params]

    def clipped(gs: list[Tensor]) -> list[Tensor]:
        norm = sum(g.square().sum() for g in gs).sqrt()
        return clip_gradients(gs, clip_mode, clip, norm, 0)

    first_field = [-lr * c for lr, c in zip(lrs, clipped(list(grads)), strict=True)]
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
        stage = [
            torch.zeros_like(p) if p.grad is None else signed(p.grad, maximize)
            for p, maximize in zip(params, maximizes, strict=True)
        ]
        return tuple(-lr * c for lr, c in zip(lrs, clipped(stage), strict=True))

    horizon = torch.tensor([0.0, time_scale], dtype=params[0].dtype, device=params[0].device)
    try:
        solution = (odeint or _odeint())(field, tuple(start), horizon, method=method, rtol=tol,
                                         atol=tol)
        end = [y[-1] for y in solution]
        if not all(bool(torch.isfinite(y).all()) for y in end):
            raise FloatingPointError("the flow's end point is not finite")
    except INTEGRATION_FAILURES as exc:
        return FlowSolution(start, None, first_field, calls, exc)
    return FlowSolution(start, end, first_field, calls, None)


def take_flow_step_(
    params: Sequence[Tensor], exp_avgs: Sequence[Tensor], solution: FlowSolution,
    lrs: Sequence[Hyper], *, time_scale: float, velocity_cap: float, blend: float,
) -> None:
    r"""``θ ← θ(T)``; ``m ← (1 − γ) m + γ u`` with ``u = −Δθ / lr`` capped at
    ``‖u‖ ≤ cap · ‖m‖`` (``γ = blend``), per parameter of a successful :class:`FlowSolution`.

    At ``lr = 0`` the flow does not move and ``u`` is its ``lr → 0`` limit ``T clip(g)``.
    """
    assert solution.end is not None
    rows = zip(params, exp_avgs, solution.start, solution.end, lrs, solution.first_field,
               strict=True)
    for p, exp_avg, p0, y, lr, f0 in rows:
        p.copy_(y)
        lr_t = torch.as_tensor(lr, dtype=p.dtype, device=p.device)
        velocity = torch.where(lr_t > 0, (p0 - y) / lr_t, -f0 * time_scale)
        capped = cap_velocity(velocity, exp_avg, velocity_cap, 0)
        exp_avg.lerp_(capped, blend)
