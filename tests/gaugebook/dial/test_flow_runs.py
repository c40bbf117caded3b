"""The FlowAdam chapter's experiment: configs, the hand-written FlowAdam, counting, selection."""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import pytest
import torch
from torch.testing import assert_close

from gaugebook.dial import flow_runs as fx
from gaugebook.dial import flow_summary as fn
from gaugebook.present import roundoff, stats
from gaugebook.sensing.measurements import (
    SensingBatch,
    default_num_measurements,
    init_factors,
    loss_and_grads,
    make_instance,
)
from gaugebook.sensing.run_specs import Budget, Problem
from gaugekit.audit import FLOAT64_THRESHOLD
from gaugekit.optim import GD, FlowAdam, SharedScaleAdam

WARMUP = 3
#: float64 values of order one after a few dozen steps: below 1e-12 (about 10⁴ units of
#: round-off, 2⁻⁵³ ≈ 1.1e-16) two of them agree to round-off
FLOOR = 1e-12


def tiny_config(**changes) -> fx.FlowAdamConfig:
    n, r = 6, 1
    config = fx.FlowAdamConfig(
        scale="quick",
        problem=Problem(n=n, r=r, k=4, m=default_num_measurements(n, r), num_val=0,
                        init_scale=0.1),
        budget=Budget(num_steps=60, tol=1e-7, check_every=20),
        seeds=(1, 2), lrs=(1e-2, 3e-2), dial_factors=(1.0, 0.5), stiffness_grid=(1.0,),
        anisotropy_steps=10, audit_powers=(0.0, 0.1, 1.0), audit_steps=15,
    )
    return dataclasses.replace(config, **changes)


def always_fires(params, lr, clip=fx.INVARIANT["flow_clip"]):
    """The invariant preset with κ = 0: the stiffness test fires whenever the gradient moves."""
    return FlowAdam(params, lr=lr, batch_dims=1, **{**ALWAYS_FIRES.hparams, "flow_clip": clip})


ALWAYS_FIRES = fx.Variant("flow_adam", {**fx.INVARIANT, "flow_stiffness": 0.0,
                                        "flow_warmup": WARMUP})


# --------------------------------------------------------------------------------- configs


def test_config_follows_the_scale_switch(monkeypatch):
    monkeypatch.setenv("GAUGEKIT_SCALE", "paper")
    assert fx.flow_adam_config() is fx.PAPER
    assert fx.flow_adam_config("quick") is fx.QUICK
    monkeypatch.setenv("GAUGEKIT_SCALE", "quick")
    assert fx.flow_adam_config().scale == "quick"
    paper = fx.PAPER
    assert (paper.problem.n, paper.problem.r, paper.problem.k) == (40, 3, 40)
    assert paper.problem.m == 2 * 3 * (2 * 40 - 3)
    assert paper.seeds == (42, 123, 456) and paper.budget.num_steps == 30000


def test_config_is_frozen_and_rejects_unknown_scale():
    with pytest.raises(dataclasses.FrozenInstanceError):
        fx.QUICK.seeds = (1,)  # type: ignore[misc]
    with pytest.raises(ValueError, match="Invalid scale"):
        fx.flow_adam_config("huge")


# ------------------------------------------------------------------ FlowAdam written by hand


def _stacked_runs(optimizer_factory, num_steps, lr):
    """Two stacked runs (seeds 1 and 2) on a tiny float64 instance; returns (U, V, optimizer)."""
    n, r, k = 6, 1, 4
    instances = [make_instance(s, n, r, dtype=torch.float64) for s in (1, 2)]
    batch = SensingBatch(instances, [0, 1])
    inits = [init_factors(s, n, k, 0.1, dtype=torch.float64) for s in (1, 2)]
    U = torch.stack([u for u, _ in inits]).requires_grad_()
    V = torch.stack([v for _, v in inits]).requires_grad_()
    opt = optimizer_factory([U, V], lr)
    for _ in range(num_steps):
        _, U.grad, V.grad = batch.loss_and_grads(U.detach(), V.detach())
        opt.step()
    return U.detach(), V.detach(), opt


