"""FlowAdam: the dial's endpoints, the flow path against an independent reference, the gauge
audit with the flow firing, groups, closures, state, stacked runs, validation and fallbacks."""

from __future__ import annotations

import copy
import importlib.util
import math
import warnings

import pytest
import torch
from helpers import BROKEN, generator, random_factors, sensing
from torch import Tensor
from torch.testing import assert_close
from zoo_support import NUM_RUNS, leaves, stacked_factors, stacked_sensing

import gaugekit.optim.flow_adam as flow_adam_module
import gaugekit.optim.flow_ode as flow_ode_module
from gaugekit.audit.factors import audit_equivariance
from gaugekit.optim import Adam, SharedScaleAdam, get_spec
from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS, FlowAdam

DTYPE = torch.float64
#: the paper's trigger settings (experiments/restoration_probe.py)
PAPER_TRIGGERS = {"flow_plateau": 0.9, "flow_stiffness": 0.1, "flow_time_scale": 0.5}
#: a flow step at every step after the warm-up (the stiffness test fires whenever c_t > 0)
ALWAYS = {"flow_stiffness": 0.0}
#: multi-stage flow methods come from the optional package torchdiffeq
needs_torchdiffeq = pytest.mark.skipif(
    importlib.util.find_spec("torchdiffeq") is None, reason="needs the optional torchdiffeq"
)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _problem():
    """A float64 sensing loss on 7×5 matrices and factors of width 3."""
    loss = sensing(n=7, m=5, r=2, num_measurements=40, seed=3)
    U0, V0 = random_factors(7, 5, 3, seed=4)
    return loss, U0, V0


def _train(make, loss, U0, V0, num_steps, closure=False):
    """``num_steps`` of zero_grad / backward / step (or step(closure)) from ``(U0, V0)``."""
    U, V = leaves(U0, V0)
    opt = make([U, V])

    def evaluate():
        with torch.enable_grad():
            opt.zero_grad()
            value = loss(U, V)
            value.backward()
        return value

    for _ in range(num_steps):
        if closure:
            opt.step(evaluate)
        else:
            evaluate()
            opt.step()
    return U.detach(), V.detach(), opt


def _gap(a: list[Tensor], b: list[Tensor]) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))


def reference_flow_adam(
    groups, grad_fn, num_steps, *, betas=(0.9, 0.999), eps=1e-8, power=0.0, scalar="rms",
    time_scale=0.5, plateau=0.9, stiffness=0.1, clip_mode="globalnorm", clip=10.0, blend=0.5,
    cap=5.0, warmup=10, stat_beta=0.9, prototype_bookkeeping=False,
):
    """FlowAdam (Euler) written out independently: flattened norms, Python branches.

    ``groups``: list of ``(list of tensors, lr)``. ``prototype_bookkeeping=True`` freezes the
    moments and the step count on flow steps, as the paper's prototype did (negative control).
    Returns the final tensors (flat list) and the number of flow steps.
    """
    thetas = [t.clone() for ts, _ in groups for t in ts]
    lrs = [lr for ts, lr in groups for _ in ts]
    m = [torch.zeros_like(t) for t in thetas]
    v = [torch.zeros_like(t) for t in thetas]
    b1, b2 = betas
    k = 0
    prev = torch.zeros(sum(t.numel() for t in thetas), dtype=DTYPE)
    avg_n = avg_c = None
    flows = 0
    for t in range(num_steps):
        gs = grad_fn(thetas)
        flat = torch.cat([g.reshape(-1) for g in gs])
        n, c = flat.norm().item(), (flat - prev).norm().item()
        prev = flat
        avg_n = n if avg_n is None else stat_beta * avg_n + (1 - stat_beta) * n
        avg_c = c if avg_c is None else stat_beta * avg_c + (1 - stat_beta) * c
        fire = t > warmup and (n < plateau * avg_n or c > stiffness * avg_c)
        if not (fire and prototype_bookkeeping):
            k += 1
            m = [b1 * mi + (1 - b1) * g for mi, g in zip(m, gs, strict=True)]
            v = [b2 * vi + (1 - b2) * g * g for vi, g in zip(v, gs, strict=True)]
        if fire:
            flows += 1
            if clip_mode == "globalnorm":
                clipped = [g * min(1.0, clip / n) for g in gs]
            else:
                clipped = [g.clamp(-clip, clip) for g in gs]
            for i, cg in enumerate(clipped):
                thetas[i] = thetas[i] - lrs[i] * time_scale * cg
                u = time_scale * cg
                if u.norm() > cap * m[i].norm():
                    u = u * (cap * m[i].norm() / u.norm())
                m[i] = (1 - blend) * m[i] + blend * u
            continue
        v_hat = [vi / (1 - b2**k) for vi in v]
        if scalar == "rms":
            s_bar = torch.cat([x.reshape(-1) for x in v_hat]).mean().sqrt()
        else:
            s_all = torch.cat([x.reshape(-1) for x in v_hat]).sqrt()
            s_bar = s_all.clamp_min(1e-30).log().mean().exp()
        for i in range(len(thetas)):
            denom = v_hat[i].sqrt() ** power * s_bar ** (1 - power) + eps
            thetas[i] = thetas[i] - lrs[i] * (m[i] / (1 - b1**k)) / denom
    return thetas, flows


