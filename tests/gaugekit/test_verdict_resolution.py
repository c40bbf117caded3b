"""A break smaller than the dtype's fixed threshold, read from the noise twin: float32 resolves
ScaledGD's damping under GL(r), which the 1e-3 threshold alone reported as "keeps"."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gaugekit.audit import audit_lora_twins, lora_param_groups
from gaugekit.audit.factor_results import BREAKS, KEEPS, decide_verdict
from gaugekit.audit.twin_parts import verdict_resolution, verdict_threshold
from gaugekit.optim import ScaledGD


class TwoBlocks(nn.Module):
    """Two linear layers with a tanh between them, for LoRA on both."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.out = nn.Linear(6, 8), nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.q(x)))


F32_THRESHOLD = verdict_threshold(torch.float32)
F32_RESOLUTION = verdict_resolution(torch.float32)


def test_a_break_below_the_threshold_that_the_noise_twin_resolves():
    # the LoRA chapter's ScaledGD, GL(r) twins at step 1 from B = 0: 3.1e-4 against noise 2.4e-6
    v = decide_verdict(3.1e-4, 2.4e-6, F32_THRESHOLD, resolution=F32_RESOLUTION)
    assert v.outcome == BREAKS
    assert "the noise twin resolves the break" in v.reason()
    # the old reading, by the threshold alone
    assert decide_verdict(3.1e-4, 2.4e-6, F32_THRESHOLD).outcome == KEEPS


@pytest.mark.parametrize(("gauge", "noise"), [
    (1.5e-6, 3.7e-6),   # a rule that keeps the gauge: its twin at the size of its noise twin
    (1.0e-5, 0.0),      # a noise twin that did not move: nothing to resolve against
    (1.0e-7, 1.0e-10),  # contracting dynamics: under ten times float32's resolution
])
def test_round_off_stays_round_off(gauge, noise):
    assert decide_verdict(gauge, noise, F32_THRESHOLD, resolution=F32_RESOLUTION).outcome == KEEPS


def test_without_a_noise_twin_the_threshold_decides():
    assert decide_verdict(3.1e-4, None, F32_THRESHOLD, resolution=F32_RESOLUTION).outcome == KEEPS


def test_float32_lora_audit_reads_scaled_gd_like_float64():
    """Damped ScaledGD keeps O(r) and breaks GL(r) (its damping); two steps from random factors
    in float32 the GL(r) twin ends below the 1e-3 threshold, yet ~600 times its noise twin."""
    peft = pytest.importorskip("peft")

    verdicts = {}
    for dtype in (torch.float32, torch.float64):
        torch.manual_seed(0)
        model = peft.get_peft_model(TwoBlocks().to(dtype), peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=["q", "out"], init_lora_weights=False))
        g = torch.Generator().manual_seed(1)
        data = [(torch.randn(16, 6, generator=g, dtype=dtype),
                 torch.randn(16, 5, generator=g, dtype=dtype)) for _ in range(2)]
        result = audit_lora_twins(
            model, lambda pairs: ScaledGD(lora_param_groups(pairs), lr=0.05, layout="AB"),
            lambda m, batch: (m(batch[0]) - batch[1]).square().mean(), data)
        verdicts[dtype] = {g: v.outcome for g, v in result.verdicts.items()}
        if dtype == torch.float32:
            assert result.drift("general") < F32_THRESHOLD
            assert result.drift("general") > 100 * result.drift("noise")
    assert verdicts[torch.float32] == verdicts[torch.float64] == {
        "orthogonal": KEEPS, "general": BREAKS}
