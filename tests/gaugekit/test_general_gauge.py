"""The whole gauge group GL(r) and LoRA's layout in the factor audit, and ScaledGD's theorem.

``L(U Vᵀ)`` cannot see ``(U, V) → (U R, V R⁻ᵀ)`` for any invertible ``R``. The checks run in
float64 on a sensing loss with real autograd gradients, each positive claim with a negative
control that fails for a reason of mathematics: GD under a non-orthogonal ``R``, damped ScaledGD
under ``GL(r)``, absolute damping under a scaling ``R = cQ``, a gradient mapped on the wrong
side.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import BROKEN, EXACT, generator, grads, haar, random_factors, rel, sensing

from gaugekit.audit import (
    GROUPS,
    KEEPS,
    audit_equivariance,
    audit_groups,
    format_group_table,
    registry_factories,
    torch_optim_factories,
)
from gaugekit.cli import main
from gaugekit.gauge import gl_act, random_gl
from gaugekit.optim import GD, ScaledGD

N, M, K = 7, 5, 3
#: ScaledGD as Tong, Ma & Chi write it: no damping at all (not even the relative floor)
UNDAMPED = {"damping": 0.0, "relative_damping": False}


def gl(seed: int, condition_number: float = 4.0) -> torch.Tensor:
    return random_gl(K, generator=generator(seed), condition_number=condition_number)


def step(make, U, V, loss):
    """One step of ``make([U, V])`` from ``(U, V)`` with real autograd gradients: ``(ΔU, ΔV)``."""
    U1, V1 = U.clone().requires_grad_(True), V.clone().requires_grad_(True)
    optimizer = make([U1, V1])
    optimizer.zero_grad()
    loss(U1, V1).backward()
    optimizer.step()
    return (U1 - U).detach(), (V1 - V).detach()


def covariance_gap(make, U, V, loss, R):
    """``max(rel(ΔU', ΔU R), rel(ΔV', ΔV R⁻ᵀ))``: how far the twin's step is from covariant."""
    dU, dV = step(make, U, V, loss)
    UR, VR = gl_act(U, V, R)
    dU_R, dV_R = step(make, UR, VR, loss)
    mapped_U, mapped_V = gl_act(dU, dV, R)
    return max(rel(dU_R, mapped_U), rel(dV_R, mapped_V))


# --------------------------------------------------------------------------------------------
# the gradients and ScaledGD's step
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_gradients_transform_contragrediently(seed):
    """(U, V) → (U R, V R⁻ᵀ) sends G_U → G_U R⁻ᵀ and G_V → G_V R (not G_U R: that is O(r))."""
    loss = sensing(N, M, seed=seed)
    U, V = random_factors(N, M, K, seed=seed)
    R = gl(seed + 10)
    G_U, G_V = grads(loss, U, V)
    G_UR, G_VR = grads(loss, *gl_act(U, V, R))
    assert rel(G_UR, torch.linalg.solve(R, G_U.mT).mT) < EXACT
    assert rel(G_VR, G_V @ R) < EXACT
    assert rel(G_UR, G_U @ R) > BROKEN  # negative: the orthogonal rule is wrong for GL(r)


