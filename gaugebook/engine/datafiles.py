"""Finding a data file on disk, verifying it, and downloading it for online users.

One job: turn a relative path such as ``hyperspectral/SalinasA_corrected.mat`` into a verified
local :class:`~pathlib.Path`, or fail with a message that says exactly what to do.

Where a file is looked for, in order (:func:`search_dirs`):

1. ``data_dir`` when a caller passes one, else the ``GAUGEKIT_DATA`` setting when it is set
   (:func:`gaugebook.engine.settings.get_data_dir`);
2. otherwise ``../shared/data`` beside the checkout when that folder exists, then the cache
   ``~/.cache/gaugekit``.

A file that is found is checked against its SHA-256 when one is known; a mismatch is refused
(:class:`DataFileError`), never silently used. A file that is not found is downloaded with
:mod:`pooch` into the first folder searched when a download URL is known (pooch verifies the
hash); otherwise, or when the download fails, :class:`MissingDataFileError` names the file, the
folders searched, the setting that changes them and the download source.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from gaugebook.engine.settings import DATA_ENV, get_data_dir

__all__ = [
    "DataFileError",
    "MissingDataFileError",
    "find_file",
    "search_dirs",
    "sha256_file",
    "verify_sha256",
]

_REPO_ROOT = Path(__file__).resolve().parents[2]
#: The shared data folder of a checkout that sits beside ``../shared`` (used when nothing is set).
SHARED_DATA_DIR = _REPO_ROOT.parent / "shared" / "data"


class DataFileError(ValueError):
    """A data file that cannot be used: wrong checksum, key, shape or dtype."""


class MissingDataFileError(DataFileError, FileNotFoundError):
    """A data file that is in none of the folders searched and could not be downloaded."""


def search_dirs(data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The folders :func:`find_file` searches, in order (see the module docstring)."""
    if data_dir is not None or os.environ.get(DATA_ENV):
        return [get_data_dir(data_dir)]
    dirs = [SHARED_DATA_DIR] if SHARED_DATA_DIR.is_dir() else []
    return [*dirs, get_data_dir()]


_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 hex digest of the file's bytes (cached by path, size and mtime)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _HASH_CACHE[key] = h.hexdigest()
    return _HASH_CACHE[key]


def verify_sha256(path: str | os.PathLike[str], sha256: str | None, *, source: str = "") -> Path:
    """Return ``path`` when its SHA-256 is ``sha256`` (or ``sha256`` is None); else refuse it."""
    p = Path(path)
    if sha256 is None:
        return p
    expected = sha256.lower().removeprefix("sha256:")
    actual = sha256_file(p)
    if actual != expected:
        where = f"; a good copy is at {source}" if source else ""
        raise DataFileError(
            f"Invalid data file: {str(p)!r} has sha256 {actual}; expected {expected}. "
            f"The file is damaged or a different version: it is refused, not used{where}."
        )
    return p


def _missing_message(relpath: str, dirs: list[Path], url: str | None, extra: str = "") -> str:
    searched = ", ".join(repr(str(d)) for d in dirs)
    source = f"download it from {url}" if url else "no download source is known for it"
    return (
        f"Missing data file: {relpath!r} was not found in {searched}. Put the file there, "
        f"or set {DATA_ENV} to the folder that holds it (or pass data_dir=...); {source}.{extra}"
    )


def find_file(
    relpath: str | os.PathLike[str],
    sha256: str | None = None,
    url: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
) -> Path:
    """The verified local path of data file ``relpath`` (relative to a data folder).

    ``sha256``: the expected hex digest (the file is refused when it differs); ``url``: where
    to download it from when it is in no folder searched (only with ``download``); ``data_dir``:
    search only this folder. Raises :class:`MissingDataFileError` or :class:`DataFileError`.
    """
    rel = Path(relpath)
    if rel.is_absolute():
        if not rel.is_file():
            raise MissingDataFileError(_missing_message(str(rel), [rel.parent], url))
        return verify_sha256(rel, sha256, source=url or "")
    dirs = search_dirs(data_dir)
    for folder in dirs:
        candidate = folder / rel
        if candidate.is_file():
            return verify_sha256(candidate, sha256, source=url or "")
    if url is None or not download:
        raise MissingDataFileError(_missing_message(str(rel), dirs, url))
    target = dirs[0] / rel
    try:
        import pooch

        fetched = pooch.retrieve(
            url,
            known_hash=f"sha256:{sha256}" if sha256 else None,
            fname=target.name,
            path=target.parent,
            progressbar=False,
        )
    except Exception as err:  # noqa: BLE001 - reported with the file, folder and source
        extra = f" The download into {str(target.parent)!r} failed: {type(err).__name__}: {err}"
        raise MissingDataFileError(_missing_message(str(rel), dirs, url, extra)) from err
    return verify_sha256(fetched, sha256, source=url)
