r"""What the matrix-sensing chapter shows, computed from the records of
:func:`gaugebook.sensing.sensing_runs.collect`: tables, the rows behind them, the numbers the
text quotes and figures, and the README's rows (:func:`paper_zoo_rows`). The published values
are the constants ``PUBLISHED_TABLE2``, ``PUBLISHED_CONVEX_REC`` and
``PUBLISHED_NUCLEAR_NORMS`` of :mod:`gaugebook.sensing.sensing_runs`.

The chapter keeps the computations a reader should see and writes its sentences; this module
keeps the bookkeeping (columns, headers, formats). The controls, the survival table and the
weight-decay section are :mod:`gaugebook.sensing.sensing_controls`.

Comparisons between optimizers go through :func:`gaugebook.present.stats.compare_runs` on the
runs of each seed (:func:`seed_values`, :func:`compare_seeds`). Within one part a seed fixes
both the instance (generator ``s``) and the initial factors (generator ``s + 7``), whatever
the optimizer and the learning rate (:func:`gaugebook.sensing.run_specs.factored_run`), so the
runs of two optimizers on one seed pair, and the paired interval stands beside Welch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gaugebook.present import stats
from gaugebook.present.tables import (
    Record,
    Row,
    fmt,
    gauge_class,
    label,
    table_html,
    yes_no,
)
from gaugebook.sensing import sensing_runs as ms
from gaugekit.optim.registry import get_spec


def edge_word(row: Row) -> str:
    """Where a selected learning rate sits in its grid: ``'lowest'``, ``'highest'`` or
    ``'no'`` (inside the grid)."""
    grid = sorted(row.get("grid") or [])
    if not row.get("at_grid_edge") or not grid:
        return "no"
    return "lowest" if row["lr"] == grid[0] else "highest"


# --------------------------------------------------------------------------------------------
# the testbed
# --------------------------------------------------------------------------------------------

def instance_check_rows(problem: Any) -> list[dict[str, Any]]:
    r"""The paper's check of its instances: per seed of
    :data:`~gaugebook.sensing.sensing_runs.PUBLISHED_NUCLEAR_NORMS`, the nuclear norm of
    our :math:`X_\star` at ``problem``'s ``n`` and ``r`` (float32 product, singular values in
    float64) beside the published one, and their difference."""
    import torch

    from gaugebook.sensing.measurements import make_instance

    rows = []
    for seed, published in ms.PUBLISHED_NUCLEAR_NORMS.items():
        inst = make_instance(seed, problem.n, problem.r)
        ours = torch.linalg.svdvals(inst.X_star.double()).sum().item()
        rows.append({"seed": seed, "ours": ours, "published": published,
                     "diff": abs(ours - published)})
    return rows


#: Below this the nuclear norms of our instances and the paper's agree to round-off: half a unit
#: of the sixth decimal the paper prints (5e-7), plus the float32 rounding of the product
#: ``U_star V_starᵀ``, whose norm is about 40 (40 · 2⁻²⁴ ≈ 2.4e-6), which another instruction
#: set or summation order may move.
NUCLEAR_NORM_FLOOR = 3e-6


def instances_html(check_rows: Sequence[Row]) -> str:
    """The nuclear-norm check of the paper's instances (rows: seed, ours, published, diff)."""
    return table_html(
        check_rows, ["seed", "ours", "published", "diff"],
        headers={"ours": "‖X⋆‖* (ours)", "published": "‖X⋆‖* (paper)",
                 "diff": "|difference|"},
        formats={"ours": ".6f", "published": ".6f", "diff": ".1e"})


def settings_html(config: ms.SensingConfig) -> str:
    """One row per sweep (part) of the chapter: sizes, budget, seeds, runs."""
    rows = [{"setting": part.name, "init": part.problem.init_scale, **zoo_numbers(part)}
            for part in config.parts]
    return table_html(
        rows, ["setting", "n", "r", "k", "m", "num_val", "init", "steps", "tol", "seeds",
               "runs"],
        headers={"num_val": "m_val"}, formats={"init": "g", "tol": "g"})


