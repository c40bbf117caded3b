r"""Where a model's code does not say its layout, ask the model.

Two things the site finder cannot always read: which coordinate pairs a rotary embedding
rotates, when the model's rotate function has no known name (RoFormer's sinusoidal
``apply_rotary_position_embeddings``, Llama4's complex multiplication, gpt-oss's
``_apply_rotary_emb``), and the row order of a fused q/k/v projection of a class it does not
know (ModernBERT's ``Wqkv``, Persimmon's ``query_key_value``). It then gives the site its
candidates (:attr:`~gaugekit.audit.heads.QKSite.candidates`): half-split and interleaved pairs,
``[q; k; v]`` blocks and ``[q_h; k_h; v_h]`` per head. A gauge twin drawn for the right layout
is the same function as its base; for a wrong one it is not: the rotation of a wrong pair does
not commute with the rotary map, and the rows of a wrong order belong to other heads or to the
values. So each candidate's twin is judged by :func:`gaugekit.audit.function_check.same_function`
on a probe of token ids, and exactly one must pass; otherwise the site is refused with the
distances measured for each. Sites of one attention class share the answer (the first one is
probed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from gaugekit.audit.function_check import FunctionCheck, same_function
from gaugekit.audit.site_layout import QKSite, qk_tensors
from gaugekit.audit.twin_parts import _evaluate, draw_head_rotations, gauge_twin

__all__ = ["probe_layout", "settle_layouts"]

#: The probe: one sequence of this many random token ids.
PROBE_LENGTH = 8


def _token_probe(model: nn.Module) -> Tensor:
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 2:
        raise ValueError("the model has no config.vocab_size to draw token ids from")
    device = next(model.parameters()).device
    ids = torch.randint(0, vocab, (1, PROBE_LENGTH), generator=torch.Generator().manual_seed(0))
    return ids.to(device)


def _describe(site: QKSite) -> str:
    return site.kind + ("" if site.rotary is None else f", {site.rotary.style} pairs")


def _check_candidate(model: nn.Module, candidate: QKSite, ids: Tensor) -> list[FunctionCheck]:
    rotations = draw_head_rotations([candidate], generator=torch.Generator().manual_seed(0))

    def make(m: nn.Module) -> nn.Module:
        return gauge_twin(m, [candidate], rotations=rotations, check_structure=False)[0]

    def measure(m: nn.Module, dtype: torch.dtype) -> Tensor:
        return _evaluate(m, ids, None)

    with torch.no_grad():
        return same_function(model, make, lambda m: qk_tensors(m, candidate).tensors(),
                             measure)


def probe_layout(model: nn.Module, site: QKSite) -> QKSite:
    """The one of ``site.candidates`` whose gauge twin computes the same function as
    ``model`` on a probe of token ids (module doc).

    Raises:
        ValueError: when the model does not run on token ids, or not exactly one candidate
            passes; with each candidate's measured distance.
    """
    candidates = [dataclasses.replace(c, candidates=()) for c in site.candidates]
    what = " or ".join(sorted({_describe(c) for c in candidates}))
    try:
        ids = _token_probe(model)
        checks = [_check_candidate(model, c, ids) for c in candidates]
    except (ValueError, RuntimeError, TypeError) as error:
        raise ValueError(
            f"Invalid model: site {site.label!r} has a layout its code does not name ({what}), "
            f"and probing the model to tell them apart failed ({error}); expected a QKSite "
            f"that says its layout (kind, and rotary=RotaryLayout.half_split(...) or "
            f"RotaryLayout.interleaved(...))"
        ) from error
    passing = [c for c, check in zip(candidates, checks, strict=True)
               if all(x.passed for x in check)]
    if len(passing) != 1:
        seen = "; ".join(f"{_describe(c)}: {', '.join(map(str, check))}"
                         for c, check in zip(candidates, checks, strict=True))
        raise ValueError(
            f"Invalid model: site {site.label!r} has a layout its code does not name, and "
            f"{len(passing)} of its candidate layouts keep the model's function ({seen}); "
            f"expected exactly one (pass a QKSite that says its layout, or sites=[...] of "
            f"separate projections)"
        )
    return passing[0]


def settle_layouts(model: nn.Module, sites: Sequence[QKSite]) -> list[QKSite]:
    """``sites`` with every site's candidates settled by :func:`probe_layout`, one probe per
    attention class and candidate set (the module above the site's first projection names
    the class; the others take the same kind and rotary layout)."""
    modules = dict(model.named_modules())
    found: dict[tuple, QKSite] = {}
    out = []
    for site in sites:
        if not site.candidates:
            out.append(site)
            continue
        parent = site.modules[0].rsplit(".", 1)[0] if "." in site.modules[0] else ""
        key = (type(modules.get(parent)).__name__,
               tuple((c.kind, c.rotary) for c in site.candidates))
        if key not in found:
            found[key] = probe_layout(model, site)
        chosen = found[key]
        out.append(next(dataclasses.replace(c, candidates=()) for c in site.candidates
                        if (c.kind, c.rotary) == (chosen.kind, chosen.rotary)))
    return out
