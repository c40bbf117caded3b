"""gaugekit.linalg: Newton–Schulz, matrix sign, symmetric spectral functions, ranks and norms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import BROKEN, generator, haar, rel
from torch.testing import assert_close

from gaugekit.linalg import (
    NS_COEFFICIENTS,
    effective_rank,
    gram_preconditioned,
    msign,
    newton_schulz,
    nuclear_norm,
    singular_value_map,
    singular_values,
    sym_matrix_function,
    sym_matrix_power,
    symmetrize,
)

F64 = {"dtype": torch.float64}
CUBIC = (1.5, -0.5, 0.0)  # classical Newton–Schulz: converges to msign on (0, √3)
SHAPES = [(6, 4), (5, 5), (3, 7)]


def _matrix(n, k, seed, cond=3.0):
    """A random n×k matrix with singular values spread over [1, cond]."""
    g = generator(seed)
    U, _ = torch.linalg.qr(torch.randn(n, min(n, k), generator=g, **F64))
    V, _ = torch.linalg.qr(torch.randn(k, min(n, k), generator=g, **F64))
    s = torch.linspace(1.0, cond, min(n, k), **F64)
    return (U * s) @ V.T


@pytest.mark.parametrize("shape", SHAPES)
def test_cubic_newton_schulz_converges_to_msign(shape):
    G = _matrix(*shape, seed=1)
    assert_close(newton_schulz(G, steps=40, coefficients=CUBIC), msign(G), atol=1e-12, rtol=0)
    # negative control: a short truncation is visibly not there yet
    assert rel(newton_schulz(G, steps=2, coefficients=CUBIC), msign(G)) > BROKEN


@pytest.mark.parametrize("shape", SHAPES)
def test_quintic_newton_schulz_lands_in_the_muon_band(shape):
    """Default (Muon) coefficients: singular values near 1 (not exactly), vectors those of G."""
    G = _matrix(*shape, seed=2)
    X = newton_schulz(G)
    s = singular_values(X)
    assert s.min() > 0.6 and s.max() < 1.25
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    core = U.T @ X @ Vh.T  # diagonal when X shares G's singular vectors
    off = core - torch.diag_embed(torch.diagonal(core))
    assert off.abs().max() < 1e-12
    assert NS_COEFFICIENTS == (3.4445, -4.7750, 2.0315)


def test_newton_schulz_zero_steps_is_the_frobenius_normalisation():
    G = _matrix(4, 3, seed=3)
    assert_close(newton_schulz(G, steps=0, eps=0.0), G / G.norm(), atol=1e-15, rtol=0)


def test_newton_schulz_on_a_stack_equals_the_loop_and_transposes_consistently():
    G = torch.randn(3, 6, 4, generator=generator(4), **F64)
    stacked = newton_schulz(G, steps=3)
    for i in range(3):
        assert_close(stacked[i], newton_schulz(G[i], steps=3), atol=1e-14, rtol=0)
    assert_close(newton_schulz(G.mT, steps=3), stacked.mT, atol=1e-14, rtol=0)


@pytest.mark.parametrize("shape", [(2, 5, 5), (2, 7, 4), (2, 3, 6)])
def test_newton_schulz_in_place_path_gives_the_autograd_paths_bits(shape):
    """Without autograd the scalings run in place; with it, out of place, and gradients flow.
    Both must give the same bits (the Muon records depend on them)."""
    G = torch.randn(*shape, generator=generator(5), **F64)
    with torch.no_grad():
        fast = newton_schulz(G)
    leaf = G.clone().requires_grad_()
    tracked = newton_schulz(leaf)
    assert torch.equal(fast, tracked.detach())
    tracked.square().sum().backward()
    assert leaf.grad is not None and bool(leaf.grad.abs().sum() > 0)


def test_newton_schulz_rejects_bad_input():
    with pytest.raises(ValueError, match="Invalid G"):
        newton_schulz(torch.ones(3, **F64))
    with pytest.raises(ValueError, match="Invalid steps"):
        newton_schulz(torch.ones(3, 3, **F64), steps=-1)


@pytest.mark.parametrize("shape", SHAPES)
def test_msign_is_the_polar_factor(shape):
    G = _matrix(*shape, seed=5)
    S = msign(G)
    r = min(shape)
    small = S.T @ S if shape[0] >= shape[1] else S @ S.T
    assert_close(small, torch.eye(r, **F64), atol=1e-13, rtol=0)
    if shape[0] >= shape[1]:  # independent formula: G (GᵀG)^{-1/2}
        assert_close(S, G @ sym_matrix_power(G.T @ G, -0.5, eps=1e-14), atol=1e-12, rtol=0)
    # polar: G = S (SᵀG) with SᵀG symmetric positive semi-definite
    P = S.T @ G
    assert_close(P, P.T, atol=1e-13, rtol=0)
    assert torch.linalg.eigvalsh(symmetrize(P)).min() > -1e-12


def test_symmetrize():
    M = torch.randn(4, 4, generator=generator(6), **F64)
    S = symmetrize(M)
    assert_close(S, S.T, atol=0, rtol=0)
    assert_close(S + 0.5 * (M - M.T), M, atol=1e-15, rtol=0)


def test_sym_matrix_power_roots_and_inverse():
    X = torch.randn(7, 4, generator=generator(7), **F64)
    M = X.T @ X
    half = sym_matrix_power(M, 0.5, eps=1e-14)
    assert_close(half @ half, M, atol=1e-12, rtol=0)
    assert_close(sym_matrix_power(M, -1.0, eps=1e-14) @ M, torch.eye(4, **F64), atol=1e-11, rtol=0)
    quarter = sym_matrix_power(M, -0.25, eps=1e-14)
    assert_close(quarter @ quarter @ quarter @ quarter @ M, torch.eye(4, **F64), atol=1e-10,
                 rtol=0)


def test_sym_matrix_power_clamps_a_singular_matrix():
    v = torch.tensor([[1.0], [2.0], [2.0]], **F64)
    M = v @ v.T  # rank one, eigenvalues 9, 0, 0
    out = sym_matrix_power(M, -0.5, eps=1e-4)
    assert torch.isfinite(out).all()
    assert_close(torch.linalg.eigvalsh(out).max(), torch.tensor(100.0, **F64), atol=1e-8, rtol=0)


def test_sym_matrix_function_matches_matrix_exp_and_commutes_with_conjugation():
    X = torch.randn(5, 5, generator=generator(8), **F64)
    M = symmetrize(X)
    assert_close(sym_matrix_function(M, torch.exp), torch.linalg.matrix_exp(M), atol=1e-12,
                 rtol=1e-12)
    R = X.T @ X
    Q = haar(5, seed=9)
    f = lambda lam: (lam + 1.0) ** -0.25
    assert_close(sym_matrix_function(Q.T @ R @ Q, f), Q.T @ sym_matrix_function(R, f) @ Q,
                 atol=1e-12, rtol=0)
    # negative control: an entrywise function is not conjugation-covariant
    assert rel(torch.exp(Q.T @ R @ Q), Q.T @ torch.exp(R) @ Q) > BROKEN


def test_singular_values_descending_and_match_numpy():
    G = torch.randn(6, 4, generator=generator(10), **F64)
    s = singular_values(G)
    assert (s[:-1] >= s[1:]).all()
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(G.numpy(), compute_uv=False), rtol=1e-12)


def test_effective_rank_values():
    Q = haar(6, seed=11)
    for r in (1, 2, 4):
        W = 3.0 * Q[:, :r] @ Q[:, :r].T
        assert_close(effective_rank(W), torch.tensor(float(r), **F64), atol=1e-10, rtol=0)
    G = _matrix(6, 4, seed=12)
    assert 1.0 < effective_rank(G) < 4.0
    assert_close(effective_rank(5 * G), effective_rank(G), atol=1e-12, rtol=0)
    stacked = effective_rank(torch.stack([G, 2 * G]))
    assert stacked.shape == (2,)


def test_nuclear_norm_matches_torch():
    G = torch.randn(5, 3, generator=generator(13), **F64)
    assert_close(nuclear_norm(G), torch.linalg.matrix_norm(G, ord="nuc"), atol=1e-13, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_singular_value_map_identity_and_sign(shape):
    G = _matrix(*shape, seed=14)
    assert_close(singular_value_map(G, lambda s: s), G, atol=1e-13, rtol=0)
    assert_close(singular_value_map(G, torch.ones_like), msign(G), atol=1e-13, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_gram_preconditioned_matches_its_singular_value_form(shape):
    G = _matrix(*shape, seed=15)
    cases = [
        (lambda lam: torch.ones_like(lam), lambda s: s),
        (lambda lam: lam**-0.5, torch.ones_like),
        (lambda lam: 1.0 / (lam + 0.3), lambda s: s / (s**2 + 0.3)),
    ]
    for psi, h in cases:
        assert_close(gram_preconditioned(G, psi), singular_value_map(G, h), atol=1e-12, rtol=0)
    # the null space of GGᵀ (tall G) must be dropped, not clamped: ψ(0) = ∞ there
    assert torch.isfinite(gram_preconditioned(G, lambda lam: lam**-0.5)).all()
    # negative control: a psi that is not the advertised one gives a different map
    assert rel(gram_preconditioned(G, lambda lam: lam**-0.25), msign(G)) > BROKEN


def _spectrum_matrix(n: int, m: int, kind: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "gauss":
        return torch.randn(n, m, generator=g, dtype=torch.float64)
    U, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(m, n, generator=g, dtype=torch.float64))
    s = {"lowrank": torch.cat([torch.rand(n // 4, generator=g, dtype=torch.float64) + 0.5,
                               torch.zeros(n - n // 4, dtype=torch.float64)]),
         "wide": torch.logspace(0, -6, n, dtype=torch.float64),
         "tiny": torch.logspace(-3, -9, n, dtype=torch.float64)}[kind]
    return U @ torch.diag(s) @ V.T


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("kind", ["gauss", "lowrank", "wide", "tiny"])
@pytest.mark.parametrize(("n", "m"), [(32, 128), (48, 100)])
def test_the_gram_iteration_is_the_direct_one_within_its_stated_bound(n, m, kind, dtype):
    """The Gram iteration (Muon's default for matrices at least twice as wide as tall, in 32
    and 64 bits) against today's direct iteration, both orientations: within
    ``GRAM_NS_TOLERANCE`` (float64 round-off; float32 1e-4, measured 1.5e-5 at worst on these
    spectra, which span 10⁻⁹ to 1)."""
    from gaugekit.linalg import GRAM_NS_TOLERANCE

    G = _spectrum_matrix(n, m, kind, seed=n + m).to(dtype)
    for x in (G, G.T, torch.stack([G, 2 * G])):
        direct, gram = newton_schulz(x, gram=False), newton_schulz(x, gram=True)
        distance = ((gram - direct).norm() / direct.norm()).item()
        assert distance <= GRAM_NS_TOLERANCE[dtype], distance
        assert torch.equal(newton_schulz(x), gram)  # the default for a wide matrix
    # negative control: one step fewer is far outside the bound
    reference, short = newton_schulz(G, gram=False), newton_schulz(G, steps=4, gram=True)
    gap = ((short - reference).norm() / reference.norm()).item()
    assert gap > 100 * GRAM_NS_TOLERANCE[dtype], gap


def test_the_gram_iteration_is_equivariant_and_square_matrices_keep_the_direct_one():
    g = torch.Generator().manual_seed(4)
    G = torch.randn(20, 60, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(60, 60, generator=g, dtype=torch.float64))
    P, _ = torch.linalg.qr(torch.randn(20, 20, generator=g, dtype=torch.float64))
    torch.testing.assert_close(newton_schulz(G @ Q, gram=True), newton_schulz(G, gram=True) @ Q,
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(newton_schulz(P @ G, gram=True), P @ newton_schulz(G, gram=True),
                               atol=1e-12, rtol=0)
    S = torch.randn(30, 40, generator=g, dtype=torch.float64)  # not twice as wide: direct
    assert torch.equal(newton_schulz(S), newton_schulz(S, gram=False))
    low = torch.randn(16, 64, generator=g).bfloat16()  # 16-bit iterations: direct
    assert torch.equal(newton_schulz(low.float(), dtype=torch.bfloat16),
                       newton_schulz(low.float(), dtype=torch.bfloat16, gram=False))
