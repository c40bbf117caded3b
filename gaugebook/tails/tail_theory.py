r"""The per-mode dynamics of the paper's Proposition 8.1 (arXiv 2608.05136) and the crossing ``τ*``.

**Per-mode dynamics.** In the eigenbasis of a target with singular values ``s₁ ≥ s₂ ≥ …`` the
factorized flows decouple: mode ``i`` has factor amplitudes ``u, v`` and product ``w = u v``
with loss ``½ (s − u v)²`` (the index is dropped). Two flows from a balanced start
``u₀ = v₀ = √w₀``:

* *greedy* (gradient flow, step ``η``): ``u' = η v (s − uv)``, ``v' = η u (s − uv)``. Balance
  ``u² − v²`` is conserved, so ``u = v`` and ``w' = 2 η w (s − w)``, a logistic equation:

  .. math::  w(t) = \frac{s\, w_0\, e^{2ηst}}{s − w_0 + w_0\, e^{2ηst}} .

  Mode ``s`` reaches the fraction ``f`` of its target at ``t_f = \log\frac{f (s − w_0)}{w_0
  (1 − f)} / (2ηs)``: the head first, the tail later by the factor ``s_head / s_tail``, and every
  ``t_f → ∞`` like ``\log(1/w_0)``. At a fixed time the fitted tail vanishes with the init.
* *equal-rate* (Muon-like: the orthogonalized step moves every singular direction at the same
  speed): ``u' = η sign(v (s − uv))``, ``v' = η sign(u (s − uv))``. From ``u₀ = v₀`` both grow at
  speed ``η`` until ``uv = s`` and then stay (the sliding solution on ``uv = s``):

  .. math::  w(t) = \min\big(\sqrt{w_0} + η t,\ \sqrt s\big)^2 \qquad (w_0 ≤ s),

  so every mode is fitted by ``t = √s / η`` whatever ``w₀``, the tail with (in fact before) the
  head.

:func:`integrate_mode` integrates the two-factor systems above numerically (``scipy``'s
adaptive Runge–Kutta in float64, the equal-rate flow with a terminal event on ``uv = s``), so
that the closed forms can be put against something they were not derived from.

**The crossing.** :func:`estimate_crossing` finds where a curve ``a(τ)`` (Muon's recovery error)
stops being below ``b(τ)`` (GD's), from the difference ``d`` of the seed means on the grid, by
one of two estimators (:data:`CROSSING_ESTIMATORS`): ``"grid"``, the paper's (the first grid
``τ`` at which ``d`` turns from ``< 0`` to ``≥ 0``: ``phase_tables`` of its
``experiments/nibi/collect.py``), or ``"interpolate"``, ours (the zero of the straight line
through the two grid points that bracket that change). Both come with a paired bootstrap over
seeds for their spread; when the difference has no such change in the grid it says so. (The
paper's CPU script ``experiments/muon_phase_diagram.py`` keeps the *last* grid ``τ`` with such
a change and ``collect.py`` prints every one; ``Crossing.upward`` lists them all, and with
one change the three readings agree.)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "CROSSING_ESTIMATORS",
    "DYNAMICS",
    "Crossing",
    "closed_form",
    "equal_rate_closed_form",
    "estimate_crossing",
    "fit_time",
    "greedy_closed_form",
    "integrate_mode",
    "tail_fraction",
]

DYNAMICS: tuple[str, ...] = ("greedy", "equal_rate")


def _check(s: float, w0: float, lr: float) -> None:
    if not s > 0:
        raise ValueError(f"Invalid s: {s!r}; expected a number > 0")
    if not 0 < w0 <= s:
        raise ValueError(f"Invalid w0: {w0!r}; expected a number in (0, s]")
    if not lr > 0:
        raise ValueError(f"Invalid lr: {lr!r}; expected a number > 0")


def _times(t: Sequence[float] | Tensor) -> Tensor:
    return torch.as_tensor(t, dtype=torch.float64)


def greedy_closed_form(t: Sequence[float] | Tensor, s: float, w0: float, lr: float) -> Tensor:
    r"""``w(t)`` of ``w' = 2 η w (s − w)``, ``w(0) = w₀`` (module docstring), float64."""
    _check(s, w0, lr)
    t = _times(t)
    # s w0 e^{x} / (s − w0 + w0 e^{x}) = s / (1 + (s/w0 − 1) e^{−x}): no overflow for large x
    return s / (1.0 + (s / w0 - 1.0) * torch.exp(-2.0 * lr * s * t))


