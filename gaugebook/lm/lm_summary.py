r"""The language-model chapter's numbers, pure functions of the records of
:func:`gaugebook.lm.lm_runs.collect`: the selection, the fresh seeds (at equal
steps and equal wall time), the twins, the cost of the broken symmetry and the first-step split,
the chapter's verdict sentences and the README's rows (:func:`readme_headline`). The tables and
figures drawn from them are in :mod:`gaugebook.lm.lm_views`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.attention.attention_summary import twin_label
from gaugebook.lm import lm_runs as lm
from gaugebook.present.verdicts import HeadlineRow


def _mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


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


def _curve_at(curves: Mapping[str, Sequence[Any]], key: str, step: float) -> float | None:
    """``curves[key]`` at ``step``, linear between checkpoints (``None`` past the last)."""
    xs, ys = curves["step"], curves[key]
    if step > xs[-1] or step < xs[0]:
        return None
    for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False):
        if x0 <= step <= x1:
            if y0 is None or y1 is None:
                return None
            w = 0.0 if x1 == x0 else (step - x0) / (x1 - x0)
            return (1 - w) * y0 + w * y1
    return ys[-1]


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
        mean, sd = _mean_sd([r["metrics"]["val_loss"] for r in ok])
        step_eq = None if t_equal is None or method not in ms else t_equal / ms[method]
        at_t = [] if step_eq is None else [_curve_at(r["curves"], "val_loss", step_eq)
                                           for r in ok]
        t_mean, t_sd = _mean_sd([x for x in at_t if x is not None])
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


def verdict(fresh: Sequence[Mapping[str, Any]], costs: Sequence[Mapping[str, Any]]) -> str:
    """One sentence for the chapter: whether the best gauge-keeping optimizer beats Adam by
    more than the seeds' spread, and whether Adam's gauge twins are as far apart in loss as
    its seeds."""
    adam = next((r for r in fresh if r["method"] == "adam"), None)
    keep = [r for r in fresh if r["keeps_gauge"] and r["val_loss"] is not None]
    if adam is None or adam["val_loss"] is None or not keep:
        return "The records needed for a verdict are missing."
    best = min(keep, key=lambda r: r["val_loss"])
    sd = max(x for x in (adam["val_loss_sd"], best["val_loss_sd"], 0.0) if x is not None)
    gap = adam["val_loss"] - best["val_loss"]
    if abs(gap) <= 2 * sd:
        first = (f"at equal steps the best gauge-keeping optimizer ({best['label']}, "
                 f"{best['val_loss']:.3f}) and Adam ({adam['val_loss']:.3f}) are within two "
                 f"seed standard deviations ({sd:.3f}) of each other")
    else:
        better = best["label"] if gap > 0 else "Adam"
        first = (f"at equal steps {better} is better: {best['label']} {best['val_loss']:.3f} "
                 f"against Adam {adam['val_loss']:.3f}, a gap of {abs(gap):.3f}, more than "
                 f"two seed standard deviations ({sd:.3f})")
    beat = [r["label"] for r in keep
            if adam["val_loss"] - r["val_loss"] > 2 * max(adam["val_loss_sd"] or 0.0,
                                                         r["val_loss_sd"] or 0.0)]
    rest = [r["label"] for r in keep if r["label"] not in beat]
    if beat and rest:
        first += (f". Of the gauge-keeping rules {', '.join(beat)} beat Adam by more than that, "
                  f"{', '.join(rest)} do not: keeping the gauge is not by itself what makes "
                  "the better model here")
    cost = next((c for c in costs if c["method"] == "adam"), None)
    if cost is None or cost["gauge_sd"] is None or cost["seeds_sd"] is None:
        return first[0].upper() + first[1:] + "."
    g, n, sd_seeds = cost["gauge_sd"], cost["noise_sd"], cost["seeds_sd"]
    if g < 0.5 * sd_seeds:
        second = (f"Adam's gauge twins end closer in loss (sd {g:.4f}) than its seeds (sd "
                  f"{sd_seeds:.4f}): the basis moves the weights, not the loss")
    elif n is not None and n >= 0.5 * g:
        second = (f"Adam's gauge twins end about as far apart in loss (sd {g:.4f}) as its "
                  f"seeds (sd {sd_seeds:.4f}), and so do its noise twins (sd {n:.4f}): "
                  f"training is chaotic at this rate, so any tiny change of W_Q, W_K acts as "
                  f"a new seed, and the basis costs no more than noise does")
    else:
        second = (f"Adam's gauge twins end about as far apart in loss (sd {g:.4f}) as its "
                  f"seeds (sd {sd_seeds:.4f}) while its noise twins stay close"
                  + ("" if n is None else f" (sd {n:.4f})")
                  + ": the basis acts as a hidden seed")
    return first[0].upper() + first[1:] + "; " + second + "."


def readme_headline() -> list[HeadlineRow]:
    """README rows (:mod:`gaugebook.headline`) from the committed paper records:
    the best gauge-keeping optimizer against Adam at tuned rates, and Adam's gauge twins'
    spread in loss against its seeds'. Beyond the paper: it ran no tuned comparison."""
    got = lm.collect("paper")
    records = [r for part in got.records.values() for r in part]
    fresh = fresh_rows(records, timing(records))
    keep = [r for r in fresh if r["keeps_gauge"] and r["val_loss"] is not None]
    adam = next((r for r in fresh if r["method"] == "adam"), None)
    rows = []
    if adam and adam["val_loss"] is not None and keep:
        best = min(keep, key=lambda r: r["val_loss"])
        rows.append(HeadlineRow(
            lm.NAME, "char-level transformer, each optimizer at its own tuned rate: validation "
            "loss of the best gauge-keeping optimizer vs Adam (fresh seeds, equal steps)",
            f"{best['label']} {best['val_loss']:.3f} vs Adam {adam['val_loss']:.3f}",
            "not in the paper", "9", "beyond the paper"))
    cost = next((c for c in cost_rows(records) if c["method"] == "adam"), None)
    if cost and cost["gauge_sd"] is not None and cost["seeds_sd"] is not None:
        rows.append(HeadlineRow(
            lm.NAME, "char-level transformer, Adam: spread (sd) of validation loss between gauge "
            "twins vs between seeds", f"{cost['gauge_sd']:.1e} vs {cost['seeds_sd']:.1e}",
            "not in the paper", "9", "beyond the paper"))
    return rows


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


