"""Paper-scale records on one GPU in a fixed time: the largest part of the suite that fits.

    python bench/gpu_paper_scale.py OUT [--experiment ladder|attention] [--time-limit 540]
                                        [--device cuda] [--dry-run]
    bash bench/gpu_paper_scale.sh OUT [SECONDS]          # the ladder, with a hard stop
    EXPERIMENT=attention bash bench/gpu_paper_scale.sh OUT [SECONDS]   # the attention suite

``--experiment attention`` runs the paper's GPU attention suite instead
(:data:`gaugebook.attention.attention_runs.SUITE_PARTS`, float64: modular addition 4 layers x 128,
the character LM 6 x 256, then modular addition 6 x 256), into ``OUT/results/attention/paper``,
with the same time limit and resumption; each twin family is one batch.

Runs the ladder (:mod:`gaugebook.ladder.ladder_runs`) part by part, one seed of one size per
part, big sizes first: seed 42 of n = 384, 256, 192, 128, 96, 64, 40, then seed 123 of each,
then seed 456, then the rank and m/dof arms at n = 64, seed by seed. Every part goes through the
sweep engine (``run_sweep``), so it resumes: runs already recorded under
``OUT/results/ladder/paper`` are skipped (``OUT = .``: the checkout's committed folder), and a
part's records are appended as soon as its batch ends.

The time limit stops between parts (each part is one batch): after the first part the script
knows its throughput and starts a part only when its estimate fits in the time left; one that
does not is skipped and the next, smaller one is tried. The estimate is the larger of two
extrapolations from the parts done: by the experiment's flop estimate (right when the sensing
products dominate, as at n = 384) and by the step budget (right when the per-step overhead
dominates, as at small n), so it errs on the safe side. Nothing is started once the limit has
passed. The shell wrapper adds a hard stop (``timeout``) a minute after the limit, for a part
that runs far past its estimate: that part's batch is lost, every earlier one is recorded.
Exit status 0 when every part that ran finished ``ok``/``diverged``, 1 when some run ended in
``error``.

Settings printed at the start: device, dtype of the parts (float64, so TF32 does not apply;
float32 matmul precision is set to ``highest`` anyway), torch version.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from gaugebook.attention import attention_runs as attention
from gaugebook.engine.collection import records_dir
from gaugebook.engine.records import finished_run_ids, read_records_dir
from gaugebook.engine.sweep import run_sweep
from gaugebook.ladder import ladder_runs as ladder

SIZES_BIG_FIRST = (384, 256, 192, 128, 96, 64, 40)


#: The attention suite's parts in running order: the cheapest first.
ATTENTION_PLAN = ("suite_mod_small", "suite_text", "suite_mod_large")
EXPERIMENTS = {"ladder": ladder.EXPERIMENT, "attention": attention.EXPERIMENT}


def part_steps(experiment: object, part: str, scale: str) -> int:
    """Training steps of one run of ``part`` (the step-budget extrapolation's unit)."""
    if experiment is attention.EXPERIMENT:
        return max(f.num_steps for f in attention.get_config(scale).families(part))
    return ladder.get_config(scale).part(part).budget.num_steps


def default_plan(scale: str = "paper", experiment: str = "ladder") -> list[str]:
    """Part names in running order: per seed, the sizes big first; then the arms per seed
    (the ladder); :data:`ATTENTION_PLAN` (the attention suite)."""
    if experiment == "attention":
        return list(ATTENTION_PLAN)
    config = ladder.get_config(scale)
    sizes = sorted((p for p in config.arm("size")), key=lambda p: -p.problem.n)
    arms = [*config.arm("rank"), *config.arm("mdof")]
    seeds = config.parts[0].seeds
    plan = [f"{p.name}_s{s}" for s in seeds for p in sizes]
    plan += [f"{p.name}_s{s}" for s in seeds for p in arms]
    return plan


@dataclass
class Outcome:
    """What happened to one part: ``ran``, ``skipped`` (no time, or nothing left) or ``stopped``
    (the limit had passed), with its runs, wall time and estimate."""

    part: str
    action: str
    runs: int = 0
    wall_s: float = 0.0
    estimate_s: float | None = None
    errors: int = 0


def _missing_cost(part: str, scale: str, out: Path,
                  experiment: object = ladder.EXPERIMENT) -> tuple[int, float]:
    """Runs of ``part`` not yet recorded under ``out`` and their estimated cost."""
    done = finished_run_ids(read_records_dir(out))
    specs = [s for s in experiment.specs(part, scale) if s.run_id not in done]
    return len(specs), experiment.batch_cost(specs) if specs else 0.0


def run_plan(
    parts: Sequence[str],
    out: Path,
    time_limit_s: float,
    *,
    scale: str = "paper",
    device: str = "cuda",
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = print,
    sweep: Callable[..., object] = run_sweep,
    experiment: object = ladder.EXPERIMENT,
) -> list[Outcome]:
    """Run ``parts`` of ``experiment`` (the ladder) in order into ``out`` until
    ``time_limit_s`` (see the module docstring); returns one :class:`Outcome` per part."""
    start = clock()
    cost_done = wall_done = steps_done = 0.0
    outcomes = []
    for part in parts:
        left = time_limit_s - (clock() - start)
        todo, cost = _missing_cost(part, scale, out, experiment)
        if todo == 0:
            outcomes.append(Outcome(part, "skipped"))
            log(f"[{clock() - start:6.0f} s] {part}: all runs recorded already")
            continue
        if left <= 0:
            outcomes.append(Outcome(part, "stopped", todo))
            continue
        steps = part_steps(experiment, part, scale)
        estimate = (max(cost * wall_done / cost_done, steps * wall_done / steps_done)
                    if cost_done > 0 else None)
        if estimate is not None and estimate > left:
            outcomes.append(Outcome(part, "skipped", todo, estimate_s=estimate))
            log(f"[{clock() - start:6.0f} s] {part}: skipped, estimated {estimate:.0f} s "
                f"> {left:.0f} s left")
            continue
        guess = "unknown" if estimate is None else f"{estimate:.0f} s"
        log(f"[{clock() - start:6.0f} s] {part}: {todo} runs, estimated {guess}, "
            f"{left:.0f} s left")
        t0 = clock()
        report = sweep(experiment, out, scale=scale, parts=[part], device=device,
                       progress=False, workers=1)
        wall = clock() - t0
        cost_done, wall_done, steps_done = cost_done + cost, wall_done + wall, steps_done + steps
        errors = report.statuses.get("error", 0)
        outcomes.append(Outcome(part, "ran", report.ran, wall, estimate, errors))
        log(f"[{clock() - start:6.0f} s] {part}: {report}")
    stopped = [o.part for o in outcomes if o.action == "stopped"]
    if stopped:
        log(f"time limit {time_limit_s:.0f} s reached; not started: {', '.join(stopped)}")
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path,
                        help="root folder: records go to OUT/results/EXPERIMENT/paper")
    parser.add_argument("--experiment", default="ladder", choices=tuple(EXPERIMENTS),
                        help="the ladder (default) or the attention suite")
    parser.add_argument("--time-limit", type=float, default=540.0,
                        help="seconds after which no part is started (default 540)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", default="paper", choices=("paper", "quick"))
    parser.add_argument("--part", action="append", default=None,
                        help="run these parts in this order instead of the default plan")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = parser.parse_args(argv)

    experiment = EXPERIMENTS[args.experiment]
    out = records_dir(experiment.name, args.scale, args.out)
    plan = args.part or default_plan(args.scale, args.experiment)
    torch.set_float32_matmul_precision("highest")
    print(f"torch {torch.__version__}, device {args.device}, float32 matmul precision "
          f"{torch.get_float32_matmul_precision()}; records -> {out}; time limit "
          f"{args.time_limit:.0f} s; {len(plan)} parts planned", flush=True)
    if args.dry_run:
        for part in plan:
            todo, cost = _missing_cost(part, args.scale, out, experiment)
            print(f"  {part}: {todo} runs to do, cost estimate {cost:.3g} flop")
        return 0
    outcomes = run_plan(plan, out, args.time_limit, scale=args.scale, device=args.device,
                        log=lambda line: print(line, flush=True), experiment=experiment)
    ran = [o for o in outcomes if o.action == "ran"]
    print(f"done: {len(ran)} parts ran ({sum(o.runs for o in ran)} runs, "
          f"{sum(o.wall_s for o in ran):.0f} s): {', '.join(o.part for o in ran) or 'none'}",
          flush=True)
    return 1 if any(o.errors for o in ran) else 0


if __name__ == "__main__":
    sys.exit(main())