def zoo_numbers(zoo: ms.Part) -> dict[str, Any]:
    """The sizes and budget of a sweep (the main one, for the text)."""
    p = zoo.problem
    return {"n": p.n, "r": p.r, "k": p.k, "m": p.m, "num_val": p.num_val,
            "steps": zoo.budget.num_steps, "tol": zoo.budget.tol,
            "check": zoo.budget.check_every, "seeds": len(zoo.seeds),
            "runs": len(zoo.specs())}


# --------------------------------------------------------------------------------------------
# Table 2
# --------------------------------------------------------------------------------------------

def table2_html(rows: Sequence[Row],
                published: Mapping[str, tuple[float, float]] | None) -> str:
    """Table 2: the selected learning rate and the mean recovery error per optimizer, each
    beside the published value (a dash where this page is not the paper's setting), and the
    recovery error of every seed."""
    table = []
    for row in rows:
        pub = (published or {}).get(row["method"], (None, None))
        seeds = ", ".join("—" if v is None else f"{v:.3f}" for v in row["rec_seeds"])
        table.append({**row, "class": gauge_class(row["equivariant"]), "published_rec": pub[0],
                      "published_lr": pub[1], "seeds": seeds})
    return table_html(
        table, ["label", "class", "lr", "published_lr", "rec", "published_rec", "seeds"],
        headers={"label": "optimizer", "class": "gauge class", "published_lr": "lr, paper",
                 "published_rec": "rec, paper", "seeds": "rec per seed"},
        formats={"lr": "g", "published_lr": "g", "rec": ".4f", "published_rec": ".4f"})


def table2_diagnostics_html(rows: Sequence[Row]) -> str:
    """What Table 2 does not show, per optimizer: the effective rank and the balancedness of
    the final factors (means over seeds), whether every seed interpolated, and whether the
    selected learning rate sits at an edge of its grid."""
    table = [{**row, "interp": yes_no(row["interpolated"]), "edge": edge_word(row)}
             for row in rows]
    return table_html(
        table, ["label", "effective_rank", "balancedness", "interp", "edge"],
        headers={"label": "optimizer", "effective_rank": "eff. rank",
                 "balancedness": "‖UᵀU−VᵀV‖", "interp": "every seed interpolated",
                 "edge": "lr at a grid edge"},
        formats={"effective_rank": ".2f", "balancedness": ".2e"})


def split_numbers(split: Mapping[str, Any]) -> dict[str, Any]:
    """The split of :func:`~gaugebook.sensing.sensing_runs.split_summary` for the text:
    the worst equivariant and the best coordinate-wise optimizer, the gap, the verdict."""
    return {
        "worst_eq": label(split["worst_equivariant"]),
        "worst_eq_rec": split["worst_equivariant_rec"],
        "best_cw": label(split["best_coordinatewise"]),
        "best_cw_rec": split["best_coordinatewise_rec"], "gap": split["gap"],
        "split": "holds" if split["clean"] else "fails", "edges": split["at_grid_edge"],
        "methods": split["methods"],
    }


def split_sides(split: Mapping[str, Any], fmt: Callable[[float], str], sep: str = " "
                ) -> tuple[str, str]:
    """The two sides of a split of :func:`~gaugebook.sensing.sensing_runs.split_summary`:
    the worst equivariant and the best coordinate-wise optimizer, each ``"Muon 0.0012"`` (its
    name, ``sep``, its recovery error by ``fmt``)."""
    return (f"{label(split['worst_equivariant'])}{sep}{fmt(split['worst_equivariant_rec'])}",
            f"{label(split['best_coordinatewise'])}{sep}{fmt(split['best_coordinatewise_rec'])}")


def split_text(split: Mapping[str, Any], word: str, fmt: Callable[[float], str]) -> str:
    """A split in words (:func:`split_sides`): ``"<word>: worst equivariant Muon 0.0012, best
    coordinate-wise Adam 0.41"``."""
    eq, cw = split_sides(split, fmt)
    return f"{word}: worst equivariant {eq}, best coordinate-wise {cw}"


def _ranked(rows: Sequence[Row]) -> list[Row]:
    return sorted((r for r in rows if r["rec"] is not None and math.isfinite(r["rec"])),
                  key=lambda r: r["rec"])


