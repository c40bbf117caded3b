r"""The gauge group, its actions on factorizations, its invariants and distances.

A factorization ``W = U Vᵀ`` with ``U`` (n×k) and ``V`` (m×k) does not determine its factors:

* every ``A ∈ GL(k)`` acts as ``(U, V) → (U A, V A⁻ᵀ)`` and keeps ``W``;
* only ``Q ∈ O(k)`` also keeps ``‖U‖²_F + ‖V‖²_F``; on ``O(k)`` the action is ``(UQ, VQ)``.

A loss ``L(U Vᵀ)`` is therefore invariant under ``(U, V) → (UQ, VQ)`` and its gradients are
covariant, ``∇_U L(UQ, VQ) = (∇_U L) Q``. The same structure appears at every interface of a
deep linear chain ``W = W_L ⋯ W_1`` and per head in attention, where the logits only see
``W_Qᵀ W_K`` of each head.

Everything here takes matrices or stacks of matrices (leading batch dimensions); every random
draw comes from an explicit :class:`torch.Generator`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "GramSpectra",
    "balancedness",
    "balancedness_norm",
    "chain_product",
    "gauge_distance",
    "gl_act",
    "gram_spectra",
    "haar_orthogonal",
    "head_logit_bilinears",
    "interface_act",
    "orthogonality_defect",
    "procrustes_rotation",
    "product",
    "random_gl",
    "random_head_rotations",
    "relative_distance",
    "rotate_factors",
    "rotate_head_rows",
    "rotate_heads",
]


# --------------------------------------------------------------------------------------------
# random group elements
# --------------------------------------------------------------------------------------------


def haar_orthogonal(
    k: int,
    *,
    generator: torch.Generator,
    batch_shape: Sequence[int] = (),
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""A Haar-distributed ``Q ∈ O(k)``, or a stack of independent ones ``(*batch_shape, k, k)``.

    Draw ``Z`` with i.i.d. standard normal entries, factor ``Z = Q₀ R`` (QR) and return
    ``Q = Q₀ diag(sign(diag R))``. The sign fix makes the QR factorization unique, which is what
    makes ``Q`` exactly Haar on the whole of ``O(k)`` (both determinant signs, each with
    probability ½) rather than biased by the QR routine's sign convention (Mezzadri 2007).
    The numbers are drawn on ``generator.device`` and then moved to ``device``.
    """
    if k < 1:
        raise ValueError(f"Invalid k: {k!r}; expected an integer >= 1")
    Z = torch.randn((*batch_shape, k, k), generator=generator, dtype=dtype, device=generator.device)
    Z = Z.to(device) if device is not None else Z
    Q, R = torch.linalg.qr(Z)
    signs = torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return Q * signs.unsqueeze(-2)