def _by_hand(params, lr, clip=fx.INVARIANT["flow_clip"]):
    return fx.DialThenClippedGD(params, lr, warmup=WARMUP,
                                time_scale=fx.INVARIANT["flow_time_scale"], clip=clip,
                                batch_dims=1)


@pytest.mark.parametrize("clip", [fx.INVARIANT["flow_clip"], 1e-3], ids=["paper_c", "binding_c"])
def test_dial_then_clipped_gd_equals_flow_adam_when_every_step_fires(clip):
    lr = torch.tensor([3e-2, 1e-1], dtype=torch.float64)
    num_steps = 25
    U_f, V_f, flow = _stacked_runs(partial(always_fires, clip=clip), num_steps, lr)
    U_h, V_h, _ = _stacked_runs(partial(_by_hand, clip=clip), num_steps, lr)
    fired = flow.flow_counters()["flow_steps"]
    assert fired.tolist() == [num_steps - (WARMUP + 1)] * 2  # the premise: it fired every time
    assert_close(U_h, U_f, rtol=1e-12, atol=1e-14)
    assert_close(V_h, V_f, rtol=1e-12, atol=1e-14)


def test_dial_then_clipped_gd_differs_from_the_dial_alone():
    """Negative control: after the warm-up the clipped GD steps are not dial steps."""
    lr = torch.tensor([3e-2, 1e-1], dtype=torch.float64)
    U_d, _, _ = _stacked_runs(
        lambda p, lr: FlowAdam(p, lr=lr, precond_power=0.0, flow=False, batch_dims=1), 25, lr)
    U_h, _, _ = _stacked_runs(_by_hand, 25, lr)
    assert (U_h - U_d).norm() / U_d.norm() > 1e-3
    # ... but it is the dial during the warm-up
    U_d, _, _ = _stacked_runs(
        lambda p, lr: FlowAdam(p, lr=lr, precond_power=0.0, flow=False, batch_dims=1),
        WARMUP + 1, lr)
    U_h, _, _ = _stacked_runs(_by_hand, WARMUP + 1, lr)
    assert_close(U_h, U_d, rtol=0, atol=0)


# ----------------------------------------------------------------------- the dial, one run


def test_dial_endpoints_match_adam_and_shared_scale_adam():
    config = tiny_config()
    lr = 1e-2
    adam_dial = fx.train_on_instance(
        lambda p: FlowAdam(p, lr=lr, precond_power=1.0, flow=False), config, 20)
    adam = fx.train_on_instance(lambda p: torch.optim.Adam(p, lr=lr), config, 20)
    shared_dial = fx.train_on_instance(
        lambda p: FlowAdam(p, lr=lr, precond_power=0.0, flow=False), config, 20)
    shared = fx.train_on_instance(lambda p: SharedScaleAdam(p, lr=lr), config, 20)
    assert roundoff.at_floor(fx.final_factor_gap(adam_dial, adam), FLOOR)
    assert roundoff.at_floor(fx.final_factor_gap(shared_dial, shared), FLOOR)
    assert roundoff.exceeds(fx.final_factor_gap(adam_dial, shared), 1e-3, FLOOR)  # negative


def test_per_entry_log_lr_scales_the_spread_by_p():
    config = tiny_config()
    lr = 1e-2
    run = fx.train_on_instance(lambda p: torch.optim.Adam(p, lr=lr, eps=1e-8), config, 10)
    logs = fx.per_entry_log_lr(run.optimizer, (0.0, 0.5, 1.0))
    # p = 1 against Adam's own per-entry rate lr / (√v̂ + ε), computed from its state
    state = [run.optimizer.state[q] for q in run.params]
    step = int(state[0]["step"])
    reference = torch.cat([
        (lr / ((s["exp_avg_sq"] / (1 - 0.999**step)).sqrt() + 1e-8)).log10().reshape(-1)
        for s in state
    ])
    assert_close(logs[1.0], reference, rtol=1e-12, atol=1e-12)
    spread = {p: v.std().item() for p, v in logs.items()}
    assert roundoff.at_floor(spread[0.0] / spread[1.0], FLOOR)
    assert spread[0.5] / spread[1.0] == pytest.approx(0.5, rel=1e-4)
    assert spread[0.5] / spread[1.0] != pytest.approx(1.0, rel=1e-2)  # negative control


