r"""The scaling chapter's ladder beside the paper's, pure functions of the ladder's
configurations and records (:mod:`gaugekit.experiments.ladder`): which parts the paper published
and over how many seeds (:func:`published_rec`, :func:`published_seeds`), what it found there
(:func:`published_expectation`), ours beside its values (:func:`comparison_rows`,
:func:`record_comparison`), its claims tested at one size (:func:`claims`) and the README's row
(:func:`headline`). The tables drawn from them are in :mod:`gaugekit.report.ladder`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit.experiments import ladder
from gaugekit.experiments import matrix_sensing as ms
from gaugekit.runs.verdicts import HeadlineRow, number_verdict


def published_rec(part: ladder.LadderPart) -> dict[str, float] | None:
    """The published mean rec per method of ``part`` when ``part`` is one of the paper's own
    all-seed parts (a size: :data:`~gaugekit.experiments.ladder.PUBLISHED_LADDER_REC`; a rank
    or m/dof arm point: :data:`~gaugekit.experiments.ladder.PUBLISHED_LADDER_RANK`,
    :data:`~gaugekit.experiments.ladder.PUBLISHED_LADDER_MDOF`), else ``None``."""
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
    return ladder.PUBLISHED_LADDER_SEEDS[part.problem.n] if part.arm == "size" else 5


def published_expectation(part: ladder.LadderPart, claim: str) -> bool | None:
    """What the paper found for ``claim`` (a key of
    :data:`~gaugekit.experiments.ladder.PUBLISHED_LADDER_CLAIMS`) at ``part``'s size: Muon exact
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
    ``rows`` (:func:`~gaugekit.experiments.ladder.size_rows` of one arm) and a published value
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
    (:data:`~gaugekit.experiments.ladder.PAPER_RECORDS_N96_SEED42`), at the lr the paper's
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
    exact (mean rec < :data:`~gaugekit.experiments.ladder.EXACT_REC`), the clean equivariant /
    coordinate-wise split (:func:`~gaugekit.experiments.matrix_sensing.split_summary`), and
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


def headline() -> list[HeadlineRow]:
    """README row (:mod:`gaugekit.report.headline`): Muon's recovery at the largest size of
    the ladder with a complete record at some seed, beside the paper's value for that size."""
    config = ladder.get_config("paper")
    got = ladder.collect("paper")
    rows = [r for r in ladder.size_rows(config, got.records, protocol="oracle_loose")
            if "muon" in r["rows"] and r["n"] in ladder.PUBLISHED_LADDER_REC["muon"]]
    if not rows:
        return []
    top = max(rows, key=lambda r: r["n"])
    n = top["n"]
    ours, pub = float(top["rows"]["muon"]["rec"]), ladder.PUBLISHED_LADDER_REC["muon"][n]
    return [HeadlineRow(
        ladder.NAME, f"ladder: Muon recovers exactly at the largest size run here (n = {n}, "
        f"{len(top['seeds'])} of {ladder.PUBLISHED_LADDER_SEEDS.get(n, 10)} seeds)",
        f"{ours:.1e}", f"{pub:.4f}", "10", number_verdict(ours, pub))]
