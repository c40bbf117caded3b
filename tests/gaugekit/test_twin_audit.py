"""gaugekit.audit.heads: the per-head gauge on other people's attention, twins and their drift.

Everything in float64 with real autograd. Tolerances (see ``helpers``): ``EXACT`` (1e-11) for
identities that hold up to round-off, ``BROKEN`` (1e-3) for a structural violation.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from helpers import BROKEN, EXACT, generator, signed_permutation
from torch import nn

from gaugekit.audit.factor_results import BREAKS, CHAOTIC, KEEPS, UNJUDGED
from gaugekit.audit.heads import (
    TWIN_KINDS,
    audit_twins,
    find_qk_sites,
    gauge_twin,
    head_drift,
    head_invariants,
    identity_twin,
    noise_twin,
    output_drift,
    rel_distance,
    verdict_threshold,
)
from gaugekit.optim.registry import make_optimizer

F64 = torch.float64
D, HEADS, T, B = 8, 2, 3, 4


# --------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------


class Attention(nn.Module):
    """Self-attention with separate q/k/v/o ``nn.Linear`` and an optional norm on q and k."""

    def __init__(self, d: int, heads: int, bias: bool, qk_norm: type[nn.Module] | None = None,
                 **norm_kw) -> None:
        super().__init__()
        self.heads, self.d_head = heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=bias, dtype=F64)
        self.k_proj = nn.Linear(d, d, bias=bias, dtype=F64)
        self.v_proj = nn.Linear(d, d, bias=bias, dtype=F64)
        self.o_proj = nn.Linear(d, d, bias=bias, dtype=F64)
        if qk_norm is not None:
            self.q_norm = qk_norm(self.d_head, dtype=F64, **norm_kw)
            self.k_norm = qk_norm(self.d_head, dtype=F64, **norm_kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, self.d_head).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.d_head), dim=-1)
        return x + self.o_proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Layer(nn.Module):
    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.attn = attn


class TinyModel(nn.Module):
    """Two attention layers and a linear head on the last position."""

    def __init__(self, bias: bool = True, heads: int = HEADS, qk_norm=None, seed: int = 0,
                 **norm_kw) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.layers = nn.ModuleList(
            [Layer(Attention(D, heads, bias, qk_norm, **norm_kw)) for _ in range(2)]
        )
        self.head = nn.Linear(D, 5, dtype=F64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer.attn(x)
        return self.head(x[:, -1])


PAIRS = [(f"layers.{i}.attn.q_proj", f"layers.{i}.attn.k_proj") for i in range(2)]


def data(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = generator(seed)
    return torch.randn(B, T, D, generator=g, dtype=F64), torch.randn(B, 5, generator=g, dtype=F64)


def mse(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return (model(x) - y).pow(2).mean()


def make_mha(packed: bool, bias: bool, batch_first: bool, **kw) -> nn.MultiheadAttention:
    torch.manual_seed(0)
    extra = {} if packed else {"kdim": 5, "vdim": 3}
    mha = nn.MultiheadAttention(D, HEADS, bias=bias, batch_first=batch_first, dtype=F64,
                                **extra, **kw)
    if bias:  # torch initialises in_proj_bias to 0: make the bias part of the test
        with torch.no_grad():
            mha.in_proj_bias.normal_(generator=generator(2))
    return mha


def mha_probe(mha: nn.MultiheadAttention, seed: int = 1):
    g = generator(seed)
    shape = (B, T) if mha.batch_first else (T, B)
    return tuple(torch.randn(*shape, width, generator=g, dtype=F64)
                 for width in (mha.embed_dim, mha.kdim, mha.vdim))


def mha_loss(model: nn.Module, batch) -> torch.Tensor:
    return model(*batch)[0].pow(2).mean()


# --------------------------------------------------------------------------------------------
# the distance
# --------------------------------------------------------------------------------------------


def test_rel_distance_on_known_matrices():
    A = torch.randn(3, 4, generator=generator(0), dtype=F64)
    Z = torch.zeros(3, 4, dtype=F64)
    I3 = torch.eye(3, dtype=F64)
    assert rel_distance(A, A).item() == 0.0
    assert rel_distance(Z, Z).item() == 0.0  # no NaN
    assert math.isclose(rel_distance(A, Z).item(), 2.0, rel_tol=1e-14)  # ‖A‖ / (½‖A‖)
    assert math.isclose(rel_distance(I3, 2 * I3).item(), 2 / 3, rel_tol=1e-14)
    assert rel_distance(A, 2 * A).item() == rel_distance(2 * A, A).item()  # symmetric
    batched = rel_distance(torch.stack([A, A]), torch.stack([A, Z]))
    assert batched.shape == (2,) and batched[0] == 0 and math.isclose(batched[1], 2.0)


# --------------------------------------------------------------------------------------------
# the gauge leaves the function unchanged
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "separate"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
def test_gauge_keeps_multihead_attention(packed, bias, batch_first):
    mha = make_mha(packed, bias, batch_first)
    assert mha._qkv_same_embed_dim is packed
    twin, rotations = gauge_twin(mha, generator=generator(7))
    probe = mha_probe(mha)
    assert output_drift(mha, twin, probe) < EXACT
    sites = find_qk_sites(mha)
    assert max(d.max().item() for d in head_drift(mha, twin, sites)) < EXACT
    # not vacuous: the query/key rows moved, the value rows did not
    if packed:
        W, W2 = mha.in_proj_weight.detach(), twin.in_proj_weight.detach()
        assert rel_distance(W[:D], W2[:D]) > 0.1 and rel_distance(W[D:2 * D], W2[D:2 * D]) > 0.1
        assert torch.equal(W[2 * D:], W2[2 * D:])
    else:
        assert rel_distance(mha.q_proj_weight.detach(), twin.q_proj_weight.detach()) > 0.1
        assert rel_distance(mha.k_proj_weight.detach(), twin.k_proj_weight.detach()) > 0.1
        assert torch.equal(mha.v_proj_weight, twin.v_proj_weight)
    if bias:
        b, b2 = mha.in_proj_bias.detach(), twin.in_proj_bias.detach()
        assert rel_distance(b[:D], b2[:D]) > 0.1 and rel_distance(b[D:2 * D], b2[D:2 * D]) > 0.1
        assert torch.equal(b[2 * D:], b2[2 * D:])
    # the same rotations again give the same twin (the draw is the generator's, not global)
    again, _ = gauge_twin(mha, rotations=rotations)
    assert all(torch.equal(p, q) for p, q in zip(twin.parameters(), again.parameters(),
                                                  strict=True))


def test_gauge_keeps_multihead_attention_with_bias_kv():
    """``add_bias_kv``: the learned extra key lives in the projected space and is rotated too."""
    mha = make_mha(True, True, True, add_bias_kv=True)
    twin, _ = gauge_twin(mha, generator=generator(7))
    assert output_drift(mha, twin, mha_probe(mha)) < EXACT
    M = head_invariants(mha, find_qk_sites(mha))[0]
    assert M.shape == (HEADS, D + 1, D + 2)  # [W_Q | b_Q]ᵀ [W_K | b_K | bias_k]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_gauge_keeps_separate_linear_projections(bias):
    model = TinyModel(bias=bias)
    twin, _ = gauge_twin(model, PAIRS, num_heads=HEADS, generator=generator(7))
    x, _ = data()
    assert output_drift(model, twin, x) < EXACT
    sites = find_qk_sites(model, PAIRS, num_heads=HEADS)
    assert max(d.max().item() for d in head_drift(model, twin, sites)) < EXACT
    M = head_invariants(model, sites)[0]
    assert M.shape == (HEADS, D + bias, D + bias)
    q, q2 = model.layers[0].attn.q_proj, twin.layers[0].attn.q_proj
    assert rel_distance(q.weight.detach(), q2.weight.detach()) > 0.1
    assert torch.equal(model.layers[0].attn.v_proj.weight, twin.layers[0].attn.v_proj.weight)
    if bias:
        assert rel_distance(q.bias.detach(), q2.bias.detach()) > 0.1


class RawParams(nn.Module):
    """One attention layer whose q/k weights are bare 2-D parameters (Linear layout)."""

    def __init__(self) -> None:
        super().__init__()
        g = generator(3)
        for name in ("wq", "wk", "wv"):
            self.register_parameter(
                name, nn.Parameter(torch.randn(D, D, generator=g, dtype=F64) / math.sqrt(D))
            )
        self.gain = nn.Parameter(torch.ones(D, dtype=F64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = (
            (x @ W.T).view(b, t, HEADS, D // HEADS).transpose(1, 2)
            for W in (self.wq, self.wk, self.wv)
        )
        att = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        return self.gain * (att @ v).transpose(1, 2).reshape(b, t, D)


def test_gauge_keeps_weight_parameter_pairs():
    model = RawParams()
    x = data()[0]
    for pair in [("wq", "wk"), (model.wq, model.wk)]:
        twin, _ = gauge_twin(model, [pair], num_heads=HEADS, generator=generator(7))
        assert output_drift(model, twin, x) < EXACT
        assert rel_distance(model.wq.detach(), twin.wq.detach()) > 0.1
        assert torch.equal(model.wv, twin.wv)
    (site,) = find_qk_sites(model, ("wq", "wk"), num_heads=HEADS)  # one bare pair is one site
    assert site.kind == "param" and site.d_head == D // HEADS
    with pytest.raises(ValueError, match="Invalid sites: parameter 'gain' has shape"):
        find_qk_sites(model, [("wq", "gain")], num_heads=HEADS)
    with pytest.raises(ValueError, match="expected a parameter of the model"):
        find_qk_sites(model, [(nn.Parameter(torch.ones(D, D)), "wk")], num_heads=HEADS)
    mixed = TinyModel()
    with pytest.raises(ValueError, match="not one of each"):
        find_qk_sites(mixed, [("layers.0.attn.q_proj", "layers.0.attn.k_proj.weight")],
                      num_heads=HEADS)


def test_negative_controls_bias_unrotated_or_key_unrotated_change_the_function():
    """The gauge needs the SAME A_h on W_Q, b_Q, W_K and b_K: drop one and the logits change.

    With ``W`` rotated but ``b`` not, ``q' = A W x + b ≠ A(W x + b)`` and ``q'ᵀk' − qᵀk`` is
    linear in ``Aᵀb − b`` (nonzero for Haar ``A``); rotating q alone gives ``qᵀ A k ≠ qᵀ k``.
    """
    model = TinyModel(bias=True)
    x, _ = data()
    twin, _ = gauge_twin(model, PAIRS, num_heads=HEADS, generator=generator(7))
    with torch.no_grad():  # undo the bias rotation only
        for name in PAIRS[0]:
            twin.get_submodule(name).bias.copy_(model.get_submodule(name).bias)
    assert output_drift(model, twin, x) > BROKEN
    twin, _ = gauge_twin(model, PAIRS, num_heads=HEADS, generator=generator(7))
    with torch.no_grad():  # undo the key rotation only
        twin.layers[0].attn.k_proj.load_state_dict(model.layers[0].attn.k_proj.state_dict())
    assert output_drift(model, twin, x) > BROKEN


def test_gain_free_rms_qk_norm_keeps_the_gauge():
    """``‖A q‖ = ‖q‖``, so ``q / rms(q)`` commutes with orthogonal ``A``: accepted and exact."""
    model = TinyModel(bias=True, qk_norm=nn.RMSNorm, elementwise_affine=False)
    twin, _ = gauge_twin(model, PAIRS, num_heads=HEADS, generator=generator(7))
    assert output_drift(model, twin, data()[0]) < EXACT


def test_identity_twin_is_bit_identical():
    model = TinyModel(bias=True)
    twin = identity_twin(model, PAIRS, num_heads=HEADS)
    for (n, p), (_, p2) in zip(model.named_parameters(), twin.named_parameters(), strict=True):
        assert torch.equal(p, p2), n
    assert twin is not model and twin.head.weight is not model.head.weight


def test_noise_twin_perturbs_qk_only_by_the_scale():
    model = TinyModel(bias=True)
    twin = noise_twin(model, PAIRS, num_heads=HEADS, scale=1e-6, generator=generator(8))
    dq = twin.layers[0].attn.q_proj.weight - model.layers[0].attn.q_proj.weight
    assert 0.3e-6 < dq.std().item() < 3e-6
    assert (twin.layers[1].attn.k_proj.bias - model.layers[1].attn.k_proj.bias).abs().max() > 0
    assert torch.equal(twin.layers[0].attn.v_proj.weight, model.layers[0].attn.v_proj.weight)
    assert torch.equal(twin.head.weight, model.head.weight)


# --------------------------------------------------------------------------------------------
# training in lockstep
# --------------------------------------------------------------------------------------------


def _all_drifts(result) -> list[float]:
    return [d for t in result.traces for c in t.checkpoints
            for d in (c.output_drift, *[x for site in c.head_drift for x in site])]


def test_identity_twin_drifts_exactly_zero_mha_and_linear():
    """Same code path on identical inputs: the A = I twin is the original bit for bit."""
    mha = make_mha(True, True, True, dropout=0.5)  # dropout: masks must agree too
    probe = mha_probe(mha)
    g = generator(5)
    batches = iter([tuple(t + 0.1 * torch.randn(t.shape, generator=g, dtype=F64) for t in probe)
                    for _ in range(6)])
    res = audit_twins(mha, mha_loss, probe=probe, batches=batches, twins=("identity",),
                      optimizer=lambda p: torch.optim.Adam(p, lr=1e-2), steps=6)
    assert res.steps == 6 and len(res.trace("identity").checkpoints) == 7
    assert _all_drifts(res) == [0.0] * len(_all_drifts(res))
    assert res.trace("identity").losses == res.base_losses
    res = audit_twins(TinyModel(), mse, probe=data()[0], batch=data(), sites=PAIRS,
                      num_heads=HEADS, twins=("identity",), optimizer="adam", steps=5)
    assert set(_all_drifts(res)) == {0.0}
    assert res.trace("identity").losses == res.base_losses


def test_dropout_masks_agree_only_because_the_rng_is_restored():
    """Negative control for the RNG restore: two dropout forwards in a row draw different
    masks, so without the restore the identity twin would not be exact."""
    mha = make_mha(True, True, True, dropout=0.5)
    probe = mha_probe(mha)
    torch.manual_seed(0)
    a = mha_loss(mha, probe)
    b = mha_loss(mha, probe)
    assert abs(a.item() - b.item()) > 1e-6


# Threshold for "Adam splits the twins after one step". At step 1 Adam's moments are m̂ = g,
# v̂ = g², so its update is −lr · g/(|g| + ε) ≈ −lr · sign(g), entry by entry. The twin's
# gradient on the rows of head h is A_h G_h (the loss is invariant, so its gradient is
# covariant); its update −lr·sign(A_h G_h) equals the gauge image −lr·A_h sign(G_h) of the
# original's update only if sign(A_h G_h) = A_h sign(G_h): per-entry denominators |g| differ
# between the bases unless the gradient entries have equal magnitudes (or A_h is a signed
# permutation, the control below). For Haar A_h the mismatch ‖sign(AG) − A sign(G)‖_F is of
# order ‖sign(G)‖_F = √(entries), so W̃ and M_h move relatively by O(lr / rms(W̃)) ≈ 1e-2 / 0.3
# ≈ 3e-2 (measured here: see the assertion messages). BROKEN = 1e-3 sits an order below that and
# eight orders above the float64 round-off of the equivariant runs (1e-16 … 1e-15).
SPLIT = BROKEN

FACTORIES = {
    "torch_adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "torch_sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "scalar_adam": lambda p: make_optimizer("scalar_adam", p, lr=1e-2),
}


def _one_step(name: str, model_kind: str, rotations=None, bias: bool = True):
    if model_kind == "mha":
        mha = make_mha(True, True, True)
        probe = mha_probe(mha)
        return audit_twins(mha, mha_loss, probe=probe, batch=probe, twins=("gauge",),
                           optimizer=FACTORIES[name], steps=1, rotations=rotations)
    return audit_twins(TinyModel(bias=bias), mse, probe=data()[0], batch=data(), sites=PAIRS,
                       num_heads=HEADS, twins=("gauge",), optimizer=FACTORIES[name], steps=1,
                       rotations=rotations)


@pytest.mark.parametrize("model_kind", ["mha", "linear"])
def test_one_adam_step_splits_the_gauge_twins(model_kind):
    final = _one_step("torch_adam", model_kind).trace("gauge").final
    assert final.step == 1
    assert final.mean_head_drift > SPLIT, final.mean_head_drift
    assert final.output_drift > SPLIT / 10, final.output_drift


@pytest.mark.parametrize("name", ["torch_sgd", "scalar_adam"])
@pytest.mark.parametrize("model_kind", ["mha", "linear"])
def test_one_equivariant_step_keeps_the_gauge_twins(name, model_kind):
    final = _one_step(name, model_kind).trace("gauge").final
    assert final.max_head_drift < EXACT, final.max_head_drift
    assert final.output_drift < EXACT, final.output_drift


def test_adam_keeps_twins_related_by_a_signed_permutation():
    """The split is basis mixing: for a signed permutation ``P`` (entries keep their
    magnitudes) ``sign(P G) = P sign(G)`` and Adam is equivariant up to round-off.

    Without biases: the key bias's gradient is identically 0 in exact arithmetic (softmax
    ignores a shift shared by all keys, and ``qᵀb_K`` is one), so its float value is round-off
    that Adam's ``g / (|g| + ε)`` amplifies by up to ``1/ε``; with ``b_K`` this control measured
    1e-11 instead of 1e-16 (module docstring, "Adam and a key bias").
    """
    rotations = [torch.stack([signed_permutation(D // HEADS, 10 * i + h) for h in range(HEADS)])
                 for i in range(2)]
    res = _one_step("torch_adam", "linear", rotations=rotations, bias=False)
    final = res.trace("gauge").final
    assert final.max_head_drift < EXACT and final.output_drift < EXACT
    haar = _one_step("torch_adam", "linear", bias=False).trace("gauge").final
    assert haar.mean_head_drift > SPLIT  # the same model splits under a Haar A


def test_result_table_summary_records_and_noise_twin():
    model = TinyModel()
    res = audit_twins(model, mse, probe=data()[0], batch=data(), sites=PAIRS, num_heads=HEADS,
                      optimizer="adam", optimizer_kwargs={"lr": 1e-2}, steps=3,
                      checkpoints=[0, 1, 3], noise_scale=1e-7)
    assert [t.kind for t in res.traces] == list(TWIN_KINDS)
    assert res.trace("gauge").steps() == [0, 1, 3]
    assert res.trace("gauge").init_output_drift < EXACT
    noise = res.trace("noise")
    assert 1e-9 < noise.init_output_drift < 1e-5  # a perturbation of the scale asked
    text = str(res)
    assert "gauge" in text and "identity" in text and "noise" in text and "adam" in text
    assert len(res.table().splitlines()) == 1 + 3 * 3
    assert len(res.to_records()) == 3 * 3 * 2 * HEADS
    assert not res.diverged
    # the original model was not trained
    assert torch.equal(model.head.weight, TinyModel().head.weight)


def test_a_diverged_run_is_flagged():
    mha = make_mha(True, True, True)
    probe = mha_probe(mha)
    res = audit_twins(mha, lambda m, b: mha_loss(m, probe) * b, probe=probe,
                      batches=[1.0, float("nan"), 1.0], optimizer="adam", steps=3)
    assert res.diverged and res.steps == 1
    assert "DIVERGED" in res.summary()


# --------------------------------------------------------------------------------------------
# verdicts in words
# --------------------------------------------------------------------------------------------


def _verdict_run(optimizer, noise_scale: float = 1e-7, steps: int = 4, **kw):
    return audit_twins(TinyModel(), mse, probe=data()[0], batch=data(), sites=PAIRS,
                       num_heads=HEADS, twins=("gauge", "noise"), optimizer=optimizer,
                       steps=steps, noise_scale=noise_scale, **kw)


def test_twin_verdict_keeps_for_an_equivariant_rule():
    res = _verdict_run(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))
    assert res.verdict.outcome == KEEPS
    assert res.verdict.gauge == res.trace("gauge").max_drift < EXACT
    assert res.threshold == verdict_threshold(F64) == 1e-8
    line = str(res).splitlines()[-1]
    assert line == res.verdict_line()
    assert line.startswith("torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0")
    assert f": {KEEPS}: gauge twin " in line and "<lambda>" not in str(res)


def test_twin_verdict_breaks_for_adam_far_beyond_its_noise_twin():
    res = _verdict_run("adam", optimizer_kwargs={"lr": 1e-2})
    v = res.verdict
    assert v.outcome == BREAKS, res.verdict_line()
    assert v.gauge > 1e3 * v.noise  # the per-entry denominator sees the basis at step 1
    # a registry name prints the class it built and the values it built it with
    assert res.optimizer.startswith("adam = gaugekit.optim.Adam(lr=0.01, betas=(0.9, 0.999)")
    assert res.optimizer_class == "gaugekit.optim.Adam" and res.hyperparameters["lr"] == 0.01
    assert res.summary().splitlines()[-1] == res.verdict_line()
    assert f"{v.noise:.2e}" in res.verdict_line() and "(> 10 x)" in res.verdict_line()


def test_twin_verdict_chaotic_when_the_noise_twin_separates_as_fast():
    """Constructed: a noise twin perturbed by 0.1 per entry (the size of the weights) ends as
    far from the original as Adam's gauge twin; the negative control is the breaks test."""
    res = _verdict_run(lambda p: torch.optim.Adam(p, lr=1e-2), noise_scale=0.1)
    assert res.verdict.outcome == CHAOTIC, res.verdict_line()
    assert "(<= 10 x)" in res.verdict_line()


