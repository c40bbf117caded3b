r"""The results of the factor audit: the verdict in words, the optimizer as built, a row, a table.

What :mod:`gaugekit.audit.factors` leaves. The verdict rule (:func:`decide_verdict`) and the
optimizer's name and hyperparameters serve the twin audit of attention heads too.

Threshold. For an equivariant rule the residual is pure round-off: a few dozen flops per step,
an SVD or ``eigh`` in Muon/Shampoo, amplified mildly over ``num_steps``; in float64 this is
``1e-16 … 1e-11`` (measured over the library's rules at the default sizes). A rule that breaks
the gauge breaks it at first order in the update, ``O(1e-2 … 1)`` relative. The float64
threshold ``1e-8`` sits three orders of magnitude above the round-off and six below the
breakage; the float32 threshold ``1e-3`` sits two orders above float32 round-off
(``1e-7 … 1e-5``). Two caveats follow from the same rule. A nearly exact polar factor
(``msign`` through ``(GGᵀ + λI)^{-1/2}`` with tiny ``λ``) amplifies round-off by up to
``λ^{-1/2}`` and can cross the float32 threshold: that is conditioning, and a larger ``λ``
removes it. A rule that is equivariant in exact arithmetic but computes in lower precision
(``torch.optim.Muon`` runs Newton–Schulz in bfloat16) is reported as *not* equivariant, which
is the truth about what it computes; its verdict line then names the precision as the cause
(below).

Low-precision steps. When the optimizer runs an inner step in a low precision of its own
(:func:`low_precision_step`: ``torch.optim.Muon``, whose Newton–Schulz runs in bfloat16, or any
optimizer with an ``ns_dtype`` hyperparameter such as ``gaugekit.optim.Muon(ns_dtype=
torch.bfloat16)``) and the gauge twin's drift is of the order of that dtype's round-off (at most
``ROUNDOFF_EPS_FACTOR = 16`` times its machine ε: 0.125 for bfloat16, whose ε is 2⁻⁷; measured
drifts of bfloat16 Muon are 2 to 6 ε, Adam's 0.73 is 94 ε), the line says "breaks the gauge at
bfloat16 round-off (its Newton–Schulz runs in bfloat16)" and that the rule is equivariant at
full precision: the break is the arithmetic, not the rule.

Verdicts in words. Every result ends with one plain line (:meth:`AuditResult.verdict_line`):
the optimizer's class and hyperparameters as built, then *keeps the gauge*, *breaks the gauge*
or *chaotic (gauge twin ≈ noise twin)*, with the numbers that decide it. Besides the plain and
the rotated run the audit makes a third, *noise* run from ``(U₀ + δE, V₀ + δF)`` (``E, F``
i.i.d. ``N(0, 1)``, ``δ = noise_scale``, no rotation), whose displacement residual against the
plain run, ``r_noise``, measures how strongly the dynamics amplify an arbitrary perturbation.
The rule (:func:`decide_verdict`, shared with :func:`gaugekit.audit.heads.audit_twins`):

* keeps the gauge: :math:`r \le \tau`, with :math:`\tau` the round-off threshold above;
* breaks the gauge: :math:`r > \tau` and :math:`r > c \, r_\text{noise}`, with the chaos
  factor :math:`c` = ``CHAOS_FACTOR`` = 10;
* chaotic: :math:`r > \tau` but :math:`r \le c \, r_\text{noise}`: a perturbation of size
  ``δ`` in the given basis moves the run at least a tenth as far as the rotation does, so the
  gap says how sensitive the run is, not that the rule sees the basis.

A rule that sees the basis moves the rotated run at first order in the update; the noise run
moves by ``δ`` times the run's amplification. Outside chaos the two are orders of magnitude
apart (Adam's gauge twins end 500 times farther apart than its noise twins in the attention
chapter); in a chaotic run both saturate at the size of the attractor (Muon's gauge and noise
twins end at 0.85 and 0.87), a ratio near 1. A factor of 10 sits an order of magnitude from both.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor

__all__ = [
    "BREAKS",
    "CHAOS_FACTOR",
    "CHAOTIC",
    "FLOAT32_THRESHOLD",
    "FLOAT64_THRESHOLD",
    "GROUP_NAMES",
    "IMPLEMENTATION_SWITCHES",
    "KEEPS",
    "LOW_PRECISION_STEPS",
    "OUTCOMES",
    "ROUNDOFF_EPS_FACTOR",
    "UNJUDGED",
    "AuditResult",
    "AuditRow",
    "GaugeVerdict",
    "decide_verdict",
    "default_threshold",
    "describe_optimizer",
    "format_audit_table",
    "format_group_table",
    "low_precision_step",
    "optimizer_hyperparameters",
    "optimizer_name",
    "text_table",
]

#: Verdict threshold on the relative displacement residual for float64 runs (see module doc).
FLOAT64_THRESHOLD: float = 1e-8
#: Verdict threshold for float32 runs.
FLOAT32_THRESHOLD: float = 1e-3


def default_threshold(dtype: torch.dtype) -> float:
    """The documented verdict threshold for ``dtype`` (float64: 1e-8; float32: 1e-3)."""
    if dtype == torch.float64:
        return FLOAT64_THRESHOLD
    if dtype == torch.float32:
        return FLOAT32_THRESHOLD
    raise ValueError(f"Invalid dtype: {dtype!r}; expected torch.float64 or torch.float32")


# --------------------------------------------------------------------------------------------
# verdicts in words, and what was audited
# --------------------------------------------------------------------------------------------

#: A gauge drift more than this many times the noise twin's is the basis, not chaos (module doc).
CHAOS_FACTOR: float = 10.0
#: Outcome of :func:`decide_verdict`: the drift is round-off.
KEEPS = "keeps the gauge"
#: Outcome of :func:`decide_verdict`: the gauge twin drifts far beyond the noise twin.
BREAKS = "breaks the gauge"
#: Outcome of :func:`decide_verdict`: the gauge twin drifts no farther than chaos explains.
CHAOTIC = "chaotic (gauge twin ≈ noise twin)"
#: Outcome of :func:`decide_verdict`: no verdict (the run did not move, or diverged).
UNJUDGED = "cannot be judged"
#: The four outcomes of :func:`decide_verdict`, in this order.
OUTCOMES: tuple[str, ...] = (KEEPS, BREAKS, CHAOTIC, UNJUDGED)

#: ``torch.optim`` constructor switches that choose an implementation, not the update; left out
#: of :func:`optimizer_hyperparameters` while they are off (``None`` or ``False``).
IMPLEMENTATION_SWITCHES: frozenset[str] = frozenset(
    {"foreach", "fused", "capturable", "differentiable"}
)


#: Optimizer classes (dotted path) whose update runs an inner step in a dtype of their own.
LOW_PRECISION_STEPS: dict[str, tuple[torch.dtype, str]] = {
    "torch.optim.Muon": (torch.bfloat16, "its Newton–Schulz runs in bfloat16"),
}
#: A drift within this many machine ε of a low-precision step's dtype is its round-off.
ROUNDOFF_EPS_FACTOR: float = 16.0


def low_precision_step(
    optimizer: str, hyperparameters: Mapping[str, object]
) -> tuple[torch.dtype, str] | None:
    """The dtype of the optimizer's low-precision inner step and what runs in it, or ``None``.

    Known classes (:data:`LOW_PRECISION_STEPS`), else an ``ns_dtype`` hyperparameter of fewer
    than 32 bits (in the defaults or a group's values, as :func:`optimizer_hyperparameters`
    reports them: ``'torch.bfloat16'``); the lowest precision wins.
    """
    if optimizer in LOW_PRECISION_STEPS:
        return LOW_PRECISION_STEPS[optimizer]
    values = [hyperparameters.get("ns_dtype")]
    values += [v.get("ns_dtype") for v in hyperparameters.values() if isinstance(v, Mapping)]
    dtypes = []
    for value in values:
        dtype = getattr(torch, str(value).rsplit(".", 1)[-1], None) if value else None
        if isinstance(dtype, torch.dtype) and dtype.is_floating_point and dtype.itemsize < 4:
            dtypes.append(dtype)
    if not dtypes:
        return None
    dtype = max(dtypes, key=lambda d: torch.finfo(d).eps)
    name = str(dtype).replace("torch.", "")
    return dtype, f"its Newton–Schulz runs in {name}"


@dataclass(frozen=True)
class GaugeVerdict:
    """The verdict of one audit and the numbers that decide it (see :func:`decide_verdict`).

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        gauge: drift of the gauge twin (the audit residual ``r``).
        noise: drift of the noise twin, or ``None`` when none was run.
        threshold: the round-off threshold ``r`` is compared with.
        factor: the chaos factor used.
        why: a short reason, set only for an unjudged outcome (``"the run did not move"``).
        precision: for a break at the round-off of a low-precision step, that dtype's name and
            what runs in it (``("bfloat16", "its Newton–Schulz runs in bfloat16")``); the line
            names it as the cause.
    """

    outcome: str
    gauge: float
    noise: float | None
    threshold: float
    factor: float = CHAOS_FACTOR
    why: str = ""
    precision: tuple[str, str] | None = None
    resolution: float | None = None

    def reason(self) -> str:
        """The numbers that decide the outcome, and the rule that decided it, in one clause."""
        g, t = f"{self.gauge:.2e}", f"{self.threshold:.0e}"
        if self.outcome == UNJUDGED:
            return self.why or "no result"
        if self.outcome == KEEPS:
            return f"gauge twin {g} <= round-off threshold {t}"
        if self.outcome == BREAKS and self.gauge <= self.threshold:
            ratio = self.gauge / self.noise if self.noise else math.inf
            return (f"gauge twin {g} <= round-off threshold {t}, but {ratio:.3g} x the noise "
                    f"twin {self.noise:.2e} (> {self.factor:g} x, above the resolution "
                    f"{self.resolution:.0e}): the noise twin resolves the break")
        if self.noise is None:
            return (f"gauge twin {g} > round-off threshold {t}; no noise twin was run, so chaos "
                    f"is not ruled out")
        ratio = self.gauge / self.noise if self.noise > 0 else math.inf
        compare = ">" if self.outcome == BREAKS else "<="
        return (f"gauge twin {g} > round-off threshold {t} and {ratio:.3g} x the noise twin "
                f"{self.noise:.2e} ({compare} {self.factor:g} x)")

    def line(self, optimizer: str) -> str:
        """``"OPTIMIZER: OUTCOME: NUMBERS"``, the plain line that ends an audit's report; a
        break at a low-precision step's round-off names the precision as its cause."""
        if self.precision is not None:
            name, what = self.precision
            return (f"{optimizer}: {self.outcome} at {name} round-off ({what}; the rule itself is "
                    f"equivariant in float32/float64): {self.reason()}")
        return f"{optimizer}: {self.outcome}: {self.reason()}"


