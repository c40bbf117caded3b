r"""What the ecosystem appendix shows, computed from the rows of
:func:`gaugekit.experiments.ecosystem.table_rows`: tables as rows for
:func:`gaugekit.report.tables.table_html`, and the lists the text names.

Nothing here is typed in: verdicts, residuals and reasons come from the committed records
(``results/ecosystem/paper``), and what each follow-up changed from
:data:`gaugekit.experiments.ecosystem.INVESTIGATIONS`; the one-line reasons of the kept verdicts
(:data:`REASONS`) are written here, by hand, from each rule's source. The appendix's EigenAdam
sections are :mod:`gaugekit.report.eigenbasis`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gaugekit.audit.factors import FLOAT32_THRESHOLD, FLOAT64_THRESHOLD
from gaugekit.experiments import ecosystem as eco
from gaugekit.report.tables import Row, as_markdown, table_html, value_text

#: The verdicts that keep the gauge (exactly, or to a small residual).
KEPT: tuple[str, ...] = ("equivariant", "approximately")
#: What a kept verdict without a line in :data:`REASONS` shows.
NO_REASON = "(no reason recorded)"

#: One line of reason per equivariant or approximately equivariant verdict of the main parts
#: (written after reading each rule's source at the pinned version; the book checks that every
#: such verdict has one, and prints "no reason recorded" otherwise).
REASONS: dict[tuple[str, str], str] = {
    ("pytorch_optimizer", "A2Grad"): "accelerated SGD whose step sizes come from running "
    "squared gradient norms: invariant scalars times linear combinations of gradients",
    ("pytorch_optimizer", "ASGD"): "adaptive step size from ‖Δθ‖/‖Δg‖ (norms are invariant) "
    "times the gradient",
    ("pytorch_optimizer", "AccSGD"): "accelerated SGD: linear in the gradients",
    ("pytorch_optimizer", "AggMo"): "several momentum buffers: linear in the gradients",
    ("pytorch_optimizer", "AliG"): "Polyak-type step size from the loss and ‖g‖²: an invariant "
    "scalar times g",
    ("pytorch_optimizer", "Amos"): "one second-moment scalar per tensor (a mean of g²): "
    "shared-scale, like the book's shared-scale Adam",
    ("pytorch_optimizer", "ApolloDQN"): "diagonal quasi-Newton, but its denominator "
    "max(|B|, 0.01) sits at the constant floor while the curvature estimate is small (500-step lr "
    "warm-up from 1e-5); see the investigations",
    ("pytorch_optimizer", "DAdaptSGD"): "SGD with a D-adaptation step size built from inner "
    "products and norms (invariant scalars)",
    ("pytorch_optimizer", "FriendlySAM"): "SAM around SGD: the ascent step ρ g/‖g‖ uses a "
    "global norm",
    ("pytorch_optimizer", "Fromage"): "per-tensor ratio ‖θ‖/‖g‖ times g: invariant scalars",
    ("pytorch_optimizer", "LARS"): "layer-wise trust ratio ‖θ‖/‖g‖ times g: invariant scalars",
    ("pytorch_optimizer", "LookSAM"): "SAM around SGD, the ascent direction reused: global "
    "norms and inner products only",
    ("pytorch_optimizer", "Lookahead"): "slow weights interpolate linearly with the fast ones: "
    "equivariant around an equivariant base (SGD here)",
    ("pytorch_optimizer", "NovoGrad"): "one second moment per tensor (‖g‖²): an invariant "
    "scalar per layer",
    ("pytorch_optimizer", "OrthoGrad"): "removes the component of g along θ with ⟨θ, g⟩/‖θ‖², "
    "an invariant, then rescales to ‖g‖: equivariant around SGD",
    ("pytorch_optimizer", "PCGrad"): "projects conflicting task gradients with inner products; "
    "one loss here, so the SGD base step",
    ("pytorch_optimizer", "PID"): "proportional-integral-derivative terms: linear in the "
    "gradients",
    ("pytorch_optimizer", "PNM"): "positive-negative momentum: linear in the gradients",
    ("pytorch_optimizer", "QHM"): "quasi-hyperbolic momentum: linear in the gradients",
    ("pytorch_optimizer", "SAM"): "SAM around SGD: the ascent step ρ g/‖g‖ uses a global norm",
    ("pytorch_optimizer", "SGD"): "torch.optim.SGD re-exported: linear in the gradient",
    ("pytorch_optimizer", "SGDP"): "SGD whose projection uses per-row cosines of θ and g; rows "
    "of U and V keep their inner products under the right gauge",
    ("pytorch_optimizer", "SGDW"): "SGD with decoupled weight decay: linear",
    ("pytorch_optimizer", "SRMM"): "averages of past gradients: linear",
    ("pytorch_optimizer", "ScalableShampoo"): "at these sizes and defaults its update is "
    "Nesterov SGD (the SGD graft): the preconditioner never engages in the audit",
    ("pytorch_optimizer", "Shampoo"): "L^(-1/4) G R^(-1/4): L invariant, R → QᵀRQ",
    ("pytorch_optimizer", "Adai"): "approximately: its per-coordinate inertia β₁ᵢ from v̂ᵢ/mean "
    "v̂ is entrywise and enters after step 1 (equivariant over 1 step)",
    ("pytorch_optimizer", "Conda"): "approximately: Adam in the right singular basis of the "
    "momentum (gauge-covariant, like EigenAdam), the SVD taken in float32",
    ("pytorch_optimizer", "MSVAG"): "approximately: its variance-adaptation factor is "
    "entrywise and enters after step 1 (equivariant over 1 step)",
    ("pytorch_optimizer", "TRAC"): "approximately: an invariant scaling of the SGD base step, "
    "computed in float32",
    ("heavyball", "SGD"): "approximately: momentum SGD with its state stored in float32 "
    "(storage_dtype); float64 state is equivariant",
    ("heavyball", "Muon"): "approximately: Newton–Schulz is equivariant; the float32 state "
    "leaves 1e-8; float64 state is equivariant",
    ("heavyball", "MuonAdamW"): "approximately: as Muon (float32 state); float64 state is "
    "equivariant",
    ("heavyball", "UnscaledAdamW"): "approximately only over 20 steps: a coordinate-wise "
    "denominator that reacts to changes of g; the residual grows with t (3e-8 after 1 step)",
}


def library_label(library: str, *, version: bool = False) -> str:
    """``pytorch-optimizer`` (``pytorch-optimizer 4.1.0`` with ``version``)."""
    lib = eco.LIBRARIES[library]
    return f"{lib.distribution} {lib.version}" if version else lib.distribution


def residual_text(row: Row) -> str | None:
    """The residual in ``.1e``, or ``None`` (a dash in a table) when the run gave no verdict
    from it (could not run, or did not move)."""
    if row["verdict"] == "could not run" or row["residual"] is None:
        return None
    return f"{row['residual']:.1e}"


def count_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per library and one for both: ``library``, ``classes`` and the count of each
    verdict of :data:`~gaugekit.experiments.ecosystem.VERDICTS` (keys as the verdicts)."""
    groups = [(library_label(lib, version=True), [r for r in rows if r["library"] == lib])
              for lib in eco.LIBRARIES]
    return [{"library": label, "classes": len(group), **eco.counts(group)}
            for label, group in [*groups, ("both", list(rows))]]