def _autograd_grads(loss):
    def grad_fn(thetas):
        leaves_ = [t.clone().requires_grad_(True) for t in thetas]
        return list(torch.autograd.grad(loss(*leaves_), leaves_))

    return grad_fn


# --------------------------------------------------------------------------------------------
# the dial
# --------------------------------------------------------------------------------------------


def test_p1_without_flow_equals_torch_adam_and_our_adam():
    loss, U0, V0 = _problem()
    got = _train(lambda p: FlowAdam(p, lr=1e-2, precond_power=1.0, flow=False), loss, U0, V0, 12)
    torch_adam = _train(lambda p: torch.optim.Adam(p, lr=1e-2), loss, U0, V0, 12)
    ours = _train(lambda p: Adam(p, lr=1e-2), loss, U0, V0, 12)
    for want in (torch_adam, ours):
        assert_close(got[0], want[0], atol=1e-13, rtol=1e-11)
        assert_close(got[1], want[1], atol=1e-13, rtol=1e-11)
    # negative control: a dial just below 1 is already visibly not Adam
    near = _train(lambda p: FlowAdam(p, lr=1e-2, precond_power=0.9, flow=False), loss, U0, V0, 12)
    assert _gap(near[:2], torch_adam[:2]) > 1e-4


def test_decoupled_weight_decay_equals_torch_adamw_not_adam_l2():
    loss, U0, V0 = _problem()
    kw = {"lr": 1e-2, "precond_power": 1.0, "flow": False, "weight_decay": 0.3}
    got = _train(lambda p: FlowAdam(p, **kw), loss, U0, V0, 12)
    adamw = _train(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.3), loss, U0, V0, 12)
    assert_close(got[0], adamw[0], atol=1e-13, rtol=1e-11)
    assert_close(got[1], adamw[1], atol=1e-13, rtol=1e-11)
    coupled = _train(lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.3), loss, U0, V0, 12)
    assert _gap(got[:2], coupled[:2]) > 1e-4


def test_p0_rms_equals_shared_scale_adam_over_two_groups():
    loss, U0, V0 = _problem()

    def groups(params):
        return [{"params": [params[0]]}, {"params": [params[1]], "lr": 3e-3}]

    kw = {"lr": 1e-2}
    got = _train(lambda p: FlowAdam(groups(p), precond_power=0.0, flow=False, **kw),
                 loss, U0, V0, 12)
    want = _train(lambda p: SharedScaleAdam(groups(p), **kw), loss, U0, V0, 12)
    assert_close(got[0], want[0], atol=1e-13, rtol=1e-11)
    assert_close(got[1], want[1], atol=1e-13, rtol=1e-11)
    # negative controls: the geometric-mean scalar, and a scalar per group, are different rules
    geo = _train(lambda p: FlowAdam(groups(p), precond_power=0.0, precond_scalar="geomean",
                                    flow=False, **kw), loss, U0, V0, 12)
    assert _gap(geo[:2], want[:2]) > 1e-4
    U, V = leaves(U0, V0)
    per_group = [FlowAdam([U], precond_power=0.0, flow=False, lr=1e-2),
                 FlowAdam([V], precond_power=0.0, flow=False, lr=3e-3)]
    for _ in range(12):
        U.grad, V.grad = None, None
        loss(U, V).backward()
        for opt in per_group:
            opt.step()
    assert _gap([U.detach(), V.detach()], want[:2]) > 1e-6


@pytest.mark.parametrize("scalar", ["rms", "geomean"])
def test_dial_matches_the_reference_at_every_p(scalar):
    loss, U0, V0 = _problem()
    for power in (0.0, 0.25, 0.5, 0.75, 1.0):
        got = _train(lambda p, power=power: FlowAdam(p, lr=1e-2, precond_power=power,
                                                     precond_scalar=scalar, flow=False),
                     loss, U0, V0, 10)
        want, _ = reference_flow_adam([([U0, V0], 1e-2)], _autograd_grads(loss), 10,
                                      power=power, scalar=scalar, warmup=10**9)
        assert_close(got[0], want[0], atol=1e-13, rtol=1e-11)
        assert_close(got[1], want[1], atol=1e-13, rtol=1e-11)


