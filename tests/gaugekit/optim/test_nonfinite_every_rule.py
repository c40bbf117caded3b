"""One non-finite policy for every rule (``nonfinite``, gaugekit.optim.base): ``"skip"`` (the
step changes nothing, a warning names the parameter), ``"raise"`` (``RuntimeError``, nothing
changed) and ``"propagate"`` (no check, torch.optim's behaviour), on every rule of the registry,
MuonAdam's two sides included; the default is ``"skip"`` for one run, except for the rules whose
statistics are per coordinate, which keep torch's behaviour and say so."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
from helpers import same_state
from torch import nn

from gaugekit.optim import MuonAdam, make_optimizer, muon_param_groups
from gaugekit.optim.registry import ALIASES, get_spec, optimizer_names

DTYPE = torch.float64
#: the rules that keep torch's behaviour (``"propagate"``) by default: per-coordinate statistics
PER_COORDINATE = {"gd", "momentum", "adam", "adamw", "rmsprop", "lion", "signum"}
NAMES = [*optimizer_names(), *ALIASES]
MODES = ("skip", "raise", "propagate")


def _params(name: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    spec = get_spec(name)
    shapes = [(5, 3), (4, 3)] if spec.paired or spec.matrix_only else [(5, 3), (4,)]
    return [torch.randn(s, generator=g, dtype=DTYPE).requires_grad_(True) for s in shapes]


def _grads(params: list[torch.Tensor], seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g, dtype=DTYPE)


def _snapshot(params, opt):
    return [p.detach().clone() for p in params], copy.deepcopy(opt.state_dict()["state"])





def _build(name: str, params, **kw):
    return make_optimizer(name, params, lr=1e-2, **kw)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("name", NAMES)
def test_skip_changes_nothing_names_the_parameter_and_leaves_no_trace(name, bad):
    params, twin = _params(name), _params(name)
    opt, opt_twin = _build(name, params, nonfinite="skip"), _build(name, twin, nonfinite="skip")
    for seed in range(2):  # some state first
        for ps, o in ((params, opt), (twin, opt_twin)):
            _grads(ps, seed)
            o.step()
    before = _snapshot(params, opt)
    _grads(params, 2)
    params[1].grad[0, ...] = bad
    with pytest.warns(RuntimeWarning, match=r"param_groups\[0\]\['params'\]\[1\].*skipped"):
        opt.step()
    after = _snapshot(params, opt)
    assert all(torch.equal(a, b) for a, b in zip(before[0], after[0], strict=True))
    assert same_state(before[1], after[1])  # moments, bases and step counts untouched
    for ps, o in ((params, opt), (twin, opt_twin)):  # the next step is the twin's
        _grads(ps, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            o.step()
    for a, b in zip(params, twin, strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(params[0], before[0][0])  # negative control: a clean step moves


@pytest.mark.parametrize("name", NAMES)
def test_raise_changes_nothing(name):
    params = _params(name)
    opt = _build(name, params, nonfinite="raise")
    _grads(params, 0)
    opt.step()
    before = _snapshot(params, opt)
    _grads(params, 1)
    params[0].grad[1, 1] = math.nan
    with pytest.raises(RuntimeError, match=r"non-finite gradient.*\['params'\]\[0\].*raise"):
        opt.step()
    after = _snapshot(params, opt)
    assert all(torch.equal(a, b) for a, b in zip(before[0], after[0], strict=True))
    assert same_state(before[1], after[1])


@pytest.mark.parametrize("name", NAMES)
def test_propagate_checks_nothing_and_the_nan_reaches_its_parameter(name):
    params = _params(name)
    opt = _build(name, params, nonfinite="propagate")
    _grads(params, 0)
    params[0].grad[1, 1] = math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    assert not torch.isfinite(params[0]).all()


@pytest.mark.parametrize("name", NAMES)
def test_the_default_policy(name):
    """``None``: torch's behaviour for the per-coordinate rules (the NaN stays in its entry),
    ``"skip"`` for every other rule (its statistic would spread the NaN)."""
    params = _params(name)
    opt = _build(name, params)
    _grads(params, 0)
    params[0].grad[1, 1] = math.nan
    if name in PER_COORDINATE:
        assert opt._nonfinite_policy() == "propagate"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt.step()
        bad = ~torch.isfinite(params[0])
        assert bad[1, 1] and bad.sum() == 1  # the entry, and only it
        assert torch.isfinite(params[1]).all()
    else:
        assert opt._nonfinite_policy() == "skip"
        with pytest.warns(RuntimeWarning, match="skipped"):
            opt.step()
        assert all(torch.isfinite(p).all() for p in params)


@pytest.mark.parametrize("name", NAMES)
def test_stacked_runs_propagate_by_default(name):
    spec = get_spec(name)
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 5, 3), (2, 4, 3)] if spec.paired or spec.matrix_only else [(2, 5, 3), (2, 4)]
    params = [torch.randn(s, generator=g, dtype=DTYPE).requires_grad_(True) for s in shapes]
    opt = make_optimizer(name, params, lr=1e-2, batch_dims=1)
    assert opt._nonfinite_policy() == "propagate"


@pytest.mark.parametrize("adam", ["adamw", "shared_scale"])
@pytest.mark.parametrize("side", ["muon", "adam"])
def test_muon_adam_checks_both_sides(adam, side):
    """The issue's case: a NaN in a Muon-side gradient with ``nonfinite="raise"`` raised
    nothing and reached all 128 entries of the weight; with ``adam="adamw"`` the argument was
    accepted and ignored."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    opt = MuonAdam(muon_param_groups(model), adam=adam, nonfinite="raise")
    model(torch.randn(4, 8)).sum().backward()
    target = model[0].weight if side == "muon" else model[0].bias
    target.grad.view(-1)[0] = math.nan
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="non-finite gradient"):
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not opt.state
    # negative control: propagate lets the NaN into the weight
    loose = MuonAdam(muon_param_groups(model), adam=adam, nonfinite="propagate")
    loose.step()
    assert not torch.isfinite(target).all()


def test_a_group_cannot_set_its_own_policy():
    p, q = (nn.Parameter(torch.zeros(3, 2)) for _ in range(2))
    with pytest.raises(ValueError, match="^Invalid nonfinite: 'raise'; expected the "
                                         "optimizer-wide value"):
        make_optimizer("muon", [{"params": [p]}, {"params": [q], "nonfinite": "raise"}])
    with pytest.raises(ValueError, match="^Invalid nonfinite: 'ignore'"):
        make_optimizer("adam", [p], nonfinite="ignore")


def test_half_precision_gradients_are_checked_in_float32():
    """``Σ g²`` of a float16 gradient overflows from ``‖g‖ = 256``: the check sums in float32,
    so a large finite gradient is not taken for a non-finite one."""
    p = nn.Parameter(torch.zeros(4, 4, dtype=torch.float16))
    opt = make_optimizer("muon", [p], lr=1e-2)
    p.grad = torch.full((4, 4), 300.0, dtype=torch.float16)  # ‖g‖ = 1200, Σ g² = 1.44e6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    assert torch.isfinite(p).all() and p.abs().max() > 0
