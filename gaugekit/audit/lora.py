r"""The twin audit of a LoRA model: does the optimizer keep LoRA's gauge?

The gauge of a LoRA layer
-------------------------
A LoRA layer computes ``y = W₀ x + s · B A x`` (Hu et al., 2021) with ``A`` of shape
``(r, in)``, ``B`` of shape ``(out, r)`` and the scale ``s`` (peft's ``scaling[adapter]``,
``lora_alpha / r``). The layer sees its adapter only through the product ``B A``, and for every
invertible ``R ∈ GL(r)``

    ``(A, B) → (R⁻¹ A, B R)``  keeps  ``B R R⁻¹ A = B A``,

so every loss of the model is invariant and its gradients are covariant:
``G_{R⁻¹A} = Rᵀ G_A``, ``G_{BR} = G_B R⁻ᵀ``. The orthogonal part ``R = Q ∈ O(r)`` acts as
``(Qᵀ A, B Q)`` and also keeps ``‖A‖²_F + ‖B‖²_F``. It is the paper's gauge
``(U, V) → (U R, V R⁻ᵀ)`` with ``U = B``, ``V = Aᵀ`` (:mod:`gaugekit.audit.factors`,
``layout="AB"``); each LoRA layer has its own ``R``.

Which optimizers keep it (what the twin audit of this module measures; float64):

* SGD (and heavy ball) keep ``O(r)``: the step ``−lr G`` maps like the factor under an
  orthogonal ``R``, but not under a general one (``G_{R⁻¹A} = Rᵀ G_A`` is not ``R⁻¹ G_A``);
* shared-scale Adam and Muon keep ``O(r)`` for the same reason (a scalar denominator; the
  polar factor ``msign(QᵀG) = Qᵀ msign(G)``) and break ``GL(r)``;
* coordinate-wise Adam/AdamW break both: ``√v̂`` is taken entry by entry in the given basis;
* ScaledGD in layout ``"AB"`` (:class:`~gaugekit.optim.ScaledGD`) keeps ``GL(r)`` undamped and
  ``O(r)`` damped (its docstring has the proof); undamped it cannot start from peft's default
  ``B = 0`` (``BᵀB`` is singular);
* LoRA-RITE (``pytorch_optimizer.LoRARite``, Yen et al., 2024) keeps ``GL(r)`` when both
  factors of every pair have rank ``r``: its "unmagnified" gradients ``G pinv(R)`` (``R`` from the
  QR of the other factor) are then covariant. A factor of rank below ``r`` (``out < r``) makes
  ``pinv(R_B R) ≠ R⁻¹ pinv(R_B)`` for a non-orthogonal ``R``: ``GL(r)`` breaks, ``O(r)`` holds.
  At ``B = 0`` both twins step alike, but a ``B`` of size ``1e-7`` is magnified by ``pinv(R_B)``
  ``≈ 1e7`` (damped ScaledGD alike): the rule is not continuous there, which is why the noise
  twin leaves a zero factor at zero (:func:`lora_twin`). ``bench/audit_lora.py`` prints the
  table.

The twins
---------
:func:`lora_twin` deep-copies a model and changes every LoRA pair of one adapter:

* ``"orthogonal"``: ``R = Q`` Haar on ``O(r)`` (:func:`gaugekit.gauge.haar_orthogonal`);
* ``"general"``: ``R`` from :func:`gaugekit.gauge.random_gl` (``cond(R) = condition_number``,
  ``|det R| = 1``), far from orthogonal;
* ``"identity"``: ``R = I`` through the same code path; the copy is bit-identical
  (``solve(I, A)`` and ``B I`` are exact in floating point), so a deterministic optimizer drifts
  **exactly** 0 on it: the control that the machinery adds no drift;
* ``"noise"``: ``A, B += scale · N(0, 1)`` in the original basis (a factor that is exactly
  zero stays zero, as in the gauge twins): the yardstick of ordinary sensitivity to a
  perturbation (a chaotic run separates it as fast as a gauge twin).

The group elements are drawn pair by pair, in module order, from one
``torch.Generator().manual_seed(seed)`` in float64 and applied in float64
(``A ← solve(R, A)``, never an inverse; ``B ← B R``), then rounded to the parameter's dtype.

The drift
---------
Per LoRA pair, of the products ``P = s · B A`` (:func:`lora_products`, float64):

    ``drift = ‖P_base − P_twin‖_F / max(‖P_base‖_F, tiny)``  (:func:`lora_drift`),

measured after every optimizer step; a twin's drift is the largest over its pairs and steps.
:func:`audit_lora_twins` decides each group's verdict with the rule of the other audits
(:func:`~gaugekit.audit.factor_results.decide_verdict`): a gauge twin's drift at or below the
round-off threshold of the dtype (``gaugekit.audit.twin_parts.verdict_threshold``: 1e-8 in
float64, 1e-3 in float32) keeps the gauge; above it, more than ``CHAOS_FACTOR = 10`` times the
noise twin's drift breaks it; within that factor the run is chaotic. A run whose base products
did not move, or that diverged, cannot be judged (an optimizer that skips every update would
otherwise "keep" every gauge).

What is not recognised
----------------------
:func:`find_lora_pairs` recognises LoRA layers by their structure (it never imports peft): a
module with ``lora_A`` and ``lora_B`` that are ``nn.ModuleDict`` of ``nn.Linear`` keyed by the
adapter name (peft's LoRA layers) or plain ``nn.Linear`` layers, and a ``scaling`` that is a
dict keyed by adapter name (peft), a number, or absent (1). peft's embedding LoRA
(``lora_embedding_A``/``lora_embedding_B``) is not seen; a convolutional LoRA or an ``lora_A``
with a bias is refused. Whatever else reads ``A`` or ``B`` outside the product (a penalty on
``A``, a nonlinearity between ``A`` and ``B``) is not a gauge symmetry: :func:`audit_lora_twins`
evaluates each gauge twin before training and raises when it is not the same function.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from gaugekit.audit.factor_results import (
    GROUP_NAMES,
    KEEPS,
    GaugeVerdict,
    decide_verdict,
    describe_optimizer,
    low_precision_step,
    optimizer_hyperparameters,
    optimizer_name,
    text_table,
)
from gaugekit.audit.function_check import cast_floats, same_function
from gaugekit.audit.twin_parts import (
    ForwardFn,
    _evaluate,
    _step_in_lockstep,
    rel_distance,
    verdict_resolution,
    verdict_threshold,
)
from gaugekit.gauge import haar_orthogonal, random_gl

__all__ = [
    "LORA_GROUPS",
    "LORA_PARAMETER_ORDERS",
    "LORA_TWIN_KINDS",
    "LoraOptimizerFactory",
    "LoraPair",
    "LoraTwinAuditResult",
    "LoraTwinTrace",
    "apply_lora_gauge",
    "audit_lora_twins",
    "draw_lora_gauges",
    "find_lora_pairs",
    "lora_drift",
    "lora_param_groups",
    "lora_parameters",
    "lora_products",
    "lora_twin",
    "products_drift",
]

#: The two gauge groups of a LoRA pair, ``O(r)`` and ``GL(r)``.
LORA_GROUPS: tuple[str, ...] = ("orthogonal", "general")
#: The twins :func:`lora_twin` builds: the two gauge twins, the ``R = I`` copy and the noise twin.
LORA_TWIN_KINDS: tuple[str, ...] = ("orthogonal", "general", "identity", "noise")
#: The orders of :func:`lora_parameters`: ``[A₁, B₁, …]`` or ``[B₁, A₁, …]``.
LORA_PARAMETER_ORDERS: tuple[str, ...] = ("AB", "BA")


# --------------------------------------------------------------------------------------------
# the pairs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LoraPair:
    """One LoRA layer's adapter: ``W = W₀ + scaling · B A``.

    Equality is identity (the fields hold tensors); the parameters are the model's own, so
    changing them in place changes the model.

    Attributes:
        name: the module's name in the model (``model.get_submodule(name)``), e.g.
            ``"base_model.model.blocks.0.q"`` in a peft model.
        A: ``lora_A``'s weight, shape ``(r, in)``.
        B: ``lora_B``'s weight, shape ``(out, r)``.
        scaling: ``s`` (peft's ``scaling[adapter]``).
    """

    name: str
    A: nn.Parameter
    B: nn.Parameter
    scaling: float

    @property
    def rank(self) -> int:
        """``r``: the rows of ``A`` (the columns of ``B``)."""
        return int(self.A.shape[0])


def _adapter_layer(container: Any, adapter: str) -> nn.Module | None:
    """The adapter's layer in a ``ModuleDict`` (``None`` when the adapter is absent), or the
    container itself when it is a bare layer."""
    if isinstance(container, nn.ModuleDict):
        return container[adapter] if adapter in container else None
    return container


def _scaling(module: nn.Module, name: str, adapter: str) -> float:
    scaling = getattr(module, "scaling", 1.0)
    if isinstance(scaling, dict):
        if adapter not in scaling:
            raise ValueError(
                f"Invalid model: the LoRA layer {name!r} has no scaling for adapter "
                f"{adapter!r}; expected scaling[{adapter!r}] (it has {sorted(scaling)})"
            )
        scaling = scaling[adapter]
    if isinstance(scaling, Tensor) and scaling.numel() == 1:
        scaling = scaling.item()
    if isinstance(scaling, bool) or not isinstance(scaling, int | float):
        raise ValueError(
            f"Invalid model: the LoRA layer {name!r} has scaling {scaling!r}; expected a "
            f"number or a dict adapter -> number"
        )
    return float(scaling)


def _embedding_pair(module: nn.Module, name: str, adapter: str) -> LoraPair | None:
    """peft's LoRA of an ``nn.Embedding``: ``lora_embedding_A[adapter]`` ``(r, vocab)`` and
    ``lora_embedding_B[adapter]`` ``(dim, r)``, whose product ``s · B A`` is the transposed
    change of the table; ``None`` for any other module."""
    emb_A = getattr(module, "lora_embedding_A", None)
    emb_B = getattr(module, "lora_embedding_B", None)
    if not (isinstance(emb_A, nn.ParameterDict) and isinstance(emb_B, nn.ParameterDict)
            and adapter in emb_A and adapter in emb_B):
        return None
    A, B = emb_A[adapter], emb_B[adapter]
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[1]:
        raise ValueError(
            f"Invalid model: the LoRA embedding {name!r} has weights of shapes "
            f"{tuple(A.shape)} and {tuple(B.shape)}; expected A (r, vocab) and B (dim, r)"
        )
    return LoraPair(name=name, A=A, B=B, scaling=_scaling(module, name, adapter))


def find_lora_pairs(model: nn.Module, adapter: str = "default") -> list[LoraPair]:
    """Every LoRA pair of ``adapter`` in ``model``, in module order (``model.named_modules()``).

    A LoRA layer is a module with attributes ``lora_A`` and ``lora_B`` that are either
    ``nn.ModuleDict`` of ``nn.Linear`` keyed by adapter name (peft's layers; a layer without
    ``adapter`` is skipped) or ``nn.Linear`` layers themselves (``adapter`` is then unused);
    its ``scaling`` is read from ``scaling[adapter]`` (a dict, as peft's), a number, or taken
    as 1 when the module has none. peft is never imported. peft's LoRA of an ``nn.Embedding``
    (``lora_embedding_A``/``lora_embedding_B``) is a pair too, ``A`` ``(r, vocab)``; a DoRA
    layer's magnitude vector is not in any pair, and a warning says so.

    Raises:
        ValueError: no LoRA layer of ``adapter`` (the message names what was looked for and the
            adapters seen), or a LoRA layer that is not a pair of ``nn.Linear`` with weights
            ``(r, in)`` and ``(out, r)`` and no bias on ``lora_A``.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"Invalid model: {type(model).__name__}; expected an nn.Module")
    pairs: list[LoraPair] = []
    seen: set[str] = set()
    dora: list[str] = []
    for name, module in model.named_modules():
        embedding = _embedding_pair(module, name, adapter)
        if embedding is not None:
            pairs.append(embedding)
            continue
        magnitude = getattr(module, "lora_magnitude_vector", None)
        if isinstance(magnitude, nn.ModuleDict) and adapter in magnitude:
            dora.append(name)
        lora_A, lora_B = getattr(module, "lora_A", None), getattr(module, "lora_B", None)
        if not (isinstance(lora_A, nn.Module) and isinstance(lora_B, nn.Module)):
            continue
        if isinstance(lora_A, nn.ModuleDict):
            seen.update(lora_A.keys())
        layer_A, layer_B = _adapter_layer(lora_A, adapter), _adapter_layer(lora_B, adapter)
        if layer_A is None or layer_B is None:
            continue
        if not (isinstance(layer_A, nn.Linear) and isinstance(layer_B, nn.Linear)):
            raise ValueError(
                f"Invalid model: the LoRA layer {name!r} holds {type(layer_A).__name__} and "
                f"{type(layer_B).__name__}; expected nn.Linear lora_A and lora_B (convolutional "
                f"LoRA is not supported)"
            )
        A, B = layer_A.weight, layer_B.weight
        if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[1]:
            raise ValueError(
                f"Invalid model: the LoRA layer {name!r} has weights of shapes "
                f"{tuple(A.shape)} and {tuple(B.shape)}; expected A (r, in) and B (out, r)"
            )
        if layer_A.bias is not None:
            raise ValueError(
                f"Invalid model: the LoRA layer {name!r} has a bias on lora_A; expected none "
                f"(the gauge would have to act on it too)"
            )
        pairs.append(LoraPair(name=name, A=A, B=B, scaling=_scaling(module, name, adapter)))
    if dora:
        warnings.warn(
            f"find_lora_pairs: {len(dora)} LoRA layer(s) are DoRA ({dora[0]!r}, ...): each "
            f"also trains a magnitude vector (lora_magnitude_vector[{adapter!r}]), which is not "
            f"part of a pair, so an optimizer built on the pairs leaves it untrained; the "
            f"gauge (R^-1 A, B R) keeps B A and so DoRA's function: add the magnitudes to the "
            f"optimizer to train as DoRA does", stacklevel=2)
    if not pairs:
        others = f" (adapters seen: {sorted(seen)})" if seen else ""
        raise ValueError(
            f"Invalid model: no LoRA layer of adapter {adapter!r} found{others}; expected "
            f"modules with lora_A and lora_B (nn.ModuleDict of nn.Linear keyed by adapter "
            f"name, as peft's LoRA layers, or nn.Linear layers) and a scaling"
        )
    return pairs


def _check_pairs(pairs: Sequence[LoraPair]) -> list[LoraPair]:
    pairs = list(pairs)
    if not pairs or not all(isinstance(p, LoraPair) for p in pairs):
        raise ValueError(
            f"Invalid pairs: {pairs!r}; expected a non-empty sequence of LoraPair "
            f"(find_lora_pairs)"
        )
    return pairs


def lora_parameters(pairs: Sequence[LoraPair], layout: str = "AB") -> list[nn.Parameter]:
    """The pairs' parameters in one flat list, pair after pair.

    ``layout="AB"``: ``[A₁, B₁, A₂, B₂, …]``, the order ``pytorch_optimizer.LoRARite`` expects
    (its left factor ``A`` with the rank on dim 0, ``lora_l_dim=0``; its right factor ``B`` with
    the rank last, ``lora_r_dim=-1``). ``layout="BA"``: ``[B₁, A₁, …]``. There is no ``"UV"``
    order: the paper's ``V`` is ``Aᵀ``, which is not a parameter.
    """
    if layout not in LORA_PARAMETER_ORDERS:
        raise ValueError(f"Invalid layout: {layout!r}; expected one of {LORA_PARAMETER_ORDERS!r}")
    pairs = _check_pairs(pairs)
    out: list[nn.Parameter] = []
    for p in pairs:
        out.extend((p.A, p.B) if layout == "AB" else (p.B, p.A))
    return out


def lora_param_groups(pairs: Sequence[LoraPair], **hparams: Any) -> list[dict[str, Any]]:
    """One param group ``{"params": [A, B], **hparams}`` per pair: the form
    ``ScaledGD(groups, layout="AB")`` takes (one pair per group), also accepted by any
    ``torch.optim`` optimizer."""
    return [{"params": [p.A, p.B], **hparams} for p in _check_pairs(pairs)]


# --------------------------------------------------------------------------------------------
# the gauge, the twins
# --------------------------------------------------------------------------------------------


def _check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"Invalid {name}: {value!r}; expected one of {tuple(allowed)!r}")


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"Invalid seed: {seed!r}; expected an integer")
    return seed


