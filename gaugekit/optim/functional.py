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

from gaugekit.linalg import newton_schulz, sym_matrix_power
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


def run_sums_of_squares(tensors: list[Tensor], batch_dims: int) -> list[Tensor]:
    r"""``Σ x²`` over all entries of each tensor, one value per run (shape ``batch_shape``).

    One pass over each tensor (``vector_norm``, no temporary). DTensor (sharded) ``tensors``
    are summed over their local blocks and all-reduced once for all of them
    (:func:`gaugekit.optim.distributed.param_sums`); plain ones exactly as in one process.
    """
    partials = []
    for t in map(D.local, tensors):
        dims = tuple(range(batch_dims, t.ndim))
        partials.append(torch.linalg.vector_norm(t, dim=dims).square() if dims else t * t)
    return D.param_sums(partials, tensors)


def shared_scale_adam_(
    params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
    exp_avg_sq_means: list[Tensor], *, steps: list[int], lrs: list[Hyper], beta1s: list[Hyper],
    beta2s: list[Hyper], weight_decays: list[Hyper], maximizes: list[bool], batch_dims: int,
    eps: Hyper,
) -> None:
    r"""Shared-scale Adam on all ``params`` at once (one shared scalar per run).

    Per parameter ``i`` (with ``nᵢ`` entries per run and its own step ``tᵢ``):
    ``θᵢ ← θᵢ (1 − lr λ)`` (decoupled decay), ``mᵢ ← β₁ mᵢ + (1 − β₁) gᵢ`` and, for the mean of
    what Adam's second moment would be (the mean is linear, so it follows its own recurrence),
    ``v̄ᵢ ← β₂ v̄ᵢ + (1 − β₂) mean(gᵢ²)``; then

    ``s = √(Σᵢ nᵢ v̄ᵢ / (1 − β₂ᵗⁱ) / Σᵢ nᵢ) + ε``,  ``θᵢ ← θᵢ − lr mᵢ / ((1 − β₁ᵗⁱ) s)``.

    ``lrs``, ``beta1s`` and ``weight_decays`` are broadcast against ``params[i]``; ``beta2s``
    against ``exp_avg_sq_means[i]`` (shape ``batch_shape``); ``eps`` is a float or has that
    shape. ``steps[i]`` counts the update being taken (1 at the first).
    """
    grads = [signed(g, maximize) for g, maximize in zip(grads, maximizes, strict=True)]
    for p, lr, weight_decay in zip(params, lrs, weight_decays, strict=True):
        decoupled_decay_(p, lr=lr, weight_decay=weight_decay)
    sums = run_sums_of_squares(grads, batch_dims)
    counts = [math.prod(g.shape[batch_dims:]) for g in grads]
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
    rows = zip(params, grads, exp_avgs, steps, lrs, beta1s, strict=True)
    for p, g, m, step, lr, beta1 in rows:
        m.lerp_(g, 1 - beta1)
        # a 0-d scale broadcasts as is (and is what a DTensor accepts as an implicit scalar)
        s = scale if scale.ndim == 0 else scale.reshape(scale.shape + (1,) * (p.ndim - batch_dims))
        p.addcmul_(m, (-lr / (1 - beta1**step)) / s)


