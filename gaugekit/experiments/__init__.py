"""The book's experiments, the sweep runner and the run records.

``records``    JSON Lines records: run ids, provenance, strict JSON, crash-safe appends
``sweep``      the generic runner: grid → batches → records, resumable
``batching``   helpers to train stacked runs and drop finished ones
``selection``  hyperparameter selection protocols over records (oracle, validation, speed)
``matrix_sensing``  the optimizer zoo on the paper's matrix-sensing testbed
``ladder``     the zoo at growing sizes, and rank and m/dof arms (the GPU appendix)

Experiments are registered here by name; modules are imported on first use. The package
needs the ``experiments`` extra (``pip install 'gaugekit[experiments]'``): importing it
without raises :class:`~gaugekit._extras.MissingExtra`, which says so.
"""

# Developer note (layers, DESIGN.md): floor 3.

from __future__ import annotations

import importlib

from gaugekit._extras import require_extra

require_extra("gaugekit.experiments", "experiments")

from gaugekit.experiments.sweep import Experiment

__all__ = ["EXPERIMENTS", "experiment_names", "get_experiment"]

#: experiment name → "module:attribute" of its experiment object
EXPERIMENTS: dict[str, str] = {
    "matrix_sensing": "gaugekit.experiments.matrix_sensing:EXPERIMENT",
    "attention": "gaugekit.experiments.attention:EXPERIMENT",
    "dial": "gaugekit.experiments.dial:EXPERIMENT",
    "spectral_tails": "gaugekit.experiments.spectral_tails:EXPERIMENT",
    "hyperspectral": "gaugekit.experiments.hyperspectral:EXPERIMENT",
    "ecosystem": "gaugekit.experiments.ecosystem:EXPERIMENT",
    "eigenbasis": "gaugekit.experiments.eigenbasis:EXPERIMENT",
    "ladder": "gaugekit.experiments.ladder:EXPERIMENT",
    "language_model": "gaugekit.experiments.language_model:EXPERIMENT",
}


def experiment_names() -> list[str]:
    """Registered experiment names, in registration order."""
    return list(EXPERIMENTS)


def get_experiment(name: str) -> Experiment:
    """The experiment object registered as ``name``."""
    if name not in EXPERIMENTS:
        raise ValueError(f"Invalid experiment: {name!r}; expected one of {experiment_names()}")
    module, attr = EXPERIMENTS[name].split(":")
    return getattr(importlib.import_module(module), attr)
