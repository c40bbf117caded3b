"""Hyperspectral completion problem: the matrix protocol, observed-only centring (no leak),
masks from the seed, the density rule, and loss/gradients against autograd in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gaugebook.hyperspectral.completion import (
    CompletionBatch,
    centre_bands,
    degrees_of_freedom,
    density_for_ratio,
    init_factors,
    make_instance,
    observation_mask,
    sample_ratio,
    scene_matrix,
)

F64 = torch.float64


def _cube(seed=0, rows=12, cols=10, bands=7):
    rng = np.random.default_rng(seed)
    cube = rng.uniform(0.0, 5.0, size=(rows, cols, bands))
    cube[0, 0] = 0.0   # two all-zero pixels
    cube[3, 4] = 0.0
    return cube


def test_scene_matrix_protocol():
    cube = _cube()
    Y_all = scene_matrix(cube, num_rows=None)
    flat = cube.reshape(-1, 7) / cube.max()
    keep = (flat != 0).any(axis=1)
    np.testing.assert_array_equal(Y_all.numpy(), flat[keep])
    assert Y_all.shape == (118, 7) and float(Y_all.max()) == 1.0
    Y = scene_matrix(cube, num_rows=50, seed=2026)
    assert torch.equal(Y, scene_matrix(cube, num_rows=50, seed=2026))
    idx = torch.randperm(118, generator=torch.Generator().manual_seed(2026))[:50]
    assert torch.equal(Y, Y_all[idx])
    assert not torch.equal(Y, scene_matrix(cube, num_rows=50, seed=1))
    with pytest.raises(ValueError, match="Invalid num_rows"):
        scene_matrix(cube, num_rows=119)


def test_mask_reproducible_from_seed_plus_7():
    m = observation_mask(40, 30, 0.3, seed=42)
    assert torch.equal(m, observation_mask(40, 30, 0.3, seed=42))
    u = torch.rand(40, 30, generator=torch.Generator().manual_seed(49), dtype=F64)
    assert torch.equal(m, u < 0.3)
    assert not torch.equal(m, observation_mask(40, 30, 0.3, seed=123))
    assert abs(m.double().mean().item() - 0.3) < 0.06
    with pytest.raises(ValueError, match="Invalid density"):
        observation_mask(4, 4, 0.0, seed=0)


def test_the_papers_arithmetic_float32_data_steps_and_mask():
    """``data_dtype="float32"``: the paper's script (float32 cube, ``max + 1e-12``, row norm
    > 1e-8, float32 uniforms for the mask); the float32 uniforms are another random stream, so
    the mask differs from the float64 draw (the negative control)."""
    cube = _cube()
    cube[5, 5] = 1e-12                      # a pixel the paper drops (norm ≤ 1e-8) but not ours
    Y32 = scene_matrix(cube, num_rows=None, data_dtype="float32")
    x = torch.tensor(cube, dtype=torch.float32).reshape(-1, 7)
    x = x / (x.max() + 1e-12)
    assert Y32.dtype == torch.float32
    assert torch.equal(Y32, x[x.norm(dim=1) > 1e-8])
    assert len(Y32) == len(scene_matrix(cube, num_rows=None)) - 1
    m32 = observation_mask(40, 30, 0.3, seed=42, data_dtype="float32")
    assert torch.equal(m32, torch.rand(40, 30, generator=torch.Generator().manual_seed(49)) < 0.3)
    assert not torch.equal(m32, observation_mask(40, 30, 0.3, seed=42))
    Y50 = Y32[:50]
    inst = make_instance(Y50, 0.3, 42, "all", dtype=F64, data_dtype="float32")
    assert torch.equal(inst.target, (Y50 - Y50.mean(dim=0, keepdim=True)).double())
    with pytest.raises(ValueError, match="Invalid data_dtype"):
        observation_mask(4, 4, 0.5, seed=0, data_dtype="float16")


def test_observed_only_centring_does_not_see_held_out_entries():
    Y = scene_matrix(_cube(1), num_rows=None)
    mask = observation_mask(*Y.shape, 0.4, seed=5)
    Yc, mu = centre_bands(Y, mask, "observed")
    w = mask.double()
    assert torch.allclose((w * Yc).sum(0), torch.zeros(7, dtype=F64), atol=1e-12)
    # change every held-out entry: the observed-only centring of observed entries is unchanged
    Y2 = torch.where(mask, Y, Y + 10.0)
    Yc2, mu2 = centre_bands(Y2, mask, "observed")
    assert torch.equal(mu, mu2)
    assert torch.equal(Yc[mask], Yc2[mask])
    # negative control: the paper's all-entries centring leaks the held-out entries
    _, mu_all = centre_bands(Y, mask, "all")
    _, mu_all2 = centre_bands(Y2, mask, "all")
    assert (mu_all2 - mu_all).abs().min() > 1.0
    assert torch.allclose(mu_all, Y.mean(0))
    with pytest.raises(ValueError, match="Invalid centring"):
        centre_bands(Y, mask, "median")


def test_density_rule_gives_the_papers_densities():
    assert degrees_of_freedom(2000, 200, 24) == 24 * 2176
    assert density_for_ratio(1.15, 2000, 200) == 0.15   # Indian Pines
    assert density_for_ratio(1.9, 2000, 200) == 0.25
    assert density_for_ratio(1.15, 2000, 103) == 0.28   # Pavia University
    assert density_for_ratio(1.9, 2000, 103) == 0.46
    rho = density_for_ratio(1.15, 2000, 204, digits=None)
    assert sample_ratio(rho, 2000, 204) == pytest.approx(1.15, rel=1e-12)
    with pytest.raises(ValueError, match="Invalid density"):
        density_for_ratio(1.9, 30, 30)


def test_init_factors_from_seed_plus_1000():
    U, V = init_factors(42, 20, 6, 4, 1e-2)
    g = torch.Generator().manual_seed(1042)
    U_ref = torch.randn(20, 4, generator=g) * 1e-2
    V_ref = torch.randn(6, 4, generator=g) * 1e-2
    assert torch.equal(U, U_ref) and torch.equal(V, V_ref)
    U64, _ = init_factors(42, 20, 6, 4, 1e-2, dtype=F64)
    assert torch.equal(U64, U_ref.double())


def _instances():
    Y = scene_matrix(_cube(2), num_rows=60, seed=0)
    return Y, [make_instance(Y, 0.35, s, dtype=F64) for s in (1, 2)]


def test_loss_grads_and_metrics_against_autograd():
    Y, insts = _instances()
    batch = CompletionBatch(insts, [0, 1, 0])
    g = torch.Generator().manual_seed(0)
    U = torch.randn(3, 60, 5, generator=g, dtype=F64).requires_grad_()
    V = torch.randn(3, 7, 5, generator=g, dtype=F64).requires_grad_()
    loss, GU, GV = batch.loss_and_grads(U.detach(), V.detach())
    ref = []
    for b, i in enumerate([0, 1, 0]):
        inst = insts[i]
        E = U[b] @ V[b].T - inst.target
        ref.append((E[inst.mask] ** 2).mean())
    ref = torch.stack(ref)
    gU, gV = torch.autograd.grad(ref.sum(), [U, V])
    assert torch.allclose(loss, ref.detach(), rtol=1e-12, atol=0)
    assert torch.allclose(GU, gU, rtol=1e-10, atol=1e-14)
    assert torch.allclose(GV, gV, rtol=1e-10, atol=1e-14)
    m = batch.metrics(U.detach(), V.detach())
    for b, i in enumerate([0, 1, 0]):
        inst = insts[i]
        E = (U[b] @ V[b].T - inst.target).detach()
        rmse = E[~inst.mask].pow(2).mean().sqrt()
        assert m["heldout_rmse"][b].item() == pytest.approx(rmse.item(), rel=1e-10)
    assert torch.allclose(m["train_loss"], loss, rtol=1e-10)
    assert set(m) == {"train_loss", "heldout_rmse", "effective_rank"}
    assert set(batch.metrics(U.detach(), V.detach(), spectral=False)) == set(
        CompletionBatch.curve_names)
    # the held-out RMSE compares with the raw matrix: W + mu against Y
    W = (U[0] @ V[0].T).detach() + insts[0].mu
    direct = (W - Y)[~insts[0].mask].pow(2).mean().sqrt()
    assert m["heldout_rmse"][0].item() == pytest.approx(direct.item(), rel=1e-10)


def test_select_keeps_rows():
    _, insts = _instances()
    batch = CompletionBatch(insts, [0, 1, 1])
    g = torch.Generator().manual_seed(1)
    U = torch.randn(3, 60, 4, generator=g, dtype=F64)
    V = torch.randn(3, 7, 4, generator=g, dtype=F64)
    full = batch.loss_and_grads(U, V)[0]
    sub = batch.select([2, 0]).loss_and_grads(U[[2, 0]], V[[2, 0]])[0]
    assert torch.allclose(sub, full[[2, 0]], rtol=1e-12)
    with pytest.raises(ValueError, match="Invalid run_instance"):
        CompletionBatch(insts, [2])