def test_twin_verdict_without_noise_gauge_or_convergence():
    res = audit_twins(TinyModel(), mse, probe=data()[0], batch=data(), sites=PAIRS,
                      num_heads=HEADS, twins=("gauge",), optimizer="adam", steps=2)
    assert res.verdict.outcome == BREAKS and "chaos is not ruled out" in res.verdict_line()
    res = audit_twins(TinyModel(), mse, probe=data()[0], batch=data(), sites=PAIRS,
                      num_heads=HEADS, twins=("identity",), optimizer="adam", steps=2)
    assert res.verdict is None and "no gauge twin" in res.verdict_line()
    mha = make_mha(True, True, True)
    probe = mha_probe(mha)
    res = audit_twins(mha, lambda m, b: mha_loss(m, probe) * b, probe=probe,
                      batches=[1.0, float("nan"), 1.0], optimizer="adam", steps=3)
    assert res.verdict.outcome == UNJUDGED and "diverged" in res.verdict_line()
    # an explicit threshold is honoured: with 0, any drift at all is above round-off
    strict = _verdict_run(lambda p: torch.optim.SGD(p, lr=0.1), steps=2, threshold=0.0)
    assert strict.threshold == 0.0 and strict.verdict.outcome != KEEPS


# --------------------------------------------------------------------------------------------
# refusals and bad input
# --------------------------------------------------------------------------------------------


