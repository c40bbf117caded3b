r"""The language-model chapter's numbers, pure functions of the records of
:func:`gaugebook.lm.lm_runs.collect`: the selection, the fresh seeds (at equal
steps and equal wall time), the twins, the cost of the broken symmetry and the first-step split,
the chapter's verdict sentences. The tables and
figures drawn from them are in :mod:`gaugebook.lm.lm_views`.

Every comparative word of the chapter rests on the book's one rule
(:mod:`gaugebook.present.stats`): optimizers by :func:`compare_methods` (the fresh seeds pair
across optimizers), at equal time by :func:`equal_time_words` (a claim that turns inside the
spread of the re-timings, :func:`step_time_ratio`, is not made), the cost of the gauge by
:func:`loss_gaps` and :func:`gauge_cost`; a gauge-over-noise ratio is the paper's, the one of
:func:`~gaugebook.attention.attention_summary.structural_ratio`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from gaugebook.attention.attention_summary import fmt_ratio, structural_ratio, twin_label
from gaugebook.lm import lm_runs as lm
from gaugebook.present.stats import (
    LEVEL,
    MIN_TIMINGS,
    Comparison,
    RatioComparison,
    compare_ratio,
    compare_runs,
    curve_at,
    fmt_spread,
    mean_sd,
)


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
    with ranks (1 = lowest loss) and the count of diverged or collapsed seeds. The ranks by
    the one rule are ``rank_group`` and ``rank_equal_time_group``: neighbours in the order of
    the means that :func:`compare_methods` (at equal time :func:`equal_time_words`) cannot
    tell apart share a group, written ``"3–5"``."""
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
    def level_at_steps(a: str, b: str) -> bool:
        return compare_methods(records, a, b).sign == 0

    def level_at_time(a: str, b: str) -> bool:
        return equal_time_words(records, a, b, "ahead", "behind", ms_per_step=ms) == LEVEL

    for key, rank, level in (("val_loss", "rank", level_at_steps),
                             ("val_loss_equal_time", "rank_equal_time", level_at_time)):
        ordered = sorted((r for r in out if r[key] is not None), key=lambda r: r[key])
        for i, r in enumerate(ordered, start=1):
            r[rank] = i
        # the one rule's ranking: neighbours it cannot tell apart share a group ("3–5")
        groups: list[list[dict[str, Any]]] = []
        for r in ordered:
            if groups and level(groups[-1][-1]["method"], r["method"]):
                groups[-1].append(r)
            else:
                groups.append([r])
        for g in groups:
            first, last = g[0][rank], g[-1][rank]
            for r in g:
                r[f"{rank}_group"] = str(first) if first == last else f"{first}–{last}"
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
                "init_seed": r["config"]["init_seed"],
                "noise_scale": r["config"]["twin"].get("scale"),
                "status": r["status"], "collapsed": bool(m.get("collapsed")),
                **{k: m.get(k) for k in ("step1_logit_drift", "final_logit_drift",
                                         "final_m_drift", "val_loss")},
                "val_loss_gap": (None if base is None or m.get("val_loss") is None
                                 else abs(m["val_loss"] - base["metrics"]["val_loss"])),
                "curves": r["curves"],
            })
    return out


def _cost_groups(records: Sequence[Mapping[str, Any]], method: str
                 ) -> dict[str, list[Mapping[str, Any]]] | None:
    """The models of :func:`cost_rows` for ``method``: ``gauge`` (the first fresh seed and its
    gauge twins), ``noise`` (it and its noise twins), ``seeds`` (the fresh seeds and the
    selection seeds at the selected rate); ``None`` without fresh runs."""
    fresh = _rows(records, "fresh")
    select = _rows(records, "select")
    runs = [r for r in fresh if r["config"]["method"] == method and r["status"] == "ok"
            and not r["metrics"].get("collapsed")]
    if not runs:
        return None
    lr = runs[0]["metrics"].get("lr")
    first = min(r["config"]["init_seed"] for r in runs)
    base = [r for r in runs if r["config"]["init_seed"] == first
            and r["config"]["twin"]["kind"] == "base"]
    return {
        "gauge": base + [r for r in runs if r["config"]["twin"]["kind"] == "gauge"],
        "noise": base + [r for r in runs if r["config"]["twin"]["kind"] == "noise"],
        "seeds": [r for r in runs if r["config"]["twin"]["kind"] == "base"]
        + [r for r in select if r["config"]["method"] == method and r["status"] == "ok"
           and r["config"]["lr"] == lr and not r["metrics"].get("collapsed")],
    }


