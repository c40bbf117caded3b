"""Every benchmark of the project in one run, printed as one table of ratios.

    python bench/run.py                  # CPU, full sizes (a few minutes, on an idle machine)
    python bench/run.py --quick          # smoke run on small sizes (< 1 min)
    python bench/run.py --device cuda    # on a GPU (default: cpu)
    python bench/run.py --book           # also time the quick-scale book build (slow)
    python -m bench --quick              # the same command
    python bench/run.py --only zoo --reference ../loss-basis-adam   # the zoo vs the paper's script
    python bench/run.py --only zoo --reference ../loss-basis-adam --zoo-rounds 3   # alternating

Each row is a measured time and a baseline measured in the same run, on the same machine, with
the same threads; the ratio is ``time / baseline`` (below 1: faster than the baseline), except
the speed-up rows (``batched`` against ``alone``), whose ratio is ``alone / batched``.
Optimizer steps are timed in interleaved rounds (median), so that drifts of a shared machine hit
every variant alike; only ``step()`` is timed, on fixed gradients. glibc is asked to keep freed
memory in the process (:func:`bench_flow_adam.keep_freed_memory`): otherwise the temporaries of a
step fault in fresh pages, and step times move by 2-3x with the order of the variants.

Rows:
* ``sweep``: the paper's matrix-sensing zoo runs (first ``--steps`` steps), batched into one stack
  vs one run at a time (:func:`gaugebook.engine.factor_trainer.train_factored_batch`);
* ``attention``: the attention twins trained as one batch vs one model at a time (per model
  trained: a twin trained alone trains its base too);
* ``step <name>``: one step of every optimizer of the registry (and the FlowAdam variants of
  ``bench/bench_flow_adam.py``) against ``torch.optim.Adam`` with ``foreach=True`` and with
  ``fused=True``, on ~10M float32 parameters (``--quick``: ~0.2M), with one floor that is not
  an optimizer: the one ``log`` and one ``exp`` per entry that FlowAdam needs at ``p ∉ {0, 1}``;
* ``zoo``: the whole matrix-sensing zoo part (108 runs at paper scale, ``--quick``: quick scale)
  through the sweep CLI with ``--workers`` processes, into a temporary folder; with
  ``--reference DIR`` (a checkout of the paper's code, ``idevender/loss-basis-adam``) also the
  paper's own script ``experiments/optimizer_zoo_bias.py``, timed in the same run (the speed-up
  is script / ours); ``--zoo-rounds N`` alternates the two N times (medians, and the speed-up
  of each round: on a shared machine whose speed drifts, one round of each can be off by 1.5x);
* ``book`` (``--book``): the wall time of a quick-scale book build (no baseline).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from gaugebook.engine.settings import cpu_model

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flow_adam import keep_freed_memory, median_step_times  # noqa: E402
from bench_flow_adam import variants as flow_adam_variants  # noqa: E402

Factory = Callable[[list[Tensor]], torch.optim.Optimizer]


@dataclass(frozen=True)
class Sizes:
    """What each benchmark runs; :data:`FULL` and :data:`QUICK` are the two presets."""

    sweep_runs: int | None  # first N runs of the paper zoo (None: all 108)
    sweep_steps: int
    attention_steps: int
    attention_models: int | None
    step_tensors: int  # optimizer-step benchmarks: tensors of shape (stack, side, side)
    step_stack: int
    step_side: int
    flow_rows: int  # FlowAdam: tensors of shape (flow_rows, flow_rows), as bench_flow_adam
    rounds: int
    steps: int
    warmup: int
    zoo_scale: str  # scale of the whole-zoo row


FULL = Sizes(None, 300, 50, None, 10, 256, 64, 1024, 5, 3, 12, "paper")
QUICK = Sizes(18, 40, 5, 2, 4, 8, 32, 128, 3, 2, 12, "quick")


@dataclass
class Row:
    group: str
    name: str
    seconds: float
    baselines: dict[str, float]  # label -> seconds
    speedup: bool = False  # ratio = baseline / seconds
    note: str = ""  # printed under the table

    def ratios(self) -> dict[str, float]:
        if self.speedup:
            return {k: v / self.seconds for k, v in self.baselines.items()}
        return {k: self.seconds / v for k, v in self.baselines.items()}


def _sync(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _timed(fn: Callable[[], object], device: torch.device) -> float:
    sync = _sync(device)
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------ batched runs
def sweep_row(sizes: Sizes, device: torch.device) -> Row:
    """The paper zoo's runs (step budget cut to ``sweep_steps``) batched vs one at a time."""
    from gaugebook.engine.factor_trainer import train_factored_batch
    from gaugebook.sensing import sensing_runs as ms
    from gaugebook.sensing.measurements import SENSING

    part = ms.get_config("paper").part("zoo")
    part = dataclasses.replace(
        part, budget=dataclasses.replace(part.budget, num_steps=sizes.sweep_steps))
    specs = part.specs()[: sizes.sweep_runs]
    batched = _timed(lambda: train_factored_batch(specs, SENSING, device=device), device)
    alone = _timed(lambda: [train_factored_batch([s], SENSING, device=device) for s in specs],
                   device)
    return Row("sweep", f"sensing zoo, {len(specs)} runs x {sizes.sweep_steps} steps: batched",
               batched, {"alone": alone}, speedup=True)


