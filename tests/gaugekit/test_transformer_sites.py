"""The twin audit on Hugging Face ``transformers`` models, built from configs (no download).

The sites are found by themselves (separate projections, GPT-2's fused ``Conv1D``, the fused
rows of GPT-NeoX, Phi-3, MPT, Falcon and GPTBigCode, grouped-query and rotary attention); each
gauge twin is the same function to round-off before training, and each structure has a negative
control that fails for a reason of mathematics (a general rotation under RoPE, the wrong pairing
layout, a query head rotated apart from its key group, GPT-2's weight rotated in the wrong
layout, fused rows read in another order). Then the verdicts: SGD and shared-scale Adam keep the
gauge (drift at float64 round-off), Adam and AdamW break it.

Models in float64, ``initializer_range=0.2``: with the default 0.02 the logits ``qᵀk`` are so
small that attention is nearly uniform, and a broken gauge would barely show in the outputs."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys

import pytest
import torch
from helpers import BROKEN, generator
from torch import nn

from gaugekit.audit.factor_results import BREAKS, KEEPS
from gaugekit.audit.heads import (
    QKSite,
    RotaryLayout,
    audit_twins,
    find_qk_sites,
    gauge_twin,
    head_invariants,
    output_drift,
)
from gaugekit.optim import SharedScaleAdam

transformers = pytest.importorskip("transformers")

F64 = torch.float64
#: the gauge twin's init output drift: float64 round-off of a two-layer forward pass
ROUNDOFF = 1e-13
SMALL = {"num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 100,
         "initializer_range": 0.2}


def _build(cls_name: str, config_name: str, **kw) -> nn.Module:
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**kw)
    return getattr(transformers, cls_name)(config).to(F64).eval()


def bert() -> nn.Module:
    return _build("BertForMaskedLM", "BertConfig", hidden_size=32, num_attention_heads=4, **SMALL)


def roberta() -> nn.Module:
    return _build("RobertaForMaskedLM", "RobertaConfig", hidden_size=32, num_attention_heads=4,
                  **SMALL)


def vit() -> nn.Module:
    return _build("ViTForImageClassification", "ViTConfig", hidden_size=32,
                  num_attention_heads=4, num_hidden_layers=2, intermediate_size=64, image_size=8,
                  patch_size=4, num_labels=3, initializer_range=0.2)


def gpt2(**kw) -> nn.Module:
    config = {"n_embd": 32, "n_head": 4, "n_layer": 2, "vocab_size": 100,
              "initializer_range": 0.2, **kw}
    return _build("GPT2LMHeadModel", "GPT2Config", **config)


def llama() -> nn.Module:
    return _build("LlamaForCausalLM", "LlamaConfig", hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=2, **SMALL)


def qwen2() -> nn.Module:  # q/k biases, one key head for four query heads
    return _build("Qwen2ForCausalLM", "Qwen2Config", hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=1, **SMALL)


def neox() -> nn.Module:  # fused per-head rows, partial half-split rotary (r = 2 of 8)
    return _build("GPTNeoXForCausalLM", "GPTNeoXConfig", hidden_size=32, num_attention_heads=4,
                  **SMALL)


def gptj() -> nn.Module:  # interleaved rotary on 4 of 8 coordinates
    return _build("GPTJForCausalLM", "GPTJConfig", n_embd=32, n_head=4, n_layer=2,
                  vocab_size=100, rotary_dim=4, initializer_range=0.2)


def phi3() -> nn.Module:  # fused [q; k; v] rows, grouped-query 4/2, rotary
    return _build("Phi3ForCausalLM", "Phi3Config", hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=2, pad_token_id=0, **SMALL)


def mpt(**attn) -> nn.Module:  # fused [q; k; v] rows, ALiBi
    return _build("MptForCausalLM", "MptConfig", d_model=32, n_heads=4, n_layers=2,
                  expansion_ratio=2, vocab_size=100, initializer_range=0.2,
                  attn_config=attn or None)


def _falcon(**kw) -> nn.Module:
    return _build("FalconForCausalLM", "FalconConfig", hidden_size=32, num_attention_heads=4,
                  num_hidden_layers=2, vocab_size=100, initializer_range=0.2, **kw)


def falcon_mq() -> nn.Module:  # multi-query: [q; k; v] rows with one key head, rotary
    return _falcon(multi_query=True)


def falcon_grouped() -> nn.Module:  # Falcon-40B's rows: [q_g1 q_g2 k_g v_g] per group
    return _falcon(new_decoder_architecture=True, num_kv_heads=2)


def falcon_heads() -> nn.Module:  # [q_h | k_h | v_h] per head, with biases
    return _falcon(multi_query=False, bias=True)


def falcon_alibi() -> nn.Module:  # ALiBi: it holds a rotary module it never calls
    return _falcon(alibi=True)


def bigcode(**kw) -> nn.Module:  # GPTBigCode's c_attn is an nn.Linear
    return _build("GPTBigCodeForCausalLM", "GPTBigCodeConfig", n_embd=32, n_head=4, n_layer=2,
                  vocab_size=100, initializer_range=0.2, **kw)


def bigcode_mq() -> nn.Module:
    return bigcode(multi_query=True)


def bigcode_heads() -> nn.Module:
    return bigcode(multi_query=False)


IDS = torch.randint(0, 100, (4, 12), generator=generator(1))
PIXELS = torch.randn(2, 3, 8, 8, generator=generator(2), dtype=F64)


def lm_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def probe_of(name: str) -> torch.Tensor:
    return PIXELS if name == "vit" else IDS


BUILDERS = {"bert": bert, "roberta": roberta, "vit": vit, "gpt2": gpt2, "llama": llama,
            "qwen2": qwen2, "neox": neox, "gptj": gptj, "phi3": phi3, "mpt": mpt,
            "falcon_mq": falcon_mq, "falcon_grouped": falcon_grouped,
            "falcon_heads": falcon_heads, "falcon_alibi": falcon_alibi,
            "bigcode_mq": bigcode_mq, "bigcode_heads": bigcode_heads}
#: Llama's half-split pairs on d_head = 8
HALF = ((0, 4), (1, 5), (2, 6), (3, 7))


# --------------------------------------------------------------------------------------------
# sites
# --------------------------------------------------------------------------------------------

#: name -> (kind, query heads, key heads, d_head, bias, rotary style, rotary pairs)
EXPECTED = {
    "bert": ("linear", 4, 4, 8, True, None, None),
    "roberta": ("linear", 4, 4, 8, True, None, None),
    "vit": ("linear", 4, 4, 8, True, None, None),
    "gpt2": ("conv1d", 4, 4, 8, True, None, None),
    "llama": ("linear", 4, 2, 8, False, "half_split", ((0, 4), (1, 5), (2, 6), (3, 7))),
    "qwen2": ("linear", 4, 1, 8, True, "half_split", ((0, 4), (1, 5), (2, 6), (3, 7))),
    "neox": ("fused_heads", 4, 4, 8, True, "half_split", ((0, 1),)),
    "gptj": ("linear", 4, 4, 8, False, "interleaved", ((0, 1), (2, 3))),
    "phi3": ("packed_rows", 4, 2, 8, False, "half_split", HALF),
    "mpt": ("packed_rows", 4, 4, 8, False, None, None),
    "falcon_mq": ("packed_rows", 4, 1, 8, False, "half_split", HALF),
    "falcon_grouped": ("grouped_rows", 4, 2, 8, False, "half_split", HALF),
    "falcon_heads": ("fused_heads", 4, 4, 8, True, "half_split", HALF),
    "falcon_alibi": ("packed_rows", 4, 1, 8, False, None, None),
    "bigcode_mq": ("packed_rows", 4, 1, 8, True, None, None),
    "bigcode_heads": ("fused_heads", 4, 4, 8, True, None, None),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_sites_are_found_by_themselves(name):
    sites = find_qk_sites(BUILDERS[name]())
    kind, heads, kv, d_head, bias, style, pairs = EXPECTED[name]
    assert len(sites) == 2
    for s in sites:
        assert (s.kind, s.num_heads, s.kv_heads, s.d_head, s.q_bias, s.k_bias) == (
            kind, heads, kv, d_head, bias, bias)
        assert (None if s.rotary is None else (s.rotary.style, s.rotary.pairs)) == (
            None if style is None else (style, pairs))


def test_llama_frequencies_are_read_from_the_model():
    site = find_qk_sites(llama())[0]
    assert site.rotary.frequencies == pytest.approx([1.0, 0.1, 0.01, 0.001], rel=1e-6)


def test_explicit_pairs_in_a_transformers_module_need_no_head_count():
    """A ``(q_proj, k_proj)`` pair of grouped-query widths (32 and 16 rows) inside Llama's
    attention: heads, key groups and the rotary layout are read from the module."""
    model = llama()
    pair = ("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj")
    site, = find_qk_sites(model, [pair])
    assert (site.num_heads, site.kv_heads, site.rotary.style) == (4, 2, "half_split")


def test_gpt2_cross_attention_site():
    """With cross-attention the query is ``q_attn`` and the key the first ``E`` columns of the
    fused key/value ``c_attn``; the gauge twin is the same function."""
    model = gpt2(add_cross_attention=True, n_layer=1)
    sites = find_qk_sites(model)
    assert [s.kind for s in sites] == ["conv1d", "conv1d_cross"]
    probe = (IDS, torch.randn(4, 5, 32, generator=generator(3), dtype=F64))

    def forward(m, p):
        return m(input_ids=p[0], encoder_hidden_states=p[1]).logits

    twin, _ = gauge_twin(model, sites, generator=generator(4))
    assert output_drift(model, twin, probe, forward=forward) < ROUNDOFF


def test_a_fused_projection_of_unknown_layout_is_refused():
    class Config:
        num_attention_heads = 4

    class FusedAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = Config()
            self.qkv_proj = nn.Linear(32, 96)

    # both row orders fit its 96 rows; a module that cannot run on token ids cannot be probed
    with pytest.raises(ValueError, match=r"site '0' has a layout its code does not name "
                       r"\(fused_heads or packed_rows\), and probing the model to tell them "
                       r"apart failed"):
        find_qk_sites(nn.Sequential(FusedAttention()))

    class OddAttention(FusedAttention):  # 80 rows: no row order of four heads fits
        def __init__(self) -> None:
            super().__init__()
            self.qkv_proj = nn.Linear(32, 80)

    with pytest.raises(ValueError, match=r"qkv_proj \(Linear\) in OddAttention is a fused "
                                         r"q/k/v projection whose row layout"):
        find_qk_sites(nn.Sequential(OddAttention()))


def test_a_qk_layernorm_is_refused():
    """Persimmon's qk LayerNorm subtracts the mean: ``(I − 11ᵀ/d) S ≠ S (I − 11ᵀ/d)`` for a
    sign flip ``S``, and it has a bias besides its gain; only a gain over an RMS norm leaves
    signed permutations (below)."""
    model = _build("PersimmonForCausalLM", "PersimmonConfig", hidden_size=32,
                   num_attention_heads=4, qk_layernorm=True, **SMALL)
    with pytest.raises(ValueError, match="q_layernorm' is a LayerNorm on q/k"):
        find_qk_sites(model)


# --------------------------------------------------------------------------------------------
# the gauge twin is the same function; what is not
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUILDERS))
def test_gauge_twin_is_the_same_function(name):
    model = BUILDERS[name]()
    twin, rotations = gauge_twin(model, generator=generator(5))
    sites = find_qk_sites(model)
    assert [tuple(A.shape) for A in rotations] == [(s.kv_heads, 8, 8) for s in sites]
    before = {n: p.clone() for n, p in model.named_parameters()}
    moved = [n for n, p in twin.named_parameters() if not torch.equal(p, before[n])]
    assert moved, "the twin's query/key weights were rotated"
    assert output_drift(model, twin, probe_of(name)) < ROUNDOFF


@pytest.mark.parametrize("name", ["llama", "qwen2", "neox", "gptj", "phi3", "falcon_grouped"])
def test_a_general_rotation_changes_a_rotary_model(name):
    """Negative control: Haar ``A ∈ O(d)`` on the same sites (the gauge of attention without
    RoPE) does not commute with ``R(δ)``: the logits change far beyond round-off, and the
    audit's init check refuses it."""
    model = BUILDERS[name]()
    general = [dataclasses.replace(s, rotary=None) for s in find_qk_sites(model)]
    twin, _ = gauge_twin(model, general, generator=generator(5), check_structure=False)
    assert output_drift(model, twin, IDS) > 10 * BROKEN
    with pytest.raises(ValueError, match="the gauge twin's output on the probe is not"):
        audit_twins(model, lm_loss, probe=IDS, batch=IDS, sites=general, steps=1,
                    check_structure=False)


