"""The inputs torch.optim takes, on every rule: tensor learning rates of every one-element shape,
0-d parameters, meta tensors, and the errors that name the real problem (mixed devices where a
rule reduces over its parameters, a pair of mixed dtypes, half precision where ``eigh`` runs)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from gaugekit.optim import AdamMini, GramPreconditioned, ScaledGD, Shampoo, make_optimizer
from gaugekit.optim.registry import ALIASES, get_spec, optimizer_names

DTYPE = torch.float64
NAMES = [*optimizer_names(), *ALIASES]


def _params(name: str, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    spec = get_spec(name)
    shapes = [(5, 3), (4, 3)] if spec.paired or spec.matrix_only else [(5, 3), (4,)]
    return [torch.randn(s, generator=g, dtype=DTYPE).requires_grad_(True) for s in shapes]


def _run(name: str, lr, steps: int = 3) -> list[torch.Tensor]:
    params = _params(name)
    opt = make_optimizer(name, params, lr=lr)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g, dtype=DTYPE)
        opt.step()
    return [p.detach() for p in params]


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
@pytest.mark.parametrize("name", NAMES)
def test_a_one_element_tensor_lr_of_any_shape_is_the_float(name, shape):
    """torch.optim takes a tensor ``lr`` of one element whatever its shape; (1,) and (1, 1) were
    refused. The steps are the float's, to round-off (a tensor takes the two-pass path of
    SharedScaleAdam, the float its fused kernel)."""
    ref = _run(name, 0.02)
    got = _run(name, torch.full(shape, 0.02, dtype=DTYPE))
    start = _run(name, 0.0)
    for a, b, c in zip(ref, got, start, strict=True):
        torch.testing.assert_close(b, a, atol=1e-13, rtol=1e-13)
        assert (a - c).abs().max() > 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_a_tensor_lr_of_several_elements_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=r"^Invalid lr: 'tensor of shape \(2,\)'; expected a "
                                         r"float or a one-element tensor"):
        make_optimizer(name, _params(name), lr=torch.tensor([1e-3, 1e-3], dtype=DTYPE))


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if not (get_spec(n).matrix_only or get_spec(n).paired)])
def test_a_0d_parameter_steps_as_its_one_entry(name):
    """A 0-d parameter (a scalar gain) steps exactly as the same entry held in a shape-(1,)
    tensor. AdamMini refused it at its default blocks ("Invalid blocks: 1 ... shape ()")."""
    def run(shape):
        p = torch.tensor(1.5, dtype=DTYPE).reshape(shape).requires_grad_(True)
        opt = make_optimizer(name, [p], lr=1e-2)
        for value in (0.3, -0.7, 0.2):
            p.grad = torch.full(shape, value, dtype=DTYPE)
            opt.step()
        return p.detach().reshape(())

    scalar, vector = run(()), run((1,))
    torch.testing.assert_close(scalar, vector, atol=1e-15, rtol=0)
    assert abs(float(scalar) - 1.5) > 1e-5


def test_adam_mini_blocks_still_refuse_rows_they_do_not_divide():
    with pytest.raises(ValueError, match=r"^Invalid blocks: 2; expected a divisor of the rows"):
        AdamMini([nn.Parameter(torch.zeros(3, 4))], blocks=2)


@pytest.mark.parametrize("name", NAMES)
def test_meta_parameters_step_with_a_warning_and_moved_state_is_refused(name):
    """On the meta device a step computes nothing and says so (once); its state lives there.
    A parameter moved after its state was made is refused at the next step, naming both
    devices, where it stayed unchanged without a word."""
    params = [p.detach().to("meta").requires_grad_(True) for p in _params(name)]
    opt = make_optimizer(name, params, lr=1e-2)
    for p in params:
        p.grad = torch.zeros_like(p)
    with pytest.warns(RuntimeWarning, match="meta device hold no values"):
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()  # warned once
    moved = params[0]
    torch.utils.swap_tensors(moved, torch.ones(moved.shape, dtype=DTYPE, requires_grad=True))
    moved.grad = torch.ones(moved.shape, dtype=DTYPE)
    if not opt.state.get(moved):
        pytest.skip("a stateless rule: nothing to leave on the meta device")
    with pytest.raises(RuntimeError, match=r"is on meta and the parameter on cpu"):
        opt.step()


@pytest.mark.parametrize("name", ["scalar_adam", "flow_adam", "muon_adam", "scaled_gd"])
def test_parameters_on_several_devices_are_refused_where_a_statistic_spans_them(name):
    """The meta device stands for a second device on a machine with one."""
    a, b = _params(name)
    b = b.detach().to("meta").requires_grad_(True)
    kw = {"adam": "shared_scale"} if name == "muon_adam" else {}
    with pytest.raises(ValueError, match=r"^Invalid params: \"parameters on the devices "
                                         r"\['cpu', 'meta'\]\"; expected one device"):
        make_optimizer(name, [a, b], **kw)
    with pytest.raises(ValueError, match="one device"):  # in another group too
        make_optimizer(name, [{"params": [a]}, {"params": [b]}], **kw) if name != "scaled_gd" \
            else ScaledGD([a, b])
    # negative control: a per-coordinate rule takes them (torch.optim does)
    make_optimizer("adam", [a, b])


def test_a_pair_of_two_dtypes_is_refused_naming_them():
    U = nn.Parameter(torch.randn(5, 3, dtype=torch.float32))
    V = nn.Parameter(torch.randn(4, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^Invalid params: .*torch.float32, torch.float64.*"
                                         r"expected the two factors of a pair in one dtype"):
        ScaledGD([U, V])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("make", [Shampoo, GramPreconditioned])
def test_half_precision_is_refused_where_eigh_runs(make, dtype):
    with pytest.raises(ValueError, match=r"^Invalid params: .*expected torch.float32 or "
                                         r"torch.float64 parameters: .*torch.linalg.eigh"):
        make([nn.Parameter(torch.randn(4, 3).to(dtype))])
    # negative control: a Gram function of one's own is not refused
    GramPreconditioned([nn.Parameter(torch.randn(4, 3).to(dtype))], gram_fn=lambda P: P)
