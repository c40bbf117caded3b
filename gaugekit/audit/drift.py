r"""What the twin audit measures: the per-head invariants ``M_h`` and the drifts between twins.

``M_h`` and ``rel`` as defined in :mod:`gaugekit.audit.heads` ("The invariant reported"), compared
per head and on the outputs of a probe batch.
"""

# Developer note (layers, gaugekit/__init__.py): floor 4, audit/, on optim/ and gauge.

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from gaugekit.audit.sites import QKSite, qk_tensors
from gaugekit.gauge import head_logit_bilinears, relative_distance

__all__ = ["head_drift", "head_invariants", "init_tolerance", "output_drift", "rel_distance"]

ForwardFn = Callable[[nn.Module, Any], Tensor]


def rel_distance(A: Tensor, B: Tensor) -> Tensor:
    r"""``‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))`` over the last two dimensions (vectors: Euclidean).

    Symmetric in ``A, B``; 0 when both are zero (never NaN):
    :func:`gaugekit.gauge.relative_distance` with ``symmetric=True`` (whose default divides
    by ``‖B‖_F`` alone).
    """
    return relative_distance(A, B, symmetric=True)


def init_tolerance(dtype: torch.dtype) -> float:
    r"""``√ε`` of ``dtype``: the largest init output drift accepted for an exact gauge twin.

    Rotating in float64 and rounding back costs ``O(ε)`` per entry, and a forward pass amplifies
    that by a modest factor; ``√ε`` (1.5e-8 in float64, 3.5e-4 in float32) is far above that and
    far below the ``O(1e-2 … 1)`` change a broken gauge makes to the logits.
    """
    return math.sqrt(torch.finfo(dtype).eps)



def _columns(*parts: Tensor | None) -> Tensor:
    """``[W | b | …]`` in float64: the weight and one column per bias vector that exists."""
    return torch.cat([t.double() if t.ndim == 2 else t.double()[:, None]
                      for t in parts if t is not None], dim=-1)


def head_invariants(model: nn.Module, sites: Sequence[QKSite]) -> list[Tensor]:
    r"""``M_h = W̃_{Q,h}ᵀ W̃_{K,h}`` of every head, one float64 ``(H, a, b)`` tensor per site.

    ``W̃ = [W | b]`` carries a bias column when the bias exists (and, for an MHA with
    ``add_bias_kv``, ``W̃_K`` one more column ``bias_k``); without biases ``M_h = W_{Q,h}ᵀ W_{K,h}``
    (:func:`gaugekit.gauge.head_logit_bilinears` of ``W̃_Q, W̃_K``).
    """
    out = []
    with torch.no_grad():
        for site in sites:
            qk = qk_tensors(model, site)
            out.append(head_logit_bilinears(_columns(qk.wq, qk.bq),
                                            _columns(qk.wk, qk.bk, qk.bias_k), site.num_heads))
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
