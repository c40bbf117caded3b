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
    gram: bool | None = None,
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

    ``gram``: iterate on the Gram matrix (``_gram_newton_schulz``), the same polynomial of
    ``X₀`` with ``n × n`` products only, ``X₅ = Q X₀`` for a wide ``n × m`` matrix. ``None``
    (default): when the matrix is at least twice as wide as tall (``m ≥ 2n``: ``5n²m + 16n³``
    multiply-adds against ``5(2n²m + n³)``; 1.4 times fewer at ``m = 4n``) and the
    iteration runs in 32 or 64 bits (16-bit Gram iterations lose accuracy). The same result in
    exact arithmetic; in floating point within ``GRAM_NS_TOLERANCE`` (relative Frobenius
    distance) of the direct iteration, ``tests/gaugekit/test_linalg.py``.
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
    if gram is None:
        gram = (dtype is None or dtype.itemsize >= 4) and max(G.shape[-2:]) >= 2 * min(
            G.shape[-2:])
    if gram:
        X = X if dtype is None or dtype == G.dtype else X.to(dtype)
        Y = _gram_newton_schulz(X, steps, coefficients)
        return (Y.mT if transpose else Y).to(G.dtype).reshape(G.shape)
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


#: the stated bound on the relative Frobenius distance between the Gram iteration and the direct
#: one (5 steps, the default coefficients), by dtype of the iteration: float64 round-off, and in
#: float32 ten times what the tests measure on matrices whose singular values span 10⁻⁹ to 1
GRAM_NS_TOLERANCE: dict[torch.dtype, float] = {torch.float64: 1e-11, torch.float32: 1e-4}


def _gram_newton_schulz(X: Tensor, steps: int, coefficients: tuple[float, float, float]) -> Tensor:
    r"""Newton–Schulz on the Gram matrix of a stack of wide matrices ``X₀`` (``n × m``,
    ``n ≤ m``, normalised). Each step ``X ← P(A) X`` with ``A = X Xᵀ`` and
    ``P(A) = aI + bA + cA²`` keeps ``X_k = Q_k X₀``, so

    ``P_k = aI + bA_k + cA_k²``,  ``Q_{k+1} = P_k Q_k``,  ``A_{k+1} = P_k A_k P_k``

    (``A₀ = X₀X₀ᵀ``, ``Q₀ = I``; ``P_k`` is a polynomial in ``A_k``, so ``A_{k+1} = X_{k+1}
    X_{k+1}ᵀ``), and ``X_steps = Q_steps X₀``. Two steps before the end it restarts from
    ``X = Q X₀``, ``A = X Xᵀ`` (in float32 the product ``Q`` of many steps loses the small
    singular directions: 2e-4 from the direct iteration without the restart, 7e-6 with it,
    which is the direct iteration's own float32 error). Products: ``5 n²m + (4·steps − 4) n³``
    against the direct ``steps (2n²m + n³)``. Gauge: ``A₀`` and every ``Q_k`` are invariant
    under ``X₀ → X₀ Q``, so ``X → X Q`` as in the direct iteration."""
    a, b, c = coefficients
    if steps == 0:
        return X
    restart = steps - 2 if steps >= 4 else -1
    A = torch.bmm(X, X.mT)
    Q = None
    for k in range(steps):
        if k == restart:
            X = torch.bmm(Q, X)
            A, Q = torch.bmm(X, X.mT), None
        P = torch.baddbmm(A, A, A, beta=b, alpha=c)
        P.diagonal(dim1=-2, dim2=-1).add_(a)
        Q = P if Q is None else torch.bmm(P, Q)
        if k < steps - 1 and k + 1 != restart:
            A = torch.bmm(P, torch.bmm(A, P))
    return torch.bmm(Q, X)


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
