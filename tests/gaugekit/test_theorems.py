"""The paper's identities (arXiv 2608.05136), checked numerically on the library's code.

Every test evaluates both sides of a claimed identity in float64 from a real loss, real
autograd gradients and the library's own optimizers (built through the registry), and pairs
the positive claim with a negative control that must FAIL the same check: a coordinate-wise
rule where the identity needs equivariance, a GL(k) gauge where O(k) is needed, a deliberately
broken variant, or the wrong side of a formula. A harness bug that made both runs identical
would make the positive checks pass vacuously; the negative controls catch it.

Conventions. Factors ``U`` (n×k), ``V`` (m×k), ``W = U Vᵀ``; the gauge acts on the RIGHT of a
factor and of its gradient, ``G → G Q`` with ``G`` of shape n×k, so the gauge-invariant Gram is
the LEFT one, ``G Gᵀ`` (n×n), and Theorem 4.5's maps are ``Φ(G) = H(G Gᵀ) G``.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import (
    BROKEN,
    EXACT,
    LOOSE,
    grads,
    haar,
    one_step,
    random_factors,
    rel,
    rk4,
    run,
    sensing,
    signed_permutation,
)
from torch.testing import assert_close

from gaugekit.gauge import (
    balancedness,
    chain_product,
    gl_act,
    haar_orthogonal,
    head_logit_bilinears,
    interface_act,
    random_gl,
    rotate_factors,
    rotate_heads,
)
from gaugekit.linalg import (
    gram_preconditioned,
    msign,
    newton_schulz,
    sym_matrix_power,
)
from gaugekit.optim.registry import get_spec, make_optimizer, optimizer_names

F64 = {"dtype": torch.float64}
N, M, K = 7, 5, 3  # U is N×K, V is M×K (N ≠ M catches transposition slips)
NUM_STEPS = 25  # > Shampoo's refresh period 20: a refresh happens mid-run

EQUIVARIANT = optimizer_names(equivariant=True)
COORDINATE_WISE = optimizer_names(equivariant=False)
#: equivariant rules whose first step is a map of one matrix gradient (not a [U, V] pair)
SINGLE_MATRIX_EQUIVARIANT = [n for n in EQUIVARIANT if not get_spec(n).paired]
#: overrides used in the trajectory tests: ScaledGD with its paper damping is GL(k)-equivariant
#: up to 1e-4 (its whole point), so a visible damping makes the GL negative control bite.
TRAJECTORY_OVERRIDES: dict[str, dict[str, object]] = {
    "scaled_gd": {"lr": 1e-2, "damping": 0.5, "relative_damping": False},
}
#: rules that keep a momentum-like buffer (``momentum_buffer`` or ``exp_avg``) per parameter
BUFFERED_RULES = {"momentum", "scalar_adam", "muon", "flow_adam", "eigen_adam", "adam_mini"}
#: the first-step maps are evaluated with lr = 1 so that Φ(G) = −(P₁ − P₀)
UNIT_LR = {"lr": 1.0}


def factory(name, **overrides):
    merged = {**TRAJECTORY_OVERRIDES.get(name, {}), **overrides}
    return lambda params: make_optimizer(name, params, **merged)


def first_step_map(name, G, **overrides):
    """Φ(G) of a library rule: minus its first displacement with lr = 1 on the gradient G."""
    return -one_step(factory(name, **{**UNIT_LR, **overrides}), G)


def problem(seed=0):
    loss = sensing(N, M, r=2, num_measurements=40, seed=seed)
    U0, V0 = random_factors(N, M, K, seed=seed)
    return loss, U0, V0


def displacement_residual(run_a, start_a, run_b, start_b, Q):
    """max_t ‖(X_t^b − X_0^b) − (X_t^a − X_0^a) Q‖ / ‖(X_t^a − X_0^a) Q‖ over both factors."""
    worst = 0.0
    for (Ua, Va), (Ub, Vb) in zip(run_a, run_b, strict=True):
        worst = max(worst, rel(Ub - start_b[0], (Ua - start_a[0]) @ Q))
        worst = max(worst, rel(Vb - start_b[1], (Va - start_a[1]) @ Q))
    return worst


# ============================================================================================
# Lemma 3.2: GL(k) keeps W; only O(k) keeps ‖U‖² + ‖V‖²
# ============================================================================================


def test_lemma32_gl_action_preserves_the_product():
    _, U, V = problem()
    for seed in range(5):
        A = random_gl(K, generator=torch.Generator().manual_seed(seed), condition_number=10.0)
        UA, VA = gl_act(U, V, A)
        assert rel(UA @ VA.T, U @ V.T) < EXACT
        assert rel(UA, U) > BROKEN  # the factors really moved
    # negative control: acting with A on both sides (UA, VA) is not a gauge for non-orthogonal A
    UA_wrong, VA_wrong = U @ A, V @ A
    assert rel(UA_wrong @ VA_wrong.T, U @ V.T) > BROKEN


def test_lemma32_norm_is_preserved_by_orthogonal_and_broken_by_gl():
    _, U, V = problem()
    norm = lambda a, b: (a.norm() ** 2 + b.norm() ** 2).item()
    for seed in range(5):
        Q = haar(K, seed=seed)
        assert abs(norm(*rotate_factors(U, V, Q)) - norm(U, V)) < EXACT * norm(U, V)
        A = random_gl(K, generator=torch.Generator().manual_seed(seed), condition_number=4.0)
        assert abs(norm(*gl_act(U, V, A)) - norm(U, V)) > BROKEN * norm(U, V)
    # the boundary: A = Q exp(t S) with S symmetric leaves O(k) at first order in t
    S = torch.diag(torch.tensor([1.0, 0.0, -1.0], **F64))
    gaps = [abs(norm(*gl_act(U, V, haar(K, 0) @ torch.linalg.matrix_exp(t * S))) - norm(U, V))
            for t in (0.0, 1e-3, 1e-1)]
    assert gaps[0] < EXACT and gaps[1] > 1e-8 and gaps[2] > gaps[1]


# ============================================================================================
# Lemma 4.1: loss invariance and gradient covariance (autograd)
# ============================================================================================


def test_lemma41_gradients_are_covariant_under_orthogonal_gauge():
    loss, U, V = problem()
    Q = haar(K, seed=5)
    G_U, G_V = grads(loss, U, V)
    G_UQ, G_VQ = grads(loss, U @ Q, V @ Q)
    assert abs(loss(U @ Q, V @ Q).item() - loss(U, V).item()) < EXACT * loss(U, V).item()
    assert rel(G_UQ, G_U @ Q) < EXACT
    assert rel(G_VQ, G_V @ Q) < EXACT


def test_lemma41_gl_gradients_are_contravariant_not_covariant():
    """Under (UA, VA⁻ᵀ) the U-gradient becomes G_U A⁻ᵀ; the covariant guess G_U A fails."""
    loss, U, V = problem()
    A = random_gl(K, generator=torch.Generator().manual_seed(2))
    G_U, G_V = grads(loss, U, V)
    UA, VA = gl_act(U, V, A)
    G_UA, G_VA = grads(loss, UA, VA)
    assert rel(G_UA, G_U @ torch.linalg.inv(A).T) < EXACT
    assert rel(G_VA, G_V @ A) < EXACT
    assert rel(G_UA, G_U @ A) > BROKEN  # negative: the O(k) rule does not extend to GL(k)


# ============================================================================================
# depth-L interface gauge and per-head attention gauge
# ============================================================================================


def _deep_problem(seed=0, widths=(5, 4, 3, 6)):
    g = torch.Generator().manual_seed(seed)
    weights = [0.5 * torch.randn(b, a, generator=g, **F64)
               for a, b in zip(widths[:-1], widths[1:], strict=False)]
    loss = sensing(widths[-1], widths[0], r=2, num_measurements=30, seed=seed)
    return weights, loss


def _deep_grads(weights, loss):
    ps = [w.detach().clone().requires_grad_(True) for w in weights]
    value = loss.of_matrix(chain_product(ps))
    return value.item(), list(torch.autograd.grad(value, ps))


def test_depth_interface_gauge_invariance_and_gradient_transformation():
    """W = W₃W₂W₁, gauges A₁, A₂ at both interfaces: W_j → A_j W_j A_{j−1}⁻¹ and the
    gradients transform as ∇_j → A_j⁻ᵀ ∇_j A_{j−1}ᵀ (covariantly, A ∇ A'ᵀ, when orthogonal)."""
    weights, loss = _deep_problem()
    base_loss, base = _deep_grads(weights, loss)
    for kind in ("orthogonal", "gl"):
        if kind == "orthogonal":
            A = [haar(4, seed=1), haar(3, seed=2)]
        else:
            A = [random_gl(d, generator=torch.Generator().manual_seed(d)) for d in (4, 3)]
        moved_loss, moved = _deep_grads(interface_act(weights, A), loss)
        assert abs(moved_loss - base_loss) < EXACT * base_loss
        inv_T = [torch.linalg.inv(a).T for a in A]
        assert rel(moved[0], inv_T[0] @ base[0]) < EXACT
        assert rel(moved[1], inv_T[1] @ base[1] @ A[0].T) < EXACT
        assert rel(moved[2], base[2] @ A[1].T) < EXACT
    # negative control: acting on one side of an interface only is not a symmetry
    broken = [A[0] @ weights[0], weights[1], weights[2]]
    assert abs(_deep_grads(broken, loss)[0] - base_loss) > BROKEN * base_loss


@pytest.mark.parametrize("name", ["gd", "momentum", "muon"])
def test_depth_interface_equivariant_rules_commute_with_orthogonal_interface_gauges(name):
    weights, loss = _deep_problem(seed=1)
    A = [haar(4, seed=3), haar(3, seed=4)]
    deep_loss = lambda *ps: loss.of_matrix(chain_product(ps))

    def trajectory(ws, opt_name):
        ps = [w.detach().clone().requires_grad_(True) for w in ws]
        opt = make_optimizer(opt_name, ps)
        out = []
        for _ in range(8):
            opt.zero_grad()
            deep_loss(*ps).backward()
            opt.step()
            out.append([p.detach().clone() for p in ps])
        return out

    plain, rotated = trajectory(weights, name), trajectory(interface_act(weights, A), name)
    for ws, ws_rot in zip(plain, rotated, strict=True):
        for expected, got in zip(interface_act(ws, A), ws_rot, strict=True):
            assert rel(got, expected) < LOOSE
    assert rel(plain[-1][1], weights[1]) > BROKEN  # the run moved
    # negative control: Adam on the same chain does not commute with the interface gauge
    plain_adam = trajectory(weights, "adam")
    rot_adam = trajectory(interface_act(weights, A), "adam")
    assert rel(rot_adam[-1][1], interface_act(plain_adam[-1], A)[1]) > BROKEN


def _attention_loss(W_Q, W_K, X, target, num_heads):
    """Softmax attention patterns of every head against a fixed target (a real loss)."""
    d_head = W_Q.shape[0] // num_heads
    q = (X @ W_Q.T).reshape(X.shape[0], num_heads, d_head).transpose(0, 1)
    k = (X @ W_K.T).reshape(X.shape[0], num_heads, d_head).transpose(0, 1)
    probs = torch.softmax(q @ k.mT / math.sqrt(d_head), dim=-1)
    return ((probs - target) ** 2).sum()


def test_attention_per_head_rotation_keeps_logits_and_rotates_gradients():
    g = torch.Generator().manual_seed(0)
    num_heads, d_head, d_in, T = 3, 2, 5, 4
    W_Q = torch.randn(num_heads * d_head, d_in, generator=g, **F64)
    W_K = torch.randn(num_heads * d_head, d_in, generator=g, **F64)
    X = torch.randn(T, d_in, generator=g, **F64)
    target = torch.softmax(torch.randn(num_heads, T, T, generator=g, **F64), dim=-1)
    R = haar_orthogonal(d_head, generator=g, batch_shape=(num_heads,))

    def loss_and_grads(wq, wk):
        wq, wk = wq.clone().requires_grad_(True), wk.clone().requires_grad_(True)
        value = _attention_loss(wq, wk, X, target, num_heads)
        return (value.item(), *torch.autograd.grad(value, (wq, wk)))

    W_Qr, W_Kr = rotate_heads(W_Q, W_K, R, num_heads)
    base, gQ, gK = loss_and_grads(W_Q, W_K)
    moved, gQr, gKr = loss_and_grads(W_Qr, W_Kr)
    assert abs(moved - base) < EXACT * base
    assert rel(head_logit_bilinears(W_Qr, W_Kr, num_heads),
               head_logit_bilinears(W_Q, W_K, num_heads)) < EXACT
    expected_gQ, expected_gK = rotate_heads(gQ, gK, R, num_heads)  # the head's rows rotate
    assert rel(gQr, expected_gQ) < EXACT and rel(gKr, expected_gK) < EXACT
    # negative control: one rotation of all d_model rows mixes heads and changes the loss
    R_all = haar_orthogonal(num_heads * d_head, generator=g)
    mixed, _, _ = loss_and_grads(R_all @ W_Q, R_all @ W_K)
    assert abs(mixed - base) > BROKEN * base


# ============================================================================================
# Prop. 4.2: equivariant rules commute with the gauge over many steps, state live
# ============================================================================================


@pytest.mark.parametrize("name", EQUIVARIANT)
def test_prop42_equivariant_rule_trajectory_commutes_with_the_gauge(name):
    loss, U0, V0 = problem(seed=1)
    Q = haar(K, seed=13)
    plain, opt, params = run(factory(name), U0, V0, loss, NUM_STEPS)
    rotated, opt_r, params_r = run(factory(name), U0 @ Q, V0 @ Q, loss, NUM_STEPS)

    for (U_t, V_t), (U_tQ, V_tQ) in zip(plain, rotated, strict=True):
        assert rel(U_tQ, U_t @ Q) < LOOSE, name
        assert rel(V_tQ, V_t @ Q) < LOOSE, name
        assert rel(U_tQ @ V_tQ.T, U_t @ V_t.T) < LOOSE  # the represented matrix is identical
    assert displacement_residual(plain, (U0, V0), rotated, (U0 @ Q, V0 @ Q), Q) < 1e-7
    # live state: the linear-in-gradient buffers are covariant too
    checked = 0
    for p, p_r in zip(params, params_r, strict=True):
        for key in ("momentum_buffer", "exp_avg"):
            if key in opt.state[p]:
                assert rel(opt_r.state[p_r][key], opt.state[p][key] @ Q) < LOOSE
                checked += 1
    assert checked == (2 if name in BUFFERED_RULES else 0), (name, checked)
    # vacuity guards: the run moved, and the two runs differ in parameter space
    assert rel(plain[-1][0], U0) > BROKEN
    assert rel(rotated[-1][0], plain[-1][0]) > BROKEN


@pytest.mark.parametrize("name", EQUIVARIANT)
def test_prop42_negative_control_gl_gauge_breaks_the_trajectory(name):
    """The same harness with A ∈ GL(k) in place of Q: the trajectory is not A-covariant."""
    loss, U0, V0 = problem(seed=1)
    A = random_gl(K, generator=torch.Generator().manual_seed(13), condition_number=4.0)
    UA, VA = gl_act(U0, V0, A)
    plain, _, _ = run(factory(name), U0, V0, loss, 5)
    moved, _, _ = run(factory(name), UA, VA, loss, 5)
    assert rel(moved[-1][0] - UA, (plain[-1][0] - U0) @ A) > BROKEN, name


def test_prop42_scaled_gd_without_damping_is_gl_equivariant():
    """ScaledGD's point: undamped, G_U (VᵀV)⁻¹ is GL(k)-equivariant, G_U A⁻ᵀ Aᵀ(VᵀV)⁻¹A."""
    loss, U0, V0 = problem(seed=1)
    A = random_gl(K, generator=torch.Generator().manual_seed(13), condition_number=4.0)
    UA, VA = gl_act(U0, V0, A)
    f = factory("scaled_gd", damping=0.0, relative_damping=False)
    plain, _, _ = run(f, U0, V0, loss, 10)
    moved, _, _ = run(f, UA, VA, loss, 10)
    for (U_t, V_t), (U_tA, V_tA) in zip(plain, moved, strict=True):
        expected = gl_act(U_t, V_t, A)
        assert rel(U_tA, expected[0]) < LOOSE and rel(V_tA, expected[1]) < LOOSE
    # negative control: GD, equivariant under O(k), is not under GL(k) (tested per rule above)
    plain_gd, _, _ = run(factory("gd"), U0, V0, loss, 10)
    moved_gd, _, _ = run(factory("gd"), UA, VA, loss, 10)
    assert rel(moved_gd[-1][0], gl_act(*plain_gd[-1], A)[0]) > BROKEN


def test_prop42_scalar_adam_is_the_repair_of_adam():
    """Adam and shared-scale Adam share everything but the denominator; only one commutes."""
    loss, U0, V0 = problem(seed=2)
    Q = haar(K, seed=3)
    residual = {}
    for name in ("adam", "scalar_adam"):
        plain, _, _ = run(factory(name), U0, V0, loss, 6)
        rotated, _, _ = run(factory(name), U0 @ Q, V0 @ Q, loss, 6)
        residual[name] = displacement_residual(plain, (U0, V0), rotated, (U0 @ Q, V0 @ Q), Q)
    assert residual["scalar_adam"] < 1e-9 < BROKEN < residual["adam"]


# ============================================================================================
# Prop. 4.3: coordinate-wise rules break the gauge at the first step
# ============================================================================================


@pytest.mark.parametrize("name", COORDINATE_WISE)
def test_prop43_coordinatewise_rule_breaks_the_gauge_at_step_one(name):
    loss, U0, V0 = problem(seed=1)
    Q = haar(K, seed=13)
    plain, _, _ = run(factory(name), U0, V0, loss, 1)
    rotated, _, _ = run(factory(name), U0 @ Q, V0 @ Q, loss, 1)
    assert displacement_residual(plain, (U0, V0), rotated, (U0 @ Q, V0 @ Q), Q) > 0.05, name
    # and the represented matrix differs: the defect is physical, not only in the factors
    (U1, V1), (U1Q, V1Q) = plain[0], rotated[0]
    assert rel(U1Q @ V1Q.T, U1 @ V1.T) > 1e-6


@pytest.mark.parametrize("name", COORDINATE_WISE)
def test_prop43_positive_control_coordinatewise_rule_commutes_with_signed_permutations(name):
    """The harness is not rigged to fail: a signed permutation is an orthogonal gauge that a
    coordinate-wise rule does respect, over several steps with state."""
    loss, U0, V0 = problem(seed=1)
    P = signed_permutation(K, seed=4)
    assert not torch.equal(P.abs(), torch.eye(K, **F64))  # a genuine permutation
    plain, _, _ = run(factory(name), U0, V0, loss, 6)
    permuted, _, _ = run(factory(name), U0 @ P, V0 @ P, loss, 6)
    assert displacement_residual(plain, (U0, V0), permuted, (U0 @ P, V0 @ P), P) < 1e-12


def test_prop43_sign_witness():
    """G = [1, 1], Q = rotation by π/4: sign(GQ) = [0, 1] but sign(G)Q = [0, √2]."""
    G = torch.tensor([[1.0, 1.0]], **F64)
    c = 1 / math.sqrt(2)
    Q = torch.tensor([[c, c], [-c, c]], **F64)
    assert_close(G @ Q, torch.tensor([[0.0, math.sqrt(2)]], **F64), atol=1e-15, rtol=0)
    assert_close(torch.sign(G @ Q), torch.tensor([[0.0, 1.0]], **F64), atol=0, rtol=0)
    # the library's Signum realises exactly these maps at its first step
    step_G = first_step_map("signum", G)
    step_GQ = first_step_map("signum", G @ Q)
    assert_close(step_G, torch.sign(G), atol=1e-15, rtol=0)
    assert_close(step_GQ, torch.sign(G @ Q), atol=1e-15, rtol=0)
    assert rel(step_GQ, step_G @ Q) > 0.2
    # paired positive: GD's map commutes on the same witness
    assert rel(first_step_map("gd", G @ Q), first_step_map("gd", G) @ Q) < EXACT


@pytest.mark.parametrize("e", [0.1, 0.5, 2.0])
def test_prop43_adafactor_witness(e):
    """G = diag(1, e), Q = [[c, c], [−c, c]]: Adafactor(G) = √(1+e²) diag(1, 1/e),
    Adafactor(GQ) = [[1, 1], [−1, 1]], Adafactor(G)Q = √((1+e²)/2) [[1, 1], [−1/e, 1/e]]."""
    G = torch.diag(torch.tensor([1.0, e], **F64))
    c = 1 / math.sqrt(2)
    Q = torch.tensor([[c, c], [-c, c]], **F64)
    root = math.sqrt(1 + e**2)
    # library Adafactor, β₂ = 0 and ε = 0 so that the first step is exactly G / √v̂
    phi = lambda X: first_step_map("adafactor", X, beta2=0.0, eps=0.0)
    assert_close(phi(G), root * torch.diag(torch.tensor([1.0, 1 / e], **F64)), atol=1e-13,
                 rtol=0)
    assert_close(phi(G @ Q), torch.tensor([[1.0, 1.0], [-1.0, 1.0]], **F64), atol=1e-13, rtol=0)
    expected = (root / math.sqrt(2)) * torch.tensor([[1.0, 1.0], [-1 / e, 1 / e]], **F64)
    assert_close(phi(G) @ Q, expected, atol=1e-13, rtol=0)
    assert rel(phi(G @ Q), phi(G) @ Q) > 0.1
    # the cause: row sums of G² are invariant, column sums are not (row sums up to 1 + e² = 5
    # carry a few units of their round-off, 2⁻⁵² · 4 ≈ 9e-16: the former 1e-15 allowed one
    # unit, the error this CPU gives, and any other rounding of the product or the squares
    # would exceed it; 1e-14 allows ten)
    assert_close((G @ Q).pow(2).sum(1), G.pow(2).sum(1), atol=1e-14, rtol=0)
    assert rel((G @ Q).pow(2).sum(0), G.pow(2).sum(0)) > 0.1
    # paired positive: a Gram map (Muon's first step) commutes on the same witness
    assert rel(first_step_map("muon", G @ Q), first_step_map("muon", G) @ Q) < EXACT


# ============================================================================================
# Prop. 4.4: Adam's first-step gauge defect in closed form
# ============================================================================================


def _d(G, eps):
    return G / (G.abs() + eps)


@pytest.mark.parametrize(("lr", "eps"), [(1e-3, 1e-8), (0.05, 1e-3), (0.5, 0.1)])
def test_prop44_adam_first_step_defect_identity(lr, eps):
    """W̃₁ − W₁ = −η(E_U V₀ᵀ + U₀ E_Vᵀ) + η²(E_U D_Vᵀ + D_U E_Vᵀ + E_U E_Vᵀ) with
    D = G ⊘ (|G| + ε) and E_U = D(G_U Q) Qᵀ − D(G_U), using the library's Adam."""
    loss, U0, V0 = problem(seed=4)
    Q = haar(K, seed=21)
    f = factory("adam", lr=lr, eps=eps)
    (U1, V1), = run(f, U0, V0, loss, 1)[0]
    (U1Q, V1Q), = run(f, U0 @ Q, V0 @ Q, loss, 1)[0]
    G_U, G_V = grads(loss, U0, V0)
    G_UQ, G_VQ = grads(loss, U0 @ Q, V0 @ Q)
    # cross-check: the library's first Adam step is −η D(G)
    assert rel(U1 - U0, -lr * _d(G_U, eps)) < 1e-12

    D_U, D_V = _d(G_U, eps), _d(G_V, eps)
    E_U, E_V = _d(G_UQ, eps) @ Q.T - D_U, _d(G_VQ, eps) @ Q.T - D_V
    defect = U1Q @ V1Q.T - U1 @ V1.T
    first_order = -lr * (E_U @ V0.T + U0 @ E_V.T)
    closed_form = first_order + lr**2 * (E_U @ D_V.T + D_U @ E_V.T + E_U @ E_V.T)
    assert rel(defect, closed_form) < 1e-10
    assert defect.norm() > 1e-6  # the defect is real, not round-off
    # negative control: the same display with Q where Qᵀ belongs does not match
    E_U_bad, E_V_bad = _d(G_UQ, eps) @ Q - D_U, _d(G_VQ, eps) @ Q - D_V
    wrong = -lr * (E_U_bad @ V0.T + U0 @ E_V_bad.T) + lr**2 * (
        E_U_bad @ D_V.T + D_U @ E_V_bad.T + E_U_bad @ E_V_bad.T)
    assert rel(defect, wrong) > BROKEN


def test_prop44_scalar_witness():
    """n = 1, k = 2, L = ½(U Vᵀ)², U₀ = V₀ = [1, 0]: the first library-Adam step gives
    w = (1 − η/(1+ε))² from (U₀, V₀) and (1 − η/(2^{-1/2}+ε))² from (U₀Q, V₀Q)."""
    eps = 1e-8
    c = 1 / math.sqrt(2)
    Q = torch.tensor([[c, c], [-c, c]], **F64)
    U0 = torch.tensor([[1.0, 0.0]], **F64)
    scalar_loss = lambda U, V: 0.5 * (U @ V.T).sum() ** 2
    for lr in (1e-3, 0.1, 0.5):
        f = factory("adam", lr=lr, eps=eps)
        (U1, V1), = run(f, U0, U0, scalar_loss, 1)[0]
        (U1Q, V1Q), = run(f, U0 @ Q, U0 @ Q, scalar_loss, 1)[0]
        w, w_rot = (U1 @ V1.T).item(), (U1Q @ V1Q.T).item()
        assert abs(w - (1 - lr / (1 + eps)) ** 2) < 1e-12
        assert abs(w_rot - (1 - lr / (c + eps)) ** 2) < 1e-12
        assert abs(w - w_rot) > 1e-4
        # paired positive: shared-scale Adam gives the same w from both
        g = factory("scalar_adam", lr=lr, eps=eps)
        (A1, B1), = run(g, U0, U0, scalar_loss, 1)[0]
        (A1Q, B1Q), = run(g, U0 @ Q, U0 @ Q, scalar_loss, 1)[0]
        assert abs((A1 @ B1.T).item() - (A1Q @ B1Q.T).item()) < EXACT


# ============================================================================================
# Theorem 4.5: memoryless equivariant maps are Gram-determined left preconditioners
# ============================================================================================


def _tall(seed, n=N, k=K):
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed), **F64)


