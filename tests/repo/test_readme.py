"""Every python block of the README's "Use the library" section runs, and does what it says."""

from __future__ import annotations

import pytest
import torch
from readme_blocks import script, section_blocks, skip_reason

BLOCKS = section_blocks()


def test_the_section_has_its_examples():
    assert len(BLOCKS) >= 4  # two training loops, the optimizer audit, the twin audit
    text = "\n".join(BLOCKS)
    for call in ("weight_decay=", "audit_equivariance(", "audit_twins(", "split_matrix_params("):
        assert call in text


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(block):
    reason = skip_reason(block)
    if reason:
        pytest.skip(reason)
    torch.manual_seed(0)
    exec(compile(script(block), "README.md", "exec"), {"__name__": "__readme__"})
