r"""How the moment pass of SharedScaleAdam and AdamMini runs: a loop, multi-tensor calls, one
compiled pass, or torch's fused momentum-SGD kernel. None of it restates the math: the loop and
the compiled pass call :func:`gaugekit.optim.functional_shared.moment_step_`, the multi-tensor
calls and the kernel are its two operations in another form.

The pass, per parameter (``w = 1 − β₁``, ``c < 0`` the step's coefficient, ``d`` the decoupled
decay factor ``1 − lr λ`` or ``None``): ``m ← m + w (g − m)``, ``θ ← θ d + c m``, with ``g``
negated under ``maximize``. Every executor takes the same arguments and gives the same numbers
to round-off (``tests/gaugekit/optim/test_execution_paths.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from gaugekit.optim import functional_shared as FS
from gaugekit.optim.functional import Hyper, signed
from gaugekit.optim.functional_shared import moment_step_

Executor = Callable[..., None]


def loop_(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *,
          weights: list[Hyper], coefficients: list[Hyper], decays: list[Hyper | None],
          maximizes: list[bool]) -> None:
    """:func:`~gaugekit.optim.functional_shared.moment_step_` on each parameter."""
    for p, g, m, w, c, d, mx in zip(params, grads, exp_avgs, weights, coefficients, decays,
                                    maximizes, strict=True):
        moment_step_(p, signed(g, mx), m, weight=w, coefficient=c, decay=d)


def foreach_(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *,
             weights: list[Hyper], coefficients: list[Hyper], decays: list[Hyper | None],
             maximizes: list[bool]) -> None:
    """The two operations as ``torch._foreach_*`` calls over all parameters (float weights;
    per-run tensor weights take :func:`loop_`). The same numbers as the loop, bit for bit."""
    if any(isinstance(w, Tensor) for w in weights):
        loop_(params, grads, exp_avgs, weights=weights, coefficients=coefficients,
              decays=decays, maximizes=maximizes)
        return
    grads = [signed(g, mx) for g, mx in zip(grads, maximizes, strict=True)]
    torch._foreach_lerp_(exp_avgs, grads, weights)
    for p, d in zip(params, decays, strict=True):
        if d is not None:
            p.mul_(d)
    torch._foreach_addcmul_(params, exp_avgs, coefficients)


_COMPILED: list[Executor] = []
#: the most graphs of the compiled pass kept, one per dtype, device and rank of a parameter
#: and of its scalars, shapes dynamic; dynamo's default is 8 per function
COMPILED_GRAPHS = 64


def _compiled_step() -> Executor:
    """``moment_step_`` compiled by ``torch.compile`` (full graph, dynamic shapes), once per
    process. One parameter per call with its scalars as tensors, so a graph depends on dtypes,
    device and ranks only: any number of optimizers, parameter counts, shapes and rates share
    a few graphs (compiled over a step's list of parameters, it recompiled for every new list
    and the eighth optimizer of a notebook hit dynamo's recompile limit)."""
    if not _COMPILED:
        _COMPILED.append(torch.compile(moment_step_, fullgraph=True, dynamic=True))
    return _COMPILED[0]


def _as_tensor(value: Hyper | None, like: Tensor) -> Tensor:
    """A scalar as a tensor in ``like``'s dtype and device (``None``, no decay, is 1)."""
    if isinstance(value, Tensor):
        return value.to(dtype=like.dtype, device=like.device)
    return torch.tensor(1.0 if value is None else value, dtype=like.dtype, device=like.device)


def compiled_(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *,
              weights: list[Hyper], coefficients: list[Hyper], decays: list[Hyper | None],
              maximizes: list[bool]) -> None:
    """Each parameter's two passes compiled into one (``fused=True``): ``g``, ``m``, ``θ``
    read once, ``m``, ``θ`` written once. The first step compiles (seconds)."""
    import torch._dynamo

    step = _compiled_step()
    with torch._dynamo.config.patch(recompile_limit=COMPILED_GRAPHS):
        for p, g, m, w, c, d, mx in zip(params, grads, exp_avgs, weights, coefficients, decays,
                                        maximizes, strict=True):
            step(p, signed(g, mx), m, weight=_as_tensor(w, p), coefficient=_as_tensor(c, p),
                 decay=_as_tensor(d, p))


# ------------------------------------------------------------------------- torch's SGD kernel
#: the dtypes sent to torch's fused momentum-SGD kernel, not half precision; in torch 2.13 the
#: CPU kernel leaves float16 and bfloat16 parameters unchanged in its vectorized blocks, and
#: ``torch.optim.SGD(momentum=0.9, fused=True)`` on 64 float16 ones does not move them
KERNEL_DTYPES = (torch.float32, torch.float64)
#: the tensor types the kernel takes as they are (a subclass such as DTensor is left out)
_PLAIN = (Tensor, torch.nn.Parameter)


def dense_strides(t: Tensor) -> bool:
    """Whether ``t``'s entries fill a block of memory without gaps or overlaps, in any order of
    its dimensions (contiguous, transposed, channels-last; not a slice with a step)."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride(), strict=True), key=lambda s: s[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def same_dense_layout(*tensors: Tensor) -> bool:
    """Whether the tensors are :func:`dense_strides` with the same shape and strides: an
    elementwise kernel that walks their memory in order then pairs the same entries. torch
    2.13's fused optimizer kernels (``torch._fused_sgd_``, the kernel of
    ``torch.optim.SGD(fused=True)``) walk memory so: on a slice with a step, or on a parameter
    and a gradient of different strides, they update the wrong entries (twenty steps of a small
    regression on a sliced weight: the loss went up where the contiguous weight's went down)."""
    first = tensors[0]
    if all(t.is_contiguous() and t.shape == first.shape for t in tensors):
        return True  # the common case, without reading the strides
    return all(dense_strides(t) and t.stride() == first.stride() and t.shape == first.shape
               for t in tensors)


def kernel_applies(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor]) -> bool:
    """Whether :func:`kernel_` can run on these tensors: plain (not DTensor), dense, on a CPU
    or CUDA device, float32 or float64, each gradient and moment on its parameter's device and
    in its dtype, and all three in one dense layout (:func:`same_dense_layout`)."""
    if not hasattr(torch, "_fused_sgd_"):
        return False
    for p, g, m in zip(params, grads, exp_avgs, strict=True):
        if (type(p) not in _PLAIN or type(g) not in _PLAIN or type(m) not in _PLAIN
                or p.layout is not torch.strided or p.device.type not in ("cpu", "cuda")
                or p.dtype not in KERNEL_DTYPES
                or (g.device, g.dtype, m.device, m.dtype) != (p.device, p.dtype) * 2
                or not same_dense_layout(p, g, m)):
            return False
    return True


