"""Every rule of the zoo against an independent implementation of the paper's definition."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from zoo_reference import REFERENCE_STEP, reference_run
from zoo_support import TEST_HPARAMS, leaves, run_zoo

from gaugekit.optim import GramPreconditioned, Shampoo

NUM_STEPS = 10
#: Shampoo runs past its second refresh (step 21) with the paper's update_freq = 20.
STEPS = {"shampoo": 23}
#: sign rules get an lr large enough for gradient signs to flip, so their averages matter.
LR = {"lion": 0.1, "signum": 0.1}


def _reference_hp(name: str) -> dict:
    hp = dict(TEST_HPARAMS[name])
    if name in LR:
        hp["lr"] = LR[name]
    return hp


def _overrides(name: str) -> dict:
    out = {"update_freq": 20} if name == "shampoo" else {}
    if name in LR:
        out["lr"] = LR[name]
    return out


@pytest.mark.parametrize("name", sorted(REFERENCE_STEP))
def test_rule_matches_reference(name, problem, factors):
    U0, V0 = factors[0][0], factors[1][0]
    loss = problem.run(0)
    steps = STEPS.get(name, NUM_STEPS)
    params = leaves(U0, V0)
    run_zoo(name, params, loss, steps, **_overrides(name))
    expected = reference_run(name, [U0, V0], loss, steps, **_reference_hp(name))
    for got, want in zip(params, expected, strict=True):
        assert torch.isfinite(got).all()
        assert_close(got.detach(), want, atol=1e-12, rtol=0)
    assert (params[0].detach() - U0).abs().max() > 1e-4, "the rule must move U"


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("adam", {"eps": 1e-2}),
        ("scalar_adam", {"betas": (0.9, 0.99)}),
        ("rmsprop", {"alpha": 0.9}),
        ("lion", {"betas": (0.5, 0.5)}),
        ("signum", {"momentum": 0.0}),
        ("adafactor", {"beta2": 0.9}),
        ("muon", {"momentum": 0.5}),
        ("momentum", {"momentum": 0.5}),
        ("shampoo", {"update_freq": 1}),
        ("scaled_gd", {"sequential": True, "damping": 1.0}),
        ("gram", {"power": 0.25}),
    ],
)
def test_reference_check_sees_a_changed_convention(name, wrong, problem, factors):
    """Negative control: the same comparison fails when one convention is changed."""
    U0, V0 = factors[0][0], factors[1][0]
    loss = problem.run(0)
    steps = STEPS.get(name, NUM_STEPS)
    params = leaves(U0, V0)
    run_zoo(name, params, loss, steps, **{**_overrides(name), **wrong})
    expected = reference_run(name, [U0, V0], loss, steps, **_reference_hp(name))
    gap = max((p.detach() - e).abs().max().item() for p, e in zip(params, expected, strict=True))
    assert gap > 1e-8


def test_scaled_gd_sequential_matches_reference(problem, factors):
    U0, V0 = factors[0][0], factors[1][0]
    loss = problem.run(0)
    params = leaves(U0, V0)
    run_zoo("scaled_gd", params, loss, NUM_STEPS, sequential=True)
    expected = reference_run("scaled_gd", [U0, V0], loss, NUM_STEPS, lr=1e-3, sequential=True)
    for got, want in zip(params, expected, strict=True):
        assert_close(got.detach(), want, atol=1e-12, rtol=0)


def test_shampoo_refreshes_roots_at_steps_1_21_41(problem, factors):
    """The inverse roots change exactly at steps t ≡ 1 (mod 20)."""
    U = leaves(factors[0][0])[0]
    opt = Shampoo([U], lr=0.1)
    loss = problem.run(0)
    changed = []
    for t in range(1, 43):
        before = opt.state[U]["left_inv_root"].clone() if t > 1 else None
        opt.zero_grad()
        loss(U, factors[1][0]).backward()
        opt.step()
        if before is not None and not torch.equal(before, opt.state[U]["left_inv_root"]):
            changed.append(t)
    assert changed == [21, 41]


def test_gram_left_and_right_agree_for_a_spectral_function(problem, factors):
    """For a spectral H, G H(GᵀG) = H(GGᵀ) G; for a non-spectral H they differ."""
    G = torch.randn(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    def step_of(**kw):
        P = torch.zeros_like(G, requires_grad=True)
        opt = GramPreconditioned([P], lr=1.0, **kw)
        P.grad = G.clone()
        opt.step()
        return P.detach()

    # two eigendecompositions of different Gram matrices: 1e-11, some 40 times one CPU's error
    assert_close(step_of(side="left"), step_of(side="right"), atol=1e-11, rtol=0)

    def diagonal_only(M):  # not spectral: H(QᵀPQ) != Qᵀ H(P) Q
        return torch.diag_embed(M.diagonal(dim1=-2, dim2=-1).rsqrt())

    left = step_of(side="left", gram_fn=diagonal_only)
    right = step_of(side="right", gram_fn=diagonal_only)
    assert (left - right).abs().max() > 1e-3
