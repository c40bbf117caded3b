"""The book's experiments: one module per experiment, registered here by name.

Each module says what to run and how to read it back: its configs and parts (``specs``), how
one batch trains (``run_batch``, on :mod:`gaugekit.train`), its records (``collect``) and the
summaries other modules build on. The sweep engine, the records and the selections live in
:mod:`gaugekit.runs`; the figures, tables, sentences and the README's rows in
:mod:`gaugekit.report`.

Modules are imported on first use. The package needs the ``experiments`` extra
(``pip install 'gaugekit[experiments]'``): importing it without raises
:class:`~gaugekit._extras.MissingExtra`, which says so.
"""

# Developer note (layers, gaugekit/__init__.py): floor 8, experiments/, on train/ and runs/.

from __future__ import annotations

import importlib

from gaugekit._extras import require_extra

require_extra("gaugekit.experiments", "experiments")

from gaugekit.runs.spec import Experiment

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
