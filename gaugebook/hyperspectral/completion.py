r"""Hyperspectral matrix completion, the paper's second testbed (Table 5).

The matrix (:func:`scene_matrix`). A scene cube ``X`` (rows × cols × bands) is flattened to
pixels × bands (row-major pixels), divided by its global maximum, pixels that are zero in every
band are dropped, and ``n`` = 2,000 random rows are kept (a CPU generator seeded 2026,
``randperm``): ``Y ∈ ℝ^{n × B}``.

The observations (:func:`observation_mask`). For run seed ``s`` each entry is observed
independently with probability ``ρ`` (the density): ``M_{ij} = [u_{ij} < ρ]`` with ``u`` uniform
from a generator seeded ``s + 7``. ``Ω = {(i, j): M_{ij} = 1}``, ``Ω^c`` the held-out entries.

Band centring (:func:`centre_bands`). The target is ``Y_c = Y − 1 μᵀ`` with, per band ``j``,

.. math::  μ_j = \frac{\sum_i M_{ij} Y_{ij}}{\sum_i M_{ij}}   \quad\text{(observed entries only)}.

The paper centred with *all* entries, ``μ_j = \frac1n \sum_i Y_{ij}``, which lets the held-out
entries into the training data (a leak); ``centring="all"`` reproduces it, so that its effect can
be measured.

The model and loss. ``W = U Vᵀ`` with ``U ∈ ℝ^{n×k}``, ``V ∈ ℝ^{B×k}`` (``k`` = 48), initial
factors ``N(0,1)·10^{-2}`` from a generator seeded ``s + 1000`` (``U`` then ``V``, drawn in
float32 on the CPU, then cast), trained on

.. math::  L(U, V) = \frac{1}{|Ω|} \sum_{(i,j) ∈ Ω} \big((U Vᵀ)_{ij} − (Y_c)_{ij}\big)^2,

with gradients ``∇_U L = \frac{2}{|Ω|} R V`` and ``∇_V L = \frac{2}{|Ω|} Rᵀ U`` for
``R = M ⊙ (U Vᵀ − Y_c)``. Metrics: the held-out error
``\mathrm{RMSE}_{Ω^c} = \big(\frac{1}{|Ω^c|} \sum_{Ω^c} (W − Y_c)_{ij}^2\big)^{1/2}`` over *all*
unobserved entries, and the effective rank of ``W`` (:func:`gaugekit.linalg.effective_rank`).

The density rule (:func:`density_for_ratio`). Densities are matched across scenes by the ratio of
observed entries ``m = ρ n B`` to the degrees of freedom of a rank-24 ``n × B`` matrix,
``dof_{24} = 24 (n + B − 24)``: ratios ≈ 1.15 and ≈ 1.9 give the paper's Indian Pines 0.15 / 0.25
(``B`` = 200) and Pavia 0.28 / 0.46 (``B`` = 103) after rounding to two decimals.

The paper's arithmetic (``data_dtype="float32"``). The paper's scripts load the cube as float32,
divide by ``max + 10⁻¹²``, drop the pixels whose row norm is ≤ 10⁻⁸, centre in float32 and draw
the mask's uniforms in float32 (``torch.rand`` with the default dtype) before casting to the run
dtype. The float32 uniforms are another random stream, so they give *another mask* than the
float64 draw; ``data_dtype="float32"`` follows those steps exactly (the Indian Pines and Pavia U
parts, which are compared with the published values run by run), ``"float64"`` (the default,
kept by the records of the other scenes) does the same steps in float64.

The matrix of a scene config (:func:`scene_matrix_from_config`): the scene of
:func:`gaugebook.hyperspectral.scene_refs.load_scene_config`, then :func:`scene_matrix`, cached per
process.

Everything accepts stacks: ``U, V`` of shape ``(R, n, k)``, ``(R, B, k)`` are ``R`` runs;
:class:`CompletionBatch` stacks runs on several instances (several masks).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from gaugebook.engine.factor_families import FactorFamily
from gaugebook.hyperspectral.scene_refs import load_scene_config
from gaugekit.linalg import effective_rank

__all__ = [
    "CENTRINGS",
    "DATA_DTYPES",
    "DENSITY_RATIOS",
    "DOF_RANK",
    "FACTOR_RANK",
    "INIT_SCALE",
    "INIT_SEED_OFFSET",
    "MASK_SEED_OFFSET",
    "MATRIX_SEED",
    "NUM_ROWS",
    "CompletionBatch",
    "CompletionInstance",
    "centre_bands",
    "degrees_of_freedom",
    "density_for_ratio",
    "init_factors",
    "make_instance",
    "observation_mask",
    "sample_ratio",
    "scene_matrix",
    "scene_matrix_from_config",
]

#: The paper's matrix protocol (rows kept, their generator seed, factor rank, init scale).
NUM_ROWS = 2000
MATRIX_SEED = 2026
FACTOR_RANK = 48
INIT_SCALE = 1e-2
#: The mask of run seed ``s`` comes from a generator seeded ``s + 7``, its factors ``s + 1000``.
MASK_SEED_OFFSET = 7
INIT_SEED_OFFSET = 1000
#: The rank whose degrees of freedom set the density, and the two sampling ratios m / dof.
DOF_RANK = 24
DENSITY_RATIOS: tuple[float, float] = (1.15, 1.9)
CENTRINGS: tuple[str, ...] = ("observed", "all")
DATA_DTYPES: tuple[str, ...] = ("float64", "float32")


def _data_dtype(name: str) -> torch.dtype:
    if name not in DATA_DTYPES:
        raise ValueError(f"Invalid data_dtype: {name!r}; expected one of {DATA_DTYPES}")
    return torch.float64 if name == "float64" else torch.float32


def scene_matrix(
    cube: np.ndarray | Tensor, num_rows: int | None = NUM_ROWS, seed: int = MATRIX_SEED,
    *, data_dtype: str = "float64",
) -> Tensor:
    """The pixels × bands matrix ``Y`` of a cube (CPU; see the module docstring), in
    ``data_dtype``: ``"float64"`` divides by the maximum and drops all-zero pixels,
    ``"float32"`` follows the paper's script (``max + 10⁻¹²``, row norm > 10⁻⁸, float32).

    ``num_rows=None`` keeps every kept pixel (in pixel order) instead of a random subset.
    """
    dtype = _data_dtype(data_dtype)
    X = torch.as_tensor(np.asarray(cube), dtype=dtype)
    if X.ndim != 3:
        raise ValueError(f"Invalid cube shape: {tuple(X.shape)}; expected (rows, cols, bands)")
    Y = X.reshape(-1, X.shape[-1])
    top = Y.max()
    if not top > 0:
        raise ValueError(f"Invalid cube: its maximum is {float(top)!r}; expected > 0")
    if dtype == torch.float64:
        Y = Y / top
        Y = Y[(Y != 0).any(dim=1)]
    else:
        Y = Y / (top + 1e-12)
        Y = Y[Y.norm(dim=1) > 1e-8]
    if num_rows is None:
        return Y.contiguous()
    if not 1 <= num_rows <= Y.shape[0]:
        raise ValueError(
            f"Invalid num_rows: {num_rows!r}; expected 1..{Y.shape[0]} (non-zero pixels)")
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(Y.shape[0], generator=g)[:num_rows]
    return Y.index_select(0, idx).contiguous()


@functools.lru_cache(maxsize=8)
def _matrix_cached(scene_json: str, num_rows: int, row_seed: int, data_dtype: str) -> Tensor:
    scene = load_scene_config(json.loads(scene_json))
    return scene_matrix(scene.cube, num_rows, row_seed, data_dtype=data_dtype)


def scene_matrix_from_config(
    scene: Mapping[str, Any], num_rows: int = NUM_ROWS, row_seed: int = MATRIX_SEED,
    data_dtype: str = "float64",
) -> Tensor:
    """The ``n × B`` matrix of a scene config (:mod:`gaugebook.hyperspectral.scenes`), in
    ``data_dtype``
    (cached per process)."""
    key = json.dumps(dict(scene), sort_keys=True, separators=(",", ":"))
    return _matrix_cached(key, num_rows, row_seed, data_dtype)


def degrees_of_freedom(n1: int, n2: int, r: int) -> int:
    """``r (n1 + n2 − r)``: the dimension of the rank-``r`` matrices of size ``n1 × n2``."""
    return r * (n1 + n2 - r)


def sample_ratio(density: float, n: int, bands: int, rank: int = DOF_RANK) -> float:
    """``m / dof_rank`` with ``m = density · n · bands`` (expected observed entries)."""
    return density * n * bands / degrees_of_freedom(n, bands, rank)


def density_for_ratio(
    ratio: float, n: int, bands: int, rank: int = DOF_RANK, digits: int | None = 2
) -> float:
    """The density whose ``m / dof_rank`` is ``ratio``, rounded to ``digits`` decimals
    (``None``: not rounded). Raises when it is not in (0, 1]."""
    rho = ratio * degrees_of_freedom(n, bands, rank) / (n * bands)
    if digits is not None:
        rho = round(rho, digits)
    if not 0 < rho <= 1:
        raise ValueError(
            f"Invalid density: {rho!r} for ratio {ratio!r} at n = {n}, bands = {bands}; "
            "expected a value in (0, 1] (the matrix is too small for this ratio)"
        )
    return float(rho)


def observation_mask(
    n: int, bands: int, density: float, seed: int, *, data_dtype: str = "float64"
) -> Tensor:
    """Boolean ``(n, bands)`` mask, each entry observed with probability ``density``, from a
    CPU generator seeded ``seed + MASK_SEED_OFFSET`` (uniforms drawn in ``data_dtype``: the
    two dtypes give different masks)."""
    if not 0 < density <= 1:
        raise ValueError(f"Invalid density: {density!r}; expected a value in (0, 1]")
    g = torch.Generator().manual_seed(seed + MASK_SEED_OFFSET)
    return torch.rand(n, bands, generator=g, dtype=_data_dtype(data_dtype)) < density


def centre_bands(Y: Tensor, mask: Tensor, centring: str = "observed") -> tuple[Tensor, Tensor]:
    """``(Y − 1 μᵀ, μ)``: band means from the observed entries (``"observed"``) or from all
    entries (``"all"``, the paper's leak). A band with no observed entry gets ``μ_j = 0``."""
    if centring not in CENTRINGS:
        raise ValueError(f"Invalid centring: {centring!r}; expected one of {CENTRINGS}")
    if centring == "all":
        mu = Y.mean(dim=-2)
    else:
        w = mask.to(Y.dtype)
        count = w.sum(dim=-2)
        mu = (w * Y).sum(dim=-2) / count.clamp_min(1.0)
    return Y - mu.unsqueeze(-2), mu


def init_factors(
    seed: int,
    n: int,
    bands: int,
    k: int = FACTOR_RANK,
    scale: float = INIT_SCALE,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[Tensor, Tensor]:
    """``(U, V)``, ``N(0,1)·scale`` of shapes ``(n, k)`` and ``(bands, k)``, drawn in float32 on
    the CPU from a generator seeded ``seed + INIT_SEED_OFFSET`` (``U`` first), then cast."""
    g = torch.Generator().manual_seed(seed + INIT_SEED_OFFSET)
    U = torch.randn(n, k, generator=g, dtype=torch.float32) * scale
    V = torch.randn(bands, k, generator=g, dtype=torch.float32) * scale
    return U.to(dtype=dtype, device=device), V.to(dtype=dtype, device=device)


@dataclass(frozen=True)
class CompletionInstance:
    """One completion problem: centred target ``Y_c`` (n × B), mask, band means, seed."""

    target: Tensor
    mask: Tensor
    mu: Tensor
    density: float
    seed: int
    centring: str

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.target.shape)  # type: ignore[return-value]

    @property
    def num_observed(self) -> int:
        return int(self.mask.sum())


def make_instance(
    Y: Tensor,
    density: float,
    seed: int,
    centring: str = "observed",
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    data_dtype: str = "float64",
) -> CompletionInstance:
    """The instance of run seed ``seed`` on matrix ``Y``: mask and centring (in
    ``data_dtype``, see the module docstring), then cast to ``dtype``."""
    Yd = Y.detach().to(device="cpu", dtype=_data_dtype(data_dtype))
    mask = observation_mask(Yd.shape[0], Yd.shape[1], density, seed, data_dtype=data_dtype)
    if not mask.any() or mask.all():
        raise ValueError(
            f"Invalid density: {density!r}; the mask of seed {seed} observes "
            f"{int(mask.sum())} of {mask.numel()} entries (need some observed and some held out)"
        )
    Yc, mu = centre_bands(Yd, mask, centring)
    return CompletionInstance(Yc.to(dtype=dtype, device=device), mask.to(device),
                              mu.to(dtype=dtype, device=device), float(density), int(seed),
                              centring)


@dataclass
class CompletionBatch:
    """``R`` runs stacked along dim 0, run ``b`` on instance ``instances[run_instance[b]]``.

    Instances must share shape, dtype and device. Runs of one instance share its target and
    mask (broadcast, not copied, when the batch holds one instance).
    """

    instances: Sequence[CompletionInstance]
    run_instance: Sequence[int]
    curve_names: ClassVar[tuple[str, ...]] = ("train_loss", "heldout_rmse")
    metric_names: ClassVar[tuple[str, ...]] = ("heldout_rmse", "effective_rank")
    _target: Tensor = field(init=False, repr=False)
    _obs: Tensor = field(init=False, repr=False)
    _neg_target: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.instances:
            raise ValueError("Invalid instances: expected at least one CompletionInstance")
        first = self.instances[0]
        for inst in self.instances:
            same = (inst.shape, inst.target.dtype, inst.target.device)
            ref = (first.shape, first.target.dtype, first.target.device)
            if same != ref:
                raise ValueError(f"Invalid instances: expected equal shape, dtype and device, "
                                 f"got {same} and {ref}")
        index = [int(i) for i in self.run_instance]
        if any(i < 0 or i >= len(self.instances) for i in index):
            raise ValueError(f"Invalid run_instance: {index!r}; expected indices in "
                             f"[0, {len(self.instances)})")
        self.run_instance = index
        dtype, device = first.target.dtype, first.target.device
        used = sorted(set(index))
        targets = torch.stack([self.instances[i].target for i in used])
        obs = torch.stack([self.instances[i].mask.to(dtype) for i in used])
        if len(used) == 1:
            R = len(index)
            self._target = targets.expand(R, -1, -1)
            self._obs = obs.expand(R, -1, -1)
            self._neg_target = (-targets).expand(R, -1, -1)
        else:
            idx = torch.tensor([used.index(i) for i in index], device=device)
            self._target = targets.index_select(0, idx)
            self._obs = obs.index_select(0, idx)
            self._neg_target = -self._target
        self._n_obs = torch.tensor([float(self.instances[i].num_observed) for i in index],
                                   dtype=dtype, device=device)
        self._n_held = float(first.target.numel()) - self._n_obs

    @property
    def num_runs(self) -> int:
        return len(self.run_instance)

    def select(self, rows: Sequence[int] | Tensor) -> CompletionBatch:
        """The batch of the runs ``rows`` (indices into the current runs, in that order)."""
        keep = torch.as_tensor(rows, dtype=torch.long).tolist()
        return CompletionBatch(self.instances, [self.run_instance[i] for i in keep])

    def residual(self, U: Tensor, V: Tensor) -> Tensor:
        """``U Vᵀ − Y_c`` for every run, shape ``(R, n, B)``."""
        return torch.baddbmm(self._neg_target, U, V.mT)

    def loss_and_grads(self, U: Tensor, V: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(L (R,), ∇_U L (R, n, k), ∇_V L (R, B, k))`` (see the module docstring)."""
        Rm = self.residual(U, V).mul_(self._obs)
        flat = Rm.flatten(1)
        loss = torch.linalg.vecdot(flat, flat) / self._n_obs
        scale = (2.0 / self._n_obs)[:, None, None]
        return loss, (Rm @ V).mul_(scale), (Rm.mT @ U).mul_(scale)

    def metrics(self, U: Tensor, V: Tensor, *, spectral: bool = True) -> dict[str, Tensor]:
        """``train_loss``, ``heldout_rmse`` and (``spectral``) ``effective_rank`` of ``U Vᵀ``."""
        W = U @ V.mT
        E2 = (W - self._target) ** 2
        obs = (E2 * self._obs).sum(dim=(-2, -1))
        total = E2.sum(dim=(-2, -1))
        out = {
            "train_loss": obs / self._n_obs,
            "heldout_rmse": ((total - obs).clamp_min(0.0) / self._n_held).sqrt(),
        }
        if spectral:
            out["effective_rank"] = effective_rank(W)
        return out


def _draw_completion(p: Mapping[str, Any], seed: int, dtype: torch.dtype,
                     device: torch.device) -> tuple[CompletionInstance, tuple[Tensor, Tensor]]:
    """Problem config ``{"scene": {...}, "num_rows", "row_seed", "density", "centring",
    "rank", "init_scale"[, "data_dtype"]}``: the completion instance of seed ``seed`` on the
    scene's matrix (:func:`scene_matrix_from_config`, cached) and its initial factors."""
    data_dtype = p.get("data_dtype", "float64")
    Y = scene_matrix_from_config(p["scene"], p["num_rows"], p["row_seed"], data_dtype)
    inst = make_instance(Y, p["density"], seed, p["centring"], dtype=dtype, device=device,
                         data_dtype=data_dtype)
    n, bands = inst.shape
    init = init_factors(seed, n, bands, int(p["rank"]), float(p["init_scale"]),
                        dtype=inst.target.dtype, device=inst.target.device)
    return inst, init


#: kind ``"hyperspectral"``: completion of a scene's pixels × bands matrix, as a family of the
#: trainer (:mod:`gaugebook.engine.factor_trainer`)
HYPERSPECTRAL = FactorFamily("hyperspectral", _draw_completion, CompletionBatch)
