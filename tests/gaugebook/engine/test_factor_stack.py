"""Stack compaction: per-parameter and optimizer-wide state survive, so a run whose neighbours
leave the stack mid-training follows exactly its solo trajectory (FlowAdam included)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor
from torch.testing import assert_close

from gaugebook.engine.factor_stack import optimizer_wide_state, take_runs, transfer_state
from gaugebook.engine.factor_trainer import train_factored_batch
from gaugebook.engine.spec import RunSpec
from gaugebook.sensing.measurements import SENSING
from gaugekit.optim import make_optimizer

DTYPE = torch.float64
#: FlowAdam whose flow path fires on some steps and not on others (stiffness test at 1.5):
#: its optimizer-wide running averages and warm-up count decide every step.
SOMETIMES = {"precond_power": 0.5, "precond_scalar": "rms", "flow": True,
             "flow_stiffness": 1.5, "flow_plateau": 0.95, "flow_warmup": 5}


def _sensing(num_runs: int, n: int = 5, k: int = 3, m: int = 30):
    """``num_runs`` different float64 sensing problems and their initial factors."""
    g = torch.Generator().manual_seed(11)
    A = torch.randn(num_runs, m, n * n, generator=g, dtype=DTYPE)
    X = torch.randn(num_runs, n, 2, generator=g, dtype=DTYPE)
    y = A @ (X @ X.transpose(1, 2)).reshape(num_runs, -1, 1)
    U0 = 0.1 * torch.randn(num_runs, n, k, generator=g, dtype=DTYPE)
    V0 = 0.1 * torch.randn(num_runs, n, k, generator=g, dtype=DTYPE)
    return A, y, U0, V0


def _grads(A: Tensor, y: Tensor, U: Tensor, V: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``mean_i (⟨A_i, U Vᵀ⟩ − y_i)²`` per run (written out, no autograd)."""
    W = U @ V.transpose(1, 2)
    r = A @ W.reshape(W.shape[0], -1, 1) - y
    G = (2 / A.shape[1]) * (A.transpose(1, 2) @ r).reshape(W.shape)
    return G @ V, G.transpose(1, 2) @ U


def _train(A, y, U0, V0, lr, steps, *, drop_at=None, keep=None, drop_wide=False, **hp):
    """Train the stack ``steps`` steps; at step ``drop_at`` keep only runs ``keep`` (rebuild
    the optimizer and transfer the state, optionally losing the optimizer-wide part)."""
    U, V = U0.clone(), V0.clone()
    opt = make_optimizer("flow_adam", [U, V], lr=lr, batch_dims=1, **hp)
    for t in range(steps):
        if t == drop_at:
            idx = torch.tensor(keep)
            U_new, V_new = U.index_select(0, idx), V.index_select(0, idx)
            lr = lr.index_select(0, idx)
            new = make_optimizer("flow_adam", [U_new, V_new], lr=lr, batch_dims=1, **hp)
            transfer_state(opt, new, [(U, U_new), (V, V_new)], idx, U.shape[0])
            if drop_wide:
                new.state.pop("flow", None)
            opt, U, V, A, y = new, U_new, V_new, A.index_select(0, idx), y.index_select(0, idx)
        U.grad, V.grad = _grads(A, y, U, V)
        opt.step()
    return U, V, opt


def test_take_runs_maps_dicts_and_leaves_other_values():
    keep = torch.tensor([0, 2])
    state = {"step": 4, "avg": torch.arange(3.0), "pair": (torch.ones(3, 2), 1.5),
             "scalar": torch.tensor(2.0), "other": torch.zeros(4)}
    out = take_runs(state, keep, 3)
    assert out["step"] == 4 and out["pair"][1] == 1.5
    assert_close(out["avg"], torch.tensor([0.0, 2.0]))
    assert out["pair"][0].shape == (2, 2)
    assert out["scalar"] is state["scalar"] and out["other"] is state["other"]


