"""What the matrix-sensing chapter shows (gaugebook.sensing.sensing_views, its controls and its
weight-decay section in gaugebook.sensing.sensing_controls)."""

import statistics

import pytest

pytest.importorskip("gaugebook.present.viz")

from gaugebook.present import roundoff, stats
from gaugebook.sensing import sensing_controls
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing import sensing_views as views


@pytest.fixture(scope="module")
def records():
    return ms.collect("paper", mode="read").records


def test_edge_word_and_yes_no_are_words():
    row = {"lr": 0.1, "grid": (0.01, 0.03, 0.1), "at_grid_edge": True}
    assert views.edge_word(row) == "highest"
    assert views.edge_word({**row, "lr": 0.01}) == "lowest"
    assert views.edge_word({**row, "at_grid_edge": False}) == "no"
    assert (views.yes_no(True), views.yes_no(False)) == ("yes", "no")


def test_table2_keeps_the_published_columns_and_moves_the_diagnostics(records):
    rows = ms.selection_rows(records["zoo"], "oracle")
    zoo = ms.get_config("paper").part("zoo")
    main = views.table2_html(rows, ms.published_table2(zoo))
    assert "rec, paper" in main and "lr, paper" in main and "0.4454" in main
    diag = views.table2_diagnostics_html(rows)
    assert "True" not in diag and "False" not in diag and ">yes<" in diag


def test_the_late_change_answers_its_question(records):
    zoo = ms.get_config("paper").part("zoo")
    rows = ms.selection_rows(records["zoo"], "oracle")
    selected = views.selected_runs(records["zoo"], rows, zoo.seeds[0])
    summary = views.late_change_summary(selected)
    assert summary["late_runs"] == len(rows)
    # the runs that still move are the ones not settled, and the largest change is one of them
    assert len(summary["late_moving"]) == summary["late_runs"] - summary["late_settled"]
    assert summary["late_ratio"] == summary["late_rec_change"] / summary["rec_spread"]
    if summary["late_moving"]:
        assert summary["late_rec_method"] in summary["late_moving"]
    # negative control: a run that keeps changing late is counted as moving
    moved = [dict(r, curves={**r["curves"], "rec": [*r["curves"]["rec"][:-1], 1e3]})
             for r in selected]
    assert views.late_change_summary(moved)["late_settled"] < len(rows)


def test_the_decay_table_names_its_gate_in_one_word(records):
    html = sensing_controls.decay_html(records["decay"])
    assert ">paper&#x27;s<" in html and ">loose<" in html
    assert "mean training loss over seeds" not in html


def test_the_decay_values_are_its_tables_and_its_numbers(records):
    tol = ms.get_config("paper").part("decay").budget.tol
    values = sensing_controls.decay_values(records["decay"], tol)
    numbers = sensing_controls.decay_numbers(records["decay"], tol)
    assert "<table" in values["tab_decay"] and "<table" in values["tab_decay_seeds"]
    assert {k for k in values if not k.startswith("tab_")} == set(numbers)
    pub = ms.PUBLISHED_DECAY_CEILING
    assert (numbers["decay_pub_rec"], numbers["decay_pub_lr"]) == (pub["rec"], pub["lr"])
    # one number per arm under the paper's gate, and the classes' extremes among them
    arms = [r for r in ms.decay_rows(records["decay"]) if r["lr"] is not None]
    assert {f"decay_{r['arm']}_rec" for r in arms} <= set(numbers)
    assert numbers["decay_eq_max"] == max(r["rec"] for r in arms if r["equivariant"])
    assert numbers["decay_cw_min"] == min(r["rec"] for r in arms if not r["equivariant"])
    # the seeds at the paper's cell: how many end at or above the bar
    cell = ms.decay_runs(records["decay"], pub["arm"], pub["lr"], pub["wd"])
    assert numbers["decay_cell_above"] == sum(
        not r["metrics"]["train_loss"] < tol for r in cell)
    assert sensing_controls.decay_numbers(records["decay"], 1.0)["decay_cell_above"] == 0


