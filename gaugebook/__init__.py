"""gaugebook: the book's machinery. Not part of the ``gaugekit`` wheel; it lives in a checkout.

The chapters import it beside the library (``import gaugekit``; ``from gaugebook import
sensing``). Three kinds of package, and one rule between them::

    engine/     what every experiment shares: settings, run specs and records, the sweep
                engine and its backends, the one collector, the one selection module, the
                config base (quick and paper), the factor trainer and the twin trainer (with
                the paper's small transformer it trains and its texts), data files
    present/    what every page shares: tables, number formats and glue, figures and the
                book's style, claim-against-published verdict rows
    symmetry, taxonomy, dynamics       the theory chapters' live checks and figures (1–3)
    sensing/ dial/ tails/ hyperspectral/ attention/ lm/ lora/ ladder/ ecosystem/
                one package per experiment chapter (4–11, 13): its problem, configs and
                published constants, runs and views; ``from gaugebook import sensing``
    experiments, headline, commands    the experiments by name, the README's results at a
                glance, and ``python -m gaugebook``

The rule (checked by ``lint-imports``): ``engine`` and ``present`` never import a chapter's
module; ``gaugekit`` never imports ``gaugebook``.

Needs the ``experiments`` extra (``python3 dev.py setup`` installs it).
"""

from gaugekit._extras import require_extra

require_extra("gaugebook", "experiments")

# isort: split
from gaugebook.engine.settings import describe, get_data_dir, get_device, get_scale  # noqa: E402

__all__ = ["describe", "get_data_dir", "get_device", "get_scale"]
