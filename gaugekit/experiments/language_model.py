r"""Does keeping the gauge make a better language model? A tuned, seeded comparison of
optimizers on a causal character-level transformer (tiny-shakespeare).

The model is the paper's attention model (:mod:`gaugekit.problems.attention`) as a causal
character LM: every position predicts the next character, loss on all positions. Every run
of one optimizer trains on the identical pre-drawn batches (``data_seed``); a *seed* is an init
seed. Each optimizer runs at its own learning rate:

1. **selection**: every rate of its grid :data:`LR_GRIDS` × the selection seeds; the rate
   with the lowest mean final validation loss of the selection seeds is chosen (a diverged run
   counts as ``+∞``); the records say when the choice sits at an edge of the grid;
2. **fresh seeds** at the chosen rate, and, for the first fresh seed, its gauge twins
   (``W_{Q,h}, W_{K,h} → A_h W_{Q,h}, A_h W_{K,h}``, seeds :data:`GAUGE_SEEDS`) and noise
   twins (``W_Q, W_K`` + ``σ N(0, 1)``, seed 888), trained in the same stack as their base.

Both steps of one optimizer are one batch of the sweep (the selection is trained again when a
fresh run is missing, so a resumed sweep never mixes two selections). The ``timing`` part
trains one model of each optimizer alone and records its milliseconds per step, for the
comparison at equal wall time.

Optimizers: ``adam``; ``adamw`` (decoupled decay :data:`ADAMW_WEIGHT_DECAY`); ``scalar_adam``
(shared-scale Adam); ``adam_mini`` (:class:`~gaugekit.optim.AdamMini`, one second moment per
head of ``W_Q, W_K, W_V``, per row of ``W_O`` and the MLP, Adam on embedding, positions and
head); ``eigen_adam`` (Adam in the left eigenbasis on the block matrices, Adam elsewhere, one
rate); ``muon_adam`` (Muon on the block matrices, Adam on the rest at
:data:`MUON_ADAM_LR_RATIO` × Muon's rate, the paper's ratio 1e-3/0.02); ``momentum``
(heavy-ball ``m ← 0.9 m + g``). β = (0.9, 0.999), ε = 1e-8, no schedule, no clipping.
"""

# Developer note (layers, gaugekit/__init__.py): floor 8, experiments/, on train/ and runs/.

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gaugekit.config import get_scale
from gaugekit.problems.attention import TransformerShape
from gaugekit.runs import collection
from gaugekit.runs.records import canonical_json
from gaugekit.runs.spec import RunResult, RunSpec
from gaugekit.train.twins import (
    StackTrace,
    TwinTask,
    make_twin_optimizers,
    torch_dtype,
    train_stack,
    twin_result,
)

__all__ = [
    "EXPERIMENT",
    "LR_GRIDS",
    "METHODS",
    "METHOD_LABELS",
    "LMConfig",
    "collect",
    "get_config",
    "method_hparams",
    "select_lr",
]

NAME = "language_model"

METHODS: tuple[str, ...] = ("adam", "adamw", "scalar_adam", "adam_mini", "eigen_adam",
                            "muon_adam", "momentum")
