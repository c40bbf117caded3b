"""Adam and its gauge-equivariant repair, shared-scale Adam."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gaugekit.optim import distributed as D
from gaugekit.optim import execution as X
from gaugekit.optim import functional as F
from gaugekit.optim import functional_shared as FS
from gaugekit.optim._validation import (
    EPS,
    LR,
    WEIGHT_DECAY,
    Hyper,
    betas_check,
    bool_check,
    check_common_batch_shape,
    check_optimizer_wide,
    invalid,
)
from gaugekit.optim.base import NONFINITE, ZooOptimizer, per_run


def _switch_check(name: str, value: Any) -> None:
    """``foreach`` and ``fused``: ``None`` (the default choice), ``True`` or ``False``."""
    if value is not None and not isinstance(value, bool):
        raise invalid(name, value, "None, True or False")


def _check_fused(group: dict[str, Any]) -> None:
    """Refuse ``fused=True`` where it cannot run: without ``torch.compile`` support, or on
    DTensor parameters (the compiled pass is not built for them)."""
    if not group.get("fused"):
        return
    import torch._dynamo

    if not torch._dynamo.is_dynamo_supported():
        raise invalid("fused", True, "None or False: torch.compile is not supported in this "
                      "Python/platform, and fused=True compiles the step")
    if any(D.is_dtensor(p) for p in group["params"]):
        raise invalid("fused", True, "None or False with DTensor (FSDP2) parameters")


class Adam(ZooOptimizer):
    r"""Adam (Kingma & Ba, 2015), coordinate-wise; AdamW with ``decoupled_weight_decay=True``.

    Example:
        >>> import torch
        >>> from gaugekit.optim import Adam
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = Adam(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math::
        m_t = β_1 m_{t-1} + (1-β_1) g_t,\quad v_t = β_2 v_{t-1} + (1-β_2) g_t^2,\\
        \hat m_t = m_t/(1-β_1^t),\quad \hat v_t = v_t/(1-β_2^t),\quad
        θ_t = θ_{t-1} − \mathrm{lr}\,\hat m_t / (\sqrt{\hat v_t} + ε)

    Weight decay λ as in torch: coupled L2 ``g_t ← g_t + λθ_{t-1}`` (``torch.optim.Adam``), or
    with ``decoupled_weight_decay=True`` ``θ ← θ(1 − lr λ)`` before the update
    (``torch.optim.AdamW``). ``maximize`` uses ``−g_t``.

    State: ``step``, ``exp_avg``, ``exp_avg_sq`` (torch's names). Same numbers as
    ``torch.optim.Adam`` / ``AdamW`` (``amsgrad=False``) up to rounding.

    Deviations: none from the paper's ``adam`` (β = (0.9, 0.999), ε = 1e-8 outside the root,
    bias correction on both moments, ``weight_decay = 0``); no AMSGrad.

    Gauge: not equivariant — the per-entry denominator ``√v̂`` does not commute with ``G → G Q``
    (rotating ``G`` mixes the entries whose squares it divides by), with or without decay.

    Args:
        params: tensors or param-group dicts.
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v̂`` (per run).
        weight_decay: ``λ >= 0`` (per run).
        decoupled_weight_decay: AdamW's decoupled decay instead of L2.
    """

    weight_decay_kind = "coupled"
    nonfinite_default = "propagate"  # per coordinate: torch's behaviour by default
    rule_keys = ("decoupled_weight_decay",)
    hyper_checks = {
        "lr": LR, "betas": betas_check(), "eps": EPS, "weight_decay": WEIGHT_DECAY,
        "decoupled_weight_decay": bool_check, "maximize": bool_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, weight_decay: Hyper = 0.0, *, decoupled_weight_decay: bool = False,
        maximize: bool = False, batch_dims: int = 0,
        nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
            "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _update_group(self, group: dict[str, Any]) -> None:
        for p, g in self._with_grad(group["params"]):
            state = self._state(p, "exp_avg", "exp_avg_sq", step=True)
            beta1, beta2 = self._hyper(group, "betas", p)
            F.adam_(
                p, g, state["exp_avg"], state["exp_avg_sq"], step=state["step"],
                lr=self._hyper(group, "lr", p), beta1=beta1, beta2=beta2,
                eps=self._hyper(group, "eps", p),
                weight_decay=self._hyper(group, "weight_decay", p),
                decoupled=group["decoupled_weight_decay"], maximize=group["maximize"],
            )


class SharedScaleAdam(ZooOptimizer):
    r"""Adam with ONE shared denominator per step (the paper's ``scalar_adam`` / ``adam_p0rms``).

    Example:
        >>> import torch
        >>> from gaugekit.optim import SharedScaleAdam
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = SharedScaleAdam(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    First moment as in :class:`Adam`; then, once per step, over all entries of all parameters of
    all groups (one value per run when ``batch_dims > 0``)

    .. math::
        s_t = \sqrt{\operatorname{mean}(\hat v_t)} + ε,\qquad
        θ_t = θ_{t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\,\hat m_t / s_t

    with decoupled weight decay λ (``maximize`` uses ``−g_t``). Only parameters with a gradient
    at this step enter the mean. ``eps`` and ``batch_dims`` are optimizer-wide (they define the
    shared scalar); ``lr``, ``betas``, ``weight_decay`` and ``maximize`` may differ by group.

    State, per parameter: ``step``, ``exp_avg`` and ``exp_avg_sq_mean``, the mean over the
    parameter's entries of what Adam's ``exp_avg_sq`` would be, one value per run (shape
    ``param.shape[:batch_dims]``). The mean is linear, so it follows its own recurrence
    ``v̄_t = β₂ v̄_{t-1} + (1 − β₂) mean(g_t²)``: the optimizer keeps one tensor per parameter,
    as momentum SGD — half of Adam's state — and takes two passes over memory per step (the
    sum of ``g²``; the moment and the parameter, in one kernel: ``fused`` below). The scalars
    (the ``v̄ᵢ`` and ``s``) are computed on the host in float64 where that is free (CPU
    parameters, float hyperparameters, one run), else on the parameters' device without a
    host read (:func:`gaugekit.optim.execution.shared_scale_scalars_`).

    Non-finite gradients (``nonfinite``, ``gaugekit.optim.base``): a NaN or inf in one
    gradient would reach every parameter through ``s_t``. By default (``batch_dims = 0``) such a
    step is skipped — no parameter, moment or step count changes — with a ``RuntimeWarning``
    naming the offending parameters; ``"raise"`` raises instead; ``"propagate"`` (the default
    for stacked runs, where the damage stays in its run) checks nothing. The check reads the
    total of the sums of ``g²`` the scalar is made of: one host read per step, no extra pass.

    Deviations: the paper's script keeps the full ``v`` and sums it with ``.item()`` (a host
    sync per step); here the mean follows its recurrence, the same numbers up to round-off
    (β = (0.9, 0.999), ε = 1e-8 outside the root).

    Gauge: equivariant — ``mean(v̂)`` is a sum of squared Frobenius norms, invariant under
    ``G → G Q``, so the update is ``m̂`` times a gauge-invariant scalar (and the decay a scalar
    multiple of the factor).

    Distributed: with DTensor parameters (FSDP2 ``fully_shard``, ``Shard`` placements) ``Σ g²``
    is summed over each rank's block and all-reduced once per step over the shard groups
    (:func:`gaugekit.optim.distributed.param_sums`, no host sync), so every rank applies the
    one-process update (to round-off) and holds the same ``exp_avg_sq_mean``; replicated
    parameters (DDP, ``Replicate()``) already hold every entry and communicate nothing.
    ``batch_dims = 0`` with DTensor parameters.

    Args:
        params: tensors or param-group dicts; all parameters share ``param.shape[:batch_dims]``.
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to the shared root (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
        nonfinite: ``"skip"``, ``"raise"``, ``"propagate"`` or ``None`` (``"skip"`` for one run,
            ``"propagate"`` for stacked runs): what a non-finite gradient does.
        foreach: the two passes of the moment and the parameter as ``torch._foreach_*`` calls
            (``None``: when every parameter is on a GPU, as torch.optim); the same numbers.
        fused: the moment and the parameter in one pass. ``None`` (the default) or ``True``:
            for one run (``batch_dims = 0``) with float hyperparameters and plain float32 or
            float64 tensors on a CPU or CUDA device, torch's fused momentum-SGD kernel (the
            kernel of ``torch.optim.SGD(fused=True)``, momentum and dampening ``β₁``, the rate
            ``lr/((1 − β₁ᵗ) s)``): the step time of ``torch.optim.Adam(fused=True)``
            (``bench/bench_optimizer_step.py``). Elsewhere ``None`` keeps two passes and
            ``True`` compiles them into one (``torch.compile``; the first step compiles,
            seconds). ``False``: always two passes (``lerp_``, ``addcmul_``). The same numbers
            to round-off.
    """

    couples_param_groups = True
    hyper_checks = {
        "lr": LR, "betas": betas_check(), "eps": EPS, "weight_decay": WEIGHT_DECAY,
        "maximize": bool_check, "nonfinite": NONFINITE, "foreach": _switch_check,
        "fused": _switch_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, weight_decay: Hyper = 0.0, *, maximize: bool = False,
        nonfinite: str | None = None, foreach: bool | None = None, fused: bool | None = None,
        batch_dims: int = 0, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "nonfinite": nonfinite, "foreach": foreach, "fused": fused,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_optimizer_wide(
            group, self.defaults, ("eps", "batch_dims", "nonfinite", "foreach", "fused"),
            "it defines the shared scalar"
        )
        check_common_batch_shape(self.param_groups, group)
        _check_fused(group)

    def _update_all(self, closure: Any = None) -> None:
        entries = [(group, p, g) for group in self.param_groups
                   for p, g in self._with_grad(group["params"])]
        _shared_scale_step_(self, entries, eps=self.defaults["eps"])


def _shared_scale_step_(
    opt: ZooOptimizer, entries: list[tuple[dict[str, Any], Tensor, Tensor]], *, eps: Hyper,
    lr_key: str = "lr", lr_ratio_key: str | None = None, sums: list[Tensor] | None = None,
    checked: bool = False,
) -> bool:
    """One shared-scale Adam step of ``entries`` ``(group, param, grad)`` of ``opt`` (all of them
    share the scalar), after the non-finite check (:meth:`ZooOptimizer._finite_or_skip`, on
    the sums of squares the scalar is made of). The learning rate of a parameter is
    ``group[lr_key]`` (times ``group[lr_ratio_key]``); ``sums``: the sums of squares of the
    gradients when the caller has them, ``checked``: the caller ran the check. State: ``step``,
    ``exp_avg``, ``exp_avg_sq_mean``. Returns whether the step was taken. Shared by
    :class:`SharedScaleAdam` and :class:`~gaugekit.optim.MuonAdam`."""
    if not entries:
        return True
    batch_dims = opt.defaults["batch_dims"]
    if sums is None:
        sums = FS.run_sums_of_squares([g for _, _, g in entries], batch_dims)
    if not checked and not opt._finite_or_skip(sums, [p for _, p, _ in entries]):
        return False
    params = [p for _, p, _ in entries]
    foreach = opt.defaults.get("foreach")
    if foreach is None:
        foreach = all(p.device.type == "cuda" for p in params)
    rows = []
    for group, p, g in entries:
        state = opt._state(p, "exp_avg", step=True)
        if "exp_avg_sq_mean" not in state:
            # a plain per-run tensor, also for a DTensor parameter (same on every rank)
            state["exp_avg_sq_mean"] = D.local(p).new_zeros(p.shape[:batch_dims])
        v_mean = state["exp_avg_sq_mean"]
        beta1, beta2 = group["betas"]
        lr = opt._hyper(group, lr_key, p)
        if lr_ratio_key is not None:
            lr = lr * opt._hyper(group, lr_ratio_key, p)
        rows.append((
            p, g, state["exp_avg"], v_mean, state["step"], lr,
            per_run(beta1, p, batch_dims), per_run(beta2, v_mean, batch_dims),
            opt._hyper(group, "weight_decay", p), group["maximize"],
        ))
    params, grads, exp_avgs, v_means, steps, lrs, beta1s, beta2s, decays, maximizes = (
        list(column) for column in zip(*rows, strict=True)
    )
    decays = [FS.decay_factor(lr, wd) for lr, wd in zip(lrs, decays, strict=True)]
    floats = not any(isinstance(h, Tensor) for h in (*lrs, *beta1s, *beta2s, *decays))
    kernel = floats and batch_dims == 0 and X.kernel_applies(params, grads, exp_avgs)
    executor = X.choose(opt.defaults.get("fused"), foreach, kernel)
    on_host = (executor is X.kernel_ and not isinstance(eps, Tensor)
               and all(p.device.type == "cpu" for p in params))
    scale = X.shared_scale_scalars_(
        v_means, sums, counts=[FS.param_count(g, batch_dims) for g in grads], beta2s=beta2s,
        steps=steps, eps=eps, on_host=on_host)
    coefficients = FS.shared_scale_coefficients(scale, params, lrs=lrs, beta1s=beta1s,
                                                steps=steps, batch_dims=batch_dims)
    executor(
        params, grads, exp_avgs, weights=[1 - b for b in beta1s], coefficients=coefficients,
        decays=decays, maximizes=maximizes)
    return True


def _blocks_check(name: str, value: Any) -> None:
    if value in ("tensor", "entry"):
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid(name, value, "an integer >= 1 (rows per block), 'tensor' or 'entry'")


class AdamMini(ZooOptimizer):
    r"""Adam-mini (Zhang et al., 2024): Adam with one second moment per block of entries.

    Example:
        >>> import torch
        >>> from gaugekit.optim import AdamMini
        >>> model = torch.nn.Linear(8, 4)
        >>> optimizer = AdamMini(model.parameters(), lr=1e-3)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()

    .. math::
        m_t = β_1 m_{t-1} + (1-β_1) g_t,\quad
        v_{b,t} = β_2 v_{b,t-1} + (1-β_2)\,\operatorname{mean}_{i∈b} g_{i,t}^2,\\
        θ_{i,t} = θ_{i,t-1}(1 − \mathrm{lr}\,λ) − \mathrm{lr}\,\hat m_{i,t} /
        (\sqrt{\hat v_{b(i),t}} + ε)

    with bias correction on both moments and decoupled weight decay λ (as Adam-mini's AdamW
    base; ``maximize`` uses ``−g_t``). The partition is the param-group key ``blocks``:

    * an integer ``k`` (default 1): consecutive blocks of ``k`` rows (the first dimension after
      the batch dims), each with all its columns. ``k = 1`` is one block per output neuron of a
      linear layer; ``k = d_h`` on ``W_Q`` or ``W_K`` (rows ``h·d_h … (h+1)·d_h − 1`` are head
      ``h``) is Adam-mini's one block per head;
    * ``"tensor"``: one block for the whole parameter (one learning rate per tensor);
    * ``"entry"``: every entry its own block, which is AdamW (:class:`Adam` with
      ``decoupled_weight_decay=True``; Adam-mini keeps it for
      embeddings and the output layer).

    State: ``step``, ``exp_avg`` (full) and ``exp_avg_sq_block`` (one value per block and run),
    so about half of Adam's memory when the blocks are large.

    Deviations: Adam-mini's reference implementation (``adam_mini`` package) finds its blocks
    from parameter names; here they are given per group. No AMSGrad.

    Gauge: equivariant for the factor gauge with whole-row blocks (integer ``k`` or
    ``"tensor"``): ``G → G Q`` rotates each row and keeps its norm, so every block's
    ``mean g²`` is invariant and the update is ``m̂`` times invariant scalars per row. For the
    attention head gauge ``W_{Q,h} → A_h W_{Q,h}`` a block must hold a whole head (``k`` a
    multiple of ``d_h``, aligned): row blocks inside a head (``k = 1``) are not invariant.
    ``"entry"`` is Adam and not equivariant.

    Args:
        params: tensors or param-group dicts (each group may set its own ``blocks``).
        lr: learning rate ``>= 0`` (per run).
        betas: ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: ``ε >= 0`` added to ``√v̂`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` (per run).
        blocks: rows per block (an integer ``>= 1`` dividing the rows), ``"tensor"`` or
            ``"entry"``.
        foreach: the moment and parameter passes of a group as ``torch._foreach_*`` calls
            (``None``: when every parameter is on a GPU, as torch.optim); the same numbers.
        fused: those passes compiled into one (``torch.compile``; the first step compiles).
    """

    rule_keys = ("blocks",)
    hyper_checks = {
        "lr": LR, "betas": betas_check(), "eps": EPS, "weight_decay": WEIGHT_DECAY,
        "blocks": _blocks_check, "maximize": bool_check, "foreach": _switch_check,
        "fused": _switch_check,
    }

    def __init__(
        self, params: Any, lr: Hyper = 1e-3, betas: tuple[Hyper, Hyper] = (0.9, 0.999),
        eps: Hyper = 1e-8, weight_decay: Hyper = 0.0, *, blocks: int | str = 1,
        maximize: bool = False, foreach: bool | None = None, fused: bool | None = None,
        batch_dims: int = 0, nonfinite: str | None = None, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
            "blocks": blocks, "maximize": maximize,
            "nonfinite": nonfinite, "foreach": foreach, "fused": fused,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    def _check_group(self, group: dict[str, Any]) -> None:
        _check_fused(group)
        blocks, batch_dims = group["blocks"], group["batch_dims"]
        if isinstance(blocks, str):
            return
        for p in group["params"]:  # a 0-d parameter (after the batch dims) is one block
            if p.ndim > batch_dims and p.shape[batch_dims] % blocks:
                raise invalid(
                    "blocks", blocks, "a divisor of the rows of every parameter of its group "
                    f"(got a parameter of shape {tuple(p.shape)} with batch_dims={batch_dims})"
                )

    def _update_all(self, closure: Any = None) -> None:
        """The block statistics of every group first, the non-finite check on them (no extra
        pass over the gradients), then each group's update."""
        groups = [(group, list(self._with_grad(group["params"]))) for group in self.param_groups]
        means = [[FS.block_mean_sq(g, group["blocks"], group["batch_dims"]) for _, g in pairs]
                 for group, pairs in groups]
        if not self._finite_or_skip([m for ms in means for m in ms],
                                    [p for _, pairs in groups for p, _ in pairs]):
            return
        for (group, pairs), block_means in zip(groups, means, strict=True):
            if pairs:
                self._step_group(group, pairs, block_means)

    def _step_group(self, group: dict[str, Any], pairs: list[tuple[Tensor, Tensor]],
                    block_means: list[Tensor]) -> None:
        """The statistic and coefficient of each parameter (one per block), then the moment
        pass of the group (:mod:`gaugekit.optim.execution`)."""
        blocks, batch_dims = group["blocks"], group["batch_dims"]
        beta1, beta2 = group["betas"]
        rows = []
        for (p, g), mean in zip(pairs, block_means, strict=True):
            state = self._state(p, "exp_avg", step=True)
            if "exp_avg_sq_block" not in state:
                state["exp_avg_sq_block"] = torch.zeros_like(mean)
            v = state["exp_avg_sq_block"]
            lr, b1, eps = (self._hyper(group, key, p) for key in ("lr", "betas", "eps"))
            b1 = b1[0]
            if not isinstance(blocks, str):  # hyperparameters against the blocks
                lr, b1, eps = (FS.block_view(h, batch_dims) for h in (lr, b1, eps))
            coefficient = FS.adam_mini_coefficient_(
                v, mean, step=state["step"], lr=lr, beta1=b1,
                beta2=per_run(beta2, v, batch_dims), eps=eps)
            decay = FS.decay_factor(self._hyper(group, "lr", p),
                                    self._hyper(group, "weight_decay", p))
            weight = 1 - per_run(beta1, p, batch_dims)
            row = FS.adam_mini_rows(p, g, state["exp_avg"], coefficient, blocks=blocks,
                                    batch_dims=batch_dims)
            if row[0] is not p:  # views of the blocks: per-run scalars against them
                weight, decay = (FS.block_view(h, batch_dims) for h in (weight, decay))
                weight, decay = (h.unsqueeze(-1) if isinstance(h, Tensor) and h.ndim else h
                                 for h in (weight, decay))
            rows.append((*row, weight, decay))
        params, grads, exp_avgs, coefficients, weights, decays = (
            list(column) for column in zip(*rows, strict=True))
        foreach = group["foreach"]
        if foreach is None:
            foreach = all(p.device.type == "cuda" for p in params)
        X.choose(group["fused"], foreach, kernel=False)(
            params, grads, exp_avgs, weights=weights, coefficients=coefficients, decays=decays,
            maximizes=[group["maximize"]] * len(params))
