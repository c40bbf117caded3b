"""gaugekit.audit.factors: the equivariance audit on the library's rules, torch.optim and errors."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import BROKEN, haar, random_factors, rel, run, sensing
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from gaugekit.audit.factor_results import (
    BREAKS,
    CHAOS_FACTOR,
    CHAOTIC,
    FLOAT32_THRESHOLD,
    FLOAT64_THRESHOLD,
    KEEPS,
    UNJUDGED,
    AuditRow,
    decide_verdict,
    default_threshold,
    format_audit_table,
    optimizer_hyperparameters,
    optimizer_name,
)
from gaugekit.audit.factors import (
    AuditError,
    audit_equivariance,
    audit_many,
    registry_factories,
    sensing_loss,
    torch_optim_factories,
)
from gaugekit.optim.registry import get_spec, make_optimizer, optimizer_names

#: In float32 the default `gram` rule, H(P) = (P + λI)^{-1/2} with λ = 1e-6, is a nearly exact
#: polar factor msign(G); its sensitivity grows like 1/σ_min (up to λ^{-1/2} = 1e3), and for
#: tall factors it also amplifies round-off in the null space of the rank-k n×n Gram by the
#: same factor (measured audit residual up to ~2e-3 in float32, ~5e-12 in float64). This is
#: conditioning, not an equivariance failure; float32 audits use λ = 1e-2 (amplification ≤ 10).
FLOAT32_OVERRIDES: dict[str, dict[str, object]] = {"gram": {"damping": 1e-2}}

#: EigenAdam is judged in float64 only. It divides each coordinate of the Gram's eigenbasis by
#: that coordinate's own RMS, so an error δ in the computed eigenbasis carries δ·|g̃_large| into a
#: small coordinate and is multiplied there by |g̃_large| / |g̃_small|. In float32 (δ ≈ 6e-8 / gap)
#: this amplification reaches the audit's threshold at random points: residuals up to 1.8e-3
#: (n = m = k = 3, seed 42) against 3e-14 in float64 at the same points, and which of the
#: test's points cross threshold / 10 differs between AMD and Intel BLAS (seed 80: 1.3e-4 on
#: Intel). The float64 examples carry its verdict with the full margin.
FLOAT32_SKIP = {"eigen_adam"}


def _verdict_cases():
    return [pytest.param(name, dtype, id=f"{name}-{dtype_id}")
            for name in optimizer_names()
            for dtype, dtype_id in ((torch.float64, "float64"), (torch.float32, "float32"))
            if not (dtype == torch.float32 and name in FLOAT32_SKIP)]


@st.composite
def audit_shapes(draw):
    k = draw(st.integers(2, 3))  # k = 1: O(1) = {±1}, which every odd entrywise rule respects
    n = draw(st.integers(k, 7))
    m = draw(st.integers(k, 7))
    return n, m, k


@pytest.mark.parametrize(("name", "dtype"), _verdict_cases())
@settings(max_examples=3, deadline=None, derandomize=True)
@given(shape=audit_shapes(), seed=st.integers(0, 2**16))
def test_audit_verdict_matches_the_registry_classification(name, dtype, shape, seed):
    overrides = FLOAT32_OVERRIDES.get(name, {}) if dtype == torch.float32 else {}
    result = audit_equivariance(
        lambda params: make_optimizer(name, params, **overrides),
        shape=shape,
        dtype=dtype,
        num_steps=6,
        generator=torch.Generator().manual_seed(seed),
    )
    assert result.threshold == default_threshold(dtype)
    assert not result.static
    assert result.equivariant is get_spec(name).equivariant, (name, result)
    # the verdicts are not borderline. A broken rule's residual is a first-order defect, two
    # orders above the threshold in either dtype. An equivariant rule's residual is round-off
    # amplified by its normalizations: in float64 four orders below the threshold; in float32 it
    # reaches 3.4e-5 at these points (shared-scale Adam, FlowAdam), a third of threshold / 10,
    # and moves by up to a factor of two with the vector unit (the Gram rule: 2.7e-5 with
    # AVX-512, 1.7e-5 with AVX2 and one thread). float32 asks for threshold / 3, ten times above
    # the round-off measured; float64 keeps threshold / 10.
    below = 10 if dtype == torch.float64 else 3
    if result.equivariant:
        assert result.residual < result.threshold / below
    else:
        assert result.residual > result.threshold * 100


@pytest.mark.parametrize("weight_decay", [0.1, 1.0])
def test_the_zoo_keeps_its_verdicts_with_weight_decay(weight_decay):
    """Decoupled decay is a scalar multiple of the factors and coupled L2 (GD, Momentum,
    RMSprop, Adam) the gradient of the invariant λ/2 (‖U‖² + ‖V‖²): with λ > 0 every rule keeps
    the registry's verdict; the coordinate-wise rules still fail (the negative control)."""
    plain = {row.name: row.result for row in audit_many(registry_factories())}
    factories = registry_factories(weight_decay=weight_decay)
    factories["adamw"] = lambda params: make_optimizer(
        "adam", params, lr=1e-2, weight_decay=weight_decay, decoupled_weight_decay=True)
    rows = {row.name: row for row in audit_many(factories)}
    assert all(row.verdict != "error" for row in rows.values()), format_audit_table(rows.values())
    for name, row in rows.items():
        spec = get_spec("adam" if name == "adamw" else name)
        result = row.result
        assert result.equivariant is spec.equivariant, (name, result)
        if spec.equivariant:
            assert result.residual < result.threshold / 10, (name, result)
        else:
            assert result.residual > result.threshold * 100, (name, result)
        # the decay acted: the audited trajectory is not the undecayed one
        reference = plain["adam" if name == "adamw" else name]
        assert abs(result.loss_end - reference.loss_end) > 1e-6 * reference.loss_end, name