@pytest.mark.parametrize("name", SINGLE_MATRIX_EQUIVARIANT)
def test_thm45_library_first_step_maps_are_gram_determined(name):
    """Φ(G) = H G with H = Φ(G) G⁺ depending on G only through G Gᵀ: the H read off at G
    reproduces Φ at every G' = G Q with the same Gram."""
    G = _tall(1)
    H = first_step_map(name, G) @ torch.linalg.pinv(G)
    assert rel(H @ G, first_step_map(name, G)) < 1e-10
    for seed in (2, 3):
        G2 = G @ haar(K, seed=seed)
        assert rel(G2 @ G2.T, G @ G.T) < EXACT
        assert rel(first_step_map(name, G2), H @ G2) < 1e-9, name
    # negative control: Adam's map is not determined by the Gram
    H_adam = first_step_map("adam", G) @ torch.linalg.pinv(G)
    G2 = G @ haar(K, seed=2)
    assert rel(first_step_map("adam", G2), H_adam @ G2) > BROKEN


def test_thm45_proof_step_equal_grams_means_one_orbit():
    """If G₁G₁ᵀ = G₂G₂ᵀ (full column rank) then Q̂ = G₁⁺G₂ is orthogonal and G₁Q̂ = G₂."""
    G1 = _tall(4)
    Q = haar(K, seed=5)
    G2 = G1 @ Q
    Q_hat = torch.linalg.pinv(G1) @ G2
    assert rel(Q_hat.T @ Q_hat, torch.eye(K, **F64)) < 1e-12
    assert rel(G1 @ Q_hat, G2) < 1e-12
    # negative control: different Grams (a GL move) give a non-orthogonal Q̂
    A = random_gl(K, generator=torch.Generator().manual_seed(6))
    Q_bad = torch.linalg.pinv(G1) @ (G1 @ A)
    assert rel(Q_bad.T @ Q_bad, torch.eye(K, **F64)) > BROKEN