def test_mha_wrong_head_count():
    with pytest.raises(ValueError, match="Invalid num_heads: 4"):
        find_qk_sites(make_mha(True, True, True), num_heads=4)


@pytest.mark.parametrize("heads", [3, 0, -1, "2", 2.0, True])
def test_linear_bad_head_count(heads):
    with pytest.raises(ValueError, match="Invalid num_heads"):
        find_qk_sites(TinyModel(), PAIRS, num_heads=heads)


def test_linear_head_count_required():
    with pytest.raises(ValueError, match="Invalid num_heads: None"):
        find_qk_sites(TinyModel(), PAIRS)


def test_unknown_module_name():
    with pytest.raises(ValueError, match="Invalid sites: 'layers.9.attn.q_proj'"):
        find_qk_sites(TinyModel(), [("layers.9.attn.q_proj", "layers.0.attn.k_proj")],
                      num_heads=HEADS)
    with pytest.raises(ValueError, match="Invalid sites: 'nope'"):
        find_qk_sites(TinyModel(), ["nope"])


def test_module_that_is_not_a_projection():
    with pytest.raises(ValueError, match="Invalid sites: 'layers.0.attn' is a Attention"):
        find_qk_sites(TinyModel(), [("layers.0.attn", "layers.0.attn.k_proj")], num_heads=2)
    with pytest.raises(ValueError, match="expected an nn.MultiheadAttention"):
        find_qk_sites(TinyModel(), ["layers.0.attn.q_proj"])
    with pytest.raises(ValueError, match="Invalid sites: None"):
        find_qk_sites(TinyModel())  # no MHA inside: pairs are needed
    other = nn.Linear(D, D)
    with pytest.raises(ValueError, match="expected a submodule"):
        find_qk_sites(TinyModel(), [(other, "layers.0.attn.k_proj")], num_heads=2)


