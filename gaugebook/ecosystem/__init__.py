"""The optimizer ecosystem, audited, and the eigenbasis Adam (chapter 13).

``ecosystem_runs``   every optimizer class of pytorch-optimizer and heavyball through the audit
``eigenbasis_runs``  the eigenbasis Adam on Table 2's protocol and on the attention twins
``ecosystem_views``  the appendix's tables, figures and numbers

The chapters use the names below, as ``from gaugebook import ecosystem`` and
``ecosystem.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.ecosystem.ecosystem_runs import (
    LIBRARIES,
    collect,
    table_rows,
)
from gaugebook.ecosystem.ecosystem_views import (
    COLLISION_GAPS,
    by_group,
    collision_residual,
    comparison_values,
    eigen_adam_comparison,
    eigen_audit_values,
    followup_values,
    gap_collision,
    group_values,
    initial_q_gradients,
    live_residuals,
    verdict_values,
)

__all__ = [
    "by_group",
    "collect",
    "COLLISION_GAPS",
    "collision_residual",
    "comparison_values",
    "eigen_adam_comparison",
    "eigen_audit_values",
    "followup_values",
    "gap_collision",
    "group_values",
    "initial_q_gradients",
    "LIBRARIES",
    "live_residuals",
    "table_rows",
    "verdict_values",
]
