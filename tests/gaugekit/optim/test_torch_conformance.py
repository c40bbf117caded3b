"""torch's optimizer conformance, as tests of ours, on torch's own harness.

Each gaugekit optimizer gets an ``OptimizerInfo`` (``torch.testing._internal.common_optimizers``,
shipped in torch's wheel): its inputs (lr as a float and as tensors of every one-element shape,
weight decay, maximize, the non-finite modes, its own options), the implementations it supports
(``foreach``, ``fused``), and error inputs: torch's for every optimizer
(``get_error_inputs_for_all_optims``) and ours. The harness expands the inputs with the
implementation flags (``_get_optim_inputs_including_global_cliquey_kwargs``); the tests below
are ours, written for these optimizers (torch's ``test_optim.py`` is not copied): every input
steps in the right direction, resumes bit for bit from its ``state_dict``, survives
``deepcopy``, leaves parameters without gradients alone, and every error input raises what
torch's harness expects.
"""

from __future__ import annotations

import copy
import re
import warnings

import pytest
import torch
from torch import nn

from gaugekit.optim import (
    GD,
    Adafactor,
    Adam,
    AdamMini,
    EigenAdam,
    FlowAdam,
    GramPreconditioned,
    Lion,
    Momentum,
    Muon,
    MuonAdam,
    RMSprop,
    Shampoo,
    SharedScaleAdam,
    Signum,
)

pytest.importorskip("expecttest")  # torch's harness imports it (the test extra installs it)
from torch.testing._internal.common_optimizers import (  # noqa: E402
    ErrorOptimizerInput,
    OptimizerErrorEnum,
    OptimizerInfo,
    OptimizerInput,
    _get_optim_inputs_including_global_cliquey_kwargs,
    get_error_inputs_for_all_optims,
)

DTYPE = torch.float64


def _inputs(lr: float, **extra_options):
    """A rule's inputs: the defaults at ``lr``, tensor rates of every one-element shape, weight
    decay, maximize, the non-finite modes, and its own options (``extra_options``: name ->
    list of kwargs)."""

    def func(device, dtype=None):
        out = [OptimizerInput(params=None, kwargs={"lr": lr}, desc="default"),
               OptimizerInput(params=None, kwargs={"lr": lr, "weight_decay": 0.1},
                              desc="weight_decay"),
               OptimizerInput(params=None, kwargs={"lr": lr, "maximize": True},
                              desc="maximize")]
        for shape in ((), (1,), (1, 1)):
            out.append(OptimizerInput(params=None, kwargs={"lr": torch.full(shape, lr)},
                                      desc=f"tensor lr {shape}"))
        for mode in ("skip", "raise", "propagate"):
            out.append(OptimizerInput(params=None, kwargs={"lr": lr, "nonfinite": mode},
                                      desc=f"nonfinite={mode}"))
        for name, kwargs_list in extra_options.items():
            for kwargs in kwargs_list:
                out.append(OptimizerInput(params=None, kwargs={"lr": lr, **kwargs},
                                          desc=f"{name} {kwargs}"))
        return out

    return func


def _errors(extra=()):
    """torch's error inputs for every optimizer, and ours."""

    def func(device, dtype):
        ours = [ErrorOptimizerInput(
            OptimizerInput(params=None, kwargs={"lr": -1e-3}, desc="negative lr"),
            error_type=ValueError, error_regex="^Invalid lr: -0.001")]
        ours += [ErrorOptimizerInput(OptimizerInput(params=None, kwargs=kw, desc=desc),
                                     error_type=ValueError, error_regex=regex)
                 for kw, desc, regex in extra]
        return [*get_error_inputs_for_all_optims(device, dtype), *ours]

    return func


def _info(cls, lr, impls=(), matrix_only=False, errors=(), **extra_options):
    info = OptimizerInfo(cls, optim_inputs_func=_inputs(lr, **extra_options),
                         optim_error_inputs_func=_errors(errors), supported_impls=impls,
                         supports_fused_on=("cpu",) if "fused" in impls else (),
                         supports_complex=False)
    info.matrix_only = matrix_only
    return info


#: every optimizer of the zoo (ScaledGD takes factor pairs: its conformance is
#: test_optim_behaviour's)
OPTIM_INFOS = [
    _info(GD, 1e-2),
    _info(Momentum, 1e-2, nesterov=[{"nesterov": True}]),
    _info(Adam, 1e-2, decoupled=[{"decoupled_weight_decay": True, "weight_decay": 0.1}]),
    _info(SharedScaleAdam, 1e-2, impls=("foreach", "fused"),
          errors=[({"foreach": 1}, "foreach not a flag", "^Invalid foreach")]),
    _info(AdamMini, 1e-2, impls=("foreach", "fused"),
          blocks=[{"blocks": "tensor"}, {"blocks": "entry"}]),
    _info(RMSprop, 1e-2),
    _info(Lion, 1e-3),
    _info(Signum, 1e-3),
    _info(Adafactor, 1e-2),
    _info(Muon, 2e-2, matrix_only=True,
          options=[{"nesterov": True}, {"adjust_lr_fn": "original"}]),
    _info(MuonAdam, 2e-2, adam=[{"adam": "shared_scale"}]),
    _info(Shampoo, 1e-1, matrix_only=True),
    _info(GramPreconditioned, 1e-2, matrix_only=True),
    _info(EigenAdam, 1e-2, matrix_only=True, side=[{"side": "left"}]),
    _info(FlowAdam, 1e-2, dial=[{"precond_power": 1.0}, {"flow": False}]),
]
IDS = [info.name for info in OPTIM_INFOS]


