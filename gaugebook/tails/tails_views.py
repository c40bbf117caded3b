r"""What the spectral-tails chapter shows, computed from the records of
:func:`gaugebook.tails.tails_runs.collect` and from the closed forms of
:mod:`gaugebook.tails.tail_theory`: tables, the numbers its text quotes (glue names as keys)
and its figures. The published values are the constants of :mod:`gaugebook.tails.tails_runs`
(``PUBLISHED_TAU_STAR``, ``PUBLISHED_SIGNUM``, ``PUBLISHED_BALANCEDNESS``,
``PAPER_PHASE_LOG``) and :mod:`gaugebook.sensing.sensing_runs` (``PUBLISHED_TABLE2``). The
crossing τ* is :mod:`gaugebook.tails.tails_crossing`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gaugebook.engine import selection
from gaugebook.present import stats
from gaugebook.present.tables import NBSP, Record, Row, label, rec_lr, table_html, yes_no
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.measurements import make_instance
from gaugebook.tails import tail_theory as tt
from gaugebook.tails import tails_runs as st
from gaugebook.tails.tail_problem import make_tail_instance

# --------------------------------------------------------------------------------------------
# comparisons of runs: the one rule of the book's words
# --------------------------------------------------------------------------------------------

def _short(c: stats.Comparison | None) -> str:
    """A comparison for a table cell: the difference and its 95 % interval, to the digits the
    interval supports, and the p values."""
    if c is None:
        return "—"

    def num(x: float) -> str:
        return stats.fmt_spread(x, c.half_width, signed=True)

    ps = f"p = {c.welch_p:.2g}" + (f", paired {c.paired_p:.2g}" if c.paired_n else "")
    return f"{num(c.diff)} ({num(c.low)} to {num(c.high)}; {ps})"


def _taus_text(taus: Sequence[float]) -> str:
    return ", ".join(f"{t:g}" for t in taus) if taus else "none"


# --------------------------------------------------------------------------------------------
# the tail problem
# --------------------------------------------------------------------------------------------

def problem_numbers(config: st.TailsConfig) -> dict[str, Any]:
    """The phase diagram's problem and protocol for the text (``tails_…`` glue names)."""
    phase, p = config.phase, config.phase.problem
    return {"tails_n": p.n, "tails_r": p.r, "tails_k": p.k, "tails_m": p.m,
            "tails_steps": phase.budget.num_steps, "tails_tol": phase.budget.tol,
            "tails_seeds": len(phase.seeds),
            "tails_taus": ", ".join(f"{t:g}" for t in phase.taus),
            "tails_runs": len(phase.specs()), "tails_init": p.init_scale}


def instance_rows(config: st.TailsConfig,
                  taus: Sequence[float] = (0.0, 0.2, 0.5)) -> list[dict[str, Any]]:
    """Checks of the tail construction per seed and ``τ`` in float64: the tail's overlap with
    the head's column and row spaces, ``‖τE⊥‖/‖X₃‖``, ``‖X‖/‖X₃‖``, the head against the zoo's
    planted matrix, and whether the measurements are the zoo's (``'yes'``/``'no'``)."""
    p = config.phase.problem
    rows = []
    for seed in config.phase.seeds:
        zoo = make_instance(seed, p.n, p.r, p.m)
        for tau in taus:
            inst = make_tail_instance(seed, tau, p.n, p.r, p.m, dtype=torch.float64)
            E, head = inst.E_perp, inst.head
            nE, nH = torch.linalg.matrix_norm(E).item(), torch.linalg.matrix_norm(head).item()
            same = bool(torch.equal(inst.A.float(), zoo.A))
            rows.append({
                "seed": seed, "tau": tau,
                "left": torch.linalg.matrix_norm(inst.Q_U.mT @ E).item() / nE,
                "right": torch.linalg.matrix_norm(E @ inst.Q_V).item() / nE,
                "tail_norm": (tau * nE) / nH,
                "norm_ratio": torch.linalg.matrix_norm(inst.X_star).item() / nH,
                "head_vs_zoo": (head.float() - zoo.X_star).abs().max().item(),
                "same_A": same, "same_A_word": yes_no(same),
            })
    return rows


