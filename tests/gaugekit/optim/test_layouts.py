"""Every optimizer, every execution path, on parameters of every memory layout: the same steps as
the plain loop on contiguous parameters.

Layouts (of the parameter, its gradient and so its state): contiguous; *transposed* (dense,
permuted strides: ``torch.empty(k, n).t()``); *sliced* (not dense: every other column of a wider
tensor, as a view of a parameter the optimizer does not own); *channels-last* (a 4-D kernel in
``torch.channels_last``); *mixed* (a contiguous parameter whose gradient is transposed). The
gradients are set by hand in the layout under test, from one autograd pass on contiguous copies,
so that every run sees the same numbers in another arrangement of memory.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from gaugekit.optim import make_optimizer
from gaugekit.optim.registry import ALIASES, get_spec, optimizer_names

DTYPE = torch.float64
#: float64 round-off over a few steps of O(1) parameters (the kernel path's ``β₁ m + (1 − β₁) g``
#: against ``m + (1 − β₁)(g − m)``, BLAS products taken in another order on another layout)
TOL = 1e-11
STEPS = 4

#: (registry name, extra options, label): each rule, and each execution path a rule has
PATHS: list[tuple[str, dict, str]] = [
    *[(name, {}, name) for name in optimizer_names()],
    *[(name, {}, name) for name in ALIASES],
    ("scalar_adam", {"foreach": True, "fused": False}, "scalar_adam-foreach"),
    ("scalar_adam", {"foreach": False, "fused": False}, "scalar_adam-loop"),
    ("adam_mini", {"foreach": True}, "adam_mini-foreach"),
    ("adam_mini", {"blocks": "tensor"}, "adam_mini-tensor"),
    ("adam_mini", {"blocks": "entry"}, "adam_mini-entry"),
    ("muon_adam", {"adam": "shared_scale"}, "muon_adam-shared"),
    ("muon", {"ns_dtype": torch.float32}, "muon-stacked"),
]
#: the compiled paths (``fused=True``), seconds of compilation each: in the slow run
COMPILED: list[tuple[str, dict, str]] = [
    ("scalar_adam", {"fused": True, "batch_dims": 0}, "scalar_adam-fused"),
    ("adam_mini", {"fused": True}, "adam_mini-fused"),
]
#: options of the plain loop of each rule (where a rule has other paths)
PLAIN = {"scalar_adam": {"foreach": False, "fused": False},
         "adam_mini": {"foreach": False, "fused": False}}

LAYOUTS = ("transposed", "sliced", "mixed", "channels_last")


def _shapes(name: str) -> list[tuple[int, ...]]:
    spec = get_spec(name)
    if spec.paired:
        return [(6, 3), (5, 3)]
    if spec.matrix_only:
        return [(6, 4), (4, 6), (5, 3)]
    return [(6, 4), (4, 6), (3, 2, 3, 3), (5,)]


def _arranged(value: Tensor, layout: str, for_grad: bool = False) -> Tensor:
    """``value`` in ``layout`` (its numbers unchanged)."""
    if layout == "channels_last" and value.ndim == 4:
        return value.contiguous(memory_format=torch.channels_last)
    if value.ndim < 2 or layout in ("contiguous", "channels_last"):
        return value.clone()
    if layout == "transposed" or (layout == "mixed" and for_grad):
        out = torch.empty(value.shape[::-1], dtype=value.dtype).permute(
            *range(value.ndim - 1, -1, -1))
    elif layout == "sliced":
        wide = torch.zeros(*value.shape[:-1], 2 * value.shape[-1], dtype=value.dtype)
        out = wide[..., ::2]
    else:  # mixed, the parameter: contiguous
        return value.clone()
    out.copy_(value)
    return out


def _loss(params: list[Tensor]) -> Tensor:
    """A smooth loss that couples every entry of every parameter."""
    total = 0
    for i, p in enumerate(params):
        flat = p.reshape(-1)
        weights = torch.linspace(0.5, 1.5, flat.numel(), dtype=p.dtype)
        total = total + (flat.sin() * weights).sum() * (1 + 0.1 * i) + flat.square().sum() * 0.05
    return total


def _train(name: str, options: dict, layout: str) -> list[Tensor]:
    g = torch.Generator().manual_seed(7)
    values = [torch.randn(s, generator=g, dtype=DTYPE) for s in _shapes(name)]
    params = [_arranged(v, layout).requires_grad_(True) for v in values]
    opt = make_optimizer(name, params, **{"lr": 1e-2, **options})
    for _ in range(STEPS):
        copies = [p.detach().clone().contiguous().requires_grad_(True) for p in params]
        _loss(copies).backward()
        for p, c in zip(params, copies, strict=True):
            p.grad = _arranged(c.grad, layout, for_grad=True)
        opt.step()
    return [p.detach().clone() for p in params]


def _check(name: str, options: dict, layout: str) -> None:
    plain = _train(name, {**options, **PLAIN.get(name, {})}, "contiguous")
    start = _train(name, {**options, "lr": 0.0}, "contiguous")
    arranged = _train(name, options, layout)
    for ref, got, first in zip(plain, arranged, start, strict=True):
        torch.testing.assert_close(got, ref, atol=TOL, rtol=TOL)
        assert (ref - first).abs().max() > 1e-4  # the plain loop moved far beyond the tolerance


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("name", "options"), [(n, o) for n, o, _ in PATHS],
                         ids=[label for *_, label in PATHS])
def test_every_layout_steps_as_the_plain_loop(name, options, layout):
    _check(name, options, layout)


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("name", "options"), [(n, o) for n, o, _ in COMPILED],
                         ids=[label for *_, label in COMPILED])
def test_every_layout_steps_as_the_plain_loop_compiled(name, options, layout):
    _check(name, options, layout)
