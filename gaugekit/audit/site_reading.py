"""Reading the attention sites off a model's modules: an ``nn.MultiheadAttention``, a pair of
query and key projections, and the attention modules of ``transformers`` (separate projections,
GPT-2's ``Conv1D``, the fused layouts it knows, and candidates for the ones it does not), with
their head counts, grouped-query layout and rotary embedding (module doc of
:mod:`gaugekit.audit.sites`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from gaugekit.audit.rotary import RotaryLayout, detect_rotary_layout, uses_rotary
from gaugekit.audit.site_layout import QKSite, _get_module, one_of

__all__: list[str] = []


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

