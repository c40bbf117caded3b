"""The time limit of the prepared GPU script (bench/gpu_paper_scale.py), on the CPU with a tiny
ladder: parts start only when their estimate fits, nothing starts past the limit, what ran is
recorded, and a rerun resumes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gaugebook.engine.records import read_records_dir
from gaugebook.engine.sweep import run_sweep
from gaugebook.ladder import ladder_runs as ladder
from gaugebook.sensing.run_specs import Budget

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_paper_scale",
                                               ROOT / "bench" / "gpu_paper_scale.py")
gps = importlib.util.module_from_spec(_spec)
sys.modules["gpu_paper_scale"] = gps  # its dataclass needs its module
_spec.loader.exec_module(gps)


def tiny_config() -> ladder.LadderConfig:
    return ladder._build("quick", (6, 8), 2, 6, (1,), (2.0,),
                         lambda n: Budget(40, tol=1e-6, check_every=20), (42,), 10,
                         persist=False)


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    monkeypatch.setitem(ladder.get_config.builders, "quick", tiny_config)


class FakeClock:
    """Time advances only by what the sweep is said to take (100 s a part)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sweep(self, *args, **kwargs):
        self.t += 100.0
        return run_sweep(*args, **kwargs)


def test_default_plan_runs_big_sizes_first():
    plan = gps.default_plan("paper")
    assert plan[:7] == [f"n{n}_s42" for n in (384, 256, 192, 128, 96, 64, 40)]
    assert plan[7] == "n384_s123"
    assert len(plan) == len(set(plan)) == len(ladder.get_config("paper").seed_parts)


def test_time_limit_stops_between_parts_and_skips_what_does_not_fit(tmp_path):
    # costs: n6 (first, no estimate yet) < rank1 (r = 1: fewer measurements) < n8
    cost = {p: gps._missing_cost(p, "quick", tmp_path)[1] for p in ("n6_s42", "rank1_s42",
                                                                    "n8_s42")}
    assert cost["rank1_s42"] < cost["n6_s42"] < cost["n8_s42"]
    # the estimate: the larger of the flop and the step extrapolations (equal budgets here)
    est = {p: max(100.0 * c / cost["n6_s42"], 100.0) for p, c in cost.items()}
    assert est["rank1_s42"] < est["n8_s42"]
    # after n6 (100 s) the time left fits rank1 but not n8
    limit = 100.0 + (est["rank1_s42"] + est["n8_s42"]) / 2
    clock, lines = FakeClock(), []
    outcomes = gps.run_plan(["n6_s42", "n8_s42", "rank1_s42", "n8"], tmp_path, limit,
                            scale="quick", device="cpu", clock=clock, log=lines.append,
                            sweep=clock.sweep)
    # n8 again at the end: 100 s later even less time is left
    assert [o.action for o in outcomes] == ["ran", "skipped", "ran", "skipped"]
    assert outcomes[1].estimate_s == pytest.approx(est["n8_s42"])
    assert any("skipped, estimated" in line for line in lines)
    recorded = {r["part"] for r in read_records_dir(tmp_path)}
    assert recorded == {"n6_s42", "rank1_s42"}  # n8 never started
    n_runs = len(ladder.EXPERIMENT.specs("n6_s42", "quick"))
    assert outcomes[0].runs == n_runs and outcomes[0].errors == 0

    # a rerun with time to spare resumes: the recorded parts are not run again
    clock2 = FakeClock()
    again = gps.run_plan(["n6_s42", "n8_s42"], tmp_path, 1e6, scale="quick", device="cpu",
                         clock=clock2, log=lines.append, sweep=clock2.sweep)
    assert [o.action for o in again] == ["skipped", "ran"]
    assert clock2.t == 100.0


def test_nothing_starts_after_the_limit(tmp_path):
    clock, lines = FakeClock(), []
    outcomes = gps.run_plan(["n6_s42", "n8_s42"], tmp_path, 50.0, scale="quick", device="cpu",
                            clock=clock, log=lines.append, sweep=clock.sweep)
    assert [o.action for o in outcomes] == ["ran", "stopped"]
    assert lines[-1] == "time limit 50 s reached; not started: n8_s42"
    assert {r["part"] for r in read_records_dir(tmp_path)} == {"n6_s42"}


def test_dry_run_prints_the_plan(tmp_path, capsys):
    assert gps.main([str(tmp_path), "--scale", "quick", "--dry-run", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "n6_s42: " in out and str(tmp_path / "results" / "ladder" / "quick") in out


def test_the_attention_suite_runs_under_the_same_limit_and_resumes(tmp_path):
    from gaugebook.attention import attention_runs as attention

    plan = gps.default_plan("paper", "attention")
    assert set(plan) == set(attention.SUITE_PARTS)
    cost = {p: gps._missing_cost(p, "paper", tmp_path, attention.EXPERIMENT)[1] for p in plan}
    assert plan == sorted(plan, key=cost.get)  # the cheapest first
    # quick sizes on the CPU: the first part runs, the limit stops the rest
    clock, lines = FakeClock(), []
    outcomes = gps.run_plan(plan, tmp_path, 50.0, scale="quick", device="cpu", clock=clock,
                            log=lines.append, sweep=clock.sweep, experiment=attention.EXPERIMENT)
    assert [o.action for o in outcomes] == ["ran", "stopped", "stopped"]
    records = read_records_dir(tmp_path)
    assert {r["part"] for r in records} == {plan[0]}
    assert len(records) == len(attention.EXPERIMENT.specs(plan[0], "quick"))
    assert all(r["config"]["dtype"] == "float64" for r in records)
    again = gps.run_plan(plan[:1], tmp_path, 1e6, scale="quick", device="cpu",
                         clock=FakeClock(), log=lines.append, experiment=attention.EXPERIMENT)
    assert [o.action for o in again] == ["skipped"]
