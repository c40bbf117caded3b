r"""The language-model chapter's numbers, pure functions of the records of
:func:`gaugebook.lm.lm_runs.collect`: the selection, the fresh seeds (at equal
steps and equal wall time), the twins, the cost of the broken symmetry and the first-step split,
the chapter's verdict sentences. The tables and
figures drawn from them are in :mod:`gaugebook.lm.lm_views`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.attention.attention_summary import twin_label
from gaugebook.lm import lm_runs as lm
from gaugebook.present.stats import curve_at, mean_sd


def _rows(records: Sequence[Mapping[str, Any]], role: str) -> list[Mapping[str, Any]]:
    return [r for r in records if r["config"].get("role") == role]


def selection_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per optimizer and rate of the selection: mean final validation loss of the
    selection seeds, and whether the rate was chosen (by :func:`~gaugebook.experiments.
    language_model.select_lr` on these records, the rule the fresh runs were trained by)."""
    by: dict[tuple[str, float], list[Mapping[str, Any]]] = {}
    for r in _rows(records, "select"):
        by.setdefault((r["config"]["method"], float(r["config"]["lr"])), []).append(r)
    out = []
    for method in lm.METHODS:
        grid = sorted(lr for m, lr in by if m == method)
        if not grid:
            continue
        losses = {lr: [x["metrics"]["val_loss"] if x["status"] == "ok" else math.inf
                       for x in by[(method, lr)]] for lr in grid}
        choice = lm.select_lr(grid, losses)
        out += [{"method": method, "label": lm.METHOD_LABELS[method], "lr": lr,
                 "mean_val_loss": choice["mean_val_loss"][str(lr)], "chosen": lr == choice["lr"],
                 "at_edge": choice["at_edge"]} for lr in grid]
    return out


