r"""What the scaling chapter shows, computed from the ladder's records
(:func:`gaugekit.experiments.ladder.collect`) and, for the comparison at ``n = 40``, from the
matrix-sensing zoo's (:func:`gaugekit.experiments.matrix_sensing.collect`): tables as HTML
through :func:`gaugekit.report.viz.table_html`, sentences computed from the records, and figures.

Nothing here is typed in: our numbers come from the selections of
:func:`~gaugekit.experiments.ladder.size_rows`, the published ones from the constants of
:mod:`gaugekit.experiments.ladder` and :mod:`gaugekit.experiments.matrix_sensing`, each in its
own column or panel. Optimizers have the book's colours (:func:`gaugekit.report.viz.method_color`).
"""

# Developer note (layers, DESIGN.md): beside floor 3 (reads records, draws for the book).

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit._extras import require_extra

require_extra("gaugekit.report.ladder", "experiments", "matplotlib")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from gaugekit.experiments import ladder
from gaugekit.experiments import matrix_sensing as ms
from gaugekit.optim.registry import get_spec
from gaugekit.report import viz
from gaugekit.runs import selection

__all__ = [
    "CLAIM_TEXT",
    "agreement_text",
    "claims_table",
    "fmt_rec",
    "label",
    "n40_protocols",
    "protocol_table",
    "published_table",
    "rec_table",
    "record_table",
    "record_text",
    "recovery_figure",
    "settings_rows",
    "sizes_text",
    "survival_text",
]

Records = Mapping[str, Sequence[Mapping[str, Any]]]
Info = Sequence[Mapping[str, Any]]

#: The paper's ladder claims (:func:`gaugekit.experiments.ladder.claims`) in words.
CLAIM_TEXT: dict[str, str] = {
    "muon_exact": f"Muon recovers exactly (mean rec < {ladder.EXACT_REC:g})",
    "signum_exact": "signum (cosine-annealed) recovers exactly",
    "clean_split": "every equivariant optimizer below every coordinate-wise one",
    "adam_worst_of_three": "Adam worse than GD and shared-scale Adam",
}
_POINT = {"size": "n = {:g}", "rank": "r = {:g}", "mdof": "m/dof = {:g}"}


def label(method: str) -> str:
    """The registry's label of ``method``."""
    return get_spec(method).label


def fmt_rec(x: float | None) -> str:
    """Three decimals, or ``3.3e-6`` (no padded exponent, so narrow cells do not wrap); an em
    dash for ``None`` or a non-finite value."""
    if x is None or not math.isfinite(x):
        return "—"
    if x >= 1e-3:
        return f"{x:.3f}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _rec4(x: float) -> str:
    return f"{x:.4f}" if x >= 1e-3 else fmt_rec(x)


def _note_table(text: str) -> str:
    """A one-cell table saying why a table of the chapter is empty at this scale (a figure of
    the page keeps a table in it)."""
    return viz.table_html([{"at this scale": text}], ["at this scale"])


def _seeds(k: int) -> str:
    return f"{k} seed{'s' * (k != 1)}"


# --------------------------------------------------------------------------------------------
# what was run
# --------------------------------------------------------------------------------------------


def settings_rows(records: Records, info: Info) -> list[dict[str, Any]]:
    """One row per part of ``info`` (:func:`~gaugekit.experiments.ladder.size_rows` of the
    arms, concatenated): its sizes and budget, the seeds and runs recorded, the device and the
    sum of the runs' shares of their batch time."""
    out = []
    for row in info:
        recs = records.get(row["part"], [])
        left_out = "".join(f" ({s} in part, left out)" for s in row["partial_seeds"])
        out.append({
            **row, "seeds_text": (", ".join(map(str, row["seeds"])) or "none") + left_out,
            "runs_text": f"{row['runs']} / {row['planned']}",
            "device": ", ".join(sorted({r["device"] for r in recs})) or "—",
            "batch_s": sum(r.get("wall_time_s") or 0.0 for r in recs) or None,
        })
    return out


