"""One call in a child process of its own, under a wall-clock limit (:func:`run_isolated`).

A call that hangs is killed and one that dies is reported, and the caller goes on either way:
the ecosystem audit (:mod:`gaugekit.experiments.ecosystem`) runs every foreign optimizer so.
"""

# Developer note (layers, gaugekit/__init__.py): floor 6, runs/, on config.

from __future__ import annotations

import importlib
import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Isolated", "run_isolated"]


@dataclass(frozen=True)
class Isolated:
    """What :func:`run_isolated` returns: ``status`` ``"ok"`` (``value`` is the child's return
    value), ``"raised"`` (``message`` holds the exception), ``"timeout"`` or ``"crashed"``."""

    status: str
    value: Any = None
    message: str | None = None
    seconds: float = 0.0


def _child(conn: Any, target: str, args: tuple[Any, ...]) -> None:
    torch.set_num_threads(1)
    try:
        module, attr = target.split(":")
        value = getattr(importlib.import_module(module), attr)(*args)
        conn.send(("ok", value))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("raised", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_isolated(target: str, args: tuple[Any, ...], timeout_s: float,
                 preload: Sequence[str] = ()) -> Isolated:
    """Call ``target`` (``"module:function"``) with ``args`` in a fresh child process.

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