def timing(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Milliseconds per step of one model alone, per optimizer (the ``timing`` part)."""
    return {r["config"]["method"]: float(r["metrics"]["ms_per_step"])
            for r in _rows(records, "timing") if r["status"] == "ok"}


def fresh_rows(records: Sequence[Mapping[str, Any]],
               ms_per_step: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per optimizer over its fresh seeds (base runs at the selected rate): the rate,
    final validation loss mean ± sd, and at equal wall time (each optimizer given the time
    the fastest one needs for the whole budget, its curve read at the step it reaches then),
    with ranks (1 = lowest loss) and the count of diverged or collapsed seeds."""
    bases = [r for r in _rows(records, "fresh") if r["config"]["twin"]["kind"] == "base"]
    ms = dict(ms_per_step or {})
    budget = {r["config"]["method"]: int(r["config"]["num_steps"]) for r in bases}
    t_equal = min((ms[m] * budget[m] for m in budget if m in ms), default=None)
    out = []
    for method in lm.METHODS:
        runs = [r for r in bases if r["config"]["method"] == method]
        if not runs:
            continue
        ok = [r for r in runs if r["status"] == "ok" and not r["metrics"].get("collapsed")]
        mean, sd = mean_sd([r["metrics"]["val_loss"] for r in ok])
        step_eq = None if t_equal is None or method not in ms else t_equal / ms[method]
        at_t = [] if step_eq is None else [curve_at(r["curves"], "val_loss", step_eq)
                                           for r in ok]
        t_mean, t_sd = mean_sd([x for x in at_t if x is not None])
        out.append({
            "method": method, "label": lm.METHOD_LABELS[method],
            "lr": runs[0]["metrics"].get("lr"),
            "seeds": len(runs), "failed": len(runs) - len(ok),
            "val_loss": mean, "val_loss_sd": sd,
            "ms_per_step": ms.get(method), "steps_at_equal_time": step_eq,
            "val_loss_equal_time": t_mean, "val_loss_equal_time_sd": t_sd,
            "keeps_gauge": lm.KEEPS_HEAD_GAUGE[method],
        })
    for key, rank in (("val_loss", "rank"), ("val_loss_equal_time", "rank_equal_time")):
        ordered = sorted((r for r in out if r[key] is not None), key=lambda r: r[key])
        for i, r in enumerate(ordered, start=1):
            r[rank] = i
    return out


def twin_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The twins of the first fresh seed, per optimizer: final logit and mean ``M_h`` drift
    from their base, final validation loss and its difference from the base's."""
    fresh = _rows(records, "fresh")
    out = []
    for method in lm.METHODS:
        runs = [r for r in fresh if r["config"]["method"] == method]
        twins = [r for r in runs if r["config"]["twin"]["kind"] != "base"]
        if not twins:
            continue
        seed = twins[0]["config"]["init_seed"]
        base = next((r for r in runs if r["config"]["init_seed"] == seed
                     and r["config"]["twin"]["kind"] == "base"), None)
        for r in twins:
            m = r["metrics"]
            out.append({
                "method": method, "label": lm.METHOD_LABELS[method],
                "twin": twin_label(r["config"]), "kind": r["config"]["twin"]["kind"],
                "status": r["status"], "collapsed": bool(m.get("collapsed")),
                **{k: m.get(k) for k in ("step1_logit_drift", "final_logit_drift",
                                         "final_m_drift", "val_loss")},
                "val_loss_gap": (None if base is None or m.get("val_loss") is None
                                 else abs(m["val_loss"] - base["metrics"]["val_loss"])),
                "curves": r["curves"],
            })
    return out


def cost_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the broken symmetry costs in loss, per optimizer: the spread (max − min and sd) of
    the final validation loss among models that differ only by a gauge (the first fresh seed
    and its gauge twins), only by noise (it and its noise twins), and by the init seed (the
    fresh seeds and the selection seeds at the selected rate; all on the same batches)."""
    fresh = _rows(records, "fresh")
    select = _rows(records, "select")
    out = []
    for method in lm.METHODS:
        runs = [r for r in fresh if r["config"]["method"] == method and r["status"] == "ok"
                and not r["metrics"].get("collapsed")]
        if not runs:
            continue
        lr = runs[0]["metrics"].get("lr")
        first = min(r["config"]["init_seed"] for r in runs)
        base = [r for r in runs if r["config"]["init_seed"] == first
                and r["config"]["twin"]["kind"] == "base"]
        groups = {
            "gauge": base + [r for r in runs if r["config"]["twin"]["kind"] == "gauge"],
            "noise": base + [r for r in runs if r["config"]["twin"]["kind"] == "noise"],
            "seeds": [r for r in runs if r["config"]["twin"]["kind"] == "base"]
            + [r for r in select if r["config"]["method"] == method and r["status"] == "ok"
               and r["config"]["lr"] == lr and not r["metrics"].get("collapsed")],
        }
        row: dict[str, Any] = {"method": method, "label": lm.METHOD_LABELS[method]}
        for name, group in groups.items():
            losses = [r["metrics"]["val_loss"] for r in group]
            row[f"{name}_n"] = len(losses)
            row[f"{name}_range"] = max(losses) - min(losses) if len(losses) > 1 else None
            row[f"{name}_sd"] = statistics.stdev(losses) if len(losses) > 1 else None
        out.append(row)
    return out


#: A gauge twin that starts this many times farther from its base than the 1e-7 noise twin
#: has been split by the basis (the structural test of the first step).
SPLIT_RATIO = 100.0


def split_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per optimizer, its gauge twin (seed 777) beside its 1e-7 noise twin: logit drift at
    step 1 and their ratio (the basis split is structural when it is ≥ :data:`SPLIT_RATIO`),
    and the final logit and mean ``M_h`` drifts (chaos makes both grow along training)."""
    rows = {(r["method"], r["twin"]): r for r in twin_rows(records)
            if r["status"] == "ok" and not r["collapsed"]}
    out = []
    for method in lm.METHODS:
        g, n = rows.get((method, "gauge 777")), rows.get((method, "noise 1e-07"))
        if g is None or n is None:
            continue
        ratio = (g["step1_logit_drift"] / n["step1_logit_drift"]
                 if g["step1_logit_drift"] is not None and n["step1_logit_drift"] else None)
        out.append({"method": method, "label": lm.METHOD_LABELS[method],
                    "keeps_gauge": lm.KEEPS_HEAD_GAUGE[method],
                    "gauge_step1": g["step1_logit_drift"], "noise_step1": n["step1_logit_drift"],
                    "step1_ratio": ratio,
                    "split": None if ratio is None else ratio >= SPLIT_RATIO,
                    "gauge_final": g["final_logit_drift"], "noise_final": n["final_logit_drift"],
                    "gauge_final_m": g["final_m_drift"], "noise_final_m": n["final_m_drift"]})
    return out


def paper_step1_ratio(records: Sequence[Mapping[str, Any]], method: str = "adam"
                      ) -> float | None:
    """The paper's step-1 structural ratio of ``method`` (its GPU suite's definition): the
    smallest step-1 logit drift of a gauge twin over the largest of a noise twin, the 10⁻⁵
    twin included; ``None`` without both kinds."""
    ok = [r for r in twin_rows(records) if r["method"] == method and r["status"] == "ok"
          and not r["collapsed"] and r["step1_logit_drift"] is not None]
    gauge = [r["step1_logit_drift"] for r in ok if r["twin"].startswith("gauge")]
    noise = [r["step1_logit_drift"] for r in ok if r["twin"].startswith("noise")]
    return min(gauge) / max(noise) if gauge and noise and max(noise) > 0 else None
