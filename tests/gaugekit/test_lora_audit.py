"""LoRA's gauge (A, B) -> (R^-1 A, B R) and the twin audit of peft models
(gaugekit.audit.lora), and ScaledGD's layout "AB" (gaugekit.optim.ScaledGD).

Float64 throughout; every positive identity next to a negative control. The model: two LoRA'd
``nn.Linear`` blocks (6 -> 8 -> 5, tanh between them), rank r = 4, a toy regression task."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from gaugekit.audit import (
    LoraPair,
    apply_lora_gauge,
    audit_lora_twins,
    draw_lora_gauges,
    find_lora_pairs,
    lora_drift,
    lora_param_groups,
    lora_parameters,
    lora_products,
    lora_twin,
    output_drift,
)
from gaugekit.gauge import orthogonality_defect
from gaugekit.optim import ScaledGD

F64 = torch.float64
R_RANK = 4


class TwoBlocks(nn.Module):
    """A toy regression net: ``out(tanh(q(x)))``."""

    def __init__(self, d_in: int = 6, d_hidden: int = 8, d_out: int = 5) -> None:
        super().__init__()
        self.q = nn.Linear(d_in, d_hidden)
        self.out = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.q(x)))


def peft_model(init_lora_weights: bool = True, d_out: int = 5) -> nn.Module:
    """``TwoBlocks`` in float64 with rank-4 LoRA on both layers (peft, no download);
    ``init_lora_weights=True`` is peft's default ``B = 0``, ``False`` draws both factors."""
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(r=R_RANK, lora_alpha=8, target_modules=["q", "out"],
                             init_lora_weights=init_lora_weights)
    return peft.get_peft_model(TwoBlocks(d_out=d_out).double(), config)


def batches(steps: int = 8, d_out: int = 5) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 6, generator=g, dtype=F64), torch.randn(16, d_out, generator=g,
                                                                      dtype=F64))
            for _ in range(steps)]