def test_thm45_converse_every_gram_map_is_equivariant():
    """Any H, spectral or not, gives an equivariant Φ(G) = H(GGᵀ) G; the right-Gram form
    G H(GᵀG) is equivariant only for spectral H."""
    G = _tall(7)
    Q = haar(K, seed=8)
    D = lambda P: torch.diag(torch.arange(1.0, P.shape[-1] + 1, **F64))
    maps = {
        "resolvent": lambda P: torch.linalg.inv(P + torch.eye(P.shape[-1], **F64)),
        "heat": lambda P: torch.linalg.matrix_exp(-P),
        "non_spectral": lambda P: D(P) @ P @ D(P) + torch.eye(P.shape[-1], **F64),
    }
    for H in maps.values():
        assert rel(H((G @ Q) @ (G @ Q).T) @ (G @ Q), (H(G @ G.T) @ G) @ Q) < EXACT
    spectral = maps["resolvent"]
    assert rel((G @ Q) @ spectral((G @ Q).T @ (G @ Q)), (G @ spectral(G.T @ G)) @ Q) < EXACT
    # negative control: right Gram with a non-spectral H breaks equivariance
    H = maps["non_spectral"]
    assert rel((G @ Q) @ H((G @ Q).T @ (G @ Q)), (G @ H(G.T @ G)) @ Q) > BROKEN


