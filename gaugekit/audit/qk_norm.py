r"""The part of the per-head gauge that survives a qk-norm with a gain (Qwen3, OLMo2, Gemma3).

A qk-norm sends each query (and key) head ``q`` to ``γ ⊙ q / rms(q)``. The RMS is unchanged by
any orthogonal ``A``, but the gain is per coordinate: ``γ ⊙ (A q) = A (γ ⊙ q)`` for every
``γ`` only when ``A`` moves coordinates without mixing them. So the residual gauge is the
signed permutations ``P = S Π``, with the gains permuted alike, ``γ → Π γ``:

    γ' ⊙ rms-normalized(P q) = (Π γ) ⊙ (S Π n) = S Π (γ ⊙ n) = P q̃,

and ``(P q̃)ᵀ (P k̃) = q̃ᵀ k̃``. A gain shared by all heads (one vector of ``d_head``, as in
Qwen3) needs one ``Π`` for every head (each head its own signs); a gain over the whole
projection (``H·d_head``, as in OLMo2) lets each key-value group have its own. Under a rotary
embedding applied after the norm, ``P`` must also commute with the rotary map: on each
frequency pair ``±I`` or a quarter turn ``±J`` (the only signed permutations in ``SO(2)``),
on the unrotated coordinates any signed permutation.

The invariant reported for such a site is ``M_h = W̃_{Q,h}ᵀ (I + diag(γ_{Q,h} ⊙ γ_{K,g(h)}))
W̃_{K,g(h)}``: ``Pᵀ diag(Π v) P = diag(v)``, so it is kept, and it moves when the gains do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["QKNorms", "draw_signed_permutations", "find_qk_norms", "is_signed_permutation",
           "permute_gains"]

#: ``(query, key)`` child names of a qk-norm pair, as ``transformers`` writes them.
QK_NORM_NAMES = (("q_norm", "k_norm"), ("q_layernorm", "k_layernorm"),
                 ("query_layernorm", "key_layernorm"))


@dataclass(frozen=True)
class QKNorms:
    """The qk-norm modules of a site (their ``weight`` is the gain) and whether one gain
    serves every head (``shared``: ``d_head`` entries) or each head has its own."""

    q: str
    k: str
    shared: bool


def _rms_gain(module: nn.Module) -> Tensor | None:
    """The gain of an RMS norm (``nn.RMSNorm`` or a class named ``…RMSNorm``) whose only
    parameter is a 1-D ``weight``; ``None`` for anything else (mean-centring, a bias)."""
    params = dict(module.named_parameters())
    rms = isinstance(module, nn.RMSNorm) or "rmsnorm" in type(module).__name__.lower()
    if not rms or set(params) != {"weight"} or params["weight"].ndim != 1:
        return None
    return params["weight"]


def find_qk_norms(parent: nn.Module, prefix: str, d_head: int, num_heads: int,
                  kv_heads: int) -> QKNorms | None:
    """The qk-norm pair among ``parent``'s children whose gains fit the heads, or ``None``."""
    children = dict(parent.named_children())
    for q_name, k_name in QK_NORM_NAMES:
        gq, gk = (_rms_gain(children[n]) if n in children else None for n in (q_name, k_name))
        if gq is None or gk is None:
            continue
        if gq.numel() in (d_head, num_heads * d_head) and gk.numel() in (d_head,
                                                                          kv_heads * d_head):
            shared = d_head in (gq.numel(), gk.numel())
            return QKNorms(prefix + q_name, prefix + k_name, shared)
    return None


def draw_signed_permutations(num: int, d: int, *, shared: bool,
                             pairs: Sequence[tuple[int, int]] = (),
                             generator: torch.Generator,
                             dtype: torch.dtype = torch.float64) -> Tensor:
    """``num`` signed permutations ``(num, d, d)`` (module doc): each its own signs; one
    permutation for all when ``shared``; on each rotary pair ``(a, b)`` either ``±I`` or the
    quarter turn ``±J`` (``e_a → e_b``, ``e_b → −e_a``)."""
    paired = [i for p in pairs for i in p]
    rest = [i for i in range(d) if i not in paired]
    out = torch.zeros(num, d, d, dtype=dtype)

    def draw_layout() -> tuple[Tensor, list[bool]]:
        order = torch.tensor(rest)[torch.randperm(len(rest), generator=generator)]
        return order, (torch.rand(len(pairs), generator=generator) < 0.5).tolist()

    layout = draw_layout()
    for g in range(num):
        order, turns = layout if shared else draw_layout()
        for src, dst in zip(order.tolist(), rest, strict=True):
            out[g, dst, src] = 1.0 if torch.rand(1, generator=generator) < 0.5 else -1.0
        for (a, b), turn in zip(pairs, turns, strict=True):
            sign = 1.0 if torch.rand(1, generator=generator) < 0.5 else -1.0
            if turn:
                out[g, b, a], out[g, a, b] = sign, -sign
            else:
                out[g, a, a], out[g, b, b] = sign, sign
    return out


def is_signed_permutation(A: Tensor) -> bool:
    """Whether every matrix of ``A`` has one entry ``±1`` per row and column, zeros else."""
    return bool(torch.equal(A.abs().sum(-1), torch.ones(A.shape[:-1], dtype=A.dtype))
                and torch.equal(A.abs().sum(-2), torch.ones(A.shape[:-1], dtype=A.dtype))
                and torch.equal(A.abs(), A.abs().round()))


def permute_gains(gain: Tensor, P: Tensor, heads_per_group: int) -> None:
    """``γ → |P| γ`` in place: one permutation (``|P_0|``) for a gain of ``d_head`` entries;
    for a gain of one block per head, head ``h`` by ``|P_{g(h)}|`` with ``heads_per_group``
    heads per group (1 on the key side)."""
    d = P.shape[-1]
    perm = P.abs().to(device=gain.device, dtype=torch.float64)
    if gain.numel() == d:
        gain.copy_(perm[0] @ gain.double())
        return
    blocks = gain.view(-1, d)
    perm = perm.repeat_interleave(heads_per_group, dim=0)
    blocks.copy_((perm @ blocks.double().unsqueeze(-1)).squeeze(-1))


def gain_factor(gq: Tensor, gk: Tensor, num_heads: int, kv_heads: int, d: int) -> Tensor:
    """``1 + γ_{Q,h} ⊙ γ_{K,g(h)}`` per query head, float64 ``(H, d)``."""
    q = gq.detach().double().reshape(-1, d).expand(num_heads, d)
    k = gk.detach().double().reshape(-1, d).expand(kv_heads, d)
    return 1 + q * k.repeat_interleave(num_heads // kv_heads, dim=0)