def equal_rate_closed_form(t: Sequence[float] | Tensor, s: float, w0: float, lr: float
                           ) -> Tensor:
    r"""``w(t) = min(√w₀ + η t, √s)²`` of the equal-rate flow (module docstring), float64."""
    _check(s, w0, lr)
    t = _times(t)
    return torch.clamp(math.sqrt(w0) + lr * t, max=math.sqrt(s)) ** 2


def closed_form(dynamics: str, t: Sequence[float] | Tensor, s: float, w0: float, lr: float
                ) -> Tensor:
    """:func:`greedy_closed_form` or :func:`equal_rate_closed_form` by name."""
    if dynamics == "greedy":
        return greedy_closed_form(t, s, w0, lr)
    if dynamics == "equal_rate":
        return equal_rate_closed_form(t, s, w0, lr)
    raise ValueError(f"Invalid dynamics: {dynamics!r}; expected one of {DYNAMICS}")


def fit_time(dynamics: str, s: float, w0: float, lr: float, fraction: float = 0.9) -> float:
    r"""The time at which mode ``s`` reaches ``fraction · s`` from ``w₀`` (closed form).

    Greedy: ``log(f (s − w₀) / (w₀ (1 − f))) / (2ηs)``; equal-rate: ``(√(f s) − √w₀) / η``
    (0 when ``w₀ ≥ f s``).
    """
    _check(s, w0, lr)
    if not 0 < fraction < 1:
        raise ValueError(f"Invalid fraction: {fraction!r}; expected a number in (0, 1)")
    if w0 >= fraction * s:
        return 0.0
    if dynamics == "greedy":
        return math.log(fraction * (s - w0) / (w0 * (1.0 - fraction))) / (2.0 * lr * s)
    if dynamics == "equal_rate":
        return (math.sqrt(fraction * s) - math.sqrt(w0)) / lr
    raise ValueError(f"Invalid dynamics: {dynamics!r}; expected one of {DYNAMICS}")


def integrate_mode(
    dynamics: str,
    t: Sequence[float] | Tensor,
    s: float,
    w0: float,
    lr: float,
    *,
    u0: float | None = None,
    v0: float | None = None,
    rtol: float = 1e-11,
    atol: float = 1e-14,
) -> Tensor:
    r"""``w(t) = u(t) v(t)`` of the two-factor flow of one mode, integrated numerically.

    Integrates ``(u, v)`` (not ``w``) from ``u₀ = v₀ = √w₀`` unless given, with ``scipy``'s
    ``solve_ivp`` (``DOP853``, tolerances ``rtol``, ``atol``) to the output times ``t``
    (increasing, from 0). The equal-rate flow's right side jumps at ``uv = s``: it is integrated
    up to that event and then held there (the sliding solution). Float64.
    """
    from scipy.integrate import solve_ivp

    _check(s, w0, lr)
    times = _times(t)
    u_start = math.sqrt(w0) if u0 is None else float(u0)
    v_start = math.sqrt(w0) if v0 is None else float(v0)
    t_eval = times.tolist()
    t_end = t_eval[-1]

    if dynamics == "greedy":
        def rhs(_t: float, y: Sequence[float]) -> list[float]:
            u, v = y
            r = s - u * v
            return [lr * v * r, lr * u * r]

        sol = solve_ivp(rhs, (0.0, t_end), [u_start, v_start], method="DOP853", t_eval=t_eval,
                        rtol=rtol, atol=atol)
        return torch.tensor(sol.y[0] * sol.y[1], dtype=torch.float64)
    if dynamics != "equal_rate":
        raise ValueError(f"Invalid dynamics: {dynamics!r}; expected one of {DYNAMICS}")

    def sign_rhs(_t: float, y: Sequence[float]) -> list[float]:
        u, v = y
        r = s - u * v
        return [lr * math.copysign(1.0, v * r), lr * math.copysign(1.0, u * r)]

    def reached(_t: float, y: Sequence[float]) -> float:
        return s - y[0] * y[1]

    reached.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(sign_rhs, (0.0, t_end), [u_start, v_start], method="DOP853",
                    dense_output=True, events=reached, rtol=rtol, atol=atol)
    t_hit = sol.t_events[0][0] if len(sol.t_events[0]) else math.inf
    out = [math.prod(sol.sol(tt)) if tt <= t_hit else s for tt in t_eval]  # w = u v, then s
    return torch.tensor(out, dtype=torch.float64)


