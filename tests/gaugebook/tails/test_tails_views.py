"""What the spectral-tails chapter shows (gaugebook.tails.tails_views; its crossing τ* in
gaugebook.tails.tails_crossing), from the committed paper-scale records."""

from __future__ import annotations

import pytest

pytest.importorskip("gaugebook.present.viz")

from gaugebook.tails import tails_crossing
from gaugebook.tails import tails_runs as st
from gaugebook.tails import tails_views as views


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
