r"""Small statistics of records for the pages: mean ± sd over seeds, a curve read between its
checkpoints, and the one rule that decides every comparative word of the book.

**The rule.** Two sets of runs (two optimizers, a model and its twins, two timings of the same
work) are compared by :func:`compare_runs`: the difference of their means ``a − b``, its 95 %
interval by Student's t (Welch's, which does not assume equal spreads), Welch's p, and, where
the runs pair by seed (both given as ``{seed: value}`` with the same seeds), the paired
interval and p. A page says "ahead", "behind", "lower", "faster", … only when the interval
excludes zero, and both intervals do where the runs pair; otherwise it says "level within the
seeds' spread" and prints the numbers (:meth:`Comparison.words`). Ratios of timings go through
:func:`compare_ratio` (the same rule on the logarithms, over at least three re-timings), and a
number is printed to no more digits than its spread supports (:func:`fmt_spread`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import special

__all__ = ["LEVEL", "Comparison", "RatioComparison", "compare_ratio", "compare_runs",
           "compare_seeds", "comparison_text", "comparison_texts", "curve_at",
           "fmt_lower_bound", "fmt_spread", "mean_sd", "says"]

#: The words of a comparison whose interval contains zero.
LEVEL = "level within the seeds' spread"
#: At least this many re-timings of the same work stand behind a comparison of timings.
MIN_TIMINGS = 3

Runs = Sequence[float] | Mapping[Any, float]


def mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the finite values (``None`` when there are none;
    the sd is ``None`` for one value)."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def curve_at(curves: Mapping[str, Sequence[Any]], key: str, step: float) -> float | None:
    """``curves[key]`` at ``step``, linear between checkpoints (``None`` past the last)."""
    xs, ys = curves["step"], curves[key]
    if step > xs[-1] or step < xs[0]:
        return None
    for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False):
        if x0 <= step <= x1:
            if y0 is None or y1 is None:
                return None
            w = 0.0 if x1 == x0 else (step - x0) / (x1 - x0)
            return (1 - w) * y0 + w * y1
    return ys[-1]


def _t_quantile(confidence: float, df: float) -> float:
    """The two-sided critical value of Student's t with ``df`` degrees of freedom."""
    return float(special.stdtrit(df, 0.5 + confidence / 2))


def _two_sided_p(t: float, df: float) -> float:
    return float(2 * special.stdtr(df, -abs(t)))


def _interval(diff: float, se: float, df: float, confidence: float
              ) -> tuple[float, float, float]:
    """``(low, high, p)`` of a t statistic ``diff / se`` on ``df`` degrees of freedom; a zero
    ``se`` gives the point ``diff`` (p 0, or 1 when ``diff`` is 0 too)."""
    if se == 0:
        return diff, diff, 1.0 if diff == 0 else 0.0
    half = _t_quantile(confidence, df) * se
    return diff - half, diff + half, _two_sided_p(diff / se, df)


def _values(runs: Runs, side: str) -> list[float]:
    xs = [float(x) for x in (runs.values() if isinstance(runs, Mapping) else runs)]
    if not xs:
        raise ValueError(f"Invalid {side}: no runs; expected at least one value")
    bad = [x for x in xs if not math.isfinite(x)]
    if bad:
        raise ValueError(f"Invalid {side}: non-finite values {bad}; a diverged or collapsed run "
                         "is flagged by its caller, not compared")
    return xs


@dataclass(frozen=True)
class Comparison:
    r"""``a − b`` over two sets of runs (see :func:`compare_runs`).

    ``low``/``high`` bound Welch's interval of the difference of the means (the one-sample
    interval when ``b`` is a number, ``n_b = 1``), ``welch_p`` is its two-sided p; ``paired_*``
    are the same over the differences of the runs that share a seed
    (``paired_n = 0`` when the runs do not pair). An interval is infinite when a side has a
    single run."""

    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    diff: float
    low: float
    high: float
    welch_p: float
    confidence: float = 0.95
    paired_n: int = 0
    paired_low: float | None = None
    paired_high: float | None = None
    paired_p: float | None = None

    @property
    def sign(self) -> int:
        """``+1`` when ``a`` is resolved above ``b`` (every interval above zero), ``-1`` when
        below, ``0`` when an interval contains zero: the one rule of the book's words."""
        intervals = [(self.low, self.high)]
        if self.paired_n:
            intervals.append((self.paired_low, self.paired_high))
        if all(lo > 0 for lo, _ in intervals):
            return 1
        if all(hi < 0 for _, hi in intervals):
            return -1
        return 0

    @property
    def resolved(self) -> bool:
        """Whether the runs tell ``a`` from ``b`` (:attr:`sign` is not 0)."""
        return self.sign != 0

    def words(self, lower: str, higher: str, level: str = LEVEL) -> str:
        """``lower`` when ``a`` is resolved below ``b``, ``higher`` when above, else ``level``:
        for a loss, ``words("ahead", "behind")`` says where ``a`` stands against ``b``."""
        return {-1: lower, 1: higher, 0: level}[self.sign]

    def says(self, word: str, lower: str, higher: str, level: str = LEVEL) -> bool:
        """Whether :meth:`words` gives ``word``: the form a page's hidden check takes."""
        return self.words(lower, higher, level) == word

    @property
    def half_width(self) -> float:
        """Half the width of Welch's interval: the spread the difference is printed to."""
        return (self.high - self.low) / 2

    def text(self, spec: str | None = None) -> str:
        """The numbers behind the words, ``-0.036 (95 % CI -0.071 to -0.001; Welch p = 0.045;
        paired p = 0.16)``, the difference printed to the digits its interval supports
        (``spec`` overrides)."""
        def num(x: float) -> str:
            if spec is not None:
                return format(x, spec)
            return fmt_spread(x, self.half_width, signed=True)

        pct = f"{100 * self.confidence:g} %"
        out = f"{num(self.diff)} ({pct} CI {num(self.low)} to {num(self.high)}; " \
              f"Welch p = {self.welch_p:.2g}"
        if self.paired_n:
            out += f"; paired p = {self.paired_p:.2g}"
        return out + ")"


