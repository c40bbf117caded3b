"""The book's experiments by name: what ``python -m gaugebook run NAME`` runs.

Each chapter's package defines its experiment object (an :class:`~gaugebook.engine.spec.Experiment`:
parts, specs, batches, ``run_batch``); this module only names them, by import, so that the
import contract sees every arrow. The names are those of the records' folders under
``results/`` (``results/matrix_sensing/paper/zoo.jsonl``).
"""

from __future__ import annotations

from gaugebook.attention.attention_runs import EXPERIMENT as ATTENTION
from gaugebook.dial.dial_runs import EXPERIMENT as DIAL
from gaugebook.ecosystem.ecosystem_runs import EXPERIMENT as ECOSYSTEM
from gaugebook.ecosystem.eigenbasis_runs import EXPERIMENT as EIGENBASIS
from gaugebook.engine.spec import Experiment
from gaugebook.hyperspectral.hyperspectral_runs import EXPERIMENT as HYPERSPECTRAL
from gaugebook.ladder.ladder_runs import EXPERIMENT as LADDER
from gaugebook.lm.lm_runs import EXPERIMENT as LANGUAGE_MODEL
from gaugebook.lora.lora_runs import EXPERIMENT as LORA
from gaugebook.sensing.sensing_runs import EXPERIMENT as MATRIX_SENSING
from gaugebook.tails.tails_runs import EXPERIMENT as SPECTRAL_TAILS

__all__ = ["EXPERIMENTS", "experiment_names", "get_experiment"]

#: experiment name → its experiment object, in the book's order
EXPERIMENTS: dict[str, Experiment] = {
    exp.name: exp
    for exp in (MATRIX_SENSING, ATTENTION, DIAL, SPECTRAL_TAILS, HYPERSPECTRAL, ECOSYSTEM,
                EIGENBASIS, LADDER, LANGUAGE_MODEL, LORA)
}


def experiment_names() -> list[str]:
    """Registered experiment names, in registration order."""
    return list(EXPERIMENTS)


def get_experiment(name: str) -> Experiment:
    """The experiment object registered as ``name``."""
    if name not in EXPERIMENTS:
        raise ValueError(f"Invalid experiment: {name!r}; expected one of {experiment_names()}")
    return EXPERIMENTS[name]
