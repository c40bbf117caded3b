r"""What the language-model chapter shows, computed from the records of
:func:`gaugebook.lm.lm_runs.collect` through the summaries of
:mod:`gaugebook.lm.lm_summary`: tables and figures, so that the chapter's cells
stay short. AdamW takes Adam's colour, dashed; Muon + Adam Muon's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gaugebook.attention import attention_runs as att
from gaugebook.attention.attention_summary import (
    RUN_HEADERS,
    fmt_ratio,
    run_rows,
    structural_ratio,
    usable,
)
from gaugebook.lm import lm_runs as lm
from gaugebook.lm import lm_summary as lms
from gaugebook.present import viz
from gaugebook.present.tables import NBSP, rate_grid_table, yes_no

Records = Sequence[Mapping[str, Any]]

_COLOR_OF = {"adamw": "adam", "muon_adam": "muon"}


def style(method: str) -> dict[str, Any]:
    """Colour and line style of ``method`` in the chapter's figures."""
    return {"color": viz.method_color(_COLOR_OF.get(method, method)),
            "ls": "--" if method == "adamw" else "-"}


def _pm(mean: float | None, sd: float | None) -> str:
    """``mean ± sd``, the mean to the digits the sd supports (:func:`~gaugebook.lm.lm_summary.
    fmt_loss`)."""
    if mean is None:
        return "—"
    m, s = lms.fmt_loss(mean, sd)
    return m + ("" if sd is None else f"{NBSP}±{NBSP}{s}")


def selection_table(records: Records) -> str:
    """Each optimizer's grid: mean final validation loss of the selection seeds per rate, the
    chosen rate in bold-free brackets, and whether the choice is at an edge of the grid."""
    return rate_grid_table(lms.selection_rows(records), "mean final validation loss")


def fresh_table(records: Records) -> str:
    """The comparison: each optimizer at its selected rate over the fresh seeds, validation
    loss (mean ± sd) at equal steps and at equal wall time, ranks by the one rule (neighbours
    it cannot tell apart share a group), ms per step, whether it keeps the head gauge."""
    rows = lms.fresh_rows(records, lms.timing(records))
    out = [{**r, "optimizer": r["label"] + ("" if not r["failed"] else
                                            f" ({r['failed']} of {r['seeds']} failed)"),
            "steps": _pm(r["val_loss"], r["val_loss_sd"]),
            "time": _pm(r["val_loss_equal_time"], r["val_loss_equal_time_sd"]),
            "gauge": "keeps" if r["keeps_gauge"] else "breaks"} for r in rows]
    return viz.table_html(
        out, ["optimizer", "gauge", "lr", "steps", "rank_group", "ms_per_step",
              "steps_at_equal_time", "time", "rank_equal_time_group"],
        headers={"lr": "rate", "steps": "equal steps", "rank_group": "#",
                 "ms_per_step": "ms/step", "steps_at_equal_time": "steps",
                 "time": "equal time", "rank_equal_time_group": "#"},
        formats={"lr": "g", "ms_per_step": ".1f", "steps_at_equal_time": ".0f"})


def twin_table(records: Records) -> str:
    """The twins of the first fresh seed: final logit and ``M_h`` drift, validation loss gap
    to their base."""
    return viz.table_html(
        lms.twin_rows(records), ["label", "twin", "step1_logit_drift", "final_logit_drift",
                                 "final_m_drift", "val_loss", "val_loss_gap"],
        headers={**RUN_HEADERS, "label": "optimizer", "val_loss_gap": "|Δ val loss| to base"},
        formats={"step1_logit_drift": ".1e", "final_logit_drift": ".2e",
                 "final_m_drift": ".2e", "val_loss": ".4f", "val_loss_gap": ".1e"})


def split_table(records: Records) -> str:
    """Each optimizer's closest gauge twin beside its farthest 1e-7 noise twin at step 1 and
    their ratio (:func:`~gaugebook.lm.lm_summary.split_rows`), the final logit and ``M_h``
    drifts of gauge twin 777 and the 1e-7 noise twin."""
    out = [{**r, "optimizer": r["label"], "class": "keeps" if r["keeps_gauge"] else "breaks",
            "split": yes_no(r["split"])} for r in lms.split_rows(records)]
    return viz.table_html(
        out, ["optimizer", "class", "gauge_step1", "noise_step1", "ratio_text", "split",
              "gauge_final", "noise_final", "gauge_final_m", "noise_final_m"],
        headers={"class": "gauge (class)", "gauge_step1": "step 1: gauge",
                 "noise_step1": "noise", "ratio_text": "ratio", "split": "split",
                 "gauge_final": "end: gauge", "noise_final": "noise",
                 "gauge_final_m": "end M_h: gauge", "noise_final_m": "noise"},
        formats=dict.fromkeys(("gauge_step1", "noise_step1", "gauge_final", "noise_final",
                               "gauge_final_m", "noise_final_m"), ".1e"))


