"""What breaks the per-head gauge, read from a site's modules: qk-norms with mean-centring or a
gain that is not an RMS norm's, and rotary modules at a site without a rotary layout; and the
qk-norm gains a site carries when what survives them is the signed permutations (module doc of
:mod:`gaugekit.audit.sites`).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import replace

from torch import nn

from gaugekit.audit.qk_norm import find_qk_norms
from gaugekit.audit.site_layout import QKSite

__all__: list[str] = []


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