def cost_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the broken symmetry costs in loss, per optimizer: the spread (max − min and sd) of
    the final validation loss among models that differ only by a gauge (the first fresh seed
    and its gauge twins), only by noise (it and its noise twins), and by the init seed (the
    fresh seeds and the selection seeds at the selected rate; all on the same batches)."""
    out = []
    for method in lm.METHODS:
        groups = _cost_groups(records, method)
        if groups is None:
            continue
        row: dict[str, Any] = {"method": method, "label": lm.METHOD_LABELS[method]}
        for name, group in groups.items():
            losses = [r["metrics"]["val_loss"] for r in group]
            row[f"{name}_n"] = len(losses)
            row[f"{name}_range"] = max(losses) - min(losses) if len(losses) > 1 else None
            row[f"{name}_sd"] = statistics.stdev(losses) if len(losses) > 1 else None
        out.append(row)
    return out


def loss_gaps(records: Sequence[Mapping[str, Any]], method: str) -> dict[str, list[float]]:
    """The like-for-like measure of each spread of :func:`cost_rows`: ``|Δ final validation
    loss|`` of every pair of models within a group (gauge, noise, seeds). Pairs of one group
    share models, so the gaps are not independent: an interval over them is, if anything,
    too narrow, and a comparison it leaves unresolved stays unresolved."""
    groups = _cost_groups(records, method) or {}
    out = {}
    for name, group in groups.items():
        losses = [float(r["metrics"]["val_loss"]) for r in group]
        out[name] = [abs(x - y) for i, x in enumerate(losses) for y in losses[i + 1:]]
    return out


def gauge_cost(records: Sequence[Mapping[str, Any]], method: str) -> Comparison | None:
    """What the broken gauge costs in loss: the final validation loss of ``method``'s gauge
    twins against their base's (the first fresh seed), paired twin by twin (positive: the
    twins end worse); ``None`` without two gauge twins."""
    groups = _cost_groups(records, method) or {}
    gauge = groups.get("gauge", [])
    if len(gauge) < 3:
        return None
    base = float(gauge[0]["metrics"]["val_loss"])
    twins = {r["config"]["twin"]["seed"]: float(r["metrics"]["val_loss"]) for r in gauge[1:]}
    return compare_runs(twins, dict.fromkeys(twins, base))


#: A gauge twin that starts this many times farther from its base than the 1e-7 noise twin
#: has been split by the basis (the structural test of the first step).
SPLIT_RATIO = 100.0


def split_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per optimizer, the first step in the book's one gauge-over-noise ratio
    (:func:`~gaugebook.attention.attention_summary.structural_ratio`): the logit drift of its
    closest gauge twin (Adam's of three, every other rule's one) and of its farthest 1e-7
    noise twin, their ratio (printed as ``ratio_text``, two significant digits at most) and
    whether the basis split them (ratio ≥ :data:`SPLIT_RATIO`); and at the end the logit and
    mean ``M_h`` drifts of the twins every rule has, gauge seed 777 and the 1e-7 noise twin
    (chaos makes both grow along training)."""
    twins = [r for r in twin_rows(records) if r["status"] == "ok" and not r["collapsed"]]
    rows = {(r["method"], r["twin"]): r for r in twins}
    out = []
    for method in lm.METHODS:
        g, n = rows.get((method, "gauge 777")), rows.get((method, "noise 1e-07"))
        if g is None or n is None:
            continue
        s1 = structural_ratio(twins, method, key="step1_logit_drift", noise_scales=(1e-7,))
        ratio = s1["ratio"]
        out.append({"method": method, "label": lm.METHOD_LABELS[method],
                    "keeps_gauge": lm.KEEPS_HEAD_GAUGE[method],
                    "gauge_step1": s1["gauge_min"], "noise_step1": s1["noise_max"],
                    "gauge_twins": s1["num_gauge"], "step1_ratio": ratio,
                    "ratio_text": s1["text"],
                    "split": None if ratio is None else ratio >= SPLIT_RATIO,
                    "gauge_final": g["final_logit_drift"], "noise_final": n["final_logit_drift"],
                    "gauge_final_m": g["final_m_drift"], "noise_final_m": n["final_m_drift"]})
    return out


