r"""The paper's small attention model, its tasks, its per-head gauge and invariants.

In head ``h`` of a layer the attention logits between positions ``i`` and ``j`` are

.. math:: s_{ij} = \frac{1}{\sqrt{d_h}}\, x_i^\top W_{Q,h}^\top W_{K,h}\, x_j ,

so they see ``W_{Q,h}`` and ``W_{K,h}`` only through ``M_h = W_{Q,h}^\top W_{K,h}``
(``d_model × d_model``, rank ``≤ d_h``). Left-multiplying the head's rows of both by one
``A_h ∈ O(d_h)`` keeps ``M_h`` and therefore the whole function: the per-head gauge. ``W_V``,
``W_O`` and everything else are untouched. A qk-norm or a bias on q/k would break it.

The model (the paper's): a pre-norm transformer, ``num_layers`` blocks of

.. math::
    x \leftarrow x + W_O\,\mathrm{Attn}(\mathrm{N}_1(x)),\qquad
    x \leftarrow x + W_2\,\mathrm{SiLU}(W_1\,\mathrm{N}_2(x)),

with RMSNorm ``N(x) = x/‖x‖ · √d · g`` (learned gain ``g``, initialised to 1), no biases
anywhere, no qk-norm, a token embedding (``N(0, 1)``, torch's ``nn.Embedding`` default), a learned
positional parameter ``0.02 · N(0, 1)`` of shape ``(1, T, d)``, a final RMSNorm and a linear
head (torch's default ``nn.Linear`` init, ``U(−1/√fan_in, 1/√fan_in)``). This is the architecture
of the paper's public reference script (``experiments/attention_gauge.py`` of
``idevender/loss-basis-adam``), final RMSNorm before the head included; the initial values are
drawn from our own generator in the order of :func:`param_names`, not from torch's global
generator in the reference's module order, so the two scripts start from different weights.
For modular addition the head reads the last position only and there is no mask (3 tokens);
for the character-level LM it reads every position under a causal mask.

Parameters are a ``dict`` name → tensor (:func:`init_params`). Every function here takes a
*stack* of models: each tensor has a leading run dimension ``B`` (:func:`stack_params`), and
:func:`forward` runs the ``B`` models on the same tokens with batched matrix products; with
``B = 1`` it is one model. :class:`PaperTransformer` is the same model as an ``nn.Module``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.functional import silu

from gaugekit.gauge import (
    head_logit_bilinears,
    random_head_rotations,
    relative_distance,
    rotate_heads,
)

__all__ = [
    "EQUALS_TOKEN",
    "ModAddData",
    "PaperTransformer",
    "TransformerShape",
    "accuracy",
    "apply_head_gauge",
    "chance_accuracy",
    "char_lm_batches",
    "cross_entropy",
    "draw_head_gauges",
    "forward",
    "head_bilinears",
    "identity_head_gauges",
    "init_params",
    "is_collapsed",
    "make_modadd_data",
    "mean_head_drift",
    "param_names",
    "perturb_qk",
    "stack_params",
    "unstack_params",
]

#: Token id of "=" in the modular-addition task (the residues are 0 … p − 1).
EQUALS_TOKEN = 47


@dataclass(frozen=True)
class TransformerShape:
    """Sizes of the model: vocabulary, context length ``seq_len``, width, heads, layers, MLP
    width, number of classes; ``causal`` mask; ``last_only``: the head reads the last position
    only (modular addition) instead of every position (language model)."""

    vocab: int = 48
    seq_len: int = 3
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_mlp: int = 256
    num_classes: int = 47
    causal: bool = False
    last_only: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab", "seq_len", "d_model", "num_heads", "num_layers", "d_mlp",
                     "num_classes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Invalid {name}: {value!r}; expected an integer >= 1")
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"Invalid num_heads: {self.num_heads!r}; expected a divisor of d_model "
                f"{self.d_model}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

    def to_config(self) -> dict[str, Any]:
        return asdict(self)


def param_names(shape: TransformerShape) -> list[str]:
    """The parameter names in drawing order."""
    names = ["tok_emb", "pos"]
    for layer in range(shape.num_layers):
        p = f"layers.{layer}."
        names += [p + n for n in ("norm1", "q", "k", "v", "o", "norm2", "mlp_in", "mlp_out")]
    return [*names, "norm_f", "head"]


def _linear_init(out_f: int, in_f: int, g: torch.Generator, dtype: torch.dtype) -> Tensor:
    """torch's default ``nn.Linear`` weight init: ``U(−1/√in, 1/√in)`` (kaiming, a = √5)."""
    bound = 1.0 / math.sqrt(in_f)
    return (torch.rand(out_f, in_f, generator=g, dtype=dtype) * 2 - 1) * bound


