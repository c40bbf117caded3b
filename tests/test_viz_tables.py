"""The book's HTML tables (:func:`gaugekit.report.viz.table_html`)."""

import re

import pytest

viz = pytest.importorskip("gaugekit.report.viz")


def _cells(html_text: str) -> list[tuple[str, str]]:
    return re.findall(r'<td style="([^"]*)">(.*?)</td>', html_text)


def test_one_word_cells_do_not_break_and_text_cells_do():
    rows = [{"n": 40, "rec": 5.3e-6, "note": "grid not fully recorded"}]
    cells = dict(
        (text, style) for style, text in _cells(viz.table_html(
            rows, ["n", "rec", "note"], formats={"rec": lambda x: f"{x:.1e}"})))
    assert set(cells) == {"40", "5.3e-06", "grid not fully recorded"}
    assert "white-space: nowrap" in cells["5.3e-06"] and "white-space: nowrap" in cells["40"]
    assert "nowrap" not in cells["grid not fully recorded"]


def test_missing_and_non_finite_values_show_as_a_dash():
    out = viz.table_html([{"a": None, "b": float("nan"), "c": 1.5}], ["a", "b", "c"],
                         formats={"c": ".2f"})
    assert [text for _, text in _cells(out)] == ["—", "—", "1.50"]


def test_records_note_is_markdown_with_the_command_in_a_code_block():
    from types import SimpleNamespace

    from IPython.display import Markdown

    from gaugekit.report.viz import records_note

    made = SimpleNamespace(note_markdown=lambda: "made by\n\n```bash\nx --scale paper\n```\n")
    note = records_note(made)
    assert isinstance(note, Markdown) and "```bash\nx --scale paper\n```" in note.data
    assert records_note("plain `code`").data == "plain `code`"
    with pytest.raises(ValueError, match="Invalid source"):
        records_note(42)


def test_a_no_break_space_keeps_a_cell_on_one_line():
    out = viz.table_html([{"a": "Lion\u00a05.3e-06", "b": "two words"}], ["a", "b"])
    cells = {text: style for style, text in _cells(out)}
    assert "white-space: nowrap" in cells["Lion\u00a05.3e-06"]
    assert "nowrap" not in cells["two words"]


def test_records_note_breaks_a_long_command_before_its_options():
    from gaugekit.report.viz import records_note

    command = "python -m gaugekit run dial --scale paper" + "".join(
        f" --part part_number_{i}" for i in range(6))
    note = records_note(f"made by\n\n```bash\n{command}\n```\n").data
    block = note.split("```bash\n")[1].split("\n```")[0].split("\n")
    assert len(block) > 1 and all(len(line) <= 72 for line in block)
    assert all(line.endswith(" \\") for line in block[:-1])
    assert " ".join(line.rstrip(" \\").strip() for line in block) == command