def draw_lora_gauges(
    pairs: Sequence[LoraPair],
    group: str = "orthogonal",
    *,
    seed: int,
    condition_number: float = 4.0,
) -> list[Tensor]:
    """One ``r × r`` group element per pair, drawn pair by pair from
    ``torch.Generator().manual_seed(seed)`` in float64, returned in the pair's dtype and on its
    device.

    ``group="orthogonal"``: Haar ``Q ∈ O(r)`` (:func:`gaugekit.gauge.haar_orthogonal`);
    ``"general"``: ``R ∈ GL(r)`` with ``cond(R) = condition_number`` and ``|det R| = 1``
    (:func:`gaugekit.gauge.random_gl`; ``condition_number`` is unused for ``"orthogonal"``).
    """
    _check_choice("group", group, LORA_GROUPS)
    pairs = _check_pairs(pairs)
    generator = torch.Generator().manual_seed(_check_seed(seed))
    if not (isinstance(condition_number, int | float) and not isinstance(condition_number, bool)
            and math.isfinite(condition_number) and condition_number >= 1):
        raise ValueError(
            f"Invalid condition_number: {condition_number!r}; expected a finite float >= 1"
        )
    out = []
    for p in pairs:
        if group == "orthogonal":
            R = haar_orthogonal(p.rank, generator=generator)
        else:
            R = random_gl(p.rank, generator=generator, condition_number=condition_number)
        out.append(R.to(dtype=p.A.dtype, device=p.A.device))
    return out


