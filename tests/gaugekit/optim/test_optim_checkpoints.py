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
from zoo_support import DTYPE, leaves, train, zoo_kwargs

from gaugekit.optim import GD, Adam, Momentum, Muon, make_optimizer
from gaugekit.optim.checkpoints import OPTIMIZER_KEY


def _pair():
    g = torch.Generator().manual_seed(0)
    return leaves(torch.randn(5, 3, generator=g, dtype=DTYPE),
                  torch.randn(4, 3, generator=g, dtype=DTYPE))


def _trained(make, problem, steps=3):
    params = _pair()
    return train(make(params), params, problem.run(0), steps), params


def test_the_class_marker_is_saved(zoo_name, problem):
    opt, _ = _trained(lambda p: make_optimizer(zoo_name, p, **zoo_kwargs(zoo_name)), problem)
    cls = type(opt).__name__
    assert all(g[OPTIMIZER_KEY] == cls for g in opt.state_dict()["param_groups"])


def test_a_torch_adam_state_is_refused_at_load(problem):
    theirs, _ = _trained(lambda p: torch.optim.Adam(p, lr=1e-2), problem)
    ours = Adam(_pair(), lr=1e-2)
    before = copy.deepcopy(ours.state_dict())
    with pytest.raises(ValueError, match=r"^Invalid state_dict: \"a state_dict without gaugekit's "
                                         r"optimizer marker .*expected a state_dict of "
                                         r"gaugekit\.optim\.Adam"):
        ours.load_state_dict(theirs.state_dict())
    assert ours.state_dict() == before  # refused before anything changed


@pytest.mark.parametrize(
    ("theirs", "ours", "named"),
    [
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), Momentum, "without gaugekit's"),
        (lambda p: torch.optim.RMSprop(p, lr=1e-3), GD, "without gaugekit's"),
        (lambda p: torch.optim.AdamW(p, lr=1e-3), Adam, "without gaugekit's"),
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


def test_a_partly_unmarked_state_is_refused(problem):
    params = _pair()
    opt = Adam([{"params": [params[0]]}, {"params": [params[1]]}])
    saved = opt.state_dict()
    del saved["param_groups"][1][OPTIMIZER_KEY]
    with pytest.raises(ValueError, match=r"^Invalid state_dict: .*partly unmarked"):
        Adam([{"params": [params[0]]}, {"params": [params[1]]}]).load_state_dict(saved)


def test_a_subclass_loads_its_base_classs_state(problem):
    class MyAdam(Adam):
        pass

    saved, _ = _trained(lambda p: Adam(p, lr=1e-2), problem)
    mine = MyAdam(_pair(), lr=1e-2)
    mine.load_state_dict(saved.state_dict())
    assert mine.param_groups[0][OPTIMIZER_KEY] == "MyAdam"
    with pytest.raises(ValueError, match=r"^Invalid state_dict: .*MyAdam"):
        Adam(_pair()).load_state_dict(mine.state_dict())  # but not the other way round
