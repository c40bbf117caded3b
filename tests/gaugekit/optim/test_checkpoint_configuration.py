"""Checkpoints know what wrote them: a state written with another value of a key that changes
the rule (MuonAdam's Adam kind, the Newton–Schulz precision, Adam-mini's blocks, FlowAdam's
dial, ...) is refused at load naming both values; the same configuration resumes bit for bit;
and a checkpoint from before a key existed (``foreach``, ``split_rows``, ``max_precond_dim``,
``nonfinite``, ...) loads and steps as the key's absence meant."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn

from gaugekit.optim import MuonAdam, make_optimizer, muon_param_groups
from gaugekit.optim.checkpoints import LATER_KEYS
from gaugekit.optim.registry import ALIASES, get_spec, optimizer_names

DTYPE = torch.float64
NAMES = [*optimizer_names(), *ALIASES]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def _train(model: nn.Module, opt, steps: int, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(5, 6, generator=g, dtype=DTYPE)).square().mean().backward()
        opt.step()


def _roundtrip(state_dict):
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


#: (registry name, the configuration that wrote the checkpoint, the one that loads it, the key)
OTHER = [
    ("muon_adam", {"adam": "adamw"}, {"adam": "shared_scale"}, "adam"),
    ("muon_adam", {"adam": "shared_scale"}, {"adam": "adamw"}, "adam"),
    ("muon_adam", {"ns_dtype": torch.bfloat16}, {}, "ns_dtype"),
    ("muon", {}, {"ns_dtype": torch.bfloat16}, "ns_dtype"),
    ("adam_mini", {"blocks": "entry"}, {"blocks": 1}, "blocks"),
    ("adam_mini", {"blocks": "tensor"}, {"blocks": 1}, "blocks"),
    ("flow_adam", {"precond_power": 1.0}, {}, "precond_power"),
    ("adam", {"decoupled_weight_decay": True}, {}, "decoupled_weight_decay"),
    ("eigen_adam", {"side": "left"}, {}, "side"),
]


def _make(name: str, model: nn.Module, **kw):
    if name == "muon_adam":
        return MuonAdam(muon_param_groups(model), **kw)
    params = list(model.parameters())
    if get_spec(name).matrix_only:
        params = [p for p in params if p.ndim == 2]
    return make_optimizer(name, params, lr=1e-2, **kw)


@pytest.mark.parametrize(("name", "wrote", "loads", "key"), OTHER,
                         ids=[f"{n}-{k}-{list(w.values())}" for n, w, _, k in OTHER])
def test_another_configuration_is_refused_naming_both(name, wrote, loads, key):
    model = _model()
    saved = _make(name, model, **wrote)
    _train(model, saved, 2)
    fresh = _make(name, _model(), **loads)
    before = copy.deepcopy(fresh.state_dict())
    written, expected = repr(saved.param_groups[0][key]), repr(fresh.param_groups[0][key])
    with pytest.raises(ValueError, match=rf"^Invalid state_dict: .*{key}={_escaped(written)}.*"
                                         rf"expected one with {key}={_escaped(expected)}"):
        fresh.load_state_dict(_roundtrip(saved.state_dict()))
    assert fresh.state_dict() == before  # refused before anything changed
    # negative control: the same configuration loads
    same = _make(name, _model(), **wrote)
    same.load_state_dict(_roundtrip(saved.state_dict()))


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize("name", [*NAMES, "muon_adam_shared"])
def test_the_same_configuration_resumes_bit_for_bit(name):
    kw = {"adam": "shared_scale"} if name == "muon_adam_shared" else {}
    name = "muon_adam" if name == "muon_adam_shared" else name
    if get_spec(name).paired:
        pytest.skip("ScaledGD takes factor pairs (its checkpoints: test_optim_state_dict)")
    model = _model()
    opt = _make(name, model, **kw)
    _train(model, opt, 3)
    copy_model = copy.deepcopy(model)
    resumed = _make(name, copy_model, **kw)
    resumed.load_state_dict(_roundtrip(opt.state_dict()))
    _train(model, opt, 2, seed=1)
    _train(copy_model, resumed, 2, seed=1)
    for a, b in zip(model.parameters(), copy_model.parameters(), strict=True):
        assert torch.equal(a, b)


#: keys each rule added after its first checkpoints (beside LATER_KEYS)
LATER = {"adam_mini": ("foreach", "fused"), "muon": ("split_rows", "ns_dtype"),
         "muon_adam": ("split_rows", "ns_dtype"), "eigen_adam": ("max_precond_dim",),
         "scalar_adam": ("foreach", "fused")}


@pytest.mark.parametrize("name", NAMES)
def test_a_checkpoint_without_later_keys_loads_and_steps(name):
    """Every later key removed from the saved param groups (as a checkpoint from before it):
    the load fills in what its absence meant, and the run resumes as the full checkpoint does.
    AdamMini's ``foreach`` and Muon's ``split_rows`` failed at the next step with a KeyError."""
    if get_spec(name).paired:
        pytest.skip("ScaledGD takes factor pairs")
    model = _model()
    opt = _make(name, model)
    _train(model, opt, 2)
    full = _roundtrip(opt.state_dict())
    old = copy.deepcopy(full)
    later = {**LATER_KEYS, **type(opt).later_keys}
    # the keys whose absence means the value this optimizer has (adamw's weight_decay=0.01 is
    # not what a checkpoint without weight_decay meant: no decay)
    removed = [k for k in dict.fromkeys((*LATER_KEYS, *LATER.get(name, ())))
               if k in old["param_groups"][0] and old["param_groups"][0][k] == later[k]]
    assert len(removed) >= 3  # the test removes something
    for group in old["param_groups"]:
        for key in removed:
            del group[key]
    runs = []
    for state in (full, old):
        m = copy.deepcopy(model)
        o = _make(name, m)
        o.load_state_dict(state)
        assert all(key in o.param_groups[0] for key in removed)
        _train(m, o, 2, seed=1)
        runs.append(list(m.parameters()))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)


def test_a_later_rule_key_missing_means_its_old_value():
    """A Muon checkpoint from before ``ns_dtype`` ran Newton–Schulz in the parameter's dtype:
    it loads into ``ns_dtype=None`` and is refused by a bfloat16 optimizer."""
    model = _model()
    opt = _make("muon", model)
    _train(model, opt, 1)
    old = _roundtrip(opt.state_dict())
    for group in old["param_groups"]:
        del group["ns_dtype"]
    _make("muon", _model()).load_state_dict(copy.deepcopy(old))
    with pytest.raises(ValueError, match="ns_dtype=None"):
        _make("muon", _model(), ns_dtype=torch.bfloat16).load_state_dict(old)
