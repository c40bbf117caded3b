"""The two-process side of ``test_distributed.py``: every scenario runs in both gloo workers.

Imported as ``from distributed_support import ...`` (pytest puts this folder on ``sys.path``;
``torch.multiprocessing.spawn`` passes ``sys.path`` on to its children). :func:`worker` runs
every scenario of :data:`SCENARIOS` on both ranks (they draw the same data from seeded
generators), and rank 0 writes ``{scenario: result}`` as JSON; a scenario that raises records
its error instead, so the test names the failing one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.nn.parallel import DistributedDataParallel

from gaugekit.audit.factors import audit_equivariance
from gaugekit.optim import (
    Adafactor,
    Adam,
    EigenAdam,
    FlowAdam,
    GramPreconditioned,
    Lion,
    Muon,
    ScaledGD,
    Shampoo,
    SharedScaleAdam,
)
from gaugekit.optim import distributed as D

DTYPE = torch.float64
WORLD_SIZE = 2
NUM_STEPS = 12
#: uneven row counts on 2 ranks (7 → 4 + 3, 5 → 3 + 2, 3 → 2 + 1). (A dimension of size 1
#: sharded on 2 ranks fails inside DTensor's own sharding propagation of elementwise ops, for
#: any optimizer; not tested here.)
SHAPES: tuple[tuple[int, ...], ...] = ((7, 3), (5, 4), (3,), (3, 2))
MATRIX_SHAPES: tuple[tuple[int, ...], ...] = ((7, 3), (5, 4), (3, 2))
Factory = Callable[[list[Tensor]], torch.optim.Optimizer]
Loss = Callable[[list[Tensor]], Tensor]

#: FlowAdam with a short warm-up so that the flow path fires within NUM_STEPS, and without the
#: non-finite check (its one more all_reduce is counted by ``flow_adam_checked``).
FLOW = {"flow_warmup": 2, "nonfinite": "propagate"}
#: optimizers whose sharded and replicated trajectories are compared with one process.
RULES: dict[str, tuple[Factory, tuple[tuple[int, ...], ...]]] = {
    "shared_scale_adam": (lambda ps: SharedScaleAdam(ps, lr=0.05), SHAPES),
    "flow_adam_invariant": (lambda ps: FlowAdam(ps, lr=0.05, **FLOW), SHAPES),
    "flow_adam_p0.5_geomean_percoord": (
        lambda ps: FlowAdam(
            ps, lr=0.05, precond_power=0.5, precond_scalar="geomean", flow_clip_mode="percoord",
            flow_clip=0.05, **FLOW,
        ),
        SHAPES,
    ),
    "flow_adam_prototype": (lambda ps: FlowAdam.from_preset(ps, "prototype", lr=0.05, **FLOW),
                            SHAPES),
    "flow_adam_p0.25_weight_decay": (
        lambda ps: FlowAdam(ps, lr=0.05, precond_power=0.25, weight_decay=0.1, **FLOW), SHAPES
    ),
    "flow_adam_no_flow": (lambda ps: FlowAdam(ps, lr=0.05, precond_power=0.0, flow=False,
                                              nonfinite="propagate"), SHAPES),
    "flow_adam_checked": (lambda ps: FlowAdam(ps, lr=0.05, flow_warmup=2), SHAPES),
    "adam": (lambda ps: Adam(ps, lr=0.05), SHAPES),
    "lion": (lambda ps: Lion(ps, lr=0.01), SHAPES),
    "adafactor": (lambda ps: Adafactor(ps, lr=0.05), SHAPES),
    # the matrix rules' rows without the non-finite check, to count their gathers alone
    "muon": (lambda ps: Muon(ps, lr=0.05, nonfinite="propagate"), MATRIX_SHAPES),
    "shampoo": (lambda ps: Shampoo(ps, lr=0.05, update_freq=3, nonfinite="propagate"),
                MATRIX_SHAPES),
    "gram": (lambda ps: GramPreconditioned(ps, lr=0.05, damping=1e-2, nonfinite="propagate"),
             MATRIX_SHAPES),
    "scaled_gd": (lambda ps: ScaledGD(ps, lr=0.05, nonfinite="propagate"), ((7, 3), (5, 3))),
    "scaled_gd_sequential": (lambda ps: ScaledGD(ps, lr=0.05, sequential=True,
                                                 nonfinite="propagate"), ((7, 3), (5, 3))),
    "muon_checked": (lambda ps: Muon(ps, lr=0.05), MATRIX_SHAPES),
}
#: the rules whose step reduces over parameters through ``param_sums`` (one all_reduce).
REDUCING = ("shared_scale_adam", "flow_adam_invariant", "flow_adam_p0.5_geomean_percoord",
            "flow_adam_prototype", "flow_adam_p0.25_weight_decay", "flow_adam_no_flow")
#: equivariant rules audited when sharded; Adam is the control the audit must reject.
AUDITED: dict[str, Factory] = {
    "shared_scale_adam": lambda ps: SharedScaleAdam(ps, lr=0.05),
    "flow_adam_invariant": lambda ps: FlowAdam(ps, lr=0.05, **FLOW),
    "muon": lambda ps: Muon(ps, lr=0.05),
    "shampoo": lambda ps: Shampoo(ps, lr=0.05, update_freq=3),
    "gram": lambda ps: GramPreconditioned(ps, lr=0.05, damping=1e-2),
    "scaled_gd": lambda ps: ScaledGD(ps, lr=0.05),
    "adam": lambda ps: Adam(ps, lr=0.05),
}


# --------------------------------------------------------------------------------------------
# a sharded run behind a plain interface
# --------------------------------------------------------------------------------------------


class ShardedRun:
    """An optimizer over DTensor copies of plain parameters, driven like a torch optimizer.

    ``step(closure)`` evaluates the closure on the plain parameters (the same full iterate on
    every rank), lays each gradient out like its DTensor copy (each rank keeps its block, as
    FSDP2's reduce-scatter leaves it), steps the wrapped optimizer on the DTensors and writes
    the full result back into the plain parameters. ``comm_counts`` holds the number of
    collectives of each optimizer step.
    """

    def __init__(
        self, params: list[Tensor], factory: Factory, mesh: DeviceMesh, placements: list
    ) -> None:
        self.plain = params
        self.sharded = [
            torch.nn.Parameter(distribute_tensor(p.detach().clone(), mesh, placements))
            for p in params
        ]
        self.inner = factory(self.sharded)
        self.comm_counts: list[dict[str, int]] = []

    def step(self, closure: Callable[[], Tensor]) -> Tensor:
        loss = closure()
        for p, d in zip(self.plain, self.sharded, strict=True):
            d.grad = distribute_tensor(
                p.grad.detach(), d.device_mesh, d.placements, src_data_rank=None
            )
        with CommDebugMode() as comm:
            self.inner.step()
        self.comm_counts.append({str(op): n for op, n in comm.get_comm_counts().items()})
        with torch.no_grad():
            for p, d in zip(self.plain, self.sharded, strict=True):
                p.copy_(d.full_tensor())
        return loss


def _loss_for(shapes: tuple[tuple[int, ...], ...], seed: int) -> Loss:
    """``L(θ) = ½ Σ_i ‖tanh(θ_i) − T_i‖² + ¼ (Σ_i ‖θ_i‖²)²``: smooth, couples all parameters."""
    gen = torch.Generator().manual_seed(seed)
    targets = [0.8 * torch.rand(s, generator=gen, dtype=DTYPE) - 0.4 for s in shapes]

    def loss(params: list[Tensor]) -> Tensor:
        pairs = zip(params, targets, strict=True)
        fit = sum(0.5 * (torch.tanh(p) - t).square().sum() for p, t in pairs)
        return fit + 0.25 * sum(p.square().sum() for p in params) ** 2

    return loss


def _initial(shapes: tuple[tuple[int, ...], ...], seed: int) -> list[Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen, dtype=DTYPE) for s in shapes]


def _trajectory(
    factory: Factory, start: list[Tensor], loss: Loss, mesh: DeviceMesh | None = None,
    placements: list | None = None,
) -> tuple[list[Tensor], Any]:
    """Iterates (all parameters flattened into one vector, one per step) and the optimizer."""
    params = [p.clone().requires_grad_(True) for p in start]
    if mesh is None:
        opt: Any = factory(params)
    else:
        opt = ShardedRun(params, factory, mesh, placements)

    def closure() -> Tensor:
        with torch.enable_grad():
            for p in params:
                p.grad = None
            value = loss(params)
            value.backward()
        return value

    iterates = []
    for _ in range(NUM_STEPS):
        opt.step(closure)
        iterates.append(torch.cat([p.detach().reshape(-1) for p in params]))
    return iterates, opt


def _residual(runs: list[Tensor], reference: list[Tensor], start: Tensor) -> float:
    """``max_t ‖θ_t − θ_t^ref‖ / ‖θ_t^ref − θ_0‖`` (displacements, as in the audit)."""
    return max(
        ((a - b).norm() / (b - start).norm()).item() for a, b in zip(runs, reference, strict=True)
    )


def _flow_steps(opt: Any) -> int | None:
    inner = getattr(opt, "inner", opt)
    return int(inner.flow_counters()["flow_steps"]) if isinstance(inner, FlowAdam) else None


def _all_reduces(counts: list[dict[str, int]]) -> list[int]:
    return [sum(n for op, n in step.items() if "all_reduce" in op or "allreduce" in op)
            for step in counts]


def _collectives(counts: list[dict[str, int]]) -> list[int]:
    return [sum(step.values()) for step in counts]


# --------------------------------------------------------------------------------------------
# scenarios (each returns a JSON-able dict; both ranks run it)
# --------------------------------------------------------------------------------------------


def scenario_trajectories(mesh: DeviceMesh, rank: int) -> dict[str, Any]:
    """Every rule of RULES: sharded (Shard(0)) and replicated (Replicate()) vs one process; the
    reducing rules also on 2-D meshes (HSDP-like: replicated on one mesh dimension, sharded on
    the other; one of size 1, so reducing over the wrong one is the naive local scalar)."""
    out: dict[str, Any] = {}
    layouts = [("shard", mesh, [Shard(0)]), ("replicate", mesh, [Replicate()])]
    hsdp = [
        ("hsdp_1x2", init_device_mesh("cpu", (1, WORLD_SIZE)), [Replicate(), Shard(0)]),
        ("hsdp_2x1", init_device_mesh("cpu", (WORLD_SIZE, 1)), [Shard(0), Replicate()]),
    ]
    for name, (factory, shapes) in RULES.items():
        start, loss = _initial(shapes, 1), _loss_for(shapes, 2)
        flat0 = torch.cat([p.reshape(-1) for p in start])
        plain, plain_opt = _trajectory(factory, start, loss)
        row: dict[str, Any] = {"flow_steps_plain": _flow_steps(plain_opt)}
        for label, layout_mesh, placements in layouts + (hsdp if name in REDUCING else []):
            runs, opt = _trajectory(factory, start, loss, layout_mesh, placements)
            row[f"{label}_residual"] = _residual(runs, plain, flat0)
            row[f"{label}_flow_steps"] = _flow_steps(opt)
            row[f"{label}_all_reduces"] = _all_reduces(opt.comm_counts)
            row[f"{label}_collectives"] = _collectives(opt.comm_counts)
        out[name] = row
    return out


def scenario_naive_local_reduction(mesh: DeviceMesh, rank: int) -> dict[str, Any]:
    """Negative control: the shard-local scalar (all_reduce disabled) vs one process."""
    out: dict[str, Any] = {}
    real = D._all_reduce_
    D._all_reduce_ = lambda buffer, group: None  # each rank keeps its local sums
    try:
        for name in ("shared_scale_adam", "flow_adam_invariant"):
            factory, shapes = RULES[name]
            start, loss = _initial(shapes, 1), _loss_for(shapes, 2)
            flat0 = torch.cat([p.reshape(-1) for p in start])
            plain, _ = _trajectory(factory, start, loss)
            runs, _ = _trajectory(factory, start, loss, mesh, [Shard(0)])
            out[name] = _residual(runs, plain, flat0)
    finally:
        D._all_reduce_ = real
    return out


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)
    ).to(DTYPE)


def _data_parallel_run(wrap: str, factory: Factory, rank: int, mesh: DeviceMesh) -> dict:
    """A real data-parallel model (FSDP2 ``fully_shard`` or DDP), each rank its half of the
    batch, vs one process on the whole batch: both average the gradients of the two halves."""
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(NUM_STEPS, 8, 5, generator=gen, dtype=DTYPE)
    Y = torch.randn(NUM_STEPS, 8, 3, generator=gen, dtype=DTYPE)
    reference, model = _model(3), _model(3)
    if wrap == "fsdp2":
        fully_shard(model, mesh=mesh)
        trained: torch.nn.Module = model
    else:
        trained = DistributedDataParallel(model)
    opt, ref_opt = factory(list(model.parameters())), factory(list(reference.parameters()))
    start = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    residual, all_reduces, placements = 0.0, [], set()
    half = slice(4 * rank, 4 * rank + 4)
    for t in range(NUM_STEPS):
        opt.zero_grad()
        (trained(X[t, half]) - Y[t, half]).square().mean().backward()
        with CommDebugMode() as comm:
            opt.step()
        counts = {str(op): n for op, n in comm.get_comm_counts().items()}
        all_reduces.append(_all_reduces([counts])[0])
        ref_opt.zero_grad()
        (reference(X[t]) - Y[t]).square().mean().backward()
        ref_opt.step()
        full = torch.cat([D.full(p.detach()).reshape(-1) for p in model.parameters()])
        ref = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
        residual = max(residual, ((full - ref).norm() / (ref - start).norm()).item())
    for p in model.parameters():
        placements.add(repr(tuple(p.placements)) if isinstance(p, DTensor) else "plain")
    return {"residual": residual, "all_reduces": all_reduces, "placements": sorted(placements),
            "flow_steps": _flow_steps(opt)}


#: rules trained on real FSDP2 and DDP models
DATA_PARALLEL = ("shared_scale_adam", "flow_adam_invariant", "flow_adam_prototype")


def scenario_data_parallel(mesh: DeviceMesh, rank: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wrap in ("fsdp2", "ddp"):
        for name in DATA_PARALLEL:
            out[f"{wrap}/{name}"] = _data_parallel_run(wrap, RULES[name][0], rank, mesh)
    return out


def scenario_audit(mesh: DeviceMesh, rank: int) -> dict[str, Any]:
    """The equivariance audit of each rule run sharded (Shard(0) on the rows of U and V)."""
    out: dict[str, Any] = {}
    for name, factory in AUDITED.items():
        made: list[ShardedRun] = []

        def sharded(
            params: list[Tensor], factory: Factory = factory, made: list = made
        ) -> ShardedRun:
            made.append(ShardedRun(params, factory, mesh, [Shard(0)]))
            return made[-1]

        result = audit_equivariance(
            sharded, shape=(7, 5, 3), num_steps=NUM_STEPS,
            generator=torch.Generator().manual_seed(11),
        )
        out[name] = {
            "residual": result.residual, "equivariant": result.equivariant,
            "static": result.static, "threshold": result.threshold,
            "flow_steps": [_flow_steps(run) for run in made],
            "sharded": all(D.is_sharded(p) for run in made for p in run.sharded),
        }
    return out


def _error(make: Callable[[], Any]) -> str | None:
    try:
        make()
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def scenario_refusals(mesh: DeviceMesh, rank: int) -> dict[str, Any]:
    """What the distributed path refuses, with the error it gives."""
    stacked = torch.nn.Parameter(distribute_tensor(torch.zeros(2, 4, 3, dtype=DTYPE), mesh,
                                                   [Shard(1)]))
    sharded = torch.nn.Parameter(distribute_tensor(torch.zeros(4, 3, dtype=DTYPE), mesh,
                                                   [Shard(0)]))
    partial = torch.nn.Parameter(
        DTensor.from_local(torch.zeros(4, 3, dtype=DTYPE), mesh, [Partial()], run_check=False)
    )
    return {
        "batch_dims": _error(lambda: SharedScaleAdam([stacked], batch_dims=1)),
        "multi_stage": _error(lambda: FlowAdam([sharded], flow_method="rk4")),
        "partial": _error(lambda: Adam([partial])),
        "euler_accepted": _error(lambda: FlowAdam([sharded], flow_method="euler")),
        "eigen_adam": _error(lambda: EigenAdam([sharded])),
    }


SCENARIOS: dict[str, Callable[[DeviceMesh, int], dict[str, Any]]] = {
    "trajectories": scenario_trajectories,
    "naive": scenario_naive_local_reduction,
    "data_parallel": scenario_data_parallel,
    "audit": scenario_audit,
    "refusals": scenario_refusals,
}


def worker(rank: int, init_method: str, out_path: str) -> None:
    """One gloo rank: run every scenario, rank 0 writes the results to ``out_path``."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=init_method, rank=rank, world_size=WORLD_SIZE,
        timeout=timedelta(seconds=120),
    )
    try:
        mesh = init_device_mesh("cpu", (WORLD_SIZE,))
        results: dict[str, Any] = {}
        for name, scenario in SCENARIOS.items():
            try:
                results[name] = scenario(mesh, rank)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            dist.barrier()
        if rank == 0:
            with open(out_path, "w") as fh:
                json.dump(results, fh, allow_nan=True)
    finally:
        dist.destroy_process_group()
