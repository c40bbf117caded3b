"""What an attention site is and where its query and key tensors live in a model.

:class:`QKSite` names a site's modules and its head layout; :func:`qk_tensors` gives views of its
query and key weights, biases and qk-norm gains in any of the layouts the audit reads (module doc
of :mod:`gaugekit.audit.sites`, which finds the sites); :func:`one_of` stands one site for
candidates the layout probe tells apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from torch import Tensor, nn

from gaugekit.audit.qk_norm import QKNorms
from gaugekit.audit.rotary import RotaryLayout

__all__ = ["QKSite", "SiteSpec"]


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
        """This site with the rotary layout found (``rotary.detect_rotary_layout``), or with one
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


def one_of(sites: Sequence[QKSite]) -> QKSite:
    """One site standing for ``sites`` (its first, with every one as a candidate), or the
    only one; the candidates' own candidates are flattened in."""
    flat = [c for s in sites for c in (s.candidates or (s,))]
    if len(flat) == 1:
        return flat[0]
    return replace(flat[0], candidates=tuple(flat))


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

