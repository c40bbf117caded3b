r"""What the attention chapter shows, computed from the records of
:func:`gaugebook.attention.attention_runs.collect`: its tables and its figures, so that the
chapter's cells stay short. Our numbers come from
:func:`~gaugebook.attention.attention_summary.run_rows` and
:func:`~gaugebook.attention.attention_summary.headline`, the published ones from
:data:`gaugebook.attention.attention_runs.PUBLISHED`. Muon + Adam takes Muon's colour; twins are
told apart by line style and grey level, never by an optimizer's colour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.lines import Line2D

from gaugebook.attention import attention_runs as att
from gaugebook.attention.attention_summary import (
    RUN_HEADERS,
    final_comparisons,
    fmt_ratio,
    pick,
    ratio,
    ratio_comparisons,
    run_rows,
    step1_comparisons,
    twin_label,
    unique_runs,
    usable,
)
from gaugebook.present import viz
from gaugebook.present.stats import fmt_spread
from gaugebook.present.tables import NBSP, fmt, gauge_class, yes_no

Records = Mapping[str, Sequence[Mapping[str, Any]]]

#: How a twin is drawn along training: line style, grey level and marker (never an optimizer's
#: colour: the columns of a figure are the optimizers).
TWIN_STYLES: dict[str, dict[str, Any]] = {
    "gauge 777": {"ls": "-", "color": "0.0", "marker": "o", "label": "gauge twin"},
    "noise 1e-07": {"ls": "--", "color": "0.45", "marker": "s", "label": "noise $10^{-7}$"},
    "noise 1e-05": {"ls": ":", "color": "0.6", "marker": "^", "label": "noise $10^{-5}$"},
}


#: The headers and formats of the twin columns of :func:`step1_table` and :func:`final_tables`.
_TWIN_HEADERS = {"gauge": "gauge twin", "pub": "published", "noise7": "noise 10⁻⁷",
                 "pub_noise7": "published", "noise5": "noise 10⁻⁵", "ratio": "gauge / noise",
                 "identity": "A = I, largest"}
_TWIN_FORMATS = {**dict.fromkeys(("gauge", "pub", "noise7", "pub_noise7", "noise5"), ".2e"),
                 "identity": "g"}


def color(method: str) -> str:
    """The book's colour of an attention optimizer (Muon + Adam: Muon's)."""
    return viz.method_color("muon" if method == "muon_adam" else method)


def _label(method: str) -> str:
    return att.METHOD_LABELS.get(method, method)


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def twin_text(twin: str) -> str:
    """A twin's label for a table: ``noise 10⁻⁷`` for ``noise 1e-07``, joined by a no-break
    space so that a narrow column never breaks it."""
    if twin.startswith("noise "):
        exponent = int(twin.split("e")[-1])
        twin = "noise 10" + str(exponent).translate(_SUPERSCRIPT)
    return twin.replace(" ", NBSP)


def _twin_cells(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` of :func:`~gaugebook.attention.attention_summary.run_rows` with the cells every
    table of runs shows: the optimizer's label, the twin in words, the collapse flag."""
    return [{**r, "optimizer": r["label"], "twin": twin_text(r["twin"]),
             "collapsed": yes_no(r["collapsed"])} for r in rows]


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------


def _logit_table(head: Mapping[str, Any], when: str, pub_gauge: Mapping[str, float],
                 pub_noise: Mapping[str, float]) -> str:
    """The logit drift of the gauge and the noise 1e-7 twin per optimizer at ``when``
    (``"step1"`` or ``"final"``), each beside its published value (by method, where the paper
    gives one), and their ratio (one twin of each: two significant digits,
    :func:`~gaugebook.attention.attention_summary.fmt_ratio`)."""
    rows = []
    for method in att.METHODS:
        gauge, noise = head[method][f"gauge_{when}_logit"], head[method][f"noise7_{when}_logit"]
        rows.append({"optimizer": _label(method), "gauge": gauge, "pub": pub_gauge.get(method),
                     "noise7": noise, "pub_noise7": pub_noise.get(method),
                     "ratio": fmt_ratio(ratio(gauge, noise))})
    return viz.table_html(rows, ["optimizer", "gauge", "pub", "noise7", "pub_noise7", "ratio"],
                          headers=_TWIN_HEADERS, formats=_TWIN_FORMATS)


