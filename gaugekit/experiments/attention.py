r"""Attention twins — two gauge-equivalent starts of the paper's transformer, trained in
lockstep, and how far apart their per-head invariants ``M_h = W_{Q,h}ᵀ W_{K,h}`` end.

A *run* is one model of a twin family: the ``base`` model (init seed), or one of its twins,

``identity``  the gauge's code path with ``A_h = I``: must drift exactly 0 at every checkpoint;
``gauge``     ``W_{Q,h}, W_{K,h} → A_h W_{Q,h}, A_h W_{K,h}`` with ``A_h`` drawn from a seed
              (:func:`~gaugekit.problems.attention.draw_head_gauges`): the same function;
``noise``     ``W_Q, W_K`` plus ``scale · N(0, 1)`` per entry (same basis, a nearby function).

All runs of one family (same task, model, optimizer, hyperparameters, init seed, budget and
dtype) are one batch: their parameters are stacked along a leading run dimension, trained on the
identical data in lockstep by one optimizer built with ``batch_dims=1`` (so every reduction of
the rule stays inside its model: shared-scale Adam's RMS is over all parameters of one model),
and the base model is always part of the batch (recomputed when only twins are missing). At
the checkpoints each run records its drift from the base: the mean over the ``L·H`` heads of
``rel(M_h, M'_h)`` and ``rel`` of the validation logits, with
``rel(A, B) = ‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))``; and its losses and accuracies. A run is flagged
``collapsed`` when its validation accuracy is within 1.5× of chance or its train loss within 5 %
of ``ln C``; the chapter leaves flagged runs out of every equivariance claim.

Optimizers (the paper's fixed learning rates, not tuned): ``adam`` 1e-3; ``momentum``
(heavy-ball ``m ← 0.9 m + g``) 0.5; ``scalar_adam`` (shared-scale Adam) 3e-3; ``muon_adam``:
Muon 0.02 on the 2-D projection and MLP weights of the blocks, Adam 1e-3 on the embedding,
positional parameter, gains and head. β = (0.9, 0.999), ε = 1e-8, no weight decay.

Parts:

``single``      every optimizer, init seed 42: base, ``A = I``, gauge (seed 777), noise 1e-7 and
                1e-5 (seed 888). Adam's base and gauge twin keep their final ``M_h`` of layer 0.
``float64``     the same families in float64, base, ``A = I`` and gauge twins (shorter budget).
``charlm``      a character-level LM (causal mask) on tiny-shakespeare (paper) or the built-in
                text (quick), pre-drawn identical batches for all twins: base, gauge, noise 1e-7.
``multiseed``   Adam, init seeds 42/123 × gauge seeds 777/999/1234, noise 1e-7 and 1e-5.
``multiseed_controls``  the same table for momentum, shared-scale Adam and Muon.
"""

# Developer note (layers, DESIGN.md): floor 3.

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from gaugekit.config import get_scale
from gaugekit.optim.registry import make_optimizer
from gaugekit.problems.attention import (
    TransformerShape,
    accuracy,
    apply_head_gauge,
    char_lm_batches,
    cross_entropy,
    draw_head_gauges,
    forward,
    head_bilinears,
    identity_head_gauges,
    init_params,
    is_collapsed,
    make_modadd_data,
    mean_head_drift,
    perturb_qk,
    stack_params,
    sym_relative_distance,
)
from gaugekit.runs import collection
from gaugekit.runs.records import canonical_json, round_sig
from gaugekit.runs.spec import RunResult, RunSpec
from gaugekit.runs.sweep import SweepReport

__all__ = [
    "CONFIGS",
    "EXPERIMENT",
    "METHODS",
    "METHOD_LABELS",
    "PAPER_HPARAMS",
    "PUBLISHED",
    "AttentionTwins",
    "Collected",
    "ScaleConfig",
    "TwinFamily",
    "collect",
    "get_config",
    "machine_throughput",
    "records_dir",
    "train_twin_batch",
]

NAME = "attention"

#: The optimizers of the experiment, in the chapter's order.
METHODS: tuple[str, ...] = ("adam", "momentum", "scalar_adam", "muon_adam")
METHOD_LABELS: dict[str, str] = {
    "adam": "Adam", "momentum": "SGD heavy-ball", "scalar_adam": "Shared-scale Adam",
    "muon_adam": "Muon + Adam",
    "eigen_adam": "Eigenbasis Adam + Adam",
    "eigen_adam_pooled": "Eigenbasis Adam (pooled clusters) + Adam",
}
EQUIVARIANT: frozenset[str] = frozenset({"momentum", "scalar_adam", "muon_adam"})
_ADAM = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8}
#: The paper's fixed hyperparameters (pinned: a registry default change cannot change a run id).
PAPER_HPARAMS: dict[str, dict[str, Any]] = {
    "adam": dict(_ADAM),
    "momentum": {"lr": 0.5, "momentum": 0.9},
    "scalar_adam": {"lr": 3e-3, "betas": (0.9, 0.999), "eps": 1e-8},
    "muon_adam": {
        "muon": {"lr": 0.02, "momentum": 0.9, "nesterov": False, "ns_steps": 5, "eps": 1e-7},
        "adam": dict(_ADAM),
    },
    # not in METHODS: run by gaugekit.experiments.eigenbasis (issue 15), Adam's lr, not tuned
    "eigen_adam": {
        "eigen_adam": {**_ADAM, "gram_beta": 0.95, "update_freq": 10, "side": "left"},
        "adam": dict(_ADAM),
    },
    # the same with one second moment per cluster of eigenvalues closer than 1e-4 λ₁
    "eigen_adam_pooled": {
        "eigen_adam": {**_ADAM, "gram_beta": 0.95, "update_freq": 10, "side": "left",
                       "cluster_tol": 1e-4},
        "adam": dict(_ADAM),
    },
}

