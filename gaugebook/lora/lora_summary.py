r"""The LoRA chapter's numbers, pure functions of the records of
:func:`gaugebook.lora.lora_runs.collect`: the pretraining, the selection, the fresh seeds at
equal steps and at equal time, the twins and the verdict. The tables and figures drawn from them
are in :mod:`gaugebook.lora.lora_views`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gaugebook.engine.selection import select_rate
from gaugebook.lora import lora_runs as lr
from gaugebook.present.stats import (
    Comparison,
    RatioComparison,
    compare_ratio,
    compare_runs,
    comparison_text,
    curve_at,
    mean_sd,
)
from gaugebook.present.tables import fmt
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


def timings(records: Records) -> dict[str, dict[int, float]]:
    """Each optimizer's milliseconds per step in the ``timing`` part, by round: re-timings of
    identical work, the rounds interleaving the optimizers (a round pairs them in time)."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        if r["config"].get("role") == "timing" and r["status"] == "ok":
            out.setdefault(r["config"]["method"], {})[int(r["config"]["round"])] = \
                float(r["metrics"]["ms_per_step"])
    return out


def step_cost(records: Records, method: str, against: str = "adamw") -> RatioComparison | None:
    """``method``'s time per step over ``against``'s (:func:`~gaugebook.present.stats.
    compare_ratio` over the re-timings of :func:`timings`, paired by round); ``None`` with
    fewer than three re-timings of either."""
    t = timings(records)
    a, b = t.get(method, {}), t.get(against, {})
    if min(len(a), len(b)) < 3:
        return None
    return compare_ratio(a, b)


def fresh_losses(records: Records, method: str, init: str = "zero", key: str = "val_loss",
                 step: float | None = None) -> dict[int, float]:
    """``{seed: value}`` of ``method``'s usable fresh base runs: the metric ``key`` at the end,
    or, with ``step``, the held-out loss curve read at that step (a seed draws the adapters;
    every run sees the same batches, so two optimizers' runs of one seed pair)."""
    out = {}
    for r in _fresh(records, init=init, twin="base"):
        if r["config"]["method"] != method or not _usable(r):
            continue
        value = (r["metrics"][key] if step is None
                 else curve_at(r["curves"], "val_loss", step))
        if value is not None:
            out[int(r["config"]["init_seed"])] = float(value)
    return out


def loss_comparison(records: Records, a: str, b: str, init: str = "zero",
                    key: str = "val_loss") -> Comparison:
    """``a``'s fresh seeds against ``b``'s, paired by seed (:func:`fresh_losses`)."""
    return compare_runs(fresh_losses(records, a, init, key), fresh_losses(records, b, init, key))


def equal_time(records: Records, method: str, against: str = "adamw", init: str = "zero"
               ) -> dict[str, Any] | None:
    """``method`` given ``against``'s whole budget of time: its held-out loss at step
    ``N / c`` (``c`` its step cost over ``against``'s, :func:`step_cost`) against ``against``'s
    at step ``N``, paired by seed, at both ends of the interval of ``c``. Where ``c < 1`` the
    budget would carry ``method`` past its last step, and its final loss bounds the comparison
    from above (only "lower" survives). ``sign``: ``-1`` when ``method`` is resolved lower at
    both ends, ``+1`` higher at both, else 0 (the claim turns inside the timings' spread);
    ``break_even``: the cost ratio at which the two mean losses meet (``None`` when ``method``
    stays lower over the whole budget)."""
    cost = step_cost(records, method, against)
    if cost is None:
        return None
    runs = {int(r["config"]["init_seed"]): r for r in _fresh(records, init=init, twin="base")
            if r["config"]["method"] == method and _usable(r)}
    n = max(int(r["config"]["num_steps"]) for r in _fresh(records, init=init, twin="base")
            if r["config"]["method"] == against)
    theirs = fresh_losses(records, against, init)

    def ours(c: float) -> dict[int, float]:
        read = {k: curve_at(r["curves"], "val_loss", n / max(c, 1.0)) for k, r in runs.items()}
        return {k: v for k, v in read.items() if v is not None}

    ends: dict[str, Comparison | None] = {}
    signs = []
    for name, c in (("low", cost.low), ("ratio", cost.ratio), ("high", cost.high)):
        at = ours(c)
        ends[name] = compare_runs(at, theirs) if len(at) > 1 and len(theirs) > 1 else None
        if name != "ratio":
            sign = ends[name].sign if ends[name] is not None else 0
            signs.append(-1 if c < 1 and sign == -1 else 0 if c < 1 else sign)
    target = statistics.fmean(theirs.values())
    break_even = next((i / 1000 for i in range(1000, 10_000)
                       if (at := ours(i / 1000)) and statistics.fmean(at.values()) >= target),
                      None)
    return {"cost": cost, "at": ends, "sign": signs[0] if signs[0] == signs[1] else 0,
            "break_even": break_even}


