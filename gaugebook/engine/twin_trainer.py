r"""The one twin trainer of the attention experiments: a stack of models of the paper's
transformer (:mod:`gaugebook.engine.transformer`), bases and their twins, trained in lockstep.

Models ``b = 0 … B−1`` (an init seed, a twin of that init, hyperparameters) are stacked along a
leading run dimension and trained on the identical batches of a task by one optimizer built with
``batch_dims=1``, so every reduction of the rule stays inside its model (shared-scale Adam's RMS
is over all parameters of one model); a hyperparameter that differs between rows becomes a
per-run tensor (:func:`stack_hparams`). The twins of a base (:func:`make_twin`):

``identity``  the gauge's code path with ``A_h = I``: drifts exactly 0;
``gauge``     ``W_{Q,h}, W_{K,h} → A_h W_{Q,h}, A_h W_{K,h}`` with ``A_h`` drawn from a seed
              (:func:`~gaugebook.engine.transformer.draw_head_gauges`): the same function;
``noise``     ``W_Q, W_K`` plus ``scale · N(0, 1)`` per entry (same basis, a nearby function).

At the checkpoints every model records its losses, accuracies and its drift from its base: the
mean over the ``L·H`` heads of ``rel(M_h, M'_h)`` and ``rel`` of the validation logits, with the
symmetric ``rel(A, B) = ‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))``
(:func:`gaugekit.gauge.relative_distance`). :func:`train_families` groups runs into such stacks,
and :func:`twin_result` turns a model of a trained stack into its record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gaugebook.engine.records import round_sig
from gaugebook.engine.spec import RunResult
from gaugebook.engine.transformer import (
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
)
from gaugekit.gauge import relative_distance
from gaugekit.optim.registry import make_optimizer

__all__ = [
    "CURVE_KEYS",
    "TWIN_METHODS",
    "StackTrace",
    "TwinTask",
    "adam_mini_groups",
    "checkpoint_steps",
    "make_twin",
    "make_twin_optimizers",
    "stack_hparams",
    "torch_dtype",
    "train_families",
    "train_stack",
    "twin_result",
]

#: The rules :func:`make_twin_optimizers` builds.
TWIN_METHODS: tuple[str, ...] = ("adam", "momentum", "scalar_adam", "muon_adam", "adamw",
                                 "adam_mini", "eigen_adam", "eigen_adam_pooled")
#: Muon's parameters: the 2-D projection and MLP weights of every block.
MUON_PARAMS: tuple[str, ...] = ("q", "k", "v", "o", "mlp_in", "mlp_out")
CURVE_DIGITS = 6
CURVE_KEYS = ("m_drift", "logit_drift", "train_loss", "val_loss", "train_acc", "val_acc")


def checkpoint_steps(num_steps: int, marks: Sequence[int]) -> tuple[int, ...]:
    """The steps of ``marks`` within ``[0, num_steps]``, and ``num_steps``, sorted."""
    return tuple(sorted({int(m) for m in marks if 0 <= m <= num_steps} | {num_steps}))


def torch_dtype(name: str) -> torch.dtype:
    """``torch.float32`` or ``torch.float64`` from its name in a config."""
    if name not in ("float32", "float64"):
        raise ValueError(f"Invalid dtype: {name!r}; expected 'float32' or 'float64'")
    return getattr(torch, name)


class TwinTask:
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
            from gaugebook.engine.texts import load_text

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
    if method in ("adam", "momentum", "scalar_adam", "adamw"):
        decoupled = {"decoupled_weight_decay": True} if method == "adamw" else {}
        return [make_optimizer("adam" if method == "adamw" else method,
                               [params[n] for n in names], batch_dims=1, **decoupled,
                               **_tuples(hparams))]
    if method in ("muon_adam", "eigen_adam", "eigen_adam_pooled"):
        # Muon, or Eigen-Adam in the left eigenbasis (the head gauge acts on the rows of W_Q,
        # W_K: A_h W_{Q,h}), on the matrices of the blocks; Adam on the rest
        rule = "muon" if method == "muon_adam" else "eigen_adam"
        is_matrix = [n.startswith("layers.") and n.rsplit(".", 1)[1] in MUON_PARAMS for n in names]
        matrices = [params[n] for n, m in zip(names, is_matrix, strict=True) if m]
        others = [params[n] for n, m in zip(names, is_matrix, strict=True) if not m]
        return [
            make_optimizer(rule, matrices, batch_dims=1, **_tuples(hparams[rule])),
            make_optimizer("adam", others, batch_dims=1, **_tuples(hparams["adam"])),
        ]
    if method == "adam_mini":
        rest = {k: v for k, v in hparams.items() if k != "head_rows"}
        groups = adam_mini_groups(params, int(hparams["head_rows"]))
        return [make_optimizer("adam_mini", groups, batch_dims=1, **_tuples(rest))]
    raise ValueError(f"Invalid method: {method!r}; expected one of {TWIN_METHODS}")


@torch.no_grad()
def _evaluate(
    params: Mapping[str, Tensor], shape: TransformerShape, task: TwinTask,
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
    logit_drift = relative_distance(flat, flat[bases], symmetric=True, dims=1)
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
    *, shape: TransformerShape, task: TwinTask, method: str,
    hparams: Sequence[Mapping[str, Any]], init_seeds: Sequence[int],
    twins: Sequence[Mapping[str, Any]], base_of: Sequence[int], num_steps: int,
    checkpoints: Sequence[int], dtype: torch.dtype, device: torch.device,
) -> StackTrace:
    """The one twin trainer (module docstring): model ``b`` has init seed ``init_seeds[b]``,
    twin ``twins[b]`` of that init and hyperparameters ``hparams[b]``; at each checkpoint its
    drift is measured from its base, model ``base_of[b]``."""
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


Row = tuple[Mapping[str, Any], int, Mapping[str, Any]]


def train_families(rows: Sequence[Row], *, max_stack: int,
                   **stack: Any) -> list[tuple[StackTrace, int, int]]:
    """Train ``rows`` = ``(hparams, init seed, twin)`` by :func:`train_stack` (``stack``: its
    other arguments): a family (the rows of one hparams and init seed) that has twins is one
    stack, with its base (the row of kind ``base``, added when missing); lone bases go
    ``max_stack`` to a stack. Returns per row ``(its stack's trace, its index there, its
    base's index there)``."""
    base = {"kind": "base"}
    rows = list(rows)
    for hp, seed, twin in list(rows):
        if twin["kind"] != "base" and (hp, seed, base) not in rows:
            rows.append((hp, seed, base))
    families = [r[:2] for r in rows]
    with_twins = [families[i] for i, r in enumerate(rows) if r[2]["kind"] != "base"]
    first = [f for i, f in enumerate(families) if f in with_twins and f not in families[:i]]
    groups = [[i for i, f in enumerate(families) if f == fam] for fam in first]
    lone = [i for i, f in enumerate(families) if f not in with_twins]
    groups += [lone[k:k + max_stack] for k in range(0, len(lone), max_stack)]
    where: dict[int, tuple[StackTrace, int, int]] = {}
    for group in groups:
        sub = [rows[i] for i in group]
        base_of = [sub.index((hp, seed, base)) for hp, seed, _ in sub]
        trace = train_stack(hparams=[hp for hp, _, _ in sub], init_seeds=[s for _, s, _ in sub],
                            twins=[t for _, _, t in sub], base_of=base_of, **stack)
        for b, i in enumerate(group):
            where[i] = (trace, b, base_of[b])
    return [where[i] for i in range(len(rows))]


def twin_result(
    trace: StackTrace, b: int, task: TwinTask, shape: TransformerShape, *, twin_kind: str,
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
