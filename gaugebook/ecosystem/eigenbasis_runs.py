r"""The eigenbasis Adam (:class:`gaugekit.optim.EigenAdam`) on the book's two tests of
the gauge — recovery on the matrix-sensing zoo protocol, and the attention twins' drift.

Nothing here trains anything itself: the runs are specs of the two existing experiments, trained
by their own loops (:func:`gaugebook.engine.factor_trainer.train_factored_batch` and
:func:`gaugebook.attention.attention_runs.train_twin_batch`), so a number here is comparable with
theirs. The records live under ``results/eigenbasis/<scale>`` (one file per part).

``sensing``    Table 2's protocol at the paper's setting (n = 40, r = 3, k = 40, m = 462,
               20,000 steps, tol 1e-7, seeds 42, 123, 456, constant lr) for ``eigen_adam`` on
               the grid :data:`SENSING_LR_GRID` (the registry's defaults otherwise: β = (0.9,
               0.999), ε = 1e-8, β_R = 0.95, refresh every 10 steps). Quick scale: the matrix
               sensing experiment's quick problem and budget.
``attention``  the ``single`` family of the attention experiment (modular addition, init seed
               42, 1,500 steps, float32) for ``eigen_adam``: EigenAdam with ``side="left"``
               (the head gauge acts on the rows of ``W_Q, W_K``) on the blocks' matrices, Adam
               on the rest, both at Adam's lr 1e-3 (not tuned); twins base, ``A = I``, gauge
               777, noise 1e-7 and 1e-5. Quick scale: the attention experiment's 60 steps.
``attention_float64``  the same in float64 (the attention experiment's ``float64`` family:
               100 steps, base, ``A = I``, gauge): the drift left by round-off alone.
``attention_pooled``, ``attention_float64_pooled``  the same two with ``cluster_tol = 1e-4``
               (one second moment per cluster of eigenvalues closer than 1e-4 λ₁): layer 0's
               ``W_Q, W_K`` gradients have rank 49 of 64 at the start, a 15-fold collision.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

import torch

from gaugebook.attention import attention_runs as att
from gaugebook.engine import collection
from gaugebook.engine.spec import RunResult, RunSpec
from gaugebook.sensing import sensing_runs as ms

NAME = "eigenbasis"
METHOD = "eigen_adam"
#: the lr grid of the sensing part: shared-scale Adam's grid (an Adam-like rule), extended by
#: 0.1 and 0.3 after the first sweep selected its upper edge
SENSING_LR_GRID: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3)


#: part → (attention experiment's family, method)
_ATTENTION_PARTS: dict[str, tuple[str, str]] = {
    "attention": ("single", METHOD),
    "attention_float64": ("float64", METHOD),
    "attention_pooled": ("single", "eigen_adam_pooled"),
    "attention_float64_pooled": ("float64", "eigen_adam_pooled"),
}


class EigenbasisComparison:
    """EigenAdam's runs on the sensing zoo and the attention twins, as one sweep experiment."""

    name = NAME
    description = "the eigenbasis Adam on Table 2's protocol and on the attention twins"

    def parts(self, scale: str) -> tuple[str, ...]:
        return ("sensing", *_ATTENTION_PARTS)

    def specs(self, part: str, scale: str) -> list[RunSpec]:
        if part == "sensing":
            zoo = ms.get_config(scale).part("zoo")
            return ms.Part("sensing", "EigenAdam on Table 2's protocol", zoo.problem, zoo.budget,
                           zoo.seeds, (METHOD,), {METHOD: SENSING_LR_GRID},
                           {METHOD: "constant"}).specs()
        if part in _ATTENTION_PARTS:  # the attention family's Adam runs, with another method
            family, method = _ATTENTION_PARTS[part]
            adam = next(f for f in att.get_config(scale).families(family) if f.method == "adam")
            return replace(adam, method=method, hparams=None).specs(part)
        raise ValueError(f"Invalid part: {part!r}; expected one of {self.parts(scale)}")

    def batch_key(self, spec: RunSpec) -> Hashable:
        if spec.config.get("kind") == "twin":
            return ("twin", att.EXPERIMENT.batch_key(spec))
        return ("sensing", ms.EXPERIMENT.batch_key(spec))

    def run_batch(self, specs: Sequence[RunSpec], *, device: torch.device,
                  progress: bool) -> list[RunResult]:
        if specs[0].config.get("kind") == "twin":
            return att.train_twin_batch(specs, device=device, progress=False)
        return ms.EXPERIMENT.run_batch(specs, device=device, progress=progress)


EXPERIMENT = EigenbasisComparison()


#: The records of both parts: committed at paper scale (read), afresh at quick scale.
collect = collection.collector(EXPERIMENT, allow_missing=True)


def sensing_row(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Table 2's oracle selection row of the method (``matrix_sensing.selection_rows``)."""
    return ms.selection_rows(records, "oracle")[0]
