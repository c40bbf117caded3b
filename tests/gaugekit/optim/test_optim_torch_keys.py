"""torch.optim keys a rule does not implement are errors, not silence; other keys pass through.

The keys are the union of the constructor arguments of torch.optim's Adam, AdamW, SGD, RMSprop and
Adagrad. Each, passed to the constructor or present in a param group, raises ``ValueError``
naming the key and the optimizer, unless its value asks for nothing (torch's "off": ``foreach=
None``, ``amsgrad=False``, ``momentum=0``, …), which is accepted and changes nothing.
"""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, leaves, train, zoo_kwargs

from gaugekit.optim import GD, Adam, Lion, Momentum, get_spec, make_optimizer, optimizer_names
from gaugekit.optim._validation import TORCH_OPTIM_OFF

TORCH_CLASSES = ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad")
#: a value of each key that asks for behaviour (no rule of the zoo implements all of them)
ON: dict[str, object] = {
    "amsgrad": True, "foreach": True, "fused": True, "capturable": True, "differentiable": True,
    "maximize": True, "momentum": 0.9, "dampening": 0.1, "nesterov": True, "centered": True,
    "lr_decay": 0.1, "initial_accumulator_value": 0.1, "weight_decay": 0.1, "betas": (0.9, 0.99),
    "eps": 1e-8, "alpha": 0.99,
}


def _pair():
    g = torch.Generator().manual_seed(0)
    return leaves(torch.randn(5, 3, generator=g, dtype=DTYPE),
                  torch.randn(4, 3, generator=g, dtype=DTYPE))


def _unimplemented(name: str) -> list[str]:
    implemented = set(make_optimizer(name, _pair()).defaults)
    return [k for k in TORCH_OPTIM_OFF if k not in implemented and k != "decoupled_weight_decay"]


def _cases():
    for name in optimizer_names():
        for key in _unimplemented(name):
            yield pytest.param(name, key, id=f"{name}-{key}")


def test_the_table_is_the_union_of_torchs_arguments():
    union = set()
    for cls_name in TORCH_CLASSES:
        parameters = inspect.signature(getattr(torch.optim, cls_name)).parameters
        union |= set(parameters) - {"params", "lr"}
    assert set(TORCH_OPTIM_OFF) == union
    assert set(ON) | {"decoupled_weight_decay"} == union


@pytest.mark.parametrize(("name", "key"), list(_cases()))
def test_an_unimplemented_key_raises_naming_it_and_the_optimizer(name, key):
    cls_name = get_spec(name).cls.__name__
    pattern = rf"^Invalid {key}: .*gaugekit\.optim\.{cls_name} does not implement .*'{key}'"
    with pytest.raises(ValueError, match=pattern):
        make_optimizer(name, _pair(), **{key: ON[key]})
    U, V = _pair()
    with pytest.raises(ValueError, match=pattern):
        make_optimizer(name, [{"params": [U, V], key: ON[key]}])
    opt = make_optimizer(name, [U, V])
    with pytest.raises(ValueError, match=pattern):
        opt.add_param_group({"params": _pair(), key: ON[key]})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize(("name", "key"), [c for c in _cases() if TORCH_OPTIM_OFF[c.values[1]]])
def test_the_off_value_is_accepted_and_changes_nothing(name, key, problem):
    off = TORCH_OPTIM_OFF[key][0]
    loss = problem.run(0)
    with_key, without = _pair(), _pair()
    kwargs = zoo_kwargs(name)
    opt = train(make_optimizer(name, with_key, **kwargs, **{key: off}), with_key, loss, 3)
    train(make_optimizer(name, without, **kwargs), without, loss, 3)
    assert key not in opt.defaults
    for a, b in zip(with_key, without, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)


def test_off_values_in_a_param_group_and_torchs_foreach_false():
    U, V = _pair()
    opt = Adam([{"params": [U], "foreach": None, "amsgrad": False, "fused": False},
                {"params": [V], "differentiable": False, "capturable": False}])
    assert opt.param_groups[0]["foreach"] is None  # kept, as any other key
    Adam([U, V], foreach=False, fused=None, momentum=0)


def test_decoupled_weight_decay_names_the_rules_own_kind():
    U, V = _pair()
    Lion([U, V], weight_decay=0.1, decoupled_weight_decay=True)  # what Lion does
    with pytest.raises(ValueError, match=r"^Invalid decoupled_weight_decay: False; expected "
                                         r"True: gaugekit\.optim\.Lion"):
        Lion([U, V], decoupled_weight_decay=False)
    Momentum([U, V], decoupled_weight_decay=False)  # torch SGD's coupled decay
    with pytest.raises(ValueError, match=r"^Invalid decoupled_weight_decay.*Momentum"):
        Momentum([U, V], decoupled_weight_decay=True)
    Adam([U, V], decoupled_weight_decay=True)  # implemented: both values
    Adam([U, V], decoupled_weight_decay=False)


def test_implemented_keys_are_not_caught():
    """Positive control: a rule's own torch key (Momentum's nesterov, Adam's betas) works."""
    U, V = _pair()
    Momentum([U, V], nesterov=True, momentum=0.5)
    Adam([U, V], betas=(0.5, 0.9), eps=1e-6, weight_decay=0.1, maximize=True)


def test_an_unknown_constructor_keyword_is_a_type_error():
    with pytest.raises(TypeError, match=re.escape("GD.__init__() got an unexpected keyword "
                                                  "argument 'lrr'")):
        GD(_pair(), lrr=0.1)


def test_other_group_keys_pass_through_and_round_trip(problem):
    """``name`` (users) and ``initial_lr`` (LR schedulers) are kept, saved and loaded."""
    loss = problem.run(0)
    params = _pair()
    opt = Adam([{"params": [params[0]], "name": "U"}, {"params": [params[1]], "name": "V"}],
               lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(4):
        opt.zero_grad()
        loss(*params).backward()
        opt.step()
        scheduler.step()
    groups = opt.state_dict()["param_groups"]
    assert [g["name"] for g in groups] == ["U", "V"]
    assert all(g["initial_lr"] == 1e-2 and g["lr"] == 2.5e-3 for g in groups)
    fresh = Adam([{"params": [params[0]]}, {"params": [params[1]]}])
    fresh.load_state_dict(opt.state_dict())
    assert [g["name"] for g in fresh.param_groups] == ["U", "V"]
    assert fresh.param_groups[0]["lr"] == 2.5e-3