@pytest.mark.parametrize("name, wrong", [("llama", RotaryLayout.interleaved),
                                         ("gptj", RotaryLayout.half_split)])
def test_the_pairing_layout_matters(name, wrong):
    """Negative control: the residual gauge drawn in the other layout's pairs (Llama's
    ``(k, k + 4)`` against GPT-J's ``(2k, 2k + 1)``) rotates planes the model does not rotate
    together, so the twin is a different function."""
    model = BUILDERS[name]()
    sites = find_qk_sites(model)
    r = sites[0].rotary.rotary_dim
    swapped = [dataclasses.replace(s, rotary=wrong(s.d_head, r)) for s in sites]
    twin, _ = gauge_twin(model, swapped, generator=generator(5))
    assert output_drift(model, twin, IDS) > 10 * BROKEN


#: name -> a fused layout of the same row count that is not the model's
WRONG_LAYOUT = {"phi3": "grouped_rows", "mpt": "fused_heads", "falcon_grouped": "packed_rows",
                "bigcode_heads": "packed_rows", "falcon_heads": "packed_rows"}


@pytest.mark.parametrize("name", list(WRONG_LAYOUT))
def test_the_fused_row_layout_matters(name):
    """Negative control for the fused layouts: the same rotations taken through the views of
    another row order of the same size rotate rows of other heads (or of the values), so the
    twin is another function."""
    model = BUILDERS[name]()
    sites = find_qk_sites(model)
    twin, _ = gauge_twin(model, sites, generator=generator(5))
    assert output_drift(model, twin, IDS) < ROUNDOFF
    kind = WRONG_LAYOUT[name]
    wrong = [dataclasses.replace(s, kind=kind, num_kv_heads=(
        None if kind == "fused_heads" else s.num_kv_heads)) for s in sites]
    twin, _ = gauge_twin(model, wrong, generator=generator(5))
    assert output_drift(model, twin, IDS) > 10 * BROKEN


