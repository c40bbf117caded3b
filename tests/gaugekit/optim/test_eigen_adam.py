"""EigenAdam: Adam in the gauge-covariant eigenbasis of EMA(GᵀG).

Parity with Adam when the basis is the identity and fixed; equivariance to round-off on simple
spectra (both gauge sides), the residual when eigenvalues collide and its growth near a
collision; sign and order of the eigenvectors provably irrelevant (signed permutations pass, a
rotation inside a plane does not); state_dict round trip across refreshes; validation.
"""

from __future__ import annotations

import inspect
import io
import math

import pytest
import torch
from helpers import (
    BROKEN,
    DTYPE,
    EXACT,
    generator,
    haar,
    random_factors,
    sensing,
    signed_permutation,
)
from torch.testing import assert_close
from zoo_support import leaves, train

import gaugekit.optim.eigen_adam as eigen_module
from gaugebook.present.roundoff import falls_to_floor
from gaugekit.audit.factors import audit_equivariance
from gaugekit.gauge import relative_distance
from gaugekit.optim import Adam, EigenAdam, get_spec, make_optimizer
from gaugekit.optim.eigen_adam import (
    cluster_pooling,
    covariant_eigenbasis,
    transfer_second_moment,
)

NUM_STEPS = 12


def _eigen(**kw):
    return lambda params: EigenAdam(params, **{"lr": 1e-2, **kw})


# --------------------------------------------------------------------------------------------
# parity with Adam
# --------------------------------------------------------------------------------------------


def test_identity_basis_never_refreshed_is_exactly_adam_and_torch_adam():
    loss = sensing(seed=3)
    U0, V0 = random_factors(7, 5, 3, seed=4)
    ours, adam, ref = leaves(U0, V0), leaves(U0, V0), leaves(U0, V0)
    train(EigenAdam(ours, lr=1e-2, update_freq=None), ours, loss, NUM_STEPS)
    train(Adam(adam, lr=1e-2), adam, loss, NUM_STEPS)
    train(torch.optim.Adam(ref, lr=1e-2), ref, loss, NUM_STEPS)
    for a, b, c in zip(ours, adam, ref, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)
        assert_close(a.detach(), c.detach(), atol=1e-12, rtol=0)
    assert (ours[0].detach() - U0).abs().max() > 1e-3


def test_refreshing_the_basis_is_not_adam():
    """Negative control: with refreshes the rule leaves Adam's trajectory."""
    loss = sensing(seed=3)
    U0, V0 = random_factors(7, 5, 3, seed=4)
    ours, adam = leaves(U0, V0), leaves(U0, V0)
    train(EigenAdam(ours, lr=1e-2, update_freq=5), ours, loss, NUM_STEPS)
    train(Adam(adam, lr=1e-2), adam, loss, NUM_STEPS)
    assert relative_distance(ours[0].detach() - U0, adam[0].detach() - U0).item() > 1e-2


def test_first_step_is_adaptive_not_a_rescaled_gradient():
    """Per-coordinate adaptivity survives: step 1 is ≈ sign(G E) Eᵀ, not ∝ G (shared scale)."""
    G = torch.randn(6, 3, generator=generator(5), dtype=DTYPE)
    P = torch.zeros(6, 3, dtype=DTYPE, requires_grad=True)
    opt = EigenAdam([P], lr=1.0, eps=0.0)
    P.grad = G.clone()
    opt.step()
    step = -P.detach()
    E = opt.state[P]["basis"]
    assert_close(step, torch.sign(G @ E) @ E.T, atol=1e-12, rtol=0)
    cosine = (step * G).sum() / (step.norm() * G.norm())
    assert cosine < 0.99


# --------------------------------------------------------------------------------------------
# the basis and the moment transfer
# --------------------------------------------------------------------------------------------