def mse(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return (model(x) - y).square().mean()


def train(model: nn.Module, make_optimizer, data) -> None:
    opt = make_optimizer(find_lora_pairs(model))
    for b in data:
        model.zero_grad(set_to_none=True)
        mse(model, b).backward()
        opt.step()


def sgd(pairs):
    return torch.optim.SGD(lora_parameters(pairs), lr=0.05)


def undamped_scaled_gd(pairs):
    return ScaledGD(lora_param_groups(pairs), lr=0.05, damping=0.0, relative_damping=False,
                    layout="AB")


# --------------------------------------------------------------------------------------------
# finding the pairs
# --------------------------------------------------------------------------------------------


def test_find_lora_pairs_in_a_peft_model():
    model = peft_model()
    pairs = find_lora_pairs(model)
    assert [p.name for p in pairs] == ["base_model.model.q", "base_model.model.out"]
    assert [(tuple(p.A.shape), tuple(p.B.shape)) for p in pairs] == [((4, 6), (8, 4)),
                                                                      ((4, 8), (5, 4))]
    assert all(isinstance(p, LoraPair) for p in pairs)
    assert [p.rank for p in pairs] == [4, 4] and [p.scaling for p in pairs] == [2.0, 2.0]
    layer = model.get_submodule(pairs[0].name)
    assert pairs[0].A is layer.lora_A["default"].weight
    assert pairs[0].B is layer.lora_B["default"].weight
    flat = lora_parameters(pairs)
    assert [id(t) for t in flat] == [id(pairs[0].A), id(pairs[0].B), id(pairs[1].A),
                                     id(pairs[1].B)]
    assert [id(t) for t in lora_parameters(pairs, "BA")][:2] == [id(pairs[0].B), id(pairs[0].A)]
    groups = lora_param_groups(pairs, lr=0.1)
    assert len(groups) == 2 and groups[1]["lr"] == 0.1
    assert groups[1]["params"][0] is pairs[1].A and groups[1]["params"][1] is pairs[1].B
    # peft's default init B = 0: the product is zero, the function is the base model's
    assert all(float(P.abs().max()) == 0.0 for P in lora_products(model).values())


class BareLora(nn.Module):
    """A LoRA layer written by hand: ``lora_A``/``lora_B`` are ``nn.Linear`` themselves;
    ``nonlinear=True`` puts a ReLU between them (then the gauge is not a symmetry)."""

    def __init__(self, d_in: int, d_out: int, r: int, *, nonlinear: bool = False) -> None:
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.lora_A = nn.Linear(d_in, r, bias=False)
        self.lora_B = nn.Linear(r, d_out, bias=False)
        self.scaling = 0.5
        self.nonlinear = nonlinear
        for p in self.base.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lora_A(x)
        return self.base(x) + self.scaling * self.lora_B(torch.relu(h) if self.nonlinear else h)


def bare_model(nonlinear: bool = False) -> nn.Module:
    torch.manual_seed(2)
    model = nn.Sequential(BareLora(6, 8, 4, nonlinear=nonlinear), nn.Tanh(),
                          BareLora(8, 5, 4)).double()
    return model


def test_find_lora_pairs_structurally_without_peft():
    pairs = find_lora_pairs(bare_model(), adapter="ignored for bare layers")
    assert [p.name for p in pairs] == ["0", "2"]
    assert [p.scaling for p in pairs] == [0.5, 0.5] and pairs[1].B.shape == (5, 4)


def test_no_lora_layer_is_an_error_naming_the_model():
    with pytest.raises(ValueError, match=r"Invalid model: no LoRA layer of adapter 'default' "
                       r"found; expected modules with lora_A and lora_B"):
        find_lora_pairs(TwoBlocks())
    with pytest.raises(ValueError, match=r"adapters seen: \['default'\]"):
        find_lora_pairs(peft_model(), adapter="other")


def test_validation_names_the_argument():
    model = bare_model()
    pairs = find_lora_pairs(model)
    with pytest.raises(ValueError, match=r"Invalid kind: 'rotated'; expected one of "
                       r"\('orthogonal', 'general', 'identity', 'noise'\)"):
        lora_twin(model, "rotated", seed=0)
    with pytest.raises(ValueError, match=r"Invalid group: 'unitary'; expected one of "
                       r"\('orthogonal', 'general'\)"):
        draw_lora_gauges(pairs, "unitary", seed=0)
    with pytest.raises(ValueError, match=r"Invalid groups: \['unitary'\]"):
        audit_lora_twins(model, sgd, mse, batches(1), groups=["unitary"])
    with pytest.raises(ValueError, match=r"Invalid layout: 'UV'; expected one of \('AB', 'BA'\)"):
        lora_parameters(pairs, "UV")
    with pytest.raises(ValueError, match=r"Invalid elements: 1 matrices; expected one per pair"):
        apply_lora_gauge(pairs, [torch.eye(4, dtype=F64)])
    with pytest.raises(ValueError, match=r"Invalid seed: 1.5"):
        lora_twin(model, "noise", seed=1.5)
    with pytest.raises(ValueError, match=r"Invalid batches: none"):
        audit_lora_twins(model, sgd, mse, [])
    with pytest.raises(ValueError, match=r"Invalid model: no LoRA layer"):
        audit_lora_twins(TwoBlocks().double(), sgd, mse, batches(1))
    with pytest.raises(ValueError, match=r"Invalid layout: 'BA'; expected one of \('UV', 'AB'\)"):
        ScaledGD(lora_parameters(pairs)[:2], layout="BA")
    with pytest.raises(ValueError, match=r"A \(\.\.\., r, in\) and B \(\.\.\., out, r\)"):
        ScaledGD([pairs[0].B, pairs[0].A], layout="AB")


# --------------------------------------------------------------------------------------------
# the twins before training
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("init", [True, False], ids=["B=0", "random"])
@pytest.mark.parametrize("group", ["orthogonal", "general"])
def test_gauge_twins_compute_the_same_function(group, init):
    model = peft_model(init)
    x = batches(1)[0][0]
    twin = lora_twin(model, group, seed=5)
    assert output_drift(model, twin, x) < 1e-14
    assert max(lora_drift(model, twin).values()) < 1e-14
    pairs, twin_pairs = find_lora_pairs(model), find_lora_pairs(twin)
    elements = draw_lora_gauges(pairs, group, seed=5)
    for p, t, R in zip(pairs, twin_pairs, elements, strict=True):
        torch.testing.assert_close(t.A, torch.linalg.solve(R, p.A), rtol=0, atol=1e-14)
        torch.testing.assert_close(t.B, p.B @ R, rtol=0, atol=1e-14)
        defect = orthogonality_defect(R).item()
        assert defect < 1e-13 if group == "orthogonal" else defect > 0.5
    if not init:  # both factors random: the twin's factors really moved
        assert (twin_pairs[0].A - pairs[0].A).abs().max() > 1e-2
    # negative control: a change that is not a gauge (B nudged, A kept) changes the function
    nudged = copy.deepcopy(model)
    with torch.no_grad():
        for p in find_lora_pairs(nudged):
            p.B.add_(1e-3)
    assert output_drift(model, nudged, x) > 1e-6


def test_a_model_that_is_not_gauge_symmetric_fails_the_check_before_training():
    """Negative control: ReLU between A and B, so (R^-1 A, B R) changes the function; the
    audit refuses before training, with the numbers, and audits the linear model."""
    with pytest.raises(ValueError, match=r"the orthogonal gauge twin's loss on the first batch "
                       r"is not the base's before any training \(rel = \S+ in float64 "
                       r"against \S+ for its round-off twin"):
        audit_lora_twins(bare_model(nonlinear=True), sgd, mse, batches(2))
    x = batches(1)[0][0]
    with pytest.raises(ValueError, match=r"output on the probe is not the base's"):
        audit_lora_twins(bare_model(nonlinear=True), sgd, mse, batches(2), probe=x)
    unchecked = audit_lora_twins(bare_model(nonlinear=True), sgd, mse, batches(2), probe=x,
                                 check_function=False)
    assert unchecked.trace("orthogonal").init_output_drift > 1e-3
    result = audit_lora_twins(bare_model(), sgd, mse, batches(2), probe=x)
    assert result.trace("general").init_output_drift < 1e-14


def test_lora_drift_relative_to_a_zero_product():
    model = peft_model(True)  # B = 0
    assert lora_drift(model, lora_twin(model, "general", seed=0)) == {
        "base_model.model.q": 0.0, "base_model.model.out": 0.0}
    # the noise twin leaves the zero factor zero: its product stays zero too
    assert lora_drift(model, lora_twin(model, "noise", seed=0)) == {
        "base_model.model.q": 0.0, "base_model.model.out": 0.0}
    twin = lora_twin(model, "noise", seed=0)
    with torch.no_grad():
        for p in find_lora_pairs(twin):
            p.B.add_(1e-7)
    assert min(lora_drift(model, twin).values()) > 1e200  # a product from zero: relative inf


# --------------------------------------------------------------------------------------------
# training: the controls
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make_optimizer", [
    sgd, lambda pairs: torch.optim.AdamW(lora_parameters(pairs), lr=1e-2)
], ids=["SGD", "AdamW"])
def test_identity_twin_drifts_exactly_zero(make_optimizer):
    model = peft_model(False)
    twin = lora_twin(model, "identity", seed=0)
    base = copy.deepcopy(model)
    data = batches(5)
    train(base, make_optimizer, data)
    train(twin, make_optimizer, data)
    assert set(lora_drift(base, twin).values()) == {0.0}
    for p, t in zip(find_lora_pairs(base), find_lora_pairs(twin), strict=True):
        assert torch.equal(p.A, t.A) and torch.equal(p.B, t.B)