def decide_verdict(
    gauge: float,
    noise: float | None,
    threshold: float,
    *,
    factor: float = CHAOS_FACTOR,
    unjudged: str = "",
    low_precision: tuple[torch.dtype, str] | None = None,
    resolution: float | None = None,
) -> GaugeVerdict:
    """Decide keeps / breaks / chaotic from the gauge twin's and the noise twin's drift.

    The rule, in order: a non-empty ``unjudged`` reason, or a drift that is not a finite
    number, gives :data:`UNJUDGED`; a drift at or below the threshold that the noise twin
    resolves, ``gauge > factor * max(noise, resolution)`` (only with a noise twin and a
    ``resolution``), breaks the gauge; any other ``gauge <= threshold`` keeps it (round-off);
    above the threshold ``gauge > factor * noise`` breaks it, and ``gauge <= factor * noise``
    is chaotic (the run moves that far from any perturbation of the noise twin's size). With
    ``noise=None`` (no noise twin) a drift above the threshold breaks the gauge, and the reason
    says that chaos was not ruled out.

    The threshold is fixed per dtype and sits well above the round-off of a long run (1e-3 in
    float32), so a small break (a damping term, a clamp) can hide under it. The noise twin
    measures this run's own sensitivity: a gauge twin ten times farther from its base than a
    twin nudged by ``noise_scale``, and ten times above the dtype's ``resolution`` (the drift
    of a few steps of round-off, :func:`~gaugekit.audit.heads.verdict_resolution`), has
    seen the basis, whatever the threshold says.

    Args:
        gauge: the gauge twin's drift (relative, >= 0).
        noise: the noise twin's drift, measured the same way, or ``None``.
        threshold: the largest drift that is round-off for the dtype.
        factor: the chaos factor (default :data:`CHAOS_FACTOR`).
        unjudged: why the run cannot be judged (it did not move, it diverged), if it cannot.
        low_precision: the optimizer's low-precision inner step (:func:`low_precision_step`);
            a break within ``ROUNDOFF_EPS_FACTOR`` of its dtype's ε is put down to it.
        resolution: the smallest drift the run's dtype resolves; with it (and a noise twin) a
            break below the threshold is read from the noise twin. ``None``: the threshold
            alone decides below it.
    """
    finite = math.isfinite(gauge) and (noise is None or not math.isnan(noise))
    if unjudged or not finite:
        return GaugeVerdict(UNJUDGED, gauge, noise, threshold, factor,
                            unjudged or "a drift is not a finite number")
    if gauge <= threshold:
        if (resolution is not None and noise is not None
                and gauge > factor * max(noise, resolution)):
            return GaugeVerdict(BREAKS, gauge, noise, threshold, factor, resolution=resolution)
        return GaugeVerdict(KEEPS, gauge, noise, threshold, factor, resolution=resolution)
    if noise is None or gauge > factor * noise:
        precision = None
        if low_precision is not None:
            dtype, what = low_precision
            if gauge <= ROUNDOFF_EPS_FACTOR * torch.finfo(dtype).eps:
                precision = (str(dtype).replace("torch.", ""), what)
        return GaugeVerdict(BREAKS, gauge, noise, threshold, factor, precision=precision)
    return GaugeVerdict(CHAOTIC, gauge, noise, threshold, factor)