def random_gl(
    k: int,
    *,
    generator: torch.Generator,
    condition_number: float = 4.0,
    batch_shape: Sequence[int] = (),
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""A random well-conditioned ``A ∈ GL(k)`` that is far from orthogonal.

    ``A = Q₁ diag(s) Q₂`` with ``Q₁, Q₂`` Haar and singular values ``s`` spaced geometrically
    from ``κ^{-1/2}`` to ``κ^{1/2}`` (``κ = condition_number``), so that ``cond(A) = κ`` exactly
    and ``|det A| = 1`` for ``k ≥ 2``. For ``k = 1`` the single singular value is ``κ^{1/2}``.
    With ``κ > 1`` the element is never orthogonal, which is what a negative control needs.
    """
    if k < 1:
        raise ValueError(f"Invalid k: {k!r}; expected an integer >= 1")
    if not condition_number >= 1.0:
        raise ValueError(f"Invalid condition_number: {condition_number!r}; expected a float >= 1")
    draw = dict(generator=generator, batch_shape=batch_shape, dtype=dtype, device=device)
    Q1 = haar_orthogonal(k, **draw)
    Q2 = haar_orthogonal(k, **draw)
    half_log = 0.5 * math.log(condition_number)
    if k == 1:
        log_s = torch.full((1,), half_log, dtype=dtype, device=Q1.device)
    else:
        log_s = torch.linspace(-half_log, half_log, k, dtype=dtype, device=Q1.device)
    return (Q1 * torch.exp(log_s)) @ Q2


def orthogonality_defect(Q: Tensor) -> Tensor:
    r"""``‖QᵀQ − I‖_F``: zero exactly on ``O(k)``."""
    eye = torch.eye(Q.shape[-1], dtype=Q.dtype, device=Q.device)
    return torch.linalg.matrix_norm(Q.mT @ Q - eye)


# --------------------------------------------------------------------------------------------
# actions
# --------------------------------------------------------------------------------------------


def rotate_factors(U: Tensor, V: Tensor, Q: Tensor) -> tuple[Tensor, Tensor]:
    r"""The orthogonal gauge ``(U, V) → (UQ, VQ)``: keeps ``U Vᵀ`` and ``‖U‖² + ‖V‖²``."""
    return U @ Q, V @ Q


def gl_act(U: Tensor, V: Tensor, A: Tensor) -> tuple[Tensor, Tensor]:
    r"""The general-linear gauge ``(U, V) → (U A, V A⁻ᵀ)``: keeps ``U Vᵀ`` for every ``A ∈ GL(k)``.

    ``V A⁻ᵀ`` is computed as ``(A⁻¹ Vᵀ)ᵀ`` by a linear solve, not by forming the inverse.
    On ``O(k)`` this is :func:`rotate_factors` (``Q⁻ᵀ = Q``).
    """
    return U @ A, torch.linalg.solve(A, V.mT).mT


def chain_product(weights: Sequence[Tensor]) -> Tensor:
    r"""``W = W_L ⋯ W_2 W_1`` for ``weights = [W_1, …, W_L]`` (``W_i`` maps layer i−1 to i)."""
    if len(weights) == 0:
        raise ValueError("Invalid weights: expected at least one matrix")
    W = weights[0]
    for W_i in weights[1:]:
        W = W_i @ W
    return W


def interface_act(weights: Sequence[Tensor], gauges: Sequence[Tensor | None]) -> list[Tensor]:
    r"""The depth-``L`` interface gauge on ``W = W_L ⋯ W_1``.

    ``gauges[i]`` (``i = 0 … L−2``) is an invertible ``A_i`` acting at the interface between
    ``W_{i+1}`` and ``W_{i+2}`` (1-based layers), i.e. on the hidden space of width
    ``weights[i].shape[-2]``: ``(W_{i+2}, W_{i+1}) → (W_{i+2} A_i⁻¹, A_i W_{i+1})``. All interfaces
    act at once, ``W_j → A_j W_j A_{j−1}⁻¹`` (0-based, missing ends are identities); ``None``
    leaves an interface alone. The product ``W`` is unchanged for any invertible ``A_i``; with
    orthogonal ``A_i`` every ``‖W_j‖_F`` is unchanged too, a general ``A_i`` changes them.
    """
    L = len(weights)
    if len(gauges) != L - 1:
        raise ValueError(
            f"Invalid gauges: expected {L - 1} entries (one per interface), got {len(gauges)}"
        )
    out = []
    for j, W_j in enumerate(weights):
        new = W_j
        if j < L - 1 and gauges[j] is not None:
            new = gauges[j] @ new
        if j > 0 and gauges[j - 1] is not None:
            # new @ A⁻¹ = (A⁻ᵀ newᵀ)ᵀ = solve(Aᵀ, newᵀ)ᵀ
            new = torch.linalg.solve(gauges[j - 1].mT, new.mT).mT
        out.append(new)
    return out


def _split_heads(W: Tensor, num_heads: int) -> Tensor:
    """``(num_heads·d_head, d_in)`` in torch Linear layout → ``(num_heads, d_head, d_in)``."""
    if W.shape[-2] % num_heads != 0:
        raise ValueError(
            f"Invalid num_heads: {num_heads!r}; expected a divisor of the output width "
            f"{W.shape[-2]}"
        )
    return W.reshape(*W.shape[:-2], num_heads, W.shape[-2] // num_heads, W.shape[-1])


def random_head_rotations(
    layout: Sequence[tuple[int, int]],
    *,
    generator: torch.Generator,
    haar: bool = True,
    dtype: torch.dtype = torch.float64,
) -> list[Tensor]:
    r"""One ``(H, d_head, d_head)`` stack of ``A_h ∈ O(d_head)`` per site of ``layout``
    (``(num_heads, d_head)`` pairs), drawn site by site (layer by layer), then head by head.

    ``haar=True``: exactly Haar, :func:`haar_orthogonal` of the whole stack (one Gaussian draw,
    sign-fixed QR), the twin audit's draw. ``haar=False``: the paper's draw, the Q factor of the
    QR of each head's ``d_head × d_head`` Gaussian as it comes (no sign fix, float64, then cast).
    """
    out = []
    for num_heads, d_head in layout:
        if haar:
            out.append(haar_orthogonal(d_head, generator=generator, batch_shape=(num_heads,),
                                       dtype=dtype))
            continue
        heads = [torch.linalg.qr(torch.randn(d_head, d_head, generator=generator,
                                             dtype=torch.float64)).Q for _ in range(num_heads)]
        out.append(torch.stack(heads).to(dtype))
    return out


def rotate_head_rows(t: Tensor, R: Tensor) -> Tensor:
    r"""``A_h t_h`` for every head: the rows ``h·d_head … (h+1)·d_head − 1`` of ``t`` times
    ``R[h]`` (``R`` is ``(H, d_head, d_head)``).

    ``t`` is a weight ``(…, H·d_head, c)`` in torch ``nn.Linear`` layout or a bias vector
    ``(H·d_head,)``; the product is taken in the dtype of ``t`` and ``R`` as given.
    """
    H, dh = R.shape[-3], R.shape[-1]
    if t.ndim == 1:
        return (R @ t.reshape(H, dh, 1)).reshape(t.shape)
    return (R @ t.reshape(*t.shape[:-2], H, dh, t.shape[-1])).reshape(t.shape)


def rotate_heads(
    W_Q: Tensor, W_K: Tensor, R: Tensor, num_heads: int
) -> tuple[Tensor, Tensor]:
    r"""Per-head rotation of query and key weights in torch ``nn.Linear`` layout.

    ``W_Q, W_K`` have shape ``(num_heads·d_head, d_in)``; the rows of head ``h`` are
    ``h·d_head … (h+1)·d_head − 1``. ``R`` has shape ``(num_heads, d_head, d_head)``. Head ``h``
    maps to ``(R_h W_{Q,h}, R_h W_{K,h})`` (:func:`rotate_head_rows`), which keeps its logit
    bilinear form ``W_{Q,h}ᵀ W_{K,h}`` when ``R_h ∈ O(d_head)``.
    """
    for W in (W_K, W_Q):  # raises for a width that num_heads does not divide
        d_head = _split_heads(W, num_heads).shape[-2]
    if R.shape[-3:] != (num_heads, d_head, d_head):
        raise ValueError(
            f"Invalid R: shape {tuple(R.shape)}; expected (num_heads, d_head, d_head) = "
            f"({num_heads}, {d_head}, {d_head})"
        )
    return rotate_head_rows(W_Q, R), rotate_head_rows(W_K, R)


def head_logit_bilinears(W_Q: Tensor, W_K: Tensor, num_heads: int) -> Tensor:
    r"""``W_{Q,h}ᵀ W_{K,h}`` for every head, shape ``(num_heads, d_in, d_in)``.

    The logit of head ``h`` between inputs ``x`` and ``x'`` is ``xᵀ W_{Q,h}ᵀ W_{K,h} x'``
    (before the ``1/√d_head`` scale), so these matrices are the gauge invariants of attention.
    """
    Qh, Kh = _split_heads(W_Q, num_heads), _split_heads(W_K, num_heads)
    return Qh.mT @ Kh


# --------------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------------


class GramSpectra(NamedTuple):
    """Eigenvalues (descending) of ``UᵀU`` and ``VᵀV``; each is an ``O(k)`` invariant."""

    U: Tensor
    V: Tensor


def product(U: Tensor, V: Tensor) -> Tensor:
    r"""``W = U Vᵀ``: invariant under the whole ``GL(k)`` gauge."""
    return U @ V.mT


def gram_spectra(U: Tensor, V: Tensor) -> GramSpectra:
    r"""Spectra of ``UᵀU`` and ``VᵀV``: ``(UQ)ᵀ(UQ) = Qᵀ(UᵀU)Q`` is similar to ``UᵀU``."""
    spec_U = torch.linalg.eigvalsh(U.mT @ U).flip(-1)
    spec_V = torch.linalg.eigvalsh(V.mT @ V).flip(-1)
    return GramSpectra(spec_U, spec_V)


def balancedness(U: Tensor, V: Tensor) -> Tensor:
    r"""``B = UᵀU − VᵀV`` (k×k); under the gauge ``B → QᵀBQ``, and gradient flow conserves it."""
    return U.mT @ U - V.mT @ V


def balancedness_norm(U: Tensor, V: Tensor) -> Tensor:
    r"""``‖UᵀU − VᵀV‖_F``: an ``O(k)`` invariant (not a ``GL(k)`` one)."""
    return torch.linalg.matrix_norm(balancedness(U, V))


# --------------------------------------------------------------------------------------------
# distances
# --------------------------------------------------------------------------------------------


def relative_distance(
    A: Tensor, B: Tensor, *, symmetric: bool = False, dims: int | None = None
) -> Tensor:
    r"""``‖A − B‖_F / ‖B‖_F`` (``B`` is the reference), or with ``symmetric=True``
    ``‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))`` (twins, where neither is the reference).

    The norms are over the last ``dims`` dimensions (default: the last two, or all of a vector).
    A zero denominator is clamped to the dtype's ``tiny``, so the result is never NaN: 0 when
    both are zero; with a zero reference, ``‖A‖_F / tiny`` (huge unless ``A`` is zero too).
    """
    axes = (None if A.ndim < 2 else (-2, -1)) if dims is None else tuple(range(-dims, 0))
    num = torch.linalg.vector_norm(A - B, dim=axes)
    den = torch.linalg.vector_norm(B, dim=axes)
    if symmetric:
        den = 0.5 * (torch.linalg.vector_norm(A, dim=axes) + den)
    return num / den.clamp_min(torch.finfo(den.dtype).tiny)


def procrustes_rotation(A: Tensor, B: Tensor) -> Tensor:
    r"""The orthogonal Procrustes solution ``argmin_{Q ∈ O(k)} ‖A Q − B‖_F``.

    With the SVD ``Aᵀ B = P Σ Rᵀ`` the minimizer is ``Q = P Rᵀ`` (the polar factor of ``AᵀB``);
    it is unique when ``AᵀB`` is non-singular.
    """
    P, _, Rh = torch.linalg.svd(A.mT @ B, full_matrices=False)
    return P @ Rh


def gauge_distance(U1: Tensor, V1: Tensor, U2: Tensor, V2: Tensor) -> Tensor:
    r"""Gauge-invariant relative distance between factor pairs.

    ``d = min_{Q ∈ O(k)} ‖[U₁; V₁] Q − [U₂; V₂]‖_F / ‖[U₂; V₂]‖_F``: the two factors are stacked
    (the gauge rotates both by the same ``Q``) and aligned by :func:`procrustes_rotation`.
    It is zero exactly when ``(U₂, V₂) = (U₁Q, V₁Q)`` for some orthogonal ``Q``, it is unchanged
    when either pair is rotated, and it is a distance on the quotient by ``O(k)`` up to the
    normalisation by the second pair. It is *not* invariant under the ``GL(k)`` gauge.
    """
    X1 = torch.cat([U1, V1], dim=-2)
    X2 = torch.cat([U2, V2], dim=-2)
    Q = procrustes_rotation(X1, X2)
    return relative_distance(X1 @ Q, X2)