#: The paper's published numbers (arXiv 2608.05136, CPU float32 unless said; the logs of its
#: public scripts ``experiments/attention_gauge.py`` and ``attention_gauge_multiseed.py``,
#: ``logs/attention_gauge*_cpu.txt``, and ``experiments/nibi_results/SUMMARY.md`` for the GPU
#: runs). Never computed here: shown beside the measured values, labelled "published". Each key
#: names its quantity: ``m_drift`` is the mean over heads of rel(M_h, M'_h) (the logs' "QK^T"
#: row), ``logit_drift`` rel of the validation logits (their "logit" row); a published number
#: sits only beside ours for the same quantity. Muon's ``gauge``/``noise`` finals are logit
#: drifts (0.85, 0.87); its gauge twin's M_h drift is 0.80 (no M_h drift of its noise twin is
#: published).
#:
#: ``reference_model_steps_per_s``: the reference script's throughput (model-steps per second)
#: on 2-core machines, as quoted in issue 9: the script trains its two models one after the
#: other in one process using both cores, so the number is the whole machine's; compare it
#: with :func:`machine_throughput` of our records (every worker together), not with the rate
#: of one worker's batch.
#:
#: ``charlm_gpu``: the paper's character-level LM (``experiments/nibi/attention_suite.py
#: --task text``; ``attn_text_6L256.jsonl``): 6 layers, width 256, 8 heads, contexts of 128,
#: batches of 32, 3,000 steps, float64 on a GPU. Adam's gauge twins (6) and noise twins
#: (1e-7 and 1e-5) end comparably far apart in logit drift, and its conservative structural
#: ratio at step 1 (smallest gauge twin over the 1e-5 noise twin) is 39x.
PUBLISHED: dict[str, Any] = {
    "adam_final_m_drift": 0.56,
    "adam_final_logit_drift": 0.77,
    "adam_final_accuracy_gap": 0.0008,
    "adam_step1_gauge_logit_drift": 3.6e-3,
    "adam_step1_noise1e-7_logit_drift": 2.9e-7,
    "momentum_final_m_drift": 7.1e-6,
    "scalar_adam_final_m_drift": 2.6e-6,
    "muon_gauge_final_logit_drift": 0.85,
    "muon_gauge_final_m_drift": 0.80,
    "muon_noise1e-7_final_logit_drift": 0.87,
    "muon_curves_meet_from_step": 50,
    "multiseed_adam_gauge_final_logit_drift": (0.69, 0.80),
    "multiseed_largest_adam_noise_final_logit_drift": 1.0e-3,
    "structural_ratio": 662.0,
    "float64_equivariant_step1": (3e-16, 1e-15),
    "reference_model_steps_per_s": {"AMD EPYC (2 cores)": 45.0, "Intel Xeon (2 cores)": 23.5},
    "charlm_gpu": {
        "num_layers": 6, "d_model": 256, "num_heads": 8, "seq_len": 128, "batch_size": 32,
        "num_steps": 3000, "dtype": "float64", "device": "GPU",
        "adam_gauge_final_logit_drift": (0.36, 0.37),
        "adam_noise_final_logit_drift": (0.28, 0.33),
        "adam_step1_structural_ratio": 39.0,
    },
    # the paper's GPU suite (experiments/nibi/attention_suite.py, float64, GPU): per part the
    # step-1 structural ratio (smallest Adam gauge twin's logit drift over the largest noise
    # twin's), the rules whose runs collapsed to chance (reported unflagged by the paper), and
    # on text the final logit drifts and the validation cross-entropy at 3,000 steps (ranges
    # over the runs of one rule; the rates were not tuned)
    "gpu_suite": {
        "suite_mod_small": {"step1_ratio": 158.0, "collapsed": ()},
        "suite_mod_large": {"step1_ratio": 94.0, "collapsed": ("momentum", "scalar_adam")},
        "suite_text": {
            "step1_ratio": 39.0, "collapsed": (),
            "adam_gauge_final_logit_drift": (0.36, 0.37),
            "adam_noise_final_logit_drift": (0.28, 0.33),
            "momentum_gauge_final_logit_drift": (3.7e-13, 2.0e-12),
            "val_loss": {"adam": (1.56, 1.59), "muon_adam": (1.61, 1.63),
                         "scalar_adam": (1.666, 1.670), "momentum": (1.702, 1.702)},
        },
    },
}

#: Muon's parameters: the 2-D projection and MLP weights of every block.
MUON_PARAMS: tuple[str, ...] = ("q", "k", "v", "o", "mlp_in", "mlp_out")
CURVE_DIGITS = 6


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TwinFamily:
    """One base model and its twins: ``twins`` are dicts ``{"kind": ..., ...}`` (see the
    module docstring)."""

    task: Mapping[str, Any]
    model: TransformerShape
    method: str
    num_steps: int
    checkpoints: tuple[int, ...]
    init_seed: int
    twins: tuple[Mapping[str, Any], ...]
    dtype: str = "float32"
    #: the family's hyperparameters when not the method's :data:`PAPER_HPARAMS`
    hparams: Mapping[str, Any] | None = None

    def specs(self, part: str) -> list[RunSpec]:
        out = []
        for twin in self.twins:
            config = {
                "kind": "twin",
                "task": dict(self.task),
                "model": self.model.to_config(),
                "method": self.method,
                "hparams": PAPER_HPARAMS[self.method] if self.hparams is None
                else self.hparams,
                "num_steps": self.num_steps,
                "checkpoints": list(self.checkpoints),
                "init_seed": self.init_seed,
                "twin": dict(twin),
                "dtype": self.dtype,
            }
            seeds = {"init": self.init_seed}
            if "seed" in twin:
                seeds["twin"] = int(twin["seed"])
            if "data_seed" in self.task:
                seeds["data"] = int(self.task["data_seed"])
            out.append(RunSpec(NAME, part, config, seeds))
        return out


@dataclass(frozen=True)
class ScaleConfig:
    """The parts at one scale: part name → (description, families); ``persist_records``: keep
    records under ``results/`` (paper) or recompute them in a temporary folder (quick)."""

    scale: str
    parts: Mapping[str, tuple[str, tuple[TwinFamily, ...]]]
    persist_records: bool

    def families(self, part: str) -> tuple[TwinFamily, ...]:
        if part not in self.parts:
            raise ValueError(f"Invalid part: {part!r}; expected one of {tuple(self.parts)}")
        return self.parts[part][1]


def _checkpoints(num_steps: int) -> tuple[int, ...]:
    """The paper's checkpoints 0, 1, 10, 50, 100, 300, 600, 1000, 1500 up to ``num_steps``
    (``num_steps`` itself always included)."""
    base = (0, 1, 10, 50, 100, 300, 600, 1000, 1500)
    return tuple(sorted({c for c in base if c <= num_steps} | {num_steps}))


