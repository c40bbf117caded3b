"""The sentences chapter 7 reads off its tables, on constructed rows: each says what the
numbers say, and a changed number changes the sentence."""

from __future__ import annotations

from gaugekit.experiments import hyperspectral_views as views


def _cells(method, values, pub=None, lr=1.0, lr_pub=1.0):
    pub = pub or [None] * len(values)
    return [{"method": method, "lr": lr, "lr_pub": lr_pub, "level": 10.0 ** -(i + 2), "n": 4,
             "rmse": v, "erank": 5.0, "rmse_pub": p, "erank_pub": 5 if p else None,
             "diff": None if p is None else v - p}
            for i, (v, p) in enumerate(zip(values, pub, strict=True))]


def test_table5_verdict_counts_the_cells_that_agree_to_the_digits_printed():
    rows = _cells("GD", [0.03, 0.02], pub=[0.03, 0.02]) + _cells("Adam", [0.04, 0.031],
                                                                 pub=[0.04, 0.03], lr=3.0)
    text = views.table5_verdict(rows)
    assert "the paper's rate for 1 of 2 methods" in text
    assert "Of the 4 cells, 3 agree" in text
    assert views.table5_verdict([]).startswith("The table is empty")
    assert "no published value applies" in views.table5_verdict(_cells("GD", [0.1, 0.05]))


def test_levels_text_describes_each_curve():
    rows = (_cells("GD", [0.04, 0.02, 0.01]) + _cells("Adam", [0.04, 0.02, 0.03])
            + _cells("Muon", [0.04, 0.05, 0.03]))
    text = views.levels_text(rows)
    assert "GD's falls at every level, to 0.0100" in text
    assert "Adam's is lowest at 0.001 (0.0200) and 0.0300 at 0.0001" in text
    assert "Muon's rises to 0.0500 at 0.001 before falling to 0.0300" in text


def test_gd_edge_text_names_the_rate_where_every_seed_diverged():
    rows = [{"lr": 300.0, "selected": "", "diverged": 0, "rmse": 0.1, "erank": 4.0},
            {"lr": 3000.0, "selected": "selected", "diverged": 0, "rmse": 0.2, "erank": 28.0},
            {"lr": 10000.0, "selected": "", "diverged": 4, "rmse": None, "erank": None}]
    text = views.gd_edge_text(rows)
    assert "3000, one grid step below 10000, where every seed diverged" in text
    assert "effective rank of W is 28, against 4 at the slower rates" in text
    rows[2]["diverged"] = 3
    assert "where every seed diverged" not in views.gd_edge_text(rows)
