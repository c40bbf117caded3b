"""Benchmark: attention twins trained as one batch vs one model at a time, in one process.

    python bench/bench_attention.py                # Adam's single family, 100 full-batch steps
    python bench/bench_attention.py --steps 200 --method scalar_adam --vmap

Three ways to train the same five models (base, A = I, gauge, noise 1e-7, noise 1e-5) of the
paper's modular-addition model, float32, full batch: *batched* — one stack of parameters,
batched matrix products, one optimizer with ``batch_dims=1``
(:func:`gaugebook.attention.attention_runs.train_twin_batch`, the experiment's code); *alone* — the
same function called once per model (a batch of one); with ``--vmap`` also *vmap* —
``torch.func.vmap`` of ``torch.func.grad`` over the ``PaperTransformer`` module
via ``functional_call``, the same optimizer. Throughput is model-steps/s (one model, one
optimizer step); the reference script of the paper does 45 model-steps/s on a 2-core AMD EPYC
machine and 23.5 on a 2-core Intel Xeon one (its single run: 15,000 model-steps). Set
``OMP_NUM_THREADS`` (default here: 2 threads) to fix the threads.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from gaugebook.attention import attention_runs as att
from gaugebook.engine import transformer as A
from gaugebook.engine import twin_trainer as tt
from gaugebook.engine.settings import cpu_model


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def flops_per_model_step(specs) -> float:
    """Floating-point operations of one model's training step (forward and backward on the
    full training batch), counted by ``torch.utils.flop_counter`` on the experiment's model."""
    from torch.utils.flop_counter import FlopCounterMode

    c0 = specs[0].config
    shape = A.TransformerShape(**c0["model"])
    data = A.make_modadd_data()
    params = A.init_params(shape, generator=torch.Generator().manual_seed(c0["init_seed"]))
    module = A.PaperTransformer(shape, params)
    with FlopCounterMode(display=False) as counter:
        logits = module(data.train_tokens)
        torch.nn.functional.cross_entropy(logits, data.train_targets).backward()
    return float(counter.get_total_flops())


def matmul_gflops(m: int, k: int, n: int, seconds: float = 1.0) -> float:
    """Measured float32 GFLOP/s of ``(m×k) @ (k×n)`` on this CPU (repeated for ``seconds``)."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        reps += 1
    return 2.0 * m * k * n * reps / (time.perf_counter() - t0) / 1e9


def vmap_train(specs, steps: int) -> float:
    """Train the family with vmap(grad(functional_call)); returns the wall time."""
    from torch.func import functional_call, grad, vmap

    c0 = specs[0].config
    shape = A.TransformerShape(**c0["model"])
    data = A.make_modadd_data()
    base = A.init_params(shape, generator=torch.Generator().manual_seed(c0["init_seed"]))
    models = [tt.make_twin(base, shape, s.config["twin"]) for s in specs]
    module = A.PaperTransformer(shape, models[0])
    stacked = {n.replace(".", "_"): t for n, t in A.stack_params(models).items()}
    params = {k: v.clone().requires_grad_(True) for k, v in stacked.items()}
    if c0["method"] == "muon_adam":
        raise SystemExit("--vmap supports adam, momentum and scalar_adam")
    opts = tt.make_twin_optimizers(c0["method"], params, c0["hparams"])

    def loss_fn(p):
        logits = functional_call(module, p, (data.train_tokens,))
        return torch.nn.functional.cross_entropy(logits, data.train_targets)

    grads_fn = vmap(grad(loss_fn))
    t0 = time.perf_counter()
    for _ in range(steps):
        grads = grads_fn({k: v.detach() for k, v in params.items()})
        for k, v in params.items():
            v.grad = grads[k]
        for opt in opts:
            opt.step()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per model")
    parser.add_argument("--method", default="adam", choices=att.METHODS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vmap", action="store_true", help="also time torch.func.vmap")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    family = next(f for f in att.get_config("paper").families("single")
                  if f.method == args.method)
    family = dataclasses.replace(family, num_steps=args.steps, checkpoints=(0, args.steps))
    specs = family.specs("bench")
    n = len(specs)
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"float32; {n} models ({args.method}), {args.steps} full-batch steps each")

    att.train_twin_batch(specs[:2], device=torch.device("cpu"))  # warm-up
    batched, t_b = timed(lambda: att.train_twin_batch(specs, device=torch.device("cpu")))
    alone, t_a = timed(lambda: [att.train_twin_batch([s], device=torch.device("cpu"))[0]
                                for s in specs])
    # a batch of one also trains its base: the base itself is one model, every twin two
    models_alone = sum(1 if s.config["twin"]["kind"] == "base" else 2 for s in specs)
    same = sum(a.metrics["train_loss"] == b.metrics["train_loss"]
               for a, b in zip(alone, batched, strict=True))
    rate_b = n * args.steps / t_b
    rate_a = models_alone * args.steps / t_a
    print(f"batched : {t_b:7.2f} s  {rate_b:8.1f} model-steps/s")
    print(f"alone   : {t_a:7.2f} s  {rate_a:8.1f} model-steps/s")
    print(f"ratio batched / alone: {rate_b / rate_a:.2f}x  "
          f"(same final train loss in {same}/{n} models)")
    if args.vmap:
        t_v = vmap_train(specs, args.steps)
        print(f"vmap    : {t_v:7.2f} s  {n * args.steps / t_v:8.1f} model-steps/s")
    ref = att.PUBLISHED["reference_model_steps_per_s"]
    print("published reference script: "
          + ", ".join(f"{k} {v:g} model-steps/s" for k, v in ref.items()))

    # The compute floor: what the goal (5x the reference) asks of this CPU.
    flops = flops_per_model_step(specs)
    tokens = A.make_modadd_data().train_tokens.numel()
    big = matmul_gflops(1024, 1024, 1024)
    layer = matmul_gflops(tokens, 64, 64)
    print(f"work: {flops / 1e9:.3f} GFLOP per model-step (torch flop counter, forward + backward)")
    print(f"achieved: {rate_b * flops / 1e9:.1f} GFLOP/s batched; this CPU's float32 matmul: "
          f"{big:.1f} GFLOP/s at 1024^3, {layer:.1f} GFLOP/s at the model's "
          f"{tokens}x64 @ 64x64")
    for kind, rate in ref.items():
        goal = 5 * rate
        print(f"5x the reference on {kind} ({goal:g} model-steps/s) needs "
              f"{goal * flops / 1e9:.0f} GFLOP/s sustained")


if __name__ == "__main__":
    main()