def paper_step1_ratio(records: Sequence[Mapping[str, Any]], method: str = "adam"
                      ) -> float | None:
    """The paper's step-1 structural ratio of ``method`` (its GPU suite's twin set): the
    smallest step-1 logit drift of a gauge twin over the largest of a noise twin, the 10⁻⁵
    twin included (:func:`~gaugebook.attention.attention_summary.structural_ratio`); ``None``
    without both kinds."""
    twins = [r for r in twin_rows(records) if r["step1_logit_drift"] is not None]
    return structural_ratio(twins, method, key="step1_logit_drift")["ratio"]


# --------------------------------------------------------------------------------------------
# comparisons under the book's one rule (gaugebook.present.stats)
# --------------------------------------------------------------------------------------------


def _fresh_bases(records: Sequence[Mapping[str, Any]], method: str) -> list[Mapping[str, Any]]:
    return [r for r in _rows(records, "fresh") if r["config"]["method"] == method
            and r["config"]["twin"]["kind"] == "base" and r["status"] == "ok"
            and not r["metrics"].get("collapsed")]


def seed_losses(records: Sequence[Mapping[str, Any]], method: str,
                step: float | None = None) -> dict[int, float]:
    """``method``'s validation loss per fresh seed, ``{init seed: loss}``: the final one, or
    the curve read at ``step`` (linear between checkpoints). The runs pair across optimizers:
    a seed is the same initial weights and, as for every run, the same pre-drawn batches.
    Diverged and collapsed runs are left out (and a seed whose curve ends before ``step``)."""
    out = {}
    for r in _fresh_bases(records, method):
        x = (r["metrics"]["val_loss"] if step is None
             else curve_at(r["curves"], "val_loss", step))
        if x is not None:
            out[int(r["config"]["init_seed"])] = float(x)
    return out


def compare_methods(records: Sequence[Mapping[str, Any]], a: str, b: str) -> Comparison:
    """``a``'s final validation loss against ``b``'s over the fresh seeds, paired by seed
    (:func:`seed_losses`): negative means ``a`` ahead."""
    return compare_runs(seed_losses(records, a), seed_losses(records, b))


