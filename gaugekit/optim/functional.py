r"""Functional cores of the zoo: the math of every update rule, written once, one function per
rule. This module holds the elementwise rules (GD, momentum, Adam, RMSprop, Signum, Lion,
Adafactor) and what every rule shares (``maximize``, weight decay, moving averages); the rules
with a coarse second moment are in :mod:`gaugekit.optim.functional_shared`, the matrix rules in
:mod:`gaugekit.optim.functional_matrix`, FlowAdam's in :mod:`gaugekit.optim.flow_functional`.
How a rule is executed (a loop, multi-tensor calls, a fused kernel, compiled; Muon's stacking)
is a separate layer that does not restate the math (:mod:`gaugekit.optim.execution`,
:mod:`gaugekit.optim.orthogonalize`).

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

import torch
from torch import Tensor

from gaugekit.linalg import sym_matrix_power

Hyper = float | Tensor

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