def _pow_coefficient(v, *, step, lr, beta1, beta2, eps, power, shared):
    """``−lr / ((1 − β₁ᵗ)(v̂^{p/2} s̄^{1−p} + ε))`` by ``torch.pow`` (``x⁰ = 1``), in float64."""
    v_hat = v.double() / (1 - beta2**step)
    blend = v_hat.pow(power / 2) * torch.as_tensor(shared, dtype=DTYPE).pow(1 - power)
    return -lr / ((1 - beta1**step) * (blend + eps))


# exp/log against pow: each libm rounds them its own way, so the float64 tolerance leaves
# room for a few dozen units of round-off (one CPU measured 0.37 of 1e-13)
@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_dial_coefficient_in_the_log_domain_equals_pow(dtype, rtol):
    """The blend ``exp((p/2) log v + (1−p) log s̄ − …)`` against ``pow``, zeros included."""
    gen = generator(7)
    v = torch.rand(3, 4, 5, generator=gen, dtype=DTYPE).pow(4).mul(1e-6).to(dtype)
    v[:, 0, 0] = 0.0  # a zero second moment: s^p = 0, the coefficient is −lr/((1−β₁ᵗ) ε)
    shared = torch.tensor([2e-4, 0.0, 3e-5], dtype=dtype).view(3, 1, 1)  # s̄ = 0 for run 1
    kw = {"step": 3, "lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    for power in (0.25, 0.5, 0.75):
        got = flow_adam_module.dial_coefficient(v, power=power, shared=shared, **kw)
        assert_close(got.double(), _pow_coefficient(v, power=power, shared=shared, **kw),
                     rtol=rtol, atol=0)
        eps_only = torch.div(-1e-2 / (1 - 0.9**3), torch.tensor(1e-8, dtype=dtype))
        assert (got[:, 0, 0] == eps_only).all()
    # a per-run dial with the exact ends in the stack: x⁰ = 1 (no 0 · log 0 = NaN)
    powers = torch.tensor([0.0, 0.5, 1.0], dtype=dtype).view(3, 1, 1)
    got = flow_adam_module.dial_coefficient(v, power=powers, shared=shared, **kw)
    assert torch.isfinite(got).all()
    assert_close(got.double(), _pow_coefficient(v, power=powers.double(), shared=shared, **kw),
                 rtol=rtol, atol=0)
    # negative control: the blend's exponents swapped is another coefficient
    swapped = _pow_coefficient(v, power=1 - powers.double(), shared=shared, **kw)
    assert not torch.allclose(got.double(), swapped, rtol=1e-3, atol=0)
    # a diverged run stays diverged: NaN in, NaN out
    v_bad = v.clone()
    v_bad[2, 1, 1] = float("nan")
    got = flow_adam_module.dial_coefficient(v_bad, power=0.5, shared=shared, **kw)
    assert got[2, 1, 1].isnan() and torch.isfinite(got[:2]).all()


def test_dial_is_continuous_at_both_ends():
    """One ε, added after the blend: p → 1 tends to Adam and p → 0 to shared-scale Adam."""
    loss, U0, V0 = _problem()

    def run(power):
        return _train(lambda p: FlowAdam(p, lr=1e-2, precond_power=power, flow=False),
                      loss, U0, V0, 10)[:2]

    assert _gap(run(1 - 1e-9), run(1.0)) < 1e-9
    assert _gap(run(1e-9), run(0.0)) < 1e-9
    assert _gap(run(0.5), run(1.0)) > 1e-4 and _gap(run(0.5), run(0.0)) > 1e-4


# --------------------------------------------------------------------------------------------
# the flow path
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [
        {},  # the invariant preset with the paper's triggers
        {"power": 1.0, "scalar": "geomean", "clip_mode": "percoord", "clip": 1.0},  # prototype
        {"power": 0.5, "clip": 0.05, "stiffness": 1.0, "plateau": 0.95, "cap": 0.01},
    ],
    ids=["invariant", "prototype", "mixed"],
)
def test_flow_path_matches_the_independent_reference(settings):
    loss, U0, V0 = _problem()
    names = {"power": "precond_power", "scalar": "precond_scalar", "clip_mode": "flow_clip_mode",
             "clip": "flow_clip", "stiffness": "flow_stiffness", "plateau": "flow_plateau",
             "cap": "flow_velocity_cap"}
    kwargs = {names[k]: v for k, v in settings.items()}
    got_U, got_V, opt = _train(lambda p: FlowAdam(p, lr=2e-2, **kwargs), loss, U0, V0, 40)
    (want_U, want_V), flows = reference_flow_adam(
        [([U0, V0], 2e-2)], _autograd_grads(loss), 40, **settings
    )
    counters = opt.flow_counters()
    assert flows > 0  # the flow fired
    assert int(counters["flow_steps"]) == flows and counters["steps"] == 40
    assert_close(got_U, want_U, atol=1e-12, rtol=1e-10)
    assert_close(got_V, want_V, atol=1e-12, rtol=1e-10)
    # negative control: the prototype's bookkeeping (moments and step frozen on flow steps)
    (frozen_U, _), _ = reference_flow_adam(
        [([U0, V0], 2e-2)], _autograd_grads(loss), 40, prototype_bookkeeping=True, **settings
    )
    assert (frozen_U - want_U).abs().max() > 1e-6


