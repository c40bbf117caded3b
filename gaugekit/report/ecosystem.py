r"""What the ecosystem appendix shows, computed from the rows of
:func:`gaugekit.experiments.ecosystem.table_rows`: tables as rows for
:func:`gaugekit.report.viz.table_html`, and the lists the text names.

Nothing here is typed in: verdicts, residuals and reasons come from the committed records
(``results/ecosystem/paper``; for the EigenAdam comparison, those of the sensing zoo, the
attention twins and the eigenbasis experiment), the one-line reasons of the kept verdicts from
:data:`gaugekit.experiments.ecosystem.REASONS`, and what each follow-up changed from
:data:`gaugekit.experiments.ecosystem.INVESTIGATIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gaugekit.experiments import ecosystem as eco

__all__ = [
    "COMPARED",
    "Comparison",
    "KEPT",
    "NO_REASON",
    "change_text",
    "count_rows",
    "eigen_adam_comparison",
    "failed_rows",
    "investigation_rows",
    "kept_rows",
    "library_label",
    "names_with_verdict",
    "residual_text",
    "value_text",
]

Row = Mapping[str, Any]

#: The verdicts that keep the gauge (exactly, or to a small residual).
KEPT: tuple[str, ...] = ("equivariant", "approximately")
#: What a kept verdict without a line in :data:`~gaugekit.experiments.ecosystem.REASONS` shows.
NO_REASON = "(no reason recorded)"


def _unbroken(name: str) -> str:
    """``name`` with non-breaking hyphens: a table breaks a cell at its spaces only."""
    return name.replace("-", "\u2011")


def _plain(message: str) -> str:
    """An error message for an HTML cell: its Markdown code quotes (`x`) as plain quotes."""
    return message.replace("`", "'")


def library_label(library: str, *, version: bool = False) -> str:
    """``pytorch-optimizer`` (``pytorch-optimizer 4.1.0`` with ``version``)."""
    lib = eco.LIBRARIES[library]
    return f"{lib.distribution} {lib.version}" if version else lib.distribution


def value_text(value: Any) -> str:
    """A setting as a reader writes it: ``yes``/``no`` for booleans, ``none``, else ``str``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "none" if value is None else str(value)


def residual_text(row: Row) -> str | None:
    """The residual in ``.1e``, or ``None`` (a dash in a table) when the run gave no verdict
    from it (could not run, or did not move)."""
    if row["verdict"] == "could not run" or row["residual"] is None:
        return None
    return f"{row['residual']:.1e}"


def count_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per library and one for both: ``library``, ``classes`` and the count of each
    verdict of :data:`~gaugekit.experiments.ecosystem.VERDICTS` (keys as the verdicts)."""
    out = []
    groups = [(library_label(lib, version=True), [r for r in rows if r["library"] == lib])
              for lib in eco.LIBRARIES]
    for label, group in [*groups, ("both", list(rows))]:
        out.append({"library": label, "classes": len(group), **eco.counts(group)})
    return out


def kept_rows(rows: Sequence[Row], library: str) -> list[dict[str, Any]]:
    """The kept verdicts of ``library``: ``class``, ``verdict``, ``residual`` (text, with
    ``(float32)`` when the audit ran in float32) and ``why`` (the reason line, then the
    arguments the audit supplied)."""
    out = []
    for r in rows:
        if r["library"] != library or r["verdict"] not in KEPT:
            continue
        why = eco.REASONS.get((r["library"], r["optimizer"]), NO_REASON)
        supplied = "; ".join(f"{k} = {value_text(v)}" for k, v in r["supplied"].items())
        residual = residual_text(r)
        if residual is not None and r["dtype"] != "float64":
            residual += f" ({r['dtype']})"
        out.append({"class": r["optimizer"], "verdict": r["verdict"], "residual": residual,
                    "why": why + (f" (given {supplied})" if supplied else "")})
    return out


def failed_rows(rows: Sequence[Row], *, width: int = 150) -> list[dict[str, Any]]:
    """The runs that could not run: ``library``, ``class`` and ``why`` (the recorded reason,
    else the note, cut to ``width`` characters, its backquotes as plain quotes)."""
    return [{"library": library_label(r["library"]), "class": r["optimizer"],
             "why": _plain(r["reason"] or r["note"])[:width]}
            for r in rows if r["verdict"] == "could not run"]


def names_with_verdict(rows: Sequence[Row], library: str, verdict: str) -> list[str]:
    """The class names of ``library`` with ``verdict``, in the records' order."""
    return [r["optimizer"] for r in rows if r["library"] == library and r["verdict"] == verdict]


def change_text(investigation: eco.Investigation) -> str:
    """What a follow-up changed against the main audit, in words: its keyword arguments, its
    param group, train mode, and a horizon other than the main audit's."""
    parts = [f"{k} = {value_text(v)}" for k, v in investigation.kwargs.items()]
    if investigation.group:
        flags = ", ".join(f"{k} = {value_text(v)}" for k, v in investigation.group.items())
        parts.append(f"one param group with {flags}")
    if investigation.call_train:
        parts.append("train mode")
    if investigation.num_steps != eco.NUM_STEPS:
        steps = investigation.num_steps
        parts.append(f"{steps} step" + ("" if steps == 1 else "s"))
    return "; ".join(parts) or "as the main audit"


