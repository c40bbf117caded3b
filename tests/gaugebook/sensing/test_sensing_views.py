"""What the matrix-sensing chapter shows (gaugebook.sensing.sensing_views, its controls and its
weight-decay section in gaugebook.sensing.sensing_controls)."""

import pytest

pytest.importorskip("gaugebook.present.viz")

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
        assert r["diff"] == abs(r["ours"] - r["published"]) < 1e-5


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