def stack_seconds(records: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Seconds per 1,000 model-steps of every two-model stack of the ``tuned`` part, per
    optimizer: re-timings of identical work (two models of one optimizer, the budget's steps,
    the same evaluations; the cost of a step does not depend on the rate). A stack is one
    batch time shared by its runs; stacks with a diverged or collapsed run are left out."""
    stacks: dict[tuple[str, str, float], list[Mapping[str, Any]]] = {}
    for r in records:
        m = r["metrics"]
        if r["config"].get("role") in ("select", "fresh") and m.get("batch_models") == 2 \
                and m.get("model_steps_per_s"):
            key = (r["config"]["method"], str(r.get("created")), float(m["model_steps_per_s"]))
            stacks.setdefault(key, []).append(r)
    out: dict[str, list[float]] = {}
    for (method, _, rate), runs in stacks.items():
        if all(r["status"] == "ok" and not r["metrics"].get("collapsed") for r in runs):
            out.setdefault(method, []).append(1000.0 / rate)
    return out


def step_time_ratio(records: Sequence[Mapping[str, Any]], a: str, b: str
                    ) -> RatioComparison | None:
    """``a``'s time per step over ``b``'s, from the re-timings of :func:`stack_seconds`
    (:func:`~gaugebook.present.stats.compare_ratio`); ``None`` with fewer than
    :data:`~gaugebook.present.stats.MIN_TIMINGS` re-timings a side (no timing claim then)."""
    secs = stack_seconds(records)
    xa, xb = secs.get(a, []), secs.get(b, [])
    if min(len(xa), len(xb)) < MIN_TIMINGS:
        return None
    return compare_ratio(xa, xb)


def timing_spread(records: Sequence[Mapping[str, Any]]) -> float:
    """The relative spread of a re-timing of identical work: the standard deviation of the
    logarithm of :func:`stack_seconds`, pooled over the optimizers."""
    secs = [[math.log(x) for x in xs] for xs in stack_seconds(records).values() if len(xs) > 1]
    num = sum((len(xs) - 1) * statistics.variance(xs) for xs in secs)
    return math.sqrt(num / sum(len(xs) - 1 for xs in secs)) if secs else math.nan


def equal_time_comparison(records: Sequence[Mapping[str, Any]], a: str, b: str,
                          ms_per_step: Mapping[str, float] | None = None
                          ) -> dict[str, Any] | None:
    """``a`` against ``b`` at equal wall time, and whether it survives the timings' spread.

    At the page's equal time (:func:`fresh_rows`: the fastest optimizer's whole budget by the
    ``timing`` part, one timing run each) ``b`` has reached ``steps_b`` steps and ``a``
    ``steps_a``. One timing run is one draw of a step's cost: with ``ρ`` the ratio of ``a``'s
    step time to ``b``'s, ``a`` reaches ``steps_b / ρ`` steps, and ``ρ`` is known only to the
    95 % interval of the re-timings (:func:`step_time_ratio`), widened to hold the timing
    runs' own ratio. ``comparisons`` holds :func:`~gaugebook.present.stats.compare_runs` of
    the paired per-seed losses at the page's step and at every point of ``a``'s range of
    steps (its two ends and the checkpoints between them, at most the budget); ``robust`` is
    whether they all give one word, and ``words(lower, higher)`` gives it, else
    :data:`~gaugebook.present.stats.LEVEL` (also without three re-timings a side). ``None``
    when either optimizer has no fresh runs or no timing."""
    ms = dict(ms_per_step if ms_per_step is not None else timing(records))
    budget = {}
    for m in ms:
        runs = _fresh_bases(records, m)
        if runs:
            budget[m] = int(runs[0]["config"]["num_steps"])
    if a not in budget or b not in budget:
        return None
    t_equal = min(ms[m] * n for m, n in budget.items())
    steps_a, steps_b = t_equal / ms[a], t_equal / ms[b]
    ratio = step_time_ratio(records, a, b)  # None: fewer than three re-timings a side
    points = [steps_a]
    if ratio is not None:
        rho = ms[a] / ms[b]
        lo = min(steps_b / max(ratio.high, rho), budget[a])
        hi = min(steps_b / min(ratio.low, rho), budget[a])
        checkpoints = _fresh_bases(records, a)[0]["curves"]["step"]
        points = sorted({lo, hi, steps_a, *(s for s in checkpoints if lo < s < hi)})
    at_b = seed_losses(records, b, steps_b)
    comparisons = {s: compare_runs(seed_losses(records, a, s), at_b) for s in points}
    nominal = comparisons[steps_a]
    robust = ratio is not None and len({c.sign for c in comparisons.values()}) == 1

    def words(lower: str, higher: str, level: str = LEVEL) -> str:
        return nominal.words(lower, higher, level) if robust else level

    return {"nominal": nominal, "steps_a": steps_a, "steps_b": steps_b,
            "range": (min(points), max(points)), "ratio": ratio, "comparisons": comparisons,
            "robust": robust, "words": words}


def equal_time_words(records: Sequence[Mapping[str, Any]], a: str, b: str, lower: str,
                     higher: str, level: str = LEVEL,
                     ms_per_step: Mapping[str, float] | None = None) -> str:
    """The word for ``a`` against ``b`` at equal wall time that holds whichever of the two is
    given the re-timed share (:func:`equal_time_comparison` both ways round must agree), else
    ``level``: a claim that turns inside the spread of the re-timings is not made."""
    ab = equal_time_comparison(records, a, b, ms_per_step)
    ba = equal_time_comparison(records, b, a, ms_per_step)
    if ab is None or ba is None:
        return level
    word = ab["words"](lower, higher, level)
    return word if word == ba["words"](higher, lower, level) else level


#: The page's groups of the comparison: the two that train the best models, the two last.
BEST: tuple[str, ...] = ("eigen_adam", "muon_adam")
WORST: tuple[str, ...] = ("scalar_adam", "momentum")


def comparison_values(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The numbers the comparison's words rest on, as the page glues them: the fresh seeds'
    count; each named pair at equal steps (``cmp_<a>_<b>``, :func:`compare_methods`:
    difference of the mean final validation loss, nats per character, 95 % interval, Welch's
    and the paired p); the relative spread of re-timings of identical work
    (``timing_spread``, :func:`timing_spread`) and how many there are per optimizer
    (``timing_stacks``); Adam-mini's step time over Adam's from them
    (``ratio_mini_adam``, :func:`step_time_ratio`); each optimizer's ms per step of its one
    timing run to the digits that spread supports (``ms_<method>``); and what the broken
    gauge costs Adam: its gauge twins' loss against their base's (``cost_signed``,
    :func:`gauge_cost`) and the gaps within the gauge twins against those between seeds and
    between noise twins (``cost_gauge_seeds``, ``cost_gauge_noise``, :func:`loss_gaps`)."""
    pairs = (("eigen_adam", "muon_adam"), ("eigen_adam", "adam"), ("muon_adam", "adam"),
             ("adam_mini", "adam"), ("scalar_adam", "adam"), ("momentum", "adam"),
             ("scalar_adam", "momentum"))
    out = {f"cmp_{a}_{b}": compare_methods(records, a, b).text() for a, b in pairs}
    out["fresh_n"] = str(len(seed_losses(records, "adam")))
    spread = timing_spread(records)
    out["timing_spread"] = "—" if not math.isfinite(spread) else f"{100 * spread:.0f} %"
    counts = [len(x) for x in stack_seconds(records).values()]
    out["timing_stacks"] = ("—" if not counts else str(min(counts)) if min(counts) == max(counts)
                            else f"{min(counts)} to {max(counts)}")
    mini = step_time_ratio(records, "adam_mini", "adam")
    out["ratio_mini_adam"] = "—" if mini is None else mini.text()
    ms = timing(records)
    out |= {f"ms_{m}": fmt_spread(x, x * spread if math.isfinite(spread) else math.inf)
            for m, x in ms.items()}
    cost = gauge_cost(records, "adam")
    out["cost_signed"] = "—" if cost is None else cost.text()
    gaps = loss_gaps(records, "adam")
    for other in ("seeds", "noise"):
        ok = len(gaps.get("gauge", [])) > 1 and len(gaps.get(other, [])) > 1
        out[f"cost_gauge_{other}"] = (compare_runs(gaps["gauge"], gaps[other]).text() if ok
                                      else "—")
    return out


