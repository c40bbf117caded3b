"""Routing that reads the model: every matrix oriented by the module that holds it (``Conv1D``
and transposed convolutions store ``(in, out)``), and the fused query/key/value projections the
twin audit knows split into their blocks or heads for Newton–Schulz (opt-in)."""

from __future__ import annotations

import pytest
import torch
from helpers import BiasedAttention
from torch import nn

from gaugekit.linalg import newton_schulz
from gaugekit.optim import MuonAdam, muon_param_groups
from gaugekit.optim.functional_matrix import muon_lr_ratio

transformers = pytest.importorskip("transformers")
from transformers.pytorch_utils import Conv1D  # noqa: E402

F64 = torch.float64


class _MLP(nn.Module):
    """GPT-2's MLP written with ``nn.Linear`` or with transformers' ``Conv1D``."""

    def __init__(self, conv1d: bool, d: int = 8, hidden: int = 32) -> None:
        super().__init__()
        if conv1d:
            self.c_fc, self.c_proj = Conv1D(hidden, d), Conv1D(d, hidden)
        else:
            self.c_fc, self.c_proj = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(torch.tanh(self.c_fc(x)))


def _twins() -> tuple[_MLP, _MLP]:
    torch.manual_seed(0)
    linear, conv = _MLP(False).to(F64), _MLP(True).to(F64)
    with torch.no_grad():
        for name in ("c_fc", "c_proj"):
            getattr(conv, name).weight.copy_(getattr(linear, name).weight.T)
            getattr(conv, name).bias.copy_(getattr(linear, name).bias)
    return linear, conv


def _train(model: nn.Module, groups, steps: int = 3) -> None:
    opt = MuonAdam(groups, lr=0.05)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(16, 8, generator=g, dtype=F64)).sin().sum().backward()
        opt.step()


def test_conv1d_and_linear_take_the_same_steps():
    """The issue's GPT-2 case: ``c_fc`` got the shape factor 1.0 and ``c_proj`` 2.0, the reverse
    of the network written with ``nn.Linear``. Oriented by their module, the two networks take
    the same steps to round-off."""
    linear, conv = _twins()
    groups = muon_param_groups(conv)
    assert [g.get("transposed", False) for g in groups if g["use_muon"]] == [True]
    _train(linear, muon_param_groups(linear))
    _train(conv, groups)
    for name in ("c_fc", "c_proj"):
        torch.testing.assert_close(getattr(conv, name).weight.T, getattr(linear, name).weight,
                                   atol=1e-12, rtol=0)
    # negative control: Conv1D's weights handed to Muon as stored take other steps
    _, unoriented = _twins()
    _train(unoriented, [{"params": [unoriented.c_fc.weight, unoriented.c_proj.weight],
                         "use_muon": True},
                        {"params": [unoriented.c_fc.bias, unoriented.c_proj.bias],
                         "use_muon": False}])
    gap = (unoriented.c_fc.weight.T - linear.c_fc.weight).abs().max()
    assert gap > 1e-3
    assert muon_lr_ratio("original", 32, 8) == 2.0  # c_fc is 32 × 8 as out × in


def test_a_transposed_convolution_is_oriented_out_by_in():
    torch.manual_seed(0)
    model = nn.Sequential(nn.ConvTranspose2d(4, 6, 3), nn.Conv2d(6, 4, 3))
    groups = muon_param_groups(model)
    flipped = [g for g in groups if g.get("transposed")]
    assert len(flipped) == 1 and flipped[0]["params"] == [model[0].weight]
    weight = model[0].weight.detach().clone()
    grad = torch.randn_like(weight)
    model[0].weight.grad = grad.clone()
    opt = MuonAdam(flipped, lr=0.1, momentum=0.0, nesterov=False, adjust_lr_fn=None)
    opt.step()
    # out × in·kh·kw: the matrix of the (6, 4, 3, 3) kernel of the same map
    matrix = grad.transpose(0, 1).reshape(6, 36)
    expected = weight - 0.1 * newton_schulz(matrix).reshape(6, 4, 3, 3).transpose(0, 1)
    torch.testing.assert_close(model[0].weight.detach(), expected, atol=1e-6, rtol=0)


