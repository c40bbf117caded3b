r"""The attention chapter's numbers, pure functions of the records of
:func:`gaugekit.experiments.attention.collect`: one flat row per run (:func:`run_rows`), the
runs that may enter an equivariance claim (:func:`usable`), the structural ratio, the machine's
throughput, the closing note's measured numbers (:func:`headline`) and the README's rows
(:func:`readme_headline`). The tables and figures drawn from them are in
:mod:`gaugekit.report.attention`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import accumulate
from typing import Any

from gaugekit.experiments import attention as att
from gaugekit.report import tables
from gaugekit.runs.verdicts import HeadlineRow, number_verdict

#: The headers of the columns of :func:`run_rows` in the chapters' tables.
RUN_HEADERS: dict[str, str] = {
    "init_seed": "init seed", "step1_logit_drift": "step-1 logit drift",
    "step1_m_drift": "step-1 M_h drift", "final_logit_drift": "final logit drift",
    "final_m_drift": "final M_h drift", "train_loss": "train loss", "val_loss": "val loss",
    "train_acc": "train acc", "val_acc": "val acc",
}


def twin_label(config: Mapping[str, Any]) -> str:
    """``"gauge 777"``, ``"noise 1e-07"``, ``"A = I"``, ``"base"``."""
    twin = config["twin"]
    kind = twin["kind"]
    if kind == "gauge":
        return f"gauge {twin['seed']}"
    if kind == "noise":
        return f"noise {twin['scale']:.0e}"
    return "A = I" if kind == "identity" else "base"


def run_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per record: method, init seed, twin, final drifts, step-1 drifts, losses,
    accuracies, collapse flags (own and base's)."""
    rows = []
    for r in records:
        c, m = r["config"], r["metrics"]
        rows.append({
            "method": c["method"], "label": att.METHOD_LABELS.get(c["method"], c["method"]),
            "init_seed": c["init_seed"], "twin": twin_label(c), "kind": c["twin"]["kind"],
            "noise_scale": c["twin"].get("scale"), "status": r["status"],
            **{k: m.get(k) for k in ("final_m_drift", "final_logit_drift", "step1_m_drift",
                                     "step1_logit_drift", "train_loss", "val_loss", "train_acc",
                                     "val_acc", "text_used")},
            "acc_gap": (None if m.get("val_acc") is None or m.get("base_val_acc") is None
                        else abs(m["val_acc"] - m["base_val_acc"])),
            "collapsed": bool(m.get("collapsed")) or bool(m.get("base_collapsed")),
            "max_curve_drift": max(
                [abs(x) for k in ("m_drift", "logit_drift") for x in r["curves"].get(k, [])
                 if x is not None] or [math.nan]),
        })
    return rows


