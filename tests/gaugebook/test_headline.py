"""The README's results block is what `python -m gaugebook headline` makes from the committed
records: the test fails as soon as a record, a provider or the README changes without the other."""

from __future__ import annotations

import shutil
from pathlib import Path

from gaugebook import headline

ROOT = Path(__file__).resolve().parents[2]


def test_readme_headline_matches_the_committed_records():
    assert headline.check_readme(ROOT) == []


def test_a_stale_readme_is_caught(tmp_path):
    text = (ROOT / "README.md").read_text()
    rows, _ = headline.headline_rows()
    assert rows, "the providers must give rows for the check to mean anything"
    adam = next(r for r in rows if r.claim.startswith("Recovery error of Adam"))
    line = next(x for x in text.splitlines() if x.startswith(f"| {adam.claim} "))
    assert f"| {adam.ours} |" in line
    stale = line.replace(f"| {adam.ours} |", "| 0.9999 |")
    (tmp_path / "README.md").write_text(text.replace(line, stale))
    (tmp_path / "results").mkdir()
    shutil.copy(ROOT / headline.FIGURE, tmp_path / headline.FIGURE)
    problems = headline.check_readme(tmp_path)
    assert problems and "does not match the committed records" in problems[0]
    (tmp_path / headline.FIGURE).unlink()
    assert any("missing" in p for p in headline.check_readme(tmp_path))
