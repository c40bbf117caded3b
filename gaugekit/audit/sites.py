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

from collections.abc import Sequence
from typing import Any

from torch import nn

from gaugekit.audit.site_checks import _check_structure, _with_qk_norms
from gaugekit.audit.site_layout import QKSite, SiteSpec, _validate_site
from gaugekit.audit.site_reading import (
    _check_int_heads,
    _linear_site,
    _mha_site,
    _name_of,
    _no_sites_found,
    _transformers_site,
)

__all__ = ["QKSite", "SiteSpec", "find_qk_sites", "resolve_sites"]

# Users import QKSite from here (and from heads), and the API documents it here: its home
QKSite.__module__ = __name__


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


def _is_mha_name(model: nn.Module, name: str) -> bool:
    return isinstance(dict(model.named_modules()).get(name), nn.MultiheadAttention)


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

