"""SharedScaleAdam's and AdamMini's multi-tensor paths: ``foreach=True`` gives the for-loop's
numbers exactly, ``fused=True`` (the compiled one-pass step) to round-off; SharedScaleAdam's
default one-run step through torch's fused momentum-SGD kernel gives the two-pass numbers to
round-off; the switches are validated and stay out of the audit's description while off."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gaugekit.audit.factor_results import optimizer_hyperparameters
from gaugekit.optim import AdamMini, Lion, SharedScaleAdam
from gaugekit.optim import execution as functional

CASES = {
    "shared_scale": lambda ps, **kw: SharedScaleAdam(ps, lr=1e-2, weight_decay=0.1, **kw),
    "adam_mini_rows": lambda ps, **kw: AdamMini(ps, lr=1e-2, weight_decay=0.1, **kw),
    "adam_mini_tensor": lambda ps, **kw: AdamMini(ps, lr=1e-2, blocks="tensor", **kw),
}


def _train(make, steps: int = 5, **kw) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)).double()
    groups = [{"params": list(model[0].parameters())},
              {"params": list(model[2].parameters()), "lr": 5e-3, "betas": (0.8, 0.99)}]
    opt = make(groups, **kw)
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_foreach_is_the_for_loop_exactly(case):
    # fused=False: SharedScaleAdam's default one-run step takes neither (the kernel, below)
    loop = _train(CASES[case], foreach=False, fused=False)
    multi = _train(CASES[case], foreach=True, fused=False)
    start = _train(CASES[case], steps=0)
    for a, b, c in zip(loop, multi, start, strict=True):
        assert torch.equal(a, b)
        assert not torch.equal(a, c)  # the runs moved


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_is_the_for_loop_to_round_off(case):
    loop, fused = _train(CASES[case], fused=False), _train(CASES[case], fused=True)
    for a, b in zip(loop, fused, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.slow
def test_fused_compiles_the_step_of_stacked_runs():
    """Where the kernel cannot run (stacked runs, per-run rates) ``fused=True`` compiles."""
    def train(fused):
        g = torch.Generator().manual_seed(3)
        U = torch.randn(3, 6, 2, generator=g, dtype=torch.float64, requires_grad=True)
        opt = SharedScaleAdam([U], lr=torch.tensor([1e-2, 3e-2, 1e-1]), batch_dims=1,
                              fused=fused)
        for _ in range(4):
            opt.zero_grad()
            U.sin().square().sum().backward()
            opt.step()
        return U.detach()

    start = torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    loop, compiled = train(False), train(True)
    torch.testing.assert_close(loop, compiled, atol=1e-12, rtol=0)
    assert (loop - start).abs().amax(dim=(1, 2)).gt(1e-3).all()  # every run moved


class _KernelSpy:
    """Counts the calls of ``torch._fused_sgd_`` (and the tensors they update)."""

    def __init__(self, monkeypatch):
        self.calls: list[int] = []
        kernel = torch._fused_sgd_

        def spy(params, *args, **kwargs):
            self.calls.append(len(params))
            return kernel(params, *args, **kwargs)

        monkeypatch.setattr(torch, "_fused_sgd_", spy)


@pytest.mark.parametrize("fused", [None, True])
def test_the_one_run_step_is_torchs_fused_sgd_kernel_to_round_off(monkeypatch, fused):
    """Two groups with their own lr, betas, weight decay and maximize: the kernel path (one call
    per group and step) gives the two-pass numbers to float64 round-off, moments included."""
    def groups(ps):
        return [{"params": ps[:2]},
                {"params": ps[2:], "lr": 5e-3, "betas": (0.8, 0.99), "maximize": True}]

    def train(**kw):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)).double()
        opt = SharedScaleAdam(groups(list(model.parameters())), lr=1e-2, weight_decay=0.1, **kw)
        x = torch.randn(16, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        for _ in range(5):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        state = [opt.state[p] for p in model.parameters()]
        return ([p.detach().clone() for p in model.parameters()]
                + [s["exp_avg"] for s in state] + [s["exp_avg_sq_mean"] for s in state])

    two_passes = train(fused=False)
    spy = _KernelSpy(monkeypatch)
    kernel = train(fused=fused)
    assert spy.calls == [2, 2] * 5  # each group in one call, every step
    for a, b in zip(two_passes, kernel, strict=True):
        torch.testing.assert_close(a, b, atol=1e-13, rtol=1e-13)


def test_the_kernel_starts_the_moment_at_zero():
    """torch's kernel copies the gradient into a fresh buffer at its "first step"; here the
    moment starts at zero, so after one step ``m = (1 − β₁) g`` and, both bias corrections
    cancelling, ``θ ← θ − lr g / rms(g)`` (ε = 0)."""
    p = torch.tensor([3.0, -4.0], dtype=torch.float64, requires_grad=True)
    opt = SharedScaleAdam([p], lr=0.1, betas=(0.9, 0.999), eps=0.0)
    p.grad = torch.tensor([3.0, -4.0], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(opt.state[p]["exp_avg"], 0.1 * p.grad, atol=1e-15, rtol=0)
    rms = (12.5) ** 0.5  # √(mean g²) = √((9 + 16)/2)
    expected = torch.tensor([3.0, -4.0], dtype=torch.float64) * (1 - 0.1 / rms)
    torch.testing.assert_close(p.detach(), expected, atol=1e-15, rtol=0)


def test_the_kernel_in_float32_is_the_two_passes_to_its_precision(monkeypatch):
    def train(fused):
        g = torch.Generator().manual_seed(2)
        U = torch.randn(16, 4, generator=g).requires_grad_(True)
        opt = SharedScaleAdam([U], lr=1e-2, fused=fused)
        for _ in range(3):
            opt.zero_grad()
            U.sin().sum().backward()
            opt.step()
        return U.detach()

    start = torch.randn(16, 4, generator=torch.Generator().manual_seed(2))
    two = train(False)
    spy = _KernelSpy(monkeypatch)
    one = train(None)
    assert spy.calls == [1, 1, 1]
    torch.testing.assert_close(two, one, atol=1e-6, rtol=0)
    assert (two - start).abs().max() > 1e-2  # the runs moved by far more than the tolerance


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_keeps_the_two_passes(monkeypatch, dtype):
    """torch 2.13's CPU kernel does not move half-precision entries in its vectorized blocks
    (64 ones, momentum 0.9, one step: still ones); such parameters keep the two passes, which
    do move them."""
    spy = _KernelSpy(monkeypatch)
    q = torch.nn.Parameter(torch.ones(64, dtype=dtype))
    opt = SharedScaleAdam([q], lr=0.01)
    q.grad = torch.full((64,), 2.0, dtype=dtype)
    opt.step()
    assert spy.calls == []
    assert q.detach().lt(1).all()  # every entry moved


def test_the_kernel_is_left_out_where_it_cannot_run(monkeypatch):
    """Stacked runs, tensor rates and ``fused=False`` keep the two passes (a tensor ``eps``
    only enters the scale, a tensor itself: the kernel takes it)."""
    spy = _KernelSpy(monkeypatch)
    cases = [dict(fused=False), dict(lr=torch.tensor(1e-2)), dict(batch_dims=1)]
    for kw in cases:
        U = torch.randn(3, 5, 2, dtype=torch.float64, requires_grad=True)
        before = U.detach().clone()
        opt = SharedScaleAdam([U], **kw)
        U.grad = torch.randn_like(U)
        opt.step()
        assert not torch.equal(U.detach(), before), kw
    assert spy.calls == []


def test_switches_are_validated_and_hidden_while_off():
    p = [nn.Parameter(torch.zeros(3, 2))]
    for make in (SharedScaleAdam, AdamMini):
        for bad in (1, "yes"):
            with pytest.raises(ValueError, match="^Invalid fused"):
                make(p, fused=bad)
        assert "fused" not in optimizer_hyperparameters(make(p))
        assert optimizer_hyperparameters(make(p, foreach=True))["foreach"] is True
    with pytest.raises(ValueError, match="^Invalid fused: True; expected None or False"):
        Lion(p, fused=True)  # a rule without a fused path refuses it, naming it
    with pytest.raises(ValueError, match="^Invalid foreach"):
        SharedScaleAdam([{"params": p}, {"params": [nn.Parameter(torch.zeros(2))],
                                         "foreach": True}])


def _layout(value: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "transposed":
        return value.t().contiguous().t()
    if layout == "channels_last":
        return value.contiguous(memory_format=torch.channels_last)
    if layout == "sliced":
        wide = torch.zeros(*value.shape[:-1], 2 * value.shape[-1], dtype=value.dtype)
        wide[..., ::2] = value
        return wide[..., ::2]
    return value.clone()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "channels_last"])
@pytest.mark.parametrize("maximize", [False, True])
def test_torchs_fused_sgd_kernel_on_every_layout_it_is_given(dtype, layout, maximize):
    """Pins the private kernel on the layouts ``same_dense_layout`` sends it (one dense layout
    shared by the parameter, the gradient and the moment): three steps of
    ``m ← β m + (1 − β) g``, ``θ ← θ − r m`` (``−g`` with maximize), against the formula."""
    g = torch.Generator().manual_seed(5)
    shape = (3, 4, 5, 2) if layout == "channels_last" else (7, 5)
    theta, m = (torch.randn(shape, generator=g, dtype=dtype) for _ in range(2))
    grads = [torch.randn(shape, generator=g, dtype=dtype) for _ in range(3)]
    p, buf = _layout(theta, layout), _layout(m, layout)
    assert functional.same_dense_layout(p, buf)
    beta, rate = 0.8, 0.05
    for grad in grads:
        d = -grad if maximize else grad
        m = beta * m + (1 - beta) * d
        theta = theta - rate * m
        torch._fused_sgd_([p], [_layout(grad, layout)], [buf], weight_decay=0.0, momentum=beta,
                          lr=rate, dampening=beta, nesterov=False, maximize=maximize,
                          is_first_step=False)
    tol = 1e-6 if dtype == torch.float32 else 1e-14
    torch.testing.assert_close(buf, m, atol=tol, rtol=tol)
    torch.testing.assert_close(p, theta, atol=tol, rtol=tol)
    assert p.stride() == _layout(theta, layout).stride()  # the layout kept


@pytest.mark.parametrize(("param_layout", "grad_layout"),
                         [("sliced", "contiguous"), ("contiguous", "transposed"),
                          ("transposed", "contiguous"), ("sliced", "sliced")])
def test_other_layouts_never_reach_the_kernel(monkeypatch, param_layout, grad_layout):
    """A parameter sliced with a step, or a gradient of other strides than its parameter, is
    stepped by the two passes (torch 2.13's kernel updates the wrong entries there: the step of
    issue 46), with the contiguous run's numbers."""
    def run(pl, gl):
        g = torch.Generator().manual_seed(6)
        value = torch.randn(6, 4, generator=g, dtype=torch.float64)
        p = _layout(value, pl).requires_grad_(True)
        opt = SharedScaleAdam([p], lr=0.05)
        for _ in range(3):
            p.grad = _layout(torch.randn(6, 4, generator=g, dtype=torch.float64), gl)
            opt.step()
        return p.detach().contiguous(), value

    reference, start = run("contiguous", "contiguous")
    spy = _KernelSpy(monkeypatch)
    got, _ = run(param_layout, grad_layout)
    assert spy.calls == []
    torch.testing.assert_close(got, reference, atol=1e-13, rtol=1e-13)
    assert (reference - start).abs().max() > 0.05