def instance_numbers(rows: Sequence[Row]) -> dict[str, Any]:
    """What the text says of :func:`instance_rows`: the largest departure from orthogonality
    of either factor (``tails_orth_max``), on how many rows the sensing operator is the
    paper's (``tails_same_A``) and, for the checks of the construction, the largest departures
    of ``‖X‖/‖X₃‖`` from 1 (``tails_norm_err``) and of ``‖τE⊥‖/‖X₃‖`` from ``τ``
    (``tails_tail_norm_err``) and of the head from the zoo's planted matrix
    (``tails_head_zoo``)."""
    return {"tails_orth_max": max(max(r["left"], r["right"]) for r in rows),
            "tails_same_A": sum(r["same_A"] for r in rows),
            "tails_norm_err": max(abs(r["norm_ratio"] - 1.0) for r in rows),
            "tails_tail_norm_err": max(abs(r["tail_norm"] - r["tau"]) for r in rows),
            "tails_head_zoo": max(r["head_vs_zoo"] for r in rows)}


def instances_html(rows: Sequence[Row]) -> str:
    """The table of :func:`instance_rows`."""
    return table_html(
        rows, ["seed", "tau", "left", "right", "tail_norm", "norm_ratio", "head_vs_zoo",
               "same_A_word"],
        headers={"tau": "τ", "left": "‖Q_Uᵀ E⊥‖/‖E⊥‖", "right": "‖E⊥ Q_V‖/‖E⊥‖",
                 "tail_norm": "‖τE⊥‖/‖X₃‖", "norm_ratio": "‖X‖/‖X₃‖",
                 "head_vs_zoo": "max |X₃ − zoo X⋆|", "same_A_word": "A = zoo's A"},
        formats={"tau": "g", "left": ".1e", "right": ".1e", "tail_norm": ".6f",
                 "norm_ratio": ".12f", "head_vs_zoo": ".1e"})


def spectrum_figure(config: st.TailsConfig) -> Any:
    """Singular values of the target for the first seed at each ``τ`` of the phase diagram."""
    import matplotlib.pyplot as plt

    from gaugebook.present.viz import legend_beside

    phase, p = config.phase, config.phase.problem
    fig, ax = plt.subplots(figsize=(7.0, 3.3), layout="constrained")
    shades = plt.get_cmap("viridis")
    for i, tau in enumerate(phase.taus):
        inst = make_tail_instance(phase.seeds[0], tau, p.n, p.r, p.m, dtype=torch.float64)
        sv = torch.linalg.svdvals(inst.X_star)
        sv = sv[sv > 1e-12 * sv[0]]
        ax.semilogy(range(1, len(sv) + 1), sv, marker=".",
                    color=shades(i / max(len(phase.taus) - 1, 1) * 0.9), label=f"τ = {tau:g}")
    ax.set_xlabel("index")
    ax.set_ylabel("singular value of X")
    legend_beside(ax)
    return fig


# --------------------------------------------------------------------------------------------
# Prop. 8.1: greedy and equal-rate modes
# --------------------------------------------------------------------------------------------

#: the spectrum of the tail-fraction panel: three head modes, three tail modes
MODE_SPECTRUM: tuple[tuple[float, ...], tuple[bool, ...]] = (
    (1.0, 0.8, 0.6, 0.05, 0.05, 0.05), (False,) * 3 + (True,) * 3)


