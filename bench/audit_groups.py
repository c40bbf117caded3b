"""The two-group verdict table: which optimizers keep the orthogonal gauge O(r), which the whole
gauge group GL(r).

Usage::

    python bench/audit_groups.py [--steps N] [--condition-number KAPPA]

Audits (:func:`gaugekit.audit.audit_groups`, float64 matrix sensing ``L(U Vᵀ)``, ``U`` 7×3,
``V`` 5×3, the same draws for every row) the library's zoo at its audit rates, ScaledGD
undamped (``damping=0, relative_damping=False``, Tong et al.'s rule) and ``torch.optim``'s
optimizers at ``lr = 1e-2``, each under the orthogonal twin ``(U Q, V Q)`` and the general twin
``(U R, V R⁻ᵀ)`` with ``cond(R) = KAPPA`` (default 4), and prints one table per family. When
``pytorch_optimizer`` is importable, its ``LoRARite`` is audited too, in LoRA's layout
``[A, B]`` (``W = B A``), beside ``torch.optim.AdamW`` in the same layout; at its defaults
it skips every update on this problem (``update_skipping=1`` against an unmagnified gradient
RMS of 1.2), so a row with ``update_skipping=0`` shows its step.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Mapping

import torch

from gaugekit.audit import (
    OptimizerFactory,
    audit_groups,
    format_group_table,
    registry_factories,
    torch_optim_factories,
)


def zoo_factories() -> dict[str, OptimizerFactory]:
    """The registry at its audit rates, then undamped ScaledGD."""
    factories = registry_factories()
    undamped = registry_factories(["scaled_gd"], damping=0.0, relative_damping=False)
    factories["scaled_gd λ=0"] = undamped["scaled_gd"]
    return factories


def lora_factories() -> dict[str, OptimizerFactory]:
    """``pytorch_optimizer.LoRARite`` at its defaults and ``torch.optim.AdamW``, on ``[A, B]``;
    empty when ``pytorch_optimizer`` is not installed."""
    if importlib.util.find_spec("pytorch_optimizer") is None:
        return {}
    from pytorch_optimizer import LoRARite

    return {"LoRARite": lambda params: LoRARite(params),
            "LoRARite update_skipping=0": lambda params: LoRARite(params, update_skipping=0.0),
            "AdamW": lambda params: torch.optim.AdamW(params, lr=1e-3)}


def section(title: str, factories: Mapping[str, OptimizerFactory], **kwargs: object) -> str:
    """A titled two-group table of ``factories``."""
    return f"{title}\n{format_group_table(audit_groups(factories, **kwargs))}\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    parser.add_argument("--condition-number", type=float, default=4.0, metavar="KAPPA",
                        help="cond(R) of the general twin's R (default 4)")
    args = parser.parse_args(argv)
    kwargs = {"num_steps": args.steps, "condition_number": args.condition_number}
    print(section("gaugekit.optim, layout (U, V):", zoo_factories(), **kwargs))
    print(section("torch.optim (lr = 1e-2), layout (U, V):", torch_optim_factories(), **kwargs))
    lora = lora_factories()
    if lora:
        print(section("LoRA layout (A, B), W = B A:", lora, layout="AB", **kwargs))


if __name__ == "__main__":
    main()
