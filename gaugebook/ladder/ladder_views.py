r"""What the scaling chapter shows, computed from the ladder's records
(:func:`gaugebook.ladder.ladder_runs.collect`): tables, the numbers its text quotes and checks,
figures, and the values the page glues (``*_values``). Our numbers come from the selections of
:func:`~gaugebook.ladder.ladder_runs.size_rows`, the published ones from the constants of
:mod:`gaugebook.ladder.ladder_runs` (set beside ours by :mod:`gaugebook.ladder.ladder_paper`,
as is the matrix-sensing zoo's protocol at ``n = 40``), each in its own column or panel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from gaugebook.engine import selection
from gaugebook.engine.collection import run_command
from gaugebook.ladder import ladder_paper
from gaugebook.ladder import ladder_runs as ladder
from gaugebook.ladder.ladder_paper import Records
from gaugebook.present import viz
from gaugebook.present.tables import as_markdown as md
from gaugebook.present.tables import fmt, formatter, gauge_class, label, yes_no
from gaugebook.sensing.sensing_views import split_sides
from gaugekit.optim.registry import get_spec

Info = Sequence[Mapping[str, Any]]

#: The paper's ladder claims (:func:`gaugebook.ladder.ladder_paper.claims`) in words.
CLAIM_TEXT: dict[str, str] = {
    "muon_exact": f"Muon recovers exactly (mean rec < {ladder.EXACT_REC:g})",
    "signum_exact": "signum (cosine-annealed) recovers exactly",
    "clean_split": "every equivariant optimizer below every coordinate-wise one",
    "adam_worst_of_three": "Adam worse than GD and shared-scale Adam",
}
_POINT = {"size": "n = {:g}", "rank": "r = {:g}", "mdof": "m/dof = {:g}"}


def _note_table(text: str) -> str:
    """A one-cell table saying why a table of the chapter is empty at this scale (a figure of
    the page keeps a table in it)."""
    return viz.table_html([{"at this scale": text}], ["at this scale"])


def _seeds(k: int) -> str:
    return f"{k} seed{'s' * (k != 1)}"


# --------------------------------------------------------------------------------------------
# recovery: tables and the figure
# --------------------------------------------------------------------------------------------


def rec_table(info: Info, arm: str) -> str:
    """Mean rec at the selected lr, one row per optimizer and one column per recorded point of
    the arm (its seeds in the header); ``*`` marks a selection at a grid edge, ``incomplete``
    an optimizer with only part of its grid recorded there."""
    points = [row for row in info if row["runs"]]
    rows = []
    for m in ladder.LADDER_METHODS:
        out = {"optimizer": label(m), "class": gauge_class(get_spec(m).equivariant)}
        for row in points:
            sel = row["rows"].get(m)
            out[row["part"]] = ("incomplete" if m in row["incomplete"] else "—" if sel is None
                                else fmt(sel["rec"], "rec3") + "*" * bool(sel["at_grid_edge"]))
        rows.append(out)
    headers = {row["part"]: _POINT[arm].format(row["value"]) + f" ({_seeds(len(row['seeds']))})"
               for row in points}
    return viz.table_html(rows, ["optimizer", "class", *headers], headers=headers)


def recovery_figure(sizes: Info) -> Figure:
    """Recovery error against ``n``, ours (left: the sizes with records, values below 1e-7
    drawn at 1e-7) beside the paper's Table 11 (right: its sizes; a printed 0.0000, a mean
    below 5e-5, drawn at 5e-5), the same colour and marker per optimizer in both panels and
    one legend under them. ``sizes``: :func:`~gaugebook.ladder.ladder_runs.size_rows` of the
    size arm."""
    ran = [row for row in sizes if row["runs"]]
    fig, (ours, paper) = plt.subplots(1, 2, figsize=(7.0, 4.0), sharey=True,
                                      layout="constrained")
    x = [row["n"] for row in ran]
    methods = ladder.LADDER_METHODS
    values = {m: [(row["rows"].get(m) or {}).get("rec") for row in ran] for m in methods}
    viz.value_curves(x, values, ax=ours, legend=False, floor=1e-7)
    pub = ladder.PUBLISHED_LADDER_REC
    px = sorted({n for v in pub.values() for n in v})
    pvalues = {m: [pub.get(m, {}).get(n) for n in px] for m in methods}
    viz.value_curves(px, pvalues, ax=paper, legend=False, floor=5e-5, ylabel="")
    ours.set_title("ours (mean over the recorded seeds)")
    paper.set_title("published (Table 11)")
    paper.axhline(5e-5, color="0.6", lw=0.8, ls=":")
    paper.text(0.98, 5e-5 * 1.5, "printed 0.0000", ha="right", va="bottom", fontsize=8,
               color="0.4", transform=paper.get_yaxis_transform())
    viz.legend_below(fig, ours, paper, ncol=5)
    return fig


def published_table(compared: Sequence[Mapping[str, Any]]) -> str:
    """Ours beside the paper's Table 11, one row per optimizer and one column per point
    (:func:`~gaugebook.ladder.ladder_paper.comparison_rows`, one arm or several): each cell is
    ``ours / published``, the header names the point and the seeds behind the two means."""
    points: dict[tuple[str, float], str] = {}
    cells: dict[str, dict[tuple[str, float], str]] = {}
    for c in compared:
        key = (c["arm"], c["value"])
        points.setdefault(key, _POINT[c["arm"]].format(c["value"])
                          + f", seeds {c['seeds']} / {c['published_seeds']}")
        cells.setdefault(c["method"], {})[key] = f"{fmt(c['ours'], 'rec4')} / {c['published']:.4f}"
    if not cells:
        return _note_table("none of the points with records here is one of the paper's, so "
                           "nothing is set beside Table 11")
    order = [m for m in ladder.LADDER_METHODS if m in cells]
    rows = [{"optimizer": label(m), **{points[k]: v for k, v in cells[m].items()}}
            for m in order]
    return viz.table_html(rows, ["optimizer", *points.values()])


# --------------------------------------------------------------------------------------------
# protocols
# --------------------------------------------------------------------------------------------


def protocol_table(config: ladder.LadderConfig, records: Records, ran: Info,
                   gate: str) -> str:
    """The paper's ladder protocol (:data:`~gaugebook.ladder.ladder_runs.PAPER_LADDER_PROTOCOL`)
    beside ours: seeds, selection, gate, schedules, grid rounding, budget, precision and
    device."""
    p = ladder.PAPER_LADDER_PROTOCOL
    part0 = config.arm("size")[0]
    cosine = sorted(m for m in ladder.LADDER_METHODS if part0.schedule(m) == "cosine")
    devices = sorted({r["device"] for part in records.values() for r in part})
    steps = sorted({f"{q.budget.num_steps:,}" for q in config.arm("size")})
    rows = [
        {"item": "seeds per size", "paper": p["seeds"],
         "ours": ", ".join(f"{len(row['seeds'])} at n = {row['n']}" for row in ran) or "none"},
        {"item": "selection seeds", "paper": ", ".join(map(str, p["selection_seeds"])),
         "ours": "the recorded seeds (a subset of 42, 123, 456)"},
        {"item": "selection gate", "paper": selection.PROTOCOLS[p["protocol"]].gate_text,
         "ours": selection.PROTOCOLS[gate].gate_text},
        {"item": "cosine decay for", "paper": ", ".join(label(m) for m in sorted(p["cosine"])),
         "ours": ", ".join(label(m) for m in cosine)},
        {"item": "scaled lr grid rounded to", "paper": p["lr_rounding"],
         "ours": "3 significant digits"},
        {"item": "budget (steps)", "paper": f"{p['num_steps']:,}", "ours": ", ".join(steps)},
        {"item": "precision, device", "paper": f"{p['dtype']}, {p['device']}",
         "ours": f"{part0.dtype}, " + (", ".join(devices) or "—")},
    ]
    return viz.table_html(rows, ["item", "paper", "ours"])


def record_table(rec96: Sequence[Mapping[str, Any]]) -> str:
    """Seed 42 at n = 96 run for run (:func:`~gaugebook.ladder.ladder_paper.record_comparison`):
    our lr, schedule and rec beside the paper's record's, and their relative difference."""
    rows = [{**r, "label": label(r["method"])} for r in rec96]
    if not rows:
        return _note_table("no record of seed 42 at n = 96: the part is the paper scale's")
    return viz.table_html(
        rows, ["label", "lr", "schedule", "ours", "paper_lr", "paper_schedule", "paper",
               "rel_diff"],
        headers={"label": "optimizer", "lr": "lr (ours)", "schedule": "schedule (ours)",
                 "ours": "rec, seed 42 (ours)", "paper_lr": "lr (paper's record)",
                 "paper_schedule": "schedule (paper)", "paper": "rec, seed 42 (paper's record)",
                 "rel_diff": "relative difference"},
        formats={"lr": "g", "paper_lr": ".6g", "ours": "rec3", "paper": "rec3",
                 "rel_diff": ".1e"})


# --------------------------------------------------------------------------------------------
# the paper's claims
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# the page's values (glued by the chapter through gaugebook.present.viz.glue_page)
# --------------------------------------------------------------------------------------------


def published_values(config: ladder.LadderConfig, gate: str) -> dict[str, Any]:
    """The largest size and its free fraction ``(n² − m)/n²``, the paper's Table 11 means
    (``pub_<method>_<n>``), the gate in words (for a caption), the paper's seeds (``pub_seeds``
    at most sizes, ``pub_seeds_canary`` at n = 40, ``pub_seeds_arms``) and printed digits."""
    big = config.arm("size")[-1].problem
    values: dict[str, Any] = {"ladder_big_n": big.n,
                              "ladder_big_free": (big.n ** 2 - big.m) / big.n ** 2}
    for m, points in ladder.PUBLISHED_LADDER_REC.items():
        values |= {f"pub_{m}_{n}": value for n, value in points.items()}
    values["gate_text"] = md(selection.PROTOCOLS[gate].gate_text)
    seeds = ladder.PUBLISHED_LADDER_SEEDS
    return values | {"pub_seeds": max(seeds.values()), "pub_seeds_canary": seeds[40],
                     "pub_seeds_arms": ladder.PUBLISHED_ARM_SEEDS,
                     "pub_digits": ladder.PUBLISHED_LADDER_DIGITS}


def settings_values(config: ladder.LadderConfig, records: Records, info: Info
                    ) -> dict[str, Any]:
    """The settings table (``tab_ladder_settings``): one row per part of ``info``
    (:func:`~gaugebook.ladder.ladder_runs.size_rows` of the arms, concatenated), its sizes and
    budget, the seeds and runs recorded, the device and the sum of the runs' shares of their
    batch time; the parts recorded with every seed, with some and with none, and the runs
    planned."""
    rows = []
    for row in info:
        recs = records.get(row["part"], [])
        left_out = "".join(f" ({s} in part, left out)" for s in row["partial_seeds"])
        rows.append({
            **row, "seeds_text": (", ".join(map(str, row["seeds"])) or "none") + left_out,
            "runs_text": f"{row['runs']} / {row['planned']}",
            "device": ", ".join(sorted({r["device"] for r in recs})) or "—",
            "batch_s": sum(r.get("wall_time_s") or 0.0 for r in recs) or None,
        })
    parts = {"done": [r["part"] for r in rows if r["complete"]],
             "partial": [f"{r['part']} (seeds {r['seeds_text']})" for r in rows
                         if r["runs"] and not r["complete"]],
             "missing": [r["part"] for r in rows if not r["runs"]]}
    seeds = len(config.parts[0].seeds)
    return {
        "tab_ladder_settings": viz.table_html(
            rows, ["part", "n", "r", "m", "steps", "dtype", "seeds_text", "runs_text", "device",
                   "batch_s"],
            headers={"seeds_text": "seeds recorded", "runs_text": "runs recorded / planned",
                     "batch_s": "batch time (s)"},
            formats={"batch_s": ".0f"}),
        **{f"ladder_parts_{k}": md(", ".join(v) or "none") for k, v in parts.items()},
        "ladder_methods": len(ladder.LADDER_METHODS),
        "ladder_runs_per_seed": len(config.part(info[0]["part"]).specs()) // seeds,
        "ladder_seeds_planned": seeds,
    }


def recovery_values(config: ladder.LadderConfig, sizes: Info, arms: Mapping[str, Info]
                    ) -> dict[str, Any]:
    """The recovery table of the sizes, Table 11 beside ours (sizes; the two arms), how many
    published values have a record here of how many, and where our seeds are the paper's:
    how many of those means equal the published ones to the printed digits
    (``ladder_same_n`` of ``ladder_same_total``), at which points (``ladder_same_where``,
    e.g. ``"n = 40"``), which methods do not (``ladder_off_methods``, comma-separated keys) and
    the first of them, ours and published (``ladder_off_ours``, ``ladder_off_pub``)."""
    compared = {arm: ladder_paper.comparison_rows(config, info)
                for arm, info in (("size", sizes), *arms.items())}
    everything = [c for rows in compared.values() for c in rows]
    tables = (ladder.PUBLISHED_LADDER_REC, ladder.PUBLISHED_LADDER_RANK,
              ladder.PUBLISHED_LADDER_MDOF)
    same = [c for c in everything if c["seeds"] == c["published_seeds"]]
    digits = ladder.PUBLISHED_LADDER_DIGITS
    off = [c for c in same if round(c["ours"], digits) != round(c["published"], digits)]
    return {
        "tab_ladder_rec": rec_table(sizes, "size"),
        "tab_ladder_published": published_table(compared["size"]),
        "tab_ladder_published_arms": published_table([*compared["rank"], *compared["mdof"]]),
        "ladder_pub_compared": len(everything),
        "ladder_pub_total": sum(len(v) for table in tables for v in table.values()),
        "ladder_same_n": len(same) - len(off), "ladder_same_total": len(same),
        "ladder_same_where": ", ".join(dict.fromkeys(
            _POINT[c["arm"]].format(c["value"]) for c in same)),
        "ladder_off_methods": ", ".join(c["method"] for c in off),
        "ladder_off_ours": off[0]["ours"] if off else math.nan,
        "ladder_off_pub": off[0]["published"] if off else math.nan,
    }


def gate_changes(config: ladder.LadderConfig, records: Records, ran: Info
                 ) -> list[dict[str, Any]]:
    """Every selection of ``ran`` (the ladder's gate) that Table 2's stricter gate changes:
    ``method``, ``n``, the rate and mean rec under the ladder's gate (``lr``, ``rec``) and
    under Table 2's (``lr_t2``, ``rec_t2``)."""
    strict = {row["n"]: row["rows"]
              for row in ladder.size_rows(config, records, "size", "oracle")}
    changed = []
    for row in ran:
        for m, sel in row["rows"].items():
            old = strict[row["n"]].get(m)
            if old is not None and old["lr"] != sel["lr"]:
                changed.append({"method": m, "n": row["n"], "lr": sel["lr"], "rec": sel["rec"],
                                "lr_t2": old["lr"], "rec_t2": old["rec"]})
    return changed


def protocol_values(config: ladder.LadderConfig, records: Records, ran: Info, gate: str
                    ) -> dict[str, Any]:
    """The protocols table; the selections Table 2's gate would change (``gate_changes``, how
    many; the first as ``gate_method``, ``gate_n``, ``gate_lr``, ``gate_lr_t2``, ``gate_rec``,
    ``gate_rec_t2``); seed 42 at ``n = 96`` run for run: the table, how many of its
    ``rec96_total`` optimizers have the paper's schedule (``rec96_same``), the largest relative
    difference among them where the error is not exact recovery (``rec96_worst``), GD's rec,
    ours and the record's (``rec96_gd``, ``rec96_gd_paper``), the seeds behind our n = 96 mean
    and the paper's (``rec96_seeds``, ``pub_seeds_96``), and RMSProp's rec decayed and at the
    paper's constant step (``rms96_ours``, ``rms96_paper``). NaN where there is no record."""
    changed = gate_changes(config, records, ran)
    first = changed[0] if changed else {}
    rec96 = ladder_paper.record_comparison(records.get("n96", []))
    same = [r for r in rec96 if r["schedule"] == r["paper_schedule"]]
    gd = next((r for r in rec96 if r["method"] == "gd"), {})
    rms = next((r for r in rec96 if r["method"] == "rmsprop"), {})
    return {
        "tab_ladder_protocols": protocol_table(config, records, ran, gate),
        "gate_changes": len(changed), "gate_method": first.get("method", "—"),
        "gate_n": first.get("n", 0),
        **{f"gate_{k}": first.get(k, math.nan) for k in ("lr", "lr_t2", "rec", "rec_t2")},
        "tab_ladder_record": record_table(rec96),
        "rec96_total": len(rec96), "rec96_same": len(same),
        "rec96_worst": max((r["rel_diff"] for r in same if r["paper"] > 1e-3),
                           default=math.nan),
        "rec96_gd": gd.get("ours", math.nan), "rec96_gd_paper": gd.get("paper", math.nan),
        "rec96_seeds": next((len(row["seeds"]) for row in ran if row["n"] == 96), 0),
        "pub_seeds_96": ladder.PUBLISHED_LADDER_SEEDS[96],
        "rms96_ours": rms.get("ours", math.nan), "rms96_paper": rms.get("paper", math.nan),
    }


def survival(config: ladder.LadderConfig, ran: Info) -> dict[str, tuple[list[int], list[int]]]:
    """Where each of the paper's ladder claims (:data:`CLAIM_TEXT`) agrees with ours: per claim
    the sizes of ``ran`` where our records say what the paper found and those where they do
    not, only the paper's own sizes and setting counting."""
    out = {}
    for claim in CLAIM_TEXT:
        agree, disagree = [], []
        for row in ran:
            value = ladder_paper.claims(row["rows"])[claim]
            expected = ladder_paper.published_expectation(config.part(row["part"]), claim)
            if expected is not None and value is not None:
                (agree if value == expected else disagree).append(row["n"])
        out[claim] = (agree, disagree)
    return out


def _sizes_text(ns: Sequence[int]) -> str:
    """``n = 40, 64 and 96``."""
    ns = [str(n) for n in ns]
    if not ns:
        return "none"
    return "n = " + (ns[0] if len(ns) == 1 else ", ".join(ns[:-1]) + " and " + ns[-1])


def coverage_values(config: ladder.LadderConfig, ran: Info) -> dict[str, Any]:
    """What our records cover of the paper's ladder: the paper's sizes (``ladder_pub_range``,
    ``n = 40 to 384``), the sizes with records here (``ladder_ran``) and their seeds
    (``ladder_ran_seeds``), the largest (``ladder_ran_max``), and the paper's sizes without a
    record here (``ladder_not_run``; ``ladder_not_run_list`` as numbers)."""
    paper = sorted(ladder.PUBLISHED_LADDER_SEEDS)
    ns = [row["n"] for row in ran]
    missing = [n for n in paper if n not in ns]
    words = {1: "one", 2: "two", 3: "three"}
    by_count: dict[int, list[int]] = {}
    for row in ran:
        by_count.setdefault(len(row["seeds"]), []).append(row["n"])
    seeds = "; ".join(f"{words.get(k, k)} seed{'s' * (k != 1)} at {_sizes_text(v)}"
                      for k, v in sorted(by_count.items(), reverse=True))
    return {"ladder_pub_range": f"n = {paper[0]} to {paper[-1]}",
            "ladder_ran": _sizes_text(ns), "ladder_ran_seeds": seeds or "none",
            "ladder_ran_max": max(ns, default=0), "ladder_not_run": _sizes_text(missing),
            "ladder_not_run_list": missing}


def rule_claims(records: Records, ran: Info) -> dict[int, dict[str, Any]]:
    """The paper's comparative ladder claims under the one rule, per size of ``ran`` (pairs by
    seed, 95 % intervals; :mod:`gaugebook.ladder.ladder_paper`): the clean split's reading
    (``split``, :func:`~gaugebook.ladder.ladder_paper.split_by_rule`), Adam against GD and
    shared-scale Adam (``adam``: method → comparison, positive: Adam worse) and signum against
    each equivariant rule but Muon (``signum``: method → comparison, negative: signum
    better), and the seeds behind them."""
    out = {}
    for row in ran:
        recs, rows, seeds = records.get(row["part"], []), row["rows"], row["seeds"]
        eq = [m for m, r in rows.items() if r["equivariant"] and m != "muon"]
        out[row["n"]] = {
            "seeds": len(seeds),
            "split": ladder_paper.split_by_rule(recs, rows, seeds),
            "adam": {m: ladder_paper.method_comparison(recs, rows, "adam", m, seeds)
                     for m in ("gd", "scalar_adam")},
            "signum": {m: ladder_paper.method_comparison(recs, rows, "signum", m, seeds)
                       for m in eq},
        }
    return out


def rule_values(rule: Mapping[int, Mapping[str, Any]]) -> dict[str, str]:
    """The comparisons of :func:`rule_claims` the page quotes: Adam against GD and
    shared-scale Adam at each of the paper's sizes (``adam_<method>_<n>``; a dash where no
    record is)."""
    values = {f"adam_{m}_{n}": "—" for n in ladder.PUBLISHED_LADDER_SEEDS
              for m in ("gd", "scalar_adam")}
    for n, v in rule.items():
        values |= {f"adam_{m}_{n}": c.text() for m, c in v["adam"].items() if c is not None}
    return values


def claims_values(config: ladder.LadderConfig, ran: Info) -> dict[str, Any]:
    """The claims table: the paper's ladder claims (its words) and the same statements on our
    records at each size with records; and our mean rec and its worst seed per method and
    size (``ours_<method>_<n>``, ``worst_<method>_<n>``) for the text. Where each claim
    agrees with the paper is :func:`survival`."""
    rows = []
    for claim, text in CLAIM_TEXT.items():
        out = {"claim": text, "published": ladder.PUBLISHED_LADDER_CLAIMS[claim]}
        for row in ran:
            c = ladder_paper.claims(row["rows"])
            value = c[claim]
            detail = ""
            if claim in ("muon_exact", "signum_exact"):
                detail = fmt(row["rows"].get(claim.split("_")[0], {}).get("rec"), "rec3")
            elif claim == "clean_split" and c["split"] is not None:
                eq, cw = split_sides(c["split"], formatter("rec3"))
                detail = f"worst eq. {eq}, best c.-w. {cw}"
            out[f"n{row['n']}"] = (f"{yes_no(value)} ({detail})" if detail and value is not None
                                   else yes_no(value))
        rows.append(out)
    values: dict[str, Any] = {"tab_ladder_claims": viz.table_html(
        rows, ["claim", "published", *[f"n{row['n']}" for row in ran]],
        headers={"published": "published (n = 40 … 384)",
                 **{f"n{row['n']}": f"ours, n = {row['n']}" for row in ran}})}
    for n in ladder.PUBLISHED_LADDER_SEEDS:  # the paper's sizes, NaN without a record
        values |= {f"{k}_{m}_{n}": math.nan for k in ("ours", "worst")
                   for m in ladder.LADDER_METHODS}
    for row in ran:
        for m, sel in row["rows"].items():
            seeds = [x for x in sel.get("rec_seeds") or [] if x is not None]
            values |= {f"ours_{m}_{row['n']}": math.nan if sel["rec"] is None else sel["rec"],
                       f"worst_{m}_{row['n']}": max(seeds, default=math.nan)}
    return values


def arm_table(config: ladder.LadderConfig, info: Info, arm: str) -> str:
    """The arm's recovery table, or, while none of its parts has records, the command that
    makes each."""
    if any(row["runs"] for row in info):
        return rec_table(info, arm)
    missing = [{"part": p.name, "value": p.value, "records": "none yet",
                "command": run_command("ladder", config.scale, [p.name])}
               for p in config.arm(arm)]
    return viz.table_html(missing, ["part", "value", "records", "command"],
                          formats={"value": "g"})


def arm_values(config: ladder.LadderConfig, arms: Mapping[str, Info]) -> dict[str, Any]:
    """The two arms' tables (``tab_ladder_rank``, ``tab_ladder_mdof``) and their size."""
    return {**{f"tab_ladder_{arm}": arm_table(config, arms[arm], arm) for arm in ("rank", "mdof")},
            "arm_n": config.arm("rank")[0].problem.n}