GAUGE = {"kind": "gauge", "seed": 777}
IDENTITY = {"kind": "identity"}
BASE = {"kind": "base"}


def _noise(scale: float) -> dict[str, Any]:
    return {"kind": "noise", "scale": scale, "seed": 888}


@dataclass(frozen=True)
class SuiteConfig:
    """One configuration of the paper's GPU attention suite (``experiments/nibi/
    attention_suite.py``): task, model, steps; float64; init seeds 42 and 43."""

    task: Mapping[str, Any]
    model: TransformerShape
    num_steps: int
    momentum_lr: float = 0.5


#: The parts of the paper's GPU suite (float64; the paper ran them on a GPU).
SUITE_PARTS: tuple[str, ...] = ("suite_mod_small", "suite_mod_large", "suite_text")
#: The parts of the attention chapter (every part but the suite's).
CHAPTER_PARTS: tuple[str, ...] = ("single", "float64", "multiseed", "charlm",
                                  "multiseed_controls")
#: The paper's checkpoints of the GPU suite (∩ [1, steps], the last step always included).
SUITE_CHECKPOINTS = (1, 10, 50, 100, 300, 600, 1000, 1500, 2000, 3000)


def suite_families(cfg: SuiteConfig) -> list[TwinFamily]:
    """The suite's twins (float64, the paper's untuned rates; heavy-ball 0.1 on text): Adam
    init 42 with ``A = I``, gauge 777/888/999 and noise 1e-7 and 1e-5 (seed 888), init 43 with
    the three gauges (6 gauge pairs); the other rules init 42 with gauge 777 and noise 1e-7,
    init 43 with gauge 777 (2 gauge pairs, 1 noise twin)."""
    cps = tuple(sorted({0, cfg.num_steps} | {c for c in SUITE_CHECKPOINTS if c <= cfg.num_steps}))
    gauges = tuple({"kind": "gauge", "seed": s} for s in (777, 888, 999))
    out = []
    for method in METHODS:
        hp = ({**PAPER_HPARAMS["momentum"], "lr": cfg.momentum_lr} if method == "momentum"
              else None)
        if method == "adam":
            twins42: tuple[Mapping[str, Any], ...] = (BASE, IDENTITY, *gauges, _noise(1e-7),
                                                      _noise(1e-5))
            twins43: tuple[Mapping[str, Any], ...] = (BASE, *gauges)
        else:
            twins42, twins43 = (BASE, GAUGE, _noise(1e-7)), (BASE, GAUGE)
        for seed, twins in ((42, twins42), (43, twins43)):
            out.append(TwinFamily(cfg.task, cfg.model, method, cfg.num_steps, cps, seed, twins,
                                  dtype="float64", hparams=hp))
    return out


def _suite_parts(*, mod_p: int, mod_sizes: Sequence[tuple[int, int, int, int]],
                 text: Mapping[str, Any], text_size: tuple[int, int, int, int],
                 vocab: int) -> dict[str, tuple[str, SuiteConfig]]:
    """The three suite parts; a size is ``(layers, width, heads, steps)``."""
    mod_task = {"name": "modadd", "p": mod_p, "train_frac": 0.4, "split_seed": 42}

    def shape(layers: int, width: int, heads: int, **kw: Any) -> TransformerShape:
        return TransformerShape(d_model=width, num_heads=heads, num_layers=layers,
                                d_mlp=4 * width, **kw)

    parts = {}
    for name, (layers, width, heads, steps) in zip(("suite_mod_small", "suite_mod_large"),
                                                   mod_sizes, strict=True):
        model = shape(layers, width, heads, vocab=mod_p + 1, seq_len=3, num_classes=mod_p)
        parts[name] = (f"the paper's GPU suite: modular addition p = {mod_p}, {layers} layers x "
                       f"width {width} x {heads} heads, {steps} steps, float64",
                       SuiteConfig(mod_task, model, steps))
    layers, width, heads, steps = text_size
    model = shape(layers, width, heads, vocab=vocab, seq_len=int(text["seq_len"]),
                  num_classes=vocab, causal=True, last_only=False)
    parts["suite_text"] = (f"the paper's GPU suite: character LM, {layers} layers x width "
                           f"{width} x {heads} heads, {steps} steps, float64",
                           SuiteConfig({"name": "charlm", **text}, model, steps, 0.1))
    return parts


def _build(
    scale: str, *, steps: int, f64_steps: int, lm: Mapping[str, Any], lm_steps: int,
    init_seeds: tuple[int, ...], gauge_seeds: tuple[int, ...], persist: bool,
    suite_parts: Mapping[str, tuple[str, SuiteConfig]],
) -> ScaleConfig:
    task = {"name": "modadd", "p": 47, "train_frac": 0.4, "split_seed": 42}
    model = TransformerShape()
    cps = _checkpoints(steps)
    single_twins = (BASE, IDENTITY, GAUGE, _noise(1e-7), _noise(1e-5))
    single = tuple(
        TwinFamily(task, model, m, steps, cps, 42, single_twins)
        for m in METHODS
    )
    f64 = tuple(
        TwinFamily(task, model, m, f64_steps, _checkpoints(f64_steps), 42,
                   (BASE, IDENTITY, GAUGE), dtype="float64")
        for m in METHODS
    )
    lm_model = TransformerShape(
        vocab=int(lm["vocab"]), seq_len=int(lm["seq_len"]), num_classes=int(lm["vocab"]),
        causal=True, last_only=False,
    )
    lm_task = {k: v for k, v in lm.items() if k != "vocab"}
    charlm = tuple(
        TwinFamily({"name": "charlm", **lm_task}, lm_model, m, lm_steps, _checkpoints(lm_steps),
                   42, (BASE, GAUGE, _noise(1e-7)))
        for m in METHODS
    )
    suite = {name: (text, tuple(suite_families(cfg))) for name, (text, cfg) in suite_parts.items()}
    seed_twins = (BASE, *({"kind": "gauge", "seed": s} for s in gauge_seeds),
                  _noise(1e-7), _noise(1e-5))

    def table(methods: Sequence[str]) -> tuple[TwinFamily, ...]:
        return tuple(
            TwinFamily(task, model, m, steps, cps, seed, seed_twins)
            for m in methods for seed in init_seeds
        )

    parts = {
        "single": ("every optimizer: gauge, A = I and noise twins", single),
        "float64": ("the single families in float64 (base, A = I, gauge)", f64),
        "multiseed": ("Adam: init seeds x gauge seeds, noise twins", table(("adam",))),
        "charlm": ("character-level LM with causal mask", charlm),
        "multiseed_controls": ("the multiseed table for the equivariant rules and Muon",
                               table(("momentum", "scalar_adam", "muon_adam"))),
        **suite,
    }
    return ScaleConfig(scale, parts, persist)


