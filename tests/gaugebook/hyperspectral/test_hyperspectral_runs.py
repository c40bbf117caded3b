"""Hyperspectral experiment: matched-loss bookkeeping and train-only selection on constructed
records, and tiny sweeps through the one factor-training loop (float64)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch

from gaugebook import headline
from gaugebook.engine.collection import load_part
from gaugebook.engine.factor_trainer import train_factored_batch
from gaugebook.engine.selection import at_level
from gaugebook.engine.sweep import run_sweep
from gaugebook.hyperspectral.completion import HYPERSPECTRAL
from gaugebook.hyperspectral.hyperspectral_runs import (
    EXPERIMENT,
    PAPER_HPARAMS,
    Budget,
    HyperspectralCompletion,
    HyperspectralConfig,
    MatrixProtocol,
    get_config,
)
from gaugebook.hyperspectral.matched_loss import (
    best_at_level,
    deepest_common_level,
    fixed_lr_gaps,
    gap,
    leak_effect,
    matched_comparison,
    select_lr,
    summarize,
)
from gaugebook.hyperspectral.scene_refs import synthetic_scene, user_scene

TH = (1e-2, 1e-3, 1e-4)


def rec(method, lr, seed, crossings, status="ok", rmse=None):
    """A constructed record: ``crossings`` = steps at which each threshold was first crossed
    (as many as were reached); held-out RMSE at threshold i is ``rmse[i]``."""
    rmse = rmse or [0.1 / (i + 1) for i in range(len(crossings))]
    at = [{"threshold": TH[i], "step": s, "train_loss": TH[i] / 2, "heldout_rmse": rmse[i],
           "effective_rank": 3.0 + i} for i, s in enumerate(crossings)]
    return {"status": status, "config": {"method": method, "hparams": {"lr": lr}, "seed": seed},
            "metrics": {"at_loss": at, "steps": crossings[-1] if crossings else 5}}


def test_at_level_and_deepest_common_level():
    a = rec("gd", 1.0, 1, [0, 10, 50])
    b = rec("adam", 1e-3, 1, [0, 5])
    assert at_level(a, 1e-3)["step"] == 10
    assert at_level(b, 1e-4) is None
    assert deepest_common_level([[a], [b]], TH) == 1e-3
    assert deepest_common_level([[a], [a]], TH) == 1e-4
    assert deepest_common_level([[a], []], TH) is None
    assert deepest_common_level([[a], [rec("adam", 1e-3, 1, [])]], TH) is None
    # a diverged run reached nothing, whatever it recorded before diverging
    bad = rec("gd", 9.0, 1, [0, 3], status="diverged")
    assert at_level(bad, 1e-2) is None
    assert deepest_common_level([[a], [bad]], TH) is None


def test_selection_deepest_level_then_fewest_steps():
    records = [
        # lr 1: both seeds reach 1e-4 in 100 steps on average
        rec("gd", 1.0, 42, [0, 40, 90]), rec("gd", 1.0, 123, [0, 50, 110]),
        # lr 3: faster, reaches 1e-4 too: selected
        rec("gd", 3.0, 42, [0, 20, 60]), rec("gd", 3.0, 123, [0, 20, 70]),
        # lr 10: fastest to 1e-3 but one seed never reaches 1e-4: deepest level loses
        rec("gd", 10.0, 42, [0, 5, 10]), rec("gd", 10.0, 123, [0, 5]),
        # lr 30: one seed diverged: not selectable
        rec("gd", 30.0, 42, [0, 2, 4]), rec("gd", 30.0, 123, [0], status="diverged"),
        # another seed does not count for the selection
        rec("gd", 1.0, 456, [0, 1, 2]),
    ]
    s = select_lr(records, "gd", (42, 123), TH)
    assert (s.lr, s.level, s.steps) == (3.0, 1e-4, 65.0)
    assert s.grid == (1.0, 3.0, 10.0, 30.0)
    assert not s.at_top and not s.at_bottom
    # ties in steps: the smaller rate
    tie = [rec("adam", lr, seed, [0, 10]) for lr in (1e-3, 1e-2) for seed in (42, 123)]
    assert select_lr(tie, "adam", (42, 123), TH).lr == 1e-3
    # a rate missing a selection seed is not a candidate; nothing left -> no selection
    lone = [rec("muon", 0.1, 42, [0, 1, 2])]
    none = select_lr(lone, "muon", (42, 123), TH)
    assert none.lr is None and math.isnan(none.steps)


def test_matched_comparison_at_deepest_level_all_reach_and_gap():
    seeds = (1, 2)
    records = [
        rec("gd", 3.0, 1, [0, 20, 60], rmse=[0.1, 0.02, 0.010]),
        rec("gd", 3.0, 2, [0, 20, 70], rmse=[0.1, 0.03, 0.012]),
        rec("adam", 0.01, 1, [0, 5], rmse=[0.1, 0.04]),
        rec("adam", 0.01, 2, [0, 5], rmse=[0.1, 0.05]),
        rec("adam", 0.001, 1, [0, 30, 80], rmse=[0.1, 0.025, 0.011]),
        rec("adam", 0.001, 2, [0, 30, 80], rmse=[0.1, 0.035, 0.013]),
    ]
    sel = {"gd": select_lr(records, "gd", seeds, TH), "adam": select_lr(records, "adam", seeds, TH)}
    # Adam's selected rate (train-only) is 1e-3: it is the one that reaches 1e-4
    assert sel["adam"].lr == 0.001
    comp = matched_comparison(records, sel, seeds, TH)
    assert comp["level"] == 1e-4
    assert comp["methods"]["gd"]["rmse_seeds"] == [0.010, 0.012]
    g = gap(comp["methods"]["gd"]["rmse_seeds"], comp["methods"]["adam"]["rmse_seeds"])
    assert g["gap"] == pytest.approx(1 - 0.011 / 0.012)
    assert g["seeds"] == pytest.approx([1 - 10 / 11, 1 - 12 / 13])
    assert g["min"] < g["max"]
    # a forced comparison against Adam at 1e-2 happens at 1e-3, the deepest both reach
    fixed = {r["lr"]: r for r in fixed_lr_gaps(records, "gd", 3.0, "adam", seeds, TH)}
    assert fixed[0.01]["level"] == 1e-3
    assert fixed[0.01]["gap"] == pytest.approx(1 - 0.025 / 0.045)
    assert fixed[0.01]["reference_by_seed"] == pytest.approx({1: 0.02, 2: 0.03})
    assert fixed[0.01]["gap_by_seed"] == pytest.approx(
        {s: 1 - a / b for s, a, b in zip(seeds, (0.02, 0.03), fixed[0.01]["other_by_seed"]
                                          .values(), strict=True)})
    assert fixed[0.001]["level"] == 1e-4
    # the oracle reads held-out errors: Adam's best rate at 1e-4 is 1e-3 (the only one there)
    best = best_at_level(records, "adam", 1e-4, seeds)
    assert best["lr"] == 0.001 and best["rmse"] == pytest.approx(0.012)
    assert best_at_level(records, "adam", 1e-3, seeds)["lr"] == 0.001
    assert best_at_level(records, "adam", None, seeds) is None
    # with a seed missing the comparison is not made
    partial = matched_comparison(records[:-1], sel, seeds, TH)
    assert partial["level"] is None and not partial["complete"]


def test_leak_effect_pairs_the_same_runs():
    seeds = (1,)
    obs = [rec("gd", 3.0, 1, [0, 10, 20], rmse=[0.1, 0.02, 0.010]),
           rec("adam", 0.01, 1, [0, 10, 20], rmse=[0.1, 0.04, 0.020])]
    leak = [rec("gd", 3.0, 1, [0, 10, 20], rmse=[0.1, 0.02, 0.008]),
            rec("adam", 0.01, 1, [0, 10, 20], rmse=[0.1, 0.04, 0.019])]
    sel = {m: select_lr(obs, m, seeds, TH) for m in ("gd", "adam")}
    out = leak_effect(obs, leak, sel, seeds, TH)
    assert out["level"] == 1e-4
    assert out["methods"]["gd"]["change"] == pytest.approx(-0.2)
    assert out["gap_observed"]["gap"] == pytest.approx(0.5)
    assert out["gap_leaky"]["gap"] == pytest.approx(1 - 8 / 19)


# --------------------------------------------------------------------------------------------
# tiny sweeps through the factor-training loop
# --------------------------------------------------------------------------------------------


def tiny_config(scenes, dtype_seeds=()):
    return HyperspectralConfig(
        "quick", tuple(scenes), MatrixProtocol(num_rows=60, rank=6, dof_rank=2),
        Budget(num_steps=300, thresholds=(3e-3, 1e-3, 3e-4), check_every=50),
        ("gd", "adam"), {"gd": (30.0, 1e5), "adam": (1e-2, 3e-2)}, (42,), (42, 7), ("adam",),
        persist_records=False, f64_seeds=dtype_seeds,
    )


def test_tiny_sweep_records_matched_losses_and_resumes(tmp_path):
    exp = HyperspectralCompletion({"quick": tiny_config([synthetic_scene(10, 10, 12, 3)])})
    parts = exp.parts("quick")
    assert parts == ("synthetic_low", "synthetic_low_leak", "synthetic_high",
                     "synthetic_high_leak")
    report = run_sweep(exp, tmp_path, scale="quick", parts=["synthetic_low"], progress=False)
    assert report.ran == 8 and report.statuses["error"] == 0
    assert report.batches == 2          # one stack per seed (runs that share a mask)
    records = load_part(exp, "synthetic_low", tmp_path, scale="quick")
    diverged = [r for r in records if r["status"] == "diverged"]
    assert {r["config"]["hparams"]["lr"] for r in diverged} == {1e5}
    ok = [r for r in records if r["status"] == "ok"]
    assert ok
    for r in ok:
        at = r["metrics"]["at_loss"]
        assert [e["threshold"] for e in at] == [3e-3, 1e-3, 3e-4][: len(at)]
        assert all(e["train_loss"] < e["threshold"] for e in at)
        assert [e["step"] for e in at] == sorted(e["step"] for e in at)
        if len(at) == 3:   # stopped at the deepest threshold
            assert r["metrics"]["steps"] == at[-1]["step"]
        assert r["curves"]["heldout_rmse"]
    again = run_sweep(exp, tmp_path, scale="quick", parts=["synthetic_low"], progress=False)
    assert again.ran == 0 and again.skipped == 8


def test_batched_run_equals_the_run_alone_in_float64():
    exp = HyperspectralCompletion({"quick": tiny_config([synthetic_scene(10, 10, 12, 3)], (42,))})
    specs = [s for s in exp.specs("synthetic_low_f64", "quick")]
    assert {s.config["dtype"] for s in specs} == {"float64"}
    together = train_factored_batch(specs, HYPERSPECTRAL)
    for spec, res in zip(specs, together, strict=True):
        alone = train_factored_batch([spec], HYPERSPECTRAL)[0]
        assert alone.status == res.status
        if res.status != "ok":
            continue
        a, b = alone.metrics["at_loss"], res.metrics["at_loss"]
        assert [e["step"] for e in a] == [e["step"] for e in b]
        for ea, eb in zip(a, b, strict=True):
            assert ea["heldout_rmse"] == pytest.approx(eb["heldout_rmse"], rel=1e-9)


def test_user_scene_runs_through_the_protocol(tmp_path):
    rng = np.random.default_rng(0)
    E = rng.uniform(0.1, 1.0, size=(3, 12))
    A = rng.dirichlet(np.ones(3), size=81)
    V = (A @ E).T  # bands x pixels, column-major pixels of a 9 x 9 scene
    path = tmp_path / "mine.mat"
    scipy.io.savemat(path, {"V": V, "nRow": 9, "nCol": 9})
    scene = user_scene(path, "V", "bands_pixels", densities=("high",))
    assert scene.config["sha256"] and scene.bands == 12 and scene.pixels == 81
    exp = HyperspectralCompletion({"quick": tiny_config([scene])})
    assert exp.parts("quick") == ("mine_high", "mine_high_leak")
    run_sweep(exp, tmp_path / "rec", scale="quick", progress=False)
    records = load_part(exp, "mine_high", tmp_path / "rec", scale="quick")
    leak = load_part(exp, "mine_high_leak", tmp_path / "rec", scale="quick")
    out = summarize(records, leak, methods=("gd", "adam"), selection_seeds=(42,),
                    eval_seeds=(42, 7), thresholds=(3e-3, 1e-3, 3e-4))
    assert out["selections"]["gd"].lr == 30.0   # 1e5 diverged
    assert out["comparison"]["complete"]
    assert out["diverged"] == 2 and out["errors"] == 0


def test_configs_follow_the_density_rule_and_seeds():
    paper = get_config("paper")
    assert paper.eval_seeds == (42, 123, 456, 789) and paper.selection_seeds == (42, 123)
    for part in paper.parts():
        assert part.num_rows == 2000 and part.problem()["rank"] == 48
        assert part.ratio == pytest.approx(1.15 if "low" in part.name else 1.9, abs=0.05)
    quick = get_config("quick")
    assert quick.parts()[0].scene.name == "synthetic"
    spec = EXPERIMENT.specs(quick.parts()[0].name, "quick")[0]
    assert spec.config["hparams"] == {**PAPER_HPARAMS[spec.config["method"]],
                                      "lr": spec.config["hparams"]["lr"]}
    assert spec.config["budget"]["record_at"] == [3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5]
    assert torch.get_default_dtype() == torch.float32


def test_cli_refuses_a_missing_scene_file(tmp_path, capsys):
    from gaugebook import commands

    assert commands.main(["hyperspectral", str(tmp_path / "none.mat"), "--key", "V"]) == 2
    assert "none.mat" in capsys.readouterr().err


def test_records_of_an_absent_scene_are_read_not_run(tmp_path, monkeypatch):
    from gaugebook.engine.records import append_records, make_record
    from gaugebook.hyperspectral.hyperspectral_runs import collector
    from gaugebook.hyperspectral.hyperspectral_views import shown_parts, waiting
    from gaugebook.hyperspectral.scene_refs import registered_scene

    monkeypatch.setenv("GAUGEKIT_DATA", str(tmp_path / "empty"))
    cfg = tiny_config([synthetic_scene(10, 10, 12, 3, densities=("high",)),
                       registered_scene("salinas_a", ("low",))])
    cfg = HyperspectralConfig(**{**cfg.__dict__, "matrices": {"salinas_a": MatrixProtocol(
        num_rows=2000, rank=6, dof_rank=24)}})
    exp = HyperspectralCompletion({"quick": cfg})
    assert "salinas_a_low" not in exp.parts("quick")        # its file is not here
    specs = cfg.part("salinas_a_low").specs()               # but the part is known
    folder = tmp_path / "records"

    def record(spec):
        return make_record(
            run_id=spec.run_id, experiment="hyperspectral", part="salinas_a_low",
            config=spec.config, seeds=spec.seeds, scale="quick", dtype="float32",
            device="cpu", status="ok", metrics={"steps": 1, "at_loss": []})

    append_records(folder / "salinas_a_low.jsonl", [record(specs[0])])
    got = collector(exp)("quick", folder)
    assert len(got.records["salinas_a_low"]) == 1
    assert got.report.ran == 8 + 4                           # synthetic runs only
    # an incomplete part of a scene that is not here is neither shown nor announced
    assert "salinas_a_low" not in [p.name for p in shown_parts(got)]
    assert got.missing["salinas_a_low"] == len(specs) - 1
    assert waiting(got) == []
    append_records(folder / "salinas_a_low.jsonl", [record(s) for s in specs[1:]])
    got = collector(exp)("quick", folder)
    assert got.report.ran == 0
    assert [p.name for p in shown_parts(got)][-1] == "salinas_a_low"


def test_a_paper_page_renders_whatever_data_files_are_present(tmp_path, monkeypatch):
    """At paper scale a page shows every part with complete committed records, with or without
    the scenes' files; a part whose file is here but whose records are not is announced with
    the command that makes it, and nothing raises."""
    import shutil

    from gaugebook.engine import collection
    from gaugebook.hyperspectral import hyperspectral_runs as hs
    from gaugebook.hyperspectral import hyperspectral_views as hs_report
    from gaugebook.hyperspectral.hyperspectral_page import absent, waiting_markdown
    from gaugebook.hyperspectral.scenes import available_scenes
    ROOT = Path(__file__).resolve().parents[3]
    src = ROOT / "results" / "hyperspectral" / "paper"
    dst = tmp_path / "results" / "hyperspectral" / "paper"
    dst.mkdir(parents=True)
    for name in ("salinas_a_low.jsonl", "salinas_a_low_leak.jsonl"):
        shutil.copy(src / name, dst / name)
    monkeypatch.setattr(collection, "project_root", lambda experiment: tmp_path)
    monkeypatch.setenv("GAUGEKIT_RECORDS", "read")
    shown, claims = {}, {}
    for data in ("empty", "real"):
        folder = tmp_path / "empty" if data == "empty" else ROOT.parent / "shared" / "data"
        monkeypatch.setenv("GAUGEKIT_DATA", str(folder))
        got = hs.collect("paper")
        shown[data] = [p.name for p in hs_report.shown_parts(got)]
        assert "indian_pines_low_paper" not in shown[data]
        waiting = [p.name for p, _, _ in hs_report.waiting(got)]
        if data == "real" and "indian_pines" in available_scenes():
            assert "indian_pines_low_paper" in waiting
            assert "--part indian_pines_low_paper" in waiting_markdown(got)
            assert "not complete yet" in absent(got, "indian_pines")
        if data == "empty":
            assert waiting == []
            assert "not in the data folder" in absent(got, "indian_pines")
        rows = headline.hyperspectral_rows()
        claims[data] = [(r.claim, r.ours, r.verdict) for r in rows]
        assert "Salinas-A" in rows[0].claim and "ρ = 0.15" in rows[0].ours
        assert rows[0].verdict == "beyond the paper"
        assert {r.verdict for r in rows[1:]} == {"not run here"}     # the paper's four settings
    assert shown["empty"] == shown["real"] == ["salinas_a_low", "salinas_a_low_leak"]
    assert claims["empty"] == claims["real"]                          # the README is the same