def extremes(rows: Sequence[Row]) -> dict[str, Any]:
    """The best and the worst optimizer of the table, with their rec and effective rank."""
    ranked = _ranked(rows)
    return {"best": ranked[0]["label"], "best_rec": ranked[0]["rec"],
            "best_erank": ranked[0]["effective_rank"], "worst": ranked[-1]["label"],
            "worst_rec": ranked[-1]["rec"], "worst_erank": ranked[-1]["effective_rank"]}


def balancedness_summary(rows: Sequence[Row]) -> dict[str, Any]:
    """Does balancedness separate the gauge classes? The largest mean among equivariant
    optimizers against the smallest among coordinate-wise ones (the classes are separated
    when the first is below the second), and GD's and Adam's."""
    by_method = {r["method"]: r for r in rows}
    eq = max((r for r in rows if r["equivariant"]), key=lambda r: r["balancedness"])
    cw = min((r for r in rows if not r["equivariant"]), key=lambda r: r["balancedness"])
    return {"eq_max": eq["balancedness"], "eq_max_label": eq["label"],
            "cw_min": cw["balancedness"], "cw_min_label": cw["label"],
            "gd": by_method["gd"]["balancedness"],
            "adam": by_method["adam"]["balancedness"]}


# --------------------------------------------------------------------------------------------
# comparisons under the one rule (gaugebook.present.stats)
# --------------------------------------------------------------------------------------------

def seed_values(records: Sequence[Record], rows: Sequence[Row],
                metric: str = "rec") -> dict[str, dict[int, float]]:
    """Per optimizer of ``rows``: ``{seed: metric}`` of its finished runs at the selected
    learning rate. In a part a seed fixes the instance and the initial factors for every
    optimizer, so two optimizers' values at one seed pair. Runs of the weight-decay part (which
    carry an ``arm``) are not selections of ``rows`` and are left out."""
    chosen = {r["method"]: r["lr"] for r in rows}
    out: dict[str, dict[int, float]] = {m: {} for m in chosen}
    for r in records:
        c = r["config"]
        if c.get("method") not in chosen or "arm" in c or r["status"] != "ok":
            continue
        value = r["metrics"].get(metric)
        if c["hparams"]["lr"] == chosen[c["method"]] and value is not None:
            out[c["method"]][c["seed"]] = float(value)
    return out