def test_a_clamp_on_q_and_k_is_refused():
    """MPT's ``clip_qkv`` clamps each coordinate: ``clamp(A q) ≠ A clamp(q)`` once an entry
    reaches the bound."""
    with pytest.raises(ValueError, match="clamps q, k and v to ±clip_qkv = 0.5"):
        find_qk_sites(mpt(clip_qkv=0.5))


def test_gptbigcode_cross_attention_is_refused():
    model = bigcode(add_cross_attention=True, multi_query=False)
    with pytest.raises(ValueError, match="cross-attention whose c_attn splits keys"):
        find_qk_sites(model)


def test_a_query_head_rotated_apart_from_its_key_group_changes_the_function():
    """Grouped-query attention: query heads 0 and 1 both read key head 0, so they must turn with
    ``A_0``; giving head 1 another commuting rotation breaks ``q_1ᵀ k_0``."""
    model = llama()
    sites = find_qk_sites(model)
    twin, _ = gauge_twin(model, sites, generator=generator(5))
    assert output_drift(model, twin, IDS) < ROUNDOFF
    B = sites[0].rotary.draw(1, generator=generator(6))[0]
    with torch.no_grad():
        W = twin.model.layers[0].self_attn.q_proj.weight
        W[8:16] = B @ W[8:16]
    assert output_drift(model, twin, IDS) > 10 * BROKEN


