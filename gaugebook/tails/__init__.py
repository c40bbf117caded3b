"""Spectral tails, Muon and sign methods (chapter 6; Section 8 of the paper).

``tail_problem``    sensing of a low-rank head plus a spectral tail; its family (``TAILS``)
``tail_theory``     the per-mode dynamics of Proposition 8.1 and the crossing ``τ*``
``tails_runs``      the experiment: the phase sweep over ``τ``, the signum horizon, balancedness
``tails_views``     the chapter's tables, figures and numbers
``tails_crossing``  the crossing ``τ*`` beside the paper's

The chapters use the names below, as ``from gaugebook import tails`` and
``tails.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.tails.tails_crossing import (
    crossing_figure,
    crossing_values,
)
from gaugebook.tails.tails_runs import (
    balancedness_rows,
    collect,
    crossings,
    get_config,
    horizon_rows,
    phase_rows,
    published_applies,
)
from gaugebook.tails.tails_views import (
    balancedness_figure,
    balancedness_html,
    balancedness_numbers,
    instance_numbers,
    instance_rows,
    instances_html,
    modes_figure,
    phase_figure,
    phase_html,
    phase_numbers,
    problem_numbers,
    signum_figure,
    signum_html,
    signum_numbers,
    spectrum_figure,
)

__all__ = [
    "balancedness_figure",
    "balancedness_html",
    "balancedness_numbers",
    "balancedness_rows",
    "collect",
    "crossing_figure",
    "crossing_values",
    "crossings",
    "get_config",
    "horizon_rows",
    "instance_numbers",
    "instance_rows",
    "instances_html",
    "modes_figure",
    "phase_figure",
    "phase_html",
    "phase_numbers",
    "phase_rows",
    "problem_numbers",
    "published_applies",
    "signum_figure",
    "signum_html",
    "signum_numbers",
    "spectrum_figure",
]