def test_thm45_library_gram_rule_left_vs_right_side():
    """The library's `gram` rule with a non-spectral H: side='left' (H(GGᵀ)G) is equivariant
    over a trajectory, side='right' (G H(GᵀG)) is not."""
    D = lambda P: torch.diag(torch.arange(1.0, P.shape[-1] + 1, dtype=P.dtype))
    H = lambda P: 0.1 * (D(P) @ P @ D(P)) + torch.eye(P.shape[-1], dtype=P.dtype)
    loss, U0, V0 = problem(seed=3)
    Q = haar(K, seed=9)
    residual = {}
    for side in ("left", "right"):
        f = factory("gram", gram_fn=H, side=side, lr=1e-2)
        plain, _, _ = run(f, U0, V0, loss, 5)
        rotated, _, _ = run(f, U0 @ Q, V0 @ Q, loss, 5)
        residual[side] = displacement_residual(plain, (U0, V0), rotated, (U0 @ Q, V0 @ Q), Q)
    assert residual["left"] < 1e-10
    assert residual["right"] > BROKEN


# ============================================================================================
# Prop. A.1: spectral transfer function h(s) = s ψ(s²)
# ============================================================================================


@pytest.mark.parametrize("shape", [(6, 4), (5, 5), (3, 6)])
def test_propA1_gram_map_is_a_spectral_transfer(shape):
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(101), **F64)
    Ug, S, Vh = torch.linalg.svd(G, full_matrices=False)
    cases = [
        (lambda lam: lam**-0.25, lambda s: s**0.5),
        (lambda lam: torch.ones_like(lam), lambda s: s),  # GD
        (lambda lam: lam**-0.5, torch.ones_like),  # msign / Muon's target
        (lambda lam: (lam + 1.0) ** -0.5, lambda s: s / (s**2 + 1.0) ** 0.5),
    ]
    for psi, h in cases:
        assert rel(gram_preconditioned(G, psi), (Ug * h(S)) @ Vh) < 1e-10
    # negative control: dropping the factor s (h(s) = ψ(s²)) is a different map
    assert rel(gram_preconditioned(G, lambda lam: lam**-0.25), (Ug * S**-0.5) @ Vh) > BROKEN