# --------------------------------------------------------------------------------------------
# recovery: tables and the figure
# --------------------------------------------------------------------------------------------


def rec_table(info: Info, arm: str, methods: Sequence[str] = ladder.LADDER_METHODS) -> str:
    """Mean rec at the selected lr, one row per optimizer and one column per recorded point of
    the arm (its seeds in the header); ``*`` marks a selection at a grid edge, ``incomplete``
    an optimizer with only part of its grid recorded there."""
    points = [row for row in info if row["runs"]]
    rows = []
    for m in methods:
        out = {"optimizer": label(m),
               "class": "equivariant" if get_spec(m).equivariant else "coordinate-wise"}
        for row in points:
            sel = row["rows"].get(m)
            out[row["part"]] = ("incomplete" if m in row["incomplete"] else "—" if sel is None
                                else fmt_rec(sel["rec"]) + "*" * bool(sel["at_grid_edge"]))
        rows.append(out)
    headers = {row["part"]: _POINT[arm].format(row["value"]) + f" ({_seeds(len(row['seeds']))})"
               for row in points}
    return viz.table_html(rows, ["optimizer", "class", *headers], headers=headers)


def _published_series(methods: Sequence[str]) -> tuple[list[int], dict[str, list[Any]]]:
    sizes = sorted({n for v in ladder.PUBLISHED_LADDER_REC.values() for n in v})
    return sizes, {m: [ladder.PUBLISHED_LADDER_REC.get(m, {}).get(n) for n in sizes]
                   for m in methods}


def recovery_figure(sizes: Info, methods: Sequence[str] = ladder.LADDER_METHODS) -> Figure:
    """Recovery error against ``n``, ours (left: the sizes with records, values below 1e-7
    drawn at 1e-7) beside the paper's Table 11 (right: its sizes; a printed 0.0000, a mean
    below 5e-5, drawn at 5e-5), the same colour and marker per optimizer in both panels and
    one legend under them. ``sizes``: :func:`~gaugekit.experiments.ladder.size_rows` of the
    size arm."""
    ran = [row for row in sizes if row["runs"]]
    fig, (ours, paper) = plt.subplots(1, 2, figsize=(7.0, 4.0), sharey=True,
                                      layout="constrained")
    x = [row["n"] for row in ran]
    values = {m: [(row["rows"].get(m) or {}).get("rec") for row in ran] for m in methods}
    viz.value_curves(x, values, ax=ours, legend=False, floor=1e-7)
    px, pvalues = _published_series(methods)
    viz.value_curves(px, pvalues, ax=paper, legend=False, floor=5e-5, ylabel="")
    ours.set_title("ours (mean over the recorded seeds)")
    paper.set_title("published (Table 11)")
    paper.axhline(5e-5, color="0.6", lw=0.8, ls=":")
    paper.text(0.98, 5e-5 * 1.5, "printed 0.0000", ha="right", va="bottom", fontsize=8,
               color="0.4", transform=paper.get_yaxis_transform())
    handles, labels = {}, []
    for ax in (ours, paper):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    fig.legend([handles[lab] for lab in labels], labels, loc="outside lower center", ncol=5)
    return fig


def published_table(compared: Sequence[Mapping[str, Any]]) -> str:
    """Ours beside the paper's Table 11, one row per optimizer and one column per point
    (:func:`~gaugekit.experiments.ladder.comparison_rows`, one arm or several): each cell is
    ``ours / published``, the header names the point and the seeds behind the two means."""
    points: dict[tuple[str, float], str] = {}
    cells: dict[str, dict[tuple[str, float], str]] = {}
    for c in compared:
        key = (c["arm"], c["value"])
        points.setdefault(key, _POINT[c["arm"]].format(c["value"])
                          + f", seeds {c['seeds']} / {c['published_seeds']}")
        cells.setdefault(c["method"], {})[key] = f"{_rec4(c['ours'])} / {c['published']:.4f}"
    if not cells:
        return _note_table("none of the points with records here is one of the paper's, so "
                           "nothing is set beside Table 11")
    order = [m for m in ladder.LADDER_METHODS if m in cells]
    rows = [{"optimizer": label(m), **{points[k]: v for k, v in cells[m].items()}}
            for m in order]
    return viz.table_html(rows, ["optimizer", *points.values()])