def test_transfer_keeps_flow_state_of_the_remaining_runs():
    A, y, U0, V0 = _sensing(3)
    lr = torch.tensor([0.01, 0.02, 0.03], dtype=DTYPE)
    _, _, opt = _train(A, y, U0, V0, lr, 20, **SOMETIMES)
    wide = optimizer_wide_state(opt)
    assert list(wide) == ["flow"]
    U, V = opt.param_groups[0]["params"]
    keep = torch.tensor([2, 0])
    U_new, V_new = U[keep].clone(), V[keep].clone()
    new = make_optimizer("flow_adam", [U_new, V_new], lr=lr[keep], batch_dims=1, **SOMETIMES)
    transfer_state(opt, new, [(U, U_new), (V, V_new)], keep, 3)
    old_flow, new_flow = opt.state["flow"], new.state["flow"]
    assert new_flow["step"] == old_flow["step"] == 20
    for key in ("grad_norm_avg", "grad_change_avg", "flow_steps", "stiff_triggers"):
        assert_close(new_flow[key], old_flow[key][keep])
    assert_close(new.state[U_new]["exp_avg"], opt.state[U]["exp_avg"][keep])
    counters = new.flow_counters()
    assert counters["steps"] == 20
    assert_close(counters["flow_steps"], opt.flow_counters()["flow_steps"][keep])


def test_compacted_stack_follows_the_solo_trajectories():
    A, y, U0, V0 = _sensing(3)
    lr = torch.tensor([0.01, 0.02, 0.03], dtype=DTYPE)
    keep = [0, 2]
    U_c, V_c, opt_c = _train(A, y, U0, V0, lr, 60, drop_at=25, keep=keep, **SOMETIMES)
    flows = opt_c.flow_counters()["flow_steps"]
    assert 0 < int(flows.min()) and int(flows.max()) < 60 - 6  # the flow fired, not always
    for j, run in enumerate(keep):
        sl = slice(run, run + 1)
        U_s, V_s, opt_s = _train(A[sl], y[sl], U0[sl], V0[sl], lr[sl], 60, **SOMETIMES)
        assert_close(U_c[j], U_s[0], rtol=1e-10, atol=1e-13)
        assert_close(V_c[j], V_s[0], rtol=1e-10, atol=1e-13)
        assert int(flows[j]) == int(opt_s.flow_counters()["flow_steps"][0])


def test_losing_the_flow_state_changes_the_trajectory():
    # negative control: without the optimizer-wide state the remaining runs restart FlowAdam's
    # warm-up and its running averages, so they leave their solo trajectories
    A, y, U0, V0 = _sensing(3)
    lr = torch.tensor([0.01, 0.02, 0.03], dtype=DTYPE)
    # (run 2 takes flow steps before the drop at step 25, so a restarted warm-up differs)
    U_c, _, _ = _train(A, y, U0, V0, lr, 60, drop_at=25, keep=[0, 2], drop_wide=True,
                       **SOMETIMES)
    U_s, _, _ = _train(A[2:], y[2:], U0[2:], V0[2:], lr[2:], 60, **SOMETIMES)
    assert (U_c[1] - U_s[0]).abs().max() > 1e-6


def _spec(lr: float, seed: int, hparams: dict) -> RunSpec:
    config = {
        "kind": "factored",
        "problem": {"n": 6, "r": 1, "k": 6, "m": 22, "num_val": 5, "init_scale": 0.1},
        "method": "flow_adam", "hparams": {**hparams, "lr": lr}, "schedule": "constant",
        "budget": {"num_steps": 400, "tol": 1e-6, "check_every": 20, "diverge_above": 1e8},
        "seed": seed, "dtype": "float64",
    }
    return RunSpec("test", "tiny", config, {"instance": seed})


@pytest.mark.parametrize("hparams", [SOMETIMES, {"flow": True}, {"flow": False,
                                                                 "precond_power": 0.25}])
def test_factor_training_stack_equals_runs_alone_with_flow_adam(hparams):
    """Runs that finish at different checks leave the stack; those that stay follow their
    solo trajectories (float64, to round-off)."""
    specs = [_spec(lr, seed, hparams) for lr in (0.03, 0.1, 0.3) for seed in (1, 2)]
    batched = train_factored_batch(specs, SENSING)
    steps = {r.metrics["steps"] for r in batched}
    assert len(steps) > 1  # the stack was compacted before the last run ended
    for spec, b in zip(specs, batched, strict=True):
        alone = train_factored_batch([spec], SENSING)[0]
        assert alone.status == b.status and alone.metrics["steps"] == b.metrics["steps"]
        for key in ("rec", "train_loss", "balancedness"):
            assert_close(torch.tensor(b.metrics[key]), torch.tensor(alone.metrics[key]),
                         rtol=1e-9, atol=1e-14)
