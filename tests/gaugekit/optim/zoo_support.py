"""Support for the optimizer-zoo tests: stacked sensing problems, factors, optimizer runs.

Imported as ``from zoo_support import ...`` (pytest puts this folder on ``sys.path``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from helpers import generator
from torch import Tensor

from gaugekit.optim import make_optimizer
from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS

DTYPE = torch.float64
N_ROWS, M_ROWS, K = 5, 4, 3  # U is N_ROWS × K, V is M_ROWS × K
NUM_MEASUREMENTS = 24
NUM_RUNS = 3
#: per-run multipliers of a rule's default lr in the stacked tests
LR_FACTORS = (1.0, 0.5, 0.25)
#: The zoo's settings in these tests: one point of each rule's paper grid and its paper
#: hyperparameters (the registry's defaults before ``make_optimizer`` took the classes' own).
TEST_HPARAMS: dict[str, dict] = {
    "gd": {"lr": 0.1},
    "momentum": {"lr": 0.03, "momentum": 0.9},
    "adam": {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8},
    "scalar_adam": {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8},
    "rmsprop": {"lr": 1e-3, "alpha": 0.99, "eps": 1e-8},
    "lion": {"lr": 1e-3, "betas": (0.9, 0.99)},
    "signum": {"lr": 1e-3, "momentum": 0.9},
    "adafactor": {"lr": 1e-3, "beta2": 0.999, "eps": 1e-8},
    "muon": {"lr": 3e-2, "momentum": 0.9},
    "shampoo": {"lr": 0.1, "damping": 1.0, "update_freq": 20},
    "scaled_gd": {"lr": 1e-3, "damping": 1e-4},
    "gram": {"lr": 1e-2, "power": 0.5, "damping": 1e-6},
    "eigen_adam": {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "gram_beta": 0.95,
                   "update_freq": 10},
    "adam_mini": {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8},
    "flow_adam": {"lr": 1e-3, **FLOW_ADAM_PRESETS["invariant"]},
    "flow_adam_prototype": {"lr": 1e-3, **FLOW_ADAM_PRESETS["prototype"]},
}
#: per-rule overrides so that a few steps exercise every code path (Shampoo's refresh)
TEST_OVERRIDES: dict[str, dict] = {"shampoo": {"update_freq": 3}, "eigen_adam": {"update_freq": 3}}


@dataclass(frozen=True)
class StackedSensing:
    """``num_runs`` independent sensing instances, ``½ mean_i (⟨A_i, U Vᵀ⟩ − y_i)²`` each.

    :meth:`loss` sums the per-run losses, so the gradient of run ``b`` is the gradient of its own
    loss; :meth:`run` is the unbatched instance ``b``.
    """

    A: Tensor  # (num_runs, num_measurements, n·m)
    y: Tensor  # (num_runs, num_measurements)

    def loss(self, U: Tensor, V: Tensor) -> Tensor:
        return stacked_sensing_loss(self.A, self.y, U, V)

    def run(self, b: int) -> Callable[[Tensor, Tensor], Tensor]:
        A, y = self.A[b], self.y[b]
        return lambda U, V: stacked_sensing_loss(A, y, U, V)


def stacked_sensing_loss(A: Tensor, y: Tensor, U: Tensor, V: Tensor) -> Tensor:
    """``Σ_runs ½ mean_i (⟨A_i, U Vᵀ⟩ − y_i)²`` for stacked or single ``(A, y, U, V)``."""
    W = U @ V.mT
    residual = (A @ W.reshape(*W.shape[:-2], -1, 1))[..., 0] - y
    return 0.5 * (residual**2).mean(dim=-1).sum()


def stacked_sensing(seed: int, num_runs: int = NUM_RUNS) -> StackedSensing:
    """Planted rank-2 instances, one per run, from ``generator(seed)``."""
    g = generator(seed)
    nm = N_ROWS * M_ROWS
    X = torch.randn(num_runs, N_ROWS, 2, generator=g, dtype=DTYPE) @ torch.randn(
        num_runs, 2, M_ROWS, generator=g, dtype=DTYPE
    )
    A = torch.randn(num_runs, NUM_MEASUREMENTS, nm, generator=g, dtype=DTYPE) / math.sqrt(nm)
    y = (A @ X.reshape(num_runs, nm, 1))[..., 0]
    return StackedSensing(A=A, y=y)


def stacked_factors(seed: int, num_runs: int = NUM_RUNS) -> tuple[Tensor, Tensor]:
    """``U`` (runs × n × k) and ``V`` (runs × m × k), entries ``N(0, 1/k)``."""
    g = generator(seed)
    U = torch.randn(num_runs, N_ROWS, K, generator=g, dtype=DTYPE) / math.sqrt(K)
    V = torch.randn(num_runs, M_ROWS, K, generator=g, dtype=DTYPE) / math.sqrt(K)
    return U, V


def leaves(*tensors: Tensor) -> list[Tensor]:
    """Fresh leaf copies that require grad."""
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def train(
    opt: torch.optim.Optimizer, params: list[Tensor], loss: Callable[..., Tensor], num_steps: int
) -> torch.optim.Optimizer:
    """``num_steps`` of zero_grad / backward / step on ``loss(*params)``."""
    for _ in range(num_steps):
        opt.zero_grad()
        loss(*params).backward()
        opt.step()
    return opt


def zoo_kwargs(name: str, **overrides) -> dict:
    """The test settings of ``name`` plus the test overrides plus ``overrides``."""
    return {**TEST_HPARAMS.get(name, {}), **TEST_OVERRIDES.get(name, {}), **overrides}


def run_zoo(
    name: str, params: list[Tensor], loss: Callable[..., Tensor], num_steps: int, **overrides
) -> torch.optim.Optimizer:
    """Build ``name`` from the registry (at :func:`zoo_kwargs`) on ``params`` and train it
    ``num_steps`` steps."""
    opt = make_optimizer(name, params, **zoo_kwargs(name, **overrides))
    return train(opt, params, loss, num_steps)
