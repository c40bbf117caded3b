r"""A gauge-twin audit for anyone's attention model.

The per-head gauge
------------------
One attention head ``h`` maps an input ``x`` to a query ``q_h = W_{Q,h} x + b_{Q,h}`` and an
input ``x'`` to a key ``k_h = W_{K,h} x' + b_{K,h}`` (``W_{Q,h}``, ``W_{K,h}`` are the
``d_head`` rows of head ``h`` of the query and key projections, torch ``nn.Linear`` layout).
The logit between them is ``q_hᵀ k_h / √d_head``. For every orthogonal ``A_h ∈ O(d_head)``

    ``(A_h q_h)ᵀ (A_h k_h) = q_hᵀ A_hᵀ A_h k_h = q_hᵀ k_h``,

so left-multiplying the rows of head ``h`` of ``W_Q`` **and** ``W_K`` (and of their biases) by
the same ``A_h`` leaves every logit, hence the whole function, unchanged. ``W_V``, ``W_O`` and
all other parameters are untouched; each head has its own ``A_h``.

The invariant reported
----------------------
With homogeneous coordinates ``x̃ = [x; 1]`` put ``W̃_{Q,h} = [W_{Q,h} | b_{Q,h}]`` and
``W̃_{K,h} = [W_{K,h} | b_{K,h}]`` (a bias column only when the bias exists). Then
``q_hᵀ k_h = x̃ᵀ M_h x̃'`` with the bilinear form

    ``M_h = W̃_{Q,h}ᵀ W̃_{K,h}``,

which the gauge keeps exactly (``W̃ → A_h W̃``). Without biases ``M_h = W_{Q,h}ᵀ W_{K,h}``, the
paper's invariant. For ``nn.MultiheadAttention(add_bias_kv=True)`` the learned extra key
``bias_k`` lives in the projected space; its head-``h`` slice is rotated by ``A_h`` too and enters
``W̃_{K,h}`` as one more column (the logits against that extra key are ``x̃ᵀ W̃_{Q,h}ᵀ bias_{k,h}``).
``M_h`` of a head is what the audit compares between twins:

    ``rel(A, B) = ‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))``  (:func:`rel_distance`),

symmetric in the twins. Two twins with the same ``M_h`` for every head of every layer (and the
same other parameters) are the same function.

Twins
-----
* gauge twin: a deep copy with ``A_h`` Haar on ``O(d_head)``, drawn from an explicit
  :class:`torch.Generator` per site (layer), then per head;
* identity twin: the same code path with ``A_h = I``. ``I W`` is computed exactly in floating
  point (each entry is ``1·w + Σ 0·w'``), so the copy is bit-identical and, trained by the same
  code on the same data, drifts **exactly** 0: the control that the machinery adds no drift;
* noise twin: the original basis with i.i.d. ``N(0, σ²)`` added to every query/key weight and
  bias entry (``σ = noise_scale``): the yardstick of ordinary sensitivity to perturbation.

An optimizer whose update commutes with ``W → A W`` on the rows of a head (SGD, heavy ball,
shared-scale Adam, Muon in exact arithmetic) keeps the gauge twin on the orbit of the original,
so its drift stays at round-off. Coordinate-wise Adam does not: its per-entry denominator
``√v̂`` is taken in the given basis, and the twins split at the first step.

What breaks the gauge (refused or flagged)
-------------------------------------------
* qk-norm with a per-coordinate learnable gain ``g ⊙ q/rms(q)``: ``g ⊙ (A q) ≠ A (g ⊙ q)``
  unless ``g`` is a multiple of the ones vector, and training makes it not one. Refused.
* qk-norm with mean-centring (LayerNorm, with or without affine): subtracting the mean of the
  coordinates is the projection ``I − 11ᵀ/d``, which does not commute with a general ``A``.
  Refused (GroupNorm alike).
* A gain-free RMS norm ``q / rms(q)`` is fine: ``‖A q‖ = ‖q‖`` so ``(Aq)/rms(Aq) = A(q/rms(q))``.
  ``nn.RMSNorm(elementwise_affine=False)`` and ``nn.Identity`` on q/k are accepted.
* Rotary position embeddings ``q ↦ R(p) q``: the logit is ``qᵀ R(p)ᵀ R(p') k = qᵀ R(p' − p) k``
  and the twin's is ``qᵀ A_hᵀ R(p' − p) A_h k``; they agree for all positions only when ``A_h``
  commutes with every ``R(δ)``, i.e. (distinct frequencies) ``A_h`` is block-diagonal in the
  RoPE planes with a rotation in each 2×2 block (a reflection reverses the angle). A Haar
  ``A_h`` does not commute. A module whose class or attribute name says rotary/RoPE is refused;
  RoPE written as a plain function is invisible to that check (the probe check catches it).
  Commuting ``A_h`` may be passed as ``rotations`` with ``check_structure=False``.
* Anything else the structure check cannot see (a functional qk-norm, RoPE as a function, q or k
  used elsewhere, a wrong head count on separate projections): :func:`audit_twins` evaluates
  both twins on the probe before training and raises when the gauge twin is not the same
  function to round-off (tolerance ``√ε`` of the dtype).

Adam and a key bias
-------------------
Softmax ignores a shift shared by all keys of a query, and ``q_hᵀ b_{K,h}`` is such a shift:
the gradient of ``b_K`` is identically 0 in exact arithmetic, so its float value is round-off.
Coordinate-wise Adam's first step ``g / (|g| + ε)`` turns that round-off into updates of up to
``lr`` (amplification ``1/ε``), in any basis: a key bias makes even the twins related by a
signed permutation (for which Adam is equivariant) differ in ``M_h`` by ~1e-11 in float64
rather than 1e-16, while the outputs stay at round-off. The ``b_K`` column stays in ``M_h``
(it is gauge-invariant like the rest) although the function cannot see it; read the output
drift too when the model has key biases.

Verdicts in words
-----------------
A result ends with one plain line (:meth:`TwinAuditResult.verdict_line`): the optimizer's class
and hyperparameters as built, then *keeps the gauge*, *breaks the gauge* or *chaotic (gauge
twin ≈ noise twin)*, with the numbers that decide it. The drift of a twin is the largest
``rel(M_h, M_h')`` over its heads and checkpoints; the rule is that of the factor audit
(:func:`gaugekit.audit.decide_verdict`): a gauge drift at or below the round-off threshold of
the dtype (:func:`verdict_threshold`: 1e-8 in float64, 1e-3 in float32) keeps the gauge; above
it, a gauge drift more than ``CHAOS_FACTOR = 10`` times the noise twin's breaks the gauge, and one
within that factor is chaotic: the run separates twins that start a tiny perturbation apart
just as fast, so the gap says how chaotic training is, not that the rule sees the basis. Adam's
gauge twins end about 500 times farther apart than its noise twins on the book's attention model
(breaks); Muon's end at 0.85 against 0.87 (chaotic); SGD and shared-scale Adam stay near 1e-6 in
float32 (keeps). Without a noise twin a drift above the threshold breaks the gauge, and the line
says that chaos was not ruled out; a run that diverged cannot be judged.

Everything random comes from explicit generators; training both copies restores the global RNG
state before each copy's step, so dropout masks agree too.
"""

