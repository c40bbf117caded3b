"""What the matrix-sensing chapter shows (gaugekit.report.matrix_sensing)."""

import pytest

pytest.importorskip("gaugekit.report.viz")

from gaugekit.experiments import matrix_sensing as ms  # noqa: E402
from gaugekit.report import matrix_sensing as views


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
    summary = views.late_change_summary(views.selected_runs(records["zoo"], rows, zoo.seeds[0]))
    assert summary["late_verdict"] in ("along the way", "mostly along the way",
                                      "mostly at the end")
    assert summary["late_runs"] == len(rows)
    assert 0 <= summary["late_settled"] <= summary["late_runs"]


def test_the_decay_table_names_its_gate_in_one_word(records):
    html = views.decay_html(records["decay"])
    assert ">paper&#x27;s<" in html and ">loose<" in html
    assert "mean training loss over seeds" not in html
