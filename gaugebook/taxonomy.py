"""The live checks and figures that sort the update rules: chapter 2 (which optimizers keep the
gauge), chapter 3's Gram form and spectral transfer functions of the equivariant ones, and the
registry tables of the API chapter.

Checks and figures work as in :mod:`gaugebook.symmetry`. Notation: ``G`` a factor's
gradient, ``Q ∈ O(k)`` a gauge, ``η`` (``lr``) the step size, ``ε`` (``eps``) Adam's,
``D_ε(G) = G ⊘ (|G| + ε)``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from torch import Tensor

from gaugebook.present.tables import as_markdown, table_html, value_text, yes_no
from gaugebook.present.tables import label as _label
from gaugebook.present.tables import wrapped as wrapped
from gaugebook.present.viz import (
    COORDINATEWISE_COLOR,
    EQUIVARIANT_COLOR,
    legend_below,
    method_color,
)
from gaugebook.symmetry import WIDTH, Findings, LossFn, _np, _trajectory
from gaugekit import theory
from gaugekit.audit.factor_results import FLOAT64_THRESHOLD, AuditRow
from gaugekit.audit.factors import audit_equivariance, torch_optim_factories
from gaugekit.gauge import relative_distance, rotate_factors
from gaugekit.optim import all_specs

# --------------------------------------------------------------------------------------------
# chapter 2: which optimizers keep the gauge
# --------------------------------------------------------------------------------------------


def matrix_lines(label: str, matrix: Tensor) -> list[str]:
    """A small matrix row by row (``9.4f``), the label in front of its first row."""
    return [f"{label if i == 0 else '':<22}" + "".join(f"{x:9.4f}" for x in row)
            for i, row in enumerate((matrix + 0.0).tolist())]


def first_step_witnesses(Q: Tensor, *, lr: float = 0.1, e: float = 0.5,
                         beta2: float = 0.999) -> Findings:
    r"""The two witnesses by hand, run with the library's zero-state first steps: ``sign`` at
    ``G = (1, 1)`` (Signum and Lion: ``sign(GQ)`` against ``sign(G) Q``, ``sign_gap``) and
    Adafactor at ``G = diag(1, e)`` (``ε = 0``, its step divided by ``1/√(1 − β₂)``:
    ``adafactor_gap``, and ``adafactor_gap_at_one`` at ``e = 1``)."""
    signum, lion = theory.registry_first_step("signum", lr), theory.registry_first_step("lion", lr)
    adafactor = theory.registry_first_step("adafactor", lr, beta2=beta2, eps=0.0)
    scale = 1 / math.sqrt(1 - beta2)
    G_sign = torch.tensor([[1.0, 1.0]], dtype=Q.dtype)
    G_ada = torch.diag(torch.tensor([1.0, e], dtype=Q.dtype))
    lines = [*matrix_lines("sign(GQ) by Signum", signum(G_sign @ Q)),
             *matrix_lines("sign(GQ) by Lion", lion(G_sign @ Q)),
             *matrix_lines("sign(G) Q by Signum", signum(G_sign) @ Q),
             *matrix_lines("Adafactor Phi(GQ)", adafactor(G_ada @ Q) / scale),
             *matrix_lines("Adafactor Phi(G) Q", adafactor(G_ada) @ Q / scale)]
    eye = torch.eye(2, dtype=Q.dtype)
    return Findings({"adafactor_e": e,
                     "sign_gap": theory.equivariance_gap(signum, G_sign, Q).item(),
                     "adafactor_gap": theory.equivariance_gap(adafactor, G_ada, Q).item(),
                     "adafactor_gap_at_one": theory.equivariance_gap(adafactor, eye, Q).item()},
                    lines)


def adam_witness_check(Q: Tensor, *, eta: float = 0.1, eps: float = 1e-8) -> Findings:
    r"""Adam's smallest witness: ``n = m = 1``, ``k = 2``, ``ℓ(w) = ½w²`` from
    ``U₀ = V₀ = (1, 0)`` and from ``(U₀Q, V₀Q)``; one library Adam step against the closed forms
    ``W₁ = (1 − η/(1 + ε))²`` and ``W̃₁ = (1 − η/(2^{-1/2} + ε))²`` (for ``Q = R(π/4)``)."""
    def one_step_product(U0: Tensor, V0: Tensor) -> float:
        U, V = _trajectory("adam", lambda U, V: 0.5 * (U @ V.mT).squeeze() ** 2, U0, V0, 1,
                           lr=eta, eps=eps)
        return (U[1] @ V[1].T).item()

    u0 = torch.tensor([[1.0, 0.0]], dtype=Q.dtype)
    plain, rot = one_step_product(u0, u0.clone()), one_step_product(*rotate_factors(u0, u0, Q))
    closed_plain, closed_rot = (1 - eta / (1 + eps)) ** 2, (1 - eta / (2**-0.5 + eps)) ** 2
    return Findings(
        {"W1_plain": plain, "W1_rot": rot,
         "witness_error": max(abs(plain - closed_plain), abs(rot - closed_rot))},
        [f"W_1 from (U0, V0):   {plain:.6f}, closed form {closed_plain:.6f}",
         f"W_1 from (U0Q, V0Q): {rot:.6f}, closed form {closed_rot:.6f}"])


def adam_defect_check(loss: LossFn, U0: Tensor, V0: Tensor, Q: Tensor, lrs: Sequence[float],
                      epss: Sequence[float], check_lrs: Sequence[float],
                      eps_sweep: Sequence[float]) -> Findings:
    r"""Proposition 4.4 against the library's Adam: the relative defect
    ``δ(η, ε) = ‖W̃₁ − W₁‖_F / ‖W₁ − W₀‖_F`` from the closed form on the grid ``lrs × epss``,
    measured from two runs at ``check_lrs × epss`` (``closed_vs_measured``: the largest relative
    difference), its small-step limit (``η = 10⁻⁶``) over ``eps_sweep`` with the slope of its
    last decade (``slope_large_eps``) and the mean absolute gradient entry (``grad_scale``)."""
    G_U, G_V = theory.loss_gradients(loss, U0, V0)

    def closed(lrs: Sequence[float], epss: Sequence[float]) -> Tensor:
        return theory.adam_relative_defect_grid(U0, V0, G_U, G_V, Q, lrs, epss)

    def measured(lr: float, eps: float) -> float:
        U, V = _trajectory("adam", loss, U0, V0, 1, lr=lr, eps=eps)
        U_r, V_r = _trajectory("adam", loss, U0 @ Q, V0 @ Q, 1, lr=lr, eps=eps)
        return relative_distance(U_r[1] @ V_r[1].T - U0 @ V0.T, U[1] @ V[1].T - U0 @ V0.T).item()

    delta = closed(lrs, epss)
    points = [(lr, eps) for eps in epss for lr in check_lrs]
    runs = {point: measured(*point) for point in points}
    formula = {(lr, eps): closed([lr], [eps]).item() for lr, eps in points}
    small_lr = closed([1e-6], eps_sweep)[:, 0]
    v = {"closed_vs_measured": max(abs(runs[p] - formula[p]) / formula[p] for p in points),
         "grad_scale": torch.cat([G_U.flatten(), G_V.flatten()]).abs().mean().item(),
         "slope_large_eps": (math.log(small_lr[-1] / small_lr[-5])
                             / math.log(eps_sweep[-1] / eps_sweep[-5])),
         "delta_sign_regime": delta[0, 0].item(), "delta_eps_10": delta[-1, 0].item()}
    return Findings(v, ["closed form vs library Adam, largest relative difference: "
                        f"{v['closed_vs_measured']:.1e}"], figure={
        "lrs": lrs, "epss": epss, "delta": delta, "measured": runs, "eps_sweep": eps_sweep,
        "delta_small_lr": small_lr, "grad_scale": v["grad_scale"]})


def plane_check(starts: Sequence[Tensor], rules: Sequence[tuple[str, float]], *,
                steps: int = 300, drawn: Sequence[str] = ("gd", "adam")) -> Findings:
    r"""Balanced runs ``U = V = u`` in the plane (``n = m = 1``, ``k = 2``,
    ``ℓ(w) = ½(w − 1)²``) from gauge-related ``starts``, one per ``(method, lr)``: the largest
    spread of the products ``W_t`` over the starts at one step (``plane_spread_<method>``). The
    figure draws the paths of the ``drawn`` methods and every method's products."""
    def plane_loss(U: Tensor, V: Tensor) -> Tensor:
        return 0.5 * ((U @ V.mT).squeeze() - 1.0) ** 2

    runs, products, v, lines = {}, {}, {}, []
    count = {7: "seven"}.get(len(starts), str(len(starts)))
    for name, lr in rules:
        runs[name] = [_trajectory(name, plane_loss, u, u.clone(), steps, lr=lr) for u in starts]
        W = products[name] = torch.stack([(U @ V.mT).flatten() for U, V in runs[name]])
        v[f"plane_spread_{name}"] = (W.max(0).values - W.min(0).values).max().item()
        lines.append(f"{name:>12}: the {count} products differ by "
                     f"{v[f'plane_spread_{name}']:.1e}")
    order = [*drawn, *(name for name in products if name not in drawn)]
    return Findings(v, lines, figure={
        "paths": {name: [U for U, _ in runs[name]] for name in drawn},
        "products": {name: products[name] for name in order}})


