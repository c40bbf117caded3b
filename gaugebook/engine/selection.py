r"""Hyperparameter selection protocols, as functions over run records.

A *protocol* picks, for each group of runs (say, one optimizer), one value of a knob (say,
``lr``) from the records of all seeds at every value tried:

1. a candidate (one knob value) is *selectable* only when every one of its runs has status
   ``ok`` (one diverged or failed seed removes it, as a NaN mean does in the paper);
2. among selectable candidates, those that pass the *gate* (by default: every seed
   interpolated, i.e. its worst seed's training loss fell below the tolerance) win over those
   that do not;
3. within the winning set the lowest *score* wins (ties: the smaller knob value); when no
   candidate passes the gate, the lowest *fallback* score wins and the selection says so.

Three protocols by score:

``ORACLE``      the paper's Table 2 rule: score = mean recovery error ``rec``. It reads the
                ground truth ``X_star``, so it is an oracle; it is what the paper published.
``VALIDATION``  honest: score = mean ``val_rec``, the relative residual on held-out
                measurements of the same ``X_star`` (no ground truth needed).
``TRAIN_SPEED`` train-only: score = mean number of steps to interpolate (the loss alone).

The paper's gate is not one rule: it differs from script to script (arXiv 2608.05136 and its
repository ``idevender/loss-basis-adam``), and so do the oracle's variants here:

``ORACLE``        every seed interpolated (the worst seed's training loss below the run's
                  tolerance, 1e-7 at paper scale): Table 2's zoo
                  (``experiments/optimizer_zoo_bias.py``, ``best``: ``max(train) < TRAIN_TOL``).
``ORACLE_MEAN``   the *mean* training loss over seeds below the run's tolerance: the paper's
                  newer zoo controls (``zoo_init_scale.py``, ``zoo_size_check.py``,
                  ``zoo_decay_control.py`` and the newest ``flowadam_upgrade.py``:
                  ``mean(train) < TRAIN_TOL``).
``ORACLE_LOOSE``  the mean training loss below :data:`LOOSE_BAR` = 1e-4 ("loose"): the CPU
                  dial (``precond_dial_scalar_check.py``), the restoration and balance probes,
                  the phase diagram (``muon_phase_diagram.py``) and every table of the GPU
                  runs (``experiments/nibi/collect.py`` and ``common.select_lr``: the mean over
                  the selection seeds 42, 123, 456; where more seeds ran, the table's mean is
                  then over all of them at the chosen lr).

In every script of the paper a candidate with a non-finite mean (a diverged seed) is skipped,
and a candidate that fails the gate scores ``rec + 10 + mean(train)``: below any gated one, and
among themselves in the order of this module's fallback ``rec + mean(train)``.

Each :class:`Selection` also reports whether the chosen value sits at an edge of the grid that
was tried: a selection at an edge says the grid did not bracket the optimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOOSE_BAR",
    "ORACLE",
    "ORACLE_LOOSE",
    "ORACLE_MEAN",
    "PROTOCOLS",
    "TRAIN_SPEED",
    "VALIDATION",
    "Protocol",
    "Selection",
    "get_path",
    "mean_metric",
    "select",
]

Record = Mapping[str, Any]


def get_path(record: Record, path: str, default: Any = None) -> Any:
    """``record["a"]["b"]`` for ``path = "a.b"``; ``default`` when a key is missing."""
    value: Any = record
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return default
        value = value[key]
    return value


def mean_metric(runs: Sequence[Record], name: str) -> float:
    """Mean of ``metrics[name]`` over ``runs``; NaN if any run lacks a finite value."""
    values = [get_path(r, f"metrics.{name}") for r in runs]
    if not values or any(v is None or not math.isfinite(float(v)) for v in values):
        return math.nan
    return sum(float(v) for v in values) / len(values)


#: The paper's "loose" interpolation bar: the mean training loss over seeds below 1e-4.
LOOSE_BAR = 1e-4


def _all_interpolated(runs: Sequence[Record]) -> bool:
    return all(bool(get_path(r, "metrics.interpolated", False)) for r in runs)


def _mean_train_below_tol(runs: Sequence[Record]) -> bool:
    """Mean training loss below the smallest tolerance of the runs' budgets."""
    tols = [get_path(r, "config.budget.tol") for r in runs]
    if not runs or any(t is None for t in tols):
        return False
    loss = mean_metric(runs, "train_loss")
    return math.isfinite(loss) and loss < min(float(t) for t in tols)


def _mean_train_below_loose_bar(runs: Sequence[Record]) -> bool:
    loss = mean_metric(runs, "train_loss")
    return math.isfinite(loss) and loss < LOOSE_BAR


@dataclass(frozen=True)
class Protocol:
    """A selection rule: ``gate(runs) → bool``, ``score(runs)`` and ``fallback(runs)`` (lower
    is better) over the runs of one candidate; ``gate_text`` says the gate in words (for a
    table's caption)."""

    name: str
    description: str
    score: Callable[[Sequence[Record]], float]
    fallback: Callable[[Sequence[Record]], float]
    gate: Callable[[Sequence[Record]], bool] = _all_interpolated
    gate_text: str = "every seed's training loss below the tolerance"


