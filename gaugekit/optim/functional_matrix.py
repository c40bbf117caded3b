r"""The matrix rules' math, written once: Muon (:func:`muon_many_`), Shampoo, the
Gram-preconditioned rule and ScaledGD. Each updates its parameters in place and keeps no state
of its own; how Muon's Newton–Schulz runs on a step's matrices (orientation, row blocks,
stacking) is :mod:`gaugekit.optim.orthogonalize`. Notation as in
:mod:`gaugekit.optim.functional`; a matrix rule sees ``G`` (the last two dimensions) as an
``n × k`` matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from gaugekit.linalg import NS_COEFFICIENTS
from gaugekit.optim import distributed as D
from gaugekit.optim.functional import (
    Hyper,
    _eye_like,
    decoupled_decay_,
    propagating_matrix_power,
    signed,
)
from gaugekit.optim.orthogonalize import RowBlocks, block_sizes, orthogonalize

#: a Gram-matrix function ``H``: a stack of symmetric PSD matrices → a stack of matrices.
GramFn = Callable[[Tensor], Tensor]


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
    shape: tuple[int, ...], batch_dims: int, split_rows: RowBlocks = 1,
    transposed: bool = False,
) -> list[tuple[int, int]]:
    r"""The ``(rows, cols)`` of each row block Muon orthogonalizes in a parameter of ``shape``.

    After the ``batch_dims``, the first dimension is the rows (the second, ``transposed``: a
    layer stored ``(in, out)``) and the others are flattened into the columns (a convolution
    kernel ``(out, in, kh, kw)`` is the matrix ``out × in·kh·kw``, as in Keller Jordan's Muon);
    ``split_rows`` cuts the rows into blocks (:mod:`gaugekit.optim.orthogonalize`), each its own
    matrix (a fused ``[W_Q; W_K; W_V]``: 3, per head or by sizes)."""
    dims = list(shape[batch_dims:])
    if transposed:
        dims[0], dims[1] = dims[1], dims[0]
    cols = math.prod(dims[1:])
    return [(rows, cols) for rows in block_sizes(dims[0], split_rows)]


def muon_many_(
    params: list[Tensor], grads: list[Tensor], momentum_buffers: list[Tensor], *,
    lrs: list[Hyper], momentums: list[Hyper], nesterov: bool, ns_steps: int,
    ns_coefficients: tuple[float, float, float], eps: float, adjust_lr_fn: str | None,
    weight_decays: list[Hyper] | None = None, maximize: bool = False, batch_dims: int = 0,
    split_rows: RowBlocks | Sequence[RowBlocks] = 1, transposed: bool | Sequence[bool] = False,
    ns_dtype: torch.dtype | None = None,
) -> None:
    r"""Muon on every parameter of one group: per parameter ``θ ← θ(1 − lr λ)``;
    ``M ← μ M + G``; ``θ ← θ − lr ρ_b · NS₅(M_b)`` for each row block ``b`` of each matrix
    (Nesterov: of ``G + μ M``).

    ``NS₅`` is :func:`~gaugekit.optim.orthogonalize.orthogonalize` (orientation ``transposed``,
    row blocks ``split_rows``, one for the group or one per parameter, ``ns_dtype``); ``ρ_b``
    is :func:`muon_lr_ratio` of the block's shape (:func:`muon_matrix_shape`). A DTensor ``M``
    is gathered (:func:`gaugekit.optim.distributed.full`) and each rank applies its block of
    ``NS₅(M)``.
    """
    n = len(params)
    decays = weight_decays if weight_decays is not None else [0.0] * n
    splits = list(split_rows) if isinstance(split_rows, list) else [split_rows] * n
    flips = list(transposed) if isinstance(transposed, Sequence) else [transposed] * n
    targets = []
    for p, g, buf, lr, mu, wd in zip(params, grads, momentum_buffers, lrs, momentums, decays,
                                     strict=True):
        g = signed(g, maximize)
        decoupled_decay_(p, lr=lr, weight_decay=wd)
        buf.mul_(mu).add_(g)
        targets.append(D.full(g + mu * buf if nesterov else buf))
    ratios = [[muon_lr_ratio(adjust_lr_fn, rows, cols) for rows, cols in
               muon_matrix_shape(tuple(p.shape), batch_dims, split, flip)]
              for p, split, flip in zip(params, splits, flips, strict=True)]
    orths = orthogonalize(targets, batch_dims=batch_dims, split_rows=splits, transposed=flips,
                          ratios=ratios, ns_steps=ns_steps, ns_coefficients=ns_coefficients,
                          eps=eps, ns_dtype=ns_dtype)
    for p, orth, lr in zip(params, orths, lrs, strict=True):
        p.sub_(lr * D.like_param(orth, p))


def muon_(
    param: Tensor, grad: Tensor, momentum_buffer: Tensor, *, lr: Hyper, momentum: Hyper,
    nesterov: bool, ns_steps: int = 5,
    ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, eps: float = 1e-7,
    adjust_lr_fn: str | None = None, weight_decay: Hyper = 0.0, maximize: bool = False,
    batch_dims: int = 0, split_rows: RowBlocks = 1, transposed: bool = False,
    ns_dtype: torch.dtype | None = None,
) -> None:
    r"""``θ ← θ(1 − lr λ)``; ``M ← μ M + G``; ``θ ← θ − lr ρ · NS₅(M)`` (Nesterov:
    ``NS₅(G + μ M)``): one parameter of :func:`muon_many_`."""
    muon_many_(
        [param], [grad], [momentum_buffer], lrs=[lr], momentums=[momentum], nesterov=nesterov,
        ns_steps=ns_steps, ns_coefficients=ns_coefficients, eps=eps, adjust_lr_fn=adjust_lr_fn,
        weight_decays=[weight_decay], maximize=maximize, batch_dims=batch_dims,
        split_rows=[split_rows], transposed=[transposed], ns_dtype=ns_dtype,
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
