r"""The attention chapter's numbers, pure functions of the records of
:func:`gaugebook.attention.attention_runs.collect`: one flat row per run (:func:`run_rows`), the
runs that may enter an equivariance claim (:func:`usable`), the structural ratio, the machine's
throughput, and the closing note's measured numbers (:func:`headline`). The tables and
figures drawn from them are in :mod:`gaugebook.attention.attention_views`.

Then the chapter's glued values, each formatted as the prose quotes it, one function per
section (``setup_numbers`` to ``lm_numbers``: ``name → value`` for
:func:`gaugebook.present.viz.glue_page`, strings with an em dash where a record is missing and
Markdown for the words pasted with ``{glue:md}``), and its two live checks: the float64 gauge
twin of the initial model (:func:`live_gauge_check`) and the twin audit of torch's
``nn.MultiheadAttention`` (:func:`mha_regression`, :func:`twin_audit_rows`).

Distances are :math:`\operatorname{rel}(A, B) = \|A - B\|_F / (\tfrac12(\|A\|_F + \|B\|_F))`;
the :math:`M_h` drift is its mean over the heads of :math:`M_h = W_{Q,h}^\top W_{K,h}`.

Twins are compared two ways, one definition each: a gauge-over-noise *ratio* is always the
paper's, the smallest drift of a gauge twin over the largest of a noise twin
(:func:`structural_ratio`, printed by :func:`fmt_ratio`), and a comparison of two sets of twins
is the book's one rule on the decimal logarithm of their drifts, paired by init seed
(:func:`twin_comparison`, :mod:`gaugebook.present.stats`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import accumulate
from typing import Any

import torch

from gaugebook.attention import attention_runs as att
from gaugebook.engine import transformer as A
from gaugebook.present.stats import Comparison, compare_runs, comparison_text, fmt_spread
from gaugebook.present.tables import as_markdown, fmt
from gaugekit.audit import LossFn
from gaugekit.gauge import relative_distance

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
                                     "val_acc", "base_val_acc", "text_used")},
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


def _gauge_noise(rows: Sequence[Mapping[str, Any]], method: str, key: str,
                 noise_scales: Sequence[float] | None, inits: Sequence[int] | None,
                 gauge_seeds: Sequence[int] | None
                 ) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """``method``'s usable gauge and noise twins with a value of ``key``, kept to the init
    seeds, noise scales and gauge seeds named (``None``: all)."""
    ok = [r for r in usable(rows) if r["method"] == method and r.get(key) is not None
          and (inits is None or r["init_seed"] in inits)]
    gauge = [r for r in ok if r["kind"] == "gauge"
             and (gauge_seeds is None or int(r["twin"].split()[1]) in gauge_seeds)]
    noise = [r for r in ok if r["kind"] == "noise"
             and (noise_scales is None or r["noise_scale"] in noise_scales)]
    return gauge, noise


def structural_ratio(rows: Sequence[Mapping[str, Any]], method: str = "adam", *,
                     key: str = "final_logit_drift",
                     noise_scales: Sequence[float] | None = None,
                     noise_inits: Sequence[int] | None = None,
                     inits: Sequence[int] | None = None,
                     gauge_seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """The book's one gauge-over-noise ratio, the paper's: the smallest ``key`` (default the
    final logit drift) of a gauge twin over the largest of a noise twin, over the usable runs
    of ``method`` (the paper's 662× for Adam), with the extremes and counts.

    ``inits``, ``noise_scales`` and ``gauge_seeds`` keep those twins only (``None``: all);
    ``noise_inits`` keeps the noise twins of those init seeds only (the paper's set:
    :data:`~gaugebook.attention.attention_runs.PAPER_NOISE_INITS`). ``per_init`` is the same
    ratio within each init seed that has both kinds of twin, and ``spread`` the standard
    deviation of those (``None`` with fewer than two): ``text`` prints the ratio to the digits
    that spread supports (:func:`fmt_ratio`)."""
    gauge, noise = _gauge_noise(rows, method, key, noise_scales, inits, gauge_seeds)
    noise_all = noise
    if noise_inits is not None:
        noise = [r for r in noise if r["init_seed"] in noise_inits]
    counts = {"num_gauge": len(gauge), "num_noise": len(noise)}
    if not gauge or not noise:
        return {"ratio": None, "gauge_min": None, "gauge_max": None, "noise_max": None,
                "per_init": {}, "spread": None, "text": "—", **counts}

    def ratio_of(g: Sequence[Mapping[str, Any]], n: Sequence[Mapping[str, Any]]) -> float:
        top = max(r[key] for r in n)
        return min(r[key] for r in g) / top if top > 0 else math.inf

    per_init = {}
    for seed in sorted({r["init_seed"] for r in gauge}):
        g = [r for r in gauge if r["init_seed"] == seed]
        n = [r for r in noise_all if r["init_seed"] == seed]
        if g and n:
            per_init[seed] = ratio_of(g, n)
    finite = [x for x in per_init.values() if math.isfinite(x)]
    spread = statistics.stdev(finite) if len(finite) > 1 else None
    value = ratio_of(gauge, noise)
    return {"ratio": value, "gauge_min": min(r[key] for r in gauge),
            "gauge_max": max(r[key] for r in gauge), "noise_max": max(r[key] for r in noise),
            "per_init": per_init, "spread": spread, "text": fmt_ratio(value, spread), **counts}


def fmt_ratio(value: float | None, spread: float | None = None) -> str:
    """A gauge-over-noise ratio as the pages print it: to the digits its ``spread`` over init
    seeds supports (:func:`~gaugebook.present.stats.fmt_spread`), and never to more than two
    significant digits: it is an extreme over a few twins. ``—`` for none."""
    if value is None:
        return "—"
    if not math.isfinite(value) or value == 0:
        return fmt(value, "g")
    return fmt_spread(value, max(spread or 0.0, abs(value) / 10))


def twin_comparison(rows: Sequence[Mapping[str, Any]], method: str, *,
                    key: str = "final_logit_drift", noise_scale: float = 1e-7
                    ) -> Comparison | None:
    """``method``'s gauge twins against its noise twins of ``noise_scale`` under the book's
    one rule (:func:`~gaugebook.present.stats.compare_runs`), on the decimal logarithm of
    ``key``: a drift is a scale, and a gauge-over-noise claim is a ratio, so the difference
    is in orders of magnitude (positive: the gauge twins farther). The runs pair by init
    seed (a gauge twin and a noise twin of one init seed share its base, its data and its
    start): per init seed, the mean over its gauge twins against its noise twin. ``None``
    without a twin of each kind (a drift of exactly 0 has no logarithm: the ``A = I`` control
    is not a twin here)."""
    gauge, noise = _gauge_noise(rows, method, key, (noise_scale,), None, None)

    def per_init(twins: Sequence[Mapping[str, Any]]) -> dict[int, float]:
        logs: dict[int, list[float]] = {}
        for r in twins:
            if r[key] > 0:
                logs.setdefault(r["init_seed"], []).append(math.log10(r[key]))
        return {seed: statistics.fmean(v) for seed, v in logs.items()}

    g, n = per_init(gauge), per_init(noise)
    return compare_runs(g, n) if g and n else None


def magnitude_text(c: Comparison | None) -> str:
    """A :func:`twin_comparison` in words, ``+4.2 orders of magnitude (95 % CI +3.6 to +4.7;
    Welch p = …; paired p = …)``; ``—`` for none."""
    return "—" if c is None else c.text().replace(" (", " orders of magnitude (", 1)


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
    f64 = usable(run_rows(records.get("float64", [])))
    out["float64_step1"] = {r["method"]: r["step1_logit_drift"] for r in f64
                            if r["kind"] == "gauge"}
    uniq = unique_runs(run_rows([*records.get("multiseed", []),
                                 *records.get("multiseed_controls", []),
                                 *records.get("single", [])]))
    out["twins"] = usable(uniq)
    out["step1_structural"] = structural_ratio(uniq, "adam", key="step1_logit_drift",
                                               noise_scales=(1e-7,))
    out["structural"] = {m: structural_ratio(uniq, m) for m in att.METHODS}
    out["structural_paper"] = structural_ratio(uniq, "adam", noise_inits=att.PAPER_NOISE_INITS)
    return out


PUB = att.PUBLISHED
Values = dict[str, Any]


def setup_numbers(config: Any, records: Sequence[Mapping[str, Any]]) -> Values:
    """The single-seed budget (``steps``, ``checkpoints``) and the throughput of the part's
    workers together (:func:`~gaugebook.attention.attention_summary.machine_throughput`) beside
    the reference script's model-steps per second."""
    fam = config.families("single")[0]
    speed = machine_throughput(records)
    return {
        "steps": fmt(fam.num_steps, "d"),
        "checkpoints": ", ".join(str(c) for c in fam.checkpoints),
        "rate": fmt(speed["per_batch_rate"], ".0f"),
        "rate_machine": fmt(speed["rate"], ".0f"),
        "rate_workers": fmt(speed["workers"], "d"),
        "rate_ref": fmt(PUB["reference_model_steps_per_s"]["AMD EPYC (2 cores)"], "g"),
    }


def live_gauge_check(seed: int = 42, gauge_seed: int = 777) -> dict[str, float]:
    r"""Rotate every head of a float64 initial model by :math:`A_h \in O(d_h)` and measure
    :math:`\operatorname{rel}` between the two on the validation logits, the mean
    :math:`M_h` drift and the first layer's :math:`W_Q`: round-off, round-off, order one."""
    data = A.make_modadd_data()
    shape = A.TransformerShape()
    init = A.init_params(shape, generator=torch.Generator().manual_seed(seed))
    base = {k: v.double() for k, v in init.items()}
    twin = A.apply_head_gauge(base, shape, A.draw_head_gauges(shape, gauge_seed,
                                                              dtype=torch.float64))
    stack = A.stack_params([base, twin])
    logits = A.forward(stack, data.val_tokens, shape)
    M = A.head_bilinears(stack, shape)
    return {
        "logits": relative_distance(logits[0], logits[1], symmetric=True).item(),
        "M": A.mean_head_drift(M[1:], M[:1])[1].item(),
        "W_Q": relative_distance(twin["layers.0.q"], base["layers.0.q"], symmetric=True).item(),
    }


def step1_comparisons(head: Mapping[str, Any]) -> dict[str, Comparison | None]:
    """Per optimizer, its gauge twins against its 1e-7 noise twins after one step, over every
    init and gauge seed (:func:`twin_comparison`; ``head``: :func:`headline`)."""
    twins = head.get("twins", [])
    return {m: twin_comparison(twins, m, key="step1_logit_drift") for m in att.METHODS}


def step1_numbers(head: Mapping[str, Any]) -> Values:
    """Adam's step-1 logit drift of the gauge and the 1e-7 noise twin (init seed 42), the
    published pair, and over every init and gauge seed: the ratio of the closest gauge twin to
    the farthest 1e-7 noise twin (:func:`structural_ratio`) and the comparison of the two
    kinds in orders of magnitude (:func:`step1_comparisons`), each rule's (``cmp1_<method>``)."""
    return {
        "adam_step1_gauge": fmt(head["adam"]["gauge_step1_logit"]),
        "adam_step1_noise": fmt(head["adam"]["noise7_step1_logit"]),
        "step1_ratio": head.get("step1_structural", {}).get("text", "—"),
        "pub_step1_gauge": fmt(PUB["adam_step1_gauge_logit_drift"], ".1e"),
        "pub_step1_noise": fmt(PUB["adam_step1_noise1e-7_logit_drift"], ".1e"),
        **{f"cmp1_{m}": magnitude_text(c) for m, c in step1_comparisons(head).items()},
    }


def final_comparisons(head: Mapping[str, Any]) -> dict[tuple[str, str], Comparison | None]:
    r"""Each rule's gauge twins against its 1e-7 noise twins at the end, over every init and
    gauge seed (:func:`twin_comparison`): in :math:`M_h` under ``("m", method)``, and Muon's in
    the logits under ``("logit", "muon_adam")``."""
    twins = head.get("twins", [])
    out = {("m", m): twin_comparison(twins, m, key="final_m_drift") for m in att.METHODS}
    out["logit", "muon_adam"] = twin_comparison(twins, "muon_adam")
    return out


def final_numbers(head: Mapping[str, Any]) -> Values:
    r"""The final :math:`M_h` drift of every optimizer's gauge and 1e-7 noise twin (init seed
    42); over every init and gauge seed, Adam's closest gauge twin over its farthest noise
    twin in :math:`M_h` (``adam_vs_noise``) and Muon's over its farthest 1e-7 noise twin, in
    :math:`M_h` and in the logits (:func:`structural_ratio`); the comparisons of each rule's
    gauge twins with its 1e-7 noise twins in :math:`M_h` (``cmpm_<method>``) and Muon's in
    the logits (``cmpl_muon_adam``; :func:`final_comparisons`); the :math:`A = I` control's
    largest drift."""
    out: Values = {}
    for method in att.METHODS:
        out[f"final_m_{method}"] = fmt(head[method]["gauge_final_m"], ".3g")
        out[f"noise7_m_{method}"] = fmt(head[method]["noise7_final_m"], ".3g")
    out["pub_adam_m"] = fmt(PUB["adam_final_m_drift"], "g")
    twins = head.get("twins", [])
    out["adam_vs_noise"] = structural_ratio(twins, "adam", key="final_m_drift")["text"]
    for key, name in (("final_m_drift", "muon_ratio"), ("final_logit_drift", "muon_logit_ratio")):
        out[name] = structural_ratio(twins, "muon_adam", key=key, noise_scales=(1e-7,))["text"]
    out |= {f"cmp{k[0]}_{m}": magnitude_text(c)
            for (k, m), c in final_comparisons(head).items()}
    identity = [head[m]["identity_max"] for m in att.METHODS]
    out["identity_all"] = fmt(max([x for x in identity if x is not None], default=None), "g")
    return out


def accuracy_comparison(twins: Sequence[Mapping[str, Any]], method: str = "adam"
                        ) -> Comparison | None:
    """The validation accuracy of ``method``'s gauge twins against their bases', paired by
    init seed (per init seed, the mean over its gauge twins against its base; positive: the
    twins more accurate)."""
    acc: dict[int, list[float]] = {}
    base: dict[int, float] = {}
    for r in twins:
        if r["method"] == method and r["kind"] == "gauge" and r["val_acc"] is not None \
                and r["base_val_acc"] is not None:
            acc.setdefault(r["init_seed"], []).append(r["val_acc"])
            base[r["init_seed"]] = r["base_val_acc"]
    if not acc:
        return None
    return compare_runs({s: statistics.fmean(v) for s, v in acc.items()}, base)


def accuracy_numbers(head: Mapping[str, Any]) -> Values:
    """Adam's gauge twin's accuracy gap to its base (init seed 42), the published bound, and
    over every init and gauge seed the gauge twins' accuracy against their bases'
    (``acc_cmp``, :func:`accuracy_comparison`)."""
    return {"adam_acc_gap": fmt(head["adam"]["acc_gap"], ".4f"),
            "pub_acc_gap": fmt(PUB["adam_final_accuracy_gap"], "g"),
            "acc_cmp": comparison_text(accuracy_comparison(head.get("twins", [])))}


def ratio_comparisons(head: Mapping[str, Any]) -> dict[tuple[float, str], Comparison | None]:
    """Each rule's gauge twins against its noise twins of each size (``(scale, method)``) in
    final logit drift, over every init and gauge seed (:func:`twin_comparison`)."""
    twins = head.get("twins", [])
    return {(scale, m): twin_comparison(twins, m, noise_scale=scale)
            for scale in (1e-7, 1e-5) for m in att.METHODS}


def ratio_numbers(head: Mapping[str, Any]) -> Values:
    """Adam's structural ratio over the paper's twin set and over all ours, the published
    ratio, the largest ratio of the other rules; and, over every init and gauge seed, the
    final logit drift of each rule's gauge twins against its noise twins of each size
    (``cmpr<7|5>_<method>``, :func:`ratio_comparisons`)."""
    others = {m: head["structural"][m] for m in att.METHODS if m != "adam"}
    top = max((m for m in others if others[m]["ratio"] is not None),
              key=lambda m: others[m]["ratio"], default=None)
    return {
        "ratio_paper": head["structural_paper"]["text"],
        "ratio_adam": head["structural"]["adam"]["text"],
        "pub_ratio": fmt(PUB["structural_ratio"], "g"),
        "ratio_controls_max": "—" if top is None else others[top]["text"],
        **{f"cmpr{-int(math.log10(scale))}_{m}": magnitude_text(c)
           for (scale, m), c in ratio_comparisons(head).items()},
    }


def float64_numbers(head: Mapping[str, Any], config: Any) -> Values:
    """The equivariant rules' step-1 logit drift in float64 (range) against float32 (largest),
    Adam's in float64, the published float64 range and the float64 budget."""
    f64 = head["float64_step1"]
    eq64 = [v for m, v in f64.items() if m in att.EQUIVARIANT and v is not None]
    eq32 = [head[m]["gauge_step1_logit"] for m in att.EQUIVARIANT]
    return {
        "f64_eq_min": fmt(min(eq64, default=None)),
        "f64_eq_max": fmt(max(eq64, default=None)),
        "f64_adam": fmt(f64.get("adam")),
        "f32_eq_max": fmt(max([x for x in eq32 if x is not None], default=None)),
        "pub_f64": "{:.0e} to {:.0e}".format(*PUB["float64_equivariant_step1"]),
        "f64_steps": fmt(config.families("float64")[0].num_steps, "d"),
    }


def lm_numbers(rows: Sequence[Mapping[str, Any]], family: Any) -> Values:
    r"""The character-level LM: text, budget, context, batch; the final :math:`M_h` drift of
    the gauge twins (Adam's beside its 1e-7 noise twin), Adam's gauge-over-noise ratio of the
    final logit drift (:func:`structural_ratio`: one init seed, one twin of each kind, so two
    significant digits), the collapsed runs (non-collapsed runs only enter the numbers), and
    the paper's GPU model's final logit drifts of Adam's gauge and noise twins (ranges)."""
    ok = usable(rows)

    def drift(method: str, twin: str, key: str = "final_m_drift") -> float | None:
        return (pick(ok, method, twin, None) or {}).get(key)

    texts = sorted({r["text_used"] for r in rows if r["text_used"]})
    collapsed = sorted({r["label"] for r in rows if r["collapsed"]})
    return {
        "lm_text": ", ".join(texts) or "—",
        "lm_steps": fmt(family.num_steps, "d"),
        "lm_T": fmt(family.model.seq_len, "d"),
        "lm_batch": fmt(family.task["batch_size"], "d"),
        "lm_adam_gauge": fmt(drift("adam", "gauge 777"), ".3g"),
        "lm_adam_noise": fmt(drift("adam", "noise 1e-07"), ".3g"),
        "lm_logit_ratio": structural_ratio(rows, "adam")["text"],
        "lm_scalar_gauge": fmt(drift("scalar_adam", "gauge 777"), ".3g"),
        "lm_momentum_gauge": fmt(drift("momentum", "gauge 777"), ".3g"),
        "lm_collapsed": as_markdown(", ".join(collapsed) or "none"),
        "pub_lm_gauge": "{:g}–{:g}".format(*PUB["charlm_gpu"]["adam_gauge_final_logit_drift"]),
        "pub_lm_noise": "{:g}–{:g}".format(*PUB["charlm_gpu"]["adam_noise_final_logit_drift"]),
    }


def mha_regression() -> tuple[Callable[[], torch.nn.Module], LossFn, torch.Tensor, torch.Tensor]:
    r"""A model maker and a loss for the twin audit: ``make()`` returns a fresh float64
    ``nn.MultiheadAttention`` (width 16, 4 heads, no biases; global seed 0 before each), and
    the loss is the random regression :math:`L = \operatorname{mean}(\mathrm{mha}(x, x, x) -
    y)^2` on the returned ``x, y`` (seed 0)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 5, 16, generator=g, dtype=torch.float64)
    y = torch.randn(8, 5, 16, generator=g, dtype=torch.float64)

    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.MultiheadAttention(16, 4, bias=False, batch_first=True,
                                           dtype=torch.float64)

    def loss(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        out = model(batch[0], batch[0], batch[0])[0]
        return (out - batch[1]).pow(2).mean()

    return make, loss, x, y


def twin_audit_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of the twin-audit table: per optimizer (registry name → its
    :class:`~gaugekit.audit.TwinAuditResult`), the final :math:`M_h` drift and output drift of
    its gauge and :math:`A = I` twins."""
    rows = []
    for name, res in results.items():
        for kind in ("gauge", "identity"):
            final = res.trace(kind).final
            rows.append({"optimizer": att.METHOD_LABELS[name], "twin": kind,
                         "M_h drift": final.mean_head_drift,
                         "output drift": final.output_drift})
    return rows
