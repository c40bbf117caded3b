r"""The scaling chapter's ladder beside the paper's, pure functions of the ladder's
configurations and records (:mod:`gaugebook.ladder.ladder_runs`): which parts the paper published
and over how many seeds (:func:`published_rec`, :func:`published_seeds`), what it found there
(:func:`published_expectation`), ours beside its values (:func:`comparison_rows`,
:func:`record_comparison`), its claims tested at one size (:func:`claims`) and the README's row
(:func:`headline`). The tables drawn from them are in :mod:`gaugebook.ladder.ladder_views`.
The paper's orders are judged by its measure, the means, and also by the book's one rule, per
seed with 95 % intervals (:func:`method_comparison`, :func:`split_by_rule`; a seed is one
instance and one start for every optimizer, so runs pair by seed).

Last, the chapter's two protocols at ``n = 40``: the matrix-sensing chapter's (the paper's
Table 2) beside the ladder's (its Table 11), from the paper-scale configurations and records of
both: the table that sets them side by side and the numbers the text quotes
(:func:`n40_protocols`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.engine import selection
from gaugebook.ladder import ladder_runs as ladder
from gaugebook.present.stats import Comparison, compare_runs
from gaugebook.present.tables import fmt, formatter, label, table_html
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.sensing_views import split_text

Records = Mapping[str, Sequence[Mapping[str, Any]]]


def published_rec(part: ladder.LadderPart) -> dict[str, float] | None:
    """The published mean rec per method of ``part`` when ``part`` is one of the paper's own
    all-seed parts (a size: :data:`~gaugebook.ladder.ladder_runs.PUBLISHED_LADDER_REC`; a rank
    or m/dof arm point: :data:`~gaugebook.ladder.ladder_runs.PUBLISHED_LADDER_RANK`,
    :data:`~gaugebook.ladder.ladder_runs.PUBLISHED_LADDER_MDOF`), else ``None``."""
    if part not in ladder.get_config("paper").parts:
        return None
    if part.arm == "size":
        n = part.problem.n
        values = {m: v[n] for m, v in ladder.PUBLISHED_LADDER_REC.items() if n in v}
    elif part.arm == "rank":
        values = dict(ladder.PUBLISHED_LADDER_RANK.get(int(part.value), {}))
    else:
        values = dict(ladder.PUBLISHED_LADDER_MDOF.get(float(part.value), {}))
    return values or None


def published_seeds(part: ladder.LadderPart) -> int | None:
    """How many seeds the published value of ``part`` averages (``None`` when unpublished)."""
    if published_rec(part) is None:
        return None
    if part.arm == "size":
        return ladder.PUBLISHED_LADDER_SEEDS[part.problem.n]
    return ladder.PUBLISHED_ARM_SEEDS


def published_expectation(part: ladder.LadderPart, claim: str) -> bool | None:
    """What the paper found for ``claim`` (a key of
    :data:`~gaugebook.ladder.ladder_runs.PUBLISHED_LADDER_CLAIMS`) at ``part``'s size: Muon exact
    for n <= 256 and not at 384, signum exact for n >= 64 (n = 40 not stated), the clean split
    never, Adam worst of the three always. ``None`` when ``part`` is not one of the paper's
    sizes (or the paper says nothing there)."""
    if claim not in ladder.PUBLISHED_LADDER_CLAIMS:
        raise ValueError(
            f"Invalid claim: {claim!r}; expected one of {list(ladder.PUBLISHED_LADDER_CLAIMS)}")
    if part not in ladder.get_config("paper").parts or part.arm != "size":
        return None
    n = part.problem.n
    return {
        "muon_exact": n <= 256,
        "signum_exact": True if n >= 64 else None,
        "clean_split": False,
        "adam_worst_of_three": True,
    }[claim]


def comparison_rows(config: ladder.LadderConfig, rows: Sequence[Mapping[str, Any]]
                    ) -> list[dict[str, Any]]:
    """Ours beside the published value, one row per (part, method) that has both a selection in
    ``rows`` (:func:`~gaugebook.ladder.ladder_runs.size_rows` of one arm) and a published value
    (:func:`published_rec`): ``ours``, ``seeds`` (ours), ``published``, ``published_seeds``, the
    lr we chose and whether it sits at a grid edge."""
    out = []
    for row in rows:
        part = config.part(row["part"])
        pub = published_rec(part) or {}
        for method, value in pub.items():
            sel = row["rows"].get(method)
            if sel is None:
                continue
            out.append({"part": row["part"], "arm": part.arm, "value": part.value,
                        "method": method, "ours": sel["rec"], "seeds": len(row["seeds"]),
                        "published": value, "published_seeds": published_seeds(part),
                        "lr": sel["lr"], "at_grid_edge": sel["at_grid_edge"]})
    return out


def record_comparison(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Seed 42 at n = 96, ours against the paper's public record
    (:data:`~gaugebook.ladder.ladder_runs.PAPER_RECORDS_N96_SEED42`), at the lr the paper's
    selection chose: per method our run at the nearest lr of our grid (ours round to three
    digits), its rec and schedule, the record's rec, and their relative difference. ``records``:
    the runs of ``n96_s42``."""
    out = []
    for method, (lr, paper_rec) in ladder.PAPER_RECORDS_N96_SEED42.items():
        r = next((r for r in records if r["config"]["method"] == method
                  and r["config"]["seed"] == 42 and r.get("status") == "ok"
                  and math.isclose(r["config"]["hparams"]["lr"], lr, rel_tol=3e-3)), None)
        if r is None:
            continue
        ours = float(r["metrics"]["rec"])
        out.append({"method": method, "lr": r["config"]["hparams"]["lr"], "paper_lr": lr,
                    "schedule": r["config"]["schedule"],
                    "paper_schedule": ("cosine" if method in ladder.PAPER_LADDER_COSINE
                                       else "constant"),
                    "ours": ours, "paper": paper_rec,
                    "rel_diff": abs(ours - paper_rec) / paper_rec})
    return out