def ranking_pairs(values: Mapping[str, Mapping[int, float]],
                  rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The ranking of ``rows`` by mean recovery error, neighbour by neighbour: each optimizer
    against the next (``a − b``, the lower mean first) and the words of the rule, ``"ahead"``
    when ``a`` is resolved below ``b``, else level."""
    ranked = _ranked(rows)
    out = []
    for a, b in zip(ranked, ranked[1:], strict=False):
        c = stats.compare_seeds(values.get(a["method"]), values.get(b["method"]))
        out.append({"a": a["method"], "b": b["method"], "cmp": c,
                    "pair": f"{a['label']} − {b['label']}",
                    "words": "—" if c is None else c.words("ahead", "behind")})
    return out


def ranking_groups(pairs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The ranking as groups: neighbours the rule does not tell apart share a group."""
    if not pairs:
        return []
    groups = [[pairs[0]["a"]]]
    for p in pairs:
        if p["cmp"] is not None and p["cmp"].sign != 0:
            groups.append([p["b"]])
        else:
            groups[-1].append(p["b"])
    return groups


def pairs_html(pairs: Sequence[Mapping[str, Any]]) -> str:
    """The table of :func:`ranking_pairs`: the difference of the means with Welch's interval,
    Welch's p and the paired p, and the words."""
    table = []
    for p in pairs:
        c = p["cmp"]
        row = {"pair": p["pair"], "words": p["words"]}
        if c is not None:
            row |= {"diff": stats.fmt_spread(c.diff, c.half_width, signed=True),
                    "ci": f"{stats.fmt_spread(c.low, c.half_width, signed=True)} to "
                          f"{stats.fmt_spread(c.high, c.half_width, signed=True)}",
                    "welch_p": f"{c.welch_p:.2g}",
                    "paired_p": f"{c.paired_p:.2g}" if c.paired_n else None}
        table.append(row)
    return table_html(
        table, ["pair", "diff", "ci", "welch_p", "paired_p", "words"],
        headers={"pair": "optimizers (a − b)", "diff": "difference of the means",
                 "ci": "95 % interval (Welch)", "welch_p": "Welch p", "paired_p": "paired p",
                 "words": "a against b"})


def split_rule(values: Mapping[str, Mapping[int, float]],
               rows: Sequence[Row]) -> dict[str, Any]:
    """The split of :func:`~gaugebook.sensing.sensing_runs.split_summary` under the one rule,
    for the metric of ``values`` (lower on the equivariant side). Every pair of an equivariant
    and a coordinate-wise optimizer is compared (``eq − cw``): ``below`` pairs are resolved in
    the split's direction, ``above`` against it, ``level`` are not resolved. The verdict is
    ``"holds"`` when every pair is below, ``"fails"`` when some pair is above, else
    ``"level"``. ``cmp``: the equivariant optimizer of largest mean against the coordinate-wise
    one of smallest mean, the pair the split's gap is read from."""
    eq = [r["method"] for r in rows if r["equivariant"]]
    cw = [r["method"] for r in rows if not r["equivariant"]]
    signs = [None if c is None else c.sign
             for c in (stats.compare_seeds(values.get(a), values.get(b)) for a in eq for b in cw)]
    below, above = signs.count(-1), signs.count(1)

    def mean(m: str) -> float:
        xs = [v for v in values.get(m, {}).values() if math.isfinite(v)]
        return sum(xs) / len(xs) if xs else math.nan

    worst = max((m for m in eq if math.isfinite(mean(m))), key=mean, default=None)
    best = min((m for m in cw if math.isfinite(mean(m))), key=mean, default=None)
    c = (stats.compare_seeds(values.get(worst), values.get(best)) if worst and best else None)
    verdict = "holds" if signs and below == len(signs) else "fails" if above else "level"
    return {"below": below, "above": above, "level": len(signs) - below - above,
            "pairs": len(signs), "verdict": verdict, "worst_eq": worst, "best_cw": best,
            "cmp": c, "text": stats.comparison_text(c),
            "counts": f"{below}/{len(signs) - below - above}/{above}"}


def paper_gaps(rows: Sequence[Row], values: Mapping[str, Mapping[int, float]],
               published: Mapping[str, tuple[float, float]] | None,
               method: str) -> dict[str, Any]:
    """One optimizer's mean against the published one: the difference (ours − paper's) and
    the sample standard deviation of its seeds, as text (dashes where this page is not the
    paper's setting), and whether the difference is smaller than that spread."""
    rec = next((r["rec"] for r in rows if r["method"] == method), math.nan)
    pub = (published or {}).get(method, (math.nan, None))[0]
    _, sd = stats.mean_sd(list(values.get(method, {}).values()))
    diff = rec - pub
    within = bool(sd is not None and math.isfinite(diff) and abs(diff) < sd)
    return {f"{method}_pub_diff": fmt(diff, "+.3f"), f"{method}_sd": fmt(sd, ".2f"),
            f"{method}_pub_within_sd": within, f"{method}_pub_below": bool(diff < 0)}


# --------------------------------------------------------------------------------------------
# how the runs get there
# --------------------------------------------------------------------------------------------

def selected_runs(records: Sequence[Record], rows: Sequence[Row],
                  seed: int) -> list[Record]:
    """The run of each selected (method, lr) of ``rows`` on ``seed``, in the rows' order."""
    return [r for row in rows for r in records
            if r["config"]["method"] == row["method"]
            and r["config"]["hparams"]["lr"] == row["lr"] and r["config"]["seed"] == seed]


def late_change(record: Record, threshold: float = 1e-2) -> float:
    """Largest |rec − final rec| over the curve points after the training loss first fell
    below ``threshold``."""
    curve = record["curves"]
    points = [(loss, rec) for loss, rec in zip(curve["train_loss"], curve["rec"], strict=True)
              if loss is not None and rec is not None]
    start = next((i for i, (loss, _) in enumerate(points) if loss < threshold), len(points))
    final = record["metrics"]["rec"]
    return max((abs(rec - final) for _, rec in points[start:]), default=0.0)


def late_change_summary(selected: Sequence[Record], threshold: float = 1e-2,
                        settled: float = 0.1) -> dict[str, Any]:
    """The answer to "is the recovery error set at the end of training or along the way?":
    the largest late change (:func:`late_change`) and whose it is, the spread of the final
    errors, their ratio, how many runs are *settled* (late change below ``settled`` times the
    spread) once the loss is below ``threshold``, and the optimizers whose runs are not
    (``late_moving``, their names)."""
    changes = {r["config"]["method"]: late_change(r, threshold) for r in selected}
    finals = [r["metrics"]["rec"] for r in selected]
    spread = max(finals) - min(finals)
    worst = max(changes, key=changes.get)
    moving = [label(m) for m, c in changes.items() if not c < settled * spread]
    n = len(changes)
    return {"late_rec_change": changes[worst], "late_rec_method": label(worst),
            "rec_spread": spread,
            "late_ratio": changes[worst] / spread if spread else math.nan,
            "late_settled": n - len(moving), "late_runs": n, "late_moving": moving}


def late_change_seeds(records: Sequence[Record], rows: Sequence[Row], seeds: Sequence[int],
                      threshold: float = 1e-2, settled: float = 0.1) -> dict[str, Any]:
    """:func:`late_change_summary` on every seed: how many selected runs are settled over all
    seeds (``late_settled_all`` of ``late_runs_all``) and how many seeds have a run that still
    moves (``late_seeds_moving``)."""
    per_seed = [late_change_summary(selected_runs(records, rows, s), threshold, settled)
                for s in seeds]
    return {"late_settled_all": sum(x["late_settled"] for x in per_seed),
            "late_runs_all": sum(x["late_runs"] for x in per_seed),
            "late_seeds_moving": sum(bool(x["late_moving"]) for x in per_seed),
            "late_seeds": len(per_seed)}


def training_figure(selected: Sequence[Record]) -> Any:
    """Recovery error (left) and training loss (right) along training, one line per
    optimizer in the book's colour, one legend for both panels below them."""
    import matplotlib.pyplot as plt

    from gaugebook.present import viz

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 3.6), layout="constrained")
    viz.training_curves(selected, metric="rec", ax=ax1, color_by="method", annotate=False)
    viz.training_curves(selected, metric="train_loss", ax=ax2, log=True,
                        color_by="method", annotate=False)
    ax1.set_ylim(bottom=0)
    ax1.set_ylabel("recovery error rec")
    ax2.set_ylabel("training loss")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=5)
    return fig