def _residual(row: AuditRow) -> str:
    return row.error if row.result is None else f"{row.result.residual:.1e}"


def audit_summary(zoo_rows: Sequence[AuditRow], torch_rows: Sequence[AuditRow]) -> Findings:
    r"""The audit of the library's zoo (beside each rule's registry class and its reason) and of
    ``torch.optim``: both tables, the agreement count, the residual extremes of each verdict and
    the decades between them, and the audit's settings (threshold, shapes, steps)."""
    specs = {spec.name: spec for spec in all_specs()}
    md_escape = str.maketrans({"_": r"\_", "*": r"\*"})
    zoo = [{"rule": specs[r.name].label, "name": r.name,
            "classified": "equivariant" if specs[r.name].equivariant else "not equivariant",
            "audit": r.verdict, "residual": _residual(r), "why": specs[r.name].reason}
           for r in zoo_rows]
    ran = [r for r in [*zoo_rows, *torch_rows] if r.result is not None]
    equivariant = [r.result.residual for r in ran if r.verdict == "equivariant"]
    broken = [r.result.residual for r in ran if r.verdict == "not equivariant"]
    passing = [r.name for r in torch_rows if r.verdict == "equivariant"]
    n, m, k = inspect.signature(audit_equivariance).parameters["shape"].default
    return Findings({
        "zoo_audit_table": table_html(zoo, ["rule", "name", "classified", "audit", "residual"],
                                      headers={"name": "registry name",
                                               "audit": "audit verdict"}),
        "zoo_why": as_markdown("\n\n".join(f"{r['rule']} (`{r['name']}`)\n: "
                                            f"{r['why'].translate(md_escape)}" for r in zoo)),
        "torch_audit_table": table_html(
            [{"name": r.name, "audit": r.verdict, "residual": _residual(r),
              "moved": r.result.displacement if r.result else None} for r in torch_rows],
            ["name", "audit", "residual", "moved"],
            headers={"name": "torch.optim", "audit": "audit verdict"},
            formats={"moved": ".2f"}),
        "zoo_agree": sum(r["classified"] == r["audit"] for r in zoo),
        "zoo_count": len(zoo_rows), "torch_count": len(torch_rows),
        "torch_equivariant": ", ".join(passing), "torch_equivariant_count": len(passing),
        "max_equivariant_residual": max(equivariant), "min_broken_residual": min(broken),
        "residual_gap_decades": math.log10(min(broken) / max(equivariant)),
        "audit_threshold": FLOAT64_THRESHOLD, "audit_shape_U": f"{n} × {k}",
        "audit_shape_V": f"{m} × {k}", "audit_steps": zoo_rows[0].result.num_steps})


