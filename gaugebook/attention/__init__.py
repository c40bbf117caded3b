"""Attention twins (chapter 8): two gauge-equivalent starts of the paper's transformer.

``attention_runs``     the experiment: parts, twins, the suite on ``nn.MultiheadAttention``
``attention_summary``  the chapter's numbers, pure functions of the records
``attention_views``    its tables and figures

The chapters use the names below, as ``from gaugebook import attention`` and
``attention.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.attention.attention_runs import (
    SUITE_PARTS,
    collect,
    get_config,
)
from gaugebook.attention.attention_summary import (
    accuracy_comparison,
    accuracy_numbers,
    final_comparisons,
    final_numbers,
    float64_numbers,
    headline,
    live_gauge_check,
    lm_numbers,
    mha_regression,
    ratio_comparisons,
    ratio_numbers,
    run_rows,
    setup_numbers,
    step1_comparisons,
    step1_numbers,
    structural_ratio,
    twin_audit_rows,
)
from gaugebook.attention.attention_views import (
    accuracy_table,
    drift_figure,
    final_tables,
    float64_table,
    fmt,
    heads_figure,
    lm_comparison_table,
    lm_table,
    multiseed_figure,
    multiseed_table,
    ratio_table,
    step1_table,
    twin_comparison_table,
)

__all__ = [
    "accuracy_comparison",
    "accuracy_numbers",
    "accuracy_table",
    "collect",
    "drift_figure",
    "final_comparisons",
    "final_numbers",
    "final_tables",
    "float64_numbers",
    "float64_table",
    "fmt",
    "get_config",
    "headline",
    "heads_figure",
    "live_gauge_check",
    "lm_comparison_table",
    "lm_numbers",
    "lm_table",
    "mha_regression",
    "multiseed_figure",
    "multiseed_table",
    "ratio_comparisons",
    "ratio_numbers",
    "ratio_table",
    "run_rows",
    "setup_numbers",
    "step1_comparisons",
    "step1_numbers",
    "step1_table",
    "structural_ratio",
    "SUITE_PARTS",
    "twin_audit_rows",
    "twin_comparison_table",
]
