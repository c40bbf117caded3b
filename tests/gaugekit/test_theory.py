"""Tests of gaugekit.theory: every closed form against the library's real optimizers and autograd.

Each positive identity is paired with a negative control that must fail the same check.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import (
    BROKEN,
    DTYPE,
    EXACT,
    generator,
    grads,
    haar,
    random_factors,
    rel,
    signed_permutation,
)
from helpers import sensing as make_sensing

from gaugekit import theory
from gaugekit.gauge import haar_orthogonal, random_gl, rotate_heads
from gaugekit.linalg import gram_preconditioned, msign, newton_schulz
from gaugekit.optim import make_optimizer


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=generator(seed), dtype=DTYPE)


# ------------------------------------------------------------------------------ k = 2, gradients
def test_rotation_2d_is_a_one_parameter_group_of_rotations():
    theta = torch.tensor([0.3, -1.1, 2.0], dtype=DTYPE)
    R = theory.rotation_2d(theta)
    eye = torch.eye(2, dtype=DTYPE).expand(3, 2, 2)
    torch.testing.assert_close(R.mT @ R, eye, atol=EXACT, rtol=0)
    torch.testing.assert_close(torch.linalg.det(R), torch.ones(3, dtype=DTYPE), atol=EXACT, rtol=0)
    torch.testing.assert_close(R[0] @ R[1], theory.rotation_2d(theta[0] + theta[1]), atol=EXACT,
                               rtol=0)
    # u R(θ) turns u = (1, 0) to (cos θ, sin θ)
    u = torch.tensor([[1.0, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(u @ R[0], torch.stack([theta[:1].cos(), theta[:1].sin()], -1),
                               atol=EXACT, rtol=0)
    # negative control: a non-zero angle is not the identity
    assert (R[0] - eye[0]).norm() > 0.1


def test_loss_gradients_match_helpers_autograd_and_leave_inputs_alone():
    loss = make_sensing(seed=1)
    U, V = random_factors(7, 5, 3, seed=2)
    U_before = U.clone()
    G_U, G_V = theory.loss_gradients(loss, U, V)
    ref_U, ref_V = grads(loss, U, V)
    torch.testing.assert_close(G_U, ref_U, atol=EXACT, rtol=0)
    torch.testing.assert_close(G_V, ref_V, atol=EXACT, rtol=0)
    assert torch.equal(U, U_before) and not U.requires_grad
    # negative control: the gradient at a different point differs
    other_U, _ = theory.loss_gradients(loss, 2 * U, V)
    assert rel(other_U, G_U) > BROKEN


# ------------------------------------------------------------------------ memoryless first steps
def test_equivariance_gap_zero_for_gd_and_msign_large_for_sign():
    G = _randn(6, 4, seed=3)
    Q = haar(4, seed=4)
    assert theory.equivariance_gap(lambda g: g, G, Q).item() < EXACT
    assert theory.equivariance_gap(msign, G, Q).item() < 1e-10
    assert theory.equivariance_gap(torch.sign, G, Q).item() > BROKEN


def test_first_step_map_recovers_known_first_steps_of_library_optimizers():
    G = _randn(6, 4, seed=5)
    lr = 0.1
    gd = theory.first_step_map(lambda p: make_optimizer("gd", p, lr=lr), lr)
    signum = theory.first_step_map(lambda p: make_optimizer("signum", p, lr=lr), lr)
    muon = theory.first_step_map(lambda p: make_optimizer("muon", p, lr=lr), lr)
    torch.testing.assert_close(gd(G), G, atol=EXACT, rtol=0)
    torch.testing.assert_close(signum(G), torch.sign(G), atol=EXACT, rtol=0)
    torch.testing.assert_close(muon(G), newton_schulz(G), atol=EXACT, rtol=0)
    # negative control: Muon's first step is not the exact polar factor
    assert rel(muon(G), msign(G)) > BROKEN


def test_registry_first_step_is_the_first_step_map_of_the_registry_optimizer():
    G = _randn(6, 4, seed=5)
    torch.testing.assert_close(theory.registry_first_step("gd", 0.3)(G), G, atol=EXACT, rtol=0)
    adam = theory.registry_first_step("adam", 0.1, eps=0.5)
    torch.testing.assert_close(adam(G), theory.adam_first_step_direction(G, 0.5),
                               atol=1e-12, rtol=0)
    # the overrides reach the optimizer: another eps is another map
    assert rel(theory.registry_first_step("adam", 0.1, eps=1e-8)(G), adam(G)) > BROKEN


def test_sensing_instance_loss_is_its_sensing_loss():
    from gaugebook.sensing.measurements import make_instance, sensing_loss

    instance = make_instance(0, n=6, r=2, dtype=torch.float64)
    U, V = _randn(3, 6, 2, seed=7), _randn(3, 6, 2, seed=8)
    torch.testing.assert_close(instance.loss(U, V), sensing_loss(U, V, instance.A, instance.y),
                               atol=0, rtol=0)
    assert instance.loss(U, V).shape == (3,)


@pytest.mark.parametrize("eps", [1e-8, 1e-3, 0.5])
def test_adam_first_step_direction_is_the_library_adams_first_step(eps):
    G = _randn(5, 3, seed=6)
    lr = 0.05
    adam = theory.first_step_map(lambda p: make_optimizer("adam", p, lr=lr, eps=eps), lr)
    torch.testing.assert_close(adam(G), theory.adam_first_step_direction(G, eps), atol=EXACT,
                               rtol=0)
    # negative control: the first step is not the gradient direction
    assert rel(theory.adam_first_step_direction(G, eps), G / G.norm() * 2) > BROKEN


@pytest.mark.parametrize("e", [0.1, 0.5, 2.0])
def test_adafactor_witness_by_hand(e):
    G = torch.tensor([[1.0, 0.0], [0.0, e]], dtype=DTYPE)
    c = 1 / math.sqrt(2)
    Q = torch.tensor([[c, c], [-c, c]], dtype=DTYPE)
    root = math.sqrt(1 + e * e)
    direction = theory.adafactor_first_step_direction
    torch.testing.assert_close(direction(G), root * torch.diag(torch.tensor([1.0, 1 / e],
                                                                          dtype=DTYPE)),
                               atol=EXACT, rtol=0)
    torch.testing.assert_close(direction(G @ Q), torch.tensor([[1.0, 1.0], [-1.0, 1.0]],
                                                              dtype=DTYPE), atol=EXACT, rtol=0)
    expected = (root / math.sqrt(2)) * torch.tensor([[1.0, 1.0], [-1 / e, 1 / e]], dtype=DTYPE)
    torch.testing.assert_close(direction(G) @ Q, expected, atol=EXACT, rtol=0)
    assert rel(direction(G @ Q), direction(G) @ Q) > BROKEN


def test_adafactor_witness_closes_at_e_equal_one():
    """Negative control of the witness: at G = I the two sides agree."""
    G = torch.eye(2, dtype=DTYPE)
    Q = theory.rotation_2d(torch.tensor(math.pi / 4, dtype=DTYPE))
    d = theory.adafactor_first_step_direction
    assert rel(d(G @ Q), d(G) @ Q) < EXACT


def test_adafactor_direction_is_the_library_adafactor_first_step():
    G = _randn(6, 4, seed=7)
    lr, beta2 = 0.01, 0.999
    step = theory.first_step_map(
        lambda p: make_optimizer("adafactor", p, lr=lr, beta2=beta2, eps=0.0), lr
    )
    scale = 1 / math.sqrt(1 - beta2)
    torch.testing.assert_close(step(G), scale * theory.adafactor_first_step_direction(G),
                               atol=1e-10, rtol=1e-12)
    # negative control: the factored reconstruction is not Adam's entrywise one
    assert rel(step(G) / scale, theory.adam_first_step_direction(G, 0.0)) > BROKEN


# ------------------------------------------------------------------------ Prop. 4.4 (Adam defect)
def _adam_products(loss, U0, V0, lr, eps):
    factory = lambda p: make_optimizer("adam", p, lr=lr, eps=eps)
    U, V = theory.optimizer_trajectory(factory, loss, U0, V0, 1)
    return U[1] @ V[1].T


@pytest.mark.parametrize("lr", [1e-3, 0.05, 0.7])
@pytest.mark.parametrize("eps", [1e-8, 1e-3, 0.1])
def test_adam_defect_closed_form_matches_the_library_adam(lr, eps):
    loss = make_sensing(seed=11)
    U0, V0 = random_factors(7, 5, 3, seed=12)
    Q = haar(3, seed=13)
    G_U, G_V = grads(loss, U0, V0)
    parts = theory.adam_first_step_defect(U0, V0, G_U, G_V, Q, lr, eps)
    measured = _adam_products(loss, U0 @ Q, V0 @ Q, lr, eps) - _adam_products(
        loss, U0, V0, lr, eps
    )
    torch.testing.assert_close(parts.defect, measured, atol=1e-12, rtol=1e-9)
    torch.testing.assert_close(parts.step, _adam_products(loss, U0, V0, lr, eps) - U0 @ V0.T,
                               atol=1e-12, rtol=1e-9)
    assert parts.defect.norm() > 1e-8 * parts.step.norm()
    # negative control: dropping the η² terms is wrong at finite η
    first_order = -lr * (parts.E_U @ V0.T + U0 @ parts.E_V.T)
    if lr >= 0.05:
        assert rel(first_order, measured) > 1e-6


def test_adam_defect_vanishes_for_signed_permutations():
    """Coordinate-aligned gauges (signed permutations) commute with entrywise maps."""
    loss = make_sensing(seed=14)
    U0, V0 = random_factors(7, 5, 3, seed=15)
    G_U, G_V = grads(loss, U0, V0)
    P = signed_permutation(3, seed=16)
    parts = theory.adam_first_step_defect(U0, V0, G_U, G_V, P, 0.1, 1e-8)
    assert parts.defect.norm() < EXACT * parts.step.norm()
    # negative control: a generic rotation leaves a first-order defect
    parts_Q = theory.adam_first_step_defect(U0, V0, G_U, G_V, haar(3, seed=17), 0.1, 1e-8)
    assert parts_Q.defect.norm() > BROKEN * parts_Q.step.norm()


def test_adam_scalar_witness_products():
    """n = 1, k = 2, f(w) = w²/2 at U₀ = V₀ = (1, 0): products (1 − η/(1+ε))² vs
    (1 − η/(2^{-1/2}+ε))²."""
    eps, lr = 1e-8, 0.1
    U0 = torch.tensor([[1.0, 0.0]], dtype=DTYPE)
    V0 = U0.clone()
    loss = lambda U, V: 0.5 * (U @ V.T).squeeze() ** 2
    Q = theory.rotation_2d(torch.tensor(math.pi / 4, dtype=DTYPE))
    G_U, G_V = theory.loss_gradients(loss, U0, V0)
    parts = theory.adam_first_step_defect(U0, V0, G_U, G_V, Q, lr, eps)
    W1 = (U0 @ V0.T + parts.step).item()
    W1_rot = W1 + parts.defect.item()
    assert abs(W1 - (1 - lr / (1 + eps)) ** 2) < EXACT
    assert abs(W1_rot - (1 - lr / (1 / math.sqrt(2) + eps)) ** 2) < EXACT
    assert abs(W1_rot - W1) > BROKEN


def test_adam_relative_defect_grid_shape_and_limits():
    loss = make_sensing(seed=18)
    U0, V0 = random_factors(7, 5, 3, seed=19)
    G_U, G_V = grads(loss, U0, V0)
    Q = haar(3, seed=20)
    lrs, epss = [1e-5, 1e-4], [1e-8, 1e2, 1e3]
    grid = theory.adam_relative_defect_grid(U0, V0, G_U, G_V, Q, lrs, epss)
    assert grid.shape == (3, 2)
    # the small-η limit is a constant: the defect is first order, not a higher-order effect
    assert abs(grid[0, 0] - grid[0, 1]) < 1e-3 * grid[0, 0]
    assert grid[0, 0] > BROKEN
    # large ε: Adam tends to GD scaled by 1/ε and the relative defect decays like 1/ε
    ratio = (grid[1, 0] / grid[2, 0]).item()
    assert 8.0 < ratio < 12.0


# ------------------------------------------------------------------ Theorem 4.5 and Prop. A.1
@pytest.mark.parametrize("name", ["msign", "frobenius_scaled", "left_diagonal", "newton_schulz"])
def test_implied_left_preconditioner_of_equivariant_maps(name):
    n, k = 7, 4
    maps = {
        "msign": msign,
        "frobenius_scaled": lambda g: g.norm() * g,
        "left_diagonal": lambda g: torch.diag(torch.arange(1.0, n + 1, dtype=DTYPE)) @ g,
        "newton_schulz": newton_schulz,
    }
    phi = maps[name]
    G = _randn(n, k, seed=21)
    Q = haar(k, seed=22)
    X = theory.implied_left_preconditioner(phi, G)
    torch.testing.assert_close(theory.implied_left_preconditioner(phi, G @ Q), X, atol=1e-10,
                               rtol=1e-10)
    torch.testing.assert_close(X @ G, phi(G), atol=1e-10, rtol=1e-10)


def test_implied_left_preconditioner_of_a_right_preconditioner_is_not_invariant():
    n, k = 7, 4
    D = torch.diag(torch.arange(1.0, k + 1, dtype=DTYPE))
    G = _randn(n, k, seed=23)
    Q = haar(k, seed=24)
    phi = lambda g: g @ D
    X = theory.implied_left_preconditioner(phi, G)
    assert rel(theory.implied_left_preconditioner(phi, G @ Q), X) > BROKEN


def test_gram_gauge_is_orthogonal_on_one_orbit_and_not_off_it():
    G = _randn(7, 4, seed=25)
    Q = haar(4, seed=26)
    Q_hat = theory.gram_gauge(G, G @ Q)
    torch.testing.assert_close(Q_hat, Q, atol=1e-10, rtol=0)
    A = random_gl(4, generator=generator(27), condition_number=4.0, dtype=DTYPE)
    A_hat = theory.gram_gauge(G, G @ A)
    eye = torch.eye(4, dtype=DTYPE)
    assert rel(A_hat.T @ A_hat, eye) > BROKEN


@pytest.mark.parametrize("power", [0.0, 0.25, 0.5])
def test_measured_transfer_of_gram_preconditioners(power):
    G = _randn(6, 4, seed=28)
    psi = lambda lam: lam ** (-power)
    measured = theory.measure_spectral_transfer(lambda g: gram_preconditioned(g, psi), G)
    assert measured.residual.item() < 1e-10
    torch.testing.assert_close(measured.h, theory.transfer_from_psi(psi, measured.s), atol=1e-10,
                               rtol=1e-10)


def test_sign_map_is_not_spectral():
    G = _randn(6, 4, seed=29)
    assert theory.measure_spectral_transfer(torch.sign, G).residual.item() > BROKEN


def test_shampoo_first_step_transfer_is_s_over_root_s2_plus_damping():
    G = _randn(6, 4, seed=30)
    lr, damping = 0.1, 1.0
    step = theory.first_step_map(lambda p: make_optimizer("shampoo", p, lr=lr, damping=damping),
                                 lr)
    measured = theory.measure_spectral_transfer(step, G)
    assert measured.residual.item() < 1e-10
    expected = measured.s / torch.sqrt(measured.s**2 + damping)
    torch.testing.assert_close(measured.h, expected, atol=1e-10, rtol=1e-10)
    # negative control: not the one-sided quarter root s (s² + λ)^{-1/4}
    assert rel(measured.h, measured.s * (measured.s**2 + damping) ** -0.25) > BROKEN


@pytest.mark.parametrize("shape", [(7, 4), (5, 5), (3, 6)])
@pytest.mark.parametrize("steps", [1, 3, 5])
def test_newton_schulz_scalar_map_gives_the_singular_values(shape, steps):
    G = _randn(*shape, seed=31 + steps)
    x = torch.linalg.svdvals(G) / (G.norm() + 1e-7)
    predicted = theory.newton_schulz_scalar_map(x, steps=steps).sort(descending=True).values
    actual = torch.linalg.svdvals(newton_schulz(G, steps=steps))
    torch.testing.assert_close(actual, predicted, atol=1e-12, rtol=1e-12)
    # negative control: the cubic Newton–Schulz coefficients give another map
    cubic = theory.newton_schulz_scalar_map(x, steps=steps, coefficients=(1.5, -0.5, 0.0))
    assert rel(cubic.sort(descending=True).values, actual) > BROKEN


# ---------------------------------------------------------------- Theorem 4.6 and Prop. A.4
def test_retimed_clock_is_exact_on_a_known_integral_and_validates_nodes():
    times = torch.tensor([0.0, 0.5, 2.0], dtype=DTYPE)
    tau = theory.retimed_clock(lambda u: 1.0 + u, times, num_points=401)
    torch.testing.assert_close(tau, torch.log1p(times), atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="Invalid num_points"):
        theory.retimed_clock(lambda u: 1.0, times, num_points=10)


def test_transfer_theorem_right_clock_matches_and_wrong_clock_does_not():
    loss = make_sensing(n=5, m=4, r=2, num_measurements=20, seed=32)
    U0, V0 = random_factors(5, 4, 2, seed=33)
    a = lambda t: 1.0 + 0.5 * math.sin(2.0 * t) ** 2
    T = torch.tensor([0.0, 1.5], dtype=DTYPE)
    U_pre, V_pre = theory.factor_flow(
        loss, U0, V0, T, velocity=lambda t, gu, gv: (gu / a(t), gv / a(t)), rtol=1e-11
    )
    tau = theory.retimed_clock(a, T)
    U_gf, V_gf = theory.factor_flow(loss, U0, V0, tau, rtol=1e-11)
    assert abs(tau[-1].item() - T[-1].item()) > 0.1
    assert rel(U_pre[-1], U_gf[-1]) < 1e-8 and rel(V_pre[-1], V_gf[-1]) < 1e-8
    wrong = theory.retimed_clock(lambda u: 1.0 / a(u), T)
    U_wrong, _ = theory.factor_flow(loss, U0, V0, wrong, rtol=1e-11)
    assert rel(U_pre[-1], U_wrong[-1]) > BROKEN


def test_balancedness_conserved_by_scalar_flows_and_broken_by_anisotropic_ones():
    loss = make_sensing(n=5, m=4, r=2, num_measurements=20, seed=34)
    U0, V0 = random_factors(5, 4, 2, seed=35)
    T = torch.tensor([0.0, 1.0, 2.0], dtype=DTYPE)
    scale0 = (U0.norm() ** 2 + V0.norm() ** 2).item()
    for velocity in (None, lambda t, gu, gv: (gu / (2 + math.cos(t)), gv / (2 + math.cos(t)))):
        U, V = theory.factor_flow(loss, U0, V0, T, velocity=velocity, rtol=1e-11)
        assert theory.balancedness_drift(U, V).max().item() < 1e-8 * scale0
    U, V = theory.factor_flow(loss, U0, V0, T, velocity=lambda t, gu, gv: (3 * gu, gv))
    assert theory.balancedness_drift(U, V).max().item() > 1e-2 * scale0


def test_one_gd_step_moves_balancedness_by_exactly_eta_squared_term():
    loss = make_sensing(seed=36)
    U0, V0 = random_factors(7, 5, 3, seed=37)
    lr = 0.05
    G_U, G_V = grads(loss, U0, V0)
    U, V = theory.optimizer_trajectory(lambda p: make_optimizer("gd", p, lr=lr), loss, U0, V0, 1)
    expected = lr**2 * torch.linalg.matrix_norm(G_U.T @ G_U - G_V.T @ G_V)
    drift = theory.balancedness_drift(U, V)
    assert drift[0].item() == 0.0
    torch.testing.assert_close(drift[1], expected, atol=1e-13, rtol=1e-9)
    # negative control: Adam's first step moves B at first order in η (shrinking η tenfold
    # shrinks GD's drift a hundredfold, Adam's only about tenfold)
    def adam_drift(step_size: float) -> float:
        factory = lambda p: make_optimizer("adam", p, lr=step_size)
        U, V = theory.optimizer_trajectory(factory, loss, U0, V0, 1)
        return theory.balancedness_drift(U, V)[1].item()

    assert adam_drift(lr) / adam_drift(lr / 10) < 20


def test_optimizer_trajectory_matches_hand_written_gd():
    loss = make_sensing(seed=38)
    U0, V0 = random_factors(7, 5, 3, seed=39)
    lr = 0.03
    U, V = theory.optimizer_trajectory(lambda p: make_optimizer("gd", p, lr=lr), loss, U0, V0, 3)
    assert U.shape == (4, 7, 3) and V.shape == (4, 5, 3)
    torch.testing.assert_close(U[0], U0, atol=0, rtol=0)
    u, v = U0.clone(), V0.clone()
    for _ in range(3):
        g_u, g_v = grads(loss, u, v)
        u, v = u - lr * g_u, v - lr * g_v
    torch.testing.assert_close(U[-1], u, atol=EXACT, rtol=0)
    torch.testing.assert_close(V[-1], v, atol=EXACT, rtol=0)
    with pytest.raises(ValueError, match="Invalid num_steps"):
        theory.optimizer_trajectory(lambda p: make_optimizer("gd", p), loss, U0, V0, -1)


def test_relative_imbalance_zero_for_balanced_pairs_and_bounded():
    U, _ = random_factors(6, 6, 3, seed=40)
    P = haar_orthogonal(6, generator=generator(41), dtype=DTYPE)
    assert theory.relative_imbalance(U, P @ U).item() < EXACT
    U2, V2 = random_factors(6, 6, 3, seed=42)
    value = theory.relative_imbalance(U2, V2).item()
    assert BROKEN < value <= 1.0


# ------------------------------------------------------------------------------------ attention
def test_attention_logits_invariant_under_per_head_rotation_only():
    num_heads, d_head, d_in, T = 3, 2, 5, 4
    X = _randn(T, d_in, seed=43)
    W_Q = _randn(num_heads * d_head, d_in, seed=44)
    W_K = _randn(num_heads * d_head, d_in, seed=45)
    R = haar_orthogonal(d_head, generator=generator(46), batch_shape=(num_heads,), dtype=DTYPE)
    logits = theory.attention_logits(X, W_Q, W_K, num_heads)
    # reference: a loop over heads
    for h in range(num_heads):
        rows = slice(h * d_head, (h + 1) * d_head)
        ref = (X @ W_Q[rows].T) @ (X @ W_K[rows].T).T / math.sqrt(d_head)
        torch.testing.assert_close(logits[h], ref, atol=EXACT, rtol=0)
    W_Qr, W_Kr = rotate_heads(W_Q, W_K, R, num_heads)
    torch.testing.assert_close(theory.attention_logits(X, W_Qr, W_Kr, num_heads), logits,
                               atol=1e-12, rtol=0)
    # negative control: rotating the queries alone changes the logits
    assert rel(theory.attention_logits(X, W_Qr, W_K, num_heads), logits) > BROKEN
    with pytest.raises(ValueError, match="Invalid num_heads"):
        theory.attention_logits(X, W_Q, W_K, 4)