class _FirstColumnDecayGD(torch.optim.Optimizer):
    """GD with a decay of the first column of each factor only: not a function of the gauge
    orbit (negative control for the test above)."""

    def __init__(self, params, lr: float, weight_decay: float) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(group["lr"] * p.grad)
                p[:, 0] *= 1 - group["lr"] * group["weight_decay"]
        return loss


def test_a_coordinate_wise_weight_decay_breaks_gd():
    assert audit_equivariance(lambda p: _FirstColumnDecayGD(p, 0.1, 0.0)).equivariant
    broken = audit_equivariance(lambda p: _FirstColumnDecayGD(p, 0.1, 1.0))
    assert not broken.equivariant and broken.residual > 1e-3


def test_audit_table_over_torch_optim_sgd_and_adam():
    rows = {row.name: row for row in audit_many(torch_optim_factories())}
    assert rows["SGD"].verdict == "equivariant"
    assert rows["SGD-nesterov"].verdict == "equivariant"
    assert rows["Adam"].verdict == "not equivariant"
    assert rows["AdamW"].verdict == "not equivariant"
    assert rows["Adam"].result.residual > 0.1
    assert rows["SGD"].result.residual < 1e-12
    assert all(row.verdict != "error" for row in rows.values()), format_audit_table(rows.values())


def test_torch_radam_is_equivariant_until_its_rectifier_switches_on():
    """RAdam with β₂ = 0.999 takes un-adapted momentum steps while ρ_t ≤ 5 (t ≤ 5), which
    commute with the gauge; the adaptive steps from t = 6 on do not."""
    f = lambda params: torch.optim.RAdam(params, lr=1e-2)
    assert audit_equivariance(f, num_steps=5).equivariant
    assert not audit_equivariance(f, num_steps=6).equivariant