@pytest.mark.parametrize("sequential", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_scaled_gd_undamped_step_is_gl_covariant(seed, sequential):
    """ScaledGD with λ = 0: G_U R⁻ᵀ · Rᵀ(VᵀV)⁻¹R = G_U (VᵀV)⁻¹ R, and alike for V."""
    loss = sensing(N, M, seed=seed)
    U, V = random_factors(N, M, K, seed=seed)
    R = gl(seed + 20)
    make = lambda p: ScaledGD(p, lr=0.1, sequential=sequential, **UNDAMPED)
    assert covariance_gap(make, U, V, loss, R) < 1e-12
    # negative control: GD's step is G_U R⁻ᵀ, not G_U R, at the same point and R
    assert covariance_gap(lambda p: GD(p, lr=0.1), U, V, loss, R) > 0.1


@pytest.mark.parametrize("seed", range(3))
def test_gd_keeps_the_orthogonal_gauge_but_not_the_general_one(seed):
    loss = sensing(N, M, seed=seed)
    U, V = random_factors(N, M, K, seed=seed)
    make = lambda p: GD(p, lr=0.1)
    assert covariance_gap(make, U, V, loss, haar(K, seed=seed + 30)) < EXACT
    assert covariance_gap(make, U, V, loss, gl(seed + 30)) > 0.1


def test_undamped_scaled_gd_trajectory_keeps_gl_gd_does_not():
    """Over the audit's 10 steps (state and all): ScaledGD λ=0 keeps GL(r), GD keeps O(r) only."""
    scaled = lambda p: ScaledGD(p, lr=1e-2, **UNDAMPED)
    result = audit_equivariance(scaled, group="general")
    assert result.residual < 1e-12 and result.displacement > 1e-2
    gd = lambda p: GD(p, lr=1e-2)
    assert audit_equivariance(gd, group="general").residual > 0.1
    assert audit_equivariance(gd, group="orthogonal").residual < 1e-12


def test_damping_breaks_gl_at_first_order_and_keeps_the_orthogonal_gauge():
    """(V'ᵀV' + λ'I)⁻¹ = Rᵀ(VᵀV + λ'RRᵀ)⁻¹R: off by O(λ) unless RRᵀ ∝ I."""
    def residual(damping, group):
        make = lambda p: ScaledGD(p, lr=1e-2, damping=damping)
        return audit_equivariance(make, group=group).residual

    assert residual(0.1, "general") > 0.1
    assert residual(0.1, "orthogonal") < 1e-12
    ratio = residual(1e-6, "general") / residual(1e-4, "general")
    assert math.isclose(ratio, 1e-2, rel_tol=0.05)  # linear in the damping


def test_relative_damping_keeps_scalings_absolute_damping_does_not():
    """R = 2Q: relative λ scales as 1/c², so λ'RRᵀ = λI (up to the 1e-12 floor); absolute λ
    stays, and λRRᵀ = 4λI ≠ λI."""
    R = 2.0 * haar(K, seed=5)

    def residual(relative):
        make = lambda p: ScaledGD(p, lr=1e-2, damping=0.1, relative_damping=relative)
        return audit_equivariance(make, group="general", Q=R).residual

    assert residual(True) < 1e-9
    assert residual(False) > 0.1


# --------------------------------------------------------------------------------------------
# the audit's arguments and results
# --------------------------------------------------------------------------------------------


def test_general_result_records_the_group_and_the_condition_number():
    make = lambda p: GD(p, lr=1e-2)
    result = audit_equivariance(make, group="general", condition_number=10.0)
    assert (result.group, result.layout) == ("general", "UV")
    assert math.isclose(result.condition_number, 10.0, rel_tol=1e-10)
    assert "[general-linear twin (U R, V R⁻ᵀ), cond(R) = 10]: breaks the gauge" in (
        result.verdict_line())
    default = audit_equivariance(make)
    assert (default.group, default.layout, default.condition_number) == ("orthogonal", "UV", None)
    assert "[" not in default.verdict_line().split(")")[-1]  # the default line is unchanged


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group": "unitary"}, "Invalid group: 'unitary'; expected one of 'orthogonal', 'general'"),
    ({"layout": "BA"}, "Invalid layout: 'BA'; expected one of 'UV', 'AB'"),
    ({"condition_number": 0.5}, "Invalid condition_number: 0.5; expected a finite float >= 1"),
    ({"condition_number": math.nan}, "Invalid condition_number: nan"),
])
def test_invalid_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        audit_equivariance(lambda p: GD(p, lr=1e-2), **kwargs)


def test_gl_invariance_of_the_loss_is_checked():
    """A loss that sees the factors' norms is O(r)- but not GL(r)-invariant: refused."""
    loss = lambda U, V: (U @ V.mT).square().sum() + U.square().sum() + V.square().sum()
    make = lambda p: GD(p, lr=1e-2)
    audit_equivariance(make, loss=loss)
    with pytest.raises(ValueError, match="Invalid loss"):
        audit_equivariance(make, loss=loss, group="general")


# --------------------------------------------------------------------------------------------
# LoRA's layout (A, B), W = B A
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("name", ["gd", "adam", "muon", "shampoo"])
def test_layout_ab_agrees_with_uv_on_the_transposed_problem(name, group):
    """The default audit in layout AB is the UV one with A = Vᵀ, B = U: the same numbers."""
    make = registry_factories([name])[name]
    uv = audit_equivariance(make, group=group)
    ab = audit_equivariance(make, group=group, layout="AB")
    assert ab.layout == "AB" and ab.gauge_verdict.outcome == uv.gauge_verdict.outcome
    for field in ("residual_U", "residual_V", "noise_residual", "displacement", "loss_end"):
        a, b = getattr(ab, field), getattr(uv, field)
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-13), (field, a, b)