def test_pair_of_different_widths():
    model = TinyModel()
    model.layers[0].attn.k_proj = nn.Linear(D, 2 * D, dtype=F64)
    with pytest.raises(ValueError, match="out_features"):
        find_qk_sites(model, PAIRS, num_heads=HEADS)


@pytest.mark.parametrize(
    ("norm", "kw", "match"),
    [
        (nn.LayerNorm, {}, "mean-centring"),
        (nn.LayerNorm, {"elementwise_affine": False}, "mean-centring"),
    ],
    ids=["layernorm", "layernorm_noaffine"],
)
def test_qk_norm_that_breaks_the_gauge_is_refused(norm, kw, match):
    model = TinyModel(qk_norm=norm, **kw)
    with pytest.raises(ValueError, match=f"Invalid model: 'layers.0.attn.q_norm'.*{match}"):
        find_qk_sites(model, PAIRS, num_heads=HEADS)


def test_an_rms_qk_norm_with_a_gain_leaves_the_signed_permutations():
    """``g ⊙ (P q) = P ((Π⁻¹ g) ⊙ q)`` for a signed permutation ``P = S Π``: the twin with
    its gains permuted alike is the same function, in float64 to round-off, and Adam, whose
    step is coordinate-wise, keeps it; a Haar rotation of the heads does not (the control)."""
    model = TinyModel(qk_norm=nn.RMSNorm)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.5, generator=generator(4))
    sites = find_qk_sites(model, PAIRS, num_heads=HEADS)
    assert all(s.norms is not None and s.norms.shared for s in sites)
    twin, _ = gauge_twin(model, sites, generator=generator(7))
    assert output_drift(model, twin, data()[0]) < EXACT
    result = audit_twins(model, mse, probe=data()[0], batch=data(), sites=sites, steps=5,
                         optimizer=lambda p: torch.optim.Adam(p, lr=1e-2))
    assert result.verdict.outcome == KEEPS and result.trace("gauge").max_drift < EXACT
    bare = [dataclasses.replace(s, norms=None) for s in sites]
    haar, _ = gauge_twin(model, bare, generator=generator(7), check_structure=False)
    assert output_drift(model, haar, data()[0]) > BROKEN


