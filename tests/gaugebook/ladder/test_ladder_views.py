"""The scaling chapter's tables, numbers and figure (gaugebook.ladder.ladder_views), from
the committed paper-scale records: the n = 40 comparison of the two protocols, the transposed
recovery tables, Table 11 beside ours, and a figure whose legend matches what is drawn."""

from __future__ import annotations

import math

import matplotlib
import pytest

matplotlib.use("Agg")

from gaugebook.ladder import ladder_paper
from gaugebook.ladder import ladder_runs as ladder
from gaugebook.ladder import ladder_views as views
from gaugebook.sensing import sensing_runs as ms
from gaugekit.optim.registry import get_spec


@pytest.fixture(scope="module")
def committed():
    config = ladder.get_config("paper")
    records = ladder.collect("paper", parts=["n40", "n96"], mode="read").records
    return config, records


def test_n40_compares_the_two_protocols_from_their_records(committed):
    _, records = committed
    table2 = ms.collect("paper", parts=["zoo"], mode="read").records["zoo"]
    html, values = ladder_paper.n40_protocols(table2, records)
    # GD and signum under each protocol, beside each table's published value
    pub2, pub11 = ms.PUBLISHED_TABLE2, ladder.PUBLISHED_LADDER_REC
    for value in (pub2["gd"][0], pub2["signum"][0], pub11["gd"][40], pub11["signum"][40]):
        assert f"{value:.4f}" in html
    assert "20,000" in html and "40,000" in html and "float32" in html and "float64" in html
    assert "ScaledGD" in html and "holds:" in html and "fails:" in html
    # the numbers the text quotes: what differs, GD's rates against Table 2's grid, the splits
    assert values["n40_differ"] == "budget, precision, gate, gd_grid, optimizers"
    assert max(values["n40_gd_lr"], values["n40_gd_lr_t2"]) < values["n40_gd_grid_min"]
    assert values["n40_signum_same"]
    assert values["n40_t2_clean"] and not values["n40_ladder_clean"]
    assert values["n40_ladder_eq_method"] == "scaled_gd"
    assert values["n40_ladder_cw"] == values["n40_signum_ch9"] < values["n40_signum_ch4"]


def test_tables_fit_by_shape_and_say_ours_beside_published(committed):
    config, records = committed
    sizes = ladder.size_rows(config, records, "size", "oracle_loose")
    rec = views.rec_table(sizes, "size")
    assert "n = 40 (3 seeds)" in rec and "n = 96 (1 seed)" in rec and "n = 64" not in rec
    assert rec.count("<tr>") == 1 + len(ladder.LADDER_METHODS)  # one row per optimizer
    compared = ladder_paper.comparison_rows(config, sizes)
    pub = views.published_table(compared)
    assert "n = 40, seeds 3 / 3" in pub and "0.1078 / 0.1078" in pub
    values = views.recovery_values(config, sizes, {"rank": [], "mdof": []})
    assert values["ladder_same_where"] == "n = 40"  # the only point with the paper's seeds
    assert values["ladder_off_methods"] == "rmsprop"
    assert values["ladder_same_n"] == values["ladder_same_total"] - 1
    assert values["ladder_off_pub"] == ladder.PUBLISHED_LADDER_REC["rmsprop"][40]


def test_survival_counts_only_the_papers_sizes_and_claims(committed):
    config, records = committed
    ran = [r for r in ladder.size_rows(config, records, "size", "oracle_loose") if r["runs"]]
    surv = views.survival(config, ran)
    assert set(surv) == set(views.CLAIM_TEXT)
    assert surv["muon_exact"] == ([40, 96], [])
    assert surv["signum_exact"] == ([96], [])  # the paper says nothing of signum at n = 40


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
    config = ladder.get_config("paper")
    values = views.protocol_values(config, {}, [], "oracle_loose")
    assert values["gate_changes"] == values["rec96_total"] == values["rec96_seeds"] == 0
    assert math.isnan(values["rec96_worst"]) and math.isnan(values["rms96_ours"])


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
    assert changed and all(c["lr"] != c["lr_t2"] for c in changed)
    values = views.protocol_values(config, records, ran, "oracle_loose")
    assert values["gate_changes"] == len(changed)
    assert (values["gate_method"], values["gate_n"]) == (changed[0]["method"], changed[0]["n"])
    assert math.isfinite(values["rms96_ours"])  # n96 seed 42 has RMSProp
    assert values["rec96_same"] == values["rec96_total"] - 1  # all but RMSProp's schedule
    assert values["rec96_worst"] < 0.01


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
    assert values["tab_ladder_claims"].count("<tr>") == 1 + len(views.CLAIM_TEXT)
    # every method at every size of the paper has a value, NaN where nothing is recorded
    assert {f"ours_{m}_{n}" for m in ladder.LADDER_METHODS
            for n in ladder.PUBLISHED_LADDER_SEEDS} <= set(values)
    assert math.isnan(values["ours_gd_384"])
    gd40 = next(r for r in ran if r["n"] == 40)["rows"]["gd"]
    assert values["ours_gd_40"] == gd40["rec"] <= values["worst_gd_40"] == max(gd40["rec_seeds"])


