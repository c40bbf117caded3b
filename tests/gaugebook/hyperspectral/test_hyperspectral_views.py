"""The numbers chapter 7 quotes and checks its sentences against, on constructed rows: each
reads what the table shows, and a changed number changes it."""

from __future__ import annotations

import math

from gaugebook.hyperspectral import hyperspectral_page as page
from gaugebook.present import stats


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
    # by the rule: only with values per seed, and then each slower rate must be resolved below
    assert not edge["slow_resolved"]
    for i, base in ((0, 0.010), (1, 0.020)):
        rows[i]["rmse_by_seed"] = {s: base + 1e-4 * s for s in (1, 2, 3, 4)}
    adam = {s: 0.05 + 1e-3 * s for s in (1, 2, 3, 4)}
    assert page._gd_edge(rows, adam=0.05, seeds=4, adam_by_seed=adam)["slow_resolved"]
    rows[3]["diverged"] = 3
    assert not page._gd_edge(rows, adam=0.05, seeds=4)["edge"]
    # no selection: nothing to read, and nothing claimed
    empty = page._gd_edge([], adam=math.nan, seeds=4)
    assert math.isnan(empty["lr"]) and not empty["edge"] and not empty["slow_below_adam"]


def _seeded(method, per_level):
    """Table 5 rows of one method whose held-out RMSE per seed is given level by level."""
    return [{"method": method, "lr": 1.0, "lr_pub": None, "level": 10.0 ** -(i + 2), "n": 4,
             "rmse": sum(v) / len(v), "erank": 5.0, "rmse_pub": None, "erank_pub": None,
             "diff": None, "rmse_by_seed": dict(zip((42, 123, 456, 789), v, strict=True))}
            for i, v in enumerate(per_level)]


def test_level_values_read_each_step_on_the_seeds():
    rows = (_seeded("GD", [[0.040, 0.041, 0.040, 0.041], [0.020, 0.021, 0.020, 0.022],
                           [0.0199, 0.0212, 0.0198, 0.0219]])
            + _seeded("Adam", [[0.040, 0.041, 0.040, 0.041], [0.020, 0.021, 0.020, 0.022],
                               [0.030, 0.031, 0.029, 0.030]]))
    v = page.level_values(rows)
    assert v["hsi_lv_gd_steps"] == ["falls", stats.LEVEL] and not v["hsi_lv_gd_rises"]
    assert v["hsi_lv_gd_falls"]          # the means fall at every level; the seeds do not say
    assert v["hsi_lv_adam_steps"] == ["falls", "rises"] and v["hsi_lv_adam_rises"]
    assert v["hsi_lv_adam_after_min"] == "rises" and v["hsi_lv_adam_deep_vs_min"] == "higher"
    assert v["hsi_lv_gd_last_text"].startswith("-0.0000")
    # rows without values per seed: no comparison, and no word
    assert page.level_values(_cells("GD", [0.04, 0.02]))["hsi_lv_gd_steps"] == [None]


def test_deepest_order_compares_neighbours_on_the_seeds():
    def deep(method, values):
        return _seeded(method, [values])
    rows = (deep("GD", [0.0149, 0.0147, 0.0147, 0.0150])
            + deep("Adam", [0.0265, 0.0254, 0.0260, 0.0261])
            + deep("Muon", [0.0340, 0.0344, 0.0328, 0.0346])
            + deep("Shared-scale Adam", [0.0371, 0.0338, 0.0359, 0.0371]))
    order = page.deepest_order(rows)
    assert order["hsi_deep_gd_adam"] == order["hsi_deep_adam_muon"] == "below"
    assert order["hsi_deep_muon_scalar_adam"] == stats.LEVEL


def test_sens_rule_reads_the_gap_step_by_step():
    class Part:
        name = "ip_low"
    gd = {1: 0.0149, 2: 0.0147, 3: 0.0147, 4: 0.0150}
    adam = {1e-3: [0.0172, 0.0166, 0.0172, 0.0173], 3e-3: [0.0200, 0.0191, 0.0201, 0.0200],
            1e-2: [0.0265, 0.0254, 0.0260, 0.0261], 3e-2: [0.0262, 0.0277, 0.0260, 0.0275]}
    sens = []
    for lr, values in adam.items():
        a = dict(zip(gd, values, strict=True))
        gaps = {s: 1 - gd[s] / a[s] for s in gd}
        sens.append({"lr": lr, "ip_low:gap": sum(gaps.values()) / 4, "ip_low:level": 1e-5,
                     "ip_low:gd_by_seed": gd, "ip_low:adam_by_seed": a,
                     "ip_low:gap_by_seed": gaps})
    v = page._sens_rule("low", Part(), sens)
    assert v["hsi_sens_low_below"] and v["hsi_sens_low_grid_grows"]
    assert v["hsi_sens_low_steps"][:2] == ["larger", "larger"]
    assert v["hsi_sens_low_added"] == stats.LEVEL and v["hsi_sens_low_adam_worst"]
    assert page._sens_rule("low", None, sens)["hsi_sens_low_below"] is False


def test_seed_counts():
    assert page._all_won("4/4") and not page._all_won("3/4") and not page._all_won(None)
    assert page._none_won("0/4") and not page._none_won("1/4") and not page._none_won(None)
    assert math.isnan(page._pct(None)) and page._pct(0.43) == 43.0
