"""The registry: names, classification, grids, schedules, construction on a factor pair."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, leaves

from gaugekit.optim import (
    Adam,
    OptimizerSpec,
    all_specs,
    get_spec,
    lr_factor,
    make_optimizer,
    optimizer_names,
    register_optimizer,
    scheduled_lr,
)
from gaugekit.optim.registry import _REGISTRY

ZOO = ["gd", "momentum", "adam", "scalar_adam", "rmsprop", "lion", "signum", "adafactor", "muon",
       "shampoo", "scaled_gd", "gram"]
EQUIVARIANT = {"gd", "momentum", "scalar_adam", "muon", "shampoo", "scaled_gd", "gram"}


def test_names_in_order():
    assert optimizer_names()[: len(ZOO)] == ZOO
    assert [s.name for s in all_specs()] == optimizer_names()


def test_equivariance_classification():
    for name in ZOO:
        assert get_spec(name).equivariant is (name in EQUIVARIANT), name
    yes, no = optimizer_names(equivariant=True), optimizer_names(equivariant=False)
    assert set(yes) | set(no) == set(optimizer_names()) and not set(yes) & set(no)
    assert all(get_spec(n).reason for n in optimizer_names())


def test_unknown_name_lists_the_allowed_ones():
    expected = (r"^Invalid name: 'adamx'; expected a registry name \[.*'adam'.*'muon'.*\], an "
                r"alias \['adamw', 'muon_adam'\] or a class name \[.*'SharedScaleAdam'.*\]")
    with pytest.raises(ValueError, match=expected):
        get_spec("adamx")
    with pytest.raises(ValueError, match="^Invalid name: 'adamx'"):
        make_optimizer("adamx", [torch.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match="^Invalid name: None"):
        get_spec(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "entry"), [
    ("SharedScaleAdam", "scalar_adam"), ("sharedscaleadam", "scalar_adam"),
    ("shared-scale-adam", "scalar_adam"), ("Scalar_Adam", "scalar_adam"), ("Adam", "adam"),
    ("EigenAdam", "eigen_adam"), ("FlowAdam", "flow_adam"), ("ScaledGD", "scaled_gd"),
    ("GramPreconditioned", "gram"), ("MUON", "muon"), ("gd", "gd"),
])
def test_class_names_and_spellings_find_the_entry(name, entry):
    assert get_spec(name) is get_spec(entry)


def test_muon_adam_is_an_alias_that_runs_muon_on_a_factor_pair():
    from gaugekit.optim import Muon, MuonAdam

    spec = get_spec("muon_adam")
    assert get_spec("MuonAdam") is spec and "muon_adam" not in optimizer_names()
    assert spec.cls is MuonAdam and spec.equivariant
    g = torch.Generator().manual_seed(4)
    start = torch.randn(6, 3, generator=g, dtype=DTYPE), torch.randn(5, 3, generator=g, dtype=DTYPE)
    ours, theirs = leaves(*start), leaves(*start)
    opt = make_optimizer("muon_adam", ours, lr=0.02)
    ref = Muon(theirs, lr=0.02, momentum=0.95, nesterov=True, adjust_lr_fn="original")
    assert isinstance(opt, MuonAdam)
    assert_close(_three_steps(opt, ours), _three_steps(ref, theirs), rtol=0, atol=1e-12)


def _three_steps(opt, params):
    for _ in range(3):
        opt.zero_grad()
        ((params[0] @ params[1].T) ** 2).sum().backward()
        opt.step()
    return params[0].detach()


def test_adamw_is_the_decoupled_adam_with_torchs_defaults():
    spec = get_spec("adamw")
    assert get_spec("AdamW") is spec and "adamw" not in optimizer_names()
    assert spec.cls is Adam and not spec.equivariant
    assert spec.options == {"decoupled_weight_decay": True, "weight_decay": 1e-2}
    g = torch.Generator().manual_seed(3)
    start = torch.randn(6, 3, generator=g, dtype=DTYPE), torch.randn(5, 3, generator=g, dtype=DTYPE)
    ours, theirs, coupled = leaves(*start), leaves(*start), leaves(*start)
    adamw = make_optimizer("adamw", ours, lr=0.1)
    assert adamw.defaults["weight_decay"] == torch.optim.AdamW(theirs).defaults["weight_decay"]
    U = _three_steps(adamw, ours)
    assert_close(U, _three_steps(torch.optim.AdamW(theirs, lr=0.1), theirs), atol=1e-12, rtol=0)
    # negative control: the coupled decay (torch.optim.Adam's L2) leaves AdamW's path
    U_coupled = _three_steps(make_optimizer("adam", coupled, lr=0.1, weight_decay=1e-2), coupled)
    assert (U - U_coupled).abs().max() > 1e-4


def test_reasons_are_written_in_unicode_math():
    reasons = [spec.reason for spec in all_specs()]
    assert any("→" in r for r in reasons) and any("√" in r for r in reasons)
    for ascii_math in ("->", "sqrt(", "^", "!=", "_hat", "lam "):
        assert not any(ascii_math in r for r in reasons), ascii_math


def test_specs_are_consistent(zoo_name):
    spec = get_spec(zoo_name)
    assert spec.matrix_only is spec.cls.matrix_only
    assert spec.lr_schedule in ("constant", "cosine")
    assert spec.label


def test_make_optimizer_uses_the_class_defaults(zoo_name):
    """One source of defaults: the registry builds the class with its own defaults (and the
    spec's variant options), and ``spec.defaults`` reports exactly those."""
    spec = get_spec(zoo_name)
    U, V = leaves(torch.zeros(6, 3, dtype=DTYPE), torch.zeros(6, 3, dtype=DTYPE))
    built = make_optimizer(zoo_name, [U, V])
    plain = spec.cls([U.detach().clone().requires_grad_(True),
                      V.detach().clone().requires_grad_(True)], **spec.options)
    assert built.defaults == plain.defaults
    assert "lr" not in spec.options
    assert all(spec.defaults[key] == value for key, value in built.defaults.items())
    # negative control: an override does reach the class
    assert make_optimizer(zoo_name, [U, V], lr=0.123).defaults["lr"] == 0.123


def test_registry_lrs_are_the_classes(zoo_name):
    """The former registry learning rates (points of the paper's grids) are no defaults."""
    spec = get_spec(zoo_name)
    assert spec.defaults["lr"] == inspect.signature(spec.cls).parameters["lr"].default


def test_adam_defaults_are_torchs():
    torch_adam = torch.optim.Adam([torch.zeros(1)]).defaults
    ours = get_spec("adam").defaults
    assert {k: ours[k] for k in ("lr", "betas", "eps")} == {
        k: torch_adam[k] for k in ("lr", "betas", "eps")
    }


def test_schedules_follow_the_paper_protocol():
    cosine = {n for n in ZOO if get_spec(n).lr_schedule == "cosine"}
    assert cosine == {"muon", "signum", "lion", "rmsprop"}


def test_every_rule_builds_and_steps_on_a_factor_pair(zoo_name):
    g = torch.Generator().manual_seed(2)
    U, V = leaves(torch.randn(6, 3, generator=g, dtype=DTYPE),
                  torch.randn(6, 3, generator=g, dtype=DTYPE))
    opt = make_optimizer(zoo_name, [U, V])
    assert isinstance(opt, get_spec(zoo_name).cls)
    before = U.detach().clone()
    ((U @ V.T) ** 2).sum().backward()
    opt.step()
    assert torch.isfinite(U).all() and not torch.equal(U.detach(), before)


def test_register_optimizer():
    spec = get_spec("gd")
    with pytest.raises(ValueError, match="^Invalid name: 'gd'"):
        register_optimizer(spec)
    extra = OptimizerSpec(name="gd_slow", cls=spec.cls, equivariant=True, reason="as gd",
                          lr_schedule="constant", label="GD (slow)")
    try:
        register_optimizer(extra)
        assert optimizer_names()[-1] == "gd_slow" and get_spec("gd_slow") is extra
    finally:
        _REGISTRY.pop("gd_slow", None)
    assert "gd_slow" not in optimizer_names()
    with pytest.raises(ValueError, match="^Invalid lr_schedule"):
        OptimizerSpec(name="x", cls=spec.cls, equivariant=True, reason="", lr_schedule="step",
                      label="x")


def test_specs_are_built_by_keyword_and_hold_no_learning_rate():
    spec = get_spec("gd")
    with pytest.raises(TypeError):
        OptimizerSpec("x", spec.cls, True, "", "constant", "x")  # positional: refused
    with pytest.raises(ValueError, match="^Invalid options"):
        OptimizerSpec(name="x", cls=spec.cls, equivariant=True, reason="", label="x",
                      lr_schedule="constant", options={"lr": 0.1})
    variant = OptimizerSpec(name="x", cls=spec.cls, equivariant=True, reason="", label="x",
                            lr_schedule="constant", options={"weight_decay": 0.5})
    assert variant.defaults["weight_decay"] == 0.5 and variant.defaults["lr"] == 1e-2
    assert variant.matrix_only is False and get_spec("muon").matrix_only is True


def test_lr_factor():
    assert lr_factor("constant", 7, 10) == 1.0
    assert lr_factor("cosine", 10, 10) == pytest.approx(0.0, abs=1e-15)
    assert lr_factor("cosine", 5, 10) == pytest.approx(0.5, abs=1e-15)
    assert lr_factor("cosine", 1, 10) == 0.5 * (1 + math.cos(math.pi / 10))
    with pytest.raises(ValueError, match="^Invalid schedule"):
        lr_factor("step", 1, 10)
    with pytest.raises(ValueError, match="^Invalid num_steps"):
        lr_factor("cosine", 1, 0)
    lrs = torch.tensor([0.1, 0.2], dtype=DTYPE)
    assert torch.equal(scheduled_lr(lrs, "cosine", 5, 10), lrs * 0.5)