def _ns_scalar(x, steps, coefficients=(3.4445, -4.7750, 2.0315)):
    a, b, c = coefficients
    for _ in range(steps):
        x = a * x + b * x**3 + c * x**5
    return x


def test_propA1_library_first_steps_have_the_predicted_transfer():
    """GD: h(s) = s. Shampoo (damping λ): h(s) = s/√(s²+λ). Muon: h(s) = p⁵(s/(‖G‖_F+ε)),
    the quintic iterated on scalars. Adam's first step is no transfer function at all."""
    G = _tall(11)
    Ug, S, Vh = torch.linalg.svd(G, full_matrices=False)
    transfer = lambda h: (Ug * h(S)) @ Vh
    assert rel(first_step_map("gd", G), transfer(lambda s: s)) < EXACT
    lam = get_spec("shampoo").defaults["damping"]
    assert rel(first_step_map("shampoo", G), transfer(lambda s: s / (s**2 + lam) ** 0.5)) < 1e-10
    muon = first_step_map("muon", G, momentum=0.0)
    scale = G.norm() + 1e-7
    assert rel(muon, transfer(lambda s: _ns_scalar(s / scale, 5))) < 1e-10
    # negative control: Adam's step is not diagonal in G's singular bases
    core = Ug.T @ first_step_map("adam", G) @ Vh.T
    off_diagonal = core - torch.diag(torch.diagonal(core))
    assert off_diagonal.norm() > 0.1 * core.norm()


