"""The non-finite policy of the rules that share a statistic across parameters (base.py):
a NaN or inf in one gradient skips the whole step with a warning naming it (default), raises,
or propagates (opt-in, and the default for stacked runs)."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
from helpers import same_state
from torch import nn

from gaugekit.optim import FlowAdam, MuonAdam, SharedScaleAdam

RULES = {
    "shared_scale_adam": lambda groups, **kw: SharedScaleAdam(groups, lr=1e-2, **kw),
    "flow_adam": lambda groups, **kw: FlowAdam(groups, lr=1e-2, flow_warmup=0, **kw),
    "muon_adam_shared": lambda groups, **kw: MuonAdam(groups, adam="shared_scale", **kw),
}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3)).double()


def _groups(model: nn.Module) -> list[dict]:
    """Two groups: the first layer, the second (another lr)."""
    return [{"params": list(model[0].parameters())},
            {"params": list(model[2].parameters()), "lr": 5e-3}]


def _backward(model: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 5, generator=g, dtype=torch.float64)
    model.zero_grad()
    model(x).square().mean().backward()


def _snapshot(model, opt):
    params = [p.detach().clone() for p in model.parameters()]
    state = copy.deepcopy(opt.state_dict()["state"])
    return params, state





@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_one_bad_gradient_skips_the_step_and_names_it(rule, bad):
    model = _model()
    opt = RULES[rule](_groups(model))
    clean = copy.deepcopy(model)
    opt_clean = RULES[rule](_groups(clean))
    for seed in range(3):  # some state first
        for m, o in ((model, opt), (clean, opt_clean)):
            _backward(m, seed)
            o.step()
    before = _snapshot(model, opt)
    _backward(model, 3)
    model[2].bias.grad[1] = bad  # group 1, parameter 1
    with pytest.warns(RuntimeWarning, match=r"param_groups\[1\]\['params'\]\[1\] \(shape \(3,\)\)"):
        opt.step()
    after = _snapshot(model, opt)
    assert all(torch.equal(a, b) for a, b in zip(before[0], after[0], strict=True))
    assert same_state(before[1], after[1])  # moments and step counts untouched
    # the next clean step is the step the clean twin takes: the bad one left no trace
    for m, o in ((model, opt), (clean, opt_clean)):
        _backward(m, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            o.step()
    for a, b in zip(model.parameters(), clean.parameters(), strict=True):
        assert torch.equal(a, b)
        assert torch.isfinite(a).all()


@pytest.mark.parametrize("rule", sorted(RULES))
def test_raise_changes_nothing_and_propagate_spreads(rule):
    model = _model()
    opt = RULES[rule](_groups(model), nonfinite="raise")
    _backward(model, 0)
    model[0].bias.grad[0] = math.nan  # a vector: on MuonAdam's (shared-scale) Adam side too
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match=r"non-finite gradient.*\['params'\]\[1\]"):
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not opt.state or all(not s for s in opt.state.values())
    # negative control: without the check the NaN reaches every parameter of both groups
    loose = _model()
    opt = RULES[rule](_groups(loose), nonfinite="propagate")
    _backward(loose, 0)
    loose[0].bias.grad[0] = math.nan
    opt.step()
    assert not torch.isfinite(loose[2].bias).any()


def test_torch_adam_confines_the_damage_and_so_does_muon_adam_with_adamw():
    """The reference behaviour the policy restores: torch's Adam, and MuonAdam's AdamW side
    (with ``nonfinite="propagate"``), share nothing across parameters; a NaN stays where it is
    (Muon: in its matrix)."""
    for make in (lambda ps: torch.optim.Adam(ps, lr=1e-2),
                 lambda ps: MuonAdam(ps, adam="adamw", nonfinite="propagate")):
        model = _model()
        opt = make(_groups(model))
        _backward(model, 0)
        model[2].bias.grad[1] = math.nan
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt.step()
        assert torch.isfinite(model[0].weight).all() and torch.isfinite(model[2].weight).all()
        assert not torch.isfinite(model[2].bias[1])


def test_named_parameters_are_named_in_the_warning():
    model = _model()
    opt = SharedScaleAdam(model.named_parameters(), lr=1e-2)
    _backward(model, 0)
    model[2].weight.grad[0, 0] = math.inf
    with pytest.warns(RuntimeWarning, match=r"'2\.weight' \(shape \(3, 6\)\)"):
        opt.step()


def test_stacked_runs_propagate_within_their_run_by_default():
    """``batch_dims > 0``: no check (a diverged run is the sweep's to see); the NaN stays in its
    run, the others step."""
    g = torch.Generator().manual_seed(0)
    U = torch.randn(3, 4, 2, generator=g, dtype=torch.float64, requires_grad=True)
    opt = SharedScaleAdam([U], lr=1e-2, batch_dims=1)
    U.grad = torch.randn(3, 4, 2, generator=g, dtype=torch.float64)
    U.grad[0, 0, 0] = math.nan
    before = U.detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    assert not torch.isfinite(U[0]).any() and torch.isfinite(U[1:]).all()
    assert not torch.equal(U[1:], before[1:])