def compare_runs(a: Runs, b: Runs | float, *, confidence: float = 0.95) -> Comparison:
    r"""Compare two sets of runs: the difference of their means ``ā − b̄``, Welch's interval
    ``(ā − b̄) ± t_{ν, (1+c)/2} · s``, ``s² = s_a²/n_a + s_b²/n_b``, on Welch–Satterthwaite's
    ``ν = s⁴ / ((s_a²/n_a)²/(n_a − 1) + (s_b²/n_b)²/(n_b − 1))`` degrees of freedom, and its
    two-sided p. When both ``a`` and ``b`` are mappings ``{seed: value}`` sharing at least two
    seeds, the runs pair: the interval and p of the mean difference ``d̄ ± t_{n−1} · s_d/√n``
    over the shared seeds come with them, and :attr:`Comparison.sign` asks both intervals to
    exclude zero. A number ``b`` (a value without spread, such as the loss before training) gives
    the one-sample interval ``ā − b ± t_{n_a−1} · s_a/√n_a``. Non-finite values are refused (a
    diverged run is reported, not averaged)."""
    if not 0 < confidence < 1:
        raise ValueError(f"Invalid confidence: {confidence!r}; expected a number in (0, 1)")
    if isinstance(b, int | float):
        xa = _values(a, "a")
        if not math.isfinite(b):
            raise ValueError(f"Invalid b: {b!r}; expected a finite number")
        ma, n = statistics.fmean(xa), len(xa)
        if n < 2:
            return Comparison(ma, float(b), n, 1, ma - b, -math.inf, math.inf, math.nan,
                              confidence)
        low, high, p = _interval(ma - b, statistics.stdev(xa) / math.sqrt(n), n - 1, confidence)
        return Comparison(ma, float(b), n, 1, ma - b, low, high, p, confidence)
    xa, xb = _values(a, "a"), _values(b, "b")
    na, nb = len(xa), len(xb)
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    diff = ma - mb
    if na < 2 or nb < 2:
        low, high, p = -math.inf, math.inf, math.nan
    else:
        va, vb = statistics.variance(xa) / na, statistics.variance(xb) / nb
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)) if se > 0 else 1.0
        low, high, p = _interval(diff, se, df, confidence)
    out = Comparison(ma, mb, na, nb, diff, low, high, p, confidence)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        shared = [k for k in a if k in b]
        if len(shared) >= 2:
            d = [float(a[k]) - float(b[k]) for k in shared]
            n = len(d)
            se = statistics.stdev(d) / math.sqrt(n)
            plo, phi, pp = _interval(statistics.fmean(d), se, n - 1, confidence)
            out = Comparison(ma, mb, na, nb, diff, low, high, p, confidence, n, plo, phi, pp)
    return out


def compare_seeds(a: Runs | None, b: Runs | None) -> Comparison | None:
    """:func:`compare_runs` of ``a − b`` as a page asks for it: ``None`` (a dash on the page,
    and a check that asks for words fails) when a side is missing, has fewer than two runs, or
    holds a value that is missing or not finite (a diverged run is shown by the tables, not
    compared). Give ``{seed: value}`` where a seed fixes the same start for both sides (the
    runs pair), a list where they do not."""
    def usable(runs: Runs | None) -> list[Any] | None:
        if runs is None:
            return None
        xs = list(runs.values() if isinstance(runs, Mapping) else runs)
        if len(xs) < 2 or any(x is None or not math.isfinite(x) for x in xs):
            return None
        return xs

    if usable(a) is None or usable(b) is None:
        return None
    return compare_runs(a, b)


def comparison_text(c: Comparison | RatioComparison | None, spec: str | None = None) -> str:
    """The numbers of a comparison (:meth:`Comparison.text`), a dash without one."""
    if c is None:
        return "—"
    return c.text() if spec is None else c.text(spec)