def test_one_euler_flow_step_by_hand():
    """From a known state: θ ← θ − lr·T·clip(g), m ← (1 − γ)m' + γ·cap(T·clip(g)); v, t advance."""
    g = generator(11)
    P = torch.randn(4, 3, generator=g, dtype=DTYPE).requires_grad_(True)
    G1, G2 = (torch.randn(4, 3, generator=g, dtype=DTYPE) * 20 for _ in range(2))
    opt = FlowAdam([P], lr=0.1, flow_warmup=0, flow_clip=1.5, flow_velocity_cap=0.05, **ALWAYS)
    P.grad = G1.clone()
    opt.step()  # warm-up step: a dial step (p = 0)
    state = opt.state[P]
    m1, v1, P1 = state["exp_avg"].clone(), state["exp_avg_sq"].clone(), P.detach().clone()
    P.grad = G2.clone()
    opt.step()  # flow step
    m_prime = 0.9 * m1 + 0.1 * G2
    clipped = G2 * (1.5 / G2.norm())
    u = 0.5 * clipped
    assert u.norm() > 0.05 * m_prime.norm()  # the cap binds
    u = u * (0.05 * m_prime.norm() / u.norm())
    # another order of the same sums on another CPU: 1e-13, not one machine's 1e-14
    assert_close(P.detach(), P1 - 0.1 * 0.5 * clipped, atol=1e-13, rtol=0)
    assert_close(state["exp_avg"], 0.5 * m_prime + 0.5 * u, atol=1e-13, rtol=0)
    assert_close(state["exp_avg_sq"], 0.999 * v1 + 0.001 * G2 * G2, atol=1e-13, rtol=0)
    assert state["step"] == 2 and int(opt.flow_counters()["flow_steps"]) == 1
    # negative control: the dial step from the same state would have gone elsewhere
    dial = P1 - 0.1 * (m_prime / (1 - 0.9**2)) / (
        (0.999 * v1 + 0.001 * G2 * G2).mean().div(1 - 0.999**2).sqrt() + 1e-8)
    assert (dial - P.detach()).abs().max() > 1e-3


def test_warm_up_length_matches_the_prototype():
    """The flow may fire from step ``flow_warmup + 2`` on (the prototype's ``step_count > 10``)."""
    loss, U0, V0 = _problem()
    for steps, expected in ((11, 0), (12, 1)):
        *_, opt = _train(lambda p: FlowAdam(p, lr=1e-2, **ALWAYS), loss, U0, V0, steps)
        assert int(opt.flow_counters()["flow_steps"]) == expected


def test_no_closure_equals_closure():
    loss, U0, V0 = _problem()
    plain = _train(lambda p: FlowAdam(p, lr=2e-2), loss, U0, V0, 30)
    with_closure = _train(lambda p: FlowAdam(p, lr=2e-2), loss, U0, V0, 30, closure=True)
    assert int(plain[2].flow_counters()["flow_steps"]) > 0
    assert torch.equal(plain[0], with_closure[0]) and torch.equal(plain[1], with_closure[1])


def test_two_groups_with_different_lrs_follow_the_reference():
    loss, U0, V0 = _problem()

    def make(params):
        return FlowAdam([{"params": [params[0]], "lr": 2e-2},
                         {"params": [params[1]], "lr": 5e-3, "precond_power": 0.0}])

    got_U, got_V, opt = _train(make, loss, U0, V0, 30)
    (want_U, want_V), flows = reference_flow_adam(
        [([U0], 2e-2), ([V0], 5e-3)], _autograd_grads(loss), 30
    )
    assert flows > 0 and int(opt.flow_counters()["flow_steps"]) == flows
    assert_close(got_U, want_U, atol=1e-12, rtol=1e-10)
    assert_close(got_V, want_V, atol=1e-12, rtol=1e-10)
    # negative control: both groups at the first group's lr
    (same_U, _), _ = reference_flow_adam([([U0, V0], 2e-2)], _autograd_grads(loss), 30)
    assert (same_U - want_U).abs().max() > 1e-6


def test_group_hyperparameters_differ_per_group_but_flow_options_do_not():
    U, V = leaves(*random_factors(5, 4, 2, seed=0))
    FlowAdam([{"params": [U], "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1,
               "precond_power": 0.5}, {"params": [V]}])
    for key, value in (("flow_clip", 1.0), ("precond_scalar", "geomean"), ("flow", False),
                       ("flow_warmup", 3), ("batch_dims", 0 + 1)):
        with pytest.raises(ValueError, match=f"^Invalid {key}: .*optimizer-wide"):
            FlowAdam([{"params": [U]}, {"params": [V], key: value}])


