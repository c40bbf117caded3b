"""Hyperspectral completion at matched training loss (chapter 7; Table 5 of the paper).

``scenes``               the registry of published scenes and a loader for any ``.mat``
``scene_refs``           a scene as named in a run config (registered, synthetic, a user's file)
``synthetic_scene``      a small synthetic scene from a seed (the quick-scale default)
``completion``           the problem: completion of a scene's pixels × bands matrix; its family
                         (``HYPERSPECTRAL``)
``hyperspectral_runs``   the experiment: scenes, densities, arms, the matched-loss protocol
``hyperspectral_views``  the chapter's tables, figures and numbers
``hyperspectral_page``   what the chapter pastes, one function per section

The chapters use the names below, as ``from gaugebook import hyperspectral`` and
``hyperspectral.NAME``; other modules import from the module that defines a name.
"""


from gaugebook.hyperspectral.hyperspectral_page import (
    absent,
    arm_items,
    beyond_items,
    claim_items,
    grid_items,
    headline_items,
    protocol_items,
    source_note,
    table5_items,
    waiting_markdown,
)
from gaugebook.hyperspectral.hyperspectral_runs import (
    collect,
    get_config,
)
from gaugebook.hyperspectral.hyperspectral_views import (
    level_curves,
    paper_parts,
)

__all__ = [
    "absent",
    "arm_items",
    "beyond_items",
    "claim_items",
    "collect",
    "get_config",
    "grid_items",
    "headline_items",
    "level_curves",
    "paper_parts",
    "protocol_items",
    "source_note",
    "table5_items",
    "waiting_markdown",
]
