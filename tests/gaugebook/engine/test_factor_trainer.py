"""The factor-training loop on a problem family of the test's own: rectangular factors, the
matched-loss bookkeeping (``record_at``), stopping at the deepest threshold, and a batch equal to
its runs done alone. The family is a plain least-squares fit ``½‖U Vᵀ − T‖²/size`` whose loop
is written out independently below."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor
from torch.testing import assert_close

from gaugebook.engine import factor_trainer as ft
from gaugebook.engine.spec import RunSpec
from gaugekit.linalg import effective_rank
from gaugekit.optim import make_optimizer

N1, N2, K = 7, 4, 3


def _target(seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N1, 2, generator=g, dtype=torch.float64) @ torch.randn(
        2, N2, generator=g, dtype=torch.float64)


def _init(seed: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed + 1000)
    U = torch.randn(N1, K, generator=g, dtype=torch.float64) * 0.1
    return U, torch.randn(N2, K, generator=g, dtype=torch.float64) * 0.1


@dataclass
class _FitBatch:
    targets: Tensor  # (B, N1, N2)
    curve_names = ("train_loss", "err")
    metric_names = ("err", "effective_rank")

    def loss_and_grads(self, U, V):
        R = U @ V.mT - self.targets
        size = R.shape[-1] * R.shape[-2]
        loss = R.square().sum((-1, -2)) / size
        G = 2 * R / size
        return loss, G @ V, G.mT @ U

    def metrics(self, U, V, *, spectral=True):
        W = U @ V.mT
        out = {"train_loss": (W - self.targets).square().mean((-1, -2)),
               "err": torch.linalg.matrix_norm(W - self.targets)}
        if spectral:
            out["effective_rank"] = effective_rank(W)
        return out

    def select(self, rows: Sequence[int]):
        return _FitBatch(self.targets[list(rows)])


@dataclass
class _FitInstances:
    seeds: list[int]

    def batch(self, rows):
        return _FitBatch(torch.stack([_target(self.seeds[i]) for i in rows]))

    def init(self, index):
        return _init(self.seeds[index])


class _FitFamily:
    kind = "test_fit"

    def instances(self, problem, seeds, dtype, device):
        return _FitInstances(list(seeds))


FIT = _FitFamily()

THRESHOLDS = (1e-1, 1e-2, 1e-3)


def _spec(method: str, lr: float, seed: int, num_steps: int = 300, stop: bool = False) -> RunSpec:
    budget = {"num_steps": num_steps, "tol": 1e-12, "check_every": 50, "diverge_above": 1e6,
              "record_at": list(THRESHOLDS), "stop_at_last_threshold": stop}
    config = {"kind": "factored", "problem": {"kind": "test_fit"}, "method": method,
              "hparams": {"lr": lr}, "schedule": "constant", "budget": budget, "seed": seed,
              "dtype": "float64"}
    return RunSpec("test", "fit", config, {"seed": seed})


def _plain_loop(method: str, lr: float, seed: int, num_steps: int):
    """The protocol written out for one run: pre-update loss, first crossings, update."""
    U, V = (t.clone() for t in _init(seed))
    opt = make_optimizer(method, [U, V], lr=lr)
    T = _target(seed)
    crossings = {}
    for t in range(1, num_steps + 1):
        R = U @ V.T - T
        loss = float(R.square().mean())
        for thr in THRESHOLDS:
            if thr not in crossings and loss < thr:
                crossings[thr] = (t - 1, float(torch.linalg.matrix_norm(R)))
        G = 2 * R / R.numel()
        U.grad, V.grad = G @ V, G.T @ U
        opt.step()
    return crossings, float(torch.linalg.matrix_norm(U @ V.T - T))


def test_rectangular_runs_follow_the_plain_loop_and_record_first_crossings():
    specs = [_spec("gd", 0.3, 1), _spec("gd", 0.1, 2), _spec("adam", 0.02, 1)]
    results = ft.train_factored_batch(specs, FIT)
    for spec, result in zip(specs, results, strict=True):
        c = spec.config
        crossings, final_err = _plain_loop(c["method"], c["hparams"]["lr"], c["seed"], 300)
        assert result.status == "ok"
        at = result.metrics["at_loss"]
        assert [e["threshold"] for e in at] == [t for t in THRESHOLDS if t in crossings]
        assert at, "the runs must reach at least one threshold for this test to mean anything"
        for entry in at:
            step, err = crossings[entry["threshold"]]
            assert entry["step"] == step
            assert entry["train_loss"] < entry["threshold"]
            assert_close(torch.tensor(entry["err"]), torch.tensor(err), rtol=1e-9, atol=1e-12)
        assert_close(torch.tensor(result.metrics["err"]), torch.tensor(final_err),
                     rtol=1e-9, atol=1e-12)


def test_a_batch_equals_its_runs_alone_and_runs_differ():
    specs = [_spec("gd", 0.3, 1), _spec("gd", 0.3, 2), _spec("scalar_adam", 0.01, 1),
             _spec("muon", 0.01, 2)]
    batched = ft.train_factored_batch(specs, FIT)
    for spec, b in zip(specs, batched, strict=True):
        alone = ft.train_factored_batch([spec], FIT)[0]
        assert alone.metrics["steps"] == b.metrics["steps"]
        assert_close(torch.tensor(b.metrics["err"]), torch.tensor(alone.metrics["err"]),
                     rtol=1e-10, atol=1e-14)
    errs = [b.metrics["err"] for b in batched]
    assert len(set(errs)) == len(errs)  # negative control: the compared runs are not alike


def test_stop_at_the_deepest_threshold_ends_the_run_there():
    spec = _spec("gd", 0.3, 1, num_steps=2000, stop=True)
    result = ft.train_factored_batch([spec], FIT)[0]
    at = result.metrics["at_loss"]
    assert [e["threshold"] for e in at] == list(THRESHOLDS)
    assert result.metrics["steps"] == at[-1]["step"] < 2000
    assert result.metrics["train_loss"] < THRESHOLDS[-1]
    longer = ft.train_factored_batch([_spec("gd", 0.3, 1, num_steps=2000)], FIT)[0]
    assert longer.metrics["steps"] == 2000  # without the stop rule the run goes on


def test_bad_thresholds_and_a_family_of_another_kind_are_refused():
    spec = _spec("gd", 0.3, 1)
    unsorted = {**spec.config, "budget": {**spec.config["budget"], "record_at": [1e-3, 1e-1]}}
    with pytest.raises(ValueError, match="record_at"):
        ft.train_factored_batch([RunSpec("t", "p", unsorted, {})], FIT)
    other = {**spec.config, "problem": {"kind": "no_such_problem"}}
    with pytest.raises(ValueError, match="Invalid family: one of kind 'test_fit'"):
        ft.train_factored_batch([RunSpec("t", "p", other, {})], FIT)


def test_a_family_without_a_kind_trains_any_problem_config():
    spec = _spec("gd", 0.3, 1)
    other = {**spec.config, "problem": {"kind": "not_registered"}}
    class Unnamed:  # a family of one's own that does not say which kind it draws
        def instances(self, problem, seeds, dtype, device):
            return _FitInstances(list(seeds))

    got = ft.train_factored_batch([RunSpec("t", "p", other, {})], Unnamed())[0]
    assert got.metrics == ft.train_factored_batch([spec], FIT)[0].metrics


def _plain_spec(method: str, lr: float, seed: int, num_steps: int = 300) -> RunSpec:
    spec = _spec(method, lr, seed, num_steps)
    budget = {k: v for k, v in spec.config["budget"].items()
              if k not in ("record_at", "stop_at_last_threshold")}
    return RunSpec("test", "fit", {**spec.config, "budget": budget}, {"seed": seed})


@pytest.mark.parametrize("above", [0.0, 1e9])
def test_gradient_norm_counts_and_values_read_from_the_optimizers(above):
    specs = [_plain_spec("gd", 0.3, 1), _plain_spec("adam", 0.02, 2), _plain_spec("gd", 0.1, 2)]
    for spec in specs:
        spec.config["budget"]["count_grad_norm_above"] = above
    made = []

    def make(method, params, **options):
        made.append(method)
        return make_optimizer(method, params, **options)

    results = ft.train_factored_batch(
        specs, FIT, make_optimizer=make,
        optimizer_metrics=lambda opt: {"lr_seen": opt.param_groups[0]["lr"]})
    assert sorted(made) == ["adam", "gd"]  # one optimizer per member, built by ``make``
    for spec, result in zip(specs, results, strict=True):
        m = result.metrics
        assert m["lr_seen"] == spec.config["hparams"]["lr"]  # the run's own row
        assert m["grad_norm_above"] == (m["steps"] if above == 0.0 else 0)


@pytest.mark.parametrize("sync_every", [7, 50])
def test_the_host_reads_divergence_every_k_steps_and_records_the_same(sync_every):
    # diverging runs of several rules (their NaNs carried along until the host reads them)
    # beside runs that converge; the diverged records are exact, the others equal
    specs = [_plain_spec("gd", 40.0, 1), _plain_spec("gd", 0.3, 2), _plain_spec("adam", 5.0, 1),
             _plain_spec("signum", 3.0, 2), _plain_spec("scaled_gd", 60.0, 1),
             _plain_spec("shampoo", 30.0, 2), _plain_spec("muon", 0.01, 1),
             _plain_spec("scaled_gd", 0.3, 2)]
    every = ft.train_factored_batch(specs, FIT, sync_every=1)
    later = ft.train_factored_batch(specs, FIT, sync_every=sync_every)
    diverged = [a.metrics["steps"] for a in every if a.status == "diverged"]
    assert len(diverged) >= 3 and any(s % sync_every for s in diverged)  # the test bites
    assert any(a.status == "ok" for a in every)
    for a, b in zip(every, later, strict=True):
        _same_results(a, b)
    with pytest.raises(ValueError, match="sync_every"):
        ft.train_factored_batch(specs, FIT, sync_every=0)


def _close(x, y):
    assert_close(torch.tensor(y), torch.tensor(x), rtol=1e-10, atol=1e-14, equal_nan=True)


def _same_results(a, b):
    """Same statuses and steps; values to round-off (a row kept longer in the stack may change
    the others' last bits on some BLAS, see the module docstring)."""
    assert (a.status, a.metrics["steps"]) == (b.status, b.metrics["steps"])
    assert [(e["threshold"], e["step"]) for e in a.metrics.get("at_loss", [])] == [
        (e["threshold"], e["step"]) for e in b.metrics.get("at_loss", [])]
    for ea, eb in zip(a.metrics.get("at_loss", []), b.metrics.get("at_loss", []), strict=True):
        _close(ea["train_loss"], eb["train_loss"])
        _close(ea["err"], eb["err"])
    _close(a.metrics["train_loss"], b.metrics["train_loss"])
    if a.status == "ok":
        _close(a.metrics["err"], b.metrics["err"])
        assert a.curves["step"] == b.curves["step"]
        for k in a.curves:
            _close(a.curves[k], b.curves[k])


@pytest.mark.parametrize("sync_every", [7, 50])
@pytest.mark.parametrize("stop", [False, True])
def test_first_crossings_kept_on_the_device_give_the_same_records(sync_every, stop):
    # thresholds crossed between host reads, runs stopped there, runs that never reach the
    # deepest threshold and runs that diverge: the same records as a read every step
    specs = [_spec("gd", 0.3, 1, 400, stop), _spec("gd", 0.1, 2, 400, stop),
             _spec("adam", 0.02, 1, 400, stop), _spec("gd", 40.0, 2, 400, stop),
             _spec("muon", 0.01, 1, 400, stop), _spec("scaled_gd", 0.3, 2, 400, stop),
             _spec("gd", 0.003, 1, 400, stop)]
    every = ft.train_factored_batch(specs, FIT, sync_every=1)
    later = ft.train_factored_batch(specs, FIT, sync_every=sync_every)
    crossings = [e["step"] for r in every for e in r.metrics.get("at_loss", [])]
    assert len(crossings) >= 8 and any(s % sync_every for s in crossings)  # the test bites
    assert {r.status for r in every} == {"ok", "diverged"}
    assert any(len(r.metrics.get("at_loss", [])) < len(THRESHOLDS) for r in every
               if r.status == "ok")
    if stop:
        assert any(r.metrics["steps"] < 400 and r.metrics["steps"] % sync_every
                   for r in every if r.status == "ok")
    for a, b in zip(every, later, strict=True):
        _same_results(a, b)
