"""The paper's attention model: its forward, the per-head gauge, invariants, metrics, tasks."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from gaugebook.engine import transformer as A
from gaugekit.gauge import random_gl, relative_distance

SHAPE = A.TransformerShape()


def _params(dtype=torch.float64, seed=42, shape=SHAPE):
    p = A.init_params(shape, generator=torch.Generator().manual_seed(seed))
    return {k: v.to(dtype) for k, v in p.items()}


def _reference_logits(p, tokens, shape):
    """An independent per-sequence implementation (no stacking, no shortcuts)."""

    def norm(x, g):
        return x / x.norm(dim=-1, keepdim=True) * math.sqrt(x.shape[-1]) * g

    H, dh = shape.num_heads, shape.d_head
    x = p["tok_emb"][tokens] + p["pos"][0, : tokens.shape[1]]
    T = tokens.shape[1]
    for layer in range(shape.num_layers):
        q = f"layers.{layer}."
        h = norm(x, p[q + "norm1"])

        def heads(W, h=h):
            return (h @ W.T).unflatten(-1, (H, dh)).transpose(1, 2)

        s = heads(p[q + "q"]) @ heads(p[q + "k"]).mT / math.sqrt(dh)
        if shape.causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        a = (torch.softmax(s, -1) @ heads(p[q + "v"])).transpose(1, 2).flatten(-2)
        x = x + a @ p[q + "o"].T
        x = x + torch.nn.functional.silu(norm(x, p[q + "norm2"]) @ p[q + "mlp_in"].T) \
            @ p[q + "mlp_out"].T
    if shape.last_only:
        x = x[:, -1]
    return norm(x, p["norm_f"]) @ p["head"].T


def test_forward_matches_an_independent_reference_modadd():
    data = A.make_modadd_data()
    p = _params()
    got = A.forward(A.stack_params([p]), data.val_tokens, SHAPE)[0]
    assert got.shape == (1326, 47)
    assert_close(got, _reference_logits(p, data.val_tokens, SHAPE), atol=1e-12, rtol=0)
    # a batch smaller than the vocabulary takes the path without the (token, position) table
    few = data.val_tokens[:5]
    got_few = A.forward(A.stack_params([p]), few, SHAPE)[0]
    assert_close(got_few, _reference_logits(p, few, SHAPE), atol=1e-12, rtol=0)


def test_forward_matches_reference_causal_lm_and_is_causal():
    shape = A.TransformerShape(vocab=11, seq_len=8, num_classes=11, causal=True,
                               last_only=False)
    p = _params(shape=shape)
    tokens = torch.randint(0, 11, (4, 8), generator=torch.Generator().manual_seed(0))
    got = A.forward(A.stack_params([p]), tokens, shape)[0]
    assert got.shape == (4, 8, 11)
    assert_close(got, _reference_logits(p, tokens, shape), atol=1e-12, rtol=0)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    again = A.forward(A.stack_params([p]), changed, shape)[0]
    assert_close(again[:, :-1], got[:, :-1], atol=0, rtol=0)  # the past never sees the future
    assert (again[:, -1] - got[:, -1]).abs().max() > 1e-6


def test_module_equals_functional_and_stack_rows_are_independent():
    data = A.make_modadd_data()
    p0, p1 = _params(seed=1), _params(seed=2)
    module = A.PaperTransformer(SHAPE, p0)
    stacked = A.forward(A.stack_params([p0, p1]), data.train_tokens[:50], SHAPE)
    assert_close(module(data.train_tokens[:50]), stacked[0], atol=1e-12, rtol=0)
    alone = A.forward(A.stack_params([p1]), data.train_tokens[:50], SHAPE)[0]
    assert_close(stacked[1], alone, atol=1e-12, rtol=0)


def test_head_gauge_leaves_logits_and_bilinears_unchanged_float64():
    data = A.make_modadd_data()
    p = _params()
    twin = A.apply_head_gauge(p, SHAPE, A.draw_head_gauges(SHAPE, 777, dtype=torch.float64))
    logits = A.forward(A.stack_params([p, twin]), data.val_tokens, SHAPE)
    scale = logits[0].abs().max()
    assert (logits[0] - logits[1]).abs().max() <= 1e-13 * scale
    M = A.head_bilinears(A.stack_params([p, twin]), SHAPE)
    assert M.shape == (2, 8, 64, 64)
    assert_close(M[1], M[0], atol=1e-14, rtol=0)
    # the weights themselves did move: the twin is a different point of parameter space
    assert (twin["layers.0.q"] - p["layers.0.q"]).abs().max() > 1e-2
    for name in ("layers.0.v", "layers.1.o", "tok_emb", "head"):
        assert torch.equal(twin[name], p[name])


def test_non_orthogonal_head_map_changes_logits_negative_control():
    """A ∈ GL(d_h) on both W_Q and W_K gives M_h → W_Qᵀ AᵀA W_K ≠ M_h: the logits move."""
    data = A.make_modadd_data()
    p = _params()
    g = torch.Generator().manual_seed(5)
    gl = random_gl(SHAPE.d_head, generator=g, condition_number=4.0,
                   batch_shape=(SHAPE.num_layers, SHAPE.num_heads))
    twin = A.apply_head_gauge(p, SHAPE, gl)
    logits = A.forward(A.stack_params([p, twin]), data.val_tokens, SHAPE)
    assert relative_distance(logits[0], logits[1], symmetric=True) > 1e-3


def test_gauges_are_orthogonal_seeded_and_identity_is_exact():
    R = A.draw_head_gauges(SHAPE, 777, dtype=torch.float64)
    assert R.shape == (2, 4, 16, 16)
    eye = torch.eye(16, dtype=torch.float64)
    assert_close(R.mT @ R, eye.expand_as(R), atol=1e-13, rtol=0)
    assert torch.equal(R, A.draw_head_gauges(SHAPE, 777, dtype=torch.float64))
    assert not torch.allclose(R, A.draw_head_gauges(SHAPE, 999, dtype=torch.float64))
    p = _params(torch.float32)
    same = A.apply_head_gauge(p, SHAPE, A.identity_head_gauges(SHAPE))
    for name in p:
        assert torch.equal(same[name], p[name])


def test_noise_twin_perturbs_only_q_and_k_at_its_scale():
    p = _params()
    twin = A.perturb_qk(p, SHAPE, 1e-5, 888)
    for name in p:
        delta = (twin[name] - p[name]).abs().max()
        if name.endswith((".q", ".k")):
            assert 1e-6 < delta < 1e-4
        else:
            assert delta == 0


def test_symmetric_relative_distance_on_known_matrices():
    eye = torch.eye(2, dtype=torch.float64)
    # ‖I − 2I‖ = √2, ½(‖I‖ + ‖2I‖) = ½(√2 + 2√2): rel = 2/3
    two_thirds = torch.tensor(2 / 3, dtype=torch.float64)
    assert_close(relative_distance(eye, 2 * eye, symmetric=True), two_thirds)
    assert_close(relative_distance(2 * eye, eye, symmetric=True), two_thirds)
    assert relative_distance(eye, eye, symmetric=True) == 0
    assert relative_distance(eye, -eye, symmetric=True) == 2  # the largest value
    zero = torch.zeros(2, 2, dtype=torch.float64)
    assert relative_distance(zero, zero, symmetric=True) == 0
    per_head, mean = A.mean_head_drift(torch.stack([eye, 2 * eye])[None],
                                       torch.stack([eye, eye])[None])
    assert_close(per_head, torch.tensor([[0.0, 2 / 3]], dtype=torch.float64))
    assert_close(mean, torch.tensor([1 / 3], dtype=torch.float64))


def test_collapse_flag():
    C = 47
    assert A.is_collapsed(1.4 / C, 1.0, C)  # accuracy within 1.5x of chance
    assert A.is_collapsed(0.9, 0.97 * math.log(C), C)  # train loss within 5 % of ln C
    assert A.is_collapsed(0.9, float("nan"), C)
    assert not A.is_collapsed(0.5, 1.0, C)
    assert not A.is_collapsed(1.6 / C, 0.9 * math.log(C), C)


def test_zero_head_model_is_a_constructed_collapsed_run():
    """Zero head weights give uniform logits: loss exactly ln C, accuracy near chance."""
    data = A.make_modadd_data()
    p = _params()
    p["head"] = torch.zeros_like(p["head"])
    logits = A.forward(A.stack_params([p]), data.val_tokens, SHAPE)
    loss = float(A.cross_entropy(logits, data.val_targets)[0])
    acc = float(A.accuracy(logits, data.val_targets)[0])
    assert loss == pytest.approx(math.log(47), rel=1e-12)
    assert A.is_collapsed(acc, loss, 47)


def test_modadd_split():
    data = A.make_modadd_data()
    assert data.train_tokens.shape == (883, 3) and data.val_tokens.shape == (1326, 3)
    tokens = torch.cat([data.train_tokens, data.val_tokens])
    targets = torch.cat([data.train_targets, data.val_targets])
    assert len({tuple(t.tolist()) for t in tokens}) == 47 * 47  # every pair once
    assert (tokens[:, 2] == A.EQUALS_TOKEN).all()
    assert torch.equal(targets, (tokens[:, 0] + tokens[:, 1]) % 47)
    assert torch.equal(A.make_modadd_data().train_tokens, data.train_tokens)
    assert not torch.equal(A.make_modadd_data(seed=1).train_tokens, data.train_tokens)


def test_char_lm_batches_are_shifted_windows():
    ids = torch.arange(100)
    x, y = A.char_lm_batches(ids, num_steps=3, batch_size=4, seq_len=8, seed=0)
    assert x.shape == y.shape == (3, 4, 8)
    assert torch.equal(y, x + 1)
    x2, _ = A.char_lm_batches(ids, num_steps=3, batch_size=4, seq_len=8, seed=0)
    assert torch.equal(x, x2)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="num_heads"):
        A.TransformerShape(d_model=64, num_heads=5)
    with pytest.raises(ValueError, match="num_heads"):
        A.TransformerShape(num_heads=0)
    with pytest.raises(ValueError, match="d_model"):
        A.TransformerShape(d_model=0)
    p = _params()
    with pytest.raises(ValueError, match="gauges"):
        A.apply_head_gauge(p, SHAPE, torch.eye(16).expand(2, 3, 16, 16))
    with pytest.raises(ValueError, match="num_heads"):
        A.head_bilinears(A.stack_params([p]), A.TransformerShape(num_heads=3, d_model=48))
    with pytest.raises(ValueError, match="scale"):
        A.perturb_qk(p, SHAPE, -1.0, 0)
    with pytest.raises(ValueError, match="p"):
        A.make_modadd_data(p=1)
    with pytest.raises(ValueError, match="train_frac"):
        A.make_modadd_data(train_frac=1.5)
    with pytest.raises(ValueError, match="ids"):
        A.char_lm_batches(torch.arange(5), num_steps=1, batch_size=1, seq_len=8, seed=0)
