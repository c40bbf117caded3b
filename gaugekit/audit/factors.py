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
from gaugekit.gauge import haar_orthogonal, relative_distance

__all__ = [
    "AUDIT_LRS",
    "NO_GRAPH_ERROR",
    "AuditError",
    "FactorRun",
    "LossFn",
    "OptimizerFactory",
    "audit_equivariance",
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
) -> AuditResult:
    r"""Audit ``make_optimizer`` for gauge equivariance (the paper's Proposition 4.2) over
    ``num_steps`` steps.

    ``make_optimizer(params)`` receives the list ``[U, V]`` of two leaf tensors and returns any
    ``torch.optim.Optimizer``; each run builds one and steps it as :func:`run_factor_optimizer`
    does (closure-only optimizers such as L-BFGS work too).

    Missing pieces are drawn from ``generator`` (default ``torch.Generator().manual_seed(0)``)
    in this order: the sensing loss (:func:`sensing_loss` with ``n, m`` from ``shape``), then
    ``U₀`` (n×k) and ``V₀`` (m×k) with entries ``init_scale · N(0, 1/k)``, then a Haar ``Q``.
    ``shape = (n, m, k)`` and ``dtype``/``device`` are taken from ``U`` when it is given.

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
    ``ValueError`` if ``loss`` is not gauge-invariant at ``(U₀, V₀)`` (the audit would be void).
    """
    if num_steps < 1:
        raise ValueError(f"Invalid num_steps: {num_steps!r}; expected an integer >= 1")
    if (U is None) != (V is None):
        raise ValueError("Invalid U, V: give both factors or neither")
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    if U is not None and V is not None:
        n, k = U.shape[-2:]
        m = V.shape[-2]
        dtype, device = U.dtype, U.device
    else:
        n, m, k = shape
    tol = threshold if threshold is not None else default_threshold(dtype)
    if loss is None:
        loss = sensing_loss(n, m, generator=generator, dtype=dtype, device=device)
    if U is None or V is None:
        gdev = generator.device
        scale = init_scale / math.sqrt(k)
        U = scale * torch.randn(n, k, generator=generator, dtype=dtype, device=gdev)
        V = scale * torch.randn(m, k, generator=generator, dtype=dtype, device=gdev)
        U, V = (U.to(device), V.to(device)) if device is not None else (U, V)
    if Q is None:
        Q = haar_orthogonal(k, generator=generator, dtype=dtype, device=U.device)
    U0, V0 = U.detach(), V.detach()
    U0Q, V0Q = U0 @ Q, V0 @ Q

    with torch.no_grad():
        loss_start = loss(U0, V0)
        loss_gap = relative_distance(loss(U0Q, V0Q).reshape(1), loss_start.reshape(1)).item()
    if loss_gap > default_threshold(dtype):
        raise ValueError(
            f"Invalid loss: L(U₀Q, V₀Q) differs from L(U₀, V₀) by {loss_gap:.3g} (relative); "
            "expected a gauge-invariant loss L(U Vᵀ)"
        )

    if noise_scale is not None and not (math.isfinite(noise_scale) and noise_scale >= 0):
        raise ValueError(f"Invalid noise_scale: {noise_scale!r}; expected a finite float >= 0")

    try:
        plain_run = run_factor_optimizer(make_optimizer, U0, V0, loss, num_steps,
                                         create_graph=bool(create_graph))
    except AuditError as exc:
        if create_graph is not None or NO_GRAPH_ERROR not in str(exc.__cause__):
            raise
        create_graph = True  # a Hessian-vector optimizer: it differentiates the gradient
        plain_run = run_factor_optimizer(make_optimizer, U0, V0, loss, num_steps,
                                         create_graph=True)
    run = partial(run_factor_optimizer, make_optimizer, loss=loss, num_steps=num_steps,
                  create_graph=bool(create_graph))
    plain = plain_run.iterates
    rotated = run(U0Q, V0Q).iterates
    res_U, res_V = _displacement_residual(plain, rotated, U0, V0, U0Q, V0Q, Q)
    noise_residual = None
    if noise_scale is not None:
        noise = torch.Generator().manual_seed(noise_seed)
        U0n = U0 + noise_scale * torch.randn(U0.shape, generator=noise, dtype=dtype).to(U0.device)
        V0n = V0 + noise_scale * torch.randn(V0.shape, generator=noise, dtype=dtype).to(V0.device)
        noisy = run(U0n, V0n).iterates
        noise_residual = max(_displacement_residual(plain, noisy, U0, V0, U0n, V0n, None))

    U_T, V_T = plain[-1]
    moved = torch.cat([(U_T - U0).reshape(-1), (V_T - V0).reshape(-1)]).norm()
    start = torch.cat([U0.reshape(-1), V0.reshape(-1)]).norm()
    displacement = (moved / start.clamp_min(torch.finfo(dtype).tiny)).item()
    static = displacement < 100 * torch.finfo(dtype).eps
    residual = max(res_U, res_V)
    with torch.no_grad():
        loss_end = loss(U_T, V_T).item()
    return AuditResult(
        residual_U=res_U,
        residual_V=res_V,
        residual=residual,
        threshold=tol,
        equivariant=(not static) and residual <= tol,
        static=static,
        num_steps=num_steps,
        displacement=displacement,
        loss_start=loss_start.item(),
        loss_end=loss_end,
        dtype=str(dtype).removeprefix("torch."),
        noise_residual=noise_residual,
        noise_scale=noise_scale,
        optimizer=optimizer_name(plain_run.optimizer),
        hyperparameters=optimizer_hyperparameters(plain_run.optimizer),
    )


def _displacement_residual(
    plain: Sequence[tuple[Tensor, Tensor]],
    other: Sequence[tuple[Tensor, Tensor]],
    U0: Tensor,
    V0: Tensor,
    U0_other: Tensor,
    V0_other: Tensor,
    Q: Tensor | None,
) -> tuple[float, float]:
    """``max_t rel((X_t' − X₀') , (X_t − X₀) Q)`` for ``X = U`` and ``X = V`` (``Q=None``: no
    rotation), the audit's residual of the run ``other`` against the ``plain`` run."""
    res_U, res_V = 0.0, 0.0
    for (U_t, V_t), (U_o, V_o) in zip(plain, other, strict=True):
        dU, dV = U_t - U0, V_t - V0
        if Q is not None:
            dU, dV = dU @ Q, dV @ Q
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
