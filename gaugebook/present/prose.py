"""The book's sentences, checked against the records they describe.

A chapter's "What we saw" is written by hand for the paper-scale records, with its numbers
glued. What a sentence states beyond its numbers (an order, a sign, "every", "none") is checked
by :func:`check_prose` in a hidden cell below it: at paper scale a sentence the records no longer
support stops the build; at quick scale, whose records are small and noisy, the check is skipped
and the page says that its prose describes the paper-scale records.
"""

from __future__ import annotations

from gaugebook.engine.settings import get_scale


class ProseContradicted(AssertionError):
    """A page's words state something its records no longer show."""


def check_prose(condition: bool, words: str, *, scale: str | None = None) -> None:
    """Raise :class:`ProseContradicted` when ``condition`` is false at paper scale (``scale``,
    else the active one): ``words`` says what the page claims, so the error names the
    sentence to rewrite. Does nothing at quick scale."""
    if get_scale(scale) == "paper" and not condition:
        raise ProseContradicted(f"The records no longer show that {words}; rewrite the sentence "
                                "that says so")
