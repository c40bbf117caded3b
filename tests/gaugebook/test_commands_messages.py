"""The book's command line says what went wrong: the first failure of a run, and what a
checkout-only command needs when it runs outside a checkout."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gaugebook import commands
from gaugebook.engine.spec import RunResult, RunSpec


class HalfBroken:
    """Part ``good`` runs; every batch of part ``bad`` raises, as a missing solver would."""

    name = "halfbroken"
    description = "a toy with a failing part"

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("good", "bad")

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return [RunSpec(self.name, part, {"part": part, "seed": s}) for s in (1, 2, 3)]

    def batch_key(self, spec: RunSpec):
        return spec.part

    def run_batch(self, specs: Sequence[RunSpec], *, device, progress) -> list[RunResult]:
        if specs[0].part == "bad":
            raise RuntimeError("the solver is not installed")
        return [RunResult("ok", {"rec": 0.0}) for _ in specs]


@pytest.fixture
def halfbroken(monkeypatch):
    from gaugebook import experiments

    toy = HalfBroken()
    monkeypatch.setattr(experiments, "get_experiment",
                        lambda name: toy if name == toy.name else experiments.EXPERIMENTS[name])
    return toy


def test_a_failed_run_prints_its_first_error(halfbroken, tmp_path, capsys):
    assert commands.main(["run", "halfbroken", "--out", str(tmp_path), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "ok 3" in captured.out and "error 3" in captured.out
    assert captured.err == ("gaugebook: error: 3 run(s) failed; the first, part 'bad': "
                            "RuntimeError: the solver is not installed\n")
    assert commands.main(["run", "halfbroken", "--out", str(tmp_path), "--part", "good",
                     "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_headline_outside_a_checkout_says_it_needs_one(monkeypatch, tmp_path, capsys):
    from gaugebook.engine import collection
    monkeypatch.setattr(collection, "project_root", lambda experiment: tmp_path)
    for argv in (["headline"], ["headline", "--check"]):
        assert commands.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("gaugebook: error: `gaugebook headline` rewrites README.md")
        assert "works in a gaugebook checkout" in err and f"{tmp_path} is not one" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "report"])
def test_paper_scale_on_results_outside_a_checkout_says_it_needs_one(command, monkeypatch,
                                                                      tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    assert commands.main([command, "matrix_sensing", "--scale", "paper"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gaugebook: error: `python -m gaugebook {command} --scale paper`")
    assert err.rstrip().endswith("run it from the root of a clone, or pass --out DIR")
    assert list(tmp_path.iterdir()) == []  # no results/ folder made


def test_paper_scale_with_out_runs_anywhere(halfbroken, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "records"
    argv = ["run", "halfbroken", "--scale", "paper", "--out", str(out), "--part", "good"]
    assert commands.main([*argv, "--quiet"]) == 0
    assert (out / "good.jsonl").is_file()
    assert commands.main(["report", "halfbroken", "--scale", "paper", "--out", str(out),
                     "--part", "good"]) == 0
    assert "halfbroken [paper] part good" in capsys.readouterr().out
