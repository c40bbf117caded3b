r"""Chapter 5's live demonstrations on the testbed instance of the first seed, each returned as
a :class:`Demo` (the numbers the page glues, the lines it prints, the data its figure draws):
the dial as an anisotropy knob (:func:`anisotropy_demo`) and how far FlowAdam's warm-up carries
the factors (:func:`warmup_demo`); and the text forms of the values a scale may leave undefined
(:func:`text_forms`). The dial is :class:`~gaugekit.optim.FlowAdam` with the flow path off,

.. math:: \theta_i \leftarrow \theta_i - \frac{\mathrm{lr}}{s_i^p\,\bar s^{1-p} + \varepsilon}\,
   \hat m_i ,

Adam at :math:`p = 1`, shared-scale Adam at :math:`p = 0`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from gaugekit.experiments import flow_adam as fx
from gaugekit.experiments.flow_adam import INVARIANT, FlowAdamConfig, RunColumns
from gaugekit.optim import GD, FlowAdam, SharedScaleAdam
from gaugekit.report.flow_adam_numbers import hand_numbers, spread_ratios
from gaugekit.report.tables import fmt

#: The values of :math:`p` at which the per-entry learning rate is shown.
POWERS_SHOWN = (0.0, 0.25, 0.5, 0.75, 1.0)

#: ``(glue name, format)`` of the values a scale may leave undefined (a published value exists
#: only at the paper's setting, a learning rate may have no run at this scale).
TEXT_FORMS: tuple[tuple[str, str], ...] = (
    ("dial_rms_p100_pub", ".4f"),
    ("dial_rms_p50_pub", ".4f"),
    ("dial_rms_p0_pub", ".4f"),
    ("dial_geomean_p0_pub", ".4f"),
    ("dial_max_gap", ".4f"),
    ("flow_max_gap", ".4f"),
    ("fixed_max_gap", ".4f"),
    ("fixed_second_gap", ".1e"),
    ("edge_rec", ".4f"),
    ("edge_sd", ".4f"),
    ("edge_steps", ".0f"),
    ("short_rec", ".4f"),
    ("short_loss_max", ".1e"),
)


class Demo(NamedTuple):
    """What a live demonstration gives the page: glue name → value, the printed lines, and
    the data of its figure (``None`` without one)."""

    numbers: dict[str, Any]
    text: str
    data: Any = None


def _dial(lr: float, power: float) -> Callable[[list[torch.Tensor]], FlowAdam]:
    return lambda p: FlowAdam(p, lr=lr, precond_power=power, flow=False)


def anisotropy_demo(config: FlowAdamConfig) -> Demo:
    r"""The dial's ends and its anisotropy, on the first learning rate of ``config``.

    The dial at :math:`p = 1` against ``torch.optim.Adam`` and at :math:`p = 0` against
    :class:`~gaugekit.optim.SharedScaleAdam` (``config.anisotropy_steps`` steps each; the
    relative gap of the final factors, :func:`~gaugekit.experiments.flow_adam.final_factor_gap`),
    and the per-entry :math:`\log_{10}` learning rate on Adam's frozen :math:`\hat v` at each
    :data:`POWERS_SHOWN` (``data``), whose spread over Adam's is :math:`p` times Adam's
    (``spread_dev``: the largest deviation)."""
    lr, steps = config.lrs[0], config.anisotropy_steps
    adam_dial = fx.train_on_instance(_dial(lr, 1.0), config, steps)
    torch_adam = fx.train_on_instance(lambda p: torch.optim.Adam(p, lr=lr), config, steps)
    shared_adam = fx.train_on_instance(lambda p: SharedScaleAdam(p, lr=lr), config, steps)
    shared_dial = fx.train_on_instance(_dial(lr, 0.0), config, steps)
    gap_adam = fx.final_factor_gap(adam_dial, torch_adam)
    gap_shared = fx.final_factor_gap(shared_dial, shared_adam)
    log_steps = fx.per_entry_log_lr(adam_dial.optimizer, POWERS_SHOWN)
    ratio = spread_ratios(log_steps)
    numbers = {"gap_adam": gap_adam, "gap_shared": gap_shared, "anisotropy_steps": steps,
               "spread_adam": log_steps[1.0].std().item()}
    numbers |= {f"spread_ratio_p{round(100 * p)}": r for p, r in ratio.items()}
    numbers["spread_dev"] = max(abs(r - p) for p, r in ratio.items())
    text = (f"relative gap to torch.optim.Adam {gap_adam:.1e}, "
            f"to SharedScaleAdam {gap_shared:.1e}\n"
            "spread of log10 lr over Adam's, by p:\n"
            + "  ".join(f"{p:g}: {r:.4f}" for p, r in ratio.items()))
    return Demo(numbers, text, log_steps)


def warmup_demo(results: Mapping[str, RunColumns], config: FlowAdamConfig) -> Demo:
    r"""FlowAdam (invariant preset) against its hand-written form, "dial warm-up, then clipped
    GD" (:func:`~gaugekit.report.flow_adam_numbers.hand_numbers`), and how far the
    :math:`W + 1` warm-up steps of the dial (:math:`p = 0`) carry the factors from
    :math:`(U_0, V_0)`, over as many GD steps at :math:`\mathrm{lr}\cdot T` (first seed, first
    learning rate): ``warmup_move_ratio``."""
    hand, inv = results["dial warm-up, then clipped GD"], results["FlowAdam (invariant)"]
    same = hand_numbers(hand, inv)
    lr, n = config.lrs[0], INVARIANT["flow_warmup"] + 1
    warmup_dial = fx.train_on_instance(_dial(lr, 0.0), config, n)
    warmup_gd = fx.train_on_instance(
        lambda p: GD(p, lr=lr * INVARIANT["flow_time_scale"]), config, n)
    move_ratio = (fx.distance_from_init(warmup_dial, config)
                  / fx.distance_from_init(warmup_gd, config))
    text = (f"same stop step in {same['same_stop_runs']} of {inv['rec'].numel()} runs; "
            f"largest rec gap {same['gap_hand']:.1e}\n"
            f"fraction of steps with ||g|| > 10: {same['clip_frac']:.3f}\n"
            f"distance from the start, dial / GD at lr·T: {move_ratio:.0f}")
    return Demo(same | {"warmup_steps": n, "warmup_move_ratio": move_ratio}, text)


def text_forms(values: Mapping[str, Any],
               forms: tuple[tuple[str, str], ...] = TEXT_FORMS) -> dict[str, str]:
    """``name_txt → format(values[name], spec)`` for each ``(name, spec)`` of ``forms``; an em
    dash where the value is ``None`` or a non-finite float."""
    return {f"{name}_txt": fmt(values[name], spec) for name, spec in forms}