def test_many_differently_configured_fused_optimizers_in_one_process():
    """Sweeps and notebooks build many optimizers: twenty ``fused=True`` optimizers, each of
    another parameter count, shapes, dtype, blocks, batch dims, rates and decay, step as their
    loops, on a handful of compiled graphs (the step compiled over each list of parameters
    failed at the eighth: dynamo's recompile limit, ``fullgraph=True``)."""
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    for i in range(20):
        dtype = torch.float64 if i % 5 == 0 else torch.float32
        batch = (2,) if i % 4 == 3 else ()

        def run(fused, i=i, dtype=dtype, batch=batch):
            g = torch.Generator().manual_seed(i)
            shapes = [(4 + i, 3), (2 + i % 3, 5, 2), (7,)][: 1 + i % 3]
            ps = [torch.randn(batch + s, generator=g, dtype=dtype).requires_grad_(True)
                  for s in shapes]
            kw = dict(lr=1e-3 * (i + 1), betas=(0.9 - 0.01 * i, 0.99),
                      weight_decay=0.1 * (i % 2), batch_dims=len(batch), fused=fused)
            if i % 2:
                opt = AdamMini(ps, blocks=(1, "tensor", "entry")[i % 3], **kw)
            else:
                opt = SharedScaleAdam(ps, **kw)
            for _ in range(2):
                for p in ps:
                    p.grad = torch.randn(p.shape, generator=g, dtype=dtype)
                opt.step()
            return ps

        for a, b in zip(run(False), run(True), strict=True):
            tol = 1e-12 if dtype == torch.float64 else 1e-5
            torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    assert counters["stats"]["unique_graphs"] - graphs <= 16