@torch.no_grad()
def apply_lora_gauge(pairs: Sequence[LoraPair], elements: Sequence[Tensor]) -> None:
    """In place, pair by pair: ``A ← R⁻¹ A`` (a linear solve, never an inverse; for an
    orthogonal ``R`` this is ``Rᵀ A``) and ``B ← B R``, keeping ``B A``.

    Computed in float64 and rounded to the parameter's dtype. ``R = I`` leaves the pair
    bit-identical.
    """
    pairs = _check_pairs(pairs)
    elements = list(elements)
    if len(elements) != len(pairs):
        raise ValueError(
            f"Invalid elements: {len(elements)} matrices; expected one per pair ({len(pairs)})"
        )
    for p, R in zip(pairs, elements, strict=True):
        if not isinstance(R, Tensor) or tuple(R.shape) != (p.rank, p.rank):
            shape = tuple(R.shape) if isinstance(R, Tensor) else type(R).__name__
            raise ValueError(
                f"Invalid elements: {shape} for the pair {p.name!r}; expected an invertible "
                f"({p.rank}, {p.rank}) tensor"
            )
        R64 = R.to(device=p.A.device, dtype=torch.float64)
        p.A.copy_(torch.linalg.solve(R64, p.A.double()))
        p.B.copy_(p.B.double() @ R64)