def test_layout_ab_with_a_given_pair_and_loss():
    """Given (A₀, B₀) = (V₀ᵀ, U₀), a loss of (A, B) and R: the UV audit's numbers."""
    loss = sensing(N, M, seed=3)
    U0, V0 = random_factors(N, M, K, seed=3)
    R = gl(3)
    make = lambda p: torch.optim.Adam(p, lr=1e-2)
    uv = audit_equivariance(make, U=U0, V=V0, Q=R, loss=loss, group="general")
    ab = audit_equivariance(make, U=V0.T, V=U0, Q=R, loss=lambda A, B: loss(B, A.T),
                            group="general", layout="AB")
    assert math.isclose(ab.residual, uv.residual, rel_tol=1e-9)
    assert math.isclose(ab.noise_residual, uv.noise_residual, rel_tol=1e-6)


def test_layout_ab_twin_is_r_inverse_a_and_b_r():
    """The optimizer of the twin run is handed (R⁻¹ A₀, B₀ R), in that order."""
    seen = []

    def spy(params):
        seen.append([p.detach().clone() for p in params])
        return torch.optim.SGD(params, lr=1e-2)

    U0, V0 = random_factors(N, M, K, seed=4)
    A0, B0 = V0.T.contiguous(), U0
    R = gl(4)
    audit_equivariance(spy, U=A0, V=B0, Q=R, group="general", layout="AB", noise_scale=None)
    (A_plain, B_plain), (A_twin, B_twin) = seen
    assert rel(A_plain, A0) == 0 and rel(B_plain, B0) == 0
    assert rel(A_twin, torch.linalg.solve(R, A0)) < EXACT and rel(B_twin, B0 @ R) < EXACT
    assert rel((B_twin @ A_twin), B0 @ A0) < EXACT


# --------------------------------------------------------------------------------------------
# verdicts under both groups, the table, the command line
# --------------------------------------------------------------------------------------------


def _outcomes(rows_by_group):
    return {g: {r.name: r.result.gauge_verdict.outcome == KEEPS for r in rows}
            for g, rows in rows_by_group.items()}


def test_zoo_verdicts_under_both_groups():
    factories = registry_factories(["gd", "momentum", "scalar_adam", "muon", "shampoo", "adam"])
    factories["scaled_gd λ=0"] = registry_factories(["scaled_gd"], **UNDAMPED)["scaled_gd"]
    rows = audit_groups(factories)
    keeps = _outcomes(rows)
    for name in ("gd", "momentum", "scalar_adam", "muon", "shampoo"):
        assert keeps["orthogonal"][name] and not keeps["general"][name], name
    assert keeps["orthogonal"]["scaled_gd λ=0"] and keeps["general"]["scaled_gd λ=0"]
    assert not keeps["orthogonal"]["adam"] and not keeps["general"]["adam"]
    table = format_group_table(rows)
    assert table.splitlines()[0].split() == ["optimizer", "O(r)", "residual", "GL(r)",
                                             "residual"]
    assert "cond(R) = 4" in table
    assert "scaled_gd λ=0  keeps" in table


def test_torch_verdicts_under_both_groups():
    factories = {k: v for k, v in torch_optim_factories().items() if k in ("SGD", "Adam")}
    keeps = _outcomes(audit_groups(factories))
    assert keeps == {"orthogonal": {"SGD": True, "Adam": False},
                     "general": {"SGD": False, "Adam": False}}


def test_audit_groups_refuses_an_unknown_group():
    with pytest.raises(ValueError, match="Invalid groups: 'unitary'"):
        audit_groups({"gd": lambda p: GD(p)}, groups=("unitary",))


def test_cli_audits_the_general_group_in_either_layout(capsys):
    assert main(["audit", "gd", "--group", "general", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "a random R in GL(3) with cond(R) = 4" in out
    assert "[general-linear twin (U R, V R⁻ᵀ), cond(R) = 4]: breaks the gauge" in out
    assert main(["audit", "torch.optim.SGD", "lr=1e-2", "--layout", "AB", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "LoRA's A 3x5, B 7x3" in out and "[orthogonal twin (Qᵀ A, B Q)]: keeps the gauge" in out
    assert main(["audit", "gd", "--group", "general", "--condition-number", "0.5"]) == 2
    assert "Invalid --condition-number: 0.5" in capsys.readouterr().err
