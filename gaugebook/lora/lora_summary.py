r"""The LoRA chapter's numbers, pure functions of the records of
:func:`gaugebook.lora.lora_runs.collect`: the pretraining, the selection, the fresh seeds at
equal steps and at equal time, the twins and the verdict. The tables and figures drawn from them
are in :mod:`gaugebook.lora.lora_views`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gaugebook.engine.selection import select_rate
from gaugebook.lora import lora_runs as lr
from gaugebook.present.stats import curve_at, mean_sd
from gaugekit.audit.factor_results import KEEPS, GaugeVerdict, decide_verdict
from gaugekit.audit.twin_parts import verdict_resolution, verdict_threshold

Records = Sequence[Mapping[str, Any]]


def _fresh(records: Records, *, init: str | None = None, twin: str | None = None) -> list[Any]:
    return [r for r in records if r["config"].get("role") == "fresh"
            and (init is None or r["config"]["init"] == init)
            and (twin is None or r["config"]["twin"]["kind"] == twin)]


def _usable(r: Mapping[str, Any]) -> bool:
    return r["status"] == "ok" and not r["metrics"].get("collapsed")


def pretrain_row(records: Records) -> dict[str, Any] | None:
    """The pretraining run's held-out losses on its own text and on the fine-tuning text."""
    runs = [r for r in records if r["config"].get("kind") == "lora_pretrain"]
    return dict(runs[0]["metrics"]) if runs else None


def selection_rows(records: Records) -> list[dict[str, Any]]:
    """One row per optimizer and rate: mean final held-out loss of the selection seeds, and
    whether :func:`~gaugebook.engine.selection.select_rate` chose it (the rule the fresh runs
    were trained by)."""
    by: dict[tuple[str, float], list[Mapping[str, Any]]] = {}
    for r in records:
        if r["config"].get("role") == "select":
            by.setdefault((r["config"]["method"], float(r["config"]["lr"])), []).append(r)
    out = []
    for method in lr.METHODS:
        grid = sorted(x for m, x in by if m == method)
        if not grid:
            continue
        losses = {x: [r["metrics"]["val_loss"] if r["status"] == "ok" else math.inf
                      for r in by[(method, x)]] for x in grid}
        choice = select_rate(grid, losses)
        out += [{"method": method, "label": lr.METHOD_LABELS[method], "lr": x,
                 "mean_val_loss": choice["mean_val_loss"][str(x)], "chosen": x == choice["lr"],
                 "at_edge": choice["at_edge"]} for x in grid]
    return out