def test_distance_from_init_after_one_gd_step():
    config = tiny_config()
    lr = 1e-2
    run = fx.train_on_instance(lambda p: GD(p, lr=lr), config, 1)
    seed, p = config.seeds[0], config.problem
    inst = make_instance(seed, p.n, p.r, dtype=torch.float64)
    U0, V0 = init_factors(seed, p.n, p.k, p.init_scale, dtype=torch.float64)
    _, G_U, G_V = loss_and_grads(U0, V0, inst.A, inst.y)
    expected = lr * math.sqrt(G_U.square().sum().item() + G_V.square().sum().item())
    assert fx.distance_from_init(run, config) == pytest.approx(expected, rel=1e-10)
    assert fx.distance_from_init(run, config, seed=config.seeds[1]) != pytest.approx(
        expected, rel=1e-3)


# ------------------------------------------------------------------------------ the audit


def test_audit_invariant_preset_with_flow_firing_and_percoord_negative_control():
    config = tiny_config()
    invariant = fx.audit_flow_adam(config, **fx.INVARIANT)
    assert invariant.min_flow_steps > 0
    assert invariant.result.equivariant
    assert roundoff.at_floor(invariant.result.residual, FLOOR)
    percoord = fx.audit_flow_adam(
        config, **{**fx.INVARIANT, "flow_clip_mode": "percoord", "flow_clip": 0.05})
    assert percoord.min_flow_steps > 0
    assert not percoord.result.equivariant
    assert roundoff.exceeds(percoord.result.residual, FLOAT64_THRESHOLD, FLOOR)


def test_dial_gauge_residuals_only_rms_at_p0_is_invariant():
    config = tiny_config()
    rms = fx.dial_gauge_residuals(config, "rms")
    geomean = fx.dial_gauge_residuals(config, "geomean")
    assert len(rms) == len(config.audit_powers)
    assert roundoff.at_floor(rms[0], FLOOR)
    assert roundoff.exceeds(min(rms[1:]), 1e-6, FLOOR)
    assert roundoff.exceeds(geomean[0], 1e-6, FLOOR)


# --------------------------------------------------------------------- stacked training


def test_train_variants_stop_rule_and_counters():
    config = tiny_config(budget=Budget(num_steps=60, tol=1e9, check_every=20))
    variants = {
        "FlowAdam (every step)": ALWAYS_FIRES,
        "GD": fx.Variant("gd", lr_factor=0.5),
    }
    results = fx.train_variants(variants, config, device="cpu")
    flow, gd = results["FlowAdam (every step)"], results["GD"]
    assert flow["seed"].tolist() == [1, 1, 2, 2]
    assert flow["base_lr"].tolist() == [1e-2, 3e-2] * 2
    assert_close(gd["lr"], 0.5 * gd["base_lr"], rtol=0, atol=0)
    # every loss is below tol = 1e9: every run stops at the first check, counters kept there
    assert flow["stop"].tolist() == [20] * 4 and bool(flow["interpolated"].all())
    assert flow["flow_steps"].tolist() == [20 - (WARMUP + 1)] * 4
    assert gd["flow_steps"].tolist() == [0] * 4
    rates = fn.trigger_rates(results, WARMUP)
    assert list(rates) == ["FlowAdam (every step)"]
    assert_close(rates["FlowAdam (every step)"], torch.ones(4, dtype=torch.float64))
    # the stacked GD run equals GD on its instance alone, stopped at the same step
    alone = fx.train_on_instance(lambda p: GD(p, lr=0.5 * 3e-2), config, 20, seed=2,
                                 device="cpu")
    seed2, p = config.seeds[1], config.problem
    X_star = make_instance(seed2, p.n, p.r, dtype=torch.float64).X_star
    U, V = alone.iterates[-1]
    rec = ((U @ V.T - X_star).norm() / X_star.norm()).item()
    assert gd["rec"][3].item() == pytest.approx(rec, rel=1e-10)
    assert gd["rec"][2].item() != pytest.approx(rec, rel=1e-3)  # another lr: another run