def tail_fraction(dynamics: str, spectrum: Sequence[float], tail: Sequence[bool], T: float,
                  w0: float, lr: float) -> float:
    r"""``Σ_{tail} w_i(T) / Σ_{tail} s_i``: the part of the tail fitted at time ``T`` (closed
    forms, every mode from ``w₀``)."""
    num = den = 0.0
    for s, is_tail in zip(spectrum, tail, strict=True):
        if is_tail:
            num += float(closed_form(dynamics, [T], s, min(w0, s), lr)[0])
            den += s
    if den == 0:
        raise ValueError("Invalid tail: expected at least one tail mode")
    return num / den


# --------------------------------------------------------------------------------------------
# the crossing τ*
# --------------------------------------------------------------------------------------------


#: The estimators of :func:`estimate_crossing`: ``"grid"`` (the paper's: the first grid ``τ`` at
#: which ``d = mean(a) − mean(b)`` turns from ``< 0`` to ``≥ 0``) and ``"interpolate"`` (ours:
#: the zero of the straight line through the two grid points that bracket that change).
CROSSING_ESTIMATORS: tuple[str, ...] = ("grid", "interpolate")


@dataclass(frozen=True)
class Crossing:
    r"""Where ``a(τ)`` stops being below ``b(τ)``.

    ``estimator``: ``"grid"`` or ``"interpolate"`` (:data:`CROSSING_ESTIMATORS`). ``tau_star``:
    from the first change of ``d = mean(a) − mean(b)`` over seeds from ``< 0`` to ``≥ 0``, the
    grid point where ``d ≥ 0`` (``"grid"``) or the linear interpolation of ``d`` between the two
    grid points that bracket the change (``"interpolate"``); ``None`` when there is no such
    change (see ``status``). A change needs a grid point before it, so ``d ≥ 0`` at the first
    ``τ`` is never a crossing. ``bracket``: those two grid points. ``upward``: every grid ``τ``
    at which ``d`` turns from ``< 0`` to ``≥ 0`` (``tau_star`` is built from the first; more
    than one means the curves cross back and forth). ``shares``: for ``"grid"``, the share of
    bootstrap resamples that gives each value (``(τ*, share)`` pairs in increasing ``τ*``,
    ``±∞`` for the resamples without a crossing); empty for ``"interpolate"``. ``status``:
    ``"crossing"``, ``"a_below_everywhere"`` (``τ*`` beyond the grid), ``"a_never_below"`` or
    ``"no_upward_crossing"`` (``a`` starts above ``b`` and never crosses from below). ``low``,
    ``high``: the ``level`` interval of the bootstrap over seeds, where a resample without a
    crossing counts as ``+∞`` (``a`` below everywhere) or ``−∞`` (otherwise), so an endpoint
    can be infinite.
    ``no_crossing``: the share of resamples without a crossing; ``sign_changes``: how many
    times ``d`` changes sign in the grid (more than one: the curves cross back).
    """

    taus: tuple[float, ...]
    difference: tuple[float, ...]
    tau_star: float | None
    bracket: tuple[float, float] | None
    status: str
    low: float
    high: float
    level: float
    no_crossing: float
    sign_changes: int
    num_boot: int
    dropped: tuple[float, ...] = ()
    estimator: str = "interpolate"
    upward: tuple[float, ...] = ()
    shares: tuple[tuple[float, float], ...] = ()


def _difference(a: Tensor, b: Tensor) -> Tensor:
    return a.mean(dim=-1) - b.mean(dim=-1)


def _first_crossing(taus: Tensor, d: Tensor, estimator: str = "interpolate"
                    ) -> tuple[float, int]:
    """``(τ*, i)`` of the first ``d_i < 0 ≤ d_{i+1}`` (``τ* = τ_{i+1}`` for ``"grid"``, the
    interpolated zero for ``"interpolate"``); ``(+∞, -1)`` when ``d < 0`` everywhere,
    ``(−∞, -1)`` when ``d_0 ≥ 0`` and no later change from below to above exists."""
    below = d < 0
    for i in range(len(d) - 1):
        if bool(below[i]) and not bool(below[i + 1]):
            t0, t1 = float(taus[i]), float(taus[i + 1])
            if estimator == "grid":
                return t1, i
            d0, d1 = float(d[i]), float(d[i + 1])
            return t0 + (t1 - t0) * (-d0) / (d1 - d0), i
    if bool(below.all()):
        return math.inf, -1
    return -math.inf, -1


