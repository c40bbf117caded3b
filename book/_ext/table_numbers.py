"""Tables are numbered and captioned as tables.

The book's tables are computed, so they enter a page through myst-nb's ``glue:figure``, which
makes a figure node: Sphinx would caption them "Fig. 4.3" and number them among the figures.
This extension turns every such figure whose label starts with ``tab-`` into a
:class:`table_figure`, a figure that Sphinx numbers as a table ("Table 4.3", and ``{numref}``
writes the same), rendered like any figure.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

#: Labels of this prefix are tables.
PREFIX = "tab-"


class table_figure(nodes.figure):  # noqa: N801 (docutils names its node classes in lower case)
    """A figure holding a table: numbered among the tables."""


class TablesAreTables(SphinxTransform):
    """Turn each figure labelled ``tab-…`` into a :class:`table_figure`."""

    default_priority = 200

    def apply(self, **kwargs: Any) -> None:
        for node in list(self.document.findall(nodes.figure)):
            if type(node) is nodes.figure and any(n.startswith(PREFIX) for n in node["names"]):
                table = table_figure(node.rawsource, *node.children, **node.attributes)
                node.replace_self(table)
                for id_ in table["ids"]:
                    self.document.ids[id_] = table


def _visit(translator: Any, node: nodes.Element) -> None:
    translator.visit_figure(node)


def _depart(translator: Any, node: nodes.Element) -> None:
    translator.depart_figure(node)


def setup(app: Sphinx) -> dict[str, Any]:
    visitors = {fmt: (_visit, _depart) for fmt in ("html", "latex", "text", "man", "texinfo")}
    app.add_enumerable_node(table_figure, "table", **visitors)
    app.add_transform(TablesAreTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
