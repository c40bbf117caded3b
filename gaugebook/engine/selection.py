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

Two more protocols are built for their experiment, on the same :func:`select`:

``matched_loss(seeds, thresholds, rule)``  the paper's train-only rule of Table 5
    (``experiments/nibi/collect.py``). A matched-loss run (the factor trainer with
    ``budget["record_at"]``) keeps in ``metrics["at_loss"]`` one entry per level ``ℓ`` its
    pre-update training loss fell below; levels are crossed in order. A rate is a candidate
    when its runs cover every selection seed and all reached the first level; the rate whose
    runs all reached the most levels wins, ties go to the fewest mean steps to the deepest of
    them, then to the smaller rate (the score is the pair). Nothing held out enters it. Under
    ``rule="ours"`` only a run that finished ``ok`` counts; under ``rule="paper"`` (the
    paper's script) every crossing counts, also those of a run whose loss later blew up.
``lowest_mean(metric)``  the lowest mean ``metric`` over the seeds, a non-finite value counting
    as ``+∞`` and every rate a candidate (the language model's final validation loss).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOOSE_BAR",
    "MATCHED_LOSS_LEVELS",
    "ORACLE",
    "ORACLE_LOOSE",
    "ORACLE_MEAN",
    "PROTOCOLS",
    "TRAIN_SPEED",
    "VALIDATION",
    "Protocol",
    "Selection",
    "at_level",
    "deepest_level",
    "get_path",
    "lowest_mean",
    "matched_loss",
    "mean_metric",
    "select",
    "select_rate",
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


def _all_ok(runs: Sequence[Record]) -> bool:
    return all(r.get("status") == "ok" for r in runs)


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


Score = float | tuple[float, ...]


@dataclass(frozen=True)
class Protocol:
    """A selection rule over the runs of one candidate: ``eligible(runs)`` (default: every run
    finished ``ok``), ``gate(runs) → bool``, ``score(runs)`` and ``fallback(runs)`` (lower is
    better; a tuple compares in order); ``gate_text`` says the gate in words (for a table's
    caption)."""

    name: str
    description: str
    score: Callable[[Sequence[Record]], Score]
    fallback: Callable[[Sequence[Record]], Score]
    gate: Callable[[Sequence[Record]], bool] = _all_interpolated
    gate_text: str = "every seed's training loss below the tolerance"
    eligible: Callable[[Sequence[Record]], bool] = _all_ok


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
    score: Score
    gated: bool
    grid: tuple[Any, ...]
    at_grid_edge: bool
    candidates: Mapping[Any, tuple[bool, bool, Score]]

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
        candidates: dict[Any, tuple[bool, bool, Score]] = {}
        best: tuple[int, Score, Any] | None = None
        for value in grid:
            runs = by_value[value]
            if not protocol.eligible(runs):
                candidates[value] = (False, False, math.nan)
                continue
            gated = protocol.gate(runs)
            score = protocol.score(runs) if gated else protocol.fallback(runs)
            candidates[value] = (True, gated, score)
            if any(math.isnan(x) for x in (score if isinstance(score, tuple) else (score,))):
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


# --------------------------------------------------------------------------------------------
# the protocols built for one experiment: matched loss (Table 5), lowest mean (the LM)
# --------------------------------------------------------------------------------------------

#: The paper's matched-loss levels of the training MSE (descending).
MATCHED_LOSS_LEVELS: tuple[float, ...] = (3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)
RULES: tuple[str, ...] = ("ours", "paper")


def at_level(record: Record, threshold: float, rule: str = "ours") -> dict[str, Any] | None:
    """The ``at_loss`` entry of ``record`` for ``threshold`` (``None``: not reached; under
    ``rule="ours"`` also when the run did not finish ``ok``)."""
    if rule not in RULES:
        raise ValueError(f"Invalid rule: {rule!r}; expected one of {RULES}")
    if rule == "ours" and record.get("status") != "ok":
        return None
    if record.get("status") == "error":
        return None
    for entry in (record.get("metrics") or {}).get("at_loss") or []:
        if entry["threshold"] == threshold:
            return dict(entry)
    return None


def deepest_level(record: Record, thresholds: Sequence[float], rule: str = "ours") -> int:
    """Index of the deepest threshold ``record`` reached (-1: none)."""
    return max((i for i, t in enumerate(thresholds) if at_level(record, t, rule) is not None),
               default=-1)


def matched_loss(seeds: Sequence[int], thresholds: Sequence[float] = MATCHED_LOSS_LEVELS,
                 rule: str = "ours") -> Protocol:
    """The paper's train-only rule at matched loss (module docstring) for runs on ``seeds``:
    score ``(−level, mean steps to it)``, where ``level`` is the deepest threshold every run
    reached."""
    if rule not in RULES:
        raise ValueError(f"Invalid rule: {rule!r}; expected one of {RULES}")

    def level(runs: Sequence[Record]) -> int:
        return min(deepest_level(r, thresholds, rule) for r in runs)

    def eligible(runs: Sequence[Record]) -> bool:
        return (len({get_path(r, "config.seed") for r in runs}) >= len(set(seeds))
                and (rule != "ours" or _all_ok(runs)) and level(runs) >= 0)

    def score(runs: Sequence[Record]) -> tuple[float, float]:
        deepest = level(runs)
        steps = statistics.fmean(at_level(r, thresholds[deepest], rule)["step"] for r in runs)
        return (-deepest, steps)

    return Protocol("matched_loss", "the rate whose every selection seed reached the most "
                    "matched-loss levels, then the fewest mean steps to the deepest",
                    score=score, fallback=score, gate=lambda runs: True,
                    gate_text="every selection seed reached the level", eligible=eligible)


def _mean_or_inf(runs: Sequence[Record], metric: str) -> float:
    values = [get_path(r, f"metrics.{metric}") for r in runs]
    values = [float(v) if v is not None and math.isfinite(float(v)) else math.inf
              for v in values]
    return sum(values) / len(values)


def lowest_mean(metric: str) -> Protocol:
    """The lowest mean ``metrics[metric]`` over the seeds, every rate a candidate, a missing
    or non-finite value counting as ``+∞`` (ties: the smaller rate)."""
    return Protocol(f"lowest_mean_{metric}", f"lowest mean {metric} over the seeds",
                    score=lambda runs: _mean_or_inf(runs, metric),
                    fallback=lambda runs: _mean_or_inf(runs, metric), gate=lambda runs: True,
                    gate_text="none", eligible=lambda runs: True)


def select_rate(
    grid: Sequence[float], final_val_loss: Mapping[float, Sequence[float]]
) -> dict[str, Any]:
    """The rate of ``grid`` with the lowest mean final validation loss over the selection
    seeds (a non-finite loss counts as ``+∞``; :func:`select` under :func:`lowest_mean`, the
    rule of the language model and of the LoRA fine-tuning), the per-rate means, and whether the
    choice is at an edge of the grid (then a wider grid might choose otherwise)."""
    runs = [{"config": {"method": "lm", "hparams": {"lr": lr}}, "metrics": {"val_loss": x}}
            for lr in grid for x in final_val_loss[lr]]
    chosen = select(runs, lowest_mean("val_loss"))["lm"]
    means = {lr: chosen.candidates[lr][2] for lr in grid}
    best = chosen.value
    return {"lr": best, "mean_val_loss": {str(k): v for k, v in means.items()},
            "at_edge": list(grid).index(best) in (0, len(grid) - 1) and len(grid) > 1,
            "all_diverged": not math.isfinite(means[best])}
