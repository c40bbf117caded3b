"""Learning-rate schedules: constant, cosine and linear decay to zero."""

from __future__ import annotations

import math

import pytest

from gaugekit.optim.schedules import SCHEDULES, lr_factor


def test_linear_decays_to_zero_on_a_straight_line():
    assert "linear" in SCHEDULES
    assert [lr_factor("linear", t, 4) for t in range(1, 5)] == [0.75, 0.5, 0.25, 0.0]


def test_cosine_and_constant_unchanged():
    assert lr_factor("constant", 3, 10) == 1.0
    assert lr_factor("cosine", 5, 10) == pytest.approx(0.5)
    assert lr_factor("cosine", 10, 10) == pytest.approx(0.0, abs=1e-15)
    # negative control: the two decays differ away from the middle and the ends
    assert abs(lr_factor("linear", 1, 4) - 0.5 * (1 + math.cos(math.pi / 4))) > 0.1


def test_unknown_schedule():
    with pytest.raises(ValueError, match="^Invalid schedule"):
        lr_factor("step", 1, 10)
