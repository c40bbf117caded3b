"""Prop. 8.1's per-mode dynamics (closed forms against numerical integration of the two-factor
flows) and the crossing estimator τ* on synthetic curves."""

from __future__ import annotations

import math

import pytest
import torch

from gaugebook.tails.tail_theory import (
    DYNAMICS,
    closed_form,
    equal_rate_closed_form,
    estimate_crossing,
    fit_time,
    greedy_closed_form,
    integrate_mode,
    tail_fraction,
)

F64 = torch.float64
TIMES = torch.linspace(0.0, 30.0, 31, dtype=F64)


@pytest.mark.parametrize("dynamics", DYNAMICS)
@pytest.mark.parametrize(("s", "w0", "lr"), [(1.0, 1e-6, 1.0), (0.05, 1e-6, 1.0),
                                             (2.0, 1e-3, 0.3), (0.2, 1e-8, 0.5)])
def test_closed_form_matches_integration(dynamics, s, w0, lr):
    numeric = integrate_mode(dynamics, TIMES, s, w0, lr)
    exact = closed_form(dynamics, TIMES, s, w0, lr)
    assert (numeric - exact).abs().max().item() < 1e-9 * s
    assert exact[-1].item() <= s * (1 + 1e-12)


def test_wrong_rate_fails_against_integration():
    # negative control: the logistic with rate η instead of 2η, and the equal-rate flow without
    # its stop at uv = s, are off by far more than the integration error
    numeric = integrate_mode("greedy", TIMES, 1.0, 1e-6, 1.0)
    wrong = 1.0 / (1.0 + (1.0 / 1e-6 - 1.0) * torch.exp(-1.0 * TIMES))
    assert (numeric - wrong).abs().max().item() > 0.1
    numeric = integrate_mode("equal_rate", TIMES, 1.0, 1e-6, 1.0)
    unstopped = (math.sqrt(1e-6) + TIMES) ** 2
    assert (numeric - unstopped).abs().max().item() > 1.0


def test_unbalanced_start_leaves_the_balanced_closed_form():
    # the closed form assumes u0 = v0; from an unbalanced start gradient flow conserves
    # u² − v² ≠ 0 and the product follows another curve (negative control on the derivation)
    balanced = greedy_closed_form(TIMES, 1.0, 1e-4, 1.0)
    numeric = integrate_mode("greedy", TIMES, 1.0, 1e-4, 1.0, u0=0.1, v0=1e-3)
    assert (numeric - balanced).abs().max().item() > 1e-2


@pytest.mark.parametrize("dynamics", DYNAMICS)
def test_fit_time_reaches_the_fraction(dynamics):
    t = fit_time(dynamics, 0.3, 1e-6, 0.7, fraction=0.9)
    w = closed_form(dynamics, [t], 0.3, 1e-6, 0.7)[0].item()
    assert w == pytest.approx(0.27, rel=1e-10)


def test_greedy_fits_head_first_and_its_tail_vanishes_with_the_init():
    spectrum, tail = [1.0, 0.8, 0.05, 0.05], [False, False, True, True]
    T = fit_time("greedy", 0.8, 1e-6, 1.0, 0.99)  # the head is fitted at T from init 1e-6
    head = closed_form("greedy", [T], 0.8, 1e-6, 1.0)[0].item()
    fractions = [tail_fraction("greedy", spectrum, tail, T, w0, 1.0)
                 for w0 in (1e-6, 1e-9, 1e-12)]
    assert head > 0.99 * 0.8 * (1 - 1e-9)
    assert fractions[0] < 0.5 and fractions[0] > fractions[1] > fractions[2]
    assert fractions[2] < 1e-4
    # the tail is fitted more than ten times later than the head (times scale like 1/s)
    assert fit_time("greedy", 0.05, 1e-12, 1.0) > 10 * fit_time("greedy", 1.0, 1e-12, 1.0)