def audit_panels(zoo_rows: Sequence[AuditRow], torch_rows: Sequence[AuditRow]) -> list[Any]:
    """The two panels of :func:`audit_bars`: the zoo (rules by label) and ``torch.optim``."""
    def panel(title: str, rows: Sequence[AuditRow], label: Any) -> tuple[Any, ...]:
        rows = [r for r in rows if r.result is not None]
        return (title, [label(r) for r in rows], [r.result.residual for r in rows],
                [r.verdict == "equivariant" for r in rows])

    return [panel("gaugekit zoo", zoo_rows, lambda r: _label(r.name)),
            panel("torch.optim", torch_rows, lambda r: r.name)]


def lbfgs_check(loss: LossFn, U: Tensor, V: Tensor, Q: Tensor,
                scales: Sequence[float] = (1.0, 1e-3)) -> Findings:
    r"""``torch.optim.LBFGS`` scales its first step by ``min(1, 1/‖g‖₁)``: the audit on
    ``c · loss`` for each ``c`` of ``scales``, with ``‖g‖₁`` at ``(U, V)`` and at ``(UQ, VQ)``
    (``lbfgs_l1_plain``, ``lbfgs_l1_rot`` at the first scale, the residuals at the first and
    last, ``lbfgs_verdict_small`` at the last)."""
    lbfgs = torch_optim_factories()["LBFGS"]

    def l1_norm(loss: LossFn, U: Tensor, V: Tensor) -> float:
        return sum(g.abs().sum() for g in theory.loss_gradients(loss, U, V)).item()

    rows, lines = [], []
    for c in scales:
        scaled = lambda U, V, c=c: c * loss(U, V)  # noqa: E731
        l1_plain, l1_rot = l1_norm(scaled, U, V), l1_norm(scaled, U @ Q, V @ Q)
        result = audit_equivariance(lbfgs, U=U, V=V, Q=Q, loss=scaled)
        rows.append((l1_plain, l1_rot, result))
        lines.append(f"loss x {c:g}: |g|_1 = {l1_plain:.4f}, rotated {l1_rot:.4f}; "
                     f"{result.verdict}, residual {result.residual:.1e}")
    return Findings({"lbfgs_l1_plain": rows[0][0], "lbfgs_l1_rot": rows[0][1],
                     "lbfgs_res_big": rows[0][2].residual, "lbfgs_res_small": rows[-1][2].residual,
                     "lbfgs_verdict_small": rows[-1][2].verdict}, lines)