METHOD_LABELS: dict[str, str] = {
    "adam": "Adam", "adamw": "AdamW", "scalar_adam": "Shared-scale Adam",
    "adam_mini": "Adam-mini", "eigen_adam": "Eigenbasis Adam + Adam",
    "muon_adam": "Muon + Adam", "momentum": "SGD heavy-ball",
}
#: Which rules keep the attention head gauge (the chapter's prediction, checked by the twins).
KEEPS_HEAD_GAUGE: dict[str, bool] = {
    "adam": False, "adamw": False, "scalar_adam": True, "adam_mini": True,
    "eigen_adam": True, "muon_adam": True, "momentum": True,
}
_HALF_DECADES = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
#: Each optimizer's learning-rate grid (half-decade steps; a grid whose choice fell on its edge
#: in the paper-scale selection was extended by one step beyond it and selected again).
LR_GRIDS: dict[str, tuple[float, ...]] = {
    "adam": _HALF_DECADES, "adamw": (*_HALF_DECADES, 0.1), "scalar_adam": _HALF_DECADES,
    "adam_mini": _HALF_DECADES, "eigen_adam": _HALF_DECADES,
    "muon_adam": (3e-3, 1e-2, 3e-2, 0.1, 0.3),
    "momentum": (1e-2, 3e-2, 0.1, 0.3, 1.0),
}
ADAMW_WEIGHT_DECAY = 0.1
MUON_ADAM_LR_RATIO = 0.05
GAUGE_SEEDS: dict[str, tuple[int, ...]] = {"adam": (777, 888, 999)}
NOISE_SCALES: dict[str, tuple[float, ...]] = {"adam": (1e-7, 1e-5)}
_ADAM = {"betas": (0.9, 0.999), "eps": 1e-8}


def method_hparams(method: str, lr: float, d_head: int) -> dict[str, Any]:
    """The hyperparameters of ``method`` at learning rate ``lr`` (see the module docstring)."""
    if method in ("adam", "scalar_adam"):
        return {"lr": lr, **_ADAM}
    if method == "adamw":
        return {"lr": lr, **_ADAM, "weight_decay": ADAMW_WEIGHT_DECAY}
    if method == "adam_mini":
        return {"lr": lr, **_ADAM, "head_rows": d_head}
    if method == "momentum":
        return {"lr": lr, "momentum": 0.9}
    if method == "muon_adam":
        return {"muon": {"lr": lr, "momentum": 0.9, "nesterov": False, "ns_steps": 5,
                         "eps": 1e-7},
                "adam": {"lr": MUON_ADAM_LR_RATIO * lr, **_ADAM}}
    if method == "eigen_adam":
        return {"eigen_adam": {"lr": lr, **_ADAM, "gram_beta": 0.95, "update_freq": 10,
                               "side": "left"},
                "adam": {"lr": lr, **_ADAM}}
    raise ValueError(f"Invalid method: {method!r}; expected one of {METHODS}")


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LMConfig:
    """The comparison at one scale."""

    scale: str
    task: Mapping[str, Any]
    model: TransformerShape
    num_steps: int
    checkpoints: tuple[int, ...]
    grids: Mapping[str, tuple[float, ...]]
    selection_seeds: tuple[int, ...]
    fresh_seeds: tuple[int, ...]
    timing_steps: int
    persist_records: bool
    dtype: str = "float32"

    def twins(self, method: str) -> list[dict[str, Any]]:
        gauge = GAUGE_SEEDS.get(method, (777,))
        noise = NOISE_SCALES.get(method, (1e-7,))
        return ([{"kind": "gauge", "seed": s} for s in gauge]
                + [{"kind": "noise", "scale": x, "seed": 888} for x in noise])

    def _config(self, method: str, **extra: Any) -> dict[str, Any]:
        return {"kind": "lm", "task": dict(self.task), "model": self.model.to_config(),
                "method": method, "num_steps": self.num_steps,
                "checkpoints": list(self.checkpoints), "dtype": self.dtype, **extra}

    def specs(self, part: str) -> list[RunSpec]:
        out: list[RunSpec] = []
        if part == "timing":
            for m in METHODS:
                # the time of a step does not depend on the rate: the grid's third one
                lr = self.grids[m][min(2, len(self.grids[m]) - 1)]
                config = {**self._config(m, role="timing", lr=lr, init_seed=self.fresh_seeds[0],
                                         twin={"kind": "base"}),
                          "num_steps": self.timing_steps, "checkpoints": [self.timing_steps]}
                out.append(RunSpec(NAME, part, config, {"init": self.fresh_seeds[0]}))
            return out
        if part != "tuned":
            raise ValueError(f"Invalid part: {part!r}; expected 'tuned' or 'timing'")
        for m in METHODS:
            for lr in self.grids[m]:
                for seed in self.selection_seeds:
                    config = self._config(m, role="select", lr=lr, init_seed=seed,
                                          twin={"kind": "base"})
                    out.append(RunSpec(NAME, part, config, {"init": seed}))
            rows = [(s, {"kind": "base"}) for s in self.fresh_seeds]
            rows += [(self.fresh_seeds[0], t) for t in self.twins(m)]
            for seed, twin in rows:
                config = self._config(m, role="fresh", lr="selected", grid=list(self.grids[m]),
                                      selection_seeds=list(self.selection_seeds),
                                      init_seed=seed, twin=twin)
                seeds = {"init": seed, **({"twin": twin["seed"]} if "seed" in twin else {})}
                out.append(RunSpec(NAME, part, config, seeds))
        return out


