"""The scaling chapter's tables, sentences and figure (gaugekit.report.ladder), from
the committed paper-scale records: the n = 40 comparison of the two protocols, the transposed
recovery tables, Table 11 beside ours, and a figure whose legend matches what is drawn."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from gaugekit.experiments import ladder  # noqa: E402
from gaugekit.experiments import matrix_sensing as ms  # noqa: E402
from gaugekit.report import ladder as views


@pytest.fixture(scope="module")
def committed():
    config = ladder.get_config("paper")
    records = ladder.collect("paper", parts=["n40", "n96"], mode="read").records
    return config, records


def test_n40_compares_the_two_protocols_from_their_records(committed):
    _, records = committed
    table2 = ms.collect("paper", parts=["zoo"], mode="read").records["zoo"]
    html, text = views.n40_protocols(table2, records)
    # GD and signum under each protocol, beside each table's published value
    pub2, pub11 = ms.PUBLISHED_TABLE2, ladder.PUBLISHED_LADDER_REC
    for value in (pub2["gd"][0], pub2["signum"][0], pub11["gd"][40], pub11["signum"][40]):
        assert f"{value:.4f}" in html
    assert "20,000" in html and "40,000" in html and "float32" in html and "float64" in html
    assert "ScaledGD" in html and "holds:" in html and "fails:" in html
    assert "the budget" in text["differ"] and "the schedules" in text["differ"].split(";")[1]
    assert "below 0.01" in text["gd"]
    assert "cannot tell which" in text["signum"]
    assert text["split"].startswith("the split between the two classes holds")


def test_tables_fit_by_shape_and_say_ours_beside_published(committed):
    config, records = committed
    sizes = ladder.size_rows(config, records, "size", "oracle_loose")
    rec = views.rec_table(sizes, "size")
    assert "n = 40 (3 seeds)" in rec and "n = 96 (1 seed)" in rec and "n = 64" not in rec
    assert rec.count("<tr>") == 1 + len(ladder.LADDER_METHODS)  # one row per optimizer
    compared = ladder.comparison_rows(config, sizes)
    pub = views.published_table(compared)
    assert "n = 40, seeds 3 / 3" in pub and "0.1078 / 0.1078" in pub
    text = views.agreement_text(compared)
    assert "(n = 40)" in text and "not RMSProp" in text


def test_survival_text_reads_the_lists():
    assert views.survival_text([40, 64], []) == "agrees at every size compared"
    assert views.survival_text([], [40]) == "disagrees at every size compared"
    assert views.survival_text([64], [40]) == "agrees at n = 64; disagrees at n = 40"
    assert views.survival_text([], []).startswith("not compared")


def test_recovery_figure_has_two_panels_and_one_legend_of_methods(committed):
    config, records = committed
    sizes = ladder.size_rows(config, records, "size", "oracle_loose")
    fig = views.recovery_figure(sizes)
    ours, paper = fig.axes
    assert len(fig.legends) == 1 and ours.get_legend() is None and paper.get_legend() is None
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [views.label(m) for m in ladder.LADDER_METHODS]
    # no empty ticks: ours at the recorded sizes, the paper's at its own
    assert list(ours.get_xticks()) == [40, 96]
    assert list(paper.get_xticks()) == [40, 64, 96, 128, 192, 256, 384]


def test_value_curves_colours_methods_and_its_published_entry_matches_the_markers():
    from gaugekit.report import viz

    fig = viz.value_curves([40, 64], {"gd": [0.1, None], "adam": [0.5, 0.6]},
                           published={"gd": {40: 0.108}})
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert lines["GD"].get_color() == viz.method_color("gd")
    assert lines["Adam"].get_color() == viz.method_color("adam")
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["GD", "Adam", "published"]
    bare = viz.value_curves([40], {"gd": [0.1]}, legend=False)
    assert bare.axes[0].get_legend() is None


def test_an_empty_scale_says_so_instead_of_an_empty_table_or_nan():
    assert "no record of seed 42" in views.record_table([])
    assert "nothing is set beside Table 11" in views.published_table([])
    assert "no record of seed 42" in views.record_text([], 0)
    assert "nan" not in views.record_text([], 0)
