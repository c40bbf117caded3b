"""Selection protocols on small synthetic record lists."""

from __future__ import annotations

import math

import pytest

from gaugebook.engine.selection import (
    LOOSE_BAR,
    ORACLE,
    ORACLE_LOOSE,
    ORACLE_MEAN,
    PROTOCOLS,
    TRAIN_SPEED,
    VALIDATION,
    Protocol,
    get_path,
    mean_metric,
    select,
)


def rec(method, lr, seed, *, rec, val=None, train=1e-9, steps=1000, interp=True, status="ok"):
    metrics = {"rec": rec, "val_rec": rec if val is None else val, "train_loss": train,
               "steps": steps, "interpolated": interp}
    if status != "ok":
        metrics = dict.fromkeys(metrics)
        metrics["interpolated"] = False
    return {"config": {"method": method, "hparams": {"lr": lr}, "seed": seed},
            "status": status, "metrics": metrics}


def grid(method, table, seeds=(1, 2, 3)):
    """``table``: lr → dict of rec kwargs (same for every seed unless a list is given)."""
    out = []
    for lr, kw in table.items():
        for i, seed in enumerate(seeds):
            out.append(rec(method, lr, seed, **{k: (v[i] if isinstance(v, list) else v)
                                                for k, v in kw.items()}))
    return out


def test_get_path_and_mean_metric():
    r = rec("gd", 0.1, 1, rec=0.5)
    assert get_path(r, "config.hparams.lr") == 0.1
    assert get_path(r, "config.missing.x", "d") == "d"
    assert mean_metric([r, rec("gd", 0.1, 2, rec=0.3)], "rec") == pytest.approx(0.4)
    assert math.isnan(mean_metric([r, rec("gd", 0.1, 2, rec=None)], "rec"))


def test_oracle_picks_lowest_mean_rec_among_interpolating_lrs():
    records = grid("gd", {
        0.01: {"rec": 0.30},
        0.03: {"rec": 0.20},
        0.1: {"rec": 0.05, "interp": [True, False, True], "train": [1e-9, 1e-3, 1e-9]},
        0.3: {"rec": 0.0, "status": "diverged"},
    })
    s = select(records, ORACLE)["gd"]
    # 0.1 has the lowest rec but one seed did not interpolate; 0.3 diverged
    assert s.value == 0.03 and s.gated
    assert s.score == pytest.approx(0.20)
    assert not s.at_grid_edge and s.grid == (0.01, 0.03, 0.1, 0.3)
    assert s.candidates[0.3] == (False, False, s.candidates[0.3][2])
    assert s.candidates[0.1][:2] == (True, False)
    assert s.mean("rec") == pytest.approx(0.20)


def test_fallback_when_no_lr_interpolates_is_flagged():
    records = grid("signum", {
        1e-4: {"rec": 0.5, "interp": False, "train": 1e-2},
        3e-4: {"rec": 0.4, "interp": False, "train": 1e-1},
    })
    s = select(records, ORACLE)["signum"]
    assert not s.gated
    # fallback score = rec + train: 0.51 vs 0.50
    assert s.value == 3e-4 and s.score == pytest.approx(0.5)
    assert s.at_grid_edge


def test_validation_and_oracle_can_disagree():
    records = grid("adam", {
        1e-3: {"rec": 0.40, "val": 0.45},
        1e-2: {"rec": 0.42, "val": 0.41},
    })
    assert select(records, ORACLE)["adam"].value == 1e-3
    assert select(records, VALIDATION)["adam"].value == 1e-2


def test_train_speed_prefers_fewest_steps():
    records = grid("gd", {
        0.01: {"rec": 0.1, "steps": 3000},
        0.03: {"rec": 0.4, "steps": 1200},
    })
    s = select(records, TRAIN_SPEED)["gd"]
    assert s.value == 0.03 and s.score == pytest.approx(1200)
    assert s.at_grid_edge


def test_ties_go_to_the_smaller_value_and_groups_are_separate():
    records = grid("gd", {0.1: {"rec": 0.2}, 0.01: {"rec": 0.2}})
    records += grid("adam", {1e-3: {"rec": 0.5}})
    out = select(records, ORACLE)
    assert list(out) == ["gd", "adam"]
    assert out["gd"].value == 0.01
    assert out["adam"].at_grid_edge  # a one-point grid is its own edge