ORACLE = Protocol(
    "oracle",
    "lowest mean rec among lrs whose worst seed interpolated (the paper's Table 2 rule)",
    score=lambda runs: mean_metric(runs, "rec"),
    fallback=lambda runs: mean_metric(runs, "rec") + mean_metric(runs, "train_loss"),
)

VALIDATION = Protocol(
    "validation",
    "lowest mean held-out residual val_rec among lrs whose worst seed interpolated",
    score=lambda runs: mean_metric(runs, "val_rec"),
    fallback=lambda runs: mean_metric(runs, "val_rec") + mean_metric(runs, "train_loss"),
)

TRAIN_SPEED = Protocol(
    "train_speed",
    "fewest mean steps to interpolation among lrs whose worst seed interpolated",
    score=lambda runs: mean_metric(runs, "steps"),
    fallback=lambda runs: mean_metric(runs, "train_loss"),
)

ORACLE_MEAN = Protocol(
    "oracle_mean",
    "lowest mean rec among lrs whose mean train loss is below the tolerance (the paper's newer "
    "zoo controls)",
    score=lambda runs: mean_metric(runs, "rec"),
    fallback=lambda runs: mean_metric(runs, "rec") + mean_metric(runs, "train_loss"),
    gate=_mean_train_below_tol,
    gate_text="mean training loss over seeds below the tolerance",
)

ORACLE_LOOSE = Protocol(
    "oracle_loose",
    "lowest mean rec among lrs whose mean train loss is below 1e-4 (the paper's phase diagram, "
    "CPU dial, probes and GPU tables)",
    score=lambda runs: mean_metric(runs, "rec"),
    fallback=lambda runs: mean_metric(runs, "rec") + mean_metric(runs, "train_loss"),
    gate=_mean_train_below_loose_bar,
    gate_text=f"mean training loss over seeds below {LOOSE_BAR:g}",
)

PROTOCOLS: dict[str, Protocol] = {
    p.name: p for p in (ORACLE, VALIDATION, TRAIN_SPEED, ORACLE_MEAN, ORACLE_LOOSE)}


@dataclass(frozen=True)
class Selection:
    """The outcome of a protocol for one group.

    ``value`` is the chosen knob value (``None`` when no candidate was selectable), ``runs``
    its records, ``score`` its score, ``gated`` whether it passed the gate, ``grid`` every knob
    value tried (sorted) and ``at_grid_edge`` whether ``value`` is the smallest or largest of
    them. ``candidates`` maps each knob value to ``(selectable, gated, score)``.
    """

    group: Hashable
    value: Any
    runs: tuple[Record, ...]
    score: float
    gated: bool
    grid: tuple[Any, ...]
    at_grid_edge: bool
    candidates: Mapping[Any, tuple[bool, bool, float]]

    def mean(self, metric: str) -> float:
        """Mean of ``metrics[metric]`` over the chosen runs (NaN when none)."""
        return mean_metric(self.runs, metric) if self.runs else math.nan


def select(
    records: Iterable[Record],
    protocol: Protocol,
    *,
    group_by: str | Sequence[str] = "config.method",
    knob: str | Sequence[str] = "config.hparams.lr",
) -> dict[Hashable, Selection]:
    """Apply ``protocol`` to ``records`` grouped by ``group_by`` (dotted paths), choosing ``knob``
    (one dotted path, or several: the knob value is then the tuple, e.g. ``(lr, weight decay)``).

    Returns ``group → Selection`` in the order groups first appear. A single ``group_by`` path
    gives plain group keys; several give tuples.
    """
    paths = [group_by] if isinstance(group_by, str) else list(group_by)
    grouped: dict[Hashable, dict[Any, list[Record]]] = {}
    for record in records:
        key_parts = tuple(get_path(record, p) for p in paths)
        key = key_parts[0] if len(paths) == 1 else key_parts
        value = (get_path(record, knob) if isinstance(knob, str)
                 else tuple(get_path(record, k) for k in knob))
        grouped.setdefault(key, {}).setdefault(value, []).append(record)

    out: dict[Hashable, Selection] = {}
    for key, by_value in grouped.items():
        grid = tuple(sorted(by_value))
        candidates: dict[Any, tuple[bool, bool, float]] = {}
        best: tuple[int, float, Any] | None = None
        for value in grid:
            runs = by_value[value]
            if not all(r.get("status") == "ok" for r in runs):
                candidates[value] = (False, False, math.nan)
                continue
            gated = protocol.gate(runs)
            score = protocol.score(runs) if gated else protocol.fallback(runs)
            candidates[value] = (True, gated, score)
            if math.isnan(score):
                continue
            rank = (0 if gated else 1, score)
            if best is None or rank < best[:2]:
                best = (*rank, value)
        if best is None:
            out[key] = Selection(key, None, (), math.nan, False, grid, False, candidates)
            continue
        value = best[2]
        out[key] = Selection(
            key,
            value,
            tuple(by_value[value]),
            best[1],
            best[0] == 0,
            grid,
            value in (grid[0], grid[-1]),
            candidates,
        )
    return out
