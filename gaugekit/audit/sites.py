r"""Where the per-head gauge acts: the query/key sites of anyone's attention model.

A *site* is one attention layer: an ``nn.MultiheadAttention`` (packed ``in_proj_weight`` or
separate ``q_proj_weight``/``k_proj_weight``), a ``(query, key)`` pair of ``nn.Linear``
projections, or a pair of 2-D weight parameters in Linear layout. :func:`find_qk_sites` resolves
and validates them (head count, widths) and refuses the structures that break the gauge
(qk-norms with a gain or mean-centring, rotary modules of unknown layout; see
:mod:`gaugekit.audit.heads`).

Models of Hugging Face ``transformers``
---------------------------------------
With ``sites=None`` the attention modules of ``transformers`` models are found too, recognised
by their class's module (``transformers.…``) or a ``config`` with a head count, and by their
children; ``transformers`` itself is never imported:

* separate projections (BERT, RoBERTa, ViT, BART, T5, Llama, …): children ``query``/``key``,
  ``q_proj``/``k_proj``, ``q_lin``/``k_lin``, ``q``/``k`` or ``query_proj``/``key_proj``
  (``nn.Linear``), the head count and width read from the module (``num_heads``,
  ``num_attention_heads``, ``head_dim``, ``attention_head_size``, …) or its config;
* GPT-2's fused ``c_attn``, a ``transformers`` ``Conv1D`` (recognised by its class name and
  ``nf``): ``y = x W + b`` with ``W`` of shape ``(in, 3E)``, columns ``[q | k | v]``. The query
  weight in Linear layout is the *view* ``W[:, :E]ᵀ`` and the key ``W[:, E:2E]ᵀ`` (and the bias
  slices), so rotating the rows of head ``h`` of the view rotates columns of ``c_attn`` in
  place (kind ``"conv1d"``; with cross-attention the query is ``q_attn``: ``"conv1d_cross"``);
* GPT-NeoX's and Bloom's fused ``query_key_value`` (``nn.Linear``, rows per head
  ``[q_h | k_h | v_h]``): head-major views ``(H, d, in)`` (kind ``"fused_heads"``); so are
  Falcon's ``query_key_value`` without multi-query and GPTBigCode's ``c_attn`` without it;
* fused projections with the rows ``[q (H·d); k (G·d); v (G·d)]``: Phi-3's ``qkv_proj``,
  MPT's ``Wqkv``, and the multi-query (``G = 1``) layouts of Falcon's ``query_key_value`` and
  GPTBigCode's ``c_attn`` (``nn.Linear``): the query and key are row slices (kind
  ``"packed_rows"``). MPT's ``clip_qkv`` clamps every entry of q and k, which a rotation does
  not commute with: refused;
* Falcon's ``new_decoder_architecture`` groups its rows by key-value group,
  ``[q_{g,1} … q_{g,H/G} | k_g | v_g]`` for each ``g``: the query heads are the view
  ``(G, H/G, d, in)`` and the keys ``(G, d, in)`` (kind ``"grouped_rows"``);
* grouped-query attention (Llama, Mistral, Qwen; ``num_key_value_heads < num_attention_heads``):
  key head ``g`` serves the ``H/G`` query heads ``h`` with ``g(h) = ⌊h G / H⌋`` (``repeat_kv``),
  so ``M_h = W_{Q,h}ᵀ W_{K,g(h)}`` and the gauge is one ``A_g`` per key-value group, acting on
  key head ``g`` and on every query head that reads it: ``q_hᵀ k_{g(h)} → (A_g q_h)ᵀ (A_g
  k_{g(h)})``;
* rotary embeddings: the site carries the model's :class:`~gaugekit.audit.rotary.RotaryLayout`,
  read off the rotate function its ``apply_rotary_pos_emb`` calls (half-split ``rotate_half``
  or interleaved ``rotate_every_two``) or, where no such function is named (RoFormer, Llama4,
  gpt-oss), probed on the model: the pairing whose twin keeps the function
  (:mod:`gaugekit.audit.layout_probe`); the gauge twin is drawn from the residual gauge
  ``SO(2)^{r/2} × O(d − r)`` that commutes with the rotary map (derivation in
  :mod:`gaugekit.audit.rotary`).

The fused layouts are read from the attention class (its name or a base class's), since the
row order is a property of its ``forward``. Anything else with a fused projection (a
``qkv_proj``, ``Wqkv``, ``query_key_value`` or ``c_attn`` of another class, GPTBigCode's
cross-attention) is refused by name with the reason: its row layout is not known, so the views
cannot be taken.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch import Tensor, nn

from gaugekit.audit.qk_norm import QKNorms, find_qk_norms
from gaugekit.audit.rotary import RotaryLayout, detect_rotary_layout, uses_rotary

__all__ = ["QKSite", "SiteSpec", "find_qk_sites", "resolve_sites"]

#: What names one attention site, an ``nn.MultiheadAttention`` (module or its name) or a
#: ``(query, key)`` pair of ``nn.Linear`` projections or of 2-D weight parameters (objects or
#: names). A resolved :class:`QKSite` is accepted wherever a site is (validated against the model).
SiteSpec = (
    str | nn.MultiheadAttention
    | tuple[str | nn.Linear | nn.Parameter, str | nn.Linear | nn.Parameter]
)


@dataclass(frozen=True)
class QKSite:
    """One attention site: where its query and key rows live, and its head layout.

    Attributes:
        label: display name (the MHA's module name, or ``"q_name|k_name"``).
        kind: ``"mha_packed"`` (``in_proj_weight``: q rows, then k, then v),
            ``"mha_separate"`` (``q_proj_weight``/``k_proj_weight``), ``"linear"`` (two
            ``nn.Linear``), ``"param"`` (two 2-D weight parameters in Linear layout),
            ``"conv1d"`` (GPT-2's fused ``c_attn``), ``"conv1d_cross"`` (``q_attn`` and the
            fused key/value ``c_attn``), ``"fused_heads"`` (GPT-NeoX's per-head
            ``query_key_value``), ``"packed_rows"`` (``[q; k; v]`` rows of one ``nn.Linear``:
            Phi-3, MPT, multi-query Falcon and GPTBigCode) or ``"grouped_rows"`` (Falcon's
            rows grouped by key-value group); see the module doc.
        modules: the module (or parameter) names, ``(mha,)``, ``(q, k)``, ``(c_attn,)``,
            ``(q_attn, c_attn)`` or ``(fused,)`` (``""`` is the model itself).
        num_heads: number of (query) heads ``H``.
        d_head: rows per head.
        q_bias, k_bias: whether the query/key projection has a bias.
        bias_k: whether an MHA carries the learned extra key ``bias_k`` (``add_bias_kv``).
        num_kv_heads: key heads ``G`` under grouped-query attention (``H`` a multiple of it);
            ``None``: one key head per query head.
        rotary: the rotary layout when the site applies a rotary embedding (its gauge twin is
            drawn from the commuting subgroup); ``None``: no rotary embedding.
        candidates: the sites this one may be, still to be told apart by probing the model
            (a rotary embedding whose rotate function has no known name, a fused q/k/v
            projection of unknown row order); :func:`find_qk_sites` settles them
            (:mod:`gaugekit.audit.layout_probe`), and the sites it returns have none.
        norms: the site's qk-norm pair with a gain (Qwen3, OLMo2, Gemma3); its gauge is then
            the signed permutations, the gains permuted alike (:mod:`gaugekit.audit.qk_norm`).
    """

    label: str
    kind: str
    modules: tuple[str, ...]
    num_heads: int
    d_head: int
    q_bias: bool
    k_bias: bool
    bias_k: bool = False
    num_kv_heads: int | None = None
    rotary: RotaryLayout | None = None
    candidates: tuple[QKSite, ...] = ()
    norms: QKNorms | None = None

    def with_rotary(self, layouts: Sequence[RotaryLayout]) -> QKSite:
        """This site with the rotary layout found (:func:`detect_rotary_layout`), or with one
        candidate per layout when there are several (none: the site as it is)."""
        sites = [replace(self, rotary=layout) for layout in layouts]
        return one_of(sites) if sites else self

    @property
    def kv_heads(self) -> int:
        """``G``: the key heads, one gauge rotation each (``H`` without grouped-query)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def group_size(self) -> int:
        """``H / G``: query heads per key head."""
        return self.num_heads // self.kv_heads


@dataclass
class _QK:
    """Views of one site's query/key tensors in one model: a weight in Linear layout
    ``(heads·d_head, c)``, head-major ``(heads, d_head, c)`` or, for the query heads of
    grouped rows, ``(G, H/G, d_head, c)``; a bias ``(heads·d_head,)``, ``(heads, d_head, 1)``
    or ``(G, H/G, d_head, 1)``; the query side has ``H`` heads, the key side ``G``."""

    wq: Tensor
    wk: Tensor
    bq: Tensor | None
    bk: Tensor | None
    bias_k: Tensor | None
    gq: Tensor | None = None
    gk: Tensor | None = None

    def tensors(self) -> list[Tensor]:
        return [t for t in (self.wq, self.wk, self.bq, self.bk, self.bias_k, self.gq, self.gk)
                if t is not None]


def _get_module(model: nn.Module, name: str, argname: str) -> nn.Module:
    modules = dict(model.named_modules())
    if name not in modules:
        known = [n for n in modules if n][:12]
        raise ValueError(
            f"Invalid {argname}: {name!r}; expected the name of a submodule of the model "
            f"(some known names: {known})"
        )
    return modules[name]


def _name_of(model: nn.Module, obj: str | nn.Module, argname: str) -> str:
    if isinstance(obj, str):
        _get_module(model, obj, argname)
        return obj
    if isinstance(obj, nn.Module):
        name = {id(m): n for n, m in model.named_modules()}.get(id(obj))
        if name is None:
            raise ValueError(
                f"Invalid {argname}: {type(obj).__name__} object; expected a submodule of the "
                f"model (or its name)"
            )
        return name
    raise ValueError(
        f"Invalid {argname}: {obj!r}; expected a module name (str) or an nn.Module"
    )


def _check_int_heads(num_heads: Any, argname: str = "num_heads") -> int:
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"Invalid {argname}: {num_heads!r}; expected an integer >= 1")
    return num_heads