def test_covariant_eigenbasis_rotates_with_the_gauge():
    g = generator(6)
    G = torch.randn(8, 4, generator=g, dtype=DTYPE)
    m = torch.randn(8, 4, generator=g, dtype=DTYPE)
    Q = haar(4, seed=7)
    E = covariant_eigenbasis(G.T @ G, m, "right")
    E_rot = covariant_eigenbasis(Q.T @ G.T @ G @ Q, m @ Q, "right")
    assert_close(E_rot, Q.T @ E, atol=1e-12, rtol=0)
    vals = torch.diagonal(E.T @ G.T @ G @ E)
    assert torch.all(vals[:-1] > vals[1:])  # descending
    assert torch.all(torch.gather(m @ E, 0, (m @ E).abs().argmax(0, keepdim=True)) > 0)
    # the left side: the gauge acts as G → Q G
    Ql = haar(8, seed=8)
    L = covariant_eigenbasis(G @ G.T, m, "left")
    L_rot = covariant_eigenbasis(Ql @ G @ G.T @ Ql.T, Ql @ m, "left")
    assert_close(L_rot[:, :4], (Ql @ L)[:, :4], atol=1e-10, rtol=0)  # the range: simple


def test_transfer_second_moment():
    g = generator(9)
    v = torch.rand(5, 4, generator=g, dtype=DTYPE)
    old, new = haar(4, seed=10), haar(4, seed=11)
    # entries of order one through two 4 × 4 products: 1e-14 is some fifty units of round-off
    assert_close(transfer_second_moment(v, old, old, "right"), v, atol=1e-14, rtol=0)
    # mass is conserved row by row (columns of C∘C sum to one)
    assert_close(transfer_second_moment(v, old, new, "right").sum(1), v.sum(1), atol=1e-14,
                 rtol=0)
    P = signed_permutation(4, seed=12)
    permuted = transfer_second_moment(v, old, old @ P, "right")
    assert_close(permuted, v @ P.abs(), atol=1e-14, rtol=0)
    vl = torch.rand(4, 5, generator=g, dtype=DTYPE)
    assert_close(transfer_second_moment(vl, old, old @ P, "left"), P.abs().T @ vl, atol=1e-14,
                 rtol=0)


# --------------------------------------------------------------------------------------------
# the gauge
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("update_freq", [1, 3, 10])
def test_equivariant_to_round_off_on_a_simple_spectrum(update_freq):
    result = audit_equivariance(_eigen(update_freq=update_freq), num_steps=30)
    assert result.equivariant and result.residual < EXACT
    assert result.displacement > 0.05
    # negative control: the same audit sees coordinate-wise Adam
    assert audit_equivariance(_eigen(update_freq=None), num_steps=30).residual > BROKEN


def _left_gauge_residual(side: str, num_steps: int = 20) -> float:
    """Factors stored transposed (A = Uᵀ, k × n): the gauge acts on the left, A → Qᵀ A."""
    loss = sensing(seed=13)
    U0, V0 = random_factors(7, 5, 3, seed=14)
    Q = haar(3, seed=15)
    runs = []
    for A0, B0 in ((U0.T, V0.T), (Q.T @ U0.T, Q.T @ V0.T)):
        A, B = leaves(A0, B0)
        opt = EigenAdam([A, B], lr=1e-2, update_freq=3, side=side)
        path = []
        for _ in range(num_steps):
            opt.zero_grad()
            loss(A.T, B.T).backward()
            opt.step()
            path.append((A.detach() - A0, B.detach() - B0))
        runs.append(path)
    return max(relative_distance(dA_rot, Q.T @ dA).item()
               for (dA, _), (dA_rot, _) in zip(*runs, strict=True))


def test_left_side_is_equivariant_for_a_left_gauge():
    assert _left_gauge_residual("left") < EXACT
    assert _left_gauge_residual("right") > BROKEN  # negative control: the wrong side


def _collision_residual(delta: float, **kw) -> float:
    """A linear loss ⟨I, U Vᵀ⟩: G_U = V, and V₀ has orthogonal columns of norms 1, 1 + δ, 2, so
    the first refresh sees the spectrum (1, (1 + δ)², 4) of V₀ᵀV₀ (times 1 − β_R)."""
    g = generator(16)
    U0 = 0.5 * torch.randn(4, 3, generator=g, dtype=DTYPE)
    columns, _ = torch.linalg.qr(torch.randn(4, 3, generator=g, dtype=DTYPE))
    V0 = columns * torch.tensor([1.0, 1.0 + delta, 2.0], dtype=DTYPE)
    Q = haar(3, seed=17)
    eye = torch.eye(4, dtype=DTYPE)
    result = audit_equivariance(_eigen(update_freq=5, **kw), U=U0, V=V0, Q=Q, num_steps=20,
                                loss=lambda U, V: (eye * (U @ V.T)).sum())
    return result.residual


