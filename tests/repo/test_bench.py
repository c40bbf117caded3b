"""The benchmark command's table (bench/run.py) on tiny sizes: its construction, not its timings."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_run():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_run"]
    sys.path.remove(str(ROOT / "bench"))


def test_quick_table_has_every_benchmark_and_finite_ratios(bench_run):
    from gaugekit.optim.registry import optimizer_names

    tiny = bench_run.Sizes(sweep_runs=2, sweep_steps=3, attention_steps=1, attention_models=1,
                           step_tensors=2, step_stack=2, step_side=4, flow_rows=8,
                           rounds=1, steps=1, warmup=12, zoo_scale="quick")
    rows = bench_run.build_rows(tiny, torch.device("cpu"), only=("sweep", "attention", "step"))
    groups = [r.group for r in rows]
    assert groups.count("sweep") == 1 and groups.count("attention") == 1
    names = " ".join(r.name for r in rows)
    for name in optimizer_names():
        assert f"{name} (" in names, name
    assert "FlowAdam invariant, flow on" in names
    for row in rows:
        assert row.seconds > 0
        ratios = row.ratios()
        expected = {"alone"} if row.speedup else {"Adam foreach", "Adam fused"}
        assert set(ratios) == expected, row.name
        assert all(math.isfinite(v) and v > 0 for v in ratios.values())
    table = bench_run.format_table(rows, torch.device("cpu"))
    lines = table.splitlines()
    assert "CPU thread(s)" in lines[0]
    assert "x Adam fused" in lines[1] and "x alone" in lines[1]
    assert len(lines) == len(rows) + 3  # header, column names, rows, legend
    # a speed-up row has no Adam ratio: its cells are '-'
    sweep_line = next(line for line in lines if line.startswith("sweep"))
    assert sweep_line.split()[-1] == "-"


def test_ratio_direction(bench_run):
    slow = bench_run.Row("step", "x", 2.0, {"b": 1.0})
    fast = bench_run.Row("sweep", "y", 1.0, {"alone": 4.0}, speedup=True)
    assert slow.ratios() == {"b": 2.0}
    assert fast.ratios() == {"alone": 4.0}


def test_zoo_row_times_the_sweep_and_the_reference_script(bench_run, tmp_path):
    # a stand-in for a checkout of the paper's code: its zoo script only has to run
    script = tmp_path / "ref" / bench_run.REFERENCE_ZOO_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text("import pathlib; pathlib.Path('ran').write_text('yes')\n")
    paper = dataclasses.replace(_tiny(bench_run), zoo_scale="paper")
    with pytest.raises(SystemExit, match="no experiments/optimizer_zoo_bias.py there"):
        bench_run.zoo_row(paper, torch.device("cpu"), 1, reference=tmp_path)
    with pytest.raises(SystemExit, match="needs the full sizes"):
        bench_run.zoo_row(_tiny(bench_run), torch.device("cpu"), 1, reference=script.parents[1])
    row = bench_run.zoo_row(_tiny(bench_run), torch.device("cpu"), 2)
    assert row.group == "zoo" and row.seconds > 0 and row.baselines == {}
    assert "quick-scale zoo, 2 worker(s)" in row.name


def test_zoo_rounds_alternate_and_report_medians(bench_run, tmp_path, monkeypatch):
    # the two commands alternate, script first; the row holds the medians, the note each ratio
    script = tmp_path / bench_run.REFERENCE_ZOO_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text("")
    fake = iter([30.0, 10.0, 60.0, 15.0, 33.0, 11.0])
    calls: list[str] = []

    def timed(command, cwd=None):
        calls.append("script" if str(script) in command else "ours")
        return next(fake)

    monkeypatch.setattr(bench_run, "_timed_command", timed)
    paper = dataclasses.replace(_tiny(bench_run), zoo_scale="paper")
    row = bench_run.zoo_row(paper, torch.device("cpu"), 2, reference=tmp_path, rounds=3)
    assert calls == ["script", "ours"] * 3
    assert row.seconds == 11.0 and row.baselines == {"paper script": 33.0}
    assert "3 alternating round(s)" in row.note
    assert "min 3.00, median 3.00, max 4.00" in row.note
    assert row.note in bench_run.format_table([row], torch.device("cpu"))
    with pytest.raises(SystemExit, match="expected at least 1"):
        bench_run.zoo_row(paper, torch.device("cpu"), 2, reference=tmp_path, rounds=0)


def test_reference_script_runs_in_its_checkout(bench_run, tmp_path):
    ref = tmp_path / "ref"
    script = ref / bench_run.REFERENCE_ZOO_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text("import pathlib; pathlib.Path('ran').write_text('yes')\n")
    seconds = bench_run._timed_command([sys.executable, str(script)], cwd=ref)
    assert seconds > 0 and (ref / "ran").read_text() == "yes"


def _tiny(bench_run):
    return bench_run.Sizes(sweep_runs=2, sweep_steps=3, attention_steps=1, attention_models=1,
                           step_tensors=2, step_stack=2, step_side=4, flow_rows=8,
                           rounds=1, steps=1, warmup=12, zoo_scale="quick")


def test_library_lines_sorts_each_line_into_one_kind():
    spec = importlib.util.spec_from_file_location("library_lines",
                                                  ROOT / "bench" / "library_lines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = '"""A module.\n\nIts docstring."""\n\n# a comment\nX = 1\n\n\ndef f():\n' \
             '    """One line."""\n    return "not a docstring"\n'
    kinds = module.line_kinds(source)
    assert kinds == {"doc": 3, "blank": 4, "comment": 1, "code": 3}  # a blank line is blank
    assert sum(kinds.values()) == len(source.splitlines())
    assert module.folder("gaugekit/optim/adam.py") == "optim"
    assert module.folder("gaugekit/gauge.py") == "top"
