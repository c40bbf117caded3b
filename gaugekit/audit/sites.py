r"""Where the per-head gauge acts: the query/key sites of anyone's attention model.

A *site* is one attention layer: an ``nn.MultiheadAttention`` (packed ``in_proj_weight`` or
separate ``q_proj_weight``/``k_proj_weight``), a ``(query, key)`` pair of ``nn.Linear``
projections, or a pair of 2-D weight parameters in Linear layout. :func:`find_qk_sites` resolves
and validates them (head count, widths) and refuses the structures that break the gauge
(qk-norms with a gain or mean-centring, rotary modules; see :mod:`gaugekit.audit.heads`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

__all__ = ["QKSite", "SiteSpec", "find_qk_sites", "resolve_sites"]

#: What names one attention site, an ``nn.MultiheadAttention`` (module or its name) or a
#: ``(query, key)`` pair of ``nn.Linear`` projections or of 2-D weight parameters (objects or
#: names).
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
            ``nn.Linear``) or ``"param"`` (two 2-D weight parameters in Linear layout).
        modules: the module (or parameter) names, ``(mha,)`` or ``(q, k)`` (``""`` is the model
            itself).
        num_heads: number of heads ``H``.
        d_head: rows per head.
        q_bias, k_bias: whether the query/key projection has a bias.
        bias_k: whether an MHA carries the learned extra key ``bias_k`` (``add_bias_kv``).
    """

    label: str
    kind: str
    modules: tuple[str, ...]
    num_heads: int
    d_head: int
    q_bias: bool
    k_bias: bool
    bias_k: bool = False


@dataclass
class _QK:
    """Views of one site's query/key tensors in one model (rows of head ``h`` contiguous)."""

    wq: Tensor
    wk: Tensor
    bq: Tensor | None
    bk: Tensor | None
    bias_k: Tensor | None

    def tensors(self) -> list[Tensor]:
        return [t for t in (self.wq, self.wk, self.bq, self.bk, self.bias_k) if t is not None]


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
    if num_heads is None:
        raise ValueError(
            "Invalid num_heads: None; expected an integer >= 1 (required for (q, k) pairs of "
            "nn.Linear projections or weight parameters)"
        )
    num_heads = _check_int_heads(num_heads)
    q_kind, q_name, wq, bq = _projection(model, pair[0])
    k_kind, k_name, wk, bk = _projection(model, pair[1])
    if q_kind != k_kind:
        raise ValueError(
            f"Invalid sites: ({q_name!r}, {k_name!r}); expected two nn.Linear or two weight "
            f"parameters, not one of each"
        )
    if wq is wk:
        raise ValueError(
            f"Invalid sites: ({q_name!r}, {k_name!r}); expected two different projections"
        )
    if wq.shape[0] != wk.shape[0]:
        raise ValueError(
            f"Invalid sites: ({q_name!r}, {k_name!r}) have out_features {wq.shape[0]} and "
            f"{wk.shape[0]}; expected equal widths (grouped-query attention is not supported)"
        )
    if wq.shape[0] % num_heads != 0:
        raise ValueError(
            f"Invalid num_heads: {num_heads!r}; expected a divisor of the projection width "
            f"{wq.shape[0]} of {q_name!r}"
        )
    return QKSite(
        label=f"{q_name}|{k_name}", kind=q_kind, modules=(q_name, k_name),
        num_heads=num_heads, d_head=wq.shape[0] // num_heads,
        q_bias=bq is not None, k_bias=bk is not None,
    )


_QK_TOKEN = r"(?:q|k|qk|query|key|queries|keys)"
_NORM_TOKEN = r"(?:norm|ln|layernorm|layer_norm|rmsnorm|rms_norm|scale|gain)"
_QK_NORM_NAME = re.compile(
    rf"(?:{_QK_TOKEN}_?{_NORM_TOKEN}|{_NORM_TOKEN}_?{_QK_TOKEN})\d*"
)
_ROTARY_NAME = re.compile(r"[Rr]otary|ROTARY|RoPE|ROPE|Rope(?=[A-Z_\d]|$)|(?:^|_)rope(?:_|\d|$)")


