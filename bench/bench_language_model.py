"""Benchmark: the language-model comparison's training step, stacked vs one model at a time.

    python bench/bench_language_model.py                 # the paper-scale model, Adam
    python bench/bench_language_model.py --method muon_adam --steps 30 --models 1 2 4 8

For ``B`` models of the comparison (:mod:`gaugebook.lm.lm_runs`, float32),
*stacked*: one stack of parameters trained by one optimizer with ``batch_dims=1``
(:func:`gaugebook.engine.twin_trainer.train_stack`, the experiment's code); *looped*: the same
function called once per model (a stack of one), one after the other. Both see the same
batches. Prints model-steps/s of each and their ratio, and the compute floor: the training
step's floating-point operations (``torch.utils.flop_counter`` on the model) over this CPU's
measured float32 matrix-product rate. ``OMP_NUM_THREADS`` fixes the threads (default 2).
"""

from __future__ import annotations

import argparse
import os

import torch
from bench_attention import matmul_gflops

from gaugebook.engine import transformer as A
from gaugebook.engine import twin_trainer as tt
from gaugebook.engine.settings import cpu_model
from gaugebook.lm import lm_runs as lm


def flops_per_model_step(config: lm.LMConfig) -> float:
    """Operations of one model's training step (forward and backward on one batch)."""
    from torch.utils.flop_counter import FlopCounterMode

    shape = config.model
    params = A.init_params(shape, generator=torch.Generator().manual_seed(0))
    module = A.PaperTransformer(shape, params)
    tokens = torch.randint(0, shape.vocab, (config.task["batch_size"], shape.seq_len))
    with FlopCounterMode(display=False) as counter:
        logits = module(tokens)
        torch.nn.functional.cross_entropy(logits.reshape(-1, shape.num_classes),
                                          tokens.reshape(-1)).backward()
    return float(counter.get_total_flops())


def time_stack(config: lm.LMConfig, method: str, seeds: list[int], steps: int,
               task: tt.TwinTask) -> float:
    """Seconds to train ``seeds`` as one stack for ``steps`` steps (no evaluation)."""
    lr = lm.LR_GRIDS[method][len(lm.LR_GRIDS[method]) // 2]
    hp = lm.method_hparams(method, lr, config.model.d_head)
    trace = tt.train_stack(
        shape=config.model, task=task, method=method, hparams=[hp] * len(seeds),
        init_seeds=seeds, twins=[{"kind": "base"}] * len(seeds),
        base_of=list(range(len(seeds))), num_steps=steps, checkpoints=[steps],
        dtype=torch.float32, device=torch.device("cpu"))
    return trace.wall_time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="adam", choices=lm.METHODS)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--models", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--scale", default="paper", choices=("paper", "quick"))
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    config = lm.get_config(args.scale)
    task = tt.TwinTask(config.task, args.steps, torch.device("cpu"))
    flops = flops_per_model_step(config)
    peak = matmul_gflops(1024, 1024, 1024)
    floor = flops / (peak * 1e9)
    print(f"{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
          f"{config.model.num_layers} layers x {config.model.d_model}, context "
          f"{config.model.seq_len}, batch {config.task['batch_size']}; {args.method}, "
          f"{args.steps} steps")
    print(f"training step: {flops / 1e9:.3f} GFLOP; matmul rate {peak:.1f} GFLOP/s; floor "
          f"{1000 * floor:.1f} ms/model-step = {1 / floor:.1f} model-steps/s")
    time_stack(config, args.method, [0], 3, task)  # warm-up
    print(f"{'models':>6} {'stacked':>12} {'looped':>12} {'stacked/looped':>15} "
          f"{'stacked/floor':>14}")
    for b in args.models:
        seeds = list(range(b))
        stacked = time_stack(config, args.method, seeds, args.steps, task)
        looped = sum(time_stack(config, args.method, [s], args.steps, task) for s in seeds)
        rate_s, rate_l = b * args.steps / stacked, b * args.steps / looped
        print(f"{b:>6} {rate_s:>10.1f}/s {rate_l:>10.1f}/s {rate_s / rate_l:>14.2f}x "
              f"{rate_s * floor:>13.2f}")


if __name__ == "__main__":
    main()
