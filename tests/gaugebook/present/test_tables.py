"""The book's HTML tables, words and formats (:mod:`gaugebook.present.tables`, shown by viz)."""

import re

import pytest

viz = pytest.importorskip("gaugebook.present.viz")


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

    from gaugebook.present.viz import records_note

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


def test_viz_shows_the_tables_helpers_it_does_not_define():
    from gaugebook.present import tables

    for name in ("table_html", "records_note", "glue_page", "as_markdown"):
        assert getattr(viz, name) is getattr(tables, name)


def test_the_words_and_formats_of_a_page():
    from gaugebook.present import tables

    assert [tables.fmt(x, ".2f") for x in (None, float("nan"), float("inf"), 1.5)] == [
        "—", "—", "—", "1.50"]
    assert [tables.yes_no(x) for x in (True, False, None, 0)] == ["yes", "no", "—", "no"]
    assert [tables.join_words(x) for x in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == [
        "", "a", "a and b", "a, b and c"]
    assert tables.rec_lr(0.12345, 0.01, "*") == "0.1235*\u00a0(0.01)"
    assert tables.rec_lr(None, 0.01) is None and tables.rec_lr(float("nan"), None) is None
    assert [tables.value_text(x) for x in (True, None, (0.9, 0.999), 1e-8, 1.0, 3, "x")] == [
        "yes", "none", "0.9 / 0.999", "1e-08", "1", "3", "x"]
    assert tables.label("adam") == "Adam" and tables.label("no_such_rule") == "no_such_rule"
    assert tables.gauge_class(True) == "equivariant"
    assert tables.wrapped("short\n" + "word " * 30, width=40).splitlines()[2].startswith("    ")


def test_a_figure_legend_below_takes_each_label_once():
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, (a, b) = plt.subplots(1, 2)
    a.plot([0, 1], label="one")
    b.plot([0, 1], label="one")
    b.plot([1, 0], label="two")
    viz.legend_below(fig, a, b, handles=[Line2D([], [], label="three")], ncol=3)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["one", "two", "three"]
    viz.log_ticks(a, [1e-3, 1e-2])
    assert a.get_xscale() == "log" and [t.get_text() for t in a.get_xticklabels()] == [
        "0.001", "0.01"]
    plt.close(fig)


def test_numpy_and_torch_scalars_glue_as_plain_numbers():
    """A page formats a glued number from its printed form: ``np.int64(20000)`` would not
    parse, so glue_page unwraps numpy and torch scalars (and leaves arrays alone)."""
    import numpy as np
    import torch

    from gaugebook.present.tables import _is_scalar

    assert _is_scalar(np.int64(3)) and _is_scalar(np.float32(1.5))
    assert _is_scalar(torch.tensor(2.0))
    assert not _is_scalar(3) and not _is_scalar("3")
    assert not _is_scalar(np.array([1, 2])) and not _is_scalar(torch.tensor([1.0, 2.0]))


def test_glue_page_glues_a_missing_value_as_a_dash_never_none():
    """A page would print ``None``: glue_page glues a dash, as :func:`fmt` formats one."""
    pytest.importorskip("myst_nb")
    from unittest import mock

    from gaugebook.present.tables import fmt

    with mock.patch("myst_nb.glue") as glue:
        viz.glue_page({"ok": 1.0, "gap": None, "spread": fmt(None, ".3f")})
    assert [c.args[:2] for c in glue.call_args_list] == [
        ("ok", 1.0), ("gap", "—"), ("spread", "—")]
