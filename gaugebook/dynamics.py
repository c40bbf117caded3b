"""The live checks and figures of chapter 3: what equivariance allows.

The dynamics an equivariant rule may have (a time change of gradient flow, Theorem 4.6; the
drift of balancedness; the clock-free view of sensing) and its form (the Gram form of
Theorem 4.5 and the spectral transfer function of a rule on singular values). Checks and
figures work as in :mod:`gaugebook.symmetry`: each check runs one small float64 experiment on
the tensors the cell has drawn and returns its :class:`~gaugebook.symmetry.Findings`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from torch import Tensor

from gaugebook.present.tables import label as _label
from gaugebook.present.tables import table_html
from gaugebook.present.viz import legend_below, legend_beside, method_color
from gaugebook.sensing.measurements import SensingInstance, relative_error
from gaugebook.symmetry import WIDTH, Findings, LossFn, _np, _size, _trajectory
from gaugekit import theory
from gaugekit.gauge import relative_distance
from gaugekit.optim import get_spec

# ---- the dynamics: time change, balancedness, the clock-free view


def time_change_check(loss: LossFn, U0: Tensor, V0: Tensor, T: Tensor,
                      a: Callable[[float], float]) -> Findings:
    r"""Theorem 4.6 on ``loss``: the flow ``U' = −G_U/a(t)``, ``V' = −G_V/a(t)`` on the times
    ``T`` against gradient flow at ``τ(T) = ∫₀ᵀ du/a(u)`` (``right_clock_error``) and at the wrong
    clock ``∫₀ᵀ a(u) du`` (``wrong_clock_error``), the largest relative parameter distance.
    ``data`` holds the flows (``"preconditioned"`` on ``T``, ``"gradient flow"`` on a dense
    grid up to the wrong clock's end) for :func:`drift_check`."""
    def flow(times: Tensor, **kwargs: Any) -> tuple[Tensor, Tensor]:
        return theory.factor_flow(loss, U0, V0, times, **kwargs)

    pre = flow(T, velocity=lambda t, G_U, G_V: (G_U / a(t), G_V / a(t)))
    tau = theory.retimed_clock(a, T)
    tau_wrong = theory.retimed_clock(lambda u: 1.0 / a(u), T)
    t_dense = torch.linspace(0.0, tau_wrong[-1].item(), 121, dtype=T.dtype)
    dense = flow(t_dense)
    stacked = torch.cat(pre, dim=-2)
    right, wrong = (relative_distance(stacked, torch.cat(flow(t), dim=-2)).max().item()
                    for t in (tau, tau_wrong))
    v = {"right_clock_error": right, "wrong_clock_error": wrong, "tau_end": tau[-1].item(),
         "tau_wrong_end": tau_wrong[-1].item(), "T_end": T[-1].item()}
    return Findings(v, [
        f"tau({T[-1]:.1f}) = {tau[-1]:.4f}, wrong clock {tau_wrong[-1]:.4f}",
        f"right clock: {v['right_clock_error']:.1e}   wrong clock: {v['wrong_clock_error']:.2f}"],
        figure={"t_flow": t_dense, "loss_flow": loss(*dense), "T": T, "loss_pre": loss(*pre),
                "tau": tau, "tau_wrong": tau_wrong},
        data={"gradient flow": dense, "preconditioned": pre})


def drift_check(U0: Tensor, V0: Tensor, **flows: tuple[Tensor, Tensor]) -> Findings:
    r"""Proposition A.4 along flows: the largest drift ``‖B_t − B₀‖_F`` of the balancedness
    ``B = UᵀU − VᵀV`` relative to ``‖U₀‖_F² + ‖V₀‖_F²``, glued as ``drift_<name>`` (``gf`` and
    ``aniso`` print as gradient flow and anisotropic)."""
    v = {f"drift_{name}": theory.balancedness_drift(U, V).max().item() / _size(U0, V0)
         for name, (U, V) in flows.items()}
    words = {"gf": "gradient flow", "aniso": "anisotropic"}
    return Findings(v, ["max |B_t - B_0|_F / (|U_0|^2 + |V_0|^2):", "  " + ", ".join(
        f"{words.get(name, name)} {value:{'.2f' if value >= 0.01 else '.1e'}}"
        for name, value in zip(flows, v.values(), strict=True))])


def clock_free_check(instance: SensingInstance, U0: Tensor, V0: Tensor,
                     runs: Sequence[tuple[str, float, int]]) -> Findings:
    r"""Discrete runs ``(method, lr, steps)`` on a sensing ``instance`` seen without their clock:
    the recovery error ``rec = ‖W_t − X★‖_F/‖X★‖_F`` against the loss, and the largest distance
    (relative to ``‖X★‖_F``) of a run's products from the first run's path over the stretch of
    loss that path covers (``path_distance_<method>``, ``final_rec_<method>``)."""
    paths = {}
    for name, lr, steps in runs:
        U, V = _trajectory(name, instance.loss, U0, V0, steps, lr=lr)
        W = U @ V.mT
        paths[name] = (W, instance.loss(U, V), relative_error(W, instance.X_star))
    W_ref, loss_ref, _ = next(iter(paths.values()))
    reference = _label(runs[0][0])
    v, lines = {}, []
    for name, (W, losses, rec) in paths.items():
        covered = losses >= loss_ref[-1]
        gaps = torch.cdist(W[covered].flatten(1), W_ref.flatten(1)).amin(dim=1)
        v[f"path_distance_{name}"] = (gaps / instance.X_star.norm()).max().item()
        v[f"final_rec_{name}"] = rec[-1].item()
        lines.append(f"{name:>12}: distance to {reference}'s path "
                     f"{v[f'path_distance_{name}']:.1e}")
    return Findings(v, lines, figure={
        "runs": {name: (losses, rec) for name, (_, losses, rec) in paths.items()}})


def balancedness_check(loss: LossFn, U0: Tensor, V0: Tensor, rules: Sequence[str],
                       step_sizes: Sequence[float], horizon: float,
                       scalar_class: Sequence[str]) -> Findings:
    r"""The scaling law of Proposition A.4 for discrete rules: run each rule to the time
    ``T = η · steps = horizon`` at every ``η`` of ``step_sizes`` (momentum at ``(1 − μ)η``, the
    same clock) and measure the relative imbalance ``‖UᵀU − VᵀV‖_F/(‖UᵀU‖_F + ‖VᵀV‖_F)``. The
    scalar class halves its final imbalance with ``η``: ``halving_scalar_min/max`` against
    ``halving_other_max``, the ratios of the final imbalance at the largest and smallest ``η``."""
    def imbalance_at(name: str, eta: float) -> Tensor:
        lr = eta * (1 - get_spec(name).defaults["momentum"]) if name == "momentum" else eta
        return theory.relative_imbalance(*_trajectory(name, loss, U0, V0, round(horizon / eta),
                                                      lr=lr))

    imbalance = {name: [imbalance_at(name, eta) for eta in step_sizes] for name in rules}
    final = {name: [c[-1].item() for c in curves] for name, curves in imbalance.items()}
    halving = {name: f[0] / f[-1] for name, f in final.items()}
    lines = [f"{get_spec(name).label:>18}: final imbalance {final[name][0]:.2e} -> "
             f"{final[name][-1]:.2e}  (ratio {value:.2f})" for name, value in halving.items()]
    return Findings({
        "halving_scalar_min": min(halving[name] for name in scalar_class),
        "halving_scalar_max": max(halving[name] for name in scalar_class),
        "halving_other_max": max(h for name, h in halving.items() if name not in scalar_class),
        "eta_ratio": step_sizes[0] / step_sizes[-1]}, lines, figure={
        "imbalance": imbalance, "step_sizes": step_sizes, "scalar_class": scalar_class,
        "horizon": horizon})


def time_change(
    t_flow: torch.Tensor,
    loss_flow: torch.Tensor,
    T: torch.Tensor,
    loss_pre: torch.Tensor,
    tau: torch.Tensor,
    tau_wrong: torch.Tensor,
) -> Figure:
    """Left: gradient flow's loss on ``t_flow`` (up to ``T[-1]``) and the preconditioned flow's
    ``loss_pre`` on ``T``. Right: the preconditioned losses placed at gradient-flow times
    ``tau`` (dots) and ``tau_wrong`` (crosses) on gradient flow's whole curve."""
    pre = "#7570B3"  # not an optimizer of the registry: a scalar-preconditioned flow
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.4), layout="constrained",
                                   sharey=True)
    keep = t_flow <= T[-1]
    ax0.semilogy(_np(t_flow[keep]), _np(loss_flow[keep]), color="k")
    ax0.semilogy(_np(T), _np(loss_pre), color=pre, ls="--")
    ax0.set(xlabel="physical time $t$", ylabel="loss", title="on each flow's own clock")
    ax1.semilogy(_np(t_flow), _np(loss_flow), color="k")
    ax1.semilogy(_np(tau), _np(loss_pre), "o", color=pre, ms=4)
    ax1.semilogy(_np(tau_wrong), _np(loss_pre), "x", color="#D95F02", ms=5)
    ax1.set(xlabel="gradient-flow time", title="on gradient flow's clock")
    legend_below(fig, handles=[
        Line2D([], [], color="k", label="gradient flow"),
        Line2D([], [], color=pre, ls="--", label="preconditioned, $a(t)$"),
        Line2D([], [], color=pre, marker="o", ls="", ms=4, label=r"placed at $\tau(T)$"),
        Line2D([], [], color="#D95F02", marker="x", ls="", ms=5, label=r"placed at $\int_0^T a$")],
        ncol=2)
    return fig