def investigation_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per follow-up record: ``class`` (with the library), ``change``
    (:func:`change_text`), ``verdict``, ``residual`` (text) and ``dtype``."""
    by_key = {inv.key: inv for inv in eco.INVESTIGATIONS}
    return [{"class": f"{r['optimizer']} ({_unbroken(library_label(r['library']))})",
             "change": change_text(by_key[r["key"]]), "verdict": r["verdict"],
             "residual": residual_text(r), "dtype": r["dtype"]} for r in rows]


# --------------------------------------------------------------------------------------------
# EigenAdam beside the book's optimizers (records of three experiments)
# --------------------------------------------------------------------------------------------

#: The rows of the comparison: the method's name in the sensing zoo (or ``eigen_adam``) and its
#: name in the attention experiment (Muon's twin runs are Muon + Adam).
COMPARED: dict[str, str] = {"adam": "adam", "scalar_adam": "scalar_adam", "muon": "muon_adam",
                            "eigen_adam": "eigen_adam", "eigen_adam_pooled": "eigen_adam_pooled"}
#: The twins of the comparison: the gauge twin (seed 777) and the noise twin (1e-7) of the
#: base model started from seed 42.
GAUGE_TWIN, NOISE_TWIN, BASE_SEED = "gauge 777", "noise 1e-07", 42


@dataclass(frozen=True)
class Comparison:
    """EigenAdam beside Adam, shared-scale Adam and Muon, read from committed records.

    ``rows``: one per method of :data:`COMPARED`, with ``method`` (its label), ``rec`` and
    ``lr`` (the sensing zoo's oracle selection at the paper's Table 2 protocol; NaN where the
    method was not run there) and the final mean relative drift of the heads' ``W_Qᵀ W_K`` of
    its gauge twin (``gauge``), noise twin (``noise``) and float64 gauge twin (``gauge64``).
    ``collected``: the eigenbasis experiment's records (for the page's records note);
    ``sensing``: EigenAdam's sensing row (``None`` without records); ``zoo``: the zoo's rows by
    method; ``float64``: the float64 twin rows.
    """

    rows: list[dict[str, Any]]
    collected: Any
    sensing: Mapping[str, Any] | None
    zoo: Mapping[str, Mapping[str, Any]]
    float64: list[Mapping[str, Any]]

    def float64_twin(self, method: str) -> Mapping[str, Any] | None:
        """The float64 gauge twin of ``method`` (attention name), or ``None``."""
        return _twin(self.float64, method, GAUGE_TWIN)


def _twin(rows: Sequence[Row], method: str, label: str) -> Row | None:
    return next((r for r in rows if r["method"] == method and r["twin"] == label
                 and r["init_seed"] == BASE_SEED), None)


def eigen_adam_comparison(scale: str = "paper") -> Comparison:
    """The :class:`Comparison` of the committed records at ``scale`` (read only)."""
    from gaugekit.experiments import attention as att
    from gaugekit.experiments import eigenbasis as eb
    from gaugekit.experiments import matrix_sensing as ms
    from gaugekit.optim import get_spec
    from gaugekit.report.attention_summary import run_rows

    ebc = eb.collect(scale, mode="read")
    zoo_records = ms.collect(scale, parts=["zoo"], mode="read").records["zoo"]
    zoo = {r["method"]: r for r in ms.selection_rows(zoo_records, "oracle")}
    base = att.collect(scale, parts=["single", "float64"], mode="read")

    def runs(collected: Any, *parts: str) -> list[Row]:
        return [row for part in parts for row in run_rows(collected.records[part])]

    twins = runs(base, "single") + runs(ebc, "attention", "attention_pooled")
    f64 = runs(base, "float64") + runs(ebc, "attention_float64", "attention_float64_pooled")
    sensing = eb.sensing_row(ebc.records["sensing"]) if ebc.records["sensing"] else None

    def drift(row: Row | None) -> float:
        return row["final_m_drift"] if row else math.nan

    rows = []
    for method, twin_method in COMPARED.items():
        srow = sensing if method == "eigen_adam" else zoo.get(method)
        label = (att.METHOD_LABELS[twin_method] if method == "eigen_adam_pooled"
                 else get_spec(method).label)
        rows.append({
            "method": label,
            "rec": srow["rec"] if srow else math.nan,
            "lr": srow["lr"] if srow else math.nan,
            "gauge": drift(_twin(twins, twin_method, GAUGE_TWIN)),
            "noise": drift(_twin(twins, twin_method, NOISE_TWIN)),
            "gauge64": drift(_twin(f64, twin_method, GAUGE_TWIN)),
        })
    return Comparison(rows, ebc, sensing, zoo, f64)
