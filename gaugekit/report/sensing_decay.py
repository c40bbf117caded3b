r"""The matrix-sensing chapter's weight-decay section: the paper's Adam ceiling (its Adam + L2
at the selected cell) beside our joint (lr, wd) selections, from the records of the ``decay``
part of :mod:`gaugekit.experiments.matrix_sensing`; the published values come from
``PUBLISHED_DECAY_CEILING``, each in its own column.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gaugekit.experiments import matrix_sensing as ms
from gaugekit.report.tables import NBSP, Record, table_html

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


def decay_texts(decay: Sequence[Record], zoo_records: Sequence[Record],
                tol: float) -> dict[str, str]:
    """The sentences of the weight-decay section (glue names without their ``decay_``
    prefix): the published ceiling, its budget, the seeds at the paper's cell, the strongest
    decay's recovery and training loss, the selections under the paper's gate, and how many
    selections sit at an edge of a grid."""
    pub = ms.PUBLISHED_DECAY_CEILING
    rows = _decay_rows(decay)
    seed_rows = _seed_rows(decay)
    out = {"pub_text": (f"rec = {pub['rec']:.4f} at lr {pub['lr']:g}, wd {pub['wd']:g} "
                        "(seeds " + ", ".join(f"{v:.3f}" for v in pub["seeds"].values())
                        + ")"),
           "steps": f"{pub['num_steps']:,}"}
    miss = [r for r in seed_rows if r["train"] >= tol]
    out["seed_text"] = "; ".join(
        f"seed {r['seed']}: {r['rec']:.3f} against {r['pub']:.3f}" for r in seed_rows) + (
        ", and seed " + ", ".join(str(r["seed"]) for r in miss) + " ends above the bar "
        "(final loss " + ", ".join(f"{r['train']:.1e}" for r in miss) + "), so the "
        "paper's gate leaves this cell out of our selection" if miss else "")
    strong = [r for r in decay if r["config"].get("wd") == max(ms.DECAY_WDS)
              and r["config"]["arm"] in ("adam_l2", "gd_l2") and r["status"] == "ok"]
    out["strong_text"] = ", ".join(
        f"{r['metrics']['rec']:.3f}" for r in sorted(
            strong, key=lambda r: r["metrics"]["rec"])[:6]) or "—"
    out["strong_train"] = (
        f"{min((r['metrics']['train_loss'] for r in strong), default=0):.0e}")
    strict = [r for r in rows if r["gate"] == rows[0]["gate"] and r["lr"]] if rows else []
    table2 = {r["method"]: r["rec"] for r in ms.selection_rows(zoo_records, "oracle")}
    eq = [r for r in strict if r["equivariant"]]
    cw = [r for r in strict if not r["equivariant"]]
    separated = eq and cw and max(r["rec"] for r in eq) < min(r["rec"] for r in cw)
    out["strict_text"] = "; ".join(
        f"{r['label']} {r['rec']:.3f} (without decay, Table 2: "
        f"{table2.get(r['method'], float('nan')):.3f})" for r in strict) + (
        ". Every equivariant rule with decay stays below every coordinate-wise one"
        if separated else ". The gauge classes overlap")
    out["edges"] = f"{sum(r['at_grid_edge'] for r in rows)} of {len(rows)}"
    return out


def decay_values(decay: Sequence[Record], zoo_records: Sequence[Record], tol: float
                 ) -> dict[str, Any]:
    """The section's tables (``tab_decay``; ``tab_decay_seeds``: Adam + L2 at the paper's
    selected cell, seed by seed, beside the published values) and its sentences
    (:func:`decay_texts`, as ``decay_<name>``)."""
    seeds = table_html(
        _seed_rows(decay), ["seed", "rec", "pub", "train", "steps"],
        headers={"rec": "rec", "pub": "rec, paper", "train": "final training loss"},
        formats={"rec": ".3f", "pub": ".3f", "train": ".1e"})
    return {"tab_decay": decay_html(decay), "tab_decay_seeds": seeds,
            **{f"decay_{k}": v for k, v in decay_texts(decay, zoo_records, tol).items()}}
