"""torch.optim behaviour: param groups, closure, zero_grad, missing gradients, routing."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close
from zoo_support import DTYPE, leaves, train, zoo_kwargs

from gaugekit.optim import (
    Adam,
    Muon,
    SharedScaleAdam,
    make_optimizer,
    split_matrix_params,
)


def _two_pairs(factors):
    (U, V) = factors
    return leaves(U[0], V[0]), leaves(U[1], V[1])


def test_groups_with_different_lrs_are_separate_optimizers(zoo_name, problem, factors):
    lr = zoo_kwargs(zoo_name)["lr"]
    kwargs = zoo_kwargs(zoo_name)
    a, b = _two_pairs(factors)
    a2, b2 = _two_pairs(factors)

    def loss(*p):
        return problem.run(0)(p[0], p[1]) + problem.run(1)(p[2], p[3])

    grouped = make_optimizer(zoo_name, [{"params": a}, {"params": b, "lr": lr / 3}], **kwargs)
    train(grouped, [*a, *b], loss, 6)
    separate = [make_optimizer(zoo_name, a2, **kwargs),
                make_optimizer(zoo_name, b2, **{**kwargs, "lr": lr / 3})]
    for _ in range(6):
        for opt in separate:
            opt.zero_grad()
        loss(*a2, *b2).backward()
        for opt in separate:
            opt.step()
    gap = max((x - y).abs().max().item() for x, y in zip([*a, *b], [*a2, *b2], strict=True))
    if grouped.couples_param_groups:
        assert gap > 1e-8  # the shared scalar pools both groups: not separable, by design
    else:
        assert gap == 0.0


def test_shared_scale_pools_all_groups_once_per_step():
    """First step from zero state: ΔP = −lr_group · g / (√mean(g² over ALL params) + ε)."""
    g = torch.Generator().manual_seed(5)
    grads = [torch.randn(4, 3, generator=g, dtype=DTYPE), torch.randn(6, generator=g, dtype=DTYPE)]
    params = leaves(torch.zeros(4, 3, dtype=DTYPE), torch.zeros(6, dtype=DTYPE))
    opt = SharedScaleAdam([{"params": [params[0]], "lr": 0.1}, {"params": [params[1]], "lr": 0.4}])
    for p, G in zip(params, grads, strict=True):
        p.grad = G.clone()
    opt.step()
    scale = torch.cat([G.reshape(-1) for G in grads]).pow(2).mean().sqrt() + 1e-8
    assert_close(params[0].detach(), -0.1 * grads[0] / scale, atol=1e-15, rtol=0)
    assert_close(params[1].detach(), -0.4 * grads[1] / scale, atol=1e-15, rtol=0)
    own_scale = grads[0].pow(2).mean().sqrt() + 1e-8  # negative control: per-group pooling
    assert (params[0].detach() + 0.1 * grads[0] / own_scale).abs().max() > 1e-3


def test_closure_is_optional_and_its_loss_is_returned(zoo_name, problem, factors):
    loss_fn = problem.run(0)
    with_closure = leaves(factors[0][0], factors[1][0])
    opt = make_optimizer(zoo_name, with_closure, **zoo_kwargs(zoo_name))
    returned = []
    for _ in range(3):
        def closure():
            opt.zero_grad()
            value = loss_fn(*with_closure)
            value.backward()
            return value

        returned.append(opt.step(closure))
    manual = leaves(factors[0][0], factors[1][0])
    train(make_optimizer(zoo_name, manual, **zoo_kwargs(zoo_name)), manual, loss_fn, 3)
    for a, b in zip(with_closure, manual, strict=True):
        assert_close(a.detach(), b.detach(), atol=0, rtol=0)
    assert all(isinstance(v, torch.Tensor) and v.requires_grad for v in returned)
    assert returned[0].item() != returned[-1].item()
    assert opt.step() is None


def test_zero_grad_and_missing_gradients(zoo_name, problem, factors):
    params = leaves(factors[0][0], factors[1][0])
    opt = make_optimizer(zoo_name, params, **zoo_kwargs(zoo_name))
    problem.run(0)(*params).backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in params)
    opt.zero_grad()
    assert all(p.grad is None for p in params)
    before = [p.detach().clone() for p in params]
    opt.step()  # no gradients: nothing moves, no state is created
    assert all(torch.equal(p.detach(), b) for p, b in zip(params, before, strict=True))
    assert not opt.state
    problem.run(0)(*params).backward()  # control: with gradients it moves
    opt.step()
    assert not torch.equal(params[0].detach(), before[0])


def test_a_parameter_without_gradient_is_skipped():
    used, unused = leaves(torch.ones(3, dtype=DTYPE), torch.ones(2, dtype=DTYPE))
    opt = Adam([used, unused], lr=0.1)
    (used**2).sum().backward()
    opt.step()
    assert torch.equal(unused.detach(), torch.ones(2, dtype=DTYPE)) and unused not in opt.state
    assert (used.detach() < 1).all() and used in opt.state


def test_step_does_not_write_grad_or_lr(zoo_name, problem, factors):
    lr = torch.full((3,), zoo_kwargs(zoo_name)["lr"], dtype=DTYPE)
    params = leaves(*factors)
    opt = make_optimizer(zoo_name, params, **zoo_kwargs(zoo_name, lr=lr, batch_dims=1))
    problem.loss(*params).backward()
    grads = [p.grad.clone() for p in params]
    lr_before = lr.clone()
    opt.step()
    assert all(torch.equal(p.grad, g) for p, g in zip(params, grads, strict=True))
    assert opt.param_groups[0]["lr"] is lr and torch.equal(lr, lr_before)


def _mlp() -> nn.Module:
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)).to(DTYPE)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=DTYPE) / 2)
    return model


def test_split_matrix_params_routes_an_mlp():
    model = _mlp()
    matrices, others = split_matrix_params(model)
    assert [tuple(p.shape) for p in matrices] == [(3, 4), (2, 3)]
    assert [tuple(p.shape) for p in others] == [(3,), (2,)]
    with pytest.raises(ValueError, match="split_matrix_params"):
        Muon(model.parameters())
    muon, adam = Muon(matrices, lr=0.02), Adam(others, lr=1e-2)
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(3):
        muon.zero_grad()
        adam.zero_grad()
        model(x).pow(2).mean().backward()
        muon.step()
        adam.step()
    assert all(not torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before,
                                                               strict=True))


def test_split_matrix_params_with_batch_dims_and_frozen_params():
    stacked = torch.zeros(3, 5, 4, requires_grad=True)
    vector = torch.zeros(3, 5, requires_grad=True)
    frozen = torch.zeros(3, 5, 4)
    matrices, others = split_matrix_params([stacked, vector, frozen], batch_dims=1)
    assert matrices == [stacked] and others == [vector]
    matrices, others = split_matrix_params([stacked, vector])
    assert matrices == [vector] and others == [stacked]


def test_named_parameters_are_accepted_and_validated():
    model = _mlp()
    named_matrices = [(n, p) for n, p in model.named_parameters() if p.ndim == 2]
    opt = Muon(named_matrices, lr=0.02)
    assert opt.param_groups[0]["param_names"] == ["0.weight", "2.weight"]
    with pytest.raises(ValueError, match="^Invalid params"):
        Muon(list(model.named_parameters()))


_BUILD_AND_REPORT = """
import sys, torch
from gaugekit.optim import make_optimizer, {cls}
p = torch.zeros(3, 4, 4, requires_grad=True)
opt = {build}
opt.add_param_group({{"params": [torch.zeros(3, 4, 4, requires_grad=True)], "lr": 0.2}})
p.grad = torch.ones_like(p)
opt.step()
print("torch._dynamo" in sys.modules)
"""


@pytest.mark.parametrize("cls, build, loads_dynamo", [
    ("Muon", "Muon([p], lr=0.1, batch_dims=1)", False),
    ("Adam", "make_optimizer('shampoo', [p], lr=0.1, batch_dims=1)", False),
    # control: torch's own constructor imports torch._dynamo on its first call
    ("Adam", "torch.optim.SGD([p], lr=0.1)", True),
])
def test_building_a_zoo_optimizer_does_not_import_dynamo(cls, build, loads_dynamo):
    """torch's add_param_group sits behind torch._disable_dynamo, whose first call imports
    torch._dynamo (seconds, once per process: every sweep worker paid it); the zoo calls the
    wrapped function while dynamo is not loaded."""
    import subprocess
    import sys

    script = _BUILD_AND_REPORT.format(cls=cls, build=build)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == str(loads_dynamo)