def test_gpt2_weight_rotated_in_linear_layout_changes_the_function():
    """Negative control for the ``Conv1D`` views: rotating blocks of *rows* of ``c_attn.weight``
    (its input side, as if it were ``nn.Linear``) mixes input features, not head coordinates."""
    model, twin = gpt2(), gpt2()
    assert output_drift(model, twin, IDS) == 0.0
    Q = torch.linalg.qr(torch.randn(8, 8, generator=generator(7), dtype=F64)).Q
    A = torch.block_diag(*[Q] * 4)
    with torch.no_grad():
        W = twin.transformer.h[0].attn.c_attn.weight
        W[:, :64] = A @ W[:, :64]
    assert output_drift(model, twin, IDS) > 10 * BROKEN


def test_non_commuting_rotations_are_refused_on_a_rotary_site():
    model = llama()
    sites = find_qk_sites(model)
    haar = [torch.linalg.qr(torch.randn(s.kv_heads, 8, 8, generator=generator(8),
                                        dtype=F64)).Q for s in sites]
    with pytest.raises(ValueError, match="commute with the rotary map"):
        audit_twins(model, lm_loss, probe=IDS, batch=IDS, rotations=haar, steps=1)


def test_a_qksite_given_by_hand_is_validated():
    model = llama()
    site = find_qk_sites(model)[0]
    assert find_qk_sites(model, [site]) == [site]
    with pytest.raises(ValueError, match="the key weight has 16 rows; expected 4 heads"):
        find_qk_sites(model, [dataclasses.replace(site, num_kv_heads=None)])
    with pytest.raises(ValueError, match="does not fit the model"):
        find_qk_sites(model, [QKSite("x", "linear", ("nope", "nada"), 4, 8, False, False)])


