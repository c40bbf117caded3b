"""gaugekit.optim under torch.distributed: two real gloo processes on CPU, float64.

One ``torch.multiprocessing.spawn`` of two ranks runs every scenario of
``distributed_support.SCENARIOS`` (module fixture ``results``); the tests below judge what rank 0
wrote. Layouts: DTensor ``Shard(0)`` on a 1-D mesh of 2 ranks (``distribute_tensor``; uneven
rows), DTensor ``Replicate()``, ``(Replicate, Shard)`` on 2-D meshes, a real FSDP2
``fully_shard`` model and a real DDP model (each rank its half of the batch).

Tolerance ``TOL = 1e-12`` on ``max_t ‖θ_t − θ_t^ref‖ / ‖θ_t^ref − θ_0‖`` over 12 steps. The
sharded step computes the same quantities as one process in another summation order (two
partial sums and an all-reduce; sums of squares instead of ``vector_norm``): each reduction is
off by a few ulps (``N ε ≈ 1e-14`` for ``N < 50`` entries), and 12 steps of a smooth update
amplify that mildly (measured: ≤ 1e-15). ``TOL`` is three orders above that, and the negative
control (no all-reduce: each rank's scalar from its own block) is off by ``> 1e-3``.
"""

from __future__ import annotations

import json
import socket

import pytest
import torch.distributed as dist

if not (dist.is_available() and dist.is_gloo_available()):
    pytest.skip(
        "torch.distributed with the gloo backend is not available in this torch build",
        allow_module_level=True,
    )

from distributed_support import (  # noqa: E402
    AUDITED,
    DATA_PARALLEL,
    NUM_STEPS,
    REDUCING,
    RULES,
    worker,
)

TOL = 1e-12
#: the naive shard-local scalar must be off by more than this (it is O(1e-2 … 1)).
NAIVE_GAP = 1e-3
FLOW_RULES = [name for name in RULES if name.startswith("flow_adam") and "no_flow" not in name]
#: collectives per step of the gathering matrix rules, sharded: one all-gather per matrix.
GATHERS = {"muon": 3, "shampoo": 3, "gram": 3, "scaled_gd": 4, "scaled_gd_sequential": 4}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path_factory.mktemp("distributed") / "results.json"
    mp.spawn(worker, args=(f"tcp://127.0.0.1:{port}", str(out)), nprocs=2, join=True)
    return json.loads(out.read_text())


def _scenario(results: dict, name: str) -> dict:
    value = results[name]
    assert "error" not in value, f"scenario {name} raised: {value.get('error')}"
    return value


@pytest.mark.parametrize("rule", list(RULES))
def test_sharded_and_replicated_updates_equal_one_process(results, rule):
    row = _scenario(results, "trajectories")[rule]
    assert row["shard_residual"] <= TOL, row
    assert row["replicate_residual"] <= TOL, row
    if rule in FLOW_RULES:  # the flow path was taken, at the same steps, in all three runs
        assert row["flow_steps_plain"] > 0, row
        assert row["shard_flow_steps"] == row["replicate_flow_steps"] == row["flow_steps_plain"]


@pytest.mark.parametrize("rule", REDUCING)
def test_reductions_over_parameters_cost_one_all_reduce_per_step(results, rule):
    row = _scenario(results, "trajectories")[rule]
    assert row["shard_all_reduces"] == [1] * NUM_STEPS, row
    assert row["shard_collectives"] == [1] * NUM_STEPS, row  # nothing else is communicated
    assert row["replicate_collectives"] == [0] * NUM_STEPS, row  # replicated: nothing to sum


def test_the_non_finite_check_of_flow_adam_costs_one_more_all_reduce(results):
    """FlowAdam's default ``nonfinite="skip"`` sums ``g²`` before its moments: one more
    ``all_reduce`` per step (the other rules' rows run with ``nonfinite="propagate"``)."""
    row = _scenario(results, "trajectories")["flow_adam_checked"]
    assert row["shard_all_reduces"] == [2] * NUM_STEPS, row
    assert row["replicate_collectives"] == [0] * NUM_STEPS, row


