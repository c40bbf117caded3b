"""Records: run ids, strict JSON, crash-safe appends, truncated lines, provenance."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from gaugebook.engine.records import (
    RECORD_SCHEMA_VERSION,
    append_records,
    canonical_json,
    code_version,
    downsample_indices,
    finished_run_ids,
    latest_by_run_id,
    make_record,
    read_records,
    read_records_dir,
    round_sig,
    run_id,
    to_strict_json,
)


def _record(rid: str, status: str = "ok", rec: float = 0.1) -> dict:
    return make_record(
        run_id=rid, experiment="toy", part="p", config={"x": rid}, seeds={"instance": 1},
        scale="quick", dtype="float32", device="cpu", status=status, metrics={"rec": rec},
    )


def test_run_id_depends_on_content_not_key_order():
    a = {"method": "adam", "hparams": {"lr": 0.01, "betas": [0.9, 0.999]}, "seed": 42}
    b = {"seed": 42, "hparams": {"betas": (0.9, 0.999), "lr": 0.01}, "method": "adam"}
    assert run_id(a) == run_id(b)
    assert len(run_id(a)) == 16
    # negative controls: any semantic change changes the id
    assert run_id({**a, "seed": 43}) != run_id(a)
    assert run_id({**a, "hparams": {"lr": 0.03, "betas": [0.9, 0.999]}}) != run_id(a)


def test_strict_json_maps_non_finite_to_null_and_containers_to_lists():
    value = {
        "nan": math.nan, "inf": -math.inf, "ok": 1.5, "t": torch.tensor([1.0, math.nan]),
        "np": np.float32(2.0), "tuple": (1, 2), "dtype": torch.float64, "flag": np.bool_(True),
    }
    out = to_strict_json(value)
    assert out == {"nan": None, "inf": None, "ok": 1.5, "t": [1.0, None], "np": 2.0,
                   "tuple": [1, 2], "dtype": "float64", "flag": True}
    json.dumps(out, allow_nan=False)  # strict: would raise on a bare NaN
    with pytest.raises(ValueError):
        json.dumps({"x": math.nan}, allow_nan=False)  # the check above can fail
    with pytest.raises(TypeError, match="Invalid record value"):
        to_strict_json({"x": object()})


def test_canonical_json_is_compact_and_sorted():
    assert canonical_json({"b": 1, "a": [1.0, None]}) == '{"a":[1.0,null],"b":1}'


def test_make_record_carries_the_schema_and_rejects_unknown_status():
    r = _record("a")
    for key in ("schema_version", "run_id", "config", "seeds", "scale", "dtype", "device",
                "code", "status", "metrics", "curves", "wall_time_s", "created"):
        assert key in r
    assert r["schema_version"] == RECORD_SCHEMA_VERSION
    with pytest.raises(ValueError, match="Invalid status"):
        _record("a", status="finished")


def test_code_version_is_graceful_outside_git(monkeypatch):
    info = code_version()
    assert info["torch"] == torch.__version__
    assert set(info) >= {"git_sha", "git_dirty", "gaugekit", "torch"}
    if info["git_sha"] is None:
        assert info["git_dirty"] is None
    else:
        assert len(info["git_sha"]) == 40 and isinstance(info["git_dirty"], bool)


def test_append_and_read_round_trip(tmp_path):
    path = tmp_path / "sub" / "runs.jsonl"
    assert read_records(path) == []
    assert append_records(path, [_record("a"), _record("b", rec=math.nan)]) == 2
    assert append_records(path, []) == 0
    records = read_records(path)
    assert [r["run_id"] for r in records] == ["a", "b"]
    assert records[1]["metrics"]["rec"] is None
    assert "NaN" not in path.read_text()


def test_truncated_last_line_is_dropped_and_cut_before_the_next_append(tmp_path):
    path = tmp_path / "runs.jsonl"
    append_records(path, [_record("a")])
    with open(path, "a") as fh:
        fh.write('{"run_id": "half", "stat')  # a crash in the middle of a write
    with pytest.warns(UserWarning, match="truncated"):
        assert [r["run_id"] for r in read_records(path)] == ["a"]
    append_records(path, [_record("b")])
    assert [r["run_id"] for r in read_records(path)] == ["a", "b"]
    assert "half" not in path.read_text()


def test_a_damaged_middle_line_raises(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"run_id": "a"}\nnot json\n{"run_id": "b"}\n')
    with pytest.raises(ValueError, match=":2: malformed"):
        read_records(path)


def test_latest_record_wins_and_errors_are_not_finished(tmp_path):
    append_records(tmp_path / "p1.jsonl", [_record("a", "error"), _record("b", "diverged")])
    append_records(tmp_path / "p2.jsonl", [_record("a", "ok"), _record("c", "error")])
    records = read_records_dir(tmp_path)
    assert latest_by_run_id(records)["a"]["status"] == "ok"
    assert finished_run_ids(records) == {"a", "b"}
    assert read_records_dir(tmp_path / "missing") == []


def test_downsample_keeps_ends_and_bounds_length():
    idx = downsample_indices(101, 33)
    assert idx[0] == 0 and idx[-1] == 100 and len(idx) == 33
    assert idx == sorted(set(idx))
    assert downsample_indices(5, 33) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="max_points"):
        downsample_indices(10, 1)


def test_round_sig():
    assert round_sig(0.123456789, 4) == 0.1235
    assert round_sig(math.inf) is None and round_sig(None) is None