def _gauge_residual(make_optimizer, group: str, init: bool = False, steps: int = 5) -> float:
    """Largest ``‖A'_t − R⁻¹A_t‖ / ‖A'_t‖`` and ``‖B'_t − B_t R‖ / ‖B'_t‖`` over the pairs after
    ``steps`` steps from a random point: the twin's factors against the base's, mapped."""
    model = peft_model(init)
    twin = lora_twin(model, group, seed=11)
    elements = draw_lora_gauges(find_lora_pairs(model), group, seed=11)
    base = copy.deepcopy(model)
    data = batches(steps)
    train(base, make_optimizer, data)
    train(twin, make_optimizer, data)
    out = []
    for p, t, R in zip(find_lora_pairs(base), find_lora_pairs(twin), elements, strict=True):
        out.append(((t.A - torch.linalg.solve(R, p.A)).norm() / t.A.norm()).item())
        out.append(((t.B - p.B @ R).norm() / t.B.norm()).item())
    return max(out)


def test_undamped_scaled_gd_in_layout_ab_is_gl_equivariant():
    assert _gauge_residual(undamped_scaled_gd, "general") < 1e-10
    # negative control: SGD under the same non-orthogonal R breaks it, by the math
    # (G_{R⁻¹A} = Rᵀ G_A, not R⁻¹ G_A), not by round-off
    assert _gauge_residual(sgd, "general") > 1e-3


