r"""The results of the twin audit: checkpoints, traces, and the verdict in words.

The drift of a twin is the largest ``rel(M_h, M_h')`` over its heads and checkpoints; the
verdict is the factor audit's rule (:func:`~gaugekit.audit.factor_results.decide_verdict`)
with the round-off threshold :func:`verdict_threshold` (see :mod:`gaugekit.audit.heads`).
"""

# Developer note (layers, gaugekit/__init__.py): floor 4, audit/, on optim/ and gauge.

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from gaugekit.audit.factors import (
    FLOAT64_THRESHOLD,
    GaugeVerdict,
    decide_verdict,
    default_threshold,
)
from gaugekit.audit.sites import QKSite

__all__ = ["TwinAuditResult", "TwinCheckpoint", "TwinTrace", "verdict_threshold"]


def verdict_threshold(dtype: torch.dtype) -> float:
    """The largest gauge drift that is round-off: the factor audit's threshold for float64
    (1e-8) and float32 (1e-3), ``√ε`` for other dtypes (bfloat16: 0.088)."""
    if dtype in (torch.float64, torch.float32):
        return default_threshold(dtype)
    return math.sqrt(torch.finfo(dtype).eps)



@dataclass(frozen=True)
class TwinCheckpoint:
    """Drift of one twin from the original after ``step`` optimizer steps.

    ``head_drift[i][h]`` is ``rel(M_h, M_h')`` of head ``h`` of site ``i``; ``output_drift`` is
    ``rel`` of the outputs on the probe batch.
    """

    step: int
    head_drift: tuple[tuple[float, ...], ...]
    output_drift: float

    @property
    def mean_head_drift(self) -> float:
        """Mean of ``rel(M_h, M_h')`` over all heads of all sites."""
        flat = [d for site in self.head_drift for d in site]
        return sum(flat) / len(flat)

    @property
    def max_head_drift(self) -> float:
        """Largest ``rel(M_h, M_h')`` over all heads of all sites."""
        return max(d for site in self.head_drift for d in site)


@dataclass(frozen=True)
class TwinTrace:
    """One twin's run: its checkpoints and its training loss at every step."""

    kind: str
    checkpoints: tuple[TwinCheckpoint, ...]
    losses: tuple[float, ...]
    init_output_drift: float

    @property
    def final(self) -> TwinCheckpoint:
        """The last checkpoint."""
        return self.checkpoints[-1]

    @property
    def max_drift(self) -> float:
        """Largest ``rel(M_h, M_h')`` over all heads and checkpoints: the drift a verdict reads."""
        return max(c.max_head_drift for c in self.checkpoints)

    def steps(self) -> list[int]:
        """Checkpoint steps (for plotting)."""
        return [c.step for c in self.checkpoints]

    def mean_head_drifts(self) -> list[float]:
        """Mean per-head drift at each checkpoint."""
        return [c.mean_head_drift for c in self.checkpoints]

    def output_drifts(self) -> list[float]:
        """Output drift at each checkpoint."""
        return [c.output_drift for c in self.checkpoints]


INVARIANT_DOC = (
    "M_h = [W_Q,h | b_Q,h]^T [W_K,h | b_K,h] per head (bias columns only where biases exist; "
    "= W_Q,h^T W_K,h without biases); rel(A,B) = ||A-B||_F / (0.5(||A||_F+||B||_F))"
)


