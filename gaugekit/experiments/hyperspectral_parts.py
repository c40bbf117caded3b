"""The parts of :mod:`gaugekit.experiments.hyperspectral` (which is where to import them from):
the matrix protocol and step budget of a part, its runs (:class:`Part`), the arms and scene plans
that lay a scene's parts out, and the configuration of one scale (:class:`ScaleConfig`)."""

# Developer note (layers, gaugekit/__init__.py): floor 8, experiments/, on train/ and runs/.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gaugekit.data.scene_refs import DENSITY_LABELS, SceneRef
from gaugekit.data.scenes import available_scenes
from gaugekit.problems import hyperspectral as hp
from gaugekit.runs.matched_loss import THRESHOLDS
from gaugekit.runs.spec import RunSpec

NAME = "hyperspectral"
#: Hyperparameters besides ``lr`` (pinned, so that a registry default cannot change run ids).
PAPER_HPARAMS: dict[str, dict[str, Any]] = {
    "gd": {},
    "adam": {"betas": (0.9, 0.999), "eps": 1e-8},
    "scalar_adam": {"betas": (0.9, 0.999), "eps": 1e-8},
    "muon": {"momentum": 0.9, "nesterov": False, "ns_steps": 5, "eps": 1e-7},
}


@dataclass(frozen=True)
class MatrixProtocol:
    """Rows kept (``None``: all), their generator seed, factor rank, initial scale, the rank
    whose degrees of freedom set the densities (24 in the paper), and the arithmetic of the
    data steps (``data_dtype``: ``"float32"`` is the paper's script, see
    :mod:`gaugekit.problems.hyperspectral`)."""

    num_rows: int | None = hp.NUM_ROWS
    row_seed: int = hp.MATRIX_SEED
    rank: int = hp.FACTOR_RANK
    init_scale: float = hp.INIT_SCALE
    dof_rank: int = hp.DOF_RANK
    data_dtype: str = "float64"

    def rows_for(self, scene: SceneRef) -> int:
        return scene.pixels if self.num_rows is None else min(self.num_rows, scene.pixels)


@dataclass(frozen=True)
class Budget:
    """Step budget, matched-loss thresholds (descending), check period, divergence bar."""

    num_steps: int = 30_000  # the paper's budget
    thresholds: tuple[float, ...] = THRESHOLDS
    check_every: int = 100
    diverge_above: float = 1e6

    def to_config(self) -> dict[str, Any]:
        return {
            "num_steps": self.num_steps, "tol": self.thresholds[-1],
            "check_every": self.check_every, "diverge_above": self.diverge_above,
            "record_at": list(self.thresholds), "stop_at_last_threshold": True,
        }


@dataclass(frozen=True)
class Part:
    """One sweep: methods × lr grid × seeds on one scene, density and centring."""

    name: str
    description: str
    scene: SceneRef
    density_label: str
    density: float
    centring: str
    methods: tuple[str, ...]
    lr_grids: Mapping[str, tuple[float, ...]]
    seeds: tuple[int, ...]
    matrix: MatrixProtocol
    budget: Budget
    dtype: str = "float32"
    #: how records are read for selection and comparison (:mod:`~gaugekit.runs.matched_loss`)
    rule: str = "ours"
    #: the rates a selection may choose per method (``None``: every rate run)
    selection_grids: Mapping[str, tuple[float, ...]] | None = None

    @property
    def num_rows(self) -> int:
        return self.matrix.rows_for(self.scene)

    @property
    def ratio(self) -> float:
        """``m / dof₂₄`` of this density (expected observed entries over degrees of freedom)."""
        return hp.sample_ratio(self.density, self.num_rows, self.scene.bands,
                                    self.matrix.dof_rank)

    @property
    def paper_protocol(self) -> bool:
        """Whether the part follows the paper's script step by step (leaky centring, float64
        dynamics, float32 data steps): the part compared with the published table."""
        return (self.centring == "all" and self.dtype == "float64"
                and self.matrix.data_dtype == "float32")

    def problem(self) -> dict[str, Any]:
        out = {
            "kind": "hyperspectral", "scene": dict(self.scene.config),
            "num_rows": self.num_rows, "row_seed": self.matrix.row_seed,
            "density": self.density, "centring": self.centring, "rank": self.matrix.rank,
            "init_scale": self.matrix.init_scale,
        }
        if self.matrix.data_dtype != "float64":  # absent in the records made before the key
            out["data_dtype"] = self.matrix.data_dtype
        return out

    def specs(self) -> list[RunSpec]:
        """The runs of the part, ordered method, lr, seed."""
        problem, budget = self.problem(), self.budget.to_config()
        return [
            RunSpec(NAME, self.name, {
                "kind": "factored", "problem": problem, "method": method,
                "hparams": {**PAPER_HPARAMS[method], "lr": float(lr)}, "schedule": "constant",
                "budget": budget, "seed": seed, "dtype": self.dtype,
            }, {"mask": seed + hp.MASK_SEED_OFFSET, "init": seed + hp.INIT_SEED_OFFSET,
                "rows": self.matrix.row_seed})
            for method in self.methods for lr in self.lr_grids[method] for seed in self.seeds
        ]


