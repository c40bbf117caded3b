r"""The spectral-tails chapter's crossing :math:`\tau^\star`, where Muon stops recovering better
than gradient descent: the figure, the table beside the published crossings and the numbers the
text quotes, from the estimates of :func:`gaugebook.tails.tails_runs.crossings` (the
paper's rule and ours, interpolated, each with a bootstrap interval over seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.present import stats
from gaugebook.present.tables import NBSP, Row, table_html
from gaugebook.present.viz import _axes, legend_below, method_color
from gaugebook.tails import tails_runs as st


def crossing_figure(rows: Sequence[Row], est: Mapping[str, Any], published: bool) -> Any:
    """Muon's rec minus GD's per seed (dots) and for the mean (line, Muon's colour) against
    ``τ``; vertical lines at the paper's estimate (solid) and ours (dashed); the 90% bootstrap
    band of ours; the published crossings as diamonds (paper's setting only). The legend
    below the axes."""
    paper_x, ours_x = est["paper"], est["ours"]
    taus_m, rec_muon, seeds_m = st.rec_matrix(rows, "muon")
    _, rec_gd, _ = st.rec_matrix(rows, "gd")
    fig, ax = _axes(None, (7.0, 4.2))
    color = method_color("muon")
    for j in range(len(seeds_m)):
        ax.plot(taus_m, [a[j] - b[j] for a, b in zip(rec_muon, rec_gd, strict=True)], ".",
                color="0.55", label="each seed" if j == 0 else None)
    ax.plot(ours_x.taus, ours_x.difference, "o-", color=color, label="mean (Muon − GD)")
    ax.axhline(0.0, color="0.2", lw=0.8)
    for x, ls, name in ((paper_x, "-", "paper's rule"), (ours_x, "--", "ours, interpolated")):
        if x.tau_star is not None:
            ax.axvline(x.tau_star, color=color, ls=ls, lw=1.2,
                       label=f"τ* = {x.tau_star:.3g} ({name})")
    lo, hi = max(ours_x.low, taus_m[0]), min(ours_x.high, taus_m[-1])
    if lo < hi:
        ax.axvspan(lo, hi, color=color, alpha=0.12, label="90% interval (ours)")
    if published:
        for marker, (key, pub) in zip("Dv", st.PUBLISHED_TAU_STAR.items(), strict=False):
            ax.plot([pub["tau_star"]], [0.0], marker, color="k", mfc="w", ms=7,
                    label=f"published τ* ({key}, {pub['seeds']} seeds)")
    ax.set_xlabel("τ")
    ax.set_ylabel("rec difference")
    legend_below(fig, ax, ncol=3)
    return fig


def _interval(x: Any) -> str:
    return "—" if x.tau_star is None else f"[{x.low:.3g},{NBSP}{x.high:.3g}]"


def crossing_html(est: Mapping[str, Any], published: bool) -> str:
    """The published crossings beside ours by the paper's rule and interpolated, each with
    its 90% bootstrap interval."""
    paper_x, ours_x = est["paper"], est["ours"]
    rows = [{"setting": pub["note"], "published": pub["tau_star"] if published else None,
             "paper_rule": paper_x.tau_star if key == "cpu" else None,
             "paper_int": _interval(paper_x) if key == "cpu" else "not run here",
             "ours": ours_x.tau_star if key == "cpu" else None,
             "ours_int": _interval(ours_x) if key == "cpu" else "not run here"}
            for key, pub in st.PUBLISHED_TAU_STAR.items()]
    return table_html(
        rows, ["setting", "published", "paper_rule", "paper_int", "ours", "ours_int"],
        headers={"published": "τ* (paper)", "paper_rule": "τ* (ours, paper's rule)",
                 "paper_int": "90% interval", "ours": "τ* (ours, interpolated)",
                 "ours_int": "90% interval"},
        formats={"published": "g", "paper_rule": "g", "ours": ".3f"})


def muon_against_gd(rows: Sequence[Row]) -> dict[float, Any]:
    """Per ``τ`` of ``rows`` (:func:`~gaugebook.tails.tails_runs.phase_rows`), Muon's rec
    minus GD's by the rule: :func:`~gaugebook.present.stats.compare_seeds` of their rec
    per seed, paired (the runs of a seed share the instance and the initial factors);
    ``None`` where a side is missing."""
    by = {(r["method"], r["tau"]): r["rec_by_seed"] for r in rows}
    taus = sorted({r["tau"] for r in rows})
    return {t: stats.compare_seeds(by[("muon", t)], by[("gd", t)]) if ("muon", t) in by
            and ("gd", t) in by else None for t in taus}


def crossing_numbers(rows: Sequence[Row], est: Mapping[str, Any],
                     published: bool) -> dict[str, Any]:
    """The crossing for the text (glue names as keys): the published estimates (the CPU
    one's seeds and grid, the GPU one's seeds, grid, its ends, dtype and means at its ``τ*``);
    ours by the paper's rule and interpolated (``nan`` without a crossing), the grid points
    that bracket the interpolated one, the share of bootstrap resamples that give the paper's
    rule its ``τ*`` (and every ``(τ*, share)`` pair), our mean difference Muon − GD at the
    GPU's ``τ*`` (``nan`` off our grid), and at how many of the first two ``τ`` Muon's mean is
    below GD's. By the rule (:func:`muon_against_gd`): the words per ``τ``
    (``tails_mg_words``, ``"ahead"``, ``"behind"`` or the level words), the ``τ`` where Muon
    is resolved ahead (``tails_mg_ahead``) and behind (``tails_mg_behind``), the numbers at
    the first ``τ``, at the paper's rule's ``τ*`` and at the GPU's (``tails_mg_text_0``,
    ``_star``, ``_gpu``) and the words at the GPU's (``tails_mg_words_gpu``); and whether the
    paper's rule and ours select the same runs of Muon and GD (``tails_rules_same_runs``:
    their mean differences agree at every ``τ``, so the words hold for both)."""
    nan = math.nan
    paper_x, ours_x = est["paper"], est["ours"]
    cpu, gpu = st.PUBLISHED_TAU_STAR["cpu"], st.PUBLISHED_TAU_STAR["gpu"]
    at_gpu = dict(zip(ours_x.taus, ours_x.difference, strict=True)).get(gpu["tau_star"], nan)
    bracket = ours_x.bracket or (nan, nan)
    mg = muon_against_gd(rows)
    words = {t: None if c is None else c.words("ahead", "behind") for t, c in mg.items()}
    first = min(mg) if mg else nan
    return {
        "tails_mg_words": [words[t] for t in sorted(words)],
        "tails_mg_ahead": [t for t, w in sorted(words.items()) if w == "ahead"],
        "tails_mg_behind": [t for t, w in sorted(words.items()) if w == "behind"],
        "tails_mg_text_0": stats.comparison_text(mg.get(first)),
        "tails_mg_text_star": stats.comparison_text(mg.get(paper_x.tau_star)),
        "tails_mg_text_gpu": stats.comparison_text(mg.get(gpu["tau_star"])),
        "tails_mg_words_gpu": words.get(gpu["tau_star"]),
        "tails_rules_same_runs": paper_x.taus == ours_x.taus
        and paper_x.difference == ours_x.difference,
        "tails_pub_cpu": cpu["tau_star"], "tails_pub_cpu_seeds": cpu["seeds"],
        "tails_pub_cpu_ntaus": len(cpu["grid"]), "tails_pub_cpu_grid": tuple(cpu["grid"]),
        "tails_pub_gpu": gpu["tau_star"], "tails_pub_gpu_seeds": gpu["seeds"],
        "tails_pub_gpu_ntaus": len(gpu["grid"]), "tails_pub_gpu_grid": tuple(gpu["grid"]),
        "tails_pub_gpu_min": min(gpu["grid"]), "tails_pub_gpu_max": max(gpu["grid"]),
        "tails_pub_gpu_dtype": gpu["dtype"],
        "tails_pub_gpu_gd": gpu["means_at_tau_star"]["gd"],
        "tails_pub_gpu_muon": gpu["means_at_tau_star"]["muon"],
        "tails_gpu_diff": gpu["means_at_tau_star"]["muon"] - gpu["means_at_tau_star"]["gd"],
        "tails_gpu_ours": at_gpu,
        "tails_paper_tau": nan if paper_x.tau_star is None else paper_x.tau_star,
        "tails_ours_tau": nan if ours_x.tau_star is None else ours_x.tau_star,
        "tails_bracket_lo": bracket[0], "tails_bracket_hi": bracket[1],
        "tails_paper_shares": tuple(paper_x.shares),
        "tails_paper_share": dict(paper_x.shares).get(paper_x.tau_star, nan),
        "tails_ntaus": len(ours_x.taus),
        "tails_small_tau_muon_better": sum(d < 0 for d in ours_x.difference[:2]),
    }


def crossing_values(rows: Sequence[Row], est: Mapping[str, Any], published: bool
                    ) -> dict[str, Any]:
    """The page's values of the crossing: the table (``tails_tab_crossing``) and
    :func:`crossing_numbers`."""
    return {"tails_tab_crossing": crossing_html(est, published),
            **crossing_numbers(rows, est, published)}