# Developer note (layers, DESIGN.md): floor 1/2; imports gauge, audit and the optim registry.

from __future__ import annotations

import copy
import itertools
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from gaugekit.audit.factors import (
    FLOAT32_THRESHOLD,
    FLOAT64_THRESHOLD,
    GaugeVerdict,
    decide_verdict,
    describe_optimizer,
    optimizer_hyperparameters,
    optimizer_name,
)
from gaugekit.gauge import haar_orthogonal, orthogonality_defect
from gaugekit.optim.registry import get_spec, make_optimizer

__all__ = [
    "TWIN_KINDS",
    "LossFn",
    "OptimizerFactory",
    "QKSite",
    "SiteSpec",
    "TwinAuditResult",
    "TwinCheckpoint",
    "TwinTrace",
    "audit_twins",
    "draw_head_rotations",
    "find_qk_sites",
    "gauge_twin",
    "head_drift",
    "head_invariants",
    "identity_twin",
    "init_tolerance",
    "noise_twin",
    "output_drift",
    "rel_distance",
    "verdict_threshold",
]

#: The twin kinds :func:`audit_twins` knows.
TWIN_KINDS: tuple[str, ...] = ("gauge", "identity", "noise")

#: What names one attention site, an ``nn.MultiheadAttention`` (module or its name) or a
#: ``(query, key)`` pair of ``nn.Linear`` projections or of 2-D weight parameters (objects or
#: names).
SiteSpec = (
    str | nn.MultiheadAttention
    | tuple[str | nn.Linear | nn.Parameter, str | nn.Linear | nn.Parameter]
)
LossFn = Callable[[nn.Module, Any], Tensor]
OptimizerFactory = Callable[[list[nn.Parameter]], torch.optim.Optimizer]
ForwardFn = Callable[[nn.Module, Any], Tensor]


