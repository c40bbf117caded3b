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

# Developer note (layers, DESIGN.md): floor 3.

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
from gaugekit.experiments import sweep
from gaugekit.experiments.attention import (
    StackTrace,
    _Task,
    _torch_dtype,
    train_stack,
    twin_result,
)
from gaugekit.experiments.records import canonical_json
from gaugekit.experiments.sweep import RunResult, RunSpec
from gaugekit.problems.attention import TransformerShape

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
#: Each optimizer's learning-rate grid (half-decade steps).
LR_GRIDS: dict[str, tuple[float, ...]] = {
    "adam": _HALF_DECADES, "adamw": _HALF_DECADES, "scalar_adam": _HALF_DECADES,
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
                lr = self.grids[m][len(self.grids[m]) // 2]
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
           task: _Task, device: torch.device, num_steps: int,
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
            num_steps=num_steps, checkpoints=checkpoints, dtype=_torch_dtype(c0["dtype"]),
            device=device,
        )
        for b, i in enumerate(group):
            where[i] = (trace, b, base_of[b])
    return [where[i] for i in range(len(rows))]


def _result(placed: tuple[StackTrace, int, int], task: _Task, shape: TransformerShape,
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
    task = _Task(c0["task"], num_steps, device)
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


def _timed(config: Mapping[str, Any], task: _Task, device: torch.device) -> RunResult:
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
    """The tuned comparison as a sweep experiment (see :mod:`gaugekit.experiments.sweep`)."""

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
    return sweep.scale_records_dir(NAME, config.scale, config.persist_records, root)


collect = sweep.collector(EXPERIMENT, get_config, allow_missing=True)


# --------------------------------------------------------------------------------------------
# summaries for the chapter (pure functions of records)
# --------------------------------------------------------------------------------------------


def _mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)
