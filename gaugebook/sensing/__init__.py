"""The matrix-sensing optimizer zoo (chapter 4): Table 2, Figure 1 and their controls.

``measurements``       the problem: Gaussian measurements of a planted low-rank ``X_star``, fitted
                       by ``U Vᵀ``; its family of the factor trainer (``SENSING``)
``run_specs``          the sizes of a sensing problem and a step budget, shared by the
                       sensing-type experiments (dial, tails, ladder, eigenbasis)
``sensing_runs``       the experiment: the paper's grids, hyperparameters and published values,
                       its parts, runs and selections
``sensing_views``      its tables, figures and numbers
``sensing_controls``   the checks of the claim: controls, weight decay, survival

The chapters use the names below, as ``from gaugebook import sensing`` and
``sensing.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.sensing.measurements import (
    SENSING,
    make_instance,
)
from gaugebook.sensing.sensing_controls import (
    SURVIVAL_SETTINGS,
    controls,
    decay_comparisons,
    decay_values,
    survival,
)
from gaugebook.sensing.sensing_runs import (
    EXPERIMENT,
    collect,
    get_config,
    published_table2,
    selection_rows,
    split_summary,
)
from gaugebook.sensing.sensing_views import (
    NUCLEAR_NORM_FLOOR,
    balancedness_summary,
    balancedness_values,
    convex_html,
    convex_rows,
    convex_values,
    extremes,
    instance_check_rows,
    instances_html,
    late_change_seeds,
    late_change_summary,
    lr_sensitivity_figure,
    pairs_html,
    paper_gaps,
    ranking_groups,
    ranking_pairs,
    seed_values,
    selected_runs,
    settings_html,
    split_numbers,
    split_rule,
    table2_diagnostics_html,
    table2_html,
    training_figure,
    wide_html,
    wide_numbers,
    zoo_numbers,
)

__all__ = [
    "balancedness_summary",
    "balancedness_values",
    "collect",
    "controls",
    "convex_html",
    "convex_rows",
    "convex_values",
    "decay_comparisons",
    "decay_values",
    "EXPERIMENT",
    "extremes",
    "get_config",
    "instance_check_rows",
    "instances_html",
    "late_change_seeds",
    "late_change_summary",
    "lr_sensitivity_figure",
    "make_instance",
    "NUCLEAR_NORM_FLOOR",
    "pairs_html",
    "paper_gaps",
    "published_table2",
    "ranking_groups",
    "ranking_pairs",
    "seed_values",
    "selected_runs",
    "selection_rows",
    "SENSING",
    "settings_html",
    "split_numbers",
    "split_rule",
    "split_summary",
    "survival",
    "SURVIVAL_SETTINGS",
    "table2_diagnostics_html",
    "table2_html",
    "training_figure",
    "wide_html",
    "wide_numbers",
    "zoo_numbers",
]
