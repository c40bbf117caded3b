"""Construction-time validation, shape errors, and the behaviour on non-finite gradients."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, leaves, train, zoo_kwargs

from gaugekit.optim import (
    Adam,
    ScaledGD,
    Shampoo,
    SharedScaleAdam,
    get_spec,
    make_optimizer,
    optimizer_names,
)

#: values each hyperparameter must refuse (keys: every hyperparameter name in the zoo)
BAD_VALUES: dict[str, list] = {
    "batch_dims": [-1, 1.0, True],
    "lr": [-1e-3, math.nan, math.inf, "0.1", True, torch.tensor(-1.0, dtype=DTYPE),
           torch.tensor([0.1, 0.2], dtype=DTYPE), torch.tensor(1, dtype=torch.int64)],
    "betas": [(1.0, 0.999), (0.9, -0.1), (0.9,), 0.9, (0.9, math.nan)],
    "eps": [-1e-8, math.nan],
    "momentum": [1.0, -0.1],
    "alpha": [1.0, -0.5],
    "beta2": [1.5, 1.0],
    "nesterov": [1, "yes"],
    "ns_steps": [-1, 2.0, True],
    "ns_coefficients": [(1.0, 2.0), (1.0, 2.0, math.nan), "abc"],
    "adjust_lr_fn": ["bogus"],
    "damping": [-1.0, torch.tensor(1.0, dtype=DTYPE)],
    "update_freq": [0, 1.5],
    "eig_floor": [0.0, -1.0],
    "gram_fn": [3],
    "power": [-0.5, math.inf],
    "side": ["top"],
    "relative_damping": [1],
    "sequential": [None],
    "layout": ["BA", "uv", None],  # ScaledGD: "UV" or LoRA's "AB"
    # EigenAdam (gaugekit/optim/eigen_adam.py)
    "gram_beta": [1.0, -0.1, torch.tensor(0.9, dtype=DTYPE)],
    "cluster_tol": [-0.1, 1.0, "0.1", math.nan],
    "max_precond_dim": [0, 2.5, True],
    # AdamMini (gaugekit/optim/adam.py)
    "blocks": [0, -1, 1.5, True, "rows"],
    # the rules that share a statistic (base.py), Muon's precision and row blocks
    "nonfinite": ["ignore", True],
    "ns_dtype": ["bfloat16", torch.int32, torch.complex64],
    "split_rows": [0, 1.5, True, (), (2, 0), ((0, 1), "a")],
    "transposed": [1, None, "yes"],
    # SharedScaleAdam's and AdamMini's implementation switches
    "foreach": [1, "yes"],
    "fused": [1, "yes"],
    # every rule
    "weight_decay": [-0.1, math.nan, True, torch.tensor(-1.0, dtype=DTYPE),
                     torch.tensor([0.1, 0.2], dtype=DTYPE)],
    "maximize": [1, "yes", None],
    # Adam
    "decoupled_weight_decay": [1, None],
    # FlowAdam (gaugekit/optim/flow_adam.py), when registered
    "precond_power": [1.5, -0.1],
    "precond_scalar": ["bogus"],
    "flow": [1],
    "flow_method": ["bogus"],
    "flow_time_scale": [0.0],
    "flow_plateau": [-1.0],
    "flow_stiffness": [-1.0],
    "flow_clip_mode": ["bogus"],
    "flow_clip": [0.0],
    "flow_blend": [1.5],
    "flow_velocity_cap": [0.0],
    "flow_warmup": [-1],
    "flow_stat_beta": [1.0],
    "flow_tol": [0.0],
}


_MISSING = object()


def _cases():
    for name in optimizer_names():
        for hyper in ["batch_dims", *get_spec(name).cls.hyper_checks]:
            for i, bad in enumerate(BAD_VALUES.get(hyper, [_MISSING])):
                yield pytest.param(name, hyper, bad, id=f"{name}-{hyper}-{i}")


def _pair():
    g = torch.Generator().manual_seed(0)
    return leaves(torch.randn(5, 3, generator=g, dtype=DTYPE),
                  torch.randn(4, 3, generator=g, dtype=DTYPE))


@pytest.mark.parametrize(("name", "hyper", "bad"), list(_cases()))
def test_bad_hyperparameter_raises_naming_it(name, hyper, bad):
    if bad is _MISSING:
        pytest.fail(f"add bad values for {hyper!r} ({name}) to BAD_VALUES")
    with pytest.raises(ValueError, match=rf"^Invalid {re.escape(hyper)}\b"):
        make_optimizer(name, _pair(), **{hyper: bad})


def test_valid_values_next_to_the_bad_ones_are_accepted():
    """Positive control: boundary values inside the ranges construct fine."""
    U, V = _pair()
    Adam([U, V], lr=0.0, betas=(0.0, 0.0), eps=0.0)
    Adam([U, V], lr=torch.tensor(1e-3, dtype=DTYPE))
    Shampoo([U, V], damping=1e-12, update_freq=1, eig_floor=1e-30)
    make_optimizer("muon", [U, V], ns_steps=0, adjust_lr_fn="match_rms_adamw", nesterov=True)


def test_hyperparameters_are_checked_before_params_are_touched(zoo_name):
    def untouchable():
        raise AssertionError("params were read before the hyperparameters were checked")
        yield  # pragma: no cover

    with pytest.raises(ValueError, match="^Invalid lr"):
        get_spec(zoo_name).cls(untouchable(), lr=-1.0)


def test_per_run_lr_of_the_wrong_shape(zoo_name):
    U, V = leaves(*(torch.zeros(3, *s, dtype=DTYPE) for s in ((5, 3), (4, 3))))
    with pytest.raises(ValueError, match=r"^Invalid lr: .*\(3,\)"):
        make_optimizer(zoo_name, [U, V], lr=torch.ones(2, dtype=DTYPE), batch_dims=1)
    make_optimizer(zoo_name, [U, V], lr=torch.ones(3, dtype=DTYPE), batch_dims=1)  # control


def test_fewer_dims_than_batch_dims(zoo_name):
    U, V = _pair()
    with pytest.raises(ValueError, match="^Invalid params"):
        make_optimizer(zoo_name, [U, V], batch_dims=3)


def test_non_float_params_are_refused():
    with pytest.raises(ValueError, match="^Invalid params"):
        Adam([torch.zeros(3, dtype=torch.int64)])


MATRIX_ONLY = [n for n in optimizer_names() if get_spec(n).matrix_only]
ELEMENTWISE_OK = [n for n in optimizer_names() if not get_spec(n).matrix_only]


@pytest.mark.parametrize("name", MATRIX_ONLY)
@pytest.mark.parametrize(("shape", "batch_dims"), [((5,), 0), ((2, 5, 3), 0), ((5, 3), 1)])
def test_matrix_rules_refuse_non_matrices(name, shape, batch_dims):
    p = torch.zeros(shape, dtype=DTYPE, requires_grad=True)
    params = [p, p.detach().clone().requires_grad_(True)]
    with pytest.raises(ValueError, match=r"^Invalid params.*split_matrix_params"):
        make_optimizer(name, params, batch_dims=batch_dims)


@pytest.mark.parametrize("name", ELEMENTWISE_OK)
def test_elementwise_rules_accept_vectors_and_tensors(name):
    """Positive control for the matrix-only refusal."""
    params = leaves(torch.ones(5, dtype=DTYPE), torch.ones(2, 3, 4, dtype=DTYPE))
    opt = make_optimizer(name, params)
    sum(((p - 0.5) ** 2).sum() for p in params).backward()
    opt.step()
    assert all((p.detach() != 1.0).all() for p in params)


@pytest.mark.parametrize(
    "shapes", [[(5, 3)], [(5, 3), (4, 3), (4, 3)], [(5, 3), (4, 2)]], ids=["one", "three", "k"]
)
def test_scaled_gd_needs_one_pair_per_group(shapes):
    params = leaves(*(torch.zeros(s, dtype=DTYPE) for s in shapes))
    with pytest.raises(ValueError, match="^Invalid params"):
        ScaledGD(params)


def test_shared_scale_adam_refuses_per_group_eps_and_mixed_batch_shapes():
    U, V = _pair()
    with pytest.raises(ValueError, match="^Invalid eps"):
        SharedScaleAdam([{"params": [U]}, {"params": [V], "eps": 1e-6}])
    A, B = leaves(torch.zeros(3, 5, 3, dtype=DTYPE), torch.zeros(2, 4, 3, dtype=DTYPE))
    with pytest.raises(ValueError, match="^Invalid params"):
        SharedScaleAdam([A, B], batch_dims=1)
    SharedScaleAdam([{"params": [U]}, {"params": [V], "lr": 0.5}])  # control: lr may differ


def test_failed_add_param_group_leaves_the_optimizer_unchanged():
    U, V = _pair()
    opt = Adam([U])
    with pytest.raises(ValueError, match="^Invalid lr"):
        opt.add_param_group({"params": [V], "lr": -1.0})
    assert len(opt.param_groups) == 1
    opt.add_param_group({"params": [V], "lr": 0.5})
    assert len(opt.param_groups) == 2


ELEMENTWISE_RULES = {"gd", "momentum", "adam", "rmsprop", "lion", "signum"}


def test_non_finite_gradient_propagates_within_its_run_only(zoo_name, problem, factors):
    """A NaN in run 0's gradient: no exception, no check; run 0 goes non-finite where the rule
    couples the entry, runs 1 and 2 are bit-identical to a clean step."""
    kwargs = zoo_kwargs(zoo_name, batch_dims=1)
    clean, dirty = leaves(*factors), leaves(*factors)
    opt_clean = train(make_optimizer(zoo_name, clean, **kwargs), clean, problem.loss, 3)
    opt_dirty = train(make_optimizer(zoo_name, dirty, **kwargs), dirty, problem.loss, 3)
    for opt, params, poison in ((opt_clean, clean, False), (opt_dirty, dirty, True)):
        opt.zero_grad()
        problem.loss(*params).backward()
        if poison:
            params[0].grad[0, 1, 2] = math.nan
        opt.step()
    for a, b in zip(clean, dirty, strict=True):
        assert_close(a.detach()[1:], b.detach()[1:], atol=0, rtol=0)
        assert torch.isfinite(a).all()
    U0 = dirty[0].detach()[0]
    assert not torch.isfinite(U0[1, 2])
    if zoo_name in ELEMENTWISE_RULES:
        assert int((~torch.isfinite(U0)).sum()) == 1
        assert torch.isfinite(dirty[1].detach()).all()