def cost_table(records: Records) -> str:
    """The spread of the final validation loss between gauge twins, noise twins and seeds."""
    rows = lms.cost_rows(records)
    out = [{"optimizer": r["label"],
            **{k: f"{r[f'{k}_range']:.1e} ({r[f'{k}_n']})" if r[f"{k}_range"] is not None
               else None for k in ("gauge", "noise", "seeds")},
            **{f"{k} sd": r[f"{k}_sd"] for k in ("gauge", "noise", "seeds")}} for r in rows]
    return viz.table_html(
        out, ["optimizer", "gauge", "gauge sd", "noise", "noise sd", "seeds", "seeds sd"],
        headers={"gauge": "gauge twins: range (models)", "noise": "noise twins: range",
                 "seeds": "seeds: range"},
        formats={"gauge sd": ".1e", "noise sd": ".1e", "seeds sd": ".1e"})


def loss_figure(records: Records) -> Figure:
    """Validation loss of the fresh seeds (mean, band min–max) against steps (left) and
    against the wall time of one model alone on this machine (right), from 5 % of the
    budget on."""
    ms = lms.timing(records)
    fresh = [r for r in records if r["config"].get("role") == "fresh"
             and r["config"]["twin"]["kind"] == "base" and r["status"] == "ok"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 3.3), sharey=True, layout="constrained")
    handles = []
    for method in lm.METHODS:
        runs = [r for r in fresh if r["config"]["method"] == method]
        if not runs:
            continue
        steps = np.array(runs[0]["curves"]["step"], dtype=float)
        vals = np.array([[np.nan if v is None else v for v in r["curves"]["val_loss"]]
                         for r in runs], dtype=float)
        keep = steps >= 0.05 * steps[-1]  # the first steps' losses would flatten the rest
        st = style(method)
        for ax, x in ((a, steps), (b, steps * ms.get(method, np.nan) / 1000.0)):
            ax.plot(x[keep], vals.mean(0)[keep], lw=1.4, **st)
            ax.fill_between(x[keep], vals.min(0)[keep], vals.max(0)[keep], color=st["color"],
                            alpha=0.15, lw=0)
        handles.append(Line2D([], [], lw=1.4, label=lm.METHOD_LABELS[method], **st))
    a.set_xlabel("step")
    b.set_xlabel("wall time of one model alone (s)")
    a.set_ylabel("validation loss (nats/char)")
    fig.legend(handles=handles, loc="outside right center", fontsize=8)
    return fig