def _rec(row: Mapping[str, Any] | None) -> float:
    if row is None or row.get("rec") is None:
        return math.nan
    return float(row["rec"])


def claims(rows_by_method: Mapping[str, Mapping[str, Any]],
           methods: Sequence[str] = ladder.LADDER_METHODS) -> dict[str, Any]:
    """The paper's ladder claims evaluated at one size, from its selection rows: Muon and signum
    exact (mean rec < :data:`~gaugebook.ladder.ladder_runs.EXACT_REC`), the clean equivariant /
    coordinate-wise split (:func:`~gaugebook.sensing.sensing_runs.split_summary`), and
    "Adam worse than GD and shared-scale Adam". ``None`` where a method has no finite rec, and
    for a clean split seen on fewer than all ``methods`` (a failed split is seen on any subset:
    one equivariant method above one coordinate-wise one)."""
    def exact(method: str) -> bool | None:
        x = _rec(rows_by_method.get(method))
        return None if not math.isfinite(x) else bool(x < ladder.EXACT_REC)

    adam, gd, sa = (_rec(rows_by_method.get(m)) for m in ("adam", "gd", "scalar_adam"))
    three = all(math.isfinite(x) for x in (adam, gd, sa))
    split = ms.split_summary(list(rows_by_method.values())) if rows_by_method else None
    clean = None if split is None or not math.isfinite(split["gap"]) else split["clean"]
    if clean and not all(math.isfinite(_rec(rows_by_method.get(m))) for m in methods):
        clean = None
    return {
        "muon_exact": exact("muon"),
        "signum_exact": exact("signum"),
        "clean_split": clean,
        "split": split,
        "adam_worst_of_three": bool(adam > gd and adam > sa) if three else None,
    }


# --------------------------------------------------------------------------------------------
# comparisons under the book's one rule (gaugebook.present.stats)
# --------------------------------------------------------------------------------------------


def seed_recs(records: Sequence[Mapping[str, Any]], method: str, lr: float,
              seeds: Sequence[int] | None = None) -> dict[int, float]:
    """``method``'s rec per seed at ``lr``, ``{seed: rec}`` (the seeds named, else all). A seed
    is one instance and one start for every optimizer (its measurements, its planted matrix and
    its initial factors), so runs of two optimizers pair by seed."""
    out = {}
    for r in records:
        c = r["config"]
        if c["method"] == method and (seeds is None or c["seed"] in seeds) \
                and math.isclose(float(c["hparams"]["lr"]), float(lr), rel_tol=1e-9) \
                and r["metrics"].get("rec") is not None:
            out[int(c["seed"])] = float(r["metrics"]["rec"])
    return out