@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon not present")
def test_torch_muon_is_equivariant_only_up_to_its_bfloat16_newton_schulz():
    result = audit_equivariance(lambda params: torch.optim.Muon(params, lr=1e-2))
    assert not result.equivariant
    # far above float64 round-off, far below a coordinate-wise rule's O(1) defect
    assert 1e-5 < result.residual < 0.2
    library = audit_equivariance(lambda params: make_optimizer("muon", params, lr=1e-2))
    assert library.equivariant


def test_audit_matches_an_independent_harness():
    """The audit's residual is the max over steps of the displacement residual, per factor."""
    loss = sensing(6, 4, r=2, num_measurements=30, seed=3)
    U0, V0 = random_factors(6, 4, 3, seed=3)
    Q = haar(3, seed=4)
    f = lambda params: make_optimizer("adam", params)
    result = audit_equivariance(f, U=U0, V=V0, Q=Q, loss=loss, num_steps=4)
    plain, _, _ = run(f, U0, V0, loss, 4)
    rotated, _, _ = run(f, U0 @ Q, V0 @ Q, loss, 4)
    pairs = list(zip(plain, rotated, strict=True))
    expected_U = max(rel(Ur - U0 @ Q, (Ut - U0) @ Q) for (Ut, _), (Ur, _) in pairs)
    expected_V = max(rel(Vr - V0 @ Q, (Vt - V0) @ Q) for (_, Vt), (_, Vr) in pairs)
    assert math.isclose(result.residual_U, expected_U, rel_tol=1e-9)
    assert math.isclose(result.residual_V, expected_V, rel_tol=1e-9)
    assert result.residual == max(result.residual_U, result.residual_V)
    assert math.isclose(result.loss_start, loss(U0, V0).item(), rel_tol=1e-12)
    assert result.loss_end < result.loss_start


def test_factory_that_raises_becomes_an_error_row():
    def broken(params):
        raise RuntimeError("no such optimizer here")

    def explodes(params):
        opt = torch.optim.SGD(params, lr=1e-2)

        def step(closure=None):
            raise ValueError("step is broken")

        opt.step = step
        return opt

    rows = audit_many({
        "SGD": lambda params: torch.optim.SGD(params, lr=1e-2),
        "broken": broken,
        "explodes": explodes,
        "diverges": lambda params: torch.optim.SGD(params, lr=1e6),
    })
    by_name = {row.name: row for row in rows}
    assert [row.name for row in rows] == ["SGD", "broken", "explodes", "diverges"]
    assert by_name["SGD"].verdict == "equivariant"
    assert by_name["broken"].verdict == "error" and by_name["broken"].result is None
    assert "RuntimeError: no such optimizer here" in by_name["broken"].error
    assert "step 1 raised ValueError: step is broken" in by_name["explodes"].error
    assert "non-finite" in by_name["diverges"].error
    table = format_audit_table(rows)
    assert "no such optimizer here" in table and "equivariant" in table
    assert by_name["broken"].as_dict()["error"] == by_name["broken"].error
    with pytest.raises(AuditError, match="factory raised RuntimeError"):
        audit_equivariance(broken)


def test_a_static_optimizer_cannot_be_judged():
    result = audit_equivariance(lambda params: torch.optim.SGD(params, lr=0.0))
    assert result.static and not result.equivariant and result.verdict == "static"


def test_audit_rejects_a_loss_that_is_not_gauge_invariant():
    coordinate_loss = lambda U, V: (U**4).sum() + (V**2).sum()
    with pytest.raises(ValueError, match="Invalid loss"):
        audit_equivariance(lambda params: torch.optim.SGD(params, lr=1e-2), loss=coordinate_loss)


def test_audit_takes_any_gauge_invariant_loss_and_explicit_factors():
    U0, V0 = random_factors(5, 4, 2, seed=1)
    nuclear_like = lambda U, V: 0.5 * (U.pow(2).sum() + V.pow(2).sum()) + (U @ V.T).sum()
    for name, expected in (("gd", True), ("signum", False)):
        result = audit_equivariance(lambda params, name=name: make_optimizer(name, params),
                                    U=U0, V=V0, loss=nuclear_like, num_steps=3)
        assert result.equivariant is expected


