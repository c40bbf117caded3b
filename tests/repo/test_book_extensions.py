"""The book's Sphinx extensions (book/_ext): a pasted number with no value reads as a dash."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from docutils import nodes
from docutils.utils import new_document

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("missing_values",
                                               ROOT / "book" / "_ext" / "missing_values.py")
missing_values = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(missing_values)


def _pasted(text: str, classes: tuple[str, ...] = ("pasted-text",)) -> nodes.inline:
    return nodes.inline(text, text, classes=list(classes))


def test_a_pasted_nan_becomes_a_dash_and_a_number_stays():
    doc = new_document("page")
    para = nodes.paragraph()
    values = [_pasted("nan"), _pasted("+nan%"), _pasted("-inf"), _pasted("0.123"),
              _pasted("nan", classes=("other",))]
    para.extend(values)
    doc.append(para)
    missing_values.dash_missing_values(None, doc, "page")
    assert [v.astext() for v in values] == ["\u2014", "\u2014", "\u2014", "0.123", "nan"]


def test_only_non_finite_numbers_count_as_missing():
    assert missing_values.is_missing(" NaN ") and missing_values.is_missing("+inf%")
    assert not missing_values.is_missing("0.0") and not missing_values.is_missing("Infinity x")
