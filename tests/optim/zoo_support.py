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

from gaugekit.optim import get_spec, make_optimizer

DTYPE = torch.float64
N_ROWS, M_ROWS, K = 5, 4, 3  # U is N_ROWS × K, V is M_ROWS × K
NUM_MEASUREMENTS = 24
NUM_RUNS = 3
#: per-run multipliers of a rule's default lr in the stacked tests
LR_FACTORS = (1.0, 0.5, 0.25)
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
    """The registry defaults of ``name`` plus the test overrides plus ``overrides``."""
    return {**get_spec(name).defaults, **TEST_OVERRIDES.get(name, {}), **overrides}


def run_zoo(
    name: str, params: list[Tensor], loss: Callable[..., Tensor], num_steps: int, **overrides
) -> torch.optim.Optimizer:
    """Build ``name`` from the registry on ``params`` and train it ``num_steps`` steps."""
    opt = make_optimizer(name, params, **{**TEST_OVERRIDES.get(name, {}), **overrides})
    return train(opt, params, loss, num_steps)