# --------------------------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------------------------

OPTIMIZERS = {
    "adam": (lambda p: torch.optim.Adam(p, lr=1e-3), BREAKS),
    "adamw": (lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01), BREAKS),
    "sgd": (lambda p: torch.optim.SGD(p, lr=0.1), KEEPS),
    "shared_scale_adam": (lambda p: SharedScaleAdam(p, lr=1e-3), KEEPS),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "phi3", "falcon_grouped", "mpt"])
def test_verdicts(name, optimizer):
    """Equivariant rules keep the gauge twin on the orbit (drift at float64 round-off, far below
    the noise twin's 1e-7 perturbation); coordinate-wise Adam/AdamW split it from the first step,
    ten thousand times farther than the noise twin."""
    factory, expected = OPTIMIZERS[optimizer]
    result = audit_twins(BUILDERS[name](), lm_loss, probe=IDS, batch=IDS, optimizer=factory,
                         steps=3)
    gauge, noise = result.trace("gauge").max_drift, result.trace("noise").max_drift
    assert result.trace("gauge").init_output_drift <= ROUNDOFF
    assert result.trace("identity").max_drift == 0.0
    assert result.verdict.outcome == expected, result.verdict_line()
    if expected == KEEPS:
        assert gauge < 1e-13 and noise > 1e-8
    else:
        assert gauge > 1e3 * noise


def test_the_library_never_imports_transformers():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, gaugekit, gaugekit.audit, gaugekit.audit.rotary; "
                               "print('transformers' in sys.modules)"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# a rotary embedding whose rotate function has no known name: its pairs probed on the model
# --------------------------------------------------------------------------------------------

UNNAMED_ROTARY = {  # builder, dtype it runs in, the pairs the model's code rotates
    "RoFormer": (lambda dt: _build("RoFormerForMaskedLM", "RoFormerConfig", hidden_size=32,
                                   num_attention_heads=4, embedding_size=32, **SMALL).to(dt),
                 F64, "interleaved"),  # sin/cos repeated per pair, rotate every two
    "Llama4": (lambda dt: _build("Llama4ForCausalLM", "Llama4TextConfig", hidden_size=32,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                 intermediate_size_mlp=64, num_local_experts=2,
                                 **SMALL).to(dt),
               F64, "interleaved"),  # complex multiplication of coordinate pairs (2k, 2k + 1)
    "gpt-oss": (lambda dt: _build("GptOssForCausalLM", "GptOssConfig", hidden_size=32,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                  num_local_experts=2, num_experts_per_tok=1,
                                  **SMALL).to(dt),
                torch.float32, "half_split"),  # chunks each head in two; float32 experts only
}


@pytest.mark.parametrize("name", list(UNNAMED_ROTARY))
def test_a_rotary_layout_without_a_known_rotate_function_is_probed(name):
    """The finder names no rotate function here; of the two candidate pairings the one whose
    residual-gauge twin keeps the model's function is the one the model's code rotates."""
    from gaugekit.audit.layout_probe import _check_candidate, _token_probe

    make, dtype, style = UNNAMED_ROTARY[name]
    with pytest.warns(UserWarning) if dtype != F64 else contextlib.nullcontext():
        sites = find_qk_sites(make(dtype))
    assert {s.rotary.style for s in sites} == {style} and not any(s.candidates for s in sites)
    # negative control: the other pairing's rotations do not commute with the model's map
    model = make(dtype)
    other = (RotaryLayout.interleaved if style == "half_split" else RotaryLayout.half_split)(
        sites[0].d_head, sites[0].rotary.rotary_dim)
    checks = _check_candidate(model, dataclasses.replace(sites[0], rotary=other),
                              _token_probe(model))
    assert checks[0].drift > 100 * checks[0].limit