def lora_twin(
    model: nn.Module,
    kind: str,
    *,
    seed: int,
    scale: float = 1e-7,
    condition_number: float = 4.0,
    adapter: str = "default",
) -> nn.Module:
    """A deep copy of ``model`` with every LoRA pair of ``adapter`` changed; ``model`` is not.

    ``kind``: ``"orthogonal"`` or ``"general"``, the gauge twins (:func:`draw_lora_gauges` with
    ``seed`` and ``condition_number``, applied by :func:`apply_lora_gauge`); ``"identity"``,
    ``R = I`` through the same code path (a bit-identical copy); ``"noise"``, ``A`` and ``B``
    of each pair plus ``scale · N(0, 1)`` entries drawn pair by pair (``A`` then ``B``) from
    ``torch.Generator().manual_seed(seed)`` in the factor's dtype, except that a factor that is
    exactly zero (peft's ``B = 0`` at init) stays zero, as it does in every gauge twin: at ``B = 0``
    the gradient of ``A`` is exactly zero, and a rule that normalises its step (Adam, Muon,
    LoRA-RITE's magnification ``pinv(R_B)``) turns a ``1e-7`` nudge of ``B`` into a step of full
    size, a discontinuity of the rule at ``B = 0``, not the sensitivity the noise twin measures.
    """
    _check_choice("kind", kind, LORA_TWIN_KINDS)
    _check_seed(seed)
    if not (isinstance(scale, int | float) and not isinstance(scale, bool)
            and math.isfinite(scale) and scale >= 0):
        raise ValueError(f"Invalid scale: {scale!r}; expected a finite float >= 0")
    find_lora_pairs(model, adapter)  # refuse a model without LoRA before copying it
    twin = copy.deepcopy(model)
    pairs = find_lora_pairs(twin, adapter)
    if kind in LORA_GROUPS:
        apply_lora_gauge(pairs, draw_lora_gauges(pairs, kind, seed=seed,
                                                 condition_number=condition_number))
    elif kind == "identity":
        apply_lora_gauge(pairs, [torch.eye(p.rank, dtype=torch.float64) for p in pairs])
    else:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in pairs:
                for t in (p.A, p.B):
                    noise = scale * torch.randn(tuple(t.shape), generator=generator,
                                                dtype=t.dtype)
                    if bool(t.any()):  # a zero factor stays zero (docstring)
                        t.add_(noise.to(t.device))
    return twin


