"""Which optimizers keep LoRA's gauge ``(A, B) → (R⁻¹A, B R)`` on a peft model, under ``O(r)``
and under ``GL(r)``.

Usage::

    python bench/audit_lora.py [--steps N] [--condition-number KAPPA]

Builds a small float64 model (``out(tanh(q(x)))``, 6 → 8 → 5) with rank-4 LoRA on both layers
(``peft.get_peft_model``, no download) and runs :func:`gaugekit.audit.audit_lora_twins` on a
toy regression task for torch's SGD and AdamW, ``pytorch_optimizer.LoRARite``
(``update_skipping=0``, and at its defaults), ScaledGD in layout ``"AB"`` (undamped and at its
default damping), SharedScaleAdam and Muon on the adapters, from peft's default init ``B = 0``
and from both factors random (``init_lora_weights=False``). One table: each optimizer's verdict
and gauge-twin drift per group, the noise twin's drift and how far the base's ``s B A`` moved.
A second table repeats LoRARite with a last layer of 3 outputs, fewer than the rank: its ``B``
(3 × 4) has rank 3 < r.

Needs ``peft`` and ``pytorch_optimizer`` (``pip install -e '.[test]'``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from gaugekit.audit import (
    LoraPair,
    audit_lora_twins,
    lora_param_groups,
    lora_parameters,
    text_table,
)
from gaugekit.optim import Muon, ScaledGD, SharedScaleAdam

Factory = Callable[[list[LoraPair]], torch.optim.Optimizer]
INITS = {"B = 0": True, "random": False}
SHORT = {"keeps the gauge": "keeps", "breaks the gauge": "breaks",
         "chaotic (gauge twin ≈ noise twin)": "chaotic", "cannot be judged": "unjudged"}


class TwoBlocks(nn.Module):
    """``out(tanh(q(x)))``: the model the adapters are put on."""

    def __init__(self, d_in: int = 6, d_hidden: int = 8, d_out: int = 5) -> None:
        super().__init__()
        self.q = nn.Linear(d_in, d_hidden)
        self.out = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.q(x)))


def lora_model(init_lora_weights: bool, d_out: int = 5, rank: int = 4) -> nn.Module:
    """``TwoBlocks`` in float64 with LoRA of ``rank`` on both layers (seeded)."""
    import peft

    torch.manual_seed(0)
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q", "out"],
                             init_lora_weights=init_lora_weights)
    return peft.get_peft_model(TwoBlocks(d_out=d_out).double(), config)


def regression_batches(steps: int, d_out: int = 5) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of 16 Gaussian inputs and targets (seeded)."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 6, generator=g, dtype=torch.float64),
             torch.randn(16, d_out, generator=g, dtype=torch.float64)) for _ in range(steps)]


def mse(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return (model(x) - y).square().mean()


def factories() -> dict[str, Factory]:
    """The optimizers audited, each built on a copy's LoRA pairs."""
    from pytorch_optimizer import LoRARite

    return {
        "torch SGD lr=0.05": lambda p: torch.optim.SGD(lora_parameters(p), lr=0.05),
        "torch AdamW lr=1e-2": lambda p: torch.optim.AdamW(lora_parameters(p), lr=1e-2),
        "LoRARite lr=1e-2 update_skipping=0":
            lambda p: LoRARite(lora_parameters(p), lr=1e-2, update_skipping=0.0),
        "LoRARite (defaults)": lambda p: LoRARite(lora_parameters(p)),
        "ScaledGD AB lr=0.05 λ=0":
            lambda p: ScaledGD(lora_param_groups(p), lr=0.05, damping=0.0,
                               relative_damping=False, layout="AB"),
        "ScaledGD AB lr=0.05 (default λ)":
            lambda p: ScaledGD(lora_param_groups(p), lr=0.05, layout="AB"),
        "SharedScaleAdam lr=1e-2": lambda p: SharedScaleAdam(lora_parameters(p), lr=1e-2),
        "Muon lr=1e-2": lambda p: Muon(lora_parameters(p), lr=1e-2),
    }


def rows(factories: Mapping[str, Factory], inits: Sequence[str], *, steps: int,
         condition_number: float, d_out: int = 5) -> list[list[str]]:
    """One row per (optimizer, init): verdict and drift per group, noise drift, moved."""
    data = regression_batches(steps, d_out)
    out = []
    for name, factory in factories.items():
        for init in inits:
            model = lora_model(INITS[init], d_out=d_out)
            result = audit_lora_twins(model, factory, mse, data,
                                      condition_number=condition_number, probe=data[0][0])
            cells = [name, init]
            for group in ("orthogonal", "general"):
                cells += [SHORT[result.verdict(group).outcome], f"{result.drift(group):.1e}"]
            out.append([*cells, f"{result.drift('noise'):.1e}", f"{result.moved:.1e}"])
    return out


def table(body: list[list[str]]) -> str:
    header = ["optimizer", "init", "O(r)", "drift", "GL(r)", "drift", "noise", "moved"]
    return text_table(header, body, align="llllllrr", sep="  ", rule=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    parser.add_argument("--condition-number", type=float, default=4.0, metavar="KAPPA",
                        help="cond(R) of the GL(r) twin's R (default 4)")
    args = parser.parse_args(argv)
    kw = {"steps": args.steps, "condition_number": args.condition_number}
    print(f"LoRA (peft, rank 4 on q: 6 -> 8 and out: 8 -> 5), float64, {args.steps} steps; "
          f"drift = max over pairs and steps of ||s B'A' - s B A||_F / ||s B A||_F")
    print(table(rows(factories(), list(INITS), **kw)))
    print("keeps: drift <= 1e-08 (float64); breaks: above it and > 10 x the noise twin; "
          "chaotic: within 10 x;\nunjudged: diverged or did not move. GL(r) twin (R^-1 A, B R) "
          f"with cond(R) = {args.condition_number:g};\nO(r) twin (Q^T A, B Q); noise twin "
          "A, B + 1e-7 N(0, 1) (a zero B stays zero); moved: ||P_T - P_0|| / max(||P_0||, "
          "||P_T||) of the base.")
    print()
    rite = {k: v for k, v in factories().items() if k.startswith("LoRARite")}
    print("A rank-deficient B: out: 8 -> 3 < r = 4")
    print(table(rows(rite, ["random"], d_out=3, **kw)))


if __name__ == "__main__":
    main()