def _paper_config() -> ScaleConfig:
    lm = {"text": "tinyshakespeare", "max_chars": None, "vocab": 65, "seq_len": 64,
          "batch_size": 32, "val_windows": 64, "data_seed": 1234}
    text = {"text": "tinyshakespeare", "max_chars": None, "seq_len": 128, "batch_size": 32,
            "val_windows": 64, "data_seed": 42}
    suite = _suite_parts(mod_p=97, mod_sizes=((4, 128, 8, 2000), (6, 256, 8, 2000)), text=text,
                         text_size=(6, 256, 8, 3000), vocab=65)
    return _build("paper", steps=1500, f64_steps=100, lm=lm, lm_steps=300,
                  init_seeds=(42, 123), gauge_seeds=(777, 999, 1234), persist=True,
                  suite_parts=suite)


def _quick_config() -> ScaleConfig:
    from gaugekit.data.text import load_text

    # "auto": tiny-shakespeare when the data folder has it, else the built-in text (CI)
    lm = {"text": "auto", "max_chars": 100_000, "vocab": 0, "seq_len": 32,
          "batch_size": 8, "val_windows": 16, "data_seed": 1234}
    lm["vocab"] = load_text("auto", max_chars=lm["max_chars"]).vocab_size
    text = {"text": "auto", "max_chars": 20_000, "seq_len": 16, "batch_size": 4,
            "val_windows": 8, "data_seed": 42}
    suite = _suite_parts(mod_p=13, mod_sizes=((1, 16, 2, 12), (2, 16, 2, 12)), text=text,
                         text_size=(1, 16, 2, 12),
                         vocab=load_text("auto", max_chars=20_000).vocab_size)
    return _build("quick", steps=60, f64_steps=40, lm=lm, lm_steps=30,
                  init_seeds=(42, 123), gauge_seeds=(777, 999), persist=False,
                  suite_parts=suite)


CONFIGS = {"paper": _paper_config, "quick": _quick_config}


def get_config(scale: str | None = None) -> ScaleConfig:
    """The experiment's configuration at ``scale`` (default: :func:`gaugekit.config.get_scale`)."""
    return CONFIGS[get_scale(scale)]()


# --------------------------------------------------------------------------------------------
# the task of a family
# --------------------------------------------------------------------------------------------


def _torch_dtype(name: str) -> torch.dtype:
    if name not in ("float32", "float64"):
        raise ValueError(f"Invalid dtype: {name!r}; expected 'float32' or 'float64'")
    return getattr(torch, name)


class _Task:
    """Training tokens per step, validation tokens and targets, number of classes.

    ``train`` is the full training set (modular addition) or the first pre-drawn batch (the
    LM), on which the train loss and accuracy of a checkpoint are measured."""

    def __init__(self, task: Mapping[str, Any], num_steps: int, device: torch.device) -> None:
        self.name = task["name"]
        self.text_used: str | None = None
        if self.name == "modadd":
            data = make_modadd_data(int(task["p"]), float(task["train_frac"]),
                                    int(task["split_seed"]))
            self.train = (data.train_tokens.to(device), data.train_targets.to(device))
            self.val = (data.val_tokens.to(device), data.val_targets.to(device))
            self.num_classes = data.p
            self._batches = None
        elif self.name == "charlm":
            from gaugekit.data.text import load_text

            text = load_text(task["text"], max_chars=task.get("max_chars"))
            self.text_used = text.name
            self.num_classes = text.vocab_size
            cut = int(0.9 * text.ids.numel())
            T, bs = int(task["seq_len"]), int(task["batch_size"])
            seed = int(task["data_seed"])
            xs, ys = char_lm_batches(text.ids[:cut], num_steps=max(num_steps, 1),
                                     batch_size=bs, seq_len=T, seed=seed)
            vx, vy = char_lm_batches(text.ids[cut:], num_steps=1,
                                     batch_size=int(task["val_windows"]), seq_len=T,
                                     seed=seed + 1)
            self._batches = (xs.to(device), ys.to(device))
            self.train = (xs[0].to(device), ys[0].to(device))
            self.val = (vx[0].to(device), vy[0].to(device))
        else:
            raise ValueError(f"Invalid task: {self.name!r}; expected 'modadd' or 'charlm'")

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        """The data of training step ``step`` (0-based): full batch, or the pre-drawn one."""
        if self._batches is None:
            return self.train
        return self._batches[0][step], self._batches[1][step]


# --------------------------------------------------------------------------------------------
# twins and optimizers
# --------------------------------------------------------------------------------------------


def make_twin(
    base: Mapping[str, Tensor], shape: TransformerShape, twin: Mapping[str, Any]
) -> dict[str, Tensor]:
    """The twin ``twin`` of the base parameters (one model)."""
    kind = twin.get("kind")
    if kind not in ("base", "identity", "gauge", "noise"):
        raise ValueError(
            f"Invalid twin kind: {kind!r}; expected 'base', 'identity', 'gauge' or 'noise'"
        )
    dtype = base["layers.0.q"].dtype
    if kind == "base":
        return {k: v.clone() for k, v in base.items()}
    if kind == "identity":
        return apply_head_gauge(base, shape, identity_head_gauges(shape, dtype=dtype))
    if kind == "gauge":
        return apply_head_gauge(base, shape, draw_head_gauges(shape, int(twin["seed"]),
                                                              dtype=dtype))
    return perturb_qk(base, shape, float(twin["scale"]), int(twin["seed"]))