# --------------------------------------------------------------------------------------------
# the gauge
# --------------------------------------------------------------------------------------------


def _audit(**kwargs):
    """Audit FlowAdam over 25 steps; also return each run's number of flow steps."""
    made: list[FlowAdam] = []

    def factory(params):
        made.append(FlowAdam(params, lr=1e-2, **kwargs))
        return made[-1]

    # noise_scale=None: only the plain and the rotated run, whose flow steps are counted
    result = audit_equivariance(factory, num_steps=25, generator=generator(0), noise_scale=None)
    return result, [int(opt.flow_counters()["flow_steps"]) for opt in made]


def test_invariant_preset_passes_the_audit_with_the_flow_firing():
    result, flows = _audit(**FLOW_ADAM_PRESETS["invariant"])
    assert result.equivariant, result
    assert result.residual < 1e-12
    assert len(flows) == 2 and min(flows) > 0  # the flow path fired in both runs


@pytest.mark.parametrize(
    "breaker",
    [{"precond_scalar": "geomean"}, {"flow_clip_mode": "percoord", "flow_clip": 0.05},
     {"precond_power": 0.5}],
    ids=["geomean", "percoord", "p=0.5"],
)
def test_each_non_invariant_choice_alone_fails_the_audit(breaker):
    result, flows = _audit(**{**FLOW_ADAM_PRESETS["invariant"], **breaker})
    assert not result.equivariant and result.residual > BROKEN, result
    assert min(flows) > 0


def test_percoord_breaks_the_gauge_only_through_flow_steps():
    """Per-coordinate clipping with the flow never firing is the (equivariant) dial alone."""
    result, flows = _audit(**{**FLOW_ADAM_PRESETS["invariant"], "flow_clip_mode": "percoord",
                              "flow_clip": 0.05, "flow_plateau": 0.0, "flow_stiffness": 1e9})
    assert flows == [0, 0] and result.equivariant


def test_registry_entries():
    invariant, prototype = get_spec("flow_adam"), get_spec("flow_adam_prototype")
    assert invariant.cls is FlowAdam and prototype.cls is FlowAdam
    assert invariant.equivariant and not prototype.equivariant
    for spec, preset in ((invariant, "invariant"), (prototype, "prototype")):
        assert {k: spec.defaults[k] for k in FLOW_ADAM_PRESETS[preset]} == FLOW_ADAM_PRESETS[preset]
    U, V = leaves(*random_factors(5, 4, 2, seed=0))
    opt = FlowAdam.from_preset([U, V], "prototype", lr=3e-3)
    assert opt.defaults["flow_clip_mode"] == "percoord" and opt.defaults["lr"] == 3e-3
    with pytest.raises(ValueError, match="^Invalid preset: 'paper'"):
        FlowAdam.from_preset([U, V], "paper")


# --------------------------------------------------------------------------------------------
# state, counters, host synchronisation
# --------------------------------------------------------------------------------------------


def test_state_dict_round_trip_mid_trajectory():
    loss, U0, V0 = _problem()
    U, V, opt = _train(lambda p: FlowAdam(p, lr=2e-2), loss, U0, V0, 15)
    assert int(opt.flow_counters()["flow_steps"]) > 0  # saved after the flow has fired
    saved = copy.deepcopy(opt.state_dict())

    def resume(state_dict):
        U1, V1 = leaves(U, V)
        fresh = FlowAdam([U1, V1], lr=2e-2)
        if state_dict is not None:
            fresh.load_state_dict(state_dict)
        for _ in range(10):
            fresh.zero_grad()
            loss(U1, V1).backward()
            fresh.step()
        return [U1.detach(), V1.detach()], fresh

    resumed, opt_resumed = resume(saved)
    straight_U, straight_V, opt_straight = _train(lambda p: FlowAdam(p, lr=2e-2), loss, U0, V0, 25)
    assert torch.equal(resumed[0], straight_U) and torch.equal(resumed[1], straight_V)
    assert_close(opt_resumed.state_dict()["state"], opt_straight.state_dict()["state"],
                 atol=0, rtol=0)
    # the loaded optimizer owns its flow state: stepping it left the saved dict untouched
    assert saved["state"]["flow"]["step"] == 15 and opt_resumed.state["flow"]["step"] == 25
    assert saved["state"]["flow"]["flow_steps"] is not opt_resumed.state["flow"]["flow_steps"]
    # negative control: a fresh optimizer does not continue the trajectory
    fresh, _ = resume(None)
    assert _gap(fresh, [straight_U, straight_V]) > 1e-8


