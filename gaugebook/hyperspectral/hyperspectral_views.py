r"""What the hyperspectral chapter shows, computed from the records of
:func:`gaugebook.hyperspectral.hyperspectral_runs.collect`: the parts a page shows
(:func:`shown_parts`, :func:`waiting`) and their summaries (:func:`summary`), tables as rows for
:func:`gaugebook.present.viz.table_html`, verdicts, and figures; and the same numbers for the
command line (:func:`report_lines`). The chapter's
sections are :mod:`gaugebook.hyperspectral.hyperspectral_page`.

Nothing here is typed in: our numbers come from the records through the matched-loss protocol
(:mod:`gaugebook.hyperspectral.matched_loss`), the published ones from the constants of
:mod:`gaugebook.hyperspectral.hyperspectral_runs` (``PUBLISHED_TABLE5``, ``PUBLISHED_HEADLINE``,
``PUBLISHED_FIXED_LR_GAPS``), each in its own column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gaugebook.engine.collection import Collected
from gaugebook.engine.selection import at_level
from gaugebook.hyperspectral import hyperspectral_runs as hs
from gaugebook.hyperspectral import matched_loss as ml
from gaugebook.present.tables import fmt, label


def shown_parts(c: Collected) -> list[hs.Part]:
    """The parts whose records are complete, in the config's order (a page shows these)."""
    return [p for p in c.config.parts(present_only=False)
            if c.records.get(p.name) and p.name not in c.missing]


def main_parts(c: Collected) -> list[hs.Part]:
    """The observed-centring float32 parts (one per scene and density) shown complete."""
    return [p for p in shown_parts(c) if p.centring == "observed" and p.dtype == "float32"]


def paper_parts(c: Collected) -> list[hs.Part]:
    """The parts that follow the paper's protocol step by step, shown complete."""
    return [p for p in shown_parts(c) if p.paper_protocol]


def waiting(c: Collected) -> list[tuple[hs.Part, int, int]]:
    """The parts whose scene file is here but whose records are not complete: ``(part, runs
    recorded, runs planned)``."""
    out = []
    for part in c.config.parts():
        if c.missing.get(part.name):
            planned = len({s.run_id for s in part.specs()})
            out.append((part, planned - c.missing[part.name], planned))
    return out


