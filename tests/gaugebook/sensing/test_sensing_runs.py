"""The matrix-sensing zoo: configuration facts, batched training = training alone, isolation
of diverged and failing runs, agreement with an independent plain loop."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from gaugebook.engine import collection
from gaugebook.engine import factor_trainer as factor_training
from gaugebook.engine.factor_trainer import PER_MATRIX_RULES, train_factored_batch
from gaugebook.engine.spec import RunSpec
from gaugebook.experiments import get_experiment
from gaugebook.sensing import sensing_runs as ms
from gaugebook.sensing.measurements import SENSING, init_factors, loss_and_grads, make_instance
from gaugebook.sensing.run_specs import Budget, Problem

METRICS = ("rec", "val_rec", "effective_rank", "nuclear_norm", "balancedness", "train_loss",
           "final_loss")


def tiny_part(methods, lrs, *, seeds=(1, 2), num_steps=120, check_every=20, tol=1e-5,
              dtype="float64", schedules=None, init_scale=0.1) -> ms.Part:
    problem = Problem(n=6, r=1, k=6, m=22, num_val=5, init_scale=init_scale)
    return ms.Part(
        "tiny", "test", problem, Budget(num_steps, tol=tol, check_every=check_every),
        tuple(seeds), tuple(methods), {m: tuple(lrs[m]) for m in methods},
        schedules or {}, dtype=dtype,
    )


def by_config(specs, results):
    return {(s.config["method"], s.config["hparams"]["lr"], s.config["seed"]): r
            for s, r in zip(specs, results, strict=True)}


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


def test_paper_zoo_is_the_papers_protocol():
    part = ms.get_config("paper").part("zoo")
    assert (part.problem.n, part.problem.r, part.problem.k, part.problem.m) == (40, 3, 40, 462)
    assert part.problem.init_scale == 1e-3 and part.seeds == (42, 123, 456)
    assert (part.budget.num_steps, part.budget.tol, part.budget.check_every) == (20000, 1e-7, 200)
    assert part.budget.diverge_above == 1e8 and part.dtype == "float32"
    grids = {
        "muon": (3e-3, 1e-2, 3e-2, 0.1), "gd": (0.01, 0.03, 0.1, 0.3),
        "scalar_adam": (1e-3, 3e-3, 1e-2, 3e-2), "shampoo": (0.03, 0.1, 0.3, 1.0),
        "lion": (1e-4, 3e-4, 1e-3, 3e-3), "signum": (1e-4, 3e-4, 1e-3, 3e-3),
        "rmsprop": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2), "adafactor": (3e-4, 1e-3, 3e-3, 1e-2),
        "adam": (1e-3, 1e-2, 3e-2),
    }
    assert dict(part.lr_grids) == grids
    cosine = {m for m, s in part.schedules.items() if s == "cosine"}
    assert cosine == {"muon", "signum", "lion", "rmsprop"}
    specs = part.specs()
    assert len(specs) == 108 == len({s.run_id for s in specs})
    assert set(ms.PUBLISHED_TABLE2) == set(part.methods)
    s = specs[0]
    assert s.seeds == {"instance": s.config["seed"], "init": s.config["seed"] + 7}


def test_parts_share_run_ids_where_they_share_runs():
    config = ms.get_config("paper")
    zoo = {s.run_id for s in config.part("zoo").specs()}
    cosine = config.part("cosine_all").specs()
    shared = {s.run_id for s in cosine if s.config["method"] in ms.TABLE2_COSINE}
    assert shared and shared <= zoo
    others = {s.run_id for s in cosine if s.config["method"] not in ms.TABLE2_COSINE}
    assert not others & zoo
    wide = {s.run_id for s in config.part("wide").specs()}
    assert zoo <= wide
    assert config.part("second_size").problem.m == 1150


def test_wide_grid_contains_the_grid_and_a_decade_each_side():
    assert ms.wide_grid((0.01, 0.03, 0.1)) == (1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0)
    assert ms.wide_grid((3e-4, 1e-2), 3.0) == (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
    # negative control: without widening nothing is added
    assert ms.wide_grid((3e-4, 1e-2), 1.0) == (3e-4, 1e-3, 3e-3, 1e-2)


def test_paper_records_are_committed_and_quick_ones_are_not(tmp_path, monkeypatch):
    expected = tmp_path / "results" / "matrix_sensing" / "paper"
    assert collection.records_dir(ms.NAME, "paper", root=tmp_path) == expected
    monkeypatch.chdir(tmp_path)
    default = collection.records_dir(ms.NAME, "paper")
    assert default.parts[-3:] == ("results", "matrix_sensing", "paper")
    assert ms.get_config("paper").persist_records and not ms.get_config("quick").persist_records


def test_published_values_belong_to_the_paper_setting_only():
    paper, quick = ms.get_config("paper"), ms.get_config("quick")
    assert ms.published_table2(paper.part("zoo")) == ms.PUBLISHED_TABLE2
    assert ms.published_convex(paper.part("zoo")) == ms.PUBLISHED_CONVEX_REC
    # negative controls: another size, another schedule
    assert ms.published_table2(quick.part("zoo")) is None
    assert ms.published_table2(paper.part("cosine_all")) is None


def test_split_summary_reads_the_margin():
    rows = [
        {"method": "gd", "equivariant": True, "rec": 0.2, "at_grid_edge": True,
         "interpolated": True},
        {"method": "muon", "equivariant": True, "rec": 0.0, "at_grid_edge": False,
         "interpolated": True},
        {"method": "adam", "equivariant": False, "rec": 0.5, "at_grid_edge": True,
         "interpolated": False},
        {"method": "lion", "equivariant": False, "rec": 0.3, "at_grid_edge": False,
         "interpolated": True},
    ]
    s = ms.split_summary(rows)
    assert (s["worst_equivariant"], s["best_coordinatewise"]) == ("gd", "lion")
    assert s["gap"] == pytest.approx(0.1) and s["clean"]
    assert (s["at_grid_edge"], s["not_interpolated"], s["methods"]) == (2, 1, 4)
    rows[3]["rec"] = 0.1  # negative control: overlap
    assert not ms.split_summary(rows)["clean"]


def test_experiment_is_registered_and_quick_scale_is_smaller():
    exp = get_experiment("matrix_sensing")
    assert exp is ms.EXPERIMENT
    assert exp.parts("quick") == exp.parts("paper")
    quick, paper = ms.get_config("quick").part("zoo"), ms.get_config("paper").part("zoo")
    assert quick.problem.n < paper.problem.n and quick.budget.num_steps < paper.budget.num_steps
    with pytest.raises(ValueError, match="Invalid experiment"):
        get_experiment("nope")


# --------------------------------------------------------------------------------------------
# batched training
# --------------------------------------------------------------------------------------------


ZOO = ("gd", "adam", "scalar_adam", "muon", "signum", "lion", "rmsprop", "adafactor", "shampoo")
LRS = {"gd": (0.1, 5.0), "adam": (0.01, 0.03), "scalar_adam": (0.03,), "muon": (0.1,),
       "signum": (0.01,), "lion": (3e-3,), "rmsprop": (3e-3,), "adafactor": (0.01,),
       "shampoo": (0.1,)}


@pytest.fixture(scope="module")
def tiny_batch():
    part = tiny_part(ZOO, LRS, schedules={"muon": "cosine", "signum": "cosine"})
    specs = part.specs()
    return specs, train_factored_batch(specs, SENSING)


def test_batched_runs_equal_runs_alone_float64(tiny_batch):
    specs, results = tiny_batch
    statuses = {r.status for r in results}
    assert statuses == {"ok", "diverged"}  # the grid has a diverging lr
    for spec, batched in zip(specs, results, strict=True):
        alone = train_factored_batch([spec], SENSING)[0]
        assert alone.status == batched.status, spec.config
        assert alone.metrics["steps"] == batched.metrics["steps"]
        for name in METRICS:
            a, b = alone.metrics[name], batched.metrics[name]
            if a is None or b is None:
                assert a is b is None
            else:
                assert_close(torch.tensor(b), torch.tensor(a), rtol=1e-10, atol=1e-14)
        assert alone.curves["step"] == batched.curves["step"]


def test_runs_differ_across_seeds_and_lrs(tiny_batch):
    # negative control for the test above: the compared numbers are not all alike
    specs, results = tiny_batch
    table = by_config(specs, results)
    assert table[("adam", 0.01, 1)].metrics["rec"] != table[("adam", 0.01, 2)].metrics["rec"]
    assert table[("adam", 0.01, 1)].metrics["rec"] != table[("adam", 0.03, 1)].metrics["rec"]


def test_divergence_is_recorded_and_isolated(tiny_batch):
    specs, results = tiny_batch
    table = by_config(specs, results)
    for seed in (1, 2):
        bad = table[("gd", 5.0, seed)]
        assert bad.status == "diverged"
        assert bad.metrics["rec"] is None and bad.metrics["interpolated"] is False
        assert bad.metrics["steps"] < 120
        assert table[("gd", 0.1, seed)].status == "ok"


def test_interpolation_stops_at_a_check_and_records_the_gate_loss(tiny_batch):
    specs, results = tiny_batch
    for r in results:
        if r.status != "ok":
            continue
        m = r.metrics
        assert m["steps"] % 20 == 0
        assert m["interpolated"] == (m["train_loss"] < 1e-5)
        if m["steps"] < 120:
            assert m["interpolated"]
        assert r.curves["step"][0] == 0 and r.curves["step"][-1] == m["steps"]
        assert len(r.curves["rec"]) == len(r.curves["step"]) <= factor_training.CURVE_POINTS
    stopped = [r.metrics["steps"] < 120 for r in results if r.status == "ok"]
    assert any(stopped) and not all(stopped)


@pytest.mark.parametrize("method", ZOO)
def test_float32_batched_equals_alone(method):
    """Bit for bit, except Shampoo: its (L + λI)^(-1/4) goes through an elementwise ``pow``,
    which rounds a value differently in the vectorized body and in the tail of a loop, so its
    last bit depends on the size of the stack (then the runs agree to float32 round-off)."""
    part = tiny_part((method,), {method: LRS[method][:1] + (LRS[method][0] / 3,)},
                     dtype="float32", seeds=(1, 2, 3), schedules={method: "cosine"})
    specs = part.specs()
    for spec, batched in zip(specs, train_factored_batch(specs, SENSING), strict=True):
        alone = train_factored_batch([spec], SENSING)[0]
        if method != "shampoo":
            assert alone.metrics == batched.metrics
        else:
            for key in ("rec", "train_loss", "balancedness"):
                assert_close(torch.tensor(batched.metrics[key]), torch.tensor(alone.metrics[key]),
                             rtol=1e-4, atol=1e-12)


def test_a_failing_optimizer_marks_only_its_runs(tiny_batch):
    part = tiny_part(("gd", "adam"), {"gd": (0.1,), "adam": (0.01,)})
    specs = part.specs()
    broken = []
    for s in specs:
        if s.config["method"] == "adam":
            config = {**s.config, "hparams": {**s.config["hparams"], "betas": [0.9, 2.0]}}
            s = RunSpec(s.experiment, s.part, config, s.seeds)
        broken.append(s)
    results = train_factored_batch(broken, SENSING)
    table = by_config(broken, results)
    for seed in (1, 2):
        assert table[("adam", 0.01, seed)].status == "error"
        assert "Invalid betas" in table[("adam", 0.01, seed)].message
        good = table[("gd", 0.1, seed)]
        assert good.status == "ok"
        assert good.metrics == by_config(*tiny_batch)[("gd", 0.1, seed)].metrics


def test_an_optimizer_failing_mid_run_marks_only_its_runs(monkeypatch, tiny_batch):
    real = factor_training.make_optimizer

    def flaky(method, params, **kw):
        opt = real(method, params, **kw)
        if method == "adam":
            step, calls = opt.step, [0]

            def failing_step(closure=None):
                calls[0] += 1
                if calls[0] == 3:
                    raise FloatingPointError("step 3 went wrong")
                return step(closure)

            opt.step = failing_step
        return opt

    monkeypatch.setattr(factor_training, "make_optimizer", flaky)
    specs = tiny_part(("gd", "adam"), {"gd": (0.1,), "adam": (0.01,)}).specs()
    table = by_config(specs, train_factored_batch(specs, SENSING))
    for seed in (1, 2):
        bad = table[("adam", 0.01, seed)]
        assert bad.status == "error" and bad.message == "FloatingPointError: step 3 went wrong"
        assert table[("gd", 0.1, seed)].metrics == by_config(*tiny_batch)[("gd", 0.1, seed)].metrics


def test_mixed_problems_are_refused():
    a = tiny_part(("gd",), {"gd": (0.1,)}).specs()
    b = tiny_part(("gd",), {"gd": (0.1,)}, num_steps=40).specs()
    with pytest.raises(ValueError, match="must share"):
        train_factored_batch(a + b, SENSING)


def _stacked_vs_pair(method, steps=6):
    """Run ``method`` on P = (U, V) stacked (batch_dims=2) and on [U, V] (batch_dims=1)."""
    inst = make_instance(0, 6, 2, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    P = torch.randn(3, 2, 6, 6, generator=g, dtype=torch.float64) * 0.3
    U, V = P[:, 0].clone(), P[:, 1].clone()
    lr = torch.tensor([1e-3, 3e-3, 1e-2], dtype=torch.float64)
    hp = dict(ms.PAPER_HPARAMS.get(method, {}))
    make = factor_training.make_optimizer
    stacked = make(method, [P], batch_dims=2, lr=lr[:, None].repeat(1, 2), **hp)
    pair = make(method, [U, V], batch_dims=1, lr=lr, **hp)
    for _ in range(steps):
        _, gu, gv = loss_and_grads(P[:, 0], P[:, 1], inst.A, inst.y)
        P.grad = torch.stack([gu, gv], dim=1)
        stacked.step()
        _, U.grad, V.grad = loss_and_grads(U, V, inst.A, inst.y)
        pair.step()
    return P, torch.stack([U, V], dim=1)


@pytest.mark.parametrize("method", sorted(PER_MATRIX_RULES & set(ms.PAPER_HPARAMS)))
def test_per_matrix_rules_may_stack_u_and_v(method):
    stacked, pair = _stacked_vs_pair(method)
    assert_close(stacked, pair, rtol=1e-12, atol=1e-15)


def test_shared_scale_adam_must_not_stack():
    # negative control: pooling over U and V of a run is not pooling over each matrix
    stacked, pair = _stacked_vs_pair("scalar_adam")
    assert not torch.allclose(stacked, pair, rtol=1e-6, atol=1e-9)
    assert "scalar_adam" not in PER_MATRIX_RULES


# --------------------------------------------------------------------------------------------
# agreement with an independent plain loop (autograd, one run, no batching)
# --------------------------------------------------------------------------------------------


def plain_run(method, lr, seed, part, schedule="constant"):
    p, b = part.problem, part.budget
    inst = make_instance(seed, p.n, p.r, p.m, num_val=p.num_val, dtype=torch.float64)
    U, V = init_factors(seed, p.n, p.k, p.init_scale, dtype=torch.float64)
    U.requires_grad_(True)
    V.requires_grad_(True)
    m1 = [torch.zeros_like(U), torch.zeros_like(V)]
    m2 = [torch.zeros_like(U), torch.zeros_like(V)]
    for t in range(1, b.num_steps + 1):
        residual = inst.A @ (U @ V.T).reshape(-1) - inst.y
        loss = (residual**2).mean()
        train = loss.item()
        if not math.isfinite(train) or train > b.diverge_above:
            return {"status": "diverged", "steps": t}
        gU, gV = torch.autograd.grad(loss, [U, V])
        step = lr * (0.5 * (1 + math.cos(math.pi * t / b.num_steps)) if schedule == "cosine"
                     else 1.0)
        with torch.no_grad():
            for i, (p_, g) in enumerate(((U, gU), (V, gV))):
                if method == "gd":
                    p_ -= step * g
                elif method == "adam":
                    m1[i] = 0.9 * m1[i] + 0.1 * g
                    m2[i] = 0.999 * m2[i] + 0.001 * g * g
                    mh, vh = m1[i] / (1 - 0.9**t), m2[i] / (1 - 0.999**t)
                    p_ -= step * mh / (vh.sqrt() + 1e-8)
                elif method == "signum":
                    m1[i] = 0.9 * m1[i] + 0.1 * g
                    p_ -= step * torch.sign(m1[i])
        if t % b.check_every == 0 and train < b.tol:
            break
    W = (U @ V.T).detach()
    rec = (torch.linalg.matrix_norm(W - inst.X_star) / torch.linalg.matrix_norm(inst.X_star))
    return {"status": "ok", "steps": t, "rec": rec.item(), "train_loss": train}


@pytest.mark.parametrize(("method", "lr", "schedule"), [
    ("gd", 0.1, "constant"), ("gd", 5.0, "constant"), ("adam", 0.03, "constant"),
    ("signum", 0.01, "cosine"),
])
def test_matches_an_independent_plain_loop(method, lr, schedule):
    part = tiny_part((method,), {method: (lr,)}, seeds=(3,), schedules={method: schedule})
    (spec,) = part.specs()
    got = train_factored_batch([spec], SENSING)[0]
    want = plain_run(method, lr, 3, part, schedule)
    assert got.status == want["status"] and got.metrics["steps"] == want["steps"]
    if want["status"] == "ok":
        assert_close(torch.tensor(got.metrics["rec"]), torch.tensor(want["rec"]),
                     rtol=1e-9, atol=1e-12)
        assert_close(torch.tensor(got.metrics["train_loss"]), torch.tensor(want["train_loss"]),
                     rtol=1e-9, atol=1e-15)
    # negative control: the constant schedule is not the cosine one
    if schedule == "cosine":
        other = plain_run(method, lr, 3, part, "constant")
        assert abs(other["rec"] - got.metrics["rec"]) > 1e-6


def test_convex_reference_run():
    pytest.importorskip("cvxpy")
    part = ms.Part("convex", "test", Problem(8, 1, 8, 30, 10, 1e-3), Budget(10), (5,),
                   kind="convex")
    (spec,) = part.specs()
    result = ms.EXPERIMENT.run_batch([spec], device=torch.device("cpu"), progress=False)[0]
    assert result.status == "ok"
    assert result.metrics["feasibility"] < 1e-6
    assert result.metrics["nuclear_norm"] <= result.metrics["nuclear_norm_star"] * (1 + 1e-6)


def test_the_decay_part_runs_the_papers_ceiling_as_an_l2_term():
    """The paper's ceiling adds wd·(‖U‖² + ‖V‖²) to the loss; its gradient is 2·wd·θ, so the
    arm runs Adam with the coupled weight_decay = 2·wd (checked against autograd on the
    penalised loss, one wd off as the control); AdamW and the equivariant arms decay
    decoupled; every (lr, wd) of the paper's grid runs on every seed."""
    from gaugekit.optim import Adam

    part = ms.get_config("paper").part("decay")
    specs = part.specs()
    assert len(specs) == 3 * 3 * sum(len(part.lr_grids[a]) for a in ms.DECAY_ARMS)
    ceiling = [s for s in specs if s.config["arm"] == "adam_l2"]
    assert {s.config["hparams"]["weight_decay"] / s.config["wd"] for s in ceiling} == {2.0}
    assert {s.config["hparams"]["lr"] for s in ceiling} == set(ms.DECAY_ADAM_LRS)
    adamw = [s for s in specs if s.config["arm"] == "adamw"]
    assert all(s.config["hparams"]["decoupled_weight_decay"] for s in adamw)
    assert {s.config["budget"]["num_steps"] for s in specs} == {30_000}
    assert {s.config["schedule"] for s in specs if s.config["arm"] == "muon_wd"} == {"cosine"}

    g = torch.Generator().manual_seed(0)
    A, theta0 = torch.randn(5, 4, generator=g, dtype=torch.float64), torch.randn(
        4, 3, generator=g, dtype=torch.float64)
    wd = 1e-2

    def run(penalty: float, weight_decay: float) -> torch.Tensor:
        theta = theta0.clone().requires_grad_(True)
        opt = Adam([theta], lr=1e-2, weight_decay=weight_decay)
        for _ in range(5):
            opt.zero_grad()
            loss = (A @ theta).square().mean() + penalty * theta.square().sum()
            loss.backward()
            opt.step()
        return theta.detach()

    reference = run(wd, 0.0)
    torch.testing.assert_close(run(0.0, 2 * wd), reference, rtol=0, atol=1e-12)
    assert (run(0.0, wd) - reference).abs().max() > 1e-6