def test_the_instances_reproduce_the_published_nuclear_norms():
    problem = ms.get_config("paper").part("zoo").problem
    rows = views.instance_check_rows(problem)
    assert [r["seed"] for r in rows] == list(ms.PUBLISHED_NUCLEAR_NORMS)
    for r in rows:
        assert r["diff"] == abs(r["ours"] - r["published"])
        assert roundoff.at_floor(r["diff"], views.NUCLEAR_NORM_FLOOR)


def test_balancedness_summary_compares_the_classes_extremes():
    rows = [{"method": "gd", "label": "GD", "equivariant": True, "balancedness": 0.1},
            {"method": "muon", "label": "Muon", "equivariant": True, "balancedness": 1.0},
            {"method": "adam", "label": "Adam", "equivariant": False, "balancedness": 5.0},
            {"method": "lion", "label": "Lion", "equivariant": False, "balancedness": 2.0}]
    s = views.balancedness_summary(rows)
    assert (s["eq_max"], s["eq_max_label"], s["cw_min"], s["cw_min_label"]) == (
        1.0, "Muon", 2.0, "Lion")
    assert (s["gd"], s["adam"]) == (0.1, 5.0)


def test_convex_values_count_wins_with_muons_margin():
    rows = [{"convex": 0.1, "muon": 0.0995, "gd": 0.05},   # Muon within 1e-3: no win
            {"convex": 0.2, "muon": 0.01, "gd": 0.3},
            {"convex": 0.05, "muon": 0.0, "gd": 0.01}]
    values = views.convex_values(rows)
    assert (values["convex_max"], values["convex_min"]) == (0.2, 0.05)
    assert (values["muon_beats_convex"], values["gd_beats_convex"], values["n_seeds"]) == (
        2, 2, 3)


def test_balancedness_values_rank_the_finished_runs_only():
    def run(bal, rec, status="ok"):
        return {"status": status, "metrics": {"balancedness": bal, "rec": rec}}

    records = [run(1.0, 0.1), run(2.0, 0.2), run(3.0, 0.3), run(0.0, 0.0, "diverged")]
    values = views.balancedness_values(records)
    assert values["bal_rec_spearman"] == pytest.approx(1.0)
    assert values["best_run_bal"] == 1.0  # the diverged run's rec of 0 is not a run's best
    flipped = views.balancedness_values([run(1.0, 0.3), run(2.0, 0.2), run(3.0, 0.1)])
    assert flipped["bal_rec_spearman"] == pytest.approx(-1.0)


def test_the_survival_table_has_a_row_per_setting_and_counts_its_clean_splits(records):
    html, protocol_rows, counts = sensing_controls.survival(records)
    assert html.count("<tr>") == 1 + len(sensing_controls.SURVIVAL_SETTINGS)
    assert counts["n_settings"] == len(sensing_controls.SURVIVAL_SETTINGS)
    assert 0 <= counts["n_clean"] <= counts["n_settings"]
    assert set(protocol_rows) == {"oracle", "validation", "train speed"}


# --------------------------------------------------------------------------------------------
# under the one rule (gaugebook.present.stats)
# --------------------------------------------------------------------------------------------

SEEDS = {1: 0.0, 2: 0.1, 3: 0.2}  # the seeds' spread


def _rows(recs):
    return [{"method": m, "label": m.upper(), "equivariant": m in ("gd", "muon"), "lr": 0.1,
             "rec": statistics.fmean(v.values())} for m, v in recs.items()]


def _values(shifts, jitter=0.001):
    """``{method: {seed: spread + shift + jitter · seed}}``: methods apart by ``shift``."""
    return {m: {s: base + shift + jitter * s * i for s, base in SEEDS.items()}
            for i, (m, shift) in enumerate(shifts.items())}