# --------------------------------------------------------------------------------------------
# chapter 2's figures
# --------------------------------------------------------------------------------------------


def adam_defect(
    lrs: Sequence[float],
    epss: Sequence[float],
    delta: torch.Tensor,
    measured: Mapping[tuple[float, float], float],
    eps_sweep: Sequence[float],
    delta_small_lr: torch.Tensor,
    grad_scale: float,
) -> Figure:
    """Left: ``delta[i]`` (closed form) against ``lrs`` for each ``epss[i]``, with the measured
    ``measured[(lr, eps)]`` as dots. Right: the small-step defect against ``eps_sweep``, with a
    dotted line at ``grad_scale``."""
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.6), layout="constrained")
    colors = plt.cm.viridis(torch.linspace(0, 0.85, len(epss)).tolist())
    for i, eps in enumerate(epss):
        ax0.loglog(lrs, _np(delta[i]), color=colors[i], label=rf"$\varepsilon$ = {eps:g}")
        points = sorted((lr, v) for (lr, e), v in measured.items() if e == eps)
        ax0.loglog(*zip(*points, strict=True), "o", color=colors[i], ms=5)
    ax0.set(xlabel=r"step size $\eta$", ylabel=r"relative defect $\delta$",
            title="against the step size")
    ax1.loglog(eps_sweep, _np(delta_small_lr), color="k")
    ax1.axvline(grad_scale, color="0.5", ls=":")
    ax1.annotate("mean |gradient entry|", (grad_scale, 0.04), xytext=(-5, 0),
                 textcoords="offset points", color="0.35", fontsize=9, ha="right",
                 xycoords=("data", "axes fraction"))
    ax1.set(xlabel=r"$\varepsilon$", ylabel=r"$\delta$ as $\eta \to 0$",
            title=r"against $\varepsilon$ ($\eta = 10^{-6}$)")
    legend_below(fig, ax0, ncol=3, handles=[
        Line2D([], [], color="k", marker="o", ls="", ms=5, label="library's Adam")])
    return fig