def _mha_site(model: nn.Module, name: str, num_heads: int | None) -> QKSite:
    mha = _get_module(model, name, "sites")
    if not isinstance(mha, nn.MultiheadAttention):
        raise ValueError(
            f"Invalid sites: {name!r} is a {type(mha).__name__}; expected an "
            f"nn.MultiheadAttention (or a (q_name, k_name) pair of nn.Linear projections)"
        )
    if num_heads is not None and _check_int_heads(num_heads) != mha.num_heads:
        raise ValueError(
            f"Invalid num_heads: {num_heads!r}; expected {mha.num_heads}, the head count of "
            f"nn.MultiheadAttention {name!r}"
        )
    packed = mha._qkv_same_embed_dim
    has_bias = mha.in_proj_bias is not None
    return QKSite(
        label=name or "<model>", kind="mha_packed" if packed else "mha_separate",
        modules=(name,), num_heads=mha.num_heads, d_head=mha.head_dim,
        q_bias=has_bias, k_bias=has_bias, bias_k=mha.bias_k is not None,
    )


def _projection(model: nn.Module, obj: Any) -> tuple[str, str, Tensor, Tensor | None]:
    """Resolve one side of a pair: ``(kind, name, weight, bias)`` for an ``nn.Linear`` (module
    or name) or a 2-D weight parameter in Linear layout (parameter or its name)."""
    if isinstance(obj, nn.Parameter):
        names = {id(p): n for n, p in model.named_parameters()}
        if id(obj) not in names:
            raise ValueError(
                "Invalid sites: a Parameter object; expected a parameter of the model (or its "
                "name)"
            )
        obj = names[id(obj)]
    if isinstance(obj, str):
        modules = dict(model.named_modules())
        params = dict(model.named_parameters())
        if obj not in modules and obj in params:
            W = params[obj]
            if W.ndim != 2:
                raise ValueError(
                    f"Invalid sites: parameter {obj!r} has shape {tuple(W.shape)}; expected a "
                    f"2-D query or key weight (out_features, in_features)"
                )
            return "param", obj, W, None
        if obj not in modules:
            known = [n for n in modules if n][:12]
            raise ValueError(
                f"Invalid sites: {obj!r}; expected the name of a submodule (nn.Linear) or a 2-D "
                f"weight parameter of the model (some known module names: {known})"
            )
    name = _name_of(model, obj, "sites")
    mod = _get_module(model, name, "sites")
    if not isinstance(mod, nn.Linear):
        raise ValueError(
            f"Invalid sites: {name!r} is a {type(mod).__name__}; expected an nn.Linear query or "
            f"key projection (or a 2-D weight parameter)"
        )
    return "linear", name, mod.weight, mod.bias