def test_counters_are_bounded_tensors_and_ints():
    loss, U0, V0 = _problem()
    *_, opt = _train(lambda p: FlowAdam(p, lr=2e-2), loss, U0, V0, 40)
    flow = opt.state["flow"]
    assert all(isinstance(v, (int, Tensor)) and not isinstance(v, bool) for v in flow.values())
    assert all(v.numel() == 1 for v in flow.values() if isinstance(v, Tensor))
    counters = opt.flow_counters()
    assert counters["steps"] == 40
    rate = counters["trigger_rate"].item()
    assert rate == int(counters["flow_steps"]) / 40 and 0 < rate < 1
    assert int(counters["plateau_triggers"] + counters["stiff_triggers"]) >= int(
        counters["flow_steps"])


class _HostSync(RuntimeError):
    pass


@pytest.fixture
def forbid_host_sync(monkeypatch):
    """A switch that makes every tensor → Python conversion raise (``.item()``, ``bool``, …)."""

    def refuse(*args, **kwargs):
        raise _HostSync("host synchronisation")

    def forbid():
        for name in ("item", "tolist", "__bool__", "__float__", "__int__", "__index__"):
            monkeypatch.setattr(torch.Tensor, name, refuse)

    return forbid


@pytest.mark.parametrize("flow", [False, True], ids=["flow-off", "euler-flow-on"])
def test_hot_path_never_synchronises(flow, forbid_host_sync, monkeypatch):
    """Off the CPU (simulated here: host reads declared not free) no step reads a value, with
    the non-finite check off (``nonfinite="propagate"``; the default reads one total)."""
    loss, U0, V0 = _problem()
    U, V = leaves(U0, V0)
    opt = FlowAdam([U, V], lr=2e-2, flow=flow, nonfinite="propagate", **ALWAYS)
    monkeypatch.setattr(flow_adam_module, "_host_reads_are_free", lambda device: False)
    forbid_host_sync()
    for _ in range(15):
        opt.zero_grad()
        loss(U, V).backward()
        opt.step()
    flows = opt.flow_counters()["flow_steps"]
    monkeypatch.undo()  # conversions allowed again, to read the result
    assert int(flows) == (4 if flow else 0)
    assert torch.isfinite(U).all()


def test_euler_step_on_the_cpu_reads_its_trigger_and_skips_zero_terms(forbid_host_sync):
    """On the CPU the Euler step reads the trigger (free there) to skip the terms that every
    run weights by 0; the trajectory is the one that computes them (an exact zero each)."""
    loss, U0, V0 = _problem()
    with pytest.raises(_HostSync):
        _train(lambda p: (FlowAdam(p, lr=2e-2, **ALWAYS), forbid_host_sync())[0],
               loss, U0, V0, 13)


def test_skipped_zero_terms_leave_the_trajectory_unchanged(monkeypatch):
    """Skipping (host reads free) and computing the zero-weight terms give the same bits."""

    def with_reads(free, train):
        monkeypatch.setattr(flow_adam_module, "_host_reads_are_free", lambda device: free)
        return train()

    lrs = torch.tensor([3e-2, 2e-2, 1e-2], dtype=DTYPE)
    stacked = lambda: _stacked_vs_loop(25, lr=lrs, **MIXED)  # noqa: E731
    skipped, computed = with_reads(True, stacked), with_reads(False, stacked)
    assert len(set(skipped[3])) > 1  # the runs took different paths
    for a, b in zip(skipped[0] + skipped[1], computed[0] + computed[1], strict=True):
        assert torch.equal(a, b)
    loss, U0, V0 = _problem()
    for kw in ({}, {"flow_clip_mode": "percoord", "flow_clip": 1e-3, "precond_power": 0.5}):
        single = lambda kw=kw: _train(  # noqa: E731
            lambda p: FlowAdam(p, lr=2e-2, **kw), loss, U0, V0, 30)
        a, b = with_reads(True, single), with_reads(False, single)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@needs_torchdiffeq
def test_multi_stage_flow_does_synchronise(forbid_host_sync):
    """Negative control of the fixture: the multi-stage path reads its trigger on the host."""
    loss, U0, V0 = _problem()

    def make(params):
        opt = FlowAdam(params, lr=2e-2, flow_method="midpoint", **ALWAYS)
        forbid_host_sync()
        return opt

    with pytest.raises(_HostSync):
        _train(make, loss, U0, V0, 13, closure=True)


# --------------------------------------------------------------------------------------------
# multi-stage integrators and their failures
# --------------------------------------------------------------------------------------------