def test_equal_rate_fits_tail_with_head_regardless_of_init():
    spectrum, tail = [1.0, 0.8, 0.05, 0.05], [False, False, True, True]
    T = math.sqrt(max(spectrum)) / 1.0  # every mode is fitted by √s_max / η
    for w0 in (1e-6, 1e-9, 1e-12):
        assert tail_fraction("equal_rate", spectrum, tail, T, w0, 1.0) == pytest.approx(1.0)
        assert fit_time("equal_rate", 0.05, w0, 1.0) < fit_time("equal_rate", 1.0, w0, 1.0)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="^Invalid dynamics"):
        closed_form("adam", TIMES, 1.0, 1e-3, 1.0)
    with pytest.raises(ValueError, match="^Invalid w0"):
        equal_rate_closed_form(TIMES, 1.0, 2.0, 1.0)
    with pytest.raises(ValueError, match="^Invalid s"):
        integrate_mode("greedy", TIMES, 0.0, 1e-3, 1.0)


# --------------------------------------------------------------------------------------------
# τ*
# --------------------------------------------------------------------------------------------

TAUS = [0.0, 0.05, 0.1, 0.2, 0.35, 0.5]


def linear_curves(cross: float, seeds: int = 4, noise: float = 0.0, seed: int = 0):
    """a(τ) = 2τ and b(τ) = τ + cross per seed (they cross at τ = cross), plus noise."""
    g = torch.Generator().manual_seed(seed)
    t = torch.tensor(TAUS, dtype=F64)[:, None].expand(-1, seeds)
    a = 2 * t + noise * torch.randn(t.shape, generator=g, dtype=F64)
    b = t + cross + noise * torch.randn(t.shape, generator=g, dtype=F64)
    return a, b


def test_known_crossing_between_grid_points():
    a, b = linear_curves(0.27)
    c = estimate_crossing(TAUS, a, b, num_boot=200)
    # the difference τ − 0.27 is linear, so linear interpolation is exact
    assert c.status == "crossing" and c.bracket == (0.2, 0.35)
    assert c.tau_star == pytest.approx(0.27, abs=1e-12)
    assert c.low == pytest.approx(0.27, abs=1e-12) and c.high == pytest.approx(0.27, abs=1e-12)
    assert c.no_crossing == 0.0 and c.sign_changes == 1


def test_noisy_crossing_interval_covers_the_truth_and_widens_with_noise():
    a, b = linear_curves(0.27, seeds=6, noise=0.01, seed=1)
    narrow = estimate_crossing(TAUS, a, b, num_boot=500, seed=3)
    a, b = linear_curves(0.27, seeds=6, noise=0.05, seed=1)
    wide = estimate_crossing(TAUS, a, b, num_boot=500, seed=3)
    assert narrow.low < 0.27 < narrow.high
    assert wide.high - wide.low > narrow.high - narrow.low > 0


def test_nonlinear_curves_give_an_interpolation_error():
    # negative control: the interpolated τ* is exact only for a linear difference; with a
    # quadratic one it lands elsewhere in the bracket
    t = torch.tensor(TAUS, dtype=F64)[:, None].expand(-1, 3)
    a, b = 8 * t**2, 0.27 * 8 * 0.27 + 0 * t
    c = estimate_crossing(TAUS, a, b, num_boot=50)
    assert c.bracket == (0.2, 0.35) and abs(c.tau_star - 0.27) > 5e-3


def test_no_crossing_in_the_grid():
    a, b = linear_curves(0.9)  # would cross at 0.9, beyond the grid
    c = estimate_crossing(TAUS, a, b, num_boot=100)
    assert c.status == "a_below_everywhere" and c.tau_star is None and c.bracket is None
    assert c.high == math.inf and c.no_crossing == 1.0
    never = estimate_crossing(TAUS, b + 1.0, b, num_boot=100)
    assert never.status == "a_never_below" and never.low == -math.inf


def test_nan_grid_points_are_dropped():
    a, b = linear_curves(0.27)
    a[1, 0] = math.nan
    c = estimate_crossing(TAUS, a, b, num_boot=50)
    assert c.dropped == (0.05,) and c.tau_star == pytest.approx(0.27, abs=1e-12)


def test_invalid_shapes():
    a, b = linear_curves(0.27)
    with pytest.raises(ValueError, match="^Invalid rec_a"):
        estimate_crossing(TAUS, a[:-1], b)
    with pytest.raises(ValueError, match="^Invalid taus"):
        estimate_crossing(list(reversed(TAUS)), a, b)