def attention_row(sizes: Sizes, device: torch.device) -> Row:
    """The attention twins of one family trained as one batch vs one model at a time."""
    from gaugebook.attention import attention_runs as att

    family = next(f for f in att.get_config("paper").families("single") if f.method == "adam")
    family = dataclasses.replace(family, num_steps=sizes.attention_steps,
                                 checkpoints=(0, sizes.attention_steps))
    specs = family.specs("bench")[: sizes.attention_models]
    batched = _timed(lambda: att.train_twin_batch(specs, device=device), device)
    alone = _timed(lambda: [att.train_twin_batch([s], device=device) for s in specs], device)
    # a twin trained alone also trains its base (the drift is measured against it): compare the
    # time per model trained, not the wall time of the two ways
    trained_alone = sum(1 if s.config["twin"]["kind"] == "base" else 2 for s in specs)
    per_model_alone = alone * len(specs) / trained_alone
    return Row("attention", f"twins, {len(specs)} models x {sizes.attention_steps} steps: batched",
               batched, {"alone": per_model_alone}, speedup=True)


# ---------------------------------------------------------------------------- optimizer steps
def _median_step_times(
    factories: dict[str, Factory], shapes: Sequence[tuple[int, ...]], sizes: Sizes,
    device: torch.device, seed: int = 0,
) -> dict[str, float]:
    """Median seconds per ``step()`` of each factory's optimizer on the same parameters."""
    g = torch.Generator().manual_seed(seed)
    base = [(torch.randn(*s, generator=g) * 0.02).to(device) for s in shapes]
    grads = [[(torch.randn(*s, generator=g) * 1e-3).to(device) for s in shapes]
             for _ in range(2)]
    sync = _sync(device)
    runs = {}
    for label, make in factories.items():
        params = [p.clone().requires_grad_(True) for p in base]
        runs[label] = (params, make(params), [0])

    return median_step_times(runs, grads, warmup=sizes.warmup, rounds=sizes.rounds,
                             steps=sizes.steps, sync=sync)


ADAM_BASELINES: dict[str, Factory] = {
    "Adam foreach": lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True),
    "Adam fused": lambda p: torch.optim.Adam(p, lr=1e-3, fused=True),
}


def zoo_factories(batch_dims: int) -> dict[str, Factory]:
    """Every optimizer of the registry at its defaults, on stacks with ``batch_dims``."""
    from gaugekit.optim.registry import all_specs

    out: dict[str, Factory] = {}
    for spec in all_specs():
        def make(p, spec=spec):
            kwargs = {"batch_dims": batch_dims}
            if spec.paired:  # ScaledGD: consecutive tensors are the pairs (U, V)
                pairs = [{"params": [p[i], p[i + 1]]} for i in range(0, len(p) - 1, 2)]
                return spec.make(pairs, **kwargs)
            return spec.make(p, **kwargs)
        out[f"{spec.name}"] = make
    return out