def test_decay_rows_choose_lr_and_wd_together():
    def rec(arm, lr, wd, seed, value, train=1e-9):
        return {"status": "ok", "config": {"arm": arm, "hparams": {"lr": lr}, "wd": wd,
                                           "seed": seed, "budget": {"tol": 1e-7}},
                "metrics": {"rec": value, "train_loss": train, "interpolated": train < 1e-7,
                            "effective_rank": 3.0, "nuclear_norm": 1.0, "balancedness": 0.0,
                            "steps": 10}}

    records = [rec("adam_l2", lr, wd, s, 0.5 + lr + wd) for lr in (1e-3, 1e-2)
               for wd in (1e-4, 1e-3) for s in (42, 123)]
    records += [rec("adam_l2", 1e-3, 1e-4, 7, 0.1, train=1e-3)]   # fails the mean gate
    rows = ms.decay_rows(records)
    (row,) = rows
    assert (row["lr"], row["wd"]) == (1e-3, 1e-3)
    assert row["interpolated"] and row["at_grid_edge"]


#: the paper's grids (experiments/optimizer_zoo_bias.py): (first, last, number of points)
PAPER_GRIDS = {
    "gd": (0.01, 0.3, 4), "adam": (1e-3, 3e-2, 3), "scalar_adam": (1e-3, 3e-2, 4),
    "rmsprop": (1e-4, 1e-2, 5), "signum": (1e-4, 3e-3, 4), "lion": (1e-4, 3e-3, 4),
    "adafactor": (3e-4, 1e-2, 4), "muon": (3e-3, 0.1, 4), "shampoo": (3e-2, 1.0, 4),
}


@pytest.mark.parametrize("name", sorted(PAPER_GRIDS))
def test_paper_grids(name):
    grid = ms.PAPER_LR_GRIDS[name]
    first, last, count = PAPER_GRIDS[name]
    assert (grid[0], grid[-1], len(grid)) == (first, last, count)
    assert list(grid) == sorted(grid)