def fresh_rows(records: Records, init: str = "zero") -> list[dict[str, Any]]:
    """One row per optimizer over its fresh seeds (base runs at the selected rate, adapters
    initialised ``init``): held-out loss on the fine-tuning text mean ± sd at equal steps, its
    difference from AdamW's (paired by seed, :func:`loss_comparison`), and at equal time (each
    optimizer given the time the fastest needs for the whole budget, at its geometric-mean
    milliseconds per step over the re-timings of :func:`timings`, its curve read at the step it
    reaches then), the loss on the pretraining text afterwards, and failed seeds."""
    bases = _fresh(records, init=init, twin="base")
    ms = {m: math.exp(statistics.fmean(math.log(x) for x in v.values()))
          for m, v in timings(records).items() if v}
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
        vs = (loss_comparison(records, method, "adamw", init)
              if method != "adamw" and len(ok) > 1 else None)
        out.append({
            "method": method, "label": lr.METHOD_LABELS[method], "keeps": lr.KEEPS[method],
            "lr": runs[0]["metrics"].get("lr"), "seeds": len(runs), "failed": len(runs) - len(ok),
            "at_edge": runs[0]["metrics"].get("selection", {}).get("at_edge"),
            "val_loss": mean, "val_loss_sd": sd, "source_val_loss": src,
            "source_val_loss_sd": src_sd, "ms_per_step": ms.get(method),
            "steps_at_equal_time": step_eq, "val_loss_equal_time": t_mean,
            "val_loss_equal_time_sd": t_sd, "vs_adamw": vs,
        })
    return out


#: What a twin's value is read from: its drift after the first update (mean over adapters),
#: at the end (mean over adapters), and its held-out loss minus its base's.
TWIN_VALUES: dict[str, Any] = {
    "step1": lambda m: m.get("step1_adapter_drift"),
    "end": lambda m: m["mean_adapter_drift"],
    "gap": lambda m: m["val_loss"] - m["base_val_loss"],
    "loss": lambda m: m["val_loss"],
}


def twin_values(records: Records, method: str, init: str, kind: str, what: str
                ) -> dict[int, float]:
    """``{seed: value}`` over the fresh seeds of ``method``'s twin ``kind`` under ``init``,
    ``what`` one of :data:`TWIN_VALUES`."""
    out = {}
    for r in _fresh(records, init=init, twin=kind):
        if r["config"]["method"] == method and _usable(r) and "mean_adapter_drift" in r["metrics"]:
            value = TWIN_VALUES[what](r["metrics"])
            if value is not None:
                out[int(r["config"]["init_seed"])] = float(value)
    return out


def twin_ratio(records: Records, method: str, init: str, group: str, when: str = "step1"
               ) -> float | None:
    """How far ``group``'s gauge twins end from their bases against the noise twins, by the
    paper's definition of the ratio (chapters 8 and 9): the smallest gauge-twin drift over the
    largest noise-twin drift, over the fresh seeds (``when``: ``"step1"`` or ``"end"``)."""
    g = twin_values(records, method, init, group, when)
    n = twin_values(records, method, init, "noise", when)
    if not g or not n or max(n.values()) <= 0:
        return None
    return min(g.values()) / max(n.values())


def basis_cost(records: Records, method: str, init: str, group: str) -> Comparison | None:
    """A gauge twin's held-out loss against its base's, paired by seed: what a new basis costs
    (``None`` with fewer than two twins)."""
    twins = twin_values(records, method, init, group, "loss")
    base = fresh_losses(records, method, init)
    return compare_runs(twins, base) if len(twins) > 1 else None


def basis_against_seed(records: Records, method: str, init: str, group: str
                       ) -> Comparison | None:
    """How far a new basis moves the held-out loss against how far a new seed does: the
    ``|twin − base|`` of each seed against the ``|seed − seed'|`` of each pair of base seeds (the
    like-for-like measure of "a new seed")."""
    gaps = [abs(x) for x in twin_values(records, method, init, group, "gap").values()]
    base = list(fresh_losses(records, method, init).values())
    seeds = [abs(a - b) for i, a in enumerate(base) for b in base[i + 1:]]
    if len(gaps) < 2 or len(seeds) < 2:
        return None
    return compare_runs(gaps, seeds)


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
#: (:func:`gaugekit.audit.heads.verdict_resolution`).
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
    """The chapter's findings as values: the lowest mean at equal steps and at equal time,
    AdamW's gauge twins against its noise twins (:func:`twin_ratio`, after the first update and
    at the end), which rules kept which group, and the basis's and the seeds' loss gaps."""
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
        a_g = twins.get(("adamw", init, "orthogonal"))
        if a_g and twin_ratio(records, "adamw", init, "orthogonal", "end") is not None:
            out[f"adamw_ratio_{init}"] = twin_ratio(records, "adamw", init, "orthogonal", "end")
            step1 = twin_ratio(records, "adamw", init, "orthogonal", "step1")
            if step1 is not None:
                out[f"adamw_step1_ratio_{init}"] = step1
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
    return out | comparison_values(records)


