"""gaugekit.gauge: Haar draws, group actions, invariants and distances."""

from __future__ import annotations

import pytest
import torch
from helpers import BROKEN, EXACT, generator, random_factors, rel
from torch.testing import assert_close

from gaugekit.gauge import (
    balancedness,
    balancedness_norm,
    chain_product,
    gauge_distance,
    gl_act,
    gram_spectra,
    haar_orthogonal,
    head_logit_bilinears,
    interface_act,
    orthogonality_defect,
    procrustes_rotation,
    product,
    random_gl,
    relative_distance,
    rotate_factors,
    rotate_heads,
)

F64 = {"dtype": torch.float64}


# --------------------------------------------------------------------------------------------
# Haar
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_haar_is_orthogonal(k):
    Q = haar_orthogonal(k, generator=generator(k))
    assert Q.shape == (k, k) and Q.dtype == torch.float64
    assert_close(Q.T @ Q, torch.eye(k, **F64), atol=1e-13, rtol=0)
    assert_close(Q @ Q.T, torch.eye(k, **F64), atol=1e-13, rtol=0)


def test_haar_batched_dtype_and_device():
    Q = haar_orthogonal(4, generator=generator(0), batch_shape=(3, 2), dtype=torch.float32,
                        device="cpu")
    assert Q.shape == (3, 2, 4, 4) and Q.dtype == torch.float32 and Q.device.type == "cpu"
    assert_close(Q.mT @ Q, torch.eye(4).expand(3, 2, 4, 4), atol=1e-5, rtol=0)
    # the members of the stack are independent draws, not copies
    assert (Q[0, 0] - Q[1, 1]).abs().max() > 0.1


def test_haar_is_reproducible_from_the_generator():
    a = haar_orthogonal(5, generator=generator(7))
    b = haar_orthogonal(5, generator=generator(7))
    c = haar_orthogonal(5, generator=generator(8))
    assert torch.equal(a, b)
    assert (a - c).abs().max() > 0.1
    # the generator advances: two draws from one generator differ
    g = generator(7)
    first, second = haar_orthogonal(5, generator=g), haar_orthogonal(5, generator=g)
    assert torch.equal(first, a) and (first - second).abs().max() > 0.1


def test_haar_covers_both_determinant_signs_and_has_centred_entries():
    Q = haar_orthogonal(3, generator=generator(1), batch_shape=(2000,))
    dets = torch.linalg.det(Q)
    assert_close(dets.abs(), torch.ones(2000, **F64), atol=1e-12, rtol=0)
    frac_negative = (dets < 0).double().mean().item()
    assert 0.4 < frac_negative < 0.6, frac_negative
    # Haar: E[Q_ij] = 0 for every entry (std of the mean over 2000 draws is about 0.013)
    assert Q.mean(dim=0).abs().max() < 0.06


def test_negative_control_qr_without_sign_fix_is_not_haar():
    """Plain QR (LAPACK's sign convention) gives det = +1 always for k = 3 and biased diagonals."""
    Z = torch.randn(2000, 3, 3, generator=generator(1), **F64)
    Q_plain, _ = torch.linalg.qr(Z)
    dets = torch.linalg.det(Q_plain)
    assert (dets > 0).all()
    assert torch.diagonal(Q_plain, dim1=-2, dim2=-1).mean(dim=0).abs().max() > 0.3


def test_haar_rejects_bad_k():
    with pytest.raises(ValueError, match="Invalid k"):
        haar_orthogonal(0, generator=generator(0))


# --------------------------------------------------------------------------------------------
# GL elements and actions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
def test_random_gl_has_the_requested_condition_number_and_is_not_orthogonal(k):
    A = random_gl(k, generator=generator(3), condition_number=9.0)
    s = torch.linalg.svdvals(A)
    if k > 1:
        assert_close(s[0] / s[-1], torch.tensor(9.0, **F64), atol=0, rtol=1e-12)
        assert_close(torch.linalg.det(A).abs(), torch.tensor(1.0, **F64), atol=0, rtol=1e-12)
    assert orthogonality_defect(A) > 0.5
    assert orthogonality_defect(haar_orthogonal(k, generator=generator(3))) < 1e-13


def test_random_gl_rejects_condition_below_one():
    with pytest.raises(ValueError, match="Invalid condition_number"):
        random_gl(3, generator=generator(0), condition_number=0.5)


def test_rotation_keeps_product_and_norm():
    U, V = random_factors(7, 5, 3, seed=0)
    Q = haar_orthogonal(3, generator=generator(1))
    UQ, VQ = rotate_factors(U, V, Q)
    assert_close(product(UQ, VQ), product(U, V), atol=1e-14, rtol=0)
    assert_close(UQ.norm() ** 2 + VQ.norm() ** 2, U.norm() ** 2 + V.norm() ** 2, atol=1e-14,
                 rtol=0)
    assert rel(UQ, U) > BROKEN  # the gauge moved the factors