def modes_figure() -> tuple[Any, dict[str, Any]]:
    """The per-mode dynamics, closed forms against integration, and the tail fitted at a
    fixed horizon, with the numbers the text quotes (``tails_…`` glue names).

    Top: the fitted fraction ``w(t)/s`` of a head mode (``s = 1``, solid) and a tail mode
    (``s = 0.05``, dashed) from ``w₀ = 1e-4`` (dark) and ``1e-8`` (light), greedy (left) and
    equal-rate (right), closed forms as lines and :func:`gaugebook.tails.tail_theory.integrate_mode`
    as dots, ``η = 1``. Bottom: the share of the tail of :data:`MODE_SPECTRUM` fitted at the
    time the greedy flow fits 99% of the head from ``w₀ = 1e-4``, against ``w₀``. The numbers
    include that share for the greedy flow from the largest ``w₀`` down
    (``tails_frac_greedy_by_w0``), for the check that it falls with the initialization.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from gaugebook.present.viz import legend_beside

    times = torch.logspace(-3, 3.2, 120, dtype=torch.float64)
    modes, inits = (1.0, 0.05), (1e-4, 1e-8)
    errors = {}
    fig, axes = plt.subplot_mosaic([["greedy", "equal_rate"], ["tail", "tail"]],
                                   figsize=(7.0, 5.6), layout="constrained")
    titles = {"greedy": "greedy (gradient flow)", "equal_rate": "equal-rate (Muon-like)"}
    for dynamics in tt.DYNAMICS:
        ax = axes[dynamics]
        for s, ls in zip(modes, ("-", "--"), strict=True):
            for w0, shade in zip(inits, ("0.1", "0.6"), strict=True):
                exact = tt.closed_form(dynamics, times, s, w0, 1.0)
                numeric = tt.integrate_mode(dynamics, times, s, w0, 1.0)
                errors[(dynamics, s, w0)] = (exact - numeric).abs().max().item()
                ax.plot(times, exact / s, ls=ls, color=shade)
                ax.plot(times[::6], numeric[::6] / s, ".", ms=4,
                        color="C3" if s == 1 else "C0")
        ax.set_xscale("log")
        ax.set_xlabel("t")
        ax.set_title(titles[dynamics])
    axes["greedy"].set_ylabel("w(t) / s")
    legend_beside(axes["equal_rate"], handles=[
        Line2D([], [], color="0.3", ls="-", label="head, s = 1"),
        Line2D([], [], color="0.3", ls="--", label="tail, s = 0.05"),
        Line2D([], [], color="0.1", label="w₀ = 1e-4"),
        Line2D([], [], color="0.6", label="w₀ = 1e-8"),
        Line2D([], [], color="C3", marker=".", ls="", label="integrated, head"),
        Line2D([], [], color="C0", marker=".", ls="", label="integrated, tail")])
    horizon = tt.fit_time("greedy", 1.0, 1e-4, 1.0, 0.99)
    w0s = torch.logspace(-12, -2, 11, dtype=torch.float64).tolist()
    spectrum, tail = MODE_SPECTRUM
    frac = {d: [tt.tail_fraction(d, spectrum, tail, horizon, w0, 1.0) for w0 in w0s]
            for d in tt.DYNAMICS}
    ax = axes["tail"]
    ax.semilogx(w0s, frac["greedy"], "o-", color="0.2", label="greedy")
    ax.semilogx(w0s, frac["equal_rate"], "s-", color="0.6", label="equal-rate")
    ax.set_xlabel("initial product $w_0$")
    ax.set_ylabel("tail fitted at the horizon")
    legend_beside(ax)
    numbers = {
        "tails_ode_err": max(errors.values()), "tails_T_head": horizon,
        "tails_frac_greedy_hi": frac["greedy"][-1], "tails_frac_greedy_lo": frac["greedy"][0],
        "tails_frac_eq_lo": min(frac["equal_rate"]), "tails_frac_w0_hi": w0s[-1],
        "tails_frac_greedy_by_w0": frac["greedy"][::-1],  # from the largest w₀ down
        "tails_frac_w0_lo": w0s[0],
        "tails_tfit_head": tt.fit_time("greedy", 1.0, 1e-8, 1.0),
        "tails_tfit_tail": tt.fit_time("greedy", 0.05, 1e-8, 1.0),
        "tails_tfit_eq_head": tt.fit_time("equal_rate", 1.0, 1e-8, 1.0),
        "tails_tfit_eq_tail": tt.fit_time("equal_rate", 0.05, 1e-8, 1.0),
    }
    return fig, numbers


# --------------------------------------------------------------------------------------------
# the phase diagram
# --------------------------------------------------------------------------------------------

def phase_figure(rows: Sequence[Row], taus: Sequence[float]) -> Any:
    """Left: rec of the full target against ``τ`` per optimizer (mean, band from the smallest
    to the largest seed) with the scaled head alone (``rec = τ``); right: the error on the
    head's spaces (log scale). One legend below both panels."""
    import matplotlib.pyplot as plt

    from gaugebook.present.viz import legend_below, method_color

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 3.9), layout="constrained")
    for method in st.PHASE_METHODS:
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["tau"])
        xs = [r["tau"] for r in mine]
        lo = [min(r["rec_seeds"], default=math.nan) for r in mine]
        hi = [max(r["rec_seeds"], default=math.nan) for r in mine]
        color = method_color(method)
        ax1.plot(xs, [r["rec"] for r in mine], "o-", color=color, label=label(method))
        ax1.fill_between(xs, lo, hi, color=color, alpha=0.2)
        ax2.plot(xs, [r["head_rec"] for r in mine], "o-", color=color)
    ax1.plot(taus, taus, ":", color="0.3", label="head only (rec = τ)")
    ax1.set_xlabel("τ")
    ax1.set_ylabel("rec (full target)")
    ax2.set_xlabel("τ")
    ax2.set_ylabel("head error")
    ax2.set_yscale("log")
    legend_below(fig, ax1, ncol=3)
    return fig


