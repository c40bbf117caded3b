r"""An equivariance audit that works on any ``torch.optim`` optimizer.

The question asked of an update rule ``Φ``: started from ``(U₀Q, V₀Q)`` instead of ``(U₀, V₀)``,
on a loss that cannot tell the two apart, does it produce the same trajectory times ``Q``?

.. math::

   (U_t^Q, V_t^Q) = (U_t Q, V_t Q) \quad \text{for every step } t
   \qquad \text{(Proposition 4.2 of the paper)}

The audit runs the optimizer from both starts, with its state live, on the same
gauge-invariant loss (by default a small float64 matrix-sensing loss) and reports, per factor,
the relative residual of the *displacements*

.. math::

   r_U = \max_t \frac{\lVert (U_t^Q - U_0 Q) - (U_t - U_0) Q \rVert_F}
                      {\lVert (U_t - U_0) Q \rVert_F}

(and ``r_V`` alike; ``r`` is the larger of the two). Displacements, not iterates, are compared
so that the size of ``U₀`` does not dilute the residual.

The whole gauge group. ``L(U Vᵀ)`` cannot see ``(U, V) → (U R, V R⁻ᵀ)`` for any invertible
``R``: the gauge group is ``GL(r)``, and ``O(r)`` (``R⁻ᵀ = R = Q``) is its orthogonal part.
``group="general"`` audits the twin ``(U₀R, V₀R⁻ᵀ)`` with a well-conditioned random ``R``
(:func:`gaugekit.gauge.random_gl`, ``cond(R) = condition_number``, 4 by default) and measures
each factor's displacement covariantly, the way that factor transforms:

.. math::

   r_U = \max_t \frac{\lVert ΔU_t^R - ΔU_t\, R \rVert_F}{\lVert ΔU_t\, R \rVert_F},
   \qquad
   r_V = \max_t \frac{\lVert ΔV_t^R - ΔV_t\, R^{-\top} \rVert_F}{\lVert ΔV_t\, R^{-\top} \rVert_F}.

Gradient descent keeps ``O(r)`` but not ``GL(r)``; ScaledGD without damping keeps both
(:class:`gaugekit.optim.ScaledGD`).

LoRA's layout. ``layout="AB"`` hands the optimizer LoRA's pair ``[A, B]`` with ``W = B A``
(``A``: r × in, ``B``: out × r), the paper's pair transposed: ``B = U``, ``A = Vᵀ``. The gauge
acts as ``(A, B) → (R⁻¹ A, B R)`` (orthogonal: ``(Qᵀ A, B Q)``) and the residuals compare
``ΔB^R`` with ``ΔB R`` and ``ΔA^R`` with ``R⁻¹ ΔA``: the same numbers as ``r_U`` and ``r_V`` of
the transposed problem, under which names they are reported.

The round-off thresholds, the verdict in words and the result types are
:mod:`gaugekit.audit.factor_results` (re-exported here, the old address).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from gaugekit.audit.factor_results import (
    AuditResult,
    AuditRow,
    default_threshold,
    optimizer_hyperparameters,
    optimizer_name,
)
from gaugekit.gauge import haar_orthogonal, random_gl, relative_distance

__all__ = [
    "AUDIT_LRS",
    "NO_GRAPH_ERROR",
    "AuditError",
    "FactorRun",
    "GROUPS",
    "LAYOUTS",
    "LossFn",
    "OptimizerFactory",
    "audit_equivariance",
    "audit_groups",
    "audit_many",
    "registry_factories",
    "run_factor_optimizer",
    "sensing_loss",
    "torch_optim_factories",
]


LossFn = Callable[[Tensor, Tensor], Tensor]
OptimizerFactory = Callable[[list[Tensor]], torch.optim.Optimizer]


class AuditError(RuntimeError):
    """The audited optimizer could not be run: its factory or a step raised, or it diverged."""


# --------------------------------------------------------------------------------------------
# the default loss
# --------------------------------------------------------------------------------------------


def sensing_loss(
    n: int,
    m: int,
    *,
    generator: torch.Generator,
    r: int = 2,
    num_measurements: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LossFn:
    r"""A small matrix-sensing loss ``L(U, V) = (1/2M) Σᵢ (⟨Aᵢ, U Vᵀ⟩ − yᵢ)²``.

    ``X_star = U★V★ᵀ / √r`` (n×m, rank ``r``) with Gaussian ``U★, V★``; sensing matrices
    ``Aᵢ`` (n×m) Gaussian, ``yᵢ = ⟨Aᵢ, X_star⟩``, ``M = num_measurements`` (default
    ``3 r (n + m)``). It depends on ``(U, V)`` only through ``U Vᵀ``, hence is gauge-invariant.
    All draws come from ``generator`` (on its device) and are then moved to ``device``.
    """
    if min(n, m, r) < 1:
        raise ValueError(f"Invalid shape: (n, m, r) = {(n, m, r)!r}; expected positive integers")
    M = num_measurements if num_measurements is not None else 3 * r * (n + m)
    if M < 1:
        raise ValueError(f"Invalid num_measurements: {M!r}; expected an integer >= 1")
    gdev = generator.device
    U_star = torch.randn(n, r, generator=generator, dtype=dtype, device=gdev)
    V_star = torch.randn(m, r, generator=generator, dtype=dtype, device=gdev)
    A = torch.randn(M, n, m, generator=generator, dtype=dtype, device=gdev)
    X_star = U_star @ V_star.T / math.sqrt(r)
    A = A.to(device) if device is not None else A
    y = torch.einsum("inm,nm->i", A, X_star.to(A.device))

    def loss(U: Tensor, V: Tensor) -> Tensor:
        residual = torch.einsum("inm,nm->i", A, U @ V.mT) - y
        return 0.5 * residual.pow(2).mean()

    return loss


# --------------------------------------------------------------------------------------------
# the audit
# --------------------------------------------------------------------------------------------


@dataclass
class FactorRun:
    """What :func:`run_factor_optimizer` leaves: the iterates and the live optimizer.

    ``iterates[t - 1]`` is ``(U_t, V_t)`` after step ``t``; ``params`` are the two leaf tensors the
    optimizer holds (to look its state up by parameter).
    """

    iterates: list[tuple[Tensor, Tensor]]
    optimizer: torch.optim.Optimizer
    params: list[Tensor]


#: The tail of torch's error when a step differentiates gradients that carry no graph, the sign
#: of a Hessian-vector optimizer (Sophia-H, AdaHessian) stepped after a plain backward.
NO_GRAPH_ERROR = "does not require grad and does not have a grad_fn"


def run_factor_optimizer(
    make_optimizer: OptimizerFactory,
    U0: Tensor,
    V0: Tensor,
    loss: LossFn,
    num_steps: int,
    *,
    create_graph: bool = False,
) -> FactorRun:
    """Run ``make_optimizer([U, V])`` from ``(U0, V0)`` for ``num_steps`` steps on ``loss``.

    Each step calls ``optimizer.step(closure)`` with a closure that clears the gradients,
    evaluates ``loss`` and back-propagates, so any ``torch.optim`` optimizer works (L-BFGS too).
    With ``create_graph`` the gradients keep their graph (``loss.backward(create_graph=True)``,
    computed as ``torch.autograd.grad`` so that no parameter holds its own graph after the run):
    what a Hessian-vector optimizer (Sophia-H, AdaHessian) differentiates.
    Raises :class:`AuditError` when the factory or a step raises, or a step leaves non-finite
    parameters.
    """
    if num_steps < 0:
        raise ValueError(f"Invalid num_steps: {num_steps!r}; expected an integer >= 0")
    U = U0.detach().clone().requires_grad_(True)
    V = V0.detach().clone().requires_grad_(True)
    try:
        optimizer = make_optimizer([U, V])
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed
        raise AuditError(f"optimizer factory raised {type(exc).__name__}: {exc}") from exc

    def closure() -> Tensor:
        with torch.enable_grad():
            U.grad, V.grad = None, None
            value = loss(U, V)
            if create_graph:
                U.grad, V.grad = torch.autograd.grad(value, (U, V), create_graph=True,
                                                     allow_unused=True)
            else:
                value.backward()
        return value

    iterates = []
    try:
        for t in range(1, num_steps + 1):
            try:
                optimizer.step(closure)
            except Exception as exc:  # noqa: BLE001 - reported, not swallowed
                raise AuditError(f"step {t} raised {type(exc).__name__}: {exc}") from exc
            if not (torch.isfinite(U).all() and torch.isfinite(V).all()):
                raise AuditError(f"non-finite parameters after step {t}")
            iterates.append((U.detach().clone(), V.detach().clone()))
    finally:
        if create_graph:  # a gradient with a graph refers back to its parameter
            U.grad, V.grad = None, None
    return FactorRun(iterates=iterates, optimizer=optimizer, params=[U, V])


#: The gauge groups :func:`audit_equivariance` tests, ``O(r)`` (a Haar ``Q``) and ``GL(r)``.
GROUPS: tuple[str, ...] = ("orthogonal", "general")
#: The two layouts of the factor pair, the paper's ``[U, V]`` (``W = U Vᵀ``) and LoRA's
#: ``[A, B]`` (``W = B A``).
LAYOUTS: tuple[str, ...] = ("UV", "AB")

GaugeMap = Callable[[Tensor], Tensor]


def audit_equivariance(
    make_optimizer: OptimizerFactory,
    *,
    U: Tensor | None = None,
    V: Tensor | None = None,
    Q: Tensor | None = None,
    loss: LossFn | None = None,
    num_steps: int = 10,
    threshold: float | None = None,
    shape: tuple[int, int, int] = (7, 5, 3),
    init_scale: float = 0.5,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
    noise_scale: float | None = 1e-7,
    noise_seed: int = 888,
    create_graph: bool | None = None,
    group: str = "orthogonal",
    layout: str = "UV",
    condition_number: float = 4.0,
) -> AuditResult:
    r"""Audit ``make_optimizer`` for gauge equivariance (the paper's Proposition 4.2) over
    ``num_steps`` steps.

    ``make_optimizer(params)`` receives the list of two leaf tensors, ``[U, V]`` (or ``[A, B]``
    in layout ``"AB"``), and returns any ``torch.optim.Optimizer``; each run builds one and
    steps it as :func:`run_factor_optimizer` does (closure-only optimizers such as L-BFGS work
    too).

    Missing pieces are drawn from ``generator`` (default ``torch.Generator().manual_seed(0)``)
    in this order: the sensing loss (:func:`sensing_loss` with ``n, m`` from ``shape``), then
    ``U₀`` (n×k) and ``V₀`` (m×k) with entries ``init_scale · N(0, 1/k)``, then the gauge
    element: a Haar ``Q`` (``group="orthogonal"``) or ``R = random_gl(k, condition_number)``
    (``group="general"``). ``shape = (n, m, k)`` and ``dtype``/``device`` are taken from the
    given factors.

    ``group``: ``"orthogonal"`` (default) starts the twin at ``(U₀Q, V₀Q)``; ``"general"`` at
    ``(U₀R, V₀R⁻ᵀ)`` and measures the V-side displacement against ``ΔV R⁻ᵀ`` (module doc).
    ``Q`` is the gauge element when given (orthogonal for ``"orthogonal"``, any invertible
    ``R`` for ``"general"``); ``condition_number`` (``>= 1``) is ``cond(R)`` of a drawn ``R``.
    The result records the group, the layout and, for ``"general"``, ``cond(R)``.

    ``layout``: ``"UV"`` (default, ``W = U Vᵀ``) or ``"AB"`` (LoRA, ``W = B A``, ``A`` r × in,
    ``B`` out × r). ``U``, ``V`` and ``loss`` are in the layout's terms: the starting pair in
    the optimizer's order (``U = A₀``, ``V = B₀`` for ``"AB"``) and a loss of that pair; the
    default loss and draws are the ``"UV"`` ones transposed (``A₀ = V₀ᵀ``, ``B₀ = U₀``), so the
    default audit in either layout is the same problem. The noise twin adds the same draws
    (transposed in ``"AB"``).

    A third run, the noise twin, starts from ``(U₀ + δE, V₀ + δF)`` with ``δ = noise_scale``
    and ``E, F`` i.i.d. ``N(0, 1)`` from ``torch.Generator().manual_seed(noise_seed)`` (so the
    draws above do not change); its displacement residual against the plain run is the
    yardstick that tells a broken gauge from chaos (module doc). ``noise_scale=None`` skips it.

    ``create_graph``: whether the backward pass keeps the gradients' graph, as a Hessian-vector
    optimizer (Sophia-H, AdaHessian: they differentiate the gradient with a Hutchinson probe)
    needs (:func:`run_factor_optimizer`). ``True`` or ``False`` is used as given. ``None``
    (default) detects it: the first run steps after a plain backward, and when a step raises
    torch's ``RuntimeError`` "element 0 of tensors does not require grad and does not have a
    grad_fn" (:data:`NO_GRAPH_ERROR`) that run is repeated with ``create_graph=True``, which then
    serves all three runs. The graph changes no gradient's value, so the verdict of any other
    optimizer is the same either way.

    Raises :class:`AuditError` if the factory or a step raises or the run diverges, and
    ``ValueError`` for an invalid argument or if ``loss`` is not gauge-invariant at
    ``(U₀, V₀)`` (the audit would be void).
    """
    _check_audit_arguments(num_steps, U, V, group, layout, condition_number, noise_scale)
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    if U is not None and V is not None:
        U, V = _from_layout(U, V, layout)
        n, k = U.shape[-2:]
        m = V.shape[-2]
        dtype, device = U.dtype, U.device
    else:
        n, m, k = shape
    tol = threshold if threshold is not None else default_threshold(dtype)
    if loss is None:
        paper_loss = sensing_loss(n, m, generator=generator, dtype=dtype, device=device)
        loss = paper_loss if layout == "UV" else lambda A, B: paper_loss(B, A.mT)
    if U is None or V is None:
        gdev = generator.device
        scale = init_scale / math.sqrt(k)
        U = scale * torch.randn(n, k, generator=generator, dtype=dtype, device=gdev)
        V = scale * torch.randn(m, k, generator=generator, dtype=dtype, device=gdev)
        U, V = (U.to(device), V.to(device)) if device is not None else (U, V)
    if Q is None:
        draw = {"generator": generator, "dtype": dtype, "device": U.device}
        Q = (haar_orthogonal(k, **draw) if group == "orthogonal"
             else random_gl(k, condition_number=condition_number, **draw))
    U0, V0 = U.detach(), V.detach()
    maps = _gauge_maps(Q, group)
    U0Q, V0Q = maps[0](U0), maps[1](V0)
    _check_invariant_loss(loss, layout, U0, V0, U0Q, V0Q, dtype)

    def run(U_start: Tensor, V_start: Tensor, graph: bool) -> FactorRun:
        """A run from the paper's pair, handed to the optimizer in the layout's order."""
        return run_factor_optimizer(make_optimizer, *_to_layout(U_start, V_start, layout), loss,
                                    num_steps, create_graph=graph)

    try:
        plain_run = run(U0, V0, bool(create_graph))
    except AuditError as exc:
        if create_graph is not None or NO_GRAPH_ERROR not in str(exc.__cause__):
            raise
        create_graph = True  # a Hessian-vector optimizer: it differentiates the gradient
        plain_run = run(U0, V0, True)
    graph = bool(create_graph)
    plain = _paper_iterates(plain_run.iterates, layout)
    rotated = _paper_iterates(run(U0Q, V0Q, graph).iterates, layout)
    res_U, res_V = _displacement_residual(plain, rotated, U0, V0, U0Q, V0Q, maps)
    noise_residual = None
    if noise_scale is not None:
        noise = torch.Generator().manual_seed(noise_seed)
        U0n = U0 + noise_scale * torch.randn(U0.shape, generator=noise, dtype=dtype).to(U0.device)
        V0n = V0 + noise_scale * torch.randn(V0.shape, generator=noise, dtype=dtype).to(V0.device)
        noisy = _paper_iterates(run(U0n, V0n, graph).iterates, layout)
        noise_residual = max(_displacement_residual(plain, noisy, U0, V0, U0n, V0n, None))

    U_T, V_T = plain[-1]
    moved = torch.cat([(U_T - U0).reshape(-1), (V_T - V0).reshape(-1)]).norm()
    start = torch.cat([U0.reshape(-1), V0.reshape(-1)]).norm()
    displacement = (moved / start.clamp_min(torch.finfo(dtype).tiny)).item()
    static = displacement < 100 * torch.finfo(dtype).eps
    residual = max(res_U, res_V)
    with torch.no_grad():
        loss_start = loss(*_to_layout(U0, V0, layout)).item()
        loss_end = loss(*_to_layout(U_T, V_T, layout)).item()
    return AuditResult(
        residual_U=res_U,
        residual_V=res_V,
        residual=residual,
        threshold=tol,
        equivariant=(not static) and residual <= tol,
        static=static,
        num_steps=num_steps,
        displacement=displacement,
        loss_start=loss_start,
        loss_end=loss_end,
        dtype=str(dtype).removeprefix("torch."),
        noise_residual=noise_residual,
        noise_scale=noise_scale,
        optimizer=optimizer_name(plain_run.optimizer),
        hyperparameters=optimizer_hyperparameters(plain_run.optimizer),
        group=group,
        layout=layout,
        condition_number=(torch.linalg.cond(Q).item() if group == "general" else None),
    )


def _check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"Invalid {name}: {value!r}; expected one of "
                         f"{', '.join(repr(a) for a in allowed)}")


def _check_audit_arguments(
    num_steps: int, U: Tensor | None, V: Tensor | None, group: str, layout: str,
    condition_number: float, noise_scale: float | None,
) -> None:
    """The ``ValueError`` of an invalid argument of :func:`audit_equivariance`, if any."""
    if num_steps < 1:
        raise ValueError(f"Invalid num_steps: {num_steps!r}; expected an integer >= 1")
    if (U is None) != (V is None):
        raise ValueError("Invalid U, V: give both factors or neither")
    _check_choice("group", group, GROUPS)
    _check_choice("layout", layout, LAYOUTS)
    if not (isinstance(condition_number, int | float) and math.isfinite(condition_number)
            and condition_number >= 1):
        raise ValueError(f"Invalid condition_number: {condition_number!r}; expected a finite "
                         "float >= 1")
    if noise_scale is not None and not (math.isfinite(noise_scale) and noise_scale >= 0):
        raise ValueError(f"Invalid noise_scale: {noise_scale!r}; expected a finite float >= 0")


def _check_invariant_loss(
    loss: LossFn, layout: str, U0: Tensor, V0: Tensor, U0Q: Tensor, V0Q: Tensor,
    dtype: torch.dtype,
) -> None:
    """``ValueError`` unless ``loss`` takes the same value at the pair and at its twin."""
    with torch.no_grad():
        before = loss(*_to_layout(U0, V0, layout)).reshape(1)
        gap = relative_distance(loss(*_to_layout(U0Q, V0Q, layout)).reshape(1), before).item()
    if gap > default_threshold(dtype):
        raise ValueError(
            f"Invalid loss: L(U₀Q, V₀Q) differs from L(U₀, V₀) by {gap:.3g} (relative); "
            "expected a gauge-invariant loss L(U Vᵀ)"
        )


def _to_layout(U: Tensor, V: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    """The paper's pair in the layout's order: ``(U, V)``, or ``(A, B) = (Vᵀ, U)``."""
    return (U, V) if layout == "UV" else (V.mT.contiguous(), U)


def _from_layout(X: Tensor, Y: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    """The layout's pair as the paper's ``(U, V)``: ``(B, Aᵀ)`` for ``(A, B)``."""
    return (X, Y) if layout == "UV" else (Y, X.mT)


def _paper_iterates(
    iterates: Sequence[tuple[Tensor, Tensor]], layout: str
) -> list[tuple[Tensor, Tensor]]:
    return [_from_layout(X, Y, layout) for X, Y in iterates]


def _gauge_maps(R: Tensor, group: str) -> tuple[GaugeMap, GaugeMap]:
    """How a U-side and a V-side matrix transform: ``X ↦ X R`` and ``X ↦ X R⁻ᵀ`` (a solve;
    ``X ↦ X Q`` for both under ``O(r)``, where ``Q⁻ᵀ = Q``)."""
    right = lambda X: X @ R
    if group == "orthogonal":
        return right, right
    return right, lambda X: torch.linalg.solve(R, X.mT).mT


def _displacement_residual(
    plain: Sequence[tuple[Tensor, Tensor]],
    other: Sequence[tuple[Tensor, Tensor]],
    U0: Tensor,
    V0: Tensor,
    U0_other: Tensor,
    V0_other: Tensor,
    maps: tuple[GaugeMap, GaugeMap] | None,
) -> tuple[float, float]:
    """``max_t rel((X_t' − X₀'), g_X(X_t − X₀))`` for ``X = U`` and ``X = V``, with ``g_U, g_V``
    the gauge's action on each side (``maps=None``: none), the audit's residual of the run
    ``other`` against the ``plain`` run."""
    res_U, res_V = 0.0, 0.0
    for (U_t, V_t), (U_o, V_o) in zip(plain, other, strict=True):
        dU, dV = U_t - U0, V_t - V0
        if maps is not None:
            dU, dV = maps[0](dU), maps[1](dV)
        res_U = max(res_U, relative_distance(U_o - U0_other, dU).item())
        res_V = max(res_V, relative_distance(V_o - V0_other, dV).item())
    return res_U, res_V


def audit_many(
    factories: Mapping[str, OptimizerFactory], **audit_kwargs: object
) -> list[AuditRow]:
    """Audit every factory with the same settings; a failing optimizer becomes an error row.

    ``audit_kwargs`` go to :func:`audit_equivariance`. If no ``generator`` is given each audit
    gets a fresh ``torch.Generator().manual_seed(0)``, so every row sees the same loss, the same
    ``(U₀, V₀)`` and the same ``Q``. A given generator is cloned per row for the same reason.
    """
    rows = []
    base = audit_kwargs.pop("generator", None)
    for name, factory in factories.items():
        if isinstance(base, torch.Generator):
            generator = torch.Generator(device=base.device)
            generator.set_state(base.get_state())
        else:
            generator = torch.Generator().manual_seed(0)
        try:
            result = audit_equivariance(factory, generator=generator, **audit_kwargs)  # type: ignore[arg-type]
        except AuditError as exc:
            rows.append(AuditRow(name=name, verdict="error", error=str(exc)))
            continue
        rows.append(AuditRow(name=name, verdict=result.verdict, result=result))
    return rows


def audit_groups(
    factories: Mapping[str, OptimizerFactory],
    groups: Sequence[str] = GROUPS,
    **audit_kwargs: object,
) -> dict[str, list[AuditRow]]:
    """:func:`audit_many` once per gauge group: ``{group: rows}``, every row on the same draws.

    ``groups`` are names from :data:`GROUPS` (default both: ``O(r)`` and ``GL(r)``);
    ``audit_kwargs`` (``layout``, ``condition_number``, ``num_steps``, ...) go to
    :func:`audit_equivariance`. :func:`~gaugekit.audit.factor_results.format_group_table` prints
    the result.
    """
    for group in groups:
        _check_choice("groups", group, GROUPS)
    if "group" in audit_kwargs:
        raise ValueError("Invalid group: pass the groups as groups=(...), not group=")
    return {group: audit_many(factories, group=group, **audit_kwargs) for group in groups}


# --------------------------------------------------------------------------------------------
# factories
# --------------------------------------------------------------------------------------------

#: torch.optim classes audited by :func:`torch_optim_factories` (row name → class name and extra
#: arguments), in the order of its rows. Adadelta and L-BFGS keep their class default ``lr``
#: (``_CLASS_LR``: they are scaled around lr = 1). SparseAdam is left out: it requires
#: sparse gradients and does not apply to dense factors.
_TORCH_OPTIM_ROWS: dict[str, tuple[str, dict[str, object]]] = {
    "SGD": ("SGD", {}), "SGD-nesterov": ("SGD", {"momentum": 0.9, "nesterov": True}),
    **{name: (name, {}) for name in ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad",
                                     "Adadelta", "RMSprop", "Rprop", "ASGD", "Adafactor", "Muon")},
    "LBFGS": ("LBFGS", {"max_iter": 4}),
}
_CLASS_LR = frozenset({"Adadelta", "LBFGS"})


def torch_optim_factories(lr: float = 1e-2) -> dict[str, OptimizerFactory]:
    """Factories for the ``torch.optim`` optimizers present in this torch version.

    Each takes ``[U, V]`` and returns the optimizer with ``lr`` (except Adadelta and L-BFGS, which
    keep their defaults of 1.0) and the arguments listed in ``_TORCH_OPTIM_ROWS``; SGD also
    appears with Nesterov momentum. Classes absent from an older torch (Adafactor, Muon) are
    skipped.
    """
    factories: dict[str, OptimizerFactory] = {}
    for row_name, (class_name, extra) in _TORCH_OPTIM_ROWS.items():
        cls = getattr(torch.optim, class_name, None)
        if cls is not None:
            lr_arg = {} if class_name in _CLASS_LR else {"lr": lr}
            factories[row_name] = partial(cls, **extra, **lr_arg)
    return factories


#: The audit's learning rate of each registered rule, one point of the paper's grid (the
#: registry's default before the registry took the classes' defaults), pinned so that the audit
#: tables do not move when a class default does. A rule not listed runs at its class default.
AUDIT_LRS: dict[str, float] = {
    "gd": 0.1, "momentum": 0.03, "adam": 1e-2, "scalar_adam": 1e-2, "rmsprop": 1e-3,
    "lion": 1e-3, "signum": 1e-3, "adafactor": 1e-3, "muon": 3e-2, "shampoo": 0.1,
    "scaled_gd": 1e-3, "gram": 1e-2, "eigen_adam": 1e-2, "flow_adam": 1e-3,
    "flow_adam_prototype": 1e-3,
}


def registry_factories(
    names: Sequence[str] | None = None, **overrides: object
) -> dict[str, OptimizerFactory]:
    """Factories for the library's own optimizers (``gaugekit.optim`` registry), by name.

    ``names`` defaults to every registered optimizer; each is built at its :data:`AUDIT_LRS`
    rate, and ``overrides`` (e.g. ``lr``, ``weight_decay``) go to ``make_optimizer`` for every
    name.
    """
    from gaugekit.optim.registry import make_optimizer, optimizer_names

    chosen = list(names) if names is not None else list(optimizer_names())
    return {name: partial(make_optimizer, name,
                          **{**({"lr": AUDIT_LRS[name]} if name in AUDIT_LRS else {}), **overrides})
            for name in chosen}