def test_probe_check_catches_what_the_structure_check_is_told_to_skip():
    """With the structure check off, LayerNorm on q/k (mean-centring: ``(I − 11ᵀ/d) A ≠
    A (I − 11ᵀ/d)``) makes the gauge twin a different function, and the probe check says so."""
    model = TinyModel(qk_norm=nn.LayerNorm, elementwise_affine=False)
    twin, _ = gauge_twin(model, PAIRS, num_heads=HEADS, generator=generator(7),
                         check_structure=False)
    assert output_drift(model, twin, data()[0]) > BROKEN
    with pytest.raises(ValueError, match="the gauge twin's output on the probe is not"):
        audit_twins(model, mse, probe=data()[0], batch=data(), sites=PAIRS, num_heads=HEADS,
                    steps=1, check_structure=False)


def test_wrong_but_divisible_head_count_is_caught_by_the_probe():
    """One 8×8 ``A`` over two true heads of width 4 mixes them: ``q₁ᵀk₁`` is not kept."""
    with pytest.raises(ValueError, match="the gauge twin's output on the probe is not"):
        audit_twins(TinyModel(heads=2), mse, probe=data()[0], batch=data(), sites=PAIRS,
                    num_heads=1, steps=1)


def test_rotary_module_is_refused():
    class RotaryEmbedding(nn.Module):
        def forward(self, x):
            return x

    model = TinyModel()
    model.layers[0].attn.rotary_emb = RotaryEmbedding()
    with pytest.raises(ValueError, match="Invalid model: 'layers.0.attn.rotary_emb'.*rotary"):
        find_qk_sites(model, PAIRS, num_heads=HEADS)