def test_colliding_eigenvalues_break_the_gauge_and_near_collisions_cost_round_off():
    exact = _collision_residual(0.0)
    assert exact > BROKEN, exact
    near = {d: _collision_residual(d) for d in (1e-1, 1e-4, 1e-8, 1e-11)}
    assert near[1e-1] < EXACT
    # the eigenvectors are known only to u/δ: the residual grows as the gap closes, and falls
    # to the float64 floor as it opens (below 1e-12, 10⁴ units of round-off, two residuals are
    # not ordered: at δ = 1e-4 and 1e-1 both sit near 1e-14, in either order on another CPU)
    assert near[1e-11] > 100 * max(near[1e-4], 1e-12)
    assert falls_to_floor([near[d] for d in (1e-11, 1e-8, 1e-4, 1e-1)], 1e-12)
    assert near[1e-8] < 1e-5 and near[1e-11] > 1e-8
    assert all(r < exact for r in near.values())


def test_cluster_pooling_repairs_a_collision():
    """One second moment per eigenvalue cluster: equivariant at an exact collision."""
    assert _collision_residual(0.0, cluster_tol=1e-6) < EXACT
    assert _collision_residual(1e-9, cluster_tol=1e-6) < EXACT  # a near collision, pooled
    assert _collision_residual(0.0, cluster_tol=None) > BROKEN  # the control


def test_cluster_pooling_changes_nothing_on_a_well_separated_spectrum():
    loss = sensing(seed=26)
    U0, V0 = random_factors(7, 5, 3, seed=27)
    plain, pooled = leaves(U0, V0), leaves(U0, V0)
    train(EigenAdam(plain, lr=1e-2, update_freq=3), plain, loss, NUM_STEPS)
    opt = train(EigenAdam(pooled, lr=1e-2, update_freq=3, cluster_tol=1e-9), pooled, loss,
                NUM_STEPS)
    for a, b in zip(plain, pooled, strict=True):
        assert_close(a.detach(), b.detach(), atol=1e-14, rtol=0)
    assert_close(opt.state[pooled[0]]["pool"], torch.eye(3, dtype=DTYPE), atol=0, rtol=0)


def test_cluster_pooling_matrix():
    Q = haar(4, seed=28)
    stat = Q @ torch.diag(torch.tensor([5.0, 2.0, 2.0 + 1e-12, 0.0], dtype=DTYPE)) @ Q.T
    P = cluster_pooling(stat, 1e-9)
    assert_close(P, torch.tensor([[1, 0, 0, 0], [0, .5, .5, 0], [0, .5, .5, 0], [0, 0, 0, 1]],
                                 dtype=DTYPE), atol=0, rtol=0)
    assert_close(cluster_pooling(stat, 0.0), torch.eye(4, dtype=DTYPE), atol=0, rtol=0)
    assert_close(cluster_pooling(torch.zeros(3, 3, dtype=DTYPE), 0.0),
                 torch.full((3, 3), 1 / 3, dtype=DTYPE), atol=1e-16, rtol=0)


def _trajectory_with_basis_map(basis_map, monkeypatch) -> list[torch.Tensor]:
    original = eigen_module.covariant_eigenbasis

    def patched(stat, reference, side):
        return basis_map(original(stat, reference, side))

    monkeypatch.setattr(eigen_module, "covariant_eigenbasis", patched)
    loss = sensing(seed=18)
    params = leaves(*random_factors(7, 5, 3, seed=19))
    train(EigenAdam(params, lr=1e-2, update_freq=2), params, loss, NUM_STEPS)
    monkeypatch.undo()
    return [p.detach() for p in params]


def test_eigenvector_sign_and_order_do_not_matter_but_a_plane_rotation_does(monkeypatch):
    """Coordinate-wise Adam commutes with signed permutations, so any sign/order convention
    gives the same trajectory; an arbitrary basis inside a 2-plane (a collision) does not."""
    plain = _trajectory_with_basis_map(lambda E: E, monkeypatch)
    P = signed_permutation(3, seed=20)
    flipped = _trajectory_with_basis_map(lambda E: E @ P, monkeypatch)
    c, s = math.cos(0.3), math.sin(0.3)
    R = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=DTYPE)
    rotated = _trajectory_with_basis_map(lambda E: E @ R, monkeypatch)
    for a, b in zip(plain, flipped, strict=True):
        assert_close(a, b, atol=EXACT, rtol=0)
    assert (plain[0] - rotated[0]).abs().max() > 1e-4