@pytest.mark.parametrize("shape", [(6, 4), (5, 5), (4, 6)])
def test_propA1_undamped_two_sided_shampoo_step_is_msign(shape):
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(202), **F64)
    n, k = shape
    root = lambda P: sym_matrix_power(P, -0.25, eps=1e-13)
    # (GGᵀ)^{-1/4} G (GᵀG)^{-1/4}; the zero eigenvalues of the larger Gram are clamped, and G
    # has no component along them
    two_sided = root(G @ G.T) @ G @ root(G.T @ G)
    assert rel(two_sided, msign(G)) < 1e-9
    # the library's Shampoo with vanishing damping does the same at its first step
    if n >= k:
        lib = first_step_map("shampoo", G, damping=1e-12, eig_floor=1e-13)
        assert rel(lib, msign(G)) < 1e-9
    # negative control: the one-sided root (GGᵀ)^{-1/4} G is h(s) = √s, not msign
    assert rel(root(G @ G.T) @ G, msign(G)) > BROKEN


# ============================================================================================
# Newton–Schulz and Shampoo: equivariance of the building blocks
# ============================================================================================


def _ns_max_abs(G, steps):
    """Broken Newton–Schulz: normalised by the largest entry (a coordinate-wise quantity),
    times √(nk) so that ‖X₀‖₂ ≤ 1 as for the Frobenius normalisation."""
    X = G / (G.abs().max() * math.sqrt(G.numel()))
    for _ in range(steps):
        A = X @ X.T
        X = 3.4445 * X + (-4.7750 * A + 2.0315 * A @ A) @ X
    return X


