"""The sentences chapter 7 reads off its tables, on constructed rows: each says what the
numbers say, and a changed number changes the sentence."""

from __future__ import annotations

from gaugebook.hyperspectral import hyperspectral_views as views


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


def _arm(density, dtype, centring, gap, wins="4/4"):
    return {"density": density, "dtype": dtype, "centring": centring, "gap": gap,
            "wins": wins}


def test_arms_text_measures_each_arm_against_the_papers_protocol():
    rows = [_arm(0.15, "float64", "all entries", 0.430),
            _arm(0.15, "float32", "all entries", 0.4301),
            _arm(0.15, "float32", "observed only", 0.424)]
    text = views.arms_text(rows)
    assert text.startswith("At ρ = 0.15 GD's gap below Adam is +43.0 % in float64")
    assert "float32 with all entries centring changes it by nothing" in text
    assert "float32 with observed only centring changes it by -0.6 points" in text
    assert text.endswith("every seed of every arm")
    # a seed lost in one arm is said, and an arm without the paper's protocol is not compared
    rows[2]["wins"] = "3/4"
    assert views.arms_text(rows).endswith("not every seed of every arm")
    assert views.arms_text(rows[1:]) == "No Indian Pines arms to compare at this scale"


def test_arms_verdict_says_whether_every_arm_keeps_the_sign_on_every_seed():
    rows = [_arm(0.15, "float64", "all entries", 0.430),
            _arm(0.15, "float32", "observed only", 0.424),
            _arm(0.25, "float64", "all entries", 0.276)]
    assert views.arms_verdict(rows).startswith("Neither float32")
    assert views.arms_verdict(rows).endswith("at most 0.6 points between arms")
    rows[1] = _arm(0.15, "float32", "observed only", -0.1, wins="1/4")
    assert views.arms_verdict(rows).startswith("The verdict depends on the arm")
