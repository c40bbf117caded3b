"""``state_dict`` round trip: 5 steps, save, load into a fresh optimizer, 5 more == 10 straight."""

from __future__ import annotations

import io

import torch
from torch.testing import assert_close
from zoo_support import DTYPE, leaves, run_zoo, train, zoo_kwargs

from gaugekit.optim import make_optimizer


def _serialized(state_dict: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def _resumed(name, problem, factors, batch_dims, lr):
    loss = problem.loss if batch_dims else problem.run(0)
    start = factors if batch_dims else (factors[0][0], factors[1][0])
    first = leaves(*start)
    opt = run_zoo(name, first, loss, 5, lr=lr, batch_dims=batch_dims)
    saved = _serialized(opt.state_dict())
    second = leaves(*first)  # fresh copies of the params after 5 steps
    fresh = make_optimizer(name, second, **zoo_kwargs(name, lr=lr, batch_dims=batch_dims))
    fresh.load_state_dict(saved)
    train(fresh, second, loss, 5)
    return second, fresh


def _straight(name, problem, factors, batch_dims, lr):
    loss = problem.loss if batch_dims else problem.run(0)
    start = factors if batch_dims else (factors[0][0], factors[1][0])
    params = leaves(*start)
    opt = run_zoo(name, params, loss, 10, lr=lr, batch_dims=batch_dims)
    return params, opt


def test_round_trip(zoo_name, problem, factors):
    lr = zoo_kwargs(zoo_name)["lr"]
    resumed, opt_resumed = _resumed(zoo_name, problem, factors, 0, lr)
    straight, opt_straight = _straight(zoo_name, problem, factors, 0, lr)
    for a, b in zip(resumed, straight, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)
    assert_close(opt_resumed.state_dict()["state"], opt_straight.state_dict()["state"],
                 atol=0, rtol=0)


def test_round_trip_with_per_run_lr(zoo_name, problem, factors):
    lr = zoo_kwargs(zoo_name)["lr"] * torch.tensor([1.0, 0.5, 0.25], dtype=DTYPE)
    resumed, opt = _resumed(zoo_name, problem, factors, 1, lr)
    straight, _ = _straight(zoo_name, problem, factors, 1, lr)
    for a, b in zip(resumed, straight, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)
    assert_close(opt.param_groups[0]["lr"], lr, atol=0, rtol=0)


#: sign rules need an lr at which gradient signs flip for their average to show
NEGATIVE_LR = {"lion": 0.1, "signum": 0.1}


def test_fresh_state_is_not_a_resume(zoo_name, problem, factors):
    """Negative control: without the loaded state, stateful rules continue differently
    (stateless rules, which keep no state, continue identically)."""
    lr = NEGATIVE_LR.get(zoo_name, zoo_kwargs(zoo_name)["lr"])
    loss = problem.run(0)
    first = leaves(factors[0][0], factors[1][0])
    opt = run_zoo(zoo_name, first, loss, 5, lr=lr)
    second = leaves(*first)
    train(make_optimizer(zoo_name, second, **zoo_kwargs(zoo_name, lr=lr)), second, loss, 5)
    straight, _ = _straight(zoo_name, problem, factors, 0, lr)
    gap = max((a - b).abs().max().item() for a, b in zip(second, straight, strict=True))
    if opt.state:
        assert gap > 1e-10
    else:
        assert gap == 0.0
