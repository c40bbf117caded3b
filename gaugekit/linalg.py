"""Small linear-algebra kernels shared by optimizers, problems and tests.

Every function accepts a matrix or a stack of matrices: leading dimensions are batch
dimensions and the last two are the matrix. Nothing here keeps state.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

#: Quintic Newton–Schulz coefficients (a, b, c) used by Muon and by the paper.
NS_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)


def newton_schulz(
    G: Tensor,
    steps: int = 5,
    eps: float = 1e-7,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    *,
    dtype: torch.dtype | None = None,
) -> Tensor:
    r"""Approximate the matrix sign ``msign(G) = U Vᵀ`` (``G = U Σ Vᵀ``) by quintic Newton–Schulz.

    ``X₀ = G / (‖G‖_F + ε)``; then ``steps`` times ``X ← a X + (b A + c A²) X`` with ``A = X Xᵀ``.
    A tall matrix (more rows than columns) is transposed first so that ``A`` is the small Gram
    matrix, and transposed back. The iteration maps ``X = U Σ Vᵀ`` to ``U p(Σ) Vᵀ`` for an odd
    polynomial ``p``; hence for any orthogonal ``Q`` acting on the right, ``NS(G Q) = NS(G) Q``
    at every truncation (Gauge: equivariant).

    ``dtype`` (e.g. ``torch.bfloat16``, as ``torch.optim.Muon`` and Keller Jordan's Muon): the
    iteration runs in that dtype (``X₀`` is normalised in ``G``'s dtype, then cast; each step is
    torch's ``baddbmm`` form ``A ← X Xᵀ``, ``B ← b A + c A A``, ``X ← a X + B X``) and the result
    is cast back to ``G``'s dtype. Equivariant in exact arithmetic; in floating point the gauge
    then holds to that dtype's round-off only. ``None`` (default): ``G``'s dtype.
    """
    if G.ndim < 2:
        raise ValueError(
            f"Invalid G: shape {tuple(G.shape)}; expected a matrix or a stack of matrices"
        )
    if steps < 0:
        raise ValueError(f"Invalid steps: {steps!r}; expected an integer >= 0")
    a, b, c = coefficients
    norm = torch.linalg.matrix_norm(G, ord="fro", keepdim=True)
    X = (G / (norm + eps)).reshape(-1, *G.shape[-2:])
    transpose = G.shape[-2] > G.shape[-1]
    if transpose:
        X = X.mT
    if dtype is not None and dtype != G.dtype:
        X = X.to(dtype)
        for _ in range(steps):
            A = torch.bmm(X, X.mT)
            X = torch.baddbmm(X, torch.baddbmm(A, A, A, beta=b, alpha=c), X, beta=a)
        return (X.mT if transpose else X).to(G.dtype).reshape(G.shape)
    # One 3-d ``bmm`` per product; without autograd the scalings are done in place. Both give
    # the bits of ``b A + c A²`` and ``a X + B X`` written out (the sums only swap operands).
    in_place = not (torch.is_grad_enabled() and G.requires_grad)
    for _ in range(steps):
        A = torch.bmm(X, X.mT)
        if in_place:
            B = torch.bmm(A, A).mul_(c).add_(A.mul_(b))
            BX = torch.bmm(B, X)
            X = X.mul_(a).add_(BX)
        else:
            B = b * A + c * torch.bmm(A, A)
            X = a * X + torch.bmm(B, X)
    return (X.mT if transpose else X).reshape(G.shape)


def msign(G: Tensor) -> Tensor:
    """Exact matrix sign ``U Vᵀ`` from the thin SVD ``G = U Σ Vᵀ`` (polar factor)."""
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    return U @ Vh


def symmetrize(M: Tensor) -> Tensor:
    """``(M + Mᵀ) / 2``."""
    return 0.5 * (M + M.mT)


def sym_matrix_power(M: Tensor, power: float, eps: float = 1e-6) -> Tensor:
    r"""``M^power`` for a symmetric positive semi-definite ``M`` through ``eigh``.

    ``M`` is symmetrized first and its eigenvalues are clamped below at ``eps`` so that
    negative powers stay finite: ``Σᵢ max(λᵢ, ε)^power qᵢ qᵢᵀ``.
    """
    vals, vecs = torch.linalg.eigh(symmetrize(M))
    vals = vals.clamp_min(eps).pow(power)
    return (vecs * vals.unsqueeze(-2)) @ vecs.mT


def singular_values(W: Tensor) -> Tensor:
    """Singular values of ``W`` (or of each matrix in a stack), descending."""
    return torch.linalg.svdvals(W)


def effective_rank(W: Tensor) -> Tensor:
    r"""Effective rank ``exp(H(p))`` with ``pᵢ = σᵢ / Σⱼ σⱼ`` (Roy & Vetterli).

    Equals ``r`` for a matrix with ``r`` equal non-zero singular values, 1 for rank one.
    """
    s = singular_values(W)
    p = s / s.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    entropy = -(p * torch.log(p.clamp_min(torch.finfo(s.dtype).tiny))).sum(dim=-1)
    return torch.exp(entropy)


def nuclear_norm(W: Tensor) -> Tensor:
    """Sum of singular values."""
    return singular_values(W).sum(dim=-1)


def sym_matrix_function(M: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
    r"""Spectral function ``f(M) = Σᵢ f(λᵢ) qᵢ qᵢᵀ`` of a symmetric ``M = Σᵢ λᵢ qᵢ qᵢᵀ``.

    ``M`` is symmetrized first; ``fn`` maps the tensor of eigenvalues elementwise. Because
    ``f(QᵀMQ) = Qᵀ f(M) Q`` for orthogonal ``Q``, every such function is conjugation-covariant,
    the property that keeps Shampoo's roots gauge-covariant.
    """
    vals, vecs = torch.linalg.eigh(symmetrize(M))
    return (vecs * fn(vals).unsqueeze(-2)) @ vecs.mT


def singular_value_map(G: Tensor, h: Callable[[Tensor], Tensor]) -> Tensor:
    r"""``Σᵢ h(σᵢ) uᵢ vᵢᵀ`` for the thin SVD ``G = Σᵢ σᵢ uᵢ vᵢᵀ`` (a spectral transfer function).

    ``h(s) = s`` gives ``G`` back, ``h ≡ 1`` gives :func:`msign`. Every such map is
    gauge-equivariant: ``GQ`` has singular vectors ``uᵢ`` and ``Qᵀvᵢ``.
    """
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)
    return (U * h(S).unsqueeze(-2)) @ Vh


def gram_preconditioned(
    G: Tensor, psi: Callable[[Tensor], Tensor], support_tol: float | None = None
) -> Tensor:
    r"""The Gram-determined left preconditioner ``ψ(G Gᵀ) G`` on the support of ``G``.

    With ``G Gᵀ = Σᵢ λᵢ qᵢ qᵢᵀ`` this is ``Σ_{λᵢ > tol} ψ(λᵢ) qᵢ qᵢᵀ G``; eigenvectors with
    ``λᵢ ≤ tol`` satisfy ``qᵢᵀ G = 0`` and are dropped so that ``ψ`` may be singular at 0
    (e.g. ``ψ(λ) = λ^{-1/2}``, which gives :func:`msign`). It equals
    ``Σᵢ h(σᵢ) uᵢ vᵢᵀ`` with ``h(s) = s ψ(s²)``. The default ``tol`` is
    ``max(λ) · max(n, k) · machine epsilon``. For the gauge acting on the right of ``G``
    (``G → G Q``) ``G Gᵀ`` is invariant, so every such map is equivariant.
    """
    vals, vecs = torch.linalg.eigh(G @ G.mT)
    if support_tol is None:
        scale = vals.amax(dim=-1, keepdim=True).clamp_min(0)
        tol = scale * max(G.shape[-2:]) * torch.finfo(G.dtype).eps
    else:
        tol = torch.full_like(vals[..., :1], support_tol)
    keep = vals > tol
    safe = torch.where(keep, vals, torch.ones_like(vals))
    weights = torch.where(keep, psi(safe), torch.zeros_like(vals))
    return (vecs * weights.unsqueeze(-2)) @ (vecs.mT @ G)
