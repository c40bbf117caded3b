"""A claim of the paper, our number for the same quantity beside the published one, and the
verdict: the rows an experiment reports for the README (:mod:`gaugebook.headline`) and
the book's results page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["VERDICTS", "HeadlineRow", "number_verdict"]

#: The verdicts a row may carry (README and the book's results page).
VERDICTS: tuple[str, ...] = ("holds", "partly", "does not hold", "not run here",
                             "beyond the paper", "—")


@dataclass(frozen=True)
class HeadlineRow:
    """One line of the results table: the claim, our number, the paper's, our verdict on the
    claim (one of :data:`VERDICTS`), the chapter that tells the story, the caveat that chapter
    shows (a few words beside the verdict) and a note (the protocol and the numbers behind the
    caveat)."""

    experiment: str
    claim: str
    ours: str
    published: str
    chapter: str
    verdict: str = "—"
    caveat: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Invalid verdict: {self.verdict!r}; expected one of {VERDICTS}")


def number_verdict(ours: float | None, published: float | None, *, rel: float = 0.05,
                   exact: float = 1e-4) -> str:
    """Whether our number reproduces the paper's for the same quantity: ``"holds"`` within
    ``rel`` (relative) or when both are below ``exact`` (an exact recovery), ``"partly"``
    within ``5·rel``, else ``"does not hold"``; ``"—"`` when either is missing."""
    if ours is None or published is None or not (math.isfinite(ours) and math.isfinite(published)):
        return "—"
    if abs(ours) < exact and abs(published) < exact:
        return "holds"
    diff = abs(ours - published) / max(abs(published), exact)
    return "holds" if diff <= rel else "partly" if diff <= 5 * rel else "does not hold"
