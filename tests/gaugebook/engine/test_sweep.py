"""The generic sweep runner on a toy experiment: records, resume, errors, shared runs, workers."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
import torch

from gaugebook.engine.backends import start_method
from gaugebook.engine.collection import load_part
from gaugebook.engine.records import read_records, read_records_dir
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.engine.sweep import balanced_bins, instance_bins, plan_batches, run_sweep
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.run_specs import Budget, Problem


class Toy:
    """Runs are points ``x`` of a grid; the 'training' returns ``x²``. ``x = 13`` raises,
    ``x = 7`` diverges (NaN), ``x = 11`` returns an error result."""

    name = "toy"
    description = "a toy experiment"

    def __init__(self) -> None:
        self.calls: list[list[float]] = []

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("a", "b")

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        xs = {"a": [1.0, 2.0, 3.0, 7.0, 11.0], "b": [3.0, 4.0, 13.0, 14.0]}[part]
        if scale == "paper":
            xs = [x + 100 for x in xs]
        return [RunSpec(self.name, part, {"x": x, "group": int(x in (13.0, 14.0))},
                        {"instance": int(x)}) for x in xs]

    def batch_key(self, spec: RunSpec):
        return spec.config["group"]

    def run_batch(self, specs: Sequence[RunSpec], *, device, progress) -> list[RunResult]:
        xs = [s.config["x"] for s in specs]
        self.calls.append(xs)
        if 13.0 in xs:
            raise RuntimeError("boom at 13")
        out = []
        for x in xs:
            if x == 7.0:
                out.append(RunResult("diverged", {"value": math.nan}))
            elif x == 11.0:
                out.append(RunResult("error", message="bad 11"))
            else:
                out.append(RunResult("ok", {"value": x * x}, {"step": [0, 1], "loss": [x, 0.0]}))
        return out


def test_records_statuses_and_strict_json(tmp_path):
    toy = Toy()
    report = run_sweep(toy, tmp_path, scale="quick", progress=False)
    assert report.planned == 9 and report.shared == 1  # x = 3 is in both parts
    assert report.skipped == 0 and report.ran == 8
    a = read_records(tmp_path / "a.jsonl")
    assert [r["config"]["x"] for r in sorted(a, key=lambda r: r["config"]["x"])] == [
        1.0, 2.0, 3.0, 7.0, 11.0]
    status = {r["config"]["x"]: r["status"] for r in read_records_dir(tmp_path)}
    assert status == {1.0: "ok", 2.0: "ok", 3.0: "ok", 7.0: "diverged", 11.0: "error",
                      4.0: "ok", 13.0: "error", 14.0: "error"}
    by_x = {r["config"]["x"]: r for r in read_records_dir(tmp_path)}
    assert by_x[7.0]["metrics"]["value"] is None
    assert by_x[13.0]["message"] == "RuntimeError: boom at 13"
    assert by_x[14.0]["message"] == "RuntimeError: boom at 13"  # same batch
    assert by_x[11.0]["message"] == "bad 11"
    assert by_x[2.0]["curves"] == {"step": [0, 1], "loss": [2.0, 0.0]}
    assert by_x[2.0]["scale"] == "quick" and by_x[2.0]["device"] == "cpu"
    assert by_x[2.0]["batch"]["size"] >= 1 and by_x[2.0]["wall_time_s"] >= 0
    def refuse(constant):
        pytest.fail(f"bare {constant} in a record file")

    for path in tmp_path.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            json.loads(line, parse_constant=refuse)


def test_rerun_skips_finished_runs_and_retries_errors(tmp_path):
    toy = Toy()
    run_sweep(toy, tmp_path, scale="quick", progress=False)
    first = len(read_records_dir(tmp_path))
    toy.calls.clear()
    report = run_sweep(toy, tmp_path, scale="quick", progress=False)
    assert report.skipped == 5 and report.shared == 1  # 1, 2, 3, 4 ok and 7 diverged
    retried = sorted(x for batch in toy.calls for x in batch)
    # only error runs come back: 11 (error result) and the batch that raised
    assert retried == [11.0, 13.0, 14.0]
    assert report.ran == len(retried)
    records = read_records_dir(tmp_path)
    assert len(records) == first + len(retried)
    # no finished run is ever duplicated
    finished = [r["run_id"] for r in records if r["status"] in ("ok", "diverged")]
    assert len(finished) == len(set(finished))


def test_truncated_last_line_is_recomputed(tmp_path):
    toy = Toy()
    run_sweep(toy, tmp_path, scale="quick", parts=["a"], progress=False)
    path = tmp_path / "a.jsonl"
    text = path.read_text()
    last = text.splitlines()[-1]
    x_last = json.loads(last)["config"]["x"]
    path.write_text(text[: len(text) - len(last) // 2 - 1])  # cut the last line in half
    toy.calls.clear()
    with pytest.warns(UserWarning, match="truncated"):
        run_sweep(toy, tmp_path, scale="quick", parts=["a"], progress=False)
    assert x_last in [x for batch in toy.calls for x in batch]
    records = read_records(path)
    assert sum(r["config"]["x"] == x_last for r in records) == 1


def test_overwrite_and_load_part(tmp_path):
    toy = Toy()
    run_sweep(toy, tmp_path, scale="quick", parts=["a"], progress=False)
    run_sweep(toy, tmp_path, scale="quick", parts=["a"], resume=False, progress=False)
    a = read_records(tmp_path / "a.jsonl")
    assert len(a) == 5  # deleted, then written once
    run_sweep(toy, tmp_path, scale="quick", parts=["b"], progress=False)
    b = load_part(toy, "b", tmp_path, scale="quick")
    assert [r["config"]["x"] for r in b] == [3.0, 4.0, 13.0, 14.0]  # x = 3 came from part a
    assert b[0]["part"] == "a"
    assert load_part(toy, "a", tmp_path, scale="paper") == []
    with pytest.raises(ValueError, match="Invalid part"):
        run_sweep(toy, tmp_path, scale="quick", parts=["c"], progress=False)
    with pytest.raises(ValueError, match="Invalid workers"):
        run_sweep(toy, tmp_path, scale="quick", workers=0, progress=False)


def test_plan_batches_groups_by_key_and_caps_size():
    toy = Toy()
    specs = toy.specs("a", "quick") + toy.specs("b", "quick")
    batches = plan_batches(toy, specs, max_batch_size=2)
    assert all(len(b) <= 2 for b in batches)
    for batch in batches:
        assert len({s.config["group"] for s in batch}) == 1
    assert sorted(s.config["x"] for b in batches for s in b) == sorted(
        s.config["x"] for s in specs)
    with pytest.raises(ValueError, match="max_batch_size"):
        plan_batches(toy, specs, max_batch_size=0)


def test_workers_give_the_same_records(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    run_sweep(Toy(), one, scale="quick", progress=False)
    run_sweep(Toy(), two, scale="quick", progress=False, workers=2)

    def strip(records):
        return sorted(
            (r["run_id"], r["status"], json.dumps(r["metrics"]), r["message"]) for r in records
        )

    assert strip(read_records_dir(one)) == strip(read_records_dir(two))


class TinySensing(ms.MatrixSensingZoo):
    """The real sensing experiment on a tiny problem (module level: workers unpickle it)."""

    def parts(self, scale):
        return ("tiny",)

    def specs(self, part, scale):
        problem = Problem(6, 1, 6, 22, 5, 0.1)
        return ms.Part("tiny", "t", problem, Budget(60, 1e-5, 20), (1, 2, 3),
                       ("gd", "adam", "signum"),
                       {"gd": (0.1,), "adam": (0.01,), "signum": (0.01,)},
                       {"signum": "cosine"}).specs()


def test_sensing_workers_split_gives_identical_records(tmp_path):
    # splitting a batch across processes must not change a bit of any record; three
    # instances on two workers: one whole instance each, the third dealt run by run
    tiny = TinySensing()
    pieces = tiny.split_batch(tiny.specs("tiny", "quick"), 2)
    assert len(pieces) == 2 and sum(map(len, pieces)) == 9
    seeds = [{s.config["seed"] for s in piece} for piece in pieces]
    assert len(seeds[0] & seeds[1]) == 1 and seeds[0] | seeds[1] == {1, 2, 3}
    threads = torch.get_num_threads()
    run_sweep(tiny, tmp_path / "one", progress=False)
    run_sweep(tiny, tmp_path / "two", progress=False, workers=2)
    assert torch.get_num_threads() == threads
    one = {r["run_id"]: r["metrics"] for r in read_records_dir(tmp_path / "one")}
    two = {r["run_id"]: r["metrics"] for r in read_records_dir(tmp_path / "two")}
    assert one == two and len(one) == 9


def _instances(sizes: Sequence[int], groups: int = 3) -> list[list[list[tuple[int, int]]]]:
    """Instance i: ``groups`` groups of ``sizes[i]`` runs each, a run named (instance, group)."""
    return [[[(i, g)] * size for g in range(groups)] for i, size in enumerate(sizes)]


def test_instance_bins_keeps_whole_instances_where_the_balance_allows():
    # three equal instances, two pieces: one whole instance each, the third dealt run by run
    pieces = instance_bins(_instances([2, 2, 2]), 2, len)
    assert list(map(len, pieces)) == [9, 9]
    touched = [{i for i, _ in piece} for piece in pieces]
    assert [len(t) for t in touched] == [2, 2] and len(touched[0] & touched[1]) == 1
    # every group of the third instance is cut in two: each piece has half of each
    third = touched[0] & touched[1]
    assert [sorted(g for i, g in piece if i in third) for piece in pieces] == [[0, 1, 2]] * 2
    # four instances: two whole ones each, none cut
    pieces = instance_bins(_instances([2, 2, 2, 2]), 2, len)
    touched = [{i for i, _ in piece} for piece in pieces]
    assert [len(t) for t in touched] == [2, 2] and not touched[0] & touched[1]
    # one instance: cut by group, as balanced_bins would
    assert instance_bins(_instances([2]), 2, len) == balanced_bins(_instances([2])[0], 2, len)


def test_balanced_bins_alone_spreads_every_instance_over_the_pieces():
    # the control: dealing the same groups without the instance rule touches all three
    # instances in both pieces, the layout instance_bins avoids
    groups = [g for inst in _instances([2, 2, 2]) for g in inst]
    pieces = balanced_bins(groups, 2, len)
    assert [len({i for i, _ in piece}) for piece in pieces] == [3, 3]


def test_start_method_forks_only_one_thread_cpu_workers(monkeypatch):
    monkeypatch.setattr("sys.platform", "linux")
    cpu = torch.device("cpu")
    assert start_method(cpu, 1) == "fork"
    assert start_method(cpu, 2) == "spawn"  # an OpenMP pool of the parent would not survive
    assert start_method(torch.device("cuda"), 1) == "spawn"
    monkeypatch.setattr("sys.platform", "darwin")
    assert start_method(cpu, 1) == "spawn"