def optimizer_name(optimizer: object) -> str:
    """The shortest public dotted path of the optimizer's class (``torch.optim.AdamW``)."""
    cls = type(optimizer)
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None and getattr(module, cls.__qualname__, None) is cls:
            return f"{'.'.join(parts[:i])}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _plain(value: object) -> object:
    """``value`` as strict-JSON plain data: finite numbers, strings, booleans, lists; anything
    else (``inf``, a dtype, a callable) as its ``repr``."""
    if isinstance(value, Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return repr(value)


def optimizer_hyperparameters(optimizer: object) -> dict[str, object]:
    """The hyperparameters the optimizer was built with, as resolved (its ``defaults``).

    Implementation switches (:data:`IMPLEMENTATION_SWITCHES`) are left out while off. A
    parameter group that differs from the defaults adds ``"group I"`` with its differing values.
    Values are plain data (numbers, strings, lists; anything else as its ``repr``). An object
    that only has ``step`` (a wrapper around optimizers) has no hyperparameters to show: ``{}``.
    """
    defaults = dict(getattr(optimizer, "defaults", {}) or {})
    out: dict[str, object] = {
        key: _plain(value) for key, value in defaults.items()
        if not (key in IMPLEMENTATION_SWITCHES and value in (None, False))
    }
    for i, group in enumerate(getattr(optimizer, "param_groups", None) or ()):
        changed = {
            key: _plain(value) for key, value in group.items()
            if key != "params" and key in defaults and _plain(value) != _plain(defaults[key])
        }
        if changed:
            out[f"group {i}"] = changed
    return out


def _format_value(value: object) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_format_value(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_format_value(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def describe_optimizer(name: str, hyperparameters: Mapping[str, object]) -> str:
    """``"torch.optim.AdamW(lr=0.001, betas=(0.9, 0.999), ...)"`` from a name and its values."""
    args = ", ".join(f"{k}={_format_value(v)}" for k, v in hyperparameters.items())
    return f"{name}({args})"


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    ``residual_U``, ``residual_V``: max over steps of the relative displacement residual of
    each factor; ``residual``: the larger of the two. ``displacement``: size of the plain run's
    final displacement relative to the start, ``‖(U_T − U₀, V_T − V₀)‖ / ‖(U₀, V₀)‖``; a run that
    does not move (``static``) cannot be judged. ``equivariant`` is
    ``not static and residual <= threshold``. ``noise_residual``: the same residual for the
    noise run started ``noise_scale`` away without a rotation (``None`` when it was not run).
    ``optimizer``, ``hyperparameters``: the class (dotted path) and the values it was built
    with (:func:`optimizer_hyperparameters`). ``gauge_verdict`` and :meth:`verdict_line` say
    in words whether the rule keeps the gauge, breaks it or is chaotic (module doc).
    ``group``: the gauge group of the twin, ``"orthogonal"`` (``O(r)``) or ``"general"``
    (``GL(r)``); ``layout``: the factor pair the optimizer saw, ``"UV"`` (``W = U Vᵀ``) or
    ``"AB"`` (LoRA, ``W = B A``; ``residual_U`` is then ``B``'s and ``residual_V`` ``A``'s);
    ``condition_number``: ``cond(R)`` of the general twin's ``R`` (``None`` under ``O(r)``).
    """

    residual_U: float
    residual_V: float
    residual: float
    threshold: float
    equivariant: bool
    static: bool
    num_steps: int
    displacement: float
    loss_start: float
    loss_end: float
    dtype: str
    noise_residual: float | None = None
    noise_scale: float | None = None
    optimizer: str = ""
    hyperparameters: dict[str, object] = field(default_factory=dict, hash=False)
    group: str = "orthogonal"
    layout: str = "UV"
    condition_number: float | None = None

    @property
    def verdict(self) -> str:
        """``"equivariant"``, ``"not equivariant"`` or ``"static"`` (the run did not move)."""
        if self.static:
            return "static"
        return "equivariant" if self.equivariant else "not equivariant"

    @property
    def gauge_verdict(self) -> GaugeVerdict:
        """Keeps / breaks / chaotic, from ``residual``, ``noise_residual`` and ``threshold``."""
        return decide_verdict(
            self.residual, self.noise_residual, self.threshold,
            unjudged=f"the run did not move in {self.num_steps} steps" if self.static else "",
            low_precision=low_precision_step(self.optimizer, self.hyperparameters),
        )

    @property
    def description(self) -> str:
        """The optimizer as built, as in ``"torch.optim.AdamW(lr=0.01, ...)"``."""
        return describe_optimizer(self.optimizer or "optimizer", self.hyperparameters)

    @property
    def twin(self) -> str:
        """The gauge twin in words, ``""`` for the default one (``O(r)``, layout ``UV``):
        ``"general-linear twin (U R, V R⁻ᵀ), cond(R) = 4"``, ``"orthogonal twin (Qᵀ A, B Q)"``."""
        if self.group == "orthogonal":
            return "" if self.layout == "UV" else "orthogonal twin (Qᵀ A, B Q)"
        pair = "(U R, V R⁻ᵀ)" if self.layout == "UV" else "(R⁻¹ A, B R)"
        cond = f", cond(R) = {self.condition_number:.3g}" if self.condition_number else ""
        return f"general-linear twin {pair}{cond}"

    def verdict_line(self, name: str | None = None) -> str:
        """One plain line: the optimizer as built, its verdict, the numbers and the rule.

        ``name`` (a row name such as a registry name) is put in front when it is not the
        class's own name; a twin other than the default one is named in brackets after the
        optimizer (:attr:`twin`).
        """
        short = self.optimizer.rsplit(".", 1)[-1]
        plain = name is None or name in (self.optimizer, short)
        label = self.description if plain else f"{name} = {self.description}"
        return self.gauge_verdict.line(f"{label} [{self.twin}]" if self.twin else label)

    def __str__(self) -> str:
        return format_audit_table([AuditRow(self.optimizer or "optimizer", self.verdict, self)])


@dataclass(frozen=True)
class AuditRow:
    """One row of :func:`~gaugekit.audit.factors.audit_many`: a result, or the error that
    prevented one."""

    name: str
    verdict: str
    result: AuditResult | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        """Flat dictionary for a table: name, verdict, the result's fields, error."""
        row: dict[str, object] = {"name": self.name, "verdict": self.verdict}
        if self.result is not None:
            row.update(asdict(self.result))
        row["error"] = self.error
        return row


def text_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    widths: Sequence[int] | None = None,
    align: str = "",
    sep: str = " ",
    rule: bool = False,
) -> str:
    """A fixed-width plain-text table: the one text table of the library and the book.

    ``widths`` per column (default: the widest cell); ``align`` one letter per column, ``l``
    or ``r`` (default: right); ``rule`` puts a dashed line under the header. A row with fewer
    cells than the header (an error row) leaves its last cell unpadded.
    """
    cells = [list(header), *(list(r) for r in rows)]
    widths = list(widths) if widths else [max(len(r[i]) for r in cells if i < len(r))
                                          for i in range(len(header))]
    align = align or "r" * len(header)

    def line(row: list[str]) -> str:
        out = []
        for i, cell in enumerate(row):
            last_short = i == len(row) - 1 and len(row) < len(header)
            out.append(cell if last_short else
                       cell.ljust(widths[i]) if align[i] == "l" else cell.rjust(widths[i]))
        return sep.join(out)

    lines = [line(cells[0])]
    if rule:
        lines.append("-" * len(lines[0]))
    return "\n".join([*lines, *(line(r) for r in cells[1:])])


#: The gauge groups' names in a table.
GROUP_NAMES: dict[str, str] = {"orthogonal": "O(r)", "general": "GL(r)"}
_SHORT_OUTCOMES = {KEEPS: "keeps", BREAKS: "breaks", CHAOTIC: "chaotic", UNJUDGED: "unjudged"}


def _group_cells(row: AuditRow | None) -> list[str]:
    """A row's outcome in one word and its gauge twin's residual (``error`` when none)."""
    if row is None or row.result is None:
        return ["error", "-"]
    verdict = row.result.gauge_verdict
    word = _SHORT_OUTCOMES[verdict.outcome]
    if verdict.precision is not None:
        word += f" ({verdict.precision[0]})"
    return [word, f"{row.result.residual:.1e}"]


def format_group_table(rows_by_group: Mapping[str, Sequence[AuditRow]]) -> str:
    """The verdict table under several gauge groups: one row per optimizer, per group its
    outcome (keeps / breaks / chaotic / unjudged / error) and its gauge twin's residual.

    ``rows_by_group`` maps a group (``"orthogonal"``, ``"general"``) to the rows of
    :func:`~gaugekit.audit.factors.audit_many` under it (what
    :func:`~gaugekit.audit.factors.audit_groups` returns); rows are matched by name, in the
    first group's order. A legend gives the threshold and ``cond(R)`` of the general twin.
    """
    groups = list(rows_by_group)
    names = list(dict.fromkeys(r.name for rows in rows_by_group.values() for r in rows))
    by_name = {g: {r.name: r for r in rows} for g, rows in rows_by_group.items()}
    header = ["optimizer"]
    for g in groups:
        header += [GROUP_NAMES.get(g, g), "residual"]
    cells = [[name, *(c for g in groups for c in _group_cells(by_name[g].get(name)))]
             for name in names]
    table = text_table(header, cells, align="l" + "lr" * len(groups), sep="  ", rule=True)
    results = [r.result for rows in rows_by_group.values() for r in rows if r.result is not None]
    legend = []
    if results:
        legend.append(f"keeps: residual <= {results[0].threshold:.0e} ({results[0].dtype}); "
                      f"breaks: above it and > {CHAOS_FACTOR:g} x the noise twin")
    conds = sorted({f"{r.condition_number:.3g}" for r in results if r.condition_number})
    pairs = sorted({"(U R, V R⁻ᵀ)" if r.layout == "UV" else "(R⁻¹ A, B R)" for r in results
                    if r.group == "general"}, reverse=True)
    if conds:
        legend.append(f"GL(r) twins {', '.join(pairs)} with cond(R) = {', '.join(conds)}")
    errors = [f"{r.name} ({GROUP_NAMES.get(g, g)}): {r.error}" for g, rows in
              rows_by_group.items() for r in rows if r.result is None]
    return "\n".join([table, *legend, *(f"error: {e}" for e in errors)])


def format_audit_table(rows: Sequence[AuditRow]) -> str:
    """A fixed-width table of audit rows, then one verdict line per row.

    Columns: name, verdict, the residuals of ``U`` and ``V``, the noise twin's residual and the
    plain run's displacement (``moved``); then the threshold, then for every row the line of
    :meth:`AuditResult.verdict_line` (the optimizer as built, keeps / breaks / chaotic and the
    numbers that decide it), or the error that prevented a result.
    """
    cells = []
    for row in rows:
        if row.result is None:
            cells.append([row.name, row.verdict, str(row.error)])
            continue
        r = row.result
        noise = f"{r.noise_residual:.2e}" if r.noise_residual is not None else "-"
        cells.append([row.name, row.verdict, f"{r.residual_U:.2e}", f"{r.residual_V:.2e}", noise,
                      f"{r.displacement:.2e}"])
    w = max([18, *(len(row.name) for row in rows)])
    lines = [text_table(["optimizer", "verdict", "residual_U", "residual_V", "noise", "moved"],
                        cells, widths=[w, 16, 11, 11, 9, 9], align="llrrrr", rule=True)]
    judged = [row.result for row in rows if row.result is not None]
    if judged:
        lines.append(
            f"threshold: {judged[0].threshold:.0e} ({judged[0].dtype}); rule: keeps the gauge "
            f"if residual <= threshold, else breaks it if residual > {CHAOS_FACTOR:g} x noise, "
            f"else chaotic"
        )
    for row in rows:
        if row.result is None:
            lines.append(f"{row.name}: {UNJUDGED}: {row.error}")
        else:
            lines.append(row.result.verdict_line(row.name))
    return "\n".join(lines)
