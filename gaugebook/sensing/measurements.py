r"""Matrix sensing, the paper's testbed (Section 5 of arXiv 2608.05136).

A planted rank-``r`` matrix ``X_star = U_star V_starᵀ`` (n×n) is observed through ``m`` dense
Gaussian measurements ``y_i = ⟨A_i, X_star⟩`` (no noise). The model is a factorization
``W = U Vᵀ`` with ``U, V`` of shape n×k, ``k ≥ r``, trained on

.. math::  L(U, V) = \frac{1}{m} \sum_{i=1}^{m} \big(⟨A_i, U Vᵀ⟩ - y_i\big)^2 .

With ``m = 2 r (2n − r)`` (twice the degrees of freedom of a rank-``r`` matrix) but
``m < n²`` the problem is under-determined: many ``W`` interpolate, and which one training
reaches is decided by the optimizer. The recovery error ``rec = ‖W − X_star‖_F / ‖X_star‖_F``
measures whether it found the planted one.

Instance for seed ``s`` (bit-for-bit the paper's on CPU). One CPU generator seeded with ``s``
draws, in this order and in float32: ``U_star ~ N(0,1)^{n×r}/√r``, ``V_star ~ N(0,1)^{n×r}/√r``,
``A ~ N(0,1)^{m×n²}`` (not scaled by 1/√m); ``X_star = U_star V_starᵀ``; ``y = A vec(X_star)``
with the row-major ``vec``. Optional validation measurements ``A_val`` are drawn from the same
generator *after* ``A``, so they never change the training instance. Initial factors come from a
second generator seeded with ``s + 7``: ``U`` then ``V``, each ``N(0,1)^{n×k} · init_scale``.
All draws are made in float32 on the CPU and only then cast and moved, so every dtype and
device sees the same instance.

Everything accepts stacks: ``U, V`` of shape ``(B, n, k)`` are ``B`` independent runs.
:class:`SensingBatch` stacks runs on several instances; the measurement operator is then one
matrix product per instance and step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from gaugebook.engine.factor_families import FactorFamily
from gaugekit.gauge import balancedness_norm
from gaugekit.linalg import effective_rank, nuclear_norm

__all__ = [
    "INIT_SEED_OFFSET",
    "SensingBatch",
    "SensingInstance",
    "degrees_of_freedom",
    "default_num_measurements",
    "init_factors",
    "loss_and_grads",
    "make_instance",
    "measure",
    "min_nuclear_norm_solution",
    "recovery_metrics",
    "relative_error",
    "sensing_loss",
    "validation_error",
]

#: The factors of the run with instance seed ``s`` are drawn from a generator seeded ``s + 7``.
INIT_SEED_OFFSET = 7


def degrees_of_freedom(n: int, r: int) -> int:
    """Dimension ``r (2n − r)`` of the manifold of n×n matrices of rank ``r``."""
    return r * (2 * n - r)


def default_num_measurements(n: int, r: int, oversampling: float = 2.0) -> int:
    """``m = ⌊oversampling · r (2n − r)⌋``: the paper uses twice the degrees of freedom."""
    return int(oversampling * degrees_of_freedom(n, r))


def _check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"Invalid {name}: {value!r}; expected an integer >= {minimum}")


def _check_sizes(n: int, r: int, m: int | None, num_val: int, *, r_below_n: bool = False) -> int:
    """Check the sizes of an instance (``r ≤ n``, or ``r < n``); returns ``m``, by default
    :func:`default_num_measurements` ``(n, r)``."""
    _check_positive_int("n", n)
    _check_positive_int("r", r)
    if r > n or (r_below_n and r == n):
        raise ValueError(f"Invalid r: {r!r}; expected an integer {'<' if r_below_n else '<='} "
                         f"n = {n}")
    m = default_num_measurements(n, r) if m is None else m
    _check_positive_int("m", m)
    _check_positive_int("num_val", num_val, minimum=0)
    return m


@dataclass(frozen=True)
class SensingInstance:
    """One planted problem: ``X_star`` (n×n), ``A`` (m×n²), ``y = A vec(X_star)`` and validation.

    ``A_val`` (m_val×n²) and ``y_val`` hold held-out measurements of the same ``X_star``
    (``m_val = 0`` when none were drawn). ``seed`` is the generator seed that made it.
    """

    seed: int
    r: int
    X_star: Tensor
    A: Tensor
    y: Tensor
    A_val: Tensor
    y_val: Tensor

    def loss(self, U: Tensor, V: Tensor) -> Tensor:
        """This instance's :func:`sensing_loss` ``L(U, V) = mean_i (⟨A_i, U Vᵀ⟩ − y_i)²``."""
        return sensing_loss(U, V, self.A, self.y)

    @property
    def n(self) -> int:
        return self.X_star.shape[-1]

    @property
    def m(self) -> int:
        return self.A.shape[0]

    @property
    def num_val(self) -> int:
        return self.A_val.shape[0]


