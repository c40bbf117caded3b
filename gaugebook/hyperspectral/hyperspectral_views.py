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
from gaugebook.present.tables import label


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


def _per_seed(headline: Mapping[str, Any]) -> dict[str, dict[int, float]]:
    """A headline's values per seed, ``{seed: value}``, for
    :func:`gaugebook.present.stats.compare_runs`: GD's and Adam's held-out RMSE
    (``gd_by_seed``, ``adam_by_seed``) and GD's gap below Adam (``gap_by_seed``)."""
    return {k: dict(headline.get(k) or {}) for k in ("gd_by_seed", "adam_by_seed",
                                                     "gap_by_seed")}


def seeds_won(headline: Mapping[str, Any]) -> str | None:
    """``"k/n"``: the seeds of a summary's ``headline`` on which GD is below Adam."""
    return f"{headline['wins']}/{len(headline['seeds'])}" if headline["seeds"] else None


def table5_rows(c: Collected, part: hs.Part) -> list[dict[str, Any]]:
    """The paper's Table 5 for ``part``, cell by cell beside the published one: per method and
    level, our held-out RMSE and effective rank (means over the seeds that reached the level,
    ``n`` of them; ``rmse_by_seed``: each seed's) and the published ones, at the selected rates
    of each."""
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
                "rmse_by_seed": cell["rmse_by_seed"],
            })
    return rows


def headline_rows(c: Collected, parts: Sequence[hs.Part]) -> list[dict[str, Any]]:
    """GD against Adam at the deepest level every seed of both reached, per part, with the
    paper's number for the same scene and density beside ours (``—`` when it did not run it)
    and the values per seed (:func:`_per_seed`)."""
    rows = []
    for part in parts:
        h = summary(c, part)["headline"]
        pub = hs.PUBLISHED_HEADLINE.get((part.scene.name, part.density), {})
        rows.append({
            "setting": f"{part.scene.label}, ρ = {part.density:g}", "level": h["level"],
            "gd": h["gd"], "adam": h["adam"], "gap": h["gap"], "wins": seeds_won(h),
            "gap_pub": pub.get("gap"),
            "wins_pub": None if pub.get("wins") is None else f"{pub['wins']}/4",
            **_per_seed(h),
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
        row.update(level=h["level"], gap=h["gap"], wins=seeds_won(h), **_per_seed(h))
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
    per part, ours and the published gap for the same scene and density; besides, per part, the
    level of the comparison and GD's and Adam's RMSE and the gap per seed, ``<part>:level``,
    ``<part>:gd_by_seed``, ``<part>:adam_by_seed``, ``<part>:gap_by_seed``)."""
    by_lr: dict[float, dict[str, Any]] = {}
    for part in parts:
        pub = hs.PUBLISHED_FIXED_LR_GAPS.get((part.scene.name, part.density), {})
        for r in summary(c, part).get("fixed_lr", []):
            by_lr.setdefault(r["lr"], {"lr": r["lr"]}).update(
                {f"{part.name}:gap": r["gap"], f"{part.name}:pub": pub.get(r["lr"]),
                 f"{part.name}:level": r["level"],
                 f"{part.name}:gd_by_seed": r["reference_by_seed"],
                 f"{part.name}:adam_by_seed": r["other_by_seed"],
                 f"{part.name}:gap_by_seed": r["gap_by_seed"]})
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
            "wins": seeds_won(h), **_per_seed(h),
        })
    return sorted(rows, key=lambda r: (r["density"], r["dtype"] == "float32",
                                       r["centring"] != "all entries"))


def gd_rate_rows(c: Collected, part: hs.Part) -> list[dict[str, Any]]:
    """Every GD rate of ``part``: runs that diverged, and at the part's matched level (the
    level of its Table 5 comparison) the mean held-out RMSE and effective rank of the rates
    whose four seeds reached it (and per seed, ``rmse_by_seed``); ``selected`` marks the
    train-only choice."""
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
            "rmse_by_seed": ml.by_seed(runs, level, "heldout_rmse", part.rule) if full else {},
        })
    return rows


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
