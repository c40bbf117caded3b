"""Parity with ``torch.optim`` where the conventions coincide (float64, 12 steps, 1e-10).

Weight decay keeps torch's meaning where torch has the rule: coupled L2 in ``Adam``, ``GD``,
``Momentum``, ``RMSprop`` (``torch.optim.Adam``, ``SGD``, ``RMSprop`` with ``weight_decay``),
decoupled in ``Adam(decoupled_weight_decay=True)`` (``torch.optim.AdamW``) and in ``EigenAdam``
with a fixed basis (``update_freq=None``: AdamW); ``maximize`` as torch's.

Muon: ``torch.optim.Muon`` runs Newton–Schulz in bfloat16, damps its buffer by ``1 − μ``
(``lerp``) and clamps ``max(‖M‖, ε)`` instead of adding ε. The buffer scale cancels inside the
normalisation and ε → 0 removes the clamp/add difference, but bfloat16 cannot be configured away:
the exact test replaces torch's cast to bfloat16 by a float64 copy (torch's own iteration then
runs in float64); a second test checks the unpatched optimizer to bfloat16 accuracy.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from zoo_support import leaves, train

from gaugekit.optim import GD, Adam, AdamMini, EigenAdam, Momentum, Muon, RMSprop

NUM_STEPS = 12


def _pair(problem, factors, ours, theirs, num_steps=NUM_STEPS):
    U0, V0 = factors[0][0], factors[1][0]
    loss = problem.run(0)
    mine, ref = leaves(U0, V0), leaves(U0, V0)
    train(ours(mine), mine, loss, num_steps)
    train(theirs(ref), ref, loss, num_steps)
    return mine, ref, U0


CASES = {
    "gd": (lambda p: GD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "momentum": (
        lambda p: Momentum(p, lr=0.03, momentum=0.9),
        lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9, dampening=0.0),
    ),
    "nesterov": (
        lambda p: Momentum(p, lr=0.03, momentum=0.9, nesterov=True),
        lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9, nesterov=True),
    ),
    "adam": (
        lambda p: Adam(p, lr=1e-2),
        lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.9, 0.999), eps=1e-8),
    ),
    "adam_foreach": (
        lambda p: Adam(p, lr=1e-2, betas=(0.8, 0.99), eps=1e-6),
        lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.8, 0.99), eps=1e-6, foreach=True),
    ),
    "rmsprop": (
        lambda p: RMSprop(p, lr=1e-3),
        lambda p: torch.optim.RMSprop(p, lr=1e-3, alpha=0.99, eps=1e-8),
    ),
    # weight decay: torch's meaning (coupled L2, or AdamW's decoupled decay)
    "gd_weight_decay": (
        lambda p: GD(p, lr=0.1, weight_decay=0.3),
        lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.3),
    ),
    "momentum_weight_decay": (
        lambda p: Momentum(p, lr=0.03, momentum=0.9, weight_decay=0.3),
        lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9, weight_decay=0.3),
    ),
    "nesterov_weight_decay": (
        lambda p: Momentum(p, lr=0.03, momentum=0.9, nesterov=True, weight_decay=0.3),
        lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9, nesterov=True, weight_decay=0.3),
    ),
    "adam_weight_decay": (
        lambda p: Adam(p, lr=1e-2, weight_decay=0.3),
        lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3),
    ),
    "adamw": (
        lambda p: Adam(p, lr=1e-2, weight_decay=0.3, decoupled_weight_decay=True),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3),
    ),
    "adam_decoupled_flag": (
        lambda p: Adam(p, lr=1e-2, weight_decay=0.3, decoupled_weight_decay=True),
        lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3, decoupled_weight_decay=True),
    ),
    "eigen_adam_fixed_basis_adamw": (
        lambda p: EigenAdam(p, lr=1e-2, weight_decay=0.3, update_freq=None),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3),
    ),
    "adam_mini_entry_blocks_adamw": (
        lambda p: AdamMini(p, lr=1e-2, weight_decay=0.3, blocks="entry"),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3),
    ),
    "rmsprop_weight_decay": (
        lambda p: RMSprop(p, lr=1e-3, weight_decay=0.3),
        lambda p: torch.optim.RMSprop(p, lr=1e-3, weight_decay=0.3),
    ),
    # maximize: the ascent of torch's rules, with decay
    "gd_maximize": (
        lambda p: GD(p, lr=0.01, weight_decay=0.3, maximize=True),
        lambda p: torch.optim.SGD(p, lr=0.01, weight_decay=0.3, maximize=True),
    ),
    "momentum_maximize": (
        lambda p: Momentum(p, lr=0.003, momentum=0.9, weight_decay=0.3, maximize=True),
        lambda p: torch.optim.SGD(p, lr=0.003, momentum=0.9, weight_decay=0.3, maximize=True),
    ),
    "adam_maximize": (
        lambda p: Adam(p, lr=1e-2, weight_decay=0.3, maximize=True),
        lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3, maximize=True),
    ),
    "adamw_maximize": (
        lambda p: Adam(p, lr=1e-2, weight_decay=0.3, decoupled_weight_decay=True, maximize=True),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3, maximize=True),
    ),
    "rmsprop_maximize": (
        lambda p: RMSprop(p, lr=1e-3, maximize=True),
        lambda p: torch.optim.RMSprop(p, lr=1e-3, maximize=True),
    ),
}

NEGATIVE = {
    "gd": lambda p: torch.optim.SGD(p, lr=0.09),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9, dampening=0.1),
    "nesterov": lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2, eps=1e-3),
    "adam_foreach": lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.9, 0.99), eps=1e-6),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3, centered=True),
    # the other kind of decay, or none: each is visibly another rule
    "gd_weight_decay": lambda p: torch.optim.SGD(p, lr=0.1),
    "momentum_weight_decay": lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9),
    "nesterov_weight_decay": lambda p: torch.optim.SGD(p, lr=0.03, momentum=0.9, nesterov=True),
    "adam_weight_decay": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3),
    "adamw": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3),
    "adam_decoupled_flag": lambda p: torch.optim.Adam(p, lr=1e-2),
    "eigen_adam_fixed_basis_adamw": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3),
    "adam_mini_entry_blocks_adamw": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3),
    "rmsprop_weight_decay": lambda p: torch.optim.RMSprop(p, lr=1e-3),
    "gd_maximize": lambda p: torch.optim.SGD(p, lr=0.01, weight_decay=0.3),
    "momentum_maximize": lambda p: torch.optim.SGD(p, lr=0.003, momentum=0.9, weight_decay=0.3),
    "adam_maximize": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3),
    "adamw_maximize": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3),
    "rmsprop_maximize": lambda p: torch.optim.RMSprop(p, lr=1e-3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch(case, problem, factors):
    ours, theirs = CASES[case]
    mine, ref, U0 = _pair(problem, factors, ours, theirs)
    for a, b in zip(mine, ref, strict=True):
        assert_close(a.detach(), b.detach(), atol=1e-10, rtol=0)
    assert (mine[0].detach() - U0).abs().max() > 1e-3


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_torch_with_another_convention_differs(case, problem, factors):
    ours, _ = CASES[case]
    mine, ref, _ = _pair(problem, factors, ours, NEGATIVE[case])
    assert (mine[0].detach() - ref[0].detach()).abs().max() > 1e-8


def _wide_factors(seed: int):
    """Muon parity on wide factors, where torch's default lr ratio √max(1, rows/cols) is 1."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(3, 6, generator=g, dtype=torch.float64)
    B = torch.randn(3, 5, generator=g, dtype=torch.float64)
    target = torch.randn(6, 5, generator=g, dtype=torch.float64)

    def loss(A, B):
        return ((A.T @ B - target) ** 2).mean()

    return [A, B], loss


