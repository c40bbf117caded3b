r"""The attention chapter's glued values, each formatted as the prose quotes it, one function
per section (:func:`setup_numbers`, :func:`step1_numbers`, :func:`final_numbers`,
:func:`accuracy_numbers`, :func:`ratio_numbers`, :func:`float64_numbers`, :func:`lm_numbers`),
and the chapter's two live checks: the float64 gauge twin of the initial model
(:func:`live_gauge_check`) and the twin audit of torch's ``nn.MultiheadAttention`` (its model
and loss :func:`mha_regression`, its table :func:`twin_audit_rows`). Each ``*_numbers``
returns ``name → value`` for :func:`gaugekit.report.viz.glue_page`: strings (an em dash where a
record is missing) and Markdown for the words pasted with ``{glue:md}``.

Distances are :math:`\operatorname{rel}(A, B) = \|A - B\|_F / (\tfrac12(\|A\|_F + \|B\|_F))`;
the :math:`M_h` drift is its mean over the heads of :math:`M_h = W_{Q,h}^\top W_{K,h}`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from gaugekit.audit import LossFn
from gaugekit.experiments import attention as att
from gaugekit.gauge import relative_distance
from gaugekit.problems import attention as A
from gaugekit.report.attention_summary import machine_throughput, pick, ratio, usable
from gaugekit.report.tables import as_markdown, fmt

PUB = att.PUBLISHED
Values = dict[str, Any]


def setup_numbers(config: Any, records: Sequence[Mapping[str, Any]]) -> Values:
    """The single-seed budget (``steps``, ``checkpoints``) and the throughput of the part's
    workers together (:func:`~gaugekit.report.attention_summary.machine_throughput`) beside
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


def step1_numbers(head: Mapping[str, Any]) -> Values:
    """Adam's step-1 logit drift of the gauge and the 1e-7 noise twin, their ratio, and the
    published pair."""
    return {
        "adam_step1_gauge": fmt(head["adam"]["gauge_step1_logit"]),
        "adam_step1_noise": fmt(head["adam"]["noise7_step1_logit"]),
        "step1_ratio": fmt(head["step1_ratio"], ".3g"),
        "pub_step1_gauge": fmt(PUB["adam_step1_gauge_logit_drift"], ".1e"),
        "pub_step1_noise": fmt(PUB["adam_step1_noise1e-7_logit_drift"], ".1e"),
    }


def _below(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "not comparable (missing records)"
    return "below" if a < b else "not below"


def final_numbers(head: Mapping[str, Any]) -> Values:
    r"""The final :math:`M_h` drift of every optimizer's gauge and 1e-7 noise twin; Adam's
    gauge twin over the farther of its noise twins; whether the equivariant rules end below
    their noise twins; Muon's gauge / noise ratios; the :math:`A = I` control's largest drift."""
    out: Values = {}
    for method in att.METHODS:
        out[f"final_m_{method}"] = fmt(head[method]["gauge_final_m"], ".3g")
        out[f"noise7_m_{method}"] = fmt(head[method]["noise7_final_m"], ".3g")
    out["pub_adam_m"] = fmt(PUB["adam_final_m_drift"], "g")
    adam, mu = head["adam"], head["muon_adam"]
    farther = max([x for x in (adam["noise7_final_m"], adam["noise5_final_m"]) if x],
                  default=None)
    cmp = [_below(head[m]["gauge_final_m"], head[m]["noise7_final_m"])
           for m in ("momentum", "scalar_adam")]
    out["cmp_equivariant"] = as_markdown(
        f"both {cmp[0]}" if cmp[0] == cmp[1] else f"respectively {cmp[0]} and {cmp[1]}")
    out["adam_vs_noise"] = fmt(ratio(adam["gauge_final_m"], farther), ".3g")
    out["muon_ratio"] = fmt(ratio(mu["gauge_final_m"], mu["noise7_final_m"]), ".3g")
    out["muon_logit_ratio"] = fmt(ratio(mu["gauge_final_logit"], mu["noise7_final_logit"]),
                                  ".3g")
    identity = [head[m]["identity_max"] for m in att.METHODS]
    out["identity_all"] = fmt(max([x for x in identity if x is not None], default=None), "g")
    return out


def accuracy_numbers(head: Mapping[str, Any]) -> Values:
    """Adam's gauge twin's accuracy gap to its base, and the published bound."""
    return {"adam_acc_gap": fmt(head["adam"]["acc_gap"], ".4f"),
            "pub_acc_gap": fmt(PUB["adam_final_accuracy_gap"], "g")}


def ratio_numbers(head: Mapping[str, Any], verdicts: Mapping[str, str]) -> Values:
    """Adam's structural ratio, how many twins it spans, the published ratio, and the
    verdicts of :func:`gaugekit.report.attention.ratio_verdicts`."""
    sa = head["structural"]["adam"]
    return {
        "ratio_adam": fmt(sa["ratio"], ".3g"),
        "ratio_n": as_markdown(f"{sa['num_gauge']} gauge and {sa['num_noise']} noise twins"),
        "pub_ratio": fmt(PUB["structural_ratio"], "g"),
        "ratio_verdict": as_markdown(verdicts["adam"]),
        "ratio_controls": as_markdown(verdicts["controls"]),
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
    the gauge twins (Adam's beside its 1e-7 noise twin), Adam's logit-drift ratio, and the
    collapsed runs (non-collapsed runs only enter the numbers)."""
    ok = usable(rows)

    def drift(method: str, twin: str, key: str = "final_m_drift") -> float | None:
        return (pick(ok, method, twin, None) or {}).get(key)

    texts = sorted({r["text_used"] for r in rows if r["text_used"]})
    logits = [drift("adam", t, "final_logit_drift") for t in ("gauge 777", "noise 1e-07")]
    collapsed = sorted({r["label"] for r in rows if r["collapsed"]})
    return {
        "lm_text": ", ".join(texts) or "—",
        "lm_steps": fmt(family.num_steps, "d"),
        "lm_T": fmt(family.model.seq_len, "d"),
        "lm_batch": fmt(family.task["batch_size"], "d"),
        "lm_adam_gauge": fmt(drift("adam", "gauge 777"), ".3g"),
        "lm_adam_noise": fmt(drift("adam", "noise 1e-07"), ".3g"),
        "lm_logit_ratio": fmt(ratio(*logits), ".3g"),
        "lm_scalar_gauge": fmt(drift("scalar_adam", "gauge 777"), ".3g"),
        "lm_momentum_gauge": fmt(drift("momentum", "gauge 777"), ".3g"),
        "lm_collapsed": as_markdown(", ".join(collapsed) or "none"),
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