def estimate_crossing(
    taus: Sequence[float],
    rec_a: Sequence[Sequence[float]] | Tensor,
    rec_b: Sequence[Sequence[float]] | Tensor,
    *,
    num_boot: int = 2000,
    level: float = 0.9,
    seed: int = 0,
    estimator: str = "interpolate",
) -> Crossing:
    r"""The crossing ``τ*`` of two curves with its uncertainty (see :class:`Crossing`).

    ``rec_a[i][j]``, ``rec_b[i][j]``: the value of seed ``j`` at ``taus[i]`` (the same seeds,
    so the bootstrap resamples seed indices for both curves together). Grid points where a
    value is not finite are dropped (listed in ``dropped``). The bootstrap draws ``num_boot``
    resamples from a generator seeded ``seed`` and applies ``estimator`` (one of
    :data:`CROSSING_ESTIMATORS`) to each.
    """
    if estimator not in CROSSING_ESTIMATORS:
        raise ValueError(
            f"Invalid estimator: {estimator!r}; expected one of {CROSSING_ESTIMATORS}")
    if not 0 < level < 1:
        raise ValueError(f"Invalid level: {level!r}; expected a number in (0, 1)")
    if num_boot < 1:
        raise ValueError(f"Invalid num_boot: {num_boot!r}; expected an integer >= 1")
    t = torch.as_tensor(taus, dtype=torch.float64)
    A = torch.as_tensor(rec_a, dtype=torch.float64)
    B = torch.as_tensor(rec_b, dtype=torch.float64)
    if A.ndim != 2 or A.shape != B.shape or A.shape[0] != t.numel():
        raise ValueError(
            f"Invalid rec_a, rec_b: shapes {tuple(A.shape)}, {tuple(B.shape)}; expected "
            f"(len(taus), seeds) = ({t.numel()}, seeds) each")
    if bool((t[1:] <= t[:-1]).any()):
        raise ValueError(f"Invalid taus: {list(taus)!r}; expected increasing values")
    finite = torch.isfinite(A).all(dim=1) & torch.isfinite(B).all(dim=1)
    dropped = tuple(float(x) for x in t[~finite])
    t, A, B = t[finite], A[finite], B[finite]
    if t.numel() < 2:
        raise ValueError("Invalid rec_a, rec_b: expected finite values at two or more τ")
    d = _difference(A, B)
    tau_star, i = _first_crossing(t, d, estimator)
    status = ("crossing" if math.isfinite(tau_star) else
              "a_below_everywhere" if tau_star == math.inf else
              "a_never_below" if bool((d >= 0).all()) else "no_upward_crossing")
    signs = (d >= 0).to(torch.int8)
    sign_changes = int((signs[1:] != signs[:-1]).sum())
    upward = tuple(float(t[j + 1]) for j in range(len(d) - 1)
                   if bool(d[j] < 0) and bool(d[j + 1] >= 0))

    g = torch.Generator().manual_seed(seed)
    num_seeds = A.shape[1]
    idx = torch.randint(num_seeds, (num_boot, num_seeds), generator=g)
    boot = [_first_crossing(t, _difference(A[:, row], B[:, row]), estimator)[0] for row in idx]
    values = torch.tensor(sorted(boot), dtype=torch.float64)
    q_lo = values[int(math.floor((1 - level) / 2 * (num_boot - 1)))].item()
    q_hi = values[int(math.ceil((1 + level) / 2 * (num_boot - 1)))].item()
    no_cross = float((~torch.isfinite(values)).double().mean())
    shares: tuple[tuple[float, float], ...] = ()
    if estimator == "grid":
        counts = Counter(boot)
        shares = tuple((v, counts[v] / num_boot) for v in sorted(counts))
    return Crossing(
        taus=tuple(float(x) for x in t), difference=tuple(float(x) for x in d),
        tau_star=tau_star if status == "crossing" else None,
        bracket=(float(t[i]), float(t[i + 1])) if status == "crossing" else None,
        status=status, low=q_lo, high=q_hi, level=level, no_crossing=no_cross,
        sign_changes=sign_changes, num_boot=num_boot, dropped=dropped,
        estimator=estimator, upward=upward, shares=shares,
    )
