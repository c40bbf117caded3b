"""Benchmark: the matrix-sensing zoo batched vs one run at a time, in one process.

    python bench/bench_sweep.py                 # paper-scale zoo runs, first 1000 steps each
    python bench/bench_sweep.py --steps 500 --runs 36
    python bench/bench_sweep.py --zoo --workers 2   # also time the whole paper-scale zoo

Both modes train the same runs with the same code
(:func:`gaugebook.engine.factor_trainer.train_factored_batch`): *batched* trains all of them
as one stack, *alone* calls it once per run. The step budget is cut to ``--steps`` (runs that
interpolate earlier stop earlier, as in the real sweep), so the ratio measures batching, not a
different amount of work; the printed run-steps/s counts the optimizer steps really taken.
``--zoo`` runs the full paper-scale zoo (108 runs, budget 20,000 steps) through the sweep runner
into a temporary folder and prints its wall time. Set ``OMP_NUM_THREADS`` to fix the threads.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

import torch

from gaugebook.engine.factor_trainer import train_factored_batch
from gaugebook.engine.sweep import run_sweep
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.measurements import SENSING


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="step budget per run")
    parser.add_argument("--runs", type=int, default=None, help="first N runs of the zoo")
    parser.add_argument("--zoo", action="store_true", help="also time the full paper-scale zoo")
    parser.add_argument("--workers", type=int, default=1, help="workers for --zoo")
    args = parser.parse_args()

    part = ms.get_config("paper").part("zoo")
    part = dataclasses.replace(part, budget=dataclasses.replace(part.budget,
                                                                num_steps=args.steps))
    specs = part.specs()[: args.runs]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{len(specs)} paper-zoo runs, budget {args.steps} steps")

    batched, t_batched = timed(lambda: train_factored_batch(specs, SENSING))
    steps_b = sum(r.metrics.get("steps") or 0 for r in batched)
    alone, t_alone = timed(lambda: [train_factored_batch([s], SENSING)[0] for s in specs])
    steps_a = sum(r.metrics.get("steps") or 0 for r in alone)
    same = sum(a.metrics == b.metrics for a, b in zip(alone, batched, strict=True))

    print(f"batched: {t_batched:7.2f} s  {len(specs) / t_batched:7.2f} runs/s  "
          f"{steps_b / t_batched:9.0f} run-steps/s")
    print(f"alone  : {t_alone:7.2f} s  {len(specs) / t_alone:7.2f} runs/s  "
          f"{steps_a / t_alone:9.0f} run-steps/s")
    print(f"speed-up batched / alone: {t_alone / t_batched:.2f}x  "
          f"(identical metrics in {same}/{len(specs)} runs)")

    if args.zoo:
        with tempfile.TemporaryDirectory() as folder:
            report, wall = timed(lambda: run_sweep(ms.EXPERIMENT, folder, scale="paper",
                                                   parts=["zoo"], progress=False,
                                                   workers=args.workers))
        print(f"full paper-scale zoo, {args.workers} worker(s): {wall:.1f} s ({report})")


if __name__ == "__main__":
    main()