def summary(c: Collected, part: hs.Part,
            grid: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """:func:`~gaugebook.hyperspectral.matched_loss.summarize` of one part, with the part's
    selection
    grid unless given, its reading rule (and its leak arm when recorded)."""
    leak = c.records.get(f"{part.name}_leak", []) if part.centring == "observed" else []
    return ml.summarize(c.records[part.name], leak, methods=part.methods,
                        selection_seeds=c.config.selection_seeds,
                        eval_seeds=c.config.eval_seeds, thresholds=part.budget.thresholds,
                        grid=part.selection_grids if grid is None else grid, rule=part.rule)


def seeds_won(headline: Mapping[str, Any]) -> str | None:
    """``"k/n"``: the seeds of a summary's ``headline`` on which GD is below Adam."""
    return f"{headline['wins']}/{len(headline['seeds'])}" if headline["seeds"] else None


def table5_rows(c: Collected, part: hs.Part) -> list[dict[str, Any]]:
    """The paper's Table 5 for ``part``, cell by cell beside the published one: per method and
    level, our held-out RMSE and effective rank (means over the seeds that reached the level,
    ``n`` of them) and the published ones, at the selected rates of each."""
    s = summary(c, part)
    published = hs.PUBLISHED_TABLE5.get((part.scene.name, part.density), {})
    rows = []
    for m in part.methods:
        sel = s["selections"][m]
        pub = published.get(m, {})
        cells = ml.level_table(c.records[part.name], m, sel.lr, c.config.eval_seeds,
                               part.budget.thresholds, part.rule)
        for cell in cells:
            p = pub.get("levels", {}).get(cell["level"], (None, None))
            rows.append({
                "method": label(m), "lr": sel.lr, "lr_pub": pub.get("lr"),
                "level": cell["level"], "n": cell["n"], "rmse": cell["rmse"],
                "erank": cell["effective_rank"], "rmse_pub": p[0], "erank_pub": p[1],
                "diff": (cell["rmse"] - p[0]) if p[0] is not None and cell["n"] else None,
            })
    return rows


def headline_rows(c: Collected, parts: Sequence[hs.Part]) -> list[dict[str, Any]]:
    """GD against Adam at the deepest level every seed of both reached, per part, with the
    paper's number for the same scene and density beside ours (``—`` when it did not run it)."""
    rows = []
    for part in parts:
        h = summary(c, part)["headline"]
        pub = hs.PUBLISHED_HEADLINE.get((part.scene.name, part.density), {})
        rows.append({
            "setting": f"{part.scene.label}, ρ = {part.density:g}", "level": h["level"],
            "gd": h["gd"], "adam": h["adam"], "gap": h["gap"], "wins": seeds_won(h),
            "gap_pub": pub.get("gap"),
            "wins_pub": None if pub.get("wins") is None else f"{pub['wins']}/4",
        })
    return rows


def grid_rows(c: Collected, part: hs.Part) -> list[dict[str, Any]]:
    """The selected rate of every method under each grid (a star: at the top of that grid), the
    published selection, and the headline each grid gives. The grids: the paper's GPU grid (its
    Table 5), its CPU grid (GD only up to 10) and the extended grid (every rate the part ran:
    one more above the top of each, ``EXTENDED_LR``, to see whether a selection at the top of
    the paper's is an edge)."""
    published = hs.PUBLISHED_TABLE5.get((part.scene.name, part.density), {})
    grids = {"GPU grid (the paper's Table 5)": hs.PAPER_LR_GRIDS,
             "CPU grid (the paper's CPU script)": hs.PAPER_CPU_LR_GRIDS,
             "extended grid (one rate above each)": part.lr_grids}
    rows = []
    for name, grid in grids.items():
        s = summary(c, part, grid)
        row: dict[str, Any] = {"grid": name}
        for m in part.methods:
            sel = s["selections"][m]
            row[m] = None if sel.lr is None else f"{sel.lr:g}" + ("*" if sel.at_top else "")
        h = s["headline"]
        row.update(level=h["level"], gap=h["gap"], wins=seeds_won(h))
        rows.append(row)
    if published:
        row = {"grid": "published (GPU grid)", "level": 1e-5}
        for m in part.methods:
            lr = published.get(m, {}).get("lr")
            row[m] = None if lr is None else f"{lr:g}*"
        pub = hs.PUBLISHED_HEADLINE.get((part.scene.name, part.density), {})
        row.update(gap=pub.get("gap"), wins=f"{pub['wins']}/4" if pub.get("wins") else None)
        rows.append(row)
    return rows


def lr_sensitivity_rows(c: Collected, parts: Sequence[hs.Part]) -> list[dict[str, Any]]:
    """GD at its selected rate against Adam at every fixed rate Adam ran, per part (one column
    per part, ours and the published gap for the same scene and density)."""
    by_lr: dict[float, dict[str, Any]] = {}
    for part in parts:
        pub = hs.PUBLISHED_FIXED_LR_GAPS.get((part.scene.name, part.density), {})
        for r in summary(c, part).get("fixed_lr", []):
            by_lr.setdefault(r["lr"], {"lr": r["lr"]}).update(
                {f"{part.name}:gap": r["gap"], f"{part.name}:pub": pub.get(r["lr"])})
    return [by_lr[k] for k in sorted(by_lr)]


def arm_rows(c: Collected, scene: str) -> list[dict[str, Any]]:
    """The headline of every complete arm of ``scene`` (dtype and centring) per density: what
    the float32 arithmetic and the observed-only centring change."""
    rows = []
    for part in (p for p in shown_parts(c) if p.scene.name == scene):
        h = summary(c, part)["headline"]
        rows.append({
            "density": part.density, "dtype": part.dtype,
            "centring": "observed only" if part.centring == "observed" else "all entries",
            "level": h["level"], "gd": h["gd"], "adam": h["adam"], "gap": h["gap"],
            "wins": seeds_won(h),
        })
    return sorted(rows, key=lambda r: (r["density"], r["dtype"] == "float32",
                                       r["centring"] != "all entries"))


def gd_rate_rows(c: Collected, part: hs.Part) -> list[dict[str, Any]]:
    """Every GD rate of ``part``: runs that diverged, and at the part's matched level (the
    level of its Table 5 comparison) the mean held-out RMSE and effective rank of the rates
    whose four seeds reached it; ``selected`` marks the train-only choice."""
    s = summary(c, part)
    level = s["comparison"]["level"]
    chosen = s["selections"]["gd"].lr
    rows = []
    for lr in part.lr_grids["gd"]:
        runs = ml.runs_at(c.records[part.name], "gd", float(lr), c.config.eval_seeds)
        hits = [e for r in runs if level is not None
                and (e := at_level(r, level, part.rule)) is not None]
        full = len(hits) == len(runs) == len(c.config.eval_seeds)
        rows.append({
            "lr": float(lr), "selected": "selected" if lr == chosen else "",
            "diverged": sum(r["status"] == "diverged" for r in runs),
            "rmse": sum(e["heldout_rmse"] for e in hits) / len(hits) if full else None,
            "erank": sum(e["effective_rank"] for e in hits) / len(hits) if full else None,
        })
    return rows


def gd_edge_text(rows: Sequence[Mapping[str, Any]], seeds: int = 4) -> str:
    """What :func:`gd_rate_rows` says about GD's selected rate: how far it sits from the first
    rate at which every seed diverged, and its effective rank beside the slower rates'."""
    chosen = next((i for i, r in enumerate(rows) if r["selected"]), None)
    if chosen is None:
        return "no GD rate was selected"
    sel = rows[chosen]
    text = f"GD's selected rate is {sel['lr']:g}"
    above = rows[chosen + 1] if chosen + 1 < len(rows) else None
    if above is not None and above["diverged"] == seeds:
        text += f", one grid step below {above['lr']:g}, where every seed diverged"
    elif above is None:
        text += ", the top of its grid"
    slower = [r for r in rows[:chosen] if r["erank"] is not None]
    if sel["erank"] is not None and slower:
        ranks = ", ".join(f"{r['erank']:.0f}" for r in slower)
        text += (f"; there the effective rank of W is {sel['erank']:.0f}, against "
                 f"{ranks} at the slower rates")
    return text


def level_curves(c: Collected, parts: Sequence[hs.Part]) -> Any:
    """Held-out RMSE against the matched training-MSE level, one panel per part, one line per
    method at its selected rate (mean over the seeds that reached the level); the published
    Table 5 values as open markers where the paper has them."""
    import matplotlib.pyplot as plt

    from gaugebook.present import viz

    fig, axes = plt.subplots(1, len(parts), figsize=(3.4 * len(parts), 3.1), squeeze=False,
                             layout="constrained", sharey=True)
    for ax, part in zip(axes[0], parts, strict=True):
        rows = table5_rows(c, part)
        for m in part.methods:
            mine = [r for r in rows if r["method"] == label(m) and r["n"]]
            color = viz.method_color(m)
            ax.plot([r["level"] for r in mine], [r["rmse"] for r in mine], "-o", ms=3.5,
                    color=color, label=label(m))
            pub = [r for r in rows if r["method"] == label(m) and r["rmse_pub"] is not None]
            if pub:
                ax.plot([r["level"] for r in pub], [r["rmse_pub"] for r in pub], "o", ms=7,
                        mfc="none", color=color)
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("training MSE level")
        ax.set_title(f"{part.scene.label}, ρ = {part.density:g}")
    axes[0, 0].set_ylabel("held-out RMSE")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    return fig


def table5_verdict(rows: Sequence[Mapping[str, Any]]) -> str:
    """One sentence on :func:`table5_rows`: whether the selected rates are the paper's, and how
    many cells agree with the published ones to the digits printed (five decimals of the RMSE,
    whole effective ranks)."""
    if not rows:
        return "The table is empty: no complete Indian Pines records (see above)."
    cells = [r for r in rows if r["rmse_pub"] is not None and r["n"]]
    if not cells:
        return ("At this scale the matrix is smaller than the paper's, and so is its density: "
                "no published value applies, and the table shows the protocol at work.")
    chosen = {r["method"]: (r["lr"], r["lr_pub"]) for r in rows if r["lr_pub"] is not None}
    same_lr = [m for m, (a, b) in chosen.items() if a == b]
    rates = ("the paper's rate for every method" if len(same_lr) == len(chosen) else
             f"the paper's rate for {len(same_lr)} of {len(chosen)} methods")
    digits = [r for r in cells if abs(r["diff"]) <= 5e-6 + 1e-12]
    ranks = [r for r in cells if round(r["erank"]) == r["erank_pub"]]
    worst = max(abs(r["diff"]) for r in cells)
    return (f"The train-only rule picks {rates}. Of the {len(cells)} cells, {len(digits)} agree "
            f"with the published held-out RMSE to the five decimals printed (the largest "
            f"difference is {worst:.1e}) and {len(ranks)} have the published effective rank "
            "after rounding.")


def levels_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """What :func:`table5_rows` says along the levels, per method: whether its held-out error
    falls at every level, or where it is lowest and what it is at the deepest level."""
    out = []
    for m in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == m and r["n"]]
        if len(mine) < 2:
            continue
        name = m.split(" (")[0]
        values = [r["rmse"] for r in mine]
        best = min(range(len(values)), key=values.__getitem__)
        worst = max(range(len(values)), key=values.__getitem__)
        if all(b <= a for a, b in zip(values, values[1:], strict=False)):
            out.append(f"{name}'s falls at every level, to {values[-1]:.4f} at "
                       f"{mine[-1]['level']:g}")
        elif best == len(values) - 1:
            out.append(f"{name}'s rises to {values[worst]:.4f} at {mine[worst]['level']:g} "
                       f"before falling to {values[-1]:.4f} at {mine[-1]['level']:g}")
        else:
            out.append(f"{name}'s is lowest at {mine[best]['level']:g} ({values[best]:.4f}) and "
                       f"{values[-1]:.4f} at {mine[-1]['level']:g}")
    return "; ".join(out) or "no levels to compare"