def phase_leads(rows: Sequence[Row], taus: Sequence[float]) -> list[dict[str, Any]]:
    """Per ``τ``, the optimizer with the lowest mean rec against the one with the next
    (``best``, ``next``): :func:`compare_seeds` of their rec per seed, paired (``cmp``, best
    minus next), and its words, ``"ahead"`` or :data:`gaugebook.present.stats.LEVEL`
    (``words``; ``None`` without a comparison)."""
    out = []
    for tau in taus:
        mine = sorted((r for r in rows if r["tau"] == tau),
                      key=lambda r: math.inf if math.isnan(r["rec"]) else r["rec"])
        if len(mine) < 2:
            continue
        best, nxt = mine[0], mine[1]
        c = stats.compare_seeds(best["rec_by_seed"], nxt["rec_by_seed"])
        out.append({"tau": tau, "best": best["method"], "next": nxt["method"], "cmp": c,
                    "words": None if c is None else c.words("ahead", "behind")})
    return out


def phase_html(rows: Sequence[Row], taus: Sequence[float]) -> str:
    """Mean rec and, in brackets, the selected lr per ``τ`` and optimizer, a star where the
    selection's seeds did not all interpolate; the last column compares the lowest mean with
    the next (:func:`phase_leads`: the difference, its 95 % interval, Welch's and the paired
    p)."""
    leads = {lead["tau"]: lead for lead in phase_leads(rows, taus)}
    table = []
    for tau in taus:
        entry: dict[str, Any] = {"tau": tau}
        for r in rows:
            if r["tau"] == tau:
                entry[r["method"]] = rec_lr(r["rec"], r["lr"], "" if r["interpolated"] else "*")
        lead = leads.get(tau)
        if lead:
            entry["lead"] = (f"{label(lead['best'])} − {label(lead['next'])}: "
                             f"{_short(lead['cmp'])}")
        table.append(entry)
    return table_html(
        table, ["tau", *st.PHASE_METHODS, "lead"],
        headers={"tau": "τ", **{m: label(m) for m in st.PHASE_METHODS},
                 "lead": "lowest − next (95 % CI)"}, formats={"tau": "g"})