# --------------------------------------------------------------------------------------------
# torch.optim conventions beyond the registry-wide tests
# --------------------------------------------------------------------------------------------


def _saved(opt):
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("side", ["right", "left"])
def test_state_dict_round_trip_across_refreshes(side):
    loss = sensing(seed=21)
    U0, V0 = random_factors(7, 5, 3, seed=22)
    kw = {"lr": 1e-2, "update_freq": 2, "side": side}
    first = leaves(U0, V0)
    opt = train(EigenAdam(first, **kw), first, loss, 5)
    second = leaves(*first)
    fresh = EigenAdam(second, **kw)
    fresh.load_state_dict(_saved(opt))
    train(fresh, second, loss, 5)
    straight = leaves(U0, V0)
    opt_straight = train(EigenAdam(straight, **kw), straight, loss, 10)
    for a, b in zip(second, straight, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)
    assert_close(fresh.state_dict()["state"], opt_straight.state_dict()["state"], atol=0, rtol=0)


def test_param_groups_with_their_own_lr_and_side():
    loss = sensing(seed=23)
    U0, V0 = random_factors(7, 5, 3, seed=24)
    U, V = leaves(U0, V0)
    opt = EigenAdam([{"params": [U]}, {"params": [V], "lr": 3e-3}], lr=1e-2, update_freq=3)
    train(opt, [U, V], loss, 6)
    U1, V1 = leaves(U0, V0)
    o1, o2 = EigenAdam([U1], lr=1e-2, update_freq=3), EigenAdam([V1], lr=3e-3, update_freq=3)
    for _ in range(6):
        o1.zero_grad()
        o2.zero_grad()
        loss(U1, V1).backward()
        o1.step()
        o2.step()
    assert_close(U.detach(), U1.detach(), atol=0, rtol=0)
    assert_close(V.detach(), V1.detach(), atol=0, rtol=0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"update_freq": 0}, "update_freq"), ({"update_freq": 2.0}, "update_freq"),
     ({"update_freq": True}, "update_freq"), ({"side": "both"}, "side"),
     ({"gram_beta": 1.0}, "gram_beta"), ({"gram_beta": math.nan}, "gram_beta"),
     ({"betas": (0.9, 1.0)}, "betas"), ({"eps": -1.0}, "eps"), ({"lr": -0.1}, "lr"),
     ({"cluster_tol": 1.0}, "cluster_tol"), ({"cluster_tol": True}, "cluster_tol"),
     ({"max_precond_dim": 0}, "max_precond_dim"), ({"max_precond_dim": 2.0}, "max_precond_dim"),
     ({"max_precond_dim": True}, "max_precond_dim")],
)
def test_invalid_arguments_name_themselves(kwargs, name):
    P = torch.zeros(3, 2, dtype=DTYPE, requires_grad=True)
    with pytest.raises(ValueError, match=rf"^Invalid {name}\b"):
        EigenAdam([P], **kwargs)


def test_vectors_are_refused_and_none_is_a_valid_update_freq():
    with pytest.raises(ValueError, match="^Invalid params"):
        EigenAdam([torch.zeros(3, dtype=DTYPE, requires_grad=True)])
    EigenAdam([torch.zeros(3, 2, dtype=DTYPE, requires_grad=True)], update_freq=None)


# --------------------------------------------------------------------------------------------
# dtypes: eigh has no half-precision kernel
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_refused_at_construction_naming_the_parameter(dtype):
    with pytest.raises(RuntimeError):  # the premise: eigh itself refuses it
        torch.linalg.eigh(torch.eye(2, dtype=dtype))
    ok = torch.zeros(3, 2, requires_grad=True)
    half = torch.zeros(4, 2, dtype=dtype, requires_grad=True)
    expected = (rf"^Invalid params: \"param_groups\[0\]\['params'\]\[1\] of shape \(4, 2\) and "
                rf"dtype {dtype}\"; expected torch.float32 or torch.float64 parameters: "
                r"EigenAdam's eigenbasis needs torch.linalg.eigh, which has no float16")
    with pytest.raises(ValueError, match=expected):
        EigenAdam([ok, half])
    opt = EigenAdam([ok])
    with pytest.raises(ValueError, match=r"^Invalid params: \"param_groups\[1\]\['params'\]\[0\]"):
        opt.add_param_group({"params": [half]})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_single_and_double_precision_are_taken_and_step(dtype):
    P = torch.zeros(4, 2, dtype=dtype, requires_grad=True)
    opt = EigenAdam([P], lr=0.1)
    P.grad = torch.randn(4, 2, generator=generator(31), dtype=dtype)
    opt.step()
    assert opt.state[P]["basis"].dtype == dtype and P.abs().max() > 0.05