def agreement_text(compared: Sequence[Mapping[str, Any]]) -> str:
    """Where our seeds are the paper's: how many of our means equal the published one to its
    printed digits, and which do not (ours against published)."""
    same = [c for c in compared if c["seeds"] == c["published_seeds"]]
    if not same:
        return "no point of the ladder has our seeds equal to the paper's"
    digits = ladder.PUBLISHED_LADDER_DIGITS
    off = [c for c in same if round(c["ours"], digits) != round(c["published"], digits)]
    where = ", ".join(dict.fromkeys(_POINT[c["arm"]].format(c["value"]) for c in same))
    text = (f"where our seeds are the paper's ({where}), {len(same) - len(off)} of the "
            f"{len(same)} means equal the published ones to the {digits} printed decimals")
    if off:
        text += "; not " + "; ".join(f"{label(c['method'])} ({_rec4(c['ours'])} against "
                                     f"{c['published']:.4f})" for c in off)
    return text


# --------------------------------------------------------------------------------------------
# protocols
# --------------------------------------------------------------------------------------------


def protocol_table(config: ladder.LadderConfig, records: Records, ran: Info,
                   gate: str) -> str:
    """The paper's ladder protocol (:data:`~gaugekit.experiments.ladder.PAPER_LADDER_PROTOCOL`)
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
    """Seed 42 at n = 96 run for run (:func:`~gaugekit.experiments.ladder.record_comparison`):
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
        formats={"lr": "g", "paper_lr": ".6g", "ours": fmt_rec, "paper": fmt_rec,
                 "rel_diff": ".1e"})


def record_text(rec96: Sequence[Mapping[str, Any]], ours_seeds: int) -> str:
    """What :func:`record_table` shows, in words: how close the runs with the paper's schedule
    end to the paper's record of seed 42 at n = 96, and why GD's published mean differs (the
    seeds behind it)."""
    if not rec96:
        return ("At this scale there is no record of seed 42 at n = 96 to set beside the "
                "paper's record of it.")
    same = [r for r in rec96 if r["schedule"] == r["paper_schedule"]]
    worst = max((r["rel_diff"] for r in same if r["paper"] > 1e-3), default=None)
    text = (f"Seed for seed the two implementations agree: at n = 96, seed 42, the {len(same)} "
            f"of {len(rec96)} optimizers with the same schedule end within a relative "
            + ("—" if worst is None else f"{worst:.1e}")
            + " of the paper's record wherever the error is not exact recovery.")
    gd = next((r for r in rec96 if r["method"] == "gd"), None)
    if gd is not None:
        pub, seeds = ladder.PUBLISHED_LADDER_REC["gd"][96], ladder.PUBLISHED_LADDER_SEEDS[96]
        text += (f" Gradient descent ends at {gd['ours']:.4f} and the paper's seed 42 at "
                 f"{gd['paper']:.4f}; the published {pub:.4f} is the mean of {seeds} seeds, "
                 f"ours of {ours_seeds}. So the gap at n = 96 is the seed sample, not the "
                 f"method: {_seeds(ours_seeds)} {'does' if ours_seeds == 1 else 'do'} not "
                 f"estimate a {seeds}-seed mean.")
    return text


def _selection_at_40(rows: Mapping[str, Mapping[str, Any]], method: str) -> str:
    sel = rows.get(method)
    return "—" if sel is None else f"{_rec4(sel['rec'])} (lr {sel['lr']:g})"


