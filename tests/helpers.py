"""Shared test helpers: seeded generators, factor pairs, a float64 sensing loss, Haar ``Q``,
autograd gradients, optimizer runs and an RK4 integrator.

Import from a test module as ``from helpers import ...`` (pytest puts ``tests/`` on
``sys.path``: the folder has no ``__init__.py``). The sensing loss here is written
independently of :func:`gaugekit.audit.sensing_loss` (flattened measurement matrix instead of
``einsum``) so that tests of the library do not lean on the library's own loss.

Tolerances used across the suite:

``EXACT``  float64 round-off budget for a few dozen flops (1e-11),
``LOOSE``  after several optimizer steps with SVD/eigh inside (1e-9),
``BROKEN`` a gauge violation at least this large is structural, not round-off (1e-3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gaugekit.audit.factors import run_factor_optimizer
from gaugekit.gauge import haar_orthogonal
from gaugekit.theory import first_step_displacement

EXACT = 1e-11
LOOSE = 1e-9
BROKEN = 1e-3

DTYPE = torch.float64

LossFn = Callable[[Tensor, Tensor], Tensor]
Factory = Callable[[list[Tensor]], torch.optim.Optimizer]


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``."""
    return torch.Generator().manual_seed(seed)


def haar(k: int, seed: int, dtype: torch.dtype = DTYPE) -> Tensor:
    """A Haar ``Q ∈ O(k)`` from the library, drawn from ``generator(seed)``."""
    return haar_orthogonal(k, generator=generator(seed), dtype=dtype)


def signed_permutation(k: int, seed: int, dtype: torch.dtype = DTYPE) -> Tensor:
    """A random signed permutation matrix ``P D`` (orthogonal, and coordinate-aligned)."""
    g = generator(seed)
    perm = torch.randperm(k, generator=g)
    signs = torch.randint(0, 2, (k,), generator=g).to(dtype) * 2 - 1
    return torch.eye(k, dtype=dtype)[perm] * signs


def random_factors(
    n: int, m: int, k: int, seed: int, scale: float = 0.5, dtype: torch.dtype = DTYPE
) -> tuple[Tensor, Tensor]:
    """Factors ``U`` (n×k), ``V`` (m×k) with entries ``scale · N(0, 1/k)``."""
    g = generator(seed)
    s = scale / math.sqrt(k)
    U = s * torch.randn(n, k, generator=g, dtype=dtype)
    V = s * torch.randn(m, k, generator=g, dtype=dtype)
    return U, V


@dataclass(frozen=True)
class Sensing:
    """A planted matrix-sensing instance: ``L(U, V) = ½ mean_i (⟨A_i, U Vᵀ⟩ − y_i)²``."""

    A: Tensor  # (num_measurements, n·m), row i is vec(A_i)
    y: Tensor  # (num_measurements,)
    X_star: Tensor  # (n, m), rank r
    n: int
    m: int

    def __call__(self, U: Tensor, V: Tensor) -> Tensor:
        residual = self.A @ (U @ V.T).reshape(-1) - self.y
        return 0.5 * (residual**2).mean()

    def of_matrix(self, W: Tensor) -> Tensor:
        """The same loss as a function of the represented matrix ``W``."""
        residual = self.A @ W.reshape(-1) - self.y
        return 0.5 * (residual**2).mean()


def sensing(
    n: int = 7, m: int = 5, r: int = 2, num_measurements: int = 40, seed: int = 0,
    dtype: torch.dtype = DTYPE,
) -> Sensing:
    """A float64 sensing instance with planted rank-``r`` ``X_star`` (n×m), from ``seed``."""
    g = generator(seed + 1000)
    X_star = torch.randn(n, r, generator=g, dtype=dtype) @ torch.randn(
        r, m, generator=g, dtype=dtype
    ) / math.sqrt(r)
    A = torch.randn(num_measurements, n * m, generator=g, dtype=dtype)
    return Sensing(A=A, y=A @ X_star.reshape(-1), X_star=X_star, n=n, m=m)


def grads(loss: LossFn, U: Tensor, V: Tensor) -> tuple[Tensor, Tensor]:
    """Autograd gradients ``(G_U, G_V)`` of ``loss`` at ``(U, V)``."""
    U = U.detach().clone().requires_grad_(True)
    V = V.detach().clone().requires_grad_(True)
    G_U, G_V = torch.autograd.grad(loss(U, V), (U, V))
    return G_U, G_V


def rel(a: Tensor, b: Tensor) -> float:
    """``‖a − b‖ / ‖b‖`` as a float (``b`` is the reference; never divides by zero)."""
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def run(
    factory: Factory, U0: Tensor, V0: Tensor, loss: LossFn, num_steps: int
) -> tuple[list[tuple[Tensor, Tensor]], torch.optim.Optimizer, list[Tensor]]:
    """Run ``factory([U, V])`` for ``num_steps`` steps with a closure; state stays live.

    Returns the iterates ``[(U_1, V_1), …]``, the optimizer (for its state) and the two
    parameter tensors (to look its state up by parameter).
    """
    result = run_factor_optimizer(factory, U0, V0, loss, num_steps)
    return result.iterates, result.optimizer, result.params


def one_step(factory: Factory, G: Tensor, P0: Tensor | None = None) -> Tensor:
    """Displacement ``P₁ − P₀`` of one step of a fresh optimizer on one matrix parameter.

    The loss is linear, ``⟨G, P⟩``, so the gradient seen by the optimizer is exactly ``G``:
    this evaluates the optimizer's memoryless first-step map at ``G``. ``P₀`` defaults to 0.
    """
    return first_step_displacement(factory, G, P0)


def rk4(f: Callable[[float, Tensor], Tensor], x0: Tensor, t0: float, t1: float, n: int) -> Tensor:
    """Classical 4th-order Runge–Kutta for ``x' = f(t, x)`` from ``t0`` to ``t1`` in ``n`` steps."""
    x, t, h = x0.clone(), t0, (t1 - t0) / n
    for _ in range(n):
        k1 = f(t, x)
        k2 = f(t + h / 2, x + h / 2 * k1)
        k3 = f(t + h / 2, x + h / 2 * k2)
        k4 = f(t + h, x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += h
    return x


def same_state(a, b) -> bool:
    """Whether two optimizer states (nested dicts of tensors and numbers) are bit-identical."""
    if isinstance(a, Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    return a == b


class BiasedAttention(nn.Module):
    """Embedding, ``nn.MultiheadAttention`` with biases, LayerNorm and a head: what plain Muon
    cannot take (vectors, an embedding), for the routed rules."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.att = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 20)

    def forward(self, x: Tensor) -> Tensor:
        h = self.emb(x)
        a, _ = self.att(h, h, h, need_weights=False)
        return self.head(self.norm(h + a))
