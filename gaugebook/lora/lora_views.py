r"""What the LoRA chapter shows, computed from the records of
:func:`gaugebook.lora.lora_runs.collect` through :mod:`gaugebook.lora.lora_summary`: tables and
figures, so that the chapter's cells stay short.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from gaugebook.lora import lora_runs as lr
from gaugebook.lora import lora_summary as ls
from gaugebook.present import viz
from gaugebook.present.stats import fmt_spread
from gaugebook.present.tables import NBSP, rate_grid_table
from gaugekit.audit.factor_results import BREAKS, CHAOTIC, KEEPS, UNJUDGED

Records = Sequence[Mapping[str, Any]]

_COLORS = {"adamw": "adam", "lora_rite": "gram", "scalar_adam": "scalar_adam",
           "muon": "muon", "scaled_gd": "scaled_gd"}
TWIN_LABELS = {"orthogonal": "gauge, O(r)", "general": "gauge, GL(r)", "noise": "noise 1e-7"}
INIT_LABELS = {"zero": "B = 0", "random": "both random"}
_SHORT = {KEEPS: "keeps", BREAKS: "breaks", CHAOTIC: "chaotic", UNJUDGED: "not judged"}


def color(method: str) -> str:
    """The colour of ``method`` in the chapter's figures (the book's colour of its class)."""
    return viz.method_color(_COLORS.get(method, method))


def _pm(mean: float | None, sd: float | None, spec: str = ".3f") -> str:
    if mean is None:
        return "—"
    return f"{mean:{spec}}" + ("" if sd is None else f"{NBSP}±{NBSP}{sd:{spec}}")


def selection_table(records: Records) -> str:
    """Each optimizer's grid: mean final held-out loss of the selection seeds per rate, the
    chosen rate in brackets, and whether the choice is at an edge of the grid."""
    return rate_grid_table(ls.selection_rows(records), "mean final held-out loss")


def _versus(c: Any) -> str:
    """A comparison's difference and the half-width of its 95 % interval in one cell,
    ``+0.04 ± 0.04``."""
    if c is None:
        return "—"
    return f"{fmt_spread(c.diff, c.half_width, signed=True)}{NBSP}±{NBSP}" \
           f"{fmt_spread(c.half_width, c.half_width)}"


def fresh_table(records: Records, init: str = "zero") -> str:
    """Each optimizer at its selected rate over the fresh seeds: held-out loss on the new text
    at equal steps, its difference from AdamW's with the 95 % interval (paired by seed), ms
    per step (geometric mean of the re-timings), the loss at equal time, the loss on the
    pretraining text after fine-tuning ("old text")."""
    out = [{**r, "optimizer": r["label"] + ("" if not r["failed"] else
                                            f" ({r['failed']} of {r['seeds']} failed)"),
            "steps": _pm(r["val_loss"], r["val_loss_sd"]),
            "vs": _versus(r["vs_adamw"]),
            "time": _pm(r["val_loss_equal_time"], r["val_loss_equal_time_sd"]),
            "source": _pm(r["source_val_loss"], r["source_val_loss_sd"])}
           for r in ls.fresh_rows(records, init)]
    return viz.table_html(
        out, ["optimizer", "lr", "steps", "vs", "ms_per_step", "time", "source"],
        headers={"lr": "rate", "steps": "equal steps", "vs": "− AdamW",
                 "ms_per_step": "ms/step", "time": "equal time", "source": "old text"},
        formats={"lr": "g", "ms_per_step": ".0f"})


def twin_table(records: Records) -> str:
    """Per optimizer and initialisation, each twin's drift of the adapters' ``B A`` from its
    base after the first step and at the end (means over adapters and seeds), its held-out logit
    drift at the end, and its held-out loss minus the base's (mean ± sd), beside the seed-to-seed
    sd of the base's loss."""
    out = [{**r, "init": INIT_LABELS[r["init"]], "twin": TWIN_LABELS[r["twin"]],
            "gap": _pm(r["gap"], r["gap_sd"], ".1e")} for r in ls.twin_rows(records)]
    return viz.table_html(
        out, ["label", "init", "twin", "step1", "drift", "logit_drift", "gap", "seed_sd"],
        headers={"label": "optimizer", "init": "init", "twin": "twin",
                 "step1": "B A drift, step 1", "drift": "end", "logit_drift": "logit drift, end",
                 "gap": "Δ held-out loss", "seed_sd": "seeds' sd"},
        formats={"step1": ".0e", "drift": ".1e", "logit_drift": ".1e", "seed_sd": ".1e"})


