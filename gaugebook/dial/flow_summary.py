r"""FlowAdam in the chapter's text (chapter 5): its rows, the audit, trigger rates, ablation.

What the chapter says with the records of :mod:`gaugebook.dial.dial_runs` (FlowAdam's rows
``flow_rows`` and ``flow_long``; the ``flow_ablation`` runs, read back as columns by
:func:`gaugebook.dial.dial_runs.ablation_results`) and with the measurements of
:mod:`gaugebook.dial.flow_runs` (the audit, the per-entry learning rate): table rows
(``*_rows``, ``*_table``), short text blocks and the numbers its text glues (``*_numbers``,
glue names as keys). The selections are Table 2's rule (:func:`~gaugebook.dial.flow_runs.
oracle_choice`) and the experiment's protocols.

Last, the chapter's live demonstrations on the testbed instance of the first seed, each
returned as a :class:`Demo` (the numbers the page glues, the lines it prints, the data its
figure draws): the dial as an anisotropy knob (:func:`anisotropy_demo`) and how far FlowAdam's
warm-up carries the factors (:func:`warmup_demo`); and the text forms of the values a scale may
leave undefined (:func:`text_forms`). The dial is :class:`~gaugekit.optim.FlowAdam` with the
flow path off,

.. math:: \theta_i \leftarrow \theta_i - \frac{\mathrm{lr}}{s_i^p\,\bar s^{1-p} + \varepsilon}\,
   \hat m_i ,

Adam at :math:`p = 1`, shared-scale Adam at :math:`p = 0`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from gaugebook.dial import flow_runs as fx
from gaugebook.dial.dial_runs import (
    FLOW_ROWS,
    PAPER_PROTOCOL,
    PUBLISHED_FLOW_LONG,
    PUBLISHED_FLOW_ROWS,
    PUBLISHED_FLOW_SHORT_RMS,
    DialConfig,
    get_config,
)
from gaugebook.dial.dial_summary import (
    _rec_sd,
    flow_row_name,
    flow_rows,
    gd_seeds,
    is_paper_setting,
    seed_stats,
)
from gaugebook.dial.flow_runs import (
    AUDIT_CASES,
    FLOW_LABEL,
    GD_LABEL,
    INVARIANT,
    PUBLISHED_FLOW_VS_DIAL,
    FlowAdamConfig,
    FlowAudit,
    RunColumns,
    dial_label,
    stiffness_label,
)
from gaugebook.engine.selection import ORACLE, select
from gaugebook.present import stats
from gaugebook.present.stats import Comparison
from gaugebook.present.tables import NBSP, fmt, rec_lr, yes_no
from gaugekit.optim import GD, FlowAdam, SharedScaleAdam


def eligible_steps(runs: RunColumns, warmup: int = INVARIANT["flow_warmup"]) -> Tensor:
    """Per run, the updates at which the flow could fire: those after step ``warmup + 1`` up to
    the stop, ``max(stop − warmup − 1, 1)``."""
    return (runs["stop"] - (warmup + 1)).clamp_min(1)


def trigger_rates(
    results: Mapping[str, RunColumns], warmup: int = INVARIANT["flow_warmup"]
) -> dict[str, Tensor]:
    """``flow_steps / eligible_steps`` per run (float64), for every label starting with
    ``"FlowAdam"``."""
    return {label: (r["flow_steps"] / eligible_steps(r, warmup)).to(torch.float64)
            for label, r in results.items() if label.startswith("FlowAdam")}


def trigger_share(runs: RunColumns, test: str) -> float:
    """Times the test ``test`` (``"stiff_triggers"`` or ``"plateau_triggers"``) fired over the
    flow steps taken, summed over runs (a step can fire both tests, so shares may add up to
    more than 1)."""
    return (runs[test].sum() / runs["flow_steps"].sum()).item()


def mean_by_lr(runs: RunColumns, lrs: Sequence[float], key: str = "rec") -> list[float]:
    """Mean of column ``key`` over the seeds at each base learning rate of ``lrs``."""
    return [runs[key][runs["base_lr"] == lr].mean().item() for lr in lrs]


def interpolated_by_lr(runs: RunColumns, lrs: Sequence[float]) -> list[bool]:
    """Whether every seed reached the loss threshold, at each base learning rate of ``lrs``."""
    return [bool(runs["interpolated"][runs["base_lr"] == lr].all()) for lr in lrs]


def _records(runs: RunColumns) -> list[dict[str, Any]]:
    """The runs as minimal records for :func:`gaugebook.engine.selection.select`."""
    return [
        {"status": "ok", "config": {"method": "runs", "hparams": {"lr": lr}},
         "metrics": {"rec": rec, "interpolated": ok, "train_loss": loss}}
        for lr, rec, ok, loss in zip(runs["base_lr"].tolist(), runs["rec"].tolist(),
                                     runs["interpolated"].tolist(),
                                     runs["train_loss"].tolist(), strict=True)
    ]


def oracle_choice(runs: RunColumns) -> tuple[float, float]:
    """Table 2's rule: ``(mean rec, lr)`` at the base learning rate with the smallest mean
    ``rec`` among those at which every seed interpolated (ties: the smaller lr); ``(nan, nan)``
    when there is none. The ``ORACLE`` rule of :mod:`gaugebook.engine.selection` (the
    paper's FlowAdam script asks the mean over seeds to be below the bar instead:
    ``ORACLE_MEAN``)."""
    chosen = select(_records(runs), ORACLE)["runs"]
    if not chosen.gated:
        return math.nan, math.nan
    return chosen.score, chosen.value


def lower_rec_count(
    runs: RunColumns, reference: RunColumns, lrs: Sequence[float]
) -> tuple[int, int]:
    """``(wins, pairs)``: among the learning rates of ``lrs`` at which both sets of runs
    interpolated on every seed (``pairs``), those at which ``runs`` has the lower mean ``rec``."""
    both = [
        (a, b)
        for a, b, ok_a, ok_b in zip(mean_by_lr(runs, lrs), mean_by_lr(reference, lrs),
                                    interpolated_by_lr(runs, lrs),
                                    interpolated_by_lr(reference, lrs), strict=True)
        if ok_a and ok_b
    ]
    return sum(a < b for a, b in both), len(both)


def best_selection(results: Mapping[str, RunColumns], labels: Iterable[str]) -> tuple[float, float]:
    """The :func:`oracle_choice` with the smallest mean ``rec`` over the variants ``labels``
    (``(nan, nan)`` when none of them has a learning rate at which every seed interpolated)."""
    chosen = [oracle_choice(results[label]) for label in labels]
    finite = [c for c in chosen if not math.isnan(c[0])]
    return min(finite) if finite else (math.nan, math.nan)


def flow_published(name: str) -> tuple[float, str]:
    """``(value, mark)``: the published rec of FlowAdam row ``name`` as the chapter quotes it
    (``nan`` if none). The selected rows of :data:`PUBLISHED_FLOW_ROWS` have no mark; the
    invariant row has the figure quoted at one lr and 30k steps
    (:data:`PUBLISHED_FLOW_SHORT_RMS`), marked ``"†"``: its runs did not reach the bar, so it
    is no selection."""
    if name in PUBLISHED_FLOW_ROWS:
        return PUBLISHED_FLOW_ROWS[name], ""
    if name == "globalnorm_p0_rms":
        return PUBLISHED_FLOW_SHORT_RMS["rec"], "†"
    return math.nan, ""


def flow_table(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """FlowAdam's rows as table rows: the paper's rule for them (:data:`FLOW_ROWS_PROTOCOL`)
    with lr, ``rec ± sd``, the published rec (:func:`flow_published`, in the paper's setting
    only), steps, mean training loss and whether every seed reached the bar; then the older,
    looser gate (:data:`PAPER_PROTOCOL`): ``rec (lr)``, a star when some seed stayed above
    the bar."""
    loose = {r["row"]: r for r in flow_rows(records, PAPER_PROTOCOL)}
    paper = is_paper_setting(records)
    rows = []
    for r in flow_rows(records):
        value, mark = flow_published(r["row"])
        s = loose.get(r["row"], {})
        rows.append({
            **r, "lr_text": None if r["lr"] is None else f"{r['lr']:g}",
            "rec_text": _rec_sd(r),
            "published_text": None if not paper else (
                f"{value:g}{mark}" if mark else None if math.isnan(value) else f"{value:.4f}"),
            "published_quoted": value,
            "interp": yes_no(r["all_interpolated"]),
            "loose_text": rec_lr(s.get("rec"), s.get("lr"),
                                 "" if s.get("all_interpolated") else "*"),
            "loose_rec": s.get("rec", math.nan), "loose_lr": s.get("lr"),
        })
    return rows


def flow_numbers(records: Mapping[str, Sequence[Mapping[str, Any]]],
                 config: DialConfig | None = None) -> dict[str, Any]:
    """FlowAdam's rows, its invariant row at the quoted lr and 30k steps, and its long run,
    for the text: per row of :data:`FLOW_ROWS` the selection's rec and lr under both gates
    and the published value (the same as the table's, :func:`flow_published`); the quoted
    cell's mean rec, worst training loss and seeds below the bar; the long run's mean ± sd,
    seeds below the bar and steps, beside the published ones."""
    config = config or get_config()
    table = {r["row"]: r for r in flow_table(records["flow_rows"])}
    out: dict[str, Any] = {}
    for name in FLOW_ROWS:
        r = table.get(name, {})
        out[f"flowrow_{name}_rec"] = r.get("rec", math.nan)
        out[f"flowrow_{name}_lr"] = r.get("lr") or math.nan
        out[f"flowrow_{name}_pub"] = flow_published(name)[0]
        out[f"flowrow_{name}_interp"] = yes_no(bool(r.get("all_interpolated")))
        out[f"flowrow_{name}_loose_rec"] = r.get("loose_rec", math.nan)
        out[f"flowrow_{name}_loose_lr"] = r.get("loose_lr") or math.nan
    paper = is_paper_setting(records["flow_rows"])  # published rows describe only that
    compared = [abs(r["rec"] - value) for name, r in table.items()
                for value in [PUBLISHED_FLOW_ROWS.get(name, math.nan)]
                if paper and math.isfinite(value) and math.isfinite(r["rec"])]
    out["flow_max_gap"] = max(compared) if compared else math.nan
    out["flow_num_compared"] = len(compared)
    out["flow_loose_above"] = sum("*" in (r["loose_text"] or "") for r in table.values())
    out["flow_rows_n"] = len(table)
    short_cfg = PUBLISHED_FLOW_SHORT_RMS
    short = [x for x in records["flow_rows"]
             if flow_row_name(x) == "globalnorm_p0_rms"
             and x["config"]["hparams"]["lr"] == short_cfg["lr"] and x["status"] == "ok"]
    out.update({
        "short_rec": seed_stats([x["metrics"]["rec"] for x in short])[0],
        "short_loss_max": max((x["metrics"]["train_loss"] for x in short), default=math.nan),
        "short_interp": sum(bool(x["metrics"]["interpolated"]) for x in short),
        "short_seeds": len(short),
        # the quoted figure, as the table shows it (its invariant row)
        "short_pub_rec": flow_published("globalnorm_p0_rms")[0],
        "short_lr": short_cfg["lr"], "short_pub_loss": short_cfg["train_loss"],
    })
    long_runs = [x for x in records["flow_long"] if x["status"] == "ok"]
    mean, sd = seed_stats([x["metrics"]["rec"] for x in long_runs])
    steps = [x["metrics"]["steps"] for x in long_runs]
    pub = PUBLISHED_FLOW_LONG
    out.update({
        "long_rec": mean, "long_sd": sd,
        "long_interp": sum(bool(x["metrics"]["interpolated"]) for x in long_runs),
        "long_seeds": len(config.specs("flow_long")), "long_done": len(long_runs),
        "long_steps_min": min(steps, default=math.nan),
        "long_steps_max": max(steps, default=math.nan),
        "long_budget": config.long_budget.num_steps, "long_lr": config.long_lr,
        "long_pub_rec": pub["rec"], "long_pub_seeds": pub["seeds"],
        "long_pub_sd": pub["rec_sd"], "long_pub_budget": pub["num_steps"],
        "long_pub_steps_min": pub["steps_min"], "long_pub_steps_max": pub["steps_max"],
    })
    return out


def describe(config: FlowAdamConfig) -> str:
    """The testbed and grid of ``config`` in two short lines (for a page's setup output)."""
    p = config.problem
    seeds = ", ".join(str(s) for s in config.seeds)
    lrs = ", ".join(f"{lr:g}" for lr in config.lrs)
    return (f"testbed n = {p.n}, r = {p.r}, k = {p.k}; seeds {seeds}\n"
            f"lrs {lrs}; budget {config.budget.num_steps} steps")


def relative_gap(a: float, b: float) -> float:
    """``|a − b| / max(|a|, |b|)``: a relative difference that stays in ``[0, 1]`` for values
    of one sign (``0`` when both are ``0``), unlike ``|a − b| / |b|``, which a tiny ``b``
    blows up."""
    big = max(abs(a), abs(b))
    return abs(a - b) / big if big else 0.0


def spread_ratios(log_steps: Mapping[float, Tensor]) -> dict[float, float]:
    """The standard deviation of ``log₁₀`` of the per-entry learning rate at each ``p``
    (:func:`per_entry_log_lr`) over Adam's (``p = 1``)."""
    adam = log_steps[1.0].std().item()
    return {p: v.std().item() / adam for p, v in log_steps.items()}


def audit_rows(audits: Mapping[str, FlowAudit]) -> list[dict[str, Any]]:
    """One table row per audit: residual, verdict, flow steps of the plain and rotated run."""
    return [{"name": name, "residual": a.result.residual,
             "verdict": a.result.verdict.replace(" ", NBSP),
             "flow_steps": f"{a.flow_steps[0]} / {a.flow_steps[1]}"}
            for name, a in audits.items()]


def audit_numbers(config: FlowAdamConfig, residuals: Mapping[str, Sequence[float]],
                  audits: Mapping[str, FlowAudit]) -> dict[str, Any]:
    """The audit's numbers for the text: the dial's residual at ``p = 0`` for both scalars,
    at the smallest positive ``p`` and at ``p = 1``, the log–log slope over the first decade
    of ``p``, and the residual and flow steps of each audit of :data:`AUDIT_CASES` (whether
    each passed the audit is its ``result.equivariant``)."""
    rms, powers = residuals["rms"], config.audit_powers
    out: dict[str, Any] = {
        "res_rms_p0": rms[0], "res_geo_p0": residuals["geomean"][0],
        "res_rms_small": rms[1], "p_small": powers[1], "res_rms_p1": rms[-1],
        "res_slope": math.log10(rms[2] / rms[1]) / math.log10(powers[2] / powers[1]),
        "audit_steps": config.audit_steps,
    }
    for name, audited in audits.items():
        key = AUDIT_CASES[name][0]
        out[f"audit_{key}_res"] = audited.result.residual
        out[f"audit_{key}_flows"] = audited.min_flow_steps
    return out


def trigger_numbers(results: Mapping[str, RunColumns], config: FlowAdamConfig,
                    warmup: int = INVARIANT["flow_warmup"]) -> dict[str, Any]:
    """How often the flow path fired (:func:`trigger_rates`), for the text: the smallest rate
    of the invariant preset and of the prototype, the shares of the two tests, the mean rate at
    ``κ = 1`` and at the largest ``κ``, and the plateau test's share there."""
    rates = trigger_rates(results, warmup)
    inv = results["FlowAdam (invariant)"]
    kappa_max = config.stiffness_grid[-1]
    return {
        "rate_inv_min": rates["FlowAdam (invariant)"].min().item(),
        "rate_proto_min": rates["FlowAdam (prototype)"].min().item(),
        "stiff_share_inv": trigger_share(inv, "stiff_triggers"),
        "plateau_share_inv": trigger_share(inv, "plateau_triggers"),
        "num_runs": inv["rec"].numel(), "kappa_max": kappa_max,
        "rate_kappa_max": rates[stiffness_label(kappa_max)].mean().item(),
        "rate_kappa_1": rates[stiffness_label(1.0)].mean().item(),
        "plateau_share_kappa_max": trigger_share(results[stiffness_label(kappa_max)],
                                                 "plateau_triggers"),
    }


def trigger_lines(results: Mapping[str, RunColumns],
                  warmup: int = INVARIANT["flow_warmup"]) -> str:
    """The trigger rate of every FlowAdam variant, one short line each (min and mean over
    runs of flow steps / eligible steps)."""
    rates = trigger_rates(results, warmup)
    width = max(len(label) for label in rates)
    head = f"{'flow steps / eligible steps':<{width}}   min     mean"
    return "\n".join([head] + [f"{label:<{width}}  {r.min():.4f}  {r.mean():.4f}"
                               for label, r in rates.items()])


def hand_numbers(hand: RunColumns, flow: RunColumns) -> dict[str, Any]:
    """FlowAdam against "dial warm-up, then clipped GD": in how many runs they stop at the
    same step, their largest difference in rec (:func:`relative_gap`, bounded), and the
    fraction of FlowAdam's steps at which the global clip was active."""
    gaps = [relative_gap(a, b) for a, b in zip(hand["rec"].tolist(), flow["rec"].tolist(),
                                               strict=True)]
    return {"same_stop_runs": int((hand["stop"] == flow["stop"]).sum()),
            "gap_hand": max(gaps, default=math.nan),
            "clip_frac": (flow["clip_bound"].sum() / flow["stop"].sum()).item()}


def ablation_labels(config: FlowAdamConfig) -> list[str]:
    """The variants of the ablation, in the order of its figure and table: FlowAdam
    (invariant), the dial alone at each factor, GD at ``lr·T``."""
    return [FLOW_LABEL, *[dial_label(c) for c in config.dial_factors], GD_LABEL]


def ablation_numbers(results: Mapping[str, RunColumns],
                     config: FlowAdamConfig) -> dict[str, Any]:
    """The ablation's numbers for the text (glue names as keys): Table 2's selection for each
    variant (``sel_<name>_rec`` and ``_lr``, ``nan`` without one), the best dial-alone
    selection and its ratio to FlowAdam's, FlowAdam against the dial whose step matches the
    flow step lr by lr, GD at ``lr·T``, the paper's single-lr comparison and ours at the
    smallest lr (with the seeds that reached the threshold there)."""
    T, lrs, low = INVARIANT["flow_time_scale"], config.lrs, min(config.dial_factors)
    names = {FLOW_LABEL: "flow", GD_LABEL: "gd"}
    names.update({dial_label(c): f"dial{i}" for i, c in enumerate(config.dial_factors)})
    out: dict[str, Any] = {"dial_factor_min": low}
    for label in ablation_labels(config):
        rec, lr = oracle_choice(results[label])
        out[f"sel_{names[label]}_rec"] = rec
        out[f"sel_{names[label]}_lr"] = lr
    flow, gd, quarter = results[FLOW_LABEL], results[GD_LABEL], results[dial_label(low)]
    best = best_selection(results, [dial_label(c) for c in config.dial_factors])
    wins, pairs = lower_rec_count(flow, results[dial_label(T)], lrs)
    out.update({
        "best_dial_rec": best[0], "dial_over_flow": best[0] / oracle_choice(flow)[0],
        "matched_pairs": pairs, "matched_flow_wins": wins, "time_scale": T,
        "gd_rec_min": min(mean_by_lr(gd, lrs)),
        "gd_interp_count": sum(interpolated_by_lr(gd, lrs)),
        "published_flow": PUBLISHED_FLOW_VS_DIAL["flow"],
        "published_dial": PUBLISHED_FLOW_VS_DIAL["dial"],
        "published_lr": PUBLISHED_FLOW_VS_DIAL["lr"], "lr_first": lrs[0],
        "flow_rec_first": mean_by_lr(flow, lrs)[0],
        "dial_rec_first": mean_by_lr(results[dial_label(1.0)], lrs)[0],
        "dial_quarter_first": mean_by_lr(quarter, lrs)[0],
        "flow_interp_first": int(flow["interpolated"][flow["base_lr"] == lrs[0]].sum()),
        "dial_quarter_interp_first": int(
            quarter["interpolated"][quarter["base_lr"] == lrs[0]].sum()),
        "num_seeds": len(config.seeds), "num_lrs": len(lrs),
    })
    return out


def seeds_at(runs: RunColumns, lr: float, key: str = "rec") -> dict[int, float]:
    """``{seed: key}`` of the runs at base learning rate ``lr``. Every variant of the ablation
    runs each seed's instance from its start, so two variants' runs at one seed pair."""
    at = runs["base_lr"] == lr
    return dict(zip(runs["seed"][at].tolist(), runs[key][at].tolist(), strict=True))


def ablation_rule(results: Mapping[str, RunColumns], config: FlowAdamConfig
                  ) -> tuple[dict[str, Any], dict[str, Comparison | None]]:
    """The ablation under the one rule, each variant at Table 2's selection
    (:func:`oracle_choice`), the seeds paired: ``(numbers, comparisons)``. Comparisons
    (``a − b``): ``dial_flow``, the best dial-alone selection against FlowAdam's;
    ``gd_dial`` and ``gd_flow``, GD at ``lr·T`` against each; ``first_flow_dial``, FlowAdam
    against the dial at the smallest lr (the paper's comparison); ``first_quarter_flow``, the
    dial at the smallest factor against FlowAdam, there. Numbers: the best dial-alone
    variant's factor, and, over the lrs at which FlowAdam and the dial whose step matches the
    flow step both reached the threshold on every seed, how many the rule reads as FlowAdam
    below, level and above (``matched_below``, ``matched_level``, ``matched_above``)."""
    T, lrs, low = INVARIANT["flow_time_scale"], config.lrs, min(config.dial_factors)
    flow, gd = results[FLOW_LABEL], results[GD_LABEL]

    def selected(runs: RunColumns) -> dict[int, float]:
        lr = oracle_choice(runs)[1]
        return {} if math.isnan(lr) else seeds_at(runs, lr)

    dials = {c: oracle_choice(results[dial_label(c)])[0] for c in config.dial_factors}
    finite = {c: v for c, v in dials.items() if not math.isnan(v)}
    best = min(finite, key=finite.get) if finite else None
    best_runs = selected(results[dial_label(best)]) if best is not None else {}
    matched = results[dial_label(T)]
    words = []
    for lr, ok_a, ok_b in zip(lrs, interpolated_by_lr(flow, lrs),
                              interpolated_by_lr(matched, lrs), strict=True):
        if ok_a and ok_b:
            c = stats.compare_seeds(seeds_at(flow, lr), seeds_at(matched, lr))
            words.append(None if c is None else c.sign)
    first = lrs[0]
    cmps = {
        "dial_flow": stats.compare_seeds(best_runs, selected(flow)),
        "gd_dial": stats.compare_seeds(selected(gd), best_runs),
        "gd_flow": stats.compare_seeds(selected(gd), selected(flow)),
        "first_flow_dial": stats.compare_seeds(seeds_at(flow, first),
                                         seeds_at(results[dial_label(1.0)], first)),
        "first_quarter_flow": stats.compare_seeds(seeds_at(results[dial_label(low)], first),
                                            seeds_at(flow, first)),
    }
    numbers = {"best_dial_factor": best if best is not None else math.nan,
               "matched_below": words.count(-1), "matched_above": words.count(1),
               "matched_level": len(words) - words.count(-1) - words.count(1)}
    return numbers, cmps


def trigger_rule(results: Mapping[str, RunColumns], config: FlowAdamConfig,
                 warmup: int = INVARIANT["flow_warmup"]) -> dict[str, Comparison | None]:
    """The trigger rates under the one rule, run by run (``a − b``; two variants' runs at one
    seed and lr pair): ``kappa_1``, the invariant preset at ``κ = 1`` against the paper's
    ``κ``; ``kappa_max``, at the largest ``κ`` of the config against ``κ = 1``."""
    rates = trigger_rates(results, warmup)

    def by_run(label: str) -> dict[tuple[int, float], float]:
        runs = results[label]
        return dict(zip(zip(runs["seed"].tolist(), runs["base_lr"].tolist(), strict=True),
                        rates[label].tolist(), strict=True))

    k1, kmax = stiffness_label(1.0), stiffness_label(config.stiffness_grid[-1])
    return {"kappa_1": stats.compare_seeds(by_run(k1), by_run(FLOW_LABEL)),
            "kappa_max": stats.compare_seeds(by_run(kmax), by_run(k1))}


def long_rule(records: Mapping[str, Sequence[Mapping[str, Any]]]
              ) -> tuple[dict[str, Any], Comparison | None]:
    """FlowAdam's long run against GD's reference (the dial's budget), under the one rule:
    the comparison (``long − GD``; the seeds both ran pair), the mean of the paired
    differences over those seeds (``long_gd_paired``, with ``long_gd_shared`` seeds) and on
    how many of them the long run ends above GD (``long_gd_above``)."""
    long_runs = {x["config"]["seed"]: x["metrics"]["rec"] for x in records["flow_long"]
                 if x["status"] == "ok"}
    gd = gd_seeds(records)
    shared = [s for s in long_runs if s in gd]
    paired = (sum(long_runs[s] - gd[s] for s in shared) / len(shared)) if shared else math.nan
    return ({"long_gd_paired": paired, "long_gd_shared": len(shared),
             "long_gd_above": sum(long_runs[s] > gd[s] for s in shared)},
            stats.compare_seeds(long_runs, gd))


def ablation_rows(results: Mapping[str, RunColumns],
                  config: FlowAdamConfig) -> list[dict[str, Any]]:
    """One table row per variant of :func:`ablation_labels`: the mean rec over seeds at each
    lr of the config (a star where some seed did not reach the threshold) and Table 2's
    selection (``"rec (lr)"``, or a dash)."""
    rows = []
    for label in ablation_labels(config):
        runs = results[label]
        cells = zip(mean_by_lr(runs, config.lrs), interpolated_by_lr(runs, config.lrs),
                    strict=True)
        rows.append({"variant": label, "selected": rec_lr(*oracle_choice(runs)),
                     **{f"lr{i}": f"{value:.4f}" + ("" if ok else "*")
                        for i, (value, ok) in enumerate(cells)}})
    return rows


# --------------------------------------------------------------------------------------------
# live demonstrations
# --------------------------------------------------------------------------------------------

#: The values of :math:`p` at which the per-entry learning rate is shown.
POWERS_SHOWN = (0.0, 0.25, 0.5, 0.75, 1.0)

#: ``(glue name, format)`` of the values a scale may leave undefined (a published value exists
#: only at the paper's setting, a learning rate may have no run at this scale).
TEXT_FORMS: tuple[tuple[str, str], ...] = (
    ("dial_rms_p100_pub", ".4f"),
    ("dial_rms_p50_pub", ".4f"),
    ("dial_rms_p0_pub", ".4f"),
    ("dial_geomean_p0_pub", ".4f"),
    ("dial_max_gap", ".4f"),
    ("flow_max_gap", ".4f"),
    ("fixed_max_gap", ".4f"),
    ("fixed_second_gap", ".1e"),
    ("fixed_max_gap_lr", "g"),
    ("fixed_max_gap_p", "g"),
    ("edge_rec", ".4f"),
    ("edge_sd", ".4f"),
    ("edge_steps", ".0f"),
    ("short_rec", ".4f"),
    ("short_loss_max", ".1e"),
    ("sel_gd_rec", ".4f"),
)


class Demo(NamedTuple):
    """What a live demonstration gives the page: glue name → value, the printed lines, and
    the data of its figure (``None`` without one)."""

    numbers: dict[str, Any]
    text: str
    data: Any = None


def _dial(lr: float, power: float) -> Callable[[list[torch.Tensor]], FlowAdam]:
    return lambda p: FlowAdam(p, lr=lr, precond_power=power, flow=False)


def anisotropy_demo(config: FlowAdamConfig) -> Demo:
    r"""The dial's ends and its anisotropy, on the first learning rate of ``config``.

    The dial at :math:`p = 1` against ``torch.optim.Adam`` and at :math:`p = 0` against
    :class:`~gaugekit.optim.SharedScaleAdam` (``config.anisotropy_steps`` steps each; the
    relative gap of the final factors, :func:`~gaugebook.dial.flow_runs.final_factor_gap`),
    and the per-entry :math:`\log_{10}` learning rate on Adam's frozen :math:`\hat v` at each
    :data:`POWERS_SHOWN` (``data``), whose spread over Adam's is :math:`p` times Adam's
    (``spread_dev``: the largest deviation)."""
    lr, steps = config.lrs[0], config.anisotropy_steps
    adam_dial = fx.train_on_instance(_dial(lr, 1.0), config, steps)
    torch_adam = fx.train_on_instance(lambda p: torch.optim.Adam(p, lr=lr), config, steps)
    shared_adam = fx.train_on_instance(lambda p: SharedScaleAdam(p, lr=lr), config, steps)
    shared_dial = fx.train_on_instance(_dial(lr, 0.0), config, steps)
    gap_adam = fx.final_factor_gap(adam_dial, torch_adam)
    gap_shared = fx.final_factor_gap(shared_dial, shared_adam)
    log_steps = fx.per_entry_log_lr(adam_dial.optimizer, POWERS_SHOWN)
    ratio = spread_ratios(log_steps)
    numbers = {"gap_adam": gap_adam, "gap_shared": gap_shared, "anisotropy_steps": steps,
               "spread_adam": log_steps[1.0].std().item()}
    numbers |= {f"spread_ratio_p{round(100 * p)}": r for p, r in ratio.items()}
    numbers["spread_dev"] = max(abs(r - p) for p, r in ratio.items())
    text = (f"relative gap to torch.optim.Adam {gap_adam:.1e}, "
            f"to SharedScaleAdam {gap_shared:.1e}\n"
            "spread of log10 lr over Adam's, by p:\n"
            + "  ".join(f"{p:g}: {r:.4f}" for p, r in ratio.items()))
    return Demo(numbers, text, log_steps)


def warmup_demo(results: Mapping[str, RunColumns], config: FlowAdamConfig) -> Demo:
    r"""FlowAdam (invariant preset) against its hand-written form, "dial warm-up, then clipped
    GD" (:func:`~gaugebook.dial.flow_summary.hand_numbers`), and how far the
    :math:`W + 1` warm-up steps of the dial (:math:`p = 0`) carry the factors from
    :math:`(U_0, V_0)`, over as many GD steps at :math:`\mathrm{lr}\cdot T` (first seed, first
    learning rate): ``warmup_move_ratio``."""
    hand, inv = results["dial warm-up, then clipped GD"], results["FlowAdam (invariant)"]
    same = hand_numbers(hand, inv)
    lr, n = config.lrs[0], INVARIANT["flow_warmup"] + 1
    warmup_dial = fx.train_on_instance(_dial(lr, 0.0), config, n)
    warmup_gd = fx.train_on_instance(
        lambda p: GD(p, lr=lr * INVARIANT["flow_time_scale"]), config, n)
    move_ratio = (fx.distance_from_init(warmup_dial, config)
                  / fx.distance_from_init(warmup_gd, config))
    text = (f"same stop step in {same['same_stop_runs']} of {inv['rec'].numel()} runs; "
            f"largest rec gap {same['gap_hand']:.1e}\n"
            f"fraction of steps with ||g|| > 10: {same['clip_frac']:.3f}\n"
            f"distance from the start, dial / GD at lr·T: {move_ratio:.0f}")
    return Demo(same | {"warmup_steps": n, "warmup_move_ratio": move_ratio}, text)


def text_forms(values: Mapping[str, Any],
               forms: tuple[tuple[str, str], ...] = TEXT_FORMS) -> dict[str, str]:
    """``name_txt → format(values[name], spec)`` for each ``(name, spec)`` of ``forms``; an em
    dash where the value is ``None`` or a non-finite float."""
    return {f"{name}_txt": fmt(values[name], spec) for name, spec in forms}
