r"""The dial's records as the chapter reads them (chapter 5): selections, tables, numbers.

Summaries of the records of :mod:`gaugebook.dial.dial_runs` (the dial parts ``dial_rms`` and
``dial_geomean``, ``gd_reference``, ``lr_edge``, ``flow_rows``) and what the chapter says with
them: the table rows (``*_table``) and the numbers its text glues (``*_numbers``, glue names as
keys). The selection rules are the experiment's (:data:`~gaugebook.dial.dial_runs.
PAPER_PROTOCOL`, :data:`~gaugebook.dial.dial_runs.FLOW_ROWS_PROTOCOL`, the book's
:data:`~gaugebook.engine.selection.ORACLE`); published values are shown only for records in the
paper's setting (:func:`is_paper_setting`). FlowAdam's rows of the chapter's text are in
:mod:`gaugebook.dial.flow_summary`.

Comparisons go through the book's one rule (:func:`gaugebook.present.stats.compare_runs`, by
way of :func:`gaugebook.present.stats.compare_seeds`). Every part of the sweep runs one
problem, and a seed fixes its instance (generator ``s``) and its initial factors (generator
``s + 7``) whatever ``p``, the scalar, the learning rate or the optimizer, so the cells of all
parts pair by seed (:func:`cell_seeds`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.dial.dial_runs import (
    FLOW_ROWS,
    FLOW_ROWS_PROTOCOL,
    PAPER_PROTOCOL,
    PUBLISHED_DIAL,
    PUBLISHED_DIAL_STEPS,
    PUBLISHED_FIXED_LR,
    PUBLISHED_FLOW_ROWS,
    PUBLISHED_GD,
    PUBLISHED_LR_EDGE,
    DialConfig,
    collect,
    flow_hparams,
    get_config,
)
from gaugebook.engine.collection import MissingRecords
from gaugebook.engine.selection import ORACLE, Protocol, Selection, mean_metric, select
from gaugebook.present import stats
from gaugebook.present.stats import Comparison
from gaugebook.present.tables import NBSP, finite, fmt, rec_lr


def _rec_sd(row: Mapping[str, Any]) -> str | None:
    """``"0.1234 ± 0.0012"`` of a row's ``rec`` and ``rec_sd`` (no-break spaces), or ``None``
    (a table's dash) without a rec."""
    if not finite(row["rec"]):
        return None
    return f"{row['rec']:.4f}{NBSP}±{NBSP}{fmt(row['rec_sd'], '.4f')}"


def seed_stats(values: Sequence[float], ddof: int = 1) -> tuple[float, float]:
    """Mean and standard deviation: the sample one for ``ddof=1`` (``nan`` for fewer than two
    values), the population one (``np.std``, the paper's ``collect.py``) for ``ddof=0``."""
    if ddof not in (0, 1):
        raise ValueError(f"Invalid ddof: {ddof!r}; expected 0 or 1")
    vals = [float(v) for v in values]
    if not vals or any(v is None or not math.isfinite(v) for v in vals):
        return math.nan, math.nan
    if ddof == 0:
        return statistics.fmean(vals), statistics.pstdev(vals)
    return statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else math.nan


def _power(record: Mapping[str, Any]) -> float:
    return float(record["config"]["hparams"]["precond_power"])


def _row(s: Selection) -> dict[str, Any]:
    recs = [r["metrics"]["rec"] for r in s.runs]
    mean, sd = seed_stats(recs)
    return {
        "lr": s.value, "gated": s.gated, "at_grid_edge": s.at_grid_edge,
        "at_lowest_lr": bool(s.grid) and s.value == s.grid[0],
        "rec": mean, "rec_sd": sd, "rec_seeds": recs,
        "effective_rank": s.mean("effective_rank"), "steps": s.mean("steps"),
        "train_loss_mean": s.mean("train_loss"),
        "all_interpolated": bool(s.runs) and all(r["metrics"]["interpolated"] for r in s.runs),
    }


def is_paper_setting(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every record is on the paper's problem at the paper's budget (or its 10×
    budget): published values describe only that setting, so summaries show them only then."""
    cfg = get_config("paper")
    problem = cfg.problem.to_config()
    budgets = (cfg.budget.to_config(), cfg.long_budget.to_config())
    return bool(records) and all(r["config"]["problem"] == problem
                                 and r["config"]["budget"] in budgets for r in records)


def dial_rows(records: Sequence[Mapping[str, Any]], scalar: str,
              protocol: Protocol = PAPER_PROTOCOL) -> list[dict[str, Any]]:
    """One row per ``p`` (descending) of a dial part: the selection of ``protocol`` over lrs
    (:func:`_row` columns) and the published rec of that ``(scalar, p)`` (``nan`` if none, or
    if the records are not in the paper's setting)."""
    chosen = select(records, protocol, group_by="config.hparams.precond_power")
    published = PUBLISHED_DIAL.get(scalar, {}) if is_paper_setting(records) else {}
    if scalar == "geomean" and published:
        published = {1.0: PUBLISHED_DIAL["rms"][1.0], **published}
    return [{"p": float(p), "scalar": scalar, **_row(chosen[p]),
             "published": published.get(float(p), math.nan)} for p in sorted(chosen, reverse=True)]


def fixed_lr_table(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The fixed-lr arm of a dial part: mean rec and effective rank per (lr, p), whether every
    seed interpolated, and per lr whether rec and effective rank fall monotonically as ``p``
    goes from 1 to 0 over the cells where every seed interpolated."""
    cells: dict[tuple[float, float], list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((float(r["config"]["hparams"]["lr"]), _power(r)), []).append(r)
    lrs = sorted({lr for lr, _ in cells})
    powers = sorted({p for _, p in cells}, reverse=True)

    def grid(metric: str) -> list[list[float]]:
        return [[mean_metric(cells.get((lr, p), []), metric) for p in powers] for lr in lrs]

    ok = [[bool(cells.get((lr, p))) and all(x["status"] == "ok" and x["metrics"]["interpolated"]
                                            for x in cells[(lr, p)]) for p in powers]
          for lr in lrs]
    rec, erank = grid("rec"), grid("effective_rank")
    paper = is_paper_setting(records)

    def monotone(row: list[float], flags: list[bool]) -> bool:
        vals = [v for v, f in zip(row, flags, strict=True) if f]
        return len(vals) >= 2 and all(b < a for a, b in zip(vals, vals[1:], strict=False))

    return {
        "lrs": lrs, "powers": powers, "rec": rec, "effective_rank": erank,
        "interpolated": ok,
        "monotone_rec": [monotone(rec[i], ok[i]) for i in range(len(lrs))],
        "monotone_erank": [monotone(erank[i], ok[i]) for i in range(len(lrs))],
        "published": [[(PUBLISHED_FIXED_LR.get(lr, {}).get(p, math.nan) if paper else math.nan)
                       for p in powers] for lr in lrs],
    }


def published_lr_edge(records: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """:data:`PUBLISHED_LR_EDGE` when ``records`` are in the paper's setting, else ``None``."""
    return dict(PUBLISHED_LR_EDGE) if is_paper_setting(records) else None


def lr_edge_rows(records: Sequence[Mapping[str, Any]], ddof: int = 1) -> list[dict[str, Any]]:
    """Per (p, lr) of ``lr_edge``: mean ± sd of rec over seeds (``ddof`` as in
    :func:`seed_stats`), effective rank, steps, how many seeds interpolated (below ``tol``) and
    how many finished ``ok``."""
    cells: dict[tuple[float, float], list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((_power(r), float(r["config"]["hparams"]["lr"])), []).append(r)
    rows = []
    for (p, lr), runs in sorted(cells.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        done = [r for r in runs if r["status"] == "ok"]
        mean, sd = seed_stats([r["metrics"]["rec"] for r in done], ddof)
        rows.append({
            "p": p, "lr": lr, "seeds": len(runs), "ok": len(done),
            "interpolated": sum(bool(r["metrics"]["interpolated"]) for r in done),
            "rec": mean, "rec_sd": sd, "effective_rank": mean_metric(done, "effective_rank"),
            "steps": mean_metric(done, "steps"), "train_loss_max": max(
                (r["metrics"]["train_loss"] for r in done), default=math.nan),
        })
    return rows


def flow_row_name(record: Mapping[str, Any]) -> str:
    """The name in :data:`FLOW_ROWS` of a FlowAdam record (by its hyperparameters), or
    ``"other"``."""
    hp = record["config"]["hparams"]
    for name in FLOW_ROWS:
        if all(_same(hp.get(k), v) for k, v in flow_hparams(name).items()):
            return name
    return "other"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b


def flow_rows(records: Sequence[Mapping[str, Any]],
              protocol: Protocol = FLOW_ROWS_PROTOCOL) -> list[dict[str, Any]]:
    """One row per FlowAdam row of ``flow_rows`` (order of :data:`FLOW_ROWS`): the selection of
    ``protocol`` over lrs (by default the paper's for these rows, :data:`FLOW_ROWS_PROTOCOL`)
    and the published value (``nan`` if none)."""
    tagged = [{**r, "row": flow_row_name(r)} for r in records]
    chosen = select(tagged, protocol, group_by="row")
    published = PUBLISHED_FLOW_ROWS if is_paper_setting(records) else {}
    return [{"row": name, "label": label, **_row(chosen[name]),
             "published": published.get(name, math.nan)}
            for name, (label, _, _) in FLOW_ROWS.items() if name in chosen]


def collect_chapter(config: DialConfig | None = None) -> tuple[dict[str, list], Any, Any]:
    """The records of every part the chapter shows (the long FlowAdam part may be missing:
    then it is empty) and what its two records notes say: ``(records, note, long_note)``,
    each note a :class:`~gaugebook.engine.collection.Collected` or a Markdown string for
    :func:`gaugebook.present.viz.records_note`."""
    config = config or get_config()
    data = collect(parts=[p for p in config.part_names if p != "flow_long"])
    records = dict(data.records)
    try:
        long_data = collect(parts=["flow_long"])
    except MissingRecords as missing:
        records["flow_long"] = []
        return records, data, f"The long FlowAdam part is not recorded yet: {missing}"
    records["flow_long"] = long_data.records["flow_long"]
    return records, data, long_data


def gd_reference(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[float, float]:
    """Plain GD at the dial's budget, selected by :data:`PAPER_PROTOCOL`: ``(rec, eff.
    rank)``, means over seeds (``nan`` if it has no selection)."""
    chosen = select(records["gd_reference"], PAPER_PROTOCOL)
    if "gd" not in chosen:
        return math.nan, math.nan
    return chosen["gd"].mean("rec"), chosen["gd"].mean("effective_rank")


def dial_table(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The dial's recovery table, one row per (scalar, p): the paper's dial rule's lr (a star
    when it is the grid's lowest), ``rec ± sd`` over seeds beside the published rec, steps,
    mean training loss, and the stricter rule's ``rec (lr)`` (every seed below the bar)."""
    rows = []
    for s in ("rms", "geomean"):
        strict = {r["p"]: r for r in dial_rows(records[f"dial_{s}"], s, ORACLE)}
        for r in dial_rows(records[f"dial_{s}"], s):
            other = strict.get(r["p"], {})
            rows.append({
                **r, "lr_text": (None if r["lr"] is None else
                                 f"{r['lr']:g}" + ("*" if r["at_lowest_lr"] else "")),
                "rec_text": _rec_sd(r), "strict_text": rec_lr(other.get("rec"), other.get("lr")),
            })
    return rows


def dial_numbers(records: Mapping[str, Sequence[Mapping[str, Any]]],
                 config: DialConfig | None = None) -> dict[str, Any]:
    """The dial table's numbers for the text: the protocol and budget, GD's reference, the
    published claim, per (scalar, p) the selection's rec, published rec, steps and effective
    rank (``dial_<scalar>_p<100 p>_…``), the largest difference from a published cell and how
    many selections with ``p < 1`` sit at the lowest lr."""
    config = config or get_config()
    gd_rec, _ = gd_reference(records)
    out: dict[str, Any] = {
        "dial_check": config.budget.check_every, "dial_tol": config.budget.tol,
        "dial_budget": config.budget.num_steps, "dial_planted": config.problem.r,
        "dial_gd_rec": gd_rec, "dial_gd_published": PUBLISHED_GD,
        "dial_pub_steps_p1": PUBLISHED_DIAL_STEPS[1.0],
        "dial_pub_steps_p0": PUBLISHED_DIAL_STEPS[0.0],
    }
    for p, value in PUBLISHED_DIAL["rms"].items():  # the claim quotes every published p
        out[f"dial_claim_p{round(100 * p)}"] = value
    dial = {s: dial_rows(records[f"dial_{s}"], s) for s in ("rms", "geomean")}
    for s, rows in dial.items():
        for r in rows:
            tag = f"dial_{s}_p{round(100 * r['p'])}"
            out.update({f"{tag}_rec": r["rec"], f"{tag}_pub": r["published"],
                        f"{tag}_steps": r["steps"], f"{tag}_erank": r["effective_rank"]})
    gaps = [abs(r["rec"] - r["published"]) for rows in dial.values() for r in rows
            if math.isfinite(r["published"]) and math.isfinite(r["rec"])]
    out["dial_max_gap"] = max(gaps) if gaps else math.nan
    out["dial_num_compared"] = len(gaps)
    lowest = [r for rows in dial.values() for r in rows if r["p"] < 1]
    out["dial_lowest_count"] = sum(r["at_lowest_lr"] for r in lowest)
    out["dial_lowest_total"] = len(lowest)
    return out


def fixed_lr_numbers(fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The fixed-lr arm (:func:`fixed_lr_table`) for the text: at how many lrs rec and the
    effective rank fall monotonically in ``p``, the largest lr, how many cells reached the bar
    on every seed, and the two largest differences from the published matrix (the largest with
    its cell's lr and ``p``)."""
    gaps = sorted((abs(a - b), lr, p)
                  for lr, ra, rb in zip(fixed["lrs"], fixed["rec"], fixed["published"],
                                        strict=True)
                  for p, a, b in zip(fixed["powers"], ra, rb, strict=True)
                  if math.isfinite(a) and math.isfinite(b))
    worst = gaps[-1] if gaps else (math.nan, math.nan, math.nan)
    return {
        "fixed_mono_count": sum(fixed["monotone_rec"]),
        "fixed_num_lrs": len(fixed["lrs"]),
        "fixed_lr_max": max(fixed["lrs"]),
        "fixed_erank_mono_count": sum(fixed["monotone_erank"]),
        "fixed_cells_ok": sum(v for row in fixed["interpolated"] for v in row),
        "fixed_cells": len(fixed["lrs"]) * len(fixed["powers"]),
        "fixed_max_gap": worst[0],
        "fixed_max_gap_lr": worst[1], "fixed_max_gap_p": worst[2],
        "fixed_second_gap": gaps[-2][0] if len(gaps) > 1 else math.nan,
    }


def lr_edge_table(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``lr_edge`` grid as table rows: p, lr, ``rec ± sd`` (sample sd), seeds below the
    bar out of seeds run, mean steps."""
    return [{**r, "rec_text": _rec_sd(r), "below": f"{r['interpolated']} of {r['seeds']}"}
            for r in lr_edge_rows(records)]


def lr_edge_numbers(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The lr edge for the text: the published cell and ours computed as the paper's (its
    ``ddof``, ``edge_sd_ddof``: 0 for the population sd), the best cell of each ``p`` where
    every seed reached the bar, the smallest lr of the grid, the change of rec across the grid
    per ``p`` and the gap between the best cells of ``p = 1`` and ``p = 0``."""
    edge = lr_edge_rows(records)
    pub = PUBLISHED_LR_EDGE
    at_pub = next((r for r in lr_edge_rows(records, ddof=pub["sd_ddof"])
                   if (r["p"], r["lr"]) == (pub["p"], pub["lr"])), {})
    out: dict[str, Any] = {
        "edge_pub_rec": pub["rec"], "edge_pub_sd": pub["rec_sd"], "edge_pub_lr": pub["lr"],
        "edge_pub_seeds": pub["seeds"],
        "edge_sd_ddof": pub["sd_ddof"],
        "edge_rec": at_pub.get("rec", math.nan), "edge_sd": at_pub.get("rec_sd", math.nan),
        "edge_interp": at_pub.get("interpolated", 0), "edge_seeds": at_pub.get("seeds", 0),
        "edge_steps": at_pub.get("steps", math.nan),
        "edge_min_lr": min((r["lr"] for r in edge), default=math.nan),
    }
    full = [r for r in edge if r["interpolated"] == r["seeds"] and r["seeds"]]
    for p in sorted({r["p"] for r in edge}):
        best = min((r for r in full if r["p"] == p), key=lambda r: r["rec"], default={})
        tag = f"p{round(100 * p)}"
        out[f"edge_best_{tag}_rec"] = best.get("rec", math.nan)
        out[f"edge_best_{tag}_sd"] = best.get("rec_sd", math.nan)
        out[f"edge_best_{tag}_lr"] = best.get("lr", math.nan)
    for p in (0.0, 1.0):
        rows_p = sorted((r for r in edge if r["p"] == p), key=lambda r: r["lr"])
        out[f"edge_change_p{round(100 * p)}"] = (rows_p[0]["rec"] - rows_p[-1]["rec"]
                                                 if rows_p else math.nan)
    out["edge_gap"] = abs(out.get("edge_best_p100_rec", math.nan)
                          - out.get("edge_best_p0_rec", math.nan))
    return out


# --------------------------------------------------------------------------------------------
# under the one rule
# --------------------------------------------------------------------------------------------

def cell_seeds(records: Sequence[Mapping[str, Any]], p: float | None, lr: float,
               metric: str = "rec") -> dict[int, float]:
    """``{seed: metric}`` of the finished runs of one cell, ``(p, lr)`` of a dial part or ``lr``
    alone (``p=None``) of a part with one rule (``gd_reference``). The instance and the start
    of a run are its seed's, so the cells of every part pair by seed."""
    return {r["config"]["seed"]: r["metrics"][metric] for r in records
            if r["status"] == "ok" and r["config"]["hparams"]["lr"] == lr
            and (p is None or _power(r) == p)}


def gd_seeds(records: Mapping[str, Sequence[Mapping[str, Any]]],
             metric: str = "rec") -> dict[int, float]:
    """``{seed: metric}`` of GD's reference at the lr of :func:`gd_reference`'s selection
    (empty without one)."""
    chosen = select(records["gd_reference"], PAPER_PROTOCOL)
    if "gd" not in chosen:
        return {}
    return cell_seeds(records["gd_reference"], None, chosen["gd"].value, metric)


def dial_rule(records: Mapping[str, Sequence[Mapping[str, Any]]]
              ) -> tuple[dict[str, Any], dict[str, Comparison | None]]:
    """The dial's recovery table under the one rule, each ``p`` at the paper's selection:
    ``(numbers, comparisons)``. Numbers: how many steps of ``p`` (from 1 towards 0, RMS) the
    rule resolves (``dial_steps_resolved`` of ``dial_steps_n``), how many the paired interval
    alone puts below zero (``dial_steps_paired``), whether every seed's error falls at every
    step (``dial_seeds_fall``) and the smallest effective rank of a seed at ``p = 0``
    (``dial_p0_erank_min``). Comparisons (``a − b``): ``ends_rec``,
    ``ends_steps``, ``ends_erank`` (``p = 0`` against ``p = 1``), ``erank_gd`` (``p = 0``
    against GD's reference), ``geo_rms`` (the geometric-mean scalar against RMS at
    ``p = 0``)."""
    rows = dial_rows(records["dial_rms"], "rms")  # p from 1 down to 0

    def cell(row: Mapping[str, Any], metric: str = "rec", part: str = "dial_rms"
             ) -> dict[int, float]:
        return cell_seeds(records[part], row["p"], row["lr"], metric)

    steps = [stats.compare_seeds(cell(b), cell(a)) for a, b in zip(rows, rows[1:], strict=False)]
    per_seed = [cell(r) for r in rows]
    seeds = set.intersection(*(set(c) for c in per_seed)) if per_seed else set()
    fall = bool(seeds) and all(b[s] < a[s] for s in seeds
                               for a, b in zip(per_seed, per_seed[1:], strict=False))
    numbers = {"dial_steps_resolved": sum(c is not None and c.sign == -1 for c in steps),
               "dial_steps_paired": sum(c is not None and c.paired_n > 0
                                        and c.paired_high < 0 for c in steps),
               "dial_steps_n": len(steps), "dial_seeds_fall": fall,
               "dial_p0_erank_min": min(cell(rows[-1], "effective_rank").values(),
                                        default=math.nan) if rows else math.nan}
    first, last = (rows[0], rows[-1]) if rows else ({}, {})
    geo = {r["p"]: r for r in dial_rows(records["dial_geomean"], "geomean")}
    cmps = {
        "ends_rec": stats.compare_seeds(cell(last), cell(first)) if rows else None,
        "ends_steps": (stats.compare_seeds(cell(last, "steps"), cell(first, "steps"))
                       if rows else None),
        "ends_erank": (stats.compare_seeds(cell(last, "effective_rank"),
                                     cell(first, "effective_rank")) if rows else None),
        "erank_gd": (stats.compare_seeds(cell(last, "effective_rank"),
                                   gd_seeds(records, "effective_rank")) if rows else None),
        "geo_rms": (stats.compare_seeds(cell(geo[0.0], part="dial_geomean"), cell(last))
                    if rows and 0.0 in geo else None),
    }
    return numbers, cmps


def fixed_lr_rule(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The fixed-lr arm under the one rule: over every lr, how many steps of ``p`` (from 1
    towards 0) the rule resolves as a fall (``fixed_steps_resolved`` of ``fixed_steps_n``) and
    at how many lrs ``p = 0`` is resolved below ``p = 1`` (``fixed_ends_below``)."""
    table = fixed_lr_table(records)
    powers = table["powers"]
    resolved = ends = total = 0
    for lr in table["lrs"]:
        cells = [cell_seeds(records, p, lr) for p in powers]
        for a, b in zip(cells, cells[1:], strict=False):
            c = stats.compare_seeds(b, a)
            resolved += c is not None and c.sign == -1
            total += 1
        c = stats.compare_seeds(cells[-1], cells[0])
        ends += c is not None and c.sign == -1
    return {"fixed_steps_resolved": resolved, "fixed_steps_n": total,
            "fixed_ends_below": ends}


def lr_edge_rule(records: Sequence[Mapping[str, Any]]) -> dict[str, Comparison | None]:
    """The lr edge under the one rule (``a − b``, the seeds pair): ``change_p0`` and
    ``change_p100``, the smallest lr of the grid against the largest at ``p = 0`` and at
    ``p = 1``; ``gap``, the best ``p = 1`` cell against the best ``p = 0`` cell
    (:func:`lr_edge_numbers`); ``best_next``, the best ``p = 0`` cell against the ``p = 0``
    cell at the next larger lr."""
    numbers = lr_edge_numbers(records)
    lrs = sorted({float(r["config"]["hparams"]["lr"]) for r in records})

    def at(p: float, lr: float) -> dict[int, float]:
        return cell_seeds(records, p, lr)

    best0, best1 = numbers.get("edge_best_p0_lr"), numbers.get("edge_best_p100_lr")
    above = [lr for lr in lrs if best0 is not None and lr > best0]
    return {
        "change_p0": stats.compare_seeds(at(0.0, lrs[0]), at(0.0, lrs[-1])) if lrs else None,
        "change_p100": stats.compare_seeds(at(1.0, lrs[0]), at(1.0, lrs[-1])) if lrs else None,
        "gap": stats.compare_seeds(at(1.0, best1), at(0.0, best0)),
        "best_next": stats.compare_seeds(at(0.0, best0), at(0.0, above[0])) if above else None,
    }
