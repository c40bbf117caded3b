r"""A gauge-twin audit for anyone's attention model.

The per-head gauge
------------------
One attention head ``h`` maps an input ``x`` to a query ``q_h = W_{Q,h} x + b_{Q,h}`` and an
input ``x'`` to a key ``k_h = W_{K,h} x' + b_{K,h}`` (``W_{Q,h}``, ``W_{K,h}`` are the
``d_head`` rows of head ``h`` of the query and key projections, torch ``nn.Linear`` layout).
The logit between them is ``q_hᵀ k_h / √d_head``. For every orthogonal ``A_h ∈ O(d_head)``

    ``(A_h q_h)ᵀ (A_h k_h) = q_hᵀ A_hᵀ A_h k_h = q_hᵀ k_h``,

so left-multiplying the rows of head ``h`` of ``W_Q`` **and** ``W_K`` (and of their biases) by
the same ``A_h`` leaves every logit, hence the whole function, unchanged. ``W_V``, ``W_O`` and
all other parameters are untouched; each head has its own ``A_h``.

The invariant reported
----------------------
With homogeneous coordinates ``x̃ = [x; 1]`` put ``W̃_{Q,h} = [W_{Q,h} | b_{Q,h}]`` and
``W̃_{K,h} = [W_{K,h} | b_{K,h}]`` (a bias column only when the bias exists). Then
``q_hᵀ k_h = x̃ᵀ M_h x̃'`` with the bilinear form

    ``M_h = W̃_{Q,h}ᵀ W̃_{K,h}``,

which the gauge keeps exactly (``W̃ → A_h W̃``). Without biases ``M_h = W_{Q,h}ᵀ W_{K,h}``, the
paper's invariant. For ``nn.MultiheadAttention(add_bias_kv=True)`` the learned extra key
``bias_k`` lives in the projected space; its head-``h`` slice is rotated by ``A_h`` too and enters
``W̃_{K,h}`` as one more column (the logits against that extra key are ``x̃ᵀ W̃_{Q,h}ᵀ bias_{k,h}``).
``M_h`` of a head is what the audit compares between twins:

    ``rel(A, B) = ‖A − B‖_F / (½(‖A‖_F + ‖B‖_F))``  (:func:`rel_distance`),

symmetric in the twins. Two twins with the same ``M_h`` for every head of every layer (and the
same other parameters) are the same function.

Twins
-----
* gauge twin: a deep copy with ``A_h`` Haar on ``O(d_head)`` (on the residual gauge
  ``SO(2)^{r/2} × O(d − r)`` where a rotary embedding acts), drawn from an explicit
  :class:`torch.Generator` per site (layer), then per head (per key-value group);
* identity twin: the same code path with ``A_h = I``. ``I W`` is computed exactly in floating
  point (each entry is ``1·w + Σ 0·w'``), so the copy is bit-identical and, trained by the same
  code on the same data, drifts **exactly** 0: the control that the machinery adds no drift;
* noise twin: the original basis with i.i.d. ``N(0, σ²)`` added to every query/key weight and
  bias entry (``σ = noise_scale``): the yardstick of ordinary sensitivity to perturbation.

An optimizer whose update commutes with ``W → A W`` on the rows of a head (SGD, heavy ball,
shared-scale Adam, Muon in exact arithmetic) keeps the gauge twin on the orbit of the original,
so its drift stays at round-off. Coordinate-wise Adam does not: its per-entry denominator
``√v̂`` is taken in the given basis, and the twins split at the first step.

What breaks the gauge (refused or flagged)
-------------------------------------------
* qk-norm with a per-coordinate learnable gain ``g ⊙ q/rms(q)``: ``g ⊙ (A q) ≠ A (g ⊙ q)``
  unless ``g`` is a multiple of the ones vector, and training makes it not one. Refused.
* qk-norm with mean-centring (LayerNorm, with or without affine): subtracting the mean of the
  coordinates is the projection ``I − 11ᵀ/d``, which does not commute with a general ``A``.
  Refused (GroupNorm alike).
* A gain-free RMS norm ``q / rms(q)`` is fine: ``‖A q‖ = ‖q‖`` so ``(Aq)/rms(Aq) = A(q/rms(q))``.
  ``nn.RMSNorm(elementwise_affine=False)`` and ``nn.Identity`` on q/k are accepted.
* Rotary position embeddings ``q ↦ R(p) q``: the logit is ``qᵀ R(p)ᵀ R(p') k = qᵀ R(p' − p) k``
  and the twin's is ``qᵀ A_hᵀ R(p' − p) A_h k``; they agree for all positions only when ``A_h``
  commutes with every ``R(δ)``, i.e. (distinct frequencies) ``A_h`` is block-diagonal in the
  RoPE planes with a rotation in each 2×2 block (a reflection reverses the angle). A Haar
  ``A_h`` does not commute. The residual gauge ``SO(2)^{r/2} × O(d − r)`` (derivation in
  :mod:`gaugekit.audit.rotary`) is audited when the site knows the model's pairing layout
  (:class:`~gaugekit.audit.rotary.RotaryLayout`, read by itself from ``transformers`` models:
  half-split ``rotate_half`` or interleaved ``rotate_every_two``): the gauge twin is drawn from
  it. Otherwise a module whose class or attribute name says rotary/RoPE is refused; RoPE
  written as a plain function is invisible to that check (the probe check catches it).
* Grouped-query attention (``G`` key heads for ``H`` query heads): query head ``h`` reads key
  head ``g(h)``, so the gauge is one ``A_g`` per key-value group, on key head ``g`` and all the
  query heads that read it; ``M_h = W̃_{Q,h}ᵀ W̃_{K,g(h)}`` per query head.
* Anything else the structure check cannot see (a functional qk-norm, RoPE as a function, q or k
  used elsewhere, a wrong head count on separate projections): :func:`audit_twins` evaluates
  both twins on the probe before training and raises when the gauge twin is not the same
  function to round-off: within ten times a twin rounded in its last bits, in the model's
  dtype and in float64 (:mod:`gaugekit.audit.function_check`).

Adam and a key bias
-------------------
Softmax ignores a shift shared by all keys of a query, and ``q_hᵀ b_{K,h}`` is such a shift:
the gradient of ``b_K`` is identically 0 in exact arithmetic, so its float value is round-off.
Coordinate-wise Adam's first step ``g / (|g| + ε)`` turns that round-off into updates of up to
``lr`` (amplification ``1/ε``), in any basis: a key bias makes even the twins related by a
signed permutation (for which Adam is equivariant) differ in ``M_h`` by ~1e-11 in float64
rather than 1e-16, while the outputs stay at round-off. The ``b_K`` column stays in ``M_h``
(it is gauge-invariant like the rest) although the function cannot see it; read the output
drift too when the model has key biases.

Verdicts in words
-----------------
A result ends with one plain line (:meth:`TwinAuditResult.verdict_line`): the optimizer's class
and hyperparameters as built, then *keeps the gauge*, *breaks the gauge* or *chaotic (gauge
twin ≈ noise twin)*, with the numbers that decide it. The drift of a twin is the largest
``rel(M_h, M_h')`` over its heads and checkpoints; the rule is that of the factor audit
(:func:`~gaugekit.audit.factor_results.decide_verdict`): a gauge drift at or below the round-off
threshold of the dtype (:func:`verdict_threshold`: 1e-8 in float64, 1e-3 in float32) keeps the
gauge, unless it is more than ``CHAOS_FACTOR = 10`` times both the noise twin's and the dtype's
resolution (:func:`verdict_resolution`), which reads a small break the fixed threshold hides;
above it, a gauge drift more than ``CHAOS_FACTOR`` times the noise twin's breaks the gauge, and
one within that factor is chaotic: the run separates twins that start a tiny
perturbation apart just as fast, so the gap says how chaotic training is, not that the rule sees
the basis. Adam's
gauge twins end about 500 times farther apart than its noise twins on the book's attention model
(breaks); Muon's end at 0.85 against 0.87 (chaotic); SGD and shared-scale Adam stay near 1e-6 in
float32 (keeps). Without a noise twin a drift above the threshold breaks the gauge, and the line
says that chaos was not ruled out; a run that diverged cannot be judged.

Everything random comes from explicit generators; training both copies restores the global RNG
state before each copy's step, so dropout masks agree too.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from gaugekit.audit.factor_results import (
    describe_optimizer,
    optimizer_hyperparameters,
    optimizer_name,
)
from gaugekit.audit.function_check import cast_floats, same_function
from gaugekit.audit.rotary import RotaryLayout
from gaugekit.audit.site_layout import QKSite, SiteSpec, qk_tensors
from gaugekit.audit.sites import find_qk_sites
from gaugekit.audit.twin_parts import (
    INVARIANT_DOC,
    NORMED_INVARIANT_DOC,
    TWIN_KINDS,
    ForwardFn,
    TwinAuditResult,
    TwinCheckpoint,
    TwinTrace,
    _evaluate,
    _step_in_lockstep,
    draw_head_rotations,
    gauge_twin,
    head_drift,
    head_invariants,
    identity_twin,
    noise_twin,
    output_drift,
    rel_distance,
    verdict_resolution,
    verdict_threshold,
)
from gaugekit.optim.muon import Muon
from gaugekit.optim.muon_adam import MuonAdam
from gaugekit.optim.params import muon_param_groups
from gaugekit.optim.registry import get_spec, make_optimizer

__all__ = [
    "TWIN_KINDS",
    "LossFn",
    "OptimizerFactory",
    "QKSite",
    "RotaryLayout",
    "SiteSpec",
    "TwinAuditResult",
    "TwinCheckpoint",
    "TwinTrace",
    "audit_twins",
    "draw_head_rotations",
    "find_qk_sites",
    "gauge_twin",
    "head_drift",
    "head_invariants",
    "identity_twin",
    "noise_twin",
    "output_drift",
    "rel_distance",
    "verdict_resolution",
    "verdict_threshold",
]

LossFn = Callable[[nn.Module, Any], Tensor]
OptimizerFactory = Callable[[list[nn.Parameter]], torch.optim.Optimizer]


def _make_factory(
    optimizer: str | OptimizerFactory, optimizer_kwargs: Mapping[str, Any] | None
) -> Callable[[nn.Module], torch.optim.Optimizer]:
    """``model -> optimizer``. A registry name builds its class on the model's parameters,
    except Muon's rules, which update matrices only: ``"muon"`` is Muon's rule (with
    :class:`~gaugekit.optim.Muon`'s defaults and ``optimizer_kwargs``, ``eps`` as ``ns_eps``) on
    the matrices that :func:`~gaugekit.optim.muon_param_groups` routes to Muon, and shared-scale
    Adam (which keeps the gauge, so the verdict is Muon's) on the rest — biases, norms,
    embeddings, the head — in one :class:`~gaugekit.optim.MuonAdam`; a MuonAdam name gets
    the same routing with its own settings."""
    kwargs = dict(optimizer_kwargs or {})
    if isinstance(optimizer, str):
        spec = get_spec(optimizer)  # an unknown name raises ValueError listing the known ones
        if spec.cls is Muon:
            settings = {("ns_eps" if k == "eps" else k): v
                        for k, v in {**spec.defaults, **kwargs}.items()}
            return lambda model: MuonAdam(muon_param_groups(model),
                                          **{"adam": "shared_scale", **settings})
        if issubclass(spec.cls, MuonAdam):
            return lambda model: spec.make(muon_param_groups(model), **kwargs)
        return lambda model: make_optimizer(optimizer, list(model.parameters()), **kwargs)
    if callable(optimizer):
        if kwargs:
            raise ValueError(
                f"Invalid optimizer_kwargs: {kwargs!r}; expected None with a factory (bind the "
                f"hyperparameters in the factory)"
            )
        return lambda model: optimizer(list(model.parameters()))
    raise ValueError(
        f"Invalid optimizer: {optimizer!r}; expected a registry name or a callable "
        f"params -> torch.optim.Optimizer"
    )


def _failing_sites(base: nn.Module, sites: Sequence[QKSite], rotations: Sequence[Tensor],
                   tensors: Callable[[nn.Module], list[Tensor]],
                   measure: Callable[[nn.Module, torch.dtype], Tensor]) -> str:
    """Where a gauge twin stops being the same function: each site turned alone by its own
    rotation and judged as the whole twin was; the sites that fail, with their distances."""
    failing = []
    for site, A in zip(sites, rotations, strict=True):
        checks = same_function(base, lambda m, s=site, a=A: gauge_twin(m, [s], rotations=[a])[0],
                               tensors, measure)
        if not all(c.passed for c in checks):
            failing.append(f"{site.label} ({checks[0].drift:.2g})")
    return f" at site {', '.join(failing)}" if failing else ""


def _check_checkpoints(checkpoints: Sequence[int] | None, steps: int) -> list[int]:
    if checkpoints is None:
        return list(range(steps + 1))
    cps = sorted(set(checkpoints))
    if not cps or any(
        isinstance(c, bool) or not isinstance(c, int) or c < 0 or c > steps for c in cps
    ):
        raise ValueError(
            f"Invalid checkpoints: {checkpoints!r}; expected integers in [0, steps={steps}]"
        )
    return cps


def audit_twins(
    model: nn.Module,
    loss_fn: LossFn,
    *,
    probe: Any,
    sites: Sequence[SiteSpec] | None = None,
    num_heads: int | Sequence[int | None] | None = None,
    optimizer: str | OptimizerFactory = "adam",
    optimizer_kwargs: Mapping[str, Any] | None = None,
    steps: int = 10,
    batch: Any = None,
    batches: Iterable[Any] | None = None,
    checkpoints: Sequence[int] | None = None,
    twins: Sequence[str] = TWIN_KINDS,
    gauge_seed: int = 777,
    rotations: Sequence[Tensor] | None = None,
    noise_seed: int = 888,
    noise_scale: float = 1e-7,
    forward: ForwardFn | None = None,
    check_structure: bool = True,
    init_tol: float | None = None,
    threshold: float | None = None,
) -> TwinAuditResult:
    r"""Train ``model`` and its twins in lockstep and report how far their ``M_h`` drift apart.

    The original is deep-copied (``model`` itself is not trained). Each copy gets its own
    optimizer from the same factory; at every step each copy computes ``loss_fn(copy, b)`` on
    the same batch ``b``, backpropagates and steps, with the global RNG restored to the same
    state before each copy (identical dropout masks).

    Args:
        model: the model (any ``nn.Module``).
        loss_fn: ``loss_fn(model, batch) -> scalar Tensor``.
        probe: input of the output-drift check (``forward(model, probe)``); it also verifies
            before training that the gauge and identity twins compute the same function.
        sites, num_heads, check_structure: as in :func:`find_qk_sites`.
        optimizer: a registry name (``make_optimizer(name, params, **optimizer_kwargs)``;
            ``"muon"``: Muon on the model's hidden matrices and shared-scale Adam on the rest,
            one :class:`~gaugekit.optim.MuonAdam`, so models with biases and norms work) or a
            factory ``params -> Optimizer`` (e.g. ``lambda p: torch.optim.Adam(p, lr=1e-3)``).
        steps: optimizer steps ``k >= 0``.
        batch: one batch used at every step (full batch); ignored when ``batches`` is given.
        batches: an iterable of batches; the first ``steps`` are drawn before training, so
            every copy sees the same sequence.
        checkpoints: steps at which drift is measured (default every step ``0 … k``).
        twins: kinds to build, a subset of ``("gauge", "identity", "noise")``.
        gauge_seed, noise_seed: seeds of the generators of the Haar ``A_h`` and of the noise.
        rotations: orthogonal ``(G, d_head, d_head)`` stacks, one per site (``G`` key-value
            groups, ``= H`` without grouped-query attention), used by the gauge twin instead of
            the Haar draw (e.g. signed permutations); on a rotary site each must commute with
            the rotary map (:meth:`~gaugekit.audit.rotary.RotaryLayout.draw`); ``gauge_seed``
            is then unused.
        noise_scale: standard deviation of the noise twin's perturbation.
        forward: ``forward(model, probe) -> Tensor`` (see :func:`output_drift`).
        init_tol: largest init output drift of the gauge and identity twins; by default
            none is fixed: each twin must stay within ten times the drift of a twin rounded
            in its last bits, in the model's dtype and in float64
            (:func:`gaugekit.audit.function_check.same_function`).
        threshold: the verdict's round-off threshold on the gauge drift (default
            :func:`verdict_threshold` of the model's dtype, or of float32 when the function
            check finds a float64 model computing its query/key path in float32).

    Returns:
        A :class:`TwinAuditResult`; ``print(result)`` shows what was audited (the optimizer's
        class and hyperparameters as built), a table of drifts and, last, the verdict line.

    Raises:
        ValueError: bad arguments, or a gauge twin that is not the same function at init.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"Invalid steps: {steps!r}; expected an integer >= 0")
    kinds = list(twins)
    if not kinds or any(k not in TWIN_KINDS for k in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError(
            f"Invalid twins: {twins!r}; expected distinct kinds from {TWIN_KINDS}"
        )
    if not (isinstance(noise_scale, int | float) and math.isfinite(noise_scale)
            and noise_scale >= 0):
        raise ValueError(f"Invalid noise_scale: {noise_scale!r}; expected a finite float >= 0")
    if not callable(loss_fn):
        raise ValueError(f"Invalid loss_fn: {loss_fn!r}; expected a callable (model, batch)")
    cps = _check_checkpoints(checkpoints, steps)
    factory = _make_factory(optimizer, optimizer_kwargs)
    resolved = find_qk_sites(model, sites, num_heads=num_heads, check_structure=check_structure)
    params = list(model.parameters())
    dtype = params[0].dtype if params else torch.get_default_dtype()

    if batches is not None:
        drawn = list(itertools.islice(iter(batches), steps))
        if len(drawn) < steps:
            raise ValueError(
                f"Invalid batches: {len(drawn)} batches; expected at least steps = {steps}"
            )
    else:
        drawn = [batch] * steps

    base = copy.deepcopy(model)
    copies: list[nn.Module] = []
    makers: dict[str, Callable[[nn.Module], nn.Module]] = {}
    for kind in kinds:
        if kind == "gauge":
            twin, drawn_rotations = gauge_twin(
                base, resolved, rotations=rotations,
                generator=torch.Generator().manual_seed(gauge_seed),
            )
            makers[kind] = lambda m, r=drawn_rotations: gauge_twin(m, resolved, rotations=r)[0]
            site_rotations = drawn_rotations
        elif kind == "identity":
            twin = identity_twin(base, resolved)
            makers[kind] = lambda m: identity_twin(m, resolved)
        else:
            twin = noise_twin(base, resolved, scale=noise_scale,
                              generator=torch.Generator().manual_seed(noise_seed))
        copies.append(twin)

    init_drift = [output_drift(base, c, probe, forward=forward) for c in copies]
    computes_in = ""
    if init_tol is not None:  # the caller's fixed tolerance instead of the round-off test
        failed = {k: f"rel = {d:.3g} > init_tol = {init_tol:.3g}"
                  for k, d in zip(kinds, init_drift, strict=True) if k in makers
                  and not d <= init_tol}
    else:
        def qk(m: nn.Module) -> list[Tensor]:
            return [t for site in resolved for t in qk_tensors(m, site).tensors()]

        def measure(m: nn.Module, dt: torch.dtype) -> Tensor:
            return _evaluate(m, cast_floats(probe, dt), forward)

        checked = {k: same_function(base, make, qk, measure) for k, make in makers.items()}
        own = str(dtype).removeprefix("torch.")
        judged = {checks[0].judged_at for checks in checked.values()} - {own}
        computes_in = judged.pop() if judged else ""
        failed = {k: "; ".join(map(str, checks)) for k, checks in checked.items()
                  if not all(c.passed for c in checks)}
    if failed:
        kind, why = next(iter(failed.items()))
        where = ""
        if kind == "gauge" and init_tol is None and len(resolved) > 1:
            where = _failing_sites(base, resolved, site_rotations, qk, measure)
        raise ValueError(
            f"Invalid model: the {kind} twin's output on the probe is not the original's "
            f"before any training ({why}){where}, so the per-head gauge is not a symmetry of this "
            f"model as described; expected an exact symmetry (check num_heads and the q/k row "
            f"layout; a clamp on q/k, a qk-norm gain, rotary embeddings or q/k used outside "
            f"the logits break it)"
        )

    models = [base, *copies]
    optimizers = [factory(m) for m in models]
    optimizer_class = optimizer_name(optimizers[0])
    hyperparameters = optimizer_hyperparameters(optimizers[0])
    label = describe_optimizer(optimizer_class, hyperparameters)
    if isinstance(optimizer, str):
        label = f"{optimizer} = {label}"
    devices = {p.device for p in params}
    losses: list[list[float]] = [[] for _ in models]
    points: list[list[TwinCheckpoint]] = [[] for _ in copies]

    def record(step: int) -> None:
        for i, twin in enumerate(copies):
            hd = head_drift(base, twin, resolved)
            points[i].append(TwinCheckpoint(
                step=step,
                head_drift=tuple(tuple(float(x) for x in d.tolist()) for d in hd),
                output_drift=output_drift(base, twin, probe, forward=forward),
            ))

    diverged, done = False, 0
    if 0 in cps:
        record(0)
    for t in range(steps):
        if _step_in_lockstep(models, optimizers, loss_fn, drawn[t], devices, losses):
            diverged = True
            break
        done = t + 1
        if done in cps:
            record(done)

    traces = tuple(
        TwinTrace(kind=k, checkpoints=tuple(points[i]), losses=tuple(losses[i + 1]),
                  init_output_drift=init_drift[i])
        for i, k in enumerate(kinds)
    )
    return TwinAuditResult(
        sites=tuple(resolved), optimizer=label, steps=done, dtype=str(dtype).replace("torch.", ""),
        traces=traces, base_losses=tuple(losses[0]), diverged=diverged,
        optimizer_class=optimizer_class, hyperparameters=hyperparameters,
        threshold=(verdict_threshold(getattr(torch, computes_in) if computes_in else dtype)
                   if threshold is None else threshold),
        computes_in=computes_in,
        invariant=INVARIANT_DOC + (NORMED_INVARIANT_DOC if any(s.norms for s in resolved)
                                   else ""),
    )
