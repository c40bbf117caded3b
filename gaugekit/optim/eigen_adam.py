r"""Adam in a gauge-covariant eigenbasis (SOAP-style, one-sided): adaptive AND equivariant.

Coordinate-wise Adam breaks the gauge because its coordinates are the parameter's given basis.
Run it instead in a basis that rotates with the gauge, and the gauge cannot see it: for an
``n × k`` factor with the gauge acting on the right (``U → U Q``, ``G → G Q``) the ``k × k``
second-moment statistic ``R = EMA(Gᵀ G)`` transforms as ``R → Qᵀ R Q``, its eigenvectors as
``E → Qᵀ E``, and the gradient *in that basis*, ``G E``, does not change at all. Adam applied to
``G E`` and rotated back with ``Eᵀ`` gives a step that transforms as ``Δ → Δ Q``
(:class:`EigenAdam`; its statistic ``R``, basis ``E``, rotated gradient ``G̃ = G E``, moments
``m̃``, ``v``).

The gauge, the exact condition. Let ``R_s`` be the statistic at the refresh steps ``s`` (on the
gauge side; the statistic of the other side is never used). Under ``G → G Q`` every quantity
transforms as ``R → QᵀRQ``, ``E → QᵀE·P`` with ``P`` a signed permutation, ``G̃, m̃ → ·P``,
``v → ·|P|``, and coordinate-wise Adam commutes with signed permutations. Hence the rule is
gauge-equivariant **whenever every refresh sees a simple spectrum** (``k`` distinct
eigenvalues of ``R_s``, zero counted as an eigenvalue), and generically not otherwise: with a
simple spectrum each eigenvector is fixed up to sign, and sign and order do not matter —
they are fixed (descending eigenvalues, sign by the first moment) only so that one run is
reproducible. When two eigenvalues collide, ``eigh`` returns an arbitrary orthonormal basis of
their eigenspace, which does not rotate with ``Q``, and Adam's per-coordinate denominator
inside that plane breaks the gauge at first order (measured by the tests and in the book's
ecosystem appendix). Near a collision, with gap
``δ``, the eigenvectors are determined only to ``u/δ`` (``u`` the unit round-off), so the
audit residual grows like ``u ‖R‖/δ`` before it jumps at ``δ = 0``. A factor with ``k ≥ n + 2``
(right side) has at least two zero eigenvalues at the first refresh (``rank GᵀG ≤ n``): not
equivariant there.

Collisions, repaired. With ``cluster_tol`` set, eigenvalues closer than ``cluster_tol · λ₁``
form clusters (:func:`cluster_pooling`, computed from the invariant eigenvalues at each
refresh) and ``v`` is averaged over each cluster after every update: inside a cluster the
step is then ``m̃`` times one shared scalar, which commutes with any rotation of the
cluster's eigenspace, so the rule is equivariant for every spectrum (a cluster's mean of
``G̃²`` is the squared norm of ``G``'s projection on the eigenspace, an invariant; the
transfer of a cluster-constant ``v`` is invariant too). The price is adaptivity inside a
cluster. On a simple spectrum with all gaps above the tolerance nothing changes.

Wide layers. The statistic and its ``eigh`` are ``s × s`` with ``s`` the gauge side's width
(``k`` for ``side="right"``, ``n`` for ``"left"``): a refresh costs ``O(s³)``. A parameter
with ``s > max_precond_dim`` (default 1024; ``None``: no limit) is not rotated: its basis is
the identity for good and it is stepped by plain Adam (no ``gram``, ``basis`` or ``pool`` in
its state, no ``eigh``), as SOAP's ``max_precond_dim`` leaves a side unrotated. Gauge: each
parameter's step depends on its own gradients only, so the equivariance above holds
parameter by parameter where the gauge side is rotated (``s ≤ max_precond_dim``), and a
gauge acting on several parameters (``U`` and ``V`` of one product ``UVᵀ``) is kept when all
of them are rotated; a parameter beyond the limit keeps only the symmetries of
coordinate-wise Adam, the signed permutations of its ``s`` coordinates. The gauge acts on
the rank side, so the factors of a rank-``k`` product keep their equivariance for
``k ≤ max_precond_dim`` however large ``n`` is; the limit binds where the gauge side itself
is wide (a ``10 × 2048`` weight with ``side="right"`` would refresh a ``2048 × 2048``
``eigh``). Rotating the other side instead would not restore it: that side's statistic
(``GGᵀ`` for ``side="right"``) is gauge-invariant, and Adam in its eigenbasis still divides
coordinate by coordinate along the gauge side, which ``Q`` mixes.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from gaugekit.optim import distributed as D
from gaugekit.optim import functional as F
from gaugekit.optim._validation import (
    EPS,
    LR,
    WEIGHT_DECAY,
    Hyper,
    betas_check,
    bool_check,
    choice_check,
    invalid,
    real_check,
)
from gaugekit.optim.base import ZooOptimizer

__all__ = ["EigenAdam", "cluster_pooling", "covariant_eigenbasis", "transfer_second_moment"]


def _update_freq_check(name: str, value: Any) -> None:
    """``None`` (the basis stays the identity: plain Adam) or an integer ``>= 1``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise invalid(name, value, "an integer >= 1 or None (never refresh)")