def test_scaled_gd_layout_ab_is_layout_uv_on_b_and_a_transposed():
    """ScaledGD on ``[A, B]`` in layout AB equals ScaledGD on ``[B, Aᵀ]`` in layout UV (damped,
    sequential, with weight decay), and a stacked pair (``batch_dims=1``) too."""
    g = torch.Generator().manual_seed(3)
    for batch_shape, batch_dims in (((), 0), ((2,), 1)):
        A0 = torch.randn(*batch_shape, 3, 7, generator=g, dtype=F64)
        B0 = torch.randn(*batch_shape, 5, 3, generator=g, dtype=F64)
        X = torch.randn(5, 7, generator=g, dtype=F64)
        A, B = A0.clone().requires_grad_(), B0.clone().requires_grad_()
        U, V = B0.clone().requires_grad_(), A0.mT.clone().requires_grad_()
        kw = dict(lr=0.05, damping=1e-2, sequential=True, weight_decay=0.1,
                  batch_dims=batch_dims)
        opt_ab = ScaledGD([A, B], layout="AB", **kw)
        opt_uv = ScaledGD([U, V], **kw)
        for _ in range(4):
            for opt in (opt_ab, opt_uv):
                opt.zero_grad()
            (B @ A - X).square().sum().backward()
            (U @ V.mT - X).square().sum().backward()
            opt_ab.step()
            opt_uv.step()
        torch.testing.assert_close(A, V.mT, rtol=0, atol=1e-13)
        torch.testing.assert_close(B, U, rtol=0, atol=1e-13)
    assert opt_ab.state_dict()["param_groups"][0]["layout"] == "AB"


# --------------------------------------------------------------------------------------------
# the audit's verdicts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("init", [True, False], ids=["B=0", "random"])
def test_sgd_keeps_the_orthogonal_gauge_not_the_general_one(init):
    result = audit_lora_twins(peft_model(init), sgd, mse, batches())
    assert result.optimizer_class == "torch.optim.SGD" and result.steps == 8
    assert result.drift("orthogonal") < 1e-12
    assert result.keeps("orthogonal") and not result.keeps("general")
    assert result.verdict("general").outcome == "breaks the gauge"
    assert result.drift("general") > 1e-2
    text = str(result)
    assert "torch.optim.SGD(lr=0.05" in text and "base_model.model.out" in text
    assert text.splitlines()[-2].startswith("O(r) torch.optim.SGD(")
    assert "keeps the gauge" in text.splitlines()[-2]
    assert "breaks the gauge" in text.splitlines()[-1]
    assert len(result.to_records()) == 3 * 8 * 2


def test_adamw_breaks_the_orthogonal_gauge():
    result = audit_lora_twins(
        peft_model(False), lambda pairs: torch.optim.AdamW(lora_parameters(pairs), lr=1e-2),
        mse, batches(), groups=["orthogonal"])
    assert result.groups == ("orthogonal",)
    assert result.verdict("orthogonal").outcome == "breaks the gauge"
    assert result.drift("orthogonal") > 1e3 * result.drift("noise")


def test_an_optimizer_that_does_not_move_cannot_be_judged():
    result = audit_lora_twins(peft_model(False),
                              lambda pairs: torch.optim.SGD(lora_parameters(pairs), lr=0.0),
                              mse, batches(2))
    # the drift is the twin's round-off at init: below the threshold, yet no verdict
    assert result.moved == 0.0 and result.drift("general") < 1e-14
    assert result.verdict("general").outcome == "cannot be judged"
    assert "did not move in 2 steps" in result.verdict_lines()[1]


def _lora_rite(**kwargs):
    pytorch_optimizer = pytest.importorskip("pytorch_optimizer")
    return lambda pairs: pytorch_optimizer.LoRARite(lora_parameters(pairs), lr=1e-2, **kwargs)