def _linear_site(
    model: nn.Module, pair: tuple[Any, Any], num_heads: int | None
) -> QKSite:
    q_kind, q_name, wq, bq = _projection(model, pair[0])
    k_kind, k_name, wk, bk = _projection(model, pair[1])
    parent = _common_parent(model, q_name, k_name) if q_kind == k_kind == "linear" else None
    if num_heads is None and parent is not None and _is_transformers_attention(parent[1]):
        num_heads = _declared_heads(parent[1], parent[0], wq.shape[0])[0]
    if num_heads is None:
        raise ValueError(
            "Invalid num_heads: None; expected an integer >= 1 (required for (q, k) pairs of "
            "nn.Linear projections or weight parameters outside a transformers attention module)"
        )
    num_heads = _check_int_heads(num_heads)
    if q_kind != k_kind:
        raise ValueError(
            f"Invalid sites: ({q_name!r}, {k_name!r}); expected two nn.Linear or two weight "
            f"parameters, not one of each"
        )
    if wq is wk:
        raise ValueError(
            f"Invalid sites: ({q_name!r}, {k_name!r}); expected two different projections"
        )
    if wq.shape[0] % num_heads != 0:
        raise ValueError(
            f"Invalid num_heads: {num_heads!r}; expected a divisor of the projection width "
            f"{wq.shape[0]} of {q_name!r}"
        )
    d_head = wq.shape[0] // num_heads
    kv_heads = _kv_heads(f"({q_name!r}, {k_name!r})", num_heads, d_head, wq.shape[0],
                         wk.shape[0])
    rotary: tuple[RotaryLayout, ...] = ()
    if parent is not None and _is_transformers_attention(parent[1]) and uses_rotary(parent[1]):
        rotary = detect_rotary_layout(model, parent[1], d_head, parent[0])
    return QKSite(
        label=f"{q_name}|{k_name}", kind=q_kind, modules=(q_name, k_name),
        num_heads=num_heads, d_head=d_head,
        q_bias=bq is not None, k_bias=bk is not None,
        num_kv_heads=None if kv_heads == num_heads else kv_heads,
    ).with_rotary(rotary)


def one_of(sites: Sequence[QKSite]) -> QKSite:
    """One site standing for ``sites`` (its first, with every one as a candidate), or the
    only one; the candidates' own candidates are flattened in."""
    flat = [c for s in sites for c in (s.candidates or (s,))]
    if len(flat) == 1:
        return flat[0]
    return replace(flat[0], candidates=tuple(flat))


