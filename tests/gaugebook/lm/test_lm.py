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
from gaugebook.present.stats import curve_at


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
    assert adam_gauge > 1e3 * adam_noise
    # Adam-mini's per-head blocks, shared-scale Adam and heavy-ball keep it to float32 round-off
    for method in ("adam_mini", "scalar_adam", "momentum"):
        assert rows[(method, "gauge 777")]["final_logit_drift"] < 1e-5, method


def test_summaries_cover_every_optimizer(quick_records):
    fresh = lms.fresh_rows(quick_records, lms.timing(quick_records))
    assert [r["method"] for r in fresh] == list(lm.METHODS)
    assert sorted(r["rank"] for r in fresh) == list(range(1, len(lm.METHODS) + 1))
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