def _checkpoints(num_steps: int, every: int) -> tuple[int, ...]:
    return tuple(sorted({0, 1, 10, 50, *range(every, num_steps + 1, every), num_steps}
                        & set(range(num_steps + 1))))


def _paper_config() -> LMConfig:
    task = {"name": "charlm", "text": "tinyshakespeare", "max_chars": None, "seq_len": 128,
            "batch_size": 16, "val_windows": 128, "data_seed": 1234}
    model = TransformerShape(vocab=65, seq_len=128, d_model=64, num_heads=4, num_layers=2,
                             d_mlp=256, num_classes=65, causal=True, last_only=False)
    return LMConfig("paper", task, model, 1000, _checkpoints(1000, 100), LR_GRIDS, (1, 2),
                    (3, 4, 5), 200, True)


def _quick_config() -> LMConfig:
    from gaugekit.data.text import load_text

    task = {"name": "charlm", "text": "auto", "max_chars": 20_000, "seq_len": 16,
            "batch_size": 4, "val_windows": 8, "data_seed": 1234}
    vocab = load_text("auto", max_chars=task["max_chars"]).vocab_size
    model = TransformerShape(vocab=vocab, seq_len=16, d_model=16, num_heads=2, num_layers=1,
                             d_mlp=32, num_classes=vocab, causal=True, last_only=False)
    grids = {m: g[1:4] for m, g in LR_GRIDS.items()}
    return LMConfig("quick", task, model, 20, _checkpoints(20, 10), grids, (1,), (3, 4), 5,
                    False)


CONFIGS = {"paper": _paper_config, "quick": _quick_config}


def get_config(scale: str | None = None) -> LMConfig:
    """The comparison's configuration at ``scale`` (default: :func:`gaugekit.config.get_scale`)."""
    return CONFIGS[get_scale(scale)]()


# --------------------------------------------------------------------------------------------
# selection and training
# --------------------------------------------------------------------------------------------


def select_lr(
    grid: Sequence[float], final_val_loss: Mapping[float, Sequence[float]]
) -> dict[str, Any]:
    """The rate of ``grid`` with the lowest mean final validation loss over the selection
    seeds (a non-finite loss counts as ``+∞``), the per-rate means, and whether the choice is
    at an edge of the grid (then a wider grid might choose otherwise)."""
    means = {}
    for lr in grid:
        losses = [x if math.isfinite(x) else math.inf for x in final_val_loss[lr]]
        means[lr] = sum(losses) / len(losses)
    best = min(grid, key=lambda lr: (means[lr], lr))
    i = list(grid).index(best)
    return {"lr": best, "mean_val_loss": {str(k): v for k, v in means.items()},
            "at_edge": i in (0, len(grid) - 1) and len(grid) > 1,
            "all_diverged": not math.isfinite(means[best])}


def _batch_key(config: Mapping[str, Any]) -> str:
    drop = {"role", "lr", "grid", "selection_seeds", "init_seed", "twin"}
    key = {k: v for k, v in config.items() if k not in drop}
    key["timing"] = config.get("role") == "timing"
    return canonical_json(key)


