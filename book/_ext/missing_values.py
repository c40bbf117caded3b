"""A glued number that has no value at this scale reads as a dash, not ``nan``.

A quick-scale page formats the numbers of a paragraph written for the paper-scale records; a
value those small runs do not define (a published cell of the paper's setting only, a seed
that no quick run has) is a non-finite float, which a format spec such as ``:.3f`` prints as
``nan``. The pages' own formatter (``gaugebook.present.tables.fmt``) writes an em dash for a
missing number; this extension does the same for the numbers pasted by ``{glue:text}``, once
every reference of the page is resolved.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

#: How a format spec prints a non-finite float (``format(nan, "+.1%")`` is ``+nan%``).
MISSING = {"nan", "inf", "infinity"}
DASH = "\u2014"


def is_missing(text: str) -> bool:
    """Whether ``text`` is a non-finite float as a format spec prints it."""
    return text.strip().lower().lstrip("+-").rstrip("%") in MISSING


def dash_missing_values(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Replace every pasted number that prints as ``nan`` or ``inf`` by an em dash."""
    for node in list(doctree.findall(nodes.inline)):
        if "pasted-text" in node["classes"] and is_missing(node.astext()):
            node.children = [nodes.Text(DASH)]


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", dash_missing_values)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
