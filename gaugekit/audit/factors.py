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

Threshold. For an equivariant rule the residual is pure round-off: a few dozen flops per step,
an SVD or ``eigh`` in Muon/Shampoo, amplified mildly over ``num_steps``; in float64 this is
``1e-16 … 1e-11`` (measured over the library's rules at the default sizes). A rule that breaks
the gauge breaks it at first order in the update, ``O(1e-2 … 1)`` relative. The float64
threshold ``1e-8`` sits three orders of magnitude above the round-off and six below the
breakage; the float32 threshold ``1e-3`` sits two orders above float32 round-off
(``1e-7 … 1e-5``). Two caveats follow from the same rule. A nearly exact polar factor
(``msign`` through ``(GGᵀ + λI)^{-1/2}`` with tiny ``λ``) amplifies round-off by up to
``λ^{-1/2}`` and can cross the float32 threshold: that is conditioning, and a larger ``λ``
removes it. A rule that is equivariant in exact arithmetic but computes in lower precision
(``torch.optim.Muon`` runs Newton–Schulz in bfloat16) is reported as *not* equivariant, which
is the truth about what it computes.

Verdicts in words. Every result ends with one plain line (:meth:`AuditResult.verdict_line`):
the optimizer's class and hyperparameters as built, then *keeps the gauge*, *breaks the gauge*
or *chaotic (gauge twin ≈ noise twin)*, with the numbers that decide it. Besides the plain and
the rotated run the audit makes a third, *noise* run from ``(U₀ + δE, V₀ + δF)`` (``E, F``
i.i.d. ``N(0, 1)``, ``δ = noise_scale``, no rotation), whose displacement residual against the
plain run, ``r_noise``, measures how strongly the dynamics amplify an arbitrary perturbation.
The rule (:func:`decide_verdict`, shared with :func:`gaugekit.audit.heads.audit_twins`):

* keeps the gauge: :math:`r \le \tau`, with :math:`\tau` the round-off threshold above;
* breaks the gauge: :math:`r > \tau` and :math:`r > c \, r_\text{noise}`, with the chaos
  factor :math:`c` = ``CHAOS_FACTOR`` = 10;
* chaotic: :math:`r > \tau` but :math:`r \le c \, r_\text{noise}`: a perturbation of size
  ``δ`` in the given basis moves the run at least a tenth as far as the rotation does, so the
  gap says how sensitive the run is, not that the rule sees the basis.

A rule that sees the basis moves the rotated run at first order in the update; the noise run
moves by ``δ`` times the run's amplification. Outside chaos the two are orders of magnitude
apart (Adam's gauge twins end 500 times farther apart than its noise twins in the attention
chapter); in a chaotic run both saturate at the size of the attractor (Muon's gauge and noise
twins end at 0.85 and 0.87), a ratio near 1. A factor of 10 sits an order of magnitude from both.
"""

# Developer note (layers, gaugekit/__init__.py): floor 4, audit/, on optim/ and gauge.

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor

from gaugekit.gauge import haar_orthogonal, relative_distance

__all__ = [
    "AUDIT_LRS",
    "BREAKS",
    "CHAOS_FACTOR",
    "CHAOTIC",
    "FLOAT32_THRESHOLD",
    "FLOAT64_THRESHOLD",
    "IMPLEMENTATION_SWITCHES",
    "KEEPS",
    "OUTCOMES",
    "UNJUDGED",
    "AuditError",
    "AuditResult",
    "AuditRow",
    "FactorRun",
    "GaugeVerdict",
    "LossFn",
    "OptimizerFactory",
    "audit_equivariance",
    "audit_many",
    "decide_verdict",
    "default_threshold",
    "describe_optimizer",
    "format_audit_table",
    "optimizer_hyperparameters",
    "optimizer_name",
    "registry_factories",
    "run_factor_optimizer",
    "sensing_loss",
    "torch_optim_factories",
]

LossFn = Callable[[Tensor, Tensor], Tensor]
OptimizerFactory = Callable[[list[Tensor]], torch.optim.Optimizer]

#: Verdict threshold on the relative displacement residual for float64 runs (see module doc).
FLOAT64_THRESHOLD: float = 1e-8
#: Verdict threshold for float32 runs.
FLOAT32_THRESHOLD: float = 1e-3


class AuditError(RuntimeError):
    """The audited optimizer could not be run: its factory or a step raised, or it diverged."""


def default_threshold(dtype: torch.dtype) -> float:
    """The documented verdict threshold for ``dtype`` (float64: 1e-8; float32: 1e-3)."""
    if dtype == torch.float64:
        return FLOAT64_THRESHOLD
    if dtype == torch.float32:
        return FLOAT32_THRESHOLD
    raise ValueError(f"Invalid dtype: {dtype!r}; expected torch.float64 or torch.float32")


# --------------------------------------------------------------------------------------------
# verdicts in words, and what was audited
# --------------------------------------------------------------------------------------------

#: A gauge drift more than this many times the noise twin's is the basis, not chaos (module doc).
CHAOS_FACTOR: float = 10.0
#: Outcome of :func:`decide_verdict`: the drift is round-off.
KEEPS = "keeps the gauge"
#: Outcome of :func:`decide_verdict`: the gauge twin drifts far beyond the noise twin.
BREAKS = "breaks the gauge"
#: Outcome of :func:`decide_verdict`: the gauge twin drifts no farther than chaos explains.
CHAOTIC = "chaotic (gauge twin ≈ noise twin)"
#: Outcome of :func:`decide_verdict`: no verdict (the run did not move, or diverged).
UNJUDGED = "cannot be judged"
#: The four outcomes of :func:`decide_verdict`, in this order.
OUTCOMES: tuple[str, ...] = (KEEPS, BREAKS, CHAOTIC, UNJUDGED)

#: ``torch.optim`` constructor switches that choose an implementation, not the update; left out
#: of :func:`optimizer_hyperparameters` while they are off (``None`` or ``False``).
IMPLEMENTATION_SWITCHES: frozenset[str] = frozenset(
    {"foreach", "fused", "capturable", "differentiable"}
)


@dataclass(frozen=True)
class GaugeVerdict:
    """The verdict of one audit and the numbers that decide it (see :func:`decide_verdict`).

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        gauge: drift of the gauge twin (the audit residual ``r``).
        noise: drift of the noise twin, or ``None`` when none was run.
        threshold: the round-off threshold ``r`` is compared with.
        factor: the chaos factor used.
        why: a short reason, set only for an unjudged outcome (``"the run did not move"``).
    """

    outcome: str
    gauge: float
    noise: float | None
    threshold: float
    factor: float = CHAOS_FACTOR
    why: str = ""

    def reason(self) -> str:
        """The numbers that decide the outcome, and the rule that decided it, in one clause."""
        g, t = f"{self.gauge:.2e}", f"{self.threshold:.0e}"
        if self.outcome == UNJUDGED:
            return self.why or "no result"
        if self.outcome == KEEPS:
            return f"gauge twin {g} <= round-off threshold {t}"
        if self.noise is None:
            return (f"gauge twin {g} > round-off threshold {t}; no noise twin was run, so chaos "
                    f"is not ruled out")
        ratio = self.gauge / self.noise if self.noise > 0 else math.inf
        compare = ">" if self.outcome == BREAKS else "<="
        return (f"gauge twin {g} > round-off threshold {t} and {ratio:.3g} x the noise twin "
                f"{self.noise:.2e} ({compare} {self.factor:g} x)")

    def line(self, optimizer: str) -> str:
        """``"OPTIMIZER: OUTCOME: NUMBERS"``, the plain line that ends an audit's report."""
        return f"{optimizer}: {self.outcome}: {self.reason()}"


def decide_verdict(
    gauge: float,
    noise: float | None,
    threshold: float,
    *,
    factor: float = CHAOS_FACTOR,
    unjudged: str = "",
) -> GaugeVerdict:
    """Decide keeps / breaks / chaotic from the gauge twin's and the noise twin's drift.

    The rule, in order: a non-empty ``unjudged`` reason, or a drift that is not a finite
    number, gives :data:`UNJUDGED`; ``gauge <= threshold`` keeps the gauge (round-off);
    otherwise ``gauge > factor * noise`` breaks it, and ``gauge <= factor * noise`` is chaotic
    (the run moves that far from any perturbation of the noise twin's size). With
    ``noise=None`` (no noise twin) a drift above the threshold breaks the gauge, and the reason
    says that chaos was not ruled out.

    Args:
        gauge: the gauge twin's drift (relative, >= 0).
        noise: the noise twin's drift, measured the same way, or ``None``.
        threshold: the largest drift that is round-off for the dtype.
        factor: the chaos factor (default :data:`CHAOS_FACTOR`).
        unjudged: why the run cannot be judged (it did not move, it diverged), if it cannot.
    """
    finite = math.isfinite(gauge) and (noise is None or not math.isnan(noise))
    if unjudged or not finite:
        return GaugeVerdict(UNJUDGED, gauge, noise, threshold, factor,
                            unjudged or "a drift is not a finite number")
    if gauge <= threshold:
        return GaugeVerdict(KEEPS, gauge, noise, threshold, factor)
    if noise is None or gauge > factor * noise:
        return GaugeVerdict(BREAKS, gauge, noise, threshold, factor)
    return GaugeVerdict(CHAOTIC, gauge, noise, threshold, factor)


def optimizer_name(optimizer: object) -> str:
    """The shortest public dotted path of the optimizer's class (``torch.optim.AdamW``)."""
    cls = type(optimizer)
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None and getattr(module, cls.__qualname__, None) is cls:
            return f"{'.'.join(parts[:i])}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _plain(value: object) -> object:
    """``value`` as strict-JSON plain data: finite numbers, strings, booleans, lists; anything
    else (``inf``, a dtype, a callable) as its ``repr``."""
    if isinstance(value, Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return repr(value)


def optimizer_hyperparameters(optimizer: object) -> dict[str, object]:
    """The hyperparameters the optimizer was built with, as resolved (its ``defaults``).

    Implementation switches (:data:`IMPLEMENTATION_SWITCHES`) are left out while off. A
    parameter group that differs from the defaults adds ``"group I"`` with its differing values.
    Values are plain data (numbers, strings, lists; anything else as its ``repr``). An object
    that only has ``step`` (a wrapper around optimizers) has no hyperparameters to show: ``{}``.
    """
    defaults = dict(getattr(optimizer, "defaults", {}) or {})
    out: dict[str, object] = {
        key: _plain(value) for key, value in defaults.items()
        if not (key in IMPLEMENTATION_SWITCHES and value in (None, False))
    }
    for i, group in enumerate(getattr(optimizer, "param_groups", None) or ()):
        changed = {
            key: _plain(value) for key, value in group.items()
            if key != "params" and key in defaults and _plain(value) != _plain(defaults[key])
        }
        if changed:
            out[f"group {i}"] = changed
    return out


def _format_value(value: object) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_format_value(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_format_value(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def describe_optimizer(name: str, hyperparameters: Mapping[str, object]) -> str:
    """``"torch.optim.AdamW(lr=0.001, betas=(0.9, 0.999), ...)"`` from a name and its values."""
    args = ", ".join(f"{k}={_format_value(v)}" for k, v in hyperparameters.items())
    return f"{name}({args})"


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
# results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    ``residual_U``, ``residual_V``: max over steps of the relative displacement residual of
    each factor; ``residual``: the larger of the two. ``displacement``: size of the plain run's
    final displacement relative to the start, ``‖(U_T − U₀, V_T − V₀)‖ / ‖(U₀, V₀)‖``; a run that
    does not move (``static``) cannot be judged. ``equivariant`` is
    ``not static and residual <= threshold``. ``noise_residual``: the same residual for the
    noise run started ``noise_scale`` away without a rotation (``None`` when it was not run).
    ``optimizer``, ``hyperparameters``: the class (dotted path) and the values it was built
    with (:func:`optimizer_hyperparameters`). ``gauge_verdict`` and :meth:`verdict_line` say
    in words whether the rule keeps the gauge, breaks it or is chaotic (module doc).
    """

    residual_U: float
    residual_V: float
    residual: float
    threshold: float
    equivariant: bool
    static: bool
    num_steps: int
    displacement: float
    loss_start: float
    loss_end: float
    dtype: str
    noise_residual: float | None = None
    noise_scale: float | None = None
    optimizer: str = ""
    hyperparameters: dict[str, object] = field(default_factory=dict, hash=False)

    @property
    def verdict(self) -> str:
        """``"equivariant"``, ``"not equivariant"`` or ``"static"`` (the run did not move)."""
        if self.static:
            return "static"
        return "equivariant" if self.equivariant else "not equivariant"

    @property
    def gauge_verdict(self) -> GaugeVerdict:
        """Keeps / breaks / chaotic, from ``residual``, ``noise_residual`` and ``threshold``."""
        return decide_verdict(
            self.residual, self.noise_residual, self.threshold,
            unjudged=f"the run did not move in {self.num_steps} steps" if self.static else "",
        )

    @property
    def description(self) -> str:
        """The optimizer as built, as in ``"torch.optim.AdamW(lr=0.01, ...)"``."""
        return describe_optimizer(self.optimizer or "optimizer", self.hyperparameters)

    def verdict_line(self, name: str | None = None) -> str:
        """One plain line: the optimizer as built, its verdict, the numbers and the rule.

        ``name`` (a row name such as a registry name) is put in front when it is not the
        class's own name.
        """
        short = self.optimizer.rsplit(".", 1)[-1]
        plain = name is None or name in (self.optimizer, short)
        label = self.description if plain else f"{name} = {self.description}"
        return self.gauge_verdict.line(label)

    def __str__(self) -> str:
        return format_audit_table([AuditRow(self.optimizer or "optimizer", self.verdict, self)])


@dataclass(frozen=True)
class AuditRow:
    """One row of :func:`audit_many`: a result, or the error that prevented one."""

    name: str
    verdict: str
    result: AuditResult | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        """Flat dictionary for a table: name, verdict, the result's fields, error."""
        row: dict[str, object] = {"name": self.name, "verdict": self.verdict}
        if self.result is not None:
            row.update(asdict(self.result))
        row["error"] = self.error
        return row


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


def run_factor_optimizer(
    make_optimizer: OptimizerFactory,
    U0: Tensor,
    V0: Tensor,
    loss: LossFn,
    num_steps: int,
) -> FactorRun:
    """Run ``make_optimizer([U, V])`` from ``(U0, V0)`` for ``num_steps`` steps on ``loss``.

    Each step calls ``optimizer.step(closure)`` with a closure that clears the gradients,
    evaluates ``loss`` and back-propagates, so any ``torch.optim`` optimizer works (L-BFGS too).
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
            value.backward()
        return value

    iterates = []
    for t in range(1, num_steps + 1):
        try:
            optimizer.step(closure)
        except Exception as exc:  # noqa: BLE001 - reported, not swallowed
            raise AuditError(f"step {t} raised {type(exc).__name__}: {exc}") from exc
        if not (torch.isfinite(U).all() and torch.isfinite(V).all()):
            raise AuditError(f"non-finite parameters after step {t}")
        iterates.append((U.detach().clone(), V.detach().clone()))
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
) -> AuditResult:
    r"""Audit ``make_optimizer`` for gauge equivariance (the paper's Proposition 4.2) over
    ``num_steps`` steps.

    ``make_optimizer(params)`` receives the list ``[U, V]`` of two leaf tensors and returns any
    ``torch.optim.Optimizer``; it is called once per run. Each step calls
    ``optimizer.step(closure)`` with a closure that clears the gradients, evaluates ``loss`` and
    back-propagates (so closure-only optimizers such as L-BFGS work too).

    Missing pieces are drawn from ``generator`` (default ``torch.Generator().manual_seed(0)``)
    in this order: the sensing loss (:func:`sensing_loss` with ``n, m`` from ``shape``), then
    ``U₀`` (n×k) and ``V₀`` (m×k) with entries ``init_scale · N(0, 1/k)``, then a Haar ``Q``.
    ``shape = (n, m, k)`` and ``dtype``/``device`` are taken from ``U`` when it is given.

    A third run, the noise twin, starts from ``(U₀ + δE, V₀ + δF)`` with ``δ = noise_scale``
    and ``E, F`` i.i.d. ``N(0, 1)`` from ``torch.Generator().manual_seed(noise_seed)`` (so the
    draws above do not change); its displacement residual against the plain run is the
    yardstick that tells a broken gauge from chaos (module doc). ``noise_scale=None`` skips it.

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

    plain_run = run_factor_optimizer(make_optimizer, U0, V0, loss, num_steps)
    plain = plain_run.iterates
    rotated = run_factor_optimizer(make_optimizer, U0Q, V0Q, loss, num_steps).iterates
    res_U, res_V = _displacement_residual(plain, rotated, U0, V0, U0Q, V0Q, Q)
    noise_residual = None
    if noise_scale is not None:
        noise = torch.Generator().manual_seed(noise_seed)
        U0n = U0 + noise_scale * torch.randn(U0.shape, generator=noise, dtype=dtype).to(U0.device)
        V0n = V0 + noise_scale * torch.randn(V0.shape, generator=noise, dtype=dtype).to(V0.device)
        noisy = run_factor_optimizer(make_optimizer, U0n, V0n, loss, num_steps).iterates
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


def format_audit_table(rows: Sequence[AuditRow]) -> str:
    """A fixed-width table of audit rows, then one verdict line per row.

    Columns: name, verdict, the residuals of ``U`` and ``V``, the noise twin's residual and the
    plain run's displacement (``moved``); then the threshold, then for every row the line of
    :meth:`AuditResult.verdict_line` (the optimizer as built, keeps / breaks / chaotic and the
    numbers that decide it), or the error that prevented a result.
    """
    w = max([18, *(len(row.name) for row in rows)])
    header = (f"{'optimizer':<{w}} {'verdict':<16} {'residual_U':>11} {'residual_V':>11} "
              f"{'noise':>9} {'moved':>9}")
    lines = [header, "-" * len(header)]
    for row in rows:
        if row.result is None:
            lines.append(f"{row.name:<{w}} {row.verdict:<16} {row.error}")
            continue
        r = row.result
        noise = f"{r.noise_residual:>9.2e}" if r.noise_residual is not None else f"{'-':>9}"
        lines.append(
            f"{row.name:<{w}} {row.verdict:<16} {r.residual_U:>11.2e} {r.residual_V:>11.2e} "
            f"{noise} {r.displacement:>9.2e}"
        )
    judged = [row.result for row in rows if row.result is not None]
    if judged:
        lines.append(
            f"threshold: {judged[0].threshold:.0e} ({judged[0].dtype}); rule: keeps the gauge "
            f"if residual <= threshold, else breaks it if residual > {CHAOS_FACTOR:g} x noise, "
            f"else chaotic"
        )
    for row in rows:
        if row.result is None:
            lines.append(f"{row.name}: {UNJUDGED}: {row.error}")
        else:
            lines.append(row.result.verdict_line(row.name))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# factories
# --------------------------------------------------------------------------------------------

#: torch.optim classes audited by :func:`torch_optim_factories`, with their special arguments.
#: ``None`` for ``lr`` keeps the class default (Adadelta and L-BFGS are scaled around lr = 1).
#: SparseAdam is left out: it requires sparse gradients and does not apply to dense factors.
_TORCH_OPTIM_SPECS: tuple[tuple[str, str, dict[str, object], bool], ...] = (
    # (row name, class name, extra kwargs, use the common lr)
    ("SGD", "SGD", {}, True),
    ("SGD-nesterov", "SGD", {"momentum": 0.9, "nesterov": True}, True),
    ("Adam", "Adam", {}, True),
    ("AdamW", "AdamW", {}, True),
    ("Adamax", "Adamax", {}, True),
    ("NAdam", "NAdam", {}, True),
    ("RAdam", "RAdam", {}, True),
    ("Adagrad", "Adagrad", {}, True),
    ("Adadelta", "Adadelta", {}, False),
    ("RMSprop", "RMSprop", {}, True),
    ("Rprop", "Rprop", {}, True),
    ("ASGD", "ASGD", {}, True),
    ("Adafactor", "Adafactor", {}, True),
    ("Muon", "Muon", {}, True),
    ("LBFGS", "LBFGS", {"max_iter": 4}, False),
)


def torch_optim_factories(lr: float = 1e-2) -> dict[str, OptimizerFactory]:
    """Factories for the ``torch.optim`` optimizers present in this torch version.

    Each takes ``[U, V]`` and returns the optimizer with ``lr`` (except Adadelta and L-BFGS, which
    keep their defaults of 1.0) and the arguments listed in ``_TORCH_OPTIM_SPECS``; SGD also
    appears with Nesterov momentum. Classes absent from an older torch (Adafactor, Muon) are
    skipped.
    """
    factories: dict[str, OptimizerFactory] = {}
    for row_name, class_name, extra, use_lr in _TORCH_OPTIM_SPECS:
        cls = getattr(torch.optim, class_name, None)
        if cls is None:
            continue
        kwargs = dict(extra)
        if use_lr:
            kwargs["lr"] = lr

        def factory(params: list[Tensor], cls=cls, kwargs=kwargs) -> torch.optim.Optimizer:
            return cls(params, **kwargs)

        factories[row_name] = factory
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
    factories: dict[str, OptimizerFactory] = {}
    for name in chosen:
        kwargs = {**({"lr": AUDIT_LRS[name]} if name in AUDIT_LRS else {}), **overrides}

        def factory(
            params: list[Tensor], name: str = name, kwargs: dict[str, object] = kwargs
        ) -> torch.optim.Optimizer:
            return make_optimizer(name, params, **kwargs)

        factories[name] = factory
    return factories
