r"""Does keeping the gauge make a better language model? A tuned, seeded comparison of
optimizers on a causal character-level transformer (tiny-shakespeare).

The model is the paper's attention model (:mod:`gaugebook.engine.transformer`) as a causal
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

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gaugebook.engine import collection
from gaugebook.engine.records import canonical_json
from gaugebook.engine.scales import ScaleConfig, Scales
from gaugebook.engine.selection import select_rate as select_lr
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.engine.transformer import TransformerShape
from gaugebook.engine.twin_trainer import (
    StackTrace,
    TwinTask,
    checkpoint_steps,
    make_twin_optimizers,
    torch_dtype,
    train_families,
    twin_result,
)

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
class LMConfig(ScaleConfig):
    """The comparison at one scale (:class:`~gaugebook.engine.scales.ScaleConfig`)."""

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

    @property
    def part_names(self) -> tuple[str, ...]:
        return ("timing", "tuned")

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
            out += [RunSpec(NAME, part, self._config(m, role="select", lr=lr, init_seed=seed,
                                                     twin={"kind": "base"}), {"init": seed})
                    for lr in self.grids[m] for seed in self.selection_seeds]
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
    return checkpoint_steps(num_steps, (0, 1, 10, 50, *range(every, num_steps + 1, every)))


def _paper_config() -> LMConfig:
    task = {"name": "charlm", "text": "tinyshakespeare", "max_chars": None, "seq_len": 128,
            "batch_size": 16, "val_windows": 128, "data_seed": 1234}
    model = TransformerShape(vocab=65, seq_len=128, d_model=64, num_heads=4, num_layers=2,
                             d_mlp=256, num_classes=65, causal=True, last_only=False)
    return LMConfig("paper", task, model, 1000, _checkpoints(1000, 100), LR_GRIDS, (1, 2),
                    (3, 4, 5), 200, True)


def _quick_config() -> LMConfig:
    from gaugebook.engine.texts import load_text

    task = {"name": "charlm", "text": "auto", "max_chars": 20_000, "seq_len": 16,
            "batch_size": 4, "val_windows": 8, "data_seed": 1234}
    vocab = load_text("auto", max_chars=task["max_chars"]).vocab_size
    model = TransformerShape(vocab=vocab, seq_len=16, d_model=16, num_heads=2, num_layers=1,
                             d_mlp=32, num_classes=vocab, causal=True, last_only=False)
    grids = {m: g[1:4] for m, g in LR_GRIDS.items()}
    return LMConfig("quick", task, model, 20, _checkpoints(20, 10), grids, (1,), (3, 4), 5,
                    False)


get_config = Scales(paper=_paper_config, quick=_quick_config)


# --------------------------------------------------------------------------------------------
# selection and training
# --------------------------------------------------------------------------------------------


def _batch_key(config: Mapping[str, Any]) -> str:
    drop = {"role", "lr", "grid", "selection_seeds", "init_seed", "twin"}
    key = {k: v for k, v in config.items() if k not in drop}
    key["timing"] = config.get("role") == "timing"
    return canonical_json(key)


#: Models per stack. On two CPU cores a stack of this model runs no faster per model than
#: one model alone (``bench/bench_language_model.py`` measures it), so independent runs are
#: trained in stacks of two; a twin always shares the stack of its base.
MAX_STACK = 2


def _train(c0: Mapping[str, Any], rows: Sequence[tuple[float, int, Mapping[str, Any]]],
           task: TwinTask, device: torch.device, num_steps: int,
           checkpoints: Sequence[int]) -> list[tuple[StackTrace, int, int]]:
    """Train ``rows`` = (lr, init seed, twin) by
    :func:`~gaugebook.engine.twin_trainer.train_families`
    (a twin in the stack of its base, lone bases :data:`MAX_STACK` to a stack)."""
    shape = TransformerShape(**c0["model"])
    return train_families(
        [(method_hparams(c0["method"], lr, shape.d_head), seed, twin) for lr, seed, twin in rows],
        max_stack=MAX_STACK, shape=shape, task=task, method=c0["method"], num_steps=num_steps,
        checkpoints=checkpoints, dtype=torch_dtype(c0["dtype"]), device=device)


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
    results: dict[Any, RunResult] = {}  # a selection run by (lr, init seed), a fresh one by id
    losses: dict[float, list[float]] = {}
    if select_rows:
        placed = _train(c0, select_rows, task, device, num_steps, c0["checkpoints"])
        for b, (lr, seed, _) in enumerate(select_rows):
            r = _result(placed[b], task, shape, "base", lr=lr)
            losses.setdefault(lr, []).append(r.metrics["val_loss"])
            results[(lr, seed)] = r
    if fresh:
        choice = select_lr(grid, losses)
        lr = float(choice["lr"])
        rows = [(lr, int(s.config["init_seed"]), s.config["twin"]) for s in fresh]
        placed = _train(c0, rows, task, device, num_steps, c0["checkpoints"])
        for b, spec in enumerate(fresh):
            results[spec.run_id] = _result(placed[b], task, shape,
                                           spec.config["twin"]["kind"], lr=lr, selection=choice)
    return [results[s.run_id] if s.config["role"] == "fresh"
            else results[(float(s.config["lr"]), int(s.config["init_seed"]))] for s in specs]


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
    """The tuned comparison as a sweep experiment (see :mod:`gaugebook.engine.sweep`)."""

    name = NAME
    description = "tuned optimizers on a character-level transformer: loss and gauge twins"

    def parts(self, scale: str) -> tuple[str, ...]:
        return get_config(scale).part_names

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


collect = collection.collector(EXPERIMENT, get_config, allow_missing=True)


def state_numel(config: LMConfig, methods: Sequence[str] = METHODS) -> dict[str, int]:
    """Entries of optimizer state per model (the tensors in ``optimizer.state``, step
    counts excluded), measured by building each optimizer on one model of ``config`` and taking one
    step on a gradient of ones."""
    from gaugebook.engine.transformer import init_params, stack_params

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