def _max_precond_dim_check(name: str, value: Any) -> None:
    """``None`` (no limit) or an integer ``>= 1``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise invalid(name, value, "an integer >= 1 or None (no limit)")




def _cluster_tol_check(name: str, value: Any) -> None:
    """``None`` (no pooling) or a float in ``[0, 1)``."""
    if value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and 0.0 <= value < 1.0):
        raise invalid(name, value, "None (no pooling) or a float in [0, 1)")


def covariant_eigenbasis(stat: Tensor, reference: Tensor, side: str) -> Tensor:
    r"""Eigenvectors of the symmetric ``stat`` (``s × s``, per matrix of a stack) as columns,
    eigenvalues descending, each column's sign chosen so that the largest-magnitude entry of its
    projection of ``reference`` is positive.

    The projection is ``reference @ e_j`` (``side="right"``, ``reference`` is ``n × s``) or
    ``e_jᵀ @ reference`` (``side="left"``, ``reference`` is ``s × k``): both are gauge-invariant
    when ``reference`` is covariant (the first moment), so the sign is fixed by an invariant.
    A matrix of the stack holding a non-finite entry gets an all-NaN basis (no exception).
    """
    finite = torch.isfinite(stat).all(dim=-1, keepdim=True).all(dim=-2, keepdim=True)
    safe = torch.where(finite, stat, torch.zeros_like(stat))
    _, vecs = torch.linalg.eigh(0.5 * (safe + safe.mT))
    vecs = vecs.flip(-1)  # eigh is ascending: descending eigenvalues
    proj = reference @ vecs if side == "right" else (vecs.mT @ reference).mT  # (..., ·, s)
    idx = proj.abs().argmax(dim=-2, keepdim=True)
    lead = torch.gather(proj, -2, idx)  # (..., 1, s)
    sign = torch.where(lead < 0, -1.0, 1.0).to(vecs.dtype)
    poison = torch.where(finite, 0.0, torch.nan).to(vecs.dtype)
    return vecs * sign + poison


def cluster_pooling(stat: Tensor, tol: float) -> Tensor:
    r"""The ``s × s`` averaging matrix over clusters of (nearly) equal eigenvalues of ``stat``.

    Eigenvalues are taken descending (the order of :func:`covariant_eigenbasis`); neighbours
    ``λ_i ≥ λ_{i+1}`` are in one cluster when ``λ_i − λ_{i+1} ≤ tol · λ_1`` (``λ_1`` the
    largest; an all-zero matrix is one cluster). ``P_ij = 1/|c|`` when ``i, j`` share the
    cluster ``c``, else 0: ``v @ P`` replaces each coordinate's second moment by its cluster's
    mean. ``tol = 0`` pools only exactly equal eigenvalues. Per matrix of a stack.
    """
    finite = torch.isfinite(stat).all(dim=-1, keepdim=True).all(dim=-2, keepdim=True)
    safe = torch.where(finite, stat, torch.zeros_like(stat))
    vals = torch.linalg.eigvalsh(0.5 * (safe + safe.mT)).flip(-1)
    scale = vals[..., :1].abs()
    new_cluster = (vals[..., :-1] - vals[..., 1:]) > tol * scale
    first = torch.zeros_like(vals[..., :1], dtype=torch.bool)
    labels = torch.cat([first, new_cluster], dim=-1).cumsum(-1)  # (..., s)
    same = (labels.unsqueeze(-1) == labels.unsqueeze(-2)).to(stat.dtype)
    return same / same.sum(dim=-1, keepdim=True)


def transfer_second_moment(exp_avg_sq: Tensor, old: Tensor, new: Tensor, side: str) -> Tensor:
    r"""Carry Adam's per-coordinate second moment from basis ``old`` to basis ``new``.

    With ``C = oldᵀ new`` the coordinates change as ``x_new = x_old C`` (right) or
    ``x_new = Cᵀ x_old`` (left); ``v`` is the diagonal of a second-moment matrix, whose diagonal
    in the new basis (cross terms dropped) is ``v C∘C`` (right) or ``(C∘C)ᵀ v`` (left). ``C`` is
    gauge-invariant, and a signed permutation ``C`` permutes ``v`` exactly.
    """
    C = old.mT @ new
    C2 = C * C
    return exp_avg_sq @ C2 if side == "right" else C2.mT @ exp_avg_sq


class EigenAdam(ZooOptimizer):
    r"""Adam run in the eigenbasis of the factor's second-moment statistic on the gauge side.

    Example:
        >>> import torch
        >>> from gaugekit.optim import EigenAdam
        >>> U, V = (torch.randn(n, 3, requires_grad=True) for n in (10, 8))
        >>> optimizer = EigenAdam([U, V], lr=1e-2)
        >>> (U @ V.T - torch.eye(10, 8)).square().sum().backward()
        >>> optimizer.step()

    For every matrix ``θ`` (``n × k`` after the batch dims) with gradient ``G_t``, with
    ``side="right"`` (the gauge acts as ``θ → θ Q``, ``Q ∈ O(k)``; the factor problems):

    .. math::
        m_t = β_1 m_{t-1} + (1-β_1) G_t,

        R_t = β_R R_{t-1} + (1-β_R)\, G_t^\top G_t \quad (k × k),

    at the refresh steps ``t = 1, 1 + K, 1 + 2K, …`` (``K = update_freq``) the basis ``E`` is
    replaced by the eigenvectors of ``R_t`` (:func:`covariant_eigenbasis`: eigenvalues
    descending, signs fixed by the first moment) and the second moment is carried over
    (:func:`transfer_second_moment`); then, with ``G̃ = G_t E`` and ``m̃ = m_t E``,

    .. math::
        v_t = β_2 v_{t-1} + (1-β_2)\, \tilde G \odot \tilde G,

        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\,\Big(\frac{\tilde m/(1-β_1^t)}
        {\sqrt{v_t/(1-β_2^t)} + ε}\Big) E^\top,

    with decoupled weight decay λ applied first (``maximize`` uses ``−G_t``).

    ``m`` is kept in the parameter's own coordinates (so it is carried across refreshes exactly,
    ``m̃`` rotating with ``E``), ``v`` in the current eigenbasis. ``side="left"`` is the mirror
    image for a gauge ``θ → Q θ`` (``Q ∈ O(n)``, e.g. attention's ``W_Q, W_K → A W_Q, A W_K``):
    ``L_t = EMA(G Gᵀ)`` (``n × n``), ``G̃ = Eᵀ G``, step ``E (·)``. ``update_freq=None`` keeps
    ``E = I`` for good: then the rule is exactly :class:`~gaugekit.optim.adam.Adam` (same
    numbers as ``torch.optim.Adam`` with ``weight_decay=0``, and as ``torch.optim.AdamW``
    with ``weight_decay=λ``), a parity the tests check.

    Gauge: equivariant whenever every basis refresh sees a simple spectrum (``k`` distinct
    eigenvalues of the statistic, zero counted), for every spectrum with ``cluster_tol``, on the
    parameters whose gauge side is rotated (``s ≤ max_precond_dim``, default 1024; a wider one
    is stepped by plain Adam, with no ``eigh``). The derivation, collisions and their repair,
    and the limit on wide layers are in the module docstring.

    Dtypes: float32 and float64 parameters only. ``torch.linalg.eigh`` has no float16 or
    bfloat16 kernel, so a half-precision parameter is refused at construction (``ValueError``
    naming it); keep the parameters in float32 and let ``torch.autocast`` run the forward pass
    in low precision.

    Deviations from SOAP (Vyas et al., 2024): one-sided (only the gauge side's statistic; a
    two-sided rotation would add the ``n × n`` invariant Gram, harmless in exact arithmetic but
    rank-deficient for ``n > k``, whose null space would be a collision); eigenvectors by
    ``eigh`` at every refresh instead of one power-iteration/QR step; ``v`` transferred by
    ``C∘C`` instead of being re-indexed; no grafting, no merging of dimensions.

    State: ``step``, ``exp_avg`` (``m``, parameter coordinates), ``exp_avg_sq`` (``v``,
    eigenbasis coordinates), ``gram`` (``R`` or ``L``), ``basis`` (``E``), and with
    ``cluster_tol`` ``pool`` (the cluster averaging matrix); a parameter beyond
    ``max_precond_dim`` holds the first three only.

    Args:
        params: matrices (``batch_dims + 2`` dims each) or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v̂`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
        gram_beta: ``β_R`` in ``[0, 1)``, the decay of the statistic (SOAP's 0.95).
        update_freq: refresh period ``K >= 1`` of the basis, or ``None`` (``E = I`` forever).
        side: ``"right"`` (statistic ``GᵀG``, gauge ``θ → θQ``) or ``"left"`` (``GGᵀ``,
            gauge ``θ → Qθ``).
        cluster_tol: ``None`` (no pooling) or the relative eigenvalue gap ``[0, 1)`` below which
            eigenvalues share one second moment (see "Collisions, repaired").
        max_precond_dim: the widest gauge side ``s`` that is rotated, an integer ``>= 1``, or
            ``None`` (no limit); a wider parameter is stepped by plain Adam (see "Wide layers").
    """

    matrix_only = True
    rule_keys = ("side",)
    later_keys = {"max_precond_dim": None}
    hyper_checks = {
        "lr": LR,
        "betas": betas_check(),
        "eps": EPS,
        "gram_beta": real_check(0.0, 1.0, high_open=True, per_run=False),
        "update_freq": _update_freq_check,
        "side": choice_check("right", "left"),
        "cluster_tol": _cluster_tol_check,
        "max_precond_dim": _max_precond_dim_check,
        "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, weight_decay: Hyper = 0.0, *, gram_beta: float = 0.95,
        update_freq: int | None = 10, side: str = "right", cluster_tol: float | None = None,
        max_precond_dim: int | None = 1024, maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "gram_beta": gram_beta, "update_freq": update_freq, "side": side,
            "cluster_tol": cluster_tol, "max_precond_dim": max_precond_dim, "maximize": maximize,
            "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)
        for group in self.param_groups:
            for p in group["params"]:
                if D.is_sharded(p):
                    raise ValueError(
                        f"Invalid params: a sharded DTensor of shape {tuple(p.shape)}; EigenAdam "
                        "needs the whole factor (its statistic, basis and moments live in the "
                        "rotated coordinates): keep this parameter replicated (leave its module "
                        "out of fully_shard) or use SharedScaleAdam, Muon or Shampoo, which "
                        "support sharded parameters"
                    )

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_eigh_dtypes(group, "eigenbasis")

    def _update_group(self, group: dict[str, Any]) -> None:
        side = group["side"]
        freq = group["update_freq"]
        gram_beta = group["gram_beta"]
        limit = group["max_precond_dim"]
        for p, g in self._with_grad(group["params"]):
            g = F.signed(g, group["maximize"])
            lr = self._hyper(group, "lr", p)
            F.decoupled_decay_(p, lr=lr, weight_decay=self._hyper(group, "weight_decay", p))
            state = self._state(p, "exp_avg", "exp_avg_sq", step=True)
            s = p.shape[-1] if side == "right" else p.shape[-2]
            rotated = limit is None or s <= limit  # else a wide gauge side: plain Adam (E = I)
            if rotated and "basis" not in state:
                batch = p.shape[:-2]
                eye = torch.eye(s, dtype=p.dtype, device=p.device)
                state["gram"] = p.new_zeros(batch + (s, s))
                state["basis"] = eye.expand(batch + (s, s)).clone()
                if group["cluster_tol"] is not None:
                    state["pool"] = eye.expand(batch + (s, s)).clone()
            step = state["step"]
            beta1, beta2 = self._hyper(group, "betas", p)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            E = state["basis"] if rotated else None
            F.ema_(m, g, beta1)
            if E is not None and freq is not None:
                outer = g.mT @ g if side == "right" else g @ g.mT
                F.ema_(state["gram"], outer, gram_beta)
                if (step - 1) % freq == 0:
                    new = covariant_eigenbasis(state["gram"], m, side)
                    v.copy_(transfer_second_moment(v, E, new, side))
                    E.copy_(new)
                    if "pool" in state:
                        state["pool"].copy_(cluster_pooling(state["gram"], group["cluster_tol"]))
            if E is None:
                g_rot, m_rot = g, m
            elif side == "right":
                g_rot, m_rot = g @ E, m @ E
            else:
                g_rot, m_rot = E.mT @ g, E.mT @ m
            F.ema_(v, g_rot * g_rot, beta2)
            if "pool" in state:  # one second moment per eigenvalue cluster
                P = state["pool"]
                v.copy_(v @ P if side == "right" else P.mT @ v)
            m_hat = F.bias_corrected(m_rot, beta1, step)
            v_hat = F.bias_corrected(v, beta2, step)
            direction = m_hat / (v_hat.sqrt() + self._hyper(group, "eps", p))
            if E is not None:
                direction = direction @ E.mT if side == "right" else E @ direction
            p.sub_(lr * direction)
