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
    # the numbers the chapter's prose is checked against
    assert values["tails_paper_tau"] == st.PUBLISHED_TAU_STAR["cpu"]["tau_star"]
    assert values["tails_bracket_lo"] < values["tails_ours_tau"] < values["tails_bracket_hi"]
    assert values["tails_ours_tau"] < values["tails_paper_tau"] == values["tails_bracket_hi"]
    assert sum(share for _, share in values["tails_paper_shares"]) == pytest.approx(1.0)
    assert values["tails_paper_share"] == dict(values["tails_paper_shares"])[0.35]
    assert est["ours"].status == "crossing" and est["ours"].difference[0] < 0


def test_the_phase_numbers_name_the_best_optimizer_at_every_tau(crossing):
    rows, _, published = crossing
    config = st.get_config("paper")
    records = st.collect("paper", parts=["phase"], mode="read").records
    numbers = views.phase_numbers(records, rows, config, published)
    taus = config.phase.taus
    assert len(numbers["tails_best"]) == len(taus)
    for tau, best in zip(taus, numbers["tails_best"], strict=True):
        assert best == min((r for r in rows if r["tau"] == tau), key=lambda r: r["rec"])["method"]
    assert numbers["tails_paper_grids"] == st.PAPER_PHASE_LR_GRIDS
    assert set(numbers["tails_paper_methods"]) <= set(st.PAPER_PHASE_LR_GRIDS)
    assert numbers["tails_table2_gap"] < 0.01 and numbers["tails_log_gd"] < 1e-3


def test_the_signum_numbers_list_the_partial_cells():
    hz = [{"T": 20_000, "schedule": "cosine", "rec": 0.4, "exact": False, "exact_seeds": 0,
           "rec_seeds": [0.4] * 3},
          {"T": 40_000, "schedule": "cosine", "rec": 0.1, "exact": False, "exact_seeds": 2,
           "rec_seeds": [0.3, 0.0, 0.0]},
          {"T": 40_000, "schedule": "linear", "rec": 1e-5, "exact": True, "exact_seeds": 3,
           "rec_seeds": [1e-5] * 3}]
    numbers = views.signum_numbers(hz, st.get_config("paper"))
    assert numbers["tails_signum_partial"] == [("cosine", 40_000, 2, 3)]
    assert (numbers["tails_signum_partial_T"], numbers["tails_signum_partial_exact"]) == (
        40_000, 2)
    assert numbers["tails_signum_at_max_linear"] == 1e-5
    assert numbers["tails_signum_smallest_T"] == 40_000 and numbers["tails_signum_n_exact"] == 1


def test_the_crossing_figure_draws_both_estimates(crossing):
    import matplotlib

    matplotlib.use("Agg")
    rows, est, published = crossing
    fig = tails_crossing.crossing_figure(rows, est, published)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("paper's rule" in lab for lab in labels)
    assert any("ours, interpolated" in lab for lab in labels)
    assert sum(lab.startswith("published τ*") for lab in labels) == len(st.PUBLISHED_TAU_STAR)