def fmt_loss(mean: float | None, sd: float | None) -> tuple[str, str]:
    """A mean loss over seeds and its sd, the mean to the digits the sd supports."""
    if mean is None:
        return "—", "—"
    return fmt_spread(mean, sd if sd else math.inf), ("—" if sd is None else f"{sd:.1g}")


def twin_values(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The twins' numbers as the page glues them: each rule's step-1 ratio (``ratio1_<m>``,
    :func:`split_rows`), the range of the ratios of the rules that keep the gauge by their
    class, eigenbasis Adam aside (``ratio1_keep_lo``, ``ratio1_keep_hi``), Adam's ratio over
    the paper's twin set (``adam_paper_ratio``, :func:`paper_step1_ratio`), eigenbasis Adam's
    1e-7 noise twin at step 1 (``eigen_noise1``) and the range of the final logit drift of the
    noise twins of every rule but heavy-ball SGD (``ends_lo``, ``ends_hi``)."""
    split = {r["method"]: r for r in split_rows(records)}
    keep = [r["step1_ratio"] for m, r in split.items() if lm.KEEPS_HEAD_GAUGE[m]
            and m != "eigen_adam" and r["step1_ratio"] is not None]
    ends = [r["noise_final"] for m, r in split.items() if m != "momentum"]
    eigen = split.get("eigen_adam", {})
    return {
        **{f"ratio1_{m}": r["ratio_text"] for m, r in split.items()},
        "ratio1_keep_lo": fmt_ratio(min(keep, default=None)),
        "ratio1_keep_hi": fmt_ratio(max(keep, default=None)),
        "adam_paper_ratio": fmt_ratio(paper_step1_ratio(records)),
        "eigen_noise1": "—" if eigen.get("noise_step1") is None
        else f"{eigen['noise_step1']:.1e}",
        "ends_lo": "—" if not ends else f"{min(ends):.2f}",
        "ends_hi": "—" if not ends else f"{max(ends):.2f}",
    }
