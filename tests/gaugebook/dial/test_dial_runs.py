"""The dial experiment: the paper's protocol in the config, shared runs between parts, the dial's
endpoints inside the stacked loop, the selection rules, the summaries, a tiny sweep end to end."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch.testing import assert_close

from gaugebook.dial import dial_runs as dx
from gaugebook.dial import dial_summary as dn
from gaugebook.dial import flow_summary as fn
from gaugebook.engine import collection
from gaugebook.engine.factor_trainer import train_factored_batch
from gaugebook.engine.selection import ORACLE, select
from gaugebook.engine.spec import RunSpec
from gaugebook.engine.sweep import run_sweep
from gaugebook.experiments import get_experiment
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.measurements import SENSING
from gaugebook.sensing.run_specs import Budget, Problem

# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


def test_paper_config_is_the_papers_protocol():
    cfg = dx.get_config("paper")
    p = cfg.problem
    assert (p.n, p.r, p.k, p.m, p.init_scale) == (40, 3, 40, 462, 1e-3)
    assert (cfg.budget.num_steps, cfg.budget.tol, cfg.budget.check_every) == (30_000, 1e-7, 200)
    assert cfg.seeds == (42, 123, 456) and len(cfg.edge_seeds) == 10
    assert cfg.lrs == (1e-3, 3e-3, 1e-2, 3e-2, 0.1)
    assert set(cfg.powers) == set(dx.PUBLISHED_DIAL["rms"]) == {1.0, 0.75, 0.5, 0.25, 0.0}
    assert min(cfg.edge_lrs) < min(cfg.lrs) and dx.PUBLISHED_LR_EDGE["lr"] in cfg.edge_lrs
    assert {0.0, 1.0} <= set(cfg.edge_powers)
    assert cfg.long_budget.num_steps == dx.PUBLISHED_FLOW_LONG["num_steps"]
    assert cfg.long_lr == dx.PUBLISHED_FLOW_LONG["lr"]
    assert set(dx.PUBLISHED_FLOW_ROWS) < set(dx.FLOW_ROWS)


def test_every_power_at_every_lr_and_shared_runs():
    cfg = dx.get_config("paper")
    rms, geo = cfg.specs("dial_rms"), cfg.specs("dial_geomean")
    assert len(rms) == len(cfg.powers) * len(cfg.lrs) * len(cfg.seeds) == len({s.run_id
                                                                                for s in rms})
    cells = {(s.config["hparams"]["precond_power"], s.config["hparams"]["lr"]) for s in rms}
    assert len(cells) == len(cfg.powers) * len(cfg.lrs)
    # Adam (p = 1) is one run for both scalars; every other power differs
    shared = {s.run_id for s in rms} & {s.run_id for s in geo}
    assert len(shared) == len(cfg.lrs) * len(cfg.seeds)
    assert all(s.config["hparams"]["precond_power"] == 1.0 for s in rms if s.run_id in shared)
    edge = {s.run_id for s in cfg.specs("lr_edge")}
    assert len(edge & {s.run_id for s in rms}) == 2 * len(cfg.seeds)  # lr 1e-3, p = 0 and 1


def test_experiment_is_registered_and_quick_is_smaller():
    exp = get_experiment("dial")
    assert exp is dx.EXPERIMENT and exp.parts("quick") == exp.parts("paper")
    quick, paper = dx.get_config("quick"), dx.get_config("paper")
    assert quick.problem.n < paper.problem.n
    assert sum(len(quick.specs(p)) for p in quick.part_names) < sum(
        len(paper.specs(p)) for p in paper.part_names)
    with pytest.raises(ValueError, match="Invalid part"):
        paper.specs("nope")


def test_flow_rows_are_recognised_from_their_records():
    cfg = dx.get_config("paper")
    names = [dn.flow_row_name({"config": s.config}) for s in cfg.specs("flow_rows")]
    per_row = len(cfg.flow_lrs) * len(cfg.seeds)
    assert names == [n for n in dx.FLOW_ROWS for _ in range(per_row)]
    assert dn.flow_row_name({"config": cfg.specs("dial_rms")[0].config}) == "other"
    long = cfg.specs("flow_long")[0].config
    assert dn.flow_row_name({"config": long}) == "globalnorm_p0_rms"
    assert long["hparams"]["precond_power"] == 0.0 and long["hparams"]["flow"] is True


# --------------------------------------------------------------------------------------------
# the dial's endpoints through the stacked loop
# --------------------------------------------------------------------------------------------


def _spec(method: str, hparams: dict, lr: float, seed: int = 1) -> RunSpec:
    config = {
        "kind": "factored",
        "problem": {"n": 6, "r": 1, "k": 6, "m": 22, "num_val": 5, "init_scale": 0.1},
        "method": method, "hparams": {**hparams, "lr": lr}, "schedule": "constant",
        "budget": {"num_steps": 150, "tol": 1e-30, "check_every": 50, "diverge_above": 1e8},
        "seed": seed, "dtype": "float64",
    }
    return RunSpec("test", "tiny", config, {"instance": seed})


def _rec(spec: RunSpec) -> float:
    return train_factored_batch([spec], SENSING)[0].metrics["rec"]


@pytest.mark.parametrize(("power", "scalar", "method"), [(1.0, "rms", "adam"),
                                                         (0.0, "rms", "scalar_adam")])
def test_dial_endpoints_are_adam_and_shared_scale_adam(power, scalar, method):
    hp = ms.PAPER_HPARAMS[method]
    ours = _rec(_spec("flow_adam", dx.dial_hparams(power, scalar), 0.01))
    assert_close(torch.tensor(ours), torch.tensor(_rec(_spec(method, hp, 0.01))),
                 rtol=1e-9, atol=1e-14)


def test_geomean_at_p0_is_not_shared_scale_adam():
    # negative control: the geometric-mean scalar changes the step at p = 0
    ours = _rec(_spec("flow_adam", dx.dial_hparams(0.0, "geomean"), 0.01))
    ref = _rec(_spec("scalar_adam", ms.PAPER_HPARAMS["scalar_adam"], 0.01))
    assert abs(ours - ref) > 1e-6


# --------------------------------------------------------------------------------------------
# selection and summaries on synthetic records
# --------------------------------------------------------------------------------------------


PAPER = dx.get_config("paper")


def _record(p, lr, seed, rec, loss, *, status="ok", erank=5.0, steps=400, scalar="rms"):
    return {"status": status, "run_id": f"{p}-{lr}-{seed}",
            "config": {"method": "flow_adam", "hparams": {**dx.dial_hparams(p, scalar),
                                                          "lr": lr},
                       "problem": PAPER.problem.to_config(),
                       "budget": PAPER.budget.to_config()},
            "metrics": {"rec": rec, "train_loss": loss, "interpolated": loss < 1e-7,
                        "effective_rank": erank, "steps": steps}}


def test_paper_rule_gates_on_the_mean_loss_the_oracle_on_every_seed():
    # lr 1e-3: best rec, one seed above the bar but the mean loss below 1e-4
    records = [_record(0.0, 1e-3, s, 0.10, loss) for s, loss in ((1, 1e-8), (2, 2e-5))]
    records += [_record(0.0, 1e-2, s, 0.30, 1e-9) for s in (1, 2)]
    records += [_record(0.0, 0.1, 1, 0.05, 1e-9), _record(0.0, 0.1, 2, math.nan, math.nan,
                                                          status="diverged")]
    paper = dn.dial_rows(records, "rms")[0]
    strict = dn.dial_rows(records, "rms", ORACLE)[0]
    assert paper["lr"] == 1e-3 and paper["gated"] and paper["at_lowest_lr"]
    assert not paper["all_interpolated"]
    assert strict["lr"] == 1e-2 and strict["rec"] == pytest.approx(0.30)
    assert paper["published"] == dx.PUBLISHED_DIAL["rms"][0.0]
    # published values belong to the paper's setting only
    records_small = [{**r, "config": {**r["config"], "budget": {**r["config"]["budget"],
                                                                "num_steps": 10}}}
                     for r in records]
    assert math.isnan(dn.dial_rows(records_small, "rms")[0]["published"])
    # a diverged seed removes its lr from both rules
    assert select(records, dx.PAPER_PROTOCOL)["flow_adam"].candidates[0.1][0] is False


def test_fixed_lr_table_reads_monotonicity_per_lr():
    recs = {1e-3: (0.6, 0.4, 0.2), 0.1: (0.6, 0.5, 0.7)}
    records = [_record(p, lr, s, rec + 0.01 * s, 1e-9, erank=10 * rec)
               for lr, row in recs.items() for p, rec in zip((1.0, 0.5, 0.0), row, strict=True)
               for s in (1, 2)]
    table = dn.fixed_lr_table(records)
    assert table["lrs"] == [1e-3, 0.1] and table["powers"] == [1.0, 0.5, 0.0]
    assert table["monotone_rec"] == [True, False] == table["monotone_erank"]
    assert table["rec"][0][2] == pytest.approx(0.215)
    assert table["published"][0] == [dx.PUBLISHED_FIXED_LR[1e-3][p] for p in (1.0, 0.5, 0.0)]
    # the text's numbers: monotone at one lr of two, the largest lr, the cell of the largest gap
    numbers = dn.fixed_lr_numbers(table)
    assert (numbers["fixed_mono_count"], numbers["fixed_num_lrs"]) == (1, 2)
    assert numbers["fixed_lr_max"] == 0.1
    i = table["lrs"].index(numbers["fixed_max_gap_lr"])
    j = table["powers"].index(numbers["fixed_max_gap_p"])
    assert numbers["fixed_max_gap"] == abs(table["rec"][i][j] - table["published"][i][j])
    # a cell that misses the bar does not count for the monotonicity
    records[-1]["metrics"].update(train_loss=1e-3, interpolated=False)
    records[-2]["metrics"].update(train_loss=1e-3, interpolated=False)
    table = dn.fixed_lr_table(records)
    assert table["interpolated"][1] == [True, True, False] and table["monotone_rec"][1] is True


def test_lr_edge_rows_count_seeds_and_bars():
    records = [_record(0.0, 3e-4, s, r, loss) for s, r, loss in
               ((1, 0.1, 1e-8), (2, 0.2, 1e-8), (3, 0.3, 1e-6))]
    row = dn.lr_edge_rows(records)[0]
    assert (row["seeds"], row["ok"], row["interpolated"]) == (3, 3, 2)
    assert row["rec"] == pytest.approx(0.2) and row["rec_sd"] == pytest.approx(0.1)
    assert dn.seed_stats([0.5]) == (0.5, pytest.approx(math.nan, nan_ok=True))


def test_lr_edge_numbers_compare_the_ends_with_the_change_across_the_grid():
    recs = {(0.0, 1e-4): 0.12, (0.0, 3e-4): 0.14, (1.0, 1e-4): 0.50, (1.0, 3e-4): 0.52}
    records = [_record(p, lr, s, rec, 1e-9) for (p, lr), rec in recs.items() for s in (1, 2)]
    numbers = dn.lr_edge_numbers(records)
    assert numbers["edge_min_lr"] == numbers["edge_best_p0_lr"] == 1e-4
    assert numbers["edge_change_p0"] == pytest.approx(-0.02)
    assert numbers["edge_gap"] == pytest.approx(0.38)
    assert numbers["edge_rec"] == pytest.approx(0.14) and numbers["edge_sd"] == 0.0
    assert numbers["edge_sd_ddof"] == dx.PUBLISHED_LR_EDGE["sd_ddof"]


# --------------------------------------------------------------------------------------------
# a tiny sweep end to end, and the paper scale reads without training
# --------------------------------------------------------------------------------------------


def _tiny_config() -> dx.DialConfig:
    problem = Problem(6, 1, 6, 22, 5, 0.1)
    return dx.DialConfig(
        scale="quick", problem=problem, budget=Budget(200, tol=1e-5, check_every=50),
        long_budget=Budget(300, tol=1e-5, check_every=50), seeds=(1, 2),
        powers=(1.0, 0.0), lrs=(0.01, 0.03), gd_lrs=(0.1,), edge_powers=(0.0, 1.0),
        edge_lrs=(0.003, 0.01), edge_seeds=(1, 2, 3), flow_lrs=(0.1,), long_lr=0.1,
        persist_records=False, dtype="float64",
    )


def test_a_tiny_sweep_fills_every_summary(tmp_path, monkeypatch):
    monkeypatch.setitem(dx.get_config.builders, "quick", _tiny_config)
    parts = [p for p in _tiny_config().part_names if p != "flow_ablation"]  # tested below
    report = run_sweep(dx.EXPERIMENT, tmp_path, scale="quick", parts=parts, progress=False)
    assert report.statuses["error"] == 0
    got = dx.collect("quick", tmp_path, parts=parts)
    assert got.report.ran == 0
    assert {p: len(r) for p, r in got.records.items()} == {
        p: len({s.run_id for s in _tiny_config().specs(p)}) for p in parts}
    rows = dn.dial_rows(got.records["dial_rms"], "rms")
    assert [r["p"] for r in rows] == [1.0, 0.0]
    assert all(math.isfinite(r["rec"]) for r in rows)
    assert len(dn.flow_rows(got.records["flow_rows"])) == len(dx.FLOW_ROWS)
    assert len(dn.lr_edge_rows(got.records["lr_edge"])) == 4
    # the chapter's summaries run off the paper's setting too (no published column there)
    numbers = dn.dial_numbers(got.records, _tiny_config())
    assert numbers["dial_num_compared"] == 0 and math.isnan(numbers["dial_max_gap"])
    assert len(dn.dial_table(got.records)) == 4
    assert all(r["published_text"] is None for r in fn.flow_table(got.records["flow_rows"]))
    assert fn.flow_numbers(got.records, _tiny_config())["long_seeds"] == 3
    edge = dn.lr_edge_numbers(got.records["lr_edge"])
    assert edge["edge_gap"] == pytest.approx(
        abs(edge["edge_best_p100_rec"] - edge["edge_best_p0_rec"]), nan_ok=True)
    assert dn.fixed_lr_numbers(dn.fixed_lr_table(got.records["dial_rms"]))["fixed_num_lrs"] == 2
    assert run_sweep(dx.EXPERIMENT, tmp_path, scale="quick", parts=parts, progress=False).ran == 0


def test_paper_scale_reads_records_and_never_trains(tmp_path, monkeypatch):
    monkeypatch.setattr(collection, "project_root", lambda experiment: tmp_path)
    monkeypatch.delenv("GAUGEKIT_RECORDS", raising=False)
    assert collection.records_dir(dx.NAME, "paper") == tmp_path / "results" / "dial" / "paper"
    with pytest.raises(collection.MissingRecords, match="--part dial_rms"):
        dx.collect("paper", parts=["dial_rms"], mode="read")


def test_ablation_records_rebuild_the_columns_of_train_variants():
    from gaugebook.dial import flow_runs as fx

    cfg = dataclasses.replace(
        fx.QUICK, problem=Problem(6, 1, 6, 22, 0, 0.1),
        budget=Budget(60, tol=1e-5, check_every=20), seeds=(1, 2), lrs=(0.01, 0.03),
        dial_factors=(1.0, 0.5), stiffness_grid=(2.0,))
    specs = dx.ablation_specs(cfg)
    assert len(specs) == len(fx.ablation_variants(cfg)) * 4 == len({s.run_id for s in specs})
    records = [{"config": s.config, "metrics": r.metrics, "status": r.status}
               for s, r in zip(specs, dx.run_ablation(specs), strict=True)]
    rebuilt = dx.ablation_results(records)
    direct = fx.train_variants(fx.ablation_variants(cfg), cfg)
    assert set(rebuilt) == set(direct)
    for label, cols in direct.items():
        for key, value in cols.items():
            assert torch.equal(rebuilt[label][key].to(value.dtype), value), (label, key)
    rates = fn.trigger_rates(rebuilt)
    assert rates["FlowAdam (invariant)"].min() > 0.5  # the flow fires (not an empty check)


def test_seed_stats_sample_and_population():
    vals = [0.1, 0.2, 0.4]
    mean, sample = dn.seed_stats(vals)
    _, population = dn.seed_stats(vals, ddof=0)
    assert mean == pytest.approx(0.7 / 3)
    # the paper's collect.py prints np.std (ddof 0), its dial_flowlong.py np.std(ddof=1)
    assert population == pytest.approx(sample * math.sqrt(2 / 3))
    assert dn.seed_stats([0.5], ddof=0) == (0.5, 0.0)
    with pytest.raises(ValueError, match="^Invalid ddof"):
        dn.seed_stats(vals, ddof=2)
    assert dx.PUBLISHED_LR_EDGE["sd_ddof"] == 0 and dx.PUBLISHED_FLOW_LONG["sd_ddof"] == 1


def test_flow_rows_by_the_papers_gate_give_the_published_rows():
    records = dx.collect("paper", parts=["flow_rows"], mode="read").records["flow_rows"]
    strict = {r["row"]: r for r in dn.flow_rows(records)}
    for name, value in dx.PUBLISHED_FLOW_ROWS.items():
        assert strict[name]["all_interpolated"]
        assert strict[name]["rec"] == pytest.approx(value, abs=1e-3), name
    # negative control: the loose gate (mean below 1e-4) picks runs that stopped above the bar
    loose = {r["row"]: r for r in dn.flow_rows(records, dx.PAPER_PROTOCOL)}
    assert not loose["globalnorm_p1"]["all_interpolated"]
    assert abs(loose["globalnorm_p1"]["rec"] - dx.PUBLISHED_FLOW_ROWS["globalnorm_p1"]) > 0.05


def test_the_quoted_invariant_figure_is_the_same_in_the_table_and_the_text():
    """The chapter's claim quotes 0.169 for the invariant row: its table shows it (marked, as
    no selection) and the text glues it from the same function."""
    records = dx.collect("paper", parts=["flow_rows", "flow_long"], mode="read").records
    row = next(r for r in fn.flow_table(records["flow_rows"]) if r["row"] == "globalnorm_p0_rms")
    assert row["published_text"] == f"{dx.PUBLISHED_FLOW_SHORT_RMS['rec']:g}†"
    numbers = fn.flow_numbers(records)
    assert numbers["short_pub_rec"] == row["published_quoted"] == 0.169
    # the chapter says the quoted figure is not an interpolating run's
    assert 0 < numbers["short_seeds"] and numbers["short_interp"] < numbers["short_seeds"]


# --------------------------------------------------------------------------------------------
# under the one rule (gaugebook.present.stats)
# --------------------------------------------------------------------------------------------

SPREAD = {1: 0.20, 2: 0.23, 3: 0.26}  # the seeds' spread: wider than a step of p, not the fall


def _gd_record(lr, seed, rec, erank):
    return {"status": "ok", "run_id": f"gd-{lr}-{seed}",
            "config": {"method": "gd", "hparams": {"lr": lr}, "seed": seed},
            "metrics": {"rec": rec, "train_loss": 1e-9, "interpolated": True,
                        "effective_rank": erank, "steps": 400}}


def _dial_parts(fall=0.1):
    """The dial's parts on three seeds: rec falls by ``fall`` from p = 1 to p = 0 on every
    seed (a step of p by half of it), the effective rank with it; GD below."""
    def part(scalar, shift=0.0):
        return [{**_record(p, 1e-3, s, SPREAD[s] + fall * p + shift + 0.001 * s * p, 1e-9,
                           erank=3.5 + 4 * p + 0.01 * s, steps=400 + int(800 * (1 - p)) + s,
                           scalar=scalar),
                 "config": {**_record(p, 1e-3, s, 0, 0, scalar=scalar)["config"], "seed": s}}
                for p in (1.0, 0.5, 0.0) for s in SPREAD]
    return {"dial_rms": part("rms"), "dial_geomean": part("geomean", 0.01),
            "gd_reference": [_gd_record(0.01, s, 0.1 + 0.01 * s, 3.0 + 0.01 * s)
                             for s in SPREAD]}


def test_cells_pair_by_seed():
    records = _dial_parts()
    cell = dn.cell_seeds(records["dial_rms"], 0.0, 1e-3)
    assert sorted(cell) == [1, 2, 3] and cell[2] == pytest.approx(0.23)
    assert dn.gd_seeds(records, "effective_rank") == {s: pytest.approx(3.0 + 0.01 * s)
                                                      for s in SPREAD}


def test_dial_rule_resolves_the_fall_not_its_steps():
    numbers, cmps = dn.dial_rule(_dial_parts())
    # each step of 0.05 hides in the seeds' spread by Welch's interval; the paired one sees it
    assert (numbers["dial_steps_n"], numbers["dial_steps_resolved"]) == (2, 0)
    assert numbers["dial_steps_paired"] == 2 and numbers["dial_seeds_fall"]
    assert cmps["ends_rec"].sign == -1 and cmps["ends_rec"].paired_n == 3
    assert cmps["ends_steps"].sign == 1 and cmps["ends_erank"].sign == -1
    assert cmps["erank_gd"].sign == 1 and numbers["dial_p0_erank_min"] == pytest.approx(3.51)
    assert cmps["geo_rms"].diff == pytest.approx(0.01)
    # negative control: a seed that rises at one step breaks "every seed falls"
    records = _dial_parts()
    bump = next(r for r in records["dial_rms"]
                if r["config"]["seed"] == 1 and r["config"]["hparams"]["precond_power"] == 0.0)
    bump["metrics"]["rec"] = 0.9
    assert not dn.dial_rule(records)[0]["dial_seeds_fall"]


def test_fixed_lr_and_lr_edge_rules():
    records = _dial_parts(fall=0.5)["dial_rms"]
    rule = dn.fixed_lr_rule(records)
    assert rule == {"fixed_steps_resolved": 2, "fixed_steps_n": 2, "fixed_ends_below": 1}
    assert dn.fixed_lr_rule(_dial_parts(fall=0.1)["dial_rms"])["fixed_steps_resolved"] == 0
    edge = [{**_record(p, lr, s, SPREAD[s] + (0.4 * p) + 0.1 * lr + 0.001 * s, 1e-9),
             "config": {**_record(p, lr, s, 0, 0)["config"], "seed": s}}
            for p in (0.0, 1.0) for lr in (1e-4, 3e-4, 1e-3) for s in SPREAD]
    cmps = dn.lr_edge_rule(edge)
    assert cmps["gap"].sign == 1 and cmps["gap"].diff == pytest.approx(0.4)
    assert cmps["change_p0"].diff == pytest.approx(0.1 * (1e-4 - 1e-3))
    assert cmps["best_next"].diff == pytest.approx(0.1 * (1e-4 - 3e-4))


def test_long_rule_pairs_the_seeds_both_ran():
    records = _dial_parts()
    records["flow_long"] = [{"status": "ok", "config": {"seed": s},
                             "metrics": {"rec": 0.15 + 0.01 * s}} for s in (1, 2, 3, 4)]
    numbers, cmp = fn.long_rule(records)
    assert (numbers["long_gd_shared"], numbers["long_gd_above"]) == (3, 3)
    assert numbers["long_gd_paired"] == pytest.approx(0.05)
    assert cmp.paired_n == 3 and cmp.n_a == 4
