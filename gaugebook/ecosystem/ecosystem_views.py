r"""What the ecosystem appendix shows, computed from the rows of
:func:`gaugebook.ecosystem.ecosystem_runs.table_rows`: tables as rows for
:func:`gaugebook.present.tables.table_html`, and the lists the text names.

Nothing here is typed in: verdicts, residuals and reasons come from the committed records
(``results/ecosystem/paper``), and what each follow-up changed from
:data:`gaugebook.ecosystem.ecosystem_runs.INVESTIGATIONS`; the one-line reasons of the kept verdicts
(:data:`REASONS`) are written here, by hand, from each rule's source. Every class is recorded
under both gauge groups; the per-library tables show ``O(r)`` (:func:`by_group` splits the rows),
:func:`group_values` the two groups side by side and LoRA-RITE. Last, the appendix's
EigenAdam sections: :func:`collision_residual`, :func:`initial_q_gradients`, :class:`Comparison`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from gaugebook.attention import attention_runs as att
from gaugebook.attention.attention_summary import pick, run_rows
from gaugebook.ecosystem import ecosystem_runs as eco
from gaugebook.ecosystem import eigenbasis_runs as eb
from gaugebook.engine.transformer import cross_entropy, forward, init_params, make_modadd_data
from gaugebook.present import tables
from gaugebook.present.tables import Row, as_markdown, table_html, value_text
from gaugebook.present.viz import legend_beside, method_color
from gaugebook.sensing import sensing_runs as ms
from gaugebook.symmetry import WIDTH
from gaugekit.audit.factor_results import FLOAT32_THRESHOLD, FLOAT64_THRESHOLD, GROUP_NAMES
from gaugekit.audit.factors import audit_equivariance
from gaugekit.gauge import haar_orthogonal
from gaugekit.optim import get_spec

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
    verdict of :data:`~gaugebook.ecosystem.ecosystem_runs.VERDICTS` (keys as the verdicts)."""
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


def twin_text(row: Row) -> str:
    """The gauge group a row was audited under, ``O(r)`` or ``GL(r)``, with ``, (A, B)`` when
    the optimizer saw LoRA's pair."""
    return GROUP_NAMES[row["group"]] + (", (A, B)" if row["layout"] == "AB" else "")


def investigation_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per follow-up record: ``class`` (with the library), ``change``
    (:func:`change_text`), ``twin`` (:func:`twin_text`), ``verdict``, ``residual`` (text) and
    ``dtype``; the library's name with non-breaking hyphens (a table breaks a cell at its
    spaces only)."""
    by_key = {inv.key: inv for inv in eco.INVESTIGATIONS}
    unbroken = {lib: library_label(lib).replace("-", "\u2011") for lib in eco.LIBRARIES}
    return [{"class": f"{r['optimizer']} ({unbroken[r['library']]})",
             "change": change_text(by_key[r["key"]]), "twin": twin_text(r),
             "verdict": r["verdict"], "residual": residual_text(r), "dtype": r["dtype"]}
            for r in rows]


# --------------------------------------------------------------------------------------------
# The two gauge groups
# --------------------------------------------------------------------------------------------


def by_group(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The rows of each gauge group (:data:`~gaugebook.ecosystem.ecosystem_runs.GROUPS`, in
    order), each in the rows' order."""
    return {g: [r for r in rows if r["group"] == g] for g in eco.GROUPS}


