"""Data-file lookup: search order, SHA-256 refusal, and error messages that say what to do."""

from __future__ import annotations

import hashlib

import pytest

from gaugebook.engine.datafiles import (
    DataFileError,
    MissingDataFileError,
    find_file,
    search_dirs,
    sha256_file,
)
from gaugebook.engine.settings import DATA_ENV


def _write(path, data: bytes = b"some bytes"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_found_in_data_dir_and_checksum_accepted(tmp_path):
    p = _write(tmp_path / "sub" / "f.bin")
    digest = hashlib.sha256(b"some bytes").hexdigest()
    assert sha256_file(p) == digest
    assert find_file("sub/f.bin", sha256=digest, data_dir=tmp_path) == p
    assert find_file("sub/f.bin", sha256="sha256:" + digest.upper(), data_dir=tmp_path) == p


def test_wrong_checksum_is_refused(tmp_path):
    _write(tmp_path / "f.bin")
    with pytest.raises(DataFileError, match="sha256") as err:
        find_file("f.bin", sha256="0" * 64, data_dir=tmp_path, url="https://example.org/f.bin")
    assert not isinstance(err.value, MissingDataFileError)
    assert "refused" in str(err.value) and "https://example.org/f.bin" in str(err.value)


def test_missing_file_names_file_folder_setting_and_source(tmp_path):
    with pytest.raises(MissingDataFileError) as err:
        find_file("hyper/none.mat", url="https://example.org/none.mat", data_dir=tmp_path,
                  download=False)
    text = str(err.value)
    for needle in ("hyper/none.mat", str(tmp_path), DATA_ENV, "https://example.org/none.mat"):
        assert needle in text
    assert isinstance(err.value, FileNotFoundError)


def test_missing_file_without_source_says_so(tmp_path):
    with pytest.raises(MissingDataFileError, match="no download source"):
        find_file("none.mat", data_dir=tmp_path)


def test_environment_setting_is_searched(tmp_path, monkeypatch):
    p = _write(tmp_path / "f.bin")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert search_dirs() == [tmp_path]
    assert find_file("f.bin") == p


def test_failed_download_is_a_missing_file_error(tmp_path):
    # an unreachable local URL: pooch fails fast, and the error still names everything
    with pytest.raises(MissingDataFileError, match="download into"):
        find_file("f.bin", url="http://127.0.0.1:9/f.bin", data_dir=tmp_path)
