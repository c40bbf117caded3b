"""The eigenbasis Adam's comparison runs: specs of the two existing experiments, unchanged."""

from __future__ import annotations

import torch

from gaugebook.attention import attention_runs as att
from gaugebook.ecosystem import eigenbasis_runs as eb
from gaugebook.engine import twin_trainer as tt
from gaugebook.engine.transformer import TransformerShape, init_params, stack_params
from gaugebook.experiments import get_experiment
from gaugekit.optim import Adam, EigenAdam


def test_sensing_part_is_table2_protocol_for_eigen_adam():
    exp = get_experiment("eigenbasis")
    specs = exp.specs("sensing", "paper")
    assert len(specs) == len(eb.SENSING_LR_GRID) * 3
    c = specs[0].config
    assert c["method"] == "eigen_adam" and c["schedule"] == "constant"
    assert c["problem"]["n"] == 40 and c["budget"]["num_steps"] == 20_000
    assert c["hparams"]["update_freq"] == 10 and c["hparams"]["gram_beta"] == 0.95


def test_attention_parts_mirror_the_single_and_float64_families():
    exp = get_experiment("eigenbasis")
    single = exp.specs("attention", "paper")
    adam = [s for s in att.EXPERIMENT.specs("single", "paper") if s.config["method"] == "adam"]
    assert [s.config["twin"] for s in single] == [s.config["twin"] for s in adam]
    assert {s.config["num_steps"] for s in single} == {1500}
    f64 = exp.specs("attention_float64", "paper")
    assert {s.config["dtype"] for s in f64} == {"float64"}
    assert "eigen_adam" not in att.METHODS  # the attention experiment's own parts are unchanged


def test_twin_optimizers_put_the_left_eigenbasis_on_the_block_matrices():
    shape = TransformerShape(d_model=16, num_heads=2, d_mlp=32)
    base = init_params(shape, generator=torch.Generator().manual_seed(0))
    params = {k: v.requires_grad_(True) for k, v in stack_params([base, base]).items()}
    eigen, adam = tt.make_twin_optimizers("eigen_adam", params,
                                           att.PAPER_HPARAMS["eigen_adam"])
    assert isinstance(eigen, EigenAdam) and isinstance(adam, Adam)
    assert eigen.defaults["side"] == "left" and eigen.defaults["batch_dims"] == 1
    ids = {id(p) for g in eigen.param_groups for p in g["params"]}
    assert id(params["layers.0.q"]) in ids and id(params["tok_emb"]) not in ids
