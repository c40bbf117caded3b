r"""What the hyperspectral chapter shows, computed from the records of
:func:`gaugekit.experiments.hyperspectral.collect`: tables as rows for
:func:`gaugekit.report.viz.table_html`, verdicts, and figures; and the same numbers for the
command line (:func:`report_lines`) and the README (:func:`readme_headline`).

Nothing here is typed in: our numbers come from the records through the matched-loss protocol
(:mod:`gaugekit.runs.matched_loss`), the published ones from the constants of
:mod:`gaugekit.experiments.hyperspectral` (``PUBLISHED_TABLE5``, ``PUBLISHED_HEADLINE``,
``PUBLISHED_FIXED_LR_GAPS``), each in its own column.

The three grids of a paper-protocol part (:func:`grid_variants`): the paper's GPU grid (its
Table 5), its CPU grid (GD only up to 10) and the GPU grid with one more rate above the top of
each method's (``EXTENDED_LR``), to see whether a selection at the top of the paper's grid is an
edge of the grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit.data.scenes import get_scene_info
from gaugekit.experiments import hyperspectral as hs
from gaugekit.runs import matched_loss as ml
from gaugekit.runs.verdicts import HeadlineRow

__all__ = [
    "equivariant_text",
    "gap_verdict",
    "published_headline",
    "readme_headline",
    "report_lines",
    "arms_text",
    "arms_verdict",
    "sensitivity_text",
    "levels_text",
    "arm_rows",
    "fmt_pct",
    "gd_edge_text",
    "gd_rate_rows",
    "grid_rows",
    "grid_variants",
    "headline_rows",
    "label",
    "level_curves",
    "lr_sensitivity_rows",
    "table5_rows",
    "table5_verdict",
]

_LABELS = {"gd": "GD", "adam": "Adam", "scalar_adam": "Shared-scale Adam", "muon": "Muon"}


def label(method: str) -> str:
    """The display name of a method of Table 5."""
    return _LABELS.get(method, method)


def grid_variants(part: hs.Part) -> dict[str, Mapping[str, Sequence[float]] | None]:
    """Name → selection grid per method: the paper's GPU grid, its CPU grid and the extended
    grid (every rate the part ran)."""
    return {"GPU grid (the paper's Table 5)": hs.PAPER_LR_GRIDS,
            "CPU grid (the paper's CPU script)": hs.PAPER_CPU_LR_GRIDS,
            "extended grid (one rate above each)": part.lr_grids}


def table5_rows(c: hs.Collected, part: hs.Part) -> list[dict[str, Any]]:
    """The paper's Table 5 for ``part``, cell by cell beside the published one: per method and
    level, our held-out RMSE and effective rank (means over the seeds that reached the level,
    ``n`` of them) and the published ones, at the selected rates of each."""
    s = c.summary(part)
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


def _headline(c: hs.Collected, part: hs.Part,
              grid: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    return c.summary(part, grid=grid)["headline"]


def headline_rows(c: hs.Collected, parts: Sequence[hs.Part]) -> list[dict[str, Any]]:
    """GD against Adam at the deepest level every seed of both reached, per part, with the
    paper's number for the same scene and density beside ours (``—`` when it did not run it)."""
    rows = []
    for part in parts:
        h = _headline(c, part)
        pub = published_headline(part) or {}
        rows.append({
            "setting": f"{part.scene.label}, ρ = {part.density:g}", "level": h["level"],
            "gd": h["gd"], "adam": h["adam"], "gap": h["gap"],
            "wins": f"{h['wins']}/{len(h['seeds'])}" if h["seeds"] else None,
            "gd_pub": pub.get("gd"), "adam_pub": pub.get("adam"), "gap_pub": pub.get("gap"),
            "wins_pub": None if pub.get("wins") is None else f"{pub['wins']}/4",
        })
    return rows


def grid_rows(c: hs.Collected, part: hs.Part) -> list[dict[str, Any]]:
    """The selected rate of every method under each grid of :func:`grid_variants` (a star: at
    the top of that grid), the published selection, and the headline each grid gives."""
    published = hs.PUBLISHED_TABLE5.get((part.scene.name, part.density), {})
    rows = []
    for name, grid in grid_variants(part).items():
        s = c.summary(part, grid=grid)
        row: dict[str, Any] = {"grid": name}
        for m in part.methods:
            sel = s["selections"][m]
            row[m] = None if sel.lr is None else f"{sel.lr:g}" + ("*" if sel.at_top else "")
        h = s["headline"]
        row.update(level=h["level"], gap=h["gap"],
                   wins=f"{h['wins']}/{len(h['seeds'])}" if h["seeds"] else None)
        rows.append(row)
    if published:
        row = {"grid": "published (GPU grid)", "level": 1e-5}
        for m in part.methods:
            lr = published.get(m, {}).get("lr")
            row[m] = None if lr is None else f"{lr:g}*"
        pub = published_headline(part) or {}
        row.update(gap=pub.get("gap"), wins=f"{pub['wins']}/4" if pub.get("wins") else None)
        rows.append(row)
    return rows


