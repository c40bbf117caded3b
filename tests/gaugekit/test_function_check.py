"""gaugekit.audit.function_check: a twin is the same function when it is as close to its base
as a twin rounded in its last bits, in the model's dtype and in float64.

What the fixed tolerance ``√ε`` got wrong, each case built so that it fails for a reason of
mathematics: a clamp on q and k (OLMo's ``clip_qkv``) and a small non-equivariant term are not
symmetries, and their twins, off by 1e-5 or less, passed ``√ε`` = 3.5e-4 in float32; a float64
model that computes its logits in float32 is a symmetry its float64 round-off cannot judge."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import generator
from torch import nn

from gaugekit.audit.factor_results import KEEPS
from gaugekit.audit.function_check import (
    cast_floats,
    roundoff_twin,
    same_function,
)
from gaugekit.audit.heads import audit_twins, find_qk_sites, gauge_twin, verdict_threshold

F32, F64 = torch.float32, torch.float64


def sqrt_eps(dtype: torch.dtype) -> float:
    """The fixed tolerance the audits used before: ``√ε`` of the dtype."""
    return math.sqrt(torch.finfo(dtype).eps)

D, HEADS, T, B = 8, 2, 5, 4


class Attention(nn.Module):
    """Two-head self-attention whose q and k pass through ``twist`` before the logits."""

    def __init__(self, twist) -> None:
        super().__init__()
        self.q_proj, self.k_proj = nn.Linear(D, D), nn.Linear(D, D)
        self.v_proj, self.o_proj = nn.Linear(D, D), nn.Linear(D, D)
        self.twist = twist

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, HEADS, D // HEADS).transpose(1, 2)

        q, k = self.twist(split(self.q_proj(x))), self.twist(split(self.k_proj(x)))
        logits = (q @ k.transpose(-1, -2)).to(x.dtype) / math.sqrt(D // HEADS)
        out = torch.softmax(logits, dim=-1) @ split(self.v_proj(x))
        return x + self.o_proj(out.transpose(1, 2).reshape(b, t, D))


class Model(nn.Module):
    def __init__(self, twist=lambda y: y, dtype: torch.dtype = F64) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([Attention(twist) for _ in range(2)])
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0.0, 0.5, generator=generator(len(p.shape) + p.numel()))
        self.to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def clamp(y: torch.Tensor) -> torch.Tensor:  # OLMo's clip_qkv: a clamp on each coordinate
    return y.clamp(-1.5, 1.5)


def in_float32(y: torch.Tensor) -> torch.Tensor:  # the logits computed in float32
    return y.to(F32)


def tilt(size: float):
    """``y + size · y²``: not equivariant under any rotation but ±1 permutations, ``size``
    sets how far a gauge twin ends off its base."""
    return lambda y: y + size * y * y


def probe(dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(B, T, D, generator=generator(3), dtype=F64).to(dtype)


def check(model: nn.Module, dtype: torch.dtype):
    sites = find_qk_sites(model, [(f"layers.{i}.q_proj", f"layers.{i}.k_proj")
                                  for i in range(2)], num_heads=HEADS)
    _, rotations = gauge_twin(model, sites, generator=generator(7))

    def tensors(m):
        return [p for n, p in m.named_parameters() if "q_proj" in n or "k_proj" in n]

    def measure(m, dt):
        return m(cast_floats(probe(dtype), dt))

    def make(m):
        return gauge_twin(m, sites, rotations=rotations)[0]

    with torch.no_grad():
        return same_function(model, make, tensors, measure)


SITES = [(f"layers.{i}.q_proj", f"layers.{i}.k_proj") for i in range(2)]


def audit(model: nn.Module, dtype: torch.dtype):
    x = probe(dtype)
    return audit_twins(model, lambda m, b: m(b).pow(2).mean(), probe=x, batch=x, steps=0,
                       sites=SITES, num_heads=HEADS,
                       optimizer=lambda p: torch.optim.SGD(p, lr=0.1))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_an_exact_gauge_twin_passes_in_its_dtype_and_in_float64(dtype):
    checks = check(Model(dtype=dtype), dtype)
    assert [c.dtype for c in checks] == (["float32", "float64"] if dtype == F32
                                         else ["float64"])
    for c in checks:
        assert c.passed and c.judged_at == c.dtype
        assert c.drift <= 3 * c.roundoff  # measured 0.9–1.1 of its round-off twin
    audit(Model(dtype=dtype), dtype)  # and the audit accepts the model


@pytest.mark.parametrize("dtype", [F32, F64])
def test_a_clamp_on_q_and_k_is_refused_with_the_measured_distance(dtype):
    """Negative control: a clamp on each coordinate does not commute with a rotation."""
    checks = check(Model(clamp, dtype=dtype), dtype)
    assert not any(c.passed for c in checks)
    # saturated coordinates barely respond to rounding, yet float64 still resolves the rest
    assert checks[-1].judged_at == "float64"
    with pytest.raises(ValueError, match=r"gauge twin's output .*rel = \S+ in float64"):
        audit(Model(clamp, dtype=dtype), dtype)


def test_a_break_that_sqrt_eps_accepted_in_float32_is_refused_in_both_dtypes():
    model = Model(tilt(1e-5), dtype=F32)
    float32, float64 = check(model, F32)
    assert 1e-6 < float32.drift < sqrt_eps(F32)  # the old rule said "same function"
    assert not float32.passed and not float64.passed
    assert float64.drift > 1e4 * float64.limit  # float64 resolves it by far
    with pytest.raises(ValueError, match="in float32 .* in float64"):
        audit(model, F32)


def test_a_float64_model_that_computes_its_logits_in_float32_is_judged_at_float32():
    model = Model(in_float32, dtype=F64)
    (c,) = check(model, F64)
    assert c.judged_at == "float32" and c.passed
    assert c.drift > sqrt_eps(F64)  # the old rule refused this symmetry
    audit(model, F64)
    # negative control: the same model with a break float32 resolves is still refused
    broken = Model(lambda y: in_float32(tilt(1e-3)(y)), dtype=F64)
    (c,) = check(broken, F64)
    assert c.judged_at == "float32" and not c.passed


def test_a_roundoff_twin_moves_each_entry_by_a_rounding_and_keeps_zeros():
    layer = nn.Linear(64, 64).to(F32)
    with torch.no_grad():
        layer.weight[0].zero_()
    eps = torch.finfo(F32).eps
    twin = roundoff_twin(layer, lambda m: [m.weight], eps, seed=0)
    w, v = layer.weight.detach().double(), twin.weight.detach().double()
    assert torch.equal(v[0], w[0]) and torch.equal(twin.bias, layer.bias)
    rel = ((v - w).abs() / w.abs())[1:]
    assert rel.max() <= 2.5 * eps and (rel > 0).float().mean() > 0.9
    up = (v - w)[1:] > 0
    assert 0.4 < up.float().mean() < 0.6  # both signs drawn


def test_cast_floats_casts_floating_tensors_only():
    ids, x = torch.arange(3), torch.ones(2, dtype=F32)
    out = cast_floats({"a": (ids, x), "b": [x, "text"]}, F64)
    assert out["a"][0] is ids and out["a"][1].dtype == F64
    assert out["b"][0].dtype == F64 and out["b"][1] == "text"


def test_a_refusal_names_the_site_that_breaks_the_function():
    """Two layers, the second clamps q and k: the whole twin is refused, and each site turned
    alone shows which one is not a symmetry (negative control: the first is not named)."""
    model = Model(dtype=F64)
    model.layers[1].twist = clamp
    with pytest.raises(ValueError, match=r"\) at site layers\.1\.q_proj\|layers\.1\.k_proj "
                                         r"\(\S+\), so the per-head gauge") as refused:
        audit(model, F64)
    assert "layers.0.q_proj" not in str(refused.value)


def test_a_model_that_computes_in_float32_is_judged_at_float32s_round_off():
    """A float64 model whose logits run in float32: SGD's twins drift at float32 round-off,
    which the float64 threshold would call chaotic; the verdict reads float32's and says so.
    The same model computing in float64 keeps float64's (the control)."""
    x = probe(F64)

    def run(twist):
        return audit_twins(Model(twist, dtype=F64), lambda m, b: m(b).pow(2).mean(),
                           probe=x, batch=x, steps=5, sites=SITES, num_heads=HEADS,
                           optimizer=lambda p: torch.optim.SGD(p, lr=1e-3))

    cast, exact = run(in_float32), run(lambda y: y)
    assert cast.computes_in == "float32" and "computes its query/key path in float32" in str(cast)
    assert cast.trace("gauge").max_drift > verdict_threshold(F64)  # float64's would not hold
    assert cast.verdict.outcome == KEEPS and cast.threshold == verdict_threshold(F32)
    assert exact.computes_in == "" and exact.threshold == verdict_threshold(F64)
    assert exact.verdict.outcome == KEEPS
