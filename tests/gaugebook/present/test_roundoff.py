"""Comparisons above an explicit round-off floor, with the strict comparison they replace as
the negative control: two floors never order each other."""

from __future__ import annotations

import pytest

from gaugebook.present.roundoff import at_floor, exceeds, falls_to_floor

#: chapter 13's collision residuals on an AMD EPYC (two gaps land on the same floor value)
RESIDUALS = [0.43, 2.1e-3, 1.9e-5, 2.2e-7, 1.6e-9, 1.7e-11, 1.4e-13, 6.605e-15, 6.605e-15]
FLOOR = 1e-12


def test_a_strict_order_fails_at_the_floor_and_the_helper_does_not():
    # negative control: the comparison the chapter used to make
    assert not all(a > b for a, b in zip(RESIDUALS, RESIDUALS[1:], strict=False))
    assert falls_to_floor(RESIDUALS, FLOOR)
    # the same floor values on another machine, in the other order: still fine
    assert falls_to_floor(RESIDUALS[:-2] + [6.0e-15, 6.7e-15], FLOOR)


def test_exceeds_refuses_an_order_inside_the_floor():
    assert not exceeds(6.606e-15, 6.605e-15, FLOOR)
    assert 6.606e-15 > 6.605e-15  # the strict comparison says yes: round-off decided it
    assert exceeds(1e-9, 6.605e-15, FLOOR)
    assert exceeds(0.43, 0.1, FLOOR) and not exceeds(0.1, 0.1, FLOOR)


def test_a_sequence_that_climbs_back_or_stalls_above_the_floor_fails():
    assert not falls_to_floor([1e-3, 1e-9, 1e-15, 1e-6], FLOOR)
    assert not falls_to_floor([1e-3, 1e-3, 1e-9], FLOOR)
    assert not falls_to_floor([1e-3, float("nan")], FLOOR)


def test_at_floor_and_a_bad_floor():
    assert at_floor(-3e-15, FLOOR) and not at_floor(2e-12, FLOOR)
    assert not at_floor(float("inf"), FLOOR)
    with pytest.raises(ValueError, match="Invalid floor"):
        falls_to_floor([1.0], -1.0)