@needs_torchdiffeq
def test_midpoint_flow_step_by_hand_and_its_evaluation_count():
    loss, U0, V0 = _problem()
    kw = {"lr": 2e-2, "flow_warmup": 0, **ALWAYS}
    U, V = leaves(U0, V0)
    opt = FlowAdam([U, V], flow_method="midpoint", **kw)
    grad_fn = _autograd_grads(loss)

    def closure():
        with torch.enable_grad():
            opt.zero_grad()
            value = loss(U, V)
            value.backward()
        return value

    opt.step(closure)  # a dial step
    start = [U.detach().clone(), V.detach().clone()]
    opt.step(closure)  # a midpoint flow step

    def field(thetas):
        gs = grad_fn(thetas)
        scale = min(1.0, 10.0 / torch.cat([g.reshape(-1) for g in gs]).norm().item())
        return [-2e-2 * scale * g for g in gs]

    half = [x + 0.25 * f for x, f in zip(start, field(start), strict=True)]
    want = [x + 0.5 * f for x, f in zip(start, field(half), strict=True)]
    assert_close(U.detach(), want[0], atol=1e-14, rtol=0)
    assert_close(V.detach(), want[1], atol=1e-14, rtol=0)
    counters = opt.flow_counters()
    assert int(counters["flow_steps"]) == 1 and counters["extra_grad_evals"] == 1
    # negative control: the Euler step from the same point is elsewhere
    euler = [x + 0.5 * f for x, f in zip(start, field(start), strict=True)]
    assert _gap(euler, want) > 1e-8


@needs_torchdiffeq
def test_rk4_counts_three_extra_gradient_evaluations_per_flow_step():
    loss, U0, V0 = _problem()
    *_, opt = _train(lambda p: FlowAdam(p, lr=2e-2, flow_method="rk4", **ALWAYS),
                     loss, U0, V0, 15, closure=True)
    counters = opt.flow_counters()
    assert int(counters["flow_steps"]) == 4 and counters["extra_grad_evals"] == 3 * 4


@needs_torchdiffeq
def test_multi_stage_without_closure_names_the_option():
    loss, U0, V0 = _problem()
    U, V = leaves(U0, V0)
    opt = FlowAdam([U, V], flow_method="dopri5")
    loss(U, V).backward()
    with pytest.raises(RuntimeError, match=r"flow_method='dopri5'.*closure"):
        opt.step()


def test_missing_torchdiffeq_is_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torchdiffeq" else real(name, *a))
    U, V = leaves(*random_factors(5, 4, 2, seed=0))
    with pytest.raises(ImportError, match=r"flow_method='rk4'.*torchdiffeq"):
        FlowAdam([U, V], flow_method="rk4")
    FlowAdam([U, V], flow_method="euler")  # Euler needs nothing


def _fallback_run(closure_factory):
    """Flow forced at step 4 (the first eligible) with a failing integration; a flow-free twin."""
    loss, U0, V0 = _problem()
    kw = {"lr": 2e-2, "flow_warmup": 2}
    U, V = leaves(U0, V0)
    opt = FlowAdam([U, V], flow_method="midpoint", **kw, **ALWAYS)
    U2, V2 = leaves(U0, V0)
    twin = FlowAdam([U2, V2], flow=False, **kw)
    for step in range(1, 5):
        closure = closure_factory(opt, U, V, loss, failing=step == 4)
        twin.zero_grad()
        loss(U2, V2).backward()
        twin.step()
        if step < 4:
            opt.step(closure)
            continue
        with pytest.warns(RuntimeWarning, match=r"flow integration \(midpoint\) failed at step 4"):
            opt.step(closure)
    return opt, twin, (U, V), (U2, V2)


def _closure(opt, U, V, loss, failing):
    calls = 0

    def closure():
        nonlocal calls
        calls += 1
        with torch.enable_grad():
            opt.zero_grad()
            value = loss(U, V)
            value.backward()
        if failing and calls > 1:  # the stage evaluations of the failing step see NaN gradients
            U.grad.fill_(math.nan)
        return value

    return closure


def _assert_no_state_lost(opt, twin, params, twin_params):
    for p, q in zip(params, twin_params, strict=True):
        assert_close(p.detach(), q.detach(), atol=1e-15, rtol=0)
        for key in ("exp_avg", "exp_avg_sq"):
            assert_close(opt.state[p][key], twin.state[q][key], atol=1e-15, rtol=0)
        assert opt.state[p]["step"] == twin.state[q]["step"] == 4
    counters = opt.flow_counters()
    assert counters["failures"] == 1 and int(counters["flow_steps"]) == 0
    assert counters["steps"] == 4


@needs_torchdiffeq
def test_non_finite_integration_falls_back_and_loses_no_state():
    opt, twin, params, twin_params = _fallback_run(_closure)
    _assert_no_state_lost(opt, twin, params, twin_params)
    assert opt.flow_counters()["extra_grad_evals"] == 1