def test_train_variants_without_reaching_tol_runs_the_whole_budget():
    config = tiny_config(budget=Budget(num_steps=40, tol=0.0, check_every=20))
    results = fx.train_variants({"FlowAdam (every step)": ALWAYS_FIRES}, config, device="cpu")
    runs = results["FlowAdam (every step)"]
    assert runs["stop"].tolist() == [40] * 4
    assert not bool(runs["interpolated"].any())
    assert runs["flow_steps"].tolist() == [40 - (WARMUP + 1)] * 4


def test_ablation_variants_labels_and_factors():
    config = tiny_config()
    variants = fx.ablation_variants(config)
    assert list(variants)[:2] == ["FlowAdam (invariant)", "FlowAdam (prototype)"]
    assert fx.stiffness_label(1.0) in variants
    assert [variants[fx.dial_label(c)].lr_factor for c in config.dial_factors] == [1.0, 0.5]
    assert variants["GD, lr × T"].lr_factor == fx.INVARIANT["flow_time_scale"]
    U = torch.zeros(2, 3, 2, requires_grad=True)
    v = variants["dial warm-up, then clipped GD"]
    hand = fx.make_variant_optimizer(v.method, [U], lr=torch.ones(2), batch_dims=1, **v.hparams)
    assert isinstance(hand, fx.DialThenClippedGD)


# -------------------------------------------------------- counting and selection rules


def columns(stop=(100, 100), flow=(89, 50), plateau=(10, 5), stiff=(89, 45)):
    return {"stop": torch.tensor(stop), "flow_steps": torch.tensor(flow),
            "plateau_triggers": torch.tensor(plateau), "stiff_triggers": torch.tensor(stiff)}


def test_eligible_steps_and_trigger_rates():
    runs = columns(stop=(100, 5))
    assert fn.eligible_steps(runs, warmup=10).tolist() == [89, 1]  # clamped at 1
    results = {"FlowAdam (a)": columns(), "GD": columns()}
    rates = fn.trigger_rates(results, warmup=10)
    assert list(rates) == ["FlowAdam (a)"]
    assert_close(rates["FlowAdam (a)"], torch.tensor([1.0, 50 / 89], dtype=torch.float64))
    assert fn.trigger_share(columns(), "stiff_triggers") == pytest.approx(134 / 139)
    assert fn.trigger_share(columns(), "plateau_triggers") == pytest.approx(15 / 139)


def runs_table(table):
    """``table``: list of (base_lr, rec, interpolated), one per run."""
    lr, rec, ok = zip(*table, strict=True)
    return {"base_lr": torch.tensor(lr, dtype=torch.float64),
            "rec": torch.tensor(rec, dtype=torch.float64),
            "interpolated": torch.tensor(ok), "train_loss": torch.zeros(len(lr))}


def test_mean_and_interpolated_by_lr():
    runs = runs_table([(0.1, 0.2, True), (0.1, 0.4, False), (0.3, 0.1, True), (0.3, 0.3, True)])
    assert fn.mean_by_lr(runs, (0.1, 0.3)) == pytest.approx([0.3, 0.2])
    assert fn.interpolated_by_lr(runs, (0.1, 0.3)) == [False, True]


def test_select_lr_needs_every_seed_interpolated():
    # the smallest mean rec (lr 0.1) has a seed that did not interpolate: lr 0.3 is chosen
    runs = runs_table([(0.1, 0.05, True), (0.1, 0.05, False), (0.3, 0.2, True), (0.3, 0.4, True),
                       (1.0, 0.5, True), (1.0, 0.5, True)])
    rec, lr = fn.oracle_choice(runs)
    assert (rec, lr) == (pytest.approx(0.3), 0.3)
    none = runs_table([(0.1, 0.05, False), (0.3, 0.2, False)])
    assert all(math.isnan(x) for x in fn.oracle_choice(none))


