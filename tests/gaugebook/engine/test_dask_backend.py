"""The dask backend of the sweep engine on a real local cluster (two worker processes):
the same records as the local backend, resume after the driver is killed, a worker killed
during a batch, GPU batches asking for a GPU. No mocks: real scheduler, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from gaugebook import commands
from gaugebook.engine.records import read_records_dir
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.engine.sweep import run_sweep

distributed = pytest.importorskip(
    "distributed", reason="the dask backend needs `pip install gaugekit[cluster]`")
import dask  # noqa: E402  (installed with distributed)
from test_sweep import TinySensing, Toy  # noqa: E402  (module level: workers unpickle them)

HERE = Path(__file__).resolve().parent


class Sleepy:
    """One run per batch, each sleeping ``pause`` seconds; the result is ``x²``.

    In ``folder``, every attempt of a batch appends its ``x`` to ``attempts``. The batch of
    ``x = once`` kills its own worker process (SIGKILL) at its first attempt only, the batch
    of ``x = always`` at every attempt: a worker lost mid-batch, as on a preempted node.
    """

    name = "sleepy"
    description = "sleeping runs, some of which kill their worker"

    def __init__(self, folder: str, n: int = 6, pause: float = 0.2, once: float | None = None,
                 always: float | None = None) -> None:
        self.folder, self.n, self.pause = folder, n, pause
        self.once, self.always = once, always

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("main",)

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return [RunSpec(self.name, part, {"x": float(x)}) for x in range(self.n)]

    def batch_key(self, spec: RunSpec):
        return spec.config["x"]

    def run_batch(self, specs: Sequence[RunSpec], *, device, progress) -> list[RunResult]:
        (x,) = [s.config["x"] for s in specs]
        with open(Path(self.folder) / "attempts", "a") as fh:
            fh.write(f"{x}\n")
        marker = Path(self.folder) / "killed-once"
        if x == self.once and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        if x == self.always:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.pause)
        return [RunResult("ok", {"value": x * x})]


class GpuProbe:
    """Reports, from inside the worker, how much of its ``GPU`` resource is free while the
    batch runs (0 when the batch holds the worker's one GPU). Never touches a device."""

    name = "gpuprobe"
    description = "reads the worker's free GPU resource"

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("main",)

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        return [RunSpec(self.name, part, {"x": float(x)}) for x in range(4)]

    def batch_key(self, spec: RunSpec):
        return spec.config["x"]

    def run_batch(self, specs: Sequence[RunSpec], *, device, progress) -> list[RunResult]:
        free = distributed.get_worker().state.available_resources["GPU"]
        return [RunResult("ok", {"free_gpu": free, "device": str(device)}) for _ in specs]


@pytest.fixture(scope="module")
def cluster():
    """A cluster to join by address: two one-thread worker processes, each offering one
    (pretend) GPU; a batch is given up after two lost workers (allowed-failures 1)."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
        dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        resources={"GPU": 1},
    ) as local:
        yield local


def _ids(records):
    return sorted(r["run_id"] for r in records)


def _strip(records):
    return sorted((r["run_id"], r["status"], r["metrics"], r["message"]) for r in records)


def test_dask_backend_gives_the_local_records(tmp_path, cluster):
    # a cluster started for the run (two processes, batches split in two) ...
    tiny = TinySensing()
    run_sweep(tiny, tmp_path / "local", progress=False)
    report = run_sweep(tiny, tmp_path / "dask", progress=False, workers=2, backend="dask")
    assert report.ran == 9 and report.batches == 2  # the split happened
    assert _strip(read_records_dir(tmp_path / "dask")) == _strip(
        read_records_dir(tmp_path / "local"))
    # ... and a cluster joined by address, with diverged, error and raising batches
    run_sweep(Toy(), tmp_path / "toy-local", scale="quick", progress=False)
    run_sweep(Toy(), tmp_path / "toy-dask", scale="quick", progress=False, backend="dask",
              address=cluster.scheduler_address)
    local, remote = read_records_dir(tmp_path / "toy-local"), read_records_dir(
        tmp_path / "toy-dask")
    assert len(remote) == 8 and _strip(remote) == _strip(local)
    assert {r["status"] for r in remote} == {"ok", "diverged", "error"}


DRIVER = """
import sys
sys.path[:0] = [{here!r}, {tests!r}]
from test_dask_backend import Sleepy
from gaugebook.engine.sweep import run_sweep
run_sweep(Sleepy({folder!r}, n=10, pause=0.4), {out!r}, scale="quick", progress=False,
          backend="dask", address={address!r})
"""


def test_resume_after_the_driver_is_killed(tmp_path, cluster):
    out = tmp_path / "records"
    code = DRIVER.format(here=str(HERE), tests=str(HERE.parent), folder=str(tmp_path),
                         out=str(out), address=cluster.scheduler_address)
    driver = subprocess.Popen([sys.executable, "-c", code])
    part = out / "main.jsonl"
    deadline = time.monotonic() + 45
    try:
        while not (part.exists() and part.read_text().count("\n") >= 2):
            assert driver.poll() is None, "the driver ended before it was killed"
            assert time.monotonic() < deadline, "the driver wrote no records"
            time.sleep(0.02)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the kill may have cut the last line
        before = read_records_dir(out)
    assert 2 <= len(before) < 10 and len(set(_ids(before))) == len(before)

    report = run_sweep(Sleepy(str(tmp_path), n=10, pause=0.4), out, scale="quick",
                       progress=False, backend="dask", address=cluster.scheduler_address)
    assert report.skipped == len(before) and report.ran == 10 - len(before)
    after = read_records_dir(out)
    expected = sorted(s.run_id for s in Sleepy(str(tmp_path), n=10).specs("main", "quick"))
    assert _ids(after) == expected  # every run once: none lost, none duplicated
    assert all(r["status"] == "ok" for r in after)


def test_worker_killed_during_a_batch(tmp_path, cluster):
    sleepy = Sleepy(str(tmp_path), n=6, once=1.0, always=3.0)
    report = run_sweep(sleepy, tmp_path / "records", scale="quick", progress=False,
                       backend="dask", address=cluster.scheduler_address)
    records = read_records_dir(tmp_path / "records")
    assert _ids(records) == sorted(s.run_id for s in sleepy.specs("main", "quick"))
    by_x = {r["config"]["x"]: r for r in records}
    # killed once: run again on a live worker, recorded once with its result
    assert by_x[1.0]["status"] == "ok" and by_x[1.0]["metrics"] == {"value": 1.0}
    # killed at every attempt: given up after allowed-failures, an error record
    assert by_x[3.0]["status"] == "error" and by_x[3.0]["message"].startswith("KilledWorker")
    assert all(by_x[x]["status"] == "ok" for x in (0.0, 2.0, 4.0, 5.0))
    attempts = Counter((tmp_path / "attempts").read_text().split())
    assert attempts["3.0"] == 2  # the first attempt and one retry (allowed-failures 1)
    assert attempts["1.0"] >= 2  # killed, then run again
    assert all(attempts[f"{x:.1f}"] >= 1 for x in range(6)) and set(attempts) <= {
        f"{x:.1f}" for x in range(6)}
    # A batch finished on a worker that dies before the driver gathers its result runs
    # again (the scheduler recomputes lost results): wasted work, never a second record.
    # Each of the three kills can lose at most the results that worker held: one batch.
    assert sum(attempts.values()) - (6 + 1 + 1) <= 3
    assert report.statuses["ok"] == 5 and report.statuses["error"] == 1
    # a rerun retries only the error run
    again = run_sweep(Sleepy(str(tmp_path), n=6), tmp_path / "records", scale="quick",
                      progress=False, backend="dask", address=cluster.scheduler_address)
    assert again.skipped == 5 and again.ran == 1 and again.statuses["ok"] == 1


def test_cuda_batches_ask_for_one_gpu(tmp_path, cluster):
    # the driver needs no GPU to send cuda batches to a cluster; each batch holds one
    report = run_sweep(GpuProbe(), tmp_path, scale="quick", progress=False, device="cuda",
                       backend="dask", address=cluster.scheduler_address)
    records = read_records_dir(tmp_path)
    assert report.ran == 4 and len(records) == 4
    assert all(r["metrics"] == {"free_gpu": 0.0, "device": "cuda"} for r in records)
    assert all(r["device"] == "cuda" for r in records)
    # cpu batches ask for nothing: the worker's GPU stays free
    run_sweep(GpuProbe(), tmp_path / "cpu", scale="quick", progress=False, device="cpu",
              backend="dask", address=cluster.scheduler_address)
    assert all(r["metrics"]["free_gpu"] == 1.0 for r in read_records_dir(tmp_path / "cpu"))


def test_bad_backend_arguments_and_missing_extra(tmp_path, monkeypatch, capsys):
    with pytest.raises(ValueError, match="Invalid backend"):
        run_sweep(Toy(), tmp_path, scale="quick", progress=False, backend="ray")
    with pytest.raises(ValueError, match="Invalid address"):
        run_sweep(Toy(), tmp_path, scale="quick", progress=False, address="tcp://127.0.0.1:1")
    assert commands.main(["run", "matrix_sensing", "--address", "tcp://127.0.0.1:1"]) == 2
    assert "only the dask backend" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    with pytest.raises(ImportError, match=r"the 'cluster' extra .*pip install -e '\.\[cluster\]'"):
        run_sweep(Toy(), tmp_path, scale="quick", progress=False, backend="dask")
    assert not list(tmp_path.glob("*.jsonl"))  # nothing ran, nothing written
