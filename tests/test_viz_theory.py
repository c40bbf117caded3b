"""The theory chapters' figure producers (:mod:`gaugekit.report.theory`): each draws on small
inputs and returns a figure, optimizers in the book's colours, legends outside the axes."""

from __future__ import annotations

import math

import pytest

viz_theory = pytest.importorskip("gaugekit.report.theory")
torch = pytest.importorskip("torch")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gaugekit.report.viz import method_color  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _colors(fig):
    return {line.get_color() for ax in fig.axes for line in ax.get_lines()}


def test_factor_pairs_has_a_colour_bar_per_column():
    g = torch.Generator().manual_seed(0)
    U, V = torch.randn(5, 3, generator=g), torch.randn(4, 3, generator=g)
    fig = viz_theory.factor_pairs([("a", U, V), ("b", 2 * U, V / 2)])
    assert len(fig.axes) == 2 * 3 + 3  # six panels and three colour bars


def test_orbit_circle_and_time_change_draw():
    thetas = torch.linspace(0, 2 * math.pi, 9, dtype=torch.float64)
    fig = viz_theory.orbit_circle(torch.tensor([[0.5, 0.2]], dtype=torch.float64), thetas,
                                  {"gauge": thetas * 0 + 1, "U only": thetas.cos() + 2})
    assert fig.axes[1].get_legend() is not None
    t = torch.linspace(0, 2, 11)
    fig = viz_theory.time_change(t, (-t).exp(), t[:6], (-t[:6]).exp(), t[:6] * 0.8, t[:6] * 1.2)
    assert fig.legends  # one legend for the figure, below the axes


def test_plane_runs_and_clock_free_colour_by_method():
    U = torch.rand(4, 1, 2)
    fig = viz_theory.plane_runs({"gd": [U], "adam": [U]},
                                {"gd": torch.rand(2, 4), "scalar_adam": torch.rand(2, 4)})
    assert {method_color("gd"), method_color("adam"), method_color("scalar_adam")} <= _colors(fig)
    fig = viz_theory.clock_free({"gd": (torch.rand(5) + 0.1, torch.rand(5) + 0.1)})
    assert method_color("gd") in _colors(fig)


def test_adam_defect_audit_bars_and_balancedness_draw():
    lrs, epss = [1e-3, 1e-2, 1e-1], [1e-8, 1.0]
    delta = torch.rand(2, 3) + 0.1
    measured = {(lr, eps): 0.5 for lr in lrs[:2] for eps in epss}
    fig = viz_theory.adam_defect(lrs, epss, delta, measured, [1e-3, 1.0, 10.0],
                                 torch.tensor([0.5, 0.4, 0.01]), 1.0)
    assert fig.legends
    fig = viz_theory.audit_bars([("zoo", ["GD", "Adam"], [0.0, 0.7], [True, False])], 1e-8)
    assert len(fig.axes) == 1
    curves = {m: [torch.rand(5) + 1e-3 for _ in range(2)] for m in ("gd", "adam")}
    fig = viz_theory.balancedness(curves, [2e-3, 1e-3], ["gd"], 0.5)
    assert {method_color("gd"), method_color("adam")} <= _colors(fig)


def test_transfer_curves_and_gap_collision_draw():
    s = torch.logspace(-2, 1, 5)
    fig = viz_theory.transfer_curves([("GD", "gd", "-", s, s, s, s)],
                                     (s / 10, s / 10, s / 10, s / 10))
    assert method_color("muon") in _colors(fig)
    fig = viz_theory.gap_collision([0.0, 1e-8, 1e-4], [0.3, 1e-8, 1e-12], 1e-8)
    assert method_color("eigen_adam") in _colors(fig)