def init_params(
    shape: TransformerShape, *, generator: torch.Generator, dtype: torch.dtype = torch.float32
) -> dict[str, Tensor]:
    """The parameters of one model (no run dimension), drawn from ``generator`` in the order
    of :func:`param_names` (norm gains are ones and draw nothing)."""
    d, f = shape.d_model, shape.d_mlp
    out: dict[str, Tensor] = {
        "tok_emb": torch.randn(shape.vocab, d, generator=generator, dtype=dtype),
        "pos": 0.02 * torch.randn(1, shape.seq_len, d, generator=generator, dtype=dtype),
    }
    for layer in range(shape.num_layers):
        p = f"layers.{layer}."
        out[p + "norm1"] = torch.ones(d, dtype=dtype)
        for name in ("q", "k", "v", "o"):
            out[p + name] = _linear_init(d, d, generator, dtype)
        out[p + "norm2"] = torch.ones(d, dtype=dtype)
        out[p + "mlp_in"] = _linear_init(f, d, generator, dtype)
        out[p + "mlp_out"] = _linear_init(d, f, generator, dtype)
    out["norm_f"] = torch.ones(d, dtype=dtype)
    out["head"] = _linear_init(shape.num_classes, d, generator, dtype)
    return out


def stack_params(models: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """Stack models (same names and shapes) along a new leading run dimension."""
    if not models:
        raise ValueError("Invalid models: expected at least one parameter dict")
    return {name: torch.stack([m[name] for m in models]) for name in models[0]}


def unstack_params(params: Mapping[str, Tensor], run: int) -> dict[str, Tensor]:
    """Model ``run`` of a stack (views, no copy)."""
    return {name: t[run] for name, t in params.items()}


# --------------------------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------------------------


def _rms_scale(x: Tensor) -> Tensor:
    """``x · √d/‖x‖`` over the last dimension (RMSNorm without its gain)."""
    d = x.shape[-1]
    return x * (math.sqrt(d) * torch.rsqrt((x * x).sum(-1, keepdim=True).clamp_min(1e-30)))


def _linear(x: Tensor, W: Tensor) -> Tensor:
    """``x Wᵀ`` per run: ``x`` is ``(B, …, in)``, ``W`` is ``(B, out, in)``."""
    lead = x.shape[:-1]
    y = torch.bmm(x.reshape(x.shape[0], -1, x.shape[-1]), W.mT)
    return y.reshape(*lead, W.shape[-2])


def _norm_linear(x: Tensor, gain: Tensor, W: Tensor) -> Tensor:
    """``N(x) Wᵀ`` with RMSNorm gain ``g`` folded into the weight: ``(x√d/‖x‖)(W diag g)ᵀ``."""
    return _linear(_rms_scale(x), W * gain.unsqueeze(-2))


def forward(
    params: Mapping[str, Tensor], tokens: Tensor, shape: TransformerShape
) -> Tensor:
    """Logits of the stacked models on ``tokens`` (``(N, T)`` integer, shared by all runs).

    Returns ``(B, N, C)`` when ``shape.last_only`` (the head on the last position), else
    ``(B, N, T, C)``. Three exact shortcuts, none of which changes the function:

    * the RMSNorm gain is folded into the weight that follows it, ``N(x) Wᵀ = x̃ (W diag g)ᵀ``;
    * the first block's queries, keys and values depend on ``(token, position)`` only, so when
      the vocabulary is smaller than the number of sequences they are computed once per
      ``(token, position)`` and gathered;
    * with ``last_only`` the final block computes its queries, attention output and MLP at the
      last position only (nothing else reaches the head).
    """
    B = params["tok_emb"].shape[0]
    N, T = tokens.shape
    H, dh, d = shape.num_heads, shape.d_head, shape.d_model
    V = params["tok_emb"].shape[1]
    table = params["tok_emb"].unsqueeze(2) + params["pos"][:, :, :T]  # (B, V, T, d)
    flat_idx = tokens * T + torch.arange(T, device=tokens.device)  # (N, T)
    x = table.reshape(B, V * T, d)[:, flat_idx]  # (B, N, T, d)
    dedup = V < N
    mask = None
    if shape.causal:
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
    for layer in range(shape.num_layers):
        p = f"layers.{layer}."
        last = shape.last_only and layer == shape.num_layers - 1
        g1 = params[p + "norm1"]
        if last:
            W_kv = torch.cat([params[p + "k"], params[p + "v"]], dim=1)
            k, v = _norm_linear(x, g1, W_kv).split(d, dim=-1)
            q = _norm_linear(x[:, :, -1:], g1, params[p + "q"])
        else:
            W_qkv = torch.cat([params[p + "q"], params[p + "k"], params[p + "v"]], dim=1)
            if layer == 0 and dedup:
                qkv = _norm_linear(table, g1, W_qkv).reshape(B, V * T, 3 * d)[:, flat_idx]
            else:
                qkv = _norm_linear(x, g1, W_qkv)
            q, k, v = qkv.split(d, dim=-1)
        Tq = q.shape[2]
        q = q.reshape(B, N, Tq, H, dh).transpose(2, 3)  # (B, N, H, Tq, dh)
        k = k.reshape(B, N, T, H, dh).transpose(2, 3)
        v = v.reshape(B, N, T, H, dh).transpose(2, 3)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))  # (B, N, H, Tq, T)
        if mask is not None:
            scores = scores.masked_fill(mask[-Tq:], float("-inf"))
        att = torch.softmax(scores, dim=-1) @ v  # (B, N, H, Tq, dh)
        att = att.transpose(2, 3).reshape(B, N, Tq, d)
        x = (x[:, :, -1:] if last else x) + _linear(att, params[p + "o"])
        pre = _norm_linear(x, params[p + "norm2"], params[p + "mlp_in"])
        hidden = silu(pre)
        x = x + _linear(hidden, params[p + "mlp_out"])
    if shape.last_only:
        x = x[:, :, -1]
    return _norm_linear(x, params["norm_f"], params["head"])