def test_ranking_pairs_group_the_neighbours_the_rule_cannot_tell_apart():
    values = _values({"muon": -1.0, "gd": 0.0, "adam": 0.05, "lion": 0.5})
    rows = _rows(values)
    pairs = views.ranking_pairs(values, rows)
    assert [(p["a"], p["b"]) for p in pairs] == [("muon", "gd"), ("gd", "adam"), ("adam", "lion")]
    assert [p["words"] for p in pairs] == ["ahead", stats.LEVEL, "ahead"]
    assert views.ranking_groups(pairs) == [["muon"], ["gd", "adam"], ["lion"]]
    html = views.pairs_html(pairs)
    assert html.count("<tr>") == 4 and "MUON − GD" in html


def test_split_rule_reads_every_pair_of_the_two_classes():
    # equivariant gd and muon below coordinate-wise adam and lion: resolved, level, or against
    holds = _values({"muon": -1.0, "gd": 0.0, "adam": 0.5, "lion": 0.6})
    rule = views.split_rule(holds, _rows(holds))
    assert (rule["verdict"], rule["below"], rule["level"], rule["above"]) == ("holds", 4, 0, 0)
    assert (rule["worst_eq"], rule["best_cw"]) == ("gd", "adam") and rule["cmp"].sign == -1
    level = _values({"muon": -1.0, "gd": 0.0, "adam": 0.05, "lion": 0.6})
    rule = views.split_rule(level, _rows(level))
    assert (rule["verdict"], rule["level"]) == ("level", 1)
    assert rule["cmp"].words("below", "above") == stats.LEVEL
    fails = _values({"muon": -1.0, "gd": 0.7, "adam": 0.05, "lion": 0.6})
    assert views.split_rule(fails, _rows(fails))["verdict"] == "fails"


def test_seed_values_read_the_selected_lr_and_table2_under_the_rule(records):
    rows = ms.selection_rows(records["zoo"], "oracle")
    values = views.seed_values(records["zoo"], rows)
    for r in rows:
        assert sorted(values[r["method"]]) == [42, 123, 456]
        assert statistics.fmean(values[r["method"]].values()) == pytest.approx(r["rec"])
    # the paper's split holds by the means; three seeds do not resolve Shampoo against Lion
    rule = views.split_rule(values, rows)
    assert ms.split_summary(rows)["clean"] and rule["verdict"] == "level"
    assert rule["cmp"].paired_n == 3 and rule["cmp"].sign == 0 and rule["above"] == 0
    assert views.ranking_pairs(values, rows)[0]["words"] == "ahead"  # Muon against GD


def test_the_decay_comparisons_pair_with_table2(records):
    cmps = sensing_controls.decay_comparisons(records["decay"], records["zoo"])
    assert {"adam_l2_adam", "gd_l2_gd", "muon_wd_adamw"} <= set(cmps)
    assert all(c is not None and c.paired_n == 3 for c in cmps.values())
    assert cmps["muon_wd_adam_l2"].sign == -1


def test_the_survival_counts_read_the_split_under_the_rule(records):
    html, _, counts = sensing_controls.survival(records)
    assert "split (rule)" in html
    assert counts["n_rule_holds"] + counts["n_rule_fails"] <= counts["n_settings"]
    assert counts["n_clean_resolved"] <= counts["n_clean"]
    assert counts["n_broken_resolved"] <= counts["n_settings"] - counts["n_clean"]


def test_paper_gaps_and_late_change_over_seeds(records):
    rows = ms.selection_rows(records["zoo"], "oracle")
    values = views.seed_values(records["zoo"], rows)
    zoo = ms.get_config("paper").part("zoo")
    gaps = views.paper_gaps(rows, values, ms.published_table2(zoo), "signum")
    assert gaps["signum_pub_diff"].startswith(("-", "+")) and gaps["signum_pub_below"]
    assert views.paper_gaps(rows, values, None, "signum")["signum_pub_diff"] == "—"
    late = views.late_change_seeds(records["zoo"], rows, zoo.seeds)
    assert late["late_runs_all"] == len(rows) * len(zoo.seeds) >= late["late_settled_all"]