def phase_numbers(records: Mapping[str, Sequence[Record]], rows: Sequence[Row],
                  config: st.TailsConfig, published: bool) -> dict[str, Any]:
    """The phase diagram's numbers for the text (glue names as keys): selections that did not
    interpolate or sit at a grid edge; the mean rec of every optimizer at every ``τ``
    (``tails_rec_<method>_<i>``); the optimizer with the lowest mean per ``τ``
    (``tails_best``, method names in the order of the grid) and, by :func:`phase_leads`, which
    two optimizers have the lowest means (``tails_lead_pairs``), the words of their comparison
    (``tails_lead_words``), the ``τ`` where it is resolved (``tails_lead_resolved``) and its
    numbers at the first ``τ`` (``tails_lead_text_0``); at ``τ = 0`` the largest difference
    from the published Table 2 and whose it is (``nan`` and ``None`` off the paper's
    setting); the phase script's own rule: its grids (``tails_paper_grids``), the
    ``(method, lr)`` of them without records, how often it agrees with ours and for which
    optimizers; and per optimizer the largest difference of our means from its log
    (``tails_log_<method>``, ``nan`` off the paper's setting)."""
    phase = config.phase
    out: dict[str, Any] = {
        "tails_phase_not_interp": sum(not r["interpolated"] for r in rows),
        "tails_phase_edges": sum(bool(r["at_grid_edge"]) for r in rows),
        "tails_phase_cells": len(rows),
    }
    rec_at = {(r["method"], r["tau"]): r["rec"] for r in rows}
    out.update({f"tails_rec_{m}_{i}": rec_at.get((m, t), math.nan)
                for m in st.PHASE_METHODS for i, t in enumerate(phase.taus)})
    out["tails_best"] = [min((r for r in rows if r["tau"] == t), key=lambda r: r["rec"])["method"]
                         for t in phase.taus]
    leads = phase_leads(rows, phase.taus)
    out.update({
        "tails_lead_pairs": [(x["best"], x["next"]) for x in leads],
        "tails_lead_words": [x["words"] for x in leads],
        "tails_lead_resolved": [x["tau"] for x in leads if x["cmp"] is not None
                                and x["cmp"].resolved],
        "tails_lead_text_0": stats.comparison_text(leads[0]["cmp"]) if leads else "—",
    })
    table2 = ms.published_table2(ms.get_config("paper").part("zoo")) if published else None
    gaps = {r["method"]: abs(r["rec"] - table2[r["method"]][0]) for r in rows
            if table2 and r["tau"] == phase.taus[0]}
    furthest = max(gaps, key=gaps.get) if gaps else None
    out["tails_table2_gap"] = gaps[furthest] if gaps else math.nan
    out["tails_table2_furthest"] = furthest
    paper_rows = st.phase_rows(records["phase"], "oracle_loose", st.PAPER_PHASE_LR_GRIDS)
    ours_lr = {(r["method"], r["tau"]): r["lr"] for r in rows}
    comparable = [r for r in paper_rows if r["method"] in st.PAPER_PHASE_LR_GRIDS
                  and not r["missing_lrs"]]
    out.update({
        "tails_paper_grids": {m: tuple(lrs) for m, lrs in st.PAPER_PHASE_LR_GRIDS.items()},
        "tails_paper_missing": sorted({(r["method"], lr) for r in paper_rows
                                       for lr in r["missing_lrs"]}),
        "tails_paper_same_lr": sum(r["lr"] == ours_lr[(r["method"], r["tau"])]
                                   for r in comparable),
        "tails_paper_cells": len(comparable),
        "tails_paper_methods": sorted({r["method"] for r in comparable}),
        "tails_loose_bar": selection.LOOSE_BAR,
    })
    log_rows = st.log_comparison(records["phase"]) if published else []
    for m in st.PAPER_PHASE_LR_GRIDS:
        diffs = [abs(r["diff"]) for r in log_rows if r["method"] == m]
        out[f"tails_log_{m}"] = max(diffs) if diffs else math.nan
    return out


# --------------------------------------------------------------------------------------------
# the signum audit
# --------------------------------------------------------------------------------------------