def plane_runs(
    paths: Mapping[str, Sequence[torch.Tensor]],
    products: Mapping[str, torch.Tensor],
    *,
    widths: Mapping[str, float] | None = None,
) -> Figure:
    """Left: the paths ``paths[method][j]`` (``steps × 1 × 2`` factors ``u_t``) on the plane with
    the solution circle ``‖u‖ = 1``; right: ``products[method]`` (``starts × steps``) against the
    step. One colour per method; ``widths[method]`` a line width (thick lines under thin)."""
    widths = dict(widths or {})
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH, 3.5), layout="constrained")
    arc = torch.linspace(0, math.pi / 2, 100)
    ax0.plot(_np(arc.cos()), _np(arc.sin()), "k--", lw=1)
    for method, runs in paths.items():
        for U in runs:
            ax0.plot(_np(U[:, 0, 0]), _np(U[:, 0, 1]), color=method_color(method), lw=1.4)
    for U in next(iter(paths.values())):
        ax0.plot(U[0, 0, 0].item(), U[0, 0, 1].item(), "ko", ms=4)
    ax0.set(aspect="equal", xlim=(-0.05, 1.1), ylim=(-0.05, 1.1), xlabel="$u_1$",
            ylabel="$u_2$", title="paths of $u_t$")
    for method, W in products.items():
        for curve in W:
            ax1.plot(_np(curve), color=method_color(method), lw=widths.get(method, 1.3),
                     ls="--" if method not in paths else "-")
    ax1.set(xlabel="step", ylabel="$W_t$", title="the seven products")
    handles = [Line2D([], [], color=method_color(m), lw=widths.get(m, 1.3),
                      ls="--" if m not in paths else "-", label=_label(m)) for m in products]
    handles.append(Line2D([], [], color="k", marker="o", ls="", ms=4, label="start"))
    legend_below(fig, handles=handles, ncol=len(handles))
    return fig


def audit_bars(
    panels: Sequence[tuple[str, Sequence[str], Sequence[float], Sequence[bool]]],
    threshold: float,
) -> Figure:
    """One horizontal bar chart per panel ``(title, names, residuals, passed)`` (stacked), bars
    in the book's class colours (blue: passes the audit, orange: fails), log axis from ``1e-17``
    (a residual of exactly 0 is drawn at it), the verdict threshold dashed."""
    counts = [len(names) for _, names, _, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH, 0.22 * sum(counts) + 1.6),
                             layout="constrained", sharex=True, height_ratios=counts,
                             squeeze=False)
    for ax, (title, names, residuals, passed) in zip(axes[:, 0], panels, strict=True):
        colors = [EQUIVARIANT_COLOR if ok else COORDINATEWISE_COLOR for ok in passed]
        ax.barh(range(len(names)), [max(r, 1e-17) for r in residuals], color=colors)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set(xscale="log", xlim=(1e-17, 10))
        ax.axvline(threshold, color="k", ls="--", lw=1)
        ax.set_title(title)
    axes[-1, 0].set_xlabel("audit residual")
    legend_below(fig, ncol=3, handles=[
        Patch(color=EQUIVARIANT_COLOR, label="passes (equivariant)"),
        Patch(color=COORDINATEWISE_COLOR, label="fails"),
        Line2D([], [], color="k", ls="--", lw=1, label="threshold")])
    return fig


# --------------------------------------------------------------------------------------------
# the API chapter: the registry's tables
# --------------------------------------------------------------------------------------------


def registry_table() -> str:
    """Every registered optimizer: its name, class, gauge class and the one-line reason."""
    return table_html([{"name": s.name, "class": s.cls.__name__,
                        "equivariant": yes_no(s.equivariant), "why": s.reason}
                       for s in all_specs()], ["name", "class", "equivariant", "why"])


def defaults_table() -> tuple[str, str]:
    """The registry's settings (matrices only, learning-rate schedule, the defaults that not
    every rule shares) as an HTML table, and the shared defaults in words."""
    specs = all_specs()
    common = set.intersection(*(set(s.defaults.items()) for s in specs))
    table = table_html(
        [{"name": s.name, "matrices only": yes_no(s.matrix_only),
          "lr schedule": s.lr_schedule,
          "defaults": "; ".join(f"{k} {value_text(v)}" for k, v in s.defaults.items()
                                if (k, v) not in common)} for s in specs],
        ["name", "matrices only", "lr schedule", "defaults"])
    return table, ", ".join(f"{k} {value_text(v)}" for k, v in sorted(common, key=lambda kv: kv[0]))


def audit_table(rows: Sequence[AuditRow]) -> str:
    """Rows of :func:`~gaugekit.audit.factors.audit_many` as an HTML table: the verdict, both
    residuals, the noise twin's and the plain run's displacement (``.2e``)."""
    numbers = ["residual_U", "residual_V", "noise_residual", "displacement"]
    return table_html([row.as_dict() for row in rows], ["name", "verdict", *numbers],
                      headers={"noise_residual": "noise", "displacement": "moved"},
                      formats=dict.fromkeys(numbers, ".2e"))
