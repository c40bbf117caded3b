r"""The matrix-sensing chapter's checks of its claim: the controls (the split of Table 2 under
cosine decay for every optimizer, a larger initial scale and a second size) and which claims
survive other grids and selection protocols (:data:`SURVIVAL_SETTINGS`), from the records of
:func:`gaugekit.experiments.matrix_sensing.collect`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit.experiments import matrix_sensing as ms
from gaugekit.report.matrix_sensing import split_numbers, split_sides
from gaugekit.report.tables import NBSP, Record, label, rec_lr, table_html, yes_no

# --------------------------------------------------------------------------------------------
# the controls
# --------------------------------------------------------------------------------------------

def controls(records: Mapping[str, Sequence[Record]],
             config: ms.ScaleConfig) -> tuple[str, dict[str, Any]]:
    """The controls table (mean rec, and the selected lr beneath it, per optimizer and
    sweep, Table 2's gate) and the numbers the text quotes: the verdict, gap, worst
    equivariant and best coordinate-wise optimizer per sweep, how often the paper's gate
    (mean over seeds below the tolerance) selects the same lr, Muon's rec and the convex
    program's largest rec at the second size."""
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
    the figure), and the counts the text quotes."""
    summary, protocol_rows = [], {}
    for part, protocol, title in SURVIVAL_SETTINGS:
        sel = ms.selection_rows(records[part], protocol)
        if part == "wide":
            protocol_rows[protocol.replace("_", " ")] = sel
        s = ms.split_summary(sel)
        worst_eq, best_cw = split_sides(s, lambda x: f"{x:.3g}", NBSP)
        summary.append({
            "setting": title, "worst_eq": worst_eq, "best_cw": best_cw,
            "gap": s["gap"], "clean": yes_no(s["clean"]),
            "edges": f"{s['at_grid_edge']}/{s['methods']}",
            "not_interp": s["not_interpolated"],
        })
    html = table_html(
        summary, ["setting", "worst_eq", "best_cw", "gap", "clean", "edges", "not_interp"],
        headers={"worst_eq": "worst equivariant (rec)",
                 "best_cw": "best coordinate-wise (rec)", "gap": "gap",
                 "clean": "clean split", "edges": "lr at grid edge",
                 "not_interp": "selected without interpolating"},
        formats={"gap": "+.4f"})
    honest = [r for r in summary if "oracle" not in r["setting"]]
    zoo = ms.selection_rows(records["zoo"], "oracle")
    val = ms.selection_rows(records["zoo"], "validation")
    counts = {
        "n_clean": sum(r["clean"] == "yes" for r in summary),
        "n_settings": len(summary),
        "n_clean_honest": sum(r["clean"] == "yes" for r in honest),
        "n_honest": len(honest),
        "same_choice": sum(a["lr"] == b["lr"] for a, b in zip(zoo, val, strict=True)),
    }
    return html, protocol_rows, counts
