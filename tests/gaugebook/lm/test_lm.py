"""The tuned language-model comparison: selection, fresh seeds, twins, the summaries."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gaugebook.engine import twin_trainer as tt
from gaugebook.engine.records import read_records_dir
from gaugebook.engine.sweep import run_sweep
from gaugebook.engine.transformer import TransformerShape, init_params, stack_params
from gaugebook.lm import lm_runs as lm
from gaugebook.lm import lm_summary as lms
from gaugebook.present import roundoff
from gaugebook.present.stats import LEVEL, curve_at


@pytest.fixture(scope="module")
def quick_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm")
    report = run_sweep(lm.EXPERIMENT, out, scale="quick", device="cpu", progress=False)
    assert report.statuses["error"] == 0
    return read_records_dir(out)


# --------------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------------


def test_select_lr_takes_the_lowest_mean_and_says_when_it_is_at_an_edge():
    got = lm.select_lr([1e-3, 1e-2, 1e-1], {1e-3: [3.0, 3.2], 1e-2: [2.0, 2.4],
                                            1e-1: [math.nan, 1.0]})
    assert got["lr"] == 1e-2 and not got["at_edge"]
    assert got["mean_val_loss"]["0.1"] == math.inf  # a diverged seed sinks its rate
    edge = lm.select_lr([1e-3, 1e-2], {1e-3: [1.0], 1e-2: [2.0]})
    assert edge["lr"] == 1e-3 and edge["at_edge"]
    tie = lm.select_lr([1e-3, 1e-2, 1e-1], {1e-3: [2.0], 1e-2: [1.0], 1e-1: [1.0]})
    assert tie["lr"] == 1e-2  # a tie goes to the smaller rate


def test_every_optimizer_has_a_grid_and_hparams():
    for method in lm.METHODS:
        grid = lm.LR_GRIDS[method]
        assert len(grid) >= 5 and list(grid) == sorted(grid)
        hp = lm.method_hparams(method, grid[0], 16)
        assert hp
    with pytest.raises(ValueError, match="Invalid method"):
        lm.method_hparams("sgd", 0.1, 16)
    assert lm.method_hparams("muon_adam", 0.1, 16)["adam"]["lr"] == pytest.approx(0.005)


# --------------------------------------------------------------------------------------------
# the quick sweep end to end
# --------------------------------------------------------------------------------------------


def test_fresh_runs_use_the_rate_the_selection_records_choose(quick_records):
    chosen = {r["method"]: r["lr"] for r in lms.selection_rows(quick_records) if r["chosen"]}
    assert set(chosen) == set(lm.METHODS)
    fresh = [r for r in quick_records if r["config"]["role"] == "fresh"]
    assert fresh and all(r["status"] == "ok" for r in fresh)
    for r in fresh:
        assert r["metrics"]["lr"] == chosen[r["config"]["method"]]


def test_twins_keep_or_break_the_gauge_as_predicted(quick_records):
    rows = {(r["method"], r["twin"]): r for r in lms.twin_rows(quick_records)}
    adam_gauge = rows[("adam", "gauge 777")]["final_logit_drift"]
    adam_noise = rows[("adam", "noise 1e-07")]["final_logit_drift"]
    # float32 drifts of order-one logits over the quick budget: the rotation's own rounding
    # (u = 6e-8) amplified over 20 steps stays below the floor 1e-5
    assert roundoff.exceeds(adam_gauge, 1e3 * adam_noise, 1e-5)
    # Adam-mini's per-head blocks, shared-scale Adam and heavy-ball keep it to float32 round-off
    for method in ("adam_mini", "scalar_adam", "momentum"):
        assert roundoff.at_floor(rows[(method, "gauge 777")]["final_logit_drift"], 1e-5), method


def test_summaries_cover_every_optimizer(quick_records):
    fresh = lms.fresh_rows(quick_records, lms.timing(quick_records))
    assert [r["method"] for r in fresh] == list(lm.METHODS)
    assert sorted(r["rank"] for r in fresh) == list(range(1, len(lm.METHODS) + 1))
    assert all(str(r["rank"]) == r["rank_group"] or "–" in r["rank_group"] for r in fresh)
    assert all(r["seeds"] == len(lm.get_config("quick").fresh_seeds) for r in fresh)
    costs = {r["method"]: r for r in lms.cost_rows(quick_records)}
    assert costs["adam"]["gauge_n"] == 4 and costs["adam"]["noise_n"] == 3
    assert costs["adam"]["seeds_n"] == 3  # two fresh seeds and one selection seed


def test_the_views_draw_every_table_and_figure(quick_records):
    from gaugebook.lm import lm_views as views

    for table in (views.selection_table, views.fresh_table, views.twin_table,
                  views.cost_table):
        html = table(quick_records)
        assert "<table" in html and "Adam-mini" in html
    # the loss figure: one curve per optimizer with fresh runs, on both panels, named in the
    # legend, each ending at the last step of the budget
    methods = [m for m in lm.METHODS if any(
        r["config"]["method"] == m and r["config"].get("role") == "fresh" for r in quick_records)]
    fig = views.loss_figure(quick_records)
    steps, wall = fig.axes
    assert len(steps.get_lines()) == len(wall.get_lines()) == len(methods)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        lm.METHOD_LABELS[m] for m in methods]
    budget = lm.get_config("quick").num_steps
    assert all(line.get_xdata()[-1] == budget for line in steps.get_lines())
    # the drift figure: every curve has points to draw, and a drift is never negative
    curves = views.drift_figure(quick_records).axes[0].get_lines()
    assert curves and all(len(line.get_xdata()) >= 2 for line in curves)
    assert all((line.get_ydata()[np.isfinite(line.get_ydata())] >= 0).all() for line in curves)


# --------------------------------------------------------------------------------------------
# the summaries on records built by hand
# --------------------------------------------------------------------------------------------


def _fresh(method, seed, losses, twin=None, lr=1e-3):
    steps = [0, 100, 200]
    return {"config": {"role": "fresh", "method": method, "init_seed": seed, "num_steps": 200,
                       "twin": twin or {"kind": "base"}},
            "status": "ok", "curves": {"step": steps, "val_loss": losses},
            "metrics": {"val_loss": losses[-1], "lr": lr, "collapsed": False,
                        "selection": {"at_edge": False}}}


def test_equal_wall_time_reads_each_curve_where_it_has_got():
    records = [_fresh("adam", 3, [4.0, 3.0, 2.0]), _fresh("adam", 4, [4.0, 3.0, 2.0]),
               _fresh("momentum", 3, [4.0, 3.5, 3.0]), _fresh("momentum", 4, [4.0, 3.5, 3.0])]
    # Adam takes 2 ms a step, momentum 1 ms: equal time = momentum's 200 steps = Adam's 100
    rows = {r["method"]: r for r in lms.fresh_rows(records, {"adam": 2.0, "momentum": 1.0})}
    assert rows["adam"]["steps_at_equal_time"] == pytest.approx(100.0)
    assert rows["adam"]["val_loss_equal_time"] == pytest.approx(3.0)
    assert rows["momentum"]["val_loss_equal_time"] == pytest.approx(3.0)
    assert rows["adam"]["rank"] == 1 and rows["momentum"]["rank"] == 2
    # half way between checkpoints: linear
    assert curve_at({"step": [0, 100], "v": [2.0, 1.0]}, "v", 25) == pytest.approx(1.75)
    assert curve_at({"step": [0, 100], "v": [2.0, 1.0]}, "v", 150) is None


def _stack(method, rate, created, *, status="ok", role="select"):
    """The two records of one two-model stack of the sweep: one batch time, shared."""
    return [{"config": {"role": role, "method": method, "init_seed": seed,
                        "twin": {"kind": "base"}, "lr": 1e-3},
             "status": status, "created": created,
             "metrics": {"batch_models": 2, "model_steps_per_s": rate, "collapsed": False}}
            for seed in (1, 2)]


def test_seeds_pair_across_optimizers_and_the_words_follow_the_interval():
    records = [_fresh("adam", s, [4, 3, x]) for s, x in ((3, 2.00), (4, 2.10), (5, 1.90))]
    records += [_fresh("muon_adam", s, [4, 3, x]) for s, x in ((3, 1.95), (4, 2.06), (5, 1.84))]
    records += [_fresh("adam_mini", s, [4, 3, x]) for s, x in ((3, 2.05), (4, 2.0), (5, 1.92))]
    assert lms.seed_losses(records, "adam") == {3: 2.0, 4: 2.1, 5: 1.9}
    assert lms.seed_losses(records, "adam", 100) == {3: 3.0, 4: 3.0, 5: 3.0}
    c = lms.compare_methods(records, "muon_adam", "adam")
    # every seed 0.04 to 0.06 lower: the seeds' spread (0.1) hides it from Welch's interval,
    # the pairing does not; the one rule asks both
    assert c.paired_n == 3 and c.paired_high < 0 and c.low < 0 < c.high and c.sign == 0
    level = lms.compare_methods(records, "adam_mini", "adam")
    assert level.sign == 0 and level.words("ahead", "behind") == LEVEL


def test_stacks_are_re_timings_of_identical_work():
    records = [*_stack("adam", 30.0, "t1"), *_stack("adam", 25.0, "t2"),
               *_stack("adam", 27.0, "t3"), *_stack("adam", 40.0, "t4", status="diverged"),
               *_stack("momentum", 36.0, "t1"), *_stack("momentum", 33.0, "t2"),
               *_stack("momentum", 34.0, "t3")]
    records.append({**_stack("adam", 99.0, "t5")[0],
                    "metrics": {"batch_models": 6, "model_steps_per_s": 99.0}})
    secs = lms.stack_seconds(records)
    # one value per stack (not per run), the diverged stack and the six-model one left out
    assert secs["adam"] == pytest.approx([1000 / 30, 1000 / 25, 1000 / 27])
    assert len(secs["momentum"]) == 3
    ratio = lms.step_time_ratio(records, "adam", "momentum")
    assert ratio.ratio > 1 and ratio.above(1.0)
    assert 0 < lms.timing_spread(records) < 0.2
    # fewer than three re-timings a side: no timing claim
    assert lms.step_time_ratio(records, "adam", "scalar_adam") is None


def _curve_run(method, seed, curve):
    steps = [0, 50, 100, 150, 200]
    return {"config": {"role": "fresh", "method": method, "init_seed": seed, "num_steps": 200,
                       "twin": {"kind": "base"}},
            "status": "ok", "curves": {"step": steps, "val_loss": curve},
            "metrics": {"val_loss": curve[-1], "lr": 1e-3, "collapsed": False}}


def test_an_equal_time_claim_that_turns_inside_the_timings_spread_is_not_made():
    fast = [_curve_run("momentum", s, [4, 3.5, 3.0, 2.9, 2.8 + d])
            for s, d in ((3, 0.0), (4, 0.01), (5, -0.01))]
    slow = [_curve_run("adam", s, [4, 3.2, 2.9, 2.7, 2.5 + d])
            for s, d in ((3, 0.0), (4, 0.01), (5, -0.01))]
    ms = {"momentum": 1.0, "adam": 1.25}  # Adam gets 160 steps at equal time
    steady = [*_stack("adam", 40.0, "a"), *_stack("adam", 40.4, "b"), *_stack("adam", 39.6, "c"),
              *_stack("momentum", 50.0, "a"), *_stack("momentum", 50.5, "b"),
              *_stack("momentum", 49.5, "c")]
    records = [*fast, *slow, *steady]
    e = lms.equal_time_comparison(records, "adam", "momentum", ms)
    assert e["steps_a"] == pytest.approx(160) and e["steps_b"] == pytest.approx(200)
    assert e["robust"] and e["words"]("ahead", "behind") == "ahead"
    assert lms.equal_time_words(records, "adam", "momentum", "ahead", "behind",
                                ms_per_step=ms) == "ahead"
    # negative control: re-timings that put Adam's step anywhere from 1.0x to 2.5x
    # momentum's: at 80 steps Adam is behind, so the order turns inside the spread
    noisy = [*_stack("adam", 20.0, "a"), *_stack("adam", 50.0, "b"), *_stack("adam", 30.0, "c"),
             *_stack("momentum", 50.0, "a"), *_stack("momentum", 50.5, "b"),
             *_stack("momentum", 49.5, "c")]
    records = [*fast, *slow, *noisy]
    e = lms.equal_time_comparison(records, "adam", "momentum", ms)
    assert not e["robust"] and e["words"]("ahead", "behind") == LEVEL
    assert e["nominal"].sign == -1  # the single timing alone would have said "ahead"
    assert lms.equal_time_words(records, "adam", "momentum", "ahead", "behind",
                                ms_per_step=ms) == LEVEL
    # without three re-timings a side no timing claim is made
    e = lms.equal_time_comparison([*fast, *slow], "adam", "momentum", ms)
    assert e["ratio"] is None and e["words"]("ahead", "behind") == LEVEL
    rows = {r["method"]: r for r in lms.fresh_rows([*fast, *slow], ms)}
    assert rows["adam"]["rank_equal_time_group"] == "1–2"  # unresolved neighbours: one group
    assert rows["adam"]["rank_group"] == "1" and rows["momentum"]["rank_group"] == "2"


def test_cost_rows_group_the_models_by_what_sets_them_apart():
    base = [_fresh("adam", 3, [4, 3, 2.00]), _fresh("adam", 4, [4, 3, 2.10]),
            _fresh("adam", 5, [4, 3, 1.90])]
    close = [_fresh("adam", 3, [4, 3, 2.001], {"kind": "gauge", "seed": 777})]
    far = [_fresh("adam", 3, [4, 3, 2.15], {"kind": "gauge", "seed": 777}),
           _fresh("adam", 3, [4, 3, 1.85], {"kind": "gauge", "seed": 888})]
    keep = [_fresh("scalar_adam", s, [4, 3, x]) for s, x in ((3, 2.0), (4, 2.1), (5, 1.9))]
    noisy = [_fresh("adam", 3, [4, 3, 2.12], {"kind": "noise", "scale": 1e-7, "seed": 888})]
    quiet = [_fresh("adam", 3, [4, 3, 2.0001], {"kind": "noise", "scale": 1e-7, "seed": 888})]
    for twins, spread in ((close + quiet, 0.001), (far + quiet, 0.30), (far + noisy, 0.30)):
        records = base + twins + keep
        costs = lms.cost_rows(records)
        adam = next(c for c in costs if c["method"] == "adam")
        gauge = [t for t in twins if t["config"]["twin"]["kind"] == "gauge"]
        assert adam["gauge_n"] == 1 + len(gauge) and adam["seeds_n"] == 3
        assert abs(adam["gauge_range"] - spread) < 1e-9
        assert abs(adam["seeds_range"] - 0.20) < 1e-9
        gaps = lms.loss_gaps(records, "adam")
        # like with like: every pair within a group (models: gauge 1 + twins, seeds 3)
        n = adam["gauge_n"]
        assert len(gaps["gauge"]) == n * (n - 1) // 2 and len(gaps["seeds"]) == 3
        assert max(gaps["gauge"]) == pytest.approx(spread)
    cost = lms.gauge_cost(base + far + keep, "adam")
    assert cost.paired_n == 2 and cost.diff == pytest.approx(0.0)  # +0.15 and -0.15
    assert lms.gauge_cost(base + close + keep, "adam") is None  # one twin: no interval


# --------------------------------------------------------------------------------------------
# the one twin trainer's pieces
# --------------------------------------------------------------------------------------------


def test_stack_hparams_makes_per_run_tensors_of_floats_only():
    like = torch.zeros(2, dtype=torch.float64)
    got = tt.stack_hparams([{"lr": 0.1, "betas": (0.9, 0.999), "m": {"lr": 1.0}},
                             {"lr": 0.2, "betas": (0.9, 0.999), "m": {"lr": 2.0}}], like)
    assert torch.equal(got["lr"], torch.tensor([0.1, 0.2], dtype=torch.float64))
    assert got["betas"] == (0.9, 0.999)
    assert torch.equal(got["m"]["lr"], torch.tensor([1.0, 2.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="only float values"):
        tt.stack_hparams([{"side": "left"}, {"side": "right"}], like)


def test_adam_mini_groups_follow_the_heads():
    shape = TransformerShape(d_model=16, num_heads=4, num_layers=1)
    params = stack_params([init_params(shape, generator=torch.Generator().manual_seed(0))])
    groups = {g["blocks"]: g["params"] for g in tt.adam_mini_groups(params, shape.d_head)}
    assert set(groups) == {4, 1, "tensor", "entry"}
    assert any(p is params["layers.0.q"] for p in groups[4])
    assert any(p is params["layers.0.o"] for p in groups[1])
    assert any(p is params["tok_emb"] for p in groups["entry"])
    assert sum(len(ps) for ps in groups.values()) == len(params)


def test_adam_mini_keeps_less_state_than_adam_and_more_than_momentum():
    sizes = lm.state_numel(lm.get_config("quick"), ["adam", "adam_mini", "momentum"])
    params = sizes["momentum"]  # one buffer per parameter entry
    assert sizes["adam"] == 2 * params
    assert params < sizes["adam_mini"] < sizes["adam"]


def test_the_first_step_splits_exactly_the_rules_that_break_the_gauge(quick_records):
    rows = lms.split_rows(quick_records)
    assert {r["method"] for r in rows} == set(lm.METHODS)
    for r in rows:
        assert r["split"] is (not lm.KEEPS_HEAD_GAUGE[r["method"]]), r
    assert lms.paper_step1_ratio(quick_records) > 1