def test_audit_many_gives_every_row_the_same_problem():
    sgd = lambda params: torch.optim.SGD(params, lr=1e-2)
    g = torch.Generator().manual_seed(5)
    first, second = audit_many({"a": sgd, "b": sgd}, generator=g)
    assert first.result == second.result
    third, = audit_many({"c": sgd}, generator=torch.Generator().manual_seed(6))
    assert third.result.loss_start != first.result.loss_start


def test_thresholds_and_validation():
    assert default_threshold(torch.float64) == FLOAT64_THRESHOLD == 1e-8
    assert default_threshold(torch.float32) == FLOAT32_THRESHOLD == 1e-3
    with pytest.raises(ValueError, match="Invalid dtype"):
        default_threshold(torch.float16)
    sgd = lambda params: torch.optim.SGD(params, lr=1e-2)
    with pytest.raises(ValueError, match="Invalid num_steps"):
        audit_equivariance(sgd, num_steps=0)
    with pytest.raises(ValueError, match="Invalid U, V"):
        audit_equivariance(sgd, U=torch.zeros(3, 2, dtype=torch.float64))
    # a custom threshold is honoured
    assert audit_equivariance(sgd, threshold=0.0).verdict == "not equivariant"


def test_sensing_loss_is_a_function_of_the_product_and_reproducible():
    make = lambda seed: sensing_loss(6, 4, generator=torch.Generator().manual_seed(seed))
    loss_a, loss_b, loss_c = make(0), make(0), make(1)
    U, V = random_factors(6, 4, 3, seed=2)
    assert loss_a(U, V).item() == loss_b(U, V).item()
    assert loss_a(U, V).item() != loss_c(U, V).item()
    from gaugekit.gauge import gl_act, random_gl
    A = random_gl(3, generator=torch.Generator().manual_seed(3))
    assert_close(loss_a(*gl_act(U, V, A)), loss_a(U, V), atol=1e-12, rtol=1e-12)
    # negative control: moving the product moves the loss
    assert rel(loss_a(2 * U, V), loss_a(U, V)) > BROKEN
    with pytest.raises(ValueError, match="Invalid shape"):
        sensing_loss(0, 4, generator=torch.Generator())


def test_factory_lists():
    factories = torch_optim_factories()
    for name in ("SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta",
                 "RMSprop", "Rprop", "ASGD"):
        assert name in factories
    U = torch.zeros(3, 2, dtype=torch.float64, requires_grad=True)
    V = torch.zeros(4, 2, dtype=torch.float64, requires_grad=True)
    for factory in factories.values():
        assert isinstance(factory([U, V]), torch.optim.Optimizer)
    assert list(registry_factories()) == optimizer_names()
    assert list(registry_factories(["gd", "adam"], lr=1e-3)) == ["gd", "adam"]


def test_torch_optim_factories_skip_classes_absent_from_an_older_torch(monkeypatch):
    for name in ("Muon", "Adafactor"):
        monkeypatch.delattr(torch.optim, name, raising=False)
    factories = torch_optim_factories()
    assert "Muon" not in factories and "Adafactor" not in factories
    assert "Adam" in factories


def test_audit_row_as_dict_is_flat():
    row = audit_many({"SGD": lambda params: torch.optim.SGD(params, lr=1e-2)})[0]
    assert isinstance(row, AuditRow)
    flat = row.as_dict()
    assert flat["name"] == "SGD" and flat["verdict"] == "equivariant" and flat["error"] is None
    assert flat["residual"] == row.result.residual and flat["dtype"] == "float64"


@pytest.mark.gpu
def test_audit_on_cuda_gives_the_cpu_verdicts():
    """One code path: the same draws (made on the CPU generator) and the same verdicts on CUDA."""
    for name in ("gd", "muon", "adam"):
        f = lambda params, name=name: make_optimizer(name, params)
        cpu = audit_equivariance(f, num_steps=4)
        gpu = audit_equivariance(f, num_steps=4, device="cuda")
        assert gpu.verdict == cpu.verdict
        assert math.isclose(gpu.loss_start, cpu.loss_start, rel_tol=1e-10)