# --------------------------------------------------------------------------------------------
# what the audit compares
# --------------------------------------------------------------------------------------------


def lora_products(model: nn.Module, adapter: str = "default") -> dict[str, Tensor]:
    """``{name: scaling · B A}`` of every pair of ``adapter``, detached, in float64 (on the
    parameters' device): what the model's function sees of its adapters."""
    with torch.no_grad():
        return {p.name: p.scaling * (p.B.double() @ p.A.double())
                for p in find_lora_pairs(model, adapter)}


def products_drift(base: Mapping[str, Tensor], other: Mapping[str, Tensor]
                   ) -> dict[str, float]:
    r"""Per pair, ``‖P_other − P_base‖_F / max(‖P_base‖_F, tiny)`` of products ``P = s · B A``
    taken by :func:`lora_products` (``tiny`` the smallest normal float64, 2.2e-308): the drift
    of :func:`lora_drift`, on products kept at a checkpoint of a training run."""
    tiny = torch.finfo(torch.float64).tiny
    out = {}
    for k, a in base.items():
        num = torch.linalg.matrix_norm(a - other[k].to(a.device)).item()
        out[k] = num / max(torch.linalg.matrix_norm(a).item(), tiny)
    return out


def lora_drift(
    model_a: nn.Module, model_b: nn.Module, adapter: str = "default"
) -> dict[str, float]:
    r"""Per pair, ``‖P_a − P_b‖_F / max(‖P_a‖_F, tiny)`` of the products ``P = s · B A``
    (:func:`lora_products`; ``tiny`` the smallest normal float64, 2.2e-308).

    Relative to ``model_a`` (the base). When ``P_a = 0`` (peft's default init ``B = 0``, before
    any step) the drift is 0 if ``P_b = 0`` too, and otherwise ``‖P_b‖_F / tiny``: a number far
    above any threshold, ``inf`` when that overflows — any non-zero ``P_b`` counts as different.

    Raises:
        ValueError: the two models' LoRA pairs differ in names or shapes.
    """
    Pa, Pb = lora_products(model_a, adapter), lora_products(model_b, adapter)
    if list(Pa) != list(Pb) or any(Pa[k].shape != Pb[k].shape for k in Pa):
        raise ValueError(
            f"Invalid model_b: its LoRA pairs {[(k, tuple(v.shape)) for k, v in Pb.items()]} "
            f"differ from model_a's {[(k, tuple(v.shape)) for k, v in Pa.items()]}; expected "
            f"twins of one model"
        )
    return products_drift(Pa, Pb)


# --------------------------------------------------------------------------------------------
# the audit
# --------------------------------------------------------------------------------------------

#: ``make_optimizer(pairs)``: the optimizer of one copy, from that copy's :class:`LoraPair` list.
LoraOptimizerFactory = Callable[[list[LoraPair]], torch.optim.Optimizer]
LossFn = Callable[[nn.Module, Any], Tensor]

DRIFT_DOC = "||s B'A' - s B A||_F / ||s B A||_F per LoRA pair, largest over the steps"


def _max(values: Sequence[float]) -> float:
    """The largest value; ``nan`` when there is none or one is ``nan`` (Python's ``max`` would
    depend on the order)."""
    if not values or any(math.isnan(v) for v in values):
        return math.nan
    return max(values)