def block_mean_sq(grad: Tensor, blocks: int | str, batch_dims: int) -> Tensor:
    r"""``mean(g²)`` over each block of ``grad`` (one value per block and run).

    ``blocks``: an integer ``k`` cuts the first dimension after the ``batch_dims`` into
    consecutive blocks of ``k`` (rows of a matrix, entries of a vector), each block with all of
    its trailing entries; ``"tensor"`` is one block; ``"entry"`` is every entry its own block
    (Adam). The result has ``grad``'s dimensions with the blocked ones reduced (kept, size 1 or
    ``rows // k``), so it broadcasts against ``grad`` after :func:`expand_blocks`.
    """
    sq = grad * grad
    if blocks == "entry":
        return sq
    if blocks == "tensor":
        dims = tuple(range(batch_dims, grad.ndim))
        return sq.mean(dim=dims, keepdim=True) if dims else sq
    rows = grad.shape[batch_dims]
    lead = grad.shape[:batch_dims]
    return sq.reshape(*lead, rows // blocks, -1).mean(dim=-1)


def expand_blocks(block_value: Tensor, like: Tensor, blocks: int | str, batch_dims: int) -> Tensor:
    r"""A per-block value (:func:`block_mean_sq`'s layout) broadcast to the shape of ``like``."""
    if blocks in ("entry", "tensor"):
        return block_value
    rows = like.shape[batch_dims]
    trailing = like.ndim - batch_dims - 1
    v = block_value.reshape(*block_value.shape, 1, *([1] * trailing))
    v = v.expand(*block_value.shape, blocks, *like.shape[batch_dims + 1:])
    return v.reshape(like.shape[:batch_dims] + (rows,) + like.shape[batch_dims + 1:])


def adam_mini_(
    param: Tensor, grad: Tensor, exp_avg: Tensor, block_sq: Tensor, *, step: int, lr: Hyper,
    beta1: Hyper, beta2: Hyper, eps: Hyper, blocks: int | str, batch_dims: int,
    weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""Adam-mini: Adam's first moment, one second moment per block ``b``:
    ``v_b ← β₂ v_b + (1 − β₂) mean_{i∈b}(g_i²)``, ``θ_i ← θ_i − lr m̂_i / (√v̂_{b(i)} + ε)``,
    after the decoupled decay ``θ ← θ(1 − lr λ)``. ``beta2`` broadcasts against ``block_sq``.
    """
    grad = signed(grad, maximize)
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    ema_(exp_avg, grad, beta1)
    ema_(block_sq, block_mean_sq(grad, blocks, batch_dims), beta2)
    denominator = expand_blocks(bias_corrected(block_sq, beta2, step).sqrt(), param, blocks,
                                batch_dims)
    param.sub_(lr * (bias_corrected(exp_avg, beta1, step) / (denominator + eps)))


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


def muon_(
    param: Tensor, grad: Tensor, momentum_buffer: Tensor, *, lr: Hyper, momentum: Hyper,
    nesterov: bool, ns_steps: int, ns_coefficients: tuple[float, float, float], eps: float,
    adjust_lr_fn: str | None, weight_decay: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""``θ ← θ(1 − lr λ)``; ``M ← μ M + G``; ``θ ← θ − lr · NS₅(M)`` (Nesterov: ``NS₅(G + μ M)``).

    ``NS₅`` is :func:`gaugekit.linalg.newton_schulz` on each matrix of the stack:
    ``X₀ = M / (‖M‖_F + ε)`` per matrix, tall matrices transposed. A DTensor ``M`` is gathered
    (:func:`gaugekit.optim.distributed.full`) and each rank applies its block of ``NS₅(M)``.
    """
    grad = signed(grad, maximize)
    decoupled_decay_(param, lr=lr, weight_decay=weight_decay)
    momentum_buffer.mul_(momentum).add_(grad)
    target = grad + momentum * momentum_buffer if nesterov else momentum_buffer
    orth = newton_schulz(D.full(target), steps=ns_steps, eps=eps, coefficients=ns_coefficients)
    ratio = muon_lr_ratio(adjust_lr_fn, param.shape[-2], param.shape[-1])
    param.sub_((lr * ratio) * D.like_param(orth, param))


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


def scaled_gd_(
    U: Tensor, V: Tensor, G_U: Tensor | None, G_V: Tensor | None, *, lr_U: Hyper, lr_V: Hyper,
    damping: float, relative_damping: bool, sequential: bool, weight_decay_U: Hyper = 0.0,
    weight_decay_V: Hyper = 0.0, maximize: bool = False,
) -> None:
    r"""ScaledGD on a pair ``W = U Vᵀ``.

    ``U ← U(1 − lr·wd) − lr G_U (VᵀV + λ_V I)⁻¹``, ``V ← V(1 − lr·wd) − lr G_V (UᵀU + λ_U I)⁻¹``
    (``wd`` the decoupled weight decay), both Grams from the factors before the step
    (``sequential=True``: ``V``'s Gram uses the updated ``U``, the order of the paper's script).
    A factor whose gradient is ``None`` is left alone. DTensor factors and gradients are
    gathered; each rank applies its block of the directions.
    """
    step_U = None
    if G_U is not None:
        direction = scaled_gd_direction(
            signed(D.full(G_U), maximize), D.full(V), damping=damping, relative=relative_damping
        )
        step_U = lr_U * D.like_param(direction, U)
        if sequential:
            decoupled_decay_(U, lr=lr_U, weight_decay=weight_decay_U)
            U.sub_(step_U)
            step_U = None
    if G_V is not None:
        direction = scaled_gd_direction(
            signed(D.full(G_V), maximize), D.full(U), damping=damping, relative=relative_damping
        )
        decoupled_decay_(V, lr=lr_V, weight_decay=weight_decay_V)
        V.sub_(lr_V * D.like_param(direction, V))
    if step_U is not None:
        decoupled_decay_(U, lr=lr_U, weight_decay=weight_decay_U)
        U.sub_(step_U)