def fresh_rows(records: Records, init: str = "zero") -> list[dict[str, Any]]:
    """One row per optimizer over its fresh seeds (base runs at the selected rate, adapters
    initialised ``init``): held-out loss on the fine-tuning text mean ± sd at equal steps and at
    equal time (each optimizer given the time the fastest needs for the whole budget, at its
    median milliseconds per step, its curve read at the step it reaches then), ranks
    (1 = lowest), the loss on the pretraining text afterwards, and failed seeds."""
    bases = _fresh(records, init=init, twin="base")
    ms = {m: sorted(r["metrics"]["ms_per_step"] for r in bases
                    if r["config"]["method"] == m and r["status"] == "ok")
          for m in lr.METHODS}
    ms = {m: v[len(v) // 2] for m, v in ms.items() if v}
    steps = {r["config"]["method"]: int(r["config"]["num_steps"]) for r in bases}
    t_equal = min((ms[m] * steps[m] for m in ms), default=None)
    out = []
    for method in lr.METHODS:
        runs = [r for r in bases if r["config"]["method"] == method]
        if not runs:
            continue
        ok = [r for r in runs if _usable(r)]
        mean, sd = mean_sd([r["metrics"]["val_loss"] for r in ok])
        src, src_sd = mean_sd([r["metrics"]["source_val_loss"] for r in ok])
        step_eq = None if t_equal is None or method not in ms else t_equal / ms[method]
        at_t = [curve_at(r["curves"], "val_loss", step_eq) for r in ok] if step_eq else []
        t_mean, t_sd = mean_sd([x for x in at_t if x is not None])
        out.append({
            "method": method, "label": lr.METHOD_LABELS[method], "keeps": lr.KEEPS[method],
            "lr": runs[0]["metrics"].get("lr"), "seeds": len(runs), "failed": len(runs) - len(ok),
            "at_edge": runs[0]["metrics"].get("selection", {}).get("at_edge"),
            "val_loss": mean, "val_loss_sd": sd, "source_val_loss": src,
            "source_val_loss_sd": src_sd, "ms_per_step": ms.get(method),
            "steps_at_equal_time": step_eq, "val_loss_equal_time": t_mean,
            "val_loss_equal_time_sd": t_sd,
        })
    for key, rank in (("val_loss", "rank"), ("val_loss_equal_time", "rank_equal_time")):
        ordered = sorted((r for r in out if r[key] is not None), key=lambda r: r[key])
        for i, r in enumerate(ordered, start=1):
            r[rank] = i
    return out


def twin_rows(records: Records) -> list[dict[str, Any]]:
    """Per optimizer, initialisation and twin kind, over the fresh seeds: the mean drift of the
    adapters' ``s B A`` from the base's at the end, the held-out logits' relative distance, and
    the twin's held-out loss minus its base's (mean ± sd); the base's seed-to-seed sd of the
    held-out loss beside it."""
    out = []
    for method in lr.METHODS:
        for init in lr.INITS:
            bases = [r for r in _fresh(records, init=init, twin="base")
                     if r["config"]["method"] == method and _usable(r)]
            _, seed_sd = mean_sd([r["metrics"]["val_loss"] for r in bases])
            for kind in lr.TWIN_KINDS:
                twins = [r for r in _fresh(records, init=init, twin=kind)
                         if r["config"]["method"] == method]
                if not twins:
                    continue
                ok = [r for r in twins if _usable(r) and "mean_adapter_drift" in r["metrics"]]
                m = [r["metrics"] for r in ok]
                drift, drift_sd = mean_sd([x["mean_adapter_drift"] for x in m])
                at1 = [x["step1_adapter_drift"] for x in m
                       if x.get("step1_adapter_drift") is not None]
                step1, _ = mean_sd(at1)
                logit, _ = mean_sd([x["logit_drift"] for x in m])
                gap, gap_sd = mean_sd([x["val_loss"] - x["base_val_loss"] for x in m])
                out.append({
                    "method": method, "label": lr.METHOD_LABELS[method], "init": init,
                    "twin": kind, "models": len(twins), "failed": len(twins) - len(ok),
                    "drift": drift, "drift_sd": drift_sd, "step1": step1,
                    "max_step1": max(at1, default=None),
                    "max_drift": max((x["max_adapter_drift"] for x in m), default=None),
                    "logit_drift": logit, "gap": gap, "gap_sd": gap_sd,
                    "abs_gap": mean_sd([abs(x["val_loss"] - x["base_val_loss"]) for x in m])[0],
                    "seed_sd": seed_sd,
                    "init_distance": max((x["init_logit_distance"] for x in m), default=None),
                })
    return out


def drift_curves(records: Records, method: str, init: str, kind: str
                 ) -> tuple[list[int], list[float]] | None:
    """The mean over fresh seeds of a twin's adapter drift at every checkpoint."""
    runs = [r for r in _fresh(records, init=init, twin=kind)
            if r["config"]["method"] == method and _usable(r) and "adapter_drift" in r["curves"]]
    if not runs:
        return None
    steps = runs[0]["curves"]["step"]
    runs = [r for r in runs if r["curves"]["step"] == steps]
    return steps, [sum(r["curves"]["adapter_drift"][i] for r in runs) / len(runs)
                   for i in range(len(steps))]


def twin_lookup(records: Records) -> dict[tuple[str, str, str], dict[str, Any]]:
    """:func:`twin_rows` by ``(method, init, twin kind)``."""
    return {(r["method"], r["init"], r["twin"]): r for r in twin_rows(records)}


#: The round-off threshold of a float32 run's drift (:func:`gaugekit.audit.verdict_threshold`),
#: and the smallest drift float32 resolves below it, read against the noise twins
#: (:func:`gaugekit.audit.twin_parts.verdict_resolution`).
ROUNDOFF = verdict_threshold(torch.float32)
RESOLUTION = verdict_resolution(torch.float32)


#: When a twin is judged: after the first update (where chaos has had no time to act: the
#: discriminating test, as in the language-model chapter) or at the end of fine-tuning.
WHEN: dict[str, str] = {"step1": "max_step1", "end": "max_drift"}


def group_verdict(records: Records, method: str, init: str, group: str, when: str = "step1"
                  ) -> GaugeVerdict | None:
    """The library's verdict (:func:`~gaugekit.audit.factor_results.decide_verdict`, the rule
    of every audit) on ``method``'s ``group`` twins (``"orthogonal"`` or ``"general"``) under
    ``init``, ``when`` (:data:`WHEN`): the largest drift over the fresh seeds (after the first
    update, of the mean over adapters of ``s B A``; at the end, of the largest adapter's),
    against the float32 round-off threshold and against the noise twins' (a factor of 10),
    which resolve a break below the threshold (:data:`RESOLUTION`)."""
    key = WHEN[when]
    rows = twin_lookup(records)
    g, n = rows.get((method, init, group)), rows.get((method, init, "noise"))
    if not g or not n or g[key] is None or n[key] is None:
        return None
    return decide_verdict(g[key], n[key], ROUNDOFF, resolution=RESOLUTION)


def keeps_group(records: Records, method: str, init: str, group: str, when: str = "step1"
                ) -> bool | None:
    """Whether :func:`group_verdict` says "keeps the gauge" (``None``: no twins recorded)."""
    v = group_verdict(records, method, init, group, when)
    return None if v is None else v.outcome == KEEPS


def verdict(records: Records) -> dict[str, Any]:
    """The chapter's findings as values: the best optimizer at equal steps and at equal time,
    AdamW's gauge twins against its noise twins, which rules kept which group, and whether the
    split costs held-out loss beyond the seed-to-seed spread."""
    rows = fresh_rows(records)
    by = {r["method"]: r for r in rows}
    best = min((r for r in rows if r["val_loss"] is not None), key=lambda r: r["val_loss"],
               default=None)
    best_t = min((r for r in rows if r["val_loss_equal_time"] is not None),
                 key=lambda r: r["val_loss_equal_time"], default=None)
    twins = twin_lookup(records)
    out: dict[str, Any] = {
        "best": best and best["method"], "best_time": best_t and best_t["method"],
        "keeps": {f"{m}|{i}|{g}": keeps_group(records, m, i, g)
                  for m in lr.METHODS for i in lr.INITS for g in ("orthogonal", "general")},
    }
    for init in lr.INITS:
        a_g, a_n = twins.get(("adamw", init, "orthogonal")), twins.get(("adamw", init, "noise"))
        if a_g and a_n and a_g["drift"] and a_n["drift"]:
            out[f"adamw_ratio_{init}"] = a_g["drift"] / a_n["drift"]
            if a_g["step1"] and a_n["step1"]:
                out[f"adamw_step1_ratio_{init}"] = a_g["step1"] / a_n["step1"]
            out[f"adamw_gap_{init}"] = a_g["abs_gap"]
            out[f"adamw_seed_sd_{init}"] = a_g["seed_sd"]
    if "adamw" in by and best:
        out["adamw_minus_best"] = by["adamw"]["val_loss"] - best["val_loss"]
    return out


def page_values(records: Records) -> dict[str, Any]:
    """Every number the chapter's prose quotes, by name: per optimizer its fresh runs' loss,
    sd, loss at equal time, ms per step, rate and loss on the pretraining text afterwards
    (``val_loss_adamw``, …; ``rand_adamw`` from random factors), per twin its step-1 and final
    drift, loss gap and the seeds' sd (``step1_adamw_zero_orthogonal``, …), the scalars of
    :func:`verdict`, and the ranges of forgetting and of the noise twins' final drift."""
    out: dict[str, Any] = {}
    rows = fresh_rows(records)
    for r in rows:
        for k in ("val_loss", "val_loss_sd", "val_loss_equal_time", "ms_per_step",
                  "source_val_loss", "lr"):
            out[f"{k}_{r['method']}"] = r[k]
    out |= {f"rand_{r['method']}": r["val_loss"] for r in fresh_rows(records, "random")}
    for r in twin_rows(records):
        for k in ("step1", "drift", "gap", "abs_gap", "seed_sd"):
            out[f"{k}_{r['method']}_{r['init']}_{r['twin']}"] = r[k]
    out |= {k: v for k, v in verdict(records).items() if not isinstance(v, dict)}
    forget = [r["source_val_loss"] for r in rows if r["source_val_loss"] is not None]
    if forget:
        out |= {"forget_lo": min(forget), "forget_hi": max(forget)}
    ends = [out.get(f"drift_{m}_zero_noise") for m in ("adamw", "lora_rite", "muon")]
    if all(x is not None for x in ends):
        out |= {"noise_lo": min(ends), "noise_hi": max(ends)}
    return out
