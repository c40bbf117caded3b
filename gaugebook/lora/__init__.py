"""LoRA: the gauge you fine-tune every day (the LoRA chapter).

``lora_model``    the language-model chapter's transformer as ``nn.Linear`` modules, for ``peft``
``lora_runs``     the experiment: pretraining, each optimizer tuned on the adapters, twins
``lora_summary``  the chapter's numbers, pure functions of the records
``lora_views``    its tables and figures

The chapter uses the names below, as ``from gaugebook import lora`` and ``lora.NAME``; other
modules import from the module that defines a name.
"""

from gaugebook.lora.lora_runs import audit_adapters, collect, get_config
from gaugebook.lora.lora_summary import (
    ROUNDOFF,
    comparisons,
    equal_time,
    fresh_rows,
    gl_noise_ratios,
    group_verdict,
    keeps_group,
    loss_comparison,
    page_values,
    pretrain_row,
    selection_rows,
    twin_rows,
    verdict,
)
from gaugebook.lora.lora_views import (
    audit_table,
    drift_figure,
    fresh_table,
    loss_figure,
    selection_table,
    twin_table,
    verdict_table,
)

__all__ = [
    "ROUNDOFF",
    "audit_adapters",
    "audit_table",
    "collect",
    "comparisons",
    "drift_figure",
    "equal_time",
    "fresh_rows",
    "fresh_table",
    "gl_noise_ratios",
    "get_config",
    "group_verdict",
    "keeps_group",
    "loss_comparison",
    "loss_figure",
    "page_values",
    "pretrain_row",
    "selection_rows",
    "selection_table",
    "twin_rows",
    "twin_table",
    "verdict",
    "verdict_table",
]
