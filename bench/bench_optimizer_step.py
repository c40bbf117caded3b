"""Step time of shared-scale Adam, AdamMini and Muon against their torch peers, in one run.

Not a test: it prints the median time of one ``step()`` of each variant and its ratio to the
torch peer timed in the same run: the median over rounds of the variant's time over the peer's
time in the same round (variants timed in interleaved rounds, on two alternating sets of fixed
gradients; glibc keeps freed memory in the process, :func:`bench_flow_adam.keep_freed_memory`).
Interleaving matters: a step repeated back to back finds part of its working set in the last
level cache, and the smaller working sets of shared-scale Adam and AdamMini gain more from it
than Adam's; training evicts the cache between steps, as the interleaved rounds do. Each round
runs the variants in a new random order (seeded): in a fixed order a variant always follows the
same one, and what that one leaves in the cache moved a ratio by up to 0.1 (one variant listed
twice measured 1.08 and 0.98).

    python bench/bench_optimizer_step.py                 # 10.5M float32 parameters, 2 threads
    python bench/bench_optimizer_step.py --pairs 1 --rounds 2 --steps 1 --muon-rounds 1  # smoke

Parameters: ``--pairs`` pairs of ``nn.Linear(512, 2048)`` and ``nn.Linear(2048, 512)`` weights
(five pairs: 10.5M float32 entries), as in issue 37. Targets (issue 37, item 3):

* ``SharedScaleAdam`` <= 1.0x ``torch.optim.Adam(fused=True)`` (CPU has a fused Adam);
* ``AdamMini`` <= 1.3x the same;
  both with and without ``fused=True`` (their step compiled into one pass by
  ``torch.compile``: the first, untimed warm-up step compiles, seconds);
* ``Muon`` <= 1.0x ``torch.optim.Muon`` at the same Newton–Schulz precision: torch runs NS in
  bfloat16, so ``Muon(ns_dtype=torch.bfloat16)`` is the row compared; the float32 rows (the
  default precision, the Gram iteration on these 4:1 matrices) <= 2x, or the machine's
  float32 / bfloat16 matrix-product time ratio (printed) if that is higher (issue 46).

Variants that the installed gaugekit does not accept (an argument it does not have yet) are
reported as such, so the same script times the code before and after a change.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import torch
from bench_flow_adam import keep_freed_memory
from torch import Tensor

import gaugekit.optim as go

Factory = Callable[[list[Tensor]], torch.optim.Optimizer]

ADAM_REFERENCE = "torch Adam (fused)"
MUON_REFERENCE = "torch Muon (bf16 NS)"


def adam_variants(lr: float) -> dict[str, Factory]:
    """Adam-like rules, by label; ratios against :data:`ADAM_REFERENCE`."""
    return {
        "torch Adam (fused)": lambda p: torch.optim.Adam(p, lr=lr, fused=True),
        "torch Adam (foreach)": lambda p: torch.optim.Adam(p, lr=lr, foreach=True),
        "gaugekit Adam": lambda p: go.Adam(p, lr=lr),
        "gaugekit SharedScaleAdam": lambda p: go.SharedScaleAdam(p, lr=lr),
        "gaugekit SharedScaleAdam (fused)": lambda p: go.SharedScaleAdam(p, lr=lr, fused=True),
        "gaugekit AdamMini (row blocks)": lambda p: go.AdamMini(p, lr=lr),
        "gaugekit AdamMini (fused)": lambda p: go.AdamMini(p, lr=lr, fused=True),
    }


def muon_variants(lr: float) -> dict[str, Factory]:
    """Muon-like rules, by label; ratios against :data:`MUON_REFERENCE`."""
    out: dict[str, Factory] = {
        "torch Muon (bf16 NS)": lambda p: torch.optim.Muon(p, lr=lr),
        "gaugekit Muon (bf16 NS)": lambda p: go.Muon(p, lr=lr, ns_dtype=torch.bfloat16),
        "gaugekit Muon (float32 NS)": lambda p: go.Muon(p, lr=lr),
    }
    if hasattr(go, "MuonAdam"):
        out["gaugekit MuonAdam (bf16 NS)"] = lambda p: go.MuonAdam(
            p, lr=lr, ns_dtype=torch.bfloat16)
        out["gaugekit MuonAdam (float32 NS)"] = lambda p: go.MuonAdam(p, lr=lr)
    return out


def matmul_throughput_ratio(rounds: int = 5) -> float:
    """The machine's float32 / bfloat16 time of one ``512 × 2048 · 2048 × 512`` product (the
    bench's shapes), median of ``rounds``: the floor of Muon's float32 / bf16 step ratio."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(512, 2048, generator=g), torch.randn(2048, 512, generator=g)
    times = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = x.to(dtype), y.to(dtype)
        a @ b
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(5):
                a @ b
            samples.append(time.perf_counter() - start)
        times[dtype] = statistics.median(samples)
    return times[torch.float32] / times[torch.bfloat16]


