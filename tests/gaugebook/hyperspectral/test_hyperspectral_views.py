"""The numbers chapter 7 quotes and checks its sentences against, on constructed rows: each
reads what the table shows, and a changed number changes it."""

from __future__ import annotations

import math

from gaugebook.hyperspectral import hyperspectral_page as page


def _cells(method, values):
    return [{"method": method, "lr": 1.0, "lr_pub": None, "level": 10.0 ** -(i + 2), "n": 4,
             "rmse": v, "erank": 5.0, "rmse_pub": None, "erank_pub": None, "diff": None}
            for i, v in enumerate(values)]


def test_level_values_read_each_curve():
    rows = (_cells("GD", [0.04, 0.02, 0.01]) + _cells("Adam", [0.04, 0.02, 0.03])
            + _cells("Muon", [0.04, 0.05, 0.03]))
    v = page.level_values(rows)
    assert v["hsi_lv_gd_falls"] and v["hsi_lv_gd_deep"] == 0.01
    assert not v["hsi_lv_adam_falls"]
    assert (v["hsi_lv_adam_min"], v["hsi_lv_adam_min_at"], v["hsi_lv_adam_deep"]) == (
        0.02, 1e-3, 0.03)
    assert not v["hsi_lv_muon_falls"] and v["hsi_lv_muon_falls_after_max"]
    assert (v["hsi_lv_muon_max"], v["hsi_lv_muon_max_at"]) == (0.05, 1e-3)
    # a level nobody reached is left out of the curve
    rows[2]["n"] = 0
    assert page.level_values(rows)["hsi_lv_gd_deep"] == 0.02


def test_gd_edge_reads_the_rate_where_every_seed_diverged():
    rows = [{"lr": 300.0, "selected": "", "diverged": 0, "rmse": 0.01, "erank": 4.0},
            {"lr": 1000.0, "selected": "", "diverged": 0, "rmse": 0.02, "erank": 3.0},
            {"lr": 3000.0, "selected": "selected", "diverged": 0, "rmse": 0.2, "erank": 28.0},
            {"lr": 10000.0, "selected": "", "diverged": 4, "rmse": None, "erank": None}]
    edge = page._gd_edge(rows, adam=0.05, seeds=4)
    assert edge["lr"] == 3000.0 and edge["edge"] and edge["erank"] == 28.0
    assert (edge["slow_erank"], edge["slow_lo"], edge["slow_hi"]) == (4.0, 0.01, 0.02)
    assert edge["slow_below_adam"]
    assert not page._gd_edge(rows, adam=0.015, seeds=4)["slow_below_adam"]
    rows[3]["diverged"] = 3
    assert not page._gd_edge(rows, adam=0.05, seeds=4)["edge"]
    # no selection: nothing to read, and nothing claimed
    empty = page._gd_edge([], adam=math.nan, seeds=4)
    assert math.isnan(empty["lr"]) and not empty["edge"] and not empty["slow_below_adam"]


def test_seed_counts():
    assert page._all_won("4/4") and not page._all_won("3/4") and not page._all_won(None)
    assert page._none_won("0/4") and not page._none_won("1/4") and not page._none_won(None)
    assert math.isnan(page._pct(None)) and page._pct(0.43) == 43.0