def step1_table(head: Mapping[str, Any]) -> str:
    """Logit drift after one step: gauge and noise 1e-7 twin per optimizer, their ratio, and
    the published values (Adam only)."""
    pub = att.PUBLISHED
    return _logit_table(head, "step1", {"adam": pub["adam_step1_gauge_logit_drift"]},
                        {"adam": pub["adam_step1_noise1e-7_logit_drift"]})


def final_tables(head: Mapping[str, Any]) -> tuple[str, str]:
    """The drifts at the end of training as two tables: the mean ``M_h`` drift (gauge twin,
    published, both noise twins, the ``A = I`` control's largest drift) and the logit drift
    (gauge twin, noise 1e-7 twin, each beside its published value, and their ratio)."""
    pub = att.PUBLISHED
    pub_m = {"adam": pub["adam_final_m_drift"], "momentum": pub["momentum_final_m_drift"],
             "scalar_adam": pub["scalar_adam_final_m_drift"],
             "muon_adam": pub["muon_gauge_final_m_drift"]}
    m_rows = []
    for method in att.METHODS:
        h = head[method]
        m_rows.append({
            "optimizer": _label(method),
            "class": gauge_class(method in att.EQUIVARIANT),
            "gauge": h["gauge_final_m"], "pub": pub_m[method], "noise7": h["noise7_final_m"],
            "noise5": h["noise5_final_m"], "identity": h["identity_max"]})
    m_html = viz.table_html(
        m_rows, ["optimizer", "class", "gauge", "pub", "noise7", "noise5", "identity"],
        headers=_TWIN_HEADERS, formats=_TWIN_FORMATS)
    return m_html, _logit_table(
        head, "final",
        {"adam": pub["adam_final_logit_drift"], "muon_adam": pub["muon_gauge_final_logit_drift"]},
        {"muon_adam": pub["muon_noise1e-7_final_logit_drift"]})


def ratio_table(head: Mapping[str, Any]) -> str:
    """The structural ratio per optimizer (:func:`~gaugebook.attention.attention_summary.
    structural_ratio`): the twins counted, the range of the gauge twins' final logit drift, the
    largest noise twin's, the ratio (to the digits its spread over init seeds supports). Adam
    has two rows: over the paper's twin set (the published numbers beside it) and over all our
    twins (the noise twins of a second init seed added)."""
    pub = att.PUBLISHED

    def row(name: str, s: Mapping[str, Any]) -> dict[str, Any]:
        return {"optimizer": name, "twins": f"{s['num_gauge']} / {s['num_noise']}",
                "gauge": (None if s["gauge_min"] is None
                          else f"{s['gauge_min']:.3g} – {s['gauge_max']:.3g}"),
                "noise": s["noise_max"], "ratio": s["text"]}

    lo, hi = pub["multiseed_adam_gauge_final_logit_drift"]
    rows = [row("Adam, the paper's twins", head["structural_paper"])
            | {"pub_gauge": f"{lo:g} – {hi:g}",
               "pub_noise": pub["multiseed_largest_adam_noise_final_logit_drift"],
               "pub_ratio": pub["structural_ratio"]},
            row("Adam, all our twins", head["structural"]["adam"])]
    rows += [row(_label(m), head["structural"][m]) for m in att.METHODS if m != "adam"]
    return viz.table_html(
        rows, ["optimizer", "twins", "gauge", "pub_gauge", "noise", "pub_noise", "ratio",
               "pub_ratio"],
        headers={"twins": "twins", "gauge": "gauge twins",
                 "pub_gauge": "published", "noise": "largest noise", "pub_noise": "published",
                 "ratio": "ratio", "pub_ratio": "published"},
        formats={"noise": ".3g", "pub_noise": ".1e", "pub_ratio": "g"})


