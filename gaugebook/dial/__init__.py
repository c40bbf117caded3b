"""The anisotropy dial and FlowAdam (chapter 5).

``dial_runs``     the dial's recovery table and FlowAdam's sensing rows, as an experiment
``flow_runs``     the dial and FlowAdam as optimizers: the audit cases, the variants, their runs
``dial_summary``  the dial's records as the chapter reads them: selections, tables, numbers
``flow_summary``  FlowAdam's rows, its audit, trigger rates, ablation and live demonstrations
``dial_views``    the chapter's figures and HTML tables

The chapters use the names below, as ``from gaugebook import dial`` and
``dial.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.dial.dial_runs import (
    ablation_results,
    collect,
    get_config,
)
from gaugebook.dial.dial_summary import (
    cell_seeds,
    collect_chapter,
    dial_numbers,
    dial_rows,
    dial_rule,
    dial_table,
    fixed_lr_numbers,
    fixed_lr_rule,
    fixed_lr_table,
    gd_reference,
    gd_seeds,
    lr_edge_numbers,
    lr_edge_rows,
    lr_edge_rule,
    lr_edge_table,
    published_lr_edge,
)
from gaugebook.dial.dial_views import (
    ablation_figure,
    ablation_html,
    audit_html,
    dial_figure,
    dial_html,
    fixed_lr_heatmap,
    flow_html,
    gauge_residuals,
    lr_edge,
    lr_edge_html,
    spread_cdf,
    trigger_figure,
)
from gaugebook.dial.flow_runs import (
    AUDIT_CASES,
    INVARIANT,
    audit_cases,
    dial_gauge_residuals,
    flow_adam_config,
)
from gaugebook.dial.flow_summary import (
    ablation_labels,
    ablation_numbers,
    ablation_rows,
    ablation_rule,
    anisotropy_demo,
    audit_numbers,
    audit_rows,
    describe,
    flow_numbers,
    flow_table,
    long_rule,
    seeds_at,
    text_forms,
    trigger_lines,
    trigger_numbers,
    trigger_rule,
    warmup_demo,
)

__all__ = [
    "ablation_figure",
    "ablation_html",
    "ablation_labels",
    "ablation_numbers",
    "ablation_results",
    "ablation_rows",
    "ablation_rule",
    "anisotropy_demo",
    "audit_cases",
    "AUDIT_CASES",
    "audit_html",
    "audit_numbers",
    "audit_rows",
    "cell_seeds",
    "collect",
    "collect_chapter",
    "describe",
    "dial_figure",
    "dial_gauge_residuals",
    "dial_html",
    "dial_numbers",
    "dial_rows",
    "dial_rule",
    "dial_table",
    "fixed_lr_heatmap",
    "fixed_lr_numbers",
    "fixed_lr_rule",
    "fixed_lr_table",
    "flow_adam_config",
    "flow_html",
    "flow_numbers",
    "flow_table",
    "gauge_residuals",
    "gd_reference",
    "gd_seeds",
    "get_config",
    "INVARIANT",
    "long_rule",
    "lr_edge",
    "lr_edge_html",
    "lr_edge_numbers",
    "lr_edge_rows",
    "lr_edge_rule",
    "lr_edge_table",
    "published_lr_edge",
    "seeds_at",
    "spread_cdf",
    "text_forms",
    "trigger_figure",
    "trigger_lines",
    "trigger_numbers",
    "trigger_rule",
    "warmup_demo",
]
