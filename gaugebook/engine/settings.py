"""The switches every other module reads, and nothing else.

Four settings, each read from the environment at call time so that a chapter or a
test can change them without re-importing anything:

* ``GAUGEKIT_SCALE``: ``quick`` (default: the whole book on a 2-core CPU in minutes) or
  ``paper`` (the paper's sizes, seeds and step budgets).
* ``GAUGEKIT_DEVICE``: a torch device string; default ``cuda`` when available, else ``cpu``.
* ``GAUGEKIT_DATA``: the folder where loaders look for (and download) data files;
  default ``~/.cache/gaugekit``.
* ``GAUGEKIT_RECORDS``: what a paper-scale page does with its sweeps: ``read`` (default)
  renders the committed records and stops with a message naming the command that makes them
  when some are missing; ``make`` computes the missing runs and appends their records (the
  third mode of the book: fresh paper records).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Literal

import torch

Scale = Literal["quick", "paper"]
SCALES: tuple[str, ...] = ("quick", "paper")

SCALE_ENV = "GAUGEKIT_SCALE"
DEVICE_ENV = "GAUGEKIT_DEVICE"
DATA_ENV = "GAUGEKIT_DATA"
RECORDS_ENV = "GAUGEKIT_RECORDS"
RecordsMode = Literal["read", "make"]
RECORDS_MODES: tuple[str, ...] = ("read", "make")


def get_scale(scale: str | None = None) -> Scale:
    """Return the active scale: ``scale`` if given, else ``$GAUGEKIT_SCALE``, else ``quick``."""
    value = scale if scale is not None else os.environ.get(SCALE_ENV, "quick")
    value = value.strip().lower()
    if value not in SCALES:
        raise ValueError(f"Invalid scale: {value!r}; expected one of {SCALES} (set {SCALE_ENV}).")
    return value  # type: ignore[return-value]


def get_device(device: str | torch.device | None = None) -> torch.device:
    """Return the active device: ``device`` if given, else ``$GAUGEKIT_DEVICE``, else cuda/cpu."""
    if device is None:
        device = os.environ.get(DEVICE_ENV) or ("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"Invalid device: {str(dev)!r}; CUDA is not available here (set {DEVICE_ENV}=cpu)."
        )
    return dev


def get_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the data folder: ``data_dir`` if given, else ``$GAUGEKIT_DATA``, else the cache."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_ENV) or Path.home() / ".cache" / "gaugekit"
    return Path(data_dir).expanduser()


def get_records_mode(mode: str | None = None) -> RecordsMode:
    """Return the records mode: ``mode`` if given, else ``$GAUGEKIT_RECORDS``, else ``read``."""
    value = mode if mode is not None else os.environ.get(RECORDS_ENV, "read")
    value = value.strip().lower()
    if value not in RECORDS_MODES:
        raise ValueError(
            f"Invalid records mode: {value!r}; expected one of {RECORDS_MODES} (set {RECORDS_ENV})."
        )
    return value  # type: ignore[return-value]


def describe() -> dict[str, str]:
    """The resolved settings, for printing at the top of a chapter or a log."""
    return {
        "scale": get_scale(),
        "device": str(get_device()),
        "data_dir": str(get_data_dir()),
        "records": get_records_mode(),
        "torch": torch.__version__,
    }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`), for benchmark
    headers: timings only mean something next to the machine that made them."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