def comparisons(records: Records) -> dict[str, Comparison | RatioComparison | None]:
    """Every comparison the chapter's words rest on (:mod:`gaugebook.present.stats`), by name:
    ``cmp_M_adamw`` (``rand_cmp_…`` from random factors) and ``cmp_muon_M``, the held-out losses
    of the fresh seeds, paired by seed; ``cost_M``, M's step over AdamW's (re-timings);
    ``forget_M``, M's loss on the old text against the pretrained model's, and
    ``forget_scaled_gd_M``, ScaledGD's against M's; ``end_adamw_INIT``, AdamW's orthogonal
    twins' final drift against its noise twins'; ``basis_cost_adamw_INIT_G`` and
    ``basis_seed_adamw_INIT_G``, what a new basis does to the loss, against nothing and against
    a new seed."""
    out: dict[str, Comparison | RatioComparison | None] = {}
    pre = pretrain_row(records)
    for m in lr.METHODS:
        if m != "adamw":
            out[f"cmp_{m}_adamw"] = loss_comparison(records, m, "adamw")
            out[f"rand_cmp_{m}_adamw"] = loss_comparison(records, m, "adamw", "random")
            out[f"cost_{m}"] = step_cost(records, m)
        if m not in ("adamw", "muon"):
            out[f"cmp_muon_{m}"] = loss_comparison(records, "muon", m)
        old = fresh_losses(records, m, key="source_val_loss")
        if pre and len(old) > 1:
            out[f"forget_{m}"] = compare_runs(old, pre["val_loss"])
        if m != "scaled_gd":
            out[f"forget_scaled_gd_{m}"] = compare_runs(
                fresh_losses(records, "scaled_gd", key="source_val_loss"), old)
    for init in lr.INITS:
        out[f"end_adamw_{init}"] = compare_runs(
            twin_values(records, "adamw", init, "orthogonal", "end"),
            twin_values(records, "adamw", init, "noise", "end"))
        for g in ("orthogonal", "general"):
            out[f"basis_cost_adamw_{init}_{g}"] = basis_cost(records, "adamw", init, g)
            out[f"basis_seed_adamw_{init}_{g}"] = basis_against_seed(records, "adamw", init, g)
    return out


def gl_noise_ratios(records: Records, method: str, init: str) -> list[float]:
    """Seed by seed, the step-1 drift of ``method``'s general (GL(r)) twin over its noise
    twin's, from ``init``: how far float32 resolves a break below its fixed threshold."""
    g = twin_values(records, method, init, "general", "step1")
    n = twin_values(records, method, init, "noise", "step1")
    return [g[k] / n[k] for k in g if k in n and n[k] > 0]


def comparison_values(records: Records) -> dict[str, str]:
    """The numbers behind :func:`comparisons` as the page prints them (each comparison's
    :meth:`~gaugebook.present.stats.Comparison.text`), ScaledGD's general twins over its noise
    twins after the first update, seed by seed (``sgd_gl_ratio_lo_INIT``, ``…_hi_…``), the
    cost ratio at which Muon's lead at equal steps would vanish at equal time
    (``muon_break_even``), and the basis's and a new seed's mean loss gaps. Every name is
    there at every scale, already formatted: a dash where a scale lacks the runs."""
    out = {k: comparison_text(c) for k, c in comparisons(records).items()}
    for init in lr.INITS:
        ratios = gl_noise_ratios(records, "scaled_gd", init)
        out |= {f"sgd_gl_ratio_lo_{init}": fmt(min(ratios, default=None), ".0f"),
                f"sgd_gl_ratio_hi_{init}": fmt(max(ratios, default=None), ".0f")}
        c = basis_against_seed(records, "adamw", init, "orthogonal")
        out |= {f"basis_gap_adamw_{init}": fmt(c and c.mean_a, ".3f"),
                f"seed_gap_adamw_{init}": fmt(c and c.mean_b, ".3f")}
    eq = equal_time(records, "muon")
    out["muon_break_even"] = fmt(eq and eq["break_even"], ".2f")
    return out