def sensitivity_text(rows: Sequence[Mapping[str, Any]], parts: Sequence[hs.Part]) -> str:
    """What :func:`lr_sensitivity_rows` says: per part, GD's gap below Adam at Adam's slowest
    and at its selected rate, and whether GD is below Adam at every fixed rate."""
    out = []
    for part in parts:
        gaps = [(r["lr"], r.get(f"{part.name}:gap")) for r in rows]
        gaps = [(lr, g) for lr, g in gaps if g is not None and math.isfinite(g)]
        if not gaps:
            continue
        low, high = gaps[0], max(gaps, key=lambda x: x[1])
        every = all(g > 0 for _, g in gaps)
        out.append(f"at ρ = {part.density:g}, {fmt(low[1], 'pct')} against Adam at {low[0]:g} and "
                   f"up to {fmt(high[1], 'pct')} at {high[0]:g}; GD is below Adam at "
                   + ("every rate" if every else "some rates only"))
    return "; ".join(out) or "no fixed-rate comparison at this scale"


def arms_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """What :func:`arm_rows` says: how far each arm moves the headline gap from the paper's
    protocol (the float64, all-entries arm of the same density), in percentage points, and
    whether every arm keeps GD below Adam on every seed."""
    out = []
    for density in dict.fromkeys(r["density"] for r in rows):
        mine = [r for r in rows if r["density"] == density and r["gap"] is not None]
        ref = next((r for r in mine if r["dtype"] == "float64"
                    and r["centring"] == "all entries"), None)
        if ref is None or len(mine) < 2:
            continue
        moves = [f"{r['dtype']} with {r['centring']} centring changes it by "
                 + _points(100 * (r["gap"] - ref["gap"]))
                 for r in mine if r is not ref]
        out.append(f"at ρ = {density:g} GD's gap below Adam is {fmt(ref['gap'], 'pct')} in "
                   "float64 with all-entries centring (the paper's arithmetic and centring), "
                   "and " + ", ".join(moves))
    if not out:
        return "No Indian Pines arms to compare at this scale"
    every = all(_every_seed(r) for r in rows if r["gap"] is not None)
    text = "; ".join(out)
    return (text[0].upper() + text[1:] + "; GD is below Adam on "
            + ("every seed of every arm" if every else "not every seed of every arm"))


