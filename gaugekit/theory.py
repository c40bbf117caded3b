r"""The computations behind the theory chapters (gauge, taxonomy, characterization).

Each function evaluates one object of the paper (arXiv 2608.05136) so that a chapter can put the
closed form next to what the library's optimizers actually do:

* the ``k = 2`` gauge orbit (:func:`rotation_2d`) and autograd gradients (:func:`loss_gradients`);
* memoryless first-step maps of the coordinate-wise rules: Adam's ``D_ε(G) = G ⊘ (|G| + ε)``
  and Adafactor's rank-one reconstruction, and the equivariance gap of any map;
* Adam's exact first-step gauge defect (the paper's Proposition 4.4), in closed form and on a
  grid of ``(lr, ε)``;
* the paper's Theorem 4.5 and Proposition A.1: the implied left preconditioner ``Φ(G) G⁺``, the
  gauge that relates two matrices with the same left Gram, and the spectral transfer function
  ``h`` of a map, measured from its output, plus Newton–Schulz's scalar map;
* the paper's Theorem 4.6 and Proposition A.4: factor flows ``U' = −Φ_U``, ``V' = −Φ_V``
  integrated with ``torchdiffeq``, the time change ``τ(T) = ∫₀ᵀ du / a(u)``, optimizer
  trajectories and the drift of the balancedness ``B = UᵀU − VᵀV``;
* attention logits per head, whose invariance is the attention gauge.

Notation: ``U`` (n×k), ``V`` (m×k), ``W = U Vᵀ``, ``Q ∈ O(k)``, ``G_U, G_V`` gradients, ``lr``
the step size ``η``, ``eps`` Adam's ``ε``. Everything is float64-friendly and takes explicit
tensors; nothing here draws random numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from gaugekit.audit.factors import run_factor_optimizer
from gaugekit.gauge import _split_heads, balancedness, relative_distance
from gaugekit.linalg import NS_COEFFICIENTS

__all__ = [
    "AdamFirstStepDefect",
    "SpectralTransfer",
    "adafactor_first_step_direction",
    "adam_first_step_defect",
    "adam_first_step_direction",
    "adam_relative_defect_grid",
    "attention_logits",
    "balancedness_drift",
    "equivariance_gap",
    "factor_flow",
    "first_step_displacement",
    "first_step_map",
    "gram_gauge",
    "implied_left_preconditioner",
    "loss_gradients",
    "measure_spectral_transfer",
    "newton_schulz_scalar_map",
    "optimizer_trajectory",
    "registry_first_step",
    "relative_imbalance",
    "retimed_clock",
    "rotation_2d",
    "transfer_from_psi",
]

LossFn = Callable[[Tensor, Tensor], Tensor]
MatrixMap = Callable[[Tensor], Tensor]
OptimizerFactory = Callable[[list[Tensor]], torch.optim.Optimizer]
#: ``velocity(t, G_U, G_V) → (Φ_U, Φ_V)``: the flow is ``U' = −Φ_U``, ``V' = −Φ_V``.
Velocity = Callable[[float, Tensor, Tensor], tuple[Tensor, Tensor]]


# --------------------------------------------------------------------------------------------
# the gauge at k = 2, gradients
# --------------------------------------------------------------------------------------------


def rotation_2d(theta: Tensor) -> Tensor:
    r"""Rotations ``R(θ) = [[cos θ, sin θ], [−sin θ, cos θ]] ∈ SO(2)``, shape ``θ.shape + (2, 2)``.

    Acting on the right of a row vector ``u = (u₁, u₂)``, ``u R(θ)`` is ``u`` turned by ``θ``
    clockwise; the orbit ``{(U R(θ), V R(θ))}`` of a ``k = 2`` factorization is a circle.
    """
    c, s = torch.cos(theta), torch.sin(theta)
    row1 = torch.stack([c, s], dim=-1)
    row2 = torch.stack([-s, c], dim=-1)
    return torch.stack([row1, row2], dim=-2)


def loss_gradients(loss: Callable[..., Tensor], *params: Tensor) -> tuple[Tensor, ...]:
    r"""Autograd gradients of ``loss(*params)`` at the given points (inputs are not modified).

    For ``loss(U, V)`` this returns ``(G_U, G_V) = (∇_U L, ∇_V L)``.
    """
    leaves = [p.detach().clone().requires_grad_(True) for p in params]
    with torch.enable_grad():
        value = loss(*leaves)
        grads = torch.autograd.grad(value, leaves)
    return tuple(g.detach() for g in grads)


# --------------------------------------------------------------------------------------------
# memoryless first-step maps
# --------------------------------------------------------------------------------------------


def equivariance_gap(phi: MatrixMap, G: Tensor, Q: Tensor) -> Tensor:
    r"""``‖Φ(GQ) − Φ(G)Q‖_F / ‖Φ(G)Q‖_F``: zero for every ``Q`` iff ``Φ`` is gauge-equivariant."""
    return relative_distance(phi(G @ Q), phi(G) @ Q)


def adam_first_step_direction(G: Tensor, eps: float | Tensor) -> Tensor:
    r"""Adam's zero-state step direction ``D_ε(G) = G ⊘ (|G| + ε)``.

    With zero moments and bias correction, ``m̂₁ = G`` and ``v̂₁ = G²``, so Adam's first update
    is ``−lr D_ε(G)``. As ``ε → 0`` it tends to ``sign(G)``; for ``ε ≫ |G|`` to ``G / ε``.
    """
    return G / (G.abs() + eps)


def adafactor_first_step_direction(G: Tensor) -> Tensor:
    r"""Adafactor's zero-state direction ``G ⊘ √v̂`` with ``v̂ = r cᵀ / Σᵢ rᵢ`` (``ε = 0``).

    ``r`` holds the row sums and ``c`` the column sums of ``G²`` (over the last two dims); the
    library's :class:`~gaugekit.optim.Adafactor` takes ``lr / √(1 − β₂)`` times this step at
    ``t = 1`` when ``ε = 0``. Rows of ``G`` keep their norms under ``G → GQ`` (``r`` is
    invariant), columns do not (``c`` changes): that is why the rule breaks the gauge.
    """
    G2 = G * G
    r = G2.sum(dim=-1, keepdim=True)
    c = G2.sum(dim=-2, keepdim=True)
    v_hat = r * c / r.sum(dim=-2, keepdim=True)
    return G / v_hat.sqrt()


def first_step_displacement(
    make_optimizer: OptimizerFactory, G: Tensor, P0: Tensor | None = None
) -> Tensor:
    r"""Displacement ``P₁ − P₀`` of one step of a fresh ``make_optimizer([P])`` at gradient ``G``.

    The loss is linear, ``⟨G, P⟩``, so the gradient the optimizer sees is exactly ``G``;
    ``P₀`` defaults to 0.
    """
    P = (torch.zeros_like(G) if P0 is None else P0.detach().clone()).requires_grad_(True)
    start = P.detach().clone()
    optimizer = make_optimizer([P])

    def closure() -> Tensor:
        with torch.enable_grad():
            P.grad = None
            value = (G * P).sum()
            value.backward()
        return value

    optimizer.step(closure)
    return P.detach() - start


def first_step_map(make_optimizer: OptimizerFactory, lr: float) -> MatrixMap:
    r"""The memoryless map ``Φ`` of an optimizer's first step: ``G ↦ −(P₁ − P₀) / lr``.

    A fresh ``make_optimizer([P])`` with ``P₀ = 0`` takes one step on the linear loss
    ``⟨G, P⟩``, whose gradient is exactly ``G``; ``lr`` must be the learning rate the factory
    uses. Examples: GD gives ``G``; Adam ``D_ε(G)``; Signum and Lion ``sign(G)``; Muon ``NS₅(G)``;
    Shampoo ``(GGᵀ + λI)^{-1/4} G (GᵀG + λI)^{-1/4}``.
    """
    return lambda G: -first_step_displacement(make_optimizer, G) / lr


def registry_first_step(name: str, lr: float, **overrides: object) -> MatrixMap:
    r""":func:`first_step_map` of the registry optimizer ``name`` at step size ``lr``: the
    zero-state first step ``G ↦ Φ(G)`` of ``make_optimizer(name, [P], lr=lr, **overrides)``."""
    from gaugekit.optim import make_optimizer

    return first_step_map(lambda p: make_optimizer(name, p, lr=lr, **overrides), lr)


# --------------------------------------------------------------------------------------------
# Proposition 4.4: Adam's exact first-step defect
# --------------------------------------------------------------------------------------------


class AdamFirstStepDefect(NamedTuple):
    r"""The pieces of the paper's Proposition 4.4 at one ``(lr, ε)``.

    ``defect = W̃₁ − W₁`` (the product after one Adam step from ``(U₀Q, V₀Q)`` minus the product
    after one step from ``(U₀, V₀)``); ``step = W₁ − W₀``; ``E_U = D_ε(G_U Q)Qᵀ − D_ε(G_U)`` and
    ``E_V`` alike (the rotated-back first steps minus the plain ones).
    """

    defect: Tensor
    step: Tensor
    E_U: Tensor
    E_V: Tensor


def adam_first_step_defect(
    U0: Tensor,
    V0: Tensor,
    G_U: Tensor,
    G_V: Tensor,
    Q: Tensor,
    lr: float,
    eps: float,
) -> AdamFirstStepDefect:
    r"""The paper's Proposition 4.4 in closed form: the product defect of one Adam step.

    With ``D_U = D_ε(G_U)``, ``E_U = D_ε(G_U Q) Qᵀ − D_U`` (and ``V`` alike), the gradients at
    ``(U₀Q, V₀Q)`` being ``(G_U Q, G_V Q)`` (the paper's Lemma 4.1),

    ``W̃₁ − W₁ = −η (E_U V₀ᵀ + U₀ E_Vᵀ) + η² (E_U D_Vᵀ + D_U E_Vᵀ + E_U E_Vᵀ)``,

    an exact identity (no expansion is truncated). ``E_U = E_V = 0`` for an equivariant rule;
    for Adam they are non-zero for a generic ``Q``, so the defect is first order in ``η``.
    """
    D_U = adam_first_step_direction(G_U, eps)
    D_V = adam_first_step_direction(G_V, eps)
    E_U = adam_first_step_direction(G_U @ Q, eps) @ Q.mT - D_U
    E_V = adam_first_step_direction(G_V @ Q, eps) @ Q.mT - D_V
    defect = -lr * (E_U @ V0.mT + U0 @ E_V.mT) + lr**2 * (
        E_U @ D_V.mT + D_U @ E_V.mT + E_U @ E_V.mT
    )
    step = (U0 - lr * D_U) @ (V0 - lr * D_V).mT - U0 @ V0.mT
    return AdamFirstStepDefect(defect=defect, step=step, E_U=E_U, E_V=E_V)


def adam_relative_defect_grid(
    U0: Tensor,
    V0: Tensor,
    G_U: Tensor,
    G_V: Tensor,
    Q: Tensor,
    lrs: Sequence[float],
    epss: Sequence[float],
) -> Tensor:
    r"""``δ(η, ε) = ‖W̃₁ − W₁‖_F / ‖W₁ − W₀‖_F`` on a grid, shape ``(len(epss), len(lrs))``.

    The defect measured against the step itself: as ``η → 0`` it tends to
    ``‖E_U V₀ᵀ + U₀ E_Vᵀ‖ / ‖D_U V₀ᵀ + U₀ D_Vᵀ‖``, a constant that does not vanish, and it
    decays like ``1/ε`` once ``ε`` dominates the gradient entries.
    """
    out = torch.empty(len(epss), len(lrs), dtype=U0.dtype, device=U0.device)
    for i, eps in enumerate(epss):
        for j, lr in enumerate(lrs):
            parts = adam_first_step_defect(U0, V0, G_U, G_V, Q, lr, eps)
            out[i, j] = relative_distance(parts.step + parts.defect, parts.step)
    return out


# --------------------------------------------------------------------------------------------
# Theorem 4.5 and Proposition A.1
# --------------------------------------------------------------------------------------------


def implied_left_preconditioner(phi: MatrixMap, G: Tensor) -> Tensor:
    r"""``X(G) = Φ(G) G⁺`` (n×n), the candidate ``H(GGᵀ)`` of the paper's Theorem 4.5.

    For an equivariant ``Φ``: ``X(GQ) = X(G)`` (it depends on ``G`` only through ``GGᵀ``) and
    ``X(G) G = Φ(G)`` (``Φ(G)`` vanishes on the orthogonal complement of ``G``'s row space).
    """
    return phi(G) @ torch.linalg.pinv(G)


def gram_gauge(G1: Tensor, G2: Tensor) -> Tensor:
    r"""``Q = G₁⁺ G₂``: when ``G₁G₁ᵀ = G₂G₂ᵀ`` and ``G₁`` has full column rank, ``Q`` is
    orthogonal and ``G₂ = G₁ Q`` (the step of the proof of the paper's Theorem 4.5: the left
    Gram determines ``G`` up to the gauge)."""
    return torch.linalg.pinv(G1) @ G2


def transfer_from_psi(psi: Callable[[Tensor], Tensor], s: Tensor) -> Tensor:
    r"""``h(s) = s ψ(s²)`` (the paper's Proposition A.1): ``ψ(GGᵀ) G = Σᵢ h(σᵢ) uᵢ vᵢᵀ``."""
    return s * psi(s * s)


class SpectralTransfer(NamedTuple):
    r"""``Φ(G)`` read in the singular bases of ``G = Σᵢ σᵢ uᵢ vᵢᵀ``.

    ``s``: the singular values ``σᵢ``; ``h``: ``uᵢᵀ Φ(G) vᵢ``; ``residual``:
    ``‖Φ(G) − Σᵢ hᵢ uᵢ vᵢᵀ‖_F / ‖Φ(G)‖_F``, zero exactly when ``Φ(G)`` is a spectral function
    of ``G`` (same singular vectors).
    """

    s: Tensor
    h: Tensor
    residual: Tensor


def measure_spectral_transfer(phi: MatrixMap, G: Tensor) -> SpectralTransfer:
    r"""Measure the transfer function of ``Φ`` at ``G`` from ``Φ(G)`` alone (the paper's
    Proposition A.1)."""
    P, s, Rh = torch.linalg.svd(G, full_matrices=False)
    out = phi(G)
    h = torch.diagonal(P.mT @ out @ Rh.mT, dim1=-2, dim2=-1)
    rebuilt = (P * h.unsqueeze(-2)) @ Rh
    return SpectralTransfer(s=s, h=h, residual=relative_distance(rebuilt, out))


def newton_schulz_scalar_map(
    x: Tensor,
    steps: int = 5,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
) -> Tensor:
    r"""The scalar iteration ``x ← a x + b x³ + c x⁵`` (``steps`` times) behind Newton–Schulz.

    :func:`gaugekit.linalg.newton_schulz` maps ``G = Σᵢ σᵢ uᵢ vᵢᵀ`` to ``Σᵢ p(xᵢ) uᵢ vᵢᵀ`` with
    ``xᵢ = σᵢ / (‖G‖_F + ε)`` and ``p`` this map, so Muon's transfer function is
    ``h(σ) = p(σ / ‖G‖_F)``: close to 1 on most of ``(0, 1]``, not exactly 1.
    """
    a, b, c = coefficients
    for _ in range(steps):
        x2 = x * x
        x = a * x + (b + c * x2) * x2 * x
    return x


# --------------------------------------------------------------------------------------------
# Theorem 4.6 and Proposition A.4: flows, clocks, trajectories, balancedness
# --------------------------------------------------------------------------------------------


def factor_flow(
    loss: LossFn,
    U0: Tensor,
    V0: Tensor,
    times: Tensor,
    *,
    velocity: Velocity | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = "dopri5",
) -> tuple[Tensor, Tensor]:
    r"""Integrate ``U' = −Φ_U``, ``V' = −Φ_V`` with ``(Φ_U, Φ_V) = velocity(t, G_U, G_V)``.

    The default velocity is the gradient itself (gradient flow); a positive scalar ``a(t)``,
    ``velocity = lambda t, gu, gv: (gu / a(t), gv / a(t))``, gives the scalar-preconditioned
    flow of the paper's Theorem 4.6. ``times`` (increasing, starting at the initial time) are the
    output times; returns stacks ``(len(times), n, k)`` and ``(len(times), m, k)``. Adaptive
    Dormand–Prince from ``torchdiffeq`` with tolerances ``rtol``, ``atol``.
    """
    from torchdiffeq import odeint

    field = velocity if velocity is not None else lambda t, G_U, G_V: (G_U, G_V)

    def rhs(t: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        U, V = state
        G_U, G_V = loss_gradients(loss, U, V)
        phi_U, phi_V = field(float(t), G_U, G_V)
        return -phi_U, -phi_V

    U_t, V_t = odeint(
        rhs, (U0.detach(), V0.detach()), times.to(U0), rtol=rtol, atol=atol, method=method
    )
    return U_t, V_t


def retimed_clock(
    speed: Callable[[float], float], times: Sequence[float] | Tensor, *, num_points: int = 2001
) -> Tensor:
    r"""``τ(T) = ∫₀ᵀ du / a(u)`` at each ``T`` in ``times`` (composite Simpson rule).

    The paper's Theorem 4.6: the flow ``θ' = −∇L(θ) / a(t)`` at time ``T`` is gradient flow at time
    ``τ(T)``. ``num_points`` (odd) nodes per interval ``[0, T]``; the error is ``O(num_points⁻⁴)``
    for smooth ``a``. Pass ``lambda u: 1 / a(u)`` to get the *wrong* clock ``∫₀ᵀ a(u) du``.
    """
    if num_points < 3 or num_points % 2 == 0:
        raise ValueError(f"Invalid num_points: {num_points!r}; expected an odd integer >= 3")
    values = []
    for T in torch.as_tensor(times, dtype=torch.float64).tolist():
        u = torch.linspace(0.0, T, num_points, dtype=torch.float64)
        f = torch.tensor([1.0 / speed(x) for x in u.tolist()], dtype=torch.float64)
        weights = torch.ones(num_points, dtype=torch.float64)
        weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
        values.append((T / (num_points - 1) / 3.0) * (weights * f).sum().item())
    return torch.tensor(values, dtype=torch.float64)


def optimizer_trajectory(
    make_optimizer: OptimizerFactory,
    loss: LossFn,
    U0: Tensor,
    V0: Tensor,
    num_steps: int,
) -> tuple[Tensor, Tensor]:
    r"""Iterates ``(U_t, V_t)``, ``t = 0 … num_steps``, of ``make_optimizer([U, V])`` on ``loss``.

    Any ``torch.optim`` optimizer works; each step calls ``step(closure)`` with a closure that
    clears the gradients and back-propagates. Returns stacks of shape ``(num_steps + 1, n, k)``
    and ``(num_steps + 1, m, k)`` (the start included).
    """
    run = run_factor_optimizer(make_optimizer, U0, V0, loss, num_steps)
    Us = [U0.detach().clone(), *(U for U, _ in run.iterates)]
    Vs = [V0.detach().clone(), *(V for _, V in run.iterates)]
    return torch.stack(Us), torch.stack(Vs)


def balancedness_drift(U: Tensor, V: Tensor) -> Tensor:
    r"""``‖B_t − B_0‖_F`` along a trajectory (stacks ``(T + 1, n, k)``, ``(T + 1, m, k)``).

    ``B = UᵀU − VᵀV`` is conserved by gradient flow and by any flow with one common scalar
    preconditioner (the paper's Proposition A.4); a discrete step of size ``η`` moves it by
    ``O(η²)`` for GD.
    """
    B = balancedness(U, V)
    return torch.linalg.matrix_norm(B - B[:1])


def relative_imbalance(U: Tensor, V: Tensor) -> Tensor:
    r"""``‖UᵀU − VᵀV‖_F / (‖UᵀU‖_F + ‖VᵀV‖_F) ∈ [0, 1]``: 0 for balanced factors, scale-free."""
    gram_U, gram_V = U.mT @ U, V.mT @ V
    den = torch.linalg.matrix_norm(gram_U) + torch.linalg.matrix_norm(gram_V)
    return torch.linalg.matrix_norm(gram_U - gram_V) / den.clamp_min(torch.finfo(den.dtype).tiny)


# --------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------


def attention_logits(X: Tensor, W_Q: Tensor, W_K: Tensor, num_heads: int) -> Tensor:
    r"""Per-head logits ``(X W_{Q,h}ᵀ)(X W_{K,h}ᵀ)ᵀ / √d_head``, shape ``(num_heads, T, T)``.

    ``X`` is ``(T, d_in)``; ``W_Q, W_K`` are ``(num_heads · d_head, d_in)`` in ``nn.Linear``
    layout, head ``h`` owning rows ``h·d_head … (h+1)·d_head − 1``. The logits depend on the
    weights only through ``W_{Q,h}ᵀ W_{K,h}``, hence are unchanged by a rotation ``R_h`` of each
    head's rows (:func:`gaugekit.gauge.rotate_heads`).
    """
    d_head = _split_heads(W_Q, num_heads).shape[-2]  # raises for a width num_heads does not divide
    queries = (X @ W_Q.mT).unflatten(-1, (num_heads, d_head)).transpose(-3, -2)
    keys = (X @ W_K.mT).unflatten(-1, (num_heads, d_head)).transpose(-3, -2)
    return queries @ keys.mT / math.sqrt(d_head)