def usable(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows that may enter an equivariance claim: finished ``ok``, neither the run nor its base
    collapsed."""
    return [r for r in rows if r["status"] == "ok" and not r["collapsed"]]


def unique_runs(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``rows`` without repeats: the first row of each (method, init seed, twin), in order."""
    first: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for r in rows:
        first.setdefault((r["method"], r["init_seed"], r["twin"]), r)
    return list(first.values())


def pick(rows: Sequence[Mapping[str, Any]], method: str, twin: str,
         init_seed: int | None = 42) -> Mapping[str, Any] | None:
    """The first row of ``method``'s ``twin`` started from ``init_seed`` (any seed for
    ``None``), or ``None``."""
    return next((r for r in rows if r["method"] == method and r["twin"] == twin
                 and (init_seed is None or r["init_seed"] == init_seed)), None)


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or ``None`` when either is missing or zero."""
    return None if not a or not b else a / b


def structural_ratio(rows: Sequence[Mapping[str, Any]], method: str = "adam") -> dict[str, Any]:
    """``min(final logit drift of gauge twins) / max(final logit drift of noise twins)`` over
    the usable runs of ``method`` (the paper's 662× for Adam), with the extremes and counts."""
    ok = [r for r in usable(rows) if r["method"] == method]
    gauge = [r["final_logit_drift"] for r in ok if r["kind"] == "gauge"]
    noise = [r["final_logit_drift"] for r in ok if r["kind"] == "noise"]
    counts = {"num_gauge": len(gauge), "num_noise": len(noise)}
    if not gauge or not noise:
        return {"ratio": None, "gauge_min": None, "gauge_max": None, "noise_max": None, **counts}
    return {"ratio": min(gauge) / max(noise) if max(noise) > 0 else math.inf,
            "gauge_min": min(gauge), "gauge_max": max(gauge), "noise_max": max(noise), **counts}


def machine_throughput(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How fast the machine trained ``records``, every worker together, from the records alone.

    Each batch (one family, recorded once per run) ran from ``created − batch.wall_time_s``
    to ``created``, with ``batch.size`` models of ``num_steps`` steps. ``rate``: all model-steps
    over the wall-clock span from the first start to the last end (idle gaps included, so it
    does not exceed what the workers did together); ``per_batch_rate``: the mean of the
    batches' own rates (one worker's); ``workers``: the most batches running at one time.
    ``created`` is when the record was written, at or shortly after the batch's end, so the
    intervals are approximate. ``None`` values when no record has timing."""
    batches: dict[tuple[str, float], tuple[float, float, int]] = {}
    for r in records:
        batch, created = r.get("batch"), r.get("created")
        if not batch or not created or not batch.get("wall_time_s"):
            continue
        end = datetime.fromisoformat(created).timestamp()
        wall = float(batch["wall_time_s"])
        key = (att.family_key(r["config"]), wall)
        steps = int(batch["size"]) * int(r["config"]["num_steps"])
        old = batches.get(key, (end - wall, end))
        batches[key] = (min(end - wall, old[0]), max(end, old[1]), steps)
    if not batches:
        return {"rate": None, "per_batch_rate": None, "workers": None, "model_steps": 0,
                "span_s": None, "batches": 0}
    spans = list(batches.values())
    t0, t1 = min(a for a, _, _ in spans), max(b for _, b, _ in spans)
    total = sum(n for _, _, n in spans)
    events = sorted([(a, 1) for a, _, _ in spans] + [(b, -1) for _, b, _ in spans])
    workers = max(accumulate(step for _, step in events))  # the most batches running at once
    return {"rate": total / (t1 - t0) if t1 > t0 else None,
            "per_batch_rate": sum(n / (b - a) for a, b, n in spans) / len(spans),
            "workers": workers, "model_steps": total, "span_s": t1 - t0,
            "batches": len(spans)}


def headline(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The closing note's measured numbers, each ``None`` when its records are missing or its
    runs collapsed: Adam's final mean ``M_h`` and logit drift, its step-1 split, the
    equivariant drifts (float32 and float64), Muon's gauge vs noise and the structural ratio."""
    single = run_rows(records.get("single", []))
    ok = usable(single)
    out: dict[str, Any] = {}
    for method in att.METHODS:
        g, n7, n5 = (pick(ok, method, twin) for twin in ("gauge 777", "noise 1e-07", "noise 1e-05"))
        ident = pick(single, method, "A = I")
        out[method] = {
            "gauge_final_m": g and g["final_m_drift"],
            "gauge_final_logit": g and g["final_logit_drift"],
            "gauge_step1_logit": g and g["step1_logit_drift"],
            "noise7_final_m": n7 and n7["final_m_drift"],
            "noise7_final_logit": n7 and n7["final_logit_drift"],
            "noise7_step1_logit": n7 and n7["step1_logit_drift"],
            "noise5_final_m": n5 and n5["final_m_drift"],
            "acc_gap": g and g["acc_gap"],
            "identity_max": None if ident is None else ident["max_curve_drift"],
        }
    a = out["adam"]
    out["step1_ratio"] = ratio(a["gauge_step1_logit"], a["noise7_step1_logit"])
    f64 = usable(run_rows(records.get("float64", [])))
    out["float64_step1"] = {r["method"]: r["step1_logit_drift"] for r in f64
                            if r["kind"] == "gauge"}
    uniq = unique_runs(run_rows([*records.get("multiseed", []),
                                 *records.get("multiseed_controls", []),
                                 *records.get("single", [])]))
    out["structural"] = {m: structural_ratio(uniq, m) for m in att.METHODS}
    return out


def readme_headline() -> list[Any]:
    """README rows (:mod:`gaugekit.report.headline`) from the committed paper records:
    Adam's and shared-scale Adam's final ``M_h`` drift of the gauge twin, and the structural
    ratio; a missing value shows as a dash."""
    h = headline(att.collect("paper").records)

    def fmt(x: float | None) -> str:
        return tables.fmt(x, ".0f" if tables.finite(x) and abs(x) >= 100 else ".2g")

    ratio = h["structural"]["adam"]
    rows = [("Adam: gauge twins' W_Qᵀ W_K apart at the end (mean rel.)",
             h["adam"]["gauge_final_m"], "adam_final_m_drift"),
            ("shared-scale Adam: the same drift (equivariant)",
             h["scalar_adam"]["gauge_final_m"], "scalar_adam_final_m_drift"),
            (f"Adam: min gauge / max noise drift ({ratio['num_gauge']} gauge, "
             f"{ratio['num_noise']} noise twins)", ratio["ratio"], "structural_ratio")]
    return [HeadlineRow(att.NAME, f"attention, {what}", fmt(ours), fmt(att.PUBLISHED[key]), "8",
                        number_verdict(ours, att.PUBLISHED[key])) for what, ours, key in rows]
