"""One code path for CPU and GPU: every rule on CUDA (float64, stacked runs) matches the CPU."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from zoo_support import DTYPE, LR_FACTORS, StackedSensing, leaves, run_zoo, zoo_kwargs


@pytest.mark.gpu
def test_cuda_matches_cpu(zoo_name, problem, factors):
    lrs = zoo_kwargs(zoo_name)["lr"] * torch.tensor(LR_FACTORS, dtype=DTYPE)  # stays on CPU
    cpu = leaves(*factors)
    run_zoo(zoo_name, cpu, problem.loss, 8, lr=lrs, batch_dims=1)
    cuda_problem = StackedSensing(A=problem.A.cuda(), y=problem.y.cuda())
    gpu = leaves(*(f.cuda() for f in factors))
    opt = run_zoo(zoo_name, gpu, cuda_problem.loss, 8, lr=lrs, batch_dims=1)
    for a, b in zip(gpu, cpu, strict=True):
        assert a.device.type == "cuda"
        assert_close(a.detach().cpu(), b.detach(), atol=1e-10, rtol=0)
    for state in opt.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                assert value.device.type == "cuda"
