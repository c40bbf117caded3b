"""Where the batches of a sweep run — local processes or a Dask cluster.

:func:`gaugebook.engine.sweep.run_sweep` plans the batches and asks a backend for a
stream of ``(batch, results, wall_time_s)``, one item per batch, in the order they finish.
The driver (the process that called ``run_sweep``) stays the **only writer** of the records:
workers return results, they never touch the record files, so resuming and the
no-duplicate guarantee are the same whatever the backend.

``local``
    The batches run in this process (``workers == 1``) or in ``workers`` worker processes
    (:class:`concurrent.futures.ProcessPoolExecutor`), each with ``threads // workers`` torch
    threads. A process that dies mid-batch turns that batch into ``error`` records.

``dask``
    The batches are tasks of a `Dask distributed <https://distributed.dask.org>`_ cluster
    (``pip install gaugekit[cluster]``): either an existing scheduler joined by ``address``
    (``tcp://host:8786``), or a :class:`distributed.LocalCluster` started for the run with
    ``workers`` worker processes of one thread each (the same torch threads per batch as
    ``local``). A worker lost mid-batch (killed process, preempted node) is noticed by the
    scheduler, which runs the batch again on another worker, up to
    ``distributed.scheduler.allowed-failures`` times (3 by default); a batch that loses one
    worker more becomes ``error`` records carrying the ``KilledWorker`` message, which a rerun
    retries.
    Since only finished batches come back to the driver, a batch is recorded once, never
    twice and never lost. (A batch that finished on a worker lost before the driver
    gathered its result is run again by the scheduler: wasted work, not a second record.)
    The driver keeps only as many batches on the cluster as it runs at
    once (its worker threads, or GPUs for cuda batches, re-read as workers come and go), so a
    lost worker costs only the batch it was running; an adaptive cluster therefore sees
    that many tasks: scale it explicitly (``cluster.scale(n)``). Batches on a CUDA device ask
    for ``resources={"GPU": 1}``: start GPU workers with ``dask worker ADDRESS --nthreads 1
    --resources GPU=1`` (one per GPU, each with its own ``CUDA_VISIBLE_DEVICES``).

Why Dask and not Ray: Dask distributed is pure Python and light (no large binary wheel, no
daemons of its own beyond a scheduler and its workers); it runs on SLURM, PBS, SGE or LSF
through ``dask-jobqueue`` and on Kubernetes through ``dask-kubernetes``; and its worker
resources are the GPU-aware scheduling a sweep needs (one batch per GPU).

Isolation (:func:`run_isolated`): one call in a child process of its own, under a wall-clock
limit. A call that hangs is killed and one that dies is reported, and the caller goes on either
way: the ecosystem audit (:mod:`gaugebook.ecosystem.ecosystem_runs`) runs every foreign optimizer
so.
"""

from __future__ import annotations

import math
import multiprocessing
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from gaugebook.engine.spec import Experiment, RunResult, RunSpec, error_results, execute_batch
from gaugekit._extras import MissingExtra, require_extra

__all__ = ["BACKENDS", "Backend", "DaskBackend", "Isolated", "LocalBackend", "MissingExtra",
           "make_backend", "run_isolated", "start_method"]

#: the backends :func:`make_backend` knows
BACKENDS = ("local", "dask")

Stream = Iterator[tuple[list[RunSpec], list[RunResult], float]]


class Backend(Protocol):
    """What :func:`~gaugebook.engine.sweep.run_sweep` needs from a backend: a context
    manager (it holds processes or a cluster connection) with a parallelism and a stream."""

    name: str

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc: object) -> None: ...

    def slots(self) -> int:
        """How many batches run at once (the sweep cuts batches into that many pieces)."""
        ...

    def stream(self, experiment: Experiment, batches: Sequence[list[RunSpec]],
               device: torch.device, progress: bool) -> Stream:
        """Run every batch once; yield ``(batch, results, wall_time_s)`` as each finishes.
        Never raises for a failed batch: it comes back as error results."""
        ...