def lr_sensitivity_figure(records: Sequence[Record], marks: Mapping[str, float]) -> Any:
    """Mean rec against the learning rate on the wide grids: equivariant optimizers on the
    left, coordinate-wise ones on the right, the book's colour per optimizer, each panel's
    legend below it."""
    import matplotlib.pyplot as plt

    from gaugebook.present import viz

    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.9), layout="constrained", sharey=True)
    for ax, eq, title in ((axes[0], True, "gauge-equivariant"),
                          (axes[1], False, "coordinate-wise")):
        methods = [m for m in ms.TABLE2_METHODS if get_spec(m).equivariant == eq]
        viz.lr_sensitivity(records, methods=methods, ax=ax, marks=marks)
        ax.get_legend().remove()
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=9,
                  handlelength=1.2, columnspacing=1.0)
        ax.set_title(title)
    axes[1].set_ylabel("")
    return fig


def wide_numbers(records: Sequence[Record]) -> dict[str, Any]:
    """The selection on the wide grids (Table 2's gate): the split, its gap, the best
    coordinate-wise and worst equivariant optimizer and the selections at a grid edge."""
    numbers = split_numbers(ms.split_summary(ms.selection_rows(records, "oracle")))
    del numbers["methods"]
    return numbers


def wide_html(rows: Sequence[Row]) -> str:
    """The selection on the wide grids: per optimizer, the chosen lr, its mean rec, and
    whether it sits at an edge of the grid (:func:`edge_word`)."""
    table = [{**r, "edge": edge_word(r)} for r in rows]
    return table_html(
        table, ["label", "lr", "rec", "edge"],
        headers={"label": "optimizer", "lr": "lr (wide grid)", "rec": "rec",
                 "edge": "lr at a grid edge"},
        formats={"lr": "g", "rec": ".3g"})


