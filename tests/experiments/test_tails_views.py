"""What the spectral-tails chapter shows (gaugekit.report.spectral_tails; its crossing τ* in
gaugekit.report.tails_crossing), from the committed paper-scale records."""

from __future__ import annotations

import pytest

pytest.importorskip("gaugekit.report.viz")

from gaugekit.experiments import spectral_tails as st  # noqa: E402
from gaugekit.report import spectral_tails as views  # noqa: E402
from gaugekit.report import tails_crossing  # noqa: E402


def test_instance_numbers_take_the_worst_factor_and_count_the_paper_operators():
    rows = [{"left": 1e-7, "right": 3e-7, "same_A": True},
            {"left": 5e-7, "right": 2e-7, "same_A": False},
            {"left": 0.0, "right": 0.0, "same_A": True}]
    assert views.instance_numbers(rows) == {"tails_orth_max": 5e-7, "tails_same_A": 2}


@pytest.fixture(scope="module")
def crossing():
    config = st.get_config("paper")
    records = st.collect("paper", mode="read").records
    rows = st.phase_rows(records["phase"])
    return rows, st.crossings(records["phase"], num_boot=50, seed=0), st.published_applies(config)


def test_the_crossing_values_are_the_table_and_the_numbers(crossing):
    rows, est, published = crossing
    values = tails_crossing.crossing_values(rows, est, published)
    numbers = tails_crossing.crossing_numbers(rows, est, published)
    assert set(values) == {"tails_tab_crossing", *numbers}
    html = values["tails_tab_crossing"]
    assert html.count("<tr>") == 1 + len(st.PUBLISHED_TAU_STAR)
    assert f"{st.PUBLISHED_TAU_STAR['cpu']['tau_star']:g}" in html
    assert values["tails_paper_agrees"] == "the published CPU value"
    assert values["tails_tau_qualitative"] == "holds"


def test_the_crossing_figure_draws_both_estimates(crossing):
    import matplotlib

    matplotlib.use("Agg")
    rows, est, published = crossing
    fig = tails_crossing.crossing_figure(rows, est, published)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("paper's rule" in lab for lab in labels)
    assert any("ours, interpolated" in lab for lab in labels)
    assert sum(lab.startswith("published τ*") for lab in labels) == len(st.PUBLISHED_TAU_STAR)