def test_custom_parametrised_qk_norm_is_refused():
    class MyNorm(nn.Module):
        def __init__(self, d, dtype=None):
            super().__init__()
            self.gain = nn.Parameter(torch.ones(d, dtype=dtype))

        def forward(self, x):
            return self.gain * F.normalize(x, dim=-1)

    with pytest.raises(ValueError, match="looks like a qk-norm with learnable parameters"):
        find_qk_sites(TinyModel(qk_norm=MyNorm), PAIRS, num_heads=HEADS)


def test_parameter_free_custom_qk_norm_warns_and_the_probe_decides():
    class UnitNorm(nn.Module):  # q / ‖q‖: gain-free, commutes with orthogonal A
        def __init__(self, d, dtype=None):
            super().__init__()

        def forward(self, x):
            return F.normalize(x, dim=-1)

    model = TinyModel(qk_norm=UnitNorm)
    with pytest.warns(UserWarning, match="parameter-free qk-norm"):
        res = audit_twins(model, mse, probe=data()[0], batch=data(), sites=PAIRS,
                          num_heads=HEADS, twins=("gauge",), optimizer="scalar_adam", steps=1)
    assert res.trace("gauge").init_output_drift < EXACT
    assert res.trace("gauge").final.output_drift < EXACT


def test_bad_audit_arguments():
    mha = make_mha(True, True, True)
    probe = mha_probe(mha)
    kw = {"probe": probe, "batch": probe}
    cases = [
        ({"steps": -1}, "Invalid steps"),
        ({"steps": 1.5}, "Invalid steps"),
        ({"twins": ("gauge", "mirror")}, "Invalid twins"),
        ({"twins": ()}, "Invalid twins"),
        ({"noise_scale": -1.0}, "Invalid noise_scale"),
        ({"checkpoints": [0, 99], "steps": 2}, "Invalid checkpoints"),
        ({"optimizer": "adamw_typo"}, "Invalid name"),
        ({"optimizer": lambda p: torch.optim.SGD(p, lr=0.1), "optimizer_kwargs": {"lr": 1}},
         "Invalid optimizer_kwargs"),
        ({"optimizer": 3}, "Invalid optimizer"),
        ({"batches": iter([probe]), "steps": 2}, "Invalid batches"),
        ({"rotations": [torch.ones(HEADS, 4, 4, dtype=F64)]}, "Invalid rotations.*orthogonal"),
        ({"rotations": [torch.eye(3, dtype=F64).expand(HEADS, 3, 3)]}, "Invalid rotations: shape"),
    ]
    for extra, match in cases:
        with pytest.raises(ValueError, match=match):
            audit_twins(mha, mha_loss, **{**kw, **extra})
    with pytest.raises(ValueError, match="Invalid loss_fn"):
        audit_twins(mha, "loss", **kw)
    with pytest.raises(ValueError, match="Invalid loss_fn"):
        audit_twins(mha, lambda m, b: m(*b)[0], steps=1, **kw)  # not a scalar
    with pytest.raises(ValueError, match="Invalid forward"):
        audit_twins(mha, mha_loss, forward=lambda m, p: "logits", **kw)


def test_bad_twin_builder_arguments():
    mha = make_mha(True, True, True)
    with pytest.raises(ValueError, match="Invalid generator"):
        gauge_twin(mha)
    with pytest.raises(ValueError, match="Invalid scale"):
        noise_twin(mha, scale=float("nan"), generator=generator(0))
    with pytest.raises(ValueError, match="Invalid generator"):
        noise_twin(mha, scale=1e-7, generator=0)


def test_twins_sits_below_the_experiments():
    """Floor 1/2: importing gaugekit.audit.heads pulls in neither experiments nor problems."""
    code = ("import sys, gaugekit.audit.heads; "
            "print(sorted(m for m in sys.modules if m.startswith(('gaugebook.experiments', "
            "'gaugebook'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", out