def group_count_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per gauge group over both libraries: ``group`` (``O(r)``, ``GL(r)``), ``twin``
    (the twin's start in words), ``classes`` and the count of each verdict."""
    twins = {"orthogonal": "(U Q, V Q), Haar Q",
             "general": f"(U R, V R⁻ᵀ), cond(R) = {eco.CONDITION_NUMBER:g}"}
    return [{"group": GROUP_NAMES[g], "twin": twins[g], "classes": len(group),
             **eco.counts(group)} for g, group in by_group(rows).items()]


def _kept(row: Row | None) -> bool:
    return row is not None and row["verdict"] in KEPT


def group_pair_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One row per class that keeps ``O(r)`` or ``GL(r)`` (exactly or approximately), in the
    ``O(r)`` rows' order: ``library``, ``class``, and per group its verdict and residual
    (``o_verdict``, ``o_residual``, ``gl_verdict``, ``gl_residual``; residuals as text)."""
    groups = by_group(rows)
    general = {(r["library"], r["optimizer"]): r for r in groups["general"]}
    out = []
    for r in groups["orthogonal"]:
        g = general.get((r["library"], r["optimizer"]))
        if not (_kept(r) or _kept(g)):
            continue
        out.append({"library": library_label(r["library"]), "class": r["optimizer"],
                    "o_verdict": r["verdict"], "o_residual": residual_text(r),
                    "gl_verdict": g["verdict"] if g else None,
                    "gl_residual": residual_text(g) if g else None})
    return out


#: The follow-ups that audit LoRA-RITE with its update skipping off, by group.
LORA_RITE_KEYS: dict[str, str] = {"orthogonal": "po_lorarite_no_skipping",
                                  "general": "po_lorarite_no_skipping_gl"}


def lora_rite_rows(rows: Sequence[Row], followups: Sequence[Row]) -> list[dict[str, Any]]:
    """LoRA-RITE in LoRA's layout: at its defaults (the main audits) and with
    ``update_skipping = 0`` (the follow-ups :data:`LORA_RITE_KEYS`), per group: ``setting``
    (``defaults``, else :func:`change_text`),
    ``twin``, ``verdict``, ``residual`` (text), ``moved`` (the plain run's relative
    displacement) and ``note``."""
    main = [r for r in rows if (r["library"], r["optimizer"]) == ("pytorch_optimizer",
                                                                    "LoRARite")]
    keyed = {r["key"]: r for r in followups}
    by_key = {inv.key: inv for inv in eco.INVESTIGATIONS}
    picked = [("defaults", r) for r in main] + [
        (change_text(by_key[key]), keyed[key]) for key in LORA_RITE_KEYS.values() if key in keyed]
    return [{"setting": setting, "twin": twin_text(r), "verdict": r["verdict"],
             "residual": residual_text(r), "moved": r["moved"], "note": r["note"]}
            for setting, r in picked]


def group_values(rows: Sequence[Row], followups: Sequence[Row]) -> dict[str, Any]:
    """The two gauge groups side by side, from the main audits ``rows`` (both groups) and the
    follow-ups: the count table (``group_count_table``) and its counts per group
    (``eco_o_n_kept``, ``eco_gl_n_kept``, ``eco_gl_n_not``, ``eco_gl_n_failed``: kept exactly
    or approximately, broken, no verdict), ``eco_cond`` (``cond(R)``), the classes that keep
    ``GL(r)`` (``gl_kept``, Markdown, "none" when none) and the table of every class that keeps
    a group (``group_pair_table``); of the classes that keep ``O(r)``, how many do not keep
    ``GL(r)`` (``eco_o_only``), how many of these break it (``eco_o_gl_not``, verdict ``not``)
    and their smallest ``GL(r)`` residual (``o_only_min_gl``, with its class
    ``o_only_min_gl_class``); LoRA-RITE's table (``lora_rite_table``), the verdict at its
    defaults per group (``rite_default_o_verdict``, ``rite_default_gl_verdict``) and with the
    skipping off (``rite_o``, ``rite_gl``: residuals; ``rite_o_verdict``, ``rite_gl_verdict``;
    ``rite_moved``: how far it moved)."""
    groups = by_group(rows)
    tallies = {g: eco.counts(group) for g, group in groups.items()}
    general = {(r["library"], r["optimizer"]): r for r in groups["general"]}
    o_only = [(r, general[(r["library"], r["optimizer"])]) for r in groups["orthogonal"]
              if _kept(r) and not _kept(general.get((r["library"], r["optimizer"])))]
    broken = sorted((g["residual"], r["optimizer"]) for r, g in o_only if g["residual"])
    gl_kept = [r["optimizer"] for r in groups["general"] if _kept(r)]
    values: dict[str, Any] = {
        "group_count_table": table_html(group_count_rows(rows),
                                        ["group", "twin", "classes", *eco.VERDICTS],
                                        headers={"twin": "twin start"}),
        "eco_o_n_kept": tallies["orthogonal"]["equivariant"]
        + tallies["orthogonal"]["approximately"],
        "eco_gl_n_kept": tallies["general"]["equivariant"] + tallies["general"]["approximately"],
        "eco_gl_n_not": tallies["general"]["not"],
        "eco_gl_n_failed": tallies["general"]["could not run"],
        "eco_cond": eco.CONDITION_NUMBER,
        "gl_kept": as_markdown(", ".join(f"`{name}`" for name in gl_kept) or "none"),
        "group_pair_table": table_html(
            group_pair_rows(rows),
            ["library", "class", "o_verdict", "o_residual", "gl_verdict", "gl_residual"],
            headers={"o_verdict": "O(r)", "o_residual": "residual", "gl_verdict": "GL(r)",
                     "gl_residual": "residual"}),
        "eco_o_only": len(o_only),
        "eco_o_gl_not": sum(g["verdict"] == "not" for _, g in o_only),
        "o_only_min_gl": broken[0][0] if broken else math.nan,
        "o_only_min_gl_class": broken[0][1] if broken else "",
    }
    rite = lora_rite_rows(rows, followups)
    values["lora_rite_table"] = table_html(
        rite, ["setting", "twin", "verdict", "residual", "moved", "note"],
        headers={"moved": "moved", "note": "why no verdict"}, formats={"moved": ".2g"})
    by_setting = {(r["setting"], r["twin"].split(",")[0]): r for r in rite}
    for tag, name in (("o", GROUP_NAMES["orthogonal"]), ("gl", GROUP_NAMES["general"])):
        default = by_setting.get(("defaults", name))
        values[f"rite_default_{tag}_verdict"] = default["verdict"] if default else ""
    keyed = {r["key"]: r for r in followups}
    for tag, group in (("o", "orthogonal"), ("gl", "general")):
        r = keyed.get(LORA_RITE_KEYS[group])
        values[f"rite_{tag}"] = _residual(r) if r else math.nan
        values[f"rite_{tag}_verdict"] = r["verdict"] if r else ""
    moved = keyed.get(LORA_RITE_KEYS["orthogonal"])
    values["rite_moved"] = moved["moved"] if moved and moved["moved"] is not None else math.nan
    return values


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


def _residual(row: Row) -> float:
    return math.nan if row["residual"] is None else row["residual"]


def verdict_values(records: Mapping[str, Sequence[Row]], rows: Sequence[Row]
                   ) -> dict[str, Any]:
    """The audit's settings (``eco_steps``, the thresholds ``eco_t64``/``eco_t32``, the band
    ``eco_approx``, ``eco_timeout``) and the verdicts of the main audits ``rows``: the count
    table and its counts over both libraries (``n_total`` classes, ``eco_n_not`` break the
    gauge, ``eco_n_kept`` keep it exactly or approximately, ``eco_n_failed`` gave no
    verdict), the kept and failed tables, the names of the broken classes and the smallest and
    median residual among them."""
    counts = count_rows(rows)
    values: dict[str, Any] = {
        "eco_steps": eco.NUM_STEPS, "eco_t64": FLOAT64_THRESHOLD,
        "eco_t32": FLOAT32_THRESHOLD, "eco_approx": eco.APPROXIMATE_BOUND,
        "eco_timeout": records["heavyball"][0]["config"]["timeout_s"], "n_total": len(rows),
        "count_table": table_html(counts, ["library", "classes", *eco.VERDICTS]),
        "eco_n_not": counts[-1]["not"],
        "eco_n_kept": counts[-1]["equivariant"] + counts[-1]["approximately"],
        "eco_n_failed": counts[-1]["could not run"],
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
        investigation_rows(followups),
        ["class", "change", "twin", "verdict", "residual", "dtype"],
        headers={"class": "class (library)", "change": "changed setting"})}
    for r in followups:
        key = r["key"]
        values |= {f"inv_{key}": _residual(r), f"inv_{key}_verdict": r["verdict"],
                   f"inv_{key}_reason": r["reason"] or r["note"] or ""}
    main = {(r["library"], r["optimizer"]): r for r in by_group(rows)["orthogonal"]}
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
            eco.audit_class,
            (lib.module, inv.optimizer, inv.num_steps, inv.kwargs, inv.group, inv.call_train,
             inv.gauge, eco.layout_of(inv.library, inv.optimizer)),
            timeout_s, preload=(lib.module,))
        now = (iso.value or {}).get("result") or {}
        live.append((key, now.get("residual"), recorded[key]))
    return live


#: The gaps δ of the collision audit: the first refresh sees the spectrum (1, (1+δ)², 4).
COLLISION_GAPS: tuple[float, ...] = (0.0, 1e-14, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1e-1)


def collision_residual(factory: Callable[[Any], Any], delta: float) -> float:
    r"""The float64 20-step audit residual of ``factory`` on the linear loss
    :math:`\langle I, UV^\top\rangle` with :math:`U_0` of shape 4 × 3 and :math:`V_0` of
    orthogonal columns of norms :math:`1, 1 + \delta, 2` (fixed seeds 16 and 17, a Haar
    :math:`Q`): the first refresh of the gauge side's statistic sees the spectrum
    :math:`(1, (1 + \delta)^2, 4)`, a collision at ``delta = 0``."""
    f64 = torch.float64
    gen = torch.Generator().manual_seed(16)
    U0 = 0.5 * torch.randn(4, 3, generator=gen, dtype=f64)
    cols, _ = torch.linalg.qr(torch.randn(4, 3, generator=gen, dtype=f64))
    Q = haar_orthogonal(3, generator=torch.Generator().manual_seed(17), dtype=f64)
    eye = torch.eye(4, dtype=f64)
    V0 = cols * torch.tensor([1.0, 1.0 + delta, 2.0], dtype=f64)
    return audit_equivariance(factory, U=U0, V=V0, Q=Q, num_steps=20,
                              loss=lambda U, V: (eye * (U @ V.T)).sum()).residual


def eigen_audit_values(simple: Any, adam_residual: float,
                       collision: Mapping[float, float]) -> dict[str, Any]:
    """EigenAdam's audit on the sensing problem (``simple``, an audit result), Adam's residual
    beside it, the registry's reason, and the collision residuals at δ = 0, 1e-8, 1e-4, 1e-1
    (``collision``: residual by gap)."""
    return {"eigen_simple": simple.residual, "eigen_simple_verdict": simple.verdict,
            "adam_res": adam_residual, "eigen_reason": get_spec("eigen_adam").reason,
            "coll_exact": collision[0.0], "coll_1e-8": collision[1e-8],
            "coll_1e-4": collision[1e-4], "coll_1e-1": collision[1e-1]}


def initial_q_gradients(scale: str = "paper") -> list[torch.Tensor]:
    """The gradient of every layer's :math:`W_Q` at the start of training of the attention
    experiment's first ``single`` family at ``scale`` (its data and init seed), in float64."""
    family = att.get_config(scale).families("single")[0]
    task = family.task
    data = make_modadd_data(task["p"], task["train_frac"], task["split_seed"])
    start = init_params(family.model, generator=torch.Generator().manual_seed(family.init_seed))
    start = {k: v.double().unsqueeze(0).requires_grad_(True) for k, v in start.items()}
    logits = forward(start, data.train_tokens, family.model)
    cross_entropy(logits, data.train_targets).sum().backward()
    layers = sorted(int(k.split(".")[1]) for k in start if k.endswith(".q"))
    return [start[f"layers.{i}.q"].grad[0] for i in layers]