def drift_figure(records: Records) -> Figure:
    """Logit drift of each optimizer's gauge twin (solid) and noise twin (dashed, 10⁻⁷)
    from their base along training, log axes (step 0 left out)."""
    rows = lms.twin_rows(records)
    methods = [m for m in lm.METHODS if any(r["method"] == m for r in rows)]
    cols = 4
    nrows = max(1, math.ceil(len(methods) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(7.0, 2.2 * nrows + 0.6), sharex=True,
                             sharey=True, layout="constrained", squeeze=False)
    for i, method in enumerate(methods):
        ax = axes[i // cols, i % cols]
        for r in (r for r in rows if r["method"] == method
                  and r["twin"] in ("gauge 777", "noise 1e-07")):
            steps = np.array(r["curves"]["step"], dtype=float)
            vals = np.array([np.nan if v is None or v <= 0 else v
                             for v in r["curves"]["logit_drift"]], dtype=float)
            keep = steps > 0
            ax.plot(steps[keep], vals[keep], color=style(method)["color"],
                    ls="-" if r["kind"] == "gauge" else "--", lw=1.3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(lm.METHOD_LABELS[method], color=style(method)["color"], fontsize=9)
    for j in range(len(methods), nrows * cols):
        axes[j // cols, j % cols].axis("off")
    for row in axes:
        row[0].set_ylabel("logit drift")
    fig.supxlabel("step", fontsize=10)
    fig.legend(handles=[Line2D([], [], color="0.2", ls="-", label="gauge twin (777)"),
                        Line2D([], [], color="0.2", ls="--", label="noise twin (10⁻⁷)")],
               loc="outside upper center", ncol=2)
    return fig


# --------------------------------------------------------------------------------------------
# the paper's GPU attention suite
# --------------------------------------------------------------------------------------------


def _range(xs: Sequence[float] | None, spec: str = ".3g") -> str:
    """``lo–hi`` of the finite values of ``xs`` (one value when they agree, ``—`` for none)."""
    xs = [x for x in xs or () if x is not None and math.isfinite(x)]
    if not xs:
        return "—"
    lo, hi = min(xs), max(xs)
    return f"{lo:{spec}}" if lo == hi else f"{lo:{spec}}–{hi:{spec}}"


def suite_summary(config: Any, records: Mapping[str, Records]) -> list[dict[str, Any]]:
    """Per suite part: its size, runs recorded of planned, Adam's step-1 structural ratio
    (smallest gauge twin's step-1 logit drift over the largest noise twin's), Adam's final
    gauge and noise logit drifts, the collapsed rules, and each rule's validation loss; with
    the paper's values (:data:`~gaugebook.attention.attention_runs.PUBLISHED` ``["gpu_suite"]``)."""
    out = []
    for part in att.SUITE_PARTS:
        fams = config.families(part)
        rows = run_rows(records.get(part, []))
        ok = usable(rows)
        adam = [r for r in ok if r["method"] == "adam"]
        ratio = structural_ratio(adam, "adam", key="step1_logit_drift")["ratio"]
        m = fams[0].model
        pub = att.PUBLISHED["gpu_suite"][part]
        out.append({
            "part": part, "size": f"{m.num_layers}\u00d7{m.d_model}, {m.num_heads} heads, "
            f"{fams[0].num_steps:,} steps",
            "recorded": f"{len(rows)} of {sum(len(f.twins) for f in fams)}", "runs": len(rows),
            "step1_ratio": ratio, "paper_step1_ratio": pub["step1_ratio"],
            "adam_gauge_final": _range([r["final_logit_drift"] for r in adam
                                        if r["kind"] == "gauge"]),
            "adam_noise_final": _range([r["final_logit_drift"] for r in adam
                                        if r["kind"] == "noise"]),
            "collapsed": ", ".join(sorted({att.METHOD_LABELS[r["method"]] for r in rows
                                           if r["collapsed"]})) or ("none" if rows else "—"),
            "paper_collapsed": ", ".join(att.METHOD_LABELS[x] for x in pub["collapsed"])
            or "none",
            "val_loss": {meth: _range([r["val_loss"] for r in ok if r["method"] == meth
                                       and r["kind"] == "base"]) for meth in att.METHODS},
        })
    return out


def suite_table(summary: Sequence[Mapping[str, Any]]) -> str:
    """The suite, ours beside the paper's: runs recorded, step-1 ratio, collapsed rules."""
    return viz.table_html(
        summary, ["part", "size", "recorded", "step1_ratio", "paper_step1_ratio", "collapsed",
                  "paper_collapsed"],
        headers={"recorded": "runs recorded", "step1_ratio": "Adam step-1 ratio (ours)",
                 "paper_step1_ratio": "(paper)", "collapsed": "collapsed (ours, flagged)",
                 "paper_collapsed": "(paper, unflagged)"},
        formats={"step1_ratio": fmt_ratio, "paper_step1_ratio": "g"})


def suite_text_table(summary: Sequence[Mapping[str, Any]]) -> str:
    """The suite's character LM: final logit drifts and validation losses, ours beside the
    paper's."""
    text = next(s for s in summary if s["part"] == "suite_text")
    pub = att.PUBLISHED["gpu_suite"]["suite_text"]
    rows = [
        {"quantity": "Adam, final logit drift, gauge twins", "ours": text["adam_gauge_final"],
         "paper": _range(pub["adam_gauge_final_logit_drift"], "g")},
        {"quantity": "Adam, final logit drift, noise twins", "ours": text["adam_noise_final"],
         "paper": _range(pub["adam_noise_final_logit_drift"], "g")},
    ]
    for meth in att.METHODS:
        rows.append({"quantity": f"{att.METHOD_LABELS[meth]}, validation loss (untuned rate)",
                     "ours": text["val_loss"][meth],
                     "paper": _range(pub["val_loss"].get(meth), "g")})
    return viz.table_html(rows, ["quantity", "ours", "paper"])