def test_nothing_selectable_gives_none():
    records = grid("gd", {0.3: {"rec": 0.0, "status": "diverged"}})
    s = select(records, ORACLE)["gd"]
    assert s.value is None and s.runs == () and math.isnan(s.mean("rec"))


def test_grouping_by_several_paths_and_custom_protocol():
    records = [
        {**rec("gd", lr, 1, rec=r), "config": {"method": "gd", "hparams": {"lr": lr},
                                               "schedule": sch, "seed": 1}}
        for lr, r, sch in [(0.1, 0.3, "constant"), (0.3, 0.2, "constant"),
                           (0.1, 0.1, "cosine"), (0.3, 0.4, "cosine")]
    ]
    out = select(records, ORACLE, group_by=("config.method", "config.schedule"))
    assert out[("gd", "constant")].value == 0.3
    assert out[("gd", "cosine")].value == 0.1
    worst = Protocol("worst", "highest rec", score=lambda runs: -mean_metric(runs, "rec"),
                     fallback=lambda runs: 0.0)
    assert select(records, worst, group_by=("config.method", "config.schedule"))[
        ("gd", "cosine")].value == 0.3


# --------------------------------------------------------------------------------------------
# the paper's gates: worst seed < tol (Table 2), mean < tol (newer controls), mean < 1e-4
# --------------------------------------------------------------------------------------------


def with_tol(records, tol=1e-7):
    for r in records:
        r["config"]["budget"] = {"tol": tol}
    return records


def gate_grid():
    """lr 1e-3: one seed just above 1e-7, the mean below it; lr 3e-3: the mean between 1e-7 and
    1e-4; lr 1e-2: every seed below 1e-7. Lower rec at the smaller lr, as for GD at n = 40."""
    return with_tol(grid("gd", {
        1e-3: {"rec": 0.10, "train": [1.4e-7, 5e-8, 5e-8], "interp": [False, True, True]},
        3e-3: {"rec": 0.12, "train": [2e-6, 3e-7, 1e-5], "interp": False},
        1e-2: {"rec": 0.15, "train": 6e-8},
    }))


def test_the_three_gates_pick_three_learning_rates():
    records = gate_grid()
    # Table 2's gate: the worst seed must be below the tolerance
    assert select(records, ORACLE)["gd"].value == 1e-2
    # the newer controls' gate: the mean (8e-8) is below 1e-7 at lr 1e-3
    assert select(records, ORACLE_MEAN)["gd"].value == 1e-3
    # the loose gate admits 3e-3 too, but 1e-3 still has the lowest rec
    loose = select(records, ORACLE_LOOSE)["gd"]
    assert loose.value == 1e-3 and loose.gated
    assert loose.candidates[3e-3][:2] == (True, True)
    assert select(records, ORACLE_MEAN)["gd"].candidates[3e-3][:2] == (True, False)


def test_loose_gate_bar_and_fallback():
    # negative control: a mean at or above the bar fails the loose gate, and with no lr gated
    # the fallback (rec + mean train) decides and says so
    records = with_tol(grid("rmsprop", {
        1e-4: {"rec": 0.30, "train": LOOSE_BAR, "interp": False},
        1e-3: {"rec": 0.20, "train": 2e-4, "interp": False},
    }))
    s = select(records, ORACLE_LOOSE)["rmsprop"]
    assert not s.gated and s.value == 1e-3
    assert s.score == pytest.approx(0.20 + 2e-4)


def test_mean_gate_needs_the_budget_tolerance():
    # without a recorded tolerance the mean gate cannot pass (no silent default)
    records = grid("gd", {1e-3: {"rec": 0.1, "train": 1e-12}})
    assert not select(records, ORACLE_MEAN)["gd"].gated
    assert select(with_tol(records, 1e-7), ORACLE_MEAN)["gd"].gated


def test_protocol_registry_names_every_gate():
    assert {"oracle", "oracle_mean", "oracle_loose"} <= set(PROTOCOLS)
    assert PROTOCOLS["oracle_loose"].gate_text.endswith("0.0001")
    assert "every seed" in ORACLE.gate_text and "mean" in ORACLE_MEAN.gate_text
