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
    BEST,
    WORST,
    compare_methods,
    comparison_values,
    cost_rows,
    equal_time_words,
    fmt_loss,
    fresh_rows,
    gauge_cost,
    loss_gaps,
    paper_step1_ratio,
    split_rows,
    step_time_ratio,
    timing,
    twin_rows,
    twin_values,
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
    "BEST",
    "collect",
    "compare_methods",
    "comparison_values",
    "cost_rows",
    "cost_table",
    "drift_figure",
    "equal_time_words",
    "fmt_loss",
    "fresh_rows",
    "paper_step1_ratio",
    "fresh_table",
    "gauge_cost",
    "get_config",
    "loss_figure",
    "loss_gaps",
    "selection_table",
    "split_rows",
    "split_table",
    "state_numel",
    "step_time_ratio",
    "suite_summary",
    "suite_table",
    "suite_text_table",
    "timing",
    "twin_rows",
    "twin_table",
    "twin_values",
    "WORST",
]