@pytest.mark.parametrize("init", [True, False], ids=["B=0", "random"])
def test_lora_rite_keeps_the_general_gauge_when_the_factors_have_full_rank(init):
    """LoRA-RITE (update_skipping=0) keeps GL(r) in float64: its 'unmagnified' gradients
    ``G pinv(R_B)`` (QR of the other factor) are covariant when that factor has rank r."""
    result = audit_lora_twins(peft_model(init), _lora_rite(update_skipping=0.0), mse, batches())
    assert result.keeps("orthogonal") and result.keeps("general")
    assert result.drift("general") < 1e-12 and result.moved > 0.1
    assert result.drift("noise") < 1e-3  # from B = 0 the noise nudges A only (lora_twin)


def test_lora_rite_is_not_continuous_at_b_zero():
    """B = 0 is a singular point of LoRA-RITE: a 1e-7 nudge of B is magnified by
    pinv(R_B) ~ 1e7, and that copy ends far from the base (why the noise twin leaves it zero)."""
    make = _lora_rite(update_skipping=0.0)
    base, nudged = peft_model(True), peft_model(True)
    with torch.no_grad():
        for p in find_lora_pairs(nudged):
            p.B.add_(1e-7 * torch.randn(p.B.shape, dtype=p.B.dtype,
                                        generator=torch.Generator().manual_seed(1)))
    for model in (base, nudged):
        opt = make(find_lora_pairs(model))
        for x, y in batches():
            opt.zero_grad()
            mse(model, (x, y)).backward()
            opt.step()
    assert max(lora_drift(base, nudged).values()) > 1.0


def test_lora_rite_breaks_the_general_gauge_when_a_factor_is_rank_deficient():
    """With out = 3 < r = 4 the last layer's B (3 × 4) has rank 3: ``pinv(R_B R)`` is not
    ``R⁻¹ pinv(R_B)`` for a non-orthogonal R, so GL(r) breaks; O(r) still holds."""
    result = audit_lora_twins(peft_model(False, d_out=3), _lora_rite(update_skipping=0.0), mse,
                              batches(d_out=3))
    assert result.keeps("orthogonal")
    assert result.verdict("general").outcome == "breaks the gauge"
    # the break starts in the rank-deficient pair; the loss carries it to the other one
    first = dict(zip(result.pairs, result.trace("general").drifts[0], strict=True))
    assert first["base_model.model.q"] < 1e-12 and first["base_model.model.out"] > 1e-3


class Embedded(nn.Module):
    """A token embedding and a linear head: peft's LoRA of an ``nn.Embedding`` keeps its
    factors in ``lora_embedding_A`` / ``lora_embedding_B``, not in ``lora_A`` / ``lora_B``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.out = nn.Linear(6, 5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.emb(ids))).mean(1)


def test_an_embedding_adapter_is_a_pair_and_its_gauge_twins_are_the_same_function():
    """peft's embedding adapter was dropped without a word: it is a pair ``A (r, vocab)``,
    ``B (dim, r)``, its twins compute the same function, and the audit trains it."""
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(r=R_RANK, target_modules=["emb", "out"], init_lora_weights=False)
    model = peft.get_peft_model(Embedded().double(), config)
    pairs = find_lora_pairs(model)
    assert [p.name.rsplit(".", 1)[-1] for p in pairs] == ["emb", "out"]
    assert tuple(pairs[0].A.shape) == (R_RANK, 11) and tuple(pairs[0].B.shape) == (6, R_RANK)
    ids = torch.randint(0, 11, (8, 3), generator=torch.Generator().manual_seed(2))
    data = [(ids, torch.randn(8, 5, generator=torch.Generator().manual_seed(3), dtype=F64))]
    result = audit_lora_twins(model, sgd, mse, data * 3, probe=ids)
    assert result.pairs == tuple(p.name for p in pairs)
    assert max(t.init_output_drift for t in result.traces if t.kind != "noise") < 1e-13
    # negative control: the same nudge to the embedding's A alone changes the function
    nudged = copy.deepcopy(model)
    with torch.no_grad():
        find_lora_pairs(nudged)[0].A.mul_(1.5)
    assert output_drift(model, nudged, ids) > 1e-3


def test_a_dora_layer_says_its_magnitude_is_not_in_a_pair():
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(r=R_RANK, target_modules=["q", "out"], use_dora=True)
    model = peft.get_peft_model(TwoBlocks().double(), config)
    with pytest.warns(UserWarning, match=r"2 LoRA layer\(s\) are DoRA .*magnitude vector"):
        pairs = find_lora_pairs(model)
    assert len(pairs) == 2