@needs_torchdiffeq
def test_raising_integrator_falls_back_and_loses_no_state(monkeypatch):
    def broken_odeint():
        def odeint(*args, **kwargs):
            raise RuntimeError("solver exploded")

        return odeint

    monkeypatch.setattr(flow_ode_module, "_odeint", broken_odeint)
    opt, twin, params, twin_params = _fallback_run(_closure)
    _assert_no_state_lost(opt, twin, params, twin_params)


@needs_torchdiffeq
def test_fallback_is_followed_by_normal_steps():
    opt, _, (U, V), _ = _fallback_run(_closure)
    loss, *_ = _problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.step(_closure(opt, U, V, loss, failing=False))
    assert int(opt.flow_counters()["flow_steps"]) == 3 and torch.isfinite(U).all()


# --------------------------------------------------------------------------------------------
# stacked runs
# --------------------------------------------------------------------------------------------

#: trigger settings under which the three stacked runs take different paths
MIXED = {"flow_stiffness": 1.0, "flow_plateau": 0.97, "flow_warmup": 3}


def _stacked_vs_loop(num_steps, **kwargs):
    problem, (U0, V0) = stacked_sensing(seed=0), stacked_factors(seed=1)
    params = leaves(U0, V0)
    per_run = {k: v for k, v in kwargs.items() if isinstance(v, Tensor)}
    opt = FlowAdam(params, batch_dims=1, **kwargs)
    for _ in range(num_steps):
        opt.zero_grad()
        problem.loss(*params).backward()
        opt.step()
    loops, loop_flows = [], []
    for b in range(NUM_RUNS):
        single = leaves(U0[b], V0[b])
        run_kw = {**kwargs, **{k: float(v[b]) for k, v in per_run.items()}}
        run_opt = FlowAdam(single, **run_kw)
        for _ in range(num_steps):
            run_opt.zero_grad()
            problem.run(b)(*single).backward()
            run_opt.step()
        loops.append([p.detach() for p in single])
        loop_flows.append(int(run_opt.flow_counters()["flow_steps"]))
    expected = [torch.stack([run[i] for run in loops]) for i in range(2)]
    return [p.detach() for p in params], expected, opt.flow_counters()["flow_steps"], loop_flows


def test_stacked_runs_equal_the_loop_with_per_run_paths():
    lrs = torch.tensor([3e-2, 2e-2, 1e-2], dtype=DTYPE)
    got, want, flows, loop_flows = _stacked_vs_loop(25, lr=lrs, **MIXED)
    assert flows.tolist() == loop_flows
    assert len(set(loop_flows)) > 1 and min(loop_flows) > 0  # the runs took different paths
    for a, b in zip(got, want, strict=True):
        assert_close(a, b, atol=1e-12, rtol=0)
    # negative control: the runs paired with each other's lr
    swapped, *_ = _stacked_vs_loop(25, lr=lrs.flip(0), **MIXED)
    assert (swapped[0][0] - want[0][0]).abs().max() > 1e-6


def test_stacked_runs_with_a_per_run_dial():
    powers = torch.tensor([0.0, 0.5, 1.0], dtype=DTYPE)
    got, want, flows, loop_flows = _stacked_vs_loop(20, lr=2e-2, precond_power=powers, **MIXED)
    assert flows.tolist() == loop_flows
    for a, b in zip(got, want, strict=True):
        assert_close(a, b, atol=1e-12, rtol=0)


def test_multi_stage_refuses_stacked_runs():
    U, V = leaves(*stacked_factors(seed=1))
    with pytest.raises(ValueError, match=r"^Invalid batch_dims: 1; expected 0 with flow_method="):
        FlowAdam([U, V], flow_method="rk4", batch_dims=1)


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ("lr", -1e-3), ("betas", (0.9, 1.0)), ("betas", (0.9,)), ("eps", -1.0),
    ("weight_decay", -0.1), ("precond_power", 1.5), ("precond_power", -0.1),
    ("precond_scalar", "mean"), ("flow", 1), ("flow_method", "rk45"), ("flow_time_scale", 0.0),
    ("flow_plateau", -0.5), ("flow_stiffness", math.nan), ("flow_clip_mode", "norm"),
    ("flow_clip", 0.0), ("flow_blend", 1.5), ("flow_velocity_cap", -1.0), ("flow_warmup", -1),
    ("flow_warmup", 2.5), ("flow_stat_beta", 1.0), ("flow_tol", 0.0), ("batch_dims", -1),
]


@pytest.mark.parametrize(("name", "value"), BAD_ARGUMENTS,
                         ids=[f"{n}={v!r}" for n, v in BAD_ARGUMENTS])
def test_every_invalid_argument_raises_naming_it(name, value):
    U = torch.zeros(3, 2, dtype=DTYPE, requires_grad=True)
    with pytest.raises(ValueError, match=rf"^Invalid {name}(\[\d\])?: .*; expected "):
        FlowAdam([U], **{name: value})
    assert torch.equal(U, torch.zeros(3, 2, dtype=DTYPE))