def kernel_(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *,
            weights: list[float], coefficients: list[Hyper], decays: list[Hyper | None],
            maximizes: list[bool]) -> None:
    r"""The pass as one pass of torch's fused momentum-SGD kernel (``torch._fused_sgd_``):
    momentum and dampening ``β₁ = 1 − w``, never its "first step" (``m`` starts at zero), rate
    ``−c`` (a float, or a 0-d tensor on the device: no host read), ``maximize`` in the kernel:
    ``m ← β₁ m + (1 − β₁) g``, ``θ ← θ − (−c) m``, after the decay ``θ ← θ d``. Five streams
    (``g``, ``m``, ``θ`` read, ``m``, ``θ`` written) against the loop's six, one launch per set
    of parameters
    sharing ``(β₁, c, maximize)``, device and dtype. The caller checks :func:`kernel_applies`;
    ``tests/gaugekit/optim/test_multi_tensor_paths.py`` pins the kernel on every layout sent."""
    decayed = [(p, d) for p, d in zip(params, decays, strict=True) if d is not None]
    if decayed:
        torch._foreach_mul_([p for p, _ in decayed], [d for _, d in decayed])
    sets: dict[tuple, list[tuple[Tensor, Tensor, Tensor, Tensor]]] = {}
    for p, g, m, w, c, mx in zip(params, grads, exp_avgs, weights, coefficients, maximizes,
                                 strict=True):
        same = id(c) if isinstance(c, Tensor) else c  # one launch per rate
        sets.setdefault((p.device, p.dtype, w, same, mx), []).append((p, g, m, c))
    for (device, _, w, _, maximize), rows in sets.items():
        ps, gs, ms, cs = (list(column) for column in zip(*rows, strict=True))
        rate = -cs[0]
        if isinstance(rate, Tensor):
            rate = rate.to(device=device, dtype=ps[0].dtype)
        torch._fused_sgd_(ps, gs, ms, weight_decay=0.0, momentum=1 - w, lr=rate,
                          dampening=1 - w, nesterov=False, maximize=maximize,
                          is_first_step=False)