@pytest.mark.parametrize("shape", [(3, 6), (6, 3), (5, 5)], ids=["wide", "tall", "square"])
def test_newton_schulz_is_equivariant_at_every_truncation(shape):
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(303), **F64)
    Q = haar(shape[1], seed=17)
    for steps in range(9):
        assert rel(newton_schulz(G @ Q, steps=steps), newton_schulz(G, steps=steps) @ Q) < 1e-11
        # negative control: the max-abs normalisation is not rotation-invariant
        assert rel(_ns_max_abs(G @ Q, steps), _ns_max_abs(G, steps) @ Q) > BROKEN, steps


def test_shampoo_stale_roots_stay_equivariant():
    """Library Shampoo, roots refreshed every 20 steps, 45 steps (refreshes at 1, 21, 41):
    L and its root are invariant, R and its root conjugate, L̃ G R̃ rotates."""
    loss, U0, V0 = problem(seed=6)
    Q = haar(K, seed=19)
    f = factory("shampoo", update_freq=20, lr=0.05)
    plain, opt, params = run(f, U0, V0, loss, 45)
    rotated, opt_r, params_r = run(f, U0 @ Q, V0 @ Q, loss, 45)
    assert displacement_residual(plain, (U0, V0), rotated, (U0 @ Q, V0 @ Q), Q) < 1e-9
    for p, p_r in zip(params, params_r, strict=True):
        s, s_r = opt.state[p], opt_r.state[p_r]
        assert rel(s_r["left_gram"], s["left_gram"]) < 1e-10
        assert rel(s_r["left_inv_root"], s["left_inv_root"]) < 1e-10
        assert rel(s_r["right_gram"], Q.T @ s["right_gram"] @ Q) < 1e-10
        assert rel(s_r["right_inv_root"], Q.T @ s["right_inv_root"] @ Q) < 1e-10
        # vacuity: the root in use really is stale (computed at step 41, not from R at 45)
        fresh = sym_matrix_power(s["right_gram"] + torch.eye(K, **F64), -0.25, eps=1e-6)
        assert rel(s["right_inv_root"], fresh) > 1e-6
    # negative control: a broken Shampoo whose right statistic keeps only diag(R)
    broken = lambda U, V: _diagonal_right_shampoo(loss, U, V, steps=45, lr=0.05)
    U_b, V_b = broken(U0, V0)
    U_bQ, V_bQ = broken(U0 @ Q, V0 @ Q)
    assert rel(U_bQ - U0 @ Q, (U_b - U0) @ Q) > BROKEN