# --------------------------------------------------------------------------------------------
# distance
# --------------------------------------------------------------------------------------------


def rel_distance(A: Tensor, B: Tensor) -> Tensor:
    r"""``‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))`` over the last two dimensions (vectors: Euclidean).

    Symmetric in ``A, B``; 0 when both are zero (never NaN). Differs from
    :func:`gaugekit.gauge.relative_distance`, which divides by ``‖B‖_F`` alone.
    """
    if A.ndim < 2:
        num = torch.linalg.vector_norm(A - B)
        den = 0.5 * (torch.linalg.vector_norm(A) + torch.linalg.vector_norm(B))
    else:
        num = torch.linalg.matrix_norm(A - B)
        den = 0.5 * (torch.linalg.matrix_norm(A) + torch.linalg.matrix_norm(B))
    return num / den.clamp_min(torch.finfo(den.dtype).tiny)


def verdict_threshold(dtype: torch.dtype) -> float:
    """The largest gauge drift that is round-off: the factor audit's threshold for float64
    (1e-8) and float32 (1e-3), ``√ε`` for other dtypes (bfloat16: 0.088)."""
    if dtype == torch.float64:
        return FLOAT64_THRESHOLD
    if dtype == torch.float32:
        return FLOAT32_THRESHOLD
    return math.sqrt(torch.finfo(dtype).eps)


def init_tolerance(dtype: torch.dtype) -> float:
    r"""``√ε`` of ``dtype``: the largest init output drift accepted for an exact gauge twin.

    Rotating in float64 and rounding back costs ``O(ε)`` per entry, and a forward pass amplifies
    that by a modest factor; ``√ε`` (1.5e-8 in float64, 3.5e-4 in float32) is far above that and
    far below the ``O(1e-2 … 1)`` change a broken gauge makes to the logits.
    """
    return math.sqrt(torch.finfo(dtype).eps)


# --------------------------------------------------------------------------------------------
# sites
# --------------------------------------------------------------------------------------------


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


def _module_names(model: nn.Module) -> dict[int, str]:
    return {id(m): n for n, m in model.named_modules()}


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
        name = _module_names(model).get(id(obj))
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


