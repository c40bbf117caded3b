"""The character-LM text: tiny-shakespeare when present and intact, else the built-in text."""

from __future__ import annotations

import pytest
import torch

from gaugebook.engine.datafiles import DataFileError, MissingDataFileError
from gaugebook.engine.texts import BUILTIN_TEXT, TINYSHAKESPEARE, load_text


def test_builtin_text_round_trips():
    text = load_text("builtin")
    assert text.name == "builtin"
    assert text.chars == BUILTIN_TEXT
    assert text.vocab == "".join(sorted(set(BUILTIN_TEXT)))
    assert text.decode(text.ids) == BUILTIN_TEXT
    assert text.ids.dtype == torch.long and len(text.ids) == len(BUILTIN_TEXT)
    assert len(load_text("builtin", max_chars=100).chars) == 100


def test_absent_file_auto_falls_back_and_explicit_name_refuses(tmp_path):
    assert load_text("auto", data_dir=tmp_path).name == "builtin"
    with pytest.raises(MissingDataFileError, match="tinyshakespeare_input.txt"):
        load_text("tinyshakespeare", data_dir=tmp_path)


def test_wrong_checksum_is_refused_even_by_auto(tmp_path):
    bad = tmp_path / TINYSHAKESPEARE["relpath"]
    bad.parent.mkdir(parents=True)
    bad.write_text("To be, or not to be\n")
    for name in ("tinyshakespeare", "auto"):
        with pytest.raises(DataFileError, match="sha256"):
            load_text(name, data_dir=tmp_path)


def test_real_file_when_the_data_folder_has_it():
    try:
        text = load_text("tinyshakespeare")
    except MissingDataFileError:
        pytest.skip("tiny-shakespeare is not in the data folder")
    assert text.name == "tinyshakespeare"
    assert len(text.chars) == 1_115_394 and text.vocab_size == 65


def test_bad_arguments():
    with pytest.raises(ValueError, match="name"):
        load_text("wikitext")
    with pytest.raises(ValueError, match="max_chars"):
        load_text("builtin", max_chars=1)
