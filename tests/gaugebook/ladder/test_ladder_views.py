"""The scaling chapter's tables, sentences and figure (gaugebook.ladder.ladder_views), from
the committed paper-scale records: the n = 40 comparison of the two protocols, the transposed
recovery tables, Table 11 beside ours, and a figure whose legend matches what is drawn."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from gaugebook.ladder import ladder_paper
from gaugebook.ladder import ladder_runs as ladder
from gaugebook.ladder import ladder_views as views
from gaugebook.sensing import sensing_runs as ms


@pytest.fixture(scope="module")
def committed():
    config = ladder.get_config("paper")
    records = ladder.collect("paper", parts=["n40", "n96"], mode="read").records
    return config, records


def test_n40_compares_the_two_protocols_from_their_records(committed):
    _, records = committed
    table2 = ms.collect("paper", parts=["zoo"], mode="read").records["zoo"]
    html, text = ladder_paper.n40_protocols(table2, records)
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
    compared = ladder_paper.comparison_rows(config, sizes)
    pub = views.published_table(compared)
    assert "n = 40, seeds 3 / 3" in pub and "0.1078 / 0.1078" in pub
    text = views.agreement_text(compared)
    assert "(n = 40)" in text and "not RMSProp" in text


def test_survival_text_reads_the_lists():
    assert views.survival_text([40, 64], []).endswith("agree with the paper at every size compared")
    assert views.survival_text([], [40]).endswith("disagree with the paper at every size compared")
    assert views.survival_text([64], [40]).endswith("at n = 64 and disagree at n = 40")
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
    from gaugebook.present import viz

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


def test_the_published_values_glue_every_table_11_mean(committed):
    config, _ = committed
    values = views.published_values(config, "oracle_loose")
    pub = [k for k in values if k.startswith("pub_") and k[-1].isdigit()]
    assert len(pub) == sum(len(v) for v in ladder.PUBLISHED_LADDER_REC.values())
    assert values["pub_gd_40"] == ladder.PUBLISHED_LADDER_REC["gd"][40]
    big = config.arm("size")[-1].problem
    assert values["ladder_big_n"] == big.n == 384
    assert 0 < values["ladder_big_free"] == 1 - big.m / big.n ** 2 < 1


def test_the_settings_values_count_the_plan_and_the_parts(committed):
    config, records = committed
    sizes = ladder.size_rows(config, records, "size", "oracle_loose")
    values = views.settings_values(config, records, sizes)
    planned = len(config.part(sizes[0]["part"]).specs())
    assert values["ladder_runs_per_seed"] * values["ladder_seeds_planned"] == planned
    assert "n40" in values["ladder_parts_done"].data
    assert "n384" in values["ladder_parts_missing"].data  # not read by the fixture
    assert values["tab_ladder_settings"].count("<tr>") == 1 + len(sizes)


def test_gate_changes_name_only_selections_that_move(committed):
    config, records = committed
    ran = [r for r in ladder.size_rows(config, records, "size", "oracle_loose") if r["runs"]]
    changed = views.gate_changes(config, records, ran)
    for line in changed:
        old, new = line.split(": lr ")[1].split(",")[0].split(" → ")
        assert old != new
    values = views.protocol_values(config, records, ran, "oracle_loose")
    k = len(changed)
    assert values["gate_changed_n"].data.startswith(f"{k} selection")
    assert "decayed against" in values["rms96_text"].data  # n96 seed 42 has RMSProp


def test_an_arm_without_records_shows_the_command_that_makes_it(committed):
    config, records = committed
    arms = {arm: ladder.size_rows(config, records, arm, "oracle_loose")
            for arm in ("rank", "mdof")}
    assert not any(row["runs"] for rows in arms.values() for row in rows)
    values = views.arm_values(config, arms)
    for arm in ("rank", "mdof"):
        table = values[f"tab_ladder_{arm}"]
        assert table.count("python -m gaugebook run ladder") == len(config.arm(arm))
    assert values["arm_n"] == config.arm("rank")[0].problem.n


def test_the_claims_values_say_where_each_claim_stands(committed):
    config, records = committed
    ran = [r for r in ladder.size_rows(config, records, "size", "oracle_loose") if r["runs"]]
    values = views.claims_values(config, ran)
    assert {f"surv_{c}" for c in views.CLAIM_TEXT} <= set(values)
    assert values["ladder_sizes_ran"].data == "n = 40 (3 seeds), n = 96 (1 seed)"
    assert values["surv_note"].data.startswith("Sizes outside")


def test_the_n40_values_prefix_every_sentence(committed):
    _, records = committed
    table2 = ms.collect("paper", parts=["zoo"], mode="read").records["zoo"]
    values = ladder_paper.n40_values(table2, records)
    assert set(values) == {"tab_ladder_n40", "n40_differ", "n40_gd", "n40_signum", "n40_split"}
    assert values["n40_gd"].data.startswith("On the ladder's grid GD selects")