def _gpt2(n_head: int = 2, n_embd: int = 8):
    config = transformers.GPT2Config(n_layer=1, n_head=n_head, n_embd=n_embd, vocab_size=11,
                                     n_positions=16)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).to(F64)


@pytest.mark.parametrize(("by", "blocks"), [(True, 3), ("blocks", 3), ("heads", 6)])
def test_gpt2s_c_attn_is_split_into_its_blocks_or_heads(by, blocks):
    model = _gpt2()
    c_attn = model.transformer.h[0].attn.c_attn
    groups = muon_param_groups(model, split_qkv=by)
    (split,) = [g for g in groups if "split_rows" in g]
    assert split["params"] == [c_attn.weight] and split["transposed"]
    assert split["split_rows"] == blocks
    # the update of c_attn: each block of W = c_attnᵀ (out × in) orthogonalized alone
    weight = c_attn.weight.detach().clone()
    grad = torch.randn(weight.shape, generator=torch.Generator().manual_seed(2), dtype=F64)
    c_attn.weight.grad = grad.clone()
    MuonAdam([split], lr=0.1, momentum=0.0, nesterov=False, adjust_lr_fn=None).step()
    rows = grad.T.reshape(blocks, -1, grad.shape[0])
    expected = weight - 0.1 * torch.cat([newton_schulz(b) for b in rows]).T
    torch.testing.assert_close(c_attn.weight.detach(), expected, atol=1e-12, rtol=0)
    # negative control: without split_qkv c_attn is one (transposed) matrix
    assert not any("split_rows" in g for g in muon_param_groups(model))


def test_neox_query_rows_are_gathered_per_block():
    """GPT-NeoX's rows are ``[q_h | k_h | v_h]`` per head: by block, the query rows of all
    heads form one matrix (row indices), by head every ``d_head`` rows."""
    config = transformers.GPTNeoXConfig(num_hidden_layers=1, num_attention_heads=2,
                                        hidden_size=16, intermediate_size=16, vocab_size=11,
                                        max_position_embeddings=16)
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(config)
    qkv = model.gpt_neox.layers[0].attention.query_key_value.weight
    (split,) = [g for g in muon_param_groups(model, split_qkv="blocks") if "split_rows" in g]
    q_rows, k_rows, v_rows = split["split_rows"]
    assert q_rows == (*range(8), *range(24, 32)) and k_rows[0] == 8 and v_rows[-1] == 47
    (heads,) = [g for g in muon_param_groups(model, split_qkv="heads") if "split_rows" in g]
    assert heads["params"] == [qkv] and heads["split_rows"] == 6


def test_split_qkv_is_validated():
    with pytest.raises(ValueError, match="^Invalid split_qkv: 'rows'"):
        muon_param_groups(nn.Linear(2, 2), split_qkv="rows")


@pytest.mark.parametrize("adam", ["adamw", "shared_scale"])
def test_the_registry_and_cli_give_the_twin_audits_verdict_with_its_scope(adam, capsys):
    """One verdict per optimizer and model: ``gaugekit audit muon_adam`` said "keeps the
    gauge" while the twin audit of a model under MuonAdam (AdamW side) says "breaks". The
    registry's verdict on a routed model now agrees with the twin audit, and the CLI prints
    it with the scope of the factor audit's own verdict."""
    from gaugekit import cli
    from gaugekit.audit import audit_twins
    from gaugekit.optim import get_spec

    torch.manual_seed(0)
    model = BiasedAttention().to(F64)
    x = torch.randint(0, 20, (3, 7), generator=torch.Generator().manual_seed(5))

    def loss(m, b):
        return nn.functional.cross_entropy(m(b).reshape(-1, 20), b.reshape(-1))

    twin = audit_twins(model, loss, probe=x, batch=x, optimizer="muon_adam",
                       optimizer_kwargs={"adam": adam}, steps=6, twins=("gauge", "noise"))
    keeps, why = get_spec("muon_adam").model_verdict(adam=adam)
    assert twin.verdict.outcome == ("keeps the gauge" if keeps else "breaks the gauge"), \
        twin.verdict_line()
    assert ("bias" in why) is (adam == "adamw")
    assert cli.main(["audit", "muon_adam", f"adam={adam!r}", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "registry: muon_adam: keeps the gauge (the factor gauge" in out
    assert f"adam={adam!r}: {'keeps' if keeps else 'breaks'} its gauges" in out
