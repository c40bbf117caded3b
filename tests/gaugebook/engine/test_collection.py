"""What a page shows: collection.collect reads committed records at paper scale (computing nothing,
or stopping with the command that makes what is missing), makes them in mode ``make``, and
recomputes in a temporary folder at quick scale."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gaugebook.engine import collection
from gaugebook.engine.collection import MissingRecords
from gaugebook.engine.spec import RunResult, RunSpec


class Squares:
    """Runs are points x; the 'training' returns x². Counts the runs it computes."""

    name = "squares"
    description = "x squared"

    def __init__(self) -> None:
        self.computed = 0

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("a", "b")

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        xs = {"a": [1.0, 2.0], "b": [3.0]}[part]
        return [RunSpec(self.name, part, {"x": x, "scale": scale}) for x in xs]

    def batch_key(self, spec: RunSpec):
        return 0

    def run_batch(self, specs: Sequence[RunSpec], *, device, progress) -> list[RunResult]:
        self.computed += len(specs)
        return [RunResult("ok", {"value": s.config["x"] ** 2}) for s in specs]


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(collection, "project_root", lambda name: tmp_path)
    monkeypatch.delenv("GAUGEKIT_RECORDS", raising=False)
    return tmp_path


def test_paper_scale_reads_records_and_never_computes_them(root):
    exp = Squares()
    with pytest.raises(MissingRecords) as info:
        collection.collect(exp, "paper")
    message = str(info.value)
    assert "python -m gaugebook run squares --scale paper --part a --part b" in message
    assert "a: 2" in message and "b: 1" in message
    assert exp.computed == 0
    made = collection.collect(exp, "paper", mode="make")
    assert exp.computed == 3 and made.report.ran == 3
    assert (root / "results" / "squares" / "paper" / "a.jsonl").is_file()
    read = collection.collect(exp, "paper")
    assert exp.computed == 3 and read.report.ran == 0
    assert [r["metrics"]["value"] for r in read.records["a"]] == [1.0, 4.0]
    note = read.note()
    assert "3 run records read from the committed folder results/squares/paper" in note
    assert "python -m gaugebook run squares --scale paper" in note and "code version" in note
    # on a page: the command alone in a bash code block, the folder as code
    markdown = read.note_markdown()
    assert "committed folder `results/squares/paper`" in markdown
    assert "\n```bash\npython -m gaugebook run squares --scale paper\n```\n" in markdown
    assert "`python" not in markdown  # no command between single backticks


def test_only_the_parts_asked_for_must_exist(root):
    exp = Squares()
    collection.collect(exp, "paper", parts=["b"], mode="make")
    assert collection.collect(exp, "paper", parts=["b"]).records["b"][0]["metrics"]["value"] == 9.0
    with pytest.raises(MissingRecords, match="--part a"):
        collection.collect(exp, "paper")


def test_quick_scale_recomputes_in_a_temporary_folder(root, monkeypatch):
    monkeypatch.setenv("GAUGEKIT_RECORDS", "read")
    exp = Squares()
    first = collection.collect(exp, "quick")
    second = collection.collect(exp, "quick")
    assert exp.computed == 6 and first.folder is None
    assert not (root / "results").exists()
    assert "recomputed for this page" in second.note()


def test_bad_records_mode_is_refused(root):
    with pytest.raises(ValueError, match="Invalid records mode"):
        collection.collect(Squares(), "paper", mode="sometimes")


def test_an_experiment_module_collect_is_collect_with_its_scale_settings(root):
    from types import SimpleNamespace

    def get_config(scale):  # the shape of every experiment module's get_config
        scale = scale or "paper"
        return SimpleNamespace(scale=scale, persist_records=scale == "paper")

    exp = Squares()
    strict = collection.collector(exp, get_config)
    lenient = collection.collector(exp, get_config, allow_missing=True,
                              default_parts=lambda config: ["b"])
    assert strict.__name__ == "collect" and "squares" in strict.__doc__
    assert "MissingRecords" in strict.__doc__ and "note" in lenient.__doc__
    with pytest.raises(MissingRecords, match="--part a --part b"):
        strict()  # paper by default: committed records, none yet
    got = lenient()  # only part b by default, and missing runs are named, not raised
    assert list(got.records) == ["b"] and got.records["b"] == [] and exp.computed == 0
    assert "python -m gaugebook run squares --scale paper --part b" in got.note()
    assert "(it resumes)\n\n```bash\npython -m gaugebook run squares --scale paper --part b\n```" \
        in got.note_markdown()
    strict(mode="make", parts=["a"])
    assert exp.computed == 2 and len(strict(parts=["a"]).records["a"]) == 2
    quick = strict("quick")  # not persisted: computed afresh in a temporary folder
    assert exp.computed == 5 and quick.folder is None


def test_the_page_note_folds_code_versions_into_a_dropdown_and_wraps_long_commands(root):
    exp = Squares()
    collection.collect(exp, "paper", parts=["b"], mode="make")
    got = collection.collect(exp, "paper", allow_missing=True)
    markdown = got.note_markdown()
    # the code versions (and the missing runs per part) sit in a collapsed dropdown, after
    # the commands
    head, _, fold = markdown.partition("````{dropdown} Code version and missing runs\n")
    assert fold.endswith("````\n") and "Made at code version `" in fold
    assert "Runs without a record, per part: a 2." in fold
    assert "code version" not in head and "make them with (it resumes)" in head
    # a long command becomes lines of at most COMMAND_WIDTH characters, options kept whole
    long = "python -m gaugebook run ladder --scale paper " + " ".join(
        f"--part n{i}" for i in range(20))
    lines = collection.wrap_command(long).splitlines()
    assert len(lines) > 1 and all(len(line) <= collection.COMMAND_WIDTH for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert " ".join(line.rstrip(" \\").strip() for line in lines) == long
    assert collection.wrap_command("python -m gaugebook run squares --scale paper") == (
        "python -m gaugebook run squares --scale paper")