def _kv_heads(where: str, num_heads: int, d_head: int, q_width: int, k_width: int) -> int:
    """``G = k_width / d_head`` key heads: ``H`` (equal widths) or a divisor of ``H``
    (grouped-query attention)."""
    if k_width == q_width:
        return num_heads
    if k_width % d_head or num_heads % (k_width // d_head) or k_width > q_width:
        raise ValueError(
            f"Invalid sites: {where} have out_features {q_width} and {k_width}; expected equal "
            f"widths, or grouped-query attention: a key width G·d_head with G dividing the "
            f"{num_heads} query heads (d_head = {d_head})"
        )
    return k_width // d_head


# --------------------------------------------------------------------------------------------
# attention modules of Hugging Face transformers (recognised without importing transformers)
# --------------------------------------------------------------------------------------------

#: pairs of child names of a module with separate query and key ``nn.Linear`` projections
_PAIR_NAMES = (("query", "key"), ("q_proj", "k_proj"), ("q_lin", "k_lin"), ("q", "k"),
               ("query_proj", "key_proj"))
#: fused q/k/v children whose row layout the audit does not know (refused when found)
_FUSED_NAMES = ("qkv_proj", "Wqkv", "qkv", "query_key_value", "c_attn", "in_proj")
#: classes whose fused ``query_key_value`` rows are ``[q_h | k_h | v_h]`` per head
_PER_HEAD_FUSED = ("GPTNeoXAttention", "GPTNeoXJapaneseAttention", "BloomAttention")
_HEAD_COUNT_ATTRS = ("num_heads", "num_attention_heads", "n_head", "n_heads")
_HEAD_DIM_ATTRS = ("head_dim", "attention_head_size", "head_size", "key_value_proj_dim")


def _int_attr(obj: Any, names: Sequence[str]) -> int | None:
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _is_transformers_attention(mod: nn.Module) -> bool:
    """A module of ``transformers`` (or of remote code loaded by it), or one carrying a
    ``config`` with a head count: the head layout is declared, not guessed."""
    if type(mod).__module__.startswith("transformers"):
        return True
    return _int_attr(getattr(mod, "config", None), ("num_attention_heads", "n_head")) is not None


def _declared_heads(mod: nn.Module, name: str, q_width: int) -> tuple[int, int]:
    """``(H, d_head)`` from the module's attributes (``num_heads``, ``head_dim``, …), then its
    config (``num_attention_heads``, ``n_head``, ``head_dim``), checked against the query
    width ``H·d_head``."""
    heads = _int_attr(mod, _HEAD_COUNT_ATTRS)
    d_head = _int_attr(mod, _HEAD_DIM_ATTRS)
    config = getattr(mod, "config", None)
    if heads is None:
        heads = _int_attr(config, ("num_attention_heads", "n_head", "num_heads"))
    if d_head is None and heads is None:
        d_head = _int_attr(config, ("head_dim",))
    if heads is None and d_head is not None and q_width % d_head == 0:
        heads = q_width // d_head
    if d_head is None and heads is not None and q_width % heads == 0:
        d_head = q_width // heads
    if heads is None or d_head is None or heads * d_head != q_width:
        raise ValueError(
            f"Invalid model: {name!r} ({type(mod).__name__}) declares heads={heads} and "
            f"head_dim={d_head}; expected their product to be the query width {q_width} (the "
            f"audit reads num_heads / num_attention_heads / n_head and head_dim / "
            f"attention_head_size from the module or its config); pass explicit sites and "
            f"num_heads"
        )
    return heads, d_head


def _common_parent(model: nn.Module, *names: str) -> tuple[str, nn.Module] | None:
    parents = {n.rsplit(".", 1)[0] if "." in n else "" for n in names}
    if len(parents) != 1 or any(n == "" for n in names):
        return None
    parent = parents.pop()
    return parent, dict(model.named_modules())[parent]


def _is_conv1d(mod: Any) -> bool:
    """``transformers``' ``Conv1D`` (GPT-2): ``y = x W + b``, ``W`` of shape ``(nx, nf)``."""
    return (isinstance(mod, nn.Module) and type(mod).__name__ == "Conv1D"
            and isinstance(getattr(mod, "weight", None), Tensor) and mod.weight.ndim == 2
            and getattr(mod, "nf", None) == mod.weight.shape[1])


def _transformers_site(model: nn.Module, name: str, mod: nn.Module) -> QKSite | None:
    """The site of one ``transformers`` attention module, ``None`` when ``mod`` is not one.

    Raises:
        ValueError: a fused projection of unknown layout, or heads that do not fit.
    """
    if not _is_transformers_attention(mod):
        return None
    children = dict(mod.named_children())
    prefix = f"{name}." if name else ""
    for q_child, k_child in _PAIR_NAMES:
        if (isinstance(children.get(q_child), nn.Linear)
                and isinstance(children.get(k_child), nn.Linear)):
            q_name, k_name = prefix + q_child, prefix + k_child
            heads = _declared_heads(mod, name, children[q_child].out_features)[0]
            return _linear_site(model, (q_name, k_name), heads)
    c_attn = children.get("c_attn")
    if _is_conv1d(c_attn):
        heads, d_head = _declared_heads(mod, name, _int_attr(mod, ("embed_dim", "split_size"))
                                        or c_attn.weight.shape[0])
        E = heads * d_head
        q_attn = children.get("q_attn")
        cross = bool(getattr(mod, "is_cross_attention", False)) and _is_conv1d(q_attn)
        expected = 2 * E if cross else 3 * E
        if c_attn.weight.shape[1] != expected or (cross and q_attn.weight.shape[1] != E):
            raise ValueError(
                f"Invalid model: {prefix}c_attn is a Conv1D of shape "
                f"{tuple(c_attn.weight.shape)}; expected (in, {expected}) = columns "
                f"{'[k | v]' if cross else '[q | k | v]'} of {heads} heads of width {d_head}"
            )
        bias = c_attn.bias is not None
        return QKSite(
            label=name or "<model>", kind="conv1d_cross" if cross else "conv1d",
            modules=(prefix + "q_attn", prefix + "c_attn") if cross else (prefix + "c_attn",),
            num_heads=heads, d_head=d_head,
            q_bias=(q_attn.bias is not None) if cross else bias, k_bias=bias,
        )
    fused = children.get("query_key_value")
    if isinstance(fused, nn.Linear) and type(mod).__name__ in _PER_HEAD_FUSED:
        if fused.out_features % 3:
            raise ValueError(
                f"Invalid model: {prefix}query_key_value has {fused.out_features} rows; "
                f"expected 3·H·d_head ([q_h | k_h | v_h] per head)"
            )
        heads, d_head = _declared_heads(mod, name, fused.out_features // 3)
        rotary = detect_rotary_layout(model, mod, d_head, name) if uses_rotary(mod) else ()
        return QKSite(
            label=name or "<model>", kind="fused_heads", modules=(prefix + "query_key_value",),
            num_heads=heads, d_head=d_head, q_bias=fused.bias is not None,
            k_bias=fused.bias is not None,
        ).with_rotary(rotary)
    site = _known_fused_site(model, name, mod, children)
    if site is not None:
        return site
    for child in _FUSED_NAMES:
        if child in children and any(True for _ in children[child].parameters()):
            site = _fused_candidates(model, name, mod, child)
            if site is not None:
                return site
            raise ValueError(
                f"Invalid model: {prefix}{child} ({type(children[child]).__name__}) in "
                f"{type(mod).__name__} is a fused q/k/v projection whose row layout the audit "
                f"does not know, so it cannot take the query and key rows of a head as views; "
                f"expected separate projections, GPT-2's Conv1D c_attn, or the fused layouts of "
                f"GPT-NeoX, Bloom, Phi-3, MPT, Falcon and GPTBigCode (pass resolved QKSite "
                f"objects, or sites=[...] of projections)"
            )
    return None


#: The row orders tried on a fused q/k/v projection of a class the audit does not know:
#: ``[q; k; v]`` blocks (Phi-3's, ModernBERT's) and ``[q_h; k_h; v_h]`` per head (GPT-NeoX's).
_FUSED_CANDIDATE_KINDS = ("packed_rows", "fused_heads")


def _fused_candidates(model: nn.Module, name: str, mod: nn.Module, child: str) -> QKSite | None:
    """The row orders of :data:`_FUSED_CANDIDATE_KINDS` that fit an ``nn.Linear`` fused
    projection of an unknown class, as one site with candidates for the probe to tell apart;
    ``None`` when none fits (or the heads are not declared)."""
    fused, config = getattr(mod, child), getattr(mod, "config", None)
    heads = _int_attr(mod, _HEAD_COUNT_ATTRS) or _int_attr(
        config, ("num_attention_heads", "n_head", "num_heads"))
    d_head = _int_attr(mod, _HEAD_DIM_ATTRS) or _int_attr(config, ("head_dim",))
    if not isinstance(fused, nn.Linear) or heads is None:
        return None
    kv = (_int_attr(mod, ("num_key_value_heads",))
          or _int_attr(config, ("num_key_value_heads",)) or heads)
    d_head = d_head or fused.out_features // (heads + 2 * kv)
    sites = []
    for kind in _FUSED_CANDIDATE_KINDS:
        try:
            sites.append(_fused_rows_site(model, name, mod, child, kind, heads, d_head,
                                          heads if kind == "fused_heads" else kv))
        except ValueError:  # the rows do not fit this order
            continue
    return one_of(sites) if sites else None


def _is_class(mod: nn.Module, name: str) -> bool:
    """Whether ``mod``'s class or one of its bases is called ``name``."""
    return any(c.__name__ == name for c in type(mod).__mro__)


def _fused_rows_site(
    model: nn.Module, name: str, mod: nn.Module, child: str, kind: str, heads: int,
    d_head: int, kv_heads: int, rotary: bool = True,
) -> QKSite:
    """The site of a fused ``nn.Linear`` ``child`` of ``mod`` whose rows hold ``heads`` query,
    ``kv_heads`` key and ``kv_heads`` value heads of width ``d_head`` (``kind`` says in which
    order), checked against its row count."""
    prefix = f"{name}." if name else ""
    fused = getattr(mod, child)
    per_head = kind == "fused_heads"
    rows = (3 * heads if per_head else heads + 2 * kv_heads) * d_head
    if not isinstance(fused, nn.Linear) or fused.out_features != rows:
        shape = tuple(fused.weight.shape) if isinstance(fused, nn.Linear) else type(fused).__name__
        raise ValueError(
            f"Invalid model: {prefix}{child} of {type(mod).__name__} is {shape}; expected an "
            f"nn.Linear with {rows} rows: {heads} query heads, {kv_heads} key and {kv_heads} value "
            f"heads of width {d_head}"
        )
    layouts = (detect_rotary_layout(model, mod, d_head, name)
               if rotary and uses_rotary(mod) else ())
    return QKSite(
        label=name or "<model>", kind=kind, modules=(prefix + child,), num_heads=heads,
        d_head=d_head, q_bias=fused.bias is not None, k_bias=fused.bias is not None,
        num_kv_heads=None if kv_heads == heads else kv_heads,
    ).with_rotary(layouts)


def _fused_layout(mod: nn.Module, heads: int, d_head: int) -> tuple[str, str, int] | str | None:
    """``(child, kind, key heads)`` of an attention class whose fused q/k/v layout is known
    (module doc), the reason it is refused, or ``None`` for any other class."""
    config = getattr(mod, "config", None)
    if _is_class(mod, "Phi3Attention"):
        kv = (_int_attr(mod, ("num_key_value_heads",))
              or _int_attr(config, ("num_key_value_heads",)) or heads)
        return "qkv_proj", "packed_rows", kv
    if _is_class(mod, "MptAttention"):
        if getattr(mod, "clip_qkv", None):
            return (f"clamps q, k and v to ±clip_qkv = {mod.clip_qkv}; a clamp acts on each "
                    f"coordinate, so it does not commute with a rotation of a head and the gauge "
                    f"is not a symmetry; expected clip_qkv=None")
        return "Wqkv", "packed_rows", heads
    if _is_class(mod, "FalconAttention"):
        if getattr(mod, "new_decoder_architecture", False):
            return "query_key_value", "grouped_rows", _int_attr(mod, ("num_kv_heads",)) or heads
        if getattr(mod, "multi_query", False):
            return "query_key_value", "packed_rows", 1
        return "query_key_value", "fused_heads", heads
    if _is_class(mod, "GPTBigCodeAttention"):
        if getattr(mod, "is_cross_attention", False):
            return (f"is a cross-attention whose c_attn splits keys and values as one head of "
                    f"width {d_head}, not per head; expected self-attention (or explicit sites)")
        multi_query = getattr(mod, "multi_query", False)
        return ("c_attn", "packed_rows", 1) if multi_query else ("c_attn", "fused_heads", heads)
    return None


def _known_fused_site(
    model: nn.Module, name: str, mod: nn.Module, children: dict[str, nn.Module]
) -> QKSite | None:
    """The site of an attention class whose fused q/k/v layout is known (:func:`_fused_layout`:
    Phi-3, MPT, Falcon and GPTBigCode); ``None`` for any other class. A rotary embedding is
    read from the module unless its config says ALiBi (Falcon's ``alibi``).

    Raises:
        ValueError: MPT's ``clip_qkv`` (a clamp breaks the gauge), GPTBigCode's
            cross-attention (its key/value split is not per head), rows that do not fit.
    """
    config = getattr(mod, "config", None)
    heads = _int_attr(mod, _HEAD_COUNT_ATTRS) or _int_attr(config, ("num_attention_heads",))
    d_head = _int_attr(mod, _HEAD_DIM_ATTRS)
    layout = None if heads is None or d_head is None else _fused_layout(mod, heads, d_head)
    if isinstance(layout, str):
        raise ValueError(f"Invalid model: {name!r} ({type(mod).__name__}) {layout}")
    if layout is None or layout[0] not in children:
        return None
    child, kind, kv = layout
    rotary = not getattr(config, "alibi", False)
    return _fused_rows_site(model, name, mod, child, kind, heads, d_head, kv, rotary)


def _validate_site(model: nn.Module, site: QKSite) -> QKSite:
    """A :class:`QKSite` given by the caller: its tensors exist and have its head layout."""
    try:
        qk = qk_tensors(model, site)
    except (KeyError, IndexError, AttributeError, RuntimeError) as err:
        raise ValueError(
            f"Invalid sites: QKSite {site.label!r} ({site.kind}, modules {site.modules}) does "
            f"not fit the model ({type(err).__name__}: {err}); expected a site of this model"
        ) from err
    if site.num_heads % site.kv_heads:
        raise ValueError(
            f"Invalid sites: QKSite {site.label!r} has {site.num_heads} heads and "
            f"{site.kv_heads} key heads; expected the key heads to divide the query heads"
        )
    for side, heads, w in (("query", site.num_heads, qk.wq), ("key", site.kv_heads, qk.wk)):
        rows = w.shape[:-1].numel()  # (rows, c), (heads, d, c) or (G, H/G, d, c)
        if rows != heads * site.d_head:
            raise ValueError(
                f"Invalid sites: QKSite {site.label!r}: the {side} weight has {rows} rows; "
                f"expected {heads} heads × d_head {site.d_head}"
            )
    if site.rotary is not None and site.rotary.d_head != site.d_head:
        raise ValueError(
            f"Invalid sites: QKSite {site.label!r}: rotary layout of width "
            f"{site.rotary.d_head}; expected d_head = {site.d_head}"
        )
    return site


_QK_TOKEN = r"(?:q|k|qk|query|key|queries|keys)"
_NORM_TOKEN = r"(?:norm|ln|layernorm|layer_norm|rmsnorm|rms_norm|scale|gain)"
_QK_NORM_NAME = re.compile(
    rf"(?:{_QK_TOKEN}_?{_NORM_TOKEN}|{_NORM_TOKEN}_?{_QK_TOKEN})\d*"
)
_ROTARY_NAME = re.compile(r"[Rr]otary|ROTARY|RoPE|ROPE|Rope(?=[A-Z_\d]|$)|(?:^|_)rope(?:_|\d|$)")


def _check_structure(model: nn.Module, site: QKSite) -> None:
    """Refuse qk-norms with a gain or mean-centring, and rotary modules when the site carries
    no rotary layout (see module doc)."""
    # a model positioned by ALiBi (Falcon with alibi=True) may hold a rotary module it never
    # calls; the probe check still compares the twins' outputs
    alibi = bool(getattr(getattr(model, "config", None), "alibi", False))
    for mod_name, mod in model.named_modules() if site.rotary is None and not alibi else ():
        if _ROTARY_NAME.search(type(mod).__name__) or _ROTARY_NAME.search(
            mod_name.rsplit(".", 1)[-1]
        ):
            raise ValueError(
                f"Invalid model: {mod_name!r} ({type(mod).__name__}) looks like a rotary "
                f"position embedding; it breaks the per-head gauge (only A_h commuting with "
                f"every position's rotation keeps the logits), so the twins would not start "
                f"as the same function; expected a model without rotary embeddings, or a site "
                f"that says its layout: QKSite(..., rotary=RotaryLayout.half_split(d_head)) "
                f"or .interleaved(d_head) (found by itself in transformers models; pass "
                f"check_structure=False to override; the probe check still runs)"
            )
    if site.kind not in ("linear", "param", "conv1d", "conv1d_cross", "fused_heads",
                         "packed_rows", "grouped_rows"):
        return
    parents = {n.rsplit(".", 1)[0] if "." in n else "" for n in site.modules}
    modules = dict(model.named_modules())
    for parent in parents:
        for child_name, child in modules[parent].named_children():
            if not _QK_NORM_NAME.fullmatch(child_name.lower()):
                continue
            where = f"{parent}.{child_name}" if parent else child_name
            if isinstance(child, nn.Identity) or (
                    site.norms is not None and where in (site.norms.q, site.norms.k)):
                continue
            if isinstance(child, nn.LayerNorm | nn.GroupNorm):
                raise ValueError(
                    f"Invalid model: {where!r} is a {type(child).__name__} on q/k (qk-norm); "
                    f"mean-centring (and a per-coordinate gain) does not commute with an "
                    f"orthogonal A_h, so the gauge is not a symmetry; expected no qk-norm or a "
                    f"gain-free RMS norm"
                )
            if isinstance(child, nn.RMSNorm):
                if child.weight is not None:
                    raise ValueError(
                        f"Invalid model: {where!r} is an nn.RMSNorm with a learnable "
                        f"per-coordinate gain on q/k; g ⊙ (A q) != A (g ⊙ q), so the gauge is "
                        f"not a symmetry; expected elementwise_affine=False (a gain-free RMS "
                        f"norm commutes with orthogonal A)"
                    )
                continue
            if any(True for _ in child.parameters()):
                raise ValueError(
                    f"Invalid model: {where!r} ({type(child).__name__}) looks like a qk-norm "
                    f"with learnable parameters; a per-coordinate gain breaks the gauge; "
                    f"expected no qk-norm or a gain-free RMS norm (pass check_structure=False "
                    f"to override; the probe check still runs)"
                )
            warnings.warn(
                f"{where!r} ({type(child).__name__}) looks like a parameter-free qk-norm; a "
                f"gain-free RMS norm keeps the gauge, mean-centring does not; the probe check "
                f"decides",
                stacklevel=3,
            )


def find_qk_sites(
    model: nn.Module,
    sites: Sequence[SiteSpec | QKSite] | None = None,
    *,
    num_heads: int | Sequence[int | None] | None = None,
    check_structure: bool = True,
) -> list[QKSite]:
    """Resolve and validate the attention sites of ``model``.

    Args:
        model: the model.
        sites: ``None`` (every ``nn.MultiheadAttention`` in ``model``, the model itself
            included, and every attention module of a ``transformers`` model: separate
            projections, GPT-2's fused ``Conv1D``, the fused rows of GPT-NeoX, Bloom, Phi-3,
            MPT, Falcon and GPTBigCode, grouped-query and rotary attention; module doc), or a
            list whose items are an
            ``nn.MultiheadAttention`` (module or name), a ``(query, key)`` pair of
            ``nn.Linear`` projections (modules or names such as
            ``("layers.0.attn.q_proj", "layers.0.attn.k_proj")``) or of 2-D weight parameters
            in Linear layout (parameters or names such as ``("layers_0_q", "layers_0_k")``), or
            a resolved :class:`QKSite` (e.g. with a ``rotary`` layout). A single
            ``(query, key)`` tuple is one site. A pair inside a ``transformers`` attention
            module may have a key width ``G·d_head`` (grouped-query) and gets the module's
            rotary layout.
        num_heads: head count, one for all sites or one per site. Required for ``nn.Linear``
            pairs outside a ``transformers`` attention module (inside one it is read from the
            module); for an MHA it is read from the module and, when given, must agree.
        check_structure: refuse qk-norms with a gain or mean-centring, and rotary modules for
            sites without a rotary layout.

    Raises:
        ValueError: naming the argument, for an unknown name, a module that is not a
            projection, a head count that does not fit, or a structure that breaks the gauge.
    """
    if sites is None:
        specs: list[Any] = []
        for n, m in model.named_modules():
            if isinstance(m, nn.MultiheadAttention):
                specs.append(n)
            else:
                found = _transformers_site(model, n, m)
                if found is not None:
                    specs.append(found)
        if not specs:
            raise ValueError(_no_sites_found(model))
    elif isinstance(sites, str | nn.Module | QKSite) or (
        isinstance(sites, tuple) and len(sites) == 2
        and all(isinstance(s, str | nn.Linear | nn.Parameter) for s in sites)
        and not all(isinstance(s, str) and _is_mha_name(model, s) for s in sites)
    ):
        specs = [sites]
    else:
        specs = list(sites)
    if not specs:
        raise ValueError("Invalid sites: []; expected at least one attention site")
    if not isinstance(num_heads, Sequence) or isinstance(num_heads, str):
        heads: list[Any] = [num_heads] * len(specs)
    else:
        heads = list(num_heads)
        if len(heads) != len(specs):
            raise ValueError(
                f"Invalid num_heads: {num_heads!r}; expected one integer or one per site "
                f"({len(specs)} sites)"
            )
    out = []
    for spec, h in zip(specs, heads, strict=True):
        if isinstance(spec, QKSite):
            if h is not None and _check_int_heads(h) != spec.num_heads:
                raise ValueError(
                    f"Invalid num_heads: {h!r}; expected {spec.num_heads}, the head count of "
                    f"site {spec.label!r}"
                )
            site = _validate_site(model, spec)
        elif isinstance(spec, tuple | list):
            if len(spec) != 2:
                raise ValueError(
                    f"Invalid sites: {spec!r}; expected a (query, key) pair of nn.Linear"
                )
            site = _linear_site(model, (spec[0], spec[1]), h)
        elif isinstance(spec, str | nn.Module):
            site = _mha_site(model, _name_of(model, spec, "sites"), h)
        else:
            raise ValueError(
                f"Invalid sites: {spec!r}; expected an nn.MultiheadAttention (or its name) or a "
                f"(query, key) pair of nn.Linear"
            )
        site = _with_qk_norms(model, site)
        if check_structure:
            _check_structure(model, site)
        out.append(site)
    labels = [s.label for s in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"Invalid sites: {labels!r}; expected each site once")
    if any(s.candidates for s in out):
        from gaugekit.audit.layout_probe import settle_layouts  # it runs the model's twins

        out = settle_layouts(model, out)
    return out


#: Children of DeepSeek's multi-head latent attention: keys come out of a shared low-rank latent.
_LATENT_NAMES = ("kv_a_proj_with_mqa", "kv_b_proj")


def _no_sites_found(model: nn.Module) -> str:
    """Why no site was found: the attention modules the model has and the audit cannot read
    (by name, with their projections), or that it has none."""
    unread = [(n, m) for n, m in model.named_modules()
              if "attention" in type(m).__name__.lower() and _is_transformers_attention(m)]
    if not unread:
        return ("Invalid sites: None; expected a list of sites, since the model has no "
                "nn.MultiheadAttention and no attention module of transformers (pass "
                "(q_name, k_name) pairs of nn.Linear projections)")
    name, mod = unread[0]
    children = [c for c, _ in mod.named_children()]
    why = ("latent attention (DeepSeek's MLA: keys come out of a shared low-rank latent "
           "through kv_b_proj, and one rotary key is shared by all heads), whose gauge the "
           "per-head sites do not cover" if any(c in children for c in _LATENT_NAMES)
           else "no query/key projections under a name the audit reads "
                f"({', '.join('/'.join(p) for p in _PAIR_NAMES)})")
    return (f"Invalid sites: None; the model's attention modules are of a kind the audit "
            f"cannot read: {name!r} ({type(mod).__name__}, with {', '.join(children)}) and "
            f"{len(unread) - 1} more: {why}; expected a list of sites (pass (q_name, k_name) "
            f"pairs of nn.Linear projections, or resolved QKSite objects)")


def _with_qk_norms(model: nn.Module, site: QKSite) -> QKSite:
    """``site`` (and its candidates) with the qk-norm pair with a gain of the module that
    holds its projections, when there is one (:func:`~gaugekit.audit.qk_norm.find_qk_norms`)."""
    if site.norms is not None or site.kind not in _NORMED_KINDS:
        return site
    parents = {n.rsplit(".", 1)[0] if "." in n else "" for n in site.modules}
    if len(parents) != 1:
        return site
    parent = parents.pop()
    norms = find_qk_norms(dict(model.named_modules())[parent], f"{parent}." if parent else "",
                          site.d_head, site.num_heads, site.kv_heads)
    if norms is None:
        return site
    return replace(site, norms=norms,
                   candidates=tuple(replace(c, norms=norms) for c in site.candidates))


#: Site kinds inside a module that may hold a qk-norm.
_NORMED_KINDS = ("linear", "fused_heads", "packed_rows", "grouped_rows")


def _is_mha_name(model: nn.Module, name: str) -> bool:
    return isinstance(dict(model.named_modules()).get(name), nn.MultiheadAttention)


def qk_tensors(model: nn.Module, site: QKSite) -> _QK:
    """The query/key tensors of ``site`` in ``model`` (views: writing them writes the model),
    and the gains of its qk-norms when it has them (:attr:`QKSite.norms`); see
    :func:`_qk_weights` for the layouts."""
    qk = _qk_weights(model, site)
    if site.norms is not None:
        modules = dict(model.named_modules())
        qk.gq, qk.gk = modules[site.norms.q].weight, modules[site.norms.k].weight
    return qk


def _qk_weights(model: nn.Module, site: QKSite) -> _QK:
    """The query/key tensors of ``site`` in ``model`` (views: writing them writes the model).

    GPT-2's ``Conv1D`` holds ``W`` of shape ``(in, 3E)`` (``y = x W + b``): the query weight in
    Linear layout is the transposed view ``W[:, :E]ᵀ`` and the key ``W[:, E:2E]ᵀ``. GPT-NeoX's
    ``query_key_value`` rows are ``[q_h | k_h | v_h]`` per head: head-major views
    ``W.unflatten(0, (H, 3, d))[:, 0]`` (query) and ``[:, 1]`` (key). Packed rows
    ``[q; k; v]``: the slices ``W[:H·d]`` and ``W[H·d : (H + G)·d]``. Grouped rows (Falcon):
    ``W.unflatten(0, (G, H/G + 2, d))[:, :H/G]`` (query, 4-D) and ``[:, H/G]`` (key).
    """
    modules = dict(model.named_modules())
    E = site.num_heads * site.d_head
    if site.kind in ("conv1d", "conv1d_cross"):
        fused = modules[site.modules[-1]]
        W, b = fused.weight, fused.bias
        if site.kind == "conv1d":
            wq, wk = W[:, :E].mT, W[:, E : 2 * E].mT
            bq, bk = (None, None) if b is None else (b[:E], b[E : 2 * E])
            return _QK(wq, wk, bq, bk, None)
        q = modules[site.modules[0]]
        return _QK(q.weight.mT, W[:, :E].mT, q.bias, None if b is None else b[:E], None)
    if site.kind == "fused_heads":
        fused = modules[site.modules[0]]
        W = fused.weight.unflatten(0, (site.num_heads, 3, site.d_head))
        b = (None if fused.bias is None else
             fused.bias.unflatten(0, (site.num_heads, 3, site.d_head)).unsqueeze(-1))
        return _QK(W[:, 0], W[:, 1], None if b is None else b[:, 0],
                   None if b is None else b[:, 1], None)
    if site.kind == "packed_rows":
        fused = modules[site.modules[0]]
        W, b, K = fused.weight, fused.bias, E + site.kv_heads * site.d_head
        return _QK(W[:E], W[E:K], None if b is None else b[:E], None if b is None else b[E:K],
                   None)
    if site.kind == "grouped_rows":
        fused = modules[site.modules[0]]
        n = site.group_size
        shape = (site.kv_heads, n + 2, site.d_head)
        W = fused.weight.unflatten(0, shape)
        b = None if fused.bias is None else fused.bias.unflatten(0, shape).unsqueeze(-1)
        return _QK(W[:, :n], W[:, n], None if b is None else b[:, :n],
                   None if b is None else b[:, n], None)
    if site.kind == "linear":
        q, k = modules[site.modules[0]], modules[site.modules[1]]
        return _QK(q.weight, k.weight, q.bias, k.bias, None)
    if site.kind == "param":
        params = dict(model.named_parameters())
        return _QK(params[site.modules[0]], params[site.modules[1]], None, None, None)
    mha = modules[site.modules[0]]
    E = mha.embed_dim
    if site.kind == "mha_packed":
        wq, wk = mha.in_proj_weight[:E], mha.in_proj_weight[E : 2 * E]
    else:
        wq, wk = mha.q_proj_weight, mha.k_proj_weight
    b = mha.in_proj_bias
    bq, bk = (None, None) if b is None else (b[:E], b[E : 2 * E])
    bias_k = None if mha.bias_k is None else mha.bias_k.view(-1)
    return _QK(wq, wk, bq, bk, bias_k)


def resolve_sites(
    model: nn.Module,
    sites: Sequence[SiteSpec | QKSite] | None,
    num_heads: int | Sequence[int | None] | None,
    check_structure: bool,
) -> list[QKSite]:
    """Sites already resolved (:class:`QKSite`) as they are, anything else through
    :func:`find_qk_sites`."""
    if sites is not None and len(sites) > 0 and all(isinstance(s, QKSite) for s in sites):
        return list(sites)
    return find_qk_sites(model, sites, num_heads=num_heads, check_structure=check_structure)
