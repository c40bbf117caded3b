"""Fixtures of the optimizer-zoo tests (helpers live in ``zoo_support``)."""

from __future__ import annotations

import pytest
from zoo_support import StackedSensing, stacked_factors, stacked_sensing

from gaugekit.optim import optimizer_names


@pytest.fixture(scope="module")
def problem() -> StackedSensing:
    """Three independent float64 sensing instances (5×4 matrices, rank 2, 24 measurements)."""
    return stacked_sensing(seed=0)


@pytest.fixture(scope="module")
def factors():
    """Stacked float64 factors ``U`` (3 × 5 × 3) and ``V`` (3 × 4 × 3)."""
    return stacked_factors(seed=1)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``zoo_name`` runs once per registered optimizer."""
    if "zoo_name" in metafunc.fixturenames:
        metafunc.parametrize("zoo_name", optimizer_names())