#: Models per stack. On two CPU cores a stack of this model runs no faster per model than
#: one model alone (``bench/bench_language_model.py`` measures it), so independent runs are
#: trained in stacks of two; a twin always shares the stack of its base.
MAX_STACK = 2


def _stacks(rows: list[tuple[float, int, Mapping[str, Any]]]) -> list[list[int]]:
    """Row indices grouped into stacks: each base with all its twins, then lone bases in
    pairs (:data:`MAX_STACK`)."""
    def family(i: int) -> tuple[float, int]:
        return rows[i][0], rows[i][1]

    with_twins = {family(i) for i, r in enumerate(rows) if r[2]["kind"] != "base"}
    groups = [[i for i in range(len(rows)) if family(i) == f] for f in
              dict.fromkeys(family(i) for i in range(len(rows)) if family(i) in with_twins)]
    lone = [i for i in range(len(rows)) if family(i) not in with_twins]
    groups += [lone[k:k + MAX_STACK] for k in range(0, len(lone), MAX_STACK)]
    return groups


def _train(c0: Mapping[str, Any], rows: Sequence[tuple[float, int, Mapping[str, Any]]],
           task: TwinTask, device: torch.device, num_steps: int,
           checkpoints: Sequence[int]) -> list[tuple[StackTrace, int, int]]:
    """Train ``rows`` = (lr, init seed, twin); each twin shares a stack with its base, the row
    with its lr, init seed and kind ``base`` (added when missing). Returns, per row of
    ``rows``, ``(trace of its stack, its index there, its base's index there)``."""
    rows = list(rows)
    for lr, seed, twin in list(rows):
        if twin["kind"] != "base" and (lr, seed, {"kind": "base"}) not in rows:
            rows.append((lr, seed, {"kind": "base"}))
    shape = TransformerShape(**c0["model"])
    where: dict[int, tuple[StackTrace, int, int]] = {}
    for group in _stacks(rows):
        sub = [rows[i] for i in group]
        base_of = [sub.index((lr, seed, {"kind": "base"})) for lr, seed, _ in sub]
        trace = train_stack(
            shape=shape, task=task, method=c0["method"],
            hparams=[method_hparams(c0["method"], lr, shape.d_head) for lr, _, _ in sub],
            init_seeds=[s for _, s, _ in sub], twins=[t for _, _, t in sub], base_of=base_of,
            num_steps=num_steps, checkpoints=checkpoints, dtype=torch_dtype(c0["dtype"]),
            device=device,
        )
        for b, i in enumerate(group):
            where[i] = (trace, b, base_of[b])
    return [where[i] for i in range(len(rows))]


def _result(placed: tuple[StackTrace, int, int], task: TwinTask, shape: TransformerShape,
            kind: str, **metrics: Any) -> RunResult:
    trace, b, base = placed
    r = twin_result(trace, b, task, shape, twin_kind=kind, base=base)
    r.metrics.update(metrics)
    if r.status == "ok" and r.metrics["collapsed"]:
        r.metrics["note"] = "collapsed: validation accuracy or train loss at chance"
    return r