def verdict_table(records: Records) -> str:
    """The library's verdict on each optimizer's gauge twins, per group and initialisation,
    after the first step and at the end (:func:`~gaugebook.lora.lora_summary.group_verdict`)."""
    out = []
    for method in lr.METHODS:
        for init in lr.INITS:
            row = {"optimizer": lr.METHOD_LABELS[method], "init": INIT_LABELS[init],
                   "built": lr.KEEPS[method] or "none"}
            for group, key in (("orthogonal", "o"), ("general", "gl")):
                for when in ("step1", "end"):
                    v = ls.group_verdict(records, method, init, group, when)
                    row[f"{key}_{when}"] = None if v is None else _SHORT[v.outcome]
            out.append(row)
    return viz.table_html(
        out, ["optimizer", "init", "built", "o_step1", "o_end", "gl_step1", "gl_end"],
        headers={"built": "built to keep", "o_step1": "O(r), step 1", "o_end": "O(r), end",
                 "gl_step1": "GL(r), step 1", "gl_end": "GL(r), end"})


def audit_table(audits: Mapping[tuple[str, str], Any]) -> str:
    """The library's float64 twin audit of each optimizer, per initialisation: the verdict for
    each group and the drift that decides it, beside the noise twin's."""
    out = []
    for (method, init), res in audits.items():
        row = {"optimizer": lr.METHOD_LABELS[method], "init": INIT_LABELS[init],
               "noise": res.drift("noise")}
        for group, key in (("orthogonal", "o"), ("general", "gl")):
            v = res.verdict(group)
            row[key] = f"{_SHORT[v.outcome]}{NBSP}({v.gauge:.0e})"
        out.append(row)
    return viz.table_html(out, ["optimizer", "init", "o", "gl", "noise"],
                          headers={"o": "O(r) twin", "gl": "GL(r) twin", "noise": "noise twin"},
                          formats={"noise": ".0e"})


def loss_figure(records: Records, init: str = "zero") -> Figure:
    """Held-out loss on the fine-tuning text against steps: each optimizer's fresh seeds at its
    selected rate (mean, band min–max)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    bases = ls._fresh(records, init=init, twin="base")
    for method in lr.METHODS:
        runs = [r for r in bases if r["config"]["method"] == method and ls._usable(r)]
        if not runs:
            continue
        steps = runs[0]["curves"]["step"]
        ys = np.array([r["curves"]["val_loss"] for r in runs if r["curves"]["step"] == steps])
        c = color(method)
        ax.plot(steps, ys.mean(0), color=c, label=lr.METHOD_LABELS[method])
        ax.fill_between(steps, ys.min(0), ys.max(0), color=c, alpha=0.2, lw=0)
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("held-out loss (new text)")
    viz.legend_beside(ax)
    return fig


def drift_figure(records: Records) -> Figure:
    """Each twin's drift of the adapters' ``B A`` from its base along fine-tuning (mean over the
    fresh seeds): one panel per initialisation (rows) and twin kind (columns), one line per
    optimizer, log scale."""
    fig, axes = plt.subplots(len(lr.INITS), len(lr.TWIN_KINDS), figsize=(7.2, 4.6),
                             sharex=True, sharey=True)
    for i, init in enumerate(lr.INITS):
        for j, kind in enumerate(lr.TWIN_KINDS):
            ax = axes[i, j]
            for method in lr.METHODS:
                curve = ls.drift_curves(records, method, init, kind)
                if curve is None:
                    continue
                steps, drift = curve
                pts = [(x, y) for x, y in zip(steps, drift, strict=True) if x > 0 and y > 0]
                if pts:
                    ax.plot(*zip(*pts, strict=True), color=color(method), marker=".",
                            label=lr.METHOD_LABELS[method])
            ax.set_xscale("log")
            ax.set_yscale("log")
            if i == 0:
                ax.set_title(TWIN_LABELS[kind])
            if j == 0:
                ax.set_ylabel(f"{INIT_LABELS[init]}\ndrift of B A")
            if i == len(lr.INITS) - 1:
                ax.set_xlabel("step")
    viz.legend_below(fig, *axes.flat, ncol=len(lr.METHODS))
    return fig
