"""The LoRA fine-tuning experiment: the module model, the texts, the adapters and their twins,
the sweep end to end and its summaries."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("peft")
pytest.importorskip("pytorch_optimizer")

from gaugebook.engine.datafiles import MissingDataFileError  # noqa: E402
from gaugebook.engine.records import read_records_dir  # noqa: E402
from gaugebook.engine.sweep import run_sweep  # noqa: E402
from gaugebook.engine.texts import joint_vocab, load_text  # noqa: E402
from gaugebook.engine.transformer import (  # noqa: E402
    TransformerShape,
    forward,
    init_params,
    stack_params,
)
from gaugebook.lora import lora_runs as lr  # noqa: E402
from gaugebook.lora import lora_summary as ls  # noqa: E402
from gaugebook.lora.lora_model import CharTransformer  # noqa: E402
from gaugekit.audit.lora import find_lora_pairs, lora_products  # noqa: E402

SHAPE = TransformerShape(vocab=11, seq_len=8, d_model=8, num_heads=2, num_layers=2, d_mlp=16,
                         num_classes=11, causal=True, last_only=False)


def test_the_module_model_is_the_engines_function():
    params = init_params(SHAPE, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    params = {k: v + 0.1 * torch.randn_like(v) for k, v in params.items()}  # gains away from 1
    model = CharTransformer.from_params(SHAPE, params)
    tokens = torch.randint(0, 11, (3, 8), generator=torch.Generator().manual_seed(2))
    ours, engine = model(tokens), forward(stack_params([params]), tokens, SHAPE)[0]
    assert torch.allclose(ours, engine, rtol=0, atol=1e-12)
    back = model.to_params()
    assert all(torch.equal(back[k], params[k]) for k in params)
    with pytest.raises(ValueError, match="Invalid params"):
        CharTransformer.from_params(SHAPE, {k: v for k, v in params.items() if k != "head"})
    with pytest.raises(ValueError, match="causal"):
        CharTransformer(dataclasses.replace(SHAPE, causal=False))


def test_two_texts_share_one_vocabulary():
    a, b = load_text("builtin"), load_text("auto_python_reference", max_chars=5000)
    vocab = joint_vocab(a, b)
    assert set(a.vocab) | set(b.vocab) == set(vocab) and list(vocab) == sorted(vocab)
    coded = load_text("builtin", vocab=vocab)
    assert coded.decode(coded.ids) == a.chars and coded.vocab == vocab
    with pytest.raises(ValueError, match="outside it"):
        load_text("auto_python_reference", max_chars=5000, vocab=a.vocab)


def test_the_python_reference_without_its_file(tmp_path):
    with pytest.raises(MissingDataFileError, match="pydoc_data"):
        load_text("python_reference", data_dir=tmp_path)
    text = load_text("auto_python_reference", data_dir=tmp_path, max_chars=1000)
    assert text.name.startswith("pydoc_topics_") and len(text.chars) == 1000


# --------------------------------------------------------------------------------------------
# the adapters and their twins, on the quick configuration
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def config():
    c = lr.get_config("quick")
    return c._config("adamw", role="select", lr=1e-3, init="zero", init_seed=1,
                     twin={"kind": "base"})


@pytest.mark.parametrize("init", lr.INITS)
def test_fresh_adapters_start_at_the_pretrained_function(config, init):
    shape = TransformerShape(**config["model"])
    params, _ = lr.pretrained_params(config)
    pretrained = CharTransformer.from_params(shape, params)
    model, pairs = lr.lora_model(config, init, seed=5)
    assert len(pairs) == 4 * shape.num_layers and all(p.rank == config["lora"]["r"] for p in pairs)
    assert all(bool((p.B == 0).all()) == (init == "zero") for p in pairs)
    tokens = torch.randint(0, shape.vocab, (4, shape.seq_len))
    with torch.no_grad():
        assert torch.allclose(model(tokens), pretrained(tokens), atol=1e-5)
    again, _ = lr.lora_model(config, init, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(lora_products(model).values(),
                                                  lora_products(again).values(), strict=True))


@pytest.mark.parametrize("init", lr.INITS)
def test_twins_compute_the_same_function_and_noise_keeps_a_zero_factor(config, init):
    model, pairs = lr.lora_model(config, init, seed=5)
    tokens = torch.randint(0, 10, (4, 8))
    with torch.no_grad():
        base = model(tokens)
        for twin in lr.get_config("quick").twins()[1:]:
            copy, copy_pairs = lr.make_lora_twin(model, pairs, twin)
            assert lr._rel(copy(tokens), base) < lr.FUNCTION_TOLERANCE
            moved = [not torch.equal(p.A, q.A) for p, q in zip(pairs, copy_pairs, strict=True)]
            assert all(moved), twin
            if init == "zero":
                assert all(bool((q.B == 0).all()) for q in copy_pairs)
    # a change that is not a gauge: A scaled without B: the function check must refuse it
    with pytest.raises(ValueError, match="Invalid twin kind"):
        lr.make_lora_twin(model, pairs, {"kind": "scaled"})


def test_every_method_builds_its_optimizer_on_the_adapters(config):
    model, pairs = lr.lora_model(config, "random", seed=5)
    for method in lr.METHODS:
        opt = lr.make_optimizer(method, pairs, 1e-3)
        n = sum(len(g["params"]) for g in opt.param_groups)
        assert n == 2 * len(pairs), method
    with pytest.raises(ValueError, match="Invalid method"):
        lr.make_optimizer("sgd", pairs, 1e-3)
    assert find_lora_pairs(model)[0].A is pairs[0].A


# --------------------------------------------------------------------------------------------
# the sweep end to end (a smaller quick configuration)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    quick = lr.get_config.builders["quick"]
    small = dataclasses.replace(quick(), num_steps=12, checkpoints=(0, 1, 6, 12),
                                grids={m: g[:2] for m, g in quick().grids.items()},
                                fresh_seeds=(3,))
    lr.get_config.builders["quick"] = lambda: small
    try:
        out = tmp_path_factory.mktemp("lora")
        report = run_sweep(lr.EXPERIMENT, out, scale="quick", device="cpu", progress=False)
        assert report.statuses["error"] == 0, report.first_error
        again = run_sweep(lr.EXPERIMENT, out, scale="quick", device="cpu", progress=False)
        assert again.ran == 0 and again.skipped == report.planned  # resumes without redoing
        yield read_records_dir(out)
    finally:
        lr.get_config.builders["quick"] = quick


def test_fresh_runs_use_the_rate_the_selection_chose(records):
    chosen = {r["method"]: r["lr"] for r in ls.selection_rows(records) if r["chosen"]}
    assert set(chosen) == set(lr.METHODS)
    fresh = [r for r in records if r["config"].get("role") == "fresh"]
    assert len(fresh) == len(lr.METHODS) * len(lr.INITS) * 4
    for r in fresh:
        assert r["metrics"]["lr"] == chosen[r["config"]["method"]]
        assert r["metrics"]["pretrained_sha256"]


def test_the_twins_keep_the_groups_each_rule_is_built_to_keep(records):
    for init in lr.INITS:
        # AdamW moves its gauge twins far beyond its noise twins, both groups
        assert not ls.keeps_group(records, "adamw", init, "orthogonal")
        assert not ls.keeps_group(records, "adamw", init, "general")
        for method in ("lora_rite", "scalar_adam", "muon", "scaled_gd"):
            assert ls.keeps_group(records, method, init, "orthogonal"), (method, init)
        # a scalar denominator and the polar factor are orthogonal-only
        assert not ls.keeps_group(records, "scalar_adam", init, "general")
        assert not ls.keeps_group(records, "muon", init, "general")
    assert ls.keeps_group(records, "lora_rite", "random", "general")


def test_the_summaries_and_views_cover_every_optimizer(records):
    from gaugebook.lora import lora_views as views

    fresh = ls.fresh_rows(records)
    assert [r["method"] for r in fresh] == list(lr.METHODS)
    assert all(r["ms_per_step"] > 0 for r in fresh)
    assert ls.pretrain_row(records)["target_val_loss"] > 0
    for table in (views.selection_table, views.fresh_table, views.twin_table):
        html = table(records)
        assert "<table" in html and "LoRA-RITE" in html
    assert len(views.loss_figure(records).axes[0].get_lines()) == len(lr.METHODS)
    drift = views.drift_figure(records)
    assert len(drift.axes) == len(lr.INITS) * len(lr.TWIN_KINDS)
    assert all(len(ax.get_lines()) == len(lr.METHODS) for ax in drift.axes)
    v = ls.verdict(records)
    assert v["best"] in lr.METHODS and v["adamw_ratio_zero"] > 10


def test_the_timing_part_retimes_every_optimizer_in_interleaved_rounds(records):
    rounds = lr.get_config("quick").timing_rounds
    t = ls.timings(records)
    assert set(t) == set(lr.METHODS)
    assert all(sorted(v) == list(range(rounds)) for v in t.values())
    cost = ls.step_cost(records, "muon")
    assert cost is not None and cost.low <= cost.ratio <= cost.high
    specs = lr.get_config("quick").specs("timing")
    order = [(s.config["round"], s.config["method"]) for s in lr.timing_order(specs)]
    assert [k for k, _ in order] == sorted(k for k, _ in order)  # round by round
    per_round = [[m for k, m in order if k == r] for r in range(rounds)]
    assert all(sorted(x) == sorted(lr.METHODS) for x in per_round)
    assert len({tuple(x) for x in per_round}) > 1  # a new order each round
    assert order == [(s.config["round"], s.config["method"]) for s in lr.timing_order(specs)]