def run_lm_batch(specs: Sequence[RunSpec], *, device: torch.device) -> list[RunResult]:
    """The runs of one optimizer: its selection (all rates × selection seeds) and, when fresh
    runs are asked for, the fresh seeds and twins at the selected rate; or its timing run."""
    c0 = specs[0].config
    if any(_batch_key(s.config) != _batch_key(c0) for s in specs):
        raise ValueError("Invalid specs: expected runs of one optimizer (one batch key)")
    shape = TransformerShape(**c0["model"])
    num_steps = int(c0["num_steps"])
    task = TwinTask(c0["task"], num_steps, device)
    if c0["role"] == "timing":
        return [_timed(s.config, task, device) for s in specs]

    fresh = [s for s in specs if s.config["role"] == "fresh"]
    grid = [float(x) for x in (fresh[0].config["grid"] if fresh else [])]
    sel_seeds = [int(x) for x in (fresh[0].config["selection_seeds"] if fresh else [])]
    select_rows = [(float(s.config["lr"]), int(s.config["init_seed"]), {"kind": "base"})
                   for s in specs if s.config["role"] == "select"]
    select_rows += [(lr, seed, {"kind": "base"}) for lr in grid for seed in sel_seeds
                    if (lr, seed, {"kind": "base"}) not in select_rows]
    results: dict[str, RunResult] = {}
    choice = None
    if select_rows:
        placed = _train(c0, select_rows, task, device, num_steps, c0["checkpoints"])
        losses: dict[float, list[float]] = {}
        for b, (lr, seed, _) in enumerate(select_rows):
            r = _result(placed[b], task, shape, "base", lr=lr)
            losses.setdefault(lr, []).append(r.metrics["val_loss"])
            results[canonical_json((lr, seed, "select"))] = r
        if fresh:
            choice = select_lr(grid, losses)
    if fresh:
        assert choice is not None
        lr = float(choice["lr"])
        rows = [(lr, int(s.config["init_seed"]), s.config["twin"]) for s in fresh]
        placed = _train(c0, rows, task, device, num_steps, c0["checkpoints"])
        for b, spec in enumerate(fresh):
            results[spec.run_id] = _result(placed[b], task, shape,
                                           spec.config["twin"]["kind"], lr=lr, selection=choice)
    out = []
    for s in specs:
        if s.config["role"] == "select":
            out.append(results[canonical_json((float(s.config["lr"]), int(s.config["init_seed"]),
                                               "select"))])
        else:
            out.append(results[s.run_id])
    return out


def _timed(config: Mapping[str, Any], task: TwinTask, device: torch.device) -> RunResult:
    """One model alone for ``num_steps`` steps: milliseconds per step (wall time of the loop,
    evaluation excluded: the only checkpoint is the last step)."""
    shape = TransformerShape(**config["model"])
    t0 = time.perf_counter()
    [placed] = _train(config, [(float(config["lr"]), int(config["init_seed"]), {"kind": "base"})],
                      task, device, int(config["num_steps"]), [int(config["num_steps"])])
    wall = time.perf_counter() - t0
    ms = 1000.0 * placed[0].wall_time_s / int(config["num_steps"])
    return _result(placed, task, shape, "base", ms_per_step=ms, timed_wall_s=wall,
                   torch_threads=torch.get_num_threads())


class LanguageModelExperiment:
    """The tuned comparison as a sweep experiment (see :mod:`gaugekit.runs.sweep`)."""

    name = NAME
    description = "tuned optimizers on a character-level transformer: loss and gauge twins"

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("timing", "tuned")

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return get_config(scale).specs(part)

    def batch_key(self, spec: RunSpec) -> Hashable:
        return _batch_key(spec.config)

    def run_batch(self, specs: Sequence[RunSpec], *, device: torch.device,
                  progress: bool) -> list[RunResult]:
        return run_lm_batch(specs, device=device)

    def batch_cost(self, specs: Sequence[RunSpec]) -> float:
        c = specs[0].config
        if c["role"] == "timing":
            return float(c["num_steps"]) * len(specs)
        grid = len(c.get("grid", [])) or 5
        return float(c["num_steps"]) * (len(specs) + grid * 2)


EXPERIMENT = LanguageModelExperiment()


def records_dir(scale: str | None = None, root: str | Path | None = None) -> Path:
    """``<root>/results/language_model/<scale>`` (paper), else a fresh temporary folder."""
    config = get_config(scale)
    return collection.scale_records_dir(NAME, config.scale, config.persist_records, root)


collect = collection.collector(EXPERIMENT, get_config, allow_missing=True)


# --------------------------------------------------------------------------------------------
# summaries for the chapter (pure functions of records)
# --------------------------------------------------------------------------------------------