@dataclass(frozen=True)
class LoraTwinTrace:
    """One twin's run in :func:`audit_lora_twins`.

    Attributes:
        kind: ``"orthogonal"``, ``"general"`` or ``"noise"``.
        drifts: ``drifts[t][i]``: :func:`lora_drift` of pair ``i`` after step ``t + 1``.
        losses: the twin's training loss at every step.
        init_output_drift: ``rel`` of the twin's output (or loss, without a probe) and the
            base's before training.
        init_product_drift: largest :func:`lora_drift` over the pairs before training.
    """

    kind: str
    drifts: tuple[tuple[float, ...], ...]
    losses: tuple[float, ...]
    init_output_drift: float
    init_product_drift: float

    @property
    def max_drift(self) -> float:
        """The largest drift over pairs and steps, which a verdict reads (``nan`` with no step,
        or when a drift is ``nan``)."""
        return _max([d for step in self.drifts for d in step])

    def pair_max_drifts(self) -> tuple[float, ...]:
        """Per pair, the largest drift over the steps (``nan`` if one is)."""
        if not self.drifts:
            return ()
        return tuple(_max(col) for col in zip(*self.drifts, strict=True))

    def final(self) -> tuple[float, ...]:
        """Per pair, the drift after the last step."""
        return self.drifts[-1] if self.drifts else ()


@dataclass(frozen=True)
class LoraTwinAuditResult:
    """Outcome of :func:`audit_lora_twins`.

    Attributes:
        pairs: the audited pairs' names, in module order.
        ranks: their ranks ``r``.
        optimizer: the optimizer as built, ``class(hyperparameters)``.
        optimizer_class: dotted path of its class (``torch.optim.AdamW``).
        hyperparameters: the values it was built with
            (:func:`~gaugekit.audit.factor_results.optimizer_hyperparameters`).
        steps: optimizer steps taken (fewer than batches when ``diverged``).
        dtype: the adapters' dtype.
        condition_number: ``cond(R)`` of the ``GL(r)`` twin's elements.
        traces: the gauge twins in the order asked, then the noise twin.
        base_losses: the base's training loss at every step.
        moved: the base's displacement ``‖P_T − P_0‖ / max(‖P_0‖, ‖P_T‖)`` over all pairs.
        diverged: a training loss was not finite; training stopped there.
        threshold: the round-off threshold of the verdicts.
    """

    pairs: tuple[str, ...]
    ranks: tuple[int, ...]
    optimizer: str
    optimizer_class: str
    hyperparameters: dict[str, Any] = field(hash=False)
    steps: int
    dtype: str
    condition_number: float
    traces: tuple[LoraTwinTrace, ...]
    base_losses: tuple[float, ...]
    moved: float
    diverged: bool
    threshold: float
    invariant: str = DRIFT_DOC

    @property
    def groups(self) -> tuple[str, ...]:
        """The gauge groups audited."""
        return tuple(t.kind for t in self.traces if t.kind in LORA_GROUPS)

    @property
    def static(self) -> bool:
        """The base's products did not move (an optimizer that skipped every update)."""
        return self.moved < 100 * torch.finfo(getattr(torch, self.dtype)).eps

    def trace(self, kind: str) -> LoraTwinTrace:
        """The trace of twin ``kind``."""
        for t in self.traces:
            if t.kind == kind:
                return t
        raise ValueError(f"Invalid kind: {kind!r}; expected one of "
                         f"{tuple(t.kind for t in self.traces)!r}")

    def drift(self, kind: str) -> float:
        """Twin ``kind``'s drift: largest over pairs and steps."""
        return self.trace(kind).max_drift

    def verdict(self, group: str) -> GaugeVerdict:
        """Keeps / breaks / chaotic / cannot be judged for ``group`` (module doc)."""
        _check_choice("group", group, self.groups)
        why = ("training diverged (a loss was not finite)" if self.diverged else
               f"the base's products did not move in {self.steps} steps" if self.static else "")
        return decide_verdict(
            self.drift(group), self.drift("noise"), self.threshold, unjudged=why,
            low_precision=low_precision_step(self.optimizer_class, self.hyperparameters),
            resolution=verdict_resolution(getattr(torch, self.dtype)),
        )

    @property
    def verdicts(self) -> dict[str, GaugeVerdict]:
        """``{group: verdict}`` of every group audited."""
        return {g: self.verdict(g) for g in self.groups}

    def keeps(self, group: str) -> bool:
        """Whether the optimizer keeps ``group``'s gauge (its verdict is "keeps the gauge")."""
        return self.verdict(group).outcome == KEEPS

    def verdict_lines(self) -> list[str]:
        """One plain line per group: the group, the optimizer as built, its verdict, the
        numbers and the rule."""
        return [self.verdict(g).line(f"{GROUP_NAMES[g]} {self.optimizer}") for g in self.groups]

    def to_records(self) -> list[dict[str, Any]]:
        """Long format, one row per (twin, step, pair), for pandas or JSONL."""
        return [
            {"twin": t.kind, "step": s + 1, "pair": name, "drift": d,
             "optimizer": self.optimizer}
            for t in self.traces for s, step in enumerate(t.drifts)
            for name, d in zip(self.pairs, step, strict=True)
        ]

    def table(self) -> str:
        """Per pair (and, last, all pairs), each twin's drift: largest over the steps."""
        kinds = [t.kind for t in self.traces]
        per_pair = [t.pair_max_drifts() for t in self.traces]
        rows = [[name, str(r), *(f"{col[i]:.2e}" if col else "-" for col in per_pair)]
                for i, (name, r) in enumerate(zip(self.pairs, self.ranks, strict=True))]
        rows.append(["all pairs", "", *(f"{t.max_drift:.2e}" for t in self.traces)])
        header = ["LoRA pair", "r", *(f"{k} {GROUP_NAMES.get(k, '')}".strip() for k in kinds)]
        return text_table(header, rows, align="lr" + "r" * len(kinds))

    def _head_lines(self) -> list[str]:
        lines = [
            f"LoRA twin audit: {self.optimizer}, {self.steps} steps, {self.dtype}, "
            f"{len(self.pairs)} LoRA pair(s).",
            f"Drift: {self.invariant}; GL(r) twin (R^-1 A, B R) with cond(R) = "
            f"{self.condition_number:g}, O(r) twin (Q^T A, B Q).",
        ]
        if self.diverged:
            lines.append("DIVERGED: a training loss was not finite; drifts are not a result.")
        lines.append("Before training, rel(output) of the twins: " + ", ".join(
            f"{t.kind} {t.init_output_drift:.1e}" for t in self.traces) + f"; base moved "
            f"{self.moved:.2e}.")
        return lines

    def summary(self) -> str:
        """A few readable lines: what was audited, and the verdicts."""
        return "\n".join([*self._head_lines(), *self.verdict_lines()])

    def __str__(self) -> str:
        return "\n".join([*self._head_lines(), self.table(), *self.verdict_lines()])