def _diagonal_right_shampoo(loss, U, V, steps, lr, update_freq=20):
    """Deliberately broken Shampoo (negative control only): diag(R) instead of R."""
    params = [U.clone(), V.clone()]
    Ls = [torch.zeros(p.shape[0], p.shape[0], **F64) for p in params]
    Rs = [torch.zeros(p.shape[1], p.shape[1], **F64) for p in params]
    roots = [None, None]
    for t in range(steps):
        gs = grads(loss, *params)
        for i, g in enumerate(gs):
            Ls[i] = Ls[i] + g @ g.T
            Rs[i] = Rs[i] + torch.diag(torch.diagonal(g.T @ g))
            if t % update_freq == 0:
                eye_l, eye_r = torch.eye(len(Ls[i]), **F64), torch.eye(len(Rs[i]), **F64)
                roots[i] = (sym_matrix_power(Ls[i] + eye_l, -0.25),
                            sym_matrix_power(Rs[i] + eye_r, -0.25))
            params[i] = params[i] - lr * roots[i][0] @ g @ roots[i][1]
    return params


def test_shampoo_root_is_conjugation_covariant_with_damping():
    """h(QᵀRQ) = Qᵀ h(R) Q for h(R) = (R + λI)^{-1/4}, the fact behind Shampoo's equivariance."""
    X = torch.randn(9, K, generator=torch.Generator().manual_seed(404), **F64)
    R = X.T @ X
    Q = haar(K, seed=55)
    eye = torch.eye(K, **F64)
    for lam in (0.0, 1.0, 7.5):
        lhs = sym_matrix_power(Q.T @ R @ Q + lam * eye, -0.25)
        assert rel(lhs, Q.T @ sym_matrix_power(R + lam * eye, -0.25) @ Q) < 1e-12
    # negative control: the entrywise (diagonal-statistic) root is not covariant
    diag_root = lambda P: torch.diag(torch.diagonal(P) ** -0.25)
    assert rel(diag_root(Q.T @ R @ Q + eye), Q.T @ diag_root(R + eye) @ Q) > BROKEN


# ============================================================================================
# Theorem 4.6 (transfer) and Prop. A.4 (balancedness): flows
# ============================================================================================


def _flat_problem(seed):
    loss, U0, V0 = problem(seed=seed)
    split = lambda x: (x[: N * K].reshape(N, K), x[N * K :].reshape(M, K))

    def grad_vec(x):
        G_U, G_V = grads(loss, *split(x))
        return torch.cat([G_U.reshape(-1), G_V.reshape(-1)])

    return torch.cat([U0.reshape(-1), V0.reshape(-1)]), grad_vec, split


def test_thm46_scalar_preconditioned_flow_is_retimed_gradient_flow():
    """θ' = −∇L/a(t) with a(t) = 2 + cos t equals gradient flow at τ(T) = ∫₀ᵀ du/a(u)
    = (2/√3) arctan(tan(T/2)/√3); the inverse time change ∫₀ᵀ a = 2T + sin T does not."""
    x0, grad_vec, _ = _flat_problem(seed=8)
    a = lambda t: 2.0 + math.cos(t)
    T, steps = 1.5, 300
    x_pre = rk4(lambda t, x: -grad_vec(x) / a(t), x0, 0.0, T, steps)
    tau = 2 / math.sqrt(3) * math.atan(math.tan(T / 2) / math.sqrt(3))
    x_gf = rk4(lambda t, x: -grad_vec(x), x0, 0.0, tau, steps)
    assert rel(x_pre, x_gf) < 1e-9
    assert rel(x_pre, x0) > 0.05  # the flow moved
    # negative controls: the wrong time change, and no time change at all
    x_wrong = rk4(lambda t, x: -grad_vec(x), x0, 0.0, 2 * T + math.sin(T), steps)
    assert rel(x_pre, x_wrong) > BROKEN
    assert rel(x_pre, rk4(lambda t, x: -grad_vec(x), x0, 0.0, T, steps)) > BROKEN


def test_propA4_balancedness_conserved_by_common_scalar_broken_by_anisotropy():
    x0, grad_vec, split = _flat_problem(seed=12)
    B0 = balancedness(*split(x0))
    for a in (lambda t: 1.0, lambda t: 2.0 + math.cos(t)):
        x_T = rk4(lambda t, x, a=a: -grad_vec(x) / a(t), x0, 0.0, 2.0, 400)
        assert rel(balancedness(*split(x_T)), B0) < 1e-7  # RK4 error, O(h⁴), ~6e-9 here
        assert rel(x_T, x0) > 0.05
    # negative control: U and V see different scalars
    D = torch.ones_like(x0)
    D[: N * K] = 3.0
    x_T = rk4(lambda t, x: -D * grad_vec(x), x0, 0.0, 2.0, 400)
    assert rel(balancedness(*split(x_T)), B0) > 1e-2


def test_propA4_gd_step_changes_balancedness_only_at_second_order():
    """One library GD step: B₁ − B₀ = lr² (G_UᵀG_U − G_VᵀG_V) exactly (the first-order terms
    UᵀEV − VᵀEᵀU cancel). Adam's step changes B at first order in lr."""
    loss, U0, V0 = problem(seed=9)
    G_U, G_V = grads(loss, U0, V0)
    B0 = balancedness(U0, V0)
    lr = get_spec("gd").defaults["lr"]
    (U1, V1), = run(factory("gd"), U0, V0, loss, 1)[0]
    assert rel(balancedness(U1, V1) - B0, lr**2 * (G_U.T @ G_U - G_V.T @ G_V)) < 1e-10
    # negative control: Adam at a small lr: the change is O(lr), far above lr²‖…‖
    small = 1e-4
    (A1, C1), = run(factory("adam", lr=small), U0, V0, loss, 1)[0]
    second_order = small**2 * (G_U.T @ G_U - G_V.T @ G_V).norm()
    assert (balancedness(A1, C1) - B0).norm() > 100 * second_order
