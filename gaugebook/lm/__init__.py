"""Does keeping the gauge make a better language model? (chapter 9)

``lm_runs``     the experiment: each optimizer tuned on its own grid, fresh seeds, twins
``lm_summary``  the chapter's numbers, pure functions of the records
``lm_views``    its tables and figures

The chapters use the names below, as ``from gaugebook import lm`` and
``lm.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.lm.lm_runs import (
    collect,
    get_config,
    state_numel,
)
from gaugebook.lm.lm_summary import (
    cost_rows,
    fresh_rows,
    paper_step1_ratio,
    split_rows,
    timing,
    twin_rows,
)
from gaugebook.lm.lm_views import (
    cost_table,
    drift_figure,
    fresh_table,
    loss_figure,
    selection_table,
    split_table,
    suite_summary,
    suite_table,
    suite_text_table,
    twin_table,
)

__all__ = [
    "collect",
    "cost_rows",
    "cost_table",
    "drift_figure",
    "fresh_rows",
    "paper_step1_ratio",
    "fresh_table",
    "get_config",
    "loss_figure",
    "selection_table",
    "split_rows",
    "split_table",
    "state_numel",
    "suite_summary",
    "suite_table",
    "suite_text_table",
    "timing",
    "twin_rows",
    "twin_table",
]
