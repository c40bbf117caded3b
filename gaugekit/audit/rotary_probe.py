r"""Which pairs does a model's rotary embedding rotate? Asked of the model, not of its code.

When the site finder cannot name a model's rotate function (RoFormer's sinusoidal
``apply_rotary_position_embeddings``, Llama4's complex multiplication, gpt-oss's
``_apply_rotary_emb``), the site carries two candidate layouts of the rotary width: half-split
pairs ``(k, k + r/2)`` and interleaved pairs ``(2k, 2k + 1)``. A rotation of each pair commutes
with the rotary map of its own layout only, so a gauge twin drawn from the residual gauge of the
right layout is the same function as its base and one drawn for the wrong layout is not
(:func:`gaugekit.audit.function_check.same_function`, on a probe of token ids). Exactly one
candidate must pass; otherwise the site is refused with the distances measured for each.
Sites of the same attention class share the answer (the first one is probed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from gaugekit.audit.function_check import FunctionCheck, same_function
from gaugekit.audit.rotary import RotaryLayout
from gaugekit.audit.sites import QKSite, qk_tensors
from gaugekit.audit.twin_parts import _evaluate, draw_head_rotations, gauge_twin

__all__ = ["probe_rotary_layout", "settle_rotary"]

#: The probe: one sequence of this many random token ids.
PROBE_LENGTH = 8


def _token_probe(model: nn.Module) -> Tensor:
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 2:
        raise ValueError("the model has no config.vocab_size to draw token ids from")
    device = next(model.parameters()).device
    ids = torch.randint(0, vocab, (1, PROBE_LENGTH), generator=torch.Generator().manual_seed(0))
    return ids.to(device)


def _check_layout(model: nn.Module, site: QKSite, layout: RotaryLayout,
                  ids: Tensor) -> list[FunctionCheck]:
    candidate = dataclasses.replace(site, rotary=layout, rotary_candidates=())
    rotations = draw_head_rotations([candidate], generator=torch.Generator().manual_seed(0))

    def make(m: nn.Module) -> nn.Module:
        return gauge_twin(m, [candidate], rotations=rotations, check_structure=False)[0]

    def measure(m: nn.Module, dtype: torch.dtype) -> Tensor:
        return _evaluate(m, ids, None)

    with torch.no_grad():
        return same_function(model, make, lambda m: qk_tensors(m, candidate).tensors(),
                             measure)


def probe_rotary_layout(model: nn.Module, site: QKSite) -> RotaryLayout:
    """The one layout of ``site.rotary_candidates`` whose residual-gauge twin computes the
    same function as ``model`` on a probe of token ids (module doc).

    Raises:
        ValueError: when the model does not run on token ids, or not exactly one candidate
            passes; with each candidate's measured distance.
    """
    where = site.label
    try:
        ids = _token_probe(model)
        checks = {layout: _check_layout(model, site, layout, ids)
                  for layout in site.rotary_candidates}
    except (ValueError, RuntimeError, TypeError) as error:
        raise ValueError(
            f"Invalid model: site {where!r} applies a rotary embedding whose rotate function "
            f"is not known by name, and probing the model to tell its pairs apart failed "
            f"({error}); expected a QKSite with rotary=RotaryLayout.half_split(...) or "
            f"RotaryLayout.interleaved(...)"
        ) from error
    passing = [layout for layout, c in checks.items() if all(x.passed for x in c)]
    if len(passing) != 1:
        seen = "; ".join(f"{layout.style}: {', '.join(map(str, c))}"
                         for layout, c in checks.items())
        raise ValueError(
            f"Invalid model: site {where!r} applies a rotary embedding whose rotate function "
            f"is not known by name, and {len(passing)} of the candidate pairings keep the "
            f"model's function ({seen}); expected exactly one (pass a QKSite with "
            f"rotary=RotaryLayout.half_split(...) or RotaryLayout.interleaved(...))"
        )
    return passing[0]


def settle_rotary(model: nn.Module, sites: Sequence[QKSite]) -> list[QKSite]:
    """``sites`` with every site's rotary candidates settled by :func:`probe_rotary_layout`,
    one probe per attention class and candidate set (the module of the site's first
    projection names the class)."""
    modules = dict(model.named_modules())
    found: dict[tuple, RotaryLayout] = {}
    out = []
    for site in sites:
        if not site.rotary_candidates:
            out.append(site)
            continue
        parent = site.modules[0].rsplit(".", 1)[0] if "." in site.modules[0] else ""
        key = (type(modules.get(parent)).__name__, site.rotary_candidates)
        if key not in found:
            found[key] = probe_rotary_layout(model, site)
        out.append(dataclasses.replace(site, rotary=found[key], rotary_candidates=()))
    return out