class LocalBackend:
    """The batches in this process, or in ``workers`` processes (:func:`start_method`)."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def slots(self) -> int:
        return self.workers

    def stream(self, experiment: Experiment, batches: Sequence[list[RunSpec]],
               device: torch.device, progress: bool) -> Stream:
        if self.workers <= 1:
            for batch in batches:
                yield (batch, *execute_batch(experiment, batch, device, progress))
            return
        threads = max(1, torch.get_num_threads() // self.workers)
        context = multiprocessing.get_context(start_method(device, threads))
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=context) as pool:
            futures = {
                pool.submit(execute_batch, experiment, batch, device, False, threads): batch
                for batch in batches
            }
            for future in as_completed(futures):
                batch = futures[future]
                try:
                    results, wall = future.result()
                except Exception as err:  # noqa: BLE001 - a worker died: record, go on
                    results, wall = error_results(len(batch), err), 0.0
                yield batch, results, wall


def start_method(device: torch.device, threads: int) -> str:
    """How :class:`LocalBackend` starts its workers: ``fork`` on Linux for CPU batches of one
    thread each, in a process that has not initialised CUDA, which spares every worker the
    import of torch and gaugekit (seconds each); ``spawn`` otherwise. A forked child cannot use
    its parent's CUDA context, nor an OpenMP pool of more than one thread that the parent
    already started (PyTorch's ``DataLoader`` workers take the same one-thread rule)."""
    cuda_started = torch.cuda.is_available() and torch.cuda.is_initialized()
    if sys.platform == "linux" and device.type == "cpu" and threads == 1 and not cuda_started:
        return "fork"
    return "spawn"


def _distributed() -> Any:
    require_extra("the dask backend", "cluster", "distributed")
    import distributed

    return distributed


class DaskBackend:
    """The batches as tasks of a Dask cluster: joined at ``address``, else a
    :class:`~distributed.LocalCluster` of ``workers`` one-thread worker processes started
    for the run and closed after it."""

    name = "dask"

    def __init__(self, workers: int = 1, address: str | None = None,
                 device: torch.device | None = None) -> None:
        self.workers = workers
        self.address = address
        self.device = device if device is not None else torch.device("cpu")
        self.client: Any = None
        self._cluster: Any = None
        #: torch threads per batch: like ``local`` on a cluster started here; on a joined
        #: cluster the worker's own setting (``OMP_NUM_THREADS`` / torch's default)
        self.threads: int | None = None

    def __enter__(self) -> DaskBackend:
        distributed = _distributed()
        if self.address is not None:
            self.client = distributed.Client(self.address)
            workers = self._workers() if self.device.type == "cuda" else {}
            if workers and not any(w.get("resources", {}).get("GPU") for w in workers.values()):
                raise ValueError(
                    f"Invalid address: {self.address!r}: no worker of this cluster offers a GPU "
                    "resource, so cuda batches would wait forever; start the workers with "
                    f"`dask worker {self.address} --nthreads 1 --resources GPU=1`"
                )
            return self
        # No memory limit (the local processes have none); the scheduler's HTTP server
        # (metrics, no dashboard) on a free local port.
        self._cluster = distributed.LocalCluster(
            n_workers=self.workers, threads_per_worker=1, processes=True, memory_limit=0,
            dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            resources={"GPU": 1} if self.device.type == "cuda" else None,
        )
        self.client = distributed.Client(self._cluster)
        self.threads = max(1, torch.get_num_threads() // self.workers)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client = self._cluster = None

    def _workers(self) -> dict[str, Any]:
        return self.client.scheduler_info(n_workers=-1).get("workers", {})

    def slots(self) -> int:
        if self.address is None or self.workers > 1:
            return self.workers
        workers = self._workers().values()
        if self.device.type == "cuda":
            count = sum(w.get("resources", {}).get("GPU", 0) for w in workers)
        else:
            count = sum(w.get("nthreads", 1) for w in workers)
        return max(1, int(count))

    def stream(self, experiment: Experiment, batches: Sequence[list[RunSpec]],
               device: torch.device, progress: bool) -> Stream:
        distributed = _distributed()
        resources = {"GPU": 1} if device.type == "cuda" else None
        run = uuid.uuid4().hex[:12]  # fresh keys: a killed driver's tasks never answer this one
        waiting = deque(enumerate(batches))
        running: dict[Any, list[RunSpec]] = {}
        done = distributed.as_completed()

        def submit() -> None:  # only as many batches as the cluster runs (module docstring)
            window = max(1, self.slots())
            while waiting and len(running) < window:
                i, batch = waiting.popleft()
                future = self.client.submit(
                    execute_batch, experiment, batch, device, False, self.threads,
                    key=f"gaugekit-{experiment.name}-{run}-{i}", resources=resources,
                    pure=False)
                running[future] = batch
                done.add(future)

        submit()
        try:
            for future in done:
                batch = running.pop(future)
                try:
                    results, wall = future.result()
                except Exception as err:  # noqa: BLE001 - KilledWorker, cancelled: record, go on
                    results, wall = error_results(len(batch), err), 0.0
                future.release()
                submit()  # keep the cluster busy while this process writes the records
                yield batch, results, wall
        finally:
            if running:  # the driver stopped early: do not leave its batches on the cluster
                self.client.cancel(list(running))


def make_backend(name: str, *, workers: int = 1, address: str | None = None,
                 device: torch.device | None = None) -> Backend:
    """The backend ``name`` (one of :data:`BACKENDS`); ``address`` joins a running Dask
    scheduler and is only meaningful for ``dask``."""
    if name not in BACKENDS:
        raise ValueError(f"Invalid backend: {name!r}; expected one of {BACKENDS}")
    if address is not None and name != "dask":
        raise ValueError(f"Invalid address: {address!r}; only the dask backend joins a cluster "
                         "(pass backend='dask')")
    if name == "local":
        return LocalBackend(workers)
    return DaskBackend(workers, address, device)


@dataclass(frozen=True)
class Isolated:
    """What :func:`run_isolated` returns: ``status`` ``"ok"`` (``value`` is the child's return
    value), ``"raised"`` (``message`` holds the exception), ``"timeout"`` or ``"crashed"``."""

    status: str
    value: Any = None
    message: str | None = None
    seconds: float = 0.0


def _child(conn: Any, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    torch.set_num_threads(1)
    try:
        value = target(*args)
        conn.send(("ok", value))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("raised", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_isolated(target: Callable[..., Any], args: tuple[Any, ...], timeout_s: float,
                 preload: Sequence[str] = ()) -> Isolated:
    """Call ``target`` (a module-level function: the child imports it by its name) with
    ``args`` in a fresh child process.

    The child is forked from a ``forkserver`` that has imported ``preload``; it is killed after
    ``timeout_s`` seconds. A child that exits without a result (a segfault, ``os._exit``) is
    ``crashed`` with its exit code. Never raises for anything the child does.
    """
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"Invalid timeout_s: {timeout_s!r}; expected a finite float > 0")
    ctx = multiprocessing.get_context("forkserver")
    # effective when this call starts the forkserver (later preload lists are ignored)
    ctx.set_forkserver_preload(list(preload))
    parent, child = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    proc = ctx.Process(target=_child, args=(child, target, args), daemon=True)
    proc.start()
    child.close()
    result: tuple[str, Any] | None = None
    try:
        if parent.poll(timeout_s):
            result = parent.recv()
    except (EOFError, OSError):  # the child closed the pipe without a result: it died
        result = None
    if result is None:
        # a dead child is reaped at once; a live one had its whole limit and is killed
        proc.join(max(0.5, timeout_s - (time.perf_counter() - t0)))
        seconds = time.perf_counter() - t0
        if proc.is_alive():
            proc.kill()
            proc.join(5)
            return Isolated("timeout", message=f"timed out after {timeout_s:g} s",
                            seconds=seconds)
        code = proc.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return Isolated("crashed", message=f"crashed ({how})", seconds=seconds)
    seconds = time.perf_counter() - t0
    proc.join(5)
    if proc.is_alive():
        proc.kill()
    status, value = result
    if status == "raised":
        return Isolated("raised", message=str(value), seconds=seconds)
    return Isolated("ok", value=value, seconds=seconds)