# --------------------------------------------------------------------------------------------
# wide layers: max_precond_dim
# --------------------------------------------------------------------------------------------


def test_a_gauge_side_beyond_max_precond_dim_is_plain_adam():
    loss = sensing(seed=32)
    U0, V0 = random_factors(7, 5, 3, seed=33)
    wide, adam = leaves(U0, V0), leaves(U0, V0)
    opt = train(EigenAdam(wide, lr=1e-2, max_precond_dim=2), wide, loss, NUM_STEPS)
    train(Adam(adam, lr=1e-2), adam, loss, NUM_STEPS)
    for a, b in zip(wide, adam, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)
    assert set(opt.state[wide[0]]) == {"step", "exp_avg", "exp_avg_sq"}
    # the gauge (k = 3) is then broken; at the limit k = 3 it is kept
    assert audit_equivariance(_eigen(max_precond_dim=2), num_steps=20).residual > BROKEN
    kept = audit_equivariance(_eigen(max_precond_dim=3), num_steps=20)
    assert kept.equivariant and kept.residual < EXACT


def test_max_precond_dim_measures_the_gauge_side():
    """``side="left"`` measures the rows; the other side's width does not count."""
    A = torch.zeros(3, 50, dtype=DTYPE, requires_grad=True)
    for side, limit, rotated in (("left", 3, True), ("left", 2, False), ("right", 3, False),
                                 ("right", 50, True)):
        opt = EigenAdam([A], side=side, max_precond_dim=limit)
        A.grad = torch.ones_like(A)
        opt.step()
        assert ("basis" in opt.state[A]) is rotated, (side, limit)


def test_the_default_limit_keeps_a_wide_layer_off_eigh(monkeypatch):
    """A ``10 × 2048``-like layer (``side="right"``, 1100 > 1024 columns) refreshes no eigh; a
    narrow one beside it does."""
    assert inspect.signature(EigenAdam).parameters["max_precond_dim"].default == 1024
    sizes = []
    original = eigen_module.covariant_eigenbasis

    def spy(stat, reference, side):
        sizes.append(stat.shape[-1])
        return original(stat, reference, side)

    monkeypatch.setattr(eigen_module, "covariant_eigenbasis", spy)
    wide = torch.zeros(2, 1100, requires_grad=True)
    narrow = torch.zeros(6, 8, requires_grad=True)
    opt = EigenAdam([wide, narrow], update_freq=1)
    for _ in range(2):
        wide.grad, narrow.grad = torch.ones_like(wide), torch.ones_like(narrow)
        opt.step()
    assert sizes == [8, 8] and "basis" not in opt.state[wide]
    EigenAdam([wide], update_freq=1, max_precond_dim=None).step()  # control: no limit, eigh
    assert sizes == [8, 8, 1100]


def test_a_checkpoint_from_before_the_limit_loads_without_one():
    U, V = leaves(*random_factors(7, 5, 3, seed=34))
    saved = _saved(train(EigenAdam([U, V], lr=1e-2), [U, V], sensing(seed=35), 2))
    for group in saved["param_groups"]:
        del group["max_precond_dim"]
    fresh = EigenAdam([U, V], lr=1e-2)
    assert fresh.param_groups[0]["max_precond_dim"] == 1024
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["max_precond_dim"] is None


def test_registry_entry():
    spec = get_spec("eigen_adam")
    assert spec.cls is EigenAdam and spec.equivariant and spec.matrix_only
    assert "simple spectrum" in spec.reason
    U, V = leaves(*random_factors(7, 5, 3, seed=25))
    assert isinstance(make_optimizer("eigen_adam", [U, V]), EigenAdam)