def method_comparison(records: Sequence[Mapping[str, Any]],
                      rows: Mapping[str, Mapping[str, Any]], a: str, b: str,
                      seeds: Sequence[int] | None = None) -> Comparison | None:
    """``a``'s rec against ``b``'s at their selected learning rates (``rows``: a selection per
    method), paired by seed (:func:`seed_recs`); negative: ``a`` recovers better. ``None``
    without a selection of both or with a non-finite rec."""
    if a not in rows or b not in rows:
        return None
    xa, xb = (seed_recs(records, m, rows[m]["lr"], seeds) for m in (a, b))
    if not xa or not xb or not all(math.isfinite(x) for x in (*xa.values(), *xb.values())):
        return None
    return compare_runs(xa, xb)


def split_by_rule(records: Sequence[Mapping[str, Any]],
                  rows: Mapping[str, Mapping[str, Any]],
                  seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """The equivariant / coordinate-wise split under the one rule: ``"holds"`` when every
    equivariant method is resolved below every coordinate-wise one
    (:func:`method_comparison`), ``"fails"`` when some coordinate-wise method is resolved
    below some equivariant one, else ``"unresolved"``; with the pairs that fail it
    (``failing``: (coordinate-wise, equivariant)) and the comparison of the two sides' means
    at the boundary, the worst equivariant against the best coordinate-wise (``boundary``)."""
    eq = [m for m, r in rows.items() if r["equivariant"] and r["rec"] is not None]
    cw = [m for m, r in rows.items() if not r["equivariant"] and r["rec"] is not None]
    pairs = {(c, e): method_comparison(records, rows, c, e, seeds) for c in cw for e in eq}
    failing = sorted(k for k, v in pairs.items() if v is not None and v.sign == -1)
    holds = bool(pairs) and all(v is not None and v.sign == 1 for v in pairs.values())
    split = ms.split_summary(list(rows.values()))
    boundary = (method_comparison(records, rows, split["worst_equivariant"],
                                  split["best_coordinatewise"], seeds)
                if split["worst_equivariant"] and split["best_coordinatewise"] else None)
    return {"reading": "fails" if failing else "holds" if holds else "unresolved",
            "failing": failing, "boundary": boundary}


# --------------------------------------------------------------------------------------------
# the two protocols at n = 40
# --------------------------------------------------------------------------------------------

def _selection_at_40(rows: Mapping[str, Mapping[str, Any]], method: str) -> str:
    sel = rows.get(method)
    return "—" if sel is None else f"{fmt(sel['rec'], 'rec4')} (lr {sel['lr']:g})"


def _split(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """The table's cell of the equivariant / coordinate-wise split of ``rows`` (a selection per
    method, :func:`split_text`): a dash when it cannot be judged."""
    split = ms.split_summary(list(rows.values()))
    if not math.isfinite(split["gap"]):
        return "—"
    return split_text(split, "holds" if split["clean"] else "fails", formatter("rec4"))


def n40_protocols(table2: Sequence[Mapping[str, Any]], ladder_records: Records
                  ) -> tuple[str, dict[str, Any]]:
    """The two protocols that give a row at ``n = 40``, from their paper-scale configurations
    and records: chapter 4's (Table 2: the zoo part of :mod:`~gaugebook.experiments.
    matrix_sensing`, Table 2's gate) and this chapter's (the ladder's ``n40``, the paper
    ladder's gate). ``table2``: the records of the zoo part; ``ladder_records``: the ladder's
    records with part ``n40``. Returns the table (budget, precision, gate, schedules,
    optimizers, GD's and signum's grids; GD and signum at ``n = 40``, ours and published; the
    equivariant / coordinate-wise split) and the numbers the text quotes and checks, from the
    configs and selections: ``n40_differ`` (the settings that differ, comma-separated keys),
    GD's selected rate under the ladder's gate and Table 2's on the ladder's grid and the
    matrix-sensing chapter's (``n40_gd_lr``, ``n40_gd_lr_t2``, ``n40_gd_lr_ch4``) and the
    smallest rate of Table 2's grid (``n40_gd_grid_min``); signum's rate, whether its grid,
    rate and schedule are the same under both (``n40_signum_same``) and its rec under each
    (``n40_signum_ch4``, ``n40_signum_ch9``); and per split (``t2``: Table 2's protocol,
    ``ladder``: the ladder's, ``nine``: the ladder's on Table 2's nine) whether it is clean
    by the paper's measure, the means, and its two sides (``n40_<split>_clean``, ``_eq``,
    ``_eq_method``, ``_cw``, ``_cw_method``), and its reading under the one rule
    (:func:`split_by_rule`: ``_rule``, ``_rule_failing``, the boundary pair's comparison
    ``_boundary`` and its ``_boundary_sign``)."""
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
        {"item": "the split, all optimizers", "ch4": _split(ch4), "ch9": _split(ch9)},
        {"item": "the split, Table 2's nine", "ch4": _split(ch4), "ch9": _split(nine)},
    ]
    html = table_html(rows, ["item", "ch4", "ch9"],
                      headers={"ch4": "Table 2's protocol (matrix sensing)",
                               "ch9": "the ladder's (this chapter)"})
    differs = {
        "budget": zoo.budget.num_steps != part.budget.num_steps,
        "precision": zoo.dtype != part.dtype,
        "gate": gate != "oracle",
        "gd_grid": tuple(zoo.lr_grids["gd"]) != tuple(part.lr_grid("gd")),
        "optimizers": tuple(zoo.methods) != tuple(part.methods),
        "schedules": cos4 != cos9,
    }
    gd = {p: (info[p].get("gd") or {}).get("lr") for p in (gate, "oracle")}
    s4, s9 = ch4.get("signum") or {}, ch9.get("signum") or {}
    splits = {"t2": ms.split_summary(list(ch4.values())),
              "ladder": ms.split_summary(list(ch9.values())),
              "nine": ms.split_summary(list(nine.values()))}
    values: dict[str, Any] = {
        "n40_differ": ", ".join(k for k, v in differs.items() if v),
        "n40_gd_lr": gd[gate] or math.nan, "n40_gd_lr_t2": gd["oracle"] or math.nan,
        "n40_gd_lr_ch4": (ch4.get("gd") or {}).get("lr") or math.nan,
        "n40_gd_grid_min": min(zoo.lr_grids["gd"]),
        "n40_signum_lr": s9.get("lr", math.nan),
        "n40_signum_same": bool(s4 and s9) and s4["lr"] == s9["lr"]
        and tuple(zoo.lr_grids["signum"]) == tuple(part.lr_grid("signum"))
        and zoo.schedules.get("signum") == part.schedule("signum"),
        "n40_signum_ch4": s4.get("rec", math.nan), "n40_signum_ch9": s9.get("rec", math.nan),
    }
    rule = {"t2": split_by_rule(table2, ch4),
            "ladder": split_by_rule(ladder_records.get("n40", []), ch9),
            "nine": split_by_rule(ladder_records.get("n40", []), nine)}
    for key, reading in rule.items():
        boundary = reading["boundary"]
        values |= {f"n40_{key}_rule": reading["reading"],
                   f"n40_{key}_rule_failing": reading["failing"],
                   f"n40_{key}_boundary": "—" if boundary is None else boundary.text(),
                   f"n40_{key}_boundary_sign": 0 if boundary is None else boundary.sign}
    for key, split in splits.items():
        values |= {f"n40_{key}_clean": split["clean"],
                   f"n40_{key}_eq": split["worst_equivariant_rec"],
                   f"n40_{key}_eq_method": split["worst_equivariant"] or "—",
                   f"n40_{key}_cw": split["best_coordinatewise_rec"],
                   f"n40_{key}_cw_method": split["best_coordinatewise"] or "—"}
    return html, values


def n40_values(table2: Sequence[Mapping[str, Any]], ladder_records: Records) -> dict[str, Any]:
    """The page's values of :func:`n40_protocols`: the table (``tab_ladder_n40``) and its
    numbers."""
    html, values = n40_protocols(table2, ladder_records)
    return {"tab_ladder_n40": html} | values
