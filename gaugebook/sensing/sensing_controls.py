r"""The matrix-sensing chapter's checks of its claim: the controls (the split of Table 2 under
cosine decay for every optimizer, a larger initial scale and a second size), which claims
survive other grids and selection protocols (:data:`SURVIVAL_SETTINGS`) and the weight-decay
section (the paper's Adam ceiling, its Adam + L2 at the selected cell, beside our joint
(lr, wd) selections; the published values from ``PUBLISHED_DECAY_CEILING``, each in its own
column), from the records of :func:`gaugebook.sensing.sensing_runs.collect`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.present import stats
from gaugebook.present.tables import NBSP, Record, label, rec_lr, table_html, yes_no
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.sensing_views import (
    seed_values,
    split_numbers,
    split_rule,
    split_sides,
)
from gaugekit.optim.registry import get_spec

# --------------------------------------------------------------------------------------------
# the controls
# --------------------------------------------------------------------------------------------

def controls(records: Mapping[str, Sequence[Record]],
             config: ms.SensingConfig) -> tuple[str, dict[str, Any]]:
    """The controls table (mean rec, and the selected lr beneath it, per optimizer and
    sweep, Table 2's gate) and the numbers the text quotes: the verdict, gap, worst
    equivariant and best coordinate-wise optimizer per sweep, how often the paper's gate
    (mean over seeds below the tolerance) selects the same lr, Muon's rec and the convex
    program's largest rec at the second size. Under the one rule, per sweep
    (:func:`~gaugebook.sensing.sensing_views.split_rule`): the worst equivariant optimizer
    against the best coordinate-wise one, its numbers (``split_text_<sweep>``) and its sign
    (``split_sign_<sweep>``: +1 when the coordinate-wise one is resolved below), and the
    verdict over every pair of the two classes (``rule_<sweep>``)."""
    second = config.part("second_size").problem
    titles = {"zoo": "main sweep", "cosine_all": "cosine decay for every optimizer",
              "init_1e-2": f"initial scale {config.part('init_1e-2').problem.init_scale:g}",
              "second_size": f"second size: n = {second.n}, r = {second.r}, m = {second.m}"}
    rows = {part: ms.selection_rows(records[part]) for part in titles}
    mean_gate = {part: {r["method"]: r["lr"]
                        for r in ms.selection_rows(records[part], "oracle_mean")}
                 for part in titles}
    by_method = {part: {r["method"]: r for r in rows_} for part, rows_ in rows.items()}
    table = [{"label": label(m), **{part: rec_lr(sel[m]["rec"], sel[m]["lr"]) if m in sel
                                    else None for part, sel in by_method.items()}}
             for m in ms.TABLE2_METHODS]
    html = table_html(table, ["label", *titles],
                       headers={"label": "optimizer", **titles})
    out: dict[str, Any] = {
        "controls_same_gate": sum(r["lr"] == mean_gate[part][r["method"]]
                                  for part, rows_ in rows.items() for r in rows_),
        "controls_cells": sum(len(rows_) for rows_ in rows.values()),
    }
    for part, rows_ in rows.items():
        numbers = split_numbers(ms.split_summary(rows_))
        key = part.replace("-", "_")
        out |= {f"{k}_{key}": numbers[k] for k in ("split", "gap", "worst_eq", "best_cw")}
        rule = split_rule(seed_values(records[part], rows_), rows_)
        out |= {f"split_text_{key}": rule["text"], f"rule_{key}": rule["verdict"],
                f"split_sign_{key}": 0 if rule["cmp"] is None else rule["cmp"].sign}
    out["convex2_max"] = max(r["metrics"]["rec"] for r in records["convex_second_size"])
    out["rec2_muon"] = next(r["rec"] for r in rows["second_size"] if r["method"] == "muon")
    return html, out


# --------------------------------------------------------------------------------------------
# which claims survive (selection protocols)
# --------------------------------------------------------------------------------------------

SURVIVAL_SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("zoo", "oracle", "paper's grids, oracle (Table 2)"),
    ("zoo", "validation", "paper's grids, validation"),
    ("zoo", "train_speed", "paper's grids, train speed"),
    ("wide", "oracle", "our wide grids, oracle"),
    ("wide", "validation", "our wide grids, validation"),
    ("wide", "train_speed", "our wide grids, train speed"),
    ("cosine_all", "oracle", "cosine for all (the paper's control), oracle"),
    ("init_1e-2", "oracle", "larger init (ours, nine optimizers), oracle"),
    ("second_size", "oracle", "second size (ours, nine optimizers), oracle"),
)


def survival(records: Mapping[str, Sequence[Record]]) -> tuple[str, dict, dict[str, Any]]:
    """Which claims survive: the table (one row per sweep and protocol of
    :data:`SURVIVAL_SETTINGS`), the selection rows of each protocol on the wide grids (for
    the figure), and the counts the text quotes. The table's gap is printed to the digits its
    interval supports; its column "the rule" is the verdict of
    :func:`~gaugebook.sensing.sensing_views.split_rule` with its counts of pairs. The counts:
    settings whose means keep the split (``n_clean``), whose pairs all resolve it
    (``n_rule_holds``) or some resolve it the other way (``n_rule_fails``), and where the
    worst equivariant and the best coordinate-wise optimizer are told apart, among the settings
    whose means keep the split (``n_clean_resolved``) and those whose means break it
    (``n_broken_resolved``)."""
    summary, protocol_rows = [], {}
    for part, protocol, title in SURVIVAL_SETTINGS:
        sel = ms.selection_rows(records[part], protocol)
        if part == "wide":
            protocol_rows[protocol.replace("_", " ")] = sel
        s = ms.split_summary(sel)
        worst_eq, best_cw = split_sides(s, lambda x: f"{x:.3g}", NBSP)
        rule = split_rule(seed_values(records[part], sel), sel)
        half = rule["cmp"].half_width if rule["cmp"] is not None else math.inf
        summary.append({
            "setting": title, "worst_eq": worst_eq, "best_cw": best_cw,
            "gap": stats.fmt_spread(s["gap"], half, signed=True),
            "clean": yes_no(s["clean"]), "rule": f"{rule['verdict']} ({rule['counts']})",
            "verdict": rule["verdict"],
            "gap_resolved": rule["cmp"] is not None and rule["cmp"].sign != 0,
            "edges": f"{s['at_grid_edge']}/{s['methods']}",
            "not_interp": s["not_interpolated"],
        })
    html = table_html(
        summary, ["setting", "worst_eq", "best_cw", "gap", "clean", "rule", "edges",
                  "not_interp"],
        headers={"worst_eq": "worst equivariant",
                 "best_cw": "best coordinate-wise", "gap": "gap",
                 "clean": "split (means)",
                 "rule": "split (rule)",
                 "edges": "at edge",
                 "not_interp": "not interp."})
    honest = [r for r in summary if "oracle" not in r["setting"]]
    zoo = ms.selection_rows(records["zoo"], "oracle")
    val = ms.selection_rows(records["zoo"], "validation")
    counts = {
        "n_clean": sum(r["clean"] == "yes" for r in summary),
        "n_settings": len(summary),
        "n_clean_honest": sum(r["clean"] == "yes" for r in honest),
        "n_honest": len(honest),
        "same_choice": sum(a["lr"] == b["lr"] for a, b in zip(zoo, val, strict=True)),
        "n_rule_holds": sum(r["verdict"] == "holds" for r in summary),
        "n_rule_fails": sum(r["verdict"] == "fails" for r in summary),
        # where the means keep the split, is its closest pair resolved? where they break it?
        "n_clean_resolved": sum(r["gap_resolved"] for r in summary if r["clean"] == "yes"),
        "n_broken_resolved": sum(r["gap_resolved"] for r in summary if r["clean"] == "no"),
    }
    return html, protocol_rows, counts


# --------------------------------------------------------------------------------------------
# weight decay
# --------------------------------------------------------------------------------------------

#: The two gates of the weight-decay table, in two words each (the caption says them in full).
GATE_WORDS: dict[str, str] = {"oracle_mean": "paper's", "oracle_loose": "loose"}


def _decay_rows(decay: Sequence[Record]) -> list[dict[str, Any]]:
    pub = ms.PUBLISHED_DECAY_CEILING
    rows = []
    for gate in GATE_WORDS:
        for r in ms.decay_rows(decay, gate):
            rows.append({**r, "gate": gate, "gate_word": GATE_WORDS[gate],
                         "pub": pub["rec"] if r["arm"] == pub["arm"]
                         and gate == "oracle_mean" else None,
                         "cell": f"{r['lr']:g}{NBSP}·{NBSP}{r['wd']:g}" if r["lr"] else None})
    return rows


def decay_html(decay: Sequence[Record]) -> str:
    """The weight-decay selections: per gate (in two words, :data:`GATE_WORDS`) and arm, the
    chosen (lr, wd), the mean rec beside the published ceiling, effective rank, steps."""
    return table_html(
        _decay_rows(decay), ["gate_word", "label", "cell", "rec", "pub", "effective_rank",
                             "steps"],
        headers={"gate_word": "gate", "label": "rule and decay", "cell": "lr · wd",
                 "rec": "rec", "pub": "rec, paper", "effective_rank": "erank",
                 "steps": "steps"},
        formats={"rec": ".3g", "pub": ".4f", "effective_rank": ".1f", "steps": ".0f"})


def _seed_rows(decay: Sequence[Record]) -> list[dict[str, Any]]:
    pub = ms.PUBLISHED_DECAY_CEILING
    return [{"seed": r["config"]["seed"], "rec": r["metrics"]["rec"],
             "pub": pub["seeds"].get(r["config"]["seed"]),
             "train": r["metrics"]["train_loss"], "steps": r["metrics"]["steps"]}
            for r in ms.decay_runs(decay, pub["arm"], pub["lr"], pub["wd"])]


def decay_numbers(decay: Sequence[Record], tol: float) -> dict[str, Any]:
    """The numbers the weight-decay section quotes (glue names as keys): the published ceiling
    (``decay_pub_rec``, ``_lr``, ``_wd``, ``decay_steps``); at the paper's cell, the largest
    gap between our seeds and the published ones, the largest final training loss and how
    many seeds end at or above ``tol``; per arm, the selection under the paper's gate
    (``decay_<arm>_rec``, ``_lr``, ``_wd``; ``nan`` without one), the largest of the
    equivariant arms and the smallest of the coordinate-wise ones; the lowest recovery error
    and the lowest final training loss of Adam and GD with the strongest penalty; and how
    many selections sit at an edge of a grid (``decay_edges``, ``"k of n"``)."""
    nan = float("nan")
    pub = ms.PUBLISHED_DECAY_CEILING
    rows = _decay_rows(decay)
    seeds = _seed_rows(decay)
    out: dict[str, Any] = {
        "decay_pub_rec": pub["rec"], "decay_pub_lr": pub["lr"], "decay_pub_wd": pub["wd"],
        "decay_steps": pub["num_steps"],
        "decay_seed_gap": max((abs(r["rec"] - r["pub"]) for r in seeds
                               if r["pub"] is not None), default=nan),
        "decay_cell_loss_max": max((r["train"] for r in seeds), default=nan),
        "decay_cell_above": sum(not r["train"] < tol for r in seeds),
    }
    strict = [r for r in rows if r["gate"] == "oracle_mean"]
    for r in strict:
        chosen = r["lr"] is not None
        out |= {f"decay_{r['arm']}_rec": r["rec"] if chosen else nan,
                f"decay_{r['arm']}_lr": r["lr"] if chosen else nan,
                f"decay_{r['arm']}_wd": r["wd"] if chosen else nan}
    chosen = [r for r in strict if r["lr"] is not None]
    out["decay_eq_max"] = max((r["rec"] for r in chosen if r["equivariant"]), default=nan)
    out["decay_cw_min"] = min((r["rec"] for r in chosen if not r["equivariant"]), default=nan)
    strong = [r["metrics"] for r in decay if r["config"].get("wd") == max(ms.DECAY_WDS)
              and r["config"]["arm"] in ("adam_l2", "gd_l2") and r["status"] == "ok"]
    out["decay_strong_min"] = min((m["rec"] for m in strong), default=nan)
    out["decay_strong_train"] = min((m["train_loss"] for m in strong), default=nan)
    out["decay_edges"] = f"{sum(r['at_grid_edge'] for r in rows)} of {len(rows)}"
    return out


def decay_values(decay: Sequence[Record], tol: float) -> dict[str, Any]:
    """The section's tables (``tab_decay``; ``tab_decay_seeds``: Adam + L2 at the paper's
    selected cell, seed by seed, beside the published values) and its numbers
    (:func:`decay_numbers`)."""
    seeds = table_html(
        _seed_rows(decay), ["seed", "rec", "pub", "train", "steps"],
        headers={"rec": "rec", "pub": "rec, paper", "train": "final training loss"},
        formats={"rec": ".3f", "pub": ".3f", "train": ".1e"})
    return {"tab_decay": decay_html(decay), "tab_decay_seeds": seeds,
            **decay_numbers(decay, tol)}


def decay_comparisons(decay: Sequence[Record],
                      zoo: Sequence[Record]) -> dict[str, stats.Comparison | None]:
    """The weight-decay section's comparisons under the one rule, each arm at its selection
    under the paper's gate (:func:`~gaugebook.sensing.sensing_runs.decay_rows`), seed by seed.
    The decay part runs the main sweep's problem, so a seed gives the same instance and start
    there and in Table 2, and the runs pair. Keys: ``adam_l2_adam`` (Adam + L2 − Adam without
    decay), ``gd_l2_gd`` (GD + L2 − GD without), and ``<eq arm>_<cw arm>`` for every
    equivariant arm against each coordinate-wise one (``None`` where an arm has no
    selection)."""
    arms = {r["arm"]: r for r in ms.decay_rows(decay)}

    def runs(arm: str) -> dict[int, float] | None:
        r = arms.get(arm)
        if r is None or r["lr"] is None:
            return None
        return {x["config"]["seed"]: x["metrics"]["rec"]
                for x in ms.decay_runs(decay, arm, r["lr"], r["wd"]) if x["status"] == "ok"}

    table2 = seed_values(zoo, ms.selection_rows(zoo, "oracle"))
    out = {"adam_l2_adam": stats.compare_seeds(runs("adam_l2"), table2.get("adam")),
           "gd_l2_gd": stats.compare_seeds(runs("gd_l2"), table2.get("gd"))}
    eq = [a for a, d in ms.DECAY_ARMS.items() if get_spec(d.method).equivariant]
    cw = [a for a in ms.DECAY_ARMS if a not in eq]
    for a in eq:
        for b in cw:
            out[f"{a}_{b}"] = stats.compare_seeds(runs(a), runs(b))
    return out

