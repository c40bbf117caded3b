"""``load_state_dict`` refuses a state saved by another optimizer class, at load time.

Every param group carries the class marker ``"gaugekit_optimizer"``; a torch.optim state (no
marker, no ``batch_dims``) is named from its param-group keys. A gaugekit checkpoint from before
the marker (and before ``weight_decay`` / ``maximize``) still loads into its own class and
resumes exactly; into another rule it is refused.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, leaves, train, zoo_kwargs

from gaugekit.optim import GD, Adam, Momentum, Muon, make_optimizer
from gaugekit.optim.base import OPTIMIZER_KEY


def _pair():
    g = torch.Generator().manual_seed(0)
    return leaves(torch.randn(5, 3, generator=g, dtype=DTYPE),
                  torch.randn(4, 3, generator=g, dtype=DTYPE))


def _trained(make, problem, steps=3):
    params = _pair()
    return train(make(params), params, problem.run(0), steps), params


def _legacy(state_dict: dict) -> dict:
    """The state_dict as gaugekit wrote it before the class marker, weight_decay, maximize."""
    old = copy.deepcopy(state_dict)
    for group in old["param_groups"]:
        for key in (OPTIMIZER_KEY, "weight_decay", "maximize", "decoupled_weight_decay"):
            group.pop(key, None)
    return old


def test_the_class_marker_is_saved(zoo_name, problem):
    opt, _ = _trained(lambda p: make_optimizer(zoo_name, p, **zoo_kwargs(zoo_name)), problem)
    cls = type(opt).__name__
    assert all(g[OPTIMIZER_KEY] == cls for g in opt.state_dict()["param_groups"])


def test_a_torch_adam_state_is_refused_at_load_naming_both(problem):
    theirs, _ = _trained(lambda p: torch.optim.Adam(p, lr=1e-2), problem)
    ours = Adam(_pair(), lr=1e-2)
    before = copy.deepcopy(ours.state_dict())
    with pytest.raises(ValueError, match=r"^Invalid state_dict: 'a state_dict of "
                                         r"torch\.optim\.Adam'; expected a state_dict of "
                                         r"gaugekit\.optim\.Adam"):
        ours.load_state_dict(theirs.state_dict())
    assert ours.state_dict() == before  # refused before anything changed


@pytest.mark.parametrize(
    ("theirs", "ours", "named"),
    [
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), Momentum, "torch.optim.SGD"),
        (lambda p: torch.optim.RMSprop(p, lr=1e-3), GD, "torch.optim.RMSprop"),
        (lambda p: torch.optim.AdamW(p, lr=1e-3), Adam, "torch.optim.Adam"),
        (lambda p: Muon(p, lr=0.02), Adam, "gaugekit.optim.Muon"),
        (lambda p: Adam(p, lr=1e-2), Muon, "gaugekit.optim.Adam"),
    ],
    ids=["sgd-momentum", "rmsprop-gd", "adamw-adam", "muon-adam", "adam-muon"],
)
def test_another_class_is_refused_naming_both(theirs, ours, named, problem):
    saved, _ = _trained(theirs, problem)
    with pytest.raises(ValueError, match=rf"^Invalid state_dict: .*{named}.*expected a "
                                         rf"state_dict of gaugekit\.optim\.{ours.__name__}"):
        ours(_pair()).load_state_dict(saved.state_dict())


def test_a_legacy_state_from_another_rule_is_refused(problem):
    saved, _ = _trained(lambda p: Muon(p, lr=0.02), problem)
    with pytest.raises(ValueError, match=r"^Invalid state_dict: 'an unmarked gaugekit "
                                         r"state_dict of another rule"):
        Adam(_pair()).load_state_dict(_legacy(saved.state_dict()))


def test_a_partly_unmarked_state_is_refused(problem):
    params = _pair()
    opt = Adam([{"params": [params[0]]}, {"params": [params[1]]}])
    saved = opt.state_dict()
    del saved["param_groups"][1][OPTIMIZER_KEY]
    with pytest.raises(ValueError, match=r"^Invalid state_dict: .*partly unmarked"):
        Adam([{"params": [params[0]]}, {"params": [params[1]]}]).load_state_dict(saved)


def test_a_legacy_checkpoint_loads_and_resumes_exactly(zoo_name, problem):
    """Before the marker, weight_decay and maximize: the old rule's groups, upgraded with
    λ = 0 and maximize = False, continue exactly like the straight run."""
    kwargs = zoo_kwargs(zoo_name)
    loss = problem.run(0)
    opt, first = _trained(lambda p: make_optimizer(zoo_name, p, **kwargs), problem, 4)
    second = leaves(*first)
    fresh = make_optimizer(zoo_name, second, **kwargs)
    fresh.load_state_dict(_legacy(opt.state_dict()))
    group = fresh.param_groups[0]
    assert group[OPTIMIZER_KEY] == type(fresh).__name__
    assert group["weight_decay"] == 0.0 and group["maximize"] is False
    train(fresh, second, loss, 4)
    _, straight = _trained(lambda p: make_optimizer(zoo_name, p, **kwargs), problem, 8)
    for a, b in zip(second, straight, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)


def test_a_subclass_loads_its_base_classs_state(problem):
    class MyAdam(Adam):
        pass

    saved, _ = _trained(lambda p: Adam(p, lr=1e-2), problem)
    mine = MyAdam(_pair(), lr=1e-2)
    mine.load_state_dict(saved.state_dict())
    assert mine.param_groups[0][OPTIMIZER_KEY] == "MyAdam"
    with pytest.raises(ValueError, match=r"^Invalid state_dict: .*MyAdam"):
        Adam(_pair()).load_state_dict(mine.state_dict())  # but not the other way round
