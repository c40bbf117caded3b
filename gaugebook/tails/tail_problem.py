r"""Matrix sensing of a low-rank head plus a spectral tail (Section 8 of arXiv 2608.05136).

The target is no longer exactly low rank. With the planted rank-``r`` head
``X_3 = U_star V_starᵀ`` of :mod:`gaugebook.sensing.measurements` and a tail ``E_⊥``,

.. math::  X = \sqrt{1 - τ^2}\, X_3 + τ\, E_⊥ , \qquad 0 ≤ τ ≤ 1,

where ``E_⊥ = P_U^⊥ G P_V^⊥ · ‖X_3‖_F / ‖P_U^⊥ G P_V^⊥‖_F`` is the part of a Gaussian n×n
matrix ``G`` orthogonal to the column space of ``X_3`` (projector ``P_U^⊥ = I − Q_U Q_Uᵀ``,
``Q_U`` an orthonormal basis of ``span U_star``) and to its row space (``P_V^⊥``), scaled to
``‖E_⊥‖_F = ‖X_3‖_F``. Since ``⟨X_3, E_⊥⟩ = 0``, ``‖X‖_F = ‖X_3‖_F`` for every ``τ``, the tail
carries the fraction ``τ²`` of the energy, and ``‖τ E_⊥‖_F = τ ‖X_3‖_F``. Every measurement,
the loss and ``rec = ‖W − X‖_F / ‖X‖_F`` refer to the full ``X``.

Instance for seed ``s``. One CPU generator seeded with ``s`` draws, in this order and in
float32: ``U_star``, ``V_star`` (as in :func:`~gaugebook.sensing.measurements.make_instance`,
so the head is the sensing zoo's ``X_star`` up to the rounding of the product), then
``G ~ N(0,1)^{n×n}``, then ``A ~ N(0,1)^{m×n²}`` and the validation measurements. ``G`` is
drawn for every ``τ``, also ``τ = 0``: the tail family's ``A`` differs from the zoo's at every
``τ`` and is the same for all ``τ`` of a seed, so a curve over ``τ`` changes only the target.
The head's product ``U_star V_starᵀ``, the projections and the mixing are computed in float64
from the float32 draws, so ``E_⊥`` is orthogonal to the head to float64 round-off; then ``X``
is cast to the working dtype. Initial factors:
:func:`~gaugebook.sensing.measurements.init_factors`.

:class:`TailBatch` is a :class:`~gaugebook.sensing.measurements.SensingBatch` whose metrics
add how well the head and the tail are fitted separately: with ``W`` the learned matrix,
``head_rec = ‖P_U W P_V − √(1−τ²) X_3‖_F / ‖√(1−τ²) X_3‖_F`` and
``tail_rec = ‖P_U^⊥ W P_V^⊥ − τ E_⊥‖_F / ‖τ E_⊥‖_F`` (NaN at ``τ = 0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from gaugebook.engine.factor_families import FactorFamily
from gaugebook.sensing.measurements import (
    SensingBatch,
    SensingInstance,
    _check_sizes,
    config_init,
)

__all__ = [
    "TailBatch",
    "TailInstance",
    "orthogonal_tail",
    "make_tail_instance",
    "split_errors",
]


@dataclass(frozen=True)
class TailInstance(SensingInstance):
    """A sensing instance whose ``X_star`` is the full ``X = √(1−τ²) X_3 + τ E_⊥``.

    Besides the :class:`~gaugebook.sensing.measurements.SensingInstance` fields: ``tau``,
    the head ``head = X_3`` (n×n), the unit-energy tail ``E_perp`` (``‖E_perp‖_F = ‖X_3‖_F``)
    and orthonormal bases ``Q_U``, ``Q_V`` (n×r) of the head's column and row spaces.
    """

    tau: float = 0.0
    head: Tensor | None = None
    E_perp: Tensor | None = None
    Q_U: Tensor | None = None
    Q_V: Tensor | None = None


def orthogonal_tail(G: Tensor, Q_U: Tensor, Q_V: Tensor, norm: float | Tensor) -> Tensor:
    r"""``P_U^⊥ G P_V^⊥`` scaled to Frobenius norm ``norm`` (``P^⊥ = I − Q Qᵀ``, ``Q`` orthonormal).

    Computed as ``G − Q_U (Q_Uᵀ G) − (G Q_V) Q_Vᵀ + Q_U (Q_Uᵀ G Q_V) Q_Vᵀ``, in ``G``'s dtype.
    """
    QtG = Q_U.mT @ G
    E = G - Q_U @ QtG - (G @ Q_V) @ Q_V.mT + Q_U @ (QtG @ Q_V) @ Q_V.mT
    return E * (norm / torch.linalg.matrix_norm(E))


def make_tail_instance(
    seed: int,
    tau: float,
    n: int = 40,
    r: int = 3,
    m: int | None = None,
    *,
    num_val: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> TailInstance:
    """The tail instance of ``seed`` at mixing ``tau`` (see the module docstring).

    ``m`` defaults to :func:`~gaugebook.sensing.measurements.default_num_measurements`
    ``(n, r)``; needs ``r < n`` (the tail lives in the complement of the head's spaces).
    """
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 <= tau <= 1.0:
        raise ValueError(f"Invalid tau: {tau!r}; expected a number in [0, 1]")
    tau = float(tau)
    m = _check_sizes(n, r, m, num_val, r_below_n=True)
    g = torch.Generator().manual_seed(seed)
    U_star = torch.randn(n, r, generator=g) / math.sqrt(r)
    V_star = torch.randn(n, r, generator=g) / math.sqrt(r)
    G = torch.randn(n, n, generator=g)
    A = torch.randn(m, n * n, generator=g)
    A_val = torch.randn(num_val, n * n, generator=g)
    U64, V64 = U_star.double(), V_star.double()
    head = U64 @ V64.T  # in float64: exactly in the span of Q_U, Q_V up to round-off
    Q_U = torch.linalg.qr(U64).Q
    Q_V = torch.linalg.qr(V64).Q
    E_perp = orthogonal_tail(G.double(), Q_U, Q_V, torch.linalg.matrix_norm(head))
    X = math.sqrt(1.0 - tau * tau) * head + tau * E_perp

    def cast(t: Tensor) -> Tensor:
        return t.to(device=device, dtype=dtype)

    X_star, A, A_val = cast(X), cast(A), cast(A_val)
    x = X_star.reshape(-1)
    return TailInstance(
        seed, r, X_star, A, A @ x, A_val, A_val @ x,
        tau=tau, head=cast(head), E_perp=cast(E_perp), Q_U=cast(Q_U), Q_V=cast(Q_V),
    )


def split_errors(W: Tensor, instance: TailInstance) -> dict[str, Tensor]:
    r"""``head_rec`` and ``tail_rec`` of ``W`` (``(..., n, n)``) in float64 (module docstring).

    ``tail_rec`` is NaN at ``τ = 0`` (there is no tail to fit).
    """
    W = W.double()
    Q_U, Q_V = instance.Q_U.double(), instance.Q_V.double()
    head_target = math.sqrt(1.0 - instance.tau ** 2) * instance.head.double()
    tail_target = instance.tau * instance.E_perp.double()
    head_part = Q_U @ (Q_U.mT @ W @ Q_V) @ Q_V.mT
    QtW = Q_U.mT @ W
    tail_part = W - Q_U @ QtW - (W @ Q_V) @ Q_V.mT + Q_U @ (QtW @ Q_V) @ Q_V.mT
    head_rec = (torch.linalg.matrix_norm(head_part - head_target)
                / torch.linalg.matrix_norm(head_target))
    if instance.tau == 0.0:
        tail_rec = torch.full_like(head_rec, math.nan)
    else:
        tail_rec = (torch.linalg.matrix_norm(tail_part - tail_target)
                    / torch.linalg.matrix_norm(tail_target))
    return {"head_rec": head_rec, "tail_rec": tail_rec}


@dataclass
class TailBatch(SensingBatch):
    """A :class:`~gaugebook.sensing.measurements.SensingBatch` of :class:`TailInstance` runs
    whose :meth:`TailBatch.metrics` add ``head_rec`` and ``tail_rec`` (:func:`split_errors`)."""

    curve_names: ClassVar[tuple[str, ...]] = (
        "train_loss", "rec", "val_rec", "balancedness", "head_rec", "tail_rec")
    metric_names: ClassVar[tuple[str, ...]] = (
        "rec", "val_rec", "effective_rank", "nuclear_norm", "balancedness", "head_rec",
        "tail_rec")

    def metrics(self, U: Tensor, V: Tensor, *, spectral: bool = True) -> dict[str, Tensor]:
        """:meth:`~gaugebook.sensing.measurements.SensingBatch.metrics` plus ``head_rec`` and
        ``tail_rec`` (:func:`split_errors`)."""
        out = super().metrics(U, V, spectral=spectral)
        W = U.double() @ V.double().mT
        head = torch.empty(W.shape[0], dtype=torch.float64, device=W.device)
        tail = torch.empty_like(head)
        for inst, rows, _ in self._groups:
            e = split_errors(W.index_select(0, rows), inst)
            head.index_copy_(0, rows, e["head_rec"])
            tail.index_copy_(0, rows, e["tail_rec"])
        out["head_rec"] = head
        out["tail_rec"] = tail
        return out


def _draw_tail(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
               device: torch.device) -> tuple[Any, tuple[Tensor, Tensor]]:
    """The sensing config plus ``"tau"``: the instance of :func:`make_tail_instance`, the
    sensing initial factors."""
    inst = make_tail_instance(seed, p["tau"], p["n"], p["r"], p["m"], num_val=p["num_val"],
                              dtype=dtype, device=device)
    return inst, config_init(p, seed, dtype, device)


#: kind ``"spectral_tail"``: sensing of a low-rank head plus a spectral tail at ``tau``, as a
#: family of the trainer (:mod:`gaugebook.engine.factor_trainer`)
TAILS = FactorFamily("spectral_tail", _draw_tail, TailBatch)
