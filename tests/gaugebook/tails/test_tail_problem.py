"""The spectral-tail problem: E_⊥ orthogonal to the head's spaces, the energy split, the draw
order of the instance generator, and rec against the full target."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from gaugebook.sensing.measurements import make_instance
from gaugebook.tails.tail_problem import (
    TailBatch,
    make_tail_instance,
    orthogonal_tail,
    split_errors,
)

F64 = torch.float64


def fro(x):
    return torch.linalg.matrix_norm(x).item()


@pytest.mark.parametrize("tau", [0.05, 0.35])
def test_tail_is_orthogonal_to_both_spaces_to_round_off(tau):
    inst = make_tail_instance(42, tau, n=12, r=3, dtype=F64)
    E, Q_U, Q_V = inst.E_perp, inst.Q_U, inst.Q_V
    assert fro(Q_U.mT @ E) / fro(E) < 1e-13
    assert fro(E @ Q_V) / fro(E) < 1e-13
    # the head's spaces are those bases, so ⟨X_3, E_⊥⟩ = 0
    head = inst.head
    assert fro(head - Q_U @ (Q_U.mT @ head)) / fro(head) < 1e-13
    assert fro(head - (head @ Q_V) @ Q_V.mT) / fro(head) < 1e-13
    assert abs((head * E).sum().item()) / (fro(head) * fro(E)) < 1e-13


def test_projecting_one_side_only_is_not_orthogonal():
    # negative control: P_U^⊥ G alone keeps a component in the row space of the head
    inst = make_tail_instance(42, 0.2, n=12, r=3, dtype=F64)
    G = torch.randn(12, 12, generator=torch.Generator().manual_seed(0), dtype=F64)
    left_only = orthogonal_tail(G, inst.Q_U, torch.zeros(12, 0, dtype=F64), 1.0)
    assert fro(inst.Q_U.mT @ left_only) < 1e-13
    assert fro(left_only @ inst.Q_V) > 0.1


@pytest.mark.parametrize("tau", [0.0, 0.1, 0.5, 1.0])
def test_energy_split(tau):
    inst = make_tail_instance(123, tau, n=10, r=2, dtype=F64)
    head_norm = fro(inst.head)
    assert fro(tau * inst.E_perp) == pytest.approx(tau * head_norm, rel=1e-13)
    assert fro(inst.E_perp) == pytest.approx(head_norm, rel=1e-13)
    # ⟨X_3, E_⊥⟩ = 0, so ‖X‖_F = ‖X_3‖_F
    assert fro(inst.X_star) == pytest.approx(head_norm, rel=1e-13)
    mix = math.sqrt(1 - tau**2) * inst.head + tau * inst.E_perp
    assert_close(inst.X_star, mix, rtol=0, atol=1e-14)


def test_generator_order_head_then_tail_then_measurements():
    n, r, m, num_val = 8, 2, 30, 5
    inst = make_tail_instance(7, 0.2, n=n, r=r, m=m, num_val=num_val)
    zoo = make_instance(7, n, r, m, num_val=num_val)
    # U*, V* are the zoo's: the head is its X_star (float64 product, cast)
    assert_close(inst.head, zoo.X_star, rtol=1e-6, atol=1e-7)
    # then G (n×n), then A, then A_val, all from the one generator of the seed
    g = torch.Generator().manual_seed(7)
    U_star = torch.randn(n, r, generator=g) / math.sqrt(r)
    V_star = torch.randn(n, r, generator=g) / math.sqrt(r)
    G = torch.randn(n, n, generator=g)
    A = torch.randn(m, n * n, generator=g)
    A_val = torch.randn(num_val, n * n, generator=g)
    assert torch.equal(inst.A, A) and torch.equal(inst.A_val, A_val)
    Q_U, Q_V = torch.linalg.qr(U_star.double()).Q, torch.linalg.qr(V_star.double()).Q
    E = orthogonal_tail(G.double(), Q_U, Q_V, fro(U_star.double() @ V_star.double().T))
    assert_close(inst.E_perp, E.float(), rtol=0, atol=0)
    # negative control: the measurements are not the zoo's (G was drawn before A)
    assert not torch.equal(inst.A, zoo.A)


def test_tau_zero_keeps_the_head_and_every_tau_shares_A():
    inst0 = make_tail_instance(42, 0.0, n=10, r=2)
    zoo = make_instance(42, 10, 2)
    assert torch.equal(inst0.X_star, inst0.head)
    assert_close(inst0.X_star, zoo.X_star, rtol=1e-6, atol=1e-7)
    inst = make_tail_instance(42, 0.35, n=10, r=2)
    assert torch.equal(inst.A, inst0.A) and torch.equal(inst.E_perp, inst0.E_perp)
    assert not torch.equal(inst.X_star, inst0.X_star)
    assert_close(inst.y, inst.A @ inst.X_star.reshape(-1), rtol=0, atol=0)


def test_rec_is_against_the_full_target():
    tau = 0.3
    inst = make_tail_instance(5, tau, n=9, r=2, dtype=F64)
    batch = TailBatch([inst], [0, 0, 0])
    eye = torch.eye(9, dtype=F64)
    head_only = math.sqrt(1 - tau**2) * inst.head
    W = torch.stack([inst.X_star, head_only, inst.head])
    m = batch.metrics(W, eye.expand(3, 9, 9))
    # W = X: nothing to recover; the scaled head alone misses exactly the tail: rec = τ
    assert m["rec"][0].item() < 1e-14
    assert m["rec"][1].item() == pytest.approx(tau, rel=1e-13)
    assert m["head_rec"][1].item() < 1e-14 and m["tail_rec"][1].item() == pytest.approx(1.0)
    # negative control: the unscaled head X_3 is not the target either
    assert m["rec"][2].item() == pytest.approx(
        math.hypot(1 - math.sqrt(1 - tau**2), tau), rel=1e-13)
    assert m["train_loss"][0].item() < 1e-20 and m["train_loss"][1].item() > 1e-3


def test_batch_select_and_metrics_per_instance():
    insts = [make_tail_instance(s, 0.2, n=8, r=2, dtype=F64) for s in (1, 2)]
    batch = TailBatch(insts, [0, 1, 1])
    W = torch.stack([insts[0].X_star, insts[1].X_star, insts[0].X_star])
    eye = torch.eye(8, dtype=F64).expand(3, 8, 8)
    m = batch.metrics(W, eye)
    assert m["rec"][0] < 1e-14 and m["rec"][1] < 1e-14 and m["rec"][2] > 0.5
    sub = batch.select([2])
    assert isinstance(sub, TailBatch)
    assert_close(sub.metrics(W[2:], eye[2:])["tail_rec"], m["tail_rec"][2:])
    e = split_errors(W[2:], insts[1])
    assert_close(e["head_rec"], m["head_rec"][2:])
    assert "tail_rec" in TailBatch.curve_names and "tail_rec" in TailBatch.metric_names


def test_tail_rec_undefined_without_tail():
    inst = make_tail_instance(5, 0.0, n=6, r=2, dtype=F64)
    e = split_errors(inst.X_star, inst)
    assert math.isnan(e["tail_rec"].item()) and e["head_rec"].item() < 1e-14


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.1"])
def test_invalid_tau(bad):
    with pytest.raises(ValueError, match="^Invalid tau"):
        make_tail_instance(0, bad, n=6, r=2)


def test_invalid_rank():
    with pytest.raises(ValueError, match="^Invalid r"):
        make_tail_instance(0, 0.1, n=4, r=4)