# --------------------------------------------------------------------------------------------
# EigenAdam beside the book's optimizers (records of three experiments)
# --------------------------------------------------------------------------------------------

#: The rows of the comparison: the method's name in the sensing zoo (or ``eigen_adam``) and its
#: name in the attention experiment (Muon's twin runs are Muon + Adam).
COMPARED: dict[str, str] = {"adam": "adam", "scalar_adam": "scalar_adam", "muon": "muon_adam",
                            "eigen_adam": "eigen_adam", "eigen_adam_pooled": "eigen_adam_pooled"}


@dataclass(frozen=True)
class Comparison:
    """EigenAdam beside Adam, shared-scale Adam and Muon, read from committed records.

    ``rows``: one per method of :data:`COMPARED`, with ``method`` (its label), ``rec`` and
    ``lr`` (the sensing zoo's oracle selection at the paper's Table 2 protocol; NaN where the
    method was not run there) and the final mean relative drift of the heads' ``W_Qᵀ W_K`` of
    its gauge twin (``gauge``, seed 777), noise twin (``noise``, 1e-7) and float64 gauge twin
    (``gauge64``), each of the base model started from seed 42.
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
        return pick(self.float64, method, "gauge 777")


def eigen_adam_comparison(scale: str = "paper") -> Comparison:
    """The :class:`Comparison` of the committed records at ``scale`` (read only)."""
    ebc = eb.collect(scale, mode="read")
    zoo_records = ms.collect(scale, parts=["zoo"], mode="read").records["zoo"]
    zoo = {r["method"]: r for r in ms.selection_rows(zoo_records, "oracle")}
    base = att.collect(scale, parts=["single", "float64"], mode="read")

    def runs(collected: Any, *parts: str) -> list[Row]:
        return [row for part in parts for row in run_rows(collected.records[part])]

    twins = runs(base, "single") + runs(ebc, "attention", "attention_pooled")
    f64 = runs(base, "float64") + runs(ebc, "attention_float64", "attention_float64_pooled")
    sensing = eb.sensing_row(ebc.records["sensing"]) if ebc.records["sensing"] else None

    def drift(rows: Sequence[Row], method: str, twin: str) -> float:
        row = pick(rows, method, twin)
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
            "gauge": drift(twins, twin_method, "gauge 777"),
            "noise": drift(twins, twin_method, "noise 1e-07"),
            "gauge64": drift(f64, twin_method, "gauge 777"),
        })
    return Comparison(rows, ebc, sensing, zoo, f64)


def comparison_values(comparison: Comparison) -> dict[str, Any]:
    """What the page quotes of the :class:`Comparison`: its records note (``eb_note``), the
    table, EigenAdam's recovery error (``eigen_rec``) and how many of the other rules with one
    are below it (``eigen_lower`` of ``eigen_others``), the float64 gauge twins (EigenAdam's
    and the pooled variant's final drift, ``cmp_eigen_adam_gauge64``,
    ``cmp_pooled_gauge64``; both twins' logit drift after one step) and EigenAdam's sensing
    selection (``eigen_lr`` on the grid ``eigen_grid``, ``eigen_at_edge``, effective rank,
    steps; NaN without records)."""
    compare, sensing = comparison.rows, comparison.sensing
    eigen = get_spec("eigen_adam").label
    eigen_row = next(r for r in compare if r["method"] == eigen)
    others = [r for r in compare if r is not eigen_row and math.isfinite(r["rec"])]
    g1 = comparison.float64_twin("eigen_adam")
    g1s = comparison.float64_twin("scalar_adam")
    return {
        "eb_note": tables.records_note(comparison.collected),
        "compare_table": table_html(
            compare, ["method", "rec", "lr", "gauge", "noise", "gauge64"],
            headers={"rec": "rec, n = 40", "lr": "selected lr", "gauge": "gauge twin",
                     "noise": "noise twin", "gauge64": "gauge twin, float64"},
            formats={"rec": ".4g", "lr": "g", "gauge": ".2g", "noise": ".2g",
                     "gauge64": ".1e"}),
        "eigen_rec": eigen_row["rec"], "eigen_others": len(others),
        "eigen_lower": sum(r["rec"] < eigen_row["rec"] for r in others),
        "cmp_eigen_adam_gauge64": eigen_row["gauge64"],
        "cmp_pooled_gauge64": compare[-1]["gauge64"],
        "eigen_lr": eigen_row["lr"],
        "eigen_at_edge": bool(sensing and sensing["at_grid_edge"]),
        "eigen_grid": ", ".join(f"{lr:g}" for lr in eb.SENSING_LR_GRID),
        "eigen_eff_rank": sensing["effective_rank"] if sensing else math.nan,
        "eigen_steps": sensing["steps"] if sensing else math.nan,
        "zoo_eff_rank_muon": comparison.zoo["muon"]["effective_rank"],
        "zoo_r": ms.get_config("paper").part("zoo").problem.r,
        "eigen_f64_step1": g1["step1_logit_drift"] if g1 else math.nan,
        "scalar_f64_step1": g1s["step1_logit_drift"] if g1s else math.nan,
    }


def gap_collision(
    gaps: Sequence[float],
    residuals: Sequence[float],
    threshold: float,
) -> Figure:
    """EigenAdam's audit residual against the eigenvalue gap (``gaps[0] == 0`` is the exact
    collision, drawn as a horizontal line), a ``1/δ`` guide through the point at ``δ = 10⁻⁸``
    and the verdict threshold."""
    fig, ax = plt.subplots(figsize=(WIDTH * 0.8, 3.4), layout="constrained")
    color = method_color("eigen_adam")
    pos = [g for g in gaps if g > 0]
    values = [r for g, r in zip(gaps, residuals, strict=True) if g > 0]
    at = values[pos.index(1e-8)]
    ax.loglog(pos, values, "o-", color=color, label="EigenAdam, gap δ")
    ax.axhline(residuals[gaps.index(0.0)], color="k", ls=":", label="δ = 0 (collision)")
    ax.loglog(pos, [at * 1e-8 / g for g in pos], color="0.5", ls="--", lw=1, label="∝ 1/δ")
    ax.axhline(threshold, color="0.6", lw=0.8, label="verdict threshold")
    ax.set(xlabel="eigenvalue gap δ at the refresh", ylabel="audit residual")
    legend_beside(ax)
    return fig