def step_rows(sizes: Sizes, device: torch.device) -> list[Row]:
    """Each zoo optimizer, then FlowAdam's variants, against torch Adam (foreach, fused)."""
    rows = []
    shapes = [(sizes.step_stack, sizes.step_side, sizes.step_side)] * sizes.step_tensors
    numel = math.prod(shapes[0]) * len(shapes)
    zoo = zoo_factories(batch_dims=1)
    medians = _median_step_times({**ADAM_BASELINES, **zoo}, shapes, sizes, device)
    base = {k: medians[k] for k in ADAM_BASELINES}
    for name in zoo:
        rows.append(Row("step", f"{name} ({numel / 1e6:.2f}M, {len(shapes)}x{shapes[0]})",
                        medians[name], base))
    flow = {k: v for k, v in flow_adam_variants(lr=1e-3).items()
            if "FlowAdam" in k or k.startswith("floor")}
    flow_shapes = [(sizes.flow_rows, sizes.flow_rows)] * 10
    flow_numel = sizes.flow_rows**2 * 10
    medians = _median_step_times({**ADAM_BASELINES, **flow}, flow_shapes, sizes, device)
    base = {k: medians[k] for k in ADAM_BASELINES}
    for name in flow:
        rows.append(Row("step", f"{name} ({flow_numel / 1e6:.2f}M, 10x{flow_shapes[0]})",
                        medians[name], base))
    return rows


# ----------------------------------------------------------------------------- whole zoo
REFERENCE_ZOO_SCRIPT = Path("experiments") / "optimizer_zoo_bias.py"