def lr_sensitivity_rows(c: hs.Collected, parts: Sequence[hs.Part]) -> list[dict[str, Any]]:
    """GD at its selected rate against Adam at every fixed rate Adam ran, per part (one column
    per part, ours and the published gap for the same scene and density)."""
    by_lr: dict[float, dict[str, Any]] = {}
    for part in parts:
        s = c.summary(part)
        pub = hs.PUBLISHED_FIXED_LR_GAPS.get((part.scene.name, part.density), {})
        for r in s.get("fixed_lr", []):
            row = by_lr.setdefault(r["lr"], {"lr": r["lr"]})
            row[f"{part.name}:gap"] = r["gap"]
            row[f"{part.name}:level"] = r["level"]
            row[f"{part.name}:pub"] = pub.get(r["lr"])
    return [by_lr[k] for k in sorted(by_lr)]


def arm_rows(c: hs.Collected, scene: str) -> list[dict[str, Any]]:
    """The headline of every complete arm of ``scene`` (dtype and centring) per density: what
    the float32 arithmetic and the observed-only centring change."""
    rows = []
    for part in c.parts():
        if part.scene.name != scene:
            continue
        h = _headline(c, part)
        rows.append({
            "density": part.density, "dtype": part.dtype,
            "centring": "observed only" if part.centring == "observed" else "all entries",
            "level": h["level"], "gd": h["gd"], "adam": h["adam"], "gap": h["gap"],
            "wins": f"{h['wins']}/{len(h['seeds'])}" if h["seeds"] else None,
        })
    return sorted(rows, key=lambda r: (r["density"], r["dtype"] == "float32",
                                       r["centring"] != "all entries"))


def gd_rate_rows(c: hs.Collected, part: hs.Part) -> list[dict[str, Any]]:
    """Every GD rate of ``part``: runs that diverged, and at the part's matched level (the
    level of its Table 5 comparison) the mean held-out RMSE and effective rank of the rates
    whose four seeds reached it; ``selected`` marks the train-only choice."""
    s = c.summary(part)
    level = s["comparison"]["level"]
    chosen = s["selections"]["gd"].lr
    rows = []
    for lr in part.lr_grids["gd"]:
        runs = ml.runs_at(c.records[part.name], "gd", float(lr), c.config.eval_seeds)
        hits = [e for r in runs if level is not None
                and (e := ml.at_level(r, level, part.rule)) is not None]
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


def level_curves(c: hs.Collected, parts: Sequence[hs.Part]) -> Any:
    """Held-out RMSE against the matched training-MSE level, one panel per part, one line per
    method at its selected rate (mean over the seeds that reached the level); the published
    Table 5 values as open markers where the paper has them."""
    import matplotlib.pyplot as plt

    from gaugekit.report import viz

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
        out.append(f"at ρ = {part.density:g}, {fmt_pct(low[1])} against Adam at {low[0]:g} and "
                   f"up to {fmt_pct(high[1])} at {high[0]:g}; GD is below Adam at "
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
        out.append(f"at ρ = {density:g} GD's gap below Adam is {fmt_pct(ref['gap'])} in "
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
    deepest: dict[str, Any] = {}
    for r in rows:
        if r["n"]:
            deepest[r["method"].split(" (")[0]] = r
    order = sorted(deepest.items(), key=lambda kv: kv[1]["rmse"])
    return " < ".join(f"{m} {r['rmse']:.4f}" for m, r in order) or "—"


def fmt_pct(x: float | None) -> str:
    """A fraction as a signed percentage (``—`` when missing)."""
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:+.1f} %"


# --------------------------------------------------------------------------------------------
# the chapter's sections: each returns its glue items (name → text; names with "_tab_" are
# HTML tables)
# --------------------------------------------------------------------------------------------

_TAB_HEADERS = {"level": "train MSE", "gd": "GD", "adam": "Adam", "gap": "GD below Adam",
                "wins": "seeds"}


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], **kw: Any) -> str:
    """The page's one table helper: :func:`gaugekit.report.viz.table_html`, one line when empty."""
    from gaugekit.report import viz

    if not rows:
        return viz.table_html([{columns[0]: "no records at this scale"}], columns,
                              headers=kw.get("headers"))
    return viz.table_html(rows, columns, **kw)


