"""Tiny fake optimizer classes for the ecosystem audit's isolation tests.

Imported by name (``ecosystem_fakes``) inside the audit's child processes, so it must stay
importable from ``tests/`` (the suite's conftest puts that folder on ``sys.path``).
"""

from __future__ import annotations

import os
import signal
import time

import torch


class PlainSGD(torch.optim.SGD):
    """Equivariant: torch's SGD with a default lr."""

    def __init__(self, params, lr: float = 0.05) -> None:
        super().__init__(params, lr=lr)


class SignDescent(torch.optim.Optimizer):
    """Not equivariant: ``θ ← θ − lr sign(g)``."""

    def __init__(self, params, lr: float = 0.01) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(group["lr"] * torch.sign(p.grad))
        return loss


class Hangs(PlainSGD):
    """Never returns from its first step."""

    def step(self, closure=None):
        while True:
            time.sleep(0.05)


class Segfaults(PlainSGD):
    """Kills its own process at the first step, as a crashing extension would."""

    def step(self, closure=None):
        os.kill(os.getpid(), signal.SIGSEGV)


class Exits(PlainSGD):
    """Leaves the process at the first step without a result."""

    def step(self, closure=None):
        os._exit(3)


class Raises(PlainSGD):
    """Raises at every step."""

    def step(self, closure=None):
        raise RuntimeError("this optimizer always fails")


class Float32Only(PlainSGD):
    """Refuses float64 parameters (as some bf16/float32 kernels do); equivariant otherwise."""

    def __init__(self, params, lr: float = 0.05) -> None:
        params = list(params)
        if any(p.dtype == torch.float64 for p in params):
            raise TypeError("expected scalar type Float but found Double")
        super().__init__(params, lr=lr)


class NeedsModel(PlainSGD):
    """Takes an ``nn.Module`` instead of parameters."""

    def __init__(self, model, lr: float = 0.05) -> None:  # pragma: no cover - never built
        super().__init__(model.parameters(), lr=lr)


class PairScaledGD(torch.optim.Optimizer):
    """Undamped ScaledGD on LoRA's pair ``[A, B]`` (``W = B A``, ``A``: r × in, ``B``: out × r):
    ``A ← A − lr (BᵀB)⁻¹ G_A``, ``B ← B − lr G_B (AAᵀ)⁻¹``, equivariant under ``GL(r)``. Refuses
    a pair whose shapes are not LoRA's (the paper's ``[U, V]``), as LoRA-RITE fails on one."""

    def __init__(self, params, lr: float = 0.01) -> None:
        super().__init__(params, {"lr": lr})
        A, B = self.param_groups[0]["params"]
        if A.shape[-2] != B.shape[-1]:
            raise ValueError(f"expected LoRA's pair [A (r x in), B (out x r)], got "
                             f"{tuple(A.shape)} and {tuple(B.shape)}")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            A, B = group["params"]
            step_A = torch.linalg.solve(B.mT @ B, A.grad)
            step_B = torch.linalg.solve(A @ A.mT, B.grad.mT).mT
            A.sub_(group["lr"] * step_A)
            B.sub_(group["lr"] * step_B)
        return loss


NAMES = ("PlainSGD", "SignDescent", "Hangs", "Segfaults", "Exits", "Raises", "Float32Only",
         "NeedsModel", "PairScaledGD")