def signum_figure(hz: Sequence[Row], config: st.TailsConfig, published: bool) -> Any:
    """Signum's rec against the budget ``T`` per schedule (line: mean; dots: seeds; log
    scale), our exact-recovery threshold dotted, the published Table 2 value as a diamond
    (paper's setting only); the legend beside the axes."""
    import matplotlib.pyplot as plt

    from gaugebook.present.viz import legend_beside

    fig, ax = plt.subplots(figsize=(7.0, 3.4), layout="constrained")
    for schedule, color in zip(config.horizon.schedules, ("C0", "C1"), strict=True):
        mine = [r for r in hz if r["schedule"] == schedule]
        ax.plot([r["T"] for r in mine], [r["rec"] for r in mine], "o-", color=color,
                label=schedule)
        for r in mine:
            ax.plot([r["T"]] * len(r["rec_seeds"]), r["rec_seeds"], ".", color=color,
                    alpha=0.5)
    ax.axhline(st.EXACT_REC, ls=":", color="0.3", label="exact-recovery\nthreshold")
    if published:
        ax.plot([20_000], [st.PUBLISHED_SIGNUM["table2_rec_at_2e4"]], "D", color="k",
                mfc="w", label="published\nTable 2")
    ax.set_xlabel("budget T (steps)")
    ax.set_ylabel("rec")
    ax.set_yscale("log")
    legend_beside(ax)
    return fig


def signum_html(hz: Sequence[Row], records: Sequence[Record], published: bool) -> str:
    """The signum horizon × schedule grid (rows of
    :func:`~gaugebook.tails.tails_runs.horizon_rows`, seeds read from their
    ``records``): mean rec (a star when some seed did not reach the training tolerance), the
    rec of each seed, the seeds below the exact-recovery threshold, mean steps, and exact
    recovery by our threshold and by the paper's verdict (paper's setting only)."""
    per_seed = {(r["config"]["budget"]["num_steps"], r["config"]["schedule"],
                 r["config"]["seed"]): r["metrics"]["rec"]
                for r in records if r["status"] == "ok"}
    seeds = sorted({key[2] for key in per_seed})
    recovers = st.PUBLISHED_SIGNUM["recovers"]
    table = [{"cell": f"{r['T']}{NBSP}{r['schedule']}",
              "rec": f"{r['rec']:.3g}" + ("" if r["interpolated"] else "*"),
              "exact_seeds": r["exact_seeds"], "steps": r["steps"],
              "ours": yes_no(r["exact"]),
              "published": yes_no(recovers[r["T"]]) if published and r["T"] in recovers else None,
              **{f"s{s}": per_seed.get((r["T"], r["schedule"], s)) for s in seeds}}
             for r in hz]
    return table_html(
        table, ["cell", "rec", *[f"s{s}" for s in seeds], "exact_seeds", "steps", "ours",
                "published"],
        headers={"cell": "T, schedule", "rec": "rec (mean)",
                 **{f"s{s}": f"seed {s}" for s in seeds},
                 "exact_seeds": "seeds exact", "steps": "steps (mean)",
                 "ours": "exact (ours)", "published": "exact (paper)"},
        formats={**{f"s{s}": ".3g" for s in seeds}, "steps": ".0f"})