def test_a_rotary_model_that_cannot_be_probed_is_refused_with_the_reason():
    """A user's wrapper around the model has no ``config`` to draw token ids from."""

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = UNNAMED_ROTARY["RoFormer"][0](F64)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=ids).logits

    with pytest.raises(ValueError, match=r"half_split pairs or linear, interleaved pairs\), and "
                       r"probing the model to tell them apart failed \(the model has no "
                       r"config.vocab_size"):
        find_qk_sites(Wrapper())


# --------------------------------------------------------------------------------------------
# a fused q/k/v projection of a class the audit does not know: its row order probed
# --------------------------------------------------------------------------------------------

MODERNBERT_IDS = {"pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2, "cls_token_id": 2,
                  "sep_token_id": 1}


def modernbert() -> nn.Module:  # Wqkv: [q; k; v] blocks, rotary on half-split pairs
    return _build("ModernBertForMaskedLM", "ModernBertConfig", hidden_size=32,
                  num_attention_heads=4, global_attn_every_n_layers=1, local_attention=16,
                  **MODERNBERT_IDS, **SMALL)


def persimmon() -> nn.Module:  # query_key_value: [q_h; k_h; v_h] per head, partial rotary
    return _build("PersimmonForCausalLM", "PersimmonConfig", hidden_size=32,
                  num_attention_heads=4, qk_layernorm=False, **SMALL)


@pytest.mark.parametrize("build, kind, style, width", [
    (modernbert, "packed_rows", "half_split", 8), (persimmon, "fused_heads", "half_split", 4)])
def test_a_fused_projection_of_an_unknown_class_is_probed(build, kind, style, width):
    model = build()
    sites = find_qk_sites(model)
    assert {(s.kind, s.rotary.style, s.rotary.rotary_dim) for s in sites} == {
        (kind, style, width)}
    twin, _ = gauge_twin(model, sites, generator=generator(5))
    # float32 round-off: both compute their rotary embedding in float32
    assert output_drift(model, twin, IDS) < 1e-6


def test_a_fused_projection_no_candidate_fits_is_refused_with_the_distances():
    """Negative control: CodeGen splits its qkv_proj into model-parallel blocks, each holding
    [q | v | k]; neither candidate row order keeps the function, and the refusal says how far
    each twin ends from its base."""
    model = _build("CodeGenForCausalLM", "CodeGenConfig", n_embd=32, n_head=4, n_layer=2,
                   rotary_dim=4, n_ctx=64, vocab_size=100, initializer_range=0.2)
    with pytest.raises(ValueError, match=r"0 of its candidate layouts keep the model's "
                       r"function \(packed_rows, interleaved pairs: rel = (\S+) in float64"):
        find_qk_sites(model)


def test_latent_attention_is_refused_for_what_it_is():
    """DeepSeek's MLA is attention of transformers: the refusal names its modules and why the
    per-head sites do not reach it, not that the model has no attention."""
    model = _build("DeepseekV3ForCausalLM", "DeepseekV3Config", hidden_size=32,
                   num_attention_heads=4, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4,
                   qk_nope_head_dim=4, v_head_dim=8, n_routed_experts=2, num_experts_per_tok=1,
                   moe_intermediate_size=16, first_k_dense_replace=1, n_group=1, topk_group=1,
                   **SMALL)
    with pytest.raises(ValueError, match=r"'model.layers.0.self_attn' \(DeepseekV3Attention, "
                       r"with q_a_proj, .*kv_b_proj.*\) and 1 more: latent attention"):
        find_qk_sites(model)


# --------------------------------------------------------------------------------------------
# qk-norms with a gain: the signed permutations, the gains permuted alike
# --------------------------------------------------------------------------------------------


def qwen3() -> nn.Module:  # one gain of d_head shared by every head, rotary after the norm
    return _build("Qwen3ForCausalLM", "Qwen3Config", hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, **SMALL)


def olmo2() -> nn.Module:  # one gain over the whole projection: each head its own block
    return _build("Olmo2ForCausalLM", "Olmo2Config", hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=2, **SMALL)