def _tuples(hp: Mapping[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in hp.items()}


def adam_mini_groups(params: Mapping[str, Tensor], head_rows: int) -> list[dict[str, Any]]:
    """Adam-mini's partition of the model, as param groups of
    :class:`~gaugekit.optim.AdamMini`: one block per head of ``W_Q``, ``W_K``, ``W_V``
    (``head_rows = d_h`` rows each), one per output neuron (row) of ``W_O`` and the MLP, one per
    norm gain vector, and every entry its own block (Adam) in the embedding, the positional
    parameter and the output head."""
    kinds: dict[str, Any] = {"q": head_rows, "k": head_rows, "v": head_rows, "o": 1,
                             "mlp_in": 1, "mlp_out": 1, "norm1": "tensor", "norm2": "tensor"}
    groups: dict[Any, list[Tensor]] = {}
    for name, p in params.items():
        leaf = name.rsplit(".", 1)[-1]
        blocks = kinds.get(leaf, "tensor" if leaf == "norm_f" else "entry")
        groups.setdefault(blocks, []).append(p)
    return [{"params": ps, "blocks": b} for b, ps in groups.items()]


def make_twin_optimizers(
    method: str, params: Mapping[str, Tensor], hparams: Mapping[str, Any]
) -> list[torch.optim.Optimizer]:
    """The optimizer(s) of ``method`` on stacked parameters (``batch_dims=1``)."""
    names = list(params)
    if method in ("adam", "momentum", "scalar_adam"):
        return [make_optimizer(method, [params[n] for n in names], batch_dims=1,
                               **_tuples(hparams))]
    if method == "muon_adam":
        is_muon = [n.startswith("layers.") and n.rsplit(".", 1)[1] in MUON_PARAMS for n in names]
        matrices = [params[n] for n, m in zip(names, is_muon, strict=True) if m]
        others = [params[n] for n, m in zip(names, is_muon, strict=True) if not m]
        return [
            make_optimizer("muon", matrices, batch_dims=1, **_tuples(hparams["muon"])),
            make_optimizer("adam", others, batch_dims=1, **_tuples(hparams["adam"])),
        ]
    if method == "adamw":
        return [make_optimizer("adam", [params[n] for n in names], batch_dims=1,
                               decoupled_weight_decay=True, **_tuples(hparams))]
    if method == "adam_mini":
        rest = {k: v for k, v in hparams.items() if k != "head_rows"}
        groups = adam_mini_groups(params, int(hparams["head_rows"]))
        return [make_optimizer("adam_mini", groups, batch_dims=1, **_tuples(rest))]
    if method in ("eigen_adam", "eigen_adam_pooled"):
        # the head gauge acts on the rows of W_Q, W_K (A_h W_{Q,h}): the left eigenbasis
        is_matrix = [n.startswith("layers.") and n.rsplit(".", 1)[1] in MUON_PARAMS for n in names]
        matrices = [params[n] for n, m in zip(names, is_matrix, strict=True) if m]
        others = [params[n] for n, m in zip(names, is_matrix, strict=True) if not m]
        return [
            make_optimizer("eigen_adam", matrices, batch_dims=1,
                           **_tuples(hparams["eigen_adam"])),
            make_optimizer("adam", others, batch_dims=1, **_tuples(hparams["adam"])),
        ]
    raise ValueError(f"Invalid method: {method!r}; expected one of {METHODS}")


# --------------------------------------------------------------------------------------------
# training a family in lockstep
# --------------------------------------------------------------------------------------------


def _family_key(config: Mapping[str, Any]) -> str:
    return canonical_json({k: v for k, v in config.items() if k != "twin"})


def _stores_heads(config: Mapping[str, Any]) -> bool:
    """Adam's base and seed-777 gauge twin (init 42, float32, modular addition) keep their final
    layer-0 ``M_h`` (for the chapter's images); other records stay small."""
    twin = config["twin"]
    return (config["method"] == "adam" and config["init_seed"] == 42
            and config["dtype"] == "float32" and config["task"]["name"] == "modadd"
            and (twin["kind"] == "base" or twin == GAUGE))


@torch.no_grad()
def _evaluate(
    params: Mapping[str, Tensor], shape: TransformerShape, task: _Task,
    base_of: Sequence[int],
) -> dict[str, Tensor]:
    """Losses, accuracies and the drift of every model from its base (row ``base_of[b]``)."""
    tx, ty = task.train
    train_logits = forward(params, tx, shape)
    val_logits = forward(params, task.val[0], shape)
    M = head_bilinears(params, shape)
    bases = torch.as_tensor(list(base_of), device=M.device)
    per_head, mean = mean_head_drift(M, M[bases])
    B = val_logits.shape[0]
    flat = val_logits.reshape(B, -1)
    logit_drift = sym_relative_distance(flat, flat[bases], dims=1)
    return {
        "train_loss": cross_entropy(train_logits, ty),
        "val_loss": cross_entropy(val_logits, task.val[1]),
        "train_acc": accuracy(train_logits, ty),
        "val_acc": accuracy(val_logits, task.val[1]),
        "m_drift": mean,
        "logit_drift": logit_drift,
        "per_head": per_head,
        "M": M,
    }


CURVE_KEYS = ("m_drift", "logit_drift", "train_loss", "val_loss", "train_acc", "val_acc")


def stack_hparams(rows: Sequence[Mapping[str, Any]], like: Tensor) -> dict[str, Any]:
    """One hyperparameter dict for a stack of models: a value every row shares stays as it
    is; a float that differs between rows becomes a per-run tensor (``like``'s dtype and
    device); nested dicts (a method of two optimizers) are merged key by key."""
    out: dict[str, Any] = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if all(v == values[0] for v in values):
            out[key] = values[0]
        elif isinstance(values[0], Mapping):
            out[key] = stack_hparams(values, like)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = torch.tensor([float(v) for v in values], dtype=like.dtype,
                                    device=like.device)
        else:
            raise ValueError(f"Invalid hparams: {key!r} differs between runs of one batch "
                             f"({values!r}); only float values may")
    return out


@dataclass
class StackTrace:
    """What :func:`train_stack` returns: per-model curves at the checkpoints (``step`` and
    :data:`CURVE_KEYS`), the last evaluation, the wall time and the number of models."""

    curves: dict[str, list[list[Any]]]
    last_eval: dict[str, Tensor]
    wall_time_s: float
    num_models: int


def train_stack(
    *, shape: TransformerShape, task: _Task, method: str,
    hparams: Sequence[Mapping[str, Any]], init_seeds: Sequence[int],
    twins: Sequence[Mapping[str, Any]], base_of: Sequence[int], num_steps: int,
    checkpoints: Sequence[int], dtype: torch.dtype, device: torch.device,
) -> StackTrace:
    """The one twin trainer: models ``b = 0 … B−1`` (init seed ``init_seeds[b]``, twin
    ``twins[b]`` of that init, hyperparameters ``hparams[b]``) stacked along a leading run
    dimension and trained in lockstep on the identical batches of ``task`` by one optimizer
    (``batch_dims=1``; per-run values where the rows differ). At each checkpoint every model
    records its losses, accuracies and its drift from its base, model ``base_of[b]``."""
    B = len(twins)
    if not (len(hparams) == len(init_seeds) == len(base_of) == B):
        raise ValueError("Invalid rows: hparams, init_seeds, twins and base_of differ in length")
    bases: dict[int, dict[str, Tensor]] = {}
    models = []
    for seed, twin in zip(init_seeds, twins, strict=True):
        if seed not in bases:
            drawn = init_params(shape, generator=torch.Generator().manual_seed(int(seed)))
            bases[seed] = {k: v.to(dtype) for k, v in drawn.items()}
        models.append(make_twin(bases[seed], shape, twin))
    params = {k: v.to(device).requires_grad_(True) for k, v in stack_params(models).items()}
    like = next(iter(params.values()))
    optimizers = make_twin_optimizers(method, params, stack_hparams(hparams, like))
    marks = set(int(c) for c in checkpoints)
    curves: dict[str, list[list[Any]]] = {k: [[] for _ in range(B)]
                                          for k in ("step", *CURVE_KEYS)}
    last_eval: dict[str, Tensor] = {}
    t0 = time.perf_counter()
    for step in range(num_steps + 1):
        if step in marks:
            ev = _evaluate(params, shape, task, base_of)
            for b in range(B):
                curves["step"][b].append(step)
                for k in CURVE_KEYS:
                    curves[k][b].append(round_sig(float(ev[k][b]), CURVE_DIGITS))
            last_eval = ev
        if step == num_steps:
            break
        tx, ty = task.batch(step)
        loss = cross_entropy(forward(params, tx, shape), ty)
        loss.sum().backward()
        for opt in optimizers:
            opt.step()
        for p in params.values():
            p.grad = None
    return StackTrace(curves, last_eval, time.perf_counter() - t0, B)


def train_twin_batch(
    specs: Sequence[RunSpec], *, device: torch.device, progress: bool = False
) -> list[RunResult]:
    """Train the runs of one family (and its base) in lockstep; one result per spec."""
    c0 = specs[0].config
    key = _family_key(c0)
    if any(_family_key(s.config) != key for s in specs):
        raise ValueError("Invalid specs: expected runs of one twin family (one batch key)")
    shape = TransformerShape(**c0["model"])
    num_steps = int(c0["num_steps"])
    task = _Task(c0["task"], num_steps, device)
    if task.num_classes != shape.num_classes:
        raise ValueError(
            f"Invalid model: num_classes {shape.num_classes} but the task has "
            f"{task.num_classes} classes"
        )

    # the twins: the base first, then every other twin once
    twins: list[Mapping[str, Any]] = [{"kind": "base"}]
    row_of: list[int] = []
    for spec in specs:
        twin = spec.config["twin"]
        if twin not in twins:
            twins.append(twin)
        row_of.append(twins.index(twin))
    B = len(twins)
    trace = train_stack(
        shape=shape, task=task, method=c0["method"], hparams=[c0["hparams"]] * B,
        init_seeds=[int(c0["init_seed"])] * B, twins=twins, base_of=[0] * B,
        num_steps=num_steps, checkpoints=c0["checkpoints"], dtype=_torch_dtype(c0["dtype"]),
        device=device,
    )
    return [
        twin_result(trace, b, task, shape, twin_kind=twins[b]["kind"], base=0,
                    store_heads=_stores_heads(spec.config))
        for spec, b in zip(specs, row_of, strict=True)
    ]


def twin_result(
    trace: StackTrace, b: int, task: _Task, shape: TransformerShape, *, twin_kind: str,
    base: int, store_heads: bool = False, num_steps: int | None = None,
) -> RunResult:
    """The record of model ``b`` of a trained stack (its base is model ``base``)."""
    ev, curves = trace.last_eval, trace.curves
    steps = curves["step"][b][-1] if num_steps is None else num_steps
    train_loss = float(ev["train_loss"][b])
    val_acc = float(ev["val_acc"][b])
    finite = math.isfinite(train_loss) and bool(torch.isfinite(ev["M"][b]).all())
    at1 = curves["step"][b].index(1) if 1 in curves["step"][b] else None
    wall = trace.wall_time_s
    metrics: dict[str, Any] = {
        "twin_kind": twin_kind,
        "final_m_drift": float(ev["m_drift"][b]),
        "final_logit_drift": float(ev["logit_drift"][b]),
        "step1_logit_drift": None if at1 is None else curves["logit_drift"][b][at1],
        "step1_m_drift": None if at1 is None else curves["m_drift"][b][at1],
        "m_drift_per_head": [round_sig(float(v), CURVE_DIGITS) for v in ev["per_head"][b]],
        "train_loss": train_loss,
        "val_loss": float(ev["val_loss"][b]),
        "train_acc": float(ev["train_acc"][b]),
        "val_acc": val_acc,
        "base_val_acc": float(ev["val_acc"][base]),
        "chance_accuracy": 1.0 / task.num_classes,
        "ln_classes": math.log(task.num_classes),
        "collapsed": is_collapsed(val_acc, train_loss, task.num_classes),
        "base_collapsed": is_collapsed(float(ev["val_acc"][base]), float(ev["train_loss"][base]),
                                       task.num_classes),
        "batch_models": trace.num_models,
        "model_steps_per_s": trace.num_models * steps / wall if wall > 0 else None,
    }
    if task.text_used is not None:
        metrics["text_used"] = task.text_used
    if store_heads:
        H = shape.num_heads
        metrics["heads_layer0_final"] = [
            [[round_sig(x, 4) for x in row] for row in M_h] for M_h in ev["M"][b, :H].tolist()
        ]
    run_curves = {k: v[b] for k, v in curves.items()}
    return RunResult("ok" if finite else "diverged", metrics, run_curves)


class AttentionTwins:
    """The attention twins as a sweep experiment (see :mod:`gaugekit.runs.sweep`)."""

    name = NAME
    description = "attention twins: per-head gauge, A = I and noise twins of the paper's model"

    def parts(self, scale: str) -> tuple[str, ...]:
        return tuple(get_config(scale).parts)

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        out = []
        for family in get_config(scale).families(part):
            out.extend(family.specs(part))
        return out

    def batch_key(self, spec: RunSpec) -> Hashable:
        return _family_key(spec.config)

    def run_batch(
        self, specs: Sequence[RunSpec], *, device: torch.device, progress: bool
    ) -> list[RunResult]:
        return train_twin_batch(specs, device=device, progress=False)

    def batch_cost(self, specs: Sequence[RunSpec]) -> float:
        """About the flops of the batch: ``6 · (matrix weights) · (tokens per step)`` per
        model-step, float64 counted twice."""
        c = specs[0].config
        m, task = c["model"], c["task"]
        weights = m["num_layers"] * (4 * m["d_model"] ** 2 + 2 * m["d_model"] * m["d_mlp"])
        weights += m["d_model"] * m["num_classes"]
        if task["name"] == "modadd":
            tokens = 3 * int(float(task["train_frac"]) * int(task["p"]) ** 2)
        else:
            tokens = int(task["batch_size"]) * int(task["seq_len"])
        factor = 2.0 if c["dtype"] == "float64" else 1.0
        return factor * (len(specs) + 1) * c["num_steps"] * 6.0 * weights * tokens


EXPERIMENT = AttentionTwins()


# --------------------------------------------------------------------------------------------
# for the chapter and the CLI
# --------------------------------------------------------------------------------------------

def records_dir(scale: str | None = None, root: str | Path | None = None) -> Path:
    """``<root>/results/attention/<scale>`` for a scale that persists its records (paper),
    else a fresh temporary folder (quick)."""
    config = get_config(scale)
    return collection.scale_records_dir(NAME, config.scale, config.persist_records, root)


@dataclass
class Collected:
    """What :func:`collect` returns: the config and the sweep engine's
    :class:`~gaugekit.runs.collection.Collected`, with a filter over the runs of a part."""

    config: ScaleConfig
    collected: collection.Collected

    @property
    def records(self) -> dict[str, list[dict[str, Any]]]:
        return self.collected.records

    @property
    def report(self) -> SweepReport:
        return self.collected.report

    def note(self) -> str:
        """The records note (:meth:`gaugekit.runs.collection.Collected.note`)."""
        return self.collected.note()

    def note_markdown(self) -> str:
        """The records note as Markdown, commands in code blocks (for a page)."""
        return self.collected.note_markdown()

    def runs(self, part: str, **where: Any) -> list[dict[str, Any]]:
        """The records of ``part`` whose config (or ``twin``/``method`` entries) match."""
        out = []
        for r in self.records.get(part, []):
            c = r["config"]
            ok = True
            for k, v in where.items():
                if k == "twin_kind":
                    ok &= c["twin"]["kind"] == v
                elif k in c["twin"]:
                    ok &= c["twin"][k] == v
                else:
                    ok &= c.get(k) == v
            if ok:
                out.append(r)
        return out


def collect(
    scale: str | None = None,
    out_dir: str | Path | None = None,
    *,
    parts: Sequence[str] | None = None,
    device: str | torch.device | None = None,
    progress: bool = False,
    mode: str | None = None,
) -> Collected:
    """The records of the parts at ``scale`` (:func:`gaugekit.runs.collection.collect`);
    ``parts`` defaults to the attention chapter's, :data:`CHAPTER_PARTS` (the GPU suite's,
    :data:`SUITE_PARTS`, are collected by name).

    At paper scale the committed records are read and nothing is recomputed (records mode
    ``read``); a run without a record is left out and :meth:`Collected.note` says how many and
    how to make them. At quick scale everything is computed afresh in a temporary folder.
    """
    config = get_config(scale)
    parts = list(CHAPTER_PARTS if parts is None else parts)
    got = collection.collect(EXPERIMENT, config.scale, parts=parts, out_dir=out_dir, device=device,
                        progress=progress, mode=mode, persist=config.persist_records,
                        allow_missing=True)
    return Collected(config, got)


# --------------------------------------------------------------------------------------------
# summaries for the chapter (pure functions of records)
# --------------------------------------------------------------------------------------------


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
            "method": c["method"], "label": METHOD_LABELS.get(c["method"], c["method"]),
            "init_seed": c["init_seed"], "twin": twin_label(c), "kind": c["twin"]["kind"],
            "noise_scale": c["twin"].get("scale"), "dtype": c["dtype"], "status": r["status"],
            "final_m_drift": m.get("final_m_drift"),
            "final_logit_drift": m.get("final_logit_drift"),
            "step1_m_drift": m.get("step1_m_drift"),
            "step1_logit_drift": m.get("step1_logit_drift"),
            "train_loss": m.get("train_loss"), "val_loss": m.get("val_loss"),
            "train_acc": m.get("train_acc"), "val_acc": m.get("val_acc"),
            "acc_gap": (None if m.get("val_acc") is None or m.get("base_val_acc") is None
                        else abs(m["val_acc"] - m["base_val_acc"])),
            "collapsed": bool(m.get("collapsed")) or bool(m.get("base_collapsed")),
            "text_used": m.get("text_used"),
            "max_curve_drift": max(
                [abs(x) for k in ("m_drift", "logit_drift") for x in r["curves"].get(k, [])
                 if x is not None] or [math.nan]),
        })
    return rows


