"""AdamMini: its blocks, its parities, and which gauge each partition keeps (float64)."""

from __future__ import annotations

import pytest
import torch

from gaugebook.engine.transformer import TransformerShape, draw_head_gauges
from gaugekit.optim import AdamMini, SharedScaleAdam

DTYPE = torch.float64


def _quadratic_grads(W, target):
    return W - target + 0.3 * (W - target) ** 3


def _run(make, W0, target, steps=5):
    W = W0.clone().requires_grad_(True)
    opt = make([W])
    for _ in range(steps):
        W.grad = _quadratic_grads(W.detach(), target)
        opt.step()
    return W.detach()


def test_blocks_follow_their_definition_by_hand():
    g = torch.Generator().manual_seed(3)
    W0, target = torch.randn(6, 5, generator=g, dtype=DTYPE), torch.randn(6, 5, generator=g,
                                                                          dtype=DTYPE)
    got = _run(lambda p: AdamMini(p, lr=1e-2, blocks=2), W0, target, steps=3)
    # by hand: m full, v one value per pair of rows
    W = W0.clone()
    m = torch.zeros_like(W)
    v = torch.zeros(3, dtype=DTYPE)
    for t in range(1, 4):
        G = _quadratic_grads(W, target)
        m = 0.9 * m + 0.1 * G
        v = 0.999 * v + 0.001 * (G * G).reshape(3, -1).mean(dim=1)
        denom = (v / (1 - 0.999**t)).sqrt().repeat_interleave(2)[:, None] + 1e-8
        W = W - 1e-2 * (m / (1 - 0.9**t)) / denom
    torch.testing.assert_close(got, W, atol=1e-12, rtol=0)
    # and a different partition is a different rule
    other = _run(lambda p: AdamMini(p, lr=1e-2, blocks=1), W0, target, steps=3)
    assert (other - W).abs().max() > 1e-6


def test_tensor_block_is_shared_scale_adam_on_one_tensor():
    g = torch.Generator().manual_seed(5)
    W0, target = torch.randn(4, 3, generator=g, dtype=DTYPE), torch.randn(4, 3, generator=g,
                                                                          dtype=DTYPE)
    ours = _run(lambda p: AdamMini(p, lr=1e-2, weight_decay=0.1, blocks="tensor"), W0, target)
    theirs = _run(lambda p: SharedScaleAdam(p, lr=1e-2, weight_decay=0.1), W0, target)
    torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=0)


def test_state_is_one_value_per_block_and_round_trips():
    W = torch.zeros(2, 8, 3, dtype=DTYPE, requires_grad=True)  # two stacked runs
    opt = AdamMini([W], lr=1e-2, blocks=4, batch_dims=1)
    W.grad = torch.ones_like(W)
    opt.step()
    assert opt.state[W]["exp_avg_sq_block"].shape == (2, 2)
    again = AdamMini([W], lr=1e-2, blocks=4, batch_dims=1)
    again.load_state_dict(opt.state_dict())
    assert torch.equal(again.state[W]["exp_avg_sq_block"], opt.state[W]["exp_avg_sq_block"])


@pytest.mark.parametrize("bad", [0, 3, "rows", 2.0])
def test_blocks_that_do_not_divide_the_rows_are_refused(bad):
    with pytest.raises(ValueError, match="Invalid blocks"):
        AdamMini([torch.zeros(8, 2, dtype=DTYPE)], blocks=bad)


def _head_bilinears_after(blocks, rotate, *, d_model=8, heads=2, steps=8):
    """Train ``(W_Q, W_K)`` (or their per-head rotation ``A_h W_{·,h}``) on a loss of the
    bilinears ``M_h = W_{Q,h}ᵀ W_{K,h}`` only, with real autograd gradients; return the final
    ``M_h``."""
    d_head = d_model // heads
    g = torch.Generator().manual_seed(11)
    Q0, K0 = (torch.randn(d_model, 6, generator=g, dtype=DTYPE) for _ in range(2))
    T = torch.randn(heads, 6, 6, generator=g, dtype=DTYPE)
    shape = TransformerShape(d_model=d_model, num_heads=heads, num_layers=1)
    A = draw_head_gauges(shape, 7, dtype=DTYPE)[0]

    def heads_of(X):
        return X.reshape(heads, d_head, -1)

    if rotate:
        Q0, K0 = ((A @ heads_of(X)).reshape(d_model, -1) for X in (Q0, K0))
    Q, K = Q0.clone().requires_grad_(True), K0.clone().requires_grad_(True)
    opt = AdamMini([Q, K], lr=3e-2, blocks=blocks)
    for _ in range(steps):
        M = heads_of(Q).mT @ heads_of(K)
        loss = ((M - T) ** 2).sum() + (M.sum(dim=0) ** 2).tanh().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (heads_of(Q).mT @ heads_of(K)).detach()


def test_head_blocks_keep_the_head_gauge_and_row_blocks_do_not():
    """One block per head: ``‖A_h G_h‖_F = ‖G_h‖_F``, so the update rotates with the head and
    ``M_h`` follows the same path from both starts. One block per row: the rows of ``A_h G_h``
    have other norms than those of ``G_h``, and the paths part (a property of the rule, far
    above float64 round-off)."""
    d_head = 4
    same = _head_bilinears_after(d_head, False) - _head_bilinears_after(d_head, True)
    apart = _head_bilinears_after(1, False) - _head_bilinears_after(1, True)
    assert same.abs().max() < 1e-10
    assert apart.abs().max() > 1e-4