def arms_verdict(rows: Sequence[Mapping[str, Any]]) -> str:
    """One sentence: whether every arm of :func:`arm_rows` keeps GD below Adam on every seed,
    and the largest move of the gap between arms of one density."""
    rows = [r for r in rows if r["gap"] is not None]
    if not rows:
        return "No arms to compare at this scale"
    spread = max(100 * (max(g) - min(g)) for g in (
        [r["gap"] for r in rows if r["density"] == d] for d in {r["density"] for r in rows}))
    every = all(_every_seed(r) and r["gap"] > 0 for r in rows)
    return (("Neither float32 nor the observed-only centring changes the verdict: GD is below "
             "Adam in every arm, on every seed" if every else
             "The verdict depends on the arm: GD is not below Adam on every seed of every arm")
            + f"; the gap moves by at most {spread:.1f} points between arms")


def _every_seed(row: Mapping[str, Any]) -> bool:
    """Whether GD won on every seed of an :func:`arm_rows` row (its ``wins`` is ``k/k``)."""
    won, _, seeds = (row["wins"] or "").partition("/")
    return bool(seeds) and won == seeds


def _points(delta: float) -> str:
    """A change of a percentage in points (``nothing`` when it rounds to zero)."""
    return "nothing" if round(delta, 1) == 0 else f"{delta:+.1f} points"


