"""The matrix rules: Muon (momentum, then quintic Newton–Schulz orthogonalization), two-sided
Shampoo with periodically refreshed inverse fourth roots, the Gram-function family of the
paper's Theorem 4.5 (``Φ(G) = H(G Gᵀ) G``) and ScaledGD on factor pairs ``W = U Vᵀ`` (Tong, Ma
& Chi, 2021)."""

# Developer note (layers, gaugekit/__init__.py): floor 3, optim/, on linalg and _extras.

from __future__ import annotations

from typing import Any

from gaugekit.linalg import NS_COEFFICIENTS
from gaugekit.optim import distributed as D
from gaugekit.optim import functional as F
from gaugekit.optim.base import ZooOptimizer
from gaugekit.optim.validation import (
    DECAY,
    LR,
    WEIGHT_DECAY,
    Hyper,
    bool_check,
    callable_or_none_check,
    choice_check,
    coefficients_check,
    int_check,
    invalid,
    real_check,
)


class Muon(ZooOptimizer):
    r"""Muon (Jordan et al., 2024) in the paper's convention.

    .. math::
        M_t = μ M_{t-1} + G_t,\qquad
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\cdot ρ\cdot \mathrm{NS}_5(M_t)

    with decoupled weight decay λ (torch.optim.Muon's; ``maximize`` uses ``−G_t``).

    ``NS₅`` is :func:`gaugekit.linalg.newton_schulz`: ``X₀ = M/(‖M‖_F + ε)`` per matrix (ε = 1e-7),
    then 5 quintic steps with ``(a, b, c) = (3.4445, −4.7750, 2.0315)``, tall matrices transposed.
    ``ρ = 1`` by default; ``adjust_lr_fn`` = ``"original"`` (``√max(1, n/k)``) or
    ``"match_rms_adamw"`` (``0.2 √max(n, k)``) are torch's shape factors. ``nesterov=True``
    orthogonalizes ``G_t + μ M_t``. State: ``momentum_buffer``.

    Deviations from ``torch.optim.Muon``: un-damped buffer ``μ M + G`` (torch: ``μ M + (1−μ) G``,
    i.e. ``(1−μ)`` times ours, which NS undoes up to ε); ``nesterov=False``, ``ρ = 1`` and no
    weight decay by default; ``‖M‖ + ε`` instead of ``max(‖M‖, ε)``; the NS iteration runs in the
    parameter's dtype (torch runs it in bfloat16). From the paper: none (μ = 0.9, no Nesterov,
    λ = 0).

    Gauge: equivariant — ``M`` is linear in past gradients and ``NS(M Q) = NS(M) Q`` for every
    orthogonal ``Q`` (odd matrix polynomial; ``‖M Q‖_F = ‖M‖_F``), with or without the transpose;
    the decay is a scalar multiple of the factor.

    Distributed: a sharded DTensor parameter (FSDP2) is handled by gathering ``M``
    (``full_tensor()``, one all-gather per matrix and step); every rank runs ``NS₅`` on the whole
    matrix and applies its own block; the buffer stays sharded.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        momentum: ``μ`` in ``[0, 1)`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
        nesterov: orthogonalize the Nesterov look-ahead ``G + μ M``.
        ns_steps: number of Newton–Schulz steps ``>= 0``.
        ns_coefficients: quintic coefficients ``(a, b, c)``.
        eps: ``ε >= 0`` added to the Frobenius norm before the iteration.
        adjust_lr_fn: ``None`` (paper), ``"original"`` or ``"match_rms_adamw"`` (torch).
        maximize: maximize the objective (step along ``+G``).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "momentum": DECAY,
        "nesterov": bool_check,
        "ns_steps": int_check(0),
        "ns_coefficients": coefficients_check,
        "eps": real_check(0.0, per_run=False),
        "adjust_lr_fn": choice_check(None, "original", "match_rms_adamw"),
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, momentum: Hyper = 0.9, *,
        weight_decay: Hyper = 0.0, nesterov: bool = False, ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, eps: float = 1e-7,
        adjust_lr_fn: str | None = None, maximize: bool = False, batch_dims: int = 0,
        **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov,
            "ns_steps": ns_steps, "ns_coefficients": ns_coefficients, "eps": eps,
            "adjust_lr_fn": adjust_lr_fn, "maximize": maximize,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "momentum_buffer")
            F.muon_(
                p, g, state["momentum_buffer"], lr=self._hyper(group, "lr", p),
                momentum=self._hyper(group, "momentum", p), nesterov=group["nesterov"],
                ns_steps=group["ns_steps"], ns_coefficients=group["ns_coefficients"],
                eps=group["eps"], adjust_lr_fn=group["adjust_lr_fn"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )


class Shampoo(ZooOptimizer):
    r"""Shampoo (Gupta, Koren & Singer, 2018), two-sided, in the paper's convention.

    .. math::
        L_t = L_{t-1} + G_t G_t^\top,\quad R_t = R_{t-1} + G_t^\top G_t,\\
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\,(L_s + λI)^{-1/4}\, G_t\, (R_s + λI)^{-1/4}

    with decoupled weight decay ``w = weight_decay`` (``maximize`` uses ``−G_t``), where ``s``
    is the last refresh step: the inverse roots are recomputed at steps
    1, 1 + f, 1 + 2f, … (``f = update_freq = 20``) by ``eigh`` with eigenvalues clamped below at
    ``eig_floor = 1e-6``; ``λ = damping = 1``. State: ``step``, ``left_gram`` (``L``),
    ``right_gram`` (``R``), ``left_inv_root``, ``right_inv_root``.

    Deviations from Gupta et al.: ``λ`` is added at the root, not to the initial statistics; no
    grafting, no momentum. From the paper: none (``w = 0``).

    Gauge: equivariant — under ``G → G Q``: ``L`` is invariant, ``R → Qᵀ R Q`` so
    ``(R + λI)^{-1/4} → Qᵀ (R + λI)^{-1/4} Q``, and the update becomes ``L̃ G R̃ Q``; the decay is
    a scalar multiple of the factor.

    Distributed: a sharded DTensor parameter (FSDP2) has its gradient gathered
    (``full_tensor()``, one all-gather per matrix and step); ``L``, ``R`` and their roots are
    whole plain matrices, the same on every rank, and each rank applies its block of the update.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        damping: ``λ > 0`` added to ``L`` and ``R`` before the root.
        update_freq: refresh period ``f >= 1`` of the inverse roots.
        eig_floor: lower clamp ``> 0`` of the eigenvalues before the power.
        weight_decay: decoupled weight decay ``w >= 0`` (per run).
        maximize: maximize the objective (step along ``+G``).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "damping": real_check(0.0, low_open=True, per_run=False),
        "update_freq": int_check(1),
        "eig_floor": real_check(0.0, low_open=True, per_run=False),
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 0.1, *, damping: float = 1.0, update_freq: int = 20,
        eig_floor: float = 1e-6, weight_decay: Hyper = 0.0, maximize: bool = False,
        batch_dims: int = 0, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "damping": damping, "update_freq": update_freq, "eig_floor": eig_floor,
            "weight_decay": weight_decay, "maximize": maximize,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, step=True)
            if "left_gram" not in state:
                n, k = p.shape[-2], p.shape[-1]
                batch = p.shape[:-2]
                block = D.local(p)  # DTensor p: plain full-size statistics on every rank
                state["left_gram"] = block.new_zeros(batch + (n, n))
                state["right_gram"] = block.new_zeros(batch + (k, k))
                state["left_inv_root"] = block.new_zeros(batch + (n, n))
                state["right_inv_root"] = block.new_zeros(batch + (k, k))
            F.shampoo_(
                p, g, state["left_gram"], state["right_gram"], state["left_inv_root"],
                state["right_inv_root"], step=state["step"], lr=self._hyper(group, "lr", p),
                damping=group["damping"], update_freq=group["update_freq"],
                eig_floor=group["eig_floor"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )


class GramPreconditioned(ZooOptimizer):
    r"""Stateless Gram-preconditioned descent, the form of the paper's Theorem 4.5.

    .. math::
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\,Φ(G_t),\qquad
        Φ(G) = H(G G^\top)\, G \ \ (\texttt{side="left"}),\quad
        Φ(G) = G\, H(G^\top G) \ \ (\texttt{side="right"})

    ``w = weight_decay`` is a decoupled weight decay (``maximize`` uses ``−G_t``). ``H`` is
    ``gram_fn``, any callable from a stack of symmetric matrices (shape
    ``(..., n, n)``; leading dims are runs) to a stack of matrices; by default
    ``H(P) = (P + λI)^{-s}`` (eigh, eigenvalues clamped at 1e-6) with ``s = power = 1/2``,
    ``λ = damping = 1e-6`` — a damped polar factor, ``≈ msign(G)``. ``power`` and ``damping``
    are ignored when ``gram_fn`` is given.

    Which Gram: the gauge ``U → U Q`` acts on the right of an ``n × k`` factor, ``G → G Q``.
    The left Gram ``G Gᵀ`` is invariant under it, so ``H(G Gᵀ) G → H(G Gᵀ) G Q`` for ANY
    ``H`` — this is the default. The right form needs ``H(Qᵀ P Q) = Qᵀ H(P) Q`` (a spectral
    ``H``, e.g. the default), and then equals the left one (``G f(GᵀG) = f(GGᵀ) G``); use it for
    a gauge acting on the left of ``G`` (a parameter stored transposed, ``k × n``), or because
    ``GᵀG`` is the smaller matrix.

    Deviations: the paper states the theorem, not an optimizer; no state, no momentum.

    Gauge: equivariant for ``side="left"`` and any ``H`` (``G Gᵀ`` is gauge-invariant); for
    ``side="right"`` only when ``H`` is spectral (the decay is a scalar multiple of the factor).

    Distributed: a sharded DTensor gradient (FSDP2) is gathered (one all-gather per matrix and
    step); ``Φ(G)`` is computed whole on every rank and each rank applies its block.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        gram_fn: ``H``, or ``None`` for ``(P + λI)^{-s}``.
        power: ``s >= 0`` of the default ``H``.
        damping: ``λ >= 0`` of the default ``H``.
        side: ``"left"`` (``H(GGᵀ) G``) or ``"right"`` (``G H(GᵀG)``).
        weight_decay: decoupled weight decay ``w >= 0`` (per run).
        maximize: maximize the objective (step along ``+G``).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "gram_fn": callable_or_none_check,
        "power": real_check(0.0, per_run=False),
        "damping": real_check(0.0, per_run=False),
        "side": choice_check("left", "right"),
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-2, *, gram_fn: F.GramFn | None = None,
        power: float = 0.5, damping: float = 1e-6, side: str = "left",
        weight_decay: Hyper = 0.0, maximize: bool = False, batch_dims: int = 0,
        **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "gram_fn": gram_fn, "power": power, "damping": damping, "side": side,
            "weight_decay": weight_decay, "maximize": maximize,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        gram_fn = group["gram_fn"] or F.damped_inverse_power(group["power"], group["damping"])
        for p, g in self._with_grad(group["params"]):
            F.gram_(
                p, g, lr=self._hyper(group, "lr", p), gram_fn=gram_fn, side=group["side"],
                weight_decay=self._hyper(group, "weight_decay", p), maximize=group["maximize"],
            )


class ScaledGD(ZooOptimizer):
    r"""Scaled gradient descent on a factor pair; each param group holds exactly one ``[U, V]``.

    .. math::
        U_t = U_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\, G_U (V^\top V + λ_V I)^{-1},\qquad
        V_t = V_{t-1}(1 − \mathrm{lr}\,w) − \mathrm{lr}\, G_V (U^\top U + λ_U I)^{-1}

    with decoupled weight decay ``w = weight_decay`` (``maximize`` uses ``−G``), ``U`` of shape
    ``(..., n, k)``, ``V`` of shape ``(..., m, k)`` (same ``k``, same batch dims) and both Grams
    taken before the step. ``λ`` is relative by default, as in the paper's
    script: ``λ_V = damping · (tr(VᵀV)/k + 10⁻³⁰) + 10⁻¹²`` with ``damping = 1e-4``;
    ``relative_damping=False`` uses ``λ = damping``. Several pairs: one group per pair,
    ``ScaledGD([{"params": [U1, V1]}, {"params": [U2, V2]}])``. Stateless.

    Deviations from the paper's script: the script updates ``U`` first and builds ``V``'s Gram
    from the NEW ``U`` (``sequential=True`` reproduces that); it inverts the Gram, we solve.
    Tong et al. use ``λ = 0``. The paper's ``w = 0``.

    Gauge: equivariant — under ``(U, V) → (UQ, VQ)``: ``G_U → G_U Q``, ``VᵀV → Qᵀ VᵀV Q``, ``λ``
    is invariant (a trace), so ``G_U (VᵀV + λI)⁻¹ → G_U (VᵀV + λI)⁻¹ Q``; the same for ``V``;
    the decay is a scalar multiple of the factor.

    Distributed: sharded DTensor factors (FSDP2) and their gradients are gathered (four
    all-gathers per pair and step); the directions are computed whole on every rank and each
    rank applies its block.

    Args:
        params: ``[U, V]`` or a list of groups ``{"params": [U, V], ...}``.
        lr: learning rate ``>= 0`` (per run).
        damping: ``λ`` (absolute) or its factor on ``tr/k`` (relative), ``>= 0``.
        relative_damping: scale ``damping`` by the mean Gram diagonal.
        sequential: build ``V``'s Gram from the already-updated ``U``.
        weight_decay: decoupled weight decay ``w >= 0`` (per run).
        maximize: maximize the objective (step along ``+G``).
        batch_dims: leading dimensions of every parameter that index independent runs.
    """

    matrix_only = True
    hyper_checks = {
        "lr": LR,
        "damping": real_check(0.0, per_run=False),
        "relative_damping": bool_check,
        "sequential": bool_check,
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, *, damping: float = 1e-4,
        relative_damping: bool = True, sequential: bool = False, weight_decay: Hyper = 0.0,
        maximize: bool = False, batch_dims: int = 0, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "damping": damping, "relative_damping": relative_damping,
            "sequential": sequential, "weight_decay": weight_decay, "maximize": maximize,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        params = group["params"]
        if len(params) != 2:
            raise invalid(
                "params", f"a group of {len(params)} tensors",
                "exactly one pair [U, V] per param group (one group per pair)",
            )
        U, V = params
        b = group["batch_dims"]
        if U.shape[:b] != V.shape[:b] or U.shape[-1] != V.shape[-1]:
            raise invalid(
                "params", f"a pair of shapes {tuple(U.shape)}, {tuple(V.shape)}",
                "U (..., n, k) and V (..., m, k) with the same k and batch dims",
            )

    def _update_group(self, group: dict[str, Any]) -> None:
        U, V = group["params"]
        for G in (U.grad, V.grad):
            if G is not None and G.is_sparse:
                raise RuntimeError("gaugekit optimizers do not support sparse gradients")
        F.scaled_gd_(
            U, V, U.grad, V.grad, lr_U=self._hyper(group, "lr", U),
            lr_V=self._hyper(group, "lr", V), damping=group["damping"],
            relative_damping=group["relative_damping"], sequential=group["sequential"],
            weight_decay_U=self._hyper(group, "weight_decay", U),
            weight_decay_V=self._hyper(group, "weight_decay", V), maximize=group["maximize"],
        )