def test_select_lr_ties_go_to_the_smaller_lr_and_best_selection():
    runs = runs_table([(0.3, 0.2, True), (0.1, 0.2, True)])
    assert fn.oracle_choice(runs) == (pytest.approx(0.2), 0.1)
    results = {
        "a": runs_table([(0.1, 0.4, True), (0.3, 0.3, True)]),
        "b": runs_table([(0.1, 0.25, True), (0.3, 0.1, False)]),
        "c": runs_table([(0.1, 0.01, False)]),
    }
    assert fn.best_selection(results, ["a", "b", "c"]) == (pytest.approx(0.25), 0.1)
    assert all(math.isnan(x) for x in fn.best_selection(results, ["c"]))


def test_lower_rec_count_only_counts_lrs_where_both_interpolated():
    a = runs_table([(0.1, 0.1, True), (0.3, 0.5, True), (1.0, 0.1, False)])
    b = runs_table([(0.1, 0.2, True), (0.3, 0.4, True), (1.0, 0.9, True)])
    assert fn.lower_rec_count(a, b, (0.1, 0.3, 1.0)) == (1, 2)
    assert fn.lower_rec_count(b, a, (0.1, 0.3, 1.0)) == (1, 2)


def test_relative_gap_stays_bounded_where_the_plain_ratio_blows_up():

    assert fn.relative_gap(0.3, 0.3) == 0.0 and fn.relative_gap(0.0, 0.0) == 0.0
    assert fn.relative_gap(1e-9, 0.2) == pytest.approx(1.0)  # |a-b|/|a| would be 2e8
    assert fn.relative_gap(0.2, 0.1) == fn.relative_gap(0.1, 0.2) == pytest.approx(0.5)


# ------------------------------------------------------- the chapter's live demonstrations


def test_anisotropy_demo_ends_and_spread():
    demo = fn.anisotropy_demo(tiny_config())
    n = demo.numbers
    assert roundoff.at_floor(n["gap_adam"], FLOOR) and roundoff.at_floor(n["gap_shared"], FLOOR)
    assert n["anisotropy_steps"] == 10
    assert n["spread_ratio_p100"] == pytest.approx(1.0)
    assert roundoff.at_floor(n["spread_ratio_p0"], FLOOR)
    assert n["spread_ratio_p50"] == pytest.approx(0.5, rel=1e-3)
    assert n["spread_dev"] == max(abs(n[f"spread_ratio_p{round(100 * p)}"] - p)
                                  for p in fn.POWERS_SHOWN) < 1e-3
    assert sorted(demo.data) == sorted(fn.POWERS_SHOWN)
    assert n["spread_adam"] == pytest.approx(demo.data[1.0].std().item())
    lines = demo.text.splitlines()
    assert len(lines) == 3 and lines[0].startswith("relative gap to torch.optim.Adam")
    assert lines[2].split("  ")[-1] == f"1: {n['spread_ratio_p100']:.4f}"


def test_warmup_demo_counts_runs_and_measures_the_warmup():
    hand = {"rec": torch.tensor([0.1, 0.2, 0.3]), "stop": torch.tensor([10, 20, 30])}
    inv = {"rec": torch.tensor([0.1, 0.25, 0.3]), "stop": torch.tensor([10, 21, 30]),
           "clip_bound": torch.tensor([5, 0, 15])}
    config = tiny_config()
    demo = fn.warmup_demo({"dial warm-up, then clipped GD": hand,
                              "FlowAdam (invariant)": inv}, config)
    n = demo.numbers
    assert n["same_stop_runs"] == 2
    assert n["gap_hand"] == pytest.approx(0.05 / 0.25)
    assert n["clip_frac"] == pytest.approx(20 / 61)
    assert n["warmup_steps"] == fx.INVARIANT["flow_warmup"] + 1
    assert n["warmup_move_ratio"] > 0 and math.isfinite(n["warmup_move_ratio"])
    assert demo.text.startswith("same stop step in 2 of 3 runs")
    assert demo.text.endswith(f"{n['warmup_move_ratio']:.0f}") and demo.data is None


