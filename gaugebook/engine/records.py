"""Run records as JSON Lines — identity, provenance, strict JSON, crash-safe appends.

One record per run, one JSON object per line::

    schema_version  RECORD_SCHEMA_VERSION
    run_id          hash of the semantic config (:func:`run_id`): same config, same id
    experiment      experiment name;  part: the sweep of that experiment that asked for the run
    config          the semantic config: problem, method, fully resolved hyperparameters, budget,
                    seed, dtype (everything that changes the result, nothing that does not)
    seeds           the generator seeds the run used, each derived from ``config``
    scale, dtype, device
    code            git sha and dirty flag (None outside a checkout), gaugekit, torch, python
    status          "ok" | "diverged" | "error";  message: the error text (else None)
    metrics         final numbers; a non-finite value is stored as null
    curves          short downsampled curves (lists of numbers or nulls)
    wall_time_s     the run's share of its batch's wall time; batch: {size, wall_time_s}
    created         UTC time stamp (ISO 8601)

The file is append-only: :func:`append_records` writes whole lines, flushes and fsyncs, and
first cuts off a partial last line left by a crash; :func:`read_records` drops such a line. A
run counts as finished when its latest record has status ``ok`` or ``diverged``; ``error``
records are retried by the next sweep and superseded by its record (readers keep the latest
record of each run id).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import math
import os
import platform
import subprocess
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "FINISHED_STATUSES",
    "RECORD_SCHEMA_VERSION",
    "STATUSES",
    "append_records",
    "canonical_json",
    "code_version",
    "downsample_indices",
    "finished_run_ids",
    "latest_by_run_id",
    "make_record",
    "read_records",
    "read_records_dir",
    "round_sig",
    "run_id",
    "to_strict_json",
]

RECORD_SCHEMA_VERSION = 1
STATUSES: tuple[str, ...] = ("ok", "diverged", "error")
FINISHED_STATUSES: frozenset[str] = frozenset({"ok", "diverged"})


# --------------------------------------------------------------------------------------------
# strict JSON
# --------------------------------------------------------------------------------------------


def to_strict_json(value: Any) -> Any:
    """``value`` as plain JSON data: non-finite floats become ``None``; tensors, numpy scalars
    and arrays become numbers and lists; tuples become lists; mapping keys become strings."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, torch.Tensor):
        return to_strict_json(value.detach().cpu().tolist())
    if isinstance(value, Mapping):
        return {str(k): to_strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_strict_json(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return to_strict_json(value.tolist())
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    raise TypeError(f"Invalid record value: {value!r} of type {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal data give equal strings (used for hashing)."""
    return json.dumps(to_strict_json(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def run_id(config: Mapping[str, Any]) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`canonical_json` ``(config)``."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


def round_sig(x: float | None, digits: int = 6) -> float | None:
    """``x`` rounded to ``digits`` significant digits; ``None`` for ``None`` or non-finite."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def downsample_indices(length: int, max_points: int) -> list[int]:
    """At most ``max_points`` indices of ``range(length)``, evenly spread, first and last kept."""
    if max_points < 2:
        raise ValueError(f"Invalid max_points: {max_points!r}; expected an integer >= 2")
    if length <= max_points:
        return list(range(length))
    step = (length - 1) / (max_points - 1)
    return sorted({round(i * step) for i in range(max_points)})


# --------------------------------------------------------------------------------------------
# provenance
# --------------------------------------------------------------------------------------------


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """Git sha and dirty flag of the checkout holding ``gaugebook`` (``None`` when it is not a
    git checkout or has no commit yet), and the gaugekit, torch and Python versions."""
    import gaugekit

    here = Path(__file__).resolve().parent
    sha = _git(["rev-parse", "HEAD"], here)
    dirty = None
    if sha:
        status = _git(["status", "--porcelain", "--untracked-files=no"], here)
        dirty = None if status is None else bool(status)
    return {
        "git_sha": sha or None,
        "git_dirty": dirty,
        "gaugekit": gaugekit.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def make_record(
    *,
    run_id: str,
    experiment: str,
    part: str,
    config: Mapping[str, Any],
    seeds: Mapping[str, int],
    scale: str,
    dtype: str,
    device: str,
    status: str,
    metrics: Mapping[str, Any],
    curves: Mapping[str, Any] | None = None,
    message: str | None = None,
    wall_time_s: float | None = None,
    batch: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One record (see the module docstring), already strict JSON."""
    if status not in STATUSES:
        raise ValueError(f"Invalid status: {status!r}; expected one of {STATUSES}")
    record = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "run_id": run_id,
        "experiment": experiment,
        "part": part,
        "config": dict(config),
        "seeds": dict(seeds),
        "scale": scale,
        "dtype": dtype,
        "device": device,
        "code": code_version(),
        "status": status,
        "message": message,
        "metrics": dict(metrics),
        "curves": dict(curves or {}),
        "wall_time_s": wall_time_s,
        "batch": dict(batch or {}),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017
    }
    return to_strict_json(record)


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------


def _cut_partial_tail(path: Path) -> None:
    """Remove a last line that has no newline (left by a crash in the middle of a write)."""
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        block = 1 << 16
        pos = size
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                fh.truncate(start + cut + 1)
                return
            pos = start
        fh.truncate(0)


def append_records(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> int:
    """Append records as lines to ``path`` (created with its folders), flush and fsync.

    Returns the number of lines written. Every record is serialized (strict JSON, NaN refused)
    before the file is touched, so a bad record never leaves half a batch behind.
    """
    lines = [json.dumps(to_strict_json(r), allow_nan=False) + "\n" for r in records]
    if not lines:
        return 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        _cut_partial_tail(path)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
    return len(lines)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All records of a JSONL file, in file order; ``[]`` when it does not exist.

    A malformed *last* line (a write cut short) is dropped with a warning; a malformed line
    anywhere else means the file was damaged and raises ``ValueError``.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if number == len(lines):
                warnings.warn(f"{path}: dropped a truncated last line ({err})", stacklevel=2)
                break
            raise ValueError(f"{path}:{number}: malformed record line ({err})") from err
    return records


def read_records_dir(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Records of every ``*.jsonl`` file in ``folder`` (sorted by file name), ``[]`` if none."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    return [record for path in paths for record in read_records(path)]


def latest_by_run_id(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``run_id → record``, the later record of a run id superseding an earlier one."""
    return {r["run_id"]: dict(r) for r in records}


def finished_run_ids(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """Run ids whose latest record is ``ok`` or ``diverged`` (an ``error`` is retried)."""
    return {rid for rid, r in latest_by_run_id(records).items() if r["status"] in FINISHED_STATUSES}
