"""What the spectral-tails chapter shows (gaugebook.tails.tails_views; its crossing τ* in
gaugebook.tails.tails_crossing), from the committed paper-scale records."""

from __future__ import annotations

import pytest

pytest.importorskip("gaugebook.present.viz")

from gaugebook.present import stats
from gaugebook.tails import tails_crossing
from gaugebook.tails import tails_runs as st
from gaugebook.tails import tails_views as views


def test_instance_numbers_take_the_worst_factor_and_count_the_paper_operators():
    common = {"tail_norm": 0.2, "tau": 0.2, "norm_ratio": 1.0, "head_vs_zoo": 0.0}
    rows = [{**common, "left": 1e-7, "right": 3e-7, "same_A": True},
            {**common, "left": 5e-7, "right": 2e-7, "same_A": False, "norm_ratio": 1 - 3e-16},
            {**common, "left": 0.0, "right": 0.0, "same_A": True, "tail_norm": 0.2 + 1e-9,
             "head_vs_zoo": 2e-7}]
    numbers = views.instance_numbers(rows)
    assert numbers["tails_orth_max"] == 5e-7 and numbers["tails_same_A"] == 2
    assert numbers["tails_norm_err"] == pytest.approx(3e-16, rel=0.5)
    assert numbers["tails_tail_norm_err"] == pytest.approx(1e-9)
    assert numbers["tails_head_zoo"] == 2e-7


def _phase_row(tau, method, recs):
    return {"tau": tau, "method": method, "rec": sum(recs) / len(recs), "lr": 0.1,
            "interpolated": True, "rec_by_seed": dict(zip((1, 2, 3), recs, strict=True))}


def test_phase_leads_resolve_a_first_place_only_where_the_seeds_do():
    rows = [_phase_row(0.0, "muon", [1e-5, 2e-5, 1e-5]),
            _phase_row(0.0, "gd", [0.1, 0.12, 0.17]),
            _phase_row(0.0, "adam", [0.5, 0.6, 0.55]),
            _phase_row(0.5, "gd", [0.70, 0.77, 0.76]),
            _phase_row(0.5, "shampoo", [0.72, 0.73, 0.75]),
            _phase_row(0.5, "adam", [0.8, 0.79, 0.81])]
    leads = views.phase_leads(rows, (0.0, 0.5))
    assert [(x["best"], x["next"]) for x in leads] == [("muon", "gd"), ("shampoo", "gd")]
    assert [x["words"] for x in leads] == ["ahead", stats.LEVEL]
    html = views.phase_html(rows, (0.0, 0.5))
    assert "lowest − next" in html and "Shampoo − GD" in html


def test_balancedness_numbers_read_the_split_in_the_means_and_by_the_seeds():
    def row(method, tau, values):
        return {"method": method, "tau": tau, "balancedness": sum(values) / len(values),
                "balancedness_by_seed": dict(zip((1, 2, 3), values, strict=True))}
    bal = [row("gd", 0.0, [0.04, 0.05, 0.07]), row("scalar_adam", 0.0, [0.11, 0.12, 0.18]),
           row("muon", 0.0, [1.3, 1.7, 1.1]), row("shampoo", 0.0, [0.3, 3.3, 1.2]),
           row("gd", 0.5, [0.06, 0.08, 0.07]), row("scalar_adam", 0.5, [0.17, 0.2, 0.18]),
           row("muon", 0.5, [2.9, 2.8, 3.4]), row("shampoo", 0.5, [0.52, 0.61, 0.69])]
    numbers = views.balancedness_numbers(bal, (0.0, 0.5))
    assert numbers["tails_bal_n_split"] == 2
    assert numbers["tails_bal_above_muon"] == [0.0, 0.5]
    assert numbers["tails_bal_above_shampoo"] == [0.5]
    assert numbers["tails_bal_shampoo_level_text"] == "0"
    assert not numbers["tails_bal_reversed"]
    assert (numbers["tails_bal_shampoo_lo"], numbers["tails_bal_shampoo_hi"]) == (0.3, 3.3)
    # the ratio of the means, printed to the digits its seeds' spread supports
    assert numbers["tails_bal_ratio"] == pytest.approx(1.3667 / 0.1367, rel=1e-3)
    assert numbers["tails_bal_ratio_text"] == "10"


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
    # by the rule, on the seeds: Muon ahead at τ = 0 only, GD nowhere, both selections alike
    assert values["tails_mg_ahead"] == [0.0] and values["tails_mg_behind"] == []
    assert values["tails_rules_same_runs"]
    assert values["tails_mg_words_gpu"] == stats.LEVEL
    assert values["tails_mg_text_star"].startswith("+0.03 (95 % CI")


def test_muon_against_gd_pairs_the_seeds_of_each_tau(crossing):
    rows, _, _ = crossing
    mg = tails_crossing.muon_against_gd(rows)
    assert sorted(mg) == list(st.get_config("paper").phase.taus)
    first = mg[0.0]
    assert first.paired_n == 3 and first.sign == -1
    assert all(mg[t].sign == 0 for t in sorted(mg)[1:])


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
    assert numbers["tails_signum_lin_cos_words"] is None  # no cosine cell at the largest T


def test_the_signum_numbers_compare_the_schedules_at_the_largest_budget():
    def cell(schedule, recs):
        return {"T": 60_000, "schedule": schedule, "rec": sum(recs) / 3, "exact": True,
                "exact_seeds": 3, "rec_seeds": recs,
                "rec_by_seed": dict(zip((42, 123, 456), recs, strict=True))}
    hz = [cell("cosine", [1.1e-5, 1.2e-5, 1.3e-5]), cell("linear", [1.6e-6, 1.5e-6, 1.0e-5])]
    numbers = views.signum_numbers(hz, st.get_config("paper"))
    assert numbers["tails_signum_lin_cos_words"] == stats.LEVEL
    assert numbers["tails_signum_lin_cos_text"].startswith("-8e-06 (95 % CI")


def test_the_crossing_figure_draws_both_estimates(crossing):
    import matplotlib

    matplotlib.use("Agg")
    rows, est, published = crossing
    fig = tails_crossing.crossing_figure(rows, est, published)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("paper's rule" in lab for lab in labels)
    assert any("ours, interpolated" in lab for lab in labels)
    assert sum(lab.startswith("published τ*") for lab in labels) == len(st.PUBLISHED_TAU_STAR)
