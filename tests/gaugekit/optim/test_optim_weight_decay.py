"""``weight_decay`` and ``maximize`` on every rule (torch parity: test_optim_torch_parity).

Decoupled decay, ``θ_t = θ_{t-1}(1 − lr λ) + Δ_t`` with ``Δ_t`` the step the rule takes without
decay, is checked on a fixed sequence of gradients (so ``Δ_t`` does not depend on ``θ``); the
coupled rules (torch's L2) fail that identity, the negative control. ``maximize`` on ``L`` is
the rule on ``−L``, and never writes ``.grad``.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, leaves, train, zoo_kwargs

from gaugekit.optim import ScaledGD, get_spec, make_optimizer, optimizer_names

NUM_STEPS = 8
LAMBDA = 0.3
COUPLED = {"gd", "momentum", "rmsprop", "adam"}
#: ScaledGD's step depends on the factors themselves (its Grams): tested on its own below.
DECOUPLED = [n for n in optimizer_names() if n not in COUPLED and n != "scaled_gd"]


def _fixed_gradients(seed: int = 0) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(5, 3, generator=g, dtype=DTYPE), torch.randn(4, 3, generator=g,
                                                                        dtype=DTYPE)]
            for _ in range(NUM_STEPS)]


def _start():
    g = torch.Generator().manual_seed(1)
    return leaves(torch.randn(5, 3, generator=g, dtype=DTYPE),
                  torch.randn(4, 3, generator=g, dtype=DTYPE))


def _iterates(name: str, weight_decay: float) -> list[list[torch.Tensor]]:
    """The iterates of ``name`` on the fixed gradients (θ₀ first)."""
    params = _start()
    opt = make_optimizer(name, params, **zoo_kwargs(name, weight_decay=weight_decay))
    out = [[p.detach().clone() for p in params]]
    for grads in _fixed_gradients():
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        opt.step()
        out.append([p.detach().clone() for p in params])
    return out


def _decoupled_gap(name: str) -> float:
    """max_t ‖θ_t^λ − (θ_{t-1}^λ (1 − lr λ) + Δ_t)‖ / ‖Δ_t‖ with Δ_t the undecayed step."""
    lr = zoo_kwargs(name)["lr"]
    plain, decayed = _iterates(name, 0.0), _iterates(name, LAMBDA)
    gap = 0.0
    for t in range(1, NUM_STEPS + 1):
        for i in range(2):
            step = plain[t][i] - plain[t - 1][i]
            want = decayed[t - 1][i] * (1 - lr * LAMBDA) + step
            gap = max(gap, ((decayed[t][i] - want).norm() / step.norm()).item())
    return gap


@pytest.mark.parametrize("name", DECOUPLED)
def test_decoupled_weight_decay_scales_the_factor_before_the_step(name):
    assert get_spec(name).cls.weight_decay_kind == "decoupled"
    assert _decoupled_gap(name) < 1e-10
    # the decay acted: the decayed run is not the plain one
    plain, decayed = _iterates(name, 0.0), _iterates(name, LAMBDA)
    assert (plain[-1][0] - decayed[-1][0]).abs().max() > 1e-3


@pytest.mark.parametrize("name", sorted(COUPLED - {"gd"}))
def test_coupled_rules_fail_the_decoupled_identity(name):
    """Negative control: torch's L2 (``g + λθ`` inside the rule) is another update (for plain
    GD the two coincide: ``θ − lr(g + λθ) = θ(1 − lr λ) − lr g``)."""
    assert get_spec(name).cls.weight_decay_kind == "coupled"
    assert _decoupled_gap(name) > 1e-4
    assert _decoupled_gap("gd") < 1e-12


def test_adam_decoupled_flag_passes_the_identity():
    params, ref = _start(), _start()
    opt = make_optimizer("adam", params, lr=1e-2, weight_decay=LAMBDA,
                         decoupled_weight_decay=True)
    plain = make_optimizer("adam", ref, lr=1e-2)
    for grads in _fixed_gradients():
        before, before_ref = [p.detach().clone() for p in params], [p.detach().clone() for p in ref]
        for p, q, g in zip(params, ref, grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        plain.step()
        for p, q, b, c in zip(params, ref, before, before_ref, strict=True):
            assert_close(p.detach(), b * (1 - 1e-2 * LAMBDA) + (q.detach() - c), atol=1e-13,
                         rtol=0)


def test_scaled_gd_decays_after_its_grams():
    """``U ← U(1 − lr w) − lr G_U (VᵀV + λI)⁻¹`` with the Gram of the factor before the step."""
    lr, w, lam = 0.05, LAMBDA, 0.1
    params = _start()
    opt = ScaledGD(params, lr=lr, weight_decay=w, damping=lam, relative_damping=False)
    eye = torch.eye(3, dtype=DTYPE)
    for grads in _fixed_gradients():
        U, V = (p.detach().clone() for p in params)
        G_U, G_V = grads
        want_U = U * (1 - lr * w) - lr * G_U @ torch.linalg.inv(V.T @ V + lam * eye)
        want_V = V * (1 - lr * w) - lr * G_V @ torch.linalg.inv(U.T @ U + lam * eye)
        params[0].grad, params[1].grad = G_U.clone(), G_V.clone()
        opt.step()
        assert_close(params[0].detach(), want_U, atol=1e-12, rtol=0)
        assert_close(params[1].detach(), want_V, atol=1e-12, rtol=0)


def test_weight_decay_and_maximize_are_param_group_keys(zoo_name, factors):
    """Per group, with the defaults 0.0 and False, and saved in ``state_dict``."""
    a, b = leaves(factors[0][0], factors[1][0]), leaves(factors[0][1], factors[1][1])
    opt = make_optimizer(zoo_name, [{"params": a}, {"params": b, "weight_decay": LAMBDA}],
                         **zoo_kwargs(zoo_name))
    saved = opt.state_dict()["param_groups"]
    assert [g["weight_decay"] for g in saved] == [0.0, LAMBDA]
    assert all(g["maximize"] is False for g in saved)


def test_weight_decay_round_trips_through_state_dict(zoo_name, problem, factors):
    loss = problem.run(0)
    kwargs = zoo_kwargs(zoo_name, weight_decay=LAMBDA)
    first = leaves(factors[0][0], factors[1][0])
    opt = train(make_optimizer(zoo_name, first, **kwargs), first, loss, 4)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    second = leaves(*first)
    fresh = make_optimizer(zoo_name, second, **zoo_kwargs(zoo_name))  # λ = 0 until loaded
    fresh.load_state_dict(torch.load(buffer, weights_only=False))
    assert fresh.param_groups[0]["weight_decay"] == LAMBDA
    train(fresh, second, loss, 4)
    straight = leaves(factors[0][0], factors[1][0])
    train(make_optimizer(zoo_name, straight, **kwargs), straight, loss, 8)
    for x, y in zip(second, straight, strict=True):
        assert_close(x.detach(), y.detach(), atol=0, rtol=0)


@pytest.mark.parametrize("weight_decay", [0.0, LAMBDA])
def test_maximize_is_the_rule_on_the_negated_loss(zoo_name, problem, factors, weight_decay):
    loss = problem.run(0)
    up, down, plain = (leaves(factors[0][0], factors[1][0]) for _ in range(3))
    kwargs = zoo_kwargs(zoo_name, weight_decay=weight_decay)
    opt_up = make_optimizer(zoo_name, up, maximize=True, **kwargs)
    opt_down = make_optimizer(zoo_name, down, **kwargs)
    for _ in range(NUM_STEPS):
        opt_up.zero_grad()
        loss(*up).backward()
        grads = [p.grad.clone() for p in up]
        opt_up.step()
        assert all(torch.equal(p.grad, g) for p, g in zip(up, grads, strict=True))  # untouched
        opt_down.zero_grad()
        (-loss(*down)).backward()
        opt_down.step()
    for x, y in zip(up, down, strict=True):
        assert_close(x.detach(), y.detach(), atol=1e-13, rtol=0)
    # negative control: without maximize the same loss goes the other way
    train(make_optimizer(zoo_name, plain, **kwargs), plain, loss, NUM_STEPS)
    assert (plain[0].detach() - up[0].detach()).abs().max() > 1e-4