def signum_numbers(hz: Sequence[Row], config: st.TailsConfig) -> dict[str, Any]:
    """The signum audit for the text (``tails_…`` glue names): its learning rate, the
    published claim, the largest budget and the mean rec of each schedule there
    (``tails_signum_at_max_<schedule>``), the best cell (its rec, budget and schedule), how
    many cells recover exactly and the smallest budget where one does (``nan`` if none), and
    the cells where only some seeds recover (``tails_signum_partial``: ``(schedule, T, exact
    seeds, seeds)``, with the first one's numbers as ``tails_signum_partial_T``, ``_exact``,
    ``_seeds``; ``nan`` if none); and linear decay against cosine decay at the largest budget,
    paired by seed (``tails_signum_lin_cos_words``: ``"below"``, ``"above"`` or
    :data:`gaugebook.present.stats.LEVEL`; ``tails_signum_lin_cos_text``: its numbers)."""
    largest = max(r["T"] for r in hz)
    best = min(hz, key=lambda r: r["rec"])
    at_max = {r["schedule"]: r for r in hz if r["T"] == largest}
    lin_cos = (stats.compare_seeds(at_max["linear"].get("rec_by_seed", {}),
                             at_max["cosine"].get("rec_by_seed", {}))
               if {"linear", "cosine"} <= set(at_max) else None)
    partial = [(r["schedule"], r["T"], r["exact_seeds"], len(r["rec_seeds"])) for r in hz
               if 0 < r["exact_seeds"] < len(r["rec_seeds"])]
    first = partial[0] if partial else (None, math.nan, math.nan, math.nan)
    return {
        "tails_signum_lr": config.horizon.lr, "tails_pub_signum_lr": st.PUBLISHED_SIGNUM["lr"],
        "tails_pub_signum_from": st.PUBLISHED_SIGNUM["recovers_from"],
        "tails_pub_signum_t2": st.PUBLISHED_SIGNUM["table2_rec_at_2e4"],
        "tails_table2_steps": ms.get_config("paper").part("zoo").budget.num_steps,
        "tails_exact": st.EXACT_REC,
        "tails_signum_T_max": largest,
        **{f"tails_signum_at_max_{r['schedule']}": r["rec"] for r in hz if r["T"] == largest},
        "tails_signum_best": best["rec"], "tails_signum_best_T": best["T"],
        "tails_signum_best_schedule": best["schedule"],
        "tails_signum_n_exact": sum(r["exact"] for r in hz), "tails_signum_n_cells": len(hz),
        "tails_signum_smallest_T": min((r["T"] for r in hz if r["exact"]), default=math.nan),
        "tails_signum_partial": partial, "tails_signum_partial_T": first[1],
        "tails_signum_partial_exact": first[2], "tails_signum_partial_seeds": first[3],
        "tails_signum_lin_cos_words": None if lin_cos is None else lin_cos.words("below",
                                                                                "above"),
        # rec of order 1e-5: one significant digit, as far as the interval supports
        "tails_signum_lin_cos_text": stats.comparison_text(lin_cos, "+.0e"),
    }


# --------------------------------------------------------------------------------------------
# the balancedness probe
# --------------------------------------------------------------------------------------------

def balancedness_figure(bal: Sequence[Row]) -> Any:
    """Final balancedness against ``τ`` for the optimizers of the probe (log scale)."""
    import matplotlib.pyplot as plt

    from gaugebook.present.viz import legend_beside, method_color

    fig, ax = plt.subplots(figsize=(7.0, 3.4), layout="constrained")
    for method in st.PROBE_METHODS:
        mine = sorted((r for r in bal if r["method"] == method), key=lambda r: r["tau"])
        ax.plot([r["tau"] for r in mine], [r["balancedness"] for r in mine], "o-",
                color=method_color(method), label=label(method))
    ax.set_xlabel("τ")
    ax.set_ylabel(r"$\|U^\top U - V^\top V\|_F$")
    ax.set_yscale("log")
    legend_beside(ax)
    return fig


def balancedness_html(bal: Sequence[Row], tau0: float, published: bool) -> str:
    """The probe at ``τ = tau0``: lr, balancedness, the same relative to ``‖W‖*``, rec, and
    the paper's qualitative statement (paper's setting only)."""
    rows = [{**r, "published": st.PUBLISHED_BALANCEDNESS[r["method"]] if published else None}
            for r in bal if r["tau"] == tau0]
    return table_html(
        rows, ["label", "lr", "balancedness", "relative_balancedness", "rec", "published"],
        headers={"label": "optimizer", "balancedness": "‖UᵀU−VᵀV‖ (ours)",
                 "relative_balancedness": "relative to ‖W‖*", "rec": "rec",
                 "published": "balancedness (paper)"},
        formats={"lr": "g", "balancedness": ".3g", "relative_balancedness": ".3g", "rec": ".3g"})


