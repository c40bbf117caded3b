"""Step time of FlowAdam against ``torch.optim.Adam`` (``foreach=True`` and ``fused=True``).

Not a test: it prints the median time of one optimizer step for each variant and its ratio to
torch's Adam, all from one run (variants are timed in interleaved rounds, so drifts of a shared
machine hit every variant alike). Only ``step()`` is timed; the gradients are fixed tensors
written into ``.grad`` before the run (two alternating sets, so that the flow path's stiffness
test fires under the paper's settings).

    OMP_NUM_THREADS=1 python bench/bench_flow_adam.py            # ~10.5M float32 parameters
    python bench/bench_flow_adam.py --rows 256 --rounds 3       # a smoke run

Target (issues 4, 13): FlowAdam at any p, flow on or off, at most 1.2× Adam, against both
``foreach=True`` and ``fused=True``.

One row is a floor, not an optimizer: ``floor: log + exp per entry`` times, alone, the one
``log`` and one ``exp`` per entry that FlowAdam's blend ``s^p s̄^{1−p}`` needs at ``p ∉ {0, 1}``
and Adam does not (FlowAdam takes the blend in the log domain: a ``pow`` with a fractional
exponent costs more than twice as much on the CPU). (The flow path also reads and writes
``g_{t−1}``, two more streams than Adam.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor

from gaugekit.optim.flow_adam import FLOW_ADAM_PRESETS, FlowAdam

Factory = Callable[[list[Tensor]], torch.optim.Optimizer]

#: glibc ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def keep_freed_memory() -> bool:
    """Ask glibc's ``malloc`` to keep freed memory in the process, so that a step's temporaries
    reuse pages already touched instead of faulting fresh ones in: blocks up to 32 MiB (glibc's
    largest ``M_MMAP_THRESHOLD``) come from the heap, and the heap is never trimmed. Without it
    the time of an optimizer that allocates temporaries (torch's foreach Adam among them) moves
    by 2-3x with the order and the company of the variants timed. Returns whether it applied
    (``False`` off glibc, where nothing changes).
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        settings = ((_M_MMAP_THRESHOLD, 32 * 2**20), (_M_TRIM_THRESHOLD, 2**31 - 1),
                    (_M_TOP_PAD, 256 * 2**20))
        return all(libc.mallopt(param, value) == 1 for param, value in settings)
    except (OSError, AttributeError):
        return False


class BlendFloor:
    """Not an optimizer: the work FlowAdam needs at ``p ∉ {0, 1}`` that Adam does not, one
    ``log`` and one ``exp`` per entry (its blend ``exp((p/2) log v + c)``), timed alone into a
    buffer."""

    def __init__(self, params: list[Tensor]) -> None:
        self.pairs = [(torch.rand_like(p) + 0.1, torch.empty_like(p)) for p in params]

    def step(self) -> None:
        for v, out in self.pairs:
            torch.log(v, out=out).exp_()


def variants(lr: float) -> dict[str, Factory]:
    """The optimizers timed, by label; the first is the reference. The ``floor`` row is not an
    optimizer (:class:`BlendFloor`)."""
    invariant = FLOW_ADAM_PRESETS["invariant"]
    return {
        "torch Adam (foreach)": lambda p: torch.optim.Adam(p, lr=lr, foreach=True),
        "torch Adam (fused)": lambda p: torch.optim.Adam(p, lr=lr, fused=True),
        "torch Adam (for-loop)": lambda p: torch.optim.Adam(p, lr=lr, foreach=False),
        "FlowAdam p=1, flow off": lambda p: FlowAdam(p, lr=lr, precond_power=1.0, flow=False),
        "FlowAdam p=0, flow off": lambda p: FlowAdam(p, lr=lr, precond_power=0.0, flow=False),
        "FlowAdam p=0.5, flow off": lambda p: FlowAdam(p, lr=lr, precond_power=0.5, flow=False),
        "FlowAdam invariant, flow on": lambda p: FlowAdam(p, lr=lr, **invariant),
        "floor: log + exp per entry": BlendFloor,
    }


def make_params(
    num_tensors: int, rows: int, cols: int, seed: int
) -> tuple[list[Tensor], list[list[Tensor]]]:
    """``num_tensors`` float32 matrices ``rows × cols`` and two sets of gradients (on the CPU)."""
    g = torch.Generator().manual_seed(seed)
    params = [torch.randn(rows, cols, generator=g) * 0.02 for _ in range(num_tensors)]
    grads = [[torch.randn(rows, cols, generator=g) * 1e-3 for _ in range(num_tensors)]
             for _ in range(2)]
    return params, grads


def median_step_times(runs, grads, *, warmup: int, rounds: int, steps: int, sync) -> dict:
    """Median seconds per ``step()`` of each ``label -> (params, optimizer, [counter])``; the
    gradients alternate between the two lists of ``grads``. After ``warmup`` untimed steps each,
    the optimizers are timed in interleaved rounds of ``steps`` steps, so that drifts of a shared
    machine hit every variant alike."""

    def step(params, opt, counter):
        for p, g in zip(params, grads[counter[0] % 2], strict=True):
            p.grad = g
        counter[0] += 1
        opt.step()

    for params, opt, counter in runs.values():
        for _ in range(warmup):
            step(params, opt, counter)
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(rounds):
        for label, (params, opt, counter) in runs.items():
            sync()
            start = time.perf_counter()
            for _ in range(steps):
                step(params, opt, counter)
            sync()
            times[label].append((time.perf_counter() - start) / steps)
    return {label: statistics.median(ts) for label, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--warmup", type=int, default=15, help="untimed steps first (> 11, so "
                        "that the flow path is past its warm-up)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="e.g. cpu or cuda")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warm = keep_freed_memory()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    base, grads = make_params(args.tensors, args.rows, args.cols, args.seed)
    base = [p.to(device) for p in base]
    grads = [[g.to(device) for g in gs] for gs in grads]
    numel = sum(p.numel() for p in base)
    runs = {}
    for label, make in variants(lr=1e-3).items():
        params = [p.clone().requires_grad_(True) for p in base]
        runs[label] = (params, make(params), [0])

    medians = median_step_times(runs, grads, warmup=args.warmup, rounds=args.rounds,
                                steps=args.steps, sync=sync)
    reference = medians["torch Adam (foreach)"]
    fused = medians["torch Adam (fused)"]
    print(f"torch {torch.__version__} on {device}, {torch.get_num_threads()} CPU thread(s), "
          f"{numel / 1e6:.1f}M "
          f"float32 parameters in {args.tensors} tensors; median of {args.rounds} rounds x "
          f"{args.steps} steps; freed memory kept in the process: {'yes' if warm else 'no'}")
    print(f"{'variant':<30} {'ms/step':>9} {'/foreach':>9} {'/fused':>7}")
    for label, median in medians.items():
        print(f"{label:<30} {1e3 * median:>9.2f} {median / reference:>9.2f} "
              f"{median / fused:>7.2f}")
    flow_opt = runs["FlowAdam invariant, flow on"][1]
    counters = flow_opt.flow_counters()
    print(f"flow path: {int(counters['flow_steps'])} flow steps in {counters['steps']} steps "
          f"(trigger rate {counters['trigger_rate'].item():.2f})")
    off = medians["FlowAdam p=0, flow off"] / reference
    on = medians["FlowAdam invariant, flow on"] / reference
    print(f"RATIOS flow-off/Adam = {off:.2f} (target <= 1.2), flow-on/Adam = {on:.2f}")
    worst = max(m for k, m in medians.items() if k.startswith("FlowAdam"))
    print(f"RATIOS worst FlowAdam / Adam foreach = {worst / reference:.2f}, "
          f"/ Adam fused = {worst / fused:.2f} (target <= 1.2 against both)")


if __name__ == "__main__":
    main()