def make_params(pairs: int, seed: int) -> tuple[list[Tensor], list[list[Tensor]]]:
    """The weights of ``pairs`` (512→2048, 2048→512) Linear pairs and two sets of gradients."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(2048, 512), (512, 2048)] * pairs
    params = [torch.randn(*s, generator=g) * 0.02 for s in shapes]
    grads = [[torch.randn(*s, generator=g) * 1e-3 for s in shapes] for _ in range(2)]
    return params, grads


def time_block(
    variants: dict[str, Factory], reference: str, base, grads, args
) -> dict[str, tuple[float, float] | str]:
    """``label -> (median ms per step, median over rounds of its time / the reference's time
    in the same round)``, or why it did not run. Rounds interleave the variants, so a drift of
    a shared machine hits all of them; the per-round ratio cancels most of what remains."""
    runs, out = {}, {}
    for label, make in variants.items():
        params = [p.clone().requires_grad_(True) for p in base]
        try:
            runs[label] = (params, make(params), [0])
        except (TypeError, ValueError) as error:
            out[label] = f"not available ({type(error).__name__}: {str(error)[:60]})"

    def step(params, opt, counter):
        for p, g in zip(params, grads[counter[0] % 2], strict=True):
            p.grad = g
        counter[0] += 1
        opt.step()

    for run in runs.values():
        for _ in range(args.warmup):
            step(*run)
    times: dict[str, list[float]] = {label: [] for label in runs}
    order = random.Random(args.seed)
    for _ in range(args.rounds):
        labels = list(runs)
        order.shuffle(labels)  # no variant always follows the same one (what it leaves in cache)
        for label in labels:
            run = runs[label]
            start = time.perf_counter()
            for _ in range(args.steps):
                step(*run)
            times[label].append((time.perf_counter() - start) / args.steps)
    ref = times[reference]
    for label, ts in times.items():
        ratios = [t / r for t, r in zip(ts, ref, strict=True)]
        out[label] = (1e3 * statistics.median(ts), statistics.median(ratios))
    return out


def print_block(title: str, results: dict[str, tuple[float, float] | str]) -> None:
    print(f"\n{title}")
    print(f"{'variant':<32} {'ms/step':>9} {'ratio':>7}")
    for label, value in results.items():
        if isinstance(value, str):
            print(f"{label:<32} {value}")
        else:
            print(f"{label:<32} {value[0]:>9.2f} {value[1]:>7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (Adam rows)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round (Adam rows)")
    parser.add_argument("--muon-rounds", type=int, default=5)
    parser.add_argument("--muon-steps", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("adam", "muon"), default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warm = keep_freed_memory()
    base, grads = make_params(args.pairs, args.seed)
    numel = sum(p.numel() for p in base)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s), "
          f"{numel / 1e6:.1f}M float32 parameters in {len(base)} matrices; freed memory kept: "
          f"{'yes' if warm else 'no'}")
    if args.only in (None, "adam"):
        results = time_block(adam_variants(1e-3), ADAM_REFERENCE, base, grads, args)
        print_block(f"Adam-like: {args.rounds} interleaved rounds x {args.steps} steps; ratio: "
                    f"median over rounds of time / {ADAM_REFERENCE}", results)
    if args.only in (None, "muon"):
        muon_args = argparse.Namespace(**{**vars(args), "rounds": args.muon_rounds,
                                          "steps": args.muon_steps, "warmup": 1})
        results = time_block(muon_variants(2e-2), MUON_REFERENCE, base, grads, muon_args)
        print_block(f"Muon-like: {args.muon_rounds} interleaved rounds x {args.muon_steps} "
                    f"steps; ratio: median over rounds of time / {MUON_REFERENCE}", results)
        print(f"float32 / bfloat16 matrix product time on these shapes: "
              f"{matmul_throughput_ratio():.2f}")


if __name__ == "__main__":
    main()