def twin_comparison_table(head: Mapping[str, Any]) -> str:
    """Every comparison of gauge twins with noise twins the page states, under the book's one
    rule (:func:`~gaugebook.attention.attention_summary.twin_comparison`): per optimizer, drift
    and noise size, the difference of the mean ``log10`` drifts (gauge − noise, in orders of
    magnitude) with its 95 % interval, Welch's p, the p paired by init seed, and what it
    allows: ``above``, ``below`` or level within the seeds' spread."""
    found = [("step 1, logits", "10⁻⁷", m, c) for m, c in step1_comparisons(head).items()]
    found += [("end, M_h" if kind == "m" else "end, logits", "10⁻⁷", m, c)
              for (kind, m), c in final_comparisons(head).items()]
    found += [("end, logits", "10⁻⁷" if scale == 1e-7 else "10⁻⁵", m, c)
              for (scale, m), c in ratio_comparisons(head).items()]
    found.sort(key=lambda item: att.METHODS.index(item[2]))  # stable: each rule's in order
    rows, seen = [], set()
    for when, noise, method, c in found:
        if c is None or (when, noise, method) in seen:
            continue
        seen.add((when, noise, method))
        rows.append({
            "optimizer": _label(method), "drift": when, "noise": noise,
            "diff": f"{fmt_spread(c.diff, c.half_width, signed=True)} "
                    f"({fmt_spread(c.low, c.half_width, signed=True)} to "
                    f"{fmt_spread(c.high, c.half_width, signed=True)})",
            "welch_p": c.welch_p, "paired_p": c.paired_p, "reads": c.words("below", "above")})
    return viz.table_html(
        rows, ["optimizer", "drift", "noise", "diff", "welch_p", "paired_p", "reads"],
        headers={"drift": "drift", "noise": "noise twins",
                 "diff": "gauge − noise, orders of magnitude (95 % CI)", "welch_p": "Welch p",
                 "paired_p": "paired p", "reads": "gauge twins"},
        formats={"welch_p": ".2g", "paired_p": ".2g"})


def multiseed_rows(records: Records) -> list[dict[str, Any]]:
    """Every twin of the multiseed parts (Adam and the controls), once, base models left out."""
    rows = run_rows([*records.get("multiseed", []), *records.get("multiseed_controls", [])])
    return [r for r in unique_runs(rows) if r["kind"] != "base"]


def multiseed_table(records: Records) -> str:
    """:func:`multiseed_rows` as a table: final and step-1 drifts, accuracy, collapse flag."""
    return viz.table_html(
        _twin_cells(multiseed_rows(records)),
        ["optimizer", "init_seed", "twin", "final_logit_drift", "final_m_drift",
         "step1_logit_drift", "val_acc", "collapsed"], headers=RUN_HEADERS,
        formats={"final_logit_drift": ".3e", "final_m_drift": ".3e",
                 "step1_logit_drift": ".2e", "val_acc": ".4f"})


def accuracy_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Final losses and accuracies of every run of ``rows`` (:func:`~gaugebook.experiments.
    attention.run_rows`), the gap to the base's validation accuracy and the collapse flag."""
    numbers = ["train_loss", "val_loss", "train_acc", "val_acc", "acc_gap"]
    return viz.table_html(
        _twin_cells(rows), ["optimizer", "twin", *numbers, "collapsed"],
        headers={**RUN_HEADERS, "acc_gap": "|val acc − base|"},
        formats=dict.fromkeys(numbers, ".4f"))


def float64_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The float64 twins (base models left out): drifts after one step and at the end."""
    drifts = ["step1_logit_drift", "step1_m_drift", "final_logit_drift", "final_m_drift"]
    return viz.table_html(
        _twin_cells([r for r in rows if r["kind"] != "base"]),
        ["optimizer", "twin", *drifts, "collapsed"], headers=RUN_HEADERS,
        formats=dict.fromkeys(drifts, ".2e"))


def lm_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The character-level LM's runs: drifts, losses, accuracy, collapse flag (the text the
    runs used is the same for all and named in the chapter's caption)."""
    f = ".3f"
    return viz.table_html(
        _twin_cells(rows), ["optimizer", "twin", "step1_logit_drift", "final_logit_drift",
                            "final_m_drift", "train_loss", "val_loss", "val_acc", "collapsed"],
        headers=RUN_HEADERS, formats={"step1_logit_drift": ".2e", "final_logit_drift": ".2e",
                 "final_m_drift": ".2e", "train_loss": f, "val_loss": f, "val_acc": f})