def usable(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows that may enter an equivariance claim: finished ``ok``, neither the run nor its base
    collapsed."""
    return [r for r in rows if r["status"] == "ok" and not r["collapsed"]]


def _pick(rows: Sequence[Mapping[str, Any]], method: str, twin: str,
          init_seed: int = 42) -> Mapping[str, Any] | None:
    for r in rows:
        if r["method"] == method and r["twin"] == twin and r["init_seed"] == init_seed:
            return r
    return None


def structural_ratio(rows: Sequence[Mapping[str, Any]], method: str = "adam") -> dict[str, Any]:
    """``min(final logit drift of gauge twins) / max(final logit drift of noise twins)`` over
    the usable runs of ``method`` (the paper's 662× for Adam), with the extremes and counts."""
    ok = [r for r in usable(rows) if r["method"] == method]
    gauge = [r["final_logit_drift"] for r in ok if r["kind"] == "gauge"]
    noise = [r["final_logit_drift"] for r in ok if r["kind"] == "noise"]
    if not gauge or not noise:
        return {"ratio": None, "gauge_min": None, "gauge_max": None, "noise_max": None,
                "num_gauge": len(gauge), "num_noise": len(noise)}
    return {"ratio": min(gauge) / max(noise) if max(noise) > 0 else math.inf,
            "gauge_min": min(gauge), "gauge_max": max(gauge), "noise_max": max(noise),
            "num_gauge": len(gauge), "num_noise": len(noise)}


def machine_throughput(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How fast the machine trained ``records``, every worker together, from the records alone.

    Each batch (one family, recorded once per run) ran from ``created − batch.wall_time_s``
    to ``created``, with ``batch.size`` models of ``num_steps`` steps. ``rate``: all model-steps
    over the wall-clock span from the first start to the last end (idle gaps included, so it
    does not exceed what the workers did together); ``per_batch_rate``: the mean of the
    batches' own rates (one worker's); ``workers``: the most batches running at one time.
    ``created`` is when the record was written, at or shortly after the batch's end, so the
    intervals are approximate. ``None`` values when no record has timing."""
    from datetime import datetime

    batches: dict[tuple[str, float], tuple[float, float, int]] = {}
    for r in records:
        batch, created = r.get("batch"), r.get("created")
        if not batch or not created or not batch.get("wall_time_s"):
            continue
        end = datetime.fromisoformat(created).timestamp()
        wall = float(batch["wall_time_s"])
        key = (_family_key(r["config"]), wall)
        steps = int(batch["size"]) * int(r["config"]["num_steps"])
        start = end - wall
        old = batches.get(key)
        batches[key] = (min(start, old[0]) if old else start, max(end, old[1]) if old else end,
                        steps)
    if not batches:
        return {"rate": None, "per_batch_rate": None, "workers": None, "model_steps": 0,
                "span_s": None, "batches": 0}
    spans = list(batches.values())
    t0, t1 = min(a for a, _, _ in spans), max(b for _, b, _ in spans)
    total = sum(n for _, _, n in spans)
    events = sorted([(a, 1) for a, _, _ in spans] + [(b, -1) for _, b, _ in spans],
                    key=lambda e: (e[0], e[1]))
    running = workers = 0
    for _, step in events:
        running += step
        workers = max(workers, running)
    return {"rate": total / (t1 - t0) if t1 > t0 else None,
            "per_batch_rate": sum(n / (b - a) for a, b, n in spans) / len(spans),
            "workers": workers, "model_steps": total, "span_s": t1 - t0,
            "batches": len(spans)}


def headline(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The closing note's measured numbers, each ``None`` when its records are missing or its
    runs collapsed: Adam's final mean ``M_h`` and logit drift, its step-1 split, the
    equivariant drifts (float32 and float64), Muon's gauge vs noise, the structural ratio and
    the collapsed runs."""
    single = run_rows(records.get("single", []))
    ok = usable(single)
    out: dict[str, Any] = {}
    for method in METHODS:
        g = _pick(ok, method, "gauge 777")
        n7 = _pick(ok, method, "noise 1e-07")
        n5 = _pick(ok, method, "noise 1e-05")
        ident = _pick(single, method, "A = I")
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
    a = out["adam"]
    out["step1_ratio"] = (None if not a["gauge_step1_logit"] or not a["noise7_step1_logit"]
                          else a["gauge_step1_logit"] / a["noise7_step1_logit"])
    f64 = usable(run_rows(records.get("float64", [])))
    out["float64_step1"] = {r["method"]: r["step1_logit_drift"] for r in f64
                            if r["kind"] == "gauge"}
    out["float64_final_m"] = {r["method"]: r["final_m_drift"] for r in f64 if r["kind"] == "gauge"}
    table = run_rows([*records.get("multiseed", []), *records.get("multiseed_controls", []),
                      *records.get("single", [])])
    seen, uniq = set(), []
    for r in table:
        key = (r["method"], r["init_seed"], r["twin"])
        if key not in seen:
            seen.add(key)
            uniq.append(r)
    out["structural"] = {m: structural_ratio(uniq, m) for m in METHODS}
    everything = [r for part in records.values() for r in run_rows(part)]
    out["collapsed"] = sorted({(r["label"], r["dtype"], r["init_seed"], r["twin"])
                               for r in everything if r["collapsed"]})
    return out


def readme_headline() -> list[Any]:
    """README rows (:mod:`gaugekit.report.headline`) from the committed paper records:
    Adam's and shared-scale Adam's final ``M_h`` drift of the gauge twin, and the structural
    ratio; a missing value shows as a dash."""
    from gaugekit.runs.verdicts import HeadlineRow, number_verdict

    got = collect("paper")
    h = headline(got.records)

    def fmt(x: float | None) -> str:
        if x is None or not math.isfinite(x):
            return "—"
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2g}"

    ratio = h["structural"]["adam"]
    n = ratio["num_gauge"], ratio["num_noise"]
    adam, scalar = h["adam"]["gauge_final_m"], h["scalar_adam"]["gauge_final_m"]
    return [
        HeadlineRow(NAME, "attention, Adam: gauge twins' W_Qᵀ W_K apart at the end (mean rel.)",
                    fmt(adam), fmt(PUBLISHED["adam_final_m_drift"]), "8",
                    number_verdict(adam, PUBLISHED["adam_final_m_drift"])),
        HeadlineRow(NAME, "attention, shared-scale Adam: the same drift (equivariant)",
                    fmt(scalar), fmt(PUBLISHED["scalar_adam_final_m_drift"]), "8",
                    number_verdict(scalar, PUBLISHED["scalar_adam_final_m_drift"])),
        HeadlineRow(NAME, f"attention, Adam: min gauge / max noise drift ({n[0]} gauge, "
                    f"{n[1]} noise twins)", fmt(ratio["ratio"]),
                    fmt(PUBLISHED["structural_ratio"]), "8",
                    number_verdict(ratio["ratio"], PUBLISHED["structural_ratio"])),
    ]