def _muon_runs(ours, theirs, seed=0):
    (A0, B0), loss = _wide_factors(seed)
    mine, ref = leaves(A0, B0), leaves(A0, B0)
    train(ours(mine), mine, loss, NUM_STEPS)
    train(theirs(ref), ref, loss, NUM_STEPS)
    return mine, ref, A0


@pytest.fixture
def torch_muon_in_float64(monkeypatch):
    """Make torch.optim.Muon's Newton–Schulz run in the parameter's dtype."""
    monkeypatch.setattr(torch.Tensor, "bfloat16", lambda self: self.clone())


@pytest.mark.parametrize("nesterov", [False, True])
def test_muon_matches_torch_muon_in_float64(torch_muon_in_float64, nesterov):
    mine, ref, A0 = _muon_runs(
        lambda p: Muon(p, lr=0.02, momentum=0.9, nesterov=nesterov, eps=0.0),
        lambda p: torch.optim.Muon(
            p, lr=0.02, momentum=0.9, nesterov=nesterov, weight_decay=0.0, eps=1e-300
        ),
    )
    for a, b in zip(mine, ref, strict=True):
        assert_close(a.detach(), b.detach(), atol=1e-10, rtol=0)
    assert (mine[0].detach() - A0).abs().max() > 1e-2


def test_muon_shape_factor_matches_torch(torch_muon_in_float64, problem, factors):
    """``adjust_lr_fn='original'`` on tall factors (ratio √(n/k)) agrees with torch's."""
    mine, ref, U0 = _pair(
        problem, factors,
        lambda p: Muon(p, lr=0.02, eps=0.0, adjust_lr_fn="original"),
        lambda p: torch.optim.Muon(p, lr=0.02, momentum=0.9, nesterov=False, weight_decay=0.0,
                                   eps=1e-300, adjust_lr_fn="original"),
    )
    for a, b in zip(mine, ref, strict=True):
        assert_close(a.detach(), b.detach(), atol=1e-10, rtol=0)
    plain, _, _ = _pair(
        problem, factors, lambda p: Muon(p, lr=0.02, eps=0.0), lambda p: torch.optim.SGD(p, lr=0)
    )
    assert (plain[0].detach() - mine[0].detach()).abs().max() > 1e-3  # the ratio matters here


def test_muon_differs_from_torch_defaults(torch_muon_in_float64):
    """Negative control: torch's defaults (Nesterov, weight decay 0.1) are another rule."""
    mine, ref, _ = _muon_runs(
        lambda p: Muon(p, lr=0.02, momentum=0.9, eps=0.0),
        lambda p: torch.optim.Muon(p, lr=0.02, momentum=0.9),
    )
    assert (mine[0].detach() - ref[0].detach()).abs().max() > 1e-4


def test_muon_matches_unpatched_torch_muon_to_bfloat16_accuracy():
    """Without the patch torch's NS runs in bfloat16: same rule, bfloat16-sized differences."""
    mine, ref, A0 = _muon_runs(
        lambda p: Muon(p, lr=0.02, momentum=0.9, eps=0.0),
        lambda p: torch.optim.Muon(p, lr=0.02, momentum=0.9, nesterov=False, weight_decay=0.0,
                                   eps=1e-300),
    )
    moved = (mine[0].detach() - A0).abs().max().item()
    gap = (mine[0].detach() - ref[0].detach()).abs().max().item()
    assert 1e-10 < gap < 0.05 * moved
