"""A claim of the paper, our number for the same quantity beside the published one, and the
verdict: the rows an experiment reports for the README (:mod:`gaugebook.headline`) and
the book's results page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["VERDICTS", "HeadlineRow", "number_verdict"]

#: The verdicts a row may carry (README and the book's results page). "holds where run": our
#: number reproduces the paper's on the part of the paper's range we ran, and the rest is named.
VERDICTS: tuple[str, ...] = ("holds", "holds where run", "partly", "does not hold",
                             "not run here", "beyond the paper", "—")


@dataclass(frozen=True)
class HeadlineRow:
    """One line of the results table: the claim, our number, the paper's, our verdict on the
    claim (one of :data:`VERDICTS`), the chapter that tells the story, the caveat that chapter
    shows (a few words beside the verdict), a note (the protocol and the numbers behind the
    caveat), and the range the claim was checked on: ``covers`` (ours), ``paper_covers`` (the
    paper's, empty beyond the paper) and ``partial`` (ours is a part of the paper's range). A
    row checked on part of the paper's range does not say "holds": it says "holds where run"
    and its caveat names the part not run."""

    experiment: str
    claim: str
    ours: str
    published: str
    chapter: str
    verdict: str = "—"
    caveat: str = ""
    note: str = ""
    covers: str = ""
    paper_covers: str = ""
    partial: bool = False

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Invalid verdict: {self.verdict!r}; expected one of {VERDICTS}")
        if self.partial and self.verdict == "holds":
            raise ValueError(f"Invalid verdict: 'holds' for {self.claim!r}, checked on part of "
                             f"the paper's range ({self.covers}; the paper: {self.paper_covers});"
                             " expected 'holds where run' with the part not run in the caveat")
        if self.verdict == "holds where run" and not (self.partial and self.caveat):
            raise ValueError(f"Invalid verdict: 'holds where run' for {self.claim!r} needs "
                             "partial=True and a caveat naming the part not run")

    @property
    def coverage(self) -> str:
        """The range in one cell: ours, then the paper's where it differs."""
        if not self.paper_covers:
            return self.covers or "—"
        if self.paper_covers == self.covers:
            return f"{self.covers} (as the paper)"
        return f"{self.covers}; paper: {self.paper_covers}"


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