# the paper's estimator: the first grid τ at which mean(a) − mean(b) turns from < 0 to ≥ 0


def curves_from_differences(d, seeds=3):
    """b = 0 and a = d at every seed: the difference of the means is ``d`` exactly."""
    a = torch.tensor(d, dtype=F64)[:, None].expand(-1, seeds).clone()
    return a, torch.zeros_like(a)


def test_grid_estimator_is_the_first_grid_point_after_the_change():
    a, b = curves_from_differences([-0.13, -0.07, -0.04, -0.015, 0.028, 0.025])
    c = estimate_crossing(TAUS, a, b, num_boot=100, estimator="grid")
    assert c.estimator == "grid" and c.status == "crossing"
    assert c.tau_star == 0.35 and c.bracket == (0.2, 0.35) and c.upward == (0.35,)
    assert c.low == c.high == 0.35  # identical seeds: every resample gives the same grid point
    assert c.shares == ((0.35, 1.0),)
    # the interpolated estimate of the same curves lies strictly inside the bracket
    i = estimate_crossing(TAUS, a, b, num_boot=100)
    assert 0.2 < i.tau_star < 0.35 and i.tau_star == pytest.approx(
        0.2 + 0.15 * 0.015 / (0.015 + 0.028), abs=1e-12)


def test_grid_estimator_counts_zero_as_not_below():
    # d = 0 exactly is "≥ 0": the crossing is at that grid point
    a, b = curves_from_differences([-0.1, -0.05, 0.0, 0.02, 0.03, 0.04])
    c = estimate_crossing(TAUS, a, b, num_boot=10, estimator="grid")
    assert c.tau_star == 0.1


def test_grid_estimator_without_a_crossing():
    a, b = curves_from_differences([-0.1, -0.09, -0.08, -0.05, -0.02, -0.01])
    c = estimate_crossing(TAUS, a, b, num_boot=10, estimator="grid")
    assert c.status == "a_below_everywhere" and c.tau_star is None and c.upward == ()
    assert c.high == math.inf


def test_grid_estimator_ignores_a_start_at_or_above():
    # d ≥ 0 at the first τ has no grid point before it: not a crossing (as in the paper's loop,
    # which compares each τ with the previous one); a later change from below still counts
    a, b = curves_from_differences([0.01, 0.02, 0.03, 0.04, 0.05, 0.06])
    c = estimate_crossing(TAUS, a, b, num_boot=10, estimator="grid")
    assert c.status == "a_never_below" and c.tau_star is None
    a, b = curves_from_differences([0.01, -0.02, 0.03, -0.04, 0.05, 0.06])
    c = estimate_crossing(TAUS, a, b, num_boot=10, estimator="grid")
    assert c.tau_star == 0.1 and c.upward == (0.1, 0.35) and c.sign_changes == 4


def test_unknown_estimator():
    a, b = linear_curves(0.27)
    with pytest.raises(ValueError, match="^Invalid estimator"):
        estimate_crossing(TAUS, a, b, estimator="last")


def test_grid_estimator_bootstrap_shares_follow_the_seeds():
    # seed 0 turns positive at 0.1, the others at 0.35; a resample's mean turns at 0.1 when
    # all three draws are seed 0, at 0.2 when two are, at 0.35 otherwise (as the data do)
    d = torch.tensor([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0], [0.4, -1.0, -1.0],
                      [1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=F64)
    c = estimate_crossing(TAUS, d, torch.zeros_like(d), num_boot=4000, seed=1,
                          estimator="grid")
    assert c.tau_star == 0.35
    shares = dict(c.shares)
    assert set(shares) == {0.1, 0.2, 0.35} and sum(shares.values()) == pytest.approx(1.0)
    assert shares[0.1] == pytest.approx(1 / 27, abs=0.01)  # all three draws seed 0
    assert shares[0.2] == pytest.approx(6 / 27, abs=0.02)  # two draws of seed 0
    assert shares[0.35] == pytest.approx(20 / 27, abs=0.02)  # at most one draw of seed 0
    assert estimate_crossing(TAUS, d, torch.zeros_like(d), num_boot=10).shares == ()
