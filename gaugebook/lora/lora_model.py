r"""The language-model chapter's transformer written with ``nn.Linear`` layers, for LoRA.

:mod:`gaugebook.engine.transformer` keeps a model as a dict of tensors so that a stack of
models trains with batched products. A LoRA library wraps *modules*: ``peft`` replaces an
``nn.Linear`` named in ``target_modules`` by a layer that adds ``s · B A x`` to it. This module is
the same function as :func:`gaugebook.engine.transformer.forward` (causal, every position to the
head) with each weight an ``nn.Linear`` (``weight`` in the same ``(out, in)`` layout):

.. math::
    x \leftarrow x + W_O\,\mathrm{Attn}(\mathrm{N}_1(x)),\qquad
    x \leftarrow x + W_2\,\mathrm{SiLU}(W_1\,\mathrm{N}_2(x)),

``N(x) = x/‖x‖ · √d · g``. Modules per block: ``q``, ``k``, ``v``, ``o``, ``mlp_in``, ``mlp_out``
(the names LoRA's ``target_modules`` takes), ``norm1``, ``norm2``; then ``norm_f`` and ``head``.
:meth:`CharTransformer.from_params` loads a parameter dict of :func:`~gaugebook.engine.
transformer.init_params`, :meth:`CharTransformer.to_params` gives it back; a test checks that
the two forwards agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor, nn
from torch.nn.functional import scaled_dot_product_attention, silu

from gaugebook.engine.transformer import TransformerShape

__all__ = ["CharTransformer", "RMSNorm"]


class RMSNorm(nn.Module):
    """``x · √d/‖x‖ · g`` over the last dimension, learned gain ``g`` (ones at init)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        d = x.shape[-1]
        scale = math.sqrt(d) * torch.rsqrt((x * x).sum(-1, keepdim=True).clamp_min(1e-30))
        return x * scale * self.weight


class _Block(nn.Module):
    def __init__(self, shape: TransformerShape) -> None:
        super().__init__()
        d, f = shape.d_model, shape.d_mlp
        self.num_heads = shape.num_heads
        self.norm1 = RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.norm2 = RMSNorm(d)
        self.mlp_in = nn.Linear(d, f, bias=False)
        self.mlp_out = nn.Linear(f, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        N, T, d = x.shape
        H = self.num_heads
        h = self.norm1(x)
        q, k, v = (m(h).reshape(N, T, H, d // H).transpose(1, 2) for m in (self.q, self.k, self.v))
        att = scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(N, T, d))
        return x + self.mlp_out(silu(self.mlp_in(self.norm2(x))))


class CharTransformer(nn.Module):
    """The causal character transformer of :mod:`gaugebook.engine.transformer` as modules:
    ``forward(tokens)`` with tokens ``(N, T)`` gives logits ``(N, T, C)``."""

    def __init__(self, shape: TransformerShape) -> None:
        super().__init__()
        if not shape.causal or shape.last_only:
            raise ValueError(f"Invalid shape: {shape}; expected causal=True, last_only=False")
        self.shape = shape
        d = shape.d_model
        self.tok_emb = nn.Embedding(shape.vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, shape.seq_len, d))
        self.blocks = nn.ModuleList(_Block(shape) for _ in range(shape.num_layers))
        self.norm_f = RMSNorm(d)
        self.head = nn.Linear(d, shape.num_classes, bias=False)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.tok_emb(tokens) + self.pos[:, : tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm_f(x))

    def _slots(self) -> dict[str, Tensor]:
        """Parameter-dict name → this model's tensor (the engine's names)."""
        out: dict[str, Tensor] = {"tok_emb": self.tok_emb.weight, "pos": self.pos}
        for i, b in enumerate(self.blocks):
            p = f"layers.{i}."
            out |= {p + "norm1": b.norm1.weight, p + "norm2": b.norm2.weight}
            for name in ("q", "k", "v", "o", "mlp_in", "mlp_out"):
                layer = getattr(b, name)
                out[p + name] = getattr(layer, "base_layer", layer).weight  # a peft-wrapped one too
        return out | {"norm_f": self.norm_f.weight, "head": self.head.weight}

    @classmethod
    def from_params(cls, shape: TransformerShape, params: Mapping[str, Tensor]) -> CharTransformer:
        """The model with the weights of one parameter dict (no run dimension)."""
        model = cls(shape)
        slots = model._slots()
        if set(slots) != set(params):
            raise ValueError(f"Invalid params: names {sorted(set(params) ^ set(slots))} differ")
        with torch.no_grad():
            model.to(next(iter(params.values())).dtype)
            for name, t in params.items():
                slots[name].copy_(t)
        return model

    def to_params(self) -> dict[str, Tensor]:
        """The weights as a parameter dict (detached copies)."""
        return {name: t.detach().clone() for name, t in self._slots().items()}