@dataclass(frozen=True)
class TwinAuditResult:
    """Outcome of :func:`audit_twins`.

    Attributes:
        sites: the audited attention sites.
        optimizer: the optimizer's label.
        steps: optimizer steps taken (fewer than asked when ``diverged``).
        dtype: the model's parameter dtype.
        traces: one :class:`TwinTrace` per twin kind, in the order asked.
        base_losses: the original's training loss at every step.
        diverged: a training loss was not finite; training stopped there.
        invariant: which invariant ``head_drift`` compares.
        optimizer_class: dotted path of the optimizer's class (``torch.optim.Adam``).
        hyperparameters: the values it was built with
            (:func:`gaugekit.audit.factor_results.optimizer_hyperparameters`).
        threshold: the round-off threshold of the verdict (:func:`verdict_threshold`).
    """

    sites: tuple[QKSite, ...]
    optimizer: str
    steps: int
    dtype: str
    traces: tuple[TwinTrace, ...]
    base_losses: tuple[float, ...]
    diverged: bool = False
    invariant: str = field(default=INVARIANT_DOC)
    optimizer_class: str = ""
    hyperparameters: dict[str, Any] = field(default_factory=dict, hash=False)
    threshold: float = FLOAT64_THRESHOLD

    def trace(self, kind: str) -> TwinTrace:
        """The trace of twin ``kind``."""
        for t in self.traces:
            if t.kind == kind:
                return t
        raise ValueError(
            f"Invalid kind: {kind!r}; expected one of {[t.kind for t in self.traces]}"
        )

    def to_records(self) -> list[dict[str, Any]]:
        """Long format, one row per (twin, checkpoint, site, head), for pandas or JSONL."""
        rows = []
        for t in self.traces:
            for c in t.checkpoints:
                for site, drifts in zip(self.sites, c.head_drift, strict=True):
                    for h, d in enumerate(drifts):
                        rows.append({
                            "twin": t.kind, "step": c.step, "site": site.label, "head": h,
                            "head_drift": d, "output_drift": c.output_drift,
                            "optimizer": self.optimizer,
                        })
        return rows

    def table(self) -> str:
        """Plain-text table: per twin and checkpoint, mean/max head drift and output drift."""
        lines = [f"{'twin':<9} {'step':>6} {'mean rel(M_h)':>14} {'max rel(M_h)':>13} "
                 f"{'rel(output)':>12}"]
        for t in self.traces:
            for c in t.checkpoints:
                lines.append(
                    f"{t.kind:<9} {c.step:>6} {c.mean_head_drift:>14.3e} "
                    f"{c.max_head_drift:>13.3e} {c.output_drift:>12.3e}"
                )
        return "\n".join(lines)

    @property
    def verdict(self) -> GaugeVerdict | None:
        """Keeps / breaks / chaotic from the gauge and noise twins' drifts (module doc);
        ``None`` when no gauge twin was trained."""
        kinds = {t.kind: t for t in self.traces}
        if "gauge" not in kinds:
            return None
        noise = kinds["noise"].max_drift if "noise" in kinds else None
        why = "training diverged (a loss was not finite)" if self.diverged else ""
        return decide_verdict(kinds["gauge"].max_drift, noise, self.threshold, unjudged=why)

    def verdict_line(self) -> str:
        """One plain line: the optimizer as built, its verdict, the numbers and the rule."""
        verdict = self.verdict
        if verdict is None:
            return f"{self.optimizer}: no gauge twin was trained, so there is no verdict"
        return verdict.line(self.optimizer)

    def summary(self) -> str:
        """A few readable lines: what was audited, where each twin ended, and the verdict."""
        return "\n".join([*self._head_lines(), self.verdict_line()])

    def _head_lines(self) -> list[str]:
        heads = sum(s.num_heads for s in self.sites)
        lines = [
            f"Twin audit: {self.optimizer}, {self.steps} steps, {self.dtype}, "
            f"{len(self.sites)} site(s), {heads} heads.",
            f"Invariant: {self.invariant}.",
        ]
        if self.diverged:
            lines.append("DIVERGED: a training loss was not finite; drifts are not a result.")
        nan = float("nan")
        base_loss = self.base_losses[-1] if self.base_losses else nan
        for t in self.traces:
            f = t.final
            loss = t.losses[-1] if t.losses else nan
            lines.append(
                f"  {t.kind:<8}: at init rel(output) = {t.init_output_drift:.2e}; after step "
                f"{f.step}: mean rel(M_h) = {f.mean_head_drift:.3e}, "
                f"max {f.max_head_drift:.3e}, rel(output) = {f.output_drift:.3e}; "
                f"loss {loss:.4g} (original {base_loss:.4g})"
            )
        return lines

    def __str__(self) -> str:
        return "\n".join([*self._head_lines(), self.table(), self.verdict_line()])
