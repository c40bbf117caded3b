"""The one rule behind every comparative word: Welch's and the paired t-test, checked against
scipy's, and the words they allow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from gaugebook.present.stats import (
    LEVEL,
    compare_ratio,
    compare_runs,
    compare_seeds,
    comparison_text,
    comparison_texts,
    fmt_lower_bound,
    fmt_spread,
    says,
)


@pytest.mark.parametrize("seed", range(6))
def test_welch_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    na, nb = rng.integers(2, 9, size=2)
    a = rng.normal(0.3, rng.uniform(0.1, 2), size=na)
    b = rng.normal(0.0, rng.uniform(0.1, 2), size=nb)
    ours = compare_runs(list(a), list(b))
    ref = sps.ttest_ind(a, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert ours.diff == pytest.approx(a.mean() - b.mean(), rel=1e-12)
    assert ours.welch_p == pytest.approx(ref.pvalue, rel=1e-9)
    assert (ours.low, ours.high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert ours.paired_n == 0 and ours.paired_p is None


@pytest.mark.parametrize("seed", range(6))
def test_paired_matches_scipy_when_the_runs_share_seeds(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 9))
    base = rng.normal(size=n)
    a = base + rng.normal(0.2, 0.3, size=n)
    seeds = [int(s) for s in rng.permutation(50)[:n]]
    ours = compare_runs(dict(zip(seeds, a, strict=True)),
                        dict(zip(reversed(seeds), base[::-1], strict=True)))
    ref = sps.ttest_rel(a, base)
    ci = ref.confidence_interval(0.95)
    assert ours.paired_n == n
    assert ours.paired_p == pytest.approx(ref.pvalue, rel=1e-9)
    assert (ours.paired_low, ours.paired_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    welch = sps.ttest_ind(a, base, equal_var=False)
    assert ours.welch_p == pytest.approx(welch.pvalue, rel=1e-9)


def test_the_words_need_an_interval_that_excludes_zero():
    ahead = compare_runs([1.00, 1.01, 0.99], [1.50, 1.49, 1.52])
    assert ahead.sign == -1 and ahead.words("ahead", "behind") == "ahead"
    assert compare_runs([1.50, 1.49, 1.52], [1.00, 1.01, 0.99]).words("ahead", "behind") \
        == "behind"
    # the means differ, the spread covers it: no comparative word
    level = compare_runs([1.0, 1.3, 0.8], [1.1, 1.4, 0.9])
    assert level.low < 0 < level.high and level.words("ahead", "behind") == LEVEL
    assert level.says(LEVEL, "ahead", "behind")


def test_one_run_a_side_is_never_resolved():
    one = compare_runs([1.0], [2.0, 2.1, 2.2])
    assert math.isinf(one.low) and math.isinf(one.high) and one.sign == 0


def test_paired_runs_need_both_intervals_to_exclude_zero():
    # Welch's interval excludes zero, the pairing shows the gap is not consistent seed by seed
    a = {1: 0.0, 2: 0.1, 3: 0.2, 4: 0.3}
    b = {1: 0.31, 2: 0.29, 3: 0.35, 4: -0.2}
    welch_only = compare_runs(list(a.values()), list(b.values()))
    paired = compare_runs(a, b)
    assert paired.paired_n == 4
    assert paired.paired_low < 0 < paired.paired_high
    assert paired.sign == 0
    assert welch_only.paired_n == 0


def test_a_non_finite_run_is_refused_not_averaged():
    with pytest.raises(ValueError, match="non-finite"):
        compare_runs([1.0, math.nan], [1.0, 2.0])


def test_identical_runs_are_level_and_a_constant_gap_is_resolved():
    assert compare_runs([2.0, 2.0], [2.0, 2.0]).sign == 0
    assert compare_runs([3.0, 3.0], [2.0, 2.0]).sign == 1


def test_timings_need_three_retimings_and_a_ratio_that_clears_the_point():
    with pytest.raises(ValueError, match="at least 3"):
        compare_ratio([10.0, 11.0], [9.0, 9.5, 9.2])
    fast, slow = [10.0, 10.5, 9.8, 10.2], [13.0, 13.4, 12.9, 13.1]
    r = compare_ratio(slow, fast)
    ref = math.exp(np.mean(np.log(slow)) - np.mean(np.log(fast)))
    assert r.ratio == pytest.approx(ref, rel=1e-12)
    assert r.above(1.2) and not r.straddles(1.2)
    assert r.straddles(r.ratio)
    spread = compare_ratio([10.0, 14.0, 11.0], [10.0, 10.5, 9.8])
    assert spread.straddles(1.2)


@pytest.mark.parametrize(("x", "spread", "text"), [
    (0.0362, 0.035, "0.04"), (1.9274, 0.013, "1.93"), (32613.0, 2e5, "30,000"),
    (32613.0, 300.0, "32,600"), (-0.006, 0.059, "-0.006"), (0.20103, 0.0004, "0.2010"),
    (5.3e-6, 1e-7, "0.0000053"),
])
def test_digits_follow_the_spread(x, spread, text):
    assert fmt_spread(x, spread) == text


def test_signed_digits():
    assert fmt_spread(0.0362, 0.035, signed=True) == "+0.04"
    assert fmt_spread(-12.0, 50.0, signed=True) == "-10"


@pytest.mark.parametrize("seed", range(4))
def test_against_a_number_is_the_one_sample_test(seed):
    rng = np.random.default_rng(200 + seed)
    a = rng.normal(2.0, 0.1, size=int(rng.integers(2, 7)))
    ours = compare_runs(list(a), 1.95)
    ref = sps.ttest_1samp(a, 1.95)
    ci = ref.confidence_interval(0.95)
    assert ours.welch_p == pytest.approx(ref.pvalue, rel=1e-9)
    assert (ours.low + 1.95, ours.high + 1.95) == pytest.approx((ci.low, ci.high), rel=1e-9)


@pytest.mark.parametrize(("x", "text"), [(16788.8, "10,000"), (528.0, "500"), (0.37, "0.3"),
                                         (10.8, "10"), (2.94, "2"), (1000.0, "1,000")])
def test_a_lower_bound_is_rounded_down(x, text):
    assert fmt_lower_bound(x) == text


def test_compare_seeds_pairs_and_refuses_what_it_cannot_compare():
    a, b = {42: 0.10, 123: 0.12, 456: 0.17}, {42: 0.20, 123: 0.21, 456: 0.27, 789: 9.0}
    c = compare_seeds(a, b)
    assert c == compare_runs(a, b) and c.paired_n == 3  # seed 789 has no partner
    assert compare_seeds(a, {k: b[k] for k in a}).words("ahead", "behind") == "ahead"
    # a diverged run is shown by the tables, not compared; one run a side is no comparison
    assert compare_seeds(a, {**b, 456: math.nan}) is None
    assert compare_seeds({42: 0.1}, b) is None and compare_seeds(a, None) is None
    assert compare_seeds([0.1, 0.2, 0.3], [0.3, 0.4]).paired_n == 0  # lists do not pair
    assert comparison_text(None) == "—" and comparison_text(c) == c.text()
    assert comparison_texts({"x": c, "y": None}, "p_") == {"p_x": c.text(), "p_y": "—"}
    assert not says(None, LEVEL, "below", "above") and says(c, LEVEL, "ahead", "behind")


def test_paired_timings_bound_the_ratio_by_both_intervals():
    adamw = {0: 19.2, 1: 22.4, 2: 28.7, 3: 25.6, 4: 26.4}
    slow = {k: 1.3 * v for k, v in adamw.items()}  # every round exactly 1.3 times dearer
    r = compare_ratio(slow, adamw)
    assert r.log.paired_n == 5 and r.ratio == pytest.approx(1.3)
    # the paired interval is a point; Welch's is wide, and the bound follows the wider
    assert math.log(r.low) == pytest.approx(r.log.low) and r.straddles(1.2)
    assert compare_ratio(list(slow.values()), list(adamw.values())).low == pytest.approx(r.low)
    assert "(95 % CI" in r.text() and f"{r.low:.2f}" in r.text()