def _ip_parts(c: hs.Collected) -> list[hs.Part]:
    return [p for p in c.paper_parts() if p.scene.name == "indian_pines"]


def _other_parts(c: hs.Collected) -> list[hs.Part]:
    return [p for p in c.main_parts() if published_headline(p) is None
            and p.scene.name not in hs.PAPER_SCENES]


def claim_items() -> dict[str, str]:
    """The paper's claims quoted in the chapter, from the published constants."""
    pub5 = hs.PUBLISHED_TABLE5[("indian_pines", 0.15)]
    deep = hs.THRESHOLDS[-1]
    t5 = ("At density 0.15 the paper selects "
          + ", ".join(f"{label(m)} at {v['lr']:g}" for m, v in pub5.items())
          + f"; at the deepest level, {deep:g}, its held-out RMSE and effective rank are "
          + ", ".join(f"{v['levels'][deep][0]:.5f} and {v['levels'][deep][1]} for {label(m)}"
                      for m, v in pub5.items()) + ".")
    sens = "; ".join(
        f"at ρ = {rho:g} " + ", ".join(f"{fmt_pct(g)} against Adam at {lr:g}"
                                      for lr, g in v.items())
        for (scene, rho), v in hs.PUBLISHED_FIXED_LR_GAPS.items() if scene == "indian_pines")
    pavia = [(rho, v) for (scene, rho), v in hs.PUBLISHED_HEADLINE.items() if scene == "pavia_u"]
    return {"hsi_claim_t5": t5, "hsi_claim_sens": sens,
            "hsi_pavia_pub": " and ".join(f"{fmt_pct(v['gap'])} at ρ = {rho:g}"
                                          for rho, v in pavia)}


def waiting_markdown(c: hs.Collected) -> str:
    """A note (MyST) naming the parts whose data is here but whose records are not."""
    waiting = "\n".join(f"- {p.description}: {done} of {total} runs recorded"
                        for p, done, total in c.waiting())
    if not waiting:
        return "Every part whose data file is here has its records."
    command = "\n".join("    " + line for line in c.command().splitlines())
    return ("```{note}\nThese parts have their data here but not all their records, so this "
            f"page leaves them out:\n\n{waiting}\n\nMake (or resume) them with\n\n"
            f"{command}\n```")


def protocol_items() -> dict[str, str]:
    """The table of the paper's protocol as the ``_paper`` parts run it."""
    grids = "; ".join(f"{label(m)} {', '.join(f'{v:g}' for v in hs.PAPER_LR_GRIDS[m])}"
                      for m in hs.METHODS)
    extra = ", ".join(f"{label(m)} {hs.EXTENDED_LR[m]:g}" for m in hs.METHODS)
    steps = [
        ("matrix", "2,000 × 200, float32 steps, leaky band centring"),
        ("mask", "i.i.d. Bernoulli(ρ), float32 uniforms, seed s + 7"),
        ("densities", "0.15 and 0.25 (m / dof₂₄ = 1.149 and 1.915)"),
        ("model", "W = U Vᵀ, rank 48, N(0, 1)·1e-2 from seed s + 1000"),
        ("dynamics", "float64, full batch, constant rate, ≤ 30,000 steps"),
        ("levels", "3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5 (pre-update MSE)"),
        ("grids", grids),
        ("one rate more", extra + " (ours, above each grid's top)"),
        ("selection", "seeds 42, 123: most levels, then fewest steps"),
        ("evaluation", "seeds 42, 123, 456, 789 at the selected rates"),
    ]
    return {"hsi_tab_protocol": _table([{"step": a, "what": b} for a, b in steps],
                                       ["step", "what"])}


def table5_items(c: hs.Collected) -> dict[str, str]:
    """Table 5 cell by cell, its verdict, and the sentences that read it."""
    low = next((p for p in _ip_parts(c) if p.density_label == "low"), None)
    t5 = table5_rows(c, low) if low else []
    shown = [{**r, "method": f"{r['method']} ({r['lr']:g}"
              + (f" · {r['lr_pub']:g})" if r["lr_pub"] else ")")
              if i == 0 or t5[i - 1]["method"] != r["method"] else ""}
             for i, r in enumerate(t5)]
    table = _table(
        shown, ["method", "level", "n", "rmse", "rmse_pub", "diff", "erank", "erank_pub"],
        headers={"method": "method (lr: ours · paper)", "level": "train MSE", "n": "seeds",
                 "rmse": "RMSE", "rmse_pub": "RMSE, paper", "diff": "difference",
                 "erank": "erank", "erank_pub": "erank, paper"},
        formats={"level": "g", "rmse": ".5f", "rmse_pub": ".5f", "diff": "+.1e",
                 "erank": ".1f", "erank_pub": "g"})
    return {"hsi_tab_table5": table, "hsi_t5_saw": table5_verdict(t5),
            "hsi_levels_text": levels_text(t5), "hsi_order_text": equivariant_text(t5)}