def _check_structure(model: nn.Module, site: QKSite) -> None:
    """Refuse qk-norms with a gain or mean-centring, and rotary modules (see module doc)."""
    for mod_name, mod in model.named_modules():
        if _ROTARY_NAME.search(type(mod).__name__) or _ROTARY_NAME.search(
            mod_name.rsplit(".", 1)[-1]
        ):
            raise ValueError(
                f"Invalid model: {mod_name!r} ({type(mod).__name__}) looks like a rotary "
                f"position embedding; it breaks the per-head gauge (only A_h commuting with "
                f"every position's rotation keeps the logits), so the twins would not start "
                f"as the same function; expected a model without rotary embeddings "
                f"(pass check_structure=False to override; the probe check still runs)"
            )
    if site.kind not in ("linear", "param"):
        return
    parents = {n.rsplit(".", 1)[0] if "." in n else "" for n in site.modules}
    modules = dict(model.named_modules())
    for parent in parents:
        for child_name, child in modules[parent].named_children():
            if not _QK_NORM_NAME.fullmatch(child_name.lower()):
                continue
            where = f"{parent}.{child_name}" if parent else child_name
            if isinstance(child, nn.Identity):
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
    sites: Sequence[SiteSpec] | None = None,
    *,
    num_heads: int | Sequence[int | None] | None = None,
    check_structure: bool = True,
) -> list[QKSite]:
    """Resolve and validate the attention sites of ``model``.

    Args:
        model: the model.
        sites: ``None`` (every ``nn.MultiheadAttention`` in ``model``, the model itself
            included), or a list whose items are an ``nn.MultiheadAttention`` (module or name)
            or a ``(query, key)`` pair of ``nn.Linear`` projections (modules or names such as
            ``("layers.0.attn.q_proj", "layers.0.attn.k_proj")``) or of 2-D weight parameters
            in Linear layout (parameters or names such as ``("layers_0_q", "layers_0_k")``).
            A single ``(query, key)`` tuple is one site.
        num_heads: head count, one for all sites or one per site. Required for ``nn.Linear``
            pairs; for an MHA it is read from the module and, when given, must agree.
        check_structure: refuse qk-norms with a gain or mean-centring and rotary modules.

    Raises:
        ValueError: naming the argument, for an unknown name, a module that is not a
            projection, a head count that does not fit, or a structure that breaks the gauge.
    """
    if sites is None:
        found = [n for n, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)]
        if not found:
            raise ValueError(
                "Invalid sites: None; expected a list of sites, since the model has no "
                "nn.MultiheadAttention (pass (q_name, k_name) pairs of nn.Linear projections)"
            )
        specs: list[Any] = list(found)
    elif isinstance(sites, str | nn.Module) or (
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
        if isinstance(spec, tuple | list):
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
        if check_structure:
            _check_structure(model, site)
        out.append(site)
    labels = [s.label for s in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"Invalid sites: {labels!r}; expected each site once")
    return out


def _is_mha_name(model: nn.Module, name: str) -> bool:
    return isinstance(dict(model.named_modules()).get(name), nn.MultiheadAttention)


def qk_tensors(model: nn.Module, site: QKSite) -> _QK:
    """The query/key tensors of ``site`` in ``model`` (views: writing them writes the model)."""
    modules = dict(model.named_modules())
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
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None,
    num_heads: int | Sequence[int | None] | None,
    check_structure: bool,
) -> list[QKSite]:
    """Sites already resolved (:class:`QKSite`) as they are, anything else through
    :func:`find_qk_sites`."""
    if sites is not None and len(sites) > 0 and all(isinstance(s, QKSite) for s in sites):
        return list(sites)
    return find_qk_sites(model, sites, num_heads=num_heads, check_structure=check_structure)
