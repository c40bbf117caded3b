"""Suite-wide settings: data folder, GPU marker, float64 default-free determinism."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# Tests (and CI) read real data from ../shared/data when it is there.
if "GAUGEKIT_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["GAUGEKIT_DATA"] = str(SHARED_DATA)

# Make `tests/helpers.py` importable as `helpers` from any test sub-folder.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