# --------------------------------------------------------------------------------------------
# the convex reference
# --------------------------------------------------------------------------------------------

def convex_rows(records: Mapping[str, Sequence[Record]], rows: Sequence[Row],
                zoo: ms.Part) -> list[dict[str, Any]]:
    """Per seed: the convex program's rec and feasibility residual (beside the published rec)
    and the rec of the selected Muon and GD runs of Table 2."""
    convex = {r["config"]["seed"]: r for r in records["convex"]}
    published = ms.published_convex(zoo) or {}
    lrs = {r["method"]: r["lr"] for r in rows}
    per_seed = {m: {r["config"]["seed"]: r["metrics"]["rec"] for r in records["zoo"]
                    if r["config"]["method"] == m and r["config"]["hparams"]["lr"] == lrs[m]}
                for m in ("muon", "gd")}
    return [{"seed": s, "convex": convex[s]["metrics"]["rec"],
             "feasibility": convex[s]["metrics"]["feasibility"],
             "muon": per_seed["muon"].get(s), "gd": per_seed["gd"].get(s),
             "published": published.get(s)} for s in zoo.seeds]


def convex_values(rows: Sequence[Row]) -> dict[str, Any]:
    """What the text says of :func:`convex_rows`: the convex program's largest and smallest
    rec, on how many seeds Muon beats it (by more than 1e-3) and GD beats it, of how many."""
    convex = [r["convex"] for r in rows]
    return {"convex_max": max(convex), "convex_min": min(convex),
            "muon_beats_convex": sum(r["muon"] < r["convex"] - 1e-3 for r in rows),
            "gd_beats_convex": sum(r["gd"] < r["convex"] for r in rows), "n_seeds": len(rows)}


def convex_html(rows: Sequence[Row]) -> str:
    """The table of :func:`convex_rows`."""
    return table_html(
        rows, ["seed", "convex", "published", "feasibility", "muon", "gd"],
        headers={"convex": "rec, min ‖X‖*", "published": "rec, min ‖X‖* (paper)",
                 "feasibility": "‖A vec X − y‖/‖y‖", "muon": "rec, Muon", "gd": "rec, GD"},
        formats={"convex": ".4f", "published": ".4f", "feasibility": ".1e",
                 "muon": ".1e", "gd": ".4f"})


# --------------------------------------------------------------------------------------------
# balancedness against recovery
# --------------------------------------------------------------------------------------------

def balancedness_values(records: Sequence[Record]) -> dict[str, Any]:
    """Over every finished run of ``records``: Spearman's correlation of the final
    balancedness with the recovery error (:func:`spearman`), and the balancedness of the run of
    lowest recovery error."""
    finished = [r["metrics"] for r in records if r["status"] == "ok"]
    best = min(finished, key=lambda m: m["rec"])
    return {"bal_rec_spearman": spearman([m["balancedness"] for m in finished],
                                         [m["rec"] for m in finished]),
            "best_run_bal": best["balancedness"]}


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long sequences (ranks by sort order, ties
    in sort order, as the chapter's figure counts them)."""
    def ranks(values: Sequence[float]) -> list[float]:
        out = [0.0] * len(values)
        for rank, i in enumerate(sorted(range(len(values)), key=values.__getitem__)):
            out[i] = float(rank)
        return out

    # both rank lists are 0 … n−1 reordered: one mean, one variance
    rx, ry, mean = ranks(xs), ranks(ys), (len(xs) - 1) / 2
    cov = sum((a - mean) * (b - mean) for a, b in zip(rx, ry, strict=True))
    return cov / sum((a - mean) ** 2 for a in rx)


# --------------------------------------------------------------------------------------------
# the README's headline (gaugebook.headline)
# --------------------------------------------------------------------------------------------

def paper_zoo_rows() -> list[dict[str, Any]]:
    collected = ms.collect("paper", parts=["zoo"], mode="read")
    return ms.selection_rows(collected.records["zoo"], "oracle")
