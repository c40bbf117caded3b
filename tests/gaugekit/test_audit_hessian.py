"""The factor audit of Hessian-vector optimizers (Sophia-H, AdaHessian): their step
differentiates the gradient, so the backward pass must keep its graph (``create_graph``),
detected by the audit or forced either way."""

from __future__ import annotations

import pytest
import torch
from helpers import BROKEN, EXACT

from gaugekit.audit.factors import NO_GRAPH_ERROR, AuditError, audit_equivariance


class _HessianStep(torch.optim.Optimizer):
    """``θ ← θ − lr · g · (probe-weighted curvature)``: Hessian-vector products ``Hz`` of the
    whole loss, by differentiating the gradients (they need ``create_graph=True``).

    ``probe="gradient"``: ``z = g`` and the step ``g ‖g‖² / |gᵀHg|`` (Cauchy's step along the
    gradient; ``gᵀHg`` is gauge-invariant, so the rule keeps the gauge). ``probe="hutchinson"``:
    a Rademacher ``z`` and AdaHessian's diagonal ``|z ⊙ Hz|`` as a per-entry denominator
    (coordinate-wise, so it breaks the gauge).
    """

    def __init__(self, params, lr: float = 0.5, probe: str = "gradient") -> None:
        super().__init__(params, {"lr": lr})
        self.probe, self.generator = probe, torch.Generator().manual_seed(0)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = [p for group in self.param_groups for p in group["params"]]
        grads = [p.grad for p in params]
        if self.probe == "gradient":
            zs = [g.detach() for g in grads]
        else:
            zs = [torch.randint(0, 2, g.shape, generator=self.generator).to(g.dtype) * 2 - 1
                  for g in grads]
        hzs = torch.autograd.grad(grads, params, grad_outputs=zs)
        lr = self.param_groups[0]["lr"]
        if self.probe == "gradient":
            curvature = sum((z * hz).sum() for z, hz in zip(zs, hzs, strict=True)).abs()
            scale = sum(z.pow(2).sum() for z in zs) / curvature.clamp_min(1e-30)
            for p, z in zip(params, zs, strict=True):
                p.sub_(lr * scale * z)
        else:
            for p, z, hz in zip(params, zs, hzs, strict=True):
                p.sub_(lr * p.grad / ((z * hz).abs() + 1e-3))
        return loss


class _GradSpy(torch.optim.SGD):
    """SGD that records whether each step's gradients carry a graph."""

    seen: list[bool] = []

    def step(self, closure=None):
        loss = super().step(closure)
        _GradSpy.seen.append(self.param_groups[0]["params"][0].grad.grad_fn is not None)
        return loss


def test_the_audit_detects_a_hessian_vector_optimizer_and_judges_it():
    keeps = audit_equivariance(lambda p: _HessianStep(p, lr=0.5), num_steps=8)
    assert keeps.equivariant and keeps.residual < EXACT and keeps.displacement > 1e-2
    # negative control: the same machinery with a per-entry (Hutchinson) denominator
    breaks = audit_equivariance(lambda p: _HessianStep(p, lr=0.05, probe="hutchinson"),
                                num_steps=8)
    assert not breaks.equivariant and breaks.residual > BROKEN


def test_create_graph_false_is_honoured_and_reports_the_missing_graph():
    with pytest.raises(AuditError, match=f"^step 1 raised RuntimeError: .*{NO_GRAPH_ERROR}"):
        audit_equivariance(_HessianStep, num_steps=2, create_graph=False)


def test_create_graph_true_is_honoured_and_detection_leaves_plain_optimizers_alone():
    _GradSpy.seen = []
    auto = audit_equivariance(lambda p: _GradSpy(p, lr=0.05), num_steps=3)
    assert _GradSpy.seen == [False] * 9  # three runs of three steps, plain backward
    _GradSpy.seen = []
    forced = audit_equivariance(lambda p: _GradSpy(p, lr=0.05), num_steps=3, create_graph=True)
    assert _GradSpy.seen == [True] * 9
    # the graph changes no gradient: the same numbers
    assert (forced.residual, forced.displacement) == (auto.residual, auto.displacement)


def test_only_the_missing_graph_error_is_retried():
    calls = []

    class Fails(torch.optim.SGD):
        def step(self, closure=None):
            raise RuntimeError("something else")

    def factory(params):
        calls.append(1)
        return Fails(params, lr=0.1)

    with pytest.raises(AuditError, match="^step 1 raised RuntimeError: something else$"):
        audit_equivariance(factory, num_steps=2)
    assert len(calls) == 1


@pytest.mark.parametrize("name", ["SophiaH", "AdaHessian"])
def test_pytorch_optimizer_hessian_rules_are_audited(name):
    """The real ones, when the ``ecosystem`` extra is installed: their Hutchinson probes come
    from torch's global generator, seeded at each build so that the runs share them."""
    pytorch_optimizer = pytest.importorskip("pytorch_optimizer")
    cls = getattr(pytorch_optimizer, name)

    def factory(params):
        torch.manual_seed(0)
        return cls(params, lr=1e-2)

    with torch.random.fork_rng():
        result = audit_equivariance(factory, num_steps=6)
        with pytest.raises(AuditError, match=NO_GRAPH_ERROR):
            audit_equivariance(factory, num_steps=6, create_graph=False)
    assert result.displacement > 0 and not result.equivariant  # a diagonal Hessian estimate