def comparison_texts(comparisons: Mapping[str, Comparison | None], prefix: str = ""
                     ) -> dict[str, str]:
    """``prefix + name → numbers`` (:func:`comparison_text`) of named comparisons, for glue."""
    return {prefix + name: comparison_text(c) for name, c in comparisons.items()}


def says(c: Comparison | None, word: str, lower: str, higher: str, level: str = LEVEL) -> bool:
    """Whether a comparison gives ``word`` (:meth:`Comparison.says`); ``False`` without one."""
    return c is not None and c.says(word, lower, higher, level)


@dataclass(frozen=True)
class RatioComparison:
    r"""``a / b`` of two sets of timings (see :func:`compare_ratio`): the ratio of their
    geometric means and its interval, from :func:`compare_runs` on the logarithms."""

    ratio: float
    low: float
    high: float
    log: Comparison

    def above(self, x: float) -> bool:
        """Whether the whole interval lies above ``x`` (the ratio is resolved above it)."""
        return self.low > x

    def below(self, x: float) -> bool:
        """Whether the whole interval lies below ``x``."""
        return self.high < x

    def straddles(self, x: float) -> bool:
        """Whether ``x`` lies inside the interval: a claim that turns at ``x`` is not made."""
        return not (self.above(x) or self.below(x))

    def text(self) -> str:
        """``1.2 (95 % CI 1.02 to 1.52)``: the ratio to the digits its interval supports, the
        bounds to two decimals, so that a bound just past 1 does not print as 1."""
        half = (self.high - self.low) / 2
        pct = f"{100 * self.log.confidence:g} %"
        return f"{fmt_spread(self.ratio, half)} ({pct} CI {self.low:.2f} to {self.high:.2f})"


def compare_ratio(a: Runs, b: Runs, *, confidence: float = 0.95) -> RatioComparison:
    r"""The ratio of two sets of timings of the same work, ``exp(mean log a − mean log b)``,
    with the interval of :func:`compare_runs` on the logarithms mapped back by ``exp`` (a
    ratio's spread is relative); where the timings pair (``{round: ms}`` on both sides), the
    interval spans Welch's and the paired one, so that a ratio is above or below a value only
    when both intervals say so. Each side needs :data:`MIN_TIMINGS` re-timings or more:
    the time of identical work moves by several per cent between runs, and a claim about speed
    rests on that spread, not on one timing."""
    for side, runs in (("a", a), ("b", b)):
        xs = _values(runs, side)
        if len(xs) < MIN_TIMINGS or min(xs) <= 0:
            raise ValueError(f"Invalid {side}: {len(xs)} timings {xs}; expected at least "
                             f"{MIN_TIMINGS} positive re-timings of the same work")
    def logs(runs: Runs) -> Runs:
        if isinstance(runs, Mapping):
            return {k: math.log(v) for k, v in runs.items()}
        return [math.log(v) for v in runs]

    log = compare_runs(logs(a), logs(b), confidence=confidence)
    low, high = log.low, log.high
    if log.paired_n:  # the one rule: a bound holds only where both intervals agree
        low, high = min(low, log.paired_low), max(high, log.paired_high)
    return RatioComparison(math.exp(log.diff), math.exp(low), math.exp(high), log)


def fmt_spread(x: float, spread: float, *, signed: bool = False) -> str:
    r"""``x`` to the decimal place of the leading digit of its ``spread`` (a half-width or a
    standard deviation), never fewer than one significant digit of ``x``: ``0.0362`` with
    spread ``0.035`` is ``0.04``, ``1.9274`` with ``0.013`` is ``1.93``, ``32613`` with
    ``2e5`` is ``30,000``. An infinite or zero spread prints two significant digits."""
    if not math.isfinite(x):
        return "—"
    if x == 0 and not (math.isfinite(spread) and spread > 0):
        return "0"
    ref = abs(spread) if math.isfinite(spread) and spread > 0 else None
    if x != 0:
        lead_x = math.floor(math.log10(abs(x)))
        ref_exp = lead_x - 1 if ref is None else min(math.floor(math.log10(ref)), lead_x)
    else:
        ref_exp = math.floor(math.log10(ref))
    decimals = max(0, -ref_exp)
    rounded = round(x, -ref_exp)
    sign = "+" if signed else ""
    if decimals == 0:
        return f"{int(rounded):{sign},d}"
    return f"{rounded:{sign}.{decimals}f}"


def fmt_lower_bound(x: float) -> str:
    r"""A positive bound printed to one significant digit, rounded down so that it stays a
    bound: ``16,789`` is ``10,000``, ``528`` is ``500``, ``0.37`` is ``0.3``. For a ratio
    such as the smallest gauge-twin drift over the largest noise-twin drift over a few seeds,
    which moves by a factor of several from one set of seeds to the next."""
    if not (math.isfinite(x) and x > 0):
        return "—"
    exp = math.floor(math.log10(x))
    lead = math.floor(x / 10**exp + 1e-12)
    if exp >= 0:
        return f"{lead * 10**exp:,d}"
    return f"{lead * 10.0**exp:.{-exp}f}"
