"""Stacked runs (``batch_dims``) update exactly like the runs one by one, for every rule."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, LR_FACTORS, NUM_RUNS, leaves, run_zoo, zoo_kwargs

NUM_STEPS = 8


def _per_run_lr(name: str, factors=LR_FACTORS) -> torch.Tensor:
    return zoo_kwargs(name)["lr"] * torch.tensor(factors, dtype=DTYPE)


def _loop(name, problem, factors, lrs, num_steps=NUM_STEPS, **overrides):
    U0, V0 = factors
    out = []
    for b in range(NUM_RUNS):
        params = leaves(U0[b], V0[b])
        run_zoo(name, params, problem.run(b), num_steps, lr=float(lrs[b]), **overrides)
        out.append([p.detach() for p in params])
    return [torch.stack([run[i] for run in out]) for i in range(2)]


def test_stacked_equals_loop_with_per_run_lr(zoo_name, problem, factors):
    lrs = _per_run_lr(zoo_name)
    params = leaves(*factors)
    run_zoo(zoo_name, params, problem.loss, NUM_STEPS, lr=lrs, batch_dims=1)
    expected = _loop(zoo_name, problem, factors, lrs)
    for got, want in zip(params, expected, strict=True):
        assert torch.isfinite(got).all()
        assert_close(got.detach(), want, atol=1e-12, rtol=0)
    # the runs genuinely moved, and differently
    assert not torch.allclose(params[0].detach(), factors[0], atol=1e-6)
    assert not torch.allclose(params[0][0], params[0][1], atol=1e-6)


def test_stacked_with_permuted_lrs_is_not_the_loop(zoo_name, problem, factors):
    """Negative control: pairing run b with another run's lr must be visible."""
    lrs = _per_run_lr(zoo_name)
    params = leaves(*factors)
    run_zoo(zoo_name, params, problem.loss, NUM_STEPS, lr=lrs.flip(0), batch_dims=1)
    expected = _loop(zoo_name, problem, factors, lrs)
    assert (params[0].detach()[0] - expected[0][0]).abs().max() > 1e-8


def test_stacked_equals_loop_with_per_run_weight_decay(zoo_name, problem, factors):
    """A tensor ``weight_decay``, one value per run (0 in the first), matches the loop."""
    decays = torch.tensor([0.0, 0.3, 1.0], dtype=DTYPE)
    lr = zoo_kwargs(zoo_name)["lr"]
    params = leaves(*factors)
    run_zoo(zoo_name, params, problem.loss, NUM_STEPS, lr=lr, weight_decay=decays, batch_dims=1)
    U0, V0 = factors
    for b in range(NUM_RUNS):
        single = leaves(U0[b], V0[b])
        run_zoo(zoo_name, single, problem.run(b), NUM_STEPS, lr=lr,
                weight_decay=float(decays[b]))
        for got, want in zip(params, single, strict=True):
            assert_close(got.detach()[b], want.detach(), atol=1e-12, rtol=0)
    # negative control: the decay acts (run 2, λ = 1, ends elsewhere than without it)
    plain = leaves(U0[2], V0[2])
    run_zoo(zoo_name, plain, problem.run(2), NUM_STEPS, lr=lr)
    assert (plain[0].detach() - params[0].detach()[2]).abs().max() > 1e-6


@pytest.mark.parametrize("name", ["adam", "scalar_adam", "lion"])
def test_per_run_betas(name, problem, factors):
    """Tensor betas, one pair per run, also match the loop."""
    beta1 = torch.tensor([0.9, 0.8, 0.5], dtype=DTYPE)
    beta2 = torch.tensor([0.999, 0.99, 0.9], dtype=DTYPE)
    lr = zoo_kwargs(name)["lr"]
    params = leaves(*factors)
    run_zoo(name, params, problem.loss, NUM_STEPS, lr=lr, betas=(beta1, beta2), batch_dims=1)
    U0, V0 = factors
    for b in range(NUM_RUNS):
        single = leaves(U0[b], V0[b])
        betas = (float(beta1[b]), float(beta2[b]))
        run_zoo(name, single, problem.run(b), NUM_STEPS, lr=lr, betas=betas)
        for got, want in zip(params, single, strict=True):
            assert_close(got.detach()[b], want.detach(), atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", ["scalar_adam", "muon", "shampoo", "adafactor"])
def test_two_batch_dims(name, problem, factors):
    """``batch_dims=2``: a 1 × 3 grid of runs is the same as ``batch_dims=1`` over 3 runs."""
    lrs = _per_run_lr(name)
    flat = leaves(*factors)
    run_zoo(name, flat, problem.loss, NUM_STEPS, lr=lrs, batch_dims=1)
    grid = leaves(*(f.unsqueeze(0) for f in factors))

    def grid_loss(U, V):
        return problem.loss(U[0], V[0])

    run_zoo(name, grid, grid_loss, NUM_STEPS, lr=lrs.unsqueeze(0), batch_dims=2)
    for got, want in zip(grid, flat, strict=True):
        assert_close(got.detach()[0], want.detach(), atol=1e-12, rtol=0)