def _ratio_text(ratio: float, a: Mapping[int, float], b: Mapping[int, float]) -> str:
    """``ratio`` to the digits its spread supports: the half-width of the interval of
    :func:`gaugebook.present.stats.compare_ratio` of ``a`` over ``b`` (the rule on the
    logarithms, paired by seed); two significant digits where it cannot be formed."""
    try:
        c = stats.compare_ratio(a, b)
    except ValueError:
        return f"{ratio:.2g}"
    return stats.fmt_spread(ratio, (c.high - c.low) / 2)


def balancedness_numbers(bal: Sequence[Row], taus: Sequence[float]) -> dict[str, Any]:
    """The probe for the text (``tails_bal_…``): the balancedness of each optimizer at the
    first ``τ``; the smaller mean of Muon and Shampoo over the larger of GD and shared-scale
    Adam there (``tails_bal_ratio``, and ``tails_bal_ratio_text`` to the digits the spread of
    those two optimizers' seeds supports); at how many ``τ`` both means of Muon and Shampoo
    are above both of GD and shared-scale Adam (of how many); and by the rule
    (:func:`compare_seeds`, paired by seed), per optimizer ``m`` of Muon and Shampoo the
    ``τ`` at which it is resolved above both of the others (``tails_bal_above_<m>``, their
    count ``tails_bal_<m>_resolved``, the others ``tails_bal_<m>_level``, each list also as
    text, ``…_text``), whether any pair is resolved the other way (``tails_bal_reversed``),
    Shampoo's seed range at the first ``τ`` (``tails_bal_shampoo_lo``, ``_hi``) and its
    comparison with shared-scale Adam there (``tails_bal_shampoo_sa_text``)."""
    by = {(r["method"], r["tau"]): r["balancedness"] for r in bal}
    seeds = {(r["method"], r["tau"]): r.get("balancedness_by_seed", {}) for r in bal}
    geometry, balanced = ("muon", "shampoo"), ("gd", "scalar_adam")
    per_tau = [min(by[(m, t)] for m in geometry) > max(by[(m, t)] for m in balanced)
               for t in taus]
    cmp = {(g, b, t): stats.compare_seeds(seeds[(g, t)], seeds[(b, t)])
           for g in geometry for b in balanced for t in taus}
    above = {g: [t for t in taus
                 if all((c := cmp[(g, b, t)]) is not None and c.sign > 0 for b in balanced)]
             for g in geometry}
    t0 = taus[0]
    low = min(geometry, key=lambda m: by[(m, t0)])
    high = max(balanced, key=lambda m: by[(m, t0)])
    ratio = by[(low, t0)] / by[(high, t0)]
    shampoo0 = [v for v in seeds[("shampoo", t0)].values() if math.isfinite(v)]
    out: dict[str, Any] = {
        "tails_bal_muon": by[("muon", t0)], "tails_bal_shampoo": by[("shampoo", t0)],
        "tails_bal_gd": by[("gd", t0)], "tails_bal_scalar_adam": by[("scalar_adam", t0)],
        "tails_bal_ratio": ratio,
        "tails_bal_ratio_text": _ratio_text(ratio, seeds[(low, t0)], seeds[(high, t0)]),
        "tails_bal_n_split": sum(per_tau), "tails_bal_n_taus": len(per_tau),
        "tails_bal_reversed": any(c is not None and c.sign < 0 for c in cmp.values()),
        "tails_bal_shampoo_lo": min(shampoo0, default=math.nan),
        "tails_bal_shampoo_hi": max(shampoo0, default=math.nan),
        "tails_bal_shampoo_sa_text": stats.comparison_text(cmp[("shampoo", "scalar_adam", t0)]),
    }
    for g in geometry:
        level = [t for t in taus if t not in above[g]]
        out |= {f"tails_bal_above_{g}": above[g], f"tails_bal_{g}_resolved": len(above[g]),
                f"tails_bal_{g}_resolved_text": _taus_text(above[g]),
                f"tails_bal_{g}_level": level, f"tails_bal_{g}_level_text": _taus_text(level)}
    return out