class PaperTransformer(nn.Module):
    """One model of :func:`forward` as an ``nn.Module`` (parameters named by
    :func:`param_names` with ``.`` replaced by ``_``; ``forward(tokens)`` gives the logits)."""

    def __init__(self, shape: TransformerShape, params: Mapping[str, Tensor]) -> None:
        super().__init__()
        self.shape = shape
        self.names = list(params)
        for name, t in params.items():
            self.register_parameter(name.replace(".", "_"), nn.Parameter(t.detach().clone()))

    def params_dict(self) -> dict[str, Tensor]:
        return {name: getattr(self, name.replace(".", "_")) for name in self.names}

    def forward(self, tokens: Tensor) -> Tensor:
        stacked = {n: t.unsqueeze(0) for n, t in self.params_dict().items()}
        return forward(stacked, tokens, self.shape)[0]


# --------------------------------------------------------------------------------------------
# losses and metrics
# --------------------------------------------------------------------------------------------


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy per run: ``logits`` ``(B, …, C)``, ``targets`` ``(…)`` → ``(B,)``."""
    B, C = logits.shape[0], logits.shape[-1]
    flat = logits.reshape(B, -1, C)
    logp = torch.log_softmax(flat, dim=-1)
    idx = targets.reshape(1, -1, 1).expand(B, -1, 1)
    return -logp.gather(-1, idx).squeeze(-1).mean(-1)


def accuracy(logits: Tensor, targets: Tensor) -> Tensor:
    """Fraction of correct arg-max predictions per run, ``(B,)``."""
    B = logits.shape[0]
    pred = logits.argmax(-1).reshape(B, -1)
    return (pred == targets.reshape(1, -1)).to(logits.dtype).mean(-1)


def chance_accuracy(num_classes: int) -> float:
    """``1/C``: the accuracy of a constant guess on balanced classes."""
    return 1.0 / num_classes


def is_collapsed(
    val_accuracy: float, train_loss: float, num_classes: int, *, accuracy_factor: float = 1.5,
    loss_tolerance: float = 0.05,
) -> bool:
    r"""Whether a run has collapsed to chance: validation accuracy ``≤ 1.5/C`` or
    ``|train loss − ln C| ≤ 5 % · ln C`` (a non-finite loss counts as collapsed)."""
    if not math.isfinite(train_loss) or not math.isfinite(val_accuracy):
        return True
    log_c = math.log(num_classes)
    near_chance = val_accuracy <= accuracy_factor * chance_accuracy(num_classes)
    return near_chance or abs(train_loss - log_c) <= loss_tolerance * log_c


def head_bilinears(params: Mapping[str, Tensor], shape: TransformerShape) -> Tensor:
    r"""``M_h = W_{Q,h}ᵀ W_{K,h}`` of every layer and head: ``(B, L·H, d, d)`` (layer-major)."""
    per_layer = [
        head_logit_bilinears(params[f"layers.{i}.q"], params[f"layers.{i}.k"], shape.num_heads)
        for i in range(shape.num_layers)
    ]
    return torch.cat(per_layer, dim=-3)


def mean_head_drift(M: Tensor, M_ref: Tensor) -> tuple[Tensor, Tensor]:
    """Per-head ``rel(M_h, M'_h) = ‖M_h − M'_h‖_F / (½(‖M_h‖_F + ‖M'_h‖_F))`` ``(B, L·H)``
    (:func:`~gaugekit.gauge.relative_distance`, symmetric) and its mean over heads ``(B,)``."""
    per_head = relative_distance(M, M_ref, symmetric=True)
    return per_head, per_head.mean(-1)


# --------------------------------------------------------------------------------------------
# the gauge and the twins
# --------------------------------------------------------------------------------------------


def draw_head_gauges(
    shape: TransformerShape, seed: int, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    r"""The paper's gauge: ``A_h`` = the Q factor of the QR of a ``d_h × d_h`` Gaussian, from a
    generator seeded ``seed``, drawn layer by layer, then head by head. ``(L, H, d_h, d_h)``
    (:func:`~gaugekit.gauge.random_head_rotations` with ``haar=False``).

    The draw and the QR are in float64 (then cast), so the same seed gives the same rotation in
    either dtype up to its rounding. No sign fix: the paper takes the Q factor as it comes.
    """
    g = torch.Generator().manual_seed(seed)
    layout = [(shape.num_heads, shape.d_head)] * shape.num_layers
    return torch.stack(random_head_rotations(layout, generator=g, haar=False, dtype=dtype))


def identity_head_gauges(shape: TransformerShape, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """``A_h = I`` for every layer and head: the control that runs the gauge's code path."""
    eye = torch.eye(shape.d_head, dtype=dtype)
    return eye.expand(shape.num_layers, shape.num_heads, -1, -1).clone()


def apply_head_gauge(
    params: Mapping[str, Tensor], shape: TransformerShape, gauges: Tensor
) -> dict[str, Tensor]:
    r"""``W_{Q,h} → A_h W_{Q,h}``, ``W_{K,h} → A_h W_{K,h}`` in every layer (one model, no run
    dimension; ``gauges`` is ``(L, H, d_h, d_h)``). Everything else is copied unchanged."""
    L, H, dh = shape.num_layers, shape.num_heads, shape.d_head
    if tuple(gauges.shape) != (L, H, dh, dh):
        raise ValueError(
            f"Invalid gauges: shape {tuple(gauges.shape)}; expected (num_layers, num_heads, "
            f"d_head, d_head) = {(L, H, dh, dh)}"
        )
    out = {name: t.clone() for name, t in params.items()}
    for layer in range(L):
        q, k = f"layers.{layer}.q", f"layers.{layer}.k"
        A = gauges[layer].to(params[q].dtype)
        out[q], out[k] = rotate_heads(params[q], params[k], A, H)
    return out


def perturb_qk(
    params: Mapping[str, Tensor], shape: TransformerShape, scale: float, seed: int
) -> dict[str, Tensor]:
    """The noise twin: ``scale · N(0, 1)`` added to every entry of every ``W_Q`` and ``W_K``
    (generator seeded ``seed``; drawn layer by layer, ``W_Q`` then ``W_K``, in float64)."""
    if not (isinstance(scale, (int, float)) and scale >= 0 and math.isfinite(scale)):
        raise ValueError(f"Invalid scale: {scale!r}; expected a finite float >= 0")
    g = torch.Generator().manual_seed(seed)
    out = {name: t.clone() for name, t in params.items()}
    for layer in range(shape.num_layers):
        for name in ("q", "k"):
            key = f"layers.{layer}.{name}"
            noise = torch.randn(params[key].shape, generator=g, dtype=torch.float64)
            out[key] = (params[key].double() + scale * noise).to(params[key].dtype)
    return out


# --------------------------------------------------------------------------------------------
# tasks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModAddData:
    """``(a + b) mod p`` from ``[a, b, "="]``: train and validation tokens and targets."""

    train_tokens: Tensor
    train_targets: Tensor
    val_tokens: Tensor
    val_targets: Tensor
    p: int


def make_modadd_data(p: int = 47, train_frac: float = 0.4, seed: int = 42) -> ModAddData:
    """All ``p²`` pairs ``(a, b)`` (row-major, ``a`` slow), permuted by ``torch.randperm`` with a
    generator seeded ``seed``; the first ``int(train_frac · p²)`` are the training set (883 of
    2,209 for the paper's ``p = 47``, 40 %), the rest validation. The "=" token is ``p``."""
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise ValueError(f"Invalid p: {p!r}; expected an integer >= 2")
    if not 0.0 < train_frac < 1.0:
        raise ValueError(f"Invalid train_frac: {train_frac!r}; expected a float in (0, 1)")
    a = torch.arange(p).repeat_interleave(p)
    b = torch.arange(p).repeat(p)
    tokens = torch.stack([a, b, torch.full_like(a, p)], dim=1)
    targets = (a + b) % p
    perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))
    n_train = int(train_frac * p * p)
    tr, va = perm[:n_train], perm[n_train:]
    return ModAddData(tokens[tr], targets[tr], tokens[va], targets[va], p)


def char_lm_batches(
    ids: Tensor, *, num_steps: int, batch_size: int, seq_len: int, seed: int
) -> tuple[Tensor, Tensor]:
    """Pre-drawn batches for a character LM: ``(num_steps, batch, seq_len)`` inputs and the
    next-character targets, windows starting at offsets drawn from a generator seeded ``seed``.
    Drawing them once, before training, gives every twin the identical data."""
    if ids.ndim != 1 or ids.numel() <= seq_len + 1:
        raise ValueError(
            f"Invalid ids: {ids.numel()} characters; expected a 1-d tensor longer than "
            f"seq_len + 1 = {seq_len + 1}"
        )
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, ids.numel() - seq_len - 1, (num_steps, batch_size), generator=g)
    offsets = torch.arange(seq_len + 1)
    windows = ids[starts.unsqueeze(-1) + offsets]
    return windows[..., :-1], windows[..., 1:]