def kept_rows(rows: Sequence[Row], library: str) -> list[dict[str, Any]]:
    """The kept verdicts of ``library``: ``class``, ``verdict``, ``residual`` (text, with
    ``(float32)`` when the audit ran in float32) and ``why`` (the reason line, then the
    arguments the audit supplied)."""
    out = []
    for r in rows:
        if r["library"] != library or r["verdict"] not in KEPT:
            continue
        why = REASONS.get((r["library"], r["optimizer"]), NO_REASON)
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
             "why": (r["reason"] or r["note"]).replace("`", "'")[:width]}
            for r in rows if r["verdict"] == "could not run"]


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
    (:func:`change_text`), ``verdict``, ``residual`` (text) and ``dtype``; the library's name
    with non-breaking hyphens (a table breaks a cell at its spaces only)."""
    by_key = {inv.key: inv for inv in eco.INVESTIGATIONS}
    unbroken = {lib: library_label(lib).replace("-", "\u2011") for lib in eco.LIBRARIES}
    return [{"class": f"{r['optimizer']} ({unbroken[r['library']]})",
             "change": change_text(by_key[r["key"]]), "verdict": r["verdict"],
             "residual": residual_text(r), "dtype": r["dtype"]} for r in rows]


# --------------------------------------------------------------------------------------------
# The page's values: every table, number and sentence the appendix glues
# --------------------------------------------------------------------------------------------

#: The main audits the text names, by library: the page glues their residual and verdict as
#: ``main_po_<name>`` / ``main_hb_<name>`` (lower case).
NAMED_MAIN: dict[str, tuple[str, ...]] = {
    "heavyball": ("SGD", "Muon", "UnscaledAdamW", "SOAP"),
    "pytorch_optimizer": ("SOAP", "Conda", "Adai", "MSVAG", "TRAC", "ApolloDQN", "RAdam"),
}
_TAG = {"heavyball": "hb", "pytorch_optimizer": "po"}
_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
          "ten")


def _residual(row: Row) -> float:
    return math.nan if row["residual"] is None else row["residual"]


def counts_sentence(both: Mapping[str, int]) -> str:
    """The verdict counts of ``both`` (the last row of :func:`count_rows`) in tenths, in
    words: "Three in ten exported classes break the gauge, ..."."""
    def in_ten(count: int) -> str:
        return f"{_WORDS[round(10 * count / both['classes'])]} in ten"

    kept = both["equivariant"] + both["approximately"]
    return (f"{in_ten(both['not']).capitalize()} exported classes break the gauge, "
            f"{in_ten(kept)} keep it exactly or approximately, and "
            f"{in_ten(both['could not run'])} gave no verdict")


def verdict_values(records: Mapping[str, Sequence[Row]], rows: Sequence[Row]
                   ) -> dict[str, Any]:
    """The audit's settings (``eco_steps``, the thresholds ``eco_t64``/``eco_t32``, the band
    ``eco_approx``, ``eco_timeout``) and the verdicts of the main audits ``rows``: the count
    table and its sentence, the kept and failed tables, the names of the broken classes and the
    smallest and median residual among them."""
    counts = count_rows(rows)
    values: dict[str, Any] = {
        "eco_steps": eco.NUM_STEPS, "eco_t64": FLOAT64_THRESHOLD,
        "eco_t32": FLOAT32_THRESHOLD, "eco_approx": eco.APPROXIMATE_BOUND,
        "eco_timeout": records["heavyball"][0]["config"]["timeout_s"], "n_total": len(rows),
        "count_table": table_html(counts, ["library", "classes", *eco.VERDICTS]),
        "eco_counts_sentence": as_markdown(counts_sentence(counts[-1])),
    }
    for lib in eco.LIBRARIES:
        values[f"kept_table_{lib}"] = table_html(kept_rows(rows, lib),
                                                     ["class", "verdict", "residual", "why"])
    values["failed_table"] = table_html(failed_rows(rows), ["library", "class", "why"],
                                            headers={"why": "why it could not run"})
    for lib in ("pytorch_optimizer", "heavyball"):
        names = [r["optimizer"] for r in rows if r["library"] == lib and r["verdict"] == "not"]
        values[f"not_{_TAG[lib]}"] = as_markdown(", ".join(f"`{name}`" for name in names))
    broken = sorted(r["residual"] for r in rows if r["verdict"] == "not")
    values["min_not_residual"] = broken[0]
    values["median_not_residual"] = broken[len(broken) // 2]
    return values


def followup_values(rows: Sequence[Row], followups: Sequence[Row]) -> dict[str, Any]:
    """The follow-ups' table and, per follow-up ``key``, ``inv_<key>`` (its residual, NaN
    without one), ``inv_<key>_verdict`` and ``inv_<key>_reason``; then the residual and verdict
    of each main audit of :data:`NAMED_MAIN` (``main_hb_sgd``, ``main_hb_sgd_verdict``, ...)."""
    values: dict[str, Any] = {"followup_table": table_html(
        investigation_rows(followups), ["class", "change", "verdict", "residual", "dtype"],
        headers={"class": "class (library)", "change": "changed setting"})}
    for r in followups:
        key = r["key"]
        values |= {f"inv_{key}": _residual(r), f"inv_{key}_verdict": r["verdict"],
                   f"inv_{key}_reason": r["reason"] or r["note"] or ""}
    main = {(r["library"], r["optimizer"]): r for r in rows}
    for lib, names in NAMED_MAIN.items():
        for name in names:
            r = main[(lib, name)]
            tag = f"main_{_TAG[lib]}_{name.lower()}"
            values |= {tag: _residual(r), f"{tag}_verdict": r["verdict"]}
    return values


def live_residuals(followups: Sequence[Row], keys: Sequence[str], timeout_s: float = 60.0
                   ) -> list[tuple[str, float | None, float]]:
    """Run the follow-ups ``keys`` again, each isolated in its own process as the records were
    made: ``(key, live residual, recorded residual)`` per key, or ``[]`` when either library
    is not installed."""
    if not all(eco.library_available(lib) for lib in eco.LIBRARIES):
        return []
    recorded = {r["key"]: r["residual"] for r in followups}
    live = []
    for key in keys:
        inv = next(i for i in eco.INVESTIGATIONS if i.key == key)
        lib = eco.LIBRARIES[inv.library]
        iso = eco.run_isolated(
            "gaugekit.experiments.ecosystem:audit_class",
            (lib.module, inv.optimizer, inv.num_steps, inv.kwargs, inv.group, inv.call_train),
            timeout_s, preload=(lib.module,))
        now = (iso.value or {}).get("result") or {}
        live.append((key, now.get("residual"), recorded[key]))
    return live


def live_text(live: Sequence[tuple[str, float | None, float]]) -> str:
    """What the live re-run prints: a line per follow-up, or why nothing ran."""
    if not live:
        return ("pytorch-optimizer / heavyball not installed here: the page shows\n"
                "the committed records only (the `ecosystem` extra runs it live).")
    return "\n".join(f"{key}: live residual {now}, recorded {then}" for key, now, then in live)


def live_note(live: Sequence[tuple[str, float, float]]) -> Any:
    """The live re-run in a sentence (``live_note``), or that it did not run."""
    checks = [f"`{k}` live {a:.1e} against recorded {b:.1e}" for k, a, b in live]
    return as_markdown("; ".join(checks) or "not run in this build "
                    "(the `ecosystem` extra is not installed)")