def test_the_non_finite_check_of_a_matrix_rule_costs_one_all_reduce(results):
    """Muon's default ``nonfinite="skip"``: the sums of ``g²`` of every shard in one
    ``all_reduce`` per step (every rank takes the same decision), beside its three gathers."""
    row = _scenario(results, "trajectories")["muon_checked"]
    assert row["shard_all_reduces"] == [1] * NUM_STEPS, row
    assert row["shard_collectives"] == [GATHERS["muon"] + 1] * NUM_STEPS, row
    assert row["shard_residual"] <= TOL, row


@pytest.mark.parametrize("layout", ["hsdp_1x2", "hsdp_2x1"])
@pytest.mark.parametrize("rule", REDUCING)
def test_two_dimensional_meshes_reduce_over_the_sharded_dimension_only(results, rule, layout):
    """(Replicate, Shard) on a 1×2 mesh and (Shard, Replicate) on a 2×1 mesh: the sum runs over
    the mesh dimension of size 2 (over the other one it would be the naive local scalar)."""
    row = _scenario(results, "trajectories")[rule]
    assert row[f"{layout}_residual"] <= TOL, row
    assert row[f"{layout}_all_reduces"] == [1] * NUM_STEPS, row


def test_elementwise_rules_communicate_nothing(results):
    rows = _scenario(results, "trajectories")
    for rule in ("adam", "lion"):
        assert rows[rule]["shard_collectives"] == [0] * NUM_STEPS, (rule, rows[rule])


@pytest.mark.parametrize("rule", list(GATHERS))
def test_matrix_rules_gather_each_matrix_once(results, rule):
    row = _scenario(results, "trajectories")[rule]
    assert row["shard_collectives"] == [GATHERS[rule]] * NUM_STEPS, row
    assert row["shard_all_reduces"] == [0] * NUM_STEPS, row
    assert row["replicate_collectives"] == [0] * NUM_STEPS, row


@pytest.mark.parametrize("rule", ["shared_scale_adam", "flow_adam_invariant"])
def test_negative_control_shard_local_scalar_differs(results, rule):
    """Without the all-reduce each rank divides by the RMS of its own block: another scalar."""
    gap = _scenario(results, "naive")[rule]
    assert gap > NAIVE_GAP, gap
    assert _scenario(results, "trajectories")[rule]["shard_residual"] <= TOL


@pytest.mark.parametrize("wrap", ["fsdp2", "ddp"])
@pytest.mark.parametrize("rule", DATA_PARALLEL)
def test_fsdp2_and_ddp_models_train_like_one_process(results, wrap, rule):
    row = _scenario(results, "data_parallel")[f"{wrap}/{rule}"]
    assert row["residual"] <= TOL, row
    if wrap == "fsdp2":
        assert row["placements"] == ["(Shard(dim=0),)"], row
        assert row["all_reduces"] == [1] * NUM_STEPS, row
    else:  # DDP already averaged the gradients: each rank holds the whole tensors
        assert row["placements"] == ["plain"], row
        assert row["all_reduces"] == [0] * NUM_STEPS, row
    if rule.startswith("flow_adam"):
        assert row["flow_steps"] > 0, row


@pytest.mark.parametrize("rule", list(AUDITED))
def test_equivariance_audit_of_sharded_runs(results, rule):
    row = _scenario(results, "audit")[rule]
    assert row["sharded"] and not row["static"], row
    if rule == "adam":  # the control: the audit still catches a non-equivariant sharded rule
        assert not row["equivariant"] and row["residual"] > 1e3 * row["threshold"], row
    else:
        assert row["equivariant"], row
    if rule == "flow_adam_invariant":
        assert all(steps > 0 for steps in row["flow_steps"]), row


def test_refusals_say_what_to_do(results):
    row = _scenario(results, "refusals")
    assert row["batch_dims"].startswith("ValueError: Invalid batch_dims: 1"), row
    assert "one run per process group" in row["batch_dims"]
    assert row["multi_stage"].startswith("ValueError: Invalid flow_method: 'rk4'"), row
    assert "'euler'" in row["multi_stage"]
    assert row["partial"].startswith("ValueError: Invalid placements"), row
    assert "redistribute" in row["partial"]
    assert row["euler_accepted"] is None, row
    assert row["eigen_adam"].startswith("ValueError: Invalid params: a sharded DTensor"), row
    assert "fully_shard" in row["eigen_adam"]
