r"""Functional cores of the zoo: the math of every update rule, written once.

Each function updates one parameter (and its state tensors) in place and keeps no state of its
own; the optimizer classes only create state, broadcast hyperparameters and call these.

Hyperparameters are Python floats or tensors already broadcast against the parameter (one value
per stacked run, see :func:`gaugekit.optim.per_run`). Every step is written with plain
elementwise operations (no ``alpha=``/``value=`` fused forms), so a float and a per-run tensor
give the same floating-point operations, and every reduction runs over the last dimensions only:
a stack of runs updates exactly like the runs one by one.

Notation: ``θ`` parameter, ``g`` its gradient, ``t`` the step count (1 at the first step), ``lr``
the learning rate; matrix rules see ``G`` (the last two dimensions) as an ``n × k`` matrix.

Every rule takes ``weight_decay`` (``λ``, default 0) and ``maximize`` (default False), as in
torch.optim. ``maximize`` replaces ``g`` by ``−g`` (the gradient tensor is never written). Weight
decay is *coupled* in :func:`gd_`, :func:`momentum_`, :func:`rmsprop_` and :func:`adam_` (torch's
L2: ``g ← g + λθ``, :func:`coupled_decay`) and *decoupled* everywhere else and in
``adam_(decoupled=True)`` (AdamW: ``θ ← θ − lr λ θ`` before the update,
:func:`decoupled_decay_`). A float ``λ = 0`` skips the decay (the same operations as without
it). Gauge: ``λθ`` is the gradient of the gauge-invariant ``λ/2 (‖U‖² + ‖V‖²)`` and ``−lr λ θ``
a scalar multiple of the factor, so neither breaks an equivariant rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from gaugekit.linalg import NS_COEFFICIENTS, newton_schulz, sym_matrix_power
from gaugekit.optim import distributed as D

Hyper = float | Tensor
#: a Gram-matrix function ``H``: a stack of symmetric PSD matrices → a stack of matrices.
GramFn = Callable[[Tensor], Tensor]

#: floor added to the mean row statistic in Adafactor's rank-one reconstruction (paper's value).
ADAFACTOR_ROW_MEAN_FLOOR = 1e-30


def _eye_like(M: Tensor) -> Tensor:
    return torch.eye(M.shape[-1], dtype=M.dtype, device=M.device)


def propagating_sign(x: Tensor) -> Tensor:
    r"""``sign(x)``, but NaN where ``x`` is NaN or infinite (``torch.sign(nan)`` is 0).

    ``sign(x) + 0·x``: exact for finite ``x``; a non-finite entry yields NaN instead of
    silently freezing the parameter entry.
    """
    return torch.sign(x) + 0 * x


def propagating_matrix_power(M: Tensor, power: float, eig_floor: float) -> Tensor:
    r""":func:`gaugekit.linalg.sym_matrix_power`, NaN for every matrix of the stack that holds a
    non-finite entry (LAPACK's ``eigh`` may raise on such input instead), without a host sync."""
    finite = torch.isfinite(M).all(dim=-1, keepdim=True).all(dim=-2, keepdim=True)
    poison = torch.where(finite, 0.0, torch.nan).to(M.dtype)
    safe = torch.where(finite, M, torch.zeros_like(M))
    return sym_matrix_power(safe, power, eps=eig_floor) + poison


# ------------------------------------------------------------------- weight decay, maximize
def is_zero(value: Hyper) -> bool:
    """Whether ``value`` is the Python number 0 (a tensor never is: it is applied as given)."""
    return not isinstance(value, Tensor) and value == 0


def signed(grad: Tensor, maximize: bool) -> Tensor:
    r"""``−g`` when ``maximize`` (a new tensor), else ``g`` itself."""
    return -grad if maximize else grad


def coupled_decay(param: Tensor, grad: Tensor, weight_decay: Hyper) -> Tensor:
    r"""L2 weight decay (torch's SGD, Adam, RMSprop): ``g + λθ``; ``g`` itself when ``λ`` is 0."""
    return grad if is_zero(weight_decay) else grad + weight_decay * param


def decoupled_decay_(param: Tensor, *, lr: Hyper, weight_decay: Hyper) -> None:
    r"""Decoupled weight decay (torch's AdamW): ``θ ← θ (1 − lr λ)``; nothing when ``λ`` is 0."""
    if not is_zero(weight_decay):
        param.mul_(1 - lr * weight_decay)


# --------------------------------------------------------------------------------- first order
def gd_(
    param: Tensor, grad: Tensor, *, lr: Hyper, weight_decay: Hyper = 0.0, maximize: bool = False
) -> None:
    r"""``θ ← θ − lr (g + λθ)``."""
    grad = coupled_decay(param, signed(grad, maximize), weight_decay)
    param.sub_(lr * grad)


def momentum_(
    param: Tensor, grad: Tensor, momentum_buffer: Tensor, *, lr: Hyper, momentum: Hyper,
    nesterov: bool, weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""Heavy ball on ``d = g + λθ``: ``b ← μ b + d``; ``θ ← θ − lr b`` (Nesterov:
    ``θ ← θ − lr (d + μ b)``)."""
    grad = coupled_decay(param, signed(grad, maximize), weight_decay)
    momentum_buffer.mul_(momentum).add_(grad)
    update = grad + momentum * momentum_buffer if nesterov else momentum_buffer
    param.sub_(lr * update)


def ema_(average: Tensor, value: Tensor, beta: Hyper) -> None:
    r"""``a ← β a + (1 − β) value``."""
    average.mul_(beta).add_((1 - beta) * value)


def adam_moments_(
    grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, *, beta1: Hyper, beta2: Hyper
) -> None:
    r"""``m ← β₁ m + (1 − β₁) g``; ``v ← β₂ v + (1 − β₂) g²``."""
    ema_(exp_avg, grad, beta1)
    ema_(exp_avg_sq, grad * grad, beta2)


def bias_corrected(average: Tensor, beta: Hyper, step: int) -> Tensor:
    r"""``a / (1 − βᵗ)``."""
    return average / (1 - beta**step)


def adam_(
    param: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, *, step: int, lr: Hyper,
    beta1: Hyper, beta2: Hyper, eps: Hyper, weight_decay: Hyper = 0.0, decoupled: bool = False,
    maximize: bool = False,
) -> None:
    r"""Adam: moments, ``m̂ = m/(1−β₁ᵗ)``, ``v̂ = v/(1−β₂ᵗ)``, ``θ ← θ − lr m̂ / (√v̂ + ε)``.

    Weight decay: ``g ← g + λθ`` first (torch's Adam), or with ``decoupled`` ``θ ← θ(1 − lr λ)``
    first (torch's AdamW).
    """
    grad = signed(grad, maximize)
    if decoupled:
        decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    else:
        grad = coupled_decay(param, grad, weight_decay)
    adam_moments_(grad, exp_avg, exp_avg_sq, beta1=beta1, beta2=beta2)
    m_hat = bias_corrected(exp_avg, beta1, step)
    v_hat = bias_corrected(exp_avg_sq, beta2, step)
    param.sub_(lr * (m_hat / (v_hat.sqrt() + eps)))


def moment_step_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *,
    weights: list[Hyper], coefficients: list[Tensor], decays: list[Hyper | None] | None = None,
    foreach: bool = False,
) -> None:
    r"""The last two passes of the rules with one first moment and a coarse scale
    (SharedScaleAdam, AdamMini): per parameter ``m ← m + w (g − m)`` (``lerp_``), then
    ``θ ← θ d + c m`` (``d`` the decoupled-decay factor ``1 − lr λ``, skipped when ``None``;
    ``c`` the step's coefficient, broadcast against ``θ``).

    ``foreach=True`` runs the passes as ``torch._foreach_*`` calls (one call per pass for all
    parameters; the same numbers). Compiled by ``_fused`` (``fused=True`` of the classes), the
    two passes become one: ``g``, ``m``, ``θ`` read once, ``m``, ``θ`` written once.
    """
    decays = decays if decays is not None else [None] * len(params)
    if foreach and not any(isinstance(w, Tensor) for w in weights):
        torch._foreach_lerp_(exp_avgs, grads, weights)
        for p, d in zip(params, decays, strict=True):
            if d is not None:
                p.mul_(d)
        torch._foreach_addcmul_(params, exp_avgs, coefficients)
        return
    for p, g, m, w, c, d in zip(params, grads, exp_avgs, weights, coefficients, decays,
                                strict=True):
        m.lerp_(g, w)
        if d is not None:
            p.mul_(d)
        p.addcmul_(m, c)


def _moment_pass_(param: Tensor, grad: Tensor, exp_avg: Tensor, weight: Tensor,
                  coefficient: Tensor, decay: Tensor) -> None:
    r""":func:`moment_step_` on one parameter, its three scalars as tensors (0-d or broadcast
    against it): ``m ← m + w (g − m)``, ``θ ← θ d + c m`` (``d = 1`` multiplies exactly). What
    ``_compiled_moment_pass`` compiles."""
    exp_avg.lerp_(grad, weight)
    param.mul_(decay).addcmul_(exp_avg, coefficient)


_COMPILED: list[Callable[..., None]] = []
#: the most graphs of ``_moment_pass_`` kept (dynamo's default is 8 per function): one per
#: dtype, device and rank of the parameter and of its scalars, shapes dynamic
COMPILED_GRAPHS = 64


def _compiled_moment_pass() -> Callable[..., None]:
    """:func:`_moment_pass_` compiled by ``torch.compile`` (full graph, dynamic shapes), once
    per process. One parameter per call, its float scalars as 0-d tensors: a graph depends on
    dtypes, device and ranks only, so any number of optimizers, parameter counts, shapes and
    hyperparameters share a few graphs (a pass compiled over the list of a step's parameters
    recompiled for every new list, and the eighth optimizer of a notebook hit dynamo's
    recompile limit: ``fullgraph=True`` then fails)."""
    if not _COMPILED:
        _COMPILED.append(torch.compile(_moment_pass_, fullgraph=True, dynamic=True))
    return _COMPILED[0]


def _as_tensor(value: Hyper | None, like: Tensor) -> Tensor:
    """A scalar of :func:`moment_step_` as a tensor in ``like``'s dtype and device (a float or
    ``None``, which is 1, as a 0-d tensor)."""
    if isinstance(value, Tensor):
        return value.to(dtype=like.dtype, device=like.device)
    return torch.tensor(1.0 if value is None else value, dtype=like.dtype, device=like.device)


def _fused_moment_step_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *,
    weights: list[Hyper], coefficients: list[Tensor], decays: list[Hyper | None] | None = None,
    foreach: bool = False,
) -> None:
    """:func:`moment_step_` with each parameter's two passes compiled into one
    (``_compiled_moment_pass``; ``fused=True`` of SharedScaleAdam and AdamMini; ``foreach``
    has no meaning there)."""
    import torch._dynamo

    decays = decays if decays is not None else [None] * len(params)
    step = _compiled_moment_pass()
    with torch._dynamo.config.patch(recompile_limit=COMPILED_GRAPHS):
        for p, g, m, w, c, d in zip(params, grads, exp_avgs, weights, coefficients, decays,
                                    strict=True):
            step(p, g, m, _as_tensor(w, p), _as_tensor(c, p), _as_tensor(d, p))


def _decay_factor(lr: Hyper, weight_decay: Hyper) -> Hyper | None:
    r"""``1 − lr λ`` (:func:`decoupled_decay_`'s factor), ``None`` when ``λ`` is the float 0."""
    return None if is_zero(weight_decay) else 1 - lr * weight_decay


def run_sums_of_squares(tensors: list[Tensor], batch_dims: int) -> list[Tensor]:
    r"""``Σ x²`` over all entries of each tensor, one value per run (shape ``batch_shape``).

    One pass over each tensor, no temporary: a BLAS ``dot`` of the flattened tensor when it is
    one run of float32/float64 (three times faster than ``vector_norm`` on the CPU), else
    ``vector_norm`` (in float32 for half precision, whose ``Σ x²`` overflows from
    ``‖x‖ = 256``). DTensor (sharded) ``tensors`` are summed over their local blocks and
    all-reduced once for all of them (:func:`gaugekit.optim.distributed.param_sums`); plain
    ones exactly as in one process.
    """
    partials = []
    for t in map(D.local, tensors):
        dims = tuple(range(batch_dims, t.ndim))
        if batch_dims == 0 and t.dtype in (torch.float32, torch.float64) and t.numel():
            flat = t.reshape(-1)
            partials.append(torch.dot(flat, flat))
        elif t.dtype.itemsize < 4:  # half precision: summed in float32 (Σ g² overflows at 256²)
            partials.append(torch.linalg.vector_norm(t, dim=dims, dtype=torch.float32).square()
                            if dims else t.float() * t.float())
        else:
            partials.append(torch.linalg.vector_norm(t, dim=dims).square() if dims else t * t)
    return D.param_sums(partials, tensors)


def shared_scale_adam_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
    exp_avg_sq_means: list[Tensor], *, steps: list[int], lrs: list[Hyper], beta1s: list[Hyper],
    beta2s: list[Hyper], weight_decays: list[Hyper], maximizes: list[bool], batch_dims: int,
    eps: Hyper, square_sums: list[Tensor] | None = None, foreach: bool = False,
    fused: bool | None = None,
) -> None:
    r"""Shared-scale Adam on all ``params`` at once (one shared scalar per run).

    Per parameter ``i`` (with ``nᵢ`` entries per run and its own step ``tᵢ``):
    ``θᵢ ← θᵢ (1 − lr λ)`` (decoupled decay), ``mᵢ ← β₁ mᵢ + (1 − β₁) gᵢ`` and, for the mean of
    what Adam's second moment would be (the mean is linear, so it follows its own recurrence),
    ``v̄ᵢ ← β₂ v̄ᵢ + (1 − β₂) mean(gᵢ²)``; then

    ``s = √(Σᵢ nᵢ v̄ᵢ / (1 − β₂ᵗⁱ) / Σᵢ nᵢ) + ε``,  ``θᵢ ← θᵢ − lr mᵢ / ((1 − β₁ᵗⁱ) s)``.

    ``lrs``, ``beta1s`` and ``weight_decays`` are broadcast against ``params[i]``; ``beta2s``
    against ``exp_avg_sq_means[i]`` (shape ``batch_shape``); ``eps`` is a float or has that
    shape. ``steps[i]`` counts the update being taken (1 at the first). ``square_sums``: the
    :func:`run_sums_of_squares` of ``grads`` when the caller has them already (its non-finite
    check).

    The passes over memory: ``Σ g²``, then the moment and the parameter:

    * ``fused`` ``None`` or ``True``, one run (``batch_dims = 0``), float hyperparameters and
      :func:`sgd_kernel_applies`: in one pass, torch's fused momentum-SGD kernel
      (:func:`sgd_kernel_step_`, with the rate ``lr/((1 − β₁ᵗ) s)``);
    * otherwise the moment (``lerp_``) and the parameter (``addcmul_`` with one coefficient
      tensor ``−lr/((1 − β₁ᵗ) s)`` per parameter and run) by :func:`moment_step_`
      (``foreach``), or with ``fused=True`` compiled into one pass.
    """
    sums = run_sums_of_squares(grads, batch_dims) if square_sums is None else square_sums
    counts = [math.prod(g.shape[batch_dims:]) for g in grads]
    decays = [_decay_factor(lr, wd) for lr, wd in zip(lrs, weight_decays, strict=True)]
    all_floats = not any(isinstance(h, Tensor) for h in (*lrs, *beta1s, *beta2s, *decays))
    if (fused is not False and all_floats and batch_dims == 0 and not isinstance(eps, Tensor)
            and sgd_kernel_applies(params, grads, exp_avgs)):
        _shared_scale_kernel_step_(
            params, grads, exp_avgs, exp_avg_sq_means, sums=sums, counts=counts, steps=steps,
            lrs=lrs, beta1s=beta1s, beta2s=beta2s, decays=decays, maximizes=maximizes, eps=eps)
        return
    floats = not any(isinstance(h, Tensor) for h in (*lrs, *beta1s, *beta2s))
    if floats:  # the same operations on all parameters' scalars, as multi-tensor calls
        torch._foreach_mul_(exp_avg_sq_means, beta2s)
        torch._foreach_add_(exp_avg_sq_means, torch._foreach_mul(
            torch._foreach_div(sums, counts), [1 - beta2 for beta2 in beta2s]))
        v_hats = torch._foreach_div(
            exp_avg_sq_means, [1 - b**t for b, t in zip(beta2s, steps, strict=True)])
        total = sum(torch._foreach_mul(v_hats, counts))
    else:
        total = 0
        for v_mean, square_sum, count, beta2, step in zip(
            exp_avg_sq_means, sums, counts, beta2s, steps, strict=True
        ):
            ema_(v_mean, square_sum / count, beta2)
            total = total + count * bias_corrected(v_mean, beta2, step)
    scale = (total / sum(counts)).sqrt()
    if isinstance(eps, Tensor):
        eps = eps.to(device=scale.device, dtype=scale.dtype)
    scale = scale + eps
    grads = [signed(g, maximize) for g, maximize in zip(grads, maximizes, strict=True)]
    # a 0-d scale broadcasts as is (and is what a DTensor accepts as an implicit scalar)
    scales = [scale if scale.ndim == 0 else
              scale.reshape(scale.shape + (1,) * (p.ndim - batch_dims)) for p in params]
    if floats:
        inverse = ([s.reciprocal() for s in scales] if scale.ndim
                   else [scale.reciprocal()] * len(params))
        coefficients = torch._foreach_mul(
            inverse, [-lr / (1 - b**t) for lr, b, t in zip(lrs, beta1s, steps, strict=True)])
    else:
        coefficients = [(-lr / (1 - beta1**step)) / s
                        for s, step, lr, beta1 in zip(scales, steps, lrs, beta1s, strict=True)]
    (_fused_moment_step_ if fused else moment_step_)(
        params, grads, exp_avgs, weights=[1 - beta1 for beta1 in beta1s],
        coefficients=coefficients, foreach=foreach, decays=decays,
    )


#: the dtypes sent to torch's fused momentum-SGD kernel. Not half precision: in torch 2.13 the
#: CPU kernel leaves float16 and bfloat16 parameters unchanged in its vectorized blocks
#: (``torch.optim.SGD(momentum=0.9, fused=True)`` on 64 float16 ones does not move them).
_SGD_KERNEL_DTYPES = (torch.float32, torch.float64)
#: the tensor types the kernel takes as they are (a subclass such as DTensor is left out)
_PLAIN = (Tensor, torch.nn.Parameter)


def sgd_kernel_applies(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor]) -> bool:
    """Whether :func:`sgd_kernel_step_` can run on these tensors: plain (not DTensor), dense,
    on a CPU or a CUDA device, in float32 or float64 (not half precision: torch 2.13's CPU
    kernel leaves such entries unchanged), each gradient and moment on its parameter's device
    and in its dtype, and all three in one dense layout (:func:`same_dense_layout`)."""
    if not hasattr(torch, "_fused_sgd_"):
        return False
    for p, g, m in zip(params, grads, exp_avgs, strict=True):
        # a DTensor is a subclass; plain tensors and Parameters are not. Gradients are dense
        # (the classes refuse sparse ones) and moments are zeros_like their parameter.
        if (type(p) not in _PLAIN or type(g) not in _PLAIN or type(m) not in _PLAIN
                or p.layout is not torch.strided or p.device.type not in ("cpu", "cuda")
                or p.dtype not in _SGD_KERNEL_DTYPES
                or (g.device, g.dtype, m.device, m.dtype) != (p.device, p.dtype) * 2
                or not same_dense_layout(p, g, m)):
            return False
    return True


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
    """Whether the tensors are :func:`dense_strides` with the same strides: an elementwise
    kernel that walks their memory in order then pairs the same entries. torch 2.13's fused
    optimizer kernels (``torch._fused_sgd_``, the kernel of ``torch.optim.SGD(fused=True)``)
    walk memory so: on a slice with a step, or on a parameter and a gradient of different
    strides, they update the wrong entries (twenty steps of a small regression on a sliced
    weight: the loss goes up where the contiguous weight's goes down)."""
    first = tensors[0]
    return all(dense_strides(t) and t.stride() == first.stride() and t.shape == first.shape
               for t in tensors)


def _scalars_on_host(params: list[Tensor]) -> bool:
    """Whether :func:`_shared_scale_kernel_step_` computes its scalars on the host: when every
    parameter is on the CPU, where reading them is free."""
    return all(p.device.type == "cpu" for p in params)


def _shared_scale_kernel_step_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
    exp_avg_sq_means: list[Tensor], *, sums: list[Tensor], counts: list[int], steps: list[int],
    lrs: list[float], beta1s: list[float], beta2s: list[float], decays: list[float | None],
    maximizes: list[bool], eps: float,
) -> None:
    r""":func:`shared_scale_adam_` for one run with float hyperparameters, its passes through
    :func:`sgd_kernel_step_`: the same recurrences, ``v̄ᵢ ← β₂ v̄ᵢ + ((1 − β₂)/nᵢ) Σ gᵢ²`` and
    ``s = √(Σᵢ nᵢ v̄ᵢ/(1 − β₂ᵗⁱ) / Σᵢ nᵢ) + ε``, with one rate ``lr/((1 − β₁ᵗ) s)`` per
    ``(lr, β₁, t)``. On a GPU the scalars stay on the device (multi-tensor calls, no host
    sync); on the CPU, where reading them costs nothing, they are computed on the host in
    double precision (a few Python operations instead of a dozen tensor calls)."""
    new_means = [(1 - b) / n for b, n in zip(beta2s, counts, strict=True)]
    weights = [n / (1 - b**t) for n, b, t in zip(counts, beta2s, steps, strict=True)]
    factors = [lr / (1 - b**t) for lr, b, t in zip(lrs, beta1s, steps, strict=True)]
    if _scalars_on_host(params):
        means = [b * v + c * s for b, v, c, s in zip(
            beta2s, torch.stack(exp_avg_sq_means).tolist(), new_means,
            torch.stack(sums).tolist(), strict=True)]
        for v, value in zip(exp_avg_sq_means, means, strict=True):
            v.fill_(value)
        total = sum(w * v for w, v in zip(weights, means, strict=True))
        root = math.sqrt(total / sum(counts)) + eps
        inverse = 1 / root if root else math.inf  # as the tensor path: 1/0 is inf
        rates: dict[float, Hyper] = {f: f * inverse for f in factors}
    else:
        torch._foreach_mul_(exp_avg_sq_means, beta2s)
        torch._foreach_add_(exp_avg_sq_means, torch._foreach_mul(sums, new_means))
        total = torch.stack(torch._foreach_mul(exp_avg_sq_means, weights)).sum()
        inverse = total.div_(sum(counts)).sqrt_().add_(eps).reciprocal_()
        rates = {f: inverse * f for f in set(factors)}
    sgd_kernel_step_(params, grads, exp_avgs, beta1s=beta1s, maximizes=maximizes, decays=decays,
                     rates=[rates[f] for f in factors])


def sgd_kernel_step_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], *, beta1s: list[float],
    rates: list[Hyper], maximizes: list[bool], decays: list[float | None],
) -> None:
    r"""The moment and parameter passes of :func:`shared_scale_adam_` as one pass of torch's
    fused momentum-SGD kernel (``torch._fused_sgd_``, the kernel of
    ``torch.optim.SGD(fused=True)``): per parameter, after the decoupled decay ``θ ← θ d``
    (``d = 1 − lr λ``, skipped when ``None``),

    ``m ← β₁ m + (1 − β₁) g``,  ``θ ← θ − r m``

    (momentum ``β₁``, dampening ``β₁``, never its "first step": ``m`` starts at zero), with
    ``r`` a float or a 0-d tensor on the device (``lr / ((1 − β₁ᵗ) s)``, no host sync); ``g`` is the
    gradient as stored and ``maximize`` negates it inside the kernel. ``g``, ``m`` and ``θ`` are
    read once and ``m``, ``θ`` written once: five streams against the six of ``lerp_`` then
    ``addcmul_``, and one kernel launch per set of parameters sharing ``(β₁, r, maximize)``,
    device and dtype. The same numbers as :func:`moment_step_` to round-off (``β₁ m +
    (1 − β₁) g`` against ``m + (1 − β₁)(g − m)``). The caller checks
    :func:`sgd_kernel_applies`.
    """
    decayed = [(p, d) for p, d in zip(params, decays, strict=True) if d is not None]
    if decayed:
        torch._foreach_mul_([p for p, _ in decayed], [d for _, d in decayed])
    sets: dict[tuple, list[tuple[Tensor, Tensor, Tensor, Tensor]]] = {}
    for p, g, m, beta1, rate, maximize in zip(params, grads, exp_avgs, beta1s, rates, maximizes,
                                             strict=True):
        sets.setdefault((p.device, p.dtype, beta1, id(rate), maximize), []).append((p, g, m, rate))
    for (device, _, beta1, _, maximize), rows in sets.items():
        ps, gs, ms, rate = (list(column) for column in zip(*rows, strict=True))
        torch._fused_sgd_(
            ps, gs, ms, weight_decay=0.0, momentum=beta1,
            lr=rate[0].to(device) if isinstance(rate[0], Tensor) else rate[0],
            dampening=beta1, nesterov=False, maximize=maximize, is_first_step=False,
        )