# ---------------------------------------------------------------- shared-scale Adam's scalars
def shared_scale_scalars_(exp_avg_sq_means: list[Tensor], square_sums: list[Tensor], *,
                          counts: list[int], beta2s: list[Hyper], steps: list[int], eps: Hyper,
                          on_host: bool) -> Hyper:
    """:func:`~gaugekit.optim.functional_shared.shared_scale_` on the parameters' scalars:
    writes the new ``v̄ᵢ`` and returns ``s``. ``on_host`` (CPU parameters, float
    hyperparameters, one run): in float64 on the host (one read of the scalars, a dozen numpy
    operations: a fifth of the tensor calls' time on the CPU), ``s`` a float; else as tensor
    calls on the parameters' device, no host read, ``s`` a tensor (one value per run)."""
    if on_host:
        values = torch.stack([*exp_avg_sq_means, *square_sums]).double().tolist()
        k = len(exp_avg_sq_means)
        v, scale = FS.shared_scale_(
            np.array(values[:k]), np.array(values[k:]), np.array(counts, dtype=np.float64),
            np.array(beta2s, dtype=np.float64), np.array(steps, dtype=np.float64), eps)
        for mean, value in zip(exp_avg_sq_means, v.tolist(), strict=True):
            mean.fill_(value)
        return float(scale)
    dtype = torch.float32  # at least: half-precision parameters keep a float32 statistic
    for m in exp_avg_sq_means:
        dtype = torch.promote_types(dtype, m.dtype)
    v = torch.stack([m.to(dtype) for m in exp_avg_sq_means])
    q = torch.stack([s.to(dtype) for s in square_sums])
    v, scale = FS.shared_scale_(v, q, *(_rows(x, v) for x in (counts, beta2s, steps)),
                                eps.to(v) if isinstance(eps, Tensor) else eps)
    torch._foreach_copy_(exp_avg_sq_means, list(v.unbind(0)))
    return scale


def _rows(values: list[Hyper], like: Tensor) -> Tensor:
    """Per-parameter scalars (floats or per-run tensors) stacked as ``like``'s rows."""
    shape = (len(values),) + (1,) * (like.ndim - 1)
    if not any(isinstance(v, Tensor) for v in values):
        return torch.tensor(values, dtype=like.dtype, device=like.device).reshape(shape)
    return torch.stack([torch.as_tensor(v, dtype=like.dtype, device=like.device)
                        .expand(like.shape[1:]) for v in values])


def choose(fused: bool | None, foreach: bool, kernel: bool) -> Executor:
    """The executor of a step: the kernel where it applies and ``fused`` is not False (the
    caller says whether it applies), else the compiled pass for ``fused=True``, else
    multi-tensor calls for ``foreach``, else the loop."""
    if kernel and fused is not False:
        return kernel_
    if fused:
        return compiled_
    return foreach_ if foreach else loop_