def test_the_n40_values_prefix_every_name(committed):
    _, records = committed
    table2 = ms.collect("paper", parts=["zoo"], mode="read").records["zoo"]
    values = ladder_paper.n40_values(table2, records)
    assert "tab_ladder_n40" in values and all(k.startswith(("n40_", "tab_")) for k in values)
    assert values["n40_gd_lr_ch4"] == values["n40_gd_grid_min"]


def _run(method, seed, lr, rec):
    return {"config": {"method": method, "seed": seed, "hparams": {"lr": lr}},
            "metrics": {"rec": rec}, "status": "ok"}


def _sel(method, lr, rec):
    return {"method": method, "lr": lr, "rec": rec, "equivariant": get_spec(method).equivariant,
            "at_grid_edge": False, "interpolated": True}


def test_the_one_rule_pairs_seeds_and_reads_the_split_three_ways():
    recs = {"gd": (0.10, 0.12, 0.14), "shampoo": (0.30, 0.28, 0.33), "lion": (0.45, 0.40, 0.50),
            "signum": (0.31, 0.29, 0.34)}
    records = [_run(m, s, 1e-3, x) for m, xs in recs.items()
               for s, x in zip((42, 123, 456), xs, strict=True)]
    records.append(_run("gd", 42, 3e-3, 9.9))  # another rate: not the selection's
    rows = {m: _sel(m, 1e-3, sum(xs) / 3) for m, xs in recs.items()}
    assert ladder_paper.seed_recs(records, "gd", 1e-3) == {42: 0.10, 123: 0.12, 456: 0.14}
    assert ladder_paper.seed_recs(records, "gd", 1e-3, [42]) == {42: 0.10}
    c = ladder_paper.method_comparison(records, rows, "signum", "shampoo")
    assert c.paired_n == 3 and c.diff == pytest.approx(0.01)
    # signum just above Shampoo on every seed: no cw below any eq, but Shampoo not resolved
    # below signum either: by the means the split holds, by the rule it is unresolved
    split = ladder_paper.split_by_rule(records, rows)
    assert split["reading"] == "unresolved" and split["failing"] == []
    assert split["boundary"].sign == 0
    # a clear gap on every seed: the rule says the split holds
    far = {"signum": (0.61, 0.59, 0.64)}
    records2 = [r for r in records if r["config"]["method"] != "signum"] + [
        _run("signum", s, 1e-3, x) for s, x in zip((42, 123, 456), far["signum"], strict=True)]
    rows2 = {**rows, "signum": _sel("signum", 1e-3, 0.613)}
    assert ladder_paper.split_by_rule(records2, rows2)["reading"] == "holds"
    # negative control: signum below Shampoo on every seed fails it
    low = [r for r in records if r["config"]["method"] != "signum"] + [
        _run("signum", s, 1e-3, x) for s, x in zip((42, 123, 456), (0.01, 0.02, 0.015),
                                                   strict=True)]
    rows3 = {**rows, "signum": _sel("signum", 1e-3, 0.015)}
    failing = ladder_paper.split_by_rule(low, rows3)
    assert failing["reading"] == "fails" and ("signum", "shampoo") in failing["failing"]
    assert ladder_paper.method_comparison(records, rows, "adam", "gd") is None


def test_the_claims_under_the_rule_and_the_coverage_from_the_committed_records(committed):
    config, records = committed
    ran = [r for r in ladder.size_rows(config, records, "size", "oracle_loose") if r["runs"]]
    rule = views.rule_claims(records, ran)
    assert rule[40]["seeds"] == 3 and rule[96]["seeds"] == 1
    assert rule[40]["split"]["reading"] == "fails"
    assert [c.sign for c in rule[40]["adam"].values()] == [1, 1]
    # one seed gives no interval: nothing is resolved at n = 96
    assert rule[96]["split"]["reading"] == "unresolved"
    assert all(c.sign == 0 for c in rule[96]["adam"].values())
    values = views.rule_values(rule)
    assert values["adam_gd_96"].startswith("+0.40 (95 % CI —") and values["adam_gd_384"] == "—"
    cov = views.coverage_values(config, ran)
    assert cov["ladder_ran"] == "n = 40 and 96" and cov["ladder_pub_range"] == "n = 40 to 384"
    assert cov["ladder_not_run_list"] == [64, 128, 192, 256, 384]
    assert cov["ladder_ran_seeds"] == "three seeds at n = 40; one seed at n = 96"
    table2 = ms.collect("paper", parts=["zoo"], mode="read").records["zoo"]
    n40 = ladder_paper.n40_values(table2, records)
    # by the means Table 2's split holds; by the rule Shampoo and Lion are level
    assert n40["n40_t2_clean"] and n40["n40_t2_rule"] == "unresolved"
    assert n40["n40_nine_rule"] == "fails" and n40["n40_nine_boundary_sign"] == 1