def test_gl_action_keeps_product_but_not_norm():
    U, V = random_factors(7, 5, 3, seed=0)
    A = random_gl(3, generator=generator(2))
    UA, VA = gl_act(U, V, A)
    assert_close(product(UA, VA), product(U, V), atol=1e-13, rtol=0)
    gap = (UA.norm() ** 2 + VA.norm() ** 2) - (U.norm() ** 2 + V.norm() ** 2)
    assert gap.abs() > 1e-2
    assert_close(VA, V @ torch.linalg.inv(A).T, atol=1e-13, rtol=0)


def test_gl_action_on_an_orthogonal_element_is_the_rotation():
    U, V = random_factors(6, 4, 3, seed=5)
    Q = haar_orthogonal(3, generator=generator(5))
    for a, b in zip(gl_act(U, V, Q), rotate_factors(U, V, Q), strict=True):
        assert_close(a, b, atol=1e-14, rtol=0)


# --------------------------------------------------------------------------------------------
# depth-L interfaces and attention heads
# --------------------------------------------------------------------------------------------


def _chain(seed, widths=(5, 4, 3, 6)):
    g = generator(seed)
    pairs = zip(widths[:-1], widths[1:], strict=False)
    return [torch.randn(d_out, d_in, generator=g, **F64) for d_in, d_out in pairs]


def test_chain_product_order():
    W1, W2, W3 = _chain(0)
    # the two sides multiply in another order, so they agree to a few units of round-off of
    # the largest entry (about 7; one unit 2⁻⁵² · 7 ≈ 1.6e-15): the former 1e-14 was six units,
    # five times what this CPU gave; 1e-13 allows sixty
    assert_close(chain_product([W1, W2, W3]), W3 @ W2 @ W1, atol=1e-13, rtol=0)


def test_interface_action_keeps_the_product_and_orthogonal_keeps_each_norm():
    weights = _chain(0)
    gl = [random_gl(4, generator=generator(1)), random_gl(3, generator=generator(2))]
    orth = [haar_orthogonal(4, generator=generator(1)), haar_orthogonal(3, generator=generator(2))]
    W = chain_product(weights)
    for gauges in (gl, orth, [gl[0], None]):
        assert_close(chain_product(interface_act(weights, gauges)), W, atol=1e-13, rtol=0)
    for new, old in zip(interface_act(weights, orth), weights, strict=True):
        assert_close(new.norm(), old.norm(), atol=1e-13, rtol=0)
    norms_gl = [w.norm() for w in interface_act(weights, gl)]
    assert max(abs(a - w.norm()) for a, w in zip(norms_gl, weights, strict=True)) > 1e-2


def test_interface_action_on_one_side_only_changes_the_product():
    """Negative control: applying A to W_1 without A⁻¹ on W_2 is not a gauge."""
    weights = _chain(0)
    A = haar_orthogonal(4, generator=generator(1))
    broken = [A @ weights[0], weights[1], weights[2]]
    assert rel(chain_product(broken), chain_product(weights)) > BROKEN


def test_interface_action_rejects_a_wrong_number_of_gauges():
    with pytest.raises(ValueError, match="Invalid gauges"):
        interface_act(_chain(0), [None])


def _attention_weights(seed, num_heads=3, d_head=2, d_in=5):
    g = generator(seed)
    W_Q = torch.randn(num_heads * d_head, d_in, generator=g, **F64)
    W_K = torch.randn(num_heads * d_head, d_in, generator=g, **F64)
    return W_Q, W_K


def test_per_head_rotation_keeps_every_head_bilinear_form():
    W_Q, W_K = _attention_weights(0)
    R = haar_orthogonal(2, generator=generator(4), batch_shape=(3,))
    W_Qr, W_Kr = rotate_heads(W_Q, W_K, R, num_heads=3)
    before = head_logit_bilinears(W_Q, W_K, num_heads=3)
    assert before.shape == (3, 5, 5)
    assert_close(head_logit_bilinears(W_Qr, W_Kr, num_heads=3), before, atol=1e-13, rtol=0)
    # head h is rows h·d_head … : the bilinear form of head 1 from an explicit slice
    assert_close(before[1], W_Q[2:4].T @ W_K[2:4], atol=1e-14, rtol=0)
    assert rel(W_Qr, W_Q) > BROKEN


def test_negative_control_rotation_mixing_heads_changes_the_bilinear_forms():
    W_Q, W_K = _attention_weights(0)
    R_full = haar_orthogonal(6, generator=generator(4))  # mixes the rows of different heads
    before = head_logit_bilinears(W_Q, W_K, num_heads=3)
    after = head_logit_bilinears(R_full @ W_Q, R_full @ W_K, num_heads=3)
    assert rel(after, before) > BROKEN
    # while the sum over heads (one big head) is still invariant
    assert_close(after.sum(0), before.sum(0), atol=1e-13, rtol=0)


def test_per_head_rotation_validates_shapes():
    W_Q, W_K = _attention_weights(0)
    with pytest.raises(ValueError, match="Invalid num_heads"):
        head_logit_bilinears(W_Q, W_K, num_heads=4)
    with pytest.raises(ValueError, match="Invalid R"):
        rotate_heads(W_Q, W_K, torch.eye(2, **F64).expand(2, 2, 2), num_heads=3)


