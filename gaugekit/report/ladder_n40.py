r"""The scaling chapter's two protocols at ``n = 40``: the matrix-sensing chapter's (the paper's
Table 2) beside the ladder's (its Table 11), from the paper-scale configurations and records of
both: the table that sets them side by side and the sentences the text says of it.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit.experiments import ladder
from gaugekit.experiments import matrix_sensing as ms
from gaugekit.report.ladder import Records, _rec4
from gaugekit.report.matrix_sensing import split_sides, split_text
from gaugekit.report.tables import as_markdown, join_words, label, table_html
from gaugekit.runs import selection


def _selection_at_40(rows: Mapping[str, Mapping[str, Any]], method: str) -> str:
    sel = rows.get(method)
    return "—" if sel is None else f"{_rec4(sel['rec'])} (lr {sel['lr']:g})"


def _split(rows: Mapping[str, Mapping[str, Any]]) -> tuple[bool | None, str, str]:
    """The equivariant / coordinate-wise split of ``rows`` (a selection per method): whether it
    is clean (``None`` when it cannot be judged), the table's cell (:func:`split_text`) and the
    text's words (``"Muon 0.0012 below Adam 0.4100"``, the lower side first)."""
    split = ms.split_summary(list(rows.values()))
    if not math.isfinite(split["gap"]):
        return None, "—", ""
    eq, cw = split_sides(split, _rec4)
    cell = split_text(split, "holds" if split["clean"] else "fails", _rec4)
    return split["clean"], cell, f"{eq} below {cw}" if split["clean"] else f"{cw} below {eq}"


def n40_protocols(table2: Sequence[Mapping[str, Any]], ladder_records: Records
                  ) -> tuple[str, dict[str, str]]:
    """The two protocols that give a row at ``n = 40``, from their paper-scale configurations
    and records: chapter 4's (Table 2: the zoo part of :mod:`~gaugekit.experiments.
    matrix_sensing`, Table 2's gate) and this chapter's (the ladder's ``n40``, the paper
    ladder's gate). ``table2``: the records of the zoo part; ``ladder_records``: the ladder's
    records with part ``n40``. Returns the table (budget, precision, gate, schedules,
    optimizers, GD's and signum's grids; GD and signum at ``n = 40``, ours and published; the
    equivariant / coordinate-wise split) and the sentences the text says of it, each computed
    from the configs and selections (``differ``: what differs; ``gd``: GD's selected rates and
    the smallest rate of Table 2's grid; ``signum``; ``split``)."""
    zoo = ms.get_config("paper").part("zoo")
    config = ladder.get_config("paper")
    part = config.part("n40")
    gate = ladder.PAPER_LADDER_PROTOCOL["protocol"]
    ch4 = {r["method"]: r for r in ms.selection_rows(table2, "oracle")}
    info = {p: ladder.size_rows(config, ladder_records, "size", p)[0]["rows"]
            for p in (gate, "oracle")}
    ch9 = info[gate]
    nine = {m: r for m, r in ch9.items() if m in ms.TABLE2_METHODS}
    cos4 = sorted(m for m in zoo.methods if zoo.schedules.get(m, "constant") == "cosine")
    cos9 = sorted(m for m in part.methods if part.schedule(m) == "cosine")

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
        {"item": "cosine decay (over the budget)", "ch4": ", ".join(map(label, cos4)),
         "ch9": ", ".join(map(label, cos9))},
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
        {"item": "the split, all optimizers", "ch4": _split(ch4)[1], "ch9": _split(ch9)[1]},
        {"item": "the split, Table 2's nine", "ch4": _split(ch4)[1], "ch9": _split(nine)[1]},
    ]
    html = table_html(rows, ["item", "ch4", "ch9"],
                      headers={"ch4": "Table 2's protocol (matrix sensing)",
                               "ch9": "the ladder's (this chapter)"})
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
    text = {"differ": (join_words(differ) + " differ" if differ else "nothing differs")
            + (f"; {join_words(same)} do not" if same else "")}
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
            text["signum"] = ("For signum the " + join_words([k for k, v in same_signum.items()
                                                          if not v]) + " differ too")

    (c4, _, t4), (c9, _, t9), (c9n, _, t9n) = _split(ch4), _split(ch9), _split(nine)
    word = {True: "holds", False: "fails", None: "cannot be judged"}
    text["split"] = (f"the split between the two classes {word[c4]} under Table 2's protocol "
                     f"({t4}) and {word[c9]} under the ladder's ({t9})")
    if c9 is False and c9n is not None:
        text["split"] += (f", and {word[c9n]} among Table 2's nine alone" if t9n == t9 else
                          f"; among Table 2's nine alone it {word[c9n]} ({t9n})")
    return html, text


def n40_values(table2: Sequence[Mapping[str, Any]], ladder_records: Records) -> dict[str, Any]:
    """The page's values of :func:`n40_protocols`: the table (``tab_ladder_n40``) and its
    sentences as ``n40_<key>`` (Markdown, pasted as ordinary text)."""
    html, text = n40_protocols(table2, ladder_records)
    return {"tab_ladder_n40": html} | {f"n40_{k}": as_markdown(v) for k, v in text.items()}
