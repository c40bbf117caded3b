"""The matched-loss protocol on constructed records: the two readings (ours, the paper's), the
selection within a grid, the paper's headline at the level of GD and Adam only, and Table 5
cells over the seeds that reached a level."""

from __future__ import annotations

import math

import pytest

from gaugebook.engine.selection import at_level
from gaugebook.hyperspectral import matched_loss as ml

TH = (1e-2, 1e-3, 1e-4)


def rec(method, lr, seed, crossings, status="ok", rmse=None, erank=None):
    rmse = rmse or [0.1 / (i + 1) for i in range(len(crossings))]
    erank = erank or [3.0 + i for i in range(len(crossings))]
    at = [{"threshold": TH[i], "step": s, "train_loss": TH[i] / 2, "heldout_rmse": rmse[i],
           "effective_rank": erank[i]} for i, s in enumerate(crossings)]
    return {"status": status, "config": {"method": method, "hparams": {"lr": lr}, "seed": seed},
            "metrics": {"at_loss": at}}


def test_the_paper_reads_the_crossings_of_a_run_that_later_diverged():
    late = rec("gd", 1.0, 42, [1, 5, 9], status="diverged")
    assert at_level(late, 1e-4, "ours") is None
    assert at_level(late, 1e-4, "paper")["step"] == 9
    error = rec("gd", 1.0, 42, [1], status="error")
    assert at_level(error, 1e-2, "paper") is None
    with pytest.raises(ValueError, match="Invalid rule"):
        at_level(late, 1e-4, "theirs")


def test_selection_differs_between_the_readings_only_through_diverged_runs():
    records = [rec("gd", 1.0, s, [1, 50, 90]) for s in (42, 123)]
    records += [rec("gd", 3.0, 42, [1, 20, 30], status="diverged"),
                rec("gd", 3.0, 123, [1, 20, 31])]
    assert ml.select_lr(records, "gd", (42, 123), TH, rule="ours").lr == 1.0
    paper = ml.select_lr(records, "gd", (42, 123), TH, rule="paper")
    assert (paper.lr, paper.level, paper.steps) == (3.0, 1e-4, 30.5)
    # within a grid that leaves the faster rate out, the paper picks the slower one too
    assert ml.select_lr(records, "gd", (42, 123), TH, grid=(1.0,), rule="paper").lr == 1.0
    assert ml.select_lr(records, "gd", (42, 123), TH, grid=(1.0,)).grid == (1.0,)


def test_headline_takes_the_level_of_gd_and_adam_only_and_counts_wins():
    seeds = (42, 123)
    records = [rec("gd", 1.0, s, [1, 5, 9], rmse=[0.1, 0.05, g])
               for s, g in zip(seeds, (0.02, 0.04), strict=True)]
    records += [rec("adam", 0.1, s, [1, 2, 3], rmse=[0.1, 0.06, 0.03]) for s in seeds]
    records += [rec("muon", 0.1, s, [1, 4]) for s in seeds]          # stops one level higher
    sel = {m: ml.select_lr(records, m, seeds, TH) for m in ("gd", "adam", "muon")}
    all_three = ml.matched_comparison(records, sel, seeds, TH)
    assert all_three["level"] == 1e-3
    h = ml.headline_gap(records, sel, seeds=seeds, thresholds=TH)
    assert h["level"] == 1e-4
    assert h["gd"] == pytest.approx(0.03) and h["adam"] == pytest.approx(0.03)
    assert h["gap"] == pytest.approx(0.0)
    assert h["wins"] == 1                                           # 0.02 < 0.03, 0.04 > 0.03
    assert h["seeds"] == pytest.approx([1 - 0.02 / 0.03, 1 - 0.04 / 0.03])
    # per seed, for the rule's comparison paired by seed
    assert h["gd_by_seed"] == pytest.approx({42: 0.02, 123: 0.04})
    assert h["adam_by_seed"] == pytest.approx({42: 0.03, 123: 0.03})
    assert h["gap_by_seed"] == pytest.approx({42: 1 - 0.02 / 0.03, 123: 1 - 0.04 / 0.03})
    assert all_three["methods"]["muon"]["rmse_by_seed"] == pytest.approx({42: 0.05, 123: 0.05})


def test_by_seed_keeps_the_seeds_that_reached_the_level():
    runs = [rec("gd", 1.0, 42, [1, 5, 9], rmse=[0.1, 0.05, 0.02]),
            rec("gd", 1.0, 123, [1, 5], rmse=[0.1, 0.06])]
    assert ml.by_seed(runs, 1e-3) == {42: 0.05, 123: 0.06}
    assert ml.by_seed(runs, 1e-4) == {42: 0.02}
    assert ml.by_seed(runs, None) == {}
    assert ml.gaps_by_seed({42: 0.02, 123: 0.03}, {42: 0.04, 7: 1.0}) == {42: 0.5}


def test_table5_cells_average_the_seeds_that_reached_the_level():
    records = [rec("adam", 0.1, 42, [1, 2, 3], rmse=[0.1, 0.2, 0.3], erank=[4, 5, 6]),
               rec("adam", 0.1, 123, [1, 2], rmse=[0.3, 0.4], erank=[8, 9])]
    cells = ml.level_table(records, "adam", 0.1, (42, 123), TH)
    assert [c["n"] for c in cells] == [2, 2, 1]
    assert [c["rmse"] for c in cells] == pytest.approx([0.2, 0.3, 0.3])
    assert [c["effective_rank"] for c in cells] == pytest.approx([6, 7, 6])
    assert cells[2]["rmse_by_seed"] == {42: 0.3}
    assert ml.level_table(records, "adam", None, (42,), TH)[0]["n"] == 0
    assert math.isnan(ml.level_table(records, "adam", None, (42,), TH)[0]["rmse"])


def test_gap_counts_wins_and_takes_the_sample_sd():
    g = ml.gap([1.0, 3.0, 2.0], [2.0, 2.0, 4.0])
    assert g["wins"] == 2
    assert g["gap"] == pytest.approx(1 - 2.0 / (8 / 3))
    per = [0.5, -0.5, 0.5]
    assert g["std"] == pytest.approx((sum((x - 1 / 6) ** 2 for x in per) / 2) ** 0.5)
    assert ml.gap([], [])["wins"] == 0