# --------------------------------------------------------------------------------------------
# verdicts in words
# --------------------------------------------------------------------------------------------


def test_decide_verdict_on_numbers():
    """The rule at and around its two edges: the threshold and CHAOS_FACTOR x the noise."""
    t = 1e-8
    assert decide_verdict(t, 1e-7, t).outcome == KEEPS  # at the threshold: round-off
    assert decide_verdict(0.0, None, t).outcome == KEEPS
    assert decide_verdict(0.5, 1e-4, t).outcome == BREAKS
    assert decide_verdict(0.5, 0.0, t).outcome == BREAKS  # a noise twin that did not move
    assert decide_verdict(CHAOS_FACTOR * 0.05, 0.05, t).outcome == CHAOTIC  # at the factor
    assert decide_verdict(CHAOS_FACTOR * 0.05 * 1.01, 0.05, t).outcome == BREAKS
    assert decide_verdict(0.85, 0.87, t).outcome == CHAOTIC  # Muon's twins in chapter 8
    assert decide_verdict(1e-6, 0.3, t).outcome == CHAOTIC  # amplified round-off, far below
    no_noise = decide_verdict(0.5, None, t)
    assert no_noise.outcome == BREAKS and "chaos is not ruled out" in no_noise.reason()
    assert decide_verdict(float("nan"), 1e-3, t).outcome == UNJUDGED
    assert decide_verdict(0.5, float("nan"), t).outcome == UNJUDGED
    assert decide_verdict(0.0, 0.0, t, unjudged="it did not move").reason() == "it did not move"
    # the line carries the numbers that decide it
    line = decide_verdict(0.5, 1e-4, t).line("X")
    assert line.startswith("X: breaks the gauge: ") and "5.00e-01" in line and "1e-08" in line
    assert "1.00e-04" in line and "5e+03 x" in line and "> 10 x" in line


def test_verdict_lines_end_the_table_with_class_and_hyperparameters():
    rows = audit_many({
        "SGD": lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9),
        "Adam": lambda params: torch.optim.Adam(params, lr=1e-2),
    })
    sgd, adam = (row.result for row in rows)
    assert sgd.gauge_verdict.outcome == KEEPS and adam.gauge_verdict.outcome == BREAKS
    # Adam splits the gauge twins orders of magnitude beyond its noise twin
    assert adam.residual > 1e4 * adam.noise_residual
    assert sgd.optimizer == "torch.optim.SGD" and adam.optimizer == "torch.optim.Adam"
    assert sgd.hyperparameters["lr"] == 1e-2 and sgd.hyperparameters["momentum"] == 0.9
    assert adam.hyperparameters["betas"] == [0.9, 0.999]
    lines = format_audit_table(rows).splitlines()
    assert lines[-2].startswith("torch.optim.SGD(lr=0.01, momentum=0.9, dampening=0")
    assert lines[-2].endswith(f"{KEEPS}: gauge twin {sgd.residual:.2e} <= round-off threshold "
                              "1e-08")
    assert lines[-1].startswith("torch.optim.Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-08")
    assert f": {BREAKS}: gauge twin {adam.residual:.2e} > round-off threshold 1e-08" in lines[-1]
    assert "rule: keeps the gauge if residual <= threshold" in lines[-3]
    assert "<lambda>" not in "\n".join(lines)
    assert "foreach" not in lines[-1]  # implementation switches are left out while off