def make_instance(
    seed: int,
    n: int = 40,
    r: int = 3,
    m: int | None = None,
    *,
    num_val: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> SensingInstance:
    """The paper's instance for ``seed`` (see the module docstring), cast to ``dtype``.

    ``m`` defaults to :func:`default_num_measurements` ``(n, r)``. ``y`` and ``y_val`` are
    computed in ``dtype`` from the cast ``A`` and ``X_star``, so ``y = A vec(X_star)`` holds to
    the working precision; in float32 on the CPU they equal the paper's values.
    """
    m = _check_sizes(n, r, m, num_val)
    g = torch.Generator().manual_seed(seed)
    U_star = torch.randn(n, r, generator=g) / math.sqrt(r)
    V_star = torch.randn(n, r, generator=g) / math.sqrt(r)
    A = torch.randn(m, n * n, generator=g)
    A_val = torch.randn(num_val, n * n, generator=g)
    X_star = (U_star @ V_star.T).to(device=device, dtype=dtype)
    A = A.to(device=device, dtype=dtype)
    A_val = A_val.to(device=device, dtype=dtype)
    x = X_star.reshape(-1)
    return SensingInstance(seed, r, X_star, A, A @ x, A_val, A_val @ x)


def init_factors(
    seed: int,
    n: int,
    k: int,
    scale: float = 1e-3,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Initial ``(U, V)`` of the run on instance ``seed``: generator ``seed + 7``, U then V."""
    _check_positive_int("n", n)
    _check_positive_int("k", k)
    if not scale > 0:
        raise ValueError(f"Invalid scale: {scale!r}; expected a number > 0")
    g = torch.Generator().manual_seed(seed + INIT_SEED_OFFSET)
    U = torch.randn(n, k, generator=g) * scale
    V = torch.randn(n, k, generator=g) * scale
    return U.to(device=device, dtype=dtype), V.to(device=device, dtype=dtype)


# --------------------------------------------------------------------------------------------
# loss, gradients, metrics (single instance; leading batch dimensions allowed)
# --------------------------------------------------------------------------------------------


def measure(W: Tensor, A: Tensor) -> Tensor:
    """``A vec(W)`` for ``W`` of shape ``(..., n, n)``: shape ``(..., m)``, row-major ``vec``."""
    return W.flatten(-2) @ A.mT


def sensing_loss(U: Tensor, V: Tensor, A: Tensor, y: Tensor) -> Tensor:
    """Per-run ``L = mean_i (⟨A_i, U Vᵀ⟩ − y_i)²``, shape ``U.shape[:-2]`` (autograd-ready)."""
    return (measure(U @ V.mT, A) - y).square().mean(-1)


def loss_and_grads(U: Tensor, V: Tensor, A: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r"""``(L, G_U, G_V)`` in closed form, without autograd.

    With residuals ``ρ = A vec(W) − y`` and ``G_W = (2/m) Σ_i ρ_i A_i`` (the gradient in ``W``),
    ``G_U = G_W V`` and ``G_V = G_Wᵀ U``. Leading dimensions of ``U, V`` are runs.
    """
    n = U.shape[-2]
    m = A.shape[0]
    residual = measure(U @ V.mT, A) - y
    G_W = ((residual * (2.0 / m)) @ A).unflatten(-1, (n, n))
    return residual.square().mean(-1), G_W @ V, G_W.mT @ U


def relative_error(W: Tensor, X_star: Tensor) -> Tensor:
    """``rec = ‖W − X_star‖_F / ‖X_star‖_F`` over the last two dimensions."""
    return torch.linalg.matrix_norm(W - X_star) / torch.linalg.matrix_norm(X_star)


def validation_error(W: Tensor, A_val: Tensor, y_val: Tensor) -> Tensor:
    r"""``‖A_val vec(W) − y_val‖ / ‖y_val‖``: an estimate of ``rec`` that needs no ``X_star``.

    For Gaussian ``A_val``, ``E (⟨A_i, W − X_star⟩)² = ‖W − X_star‖²_F`` and
    ``E y_i² = ‖X_star‖²_F``, so the ratio estimates ``rec`` with a relative error of order
    ``1/√m_val``. NaN when no validation measurements were drawn.
    """
    if A_val.shape[0] == 0:
        return torch.full(W.shape[:-2], math.nan, dtype=W.dtype, device=W.device)
    residual = measure(W, A_val) - y_val
    return torch.linalg.vector_norm(residual, dim=-1) / torch.linalg.vector_norm(y_val, dim=-1)


def recovery_metrics(
    U: Tensor,
    V: Tensor,
    X_star: Tensor,
    A_val: Tensor | None = None,
    y_val: Tensor | None = None,
    *,
    spectral: bool = True,
) -> dict[str, Tensor]:
    """Per-run metrics of the final factors, computed in float64.

    ``rec`` (relative recovery error), ``val_rec`` (:func:`validation_error`, NaN without
    validation data), ``balancedness`` ``‖UᵀU − VᵀV‖_F`` and, unless ``spectral=False``,
    ``effective_rank`` (``exp`` of the entropy of the normalized singular values of ``W``)
    and ``nuclear_norm`` of ``W``.
    """
    U64, V64, X64 = U.double(), V.double(), X_star.double()
    W = U64 @ V64.mT
    if A_val is None or y_val is None:
        val = torch.full(W.shape[:-2], math.nan, dtype=W.dtype, device=W.device)
    else:
        val = validation_error(W, A_val.double(), y_val.double())
    out = {
        "rec": relative_error(W, X64),
        "val_rec": val,
        "balancedness": balancedness_norm(U64, V64),
    }
    if spectral:
        out["effective_rank"] = effective_rank(W)
        out["nuclear_norm"] = nuclear_norm(W)
    return out


# --------------------------------------------------------------------------------------------
# runs on several instances, stacked
# --------------------------------------------------------------------------------------------


@dataclass
class SensingBatch:
    r"""``B`` runs stacked along dimension 0, run ``b`` on instance ``instances[run_instance[b]]``.

    Runs of one instance share its ``A``: the forward map is one ``(L_s × n²)·(n² × m)``
    matrix product per instance, and so is the gradient. Instances must share ``n``, ``m``,
    ``m_val``, dtype and device. :meth:`select` keeps a subset of the runs (for example when
    some have finished) without copying any instance.

    Padding, for results that do not depend on the batch: the rows of each instance enter its
    matrix products padded with zero rows to at least ``min_rows`` and, in float64, to a
    multiple of 4. On the CPU, MKL's single-precision kernel rounds differently below 4 rows,
    and its double-precision one rounds the rows of a last incomplete block of 4 differently;
    with the padding every run gets the same bits whether it shares its batch with 3 or 300
    others (rows of a product never mix). The padding rows are computed and discarded.
    """

    instances: Sequence[SensingInstance]
    run_instance: Sequence[int]
    min_rows: int = 4
    #: the metrics a factor-training loop records on curves and in the final record
    curve_names: ClassVar[tuple[str, ...]] = ("train_loss", "rec", "val_rec", "balancedness")
    metric_names: ClassVar[tuple[str, ...]] = (
        "rec", "val_rec", "effective_rank", "nuclear_norm", "balancedness")
    _groups: list[tuple[SensingInstance, Tensor, bool]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.instances:
            raise ValueError("Invalid instances: expected at least one SensingInstance")
        first = self.instances[0]
        for inst in self.instances:
            same = (inst.n, inst.m, inst.num_val, inst.A.dtype, inst.A.device)
            if same != (first.n, first.m, first.num_val, first.A.dtype, first.A.device):
                raise ValueError(
                    "Invalid instances: expected equal n, m, num_val, dtype and device, got "
                    f"{same} and {(first.n, first.m, first.num_val, first.A.dtype, first.A.device)}"
                )
        index = torch.as_tensor(list(self.run_instance), dtype=torch.long)
        if index.numel() and (index.min() < 0 or index.max() >= len(self.instances)):
            raise ValueError(
                f"Invalid run_instance: {list(self.run_instance)!r}; expected indices in "
                f"[0, {len(self.instances)})"
            )
        self.run_instance = index.tolist()
        device = first.A.device
        self._groups = []
        for s, inst in enumerate(self.instances):
            rows = torch.nonzero(index == s).flatten()
            if rows.numel():
                whole = rows.numel() == index.numel()
                self._groups.append((inst, rows.to(device), whole))
        self._index = index.to(device)

    @property
    def num_runs(self) -> int:
        return len(self.run_instance)

    @property
    def n(self) -> int:
        return self.instances[0].n

    @property
    def dtype(self) -> torch.dtype:
        return self.instances[0].A.dtype

    @property
    def device(self) -> torch.device:
        return self.instances[0].A.device

    def select(self, keep: Tensor | Sequence[int]) -> SensingBatch:
        """The batch (of this class) of the runs ``keep`` (indices into the current runs, in
        that order)."""
        keep_list = torch.as_tensor(keep, dtype=torch.long).tolist()
        return type(self)(self.instances, [self.run_instance[i] for i in keep_list], self.min_rows)

    def stacked_X_star(self) -> Tensor:
        """``X_star`` of each run, shape ``(B, n, n)``."""
        X = torch.stack([inst.X_star for inst in self.instances])
        return X.index_select(0, self._index)

    def _padded_rows(self, rows: int, dtype: torch.dtype) -> int:
        target = max(rows, self.min_rows)
        return -(-target // 4) * 4 if dtype == torch.float64 else target

    def _per_instance(self, w: Tensor, fn) -> None:
        """Call ``fn(inst, rows, w_rows, whole)`` per instance; ``w_rows`` padded (see above)."""
        for inst, rows, whole in self._groups:
            w_s = w if whole else w.index_select(0, rows)
            short = self._padded_rows(w_s.shape[0], w_s.dtype) - w_s.shape[0]
            if short > 0:
                w_s = torch.cat([w_s, w_s.new_zeros(short, w_s.shape[1])])
            fn(inst, rows, w_s, whole and short <= 0)

    def loss_and_grads(self, U: Tensor, V: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Per-run loss ``(B,)``, gradients ``G_U, G_V`` ``(B, n, k)``: :func:`loss_and_grads`."""
        B, n = U.shape[0], self.n
        w = (U @ V.mT).reshape(B, n * n)
        loss = torch.empty(B, dtype=U.dtype, device=U.device)
        G = torch.empty_like(w)
        scale = 2.0 / self.instances[0].m

        def one(inst: SensingInstance, rows: Tensor, w_s: Tensor, whole: bool) -> None:
            residual = w_s @ inst.A.mT - inst.y
            if whole:
                torch.mean(residual.square(), dim=-1, out=loss)
                torch.mm(residual.mul_(scale), inst.A, out=G)
            else:
                L = rows.numel()
                loss.index_copy_(0, rows, residual.square().mean(-1)[:L])
                G.index_copy_(0, rows, (residual.mul_(scale) @ inst.A)[:L])

        self._per_instance(w, one)
        G_W = G.view(B, n, n)
        return loss, G_W @ V, G_W.mT @ U

    def loss(self, U: Tensor, V: Tensor) -> Tensor:
        """Per-run training loss ``(B,)``."""
        B, n = U.shape[0], self.n
        w = (U @ V.mT).reshape(B, n * n)
        loss = torch.empty(B, dtype=U.dtype, device=U.device)

        def one(inst: SensingInstance, rows: Tensor, w_s: Tensor, whole: bool) -> None:
            residual = w_s @ inst.A.mT - inst.y
            loss.index_copy_(0, rows, residual.square().mean(-1)[: rows.numel()])

        self._per_instance(w, one)
        return loss

    def metrics(self, U: Tensor, V: Tensor, *, spectral: bool = True) -> dict[str, Tensor]:
        """:func:`recovery_metrics` of every run (float64), plus ``train_loss`` at ``(U, V)``.

        ``spectral=False`` skips the SVD (no ``effective_rank`` and ``nuclear_norm``).
        """
        out = recovery_metrics(U, V, self.stacked_X_star(), spectral=spectral)
        B, n = U.shape[0], self.n
        W = (U.double() @ V.double().mT).reshape(B, n * n)
        val = torch.full((B,), math.nan, dtype=torch.float64, device=U.device)
        train = torch.empty(B, dtype=torch.float64, device=U.device)

        def one(inst: SensingInstance, rows: Tensor, w_s: Tensor, whole: bool) -> None:
            L = rows.numel()
            residual = w_s @ inst.A.double().mT - inst.y.double()
            train.index_copy_(0, rows, residual.square().mean(-1)[:L])
            if inst.num_val:
                W_s = w_s.view(-1, n, n)
                err = validation_error(W_s, inst.A_val.double(), inst.y_val.double())
                val.index_copy_(0, rows, err[:L])

        self._per_instance(W, one)
        out["val_rec"] = val
        out["train_loss"] = train
        return out


# --------------------------------------------------------------------------------------------
# the convex reference
# --------------------------------------------------------------------------------------------


def min_nuclear_norm_solution(instance: SensingInstance, solver: str | None = None) -> Tensor:
    r"""``argmin ‖X‖_* subject to A vec(X) = y`` (Recht, Fazel and Parrilo 2010), via cvxpy.

    The convex relaxation the small-initialization gradient flow is conjectured to track. Solved
    in float64 by an established conic solver (Clarabel when installed, else cvxpy's default);
    returns ``X`` (n×n, float64, CPU). Needs the optional dependency ``cvxpy``
    (the ``experiments`` extra).
    """
    import cvxpy as cp
    import numpy as np

    n = instance.n
    A = instance.A.detach().double().cpu().numpy()
    y = instance.y.detach().double().cpu().numpy()
    X = cp.Variable((n, n))
    constraints = [A @ cp.reshape(X, (n * n,), order="C") == y]
    problem = cp.Problem(cp.Minimize(cp.normNuc(X)), constraints)
    if solver is None:
        solver = "CLARABEL" if "CLARABEL" in cp.installed_solvers() else None
    problem.solve(solver=solver)
    if X.value is None:
        raise RuntimeError(f"cvxpy returned no solution (status {problem.status!r})")
    return torch.from_numpy(np.asarray(X.value, dtype=np.float64))


# --------------------------------------------------------------------------------------------
# the family of the stacked trainer (gaugebook.engine.factor_trainer)
# --------------------------------------------------------------------------------------------


def config_init(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
                device: torch.device) -> tuple[Tensor, Tensor]:
    """The initial factors of seed ``seed`` for a sensing-type problem config (``"n"``,
    ``"k"``, ``"init_scale"``): :func:`init_factors`, shared by the sensing and tail families."""
    return init_factors(seed, p["n"], p["k"], p["init_scale"], dtype=dtype, device=device)


def _draw_sensing(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
                  device: torch.device) -> tuple[SensingInstance, tuple[Tensor, Tensor]]:
    """Problem config ``{"n", "r", "k", "m", "num_val", "init_scale"}``: the instance of
    :func:`make_instance` and its initial factors."""
    inst = make_instance(seed, p["n"], p["r"], p["m"], num_val=p["num_val"], dtype=dtype,
                         device=device)
    return inst, config_init(p, seed, dtype, device)


#: kind ``"sensing"``: the zoo's planted low-rank sensing problem, as a family of the trainer
SENSING = FactorFamily("sensing", _draw_sensing, SensingBatch)
