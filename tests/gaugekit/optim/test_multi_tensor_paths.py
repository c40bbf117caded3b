"""SharedScaleAdam's and AdamMini's multi-tensor paths: ``foreach=True`` gives the for-loop's
numbers exactly, ``fused=True`` (the compiled one-pass step) to round-off; the switches are
validated and stay out of the audit's description while off."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gaugekit.audit.factor_results import optimizer_hyperparameters
from gaugekit.optim import AdamMini, Lion, SharedScaleAdam

CASES = {
    "shared_scale": lambda ps, **kw: SharedScaleAdam(ps, lr=1e-2, weight_decay=0.1, **kw),
    "adam_mini_rows": lambda ps, **kw: AdamMini(ps, lr=1e-2, weight_decay=0.1, **kw),
    "adam_mini_tensor": lambda ps, **kw: AdamMini(ps, lr=1e-2, blocks="tensor", **kw),
}


def _train(make, steps: int = 5, **kw) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)).double()
    groups = [{"params": list(model[0].parameters())},
              {"params": list(model[2].parameters()), "lr": 5e-3, "betas": (0.8, 0.99)}]
    opt = make(groups, **kw)
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_foreach_is_the_for_loop_exactly(case):
    loop, multi = _train(CASES[case], foreach=False), _train(CASES[case], foreach=True)
    start = _train(CASES[case], steps=0)
    for a, b, c in zip(loop, multi, start, strict=True):
        assert torch.equal(a, b)
        assert not torch.equal(a, c)  # the runs moved


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_is_the_for_loop_to_round_off(case):
    loop, fused = _train(CASES[case]), _train(CASES[case], fused=True)
    for a, b in zip(loop, fused, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_switches_are_validated_and_hidden_while_off():
    p = [nn.Parameter(torch.zeros(3, 2))]
    for make in (SharedScaleAdam, AdamMini):
        for bad in (1, "yes"):
            with pytest.raises(ValueError, match="^Invalid fused"):
                make(p, fused=bad)
        assert "fused" not in optimizer_hyperparameters(make(p))
        assert optimizer_hyperparameters(make(p, foreach=True))["foreach"] is True
    with pytest.raises(ValueError, match="^Invalid fused: True; expected None or False"):
        Lion(p, fused=True)  # a rule without a fused path refuses it, naming it
    with pytest.raises(ValueError, match="^Invalid foreach"):
        SharedScaleAdam([{"params": p}, {"params": [nn.Parameter(torch.zeros(2))],
                                         "foreach": True}])