def clock_free(
    runs: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    *,
    widths: Mapping[str, float] | None = None,
    styles: Mapping[str, str] | None = None,
) -> Figure:
    """``runs[method] = (losses, rec)``: recovery error against loss on log axes, the loss
    decreasing to the right, one colour per method."""
    fig, ax = plt.subplots(figsize=(WIDTH * 0.75, 3.4), layout="constrained")
    for z, (method, (losses, rec)) in enumerate(runs.items()):
        lw = (widths or {}).get(method, 1.5)
        # a wide line is drawn as a light band, so that a run on the same path stays visible
        ax.loglog(_np(losses), _np(rec), color=method_color(method), label=_label(method),
                  lw=lw, ls=(styles or {}).get(method, "-"), alpha=0.4 if lw > 3 else 1.0,
                  zorder=2 + z)
    ax.invert_xaxis()
    ax.set(xlabel="loss (decreasing to the right)", ylabel="recovery error rec")
    legend_beside(ax)
    return fig


def balancedness(
    imbalance: Mapping[str, Sequence[torch.Tensor]],
    step_sizes: Sequence[float],
    scalar_class: Sequence[str],
    horizon: float,
) -> Figure:
    """``imbalance[method][j]``: the relative imbalance along the run at ``step_sizes[j]``.
    Left: along the run at the smallest step size against ``η · step``; right: its final value
    against the step size, with a slope-1 guide. Solid: ``scalar_class``; dashed: the others."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.9), layout="constrained")
    finals = {m: [c[-1].item() for c in curves] for m, curves in imbalance.items()}
    for method, curves in imbalance.items():
        ls = "-" if method in scalar_class else "--"
        color = method_color(method)
        curve = curves[-1]
        times = torch.arange(len(curve)) * step_sizes[-1]
        ax0.semilogy(_np(times), _np(curve.clamp_min(1e-18)), color=color, ls=ls,
                     label=_label(method))
        ax1.loglog(step_sizes, finals[method], "o", color=color, ls=ls)
    ref = [0.4 * finals[scalar_class[0]][-1] * eta / step_sizes[-1] for eta in step_sizes]
    ax1.loglog(step_sizes, ref, "k:", lw=1)
    ax0.set(ylim=(1e-4, 1.0), xlabel=r"time $\eta \cdot$ step", ylabel="relative imbalance",
            title=rf"along the run, $\eta$ = {step_sizes[-1]:g}")
    ax1.set(xlabel=r"step size $\eta$", title=f"at T = {horizon:g}; dotted: slope 1")
    legend_below(fig, ax0, ncol=4)
    return fig


# ---- the form: the Gram form and the spectral transfer function


def characterization_check(maps: Mapping[str, Callable[[Tensor], Tensor]], G: Tensor,
                           Q: Tensor) -> Findings:
    r"""Theorem 4.5's constructive proof run on ``maps`` (names holding ``"control"`` are the
    negative controls): per map the equivariance gap ``‖Φ(GQ) − Φ(G)Q‖_F / ‖Φ(G)Q‖_F``, the
    change of ``X = Φ(G)G⁺`` between ``G`` and ``GQ`` and the error of ``X(G) G`` against
    ``Φ(G)`` (``characterization_table``), their extremes, and the gauge ``Q̂ = G⁺(GQ)`` of
    Lemma A.2 against ``Q`` (``gram_gauge_error``)."""
    rows = []
    for name, phi in maps.items():
        X = theory.implied_left_preconditioner(phi, G)
        X_rotated = theory.implied_left_preconditioner(phi, G @ Q)
        rows.append({"map": name, "gap": theory.equivariance_gap(phi, G, Q).item(),
                     "moved": relative_distance(X_rotated, X).item(),
                     "rebuilt": relative_distance(X @ G, phi(G)).item()})
    controls = [r for r in rows if "control" in r["map"]]
    kept = [r for r in rows if "control" not in r["map"]]
    return Findings({
        "characterization_table": table_html(
            rows, ["map", "gap", "moved", "rebuilt"],
            headers={"gap": "equivariance gap", "moved": "change of X",
                     "rebuilt": "rebuild error"},
            formats=dict.fromkeys(("gap", "moved", "rebuilt"), ".1e")),
        "char_worst_equivariant": max(max(r["gap"], r["moved"]) for r in kept),
        "char_best_control": min(r["moved"] for r in controls),
        "char_worst_rebuild": max(r["rebuilt"] for r in rows),
        "gram_gauge_error": relative_distance(theory.gram_gauge(G, G @ Q), Q).item()})


def spectral_transfer_check(G: Tensor, *, damping: float = 1.0, lr: float = 0.1) -> Findings:
    r"""Proposition A.1 on the library's first steps at ``G``: the transfer ``h(σᵢ) = uᵢᵀΦ(G)vᵢ``
    of GD (``h(s) = s``), the left quarter root and Shampoo's first step
    (``h(s) = s (s² + λ₀)^{-1/4}``, ``s (s² + λ₀)^{-1/2}``, ``λ₀ = damping``), the polar factor
    (``h = 1``) and Muon (``h(s) = p(s / (‖G‖_F + ε))``, ``p`` the five-step Newton–Schulz map).
    ``transfer_residual``: the largest non-spectral part; ``transfer_formula_error``: the
    largest deviation from the formula; ``ns_min``, ``ns_max``: ``p`` on ``[0.1, 1]``."""
    from gaugekit.optim import Muon

    def first(name: str, **overrides: object) -> Callable[[Tensor], Tensor]:
        return theory.registry_first_step(name, lr, **overrides)

    def damped(power: float) -> Callable[[Tensor], Tensor]:
        return lambda s: theory.transfer_from_psi(lambda x: (x + damping) ** power, s)

    muon_eps = inspect.signature(Muon).parameters["eps"].default  # NS starts from M/(‖M‖_F+ε)
    rules = {  # name: (first step, formula h(s), registry name and line style in the figure)
        "GD": (first("gd"), lambda s: s, ("gd", "-")),
        "left quarter root": (first("gram", power=0.25, damping=damping), damped(-0.25),
                              ("gram", "--")),
        "Shampoo (first step)": (first("shampoo", damping=damping), damped(-0.5),
                                 ("shampoo", "-")),
        "msign (Gram, power 1/2)": (first("gram", power=0.5, damping=0.0), torch.ones_like,
                                    ("gram", "-.")),
        "Muon": (first("muon"), lambda s: theory.newton_schulz_scalar_map(
            s / (G.norm() + muon_eps)), None)}
    measured = {name: theory.measure_spectral_transfer(phi, G)
                for name, (phi, _, _) in rules.items()}
    x_grid = torch.linspace(0.02, 1.0, 300, dtype=G.dtype)
    p_grid = theory.newton_schulz_scalar_map(x_grid)
    v = {"transfer_residual": max(m.residual.item() for m in measured.values()),
         "transfer_formula_error": max(relative_distance(m.h, rules[name][1](m.s)).item()
                                       for name, m in measured.items()),
         "ns_min": p_grid[x_grid >= 0.1].min().item(),
         "ns_max": p_grid[x_grid >= 0.1].max().item()}
    s_grid = torch.logspace(-2, 1, 200, dtype=G.dtype)
    curves = [(name, style[0], style[1], s_grid, h(s_grid), measured[name].s, measured[name].h)
              for name, (_, h, style) in rules.items() if style]
    muon = measured["Muon"]
    return Findings(v, [
        f"largest non-spectral residual:       {v['transfer_residual']:.1e}",
        f"largest deviation from the formula:  {v['transfer_formula_error']:.1e}"],
        figure={"curves": curves, "muon": (x_grid, p_grid, muon.s / G.norm(), muon.h)})


def transfer_curves(
    curves: Sequence[tuple[str, str, str, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor]],
    muon: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
) -> Figure:
    """Left: transfer functions ``(label, method, linestyle, s, h(s), s measured, h measured)``
    on log axes, in the method's colour. Right: Muon's ``(x, p(x), x measured, h measured)``
    beside the polar factor's ``h ≡ 1``."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.9), layout="constrained")
    for label, method, ls, s, h, s_meas, h_meas in curves:
        color = method_color(method)
        ax0.loglog(_np(s), _np(h), color=color, ls=ls, label=label)
        ax0.loglog(_np(s_meas), _np(h_meas), "o", color=color, ms=4)
    ax0.set(xlabel="singular value $s$", ylabel="$h(s)$")
    ax0.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    x, p, x_meas, h_meas = muon
    ax1.plot(_np(x), _np(p), color=method_color("muon"), label=r"Muon: $p(x)$, five steps")
    ax1.axhline(1.0, color=method_color("gram"), lw=1.2, ls="-.", label=r"polar factor: $h = 1$")
    ax1.plot(_np(x_meas), _np(h_meas), "o", color=method_color("muon"), ms=4)
    ax1.set(xlabel=r"$x = s / \|G\|_F$", ylabel="$h$")
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    return fig