def _timed_command(command: Sequence[str], cwd: Path | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(list(command), check=True, cwd=cwd, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def reference_script(reference: Path, sizes: Sizes) -> Path:
    """The paper's zoo script in the checkout ``reference``; exits with what is wrong."""
    script = Path(reference) / REFERENCE_ZOO_SCRIPT
    if not script.is_file():
        raise SystemExit(
            f"--reference {reference}: no {REFERENCE_ZOO_SCRIPT} there; expected a checkout "
            "of https://github.com/idevender/loss-basis-adam")
    if sizes.zoo_scale != "paper":
        raise SystemExit("--reference needs the full sizes (drop --quick): the paper's "
                         "script runs the paper-scale zoo")
    return script


def zoo_row(sizes: Sizes, device: torch.device, workers: int,
            reference: Path | None = None, rounds: int = 1) -> Row:
    """The zoo part through the sweep CLI (fresh records folder), and the paper's script.

    With ``rounds > 1`` the two commands alternate (script, ours, script, ours, …): a shared
    machine whose speed drifts over minutes then slows both alike. The row holds the median of
    each, and its note the speed-up of every pair (script / ours, min, median and max)."""
    if rounds < 1:
        raise SystemExit(f"--zoo-rounds {rounds}: expected at least 1")
    script = reference_script(reference, sizes) if reference is not None else None
    ours_s: list[float] = []
    paper_s: list[float] = []
    for _ in range(rounds):
        if script is not None:
            paper_s.append(_timed_command([sys.executable, str(script)], cwd=Path(reference)))
        with tempfile.TemporaryDirectory() as out:
            ours_s.append(_timed_command([
                sys.executable, "-m", "gaugebook", "run", "matrix_sensing", "--scale",
                sizes.zoo_scale, "--part", "zoo", "--workers", str(workers), "--out", out,
                "--device", str(device), "--quiet"]))
    baselines = {"paper script": statistics.median(paper_s)} if paper_s else {}
    note = ""
    if paper_s:
        pairs = sorted(p / o for p, o in zip(paper_s, ours_s, strict=True))
        note = (f"zoo, {rounds} alternating round(s): ours {_seconds_list(ours_s)}, the "
                f"paper's script {_seconds_list(paper_s)}; speed-up per round min "
                f"{pairs[0]:.2f}, median {statistics.median(pairs):.2f}, max {pairs[-1]:.2f}")
    return Row("zoo", f"{sizes.zoo_scale}-scale zoo, {workers} worker(s): the sweep",
               statistics.median(ours_s), baselines, speedup=True, note=note)


def _seconds_list(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.1f}" for v in values) + "] s"


# ------------------------------------------------------------------------------------ book
def book_row() -> Row:
    """Wall time of a quick-scale book build into a temporary folder (no baseline)."""
    root = Path(__file__).resolve().parent.parent
    jb = Path(sys.executable).with_name("jupyter-book")
    env = {**os.environ, "GAUGEKIT_SCALE": "quick"}
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        subprocess.run([str(jb), "build", str(root), "--all", "--path-output", out],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
    return Row("book", "quick-scale book build", wall, {})


# ------------------------------------------------------------------------------------ table
GROUPS = ("sweep", "attention", "step", "zoo")


def build_rows(sizes: Sizes, device: torch.device, *, book: bool = False,
               only: Sequence[str] | None = None, workers: int = 2,
               reference: Path | None = None, zoo_rounds: int = 1) -> list[Row]:
    """Run the benchmarks (``only``: a subset of :data:`GROUPS`) and return the rows."""
    groups = list(only or GROUPS)
    rows: list[Row] = []
    if "sweep" in groups:
        rows.append(sweep_row(sizes, device))
    if "attention" in groups:
        rows.append(attention_row(sizes, device))
    if "step" in groups:
        rows.extend(step_rows(sizes, device))
    if "zoo" in groups:
        rows.append(zoo_row(sizes, device, workers, reference, zoo_rounds))
    if book:
        rows.append(book_row())
    return rows


def format_table(rows: Sequence[Row], device: torch.device) -> str:
    """One table: time, then one ratio column per baseline label (``-`` where none)."""
    labels: list[str] = []
    for row in rows:
        labels.extend(k for k in row.baselines if k not in labels)
    where = cpu_model() if device.type == "cpu" else torch.cuda.get_device_name(device)
    head = (f"{where}; torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s), "
            f"device {device}")
    width = max([len(r.name) for r in rows] + [20])
    cols = "".join(f" {('x ' + k):>15}" for k in labels)
    lines = [head, f"{'group':<10} {'benchmark':<{width}} {'time':>10}{cols}"]
    for row in rows:
        ratios = row.ratios()
        t = f"{row.seconds * 1e3:.2f} ms" if row.seconds < 1 else f"{row.seconds:.2f} s"
        cells = "".join(f" {ratios[k]:>15.2f}" if k in ratios else f" {'-':>15}"
                        for k in labels)
        lines.append(f"{row.group:<10} {row.name:<{width}} {t:>10}{cells}")
    lines.append("ratio = time / baseline (lower is faster); for 'batched' rows it is the "
                 "speed-up alone / batched (higher is better)")
    lines.extend(row.note for row in rows if row.note)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--book", action="store_true", help="also time a quick book build")
    parser.add_argument("--only", action="append", choices=GROUPS,
                        help="run only this group (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the zoo row")
    parser.add_argument("--reference", type=Path, default=None,
                        help="a checkout of idevender/loss-basis-adam: time the paper's zoo "
                        "script too, in the same run")
    parser.add_argument("--zoo-rounds", type=int, default=1,
                        help="rounds of the zoo row, the two commands alternating (median)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    warm = keep_freed_memory()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    sizes = QUICK if args.quick else FULL
    if args.reference is not None:  # before minutes of other benchmarks, not after
        reference_script(args.reference, sizes)
    rows = build_rows(sizes, device, book=args.book, only=args.only,
                      workers=args.workers, reference=args.reference,
                      zoo_rounds=args.zoo_rounds)
    print(format_table(rows, device))
    print(f"freed memory kept in the process (glibc mallopt): {'yes' if warm else 'no'}")


if __name__ == "__main__":
    main()