def _all_inputs(info):
    """The harness's expansion of the inputs with the implementation flags (``fused=True``
    compiles: its inputs run in the slow run)."""
    return _get_optim_inputs_including_global_cliquey_kwargs("cpu", DTYPE, info)


def _params(info, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(5, 3), (3, 4)] if info.matrix_only else [(5, 3), (4,), (2, 3)]
    return [nn.Parameter(torch.randn(s, generator=g, dtype=DTYPE)) for s in shapes]


def _loss(params):
    return sum(((p - 0.5) ** 2).sum() + 0.1 * p.sin().sum() for p in params)


def _cases(fused: bool):
    for info in OPTIM_INFOS:
        for optim_input in _all_inputs(info):
            if bool(optim_input.kwargs.get("fused")) == fused:
                yield pytest.param(info, optim_input, id=f"{info.name}-{optim_input.desc}")


def _run(info, optim_input, steps=5, params=None):
    params = _params(info) if params is None else params
    opt = info.optim_cls(params, **optim_input.kwargs)
    sign = -1.0 if optim_input.kwargs.get("maximize") else 1.0
    losses = []
    for _ in range(steps):  # maximize: the objective −loss goes up, so the loss goes down
        opt.zero_grad()
        loss = _loss(params)
        losses.append(float(loss))
        (sign * loss).backward()
        opt.step()
    return opt, params, losses


def _check_right_direction(info, optim_input):
    _, params, losses = _run(info, optim_input)
    final = float(_loss(params))
    assert final < losses[0], (losses, final)


@pytest.mark.parametrize(("info", "optim_input"), list(_cases(fused=False)))
def test_every_input_goes_the_right_direction(info, optim_input):
    _check_right_direction(info, optim_input)


@pytest.mark.slow
@pytest.mark.parametrize(("info", "optim_input"), list(_cases(fused=True)))
def test_every_fused_input_goes_the_right_direction(info, optim_input):
    _check_right_direction(info, optim_input)


@pytest.mark.parametrize(("info", "optim_input"), list(_cases(fused=False)))
def test_every_input_resumes_bit_for_bit_and_survives_deepcopy(info, optim_input):
    opt, params, _ = _run(info, optim_input, steps=3)
    twin_params = [nn.Parameter(p.detach().clone()) for p in params]
    twin = info.optim_cls(twin_params, **optim_input.kwargs)
    twin.load_state_dict(copy.deepcopy(opt.state_dict()))
    clone = copy.deepcopy((params, opt))
    for ps, o in ((params, opt), (twin_params, twin), clone):
        _continue(ps, o, optim_input)
    for a, b, c in zip(params, twin_params, clone[0], strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def _continue(params, opt, optim_input, steps=2):
    sign = -1.0 if optim_input.kwargs.get("maximize") else 1.0
    for _ in range(steps):
        opt.zero_grad()
        (sign * _loss(params)).backward()
        opt.step()


@pytest.mark.parametrize("info", OPTIM_INFOS, ids=IDS)
def test_parameters_without_gradients_are_left_alone(info):
    params = _params(info)
    opt = info.optim_cls(params, **info.optim_inputs_func("cpu")[0].kwargs)
    frozen = params[-1].detach().clone()
    _loss(params[:-1]).backward()
    opt.step()
    assert torch.equal(params[-1].detach(), frozen) and not opt.state.get(params[-1])
    assert not torch.equal(params[0].detach(), _params(info)[0].detach())  # the others moved


@pytest.mark.parametrize("info", OPTIM_INFOS, ids=IDS)
def test_every_error_input_raises_what_torchs_harness_expects(info):
    """torch's error inputs for every optimizer (a lone parameter, duplicate parameters, a
    tensor lr of two elements, parameters with and without names) and ours. The tensor lr of
    two elements ended in a TypeError (the parameters, ``None`` in the harness, were read
    before the rate)."""
    for error in info.optim_error_inputs_func(device="cpu", dtype=DTYPE):
        optim_input = error.optimizer_error_input
        params = optim_input.params
        if params is None:
            params = _params(info)
        assert error.error_on == OptimizerErrorEnum.CONSTRUCTION_ERROR
        if issubclass(error.error_type, Warning):
            with pytest.warns(error.error_type, match=error.error_regex):
                info.optim_cls(params, **optim_input.kwargs)
            continue
        with pytest.raises(error.error_type, match=error.error_regex or None):
            info.optim_cls(optim_input.params, **optim_input.kwargs) if (
                optim_input.desc == "Tensor lr must be 1-element") else info.optim_cls(
                params, **optim_input.kwargs)


def test_the_tensor_lr_error_names_the_shape_and_torchs_rule():
    with pytest.raises(ValueError) as caught:
        SharedScaleAdam(None, lr=torch.tensor([1e-3, 1e-3]))
    message = str(caught.value)
    assert message.startswith("Invalid lr: 'tensor of shape (2,)'")
    assert re.search("Tensor lr must be 1-element", message)
    with warnings.catch_warnings():  # negative control: one element of any shape is taken
        warnings.simplefilter("error")
        SharedScaleAdam(_params(OPTIM_INFOS[0]), lr=torch.tensor([[1e-3]]))
