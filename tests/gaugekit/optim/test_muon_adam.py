"""MuonAdam (Muon + Adam in one optimizer), the router ``muon_param_groups``, Muon's row
blocks, kernel flattening, batched and low-precision Newton–Schulz."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import BiasedAttention
from torch import nn
from torch.testing import assert_close

from gaugekit.audit import audit_equivariance, audit_twins
from gaugekit.linalg import newton_schulz
from gaugekit.optim import Muon, MuonAdam, muon_param_groups, split_matrix_params
from gaugekit.optim import orthogonalize as O

F64 = torch.float64


class TinyLM(nn.Module):
    """Embedding, a 2-layer ``nn.TransformerEncoder`` and a head tied to the embedding."""

    def __init__(self, vocab: int = 23, d: int = 16, tied: bool = True) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.emb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.enc(self.emb(x)))


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv2(torch.relu(self.norm(self.conv1(x)))))
        return self.fc(h.mean(dim=(2, 3)))


def _names(model: nn.Module, groups: list[dict]) -> list[tuple[bool, int, list[str]]]:
    names = {id(p): n for n, p in model.named_parameters()}
    return [(g["use_muon"], g.get("split_rows", 1), [names[id(p)] for p in g["params"]])
            for g in groups]


def _lm_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    logits = model(x[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


# --------------------------------------------------------------------------------- the router
def test_router_on_a_transformer_with_a_tied_head():
    model = TinyLM()
    groups = muon_param_groups(model, split_qkv=True, weight_decay=0.01)
    (muon_flag, _, muon), (split_flag, rows, split), (adam_flag, _, adam) = _names(model, groups)
    assert (muon_flag, split_flag, adam_flag, rows) == (True, True, False, 3)
    assert "emb.weight" in adam and "lm_head.weight" not in adam + muon  # tied: listed once
    assert split == ["enc.layers.0.self_attn.in_proj_weight",
                     "enc.layers.1.self_attn.in_proj_weight"]
    assert all(n.endswith(("out_proj.weight", "linear1.weight", "linear2.weight")) for n in muon)
    params = dict(model.named_parameters())
    assert all(params[n].ndim == 1 for n in adam if n != "emb.weight")
    assert sum(len(g["params"]) for g in groups) == len(params)
    assert all(g["weight_decay"] == 0.01 for g in groups)
    # without split_qkv the fused projection is one Muon matrix
    plain = _names(model, muon_param_groups(model))
    assert [flag for flag, _, _ in plain] == [True, False]
    assert "enc.layers.0.self_attn.in_proj_weight" in plain[0][2]


def test_router_finds_an_untied_head_by_name_or_argument_and_skips_frozen():
    model = TinyLM(tied=False)
    adam = _names(model, muon_param_groups(model))[-1][2]
    assert "lm_head.weight" in adam and "emb.weight" in adam  # named lm_head
    seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    seq[0].weight.requires_grad_(False)
    by_shape = _names(seq, muon_param_groups(seq))
    assert by_shape[0][2] == ["2.weight"]  # no head found: the last Linear is a hidden matrix
    for head in (seq[2], "2", seq[2].weight, ["2.weight"]):
        routed = _names(seq, muon_param_groups(seq, head=head))
        assert [flag for flag, _, _ in routed] == [False]
        assert routed[0][2] == ["0.bias", "2.weight", "2.bias"]  # 0.weight is frozen
    with pytest.raises(ValueError, match="^Invalid head"):
        muon_param_groups(seq, head="nope")


def test_router_on_a_cnn_flattens_kernels_or_sends_them_to_adam():
    model = TinyCNN()
    muon, adam = _names(model, muon_param_groups(model, head=model.fc))
    assert muon[2] == ["conv1.weight", "conv2.weight"]
    assert adam[2] == ["conv1.bias", "norm.weight", "norm.bias", "conv2.bias", "fc.weight",
                       "fc.bias"]
    (only_adam,) = _names(model, muon_param_groups(model, head=model.fc, flatten_conv=False))
    assert "conv1.weight" in only_adam[2]
    # split_matrix_params keeps its behaviour: by shape, kernels with the others
    matrices, others = split_matrix_params(model)
    assert [p.ndim for p in matrices] == [2] and model.conv1.weight in others


# ------------------------------------------------------------------------------- the update
def _run(make, model, data, steps, loss=_lm_loss):
    opt = make(model)
    for _ in range(steps):
        opt.zero_grad()
        loss(model, data).backward()
        opt.step()
    return opt


@pytest.fixture
def lm_data():
    torch.manual_seed(0)
    model = TinyLM().to(F64)
    data = torch.randint(0, 23, (4, 9), generator=torch.Generator().manual_seed(1))
    return model, data


def test_muon_groups_are_muon_and_adam_groups_are_torch_adamw(lm_data):
    """Same hyperparameters: MuonAdam = gaugekit Muon on its Muon groups and torch.optim.AdamW
    (at lr · adam_lr_ratio) on its Adam groups, to 1e-10 in float64. (ε = 1e-6: the key bias's
    gradient is round-off, which a tiny ε amplifies to lr-sized steps, heads.py.)"""
    model, data = lm_data
    kw = {"lr": 0.02, "momentum": 0.95, "nesterov": True, "adjust_lr_fn": "original",
          "weight_decay": 0.1}
    ours = copy.deepcopy(model)
    _run(lambda m: MuonAdam(muon_param_groups(m), adam_lr_ratio=0.05, betas=(0.9, 0.95),
                            eps=1e-6, **kw), ours, data, 6)

    class Pair:
        def __init__(self, m):
            muon, adam = muon_param_groups(m)
            self.opts = [Muon(muon["params"], **kw),
                         torch.optim.AdamW(adam["params"], lr=0.02 * 0.05, betas=(0.9, 0.95),
                                           eps=1e-6, weight_decay=0.1)]

        def zero_grad(self):
            for o in self.opts:
                o.zero_grad()

        def step(self):
            for o in self.opts:
                o.step()

    ref = copy.deepcopy(model)
    _run(Pair, ref, data, 6)
    for (name, a), b in zip(ours.named_parameters(), ref.parameters(), strict=True):
        assert_close(a, b, atol=1e-10, rtol=0, msg=name)
    moved = (ours.emb.weight - model.emb.weight).abs().max()
    assert moved > 1e-4  # the Adam side moved


@pytest.fixture
def torch_muon_in_float64(monkeypatch):
    """Make torch.optim.Muon's Newton–Schulz run in the parameter's dtype."""
    monkeypatch.setattr(torch.Tensor, "bfloat16", lambda self: self.clone())


def test_defaults_are_torch_muon_with_keller_jordan_settings(torch_muon_in_float64, lm_data):
    """MuonAdam's Muon defaults (0.95, Nesterov, √max(1, n/k)) are torch.optim.Muon's rule with
    its buffer damped by 1 − μ, which Newton–Schulz undoes (ε = 0 here), in float64."""
    model, data = lm_data
    ours = copy.deepcopy(model)
    _run(lambda m: MuonAdam(muon_param_groups(m)[:1], lr=0.02, ns_eps=0.0), ours, data, 5)
    ref = copy.deepcopy(model)
    _run(lambda m: torch.optim.Muon(muon_param_groups(m)[0]["params"], lr=0.02, weight_decay=0.0,
                                    eps=1e-300), ref, data, 5)
    for (name, a), b in zip(ours.named_parameters(), ref.parameters(), strict=True):
        assert_close(a, b, atol=1e-10, rtol=0, msg=name)
    # negative control: gaugekit.Muon's paper defaults (0.9, no Nesterov, ρ = 1) are another rule
    other = copy.deepcopy(model)
    _run(lambda m: Muon(muon_param_groups(m)[0]["params"], lr=0.02, eps=0.0), other, data, 5)
    w = "enc.layers.0.linear1.weight"
    assert (dict(other.named_parameters())[w] - dict(ours.named_parameters())[w]).abs().max() > 1e-4


def test_one_scheduler_moves_both_rates_at_their_ratio(lm_data):
    """LambdaLR on MuonAdam = the same factor on Muon's lr and on AdamW's lr · ratio."""
    model, data = lm_data
    factor = [1.0, 0.5, 0.25, 0.125]

    def with_schedule(m):
        opt = MuonAdam(muon_param_groups(m), lr=0.03, adam_lr_ratio=0.1, eps=1e-6)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: factor[t])
        return opt, sched

    def by_hand(m):
        muon, adam = muon_param_groups(m)
        opts = [Muon(muon["params"], lr=0.03, momentum=0.95, nesterov=True,
                     adjust_lr_fn="original"),
                torch.optim.AdamW(adam["params"], lr=0.003, betas=(0.9, 0.95), eps=1e-6,
                                  weight_decay=0.0)]
        return opts, [torch.optim.lr_scheduler.LambdaLR(o, lambda t: factor[t]) for o in opts]

    a, b = copy.deepcopy(model), copy.deepcopy(model)
    (opt, sched), (opts, scheds) = with_schedule(a), by_hand(b)
    for _ in range(3):
        for m, optimizers, schedulers in ((a, [opt], [sched]), (b, opts, scheds)):
            for o in optimizers:
                o.zero_grad()
            _lm_loss(m, data).backward()
            for o, s in zip(optimizers, schedulers, strict=True):
                o.step()
                s.step()
    for x, y in zip(a.parameters(), b.parameters(), strict=True):
        assert_close(x, y, atol=1e-10, rtol=0)
    assert [g["lr"] for g in opt.param_groups] == [0.03 * 0.125] * 2
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(
        MuonAdam(muon_param_groups(copy.deepcopy(model))), T_max=4)
    cosine.optimizer.step()  # no gradients: nothing moves
    cosine.step()
    lrs = {g["lr"] for g in cosine.optimizer.param_groups}
    assert len(lrs) == 1 and 0 < lrs.pop() < 0.02  # every group moved, by the same factor


@pytest.mark.parametrize("adam", ["adamw", "shared_scale"])
def test_state_dict_round_trip_is_exact(lm_data, adam):
    model, data = lm_data

    def make(m):
        return MuonAdam(muon_param_groups(m, split_qkv=True), adam=adam, weight_decay=0.01)

    straight = copy.deepcopy(model)
    _run(make, straight, data, 6)
    first = copy.deepcopy(model)
    opt = _run(make, first, data, 3)
    saved = copy.deepcopy(opt.state_dict())
    resumed = copy.deepcopy(first)
    opt2 = make(resumed)
    opt2.load_state_dict(saved)
    assert opt2.state_dict()["param_groups"] == saved["param_groups"]
    for _ in range(3):
        opt2.zero_grad()
        _lm_loss(resumed, data).backward()
        opt2.step()
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)
    keys = {frozenset(s) for s in opt2.state.values()}
    adam_keys = {"step", "exp_avg", "exp_avg_sq" if adam == "adamw" else "exp_avg_sq_mean"}
    assert keys == {frozenset({"momentum_buffer"}), frozenset(adam_keys)}


def test_a_transformer_and_a_cnn_train():
    torch.manual_seed(0)
    for adam in ("adamw", "shared_scale"):
        model = TinyLM()
        data = torch.randint(0, 23, (8, 12), generator=torch.Generator().manual_seed(2))
        opt = MuonAdam(muon_param_groups(model, split_qkv=True), lr=0.02, adam_lr_ratio=0.1,
                       adam=adam)
        losses = [float(_lm_loss(model, data).detach())]
        _run(lambda m, opt=opt: opt, model, data, 20)
        losses.append(float(_lm_loss(model, data).detach()))
        assert losses[1] < 0.7 * losses[0], (adam, losses)
    cnn = TinyCNN()
    x = torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    y = torch.randint(0, 5, (16,), generator=torch.Generator().manual_seed(4))

    def loss(m, _):
        return nn.functional.cross_entropy(m(x), y)

    start = float(loss(cnn, None).detach())
    _run(lambda m: MuonAdam(muon_param_groups(m, head=m.fc), lr=0.05, adam_lr_ratio=0.2), cnn,
         None, 40, loss)
    assert float(loss(cnn, None).detach()) < 0.7 * start


def test_a_kernel_is_orthogonalized_as_out_by_in_kh_kw():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(4, 3, 2, 2, generator=g, dtype=F64)
    G = torch.randn(4, 3, 2, 2, generator=g, dtype=F64)
    kernel, matrix = W.clone(), W.reshape(4, 12).clone()
    kernel.grad, matrix.grad = G.clone(), G.reshape(4, 12).clone()
    MuonAdam([{"params": [kernel], "use_muon": True}], lr=0.1).step()
    Muon([matrix], lr=0.1, momentum=0.95, nesterov=True, adjust_lr_fn="original").step()
    assert_close(kernel.reshape(4, 12), matrix, atol=1e-14, rtol=0)
    # negative control: the kernel's first two dims as the matrix is another update
    assert (O.orthogonalize([G])[0] - newton_schulz(G)).abs().max() > 1e-3


def test_split_rows_orthogonalizes_each_block_alone():
    g = torch.Generator().manual_seed(1)
    G = torch.randn(2, 9, 4, generator=g, dtype=F64)  # two runs of a fused [Q; K; V]
    got = O.orthogonalize([G], batch_dims=1, split_rows=3)[0]
    blocks = [newton_schulz(G[:, 3 * i:3 * i + 3]) for i in range(3)]
    assert_close(got, torch.cat(blocks, dim=1), atol=1e-14, rtol=0)
    assert (O.orthogonalize([G], batch_dims=1)[0] - got).abs().max() > 1e-3
    with pytest.raises(ValueError, match="^Invalid split_rows"):
        MuonAdam([{"params": [nn.Parameter(torch.zeros(8, 4))], "split_rows": 3}])


def test_batched_newton_schulz_gives_each_matrix_its_own_result():
    """Stacking same-shape matrices (up to a transpose) into one call is exact per matrix."""
    g = torch.Generator().manual_seed(2)
    shapes = [(6, 4), (4, 6), (6, 4), (5, 3), (3, 5)]
    targets = [torch.randn(*s, generator=g, dtype=F64) for s in shapes]
    alone = [newton_schulz(t) for t in targets]
    with O.stacking(True):
        batched = O.orthogonalize(targets)
    for a, b in zip(batched, alone, strict=True):
        assert_close(a, b, atol=1e-14, rtol=0)


def test_bfloat16_newton_schulz_is_close_to_float64_and_not_equal():
    g = torch.Generator().manual_seed(3)
    G = torch.randn(3, 16, 40, generator=g, dtype=F64)
    low = newton_schulz(G, dtype=torch.bfloat16)
    assert low.dtype == F64
    diff = (low - newton_schulz(G)).abs().max()
    assert 1e-6 < diff < 0.1


def test_validation_names_the_argument():
    p = nn.Parameter(torch.zeros(3, 4))
    bias = nn.Parameter(torch.zeros(3))
    for kw, name in (({"use_muon": 1}, "use_muon"), ({"adam": "lion"}, "adam"),
                     ({"adam_lr_ratio": -1.0}, "adam_lr_ratio"), ({"ns_dtype": "bf16"}, "ns_dtype"),
                     ({"split_rows": 0}, "split_rows"), ({"lr": -1.0}, "lr")):
        with pytest.raises(ValueError, match=rf"^Invalid {name}\b"):
            MuonAdam([p], **kw)
    with pytest.raises(ValueError, match=r"^Invalid params.*use_muon=True"):
        MuonAdam([{"params": [p, bias], "use_muon": True}])
    with pytest.raises(ValueError, match="^Invalid adam"):
        MuonAdam([{"params": [p]}, {"params": [bias], "adam": "shared_scale"}])
    with pytest.raises(ValueError, match="^Invalid fused"):
        MuonAdam([p], fused=True)
    with pytest.raises(TypeError):
        MuonAdam([p], momentum_buffer=3)
    opt = MuonAdam([p, bias])  # by shape: the matrix to Muon, the vector to Adam
    p.grad, bias.grad = torch.ones(3, 4), torch.ones(3)
    opt.step()
    assert set(opt.state[p]) == {"momentum_buffer"} and "exp_avg_sq" in opt.state[bias]


# --------------------------------------------------------------------------------- the audits
def test_factor_audit_float64_keeps_and_bfloat16_names_the_precision():
    full = audit_equivariance(lambda p: MuonAdam(p, lr=1e-2, adam="shared_scale"))
    assert full.equivariant and full.residual < 1e-12, full
    low = audit_equivariance(lambda p: MuonAdam(p, lr=1e-2, ns_dtype=torch.bfloat16))
    line = low.verdict_line()
    assert not low.equivariant
    assert ": breaks the gauge at bfloat16 round-off (its Newton–Schulz runs in bfloat16" in line
    plain = audit_equivariance(lambda p: Muon(p, lr=1e-2, ns_dtype=torch.float32),
                               dtype=torch.float32)
    assert plain.equivariant, plain
    adam = audit_equivariance(lambda p: torch.optim.Adam(p, lr=1e-2))
    assert "round-off (" not in adam.verdict_line()  # a real break is not put down to precision


@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon not present")
def test_factor_audit_of_torch_muon_names_its_bfloat16():
    result = audit_equivariance(lambda p: torch.optim.Muon(p, lr=1e-2))
    assert "breaks the gauge at bfloat16 round-off" in result.verdict_line()



def test_twin_audit_of_muon_on_a_model_with_biases_and_norms():
    torch.manual_seed(0)
    model = BiasedAttention().to(F64)
    x = torch.randint(0, 20, (3, 7), generator=torch.Generator().manual_seed(5))

    def loss(m, b):
        return nn.functional.cross_entropy(m(b).reshape(-1, 20), b.reshape(-1))

    with pytest.raises(ValueError, match="^Invalid params"):  # the rule alone: matrices only
        Muon(model.parameters())
    muon = audit_twins(model, loss, probe=x, batch=x, optimizer="muon", steps=6,
                       twins=("gauge", "identity"))
    assert "MuonAdam" in muon.optimizer and "adam='shared_scale'" in muon.optimizer
    assert muon.trace("gauge").final.mean_head_drift < 1e-10
    adam = audit_twins(model, loss, probe=x, batch=x, optimizer="adam", steps=6,
                       twins=("gauge",))
    assert adam.trace("gauge").final.mean_head_drift > 1e-6  # negative control


@pytest.mark.parametrize("adam", ["adamw", "shared_scale"])
def test_stacked_runs_equal_the_loop(adam):
    """``batch_dims=1`` with a per-run ``lr``: each run as if alone (matrices to Muon, the
    vector to Adam, by shape)."""
    g = torch.Generator().manual_seed(6)
    W0 = torch.randn(3, 5, 4, generator=g, dtype=F64)
    b0 = torch.randn(3, 5, generator=g, dtype=F64)
    x = torch.randn(3, 7, 4, generator=g, dtype=F64)
    lrs = torch.tensor([0.02, 0.01, 0.005], dtype=F64)

    def loss(W, b, xs):
        return ((xs @ W.mT + b.unsqueeze(-2)).tanh() ** 2).sum()

    W, b = W0.clone().requires_grad_(), b0.clone().requires_grad_()
    opt = MuonAdam([W, b], lr=lrs, adam=adam, adam_lr_ratio=0.5, batch_dims=1,
                   weight_decay=0.1)
    for _ in range(4):
        opt.zero_grad()
        loss(W, b, x).backward()
        opt.step()
    for r in range(3):
        Wr, br = W0[r].clone().requires_grad_(), b0[r].clone().requires_grad_()
        one = MuonAdam([Wr, br], lr=float(lrs[r]), adam=adam, adam_lr_ratio=0.5,
                       weight_decay=0.1)
        for _ in range(4):
            one.zero_grad()
            loss(Wr, br, x[r]).backward()
            one.step()
        assert_close(W[r], Wr, atol=1e-12, rtol=0)
        assert_close(b[r], br, atol=1e-12, rtol=0)
    assert not torch.allclose(W[0] - W0[0], W[2] - W0[2])  # the runs took their own rates
