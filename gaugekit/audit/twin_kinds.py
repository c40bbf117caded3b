r"""The twins of the audit: gauge (``A_h`` per head), identity (``A = I``) and noise twins.

Each is a deep copy of the model; see :mod:`gaugekit.audit.heads` for why the gauge twin is the
same function and what the other two are for. The rotation is drawn by
:func:`gaugekit.gauge.random_head_rotations` and applied by :func:`gaugekit.gauge.rotate_head_rows`
(in float64, rounded back to the parameter's dtype).
"""

# Developer note (layers, gaugekit/__init__.py): floor 4, audit/, on optim/ and gauge.

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from gaugekit.audit.sites import QKSite, SiteSpec, qk_tensors, resolve_sites
from gaugekit.gauge import orthogonality_defect, random_head_rotations, rotate_head_rows

__all__ = ["TWIN_KINDS", "draw_head_rotations", "gauge_twin", "identity_twin", "noise_twin"]

#: The twin kinds :func:`~gaugekit.audit.heads.audit_twins` knows.
TWIN_KINDS: tuple[str, ...] = ("gauge", "identity", "noise")


def draw_head_rotations(
    sites: Sequence[QKSite], *, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> list[Tensor]:
    """Haar ``A_h ∈ O(d_head)``, one ``(H, d_head, d_head)`` stack per site, drawn site by site
    (layer by layer) then head by head from ``generator``
    (:func:`gaugekit.gauge.random_head_rotations`)."""
    return random_head_rotations([(s.num_heads, s.d_head) for s in sites], generator=generator,
                                 dtype=dtype)


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
    resolved = resolve_sites(model, sites, num_heads, check_structure)
    if rotations is None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(
                f"Invalid generator: {generator!r}; expected a torch.Generator (or pass "
                f"rotations)"
            )
        rotations = draw_head_rotations(resolved, generator=generator)
    _check_rotations(rotations, resolved)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for site, A in zip(resolved, rotations, strict=True):
            for t in qk_tensors(twin, site).tensors():
                work = t.dtype if t.device.type == "mps" else torch.float64
                t.copy_(rotate_head_rows(t.to(work), A.to(device=t.device, dtype=work)))
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
    resolved = resolve_sites(model, sites, num_heads, check_structure)
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
    resolved = resolve_sites(model, sites, num_heads, check_structure)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for site in resolved:
            for t in qk_tensors(twin, site).tensors():
                noise = torch.randn(
                    tuple(t.shape), generator=generator, dtype=torch.float64,
                    device=generator.device,
                )
                t.add_((scale * noise).to(device=t.device, dtype=t.dtype))
    return twin