@dataclass(frozen=True)
class Arm:
    """One family of parts of a scene: the part-name ``suffix`` (``""``: the main part), band
    centring, run dtype, and the methods, seeds and density labels it runs (``None``: all of
    the config's)."""

    suffix: str
    centring: str = "observed"
    dtype: str = "float32"
    methods: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    densities: tuple[str, ...] | None = None
    label: str = ""


@dataclass(frozen=True)
class ScenePlan:
    """A scene's own protocol where it differs from the config's: its arms, lr grids, step
    budget and matrix protocol (``None``: the config's), and how its records are read: the
    reading ``rule`` and the rates a selection may choose (``selection_grids``)."""

    arms: tuple[Arm, ...]
    lr_grids: Mapping[str, tuple[float, ...]] | None = None
    budget: Budget | None = None
    matrix: MatrixProtocol | None = None
    rule: str = "ours"
    selection_grids: Mapping[str, tuple[float, ...]] | None = None


@dataclass(frozen=True)
class ScaleConfig:
    """The experiment at one scale. ``scenes``: the candidates (registered ones count only when
    their file is present); ``matrices``: a :class:`MatrixProtocol` per scene name (default
    ``matrix``); ``plans``: a :class:`ScenePlan` per scene name whose protocol differs;
    ``f64_scene``/``f64_seeds``: the float64 spot check on that scene's low density (default
    scene: the first of ``scenes``; ``f64_seeds=()``: none); ``persist_records``: keep records
    under ``results/`` (paper) or recompute them in a temporary folder (quick)."""

    scale: str
    scenes: tuple[SceneRef, ...]
    matrix: MatrixProtocol
    budget: Budget
    methods: tuple[str, ...]
    lr_grids: Mapping[str, tuple[float, ...]]
    selection_seeds: tuple[int, ...]
    eval_seeds: tuple[int, ...]
    leak_methods: tuple[str, ...]
    persist_records: bool
    matrices: Mapping[str, MatrixProtocol] = field(default_factory=dict)
    f64_seeds: tuple[int, ...] = ()
    plans: Mapping[str, ScenePlan] = field(default_factory=dict)
    f64_scene: str | None = None

    def present_scenes(self) -> tuple[SceneRef, ...]:
        """The scenes that can run here: synthetic and file scenes, and registered scenes
        whose file is in the data folder."""
        have = set(available_scenes())
        return tuple(s for s in self.scenes
                     if s.config.get("source") != "registry" or s.name in have)

    def _arms(self, scene: SceneRef) -> tuple[Arm, ...]:
        if scene.name in self.plans:
            return self.plans[scene.name].arms
        arms = [Arm("")]
        if self.leak_methods:
            arms.append(Arm("_leak", centring="all", methods=self.leak_methods,
                            label="leaky centring"))
        f64_scene = self.f64_scene or (self.scenes[0].name if self.scenes else None)
        if scene.name == f64_scene and self.f64_seeds:
            arms.append(Arm("_f64", dtype="float64", seeds=self.f64_seeds,
                            densities=DENSITY_LABELS[:1], label="float64 spot check"))
        return tuple(arms)

    def scene_parts(self, scene: SceneRef) -> tuple[Part, ...]:
        """The parts of one scene, arm by arm within each density."""
        plan = self.plans.get(scene.name)
        matrix = (plan and plan.matrix) or self.matrices.get(scene.name, self.matrix)
        grids = (plan and plan.lr_grids) or self.lr_grids
        budget = (plan and plan.budget) or self.budget
        seeds = tuple(dict.fromkeys((*self.selection_seeds, *self.eval_seeds)))
        n = matrix.rows_for(scene)
        out: list[Part] = []
        for label in scene.densities:
            ratio = hp.DENSITY_RATIOS[DENSITY_LABELS.index(label)]
            rho = hp.density_for_ratio(ratio, n, scene.bands, matrix.dof_rank)
            base = f"{scene.label}, density {rho:g} (m/dof ≈ {ratio:g})"
            for arm in self._arms(scene):
                if arm.densities is not None and label not in arm.densities:
                    continue
                out.append(Part(
                    f"{scene.name}_{label}{arm.suffix}",
                    base + (f", {arm.label}" if arm.label else ""), scene, label, rho,
                    arm.centring, arm.methods or self.methods, grids, arm.seeds or seeds,
                    matrix, budget, arm.dtype, plan.rule if plan else "ours",
                    plan.selection_grids if plan else None))
        return tuple(out)

    def parts(self, present_only: bool = True) -> tuple[Part, ...]:
        """The parts of the scenes that can run here (``present_only``) or of every scene."""
        scenes = self.present_scenes() if present_only else self.scenes
        return tuple(p for scene in scenes for p in self.scene_parts(scene))

    def part(self, name: str) -> Part:
        """The part called ``name``, whether or not its scene's file is here."""
        parts = {p.name: p for p in self.parts(present_only=False)}
        if name not in parts:
            raise ValueError(f"Invalid part: {name!r}; expected one of {list(parts)}")
        return parts[name]
