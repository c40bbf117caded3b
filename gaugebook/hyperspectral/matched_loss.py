r"""Table 5's comparisons at matched training loss: methods at their selected rates, compared
at a level of the training loss that every run reached.

A matched-loss run (:mod:`gaugebook.engine.factor_trainer` with ``budget["record_at"]``)
keeps in ``metrics["at_loss"]`` one entry per level ``ℓ`` its pre-update training loss fell
below: ``{"threshold": ℓ, "step", "train_loss", "heldout_rmse", "effective_rank"}``
(:func:`gaugebook.engine.selection.at_level` reads one). ``rule`` is the reading of a record
(``"ours"``: only a run that finished ``ok`` counts; ``"paper"``: every crossing counts, also
those of a run whose loss later blew up, as in the paper's ``experiments/nibi/collect.py``).

Selection (:func:`select_lr`) is the one selection of the book
(:mod:`gaugebook.engine.selection`) under its matched-loss protocol; nothing of the held-out
entries enters it.

Comparison. :func:`matched_comparison` compares selected rates at the deepest level every run of
the compared methods reached on every evaluation seed; the paper's headline
(:func:`headline_gap`) takes that level over GD and Adam only and reports
``gap = (mean_b − mean_a) / mean_b`` (``a`` below ``b`` when positive) and the number of seeds,
paired in order, on which ``a`` is below ``b``. :func:`level_table` is the paper's Table 5 cell:
per level, the mean over the seeds that reached it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gaugebook.engine.selection import (
    MATCHED_LOSS_LEVELS,
    Record,
    at_level,
    deepest_level,
    matched_loss,
    select,
)

__all__ = [
    "THRESHOLDS",
    "LrSelection",
    "best_at_level",
    "by_seed",
    "deepest_common_level",
    "fixed_lr_gaps",
    "gap",
    "gaps_by_seed",
    "headline_gap",
    "leak_effect",
    "level_table",
    "matched_comparison",
    "runs_at",
    "select_lr",
    "summarize",
]

#: The paper's matched-loss levels of the training MSE (descending).
THRESHOLDS: tuple[float, ...] = MATCHED_LOSS_LEVELS


def deepest_common_level(
    groups: Sequence[Sequence[Record]], thresholds: Sequence[float] = THRESHOLDS,
    rule: str = "ours",
) -> float | None:
    """The deepest threshold that every record of every group reached (``None``: none did, or
    a group is empty)."""
    records = [r for g in groups for r in g]
    if not records or any(not g for g in groups):
        return None
    index = min(deepest_level(r, thresholds, rule) for r in records)
    return thresholds[index] if index >= 0 else None


def _by_lr(records: Sequence[Record], method: str, seeds: Sequence[int]) -> dict[float, list]:
    out: dict[float, list[Record]] = {}
    for r in records:
        c = r["config"]
        if c["method"] == method and c["seed"] in seeds:
            out.setdefault(float(c["hparams"]["lr"]), []).append(r)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class LrSelection:
    """A method's selected rate (train-only), the deepest level its selection seeds reached,
    the mean steps to it, the grid and whether the choice sits at an edge of the grid."""

    method: str
    lr: float | None
    level: float | None
    steps: float
    grid: tuple[float, ...]

    @property
    def at_top(self) -> bool:
        return self.lr is not None and self.lr == max(self.grid)

    @property
    def at_bottom(self) -> bool:
        return self.lr is not None and self.lr == min(self.grid)


def select_lr(
    records: Sequence[Record],
    method: str,
    seeds: Sequence[int] = (42, 123),
    thresholds: Sequence[float] = THRESHOLDS,
    *,
    grid: Sequence[float] | None = None,
    rule: str = "ours",
) -> LrSelection:
    """The train-only selection of ``method`` among the rates of ``grid`` (default: every rate
    recorded) on the runs of ``seeds``: :func:`gaugebook.engine.selection.select` under the
    :func:`~gaugebook.engine.selection.matched_loss` protocol (the rate whose runs on every
    seed reach the most levels; ties: fewest mean steps to the deepest, then the smaller rate).

    Not the ``TRAIN_SPEED`` protocol (fewest mean steps among the rates whose every seed reached
    the tolerance): here the gate is graded, a rate that reaches more of the matched-loss levels
    on every seed wins whatever its speed, and the steps are those to the deepest such level."""
    keep = None if grid is None else {float(x) for x in grid}
    runs = [r for r in records if r["config"]["method"] == method and r["config"]["seed"] in seeds
            and (keep is None or float(r["config"]["hparams"]["lr"]) in keep)]
    chosen = select(runs, matched_loss(seeds, thresholds, rule)).get(method)
    grid_used = tuple(float(lr) for lr in chosen.grid) if chosen else ()
    if chosen is None or chosen.value is None:
        return LrSelection(method, None, None, math.nan, grid_used)
    level, steps = chosen.score
    return LrSelection(method, float(chosen.value), thresholds[-level], steps, grid_used)


def gap(ours: Sequence[float], theirs: Sequence[float]) -> dict[str, Any]:
    """How far ``ours`` is below ``theirs``: ``1 − mean(ours)/mean(theirs)``, the per-seed
    ``1 − ours_s/theirs_s`` (paired by position) with their min, max and sample standard
    deviation, and ``wins``, the number of pairs with ``ours_s < theirs_s``."""
    if not ours or len(ours) != len(theirs):
        return {"gap": math.nan, "seeds": [], "min": math.nan, "max": math.nan, "std": math.nan,
                "wins": 0}
    per_seed = [1.0 - a / b for a, b in zip(ours, theirs, strict=True)]
    return {
        "gap": 1.0 - statistics.fmean(ours) / statistics.fmean(theirs),
        "seeds": per_seed, "min": min(per_seed), "max": max(per_seed),
        "std": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0,
        "wins": sum(a < b for a, b in zip(ours, theirs, strict=True)),
    }


def runs_at(records: Sequence[Record], method: str, lr: float | None,
            seeds: Sequence[int]) -> list[Record]:
    """The records of ``method`` at rate ``lr`` on ``seeds``, in the order of ``seeds``."""
    if lr is None:
        return []
    runs = {r["config"]["seed"]: r for r in records
            if r["config"]["method"] == method and float(r["config"]["hparams"]["lr"]) == lr
            and r["config"]["seed"] in seeds}
    return [runs[s] for s in seeds if s in runs]


def _values(runs: Sequence[Record], level: float | None, metric: str,
            rule: str = "ours") -> list[float]:
    if level is None:
        return []
    out = []
    for r in runs:
        entry = at_level(r, level, rule)
        if entry is None or entry.get(metric) is None:
            return []
        out.append(float(entry[metric]))
    return out


def by_seed(runs: Sequence[Record], level: float | None, metric: str = "heldout_rmse",
            rule: str = "ours") -> dict[int, float]:
    """``{seed: metric}`` at ``level`` of the runs that reached it (empty without a level): what
    :func:`gaugebook.present.stats.compare_runs` pairs. Runs of one part and seed share the
    mask and the initial factors whatever the method and rate, and so do the arms of one scene
    (:mod:`gaugebook.hyperspectral.completion`), so runs pair by seed across them."""
    if level is None:
        return {}
    out = {}
    for r in runs:
        entry = at_level(r, level, rule)
        if entry is not None and entry.get(metric) is not None:
            out[r["config"]["seed"]] = float(entry[metric])
    return out


def gaps_by_seed(a: Mapping[int, float], b: Mapping[int, float]) -> dict[int, float]:
    """Per seed of both, how far ``a`` is below ``b``: ``1 − a_s/b_s`` (:func:`gap` per seed)."""
    return {s: 1.0 - a[s] / b[s] for s in a if s in b}


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def matched_comparison(
    records: Sequence[Record],
    selections: Mapping[str, LrSelection],
    seeds: Sequence[int] = (42, 123, 456, 789),
    thresholds: Sequence[float] = THRESHOLDS,
    *,
    rule: str = "ours",
) -> dict[str, Any]:
    """The selected rates on ``seeds``, compared at the deepest threshold that every run of
    every selected method reached on every seed: per method the held-out RMSE (mean and per
    seed, and ``rmse_by_seed``: ``{seed: value}``), effective rank and steps."""
    runs = {m: runs_at(records, m, s.lr, seeds) for m, s in selections.items()}
    complete = all(len(r) == len(seeds) for r in runs.values())
    level = deepest_common_level(list(runs.values()), thresholds, rule) if complete else None
    rows = {}
    for m, s in selections.items():
        rmse = _values(runs[m], level, "heldout_rmse", rule)
        rows[m] = {
            "method": m, "lr": s.lr, "at_top": s.at_top, "at_bottom": s.at_bottom,
            "selected_level": s.level, "rmse": _mean(rmse), "rmse_seeds": rmse,
            "rmse_by_seed": by_seed(runs[m], level, "heldout_rmse", rule) if rmse else {},
            "effective_rank": _mean(_values(runs[m], level, "effective_rank", rule)),
            "steps": _mean(_values(runs[m], level, "step", rule)),
            "seeds": len(runs[m]),
        }
    return {"level": level, "complete": complete, "methods": rows}


def headline_gap(
    records: Sequence[Record],
    selections: Mapping[str, LrSelection],
    a: str = "gd",
    b: str = "adam",
    seeds: Sequence[int] = (42, 123, 456, 789),
    thresholds: Sequence[float] = THRESHOLDS,
    rule: str = "paper",
) -> dict[str, Any]:
    """The paper's headline: ``a`` against ``b`` at their selected rates, at the deepest level
    every seed of both reached; :func:`gap` of the held-out RMSEs (``wins``: seeds on which
    ``a`` is below ``b``), with the level and both means, and per seed both RMSEs
    (``<a>_by_seed``, ``<b>_by_seed``) and the gap (``gap_by_seed``)."""
    comp = matched_comparison(records, {m: selections[m] for m in (a, b)}, seeds, thresholds,
                              rule=rule)
    ra, rb = comp["methods"][a], comp["methods"][b]
    return {"level": comp["level"], a: ra["rmse"], b: rb["rmse"],
            **gap(ra["rmse_seeds"], rb["rmse_seeds"]),
            f"{a}_by_seed": ra["rmse_by_seed"], f"{b}_by_seed": rb["rmse_by_seed"],
            "gap_by_seed": gaps_by_seed(ra["rmse_by_seed"], rb["rmse_by_seed"])}


def level_table(
    records: Sequence[Record],
    method: str,
    lr: float | None,
    seeds: Sequence[int] = (42, 123, 456, 789),
    thresholds: Sequence[float] = THRESHOLDS,
    rule: str = "paper",
) -> list[dict[str, Any]]:
    """The paper's Table 5 cells of one method at rate ``lr``: per level, the mean held-out
    RMSE and effective rank over the seeds that reached it, how many did (``n``), and the
    held-out RMSE of each (``rmse_by_seed``)."""
    runs = runs_at(records, method, lr, seeds)
    out = []
    for level in thresholds:
        hits = [e for r in runs if (e := at_level(r, level, rule)) is not None]
        out.append({
            "level": level, "n": len(hits),
            "rmse": _mean([float(e["heldout_rmse"]) for e in hits]),
            "effective_rank": _mean([float(e["effective_rank"]) for e in hits]),
            "steps": _mean([float(e["step"]) for e in hits]),
            "rmse_by_seed": by_seed(runs, level, "heldout_rmse", rule),
        })
    return out


def fixed_lr_gaps(
    records: Sequence[Record],
    reference: str,
    reference_lr: float | None,
    other: str = "adam",
    seeds: Sequence[int] = (42, 123, 456, 789),
    thresholds: Sequence[float] = THRESHOLDS,
    *,
    rule: str = "ours",
) -> list[dict[str, Any]]:
    """For every rate of ``other``: ``reference`` (at its selected rate) against ``other`` at that
    fixed rate, at the deepest threshold both reach on every seed (one row per rate), with both
    RMSEs and the gap per seed (``reference_by_seed``, ``other_by_seed``, ``gap_by_seed``)."""
    ref = runs_at(records, reference, reference_lr, seeds)
    rows = []
    for lr in _by_lr(records, other, seeds):
        runs = runs_at(records, other, lr, seeds)
        ok = len(runs) == len(seeds) == len(ref)
        level = deepest_common_level([ref, runs], thresholds, rule) if ok else None
        a = _values(ref, level, "heldout_rmse", rule)
        b = _values(runs, level, "heldout_rmse", rule)
        ref_seeds = by_seed(ref, level, "heldout_rmse", rule) if a and b else {}
        other_seeds = by_seed(runs, level, "heldout_rmse", rule) if a and b else {}
        rows.append({"lr": lr, "level": level, "reference_rmse": _mean(a),
                     "other_rmse": _mean(b), **gap(a, b), "reference_by_seed": ref_seeds,
                     "other_by_seed": other_seeds,
                     "gap_by_seed": gaps_by_seed(ref_seeds, other_seeds)})
    return rows


def best_at_level(
    records: Sequence[Record], method: str, level: float | None,
    seeds: Sequence[int] = (42, 123, 456, 789), *, rule: str = "ours",
) -> dict[str, Any] | None:
    """An oracle, for scale only: the rate of ``method`` with the lowest mean held-out RMSE at
    ``level`` among the rates whose runs reach it on every seed (reads held-out entries)."""
    best = None
    grid = list(_by_lr(records, method, seeds))
    for lr in grid:
        runs = runs_at(records, method, lr, seeds)
        vals = _values(runs, level, "heldout_rmse", rule) if len(runs) == len(seeds) else []
        if vals and (best is None or statistics.fmean(vals) < best["rmse"]):
            best = {"method": method, "lr": lr, "rmse": statistics.fmean(vals),
                    "rmse_seeds": vals, "at_bottom": lr == min(grid), "at_top": lr == max(grid)}
    return best


def leak_effect(
    observed: Sequence[Record],
    leaky: Sequence[Record],
    selections: Mapping[str, LrSelection],
    seeds: Sequence[int] = (42, 123, 456, 789),
    thresholds: Sequence[float] = THRESHOLDS,
    *,
    rule: str = "ours",
) -> dict[str, Any]:
    """The same runs (method, selected rate, seed) centred with observed entries and with all
    entries, compared at the deepest threshold all of them reach: held-out RMSE of each and the
    relative change ``leaky/observed − 1``; and GD's gap below Adam under each centring."""
    methods = [m for m in selections if runs_at(leaky, m, selections[m].lr, seeds)]
    obs = {m: runs_at(observed, m, selections[m].lr, seeds) for m in methods}
    leak = {m: runs_at(leaky, m, selections[m].lr, seeds) for m in methods}
    groups = [*obs.values(), *leak.values()]
    complete = bool(methods) and all(len(g) == len(seeds) for g in groups)
    level = deepest_common_level(groups, thresholds, rule) if complete else None
    rows = {}
    for m in methods:
        a = _values(obs[m], level, "heldout_rmse", rule)
        b = _values(leak[m], level, "heldout_rmse", rule)
        rows[m] = {"method": m, "lr": selections[m].lr, "observed": _mean(a), "leaky": _mean(b),
                   "change": _mean(b) / _mean(a) - 1.0 if a and b else math.nan}
    out: dict[str, Any] = {"level": level, "methods": rows}
    if "gd" in rows and "adam" in rows and level is not None:
        for name, src in (("observed", obs), ("leaky", leak)):
            out[f"gap_{name}"] = gap(_values(src["gd"], level, "heldout_rmse", rule),
                                     _values(src["adam"], level, "heldout_rmse", rule))
    return out