# --------------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------------


def test_gram_spectra_and_balancedness_norm_are_orthogonal_invariants():
    U, V = random_factors(7, 5, 3, seed=0)
    Q = haar_orthogonal(3, generator=generator(1))
    UQ, VQ = rotate_factors(U, V, Q)
    for a, b in zip(gram_spectra(UQ, VQ), gram_spectra(U, V), strict=True):
        assert_close(a, b, atol=1e-13, rtol=0)
    spec = gram_spectra(U, V).U
    assert (spec[:-1] >= spec[1:]).all()  # descending
    assert_close(balancedness(UQ, VQ), Q.T @ balancedness(U, V) @ Q, atol=1e-14, rtol=0)
    assert_close(balancedness_norm(UQ, VQ), balancedness_norm(U, V), atol=1e-14, rtol=0)


def test_negative_control_gl_gauge_changes_gram_spectra_and_balancedness():
    U, V = random_factors(7, 5, 3, seed=0)
    A = random_gl(3, generator=generator(2))
    UA, VA = gl_act(U, V, A)
    assert rel(gram_spectra(UA, VA).U, gram_spectra(U, V).U) > BROKEN
    assert rel(balancedness_norm(UA, VA), balancedness_norm(U, V)) > BROKEN


# --------------------------------------------------------------------------------------------
# distances
# --------------------------------------------------------------------------------------------


def test_relative_distance_values():
    B = torch.randn(4, 3, generator=generator(0), **F64)
    assert relative_distance(B, B).item() == 0.0
    # ‖3B − B‖ / ‖B‖ = 2 up to the round-off of two norms of twelve entries, which another
    # vector unit sums in another order: up to a few dozen units of 2⁻⁵³, so 1e-13 (this CPU's
    # one unit, 4.4e-16, passed the former 1e-15 by a factor of two only)
    assert_close(relative_distance(3 * B, B), torch.tensor(2.0, **F64), atol=1e-13, rtol=0)
    assert_close(relative_distance(torch.zeros_like(B), B), torch.tensor(1.0, **F64), atol=1e-15,
                 rtol=0)
    zero = torch.zeros_like(B)
    assert relative_distance(zero, zero).item() == 0.0
    assert torch.isfinite(relative_distance(B, zero)) and relative_distance(B, zero) > 1e100
    v = torch.tensor([3.0, 4.0], **F64)
    assert_close(relative_distance(2 * v, v), torch.tensor(1.0, **F64), atol=1e-15, rtol=0)


def test_procrustes_recovers_the_gauge():
    U, _ = random_factors(8, 5, 4, seed=0)
    Q = haar_orthogonal(4, generator=generator(9))
    Q_hat = procrustes_rotation(U, U @ Q)
    assert_close(Q_hat, Q, atol=1e-12, rtol=0)
    # and for a non-orbit target it is still orthogonal and no worse than any other rotation
    B = torch.randn(8, 4, generator=generator(3), **F64)
    Q_b = procrustes_rotation(U, B)
    assert orthogonality_defect(Q_b) < 1e-13
    for seed in range(5):
        other = haar_orthogonal(4, generator=generator(100 + seed))
        assert (U @ Q_b - B).norm() <= (U @ other - B).norm() + 1e-12


def test_gauge_distance_is_zero_on_an_orbit_and_invariant():
    U, V = random_factors(7, 5, 3, seed=0)
    U2, V2 = random_factors(7, 5, 3, seed=1)
    Q = haar_orthogonal(3, generator=generator(1))
    Q2 = haar_orthogonal(3, generator=generator(2))
    assert gauge_distance(U, V, *rotate_factors(U, V, Q)) < 1e-13
    d = gauge_distance(U, V, U2, V2)
    assert d > 0.1
    assert_close(gauge_distance(*rotate_factors(U, V, Q), U2, V2), d, atol=1e-13, rtol=0)
    d_rot2 = gauge_distance(U, V, *rotate_factors(U2, V2, Q2))
    assert_close(d_rot2, d, atol=1e-13, rtol=0)
    # the plain relative distance is not invariant: it sees the gauge
    assert relative_distance(torch.cat([U @ Q, V @ Q]), torch.cat([U, V])) > BROKEN


def test_negative_control_gauge_distance_sees_the_gl_gauge():
    """Same product, different GL representative: the O(k)-quotient distance is not zero."""
    U, V = random_factors(7, 5, 3, seed=0)
    UA, VA = gl_act(U, V, random_gl(3, generator=generator(2)))
    assert rel(product(UA, VA), product(U, V)) < EXACT
    assert gauge_distance(U, V, UA, VA) > BROKEN


@pytest.mark.gpu
def test_haar_on_cuda_is_the_cpu_draw_moved():
    on_gpu = haar_orthogonal(4, generator=generator(3), device="cuda")
    on_cpu = haar_orthogonal(4, generator=generator(3))
    assert on_gpu.device.type == "cuda"
    assert_close(on_gpu.cpu(), on_cpu, atol=1e-12, rtol=0)