def split_sentence(rows: Sequence[Mapping[str, Any]]) -> str:
    """Which optimizers the basis splits at step 1, whether that is what each one's class
    predicts, and how far apart the twins end."""
    if not rows:
        return "The twins' records are missing."
    split = [r["label"] for r in rows if r["split"]]
    kept = [r["label"] for r in rows if r["split"] is False]
    wrong = [r["label"] for r in rows if r["split"] is not None and r["split"] == r["keeps_gauge"]]
    loud = [r for r in rows if r["noise_step1"] is not None and r["noise_step1"] > 1e-4]
    text = (f"At step 1 the gauge splits {', '.join(split) or 'no optimizer'} (gauge twin at "
            f"least {SPLIT_RATIO:g} times farther from its base than the noise twin), and "
            f"leaves {', '.join(kept) or 'none'} at the size of their noise twins")
    text += ("; every optimizer does as its class predicts" if not wrong else
             f"; against its class's prediction: {', '.join(wrong)}")
    for r in loud:
        text += (f". {r['label']}'s noise twin is already {r['noise_step1']:.1e} from its base "
                 f"at step 1 (its 1e-7 change grown {r['noise_step1'] / 1e-7:.0e}-fold by one "
                 "update), so its twins measure that amplification, not its basis")
    loud_end = [r for r in rows if r["noise_final"] is not None and r["noise_final"] > 1e-2]
    calm_end = [r for r in rows if r["noise_final"] is not None and r["noise_final"] <= 1e-2]
    if loud_end:
        ends = [r["noise_final"] for r in loud_end]
        who = ("every optimizer" if not calm_end
               else "every optimizer but " + ", ".join(r["label"] for r in calm_end))
        text += (f". By the last step the noise twins of {who} are {min(ends):.2g}–"
                 f"{max(ends):.2g} apart in logits: training at these tuned rates is chaotic, "
                 "and the end state no longer tells a basis effect from amplified round-off")
        for r in calm_end:
            text += (f"; {r['label']}'s noise twin ends {r['noise_final']:.1e} apart and its "
                     f"gauge twin {r['gauge_final']:.1e}")
    return text + "."