def headline_items(c: hs.Collected) -> dict[str, str]:
    """The headline table of the paper-protocol parts and the sentences that read it."""
    head = headline_rows(c, c.paper_parts())
    table = _table(head, ["setting", "level", "gd", "adam", "gap", "wins", "gap_pub", "wins_pub"],
                   headers={**_TAB_HEADERS, "gap_pub": "paper", "wins_pub": "seeds, paper"},
                   formats={"level": "g", "gd": ".5f", "adam": ".5f", "gap": fmt_pct,
                            "gap_pub": fmt_pct})

    def sentence(r: Mapping[str, Any]) -> str:
        paper = (f" (paper: {fmt_pct(r['gap_pub'])} on {r['wins_pub']})"
                 if r["gap_pub"] is not None else " (the paper has no value for this density)")
        return f"{r['setting']}: {fmt_pct(r['gap'])} on {r['wins']} seeds" + paper

    def holds(density: float) -> str:
        r = next((r for r in head if r["setting"] == f"Indian Pines, ρ = {density:g}"), None)
        if r is None:
            return "— (no records at this scale)"
        return (f"{fmt_pct(r['gap'])} on {r['wins']} seeds, against the paper's "
                f"{fmt_pct(r['gap_pub'])} on {r['wins_pub']}")

    return {"hsi_tab_headline": table,
            "hsi_head_text": "; ".join(sentence(r) for r in head)
            or "no paper-protocol records at this scale",
            "hsi_hold_015": holds(0.15), "hsi_hold_025": holds(0.25)}


def grid_items(c: hs.Collected) -> dict[str, str]:
    """The lr-sensitivity and the grid tables of Indian Pines, and their sentences."""
    parts = _ip_parts(c)
    sens = lr_sensitivity_rows(c, parts)
    cols, heads, fmts = ["lr"], {"lr": "Adam lr (fixed)"}, {"lr": "g"}
    for p in parts:
        for key, name in (("gap", f"ρ = {p.density:g}"), ("pub", f"ρ = {p.density:g}, paper")):
            cols.append(f"{p.name}:{key}")
            heads[f"{p.name}:{key}"] = name
            fmts[f"{p.name}:{key}"] = fmt_pct
    grids = {p.density: grid_rows(c, p) for p in parts}
    rows = [{"density": d, **r} for d, rs in grids.items() for r in rs]

    def gap_of(name: str) -> str:
        out = []
        for d, rs in grids.items():
            r = next((r for r in rs if r["grid"].startswith(name)), None)
            out.append(f"ρ = {d:g}: —" if r is None or r["level"] is None else
                       f"ρ = {d:g}: {fmt_pct(r['gap'])} at {r['level']:g} ({r['wins']} seeds)")
        return "; ".join(out) or "—"

    return {
        "hsi_tab_sens": _table(sens, cols, headers=heads, formats=fmts),
        "hsi_sens_text": sensitivity_text(sens, parts),
        "hsi_tab_grids": _table(rows, ["density", "grid", *hs.METHODS, "level", "gap", "wins"],
                                headers={**{m: label(m) for m in hs.METHODS}, **_TAB_HEADERS},
                                formats={"density": "g", "level": "g", "gap": fmt_pct}),
        "hsi_cpu_text": gap_of("CPU"), "hsi_ext_text": gap_of("extended"),
    }


def arm_items(c: hs.Collected) -> dict[str, str]:
    """The arms of Indian Pines (dtype, centring) and their sentence."""
    arms = arm_rows(c, "indian_pines")
    return {"hsi_tab_arms": _table(
        arms, ["density", "dtype", "centring", "level", "gd", "adam", "gap", "wins"],
        headers=_TAB_HEADERS, formats={"density": "g", "level": "g", "gd": ".5f",
                                       "adam": ".5f", "gap": fmt_pct}),
        "hsi_arms_text": arms_text(arms), "hsi_arms_verdict": arms_verdict(arms)}


