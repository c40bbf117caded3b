r"""The parts of the twin audit (:mod:`gaugekit.audit.heads`): twins, drifts, results.

The twins: gauge (``A_h`` per head), identity (``A = I``) and noise twins, each a deep copy of
the model; see :mod:`gaugekit.audit.heads` for why the gauge twin is the same function and what
the other two are for. The rotation is drawn by :func:`gaugekit.gauge.random_head_rotations`
(Haar on ``O(d_head)``), or from the residual gauge ``SO(2)^{r/2} × O(d − r)`` of a site with a
rotary embedding (:meth:`gaugekit.audit.rotary.RotaryLayout.draw`), one per key-value group
``g`` (one per head without grouped-query attention), and applied as in
:func:`gaugekit.gauge.rotate_head_rows`: ``A_g`` times the rows of key head ``g`` and of every
query head ``h`` with ``g(h) = g`` (in float64, rounded back to the parameter's dtype, through
views, so fused and transposed layouts are written in place).

What it measures: the per-head invariants ``M_h`` and ``rel`` as defined in
:mod:`gaugekit.audit.heads` ("The invariant reported"), compared per head and on the outputs of
a probe batch.

The result: checkpoints, traces, and the verdict in words. The drift of a twin is the largest
``rel(M_h, M_h')`` over its heads and checkpoints; the verdict is the factor audit's rule
(:func:`~gaugekit.audit.factor_results.decide_verdict`) with the round-off threshold
:func:`verdict_threshold`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from gaugekit.audit.factor_results import (
    FLOAT64_THRESHOLD,
    ROUNDOFF_EPS_FACTOR,
    GaugeVerdict,
    decide_verdict,
    default_threshold,
    low_precision_step,
    text_table,
)
from gaugekit.audit.qk_norm import (
    draw_signed_permutations,
    gain_factor,
    is_signed_permutation,
    permute_gains,
)
from gaugekit.audit.site_layout import _QK, QKSite, SiteSpec, qk_tensors
from gaugekit.audit.sites import resolve_sites
from gaugekit.gauge import (
    orthogonality_defect,
    random_head_rotations,
    relative_distance,
)

__all__ = ["TWIN_KINDS", "TwinAuditResult", "TwinCheckpoint", "TwinTrace", "draw_head_rotations",
           "gauge_twin", "head_drift", "head_invariants", "identity_twin",
           "noise_twin", "output_drift", "rel_distance", "verdict_resolution",
           "verdict_threshold"]

#: The twin kinds :func:`~gaugekit.audit.heads.audit_twins` knows.
TWIN_KINDS: tuple[str, ...] = ("gauge", "identity", "noise")


def draw_head_rotations(
    sites: Sequence[QKSite], *, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> list[Tensor]:
    """One ``(G, d_head, d_head)`` stack per site (``G`` key-value groups, ``= H`` without
    grouped-query attention), drawn site by site (layer by layer) then group by group from
    ``generator``: Haar on ``O(d_head)`` (:func:`gaugekit.gauge.random_head_rotations`), or
    Haar on the residual gauge of a rotary site (:meth:`RotaryLayout.draw
    <gaugekit.audit.rotary.RotaryLayout.draw>`)."""
    out = []
    for s in sites:
        if s.norms is not None:
            pairs = s.rotary.pairs if s.rotary is not None else ()
            out.append(draw_signed_permutations(s.kv_heads, s.d_head, shared=s.norms.shared,
                                                pairs=pairs, generator=generator, dtype=dtype))
        elif s.rotary is not None:
            out.append(s.rotary.draw(s.kv_heads, generator=generator, dtype=dtype))
        else:
            out.extend(random_head_rotations([(s.kv_heads, s.d_head)], generator=generator,
                                             dtype=dtype))
    return out


def _check_rotations(rotations: Sequence[Tensor], sites: Sequence[QKSite]) -> None:
    if len(rotations) != len(sites):
        raise ValueError(
            f"Invalid rotations: {len(rotations)} stacks; expected one per site ({len(sites)})"
        )
    for A, s in zip(rotations, sites, strict=True):
        if tuple(A.shape) != (s.kv_heads, s.d_head, s.d_head):
            groups = "num_heads" if s.num_kv_heads is None else "key-value groups"
            raise ValueError(
                f"Invalid rotations: shape {tuple(A.shape)} for site {s.label!r}; expected "
                f"({groups}, d_head, d_head) = ({s.kv_heads}, {s.d_head}, {s.d_head})"
            )
        defect = orthogonality_defect(A.double()).max().item()
        if not defect <= 1e-5:
            raise ValueError(
                f"Invalid rotations: ‖AᵀA − I‖_F = {defect:.3g} for site {s.label!r}; expected "
                f"orthogonal matrices (the gauge needs A_hᵀ A_h = I)"
            )
        if s.norms is not None and not (
                is_signed_permutation(A.double().cpu())
                and (not s.norms.shared or torch.equal(A.abs(), A[:1].abs().expand_as(A)))):
            common = ", one permutation for every head (a shared gain)" if s.norms.shared else ""
            raise ValueError(
                f"Invalid rotations: site {s.label!r} has a qk-norm with a gain ({s.norms.q}, "
                f"{s.norms.k}); expected signed permutations{common}, since g ⊙ (A q) = "
                f"A (g ⊙ q) for every gain g only when A moves coordinates without mixing them "
                f"(draw_signed_permutations)"
            )
        if s.rotary is not None:
            off = s.rotary.commutant_defect(A.double().cpu()).max().item()
            if not off <= 1e-5:
                raise ValueError(
                    f"Invalid rotations: ‖A − Π(A)‖_F = {off:.3g} for site {s.label!r}, which "
                    f"applies a rotary embedding ({s.rotary.style} pairs); expected rotations "
                    f"that commute with the rotary map at every position (SO(2) on each pair, "
                    f"any orthogonal block on the unrotated coordinates: RotaryLayout.draw), "
                    f"since Aᵀ R(δ) A ≠ R(δ) changes the logits"
                )


class _RngSnapshot:
    """The global RNG state of the CPU (and the CUDA devices in use), restorable."""

    def __init__(self, devices: Iterable[torch.device]) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = {
            d.index or 0: torch.cuda.get_rng_state(d) for d in devices if d.type == "cuda"
        }

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        for index, state in self.cuda.items():
            torch.cuda.set_rng_state(state, index)


def _step_in_lockstep(
    models: Sequence[nn.Module], optimizers: Sequence[torch.optim.Optimizer],
    loss_fn: Callable[[nn.Module, Any], Tensor], batch: Any,
    devices: Iterable[torch.device], losses: list[list[float]],
) -> bool:
    """One step of every model (base and twins) on ``batch`` from the same RNG state, so that
    dropout and any other draw are alike: model ``i``'s loss goes to ``losses[i]``, and a model
    whose loss is not finite is not stepped. Returns whether one diverged. Shared by the head
    and LoRA twin audits.

    Raises:
        ValueError: ``loss_fn`` did not return a scalar tensor.
    """
    snapshot, diverged = _RngSnapshot(devices), False
    for i, (m, opt) in enumerate(zip(models, optimizers, strict=True)):
        snapshot.restore()
        m.zero_grad(set_to_none=True)
        loss = loss_fn(m, batch)
        if not isinstance(loss, Tensor) or loss.numel() != 1:
            raise ValueError(
                f"Invalid loss_fn: returned {type(loss).__name__}; expected a scalar Tensor"
            )
        losses[i].append(float(loss.detach()))
        if not math.isfinite(losses[i][-1]):
            diverged = True
            continue
        loss.backward()
        opt.step()
    return diverged


def _by_head(t: Tensor, heads: int) -> Tensor:
    """A head-major view ``(heads, d_head, c)`` of a weight ``(heads·d_head, c)``, a bias
    ``(heads·d_head,)`` (``c = 1``) or a tensor already head-major; the query heads of grouped
    rows ``(G, H/G, d_head, c)`` flattened to ``(H, d_head, c)`` (a copy: for reading)."""
    if t.ndim == 4:
        return t.flatten(0, 1)
    if t.ndim == 3:
        return t
    if t.ndim == 1:
        return t.unflatten(0, (heads, -1)).unsqueeze(-1)
    return t.unflatten(0, (heads, -1))


def _rotate_site(qk: _QK, site: QKSite, A: Tensor) -> None:
    """``W_{K,g} → A_g W_{K,g}`` on key head ``g`` and ``W_{Q,h} → A_{g(h)} W_{Q,h}`` on query
    head ``h`` (``g(h) = ⌊h / (H/G)⌋``), biases alike, in place through the views (float64
    products, as :func:`gaugekit.gauge.rotate_head_rows`)."""
    A_query = A.repeat_interleave(site.group_size, dim=0) if site.group_size > 1 else A
    for t, R, heads in ((qk.wq, A_query, site.num_heads), (qk.wk, A, site.kv_heads),
                        (qk.bq, A_query, site.num_heads), (qk.bk, A, site.kv_heads),
                        (qk.bias_k, A, site.kv_heads)):
        if t is None:
            continue
        # grouped rows (G, H/G, d, c): the rotations of the query heads by group
        view, R = (t, R.unflatten(0, t.shape[:2])) if t.ndim == 4 else (_by_head(t, heads), R)
        work = t.dtype if t.device.type == "mps" else torch.float64
        view.copy_(R.to(device=t.device, dtype=work) @ view.to(work))
    if qk.gq is not None and qk.gk is not None:  # the gains move with their coordinates
        permute_gains(qk.gq, A, site.group_size)
        permute_gains(qk.gk, A, 1)


def gauge_twin(
    model: nn.Module,
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None = None,
    *,
    num_heads: int | Sequence[int | None] | None = None,
    generator: torch.Generator | None = None,
    rotations: Sequence[Tensor] | None = None,
    check_structure: bool = True,
) -> tuple[nn.Module, list[Tensor]]:
    """A deep copy of ``model`` with the q/k rows (and biases) of head ``h`` left-multiplied by
    ``A_h``; returns ``(twin, rotations)``.

    ``rotations`` (one ``(G, d_head, d_head)`` orthogonal stack per site, ``G`` the key-value
    groups, ``= H`` without grouped-query attention; on a rotary site each ``A_g`` must commute
    with the rotary map) or ``generator`` (:func:`draw_head_rotations`) must be given. Under
    grouped-query attention ``A_g`` rotates key head ``g`` and every query head that reads it.
    ``model`` is not modified.
    """
    resolved = resolve_sites(model, sites, num_heads, check_structure)
    if rotations is None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(
                f"Invalid generator: {generator!r}; expected a torch.Generator (or pass "
                f"rotations)"
            )
        rotations = draw_head_rotations(resolved, generator=generator)
    _check_rotations(rotations, resolved)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for site, A in zip(resolved, rotations, strict=True):
            _rotate_site(qk_tensors(twin, site), site, A)
    return twin, list(rotations)


def identity_twin(
    model: nn.Module,
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None = None,
    *,
    num_heads: int | Sequence[int | None] | None = None,
    check_structure: bool = True,
) -> nn.Module:
    """The ``A = I`` control: :func:`gauge_twin` with identity rotations (same code path); the
    copy is bit-identical to ``model``."""
    resolved = resolve_sites(model, sites, num_heads, check_structure)
    eye = [
        torch.eye(s.d_head, dtype=torch.float64).expand(s.kv_heads, -1, -1).clone()
        for s in resolved
    ]
    twin, _ = gauge_twin(model, resolved, rotations=eye)
    return twin


def noise_twin(
    model: nn.Module,
    sites: Sequence[SiteSpec] | Sequence[QKSite] | None = None,
    *,
    scale: float,
    generator: torch.Generator,
    num_heads: int | Sequence[int | None] | None = None,
    check_structure: bool = True,
) -> nn.Module:
    """A deep copy with ``N(0, scale²)`` added to every query/key weight and bias entry
    (the original basis), drawn site by site from ``generator``."""
    if not (isinstance(scale, int | float) and math.isfinite(scale) and scale >= 0):
        raise ValueError(f"Invalid scale: {scale!r}; expected a finite float >= 0")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"Invalid generator: {generator!r}; expected a torch.Generator")
    resolved = resolve_sites(model, sites, num_heads, check_structure)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for site in resolved:
            for t in qk_tensors(twin, site).tensors():
                noise = torch.randn(
                    tuple(t.shape), generator=generator, dtype=torch.float64,
                    device=generator.device,
                )
                t.add_((scale * noise).to(device=t.device, dtype=t.dtype))
    return twin


ForwardFn = Callable[[nn.Module, Any], Tensor]


def rel_distance(A: Tensor, B: Tensor) -> Tensor:
    r"""``‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))`` over the last two dimensions (vectors: Euclidean).

    Symmetric in ``A, B``; 0 when both are zero (never NaN):
    :func:`gaugekit.gauge.relative_distance` with ``symmetric=True`` (whose default divides
    by ``‖B‖_F`` alone).
    """
    return relative_distance(A, B, symmetric=True)


def _columns(heads: int, *parts: Tensor | None) -> Tensor:
    """``[W | b | …]`` head-major in float64, ``(heads, d_head, c)``: the weight and one column
    per bias vector that exists."""
    return torch.cat([_by_head(t, heads).double() for t in parts if t is not None], dim=-1)


def head_invariants(model: nn.Module, sites: Sequence[QKSite]) -> list[Tensor]:
    r"""``M_h = W̃_{Q,h}ᵀ W̃_{K,g(h)}`` of every query head, one float64 ``(H, a, b)`` tensor per
    site.

    ``W̃ = [W | b]`` carries a bias column when the bias exists (and, for an MHA with
    ``add_bias_kv``, ``W̃_K`` one more column ``bias_k``); without biases ``M_h = W_{Q,h}ᵀ W_{K,h}``
    (:func:`gaugekit.gauge.head_logit_bilinears` of ``W̃_Q, W̃_K``). Under grouped-query
    attention query head ``h`` reads key head ``g(h) = ⌊h / (H/G)⌋``. With a rotary embedding
    the logits see ``W̃_{Q,h}ᵀ R(δ) W̃_{K,g(h)}`` at offset ``δ``; ``M_h`` is its ``δ = 0`` member,
    and the residual gauge keeps every member (:mod:`gaugekit.audit.rotary`). With a qk-norm
    gain, ``M_h = W̃_{Q,h}ᵀ (I + diag(γ_{Q,h} ⊙ γ_{K,g(h)})) W̃_{K,g(h)}``
    (:mod:`gaugekit.audit.qk_norm`).
    """
    out = []
    with torch.no_grad():
        for site in sites:
            qk = qk_tensors(model, site)
            Q = _columns(site.num_heads, qk.wq, qk.bq)
            K = _columns(site.kv_heads, qk.wk, qk.bk, qk.bias_k)
            if site.group_size > 1:
                K = K.repeat_interleave(site.group_size, dim=0)
            if qk.gq is not None and qk.gk is not None:  # I + diag(γ_Q ⊙ γ_K) between them
                K = gain_factor(qk.gq, qk.gk, site.num_heads, site.kv_heads,
                                site.d_head).unsqueeze(-1) * K
            out.append(Q.mT @ K)
    return out


def head_drift(model_a: nn.Module, model_b: nn.Module, sites: Sequence[QKSite]) -> list[Tensor]:
    """Per-head ``rel(M_h, M_h')`` between two models, one ``(H,)`` float64 tensor per site."""
    return [
        rel_distance(Ma, Mb)
        for Ma, Mb in zip(head_invariants(model_a, sites), head_invariants(model_b, sites),
                          strict=True)
    ]


def _default_forward(model: nn.Module, probe: Any) -> Tensor:
    out = model(*probe) if isinstance(probe, tuple) else model(probe)
    if isinstance(out, tuple | list) and out:
        out = out[0]
    elif not isinstance(out, Tensor) and hasattr(out, "logits"):
        out = out.logits
    return out


def _evaluate(model: nn.Module, probe: Any, forward: ForwardFn | None) -> Tensor:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = (forward or _default_forward)(model, probe)
    finally:
        model.train(was_training)
    if not isinstance(out, Tensor):
        raise ValueError(
            f"Invalid forward: the output on the probe is a {type(out).__name__}; expected a "
            f"Tensor (or a tuple whose first item is one); pass forward=lambda model, probe: ..."
        )
    return out


def output_drift(
    model_a: nn.Module, model_b: nn.Module, probe: Any, *, forward: ForwardFn | None = None
) -> float:
    """``rel(f_a(probe), f_b(probe))`` of the outputs, in eval mode and without gradients.

    ``forward(model, probe) -> Tensor`` defaults to ``model(*probe)`` for a tuple probe (else
    ``model(probe)``), keeping the first item of a tuple output (MHA returns ``(out, weights)``).
    """
    a = _evaluate(model_a, probe, forward)
    b = _evaluate(model_b, probe, forward)
    return rel_distance(a.double().reshape(-1), b.double().reshape(-1)).item()


def verdict_resolution(dtype: torch.dtype) -> float:
    r"""The smallest drift a twin audit in ``dtype`` resolves below its threshold:
    ``ROUNDOFF_EPS_FACTOR · ε`` (1.9e-6 in float32, 3.6e-15 in float64), the drift of a few
    steps of round-off. A gauge twin more than ``CHAOS_FACTOR`` times above both this and its
    noise twin breaks the gauge even below :func:`verdict_threshold`
    (:func:`~gaugekit.audit.factor_results.decide_verdict`)."""
    return ROUNDOFF_EPS_FACTOR * torch.finfo(dtype).eps


def verdict_threshold(dtype: torch.dtype) -> float:
    """The largest gauge drift that is round-off: the factor audit's threshold for float64
    (1e-8) and float32 (1e-3), ``√ε`` for other dtypes (bfloat16: 0.088)."""
    if dtype in (torch.float64, torch.float32):
        return default_threshold(dtype)
    return math.sqrt(torch.finfo(dtype).eps)



@dataclass(frozen=True)
class TwinCheckpoint:
    """Drift of one twin from the original after ``step`` optimizer steps.

    ``head_drift[i][h]`` is ``rel(M_h, M_h')`` of head ``h`` of site ``i``; ``output_drift`` is
    ``rel`` of the outputs on the probe batch.
    """

    step: int
    head_drift: tuple[tuple[float, ...], ...]
    output_drift: float

    @property
    def mean_head_drift(self) -> float:
        """Mean of ``rel(M_h, M_h')`` over all heads of all sites."""
        flat = [d for site in self.head_drift for d in site]
        return sum(flat) / len(flat)

    @property
    def max_head_drift(self) -> float:
        """Largest ``rel(M_h, M_h')`` over all heads of all sites."""
        return max(d for site in self.head_drift for d in site)


@dataclass(frozen=True)
class TwinTrace:
    """One twin's run: its checkpoints and its training loss at every step."""

    kind: str
    checkpoints: tuple[TwinCheckpoint, ...]
    losses: tuple[float, ...]
    init_output_drift: float

    @property
    def final(self) -> TwinCheckpoint:
        """The last checkpoint."""
        return self.checkpoints[-1]

    @property
    def max_drift(self) -> float:
        """Largest ``rel(M_h, M_h')`` over all heads and checkpoints: the drift a verdict reads."""
        return max(c.max_head_drift for c in self.checkpoints)

    def steps(self) -> list[int]:
        """Checkpoint steps (for plotting)."""
        return [c.step for c in self.checkpoints]

    def mean_head_drifts(self) -> list[float]:
        """Mean per-head drift at each checkpoint."""
        return [c.mean_head_drift for c in self.checkpoints]

    def output_drifts(self) -> list[float]:
        """Output drift at each checkpoint."""
        return [c.output_drift for c in self.checkpoints]


INVARIANT_DOC = (
    "M_h = [W_Q,h | b_Q,h]^T [W_K,h | b_K,h] per head (bias columns only where biases exist; "
    "= W_Q,h^T W_K,h without biases); rel(A,B) = ||A-B||_F / (0.5(||A||_F+||B||_F))"
)
#: What a site with qk-norm gains adds to :data:`INVARIANT_DOC`.
NORMED_INVARIANT_DOC = (
    "; at sites with qk-norm gains (the gauge: signed permutations) "
    "M_h = [W_Q,h | b_Q,h]^T (I + diag(g_Q,h * g_K,h)) [W_K,h | b_K,h]"
)


@dataclass(frozen=True)
class TwinAuditResult:
    """Outcome of :func:`audit_twins`.

    Attributes:
        sites: the audited attention sites.
        optimizer: the optimizer's label.
        steps: optimizer steps taken (fewer than asked when ``diverged``).
        dtype: the model's parameter dtype.
        traces: one :class:`TwinTrace` per twin kind, in the order asked.
        base_losses: the original's training loss at every step.
        diverged: a training loss was not finite; training stopped there.
        invariant: which invariant ``head_drift`` compares.
        optimizer_class: dotted path of the optimizer's class (``torch.optim.Adam``).
        hyperparameters: the values it was built with
            (:func:`gaugekit.audit.factor_results.optimizer_hyperparameters`).
        threshold: the round-off threshold of the verdict (:func:`verdict_threshold`).
        computes_in: the precision the model computes its query/key path in when coarser
            than its dtype (a float64 model whose rotary embedding runs in float32:
            ``"float32"``, read by the function check), whose round-off the verdict then uses;
            ``""``: its dtype.
    """

    sites: tuple[QKSite, ...]
    optimizer: str
    steps: int
    dtype: str
    traces: tuple[TwinTrace, ...]
    base_losses: tuple[float, ...]
    diverged: bool = False
    invariant: str = field(default=INVARIANT_DOC)
    optimizer_class: str = ""
    hyperparameters: dict[str, Any] = field(default_factory=dict, hash=False)
    threshold: float = FLOAT64_THRESHOLD
    computes_in: str = ""

    def trace(self, kind: str) -> TwinTrace:
        """The trace of twin ``kind``."""
        for t in self.traces:
            if t.kind == kind:
                return t
        raise ValueError(
            f"Invalid kind: {kind!r}; expected one of {[t.kind for t in self.traces]}"
        )

    def to_records(self) -> list[dict[str, Any]]:
        """Long format, one row per (twin, checkpoint, site, head), for pandas or JSONL."""
        rows = []
        for t in self.traces:
            for c in t.checkpoints:
                for site, drifts in zip(self.sites, c.head_drift, strict=True):
                    for h, d in enumerate(drifts):
                        rows.append({
                            "twin": t.kind, "step": c.step, "site": site.label, "head": h,
                            "head_drift": d, "output_drift": c.output_drift,
                            "optimizer": self.optimizer,
                        })
        return rows

    def table(self) -> str:
        """Plain-text table: per twin and checkpoint, mean/max head drift and output drift."""
        rows = [[t.kind, str(c.step), f"{c.mean_head_drift:.3e}", f"{c.max_head_drift:.3e}",
                 f"{c.output_drift:.3e}"] for t in self.traces for c in t.checkpoints]
        return text_table(["twin", "step", "mean rel(M_h)", "max rel(M_h)", "rel(output)"], rows,
                          widths=[9, 6, 14, 13, 12], align="lrrrr")

    @property
    def verdict(self) -> GaugeVerdict | None:
        """Keeps / breaks / chaotic from the gauge and noise twins' drifts (module doc);
        ``None`` when no gauge twin was trained."""
        kinds = {t.kind: t for t in self.traces}
        if "gauge" not in kinds:
            return None
        noise = kinds["noise"].max_drift if "noise" in kinds else None
        why = "training diverged (a loss was not finite)" if self.diverged else ""
        return decide_verdict(kinds["gauge"].max_drift, noise, self.threshold, unjudged=why,
                              low_precision=low_precision_step(self.optimizer_class,
                                                               self.hyperparameters),
                              resolution=verdict_resolution(
                                  getattr(torch, self.computes_in or self.dtype)))

    def verdict_line(self) -> str:
        """One plain line: the optimizer as built, its verdict, the numbers and the rule."""
        verdict = self.verdict
        if verdict is None:
            return f"{self.optimizer}: no gauge twin was trained, so there is no verdict"
        return verdict.line(self.optimizer)

    def summary(self) -> str:
        """A few readable lines: what was audited, where each twin ended, and the verdict."""
        return "\n".join([*self._head_lines(), self.verdict_line()])

    def _head_lines(self) -> list[str]:
        heads = sum(s.num_heads for s in self.sites)
        lines = [
            f"Twin audit: {self.optimizer}, {self.steps} steps, {self.dtype}, "
            f"{len(self.sites)} site(s), {heads} heads.",
            f"Invariant: {self.invariant}.",
        ]
        if self.computes_in:
            lines.append(f"The model computes its query/key path in {self.computes_in}: the "
                         f"verdict reads its drifts at {self.computes_in}'s round-off.")
        if self.diverged:
            lines.append("DIVERGED: a training loss was not finite; drifts are not a result.")
        nan = float("nan")
        base_loss = self.base_losses[-1] if self.base_losses else nan
        for t in self.traces:
            f = t.final
            loss = t.losses[-1] if t.losses else nan
            lines.append(
                f"  {t.kind:<8}: at init rel(output) = {t.init_output_drift:.2e}; after step "
                f"{f.step}: mean rel(M_h) = {f.mean_head_drift:.3e}, "
                f"max {f.max_head_drift:.3e}, rel(output) = {f.output_drift:.3e}; "
                f"loss {loss:.4g} (original {base_loss:.4g})"
            )
        return lines

    def __str__(self) -> str:
        return "\n".join([*self._head_lines(), self.table(), self.verdict_line()])