def equivariant_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """At the deepest level of :func:`table5_rows`: the held-out error of every method, best
    first."""
    deepest = {r["method"].split(" (")[0]: r for r in rows if r["n"]}
    order = sorted(deepest.items(), key=lambda kv: kv[1]["rmse"])
    return " < ".join(f"{m} {r['rmse']:.4f}" for m, r in order) or "—"


# --------------------------------------------------------------------------------------------
# the CLI's report and the README's rows (gaugebook.headline)
# --------------------------------------------------------------------------------------------


def report_lines(collected: Collected) -> list[str]:
    """Plain-text Table 5 rows of every scene and density of ``collected`` (for the CLI)."""
    lines = [replace(collected, missing={}).note()]  # the runs still missing: waiting()
    for part in main_parts(collected):
        s = summary(collected, part)
        comp = s["comparison"]
        level = comp["level"]
        lines.append(f"{part.name}: density {part.density:g} (m/dof = {part.ratio:.3f}), "
                     f"matched train MSE {level if level is not None else 'none'}")
        for m, row in comp["methods"].items():
            edge = " (top of grid)" if row["at_top"] else ""
            lines.append(f"  {m:<12} lr {row['lr']}{edge}: held-out RMSE {row['rmse']:.5f}, "
                         f"effective rank {row['effective_rank']:.2f}")
        if "gap" in s and math.isfinite(s["gap"]["gap"]):
            g = s["gap"]
            lines.append(f"  GD below Adam: {100 * g['gap']:.1f}% (seeds {100 * g['min']:.1f}"
                         f"..{100 * g['max']:.1f}%)")
        leak = s.get("leak", {})
        if "gap_leaky" in leak:
            lines.append(f"  with the leaky centring: {100 * leak['gap_leaky']['gap']:.1f}%")
    return lines


def gap_verdict(ours: Mapping[str, Any], published: Mapping[str, Any], tol: float = 0.05) -> str:
    """Our headline gap against the paper's for the same scene and density: ``"holds"`` when
    within ``tol`` (absolute, in fractions) with the same win count where the paper gives one,
    ``"partly"`` when of the same sign, else ``"does not hold"``."""
    g, p = ours.get("gap"), published.get("gap")
    if g is None or p is None or not math.isfinite(g):
        return "—"
    wins_ok = published.get("wins") is None or ours.get("wins") == published["wins"]
    if abs(g - p) <= tol and wins_ok:
        return "holds"
    return "partly" if g * p > 0 else "does not hold"


def _published_gap(pub: Mapping[str, Any]) -> str:
    """A published headline gap, with its seeds when the paper states them."""
    return f"{pub['gap']:+.1%}" + ("" if pub["wins"] is None else f" ({pub['wins']}/4 seeds)")