def lm_comparison_table(family: Any, records: Sequence[Mapping[str, Any]]) -> str:
    """Our character-level LM beside the paper's (:data:`~gaugebook.attention.attention_runs.
    PUBLISHED` ``["charlm_gpu"]``): size, context and batch, steps, precision and device, and
    Adam's final logit drifts and step-1 ratio. ``family``: the part's
    :class:`~gaugebook.attention.attention_runs.TwinFamily`; ``records``: the part's records."""
    pub = att.PUBLISHED["charlm_gpu"]
    ok = usable(run_rows(records))
    gauge, noise = ((pick(ok, "adam", twin, None) or {}) for twin in ("gauge 777", "noise 1e-07"))
    shape = family.model
    devices = ", ".join(sorted({r["device"] for r in records if r.get("device")})) or "—"
    step1 = ratio(gauge.get("step1_logit_drift"), noise.get("step1_logit_drift"))
    final = [fmt(twin.get("final_logit_drift"), ".3g") for twin in (gauge, noise)]
    rows = [
        {"item": "model", "ours": f"{shape.num_layers} layers of width {shape.d_model}, "
         f"{shape.num_heads} heads", "paper": f"{pub['num_layers']} layers of width "
         f"{pub['d_model']}, {pub['num_heads']} heads"},
        {"item": "context, batch", "ours": f"{shape.seq_len}, {family.task['batch_size']}",
         "paper": f"{pub['seq_len']}, {pub['batch_size']}"},
        {"item": "steps", "ours": f"{family.num_steps:,}", "paper": f"{pub['num_steps']:,}"},
        {"item": "precision, device", "ours": f"{family.dtype}, {devices}",
         "paper": f"{pub['dtype']}, {pub['device']}"},
        {"item": "Adam, final logit drift: gauge twin", "ours": final[0],
         "paper": "{:g}–{:g}".format(*pub["adam_gauge_final_logit_drift"])},
        {"item": "Adam, final logit drift: noise twins", "ours": f"{final[1]} (10⁻⁷)",
         "paper": "{:g}–{:g} (10⁻⁷, 10⁻⁵)".format(*pub["adam_noise_final_logit_drift"])},
        {"item": "Adam, step 1: gauge twin / 10⁻⁷ noise twin", "ours": fmt_ratio(step1),
         "paper": "—"},
        {"item": "Adam, step 1: smallest gauge / largest noise twin, 10⁻⁵ included",
         "ours": "— (no 10⁻⁵ twin)", "paper": f"{pub['adam_step1_structural_ratio']:g}"},
    ]
    return viz.table_html(rows, ["item", "ours", "paper"])


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