def summarize(
    records: Sequence[Record],
    leak_records: Sequence[Record] = (),
    *,
    methods: Sequence[str] = ("gd", "adam", "scalar_adam", "muon"),
    selection_seeds: Sequence[int] = (42, 123),
    eval_seeds: Sequence[int] = (42, 123, 456, 789),
    thresholds: Sequence[float] = THRESHOLDS,
    grid: Mapping[str, Sequence[float]] | None = None,
    rule: str = "ours",
) -> dict[str, Any]:
    """Everything a page shows for one scene and density: selections (within ``grid`` per
    method, default every recorded rate), the matched comparison, GD's gap below Adam (at the
    level of all methods, ``gap``, and the paper's headline at the level of GD and Adam only,
    ``headline``), the gaps at every fixed Adam rate (and the best one), the leak, and the runs
    that diverged or failed."""
    sel = {m: select_lr(records, m, selection_seeds, thresholds,
                        grid=None if grid is None else grid.get(m), rule=rule) for m in methods}
    comp = matched_comparison(records, sel, eval_seeds, thresholds, rule=rule)
    rows = comp["methods"]
    out: dict[str, Any] = {"selections": sel, "comparison": comp}
    if "gd" in rows and "adam" in rows:
        out["gap"] = gap(rows["gd"]["rmse_seeds"], rows["adam"]["rmse_seeds"])
        out["headline"] = headline_gap(records, sel, "gd", "adam", eval_seeds, thresholds, rule)
        fixed = fixed_lr_gaps(records, "gd", sel["gd"].lr, "adam", eval_seeds, thresholds,
                              rule=rule)
        out["fixed_lr"] = fixed
        finite = [r for r in fixed if math.isfinite(r["gap"])]
        out["best_fixed"] = min(finite, key=lambda r: r["gap"]) if finite else None
        level = comp["level"]
        best = {m: best_at_level(records, m, level, eval_seeds, rule=rule)
                for m in ("gd", "adam")}
        out["oracle_best"] = best
        if best["gd"] and best["adam"]:
            out["oracle_gap"] = gap(best["gd"]["rmse_seeds"], best["adam"]["rmse_seeds"])
    if leak_records:
        out["leak"] = leak_effect(records, leak_records, sel, eval_seeds, thresholds, rule=rule)
    out["diverged"] = sum(r["status"] == "diverged" for r in records)
    out["errors"] = sum(r["status"] == "error" for r in records)
    return out
