r"""The ecosystem appendix's EigenAdam sections: its audit where the gauge side's spectrum
collides (:func:`collision_residual`), the gradients its eigenbasis starts from in the attention
model (:func:`initial_q_gradients`), and its :class:`Comparison` with Adam, shared-scale Adam and
Muon, read from the committed records of the sensing zoo, the attention twins and
:mod:`gaugekit.experiments.eigenbasis`.
"""

# Developer note (layers, gaugekit/__init__.py): floor 9, report/, on experiments/.

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gaugekit.audit.factors import FLOAT64_THRESHOLD, audit_equivariance
from gaugekit.experiments import attention as att
from gaugekit.experiments import eigenbasis as eb
from gaugekit.experiments import matrix_sensing as ms
from gaugekit.gauge import haar_orthogonal
from gaugekit.optim import get_spec
from gaugekit.problems.attention import cross_entropy, forward, init_params, make_modadd_data
from gaugekit.report.attention_summary import pick, run_rows
from gaugekit.report.tables import Row, as_markdown, join_words, records_note, table_html

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
    """What the page says of the :class:`Comparison`: its records note (``eb_note``), the
    table, how EigenAdam's recovery error ranks, the float64 twins (EigenAdam's, the pooled
    variant's against round-off, and both twins' logit drift after one step) and EigenAdam's
    sensing selection (grid, edge, effective rank, steps; NaN without records)."""
    compare, sensing = comparison.rows, comparison.sensing
    eigen = get_spec("eigen_adam").label
    eigen_row = next(r for r in compare if r["method"] == eigen)
    beaten = [r["method"] for r in compare if r["rec"] < eigen_row["rec"]]
    g1 = comparison.float64_twin("eigen_adam")
    g1s = comparison.float64_twin("scalar_adam")
    return {
        "eb_note": records_note(comparison.collected),
        "compare_table": table_html(
            compare, ["method", "rec", "lr", "gauge", "noise", "gauge64"],
            headers={"rec": "rec, n = 40", "lr": "selected lr", "gauge": "gauge twin",
                     "noise": "noise twin", "gauge64": "gauge twin, float64"},
            formats={"rec": ".4g", "lr": "g", "gauge": ".2g", "noise": ".2g",
                     "gauge64": ".1e"}),
        "eigen_rec_sentence": as_markdown(f"larger than that of {join_words(beaten)}" if beaten
                                       else "not larger than that of the other rules"),
        "cmp_eigen_adam_gauge64": eigen_row["gauge64"],
        "pooled_f64_sentence": as_markdown(
            "down to round-off" if compare[-1]["gauge64"] <= FLOAT64_THRESHOLD
            else "down, but not to round-off"),
        "eigen_lr_edge": "yes" if sensing and sensing["at_grid_edge"] else "no",
        "eigen_grid": ", ".join(f"{lr:g}" for lr in eb.SENSING_LR_GRID),
        "eigen_eff_rank": sensing["effective_rank"] if sensing else math.nan,
        "eigen_steps": sensing["steps"] if sensing else math.nan,
        "zoo_eff_rank_muon": comparison.zoo["muon"]["effective_rank"],
        "zoo_r": ms.get_config("paper").part("zoo").problem.r,
        "eigen_f64_step1": g1["step1_logit_drift"] if g1 else math.nan,
        "scalar_f64_step1": g1s["step1_logit_drift"] if g1s else math.nan,
    }
