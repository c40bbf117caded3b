"""Attention twins: lockstep training, the exact A = I control, the first-step split, records."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch.testing import assert_close

from gaugebook.attention import attention_runs as att
from gaugebook.attention.attention_summary import machine_throughput
from gaugebook.engine import transformer as A
from gaugebook.engine import twin_trainer as tt
from gaugebook.engine.collection import load_part
from gaugebook.engine.records import read_records_dir
from gaugebook.engine.sweep import run_sweep
from gaugebook.present import roundoff

CPU = torch.device("cpu")
#: A smaller model than the book's (same code): keeps each test to a second or two.
SMALL = A.TransformerShape(d_model=32, num_heads=4, d_mlp=64)
TASK = {"name": "modadd", "p": 47, "train_frac": 0.4, "split_seed": 42}
TWINS = (att.BASE, att.IDENTITY, att.GAUGE, att._noise(1e-7))


def _family(method, *, steps=3, dtype="float32", twins=TWINS, model=SMALL, seed=42):
    return att.TwinFamily(TASK, model, method, steps, tuple(sorted({0, 1, steps})), seed,
                          twins, dtype=dtype)


def _by_kind(results, specs):
    return {(s.config["twin"]["kind"], s.config["twin"].get("scale")): r
            for s, r in zip(specs, results, strict=True)}


@pytest.mark.parametrize("method", att.METHODS)
def test_identity_twin_drifts_exactly_zero_batched(method):
    fam = _family(method)
    specs = fam.specs("t")
    results = att.train_twin_batch(specs, device=CPU)
    runs = _by_kind(results, specs)
    ident = runs[("identity", None)]
    assert ident.status == "ok"
    assert ident.curves["step"] == [0, 1, 3]
    assert ident.curves["m_drift"] == [0.0, 0.0, 0.0]
    assert ident.curves["logit_drift"] == [0.0, 0.0, 0.0]
    assert ident.metrics["final_m_drift"] == 0.0
    # ... while the training moved the model. The gauge twin runs other code: an equivariant
    # rule keeps it the same function to float32 round-off (u = 6e-8, three steps: floor
    # 1e-4; whether its drift is exactly 0 is the machine's rounding, so only the floor is
    # asserted), Adam splits it above that floor.
    base = runs[("base", None)]
    assert base.curves["train_loss"][-1] != base.curves["train_loss"][0]
    gauge = runs[("gauge", None)].curves["m_drift"][-1]
    if method in att.EQUIVARIANT:
        assert roundoff.at_floor(gauge, 1e-4), gauge
    else:
        assert roundoff.exceeds(gauge, 0.0, 1e-4), gauge


def test_one_adam_step_splits_the_twins_equivariant_steps_do_not_float64():
    """After one step in float64 an equivariant rule keeps the gauge twin at round-off.

    Floor 1e-11: the twins start equal to ~1e-16 relative (float64 rotation of the weights);
    one step multiplies that by the conditioning of one update (observed ~3e-16 to 1e-15, the
    paper's 3e-16 to 1e-15), so 1e-11 leaves four decades of headroom and is still seven decades
    below Adam's split (~4e-3 in logits after one step, the paper's 3.6e-3). The start is the
    same function to 1e-13 (a float64 rotation of order-one weights: a thousand units of
    round-off)."""
    drift = {}
    for method in att.METHODS:
        fam = _family(method, steps=1, dtype="float64", twins=(att.BASE, att.GAUGE),
                      model=A.TransformerShape())
        specs = fam.specs("t")
        res = _by_kind(att.train_twin_batch(specs, device=CPU), specs)[("gauge", None)]
        assert roundoff.at_floor(res.curves["logit_drift"][0], 1e-13)  # the same function
        drift[method] = res.metrics["step1_logit_drift"]
    assert roundoff.exceeds(drift["adam"], 1e-4, 1e-11)
    for method in ("momentum", "scalar_adam", "muon_adam"):
        assert roundoff.at_floor(drift[method], 1e-11), (method, drift[method])


def test_batched_family_equals_each_twin_trained_alone_float64():
    fam = _family("scalar_adam", steps=4, dtype="float64")
    specs = fam.specs("t")
    batched = att.train_twin_batch(specs, device=CPU)
    for spec, res in zip(specs, batched, strict=True):
        alone = att.train_twin_batch([spec], device=CPU)[0]
        for key in ("train_loss", "val_loss", "m_drift", "logit_drift"):
            assert_close(torch.tensor(res.curves[key]), torch.tensor(alone.curves[key]),
                         atol=1e-12, rtol=1e-9)


def test_shared_scale_adam_reduces_over_all_parameters_of_each_model():
    """First step of shared-scale Adam on a stack of two models: row b moves by
    lr · g_b / (√mean(g_b²) + ε), the mean over every entry of every parameter of model b."""
    shape = SMALL
    data = A.make_modadd_data()
    models = [{k: v.double() for k, v in
               A.init_params(shape, generator=torch.Generator().manual_seed(s)).items()}
              for s in (0, 1)]
    params = {k: v.clone().requires_grad_(True) for k, v in A.stack_params(models).items()}
    hp = att.PAPER_HPARAMS["scalar_adam"]
    opt = tt.make_twin_optimizers("scalar_adam", params, hp)[0]
    A.cross_entropy(A.forward(params, data.train_tokens, shape), data.train_targets).sum() \
        .backward()
    grads = {k: v.grad.clone() for k, v in params.items()}
    opt.step()
    for b in range(2):
        squares = torch.cat([g[b].reshape(-1) ** 2 for g in grads.values()])
        scale = squares.mean().sqrt() + hp["eps"]
        per_tensor_differs = False
        for k, g in grads.items():
            want = models[b][k] - hp["lr"] * g[b] / scale
            assert_close(params[k].detach()[b], want, atol=1e-14, rtol=1e-12)
            # negative control: a per-tensor RMS would give another step
            own = (g[b] ** 2).mean().sqrt() + hp["eps"]
            per_tensor_differs |= bool(abs(float(own / scale) - 1) > 1e-3)
        assert per_tensor_differs


def test_untrained_run_is_flagged_collapsed():
    fam = _family("adam", steps=0, twins=(att.BASE,))
    res = att.train_twin_batch(fam.specs("t"), device=CPU)[0]
    assert res.metrics["collapsed"] is True
    assert res.metrics["val_acc"] <= 1.5 / 47


def test_char_lm_family_records_the_text_and_trains_on_identical_batches():
    task = {"name": "charlm", "text": "builtin", "max_chars": None, "seq_len": 16,
            "batch_size": 4, "val_windows": 4, "data_seed": 3}
    from gaugebook.engine.texts import load_text

    vocab = load_text("builtin").vocab_size
    model = A.TransformerShape(vocab=vocab, seq_len=16, d_model=32, num_heads=4, d_mlp=64,
                               num_classes=vocab, causal=True, last_only=False)
    fam = att.TwinFamily(task, model, "momentum", 3, (0, 1, 3), 42,
                         (att.BASE, att.IDENTITY, att.GAUGE))
    specs = fam.specs("t")
    runs = _by_kind(att.train_twin_batch(specs, device=CPU), specs)
    assert all(r.metrics["text_used"] == "builtin" for r in runs.values())
    assert runs[("identity", None)].curves["logit_drift"] == [0.0, 0.0, 0.0]
    # float32 round-off of the rotation (u = 6e-8), amplified over three steps: floor 1e-4
    assert roundoff.at_floor(runs[("gauge", None)].metrics["final_logit_drift"], 1e-4)


def test_bad_configs_raise_naming_the_argument():
    with pytest.raises(ValueError, match="twin kind"):
        tt.make_twin({}, SMALL, {"kind": "mirror"})
    with pytest.raises(ValueError, match="method"):
        tt.make_twin_optimizers("lbfgs", {}, {})
    with pytest.raises(ValueError, match="specs"):
        att.train_twin_batch(_family("adam").specs("t")[:1] + _family("momentum").specs("t")[:1],
                             device=CPU)
    with pytest.raises(ValueError, match="part"):
        att.get_config("quick").families("nope")


def test_parts_share_runs_and_the_config_pins_the_paper_setting():
    paper = att.get_config("paper")
    single = {s.run_id for s in att.EXPERIMENT.specs("single", "paper")}
    multi = {s.run_id for s in att.EXPERIMENT.specs("multiseed", "paper")}
    assert len(single & multi) == 4  # base, gauge 777, noise 1e-7 and 1e-5 of init seed 42
    fam = paper.families("single")[0]
    assert fam.num_steps == 1500
    assert fam.checkpoints == (0, 1, 10, 50, 100, 300, 600, 1000, 1500)
    assert att.PAPER_HPARAMS["momentum"] == {"lr": 0.5, "momentum": 0.9}
    assert att.PAPER_HPARAMS["muon_adam"]["muon"]["lr"] == 0.02
    assert all(len(att.EXPERIMENT.specs(p, "quick")) > 0 for p in att.EXPERIMENT.parts("quick"))


def test_sweep_records_and_resume(tmp_path, monkeypatch):
    tiny = att.AttentionConfig("quick", {"single": ("tiny", (_family("adam", steps=2),))}, False)
    monkeypatch.setitem(att.get_config.builders, "quick", lambda: tiny)
    report = run_sweep(att.EXPERIMENT, tmp_path, scale="quick", progress=False)
    assert report.ran == len(TWINS) and report.statuses["ok"] == len(TWINS)
    records = load_part(att.EXPERIMENT, "single", tmp_path, scale="quick")
    assert [r["config"]["twin"]["kind"] for r in records] == ["base", "identity", "gauge",
                                                              "noise"]
    for r in records:
        assert set(r["curves"]) >= {"step", "m_drift", "logit_drift", "val_acc", "train_loss"}
        assert isinstance(r["metrics"]["collapsed"], bool)
        assert math.isfinite(r["metrics"]["train_loss"])
    again = run_sweep(att.EXPERIMENT, tmp_path, scale="quick", progress=False)
    assert again.ran == 0 and again.skipped == len(TWINS)
    assert len(read_records_dir(tmp_path)) == len(TWINS)
    # a missing twin is trained with its base recomputed; a batch of another size may round
    # the last bits of float32 differently, so the numbers agree to round-off, not bit for bit
    lines = (tmp_path / "single.jsonl").read_text().splitlines()
    (tmp_path / "single.jsonl").write_text("\n".join(lines[:2]) + "\n")
    third = run_sweep(att.EXPERIMENT, tmp_path, scale="quick", progress=False)
    assert third.ran == 2
    redo = load_part(att.EXPERIMENT, "single", tmp_path, scale="quick")
    assert redo[2]["metrics"]["final_m_drift"] == pytest.approx(
        records[2]["metrics"]["final_m_drift"], rel=1e-4)


def test_published_values_are_a_labelled_constant():
    assert att.PUBLISHED["adam_final_m_drift"] == 0.56
    assert att.PUBLISHED["structural_ratio"] == 662.0
    assert dataclasses.is_dataclass(att.TwinFamily)


def test_published_muon_values_name_their_quantity():
    # the 0.85 / 0.87 of the paper's logs are logit drifts; its gauge twin's M_h drift is 0.80
    pub = att.PUBLISHED
    assert pub["muon_gauge_final_logit_drift"] == 0.85
    assert pub["muon_noise1e-7_final_logit_drift"] == 0.87
    assert pub["muon_gauge_final_m_drift"] == 0.80
    assert "muon_gauge_final" not in pub and "muon_noise_final" not in pub
    lm = pub["charlm_gpu"]
    assert (lm["num_layers"], lm["d_model"], lm["num_steps"]) == (6, 256, 3000)
    assert lm["adam_step1_structural_ratio"] == 39.0
    # comparably far apart: the noise twins' range reaches most of the gauge twins'
    assert lm["adam_noise_final_logit_drift"][1] > 0.8 * lm["adam_gauge_final_logit_drift"][0]


def _timed(method, wall, end, size=5, steps=1500):
    from datetime import UTC, datetime

    created = datetime.fromtimestamp(end, tz=UTC).isoformat()
    return [{"config": {"method": method, "num_steps": steps, "twin": {"kind": k}},
             "batch": {"size": size, "wall_time_s": wall}, "created": created}
            for k in ("base", "gauge")]


def test_machine_throughput_counts_every_worker():
    # two batches side by side (two workers), then one alone: 3 × 7,500 model-steps in 200 s
    records = [*_timed("adam", 100.0, 1000.0), *_timed("momentum", 100.0, 1000.0),
               *_timed("muon_adam", 100.0, 1100.0)]
    t = machine_throughput(records)
    assert t["workers"] == 2 and t["batches"] == 3 and t["model_steps"] == 22_500
    assert t["span_s"] == pytest.approx(200.0)
    assert t["rate"] == pytest.approx(112.5) and t["per_batch_rate"] == pytest.approx(75.0)
    # negative control: the same batches one after the other are one worker, at its own rate
    serial = [*_timed("adam", 100.0, 1000.0), *_timed("momentum", 100.0, 1100.0),
              *_timed("muon_adam", 100.0, 1200.0)]
    s = machine_throughput(serial)
    assert s["workers"] == 1 and s["rate"] == pytest.approx(s["per_batch_rate"])
    assert machine_throughput([])["rate"] is None
