"""A results row says the range it was checked on, and never "holds" for a part of the
paper's range."""

from __future__ import annotations

import pytest

from gaugebook.present.verdicts import HeadlineRow


def _row(**kw):
    base = dict(experiment="ladder", claim="Muon recovers exactly", ours="5.3e-06",
                published="0.0000", chapter="10")
    return HeadlineRow(**(base | kw))


def test_a_part_of_the_paper_range_does_not_hold():
    with pytest.raises(ValueError, match="part of the paper's range"):
        _row(verdict="holds", covers="n = 40–96", paper_covers="n = 40–256", partial=True)
    row = _row(verdict="holds where run", caveat="n ≤ 96; the paper's n = 128–256 not run",
               covers="n = 40–96", paper_covers="n = 40–256", partial=True)
    assert row.coverage == "n = 40–96; paper: n = 40–256"


def test_holds_where_run_names_the_part_not_run():
    with pytest.raises(ValueError, match="needs partial=True and a caveat"):
        _row(verdict="holds where run", covers="n = 40–96", paper_covers="n = 40–256",
             partial=True)
    with pytest.raises(ValueError, match="needs partial=True"):
        _row(verdict="holds where run", caveat="n ≤ 96", covers="n = 40")


def test_coverage_in_one_cell():
    assert _row(covers="n = 40, 3 seeds", paper_covers="n = 40, 3 seeds").coverage \
        == "n = 40, 3 seeds (as the paper)"
    assert _row(covers="rank 4", verdict="beyond the paper").coverage == "rank 4"
    with pytest.raises(ValueError, match="Invalid verdict"):
        _row(verdict="holds mostly")
