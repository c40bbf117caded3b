"""The zoo's registry: name → :class:`OptimizerSpec`. Tests, the CLI and the book read it.

To add an optimizer, append one :class:`OptimizerSpec` to ``_SPECS`` below (or call
:func:`register_optimizer` from code that imports this module).

Names. :func:`get_spec` and :func:`make_optimizer` take a registry name (``"scalar_adam"``),
a class name (``"SharedScaleAdam"``: the class's entry without ``options``) or an alias
(``"adamw"``: :class:`~gaugekit.optim.adam.Adam` with ``decoupled_weight_decay=True`` and
``weight_decay=0.01``, torch's AdamW; ``"muon_adam"``: :class:`~gaugekit.optim.muon_adam.MuonAdam`;
``ALIASES``), ignoring case, ``_`` and ``-``
(``"shared-scale-adam"``). Aliases are no rows of the zoo: :func:`optimizer_names` and
:func:`all_specs` list the registered names only. The class's own defaults (plus
the spec's ``options``) must let ``make_optimizer(name, [U, V])`` run on two ``n × k`` factors.

Defaults have one source, the class: ``make_optimizer(name, params)`` builds ``cls(params)``
with the class's defaults (``Adam``: ``lr = 1e-3``, as torch), never the paper's learning rate
of the rule, which lives in each experiment's grid (pinned there, with the rule's other
settings, so that a change here changes no run id).

The paper's learning-rate grids live with the book's experiments, not here. ``lr_schedule`` is
the paper's protocol (the newest ``experiments/optimizer_zoo_bias.py``, which fixes Table 2):
cosine decay to zero for the constant-update-norm rules muon, signum and lion, and for rmsprop,
whose eps-bounded denominator cannot reach the interpolation bar at a constant step; constant
for every other rule.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch.optim import Optimizer

from gaugekit.optim._validation import invalid
from gaugekit.optim.adafactor import Adafactor
from gaugekit.optim.adam import Adam, AdamMini, SharedScaleAdam
from gaugekit.optim.eigen_adam import EigenAdam
from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS, FlowAdam
from gaugekit.optim.gram import GramPreconditioned
from gaugekit.optim.muon import Muon
from gaugekit.optim.muon_adam import MuonAdam
from gaugekit.optim.rmsprop import RMSprop
from gaugekit.optim.scaled_gd import ScaledGD
from gaugekit.optim.schedules import SCHEDULES, Schedule
from gaugekit.optim.sgd import GD, Momentum
from gaugekit.optim.shampoo import Shampoo
from gaugekit.optim.sign import Lion, Signum


@dataclass(frozen=True, kw_only=True)
class OptimizerSpec:
    """One entry of the zoo (built by keyword: ``OptimizerSpec(name=..., cls=..., ...)``).

    Attributes:
        name: registry key (``snake_case``).
        cls: the optimizer class.
        equivariant: whether the update commutes with the gauge ``(U, V) → (UQ, VQ)``.
        reason: one line saying why (or why not).
        lr_schedule: ``"constant"`` or ``"cosine"`` (decay to zero), the paper's protocol.
        label: display name for tables and figures.
        paired: whether params come as ``[U, V]`` pairs, one pair per group (ScaledGD).
        options: constructor arguments that make the entry a variant of its class (FlowAdam's
            prototype preset); empty for most. Never a learning rate: ``make_optimizer`` builds
            the class with the class's own defaults, and the paper's rates live in the
            experiments' grids.
        scope: where ``equivariant`` holds: the factor gauge ``(U, V) → (UQ, VQ)`` on every
            parameter the rule is given (the factor audit's problem).
        on_a_model: for a rule that routes a model's parameters between two rules (MuonAdam),
            the option that picks its second rule (``routed_by``) and, for each of its values,
            the verdict on a model routed by :func:`~gaugekit.optim.muon_param_groups`: whether
            it keeps every gauge of the model, and why (which parameters the second rule
            takes, which gauges that breaks). The twin audit
            (:func:`~gaugekit.audit.heads.audit_twins`) agrees (``tests/gaugekit/optim``).
    """

    name: str
    cls: type[Optimizer]
    equivariant: bool
    reason: str
    lr_schedule: Schedule
    label: str
    paired: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    scope: str = "the factor gauge, on every parameter it is given"
    routed_by: str | None = None
    on_a_model: Mapping[Any, tuple[bool, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.lr_schedule not in SCHEDULES:
            raise invalid("lr_schedule", self.lr_schedule, f"one of {SCHEDULES}")
        if "lr" in self.options:
            raise invalid(
                "options", dict(self.options), "no 'lr' (the class's default is the registry's; "
                "an experiment's rates belong in its grid)"
            )

    @property
    def matrix_only(self) -> bool:
        """Whether every parameter must be a matrix (after the batch dims), as the class says."""
        return bool(getattr(self.cls, "matrix_only", False))

    @property
    def defaults(self) -> dict[str, Any]:
        """The keyword arguments ``make_optimizer(name, params)`` resolves to: the class's
        constructor defaults, then :attr:`options` (read-only; for display)."""
        signature = inspect.signature(self.cls.__init__)
        resolved = {
            p.name: p.default for p in signature.parameters.values()
            if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        return {**resolved, **self.options}

    def model_verdict(self, **options: Any) -> tuple[bool, str] | None:
        """``(keeps every gauge, why)`` on a model routed by ``muon_param_groups``, for the
        options given (the rest at the spec's defaults); ``None`` for a rule that routes
        nothing (its verdict is ``equivariant`` on every parameter)."""
        if self.routed_by is None:
            return None
        value = {**self.defaults, **options}[self.routed_by]
        return self.on_a_model[value]

    def verdict_lines(self, **options: Any) -> list[str]:
        """The verdict with its scope, in words: one line, two for a routed rule."""
        kind = "keeps" if self.equivariant else "breaks"
        lines = [f"{self.name}: {kind} the gauge ({self.scope})"]
        routed = self.model_verdict(**options)
        if routed is not None:
            value = {**self.defaults, **options}[self.routed_by]
            lines.append(f"on a model routed by muon_param_groups, {self.routed_by}="
                         f"{value!r}: {'keeps' if routed[0] else 'breaks'} its gauges: "
                         f"{routed[1]}")
        return lines

    def make(self, params: Any, **overrides: Any) -> Optimizer:
        """``cls(params, **{**options, **overrides})``."""
        return self.cls(params, **{**self.options, **overrides})


_SPECS: tuple[OptimizerSpec, ...] = (
    OptimizerSpec(
        name="gd", cls=GD, equivariant=True,
        reason="linear in the gradient, so G → GQ gives ΔU → ΔU Q",
        lr_schedule="constant", label="GD",
    ),
    OptimizerSpec(
        name="momentum", cls=Momentum, equivariant=True,
        reason="the buffer is a linear combination of covariant gradients",
        lr_schedule="constant", label="Momentum",
    ),
    OptimizerSpec(
        name="adam", cls=Adam, equivariant=False,
        reason="the per-entry denominator √v̂ does not commute with rotations of the entries",
        lr_schedule="constant", label="Adam",
    ),
    OptimizerSpec(
        name="scalar_adam", cls=SharedScaleAdam, equivariant=True,
        reason="one shared denominator √(mean v̂): a gauge-invariant scalar times m̂",
        lr_schedule="constant", label="Shared-scale Adam",
    ),
    OptimizerSpec(
        name="rmsprop", cls=RMSprop, equivariant=False,
        reason="the per-entry denominator √v does not commute with rotations of the entries",
        lr_schedule="cosine", label="RMSProp",
    ),
    OptimizerSpec(
        name="lion", cls=Lion, equivariant=False,
        reason="entrywise sign: sign(GQ) ≠ sign(G) Q",
        lr_schedule="cosine", label="Lion",
    ),
    OptimizerSpec(
        name="signum", cls=Signum, equivariant=False,
        reason="entrywise sign: sign(GQ) ≠ sign(G) Q",
        lr_schedule="cosine", label="Signum",
    ),
    OptimizerSpec(
        name="adafactor", cls=Adafactor, equivariant=False,
        reason="row and column statistics of G² are taken in the given basis; G → GQ changes them",
        lr_schedule="constant", label="Adafactor",
    ),
    OptimizerSpec(
        name="muon", cls=Muon, equivariant=True,
        reason="Newton–Schulz is an odd matrix polynomial: NS(MQ) = NS(M) Q",
        lr_schedule="cosine", label="Muon",
    ),
    OptimizerSpec(
        name="shampoo", cls=Shampoo, equivariant=True,
        reason="L is invariant and R → QᵀRQ, so L⁻¼ G R⁻¼ → (L⁻¼ G R⁻¼) Q",
        lr_schedule="constant", label="Shampoo",
    ),
    OptimizerSpec(
        name="scaled_gd", cls=ScaledGD, equivariant=True,
        reason="G_U (VᵀV + λI)⁻¹ → G_U (VᵀV + λI)⁻¹ Q, with λ a gauge-invariant trace",
        lr_schedule="constant", label="ScaledGD", paired=True,
    ),
    OptimizerSpec(
        name="gram", cls=GramPreconditioned, equivariant=True,
        reason="H(GGᵀ) G with the gauge-invariant left Gram GGᵀ (the paper's Theorem 4.5)",
        lr_schedule="constant", label="Gram-preconditioned",
    ),
    OptimizerSpec(
        name="eigen_adam", cls=EigenAdam, equivariant=True,
        reason="Adam in the eigenbasis E of EMA(GᵀG), which rotates as E → QᵀE: GE is invariant "
        "(needs a simple spectrum at every basis refresh)",
        lr_schedule="constant", label="Eigenbasis Adam",
    ),
    OptimizerSpec(
        name="adam_mini", cls=AdamMini, equivariant=True,
        reason="one second moment per block of whole rows: G → GQ keeps every row's norm, so "
        "each block's mean g² is invariant",
        lr_schedule="constant", label="Adam-mini",
    ),
    OptimizerSpec(
        name="flow_adam", cls=FlowAdam, equivariant=True,
        reason="p = 0 with the RMS scale, Frobenius-norm triggers and a global-norm clip: every "
        "step is a covariant gradient or moment times gauge-invariant scalars",
        lr_schedule="constant", label="FlowAdam (invariant)",
    ),
    OptimizerSpec(
        name="flow_adam_prototype", cls=FlowAdam, equivariant=False,
        reason="Adam's per-entry denominator (p = 1) and the per-coordinate clip do not commute "
        "with rotations of the entries",
        lr_schedule="constant", label="FlowAdam (prototype)",
        options=FLOW_ADAM_PRESETS["prototype"],
    ),
)

_REGISTRY: dict[str, OptimizerSpec] = {}


def register_optimizer(spec: OptimizerSpec, *, replace: bool = False) -> OptimizerSpec:
    """Add ``spec`` under ``spec.name``; a taken name raises unless ``replace``."""
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"Invalid name: {spec.name!r}; already registered (pass replace=True)")
    _REGISTRY[spec.name] = spec
    return spec


for _spec in _SPECS:
    register_optimizer(_spec)


def optimizer_names(equivariant: bool | None = None) -> list[str]:
    """Registered names in registration order; filtered by ``equivariant`` when given."""
    return [n for n, s in _REGISTRY.items() if equivariant is None or s.equivariant is equivariant]


#: Other names of registered rules, each a spec of its own (not a row of the zoo). ``adamw`` is
#: torch's AdamW, the decoupled decay with torch.optim.AdamW's default ``weight_decay = 0.01``;
#: ``muon_adam`` is :class:`~gaugekit.optim.muon_adam.MuonAdam`, Muon on the matrices and Adam
#: on the rest in one optimizer (on a factor pair both factors are matrices: it is Muon).
ALIASES: dict[str, OptimizerSpec] = {
    "adamw": OptimizerSpec(
        name="adamw", cls=Adam, equivariant=False,
        reason="as adam: the per-entry denominator √v̂ does not commute with rotations of the "
        "entries (the decoupled decay θ ← θ(1 − lr λ) is a scalar multiple of θ)",
        lr_schedule="constant", label="AdamW",
        options={"decoupled_weight_decay": True, "weight_decay": 1e-2},
    ),
    "muon_adam": OptimizerSpec(
        name="muon_adam", cls=MuonAdam, equivariant=True,
        reason="Muon on every matrix (NS(MQ) = NS(M) Q); its Adam takes only vectors and the "
        "modules routed to it, none of them a factor",
        lr_schedule="cosine", label="Muon + Adam",
        scope="the factor gauge: both factors are matrices, both go to Muon",
        routed_by="adam",
        on_a_model={
            "adamw": (False, "its AdamW takes the embeddings, the head and every vector "
                      "(biases, gains); its per-coordinate second moment breaks each gauge "
                      "acting on them: the attention head gauge through the query and key "
                      "biases (adam='shared_scale' keeps it)"),
            "shared_scale": (True, "its shared-scale Adam on the embeddings, the head and every "
                             "vector multiplies each step by one gauge-invariant scalar"),
        },
    ),
}


def _folded(name: str) -> str:
    """``name`` without case, ``_`` and ``-``: ``"Shared_Scale-Adam"`` → ``"sharedscaleadam"``."""
    return name.lower().replace("_", "").replace("-", "")


def get_spec(name: str) -> OptimizerSpec:
    """The spec of ``name``: a registry name, a class name (the class's entry without
    ``options``) or an alias of ``ALIASES``, ignoring case, ``_`` and ``-``.

    An unknown name raises ``ValueError`` listing the allowed ones.
    """
    if isinstance(name, str):
        if name in _REGISTRY:
            return _REGISTRY[name]
        key = _folded(name)
        for spec in _REGISTRY.values():  # a registry name, in another case or spelling
            if _folded(spec.name) == key:
                return spec
        for alias, spec in ALIASES.items():
            if _folded(alias) == key:
                return spec
        for spec in _REGISTRY.values():  # a class name: the class's plain entry
            if not spec.options and _folded(spec.cls.__name__) == key:
                return spec
    classes = list(dict.fromkeys(s.cls.__name__ for s in _REGISTRY.values() if not s.options))
    raise invalid(
        "name", name, f"a registry name {optimizer_names()}, an alias {sorted(ALIASES)} or a "
        f"class name {classes} (case, '_' and '-' ignored)"
    )


def all_specs() -> list[OptimizerSpec]:
    """Every registered spec, in registration order."""
    return list(_REGISTRY.values())


def make_optimizer(name: str, params: Iterable[Any] | Any, **overrides: Any) -> Optimizer:
    """Build the optimizer ``name`` on ``params``: its class with the class's defaults, the
    spec's ``options`` and ``overrides``.

    ``params`` may be tensors or param groups, as for the class; for a paired rule (ScaledGD)
    a list ``[U, V]`` is one pair.
    """
    return get_spec(name).make(params, **overrides)