def block_mean_sq(grad: Tensor, blocks: int | str, batch_dims: int) -> Tensor:
    r"""``mean(g²)`` over each block of ``grad`` (one value per block and run).

    ``blocks``: an integer ``k`` cuts the first dimension after the ``batch_dims`` into
    consecutive blocks of ``k`` (rows of a matrix, entries of a vector), each block with all of
    its trailing entries; ``"tensor"`` is one block; ``"entry"`` is every entry its own block
    (Adam). The result has shape ``(*runs, rows // k)`` for an integer ``k`` (one value per
    block; ``(*runs, 1)`` for a 0-d ``grad``), ``grad``'s dimensions reduced to size 1 for
    ``"tensor"``, ``grad``'s shape for ``"entry"``. One pass, no temporary the size of ``grad``
    (``‖block‖²`` by ``vector_norm``, divided by its size).
    """
    if blocks == "entry":
        return grad * grad
    lead = grad.shape[:batch_dims]
    if blocks == "tensor":
        if grad.ndim == batch_dims:
            return grad * grad
        flat = grad.reshape(*lead, -1)
        mean = torch.linalg.vector_norm(flat, dim=-1).square() / flat.shape[-1]
        return mean.reshape(lead + (1,) * (grad.ndim - batch_dims))
    if grad.ndim == batch_dims:  # a 0-d parameter: one block of one entry
        return (grad * grad).unsqueeze(-1)
    rows = grad.shape[batch_dims]
    flat = grad.reshape(*lead, rows // blocks, -1)
    return torch.linalg.vector_norm(flat, dim=-1).square() / flat.shape[-1]


def expand_blocks(block_value: Tensor, like: Tensor, blocks: int | str, batch_dims: int) -> Tensor:
    r"""A per-block value (:func:`block_mean_sq`'s layout) broadcast to the shape of ``like``
    (materialized; :func:`adam_mini_` views the blocks instead)."""
    if blocks in ("entry", "tensor"):
        return block_value
    rows = like.shape[batch_dims]
    trailing = like.ndim - batch_dims - 1
    v = block_value.reshape(*block_value.shape, 1, *([1] * trailing))
    v = v.expand(*block_value.shape, blocks, *like.shape[batch_dims + 1:])
    return v.reshape(like.shape[:batch_dims] + (rows,) + like.shape[batch_dims + 1:])


def _block_view(value: Hyper, batch_dims: int) -> Hyper:
    """A hyperparameter broadcast against a parameter (:func:`gaugekit.optim.per_run`), viewed
    against the blocks ``(*runs, blocks, 1)`` instead."""
    if isinstance(value, Tensor) and value.ndim > batch_dims:
        return value.reshape(*value.shape[:batch_dims], 1, 1)
    return value


def adam_mini_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
    block_sqs: list[Tensor], *, steps: list[int], lrs: list[Hyper], beta1s: list[Hyper],
    beta2s: list[Hyper], epss: list[Hyper], weight_decays: list[Hyper], blocks: int | str,
    batch_dims: int, maximize: bool = False, foreach: bool = False, fused: bool = False,
    block_means: list[Tensor] | None = None,
) -> None:
    r"""Adam-mini on the parameters of one group: Adam's first moment, one second moment per
    block ``b``: ``v_b ← β₂ v_b + (1 − β₂) mean_{i∈b}(g_i²)``,
    ``θ_i ← θ_i − lr m̂_i / (√v̂_{b(i)} + ε)``, after the decoupled decay ``θ ← θ(1 − lr λ)``.
    ``beta2s[i]`` broadcasts against ``block_sqs[i]``, the others against ``params[i]``;
    ``block_means``: the :func:`block_mean_sq` of ``grads`` when the caller has them (its
    non-finite check).

    Three passes over memory, as :func:`shared_scale_adam_`: ``mean g²`` per block, then the
    moment and the parameter for all parameters at once (:func:`moment_step_`, ``foreach``;
    ``fused``: compiled into one pass), with the per-block coefficient
    ``−lr / ((1 − β₁ᵗ)(√v̂_b + ε))`` broadcast over a view of the blocks, never expanded.
    """
    rows: dict[str, list] = {"params": [], "grads": [], "exp_avgs": [], "weights": [],
                             "decays": [], "coefficients": []}
    if block_means is None:
        block_means = [block_mean_sq(g, blocks, batch_dims) for g in grads]
    for param, grad, exp_avg, block_sq, step, lr, beta1, beta2, eps, weight_decay, mean in zip(
        params, grads, exp_avgs, block_sqs, steps, lrs, beta1s, beta2s, epss, weight_decays,
        block_means, strict=True,
    ):
        grad = signed(grad, maximize)
        ema_(block_sq, mean, beta2)
        root = bias_corrected(block_sq, beta2, step).sqrt()
        decay = _decay_factor(lr, weight_decay)
        if isinstance(blocks, str):  # one block per tensor (kept dims) or per entry
            row = (param, grad, exp_avg, 1 - beta1, decay, (-lr / (1 - beta1**step)) / (root + eps))
        else:
            lr_b, beta1_b, eps_b, decay_b = (_block_view(h, batch_dims)
                                             for h in (lr, beta1, eps, decay))
            coefficient = (-lr_b / (1 - beta1_b**step)) / (root.unsqueeze(-1) + eps_b)
            view = (*param.shape[:batch_dims], block_sq.shape[-1], -1)
            if not (param.is_contiguous() and exp_avg.is_contiguous()):
                # the blocks are not a view: the same update through a reshaped copy
                decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                param.add_((exp_avg.reshape(view) * coefficient).reshape(param.shape))
                continue
            row = (param.view(view), grad.reshape(view), exp_avg.view(view), 1 - beta1_b, decay_b,
                   coefficient)
        for key, value in zip(rows, row, strict=True):
            rows[key].append(value)
    if rows["params"]:
        (_fused_moment_step_ if fused else moment_step_)(
            rows["params"], rows["grads"], rows["exp_avgs"], weights=rows["weights"],
            decays=rows["decays"], coefficients=rows["coefficients"], foreach=foreach,
        )


