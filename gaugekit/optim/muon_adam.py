"""MuonAdam: Muon on the hidden matrices and Adam on the rest, in one optimizer."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gaugekit.linalg import NS_COEFFICIENTS
from gaugekit.optim import functional as F
from gaugekit.optim import functional_shared as FS
from gaugekit.optim._validation import (
    DECAY,
    EPS,
    LR,
    WEIGHT_DECAY,
    Hyper,
    betas_check,
    bool_check,
    check_common_batch_shape,
    check_optimizer_wide,
    choice_check,
    coefficients_check,
    int_check,
    invalid,
    real_check,
)
from gaugekit.optim.adam import _shared_scale_step_
from gaugekit.optim.base import NONFINITE, ZooOptimizer
from gaugekit.optim.muon import (
    _check_split_rows,
    _muon_group_step_,
    _ns_dtype_check,
    _split_rows_check,
)
from gaugekit.optim.orthogonalize import RowBlocks

#: The Adam rules of the non-Muon parameters, coordinate-wise AdamW or shared-scale Adam.
ADAM_KINDS: tuple[str, ...] = ("adamw", "shared_scale")


def _use_muon_check(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise invalid(name, value, "True (Muon), False (Adam) or None (by shape)")


class MuonAdam(ZooOptimizer):
    r"""Muon on the hidden matrices and Adam on the rest, one optimizer (``MuonWithAuxAdam``).

    Example:
        >>> import torch
        >>> from gaugekit.optim import MuonAdam, muon_param_groups
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 32),
        ...                             torch.nn.Linear(32, 4))
        >>> optimizer = MuonAdam(muon_param_groups(model, head=model[1]))
        >>> scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 100)
        >>> model(torch.randn(16, 8)).square().mean().backward()
        >>> optimizer.step()
        >>> scheduler.step()

    One optimizer, one ``state_dict``, one learning-rate schedule for both rules, as Keller
    Jordan's ``MuonWithAuxAdam``. Each param group says which rule it takes with ``use_muon``:
    ``True`` (Muon; matrices, or convolution kernels viewed as ``out × in·kh·kw``), ``False``
    (Adam), ``None`` (the default: by shape, matrices and kernels to Muon, the rest to Adam —
    which cannot tell an embedding or the output head from a hidden matrix;
    :func:`gaugekit.optim.muon_param_groups` routes by module). Muon's parameters
    (:class:`~gaugekit.optim.Muon`, decoupled decay λ):

    .. math::
        M_t = μ M_{t-1} + G_t,

        θ_t = θ_{t-1}(1 − η λ) − η\,ρ\,\mathrm{NS}_5(G_t + μ M_t\ \text{(Nesterov) or}\ M_t)

    Adam's parameters, at the rate ``η_A = η · adam_lr_ratio``: AdamW
    (``adam="adamw"``, the default; :func:`gaugekit.optim.functional.adam_` with decoupled decay,
    bias correction on both moments, ``ε`` outside the root) or shared-scale Adam
    (``adam="shared_scale"``, :class:`~gaugekit.optim.SharedScaleAdam`: one ``s_t`` over all
    Adam parameters of all groups, which keeps the gauge).

    Learning rates and schedules: a group's ``lr`` is Muon's ``η``; its Adam parameters step at
    ``lr · adam_lr_ratio``. Any ``torch.optim.lr_scheduler`` writes ``group["lr"]``, so one
    scheduler moves both rates and keeps their ratio (``CosineAnnealingLR``, ``OneCycleLR``,
    ``LambdaLR``...). A group may set its own ``lr`` and ``adam_lr_ratio``.

    Defaults, chosen to match Keller Jordan's ``MuonWithAuxAdam`` (``lr`` 0.02, momentum 0.95,
    Nesterov, shape factor ``√max(1, n/k)``, Adam ``lr`` 3e-4, betas (0.9, 0.95), ε 1e-10, no
    decay), the setting Muon's users tune from:

    ==================  ==============  ================  =====================  ===========
    argument            MuonAdam        Keller Jordan     torch.optim.Muon 2.13  gaugekit Muon
    ==================  ==============  ================  =====================  ===========
    ``lr``              0.02            0.02              1e-3                   0.01
    ``momentum``        0.95            0.95              0.95                   0.9
    ``nesterov``        True            True              True                   False
    ``weight_decay``    0               0                 0.1                    0
    ``adjust_lr_fn``    ``"original"``  √max(1, n/k)      ``"original"``         ``None``
    NS precision        parameter's     bfloat16          bfloat16               parameter's
    NS ε                1e-7 (added)    1e-7 (added)      1e-7 (clamp)           1e-7 (added)
    buffer              ``μM + G``      ``μM + (1−μ)G``   ``μM + (1−μ)G``        ``μM + G``
    Adam ``lr``         0.02 · 0.015    3e-4              (separate AdamW)       —
    Adam betas, ε       (0.9, 0.95),    (0.9, 0.95),      —                      —
                        1e-10           1e-10
    ==================  ==============  ================  =====================  ===========

    The damped buffer ``μM + (1−μ)G`` is ``(1−μ)`` times ours (Nesterov look-ahead too), which
    Newton–Schulz's normalisation undoes up to ε: the same update. bfloat16 Newton–Schulz is
    ``ns_dtype=torch.bfloat16`` (faster; equivariant to bfloat16 round-off only, and the factor
    audit says so). The paper's Muon (:class:`~gaugekit.optim.Muon`) is ``lr=0.01,
    momentum=0.9, nesterov=False, adjust_lr_fn=None``. One more deviation from Keller Jordan's
    code: for a convolution kernel ``ρ`` is taken on the flattened matrix ``out × in·kh·kw``
    (his takes the kernel's last two dimensions, ``kh/kw``).

    State: ``momentum_buffer`` (Muon parameters); ``step``, ``exp_avg``, ``exp_avg_sq`` (AdamW)
    or ``step``, ``exp_avg``, ``exp_avg_sq_mean`` (shared scale). ``state_dict`` holds both.

    Non-finite gradients (:mod:`gaugekit.optim.nonfinite`): one check of both sides before
    either steps, whatever ``adam`` is (a NaN reaches Muon's whole matrix through its
    normalisation, and with ``"shared_scale"`` every Adam parameter through ``s_t``): by
    default the whole step is skipped with a ``RuntimeWarning`` naming the parameters;
    ``"raise"`` raises; ``"propagate"`` checks nothing (torch.optim's behaviour).

    Gauge: equivariant with ``adam="shared_scale"`` (Muon's ``NS(MQ) = NS(M)Q``, the shared
    scale a gauge-invariant scalar, the decay a scalar multiple); with ``"adamw"`` as soon as a
    gauge-rotated parameter (a query or key bias, a factor) is on the Adam side, not.

    Args:
        params: tensors or param-group dicts (``use_muon``, ``split_rows`` and any argument
            below but ``adam``, ``nonfinite``, ``batch_dims`` may differ by group).
        lr: Muon's learning rate ``>= 0``; Adam's is ``lr · adam_lr_ratio`` (per run).
        momentum: Muon's ``μ`` in ``[0, 1)`` (per run).
        weight_decay: decoupled weight decay ``λ >= 0`` of both rules (per run).
        nesterov: Muon orthogonalizes the Nesterov look-ahead ``G + μ M``.
        ns_steps: Newton–Schulz steps ``>= 0``.
        ns_coefficients: quintic coefficients ``(a, b, c)``.
        ns_eps: ``ε >= 0`` added to the Frobenius norm before Newton–Schulz.
        adjust_lr_fn: Muon's shape factor ``ρ``: ``"original"`` (``√max(1, n/k)``),
            ``"match_rms_adamw"`` (``0.2 √max(n, k)``) or ``None`` (1).
        ns_dtype: dtype of the Newton–Schulz iteration; ``None``: the parameter's.
        split_rows: row blocks per Muon matrix, each orthogonalized alone (3 for a fused
            ``in_proj_weight``; block sizes or row-index blocks, per head:
            :func:`gaugekit.optim.muon_param_groups` with ``split_qkv``).
        transposed: Muon's matrices of the group are stored ``(in, out)`` (transformers'
            ``Conv1D``; :func:`gaugekit.optim.muon_param_groups` sets it).
        use_muon: the rule of a group without its own ``use_muon`` (``None``: by shape).
        adam: ``"adamw"`` or ``"shared_scale"``, the rule of the Adam parameters.
        adam_lr_ratio: Adam's learning rate over Muon's, ``>= 0`` (per run).
        betas: Adam's ``(β₁, β₂)``, each in ``[0, 1)`` (per run).
        eps: Adam's ``ε >= 0`` (per run; optimizer-wide with ``"shared_scale"``).
        nonfinite: ``"skip"``, ``"raise"``, ``"propagate"`` or ``None`` (``"skip"`` for one
            run, ``"propagate"`` for stacked runs; see above).
    """

    rule_keys = ("adam", "ns_dtype", "use_muon")
    later_keys = {"split_rows": 1, "ns_dtype": None, "transposed": False}
    hyper_checks = {
        "lr": LR, "momentum": DECAY, "weight_decay": WEIGHT_DECAY, "nesterov": bool_check,
        "ns_steps": int_check(0), "ns_coefficients": coefficients_check,
        "ns_eps": real_check(0.0, per_run=False),
        "adjust_lr_fn": choice_check(None, "original", "match_rms_adamw"),
        "ns_dtype": _ns_dtype_check, "split_rows": _split_rows_check,
        "transposed": bool_check, "use_muon": _use_muon_check,
        "adam": choice_check(*ADAM_KINDS), "adam_lr_ratio": real_check(0.0),
        "betas": betas_check(), "eps": EPS, "maximize": bool_check, "nonfinite": NONFINITE,
    }

    def __init__(
        self, params: Any, lr: Hyper = 0.02, momentum: Hyper = 0.95, *,
        weight_decay: Hyper = 0.0, nesterov: bool = True, ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS, ns_eps: float = 1e-7,
        adjust_lr_fn: str | None = "original", ns_dtype: torch.dtype | None = None,
        split_rows: RowBlocks = 1, transposed: bool = False, use_muon: bool | None = None,
        adam: str = "adamw",
        adam_lr_ratio: Hyper = 0.015, betas: tuple[Hyper, Hyper] = (0.9, 0.95),
        eps: Hyper = 1e-10, maximize: bool = False, nonfinite: str | None = None,
        batch_dims: int = 0, **torch_options: Any,
    ) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov,
            "ns_steps": ns_steps, "ns_coefficients": ns_coefficients, "ns_eps": ns_eps,
            "adjust_lr_fn": adjust_lr_fn, "ns_dtype": ns_dtype, "split_rows": split_rows,
            "transposed": transposed,
            "use_muon": use_muon, "adam": adam, "adam_lr_ratio": adam_lr_ratio, "betas": betas,
            "eps": eps, "maximize": maximize, "nonfinite": nonfinite,
        }
        super().__init__(params, defaults, batch_dims=batch_dims, torch_options=torch_options)

    @property
    def couples_param_groups(self) -> bool:  # type: ignore[override]
        """``True`` when the groups share a statistic (the shared scale of
        ``adam="shared_scale"``)."""
        return self.defaults["adam"] == "shared_scale"

    @staticmethod
    def _is_muon(group: dict[str, Any], p: Tensor) -> bool:
        use = group["use_muon"]
        return p.ndim >= group["batch_dims"] + 2 if use is None else use

    def _check_group(self, group: dict[str, Any]) -> None:
        wide = ("adam", "batch_dims", "nonfinite")
        if self.defaults["adam"] == "shared_scale":
            wide = (*wide, "eps")
            check_common_batch_shape(self.param_groups, group)
        check_optimizer_wide(group, self.defaults, wide, "it cannot differ by group")
        muon = [p for p in group["params"] if self._is_muon(group, p)]
        for p in muon:
            if p.ndim < group["batch_dims"] + 2:
                raise invalid(
                    "params", f"tensor of shape {tuple(p.shape)} in a group with use_muon=True",
                    f"matrices or kernels (at least batch_dims + 2 = {group['batch_dims'] + 2} "
                    "dims) in Muon's groups: put 1-D parameters in a use_muon=False group "
                    "(gaugekit.optim.muon_param_groups(model) routes a model)",
                )
        _check_split_rows(group, muon)

    def _update_all(self, closure: Any = None) -> None:
        muon_groups, adam_entries = [], []
        for group in self.param_groups:
            params, grads = [], []
            for p, g in self._with_grad(group["params"]):
                if self._is_muon(group, p):
                    params.append(p)
                    grads.append(g)
                else:
                    adam_entries.append((group, p, g))
            muon_groups.append((group, params, grads))
        # one non-finite check of both sides before anything changes (the Adam side's sums of
        # squares are shared-scale Adam's statistic: computed once)
        muon_pairs = [(p, g) for _, params, grads in muon_groups
                      for p, g in zip(params, grads, strict=True)]
        adam_sums = None
        if self._nonfinite_policy() != "propagate" or self.defaults["adam"] == "shared_scale":
            adam_sums = FS.run_sums_of_squares([g for *_, g in adam_entries],
                                              self.defaults["batch_dims"])
        if self._nonfinite_policy() != "propagate":
            muon_sums = FS.run_sums_of_squares([g for _, g in muon_pairs], 0)
            if not self._finite_or_skip(
                    [*muon_sums, *adam_sums], [*(p for p, _ in muon_pairs),
                                               *(p for _, p, _ in adam_entries)]):
                return
        if self.defaults["adam"] == "shared_scale":
            _shared_scale_step_(self, adam_entries, eps=self.defaults["eps"],
                                lr_ratio_key="adam_lr_ratio", sums=adam_sums, checked=True)
        else:
            self._adamw_step(adam_entries)
        for group, params, grads in muon_groups:
            _muon_group_step_(self, group, params, grads, eps_key="ns_eps")

    def _adamw_step(self, entries: list[tuple[dict[str, Any], Tensor, Tensor]]) -> None:
        for group, p, g in entries:
            state = self._state(p, "exp_avg", "exp_avg_sq", step=True)
            beta1, beta2 = self._hyper(group, "betas", p)
            F.adam_(
                p, g, state["exp_avg"], state["exp_avg_sq"], step=state["step"],
                lr=self._hyper(group, "lr", p) * self._hyper(group, "adam_lr_ratio", p),
                beta1=beta1, beta2=beta2, eps=self._hyper(group, "eps", p),
                weight_decay=self._hyper(group, "weight_decay", p), decoupled=True,
                maximize=group["maximize"],
            )
