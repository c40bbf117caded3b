"""A page's sentence checked against its records: it stops a paper build, never a quick one."""

from __future__ import annotations

import pytest

from gaugebook.present.prose import ProseContradicted, check_prose


def test_a_contradicted_sentence_stops_a_paper_build():
    check_prose(True, "the sentence holds", scale="paper")
    with pytest.raises(ProseContradicted, match="no longer show that Adam wins"):
        check_prose(False, "Adam wins", scale="paper")


def test_a_quick_build_describes_the_paper_records_and_is_not_stopped():
    check_prose(False, "Adam wins", scale="quick")