def gemma3() -> nn.Module:  # gain 1 + w, shared
    return _build("Gemma3ForCausalLM", "Gemma3TextConfig", hidden_size=32,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8, **SMALL)


QK_NORMED = {"Qwen3": (qwen3, True), "OLMo2": (olmo2, False), "Gemma3": (gemma3, True)}


def _gains(model: nn.Module, site: QKSite) -> tuple[torch.Tensor, torch.Tensor]:
    modules = dict(model.named_modules())
    return modules[site.norms.q].weight, modules[site.norms.k].weight


@pytest.mark.parametrize("name", list(QK_NORMED))
def test_a_qk_norm_gain_leaves_the_signed_permutations(name):
    """The twin is drawn from the signed permutations that commute with the rotary map, its
    gains permuted alike: the same function and the same ``M_h`` to round-off."""
    from gaugekit.audit.qk_norm import is_signed_permutation

    build, shared = QK_NORMED[name]
    model = build()
    with torch.no_grad():  # gains away from 1, so that permuting them matters
        for site in find_qk_sites(model):
            for g in _gains(model, site):
                g.normal_(1.0, 0.5, generator=generator(3))
    sites = find_qk_sites(model)
    assert all(s.norms is not None and s.norms.shared == shared for s in sites)
    twin, rotations = gauge_twin(model, sites, generator=generator(5))
    for A in rotations:
        assert is_signed_permutation(A) and not torch.equal(A.abs(), torch.eye(8).expand_as(A))
    assert output_drift(model, twin, IDS) < 1e-6  # float32 rotary inside
    assert not torch.equal(_gains(twin, sites[0])[0], _gains(model, sites[0])[0])
    for a, b in zip(head_invariants(model, sites), head_invariants(twin, sites), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", list(QK_NORMED))
def test_a_rotation_that_commutes_with_rotary_but_mixes_coordinates_breaks_the_gain(name):
    """Negative control: SO(2) on each frequency pair at a generic angle commutes with the
    rotary map and with the RMS, but not with a gain that differs between the pair's two
    coordinates; and the rotation check refuses it for a normed site."""
    build, _ = QK_NORMED[name]
    model = build()
    with torch.no_grad():
        for site in find_qk_sites(model):
            for g in _gains(model, site):
                g.normal_(1.0, 0.5, generator=generator(3))
    sites = find_qk_sites(model)
    bare = [dataclasses.replace(s, norms=None) for s in sites]
    twin, rotations = gauge_twin(model, bare, generator=generator(5), check_structure=False)
    assert output_drift(model, twin, IDS) > BROKEN
    with pytest.raises(ValueError, match="expected signed permutations"):
        gauge_twin(model, sites, rotations=rotations)


def test_a_gain_moves_the_invariant():
    """Negative control of the invariant: a gain changed alone changes ``M_h``."""
    model = qwen3()
    site = find_qk_sites(model)[0]
    before = head_invariants(model, [site])[0]
    with torch.no_grad():
        _gains(model, site)[0][0] += 0.5
    assert (head_invariants(model, [site])[0] - before).abs().max() > 1e-3


def test_coordinatewise_adam_keeps_the_qk_norm_gauge_and_breaks_the_rotations():
    """Adam's step is equivariant under signed permutations of coordinates, so it keeps the
    gauge a qk-norm gain leaves (Qwen3); it breaks the rotations Qwen2, without qk-norm, has.
    In float32: transformers computes the rotary embedding in float32 even in a float64 model,
    and Adam turns that round-off into drift at float32's scale."""
    adam = dict(probe=IDS, batch=IDS, steps=3, optimizer=lambda p: torch.optim.Adam(p, lr=1e-2))
    kept = audit_twins(qwen3().float(), lm_loss, **adam)
    broken = audit_twins(qwen2().float(), lm_loss, **adam)
    assert kept.verdict.outcome == KEEPS and broken.verdict.outcome == BREAKS


def test_muon_routing_leaves_a_fused_projection_of_unknown_layout_whole():
    """Muon's row split reads only layouts the code names; ModernBERT's Wqkv, whose order the
    audit finds by probing, is orthogonalized whole rather than split by a guess."""
    from gaugekit.optim.params import fused_qkv_blocks

    model = modernbert()
    assert fused_qkv_blocks(model) == {}
    assert fused_qkv_blocks(phi3()) != {}  # a layout the code names is split