def _split_text(rows: Mapping[str, Mapping[str, Any]]) -> str:
    split = ms.split_summary(list(rows.values()))
    if not math.isfinite(split["gap"]):
        return "—"
    word = "holds" if split["clean"] else "fails"
    return (f"{word}: worst equivariant {label(split['worst_equivariant'])} "
            f"{_rec4(split['worst_equivariant_rec'])}, best coordinate-wise "
            f"{label(split['best_coordinatewise'])} {_rec4(split['best_coordinatewise_rec'])}")


def n40_protocols(table2: Sequence[Mapping[str, Any]], ladder_records: Records
                  ) -> tuple[str, dict[str, str]]:
    """The two protocols that give a row at ``n = 40``, from their paper-scale configurations
    and records: chapter 4's (Table 2: the zoo part of :mod:`~gaugekit.experiments.
    matrix_sensing`, Table 2's gate) and this chapter's (the ladder's ``n40``, the paper
    ladder's gate). ``table2``: the records of the zoo part; ``ladder_records``: the ladder's
    records with part ``n40``. Returns the table (budget, precision, gate, schedules,
    optimizers, GD's and signum's grids; GD and signum at ``n = 40``, ours and published; the
    equivariant / coordinate-wise split) and sentences for the text (``gd_lrs``: GD's selected
    rates and the smallest rate of Table 2's grid)."""
    zoo = ms.get_config("paper").part("zoo")
    config = ladder.get_config("paper")
    part = config.part("n40")
    gate = ladder.PAPER_LADDER_PROTOCOL["protocol"]
    ch4 = {r["method"]: r for r in ms.selection_rows(table2, "oracle")}
    info = {p: ladder.size_rows(config, ladder_records, "size", p)[0]["rows"]
            for p in (gate, "oracle")}
    ch9 = info[gate]
    nine = {m: r for m, r in ch9.items() if m in ms.TABLE2_METHODS}

    def cosine(methods: Sequence[str], schedule: Any) -> str:
        return ", ".join(label(m) for m in sorted(methods) if schedule(m) == "cosine")

    def grid(values: Sequence[float]) -> str:
        return ", ".join(f"{v:g}" for v in values)

    pub2, pub11 = ms.PUBLISHED_TABLE2, ladder.PUBLISHED_LADDER_REC
    added = [label(m) for m in part.methods if m not in zoo.methods]
    rows = [
        {"item": "optimizers", "ch4": f"the {len(zoo.methods)} of Table 2",
         "ch9": f"the same {len(zoo.methods)} and " + ", ".join(added)},
        {"item": "budget (steps)", "ch4": f"{zoo.budget.num_steps:,}",
         "ch9": f"{part.budget.num_steps:,}"},
        {"item": "precision", "ch4": zoo.dtype, "ch9": part.dtype},
        {"item": "selection gate", "ch4": selection.PROTOCOLS["oracle"].gate_text,
         "ch9": selection.PROTOCOLS[gate].gate_text},
        {"item": "cosine decay (over the budget)",
         "ch4": cosine(zoo.methods, lambda m: zoo.schedules.get(m, "constant")),
         "ch9": cosine(part.methods, part.schedule)},
        {"item": "lr grid, GD", "ch4": grid(zoo.lr_grids["gd"]), "ch9": grid(part.lr_grid("gd"))},
        {"item": "lr grid, signum", "ch4": grid(zoo.lr_grids["signum"]),
         "ch9": grid(part.lr_grid("signum"))},
        {"item": "GD: rec (selected lr)", "ch4": _selection_at_40(ch4, "gd"),
         "ch9": _selection_at_40(ch9, "gd")},
        {"item": "GD under Table 2's gate", "ch4": _selection_at_40(ch4, "gd"),
         "ch9": _selection_at_40(info["oracle"], "gd")},
        {"item": "GD, published", "ch4": f"{pub2['gd'][0]:.4f} (Table 2)",
         "ch9": f"{pub11['gd'][40]:.4f} (Table 11)"},
        {"item": "signum: rec (selected lr)", "ch4": _selection_at_40(ch4, "signum"),
         "ch9": _selection_at_40(ch9, "signum")},
        {"item": "signum, published", "ch4": f"{pub2['signum'][0]:.4f} (Table 2)",
         "ch9": f"{pub11['signum'][40]:.4f} (Table 11)"},
        {"item": "the split, all optimizers", "ch4": _split_text(ch4), "ch9": _split_text(ch9)},
        {"item": "the split, Table 2's nine", "ch4": _split_text(ch4), "ch9": _split_text(nine)},
    ]
    html = viz.table_html(rows, ["item", "ch4", "ch9"],
                          headers={"ch4": "Table 2's protocol (matrix sensing)",
                                   "ch9": "the ladder's (this chapter)"})
    return html, _n40_text(zoo, part, gate, ch4, info, nine)


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _n40_text(zoo: ms.Part, part: ladder.LadderPart, gate: str,
              ch4: Mapping[str, Mapping[str, Any]],
              info: Mapping[str, Mapping[str, Mapping[str, Any]]],
              nine: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The sentences of :func:`n40_protocols`, each computed from the configs and selections."""
    ch9 = info[gate]
    cos4 = sorted(m for m in zoo.methods if zoo.schedules.get(m, "constant") == "cosine")
    cos9 = sorted(m for m in part.methods if part.schedule(m) == "cosine")
    items = {
        "the budget": (zoo.budget.num_steps, part.budget.num_steps),
        "the precision": (zoo.dtype, part.dtype),
        "the selection gate": ("oracle", gate),
        "GD's learning-rate grid": (tuple(zoo.lr_grids["gd"]), tuple(part.lr_grid("gd"))),
        "the optimizers": (tuple(zoo.methods), tuple(part.methods)),
        "the schedules (which rules decay with a cosine)": (cos4, cos9),
    }
    differ = [k for k, (x, y) in items.items() if x != y]
    same = [k for k, (x, y) in items.items() if x == y]
    text = {"differ": (_join(differ) + " differ" if differ else "nothing differs")
            + (f"; {_join(same)} do not" if same else "")}
    lo = min(zoo.lr_grids["gd"])
    lrs = {p: (info[p].get("gd") or {}).get("lr") for p in (gate, "oracle")}
    lr4 = (ch4.get("gd") or {}).get("lr")
    if None in (*lrs.values(), lr4):
        text["gd"] = "GD has no selection under one of the protocols"
    else:
        where = (f"both below {lo:g}, the smallest rate of Table 2's grid"
                 if all(v < lo for v in lrs.values()) else "on the ladder's grid")
        text["gd"] = (f"On the ladder's grid GD selects {lrs[gate]:g} under the ladder's gate "
                      f"and {lrs['oracle']:g} under Table 2's, {where}; the matrix-sensing "
                      f"chapter selects {lr4:g}")
    s4, s9 = ch4.get("signum"), ch9.get("signum")
    if s4 is None or s9 is None:
        text["signum"] = "signum has no selection under one of the protocols"
    else:
        same_signum = {
            "grid": tuple(zoo.lr_grids["signum"]) == tuple(part.lr_grid("signum")),
            "selected rate": s4["lr"] == s9["lr"],
            "schedule": zoo.schedules.get("signum") == part.schedule("signum"),
        }
        if all(same_signum.values()):
            text["signum"] = (
                f"For signum the grid, the selected rate ({s9['lr']:g}) and the schedule "
                f"({part.schedule('signum')}) are the same, so its gap ({_rec4(s4['rec'])} "
                f"against {_rec4(s9['rec'])}) comes from the budget (the cosine runs over "
                "the longer one) or the precision; our records cannot tell which")
        else:
            text["signum"] = ("For signum the " + _join([k for k, v in same_signum.items()
                                                          if not v]) + " differ too")

    def split(rows: Mapping[str, Mapping[str, Any]]) -> tuple[bool | None, str]:
        sp = ms.split_summary(list(rows.values()))
        if not math.isfinite(sp["gap"]):
            return None, ""
        eq = f"{label(sp['worst_equivariant'])} {_rec4(sp['worst_equivariant_rec'])}"
        cw = f"{label(sp['best_coordinatewise'])} {_rec4(sp['best_coordinatewise_rec'])}"
        return sp["clean"], f"{eq} below {cw}" if sp["clean"] else f"{cw} below {eq}"

    (c4, t4), (c9, t9), (c9n, t9n) = split(ch4), split(ch9), split(nine)
    word = {True: "holds", False: "fails", None: "cannot be judged"}
    text["split"] = (f"the split between the two classes {word[c4]} under Table 2's protocol "
                     f"({t4}) and {word[c9]} under the ladder's ({t9})")
    if c9 is False and c9n is not None:
        text["split"] += (f", and {word[c9n]} among Table 2's nine alone" if t9n == t9 else
                          f"; among Table 2's nine alone it {word[c9n]} ({t9n})")
    return text


# --------------------------------------------------------------------------------------------
# the paper's claims
# --------------------------------------------------------------------------------------------


def _verdict(value: bool | None, detail: str = "") -> str:
    word = "—" if value is None else ("yes" if value else "no")
    return f"{word} ({detail})" if detail and value is not None else word


def claims_table(config: ladder.LadderConfig, ran: Info
                 ) -> tuple[str, dict[str, tuple[list[int], list[int]]]]:
    """The paper's ladder claims (its words) and the same statements on our records at each
    size with records; and, per claim, the sizes where ours agrees and disagrees with the
    paper's statement (only the paper's own sizes and setting count)."""
    rows, survival = [], {}
    for claim, text in CLAIM_TEXT.items():
        out = {"claim": text, "published": ladder.PUBLISHED_LADDER_CLAIMS[claim]}
        agree, disagree = [], []
        for row in ran:
            c = ladder.claims(row["rows"])
            value = c[claim]
            detail = ""
            if claim in ("muon_exact", "signum_exact"):
                detail = fmt_rec(row["rows"].get(claim.split("_")[0], {}).get("rec"))
            elif claim == "clean_split" and c["split"] is not None:
                s = c["split"]
                detail = (f"worst eq. {label(s['worst_equivariant'])} "
                          f"{fmt_rec(s['worst_equivariant_rec'])}, best c.-w. "
                          f"{label(s['best_coordinatewise'])} "
                          f"{fmt_rec(s['best_coordinatewise_rec'])}")
            out[f"n{row['n']}"] = _verdict(value, detail)
            expected = ladder.published_expectation(config.part(row["part"]), claim)
            if expected is not None and value is not None:
                (agree if value == expected else disagree).append(row["n"])
        survival[claim] = (agree, disagree)
        rows.append(out)
    html = viz.table_html(
        rows, ["claim", "published", *[f"n{row['n']}" for row in ran]],
        headers={"published": "published (n = 40 … 384)",
                 **{f"n{row['n']}": f"ours, n = {row['n']}" for row in ran}})
    return html, survival


def sizes_text(ns: Sequence[int], seeds: Mapping[int, int]) -> str:
    """``n = 40 (3 seeds), n = 96 (1 seed)``; ``none`` for no size."""
    return ", ".join(f"n = {n} ({_seeds(seeds[n])})" for n in ns) if ns else "none"


def survival_text(agree: Sequence[int], disagree: Sequence[int]) -> str:
    """Where a claim of the paper agrees with ours, in words: at every size compared, at none,
    or at which and not at which."""
    if not agree and not disagree:
        return "not compared (no size of the paper's own setting has records)"
    if not disagree:
        return "agrees at every size compared"
    if not agree:
        return "disagrees at every size compared"
    return (f"agrees at n = {', '.join(map(str, agree))}; disagrees at "
            f"n = {', '.join(map(str, disagree))}")
