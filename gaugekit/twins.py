"""The twin audit's old address: :mod:`gaugekit.audit.heads` is its home.

``from gaugekit.twins import audit_twins`` keeps working; new code imports from
:mod:`gaugekit.audit`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 5, the old address of audit.heads, on audit/.

from gaugekit.audit.heads import *  # noqa: F403
from gaugekit.audit.heads import __all__  # noqa: F401