def _evaluate_loss(model: nn.Module, loss_fn: LossFn, batch: Any) -> Tensor:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return loss_fn(model, batch).detach().double().reshape(-1)
    finally:
        model.train(was_training)


def _moved(before: dict[str, Tensor], after: dict[str, Tensor]) -> float:
    diff = math.sqrt(sum(torch.linalg.matrix_norm(after[k] - before[k]).item() ** 2
                         for k in before))
    size = max(math.sqrt(sum(torch.linalg.matrix_norm(v).item() ** 2 for v in d.values()))
               for d in (before, after))
    return diff / max(size, torch.finfo(torch.float64).tiny)


def audit_lora_twins(
    model: nn.Module,
    make_optimizer: LoraOptimizerFactory,
    loss_fn: LossFn,
    batches: Iterable[Any],
    *,
    groups: Sequence[str] = LORA_GROUPS,
    noise_scale: float = 1e-7,
    seed: int = 777,
    condition_number: float = 4.0,
    check_function: bool = True,
    probe: Any = None,
    adapter: str = "default",
    forward: ForwardFn | None = None,
) -> LoraTwinAuditResult:
    r"""Train a LoRA model and its twins in lockstep; report how far their products ``s B A``
    drift apart, and whether the optimizer keeps each gauge group.

    ``model`` is not trained: a deep copy (the base), one gauge twin per group (drawn from
    ``seed``, :func:`lora_twin`) and a noise twin (``scale = noise_scale``, drawn from
    ``seed + 1``) are. Before training each gauge twin must compute the same function as the
    base: its output on ``probe`` (``forward(model, probe)``, default ``model(probe)``, or
    ``model(*probe)`` for a tuple; as in ``gaugekit.audit.twin_parts.output_drift``) or,
    without a probe, its loss on the first batch (a weaker check), in eval mode, within ten
    times the drift of a twin whose adapters are rounded in their last bits (times ``cond(R)``
    for the general twin), in the model's dtype and on a float64 copy
    (:func:`gaugekit.audit.function_check.same_function`).

    What the factory receives: ``make_optimizer(pairs)`` is called once per copy with that
    copy's :class:`LoraPair` list (module order), so it can build any optimizer on the adapters:
    ``lambda pairs: torch.optim.AdamW(lora_parameters(pairs), lr=1e-3)``,
    ``lambda pairs: LoRARite(lora_parameters(pairs))``,
    ``lambda pairs: ScaledGD(lora_param_groups(pairs), lr=0.1, layout="AB")``. Only what it
    puts in the optimizer trains; other parameters of the model that require gradients get
    gradients but are not stepped (freeze them, as peft does).

    At step ``t`` every copy zeroes its gradients, computes ``loss_fn(copy, batches[t])``
    (with the global RNG restored to one state, so dropout masks agree), backpropagates and
    steps. After every step the drift of each twin's products from the base's is recorded per
    pair (:func:`lora_drift`).

    Args:
        model: a model with LoRA layers (:func:`find_lora_pairs`).
        make_optimizer: ``pairs -> optimizer`` (above).
        loss_fn: ``loss_fn(model, batch) -> scalar Tensor``.
        batches: the batches, one per step (materialised once; every copy sees each).
        groups: gauge groups to audit, distinct entries of ``("orthogonal", "general")``.
        noise_scale: standard deviation of the noise twin's perturbation.
        seed: seed of the gauge elements (the noise twin uses ``seed + 1``).
        condition_number: ``cond(R)`` of the ``GL(r)`` twin.
        check_function: raise when a gauge twin is not the same function before training
            (the init drifts are recorded either way).
        probe: input of the function check (default: the loss on the first batch).
        adapter: the adapter name (peft's ``"default"``).
        forward: ``forward(model, probe) -> Tensor`` for the probe check.

    Returns:
        A :class:`LoraTwinAuditResult`; ``print(result)`` shows the optimizer as built, a table
        of drifts per pair and one verdict line per group.

    Raises:
        ValueError: bad arguments, a model without LoRA layers, or (``check_function``) a
            gauge twin that is not the same function as the base at init, with the numbers.
    """
    kinds = list(groups)
    if not kinds or any(g not in LORA_GROUPS for g in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError(f"Invalid groups: {groups!r}; expected distinct entries of "
                         f"{LORA_GROUPS!r}")
    if not callable(make_optimizer):
        raise ValueError(f"Invalid make_optimizer: {make_optimizer!r}; expected a callable "
                         f"list[LoraPair] -> torch.optim.Optimizer")
    if not callable(loss_fn):
        raise ValueError(f"Invalid loss_fn: {loss_fn!r}; expected a callable (model, batch)")
    if not (isinstance(noise_scale, int | float) and not isinstance(noise_scale, bool)
            and math.isfinite(noise_scale) and noise_scale >= 0):
        raise ValueError(f"Invalid noise_scale: {noise_scale!r}; expected a finite float >= 0")
    if not isinstance(check_function, bool):
        raise ValueError(f"Invalid check_function: {check_function!r}; expected True or False")
    _check_seed(seed)
    drawn = list(batches)
    if not drawn:
        raise ValueError("Invalid batches: none; expected at least one batch (one per step)")
    base_pairs = find_lora_pairs(model, adapter)
    dtype = base_pairs[0].A.dtype

    base = copy.deepcopy(model)
    twins = [lora_twin(base, g, seed=seed, condition_number=condition_number, adapter=adapter)
             for g in kinds]
    twins.append(lora_twin(base, "noise", seed=seed + 1, scale=noise_scale, adapter=adapter))
    kinds.append("noise")

    def measure(m: nn.Module, dt: torch.dtype) -> Tensor:
        if probe is not None:
            return _evaluate(m, cast_floats(probe, dt), forward)
        return _evaluate_loss(m, loss_fn, cast_floats(drawn[0], dt))

    reference = measure(base, dtype).double().reshape(-1)
    init_out = [rel_distance(measure(t, dtype).double().reshape(-1), reference).item()
                for t in twins]
    init_prod = [max(lora_drift(base, t, adapter).values()) for t in twins]
    if check_function:
        def factors(m: nn.Module) -> list[Tensor]:
            return [t for p in find_lora_pairs(m, adapter) for t in (p.A, p.B)]

        what = "output on the probe" if probe is not None else "loss on the first batch"
        for kind in kinds[:-1]:  # the gauge twins, built again in float64 by the check
            checks = same_function(
                base, lambda m, k=kind: lora_twin(m, k, seed=seed,
                                                  condition_number=condition_number,
                                                  adapter=adapter),
                factors, measure,
                amplification=condition_number if kind == "general" else 1.0)
            if not all(c.passed for c in checks):
                raise ValueError(
                    f"Invalid model: the {kind} gauge twin's {what} is not the base's before "
                    f"any training ({'; '.join(map(str, checks))}), so (A, B) -> (R^-1 A, B R) "
                    f"is not a symmetry of this model; expected the model to see each adapter "
                    f"only through s B A (something reads A or B on its own: a nonlinearity "
                    f"between them, a penalty, a tied weight)"
                )

    models = [base, *twins]
    optimizers = [make_optimizer(find_lora_pairs(m, adapter)) for m in models]
    cls = optimizer_name(optimizers[0])
    hyper = optimizer_hyperparameters(optimizers[0])
    products_0 = lora_products(base, adapter)
    devices = {p.device for p in base.parameters()}
    losses: list[list[float]] = [[] for _ in models]
    drifts: list[list[tuple[float, ...]]] = [[] for _ in twins]
    diverged, done = False, 0
    for batch in drawn:
        if _step_in_lockstep(models, optimizers, loss_fn, batch, devices, losses):
            diverged = True
            break
        done += 1
        for i, t in enumerate(twins):
            drifts[i].append(tuple(lora_drift(base, t, adapter).values()))

    traces = tuple(
        LoraTwinTrace(kind=k, drifts=tuple(drifts[i]), losses=tuple(losses[i + 1]),
                      init_output_drift=init_out[i], init_product_drift=init_prod[i])
        for i, k in enumerate(kinds)
    )
    return LoraTwinAuditResult(
        pairs=tuple(p.name for p in base_pairs), ranks=tuple(p.rank for p in base_pairs),
        optimizer=describe_optimizer(cls, hyper), optimizer_class=cls, hyperparameters=hyper,
        steps=done, dtype=str(dtype).removeprefix("torch."),
        condition_number=float(condition_number), traces=traces, base_losses=tuple(losses[0]),
        moved=_moved(products_0, lora_products(base, adapter)), diverged=diverged,
        threshold=verdict_threshold(dtype),
    )