def _mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def _rows(records: Sequence[Mapping[str, Any]], role: str) -> list[Mapping[str, Any]]:
    return [r for r in records if r["config"].get("role") == role]


def selection_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per optimizer and rate of the selection: mean final validation loss of the
    selection seeds, how many diverged or collapsed, and whether the rate was chosen (by
    :func:`select_lr` on these records, the rule the fresh runs were trained by)."""
    by: dict[tuple[str, float], list[Mapping[str, Any]]] = {}
    for r in _rows(records, "select"):
        by.setdefault((r["config"]["method"], float(r["config"]["lr"])), []).append(r)
    out = []
    for method in METHODS:
        grid = sorted(lr for m, lr in by if m == method)
        if not grid:
            continue
        losses = {lr: [x["metrics"]["val_loss"] if x["status"] == "ok" else math.inf
                       for x in by[(method, lr)]] for lr in grid}
        choice = select_lr(grid, losses)
        for lr in grid:
            runs = by[(method, lr)]
            out.append({
                "method": method, "label": METHOD_LABELS[method], "lr": lr,
                "mean_val_loss": choice["mean_val_loss"][str(lr)], "seeds": len(runs),
                "diverged": sum(x["status"] != "ok" for x in runs),
                "collapsed": sum(bool(x["metrics"].get("collapsed")) for x in runs),
                "chosen": lr == choice["lr"], "at_edge": choice["at_edge"],
            })
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
    points = list(zip(xs, ys, strict=True))
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
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
    timed = {m: ms[m] * budget[m] for m in budget if m in ms}
    t_equal = min(timed.values()) if timed else None
    out = []
    for method in METHODS:
        runs = [r for r in bases if r["config"]["method"] == method]
        if not runs:
            continue
        ok = [r for r in runs if r["status"] == "ok" and not r["metrics"].get("collapsed")]
        mean, sd = _mean_sd([r["metrics"]["val_loss"] for r in ok])
        step_eq = None if t_equal is None or method not in ms else t_equal / ms[method]
        at_t = [] if step_eq is None else [_curve_at(r["curves"], "val_loss", step_eq)
                                           for r in ok]
        t_mean, t_sd = _mean_sd([x for x in at_t if x is not None])
        sel = runs[0]["metrics"].get("selection") or {}
        out.append({
            "method": method, "label": METHOD_LABELS[method],
            "lr": runs[0]["metrics"].get("lr"), "at_edge": sel.get("at_edge"),
            "seeds": len(runs), "failed": len(runs) - len(ok),
            "val_loss": mean, "val_loss_sd": sd,
            "ms_per_step": ms.get(method), "steps_at_equal_time": step_eq,
            "val_loss_equal_time": t_mean, "val_loss_equal_time_sd": t_sd,
            "keeps_gauge": KEEPS_HEAD_GAUGE[method],
        })
    for key, rank in (("val_loss", "rank"), ("val_loss_equal_time", "rank_equal_time")):
        ordered = sorted((r for r in out if r[key] is not None), key=lambda r: r[key])
        for i, r in enumerate(ordered):
            r[rank] = i + 1
    return out


def twin_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The twins of the first fresh seed, per optimizer: final logit and mean ``M_h`` drift
    from their base, final validation loss and its difference from the base's."""
    fresh = _rows(records, "fresh")
    out = []
    for method in METHODS:
        runs = [r for r in fresh if r["config"]["method"] == method]
        twins = [r for r in runs if r["config"]["twin"]["kind"] != "base"]
        if not twins:
            continue
        seed = twins[0]["config"]["init_seed"]
        base = next((r for r in runs if r["config"]["init_seed"] == seed
                     and r["config"]["twin"]["kind"] == "base"), None)
        for r in twins:
            twin = r["config"]["twin"]
            label = (f"gauge {twin['seed']}" if twin["kind"] == "gauge"
                     else f"noise {twin['scale']:.0e}")
            m = r["metrics"]
            out.append({
                "method": method, "label": METHOD_LABELS[method], "twin": label,
                "kind": twin["kind"], "status": r["status"],
                "collapsed": bool(m.get("collapsed")),
                "step1_logit_drift": m.get("step1_logit_drift"),
                "final_logit_drift": m.get("final_logit_drift"),
                "final_m_drift": m.get("final_m_drift"), "val_loss": m.get("val_loss"),
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
    for method in METHODS:
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
        row: dict[str, Any] = {"method": method, "label": METHOD_LABELS[method]}
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
    by = {r["method"]: r for r in fresh}
    adam = by.get("adam")
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


def readme_headline() -> list[Any]:
    """README rows (:mod:`gaugekit.report.headline`) from the committed paper records:
    the best gauge-keeping optimizer against Adam at tuned rates, and Adam's gauge twins'
    spread in loss against its seeds'. Beyond the paper: it ran no tuned comparison."""
    from gaugekit.runs.verdicts import HeadlineRow

    got = collect("paper")
    records = [r for part in got.records.values() for r in part]
    fresh = fresh_rows(records, timing(records))
    by = {r["method"]: r for r in fresh}
    keep = [r for r in fresh if r["keeps_gauge"] and r["val_loss"] is not None]
    adam = by.get("adam")
    rows = []
    if adam and adam["val_loss"] is not None and keep:
        best = min(keep, key=lambda r: r["val_loss"])
        rows.append(HeadlineRow(
            NAME, "char-level transformer, each optimizer at its own tuned rate: validation "
            "loss of the best gauge-keeping optimizer vs Adam (fresh seeds, equal steps)",
            f"{best['label']} {best['val_loss']:.3f} vs Adam {adam['val_loss']:.3f}",
            "not in the paper", "9", "beyond the paper"))
    cost = next((c for c in cost_rows(records) if c["method"] == "adam"), None)
    if cost and cost["gauge_sd"] is not None and cost["seeds_sd"] is not None:
        rows.append(HeadlineRow(
            NAME, "char-level transformer, Adam: spread (sd) of validation loss between gauge "
            "twins vs between seeds", f"{cost['gauge_sd']:.1e} vs {cost['seeds_sd']:.1e}",
            "not in the paper", "9", "beyond the paper"))
    return rows


def state_numel(config: LMConfig, methods: Sequence[str] = METHODS) -> dict[str, int]:
    """Entries of optimizer state per model (the tensors in ``optimizer.state``, step
    counts excluded), measured by building each optimizer on one model of ``config`` and taking one
    step on a gradient of ones."""
    from gaugekit.problems.attention import init_params, stack_params

    out = {}
    for method in methods:
        params = stack_params([init_params(config.model,
                                           generator=torch.Generator().manual_seed(0))])
        params = {k: v.requires_grad_(True) for k, v in params.items()}
        lr = config.grids[method][0]
        opts = make_twin_optimizers(method, params,
                                    method_hparams(method, lr, config.model.d_head))
        for p in params.values():
            p.grad = torch.ones_like(p)
        for opt in opts:
            opt.step()
        out[method] = sum(v.numel() for opt in opts for st in opt.state.values()
                          for k, v in st.items() if isinstance(v, torch.Tensor) and k != "step")
    return out


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
    for method in METHODS:
        g, n = rows.get((method, "gauge 777")), rows.get((method, "noise 1e-07"))
        if g is None or n is None:
            continue
        ratio = (g["step1_logit_drift"] / n["step1_logit_drift"]
                 if g["step1_logit_drift"] is not None and n["step1_logit_drift"] else None)
        out.append({"method": method, "label": METHOD_LABELS[method],
                    "keeps_gauge": KEEPS_HEAD_GAUGE[method],
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
    ends = [r["noise_final"] for r in rows if r["noise_final"] is not None]
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
