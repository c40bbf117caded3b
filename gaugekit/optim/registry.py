"""The zoo's registry: name → :class:`OptimizerSpec`. Tests, the CLI and the book read it.

To add an optimizer, append one :class:`OptimizerSpec` to ``_SPECS`` below (or call
:func:`register_optimizer` from code that imports this module). ``defaults`` must let
``make_optimizer(name, [U, V])`` run on two ``n × k`` factors.

Learning-rate grids are the paper's (``experiments/optimizer_zoo_bias.py``, the n = 40 CPU
sweep); ``ladder_lr_grid`` is the base grid of the replication ladder
(``experiments/nibi/zoo_ladder.py``, rescaled there with ``n``). ``lr_schedule`` is the paper's
protocol (the newest ``experiments/optimizer_zoo_bias.py``, which fixes Table 2): cosine decay to
zero for the constant-update-norm rules muon, signum and lion, and for rmsprop, whose eps-bounded
denominator cannot reach the interpolation bar at a constant step; constant for every other rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer

from gaugekit.optim.adafactor import Adafactor
from gaugekit.optim.adam import Adam, SharedScaleAdam
from gaugekit.optim.eigen_adam import EigenAdam
from gaugekit.optim.gram import GramPreconditioned
from gaugekit.optim.muon import Muon
from gaugekit.optim.rmsprop import RMSprop
from gaugekit.optim.scaled_gd import ScaledGD
from gaugekit.optim.schedules import SCHEDULES, Schedule
from gaugekit.optim.sgd import GD, Momentum
from gaugekit.optim.shampoo import Shampoo
from gaugekit.optim.sign import Lion, Signum


@dataclass(frozen=True)
class OptimizerSpec:
    """One entry of the zoo.

    Attributes:
        name: registry key (``snake_case``).
        cls: the optimizer class.
        defaults: constructor keyword arguments of the paper's setting (``lr`` is one point of
            the grid, not a tuned value).
        equivariant: whether the update commutes with the gauge ``(U, V) → (UQ, VQ)``.
        reason: one line saying why (or why not).
        matrix_only: whether every parameter must be a matrix (after the batch dims).
        lr_schedule: ``"constant"`` or ``"cosine"`` (decay to zero), the paper's protocol.
        paper_lr_grid: the paper's learning-rate grid (``()`` when the paper has none).
        label: display name for tables and figures.
        ladder_lr_grid: the replication ladder's base grid (``()`` when none).
        paired: whether params come as ``[U, V]`` pairs, one pair per group (ScaledGD).
    """

    name: str
    cls: type[Optimizer]
    defaults: Mapping[str, Any]
    equivariant: bool
    reason: str
    matrix_only: bool
    lr_schedule: Schedule
    paper_lr_grid: tuple[float, ...]
    label: str
    ladder_lr_grid: tuple[float, ...] = ()
    paired: bool = False

    def __post_init__(self) -> None:
        if self.lr_schedule not in SCHEDULES:
            raise ValueError(
                f"Invalid lr_schedule: {self.lr_schedule!r}; expected one of {SCHEDULES}"
            )

    def make(self, params: Any, **overrides: Any) -> Optimizer:
        """``cls(params, **{**defaults, **overrides})``."""
        return self.cls(params, **{**self.defaults, **overrides})


_SPECS: tuple[OptimizerSpec, ...] = (
    OptimizerSpec(
        "gd", GD, {"lr": 0.1}, True,
        "linear in the gradient, so G -> GQ gives dU -> dU Q",
        False, "constant", (0.01, 0.03, 0.1, 0.3), "GD",
        ladder_lr_grid=(1e-3, 3e-3, 1e-2, 3e-2, 0.1),
    ),
    OptimizerSpec(
        "momentum", Momentum, {"lr": 0.03, "momentum": 0.9}, True,
        "the buffer is a linear combination of covariant gradients",
        False, "constant", (), "Momentum",
    ),
    OptimizerSpec(
        "adam", Adam, {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8}, False,
        "per-entry denominator sqrt(v_hat) does not commute with rotations of the entries",
        False, "constant", (1e-3, 1e-2, 3e-2), "Adam",
        ladder_lr_grid=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    ),
    OptimizerSpec(
        "scalar_adam", SharedScaleAdam, {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8}, True,
        "one shared denominator sqrt(mean v_hat): a gauge-invariant scalar times m_hat",
        False, "constant", (1e-3, 3e-3, 1e-2, 3e-2), "Shared-scale Adam",
        ladder_lr_grid=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
    ),
    OptimizerSpec(
        "rmsprop", RMSprop, {"lr": 1e-3, "alpha": 0.99, "eps": 1e-8}, False,
        "per-entry denominator sqrt(v) does not commute with rotations of the entries",
        False, "cosine", (1e-4, 3e-4, 1e-3, 3e-3, 1e-2), "RMSProp",
        ladder_lr_grid=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
    ),
    OptimizerSpec(
        "lion", Lion, {"lr": 1e-3, "betas": (0.9, 0.99)}, False,
        "entrywise sign: sign(GQ) != sign(G) Q",
        False, "cosine", (1e-4, 3e-4, 1e-3, 3e-3), "Lion",
        ladder_lr_grid=(1e-4, 3e-4, 1e-3, 3e-3),
    ),
    OptimizerSpec(
        "signum", Signum, {"lr": 1e-3, "momentum": 0.9}, False,
        "entrywise sign: sign(GQ) != sign(G) Q",
        False, "cosine", (1e-4, 3e-4, 1e-3, 3e-3), "Signum",
        ladder_lr_grid=(1e-4, 3e-4, 1e-3, 3e-3),
    ),
    OptimizerSpec(
        "adafactor", Adafactor, {"lr": 1e-3, "beta2": 0.999, "eps": 1e-8}, False,
        "row/column statistics of G^2 are taken in the given basis; G -> GQ changes them",
        False, "constant", (3e-4, 1e-3, 3e-3, 1e-2), "Adafactor",
        ladder_lr_grid=(3e-4, 1e-3, 3e-3, 1e-2),
    ),
    OptimizerSpec(
        "muon", Muon, {"lr": 3e-2, "momentum": 0.9}, True,
        "Newton-Schulz is an odd matrix polynomial: NS(MQ) = NS(M) Q",
        True, "cosine", (3e-3, 1e-2, 3e-2, 0.1), "Muon",
        ladder_lr_grid=(3e-3, 1e-2, 3e-2, 0.1, 0.3),
    ),
    OptimizerSpec(
        "shampoo", Shampoo, {"lr": 0.1, "damping": 1.0, "update_freq": 20}, True,
        "L is invariant and R -> Q^T R Q, so L^-1/4 G R^-1/4 -> (L^-1/4 G R^-1/4) Q",
        True, "constant", (3e-2, 0.1, 0.3, 1.0), "Shampoo",
        ladder_lr_grid=(1e-2, 3e-2, 0.1, 0.3),
    ),
    OptimizerSpec(
        "scaled_gd", ScaledGD, {"lr": 1e-3, "damping": 1e-4}, True,
        "G_U (V^T V + lam I)^-1 -> G_U (V^T V + lam I)^-1 Q with lam a gauge-invariant trace",
        True, "constant", (), "ScaledGD",
        ladder_lr_grid=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2), paired=True,
    ),
    OptimizerSpec(
        "gram", GramPreconditioned, {"lr": 1e-2, "power": 0.5, "damping": 1e-6}, True,
        "H(G G^T) G with the gauge-invariant left Gram (Theorem 4.5)",
        True, "constant", (), "Gram-preconditioned",
    ),
    OptimizerSpec(
        "eigen_adam", EigenAdam,
        {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "gram_beta": 0.95, "update_freq": 10},
        True,
        "Adam in the eigenbasis of EMA(G^T G), which rotates as E -> Q^T E: G E is invariant "
        "(needs a simple spectrum at every basis refresh)",
        True, "constant", (), "Eigenbasis Adam",
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


def get_spec(name: str) -> OptimizerSpec:
    """The spec of ``name``; an unknown name raises ``ValueError`` listing the known ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Invalid name: {name!r}; expected one of {optimizer_names()}"
        ) from None


def all_specs() -> list[OptimizerSpec]:
    """Every registered spec, in registration order."""
    return list(_REGISTRY.values())


def make_optimizer(name: str, params: Iterable[Any] | Any, **overrides: Any) -> Optimizer:
    """Build the optimizer ``name`` on ``params`` with the spec's defaults and ``overrides``.

    ``params`` may be tensors or param groups, as for the class; for a paired rule (ScaledGD)
    a list ``[U, V]`` is one pair.
    """
    return get_spec(name).make(params, **overrides)