def beyond_items(c: hs.Collected) -> dict[str, str]:
    """The scenes beyond the paper: selections and headline, Samson's GD rates."""
    beyond = []
    for p in _other_parts(c):
        s = c.summary(p)
        h, comp = s["headline"], s["comparison"]["methods"]
        beyond.append({"setting": f"{p.scene.label}, ρ = {p.density:g}", "level": h["level"],
                       "gap": h["gap"],
                       "wins": f"{h['wins']}/{len(h['seeds'])}" if h["seeds"] else None,
                       **{m: comp[m]["lr"] for m in hs.METHODS}})
    samson = [p for p in _other_parts(c) if p.scene.name == "samson"]
    gd = [{"density": p.density, **r} for p in samson for r in gd_rate_rows(c, p)]
    return {
        "hsi_tab_beyond": _table(beyond, ["setting", *hs.METHODS, "level", "gap", "wins"],
                                 headers={**{m: f"{label(m)} lr" for m in hs.METHODS},
                                          **_TAB_HEADERS},
                                 formats={**dict.fromkeys(hs.METHODS, "g"), "level": "g",
                                          "gap": fmt_pct}),
        "hsi_tab_samson_gd": _table(gd, ["density", "lr", "selected", "diverged", "rmse",
                                         "erank"],
                                    headers={"lr": "GD lr", "diverged": "seeds diverged",
                                             "rmse": "held-out RMSE", "erank": "erank"},
                                    formats={"density": "g", "lr": "g", "rmse": ".5f",
                                             "erank": ".1f"}),
        "hsi_beyond_text": "; ".join(f"{r['setting']}: {fmt_pct(r['gap'])} ({r['wins']} seeds)"
                                     for r in beyond) or "—",
        "hsi_samson_edge": "; ".join(f"at ρ = {p.density:g}, "
                                     + gd_edge_text(gd_rate_rows(c, p)) for p in samson)
        or "no Samson records at this scale",
    }


# --------------------------------------------------------------------------------------------
# the CLI's report and the README's rows (gaugekit.report.headline)
# --------------------------------------------------------------------------------------------


def report_lines(collected: hs.Collected) -> list[str]:
    """Plain-text Table 5 rows of every scene and density of ``collected`` (for the CLI)."""
    lines = [collected.note()]
    for part in collected.main_parts():
        s = collected.summary(part)
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


def published_headline(part: hs.Part) -> dict[str, Any] | None:
    """The paper's headline numbers for the scene and density of ``part`` when the paper ran
    them (:data:`~gaugekit.experiments.hyperspectral.PUBLISHED_HEADLINE`), else ``None``."""
    return hs.PUBLISHED_HEADLINE.get((part.scene.name, part.density))


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


def readme_headline() -> list[HeadlineRow]:
    """README rows (:mod:`gaugekit.report.headline`): GD's held-out error below Adam's at
    matched training loss, read from the committed records (whatever data is present): first
    the paper's scenes in the paper's protocol beside the paper's number for the same scene and
    density (a scene of the paper without records: "not run here"), then the other scenes,
    marked as beyond the paper."""
    got = hs.collect("paper")
    rows = []
    shown = {(p.scene.name, p.density) for p in got.paper_parts()}
    for part in [*got.paper_parts(), *(p for p in got.main_parts()
                                       if published_headline(p) is None)]:
        h = got.summary(part)["headline"]
        ours = "—" if not math.isfinite(h["gap"]) else (
            f"{h['gap']:+.1%} ({h['wins']}/{len(h['seeds'])} seeds)")
        pub = published_headline(part)
        if pub is not None:
            wins = "" if pub["wins"] is None else f" ({pub['wins']}/4 seeds)"
            published, verdict = f"{pub['gap']:+.1%}{wins}", gap_verdict(h, pub)
            setting = "the paper's protocol"
        else:
            published, verdict = "not in the paper", "beyond the paper"
            setting = "observed-only centring, float32; a scene the paper did not run"
        level = "—" if h["level"] is None else f"{h['level']:g}"
        rows.append(HeadlineRow(
            hs.NAME, f"hyperspectral {part.scene.label}, density {part.density:g} ({setting}): "
            f"GD's held-out error below Adam's at training MSE {level}", ours, published, "7",
            verdict))
    for (scene, density), pub in hs.PUBLISHED_HEADLINE.items():
        if (scene, density) not in shown:
            wins = "" if pub["wins"] is None else f" ({pub['wins']}/4 seeds)"
            rows.append(HeadlineRow(
                hs.NAME, f"hyperspectral {get_scene_info(scene).label}, density {density:g}: GD's "
                "held-out error below Adam's (no committed records)", "—",
                f"{pub['gap']:+.1%}{wins}", "7", "not run here"))
    return rows
