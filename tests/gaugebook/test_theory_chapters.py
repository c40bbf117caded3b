"""The theory chapters' live checks and figures (:mod:`gaugebook.symmetry`,
:mod:`gaugebook.taxonomy`, :mod:`gaugebook.dynamics`) and the appendix's collision figure: each
figure draws on small inputs and returns a figure,
optimizers in the book's colours, legends outside the axes; each check finds what its theorem
says on small float64 examples, and misses where the theorem does not apply."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gaugebook import dynamics, ecosystem, symmetry, taxonomy  # noqa: E402
from gaugebook.present.viz import method_color  # noqa: E402
from gaugebook.sensing.measurements import make_instance  # noqa: E402
from gaugekit import theory  # noqa: E402
from gaugekit.gauge import gl_act, haar_orthogonal, random_gl, rotate_factors  # noqa: E402

DTYPE = torch.float64
EXACT = 1e-12  # round-off of the small float64 checks
BROKEN = 1e-2  # a gap the theorem does not forbid


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _colors(fig):
    return {line.get_color() for ax in fig.axes for line in ax.get_lines()}


def test_factor_pairs_has_a_colour_bar_per_column():
    g = torch.Generator().manual_seed(0)
    U, V = torch.randn(5, 3, generator=g), torch.randn(4, 3, generator=g)
    fig = symmetry.factor_pairs([("a", U, V), ("b", 2 * U, V / 2)])
    assert len(fig.axes) == 2 * 3 + 3  # six panels and three colour bars


def test_orbit_circle_and_time_change_draw():
    thetas = torch.linspace(0, 2 * math.pi, 9, dtype=torch.float64)
    fig = symmetry.orbit_circle(torch.tensor([[0.5, 0.2]], dtype=torch.float64), thetas,
                                  {"gauge": thetas * 0 + 1, "U only": thetas.cos() + 2})
    assert fig.axes[1].get_legend() is not None
    t = torch.linspace(0, 2, 11)
    fig = dynamics.time_change(t, (-t).exp(), t[:6], (-t[:6]).exp(), t[:6] * 0.8, t[:6] * 1.2)
    assert fig.legends  # one legend for the figure, below the axes


def test_plane_runs_and_clock_free_colour_by_method():
    U = torch.rand(4, 1, 2)
    fig = taxonomy.plane_runs({"gd": [U], "adam": [U]},
                              {"gd": torch.rand(2, 4), "scalar_adam": torch.rand(2, 4)})
    assert {method_color("gd"), method_color("adam"), method_color("scalar_adam")} <= _colors(fig)
    fig = dynamics.clock_free({"gd": (torch.rand(5) + 0.1, torch.rand(5) + 0.1)})
    assert method_color("gd") in _colors(fig)


def test_adam_defect_audit_bars_and_balancedness_draw():
    lrs, epss = [1e-3, 1e-2, 1e-1], [1e-8, 1.0]
    delta = torch.rand(2, 3) + 0.1
    measured = {(lr, eps): 0.5 for lr in lrs[:2] for eps in epss}
    fig = taxonomy.adam_defect(lrs, epss, delta, measured, [1e-3, 1.0, 10.0],
                               torch.tensor([0.5, 0.4, 0.01]), 1.0)
    assert fig.legends
    fig = taxonomy.audit_bars([("zoo", ["GD", "Adam"], [0.0, 0.7], [True, False])], 1e-8)
    assert len(fig.axes) == 1
    curves = {m: [torch.rand(5) + 1e-3 for _ in range(2)] for m in ("gd", "adam")}
    fig = dynamics.balancedness(curves, [2e-3, 1e-3], ["gd"], 0.5)
    assert {method_color("gd"), method_color("adam")} <= _colors(fig)


def test_transfer_curves_and_gap_collision_draw():
    s = torch.logspace(-2, 1, 5)
    fig = dynamics.transfer_curves([("GD", "gd", "-", s, s, s, s)],
                                   (s / 10, s / 10, s / 10, s / 10))
    assert method_color("muon") in _colors(fig)
    fig = ecosystem.gap_collision([0.0, 1e-8, 1e-4], [0.3, 1e-8, 1e-12], 1e-8)
    assert method_color("eigen_adam") in _colors(fig)


# --------------------------------------------------------------------------------------------
# the live checks
# --------------------------------------------------------------------------------------------


def _draw(*shapes, seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(*shape, generator=gen, dtype=DTYPE) for shape in shapes]


def test_findings_show_prints_its_lines_and_glues_its_values(monkeypatch, capsys):
    glued = []
    monkeypatch.setattr(symmetry, "glue_page", glued.append)
    symmetry.Findings({"x": 1.0}, ["first", "second"]).show()
    symmetry.Findings({"y": 2.0}).show()  # no lines: prints nothing at all
    assert capsys.readouterr().out == "first\nsecond\n"
    assert glued == [{"x": 1.0}, {"y": 2.0}]


def test_gauge_checks_hold_for_orthogonal_gauges_and_fail_where_the_lemmas_say():
    gen = torch.Generator().manual_seed(0)
    U, V = _draw((5, 3), (4, 3), seed=1)
    Q = haar_orthogonal(3, generator=gen, dtype=DTYPE)
    A = random_gl(3, generator=gen, condition_number=4.0, dtype=DTYPE)
    # Lemma 3.2 as chapter 1 computes it: both gauges keep W, only Q keeps the size
    W, size = U @ V.mT, U.square().sum() + V.square().sum()
    for act, M, keeps_size in ((rotate_factors, Q, True), (gl_act, A, False)):
        U2, V2 = act(U, V, M)
        assert ((U2 @ V2.mT - W).norm() / W.norm()).item() < EXACT
        change = ((U2.square().sum() + V2.square().sum() - size).abs() / size).item()
        assert (change < EXACT) if keeps_size else (change > BROKEN)
    instance = make_instance(0, n=6, r=2, dtype=DTYPE)
    U0, V0 = _draw((6, 3), (6, 3), seed=2, scale=0.5)
    cov = symmetry.gradient_covariance_check(instance.loss, U0, V0, Q, A)
    assert max(cov.values["covariance_Q"], cov.values["covariance_A"]) < 1e-10
    assert cov.values["wrong_law"] > BROKEN
    assert len(cov.lines) == 3


def test_orbit_check_is_flat_only_along_the_joint_rotation():
    instance = make_instance(0, n=6, r=2, dtype=DTYPE)
    U0, V0 = _draw((6, 2), (6, 2), seed=3, scale=0.5)
    thetas = torch.linspace(0.0, 2 * math.pi, 37, dtype=DTYPE)
    orbit = symmetry.orbit_check(instance.loss, U0, V0, thetas)
    assert orbit.values["orbit_spread"] < EXACT
    assert orbit.values["U_only_range"] > BROKEN
    assert [p.shape for p in orbit.figure["paths"].values()] == [(37,)] * 3


def test_interface_and_head_gauges_keep_products_and_logits():
    gen = torch.Generator().manual_seed(4)
    widths = [4, 3, 3, 5]
    weights = [torch.randn(o, i, generator=gen, dtype=DTYPE)
               for i, o in zip(widths[:-1], widths[1:], strict=True)]
    X, Y = _draw((20, 4), (20, 5), seed=5)
    Qs = [haar_orthogonal(d, generator=gen, dtype=DTYPE) for d in widths[1:-1]]
    As = [random_gl(d, generator=gen, condition_number=4.0, dtype=DTYPE) for d in widths[1:-1]]
    chain = symmetry.interface_gauge_check(weights, X, Y, Qs, As).values
    assert max(v for k, v in chain.items() if k != "norm_change_A") < 1e-10
    assert chain["norm_change_A"] > BROKEN
    tokens, W_Q, W_K = _draw((5, 6), (6, 6), (6, 6), seed=6)
    R = haar_orthogonal(3, generator=gen, batch_shape=(2,), dtype=DTYPE)
    heads = symmetry.head_gauge_check(tokens, W_Q, W_K, R, 2).values
    assert max(heads["logit_change"], heads["bilinear_change"]) < EXACT
    assert heads["query_only_change"] > BROKEN


def test_time_change_right_clock_matches_and_scalar_flows_keep_balancedness():
    instance = make_instance(0, n=6, r=2, dtype=DTYPE)
    U0, V0 = _draw((6, 3), (6, 3), seed=7, scale=0.3)
    T = torch.linspace(0.0, 0.5, 6, dtype=DTYPE)
    clock = dynamics.time_change_check(instance.loss, U0, V0, T,
                                         lambda t: 1.0 + 0.8 * math.sin(2.0 * t) ** 2)
    assert clock.values["right_clock_error"] < 1e-7 < BROKEN < clock.values["wrong_clock_error"]
    assert clock.values["tau_end"] < clock.values["T_end"] < clock.values["tau_wrong_end"]
    aniso = theory.factor_flow(instance.loss, U0, V0, T, velocity=lambda t, gu, gv: (3 * gu, gv))
    drift = dynamics.drift_check(U0, V0, scalar=clock.data["preconditioned"], aniso=aniso)
    assert drift.values["drift_scalar"] < 1e-7 and drift.values["drift_aniso"] > BROKEN
    assert drift.lines[1].startswith("  scalar ") and "anisotropic" in drift.lines[1]


def test_clock_free_and_balancedness_checks_separate_the_scalar_class():
    instance = make_instance(0, n=6, r=2, dtype=DTYPE)
    U0, V0 = _draw((6, 3), (6, 3), seed=8, scale=0.3)
    paths = dynamics.clock_free_check(instance, U0, V0, [("gd", 2e-3, 60),
                                                           ("adam", 1e-3, 60)])
    assert paths.values["path_distance_gd"] < 1e-6  # the reference path itself (cdist round-off)
    assert paths.values["path_distance_adam"] > 1e-3
    V_bal = haar_orthogonal(6, generator=torch.Generator().manual_seed(9), dtype=DTYPE) @ U0
    balance = dynamics.balancedness_check(instance.loss, U0, V_bal, ["gd", "adam"],
                                            [4e-3, 2e-3], 0.1, ["gd"])
    assert balance.values["eta_ratio"] == 2.0
    assert abs(balance.values["halving_scalar_min"] - 2.0) < 0.2  # O(eta) drift halves
    assert balance.values["halving_other_max"] < 1.5  # first-order drift does not


def test_characterization_and_transfer_checks_find_the_gram_form():
    G, = _draw((7, 4), seed=10)
    Q = haar_orthogonal(4, generator=torch.Generator().manual_seed(11), dtype=DTYPE)
    D = torch.diag(torch.linspace(0.5, 2.0, 4, dtype=DTYPE))
    first = theory.registry_first_step
    found = dynamics.characterization_check(
        {"GD": first("gd", 0.1), "Muon": first("muon", 0.1),
         "right scaling (control)": lambda g: g @ D}, G, Q).values
    assert found["char_worst_equivariant"] < 1e-10 and found["char_best_control"] > BROKEN
    assert found["gram_gauge_error"] < 1e-10 and "<table" in found["characterization_table"]
    transfer = dynamics.spectral_transfer_check(G)
    assert transfer.values["transfer_residual"] < 1e-10
    assert transfer.values["transfer_formula_error"] < 1e-8
    assert 0.5 < transfer.values["ns_min"] < 1.0 < transfer.values["ns_max"] < 1.5
    assert [c[0] for c in transfer.figure["curves"]][0] == "GD"


def test_taxonomy_witnesses_match_their_closed_forms():
    c = 2**-0.5
    Q45 = torch.tensor([[c, c], [-c, c]], dtype=DTYPE)
    w = taxonomy.first_step_witnesses(Q45)
    assert abs(w.values["sign_gap"] - (1 - c)) < EXACT  # |(0, 1) - (0, √2)| / √2
    assert w.values["adafactor_gap"] > BROKEN and w.values["adafactor_gap_at_one"] < EXACT
    assert w.lines[0] == "sign(GQ) by Signum       0.0000   1.0000"
    adam = taxonomy.adam_witness_check(Q45).values
    assert adam["witness_error"] < EXACT and adam["W1_plain"] != adam["W1_rot"]


def test_adam_defect_check_agrees_with_the_library_adam_and_gd_keeps_the_plane():
    instance = make_instance(0, n=6, r=2, dtype=DTYPE)
    U0, V0 = _draw((6, 3), (6, 3), seed=12, scale=0.5)
    Q = haar_orthogonal(3, generator=torch.Generator().manual_seed(13), dtype=DTYPE)
    defect = taxonomy.adam_defect_check(instance.loss, U0, V0, Q, [1e-3, 1e-1], [1e-8, 1.0],
                                        [1e-2], [1e-8, 10.0, 30.0, 100.0, 300.0, 1e3])
    assert defect.values["closed_vs_measured"] < 1e-6
    assert defect.values["delta_sign_regime"] > BROKEN
    assert -1.1 < defect.values["slope_large_eps"] < -0.7  # δ = O(1/ε), the exercise
    starts = [0.3 * torch.tensor([[math.cos(a), math.sin(a)]], dtype=DTYPE) for a in (0.2, 1.0)]
    plane = taxonomy.plane_check(starts, [("adam", 0.01), ("gd", 0.05)], steps=50,
                                 drawn=("gd",))
    assert plane.values["plane_spread_gd"] < EXACT < BROKEN < plane.values["plane_spread_adam"]
    assert list(plane.figure["products"]) == ["gd", "adam"]  # the drawn methods first
    assert list(plane.figure["paths"]) == ["gd"]


def test_audit_summary_and_registry_tables():
    from gaugekit.audit.factors import audit_many, registry_factories

    rows = audit_many(registry_factories(["gd", "adam"]))
    found = taxonomy.audit_summary(rows, rows[:1]).values
    assert found["zoo_agree"] == found["zoo_count"] == 2 and found["torch_count"] == 1
    assert found["residual_gap_decades"] > 3
    assert "<table" in found["zoo_audit_table"] and "<table" in found["torch_audit_table"]
    zoo, torch_panel = taxonomy.audit_panels(rows, rows[:1])
    assert zoo[1] == ["GD", "Adam"] and zoo[3] == [True, False] and torch_panel[1] == ["gd"]
    audit_table = taxonomy.audit_table(rows)
    assert audit_table.count("<tr") == 3 and "moved" in audit_table and ">adam<" in audit_table
    table, common = taxonomy.defaults_table()
    assert "<table" in table and "<table" in taxonomy.registry_table() and common
    assert taxonomy.wrapped("short\n" + "word " * 30, width=40).splitlines()[2].startswith("    ")
    assert taxonomy.matrix_lines("M", torch.eye(2)) == ["M                        1.0000   0.0000",
                                                        "                         0.0000   1.0000"]
