r"""The spectral-tails chapter's crossing :math:`\tau^\star`, where Muon stops recovering better
than gradient descent: the figure, the table beside the published crossings and the numbers the
text quotes, from the estimates of :func:`gaugebook.tails.tails_runs.crossings` (the
paper's rule and ours, interpolated, each with a bootstrap interval over seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

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


def crossing_numbers(rows: Sequence[Row], est: Mapping[str, Any],
                     published: bool) -> dict[str, Any]:
    """The crossing for the text (glue names as keys): the published estimates, ours by the
    paper's rule and interpolated (as sentences and as numbers), whether ours agrees with the
    published CPU value, the shares of the bootstrap resamples, the GPU comparison, and
    whether the qualitative claim (Muon first better, then not) holds."""
    paper_x, ours_x = est["paper"], est["ours"]
    _, _, seeds_m = st.rec_matrix(rows, "muon")
    cpu, gpu = st.PUBLISHED_TAU_STAR["cpu"], st.PUBLISHED_TAU_STAR["gpu"]
    out: dict[str, Any] = {
        "tails_pub_cpu": cpu["tau_star"], "tails_pub_cpu_note": cpu["note"],
        "tails_pub_gpu": gpu["tau_star"], "tails_pub_gpu_seeds": gpu["seeds"],
        "tails_pub_gpu_ntaus": len(gpu["grid"]),
        "tails_pub_gpu_grid": ", ".join(f"{t:g}" for t in gpu["grid"]),
        "tails_pub_gpu_range": f"{min(gpu['grid']):g} to {max(gpu['grid']):g}",
        "tails_pub_gpu_dtype": gpu["dtype"],
        "tails_pub_gpu_gd": gpu["means_at_tau_star"]["gd"],
        "tails_pub_gpu_muon": gpu["means_at_tau_star"]["muon"],
        "tails_crossing_text": ours_x.describe("Muon", "gradient descent"),
        "tails_paper_crossing_text": paper_x.describe("Muon", "gradient descent"),
    }
    agrees = ("the published CPU value" if paper_x.tau_star == cpu["tau_star"]
              else "not the published CPU value")
    out["tails_paper_agrees"] = agrees if published else "at this scale"
    out["tails_paper_agrees_text"] = (
        f"That is {agrees}, from the same seeds and grid." if published
        else "The published values describe the paper's setting only (paper scale).")
    out["tails_paper_shares"] = "; ".join(
        f"{share:.1%} at {'no crossing' if not math.isfinite(v) else f'τ = {v:g}'}"
        for v, share in paper_x.shares)
    at_gpu = dict(zip(ours_x.taus, ours_x.difference, strict=True)).get(gpu["tau_star"],
                                                                        math.nan)
    out["tails_gpu_ours_text"] = (
        f"our {len(seeds_m)} CPU seeds give {at_gpu:+.4f} at that τ" if published
        else "this scale's problem is another one and is not compared")
    out["tails_gpu_diff"] = (gpu["means_at_tau_star"]["muon"]
                             - gpu["means_at_tau_star"]["gd"])
    out["tails_ntaus"] = len(ours_x.taus)
    out["tails_paper_tau"] = ("none in the grid" if paper_x.tau_star is None
                              else f"{paper_x.tau_star:g}")
    out["tails_ours_tau"] = ("none in the grid" if ours_x.tau_star is None
                             else f"{ours_x.tau_star:.3f}")
    out["tails_paper_where"] = (
        f"at τ* = {paper_x.tau_star:g}, the first grid point at which its mean is no longer "
        "below" if paper_x.tau_star is not None else "nowhere inside the grid")
    bracket = None if ours_x.bracket is None else " and ".join(f"{t:g}" for t in ours_x.bracket)
    out["tails_ours_where"] = (
        f"at τ* ≈ {ours_x.tau_star:.3f}, between the grid points {bracket}"
        if ours_x.tau_star is not None and bracket is not None else "nowhere inside the grid")
    out["tails_bracket_text"] = "—" if bracket is None else bracket
    qualitative = ours_x.status == "crossing" and ours_x.difference[0] < 0
    out["tails_tau_qualitative"] = "holds" if qualitative else "fails"
    out["tails_small_tau_muon_better"] = sum(d < 0 for d in ours_x.difference[:2])
    return out


def crossing_values(rows: Sequence[Row], est: Mapping[str, Any], published: bool
                    ) -> dict[str, Any]:
    """The page's values of the crossing: the table (``tails_tab_crossing``) and
    :func:`crossing_numbers`."""
    return {"tails_tab_crossing": crossing_html(est, published),
            **crossing_numbers(rows, est, published)}