def rmsprop_(
    param: Tensor, grad: Tensor, square_avg: Tensor, *, lr: Hyper, alpha: Hyper, eps: Hyper,
    weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""On ``d = g + λθ``: ``v ← α v + (1 − α) d²``; ``θ ← θ − lr d / (√v + ε)`` (no bias
    correction)."""
    grad = coupled_decay(param, signed(grad, maximize), weight_decay)
    ema_(square_avg, grad * grad, alpha)
    param.sub_(lr * (grad / (square_avg.sqrt() + eps)))


def signum_(
    param: Tensor, grad: Tensor, momentum_buffer: Tensor, *, lr: Hyper, momentum: Hyper,
    weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""``θ ← θ(1 − lr λ)``; ``m ← β m + (1 − β) g``; ``θ ← θ − lr sign(m)``."""
    grad = signed(grad, maximize)
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    ema_(momentum_buffer, grad, momentum)
    param.sub_(lr * propagating_sign(momentum_buffer))


def lion_(
    param: Tensor, grad: Tensor, exp_avg: Tensor, *, lr: Hyper, beta1: Hyper, beta2: Hyper,
    weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""``θ ← θ(1 − lr λ)``; ``c = sign(β₁ m + (1 − β₁) g)``; ``m ← β₂ m + (1 − β₂) g``;
    ``θ ← θ − lr c``."""
    grad = signed(grad, maximize)
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    update = propagating_sign(beta1 * exp_avg + (1 - beta1) * grad)
    ema_(exp_avg, grad, beta2)
    param.sub_(lr * update)


def adafactor_factored_(
    param: Tensor, grad: Tensor, row_var: Tensor, col_var: Tensor, *, lr: Hyper, beta2: Hyper,
    eps: Hyper, weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""Adafactor on the last two dims (``n × k``), factored second moment, no bias correction.

    ``R ← β₂ R + (1 − β₂) rowmean(g²)`` (``n × 1``), ``C ← β₂ C + (1 − β₂) colmean(g²)``
    (``1 × k``), ``v̂ = R C / (mean(R) + 10⁻³⁰)``, ``θ ← θ − lr g / (√v̂ + ε)``.
    ``row_var`` and ``col_var`` keep their reduced dimension (shapes ``(..., n, 1)``,
    ``(..., 1, k)``). Decoupled weight decay ``θ ← θ(1 − lr λ)`` first.
    """
    grad = signed(grad, maximize)
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    g2 = grad * grad
    ema_(row_var, g2.mean(dim=-1, keepdim=True), beta2)
    ema_(col_var, g2.mean(dim=-2, keepdim=True), beta2)
    v_hat = (row_var * col_var) / (row_var.mean(dim=-2, keepdim=True) + ADAFACTOR_ROW_MEAN_FLOOR)
    param.sub_(lr * (grad / (v_hat.sqrt() + eps)))


def adafactor_unfactored_(
    param: Tensor, grad: Tensor, variance: Tensor, *, lr: Hyper, beta2: Hyper, eps: Hyper,
    weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""Adafactor for a vector: ``θ ← θ(1 − lr λ)``; ``v ← β₂ v + (1 − β₂) g²``;
    ``θ ← θ − lr g / (√v + ε)``."""
    grad = signed(grad, maximize)
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    ema_(variance, grad * grad, beta2)
    param.sub_(lr * (grad / (variance.sqrt() + eps)))


# ------------------------------------------------------------------------------ matrix rules
def muon_lr_ratio(adjust_lr_fn: str | None, rows: int, cols: int) -> float:
    r"""Muon's shape factor: ``None`` → 1; ``"original"`` → ``√max(1, n/k)``;
    ``"match_rms_adamw"`` → ``0.2 √max(n, k)`` (torch.optim.Muon's options)."""
    if adjust_lr_fn is None:
        return 1.0
    if adjust_lr_fn == "original":
        return max(1.0, rows / cols) ** 0.5
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * max(rows, cols) ** 0.5
    raise ValueError(f"Invalid adjust_lr_fn: {adjust_lr_fn!r}; expected None, 'original' or "
                     "'match_rms_adamw'")


def muon_matrix_shape(
    shape: tuple[int, ...], batch_dims: int, split_rows: int = 1
) -> tuple[int, int]:
    r"""The ``(rows, cols)`` of the matrices Muon orthogonalizes in a parameter of ``shape``.

    After the ``batch_dims``, the first dimension is the rows and the others are flattened into
    the columns (a convolution kernel ``(out, in, kh, kw)`` is the matrix ``out × in·kh·kw``, as
    in Keller Jordan's Muon); ``split_rows = s`` cuts the rows into ``s`` consecutive blocks, each
    its own matrix (a fused ``[W_Q; W_K; W_V]`` with ``s = 3``)."""
    rows = shape[batch_dims] // split_rows
    return rows, math.prod(shape[batch_dims + 1:])


def _batching_pays(t: Tensor, ns_dtype: torch.dtype | None) -> bool:
    """Whether one Newton–Schulz call on a stack of same-shape matrices beats one call each:
    off the CPU, and on the CPU for a 16-bit iteration (measured with 2 threads on 512 × 2048
    matrices, ``bench/bench_optimizer_step.py``: a stack of 10 in bfloat16 takes about 0.6 of
    the loop, in float32 about 1.5 times it)."""
    dtype = ns_dtype or t.dtype
    return t.device.type != "cpu" or dtype.itemsize <= 2


def orthogonalize(
    targets: list[Tensor], *, batch_dims: int = 0, split_rows: int = 1, ns_steps: int = 5,
    ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, eps: float = 1e-7,
    ns_dtype: torch.dtype | None = None,
) -> list[Tensor]:
    r"""``NS₅`` (:func:`gaugekit.linalg.newton_schulz`) of every matrix of every target.

    Each target is viewed as its stack of matrices (:func:`muon_matrix_shape`: the batch dims,
    then ``split_rows`` row blocks, trailing dimensions flattened); the result has the target's
    shape. Where it pays (``_batching_pays``) the matrices of all targets that share a shape
    (up to a transpose), dtype and device are stacked and orthogonalized in one call, which
    gives each matrix's result (the normalisation and every product are per matrix).
    """
    views, tall = [], []
    for t in targets:
        rows, cols = muon_matrix_shape(tuple(t.shape), batch_dims, split_rows)
        m = t.reshape(-1, rows, cols)
        tall.append(rows > cols)
        views.append(m.mT if rows > cols else m)

    def ns(x: Tensor) -> Tensor:
        return newton_schulz(x, steps=ns_steps, eps=eps, coefficients=ns_coefficients,
                             dtype=ns_dtype)

    out: list[Tensor | None] = [None] * len(views)
    stacks: dict[tuple, list[int]] = {}
    for i, (t, m) in enumerate(zip(targets, views, strict=True)):
        if _batching_pays(t, ns_dtype):
            stacks.setdefault((tuple(m.shape[1:]), m.dtype, m.device), []).append(i)
        else:
            out[i] = ns(m)
    for members in stacks.values():
        if len(members) == 1:
            out[members[0]] = ns(views[members[0]])
            continue
        parts = ns(torch.cat([views[i] for i in members])).split(
            [views[i].shape[0] for i in members])
        for i, part in zip(members, parts, strict=True):
            out[i] = part
    return [(o.mT if flip else o).reshape(t.shape)
            for t, o, flip in zip(targets, out, tall, strict=True) if o is not None]


def muon_many_(
    params: list[Tensor], grads: list[Tensor], momentum_buffers: list[Tensor], *,
    lrs: list[Hyper], momentums: list[Hyper], nesterov: bool, ns_steps: int,
    ns_coefficients: tuple[float, float, float], eps: float, adjust_lr_fn: str | None,
    weight_decays: list[Hyper] | None = None, maximize: bool = False, batch_dims: int = 0,
    split_rows: int = 1, ns_dtype: torch.dtype | None = None,
) -> None:
    r"""Muon on every parameter of one group: per parameter ``θ ← θ(1 − lr λ)``;
    ``M ← μ M + G``; ``θ ← θ − lr ρ · NS₅(M)`` (Nesterov: ``NS₅(G + μ M)``).

    ``NS₅`` is :func:`orthogonalize` (matrix views, ``split_rows``, ``ns_dtype``; same-shape
    matrices stacked where that pays); ``ρ`` is :func:`muon_lr_ratio` of the matrices' shape
    (:func:`muon_matrix_shape`). A DTensor ``M`` is gathered
    (:func:`gaugekit.optim.distributed.full`) and each rank applies its block of ``NS₅(M)``.
    """
    decays = weight_decays if weight_decays is not None else [0.0] * len(params)
    targets = []
    for p, g, buf, lr, mu, wd in zip(params, grads, momentum_buffers, lrs, momentums, decays,
                                     strict=True):
        g = signed(g, maximize)
        decoupled_decay_(p, lr=lr, weight_decay=wd)
        buf.mul_(mu).add_(g)
        targets.append(D.full(g + mu * buf if nesterov else buf))
    orths = orthogonalize(targets, batch_dims=batch_dims, split_rows=split_rows,
                          ns_steps=ns_steps, ns_coefficients=ns_coefficients, eps=eps,
                          ns_dtype=ns_dtype)
    for p, orth, lr in zip(params, orths, lrs, strict=True):
        ratio = muon_lr_ratio(adjust_lr_fn, *muon_matrix_shape(tuple(p.shape), batch_dims,
                                                               split_rows))
        p.sub_((lr * ratio) * D.like_param(orth, p))


def muon_(
    param: Tensor, grad: Tensor, momentum_buffer: Tensor, *, lr: Hyper, momentum: Hyper,
    nesterov: bool, ns_steps: int, ns_coefficients: tuple[float, float, float], eps: float,
    adjust_lr_fn: str | None, weight_decay: Hyper = 0.0, maximize: bool = False,
    batch_dims: int = 0, split_rows: int = 1, ns_dtype: torch.dtype | None = None,
) -> None:
    r"""``θ ← θ(1 − lr λ)``; ``M ← μ M + G``; ``θ ← θ − lr · NS₅(M)`` (Nesterov: ``NS₅(G + μ M)``).

    ``NS₅`` is :func:`gaugekit.linalg.newton_schulz` on each matrix of the stack:
    ``X₀ = M / (‖M‖_F + ε)`` per matrix, tall matrices transposed. One parameter of
    :func:`muon_many_`.
    """
    muon_many_(
        [param], [grad], [momentum_buffer], lrs=[lr], momentums=[momentum], nesterov=nesterov,
        ns_steps=ns_steps, ns_coefficients=ns_coefficients, eps=eps, adjust_lr_fn=adjust_lr_fn,
        weight_decays=[weight_decay], maximize=maximize, batch_dims=batch_dims,
        split_rows=split_rows, ns_dtype=ns_dtype,
    )


def shampoo_(
    param: Tensor, grad: Tensor, left_gram: Tensor, right_gram: Tensor, left_inv_root: Tensor,
    right_inv_root: Tensor, *, step: int, lr: Hyper, damping: float, update_freq: int,
    eig_floor: float, weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""Two-sided Shampoo.

    ``L ← L + G Gᵀ``, ``R ← R + Gᵀ G``; at steps ``t ≡ 1 (mod update_freq)`` refresh
    ``L̃ = (L + λI)^{-1/4}``, ``R̃ = (R + λI)^{-1/4}`` (eigh, eigenvalues clamped below at
    ``eig_floor``); ``θ ← θ − lr L̃ G R̃``, after the decoupled decay ``θ ← θ(1 − lr·wd)``. A DTensor
    ``G`` is gathered; ``L``, ``R`` and their roots are then plain full matrices (the same on
    every rank) and each rank applies its block.
    """
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    grad = signed(D.full(grad), maximize)
    left_gram.add_(grad @ grad.mT)
    right_gram.add_(grad.mT @ grad)
    if (step - 1) % update_freq == 0:
        for gram, root in ((left_gram, left_inv_root), (right_gram, right_inv_root)):
            root.copy_(propagating_matrix_power(gram + damping * _eye_like(gram), -0.25, eig_floor))
    param.sub_(lr * D.like_param(left_inv_root @ grad @ right_inv_root, param))


def damped_inverse_power(power: float, damping: float, eig_floor: float = 1e-6) -> GramFn:
    r"""The default Gram function ``H(P) = (P + λI)^{-s}`` (eigh; eigenvalues ≥ ``eig_floor``)."""

    def gram_fn(P: Tensor) -> Tensor:
        return propagating_matrix_power(P + damping * _eye_like(P), -power, eig_floor)

    return gram_fn


def gram_precondition(grad: Tensor, gram_fn: GramFn, side: str = "left") -> Tensor:
    r"""``Φ(G) = H(G Gᵀ) G`` (``side="left"``) or ``G H(Gᵀ G)`` (``side="right"``), per matrix."""
    if side == "left":
        return gram_fn(grad @ grad.mT) @ grad
    if side == "right":
        return grad @ gram_fn(grad.mT @ grad)
    raise ValueError(f"Invalid side: {side!r}; expected 'left' or 'right'")


def gram_(
    param: Tensor, grad: Tensor, *, lr: Hyper, gram_fn: GramFn, side: str,
    weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""``θ ← θ(1 − lr·wd) − lr Φ(G)`` with :func:`gram_precondition` (a DTensor ``G`` is
    gathered, each rank applies its block of ``Φ(G)``)."""
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    grad = signed(D.full(grad), maximize)
    param.sub_(lr * D.like_param(gram_precondition(grad, gram_fn, side), param))


def scaled_gd_damping(gram: Tensor, damping: float, relative: bool) -> Tensor | float:
    r"""ScaledGD's ``λ``: ``damping · (tr(M)/k + 10⁻³⁰) + 10⁻¹²`` if ``relative``, else ``damping``.

    Returned with shape ``(..., 1, 1)`` (one value per matrix of the stack) when relative.
    """
    if not relative:
        return damping
    mean_diag = gram.diagonal(dim1=-2, dim2=-1).mean(dim=-1)[..., None, None]
    return damping * (mean_diag + 1e-30) + 1e-12


def scaled_gd_direction(grad: Tensor, other: Tensor, *, damping: float, relative: bool) -> Tensor:
    r"""``G (Oᵀ O + λ I)⁻¹`` for the factor paired with ``other`` (``O``), per matrix.

    ``solve_ex`` without its error check: no host sync, and a matrix of the stack that LAPACK
    cannot factor (a non-finite Gram of a diverged run) gives non-finite directions instead of
    an exception for the whole stack (with ``λ > 0`` a finite Gram is positive definite)."""
    gram = other.mT @ other
    lam = scaled_gd_damping(gram, damping, relative)
    direction, _ = torch.linalg.solve_ex(gram + lam * _eye_like(gram), grad, left=False)
    return direction


#: The two layouts of a ScaledGD pair, the paper's ``[U, V]`` (``W = U Vᵀ``) and LoRA's
#: ``[A, B]`` (``W = B A``).
SCALED_GD_LAYOUTS: tuple[str, ...] = ("UV", "AB")


def scaled_gd_(
    U: Tensor, V: Tensor, G_U: Tensor | None, G_V: Tensor | None, *, lr_U: Hyper, lr_V: Hyper,
    damping: float, relative_damping: bool, sequential: bool, weight_decay_U: Hyper = 0.0,
    weight_decay_V: Hyper = 0.0, maximize: bool = False, layout: str = "UV",
) -> None:
    r"""ScaledGD on a pair ``W = U Vᵀ`` (``layout="UV"``) or ``W = B A`` (``layout="AB"``).

    ``U ← U(1 − lr·wd) − lr G_U (VᵀV + λ_V I)⁻¹``, ``V ← V(1 − lr·wd) − lr G_V (UᵀU + λ_U I)⁻¹``
    (``wd`` the decoupled weight decay), both Grams from the factors before the step
    (``sequential=True``: ``V``'s Gram uses the updated ``U``, the order of the paper's script).

    Layout ``"AB"``: the arguments are ``A, B, G_A, G_B`` in this order (``lr_U``,
    ``weight_decay_U`` go with ``A``), ``A`` of shape ``(..., r, in)`` and ``B`` of shape
    ``(..., out, r)``, and the rule is the one above on ``(U, V) = (B, Aᵀ)``:
    ``A ← A(1 − lr·wd) − lr (BᵀB + λ_B I)⁻¹ G_A``, ``B ← B(1 − lr·wd) − lr G_B (AAᵀ + λ_A I)⁻¹``,
    with ``λ_A`` from ``tr(AAᵀ)`` as ``λ_V`` from ``tr(VᵀV)``; ``sequential=True`` updates ``B``
    (the ``U`` of the pair) first. ``A`` is read and written through a transposed view.

    A factor whose gradient is ``None`` is left alone. DTensor factors and gradients are
    gathered; each rank applies its block of the directions.
    """
    if layout not in SCALED_GD_LAYOUTS:
        raise ValueError(f"Invalid layout: {layout!r}; expected one of {SCALED_GD_LAYOUTS!r}")
    if layout == "AB":  # (A, B) = (Vᵀ, U): the UV rule with V stored transposed
        _scaled_gd_pair(
            V, U, G_V, G_U, lr_U=lr_V, lr_V=lr_U, damping=damping,
            relative_damping=relative_damping, sequential=sequential,
            weight_decay_U=weight_decay_V, weight_decay_V=weight_decay_U, maximize=maximize,
            v_transposed=True,
        )
    else:
        _scaled_gd_pair(
            U, V, G_U, G_V, lr_U=lr_U, lr_V=lr_V, damping=damping,
            relative_damping=relative_damping, sequential=sequential,
            weight_decay_U=weight_decay_U, weight_decay_V=weight_decay_V, maximize=maximize,
            v_transposed=False,
        )


def _scaled_gd_pair(
    U: Tensor, V: Tensor, G_U: Tensor | None, G_V: Tensor | None, *, lr_U: Hyper, lr_V: Hyper,
    damping: float, relative_damping: bool, sequential: bool, weight_decay_U: Hyper,
    weight_decay_V: Hyper, maximize: bool, v_transposed: bool,
) -> None:
    """:func:`scaled_gd_` on ``(U, V)``, where ``V`` (and ``G_V``) are stored as ``Vᵀ`` when
    ``v_transposed``."""

    def as_v(t: Tensor) -> Tensor:  # stored ↔ paper orientation of V (an involution)
        return t.mT if v_transposed else t

    step_U = None
    if G_U is not None:
        direction = scaled_gd_direction(
            signed(D.full(G_U), maximize), as_v(D.full(V)), damping=damping,
            relative=relative_damping,
        )
        step_U = lr_U * D.like_param(direction, U)
        if sequential:
            decoupled_decay_(U, lr=lr_U, weight_decay=weight_decay_U)
            U.sub_(step_U)
            step_U = None
    if G_V is not None:
        direction = scaled_gd_direction(
            as_v(signed(D.full(G_V), maximize)), D.full(U), damping=damping,
            relative=relative_damping,
        )
        direction = as_v(direction).contiguous() if v_transposed else direction
        decoupled_decay_(V, lr=lr_V, weight_decay=weight_decay_V)
        V.sub_(lr_V * D.like_param(direction, V))
    if step_U is not None:
        decoupled_decay_(U, lr=lr_U, weight_decay=weight_decay_U)
        U.sub_(step_U)
