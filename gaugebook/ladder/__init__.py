"""The size ladder of the matrix-sensing zoo, and two arms (chapter 10).

``ladder_runs``   the experiment: sizes n = 40 … 384, the rank and m/dof arms
``ladder_paper``  the ladder beside the paper's and beside the sensing protocol at n = 40
``ladder_views``  the chapter's tables, figures and numbers

The chapters use the names below, as ``from gaugebook import ladder`` and
``ladder.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.ladder.ladder_paper import (
    n40_values,
)
from gaugebook.ladder.ladder_runs import (
    PAPER_LADDER_PROTOCOL,
    collect,
    get_config,
    size_rows,
)
from gaugebook.ladder.ladder_views import (
    arm_values,
    claims_values,
    coverage_values,
    protocol_values,
    published_values,
    recovery_figure,
    recovery_values,
    rule_claims,
    rule_values,
    settings_values,
    survival,
)

__all__ = [
    "arm_values",
    "claims_values",
    "collect",
    "coverage_values",
    "get_config",
    "n40_values",
    "PAPER_LADDER_PROTOCOL",
    "protocol_values",
    "published_values",
    "recovery_figure",
    "recovery_values",
    "rule_claims",
    "rule_values",
    "settings_values",
    "size_rows",
    "survival",
]