def test_a_registry_name_prints_what_was_built():
    """The line shows the values the optimizer was built with, the override and the rest."""
    row, = audit_many(registry_factories(["adam"], lr=0.02))
    spec = get_spec("adam")
    assert row.result.optimizer == f"gaugekit.optim.{spec.cls.__name__}"
    built = make_optimizer("adam", [torch.zeros(2, 2, requires_grad=True)], lr=0.02)
    assert row.result.hyperparameters == optimizer_hyperparameters(built)
    assert row.result.hyperparameters["lr"] == 0.02 and "betas" in row.result.hyperparameters
    line = format_audit_table([row]).splitlines()[-1]
    assert line.startswith(f"adam = gaugekit.optim.{spec.cls.__name__}(lr=0.02, betas=(")


def test_chaotic_when_the_noise_twin_moves_as_far_as_the_gauge_twin():
    """Constructed: a noise twin started as far off as the rotation (δ = 0.3, the size of the
    entries of U₀) moves Adam's run as much, so Adam's split is no longer told from
    sensitivity; with the default δ = 1e-7 (negative control) the same run breaks the gauge."""
    adam = lambda params: torch.optim.Adam(params, lr=1e-2)
    chaotic = audit_equivariance(adam, noise_scale=0.3)
    assert chaotic.gauge_verdict.outcome == CHAOTIC, chaotic.verdict_line()
    assert chaotic.residual <= CHAOS_FACTOR * chaotic.noise_residual
    default = audit_equivariance(adam)
    assert default.gauge_verdict.outcome == BREAKS
    assert default.residual == chaotic.residual  # the noise run leaves the other draws alone
    assert CHAOTIC in chaotic.verdict_line() and "(<= 10 x)" in chaotic.verdict_line()


def test_static_and_error_rows_cannot_be_judged():
    static = audit_equivariance(lambda params: torch.optim.SGD(params, lr=0.0))
    assert static.gauge_verdict.outcome == UNJUDGED
    assert "did not move in 10 steps" in static.verdict_line()
    rows = audit_many({"broken": lambda params: 1 / 0})
    assert format_audit_table(rows).splitlines()[-1].startswith(f"broken: {UNJUDGED}: ")


def test_noise_run_can_be_skipped_and_is_validated():
    sgd = lambda params: torch.optim.SGD(params, lr=1e-2)
    result = audit_equivariance(sgd, noise_scale=None)
    assert result.noise_residual is None and result.gauge_verdict.outcome == KEEPS
    adam = audit_equivariance(lambda params: torch.optim.Adam(params), noise_scale=None)
    assert "no noise twin was run" in adam.verdict_line()
    with pytest.raises(ValueError, match="Invalid noise_scale"):
        audit_equivariance(sgd, noise_scale=-1.0)


def test_hyperparameters_show_groups_and_switches_that_are_on():
    U = torch.zeros(3, 2, requires_grad=True)
    V = torch.zeros(4, 2, requires_grad=True)
    opt = torch.optim.Adam([{"params": [U]}, {"params": [V], "lr": 0.5}], lr=1e-3, foreach=True)
    hp = optimizer_hyperparameters(opt)
    assert hp["lr"] == 1e-3 and hp["foreach"] is True and "fused" not in hp
    assert hp["group 1"] == {"lr": 0.5} and "group 0" not in hp
    assert optimizer_name(opt) == "torch.optim.Adam"
    assert optimizer_name(make_optimizer("gd", [U])).startswith("gaugekit.optim.")


def test_a_wrapper_with_only_step_is_audited_and_named():
    """A factory may return any object with ``step(closure)`` (a wrapper around optimizers, as
    the sharded runs of tests/optim do): no hyperparameters to show, its class named."""

    class OnlyStep:
        def __init__(self, params):
            self.inner = torch.optim.SGD(params, lr=1e-2)

        def step(self, closure=None):
            return self.inner.step(closure)

    result = audit_equivariance(OnlyStep)
    assert result.gauge_verdict.outcome == KEEPS and result.hyperparameters == {}
    assert result.verdict_line().startswith(f"{OnlyStep.__module__}.")
    assert "OnlyStep(): keeps the gauge" in result.verdict_line()
