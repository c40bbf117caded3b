"""Each execution path of a rule against its plain loop, in float64, float32 and half precision.

Paths: SharedScaleAdam's fused kernel (its default for one run in float32/float64), its
multi-tensor passes (``foreach``) and its compiled pass (``fused=True``, slow run); AdamMini's
multi-tensor passes and compiled pass; Muon's stacked Newton–Schulz (same-shape matrices in one
call) against one call per matrix. Tolerances, stated per dtype on parameters of size O(1) after
four steps of size ~1e-2: float64 1e-12, float32 1e-5 (a few ulps of the step), bfloat16 and
float16 one ulp of the parameter (2⁻⁷ and 2⁻¹⁰ relative): half-precision paths may round an
entry the other way; the compiled pass four ulps (it keeps each step's intermediates in float32
and rounds once, where the loop rounds after each operation: 1.5 ulps apart after four steps at
worst on this problem).
"""

from __future__ import annotations

import pytest
import torch

from gaugekit.optim import AdamMini, Muon, MuonAdam, SharedScaleAdam
from gaugekit.optim.orthogonalize import stacking

TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2**-7, torch.float16: 2**-10}
DTYPES = list(TOL)

#: label -> (factory of the plain loop, factory of the path)
PATHS = {
    "shared_scale-kernel": (lambda ps: SharedScaleAdam(ps, lr=1e-2, foreach=False, fused=False),
                            lambda ps: SharedScaleAdam(ps, lr=1e-2)),
    "shared_scale-foreach": (lambda ps: SharedScaleAdam(ps, lr=1e-2, foreach=False, fused=False),
                             lambda ps: SharedScaleAdam(ps, lr=1e-2, foreach=True, fused=False)),
    "adam_mini-foreach": (lambda ps: AdamMini(ps, lr=1e-2, weight_decay=0.1),
                          lambda ps: AdamMini(ps, lr=1e-2, weight_decay=0.1, foreach=True)),
    "adam_mini-tensor-foreach": (lambda ps: AdamMini(ps, lr=1e-2, blocks="tensor"),
                                 lambda ps: AdamMini(ps, lr=1e-2, blocks="tensor", foreach=True)),
}
COMPILED = {
    "shared_scale-compiled": (
        lambda ps: SharedScaleAdam(ps, lr=1e-2, foreach=False, fused=False, batch_dims=1),
        lambda ps: SharedScaleAdam(ps, lr=1e-2, fused=True, batch_dims=1)),
    "adam_mini-compiled": (lambda ps: AdamMini(ps, lr=1e-2, weight_decay=0.1),
                           lambda ps: AdamMini(ps, lr=1e-2, weight_decay=0.1, fused=True)),
}


def _train(make, dtype, shapes=((2, 6, 4), (2, 4, 6), (2, 5))) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    params = [torch.randn(s, generator=g).to(dtype).requires_grad_(True) for s in shapes]
    opt = make(params)
    for _ in range(4):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(dtype)
        opt.step()
    return [p.detach().float() for p in params]


def _compare(plain, path, dtype, shapes=((2, 6, 4), (2, 4, 6), (2, 5)), ulps=1):
    a, b = _train(plain, dtype, shapes), _train(path, dtype, shapes)
    start = _train(lambda ps: SharedScaleAdam(ps, lr=0.0), dtype, shapes)
    tol = TOL[dtype] * (ulps if dtype.itemsize == 2 else 1)
    for x, y, s in zip(a, b, start, strict=True):
        torch.testing.assert_close(y, x, atol=tol, rtol=tol)
        assert (x - s).abs().max() > 4 * TOL[dtype]  # the loop moved beyond the tolerance


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_path_is_the_plain_loop(path, dtype):
    _compare(*PATHS[path], dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("path", sorted(COMPILED))
def test_each_compiled_path_is_the_plain_loop(path, dtype):
    _compare(*COMPILED[path], dtype, ulps=4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("make", [lambda ps: Muon(ps, lr=2e-2),
                                  lambda ps: MuonAdam(ps, lr=2e-2),
                                  lambda ps: Muon(ps, lr=2e-2, ns_dtype=torch.bfloat16)],
                         ids=["muon", "muon_adam", "muon-bf16"])
def test_stacked_newton_schulz_is_one_call_per_matrix(make, dtype):
    shapes = ((6, 4), (4, 6), (6, 4), (5, 5), (5, 5))
    with stacking(False):
        loop = _train(make, dtype, shapes)
    with stacking(True):
        stacked = _train(make, dtype, shapes)
    start = _train(lambda ps: Muon(ps, lr=0.0), dtype, shapes)
    for x, y, s in zip(loop, stacked, start, strict=True):
        torch.testing.assert_close(y, x, atol=TOL[dtype], rtol=TOL[dtype])
        assert (x - s).abs().max() > 4 * TOL[dtype]
