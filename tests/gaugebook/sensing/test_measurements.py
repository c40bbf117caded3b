"""The matrix-sensing problem: the paper's instances, the loss, its gradients, the metrics."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import haar
from torch.testing import assert_close

from gaugebook.sensing.measurements import (
    SensingBatch,
    default_num_measurements,
    degrees_of_freedom,
    init_factors,
    loss_and_grads,
    make_instance,
    min_nuclear_norm_solution,
    recovery_metrics,
    relative_error,
    sensing_loss,
    validation_error,
)

F64 = torch.float64
#: Nuclear norms of X_star for the paper's seeds (float32 product, singular values in float64).
CHECK_VALUES = {42: 33.941225, 123: 41.082738, 456: 38.508539}


def small(seed: int = 0, n: int = 6, r: int = 2, num_val: int = 0, dtype=F64):
    return make_instance(seed, n, r, num_val=num_val, dtype=dtype)


@pytest.mark.parametrize("seed", sorted(CHECK_VALUES))
def test_paper_instances_reproduce_the_check_values(seed):
    inst = make_instance(seed)
    assert (inst.n, inst.r, inst.m, inst.A.shape) == (40, 3, 462, (462, 1600))
    assert inst.A.dtype == torch.float32
    nuc = torch.linalg.svdvals(inst.X_star.double()).sum().item()
    assert nuc == pytest.approx(CHECK_VALUES[seed], abs=1e-6)


def test_check_values_fail_for_another_draw_order():
    # negative control: drawing A before the planted factors gives another X_star
    g = torch.Generator().manual_seed(42)
    torch.randn(462, 1600, generator=g)
    U_star = torch.randn(40, 3, generator=g) / math.sqrt(3)
    V_star = torch.randn(40, 3, generator=g) / math.sqrt(3)
    other = torch.linalg.svdvals((U_star @ V_star.T).double()).sum().item()
    assert abs(other - CHECK_VALUES[42]) > 1e-3


def test_measurement_count_and_y():
    assert degrees_of_freedom(40, 3) == 231 and default_num_measurements(40, 3) == 462
    assert default_num_measurements(60, 5) == 1150
    inst = make_instance(42)
    assert_close(inst.y, inst.A @ inst.X_star.reshape(-1), rtol=0, atol=0)


def test_validation_draws_never_change_the_training_instance():
    plain, with_val = small(3), small(3, num_val=50)
    for name in ("X_star", "A", "y"):
        assert_close(getattr(with_val, name), getattr(plain, name), rtol=0, atol=0)
    assert with_val.A_val.shape == (50, 36) and plain.num_val == 0
    assert_close(with_val.y_val, with_val.A_val @ with_val.X_star.reshape(-1), rtol=1e-12,
                 atol=1e-12)
    # negative control: the validation rows are fresh draws, not copies of A
    assert not torch.allclose(with_val.A_val[: plain.m], plain.A[:50])


def test_dtypes_see_the_same_instance_and_init():
    a, b = make_instance(7, 8, 2, dtype=torch.float32), make_instance(7, 8, 2, dtype=F64)
    assert_close(b.A, a.A.double(), rtol=0, atol=0)
    U32, V32 = init_factors(7, 8, 8, 1e-3)
    U64, V64 = init_factors(7, 8, 8, 1e-3, dtype=F64)
    assert_close(U64, U32.double(), rtol=0, atol=0)
    # the init generator is seed + 7, U drawn before V
    g = torch.Generator().manual_seed(14)
    assert_close(U32, torch.randn(8, 8, generator=g) * 1e-3, rtol=0, atol=0)
    assert_close(V32, torch.randn(8, 8, generator=g) * 1e-3, rtol=0, atol=0)


def test_invalid_sizes_are_refused():
    with pytest.raises(ValueError, match="Invalid r"):
        make_instance(0, 4, 5)
    with pytest.raises(ValueError, match="Invalid n"):
        make_instance(0, 0, 1)
    with pytest.raises(ValueError, match="Invalid scale"):
        init_factors(0, 4, 4, 0.0)


def _factors(seed, shape, scale=0.3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=F64) * scale,
            torch.randn(*shape, generator=g, dtype=F64) * scale)


def test_closed_form_gradients_match_autograd():
    inst = small(1)
    U, V = _factors(2, (3, 6, 5))  # three runs stacked
    U.requires_grad_(True)
    V.requires_grad_(True)
    loss = sensing_loss(U, V, inst.A, inst.y)
    G_U, G_V = torch.autograd.grad(loss.sum(), [U, V])
    L, H_U, H_V = loss_and_grads(U.detach(), V.detach(), inst.A, inst.y)
    assert_close(L, loss.detach(), rtol=1e-12, atol=1e-14)
    assert_close(H_U, G_U, rtol=1e-10, atol=1e-12)
    assert_close(H_V, G_V, rtol=1e-10, atol=1e-12)
    # negative control: the gradient with respect to the transposed product is wrong
    wrong = H_V @ torch.eye(5, dtype=F64) * 0.5
    assert not torch.allclose(wrong, G_V, rtol=1e-6, atol=1e-9)


def test_loss_is_gauge_invariant_and_gradients_covariant():
    inst = small(4)
    U, V = _factors(5, (6, 6))
    Q = haar(6, 9)
    L, G_U, G_V = loss_and_grads(U, V, inst.A, inst.y)
    Lq, G_Uq, G_Vq = loss_and_grads(U @ Q, V @ Q, inst.A, inst.y)
    assert_close(Lq, L, rtol=1e-12, atol=1e-14)
    assert_close(G_Uq, G_U @ Q, rtol=1e-10, atol=1e-12)
    assert_close(G_Vq, G_V @ Q, rtol=1e-10, atol=1e-12)
    # negative control: an invertible but non-orthogonal A changes the gradient differently
    M = Q + 0.3 * torch.eye(6, dtype=F64)
    _, G_Um, _ = loss_and_grads(U @ M, V @ torch.linalg.inv(M).mT, inst.A, inst.y)
    assert not torch.allclose(G_Um, G_U @ M, rtol=1e-6, atol=1e-9)


def test_stacked_batch_matches_instance_by_instance():
    instances = [small(s, num_val=7) for s in (1, 2, 3)]
    order = [2, 0, 0, 1, 2, 2, 0]  # interleaved, one instance with a single run
    U, V = _factors(6, (len(order), 6, 6))
    batch = SensingBatch(instances, order)
    L, G_U, G_V = batch.loss_and_grads(U, V)
    for b, s in enumerate(order):
        l1, gu, gv = loss_and_grads(U[b], V[b], instances[s].A, instances[s].y)
        assert_close(L[b], l1, rtol=1e-12, atol=1e-14)
        assert_close(G_U[b], gu, rtol=1e-12, atol=1e-14)
        assert_close(G_V[b], gv, rtol=1e-12, atol=1e-14)
    assert_close(batch.loss(U, V), L, rtol=1e-12, atol=1e-14)
    sub = batch.select([4, 1])
    assert sub.run_instance == [2, 0]
    assert_close(sub.loss(U[[4, 1]], V[[4, 1]]), L[[4, 1]], rtol=0, atol=0)
    metrics = batch.metrics(U, V)
    assert_close(metrics["train_loss"], L, rtol=1e-12, atol=1e-14)
    assert_close(metrics["rec"][0], relative_error(U[0] @ V[0].T, instances[2].X_star),
                 rtol=1e-12, atol=0)
    # negative control: the runs really sit on different instances
    assert not torch.allclose(L[0], loss_and_grads(U[0], V[0], instances[0].A, instances[0].y)[0])


def test_float32_products_do_not_depend_on_the_batch():
    """Each run of a mixed stack gets its own instance's loss and gradient.

    Agreement is to float32 round-off, not bit for bit: with several BLAS threads the blocking
    of the batched product, and so the summation order, depends on the stack size. A run paired
    with the wrong instance would be off by O(1).
    """
    instances = [make_instance(s, 12, 2, dtype=torch.float32) for s in (1, 2)]
    g = torch.Generator().manual_seed(0)
    U, V = torch.randn(9, 12, 12, generator=g), torch.randn(9, 12, 12, generator=g)
    order = [0, 1, 1, 0, 1, 0, 0, 1, 1]
    L, G_U, _ = SensingBatch(instances, order).loss_and_grads(U, V)
    alone = [SensingBatch(instances, [s]).loss_and_grads(U[b:b + 1], V[b:b + 1])
             for b, s in enumerate(order)]
    assert_close(torch.cat([a[0] for a in alone]), L, rtol=1e-4, atol=0)
    scale = G_U.abs().max().item()
    assert_close(torch.cat([a[1] for a in alone]), G_U, rtol=1e-4, atol=1e-4 * scale)


def _float64_prefix_metrics(size: int, shift: int = 0):
    """Float64 metrics of the first ``size`` of 9 runs on one instance, computed in the full
    batch and alone (with ``shift``, the runs alone get the factors of the next runs)."""
    inst = [make_instance(1, 12, 2, num_val=50, dtype=F64)]
    g = torch.Generator().manual_seed(3)
    U, V = (torch.randn(9, 12, 12, generator=g, dtype=F64) for _ in range(2))
    full = SensingBatch(inst, [0] * 9).metrics(U, V, spectral=False)
    part = SensingBatch(inst, [0] * size).metrics(U[shift:shift + size], V[shift:shift + size],
                                                  spectral=False)
    return part, {k: v[:size] for k, v in full.items()}


def test_float64_metrics_do_not_depend_on_the_batch():
    """Runs never mix in a product, so a run's metrics are the same alone or in a batch, up to
    the float64 round-off of the BLAS's blocking. Bit equality holds with the padding of
    SensingBatch on the BLAS of the machines the records were made on (MKL on AMD EPYC), but it
    is a property of one BLAS, not of the math, so it is not asserted here."""
    for size in (1, 3, 5, 6, 7):
        part, full = _float64_prefix_metrics(size)
        for k in ("train_loss", "val_rec", "rec"):
            assert_close(part[k], full[k], rtol=1e-12, atol=0)
    # negative control: other runs' factors give other metrics, far beyond round-off
    part, full = _float64_prefix_metrics(5, shift=1)
    assert not torch.allclose(part["rec"], full["rec"], rtol=1e-3)


def test_batch_rejects_mismatched_instances_and_indices():
    with pytest.raises(ValueError, match="Invalid instances"):
        SensingBatch([small(1, n=6), small(2, n=7)], [0, 1])
    with pytest.raises(ValueError, match="Invalid run_instance"):
        SensingBatch([small(1)], [0, 1])
    with pytest.raises(ValueError, match="at least one"):
        SensingBatch([], [])


def test_metrics_on_known_matrices():
    inst = small(8, n=10, r=2, num_val=4000)
    U_star, S, Vh = torch.linalg.svd(inst.X_star)
    U = U_star[:, :2] * S[:2].sqrt()
    V = Vh[:2].T * S[:2].sqrt()  # balanced exact factorization of X_star
    m = recovery_metrics(U, V, inst.X_star, inst.A_val, inst.y_val)
    # X_star is a float32 product cast to float64: rank 2 up to float32 round-off
    assert m["rec"].item() == pytest.approx(0.0, abs=1e-6)
    assert m["balancedness"].item() == pytest.approx(0.0, abs=1e-10)
    assert m["nuclear_norm"].item() == pytest.approx(S[:2].sum().item(), rel=1e-12)
    assert 1.0 < m["effective_rank"].item() <= 2.0 + 1e-9
    # a wrong W: val_rec estimates rec from held-out measurements alone
    W = inst.X_star + 0.3 * torch.randn(10, 10, generator=torch.Generator().manual_seed(1),
                                        dtype=F64)
    rec = relative_error(W, inst.X_star).item()
    val = validation_error(W, inst.A_val, inst.y_val).item()
    assert val == pytest.approx(rec, rel=0.1)
    # negative control: the estimate tracks the error, it is not a constant
    assert validation_error(inst.X_star, inst.A_val, inst.y_val).item() < 1e-12
    # unbalanced gauge: same W, nonzero balancedness
    m2 = recovery_metrics(2 * U, V / 2, inst.X_star)
    assert m2["rec"].item() == pytest.approx(m["rec"].item(), abs=1e-12)
    assert m2["balancedness"].item() > 1.0
    assert math.isnan(m2["val_rec"].item())


def test_min_nuclear_norm_solution_is_feasible_and_no_larger_than_x_star():
    pytest.importorskip("cvxpy")
    inst = make_instance(5, 8, 1, m=18, dtype=F64)  # fewer than 2 · dof = 30
    X = min_nuclear_norm_solution(inst)
    residual = torch.linalg.vector_norm(inst.A @ X.reshape(-1) - inst.y)
    assert residual.item() < 1e-5 * torch.linalg.vector_norm(inst.y).item()
    nuc = torch.linalg.svdvals(X).sum().item()
    nuc_star = torch.linalg.svdvals(inst.X_star).sum().item()
    assert nuc <= nuc_star * (1 + 1e-6)
    # with many measurements the relaxation is exact
    rich = make_instance(5, 8, 1, m=40, dtype=F64)
    assert relative_error(min_nuclear_norm_solution(rich), rich.X_star).item() < 1e-4