def test_text_forms_dash_the_undefined():
    forms = (("a", ".4f"), ("b", ".1e"), ("c", ".0f"), ("d", ".4f"))
    got = fn.text_forms({"a": 0.12345, "b": None, "c": math.nan, "d": math.inf}, forms)
    assert got == {"a_txt": "0.1235", "b_txt": "—", "c_txt": "—", "d_txt": "—"}
    with pytest.raises(KeyError):
        fn.text_forms({}, forms)


# ------------------------------------------------------------------- under the one rule


def run_cols(table):
    """Columns of :func:`flow_runs.run_columns` from ``(seed, base lr, rec, interpolated,
    flow steps)`` per run (every run stops at step 100)."""
    return fx.run_columns([
        (seed, lr, {"steps": 100, "clip_bound": 0, "flow_steps": flow, "plateau_triggers": 0,
                    "stiff_triggers": flow, "train_loss": 0.0 if ok else 1.0, "rec": rec,
                    "effective_rank": 1.0, "lr": lr, "interpolated": ok})
        for seed, lr, rec, ok, flow in table])


BASE = {1: 0.5, 2: 0.6, 3: 0.7}  # seeds far apart: Welch's interval is wide, the paired one not


def variant(config, shift, jitter=0.0, ok=True, flow=0):
    return run_cols([(s, lr, BASE[s] + shift + jitter * s, ok, flow(s) if callable(flow) else flow)
                     for s in config.seeds for lr in config.lrs])


def test_ablation_rule_pairs_the_variants_by_seed():
    config = tiny_config(seeds=(1, 2, 3), dial_factors=(1.0, 0.5, 0.25))
    results = {fx.FLOW_LABEL: variant(config, 0.05, jitter=0.002),
               fx.GD_LABEL: variant(config, -0.3),
               fx.dial_label(1.0): variant(config, 0.10), fx.dial_label(0.5): variant(config, 0.06),
               fx.dial_label(0.25): variant(config, 0.0)}
    numbers, cmps = fn.ablation_rule(results, config)
    assert numbers["best_dial_factor"] == 0.25
    dial_flow = cmps["dial_flow"]  # the best dial against FlowAdam, paired over the three seeds
    assert dial_flow.paired_n == 3 and dial_flow.diff == pytest.approx(-0.05 - 0.004)
    # the seeds' spread hides 0.05 from Welch's interval; the paired one resolves it
    assert dial_flow.words("below", "above") == stats.LEVEL and dial_flow.paired_high < 0
    assert cmps["gd_flow"].sign == -1 and cmps["gd_dial"].sign == -1
    assert cmps["first_flow_dial"].diff == pytest.approx(-0.05 + 0.004)
    # both reached the threshold at both lrs: two matched comparisons, level
    assert (numbers["matched_below"], numbers["matched_level"], numbers["matched_above"]) == (
        0, 2, 0)
    # negative control: a FlowAdam that misses the threshold leaves no lr to match
    results[fx.FLOW_LABEL] = variant(config, 0.05, jitter=0.002, ok=False)
    numbers, cmps = fn.ablation_rule(results, config)
    assert numbers["matched_level"] == 0 and cmps["dial_flow"] is None


def test_trigger_rule_pairs_the_runs_by_seed_and_lr():
    config = tiny_config(seeds=(1, 2, 3), stiffness_grid=(1.0, 2.0))
    eligible = 100 - (fx.INVARIANT["flow_warmup"] + 1)
    results = {fx.FLOW_LABEL: variant(config, 0.0, flow=eligible),
               fx.stiffness_label(1.0): variant(config, 0.0, flow=lambda s: 40 + 10 * s),
               fx.stiffness_label(2.0): variant(config, 0.0, flow=lambda s: 38 + 10 * s + s)}
    cmps = fn.trigger_rule(results, config)
    assert cmps["kappa_1"].paired_n == 6 and cmps["kappa_1"].sign == -1
    assert cmps["kappa_max"].diff == pytest.approx(0.0, abs=1e-12)  # the mean of (s − 2) / 89
    assert cmps["kappa_max"].words("below", "above") == stats.LEVEL