def _parent_name(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


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
    parents = {_parent_name(n) for n in site.modules}
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


def _qk(model: nn.Module, site: QKSite) -> _QK:
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


# --------------------------------------------------------------------------------------------
# invariants and drift
# --------------------------------------------------------------------------------------------


def _per_head(t: Tensor, site: QKSite) -> Tensor:
    """``(H·d_head, …)`` → ``(H, d_head, c)`` (a vector becomes one column)."""
    return t.reshape(site.num_heads, site.d_head, -1)


def head_invariants(model: nn.Module, sites: Sequence[QKSite]) -> list[Tensor]:
    r"""``M_h = W̃_{Q,h}ᵀ W̃_{K,h}`` of every head, one float64 ``(H, a, b)`` tensor per site.

    ``W̃ = [W | b]`` carries a bias column when the bias exists (and, for an MHA with
    ``add_bias_kv``, ``W̃_K`` one more column ``bias_k``); without biases ``M_h = W_{Q,h}ᵀ W_{K,h}``.
    """
    out = []
    with torch.no_grad():
        for site in sites:
            qk = _qk(model, site)
            Q = torch.cat(
                [_per_head(t.double(), site) for t in (qk.wq, qk.bq) if t is not None], dim=-1
            )
            K = torch.cat(
                [_per_head(t.double(), site) for t in (qk.wk, qk.bk, qk.bias_k) if t is not None],
                dim=-1,
            )
            out.append(Q.mT @ K)
    return out


def head_drift(model_a: nn.Module, model_b: nn.Module, sites: Sequence[QKSite]) -> list[Tensor]:
    """Per-head ``rel(M_h, M_h')`` between two models, one ``(H,)`` float64 tensor per site."""
    return [
        rel_distance(Ma, Mb)
        for Ma, Mb in zip(head_invariants(model_a, sites), head_invariants(model_b, sites),
                          strict=True)
    ]


def _default_forward(model: nn.Module, probe: Any) -> Tensor:
    out = model(*probe) if isinstance(probe, tuple) else model(probe)
    if isinstance(out, tuple | list) and out:
        out = out[0]
    elif not isinstance(out, Tensor) and hasattr(out, "logits"):
        out = out.logits
    return out


def _evaluate(model: nn.Module, probe: Any, forward: ForwardFn | None) -> Tensor:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = (forward or _default_forward)(model, probe)
    finally:
        model.train(was_training)
    if not isinstance(out, Tensor):
        raise ValueError(
            f"Invalid forward: the output on the probe is a {type(out).__name__}; expected a "
            f"Tensor (or a tuple whose first item is one); pass forward=lambda model, probe: ..."
        )
    return out


def output_drift(
    model_a: nn.Module, model_b: nn.Module, probe: Any, *, forward: ForwardFn | None = None
) -> float:
    """``rel(f_a(probe), f_b(probe))`` of the outputs, in eval mode and without gradients.

    ``forward(model, probe) -> Tensor`` defaults to ``model(*probe)`` for a tuple probe (else
    ``model(probe)``), keeping the first item of a tuple output (MHA returns ``(out, weights)``).
    """
    a = _evaluate(model_a, probe, forward)
    b = _evaluate(model_b, probe, forward)
    return rel_distance(a.double().reshape(-1), b.double().reshape(-1)).item()


# --------------------------------------------------------------------------------------------
# twins
# --------------------------------------------------------------------------------------------


def draw_head_rotations(
    sites: Sequence[QKSite], *, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> list[Tensor]:
    """Haar ``A_h ∈ O(d_head)``, one ``(H, d_head, d_head)`` stack per site, drawn site by site
    (layer by layer) then head by head from ``generator``."""
    return [
        haar_orthogonal(s.d_head, generator=generator, batch_shape=(s.num_heads,), dtype=dtype)
        for s in sites
    ]


def _work_dtype(t: Tensor) -> torch.dtype:
    return t.dtype if t.device.type == "mps" else torch.float64


def _check_rotations(rotations: Sequence[Tensor], sites: Sequence[QKSite]) -> None:
    if len(rotations) != len(sites):
        raise ValueError(
            f"Invalid rotations: {len(rotations)} stacks; expected one per site ({len(sites)})"
        )
    for A, s in zip(rotations, sites, strict=True):
        if tuple(A.shape) != (s.num_heads, s.d_head, s.d_head):
            raise ValueError(
                f"Invalid rotations: shape {tuple(A.shape)} for site {s.label!r}; expected "
                f"(num_heads, d_head, d_head) = ({s.num_heads}, {s.d_head}, {s.d_head})"
            )
        defect = orthogonality_defect(A.double()).max().item()
        if not defect <= 1e-5:
            raise ValueError(
                f"Invalid rotations: ‖AᵀA − I‖_F = {defect:.3g} for site {s.label!r}; expected "
                f"orthogonal matrices (the gauge needs A_hᵀ A_h = I)"
            )


def _rotate_in_place(model: nn.Module, sites: Sequence[QKSite], rotations: Sequence[Tensor]):
    with torch.no_grad():
        for site, A in zip(sites, rotations, strict=True):
            for t in _qk(model, site).tensors():
                work = _work_dtype(t)
                A_t = A.to(device=t.device, dtype=work)
                new = (A_t @ _per_head(t.to(work), site)).reshape(t.shape)
                t.copy_(new)


def _resolve(model, sites, num_heads, check_structure) -> list[QKSite]:
    if sites is not None and len(sites) > 0 and all(isinstance(s, QKSite) for s in sites):
        return list(sites)
    return find_qk_sites(model, sites, num_heads=num_heads, check_structure=check_structure)


def gauge_twin(
    model: nn.Module,
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None = None,
    *,
    num_heads: int | Sequence[int | None] | None = None,
    generator: torch.Generator | None = None,
    rotations: Sequence[Tensor] | None = None,
    check_structure: bool = True,
) -> tuple[nn.Module, list[Tensor]]:
    """A deep copy of ``model`` with the q/k rows (and biases) of head ``h`` left-multiplied by
    ``A_h``; returns ``(twin, rotations)``.

    ``rotations`` (one ``(H, d_head, d_head)`` orthogonal stack per site) or ``generator``
    (Haar draws, :func:`draw_head_rotations`) must be given. ``model`` is not modified.
    """
    resolved = _resolve(model, sites, num_heads, check_structure)
    if rotations is None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(
                f"Invalid generator: {generator!r}; expected a torch.Generator (or pass "
                f"rotations)"
            )
        rotations = draw_head_rotations(resolved, generator=generator)
    _check_rotations(rotations, resolved)
    twin = copy.deepcopy(model)
    _rotate_in_place(twin, resolved, rotations)
    return twin, list(rotations)


def identity_twin(
    model: nn.Module,
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None = None,
    *,
    num_heads: int | Sequence[int | None] | None = None,
    check_structure: bool = True,
) -> nn.Module:
    """The ``A = I`` control: :func:`gauge_twin` with identity rotations (same code path); the
    copy is bit-identical to ``model``."""
    resolved = _resolve(model, sites, num_heads, check_structure)
    eye = [
        torch.eye(s.d_head, dtype=torch.float64).expand(s.num_heads, -1, -1).clone()
        for s in resolved
    ]
    twin, _ = gauge_twin(model, resolved, rotations=eye)
    return twin


def noise_twin(
    model: nn.Module,
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None = None,
    *,
    scale: float,
    generator: torch.Generator,
    num_heads: int | Sequence[int | None] | None = None,
    check_structure: bool = True,
) -> nn.Module:
    """A deep copy with ``N(0, scale²)`` added to every query/key weight and bias entry
    (the original basis), drawn site by site from ``generator``."""
    if not (isinstance(scale, int | float) and math.isfinite(scale) and scale >= 0):
        raise ValueError(f"Invalid scale: {scale!r}; expected a finite float >= 0")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"Invalid generator: {generator!r}; expected a torch.Generator")
    resolved = _resolve(model, sites, num_heads, check_structure)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for site in resolved:
            for t in _qk(twin, site).tensors():
                noise = torch.randn(
                    tuple(t.shape), generator=generator, dtype=torch.float64,
                    device=generator.device,
                )
                t.add_((scale * noise).to(device=t.device, dtype=t.dtype))
    return twin


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TwinCheckpoint:
    """Drift of one twin from the original after ``step`` optimizer steps.

    ``head_drift[i][h]`` is ``rel(M_h, M_h')`` of head ``h`` of site ``i``; ``output_drift`` is
    ``rel`` of the outputs on the probe batch.
    """

    step: int
    head_drift: tuple[tuple[float, ...], ...]
    output_drift: float

    @property
    def mean_head_drift(self) -> float:
        """Mean of ``rel(M_h, M_h')`` over all heads of all sites."""
        flat = [d for site in self.head_drift for d in site]
        return sum(flat) / len(flat)

    @property
    def max_head_drift(self) -> float:
        """Largest ``rel(M_h, M_h')`` over all heads of all sites."""
        return max(d for site in self.head_drift for d in site)


@dataclass(frozen=True)
class TwinTrace:
    """One twin's run: its checkpoints and its training loss at every step."""

    kind: str
    checkpoints: tuple[TwinCheckpoint, ...]
    losses: tuple[float, ...]
    init_output_drift: float

    @property
    def final(self) -> TwinCheckpoint:
        """The last checkpoint."""
        return self.checkpoints[-1]

    @property
    def max_drift(self) -> float:
        """Largest ``rel(M_h, M_h')`` over all heads and checkpoints: the drift a verdict reads."""
        return max(c.max_head_drift for c in self.checkpoints)

    def steps(self) -> list[int]:
        """Checkpoint steps (for plotting)."""
        return [c.step for c in self.checkpoints]

    def mean_head_drifts(self) -> list[float]:
        """Mean per-head drift at each checkpoint."""
        return [c.mean_head_drift for c in self.checkpoints]

    def output_drifts(self) -> list[float]:
        """Output drift at each checkpoint."""
        return [c.output_drift for c in self.checkpoints]


INVARIANT_DOC = (
    "M_h = [W_Q,h | b_Q,h]^T [W_K,h | b_K,h] per head (bias columns only where biases exist; "
    "= W_Q,h^T W_K,h without biases); rel(A,B) = ||A-B||_F / (0.5(||A||_F+||B||_F))"
)


@dataclass(frozen=True)
class TwinAuditResult:
    """Outcome of :func:`audit_twins`.

    Attributes:
        sites: the audited attention sites.
        optimizer: the optimizer's label.
        steps: optimizer steps taken (fewer than asked when ``diverged``).
        dtype: the model's parameter dtype.
        traces: one :class:`TwinTrace` per twin kind, in the order asked.
        base_losses: the original's training loss at every step.
        diverged: a training loss was not finite; training stopped there.
        invariant: which invariant ``head_drift`` compares.
        optimizer_class: dotted path of the optimizer's class (``torch.optim.Adam``).
        hyperparameters: the values it was built with
            (:func:`gaugekit.audit.optimizer_hyperparameters`).
        threshold: the round-off threshold of the verdict (:func:`verdict_threshold`).
    """

    sites: tuple[QKSite, ...]
    optimizer: str
    steps: int
    dtype: str
    traces: tuple[TwinTrace, ...]
    base_losses: tuple[float, ...]
    diverged: bool = False
    invariant: str = field(default=INVARIANT_DOC)
    optimizer_class: str = ""
    hyperparameters: dict[str, Any] = field(default_factory=dict, hash=False)
    threshold: float = FLOAT64_THRESHOLD

    def trace(self, kind: str) -> TwinTrace:
        """The trace of twin ``kind``."""
        for t in self.traces:
            if t.kind == kind:
                return t
        raise ValueError(
            f"Invalid kind: {kind!r}; expected one of {[t.kind for t in self.traces]}"
        )

    def to_records(self) -> list[dict[str, Any]]:
        """Long format, one row per (twin, checkpoint, site, head), for pandas or JSONL."""
        rows = []
        for t in self.traces:
            for c in t.checkpoints:
                for site, drifts in zip(self.sites, c.head_drift, strict=True):
                    for h, d in enumerate(drifts):
                        rows.append({
                            "twin": t.kind, "step": c.step, "site": site.label, "head": h,
                            "head_drift": d, "output_drift": c.output_drift,
                            "optimizer": self.optimizer,
                        })
        return rows

    def table(self) -> str:
        """Plain-text table: per twin and checkpoint, mean/max head drift and output drift."""
        lines = [f"{'twin':<9} {'step':>6} {'mean rel(M_h)':>14} {'max rel(M_h)':>13} "
                 f"{'rel(output)':>12}"]
        for t in self.traces:
            for c in t.checkpoints:
                lines.append(
                    f"{t.kind:<9} {c.step:>6} {c.mean_head_drift:>14.3e} "
                    f"{c.max_head_drift:>13.3e} {c.output_drift:>12.3e}"
                )
        return "\n".join(lines)

    @property
    def verdict(self) -> GaugeVerdict | None:
        """Keeps / breaks / chaotic from the gauge and noise twins' drifts (module doc);
        ``None`` when no gauge twin was trained."""
        kinds = {t.kind: t for t in self.traces}
        if "gauge" not in kinds:
            return None
        noise = kinds["noise"].max_drift if "noise" in kinds else None
        why = "training diverged (a loss was not finite)" if self.diverged else ""
        return decide_verdict(kinds["gauge"].max_drift, noise, self.threshold, unjudged=why)

    def verdict_line(self) -> str:
        """One plain line: the optimizer as built, its verdict, the numbers and the rule."""
        verdict = self.verdict
        if verdict is None:
            return f"{self.optimizer}: no gauge twin was trained, so there is no verdict"
        return verdict.line(self.optimizer)

    def summary(self) -> str:
        """A few readable lines: what was audited, where each twin ended, and the verdict."""
        return "\n".join([*self._head_lines(), self.verdict_line()])

    def _head_lines(self) -> list[str]:
        heads = sum(s.num_heads for s in self.sites)
        lines = [
            f"Twin audit: {self.optimizer}, {self.steps} steps, {self.dtype}, "
            f"{len(self.sites)} site(s), {heads} heads.",
            f"Invariant: {self.invariant}.",
        ]
        if self.diverged:
            lines.append("DIVERGED: a training loss was not finite; drifts are not a result.")
        nan = float("nan")
        base_loss = self.base_losses[-1] if self.base_losses else nan
        for t in self.traces:
            f = t.final
            loss = t.losses[-1] if t.losses else nan
            lines.append(
                f"  {t.kind:<8}: at init rel(output) = {t.init_output_drift:.2e}; after step "
                f"{f.step}: mean rel(M_h) = {f.mean_head_drift:.3e}, "
                f"max {f.max_head_drift:.3e}, rel(output) = {f.output_drift:.3e}; "
                f"loss {loss:.4g} (original {base_loss:.4g})"
            )
        return lines

    def __str__(self) -> str:
        return "\n".join([*self._head_lines(), self.table(), self.verdict_line()])


# --------------------------------------------------------------------------------------------
# training in lockstep
# --------------------------------------------------------------------------------------------


class _RngSnapshot:
    """The global RNG state of the CPU (and the CUDA devices in use), restorable."""

    def __init__(self, devices: Iterable[torch.device]) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = {
            d.index or 0: torch.cuda.get_rng_state(d) for d in devices if d.type == "cuda"
        }

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        for index, state in self.cuda.items():
            torch.cuda.set_rng_state(state, index)


def _make_factory(
    optimizer: str | OptimizerFactory, optimizer_kwargs: Mapping[str, Any] | None
) -> OptimizerFactory:
    kwargs = dict(optimizer_kwargs or {})
    if isinstance(optimizer, str):
        get_spec(optimizer)  # an unknown name raises ValueError listing the known ones
        return lambda params: make_optimizer(optimizer, params, **kwargs)
    if callable(optimizer):
        if kwargs:
            raise ValueError(
                f"Invalid optimizer_kwargs: {kwargs!r}; expected None with a factory (bind the "
                f"hyperparameters in the factory)"
            )
        return optimizer
    raise ValueError(
        f"Invalid optimizer: {optimizer!r}; expected a registry name or a callable "
        f"params -> torch.optim.Optimizer"
    )


def _check_checkpoints(checkpoints: Sequence[int] | None, steps: int) -> list[int]:
    if checkpoints is None:
        return list(range(steps + 1))
    cps = sorted(set(checkpoints))
    if not cps or any(
        isinstance(c, bool) or not isinstance(c, int) or c < 0 or c > steps for c in cps
    ):
        raise ValueError(
            f"Invalid checkpoints: {checkpoints!r}; expected integers in [0, steps={steps}]"
        )
    return cps


def audit_twins(
    model: nn.Module,
    loss_fn: LossFn,
    *,
    probe: Any,
    sites: Sequence[SiteSpec] | None = None,
    num_heads: int | Sequence[int | None] | None = None,
    optimizer: str | OptimizerFactory = "adam",
    optimizer_kwargs: Mapping[str, Any] | None = None,
    steps: int = 10,
    batch: Any = None,
    batches: Iterable[Any] | None = None,
    checkpoints: Sequence[int] | None = None,
    twins: Sequence[str] = TWIN_KINDS,
    gauge_seed: int = 777,
    rotations: Sequence[Tensor] | None = None,
    noise_seed: int = 888,
    noise_scale: float = 1e-7,
    forward: ForwardFn | None = None,
    check_structure: bool = True,
    init_tol: float | None = None,
    threshold: float | None = None,
) -> TwinAuditResult:
    r"""Train ``model`` and its twins in lockstep and report how far their ``M_h`` drift apart.

    The original is deep-copied (``model`` itself is not trained). Each copy gets its own
    optimizer from the same factory; at every step each copy computes ``loss_fn(copy, b)`` on
    the same batch ``b``, backpropagates and steps, with the global RNG restored to the same
    state before each copy (identical dropout masks).

    Args:
        model: the model (any ``nn.Module``).
        loss_fn: ``loss_fn(model, batch) -> scalar Tensor``.
        probe: input of the output-drift check (``forward(model, probe)``); it also verifies
            before training that the gauge and identity twins compute the same function.
        sites, num_heads, check_structure: as in :func:`find_qk_sites`.
        optimizer: a registry name (``make_optimizer(name, params, **optimizer_kwargs)``) or a
            factory ``params -> Optimizer`` (e.g. ``lambda p: torch.optim.Adam(p, lr=1e-3)``).
        steps: optimizer steps ``k >= 0``.
        batch: one batch used at every step (full batch); ignored when ``batches`` is given.
        batches: an iterable of batches; the first ``steps`` are drawn before training, so
            every copy sees the same sequence.
        checkpoints: steps at which drift is measured (default every step ``0 … k``).
        twins: kinds to build, a subset of ``("gauge", "identity", "noise")``.
        gauge_seed, noise_seed: seeds of the generators of the Haar ``A_h`` and of the noise.
        rotations: orthogonal ``(H, d_head, d_head)`` stacks, one per site, used by the gauge
            twin instead of the Haar draw (e.g. signed permutations, or ``A`` commuting with
            rotary rotations); ``gauge_seed`` is then unused.
        noise_scale: standard deviation of the noise twin's perturbation.
        forward: ``forward(model, probe) -> Tensor`` (see :func:`output_drift`).
        init_tol: largest init output drift of the gauge twin (default :func:`init_tolerance`).
        threshold: the verdict's round-off threshold on the gauge drift (default
            :func:`verdict_threshold` of the model's dtype).

    Returns:
        A :class:`TwinAuditResult`; ``print(result)`` shows what was audited (the optimizer's
        class and hyperparameters as built), a table of drifts and, last, the verdict line.

    Raises:
        ValueError: bad arguments, or a gauge twin that is not the same function at init.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"Invalid steps: {steps!r}; expected an integer >= 0")
    kinds = list(twins)
    if not kinds or any(k not in TWIN_KINDS for k in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError(
            f"Invalid twins: {twins!r}; expected distinct kinds from {TWIN_KINDS}"
        )
    if not (isinstance(noise_scale, int | float) and math.isfinite(noise_scale)
            and noise_scale >= 0):
        raise ValueError(f"Invalid noise_scale: {noise_scale!r}; expected a finite float >= 0")
    if not callable(loss_fn):
        raise ValueError(f"Invalid loss_fn: {loss_fn!r}; expected a callable (model, batch)")
    cps = _check_checkpoints(checkpoints, steps)
    factory = _make_factory(optimizer, optimizer_kwargs)
    resolved = find_qk_sites(model, sites, num_heads=num_heads, check_structure=check_structure)
    params = list(model.parameters())
    dtype = params[0].dtype if params else torch.get_default_dtype()
    tol = init_tolerance(dtype) if init_tol is None else init_tol

    if batches is not None:
        drawn = list(itertools.islice(iter(batches), steps))
        if len(drawn) < steps:
            raise ValueError(
                f"Invalid batches: {len(drawn)} batches; expected at least steps = {steps}"
            )
    else:
        drawn = [batch] * steps

    base = copy.deepcopy(model)
    copies: list[nn.Module] = []
    for kind in kinds:
        if kind == "gauge":
            twin, _ = gauge_twin(
                base, resolved, rotations=rotations,
                generator=torch.Generator().manual_seed(gauge_seed),
            )
        elif kind == "identity":
            twin = identity_twin(base, resolved)
        else:
            twin = noise_twin(base, resolved, scale=noise_scale,
                              generator=torch.Generator().manual_seed(noise_seed))
        copies.append(twin)

    init_drift = [output_drift(base, c, probe, forward=forward) for c in copies]
    for kind, d in zip(kinds, init_drift, strict=True):
        if kind in ("gauge", "identity") and not d <= tol:
            raise ValueError(
                f"Invalid model: the {kind} twin's output differs from the original's by "
                f"rel = {d:.3g} > {tol:.3g} on the probe before any training, so the per-head "
                f"gauge is not a symmetry of this model as described; expected an exact "
                f"symmetry (check num_heads and the q/k row layout; qk-norm, rotary embeddings "
                f"or q/k used outside the logits break it)"
            )

    models = [base, *copies]
    optimizers = [factory(list(m.parameters())) for m in models]
    optimizer_class = optimizer_name(optimizers[0])
    hyperparameters = optimizer_hyperparameters(optimizers[0])
    label = describe_optimizer(optimizer_class, hyperparameters)
    if isinstance(optimizer, str):
        label = f"{optimizer} = {label}"
    devices = {p.device for p in params}
    losses: list[list[float]] = [[] for _ in models]
    points: list[list[TwinCheckpoint]] = [[] for _ in copies]

    def record(step: int) -> None:
        for i, twin in enumerate(copies):
            hd = head_drift(base, twin, resolved)
            points[i].append(TwinCheckpoint(
                step=step,
                head_drift=tuple(tuple(float(x) for x in d.tolist()) for d in hd),
                output_drift=output_drift(base, twin, probe, forward=forward),
            ))

    diverged, done = False, 0
    if 0 in cps:
        record(0)
    for t in range(steps):
        snapshot = _RngSnapshot(devices)
        for i, (m, opt) in enumerate(zip(models, optimizers, strict=True)):
            snapshot.restore()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(m, drawn[t])
            if not isinstance(loss, Tensor) or loss.numel() != 1:
                raise ValueError(
                    f"Invalid loss_fn: returned {type(loss).__name__}; expected a scalar Tensor"
                )
            losses[i].append(float(loss.detach()))
            if not math.isfinite(losses[i][-1]):
                diverged = True
                continue
            loss.backward()
            opt.step()
        if diverged:
            break
        done = t + 1
        if done in cps:
            record(done)

    traces = tuple(
        TwinTrace(kind=k, checkpoints=tuple(points[i]), losses=tuple(losses[i + 1]),
                  init_output_drift=init_drift[i])
        for i, k in enumerate(kinds)
    )
    return TwinAuditResult(
        sites=tuple(resolved), optimizer=label, steps=done, dtype=str(dtype).replace("torch.", ""),
        traces=traces, base_losses=tuple(losses[0]), diverged=diverged,
        optimizer_class=optimizer_class, hyperparameters=hyperparameters,
        threshold=verdict_threshold(dtype) if threshold is None else threshold,
    )