def drift_figure(records: Sequence[Mapping[str, Any]]) -> Figure:
    """Mean ``M_h`` drift (top row) and logit drift (bottom row) of each twin from its base
    along training, one column per optimizer (titles in the book's colour of the optimizer),
    log axes (step 0 drawn at 0.5, a zero drift left out); the legend above the panels.
    ``records``: the single-seed part."""
    by_key = {(r["config"]["method"], twin_label(r["config"])): r for r in records}
    fig, axes = plt.subplots(2, len(att.METHODS), figsize=(7.0, 4.6), sharex=True,
                             sharey="row", layout="constrained", squeeze=False)
    for col, method in enumerate(att.METHODS):
        for row, metric in enumerate(("m_drift", "logit_drift")):
            ax = axes[row, col]
            for twin, style in TWIN_STYLES.items():
                rec = by_key.get((method, twin))
                if rec is None:
                    continue
                steps = np.maximum(np.array(rec["curves"]["step"], dtype=float), 0.5)
                vals = np.array([np.nan if v is None or v <= 0 else v
                                 for v in rec["curves"][metric]], dtype=float)
                ax.plot(steps, vals, ls=style["ls"], color=style["color"],
                        marker=style["marker"], ms=3, lw=1.3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks([1, 10, 100, 1000])
            ax.minorticks_off()
        axes[0, col].set_title(_label(method), color=color(method))
    axes[0, 0].set_ylabel("mean $M_h$ drift")
    axes[1, 0].set_ylabel("logit drift")
    fig.supxlabel("step (step 0 drawn at 0.5)", fontsize=10)
    handles = [Line2D([], [], ms=3, lw=1.3, **style) for style in TWIN_STYLES.values()]
    fig.legend(handles=handles, loc="outside upper center", ncol=len(handles))
    return fig


def heads_figure(records: Sequence[Mapping[str, Any]], method: str = "adam") -> Figure | None:
    """The final ``M_h`` of the 4 heads of layer 1 for ``method``'s base model (top row) and
    its gauge twin (bottom row), one colour scale per head (a colour bar under each column),
    the twins' relative distance in each bottom title. ``None`` when the records keep no head
    matrices. ``records``: the single-seed part."""
    heads = {twin_label(r["config"]): r["metrics"].get("heads_layer0_final")
             for r in records if r["config"]["method"] == method}
    pair = [heads.get("base"), heads.get("gauge 777")]
    if any(p is None for p in pair):
        return None
    count = len(pair[0])
    fig, axes = plt.subplots(2, count, figsize=(7.0, 4.4), layout="constrained",
                             squeeze=False)
    for h in range(count):
        mats = [np.array(p[h], dtype=float) for p in pair]
        lim = max(float(np.abs(m).max()) for m in mats)
        dist = np.linalg.norm(mats[0] - mats[1]) / (
            0.5 * (np.linalg.norm(mats[0]) + np.linalg.norm(mats[1])))
        for row, mat in enumerate(mats):
            ax = axes[row, h]
            im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():  # a whole frame round each matrix
                spine.set_visible(True)
        axes[0, h].set_title(f"head {h}")
        axes[1, h].set_title(f"rel = {dist:.2f}")
        bar = fig.colorbar(im, ax=axes[:, h], orientation="horizontal", shrink=0.75,
                           aspect=10)
        bar.set_ticks([-lim, 0.0, lim], labels=[f"{-lim:.2g}", "0", f"{lim:.2g}"])
    axes[0, 0].set_ylabel("base")
    axes[1, 0].set_ylabel("gauge twin")
    return fig


def multiseed_figure(records: Records) -> Figure:
    """The final logit drift of every twin of the multiseed table, one column per optimizer
    (log axis): gauge twins as filled circles, noise twins as hollow squares ($10^{-7}$) and
    triangles ($10^{-5}$), all in the optimizer's colour (the legend shows each marker in the
    four colours); a collapsed run is left out. The gap between the lowest circle and the
    highest hollow marker of a column is its structural ratio."""
    rows = [r for r in usable(multiseed_rows(records)) if r["final_logit_drift"]]
    marks = {"gauge": ("o", True), 1e-7: ("s", False), 1e-5: ("^", False)}
    offset = {"gauge": -0.17, 1e-7: 0.1, 1e-5: 0.26}  # each kind its own place in a column
    fig, ax = plt.subplots(figsize=(7.0, 3.4), layout="constrained")
    for i, method in enumerate(att.METHODS):
        mine = [r for r in rows if r["method"] == method]
        for key, (marker, filled) in marks.items():
            ys = [r["final_logit_drift"] for r in mine
                  if (r["kind"] == "gauge" if key == "gauge"
                      else r["kind"] == "noise" and r["noise_scale"] == key)]
            spread = np.linspace(-0.09, 0.09, len(ys)) if len(ys) > 1 else np.zeros(len(ys))
            xs = i + offset[key] + spread
            c = color(method)
            ax.plot(xs, ys, marker, ls="", ms=6, color=c, mfc=c if filled else "white",
                    mew=1.3)
    ax.set_yscale("log")
    ax.set_xticks(range(len(att.METHODS)), [_label(m) for m in att.METHODS])
    ax.set_xlim(-0.5, len(att.METHODS) - 0.5)
    ax.set_ylabel("final logit drift")
    # each legend entry shows its marker in every optimizer's colour: it matches the points
    labels = {"gauge": "gauge twin", 1e-7: "noise $10^{-7}$", 1e-5: "noise $10^{-5}$"}
    handles = [tuple(Line2D([], [], marker=marker, ls="", ms=6, color=color(m),
                            mfc=color(m) if filled else "white", mew=1.3)
                     for m in att.METHODS) for marker, filled in marks.values()]
    fig.legend(handles, [labels[k] for k in marks], loc="outside lower center", ncol=3,
               handler_map={tuple: HandlerTuple(ndivide=None, pad=0.1)}, handlelength=4)
    return fig
