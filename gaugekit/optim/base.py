"""The base class of the zoo: validation, stacked runs (``batch_dims``), closure, per-run values.

Every optimizer of :mod:`gaugekit.optim` derives from :class:`ZooOptimizer`. A subclass declares

* ``hyper_checks``: hyperparameter name → check (see :mod:`gaugekit.optim._validation`), run on
  the defaults at construction (before any parameter is touched) and on every param group;
* ``matrix_only``: whether each parameter must be a matrix after its batch dimensions;
* ``couples_param_groups``: whether a quantity is shared by all groups (the shared scalar);
* ``_update_group(group)``: the update of one param group, written through a functional core.

Stacked runs. With ``batch_dims = b`` the first ``b`` dimensions of every parameter index
independent runs. A per-run hyperparameter may be a tensor of shape ``param.shape[:b]``;
:func:`per_run` reshapes it to broadcast against a tensor whose first ``b`` dimensions are the
runs. Every reduction inside an update rule is taken over the non-batch dimensions only.

torch.optim arguments a rule does not implement (``amsgrad``, ``foreach``, ``dampening``, …;
``TORCH_OPTIM_OFF`` of the validation) raise ``ValueError`` naming the argument
and the optimizer, in the constructor and in a param group, unless their value asks for nothing
(``foreach=None``, ``amsgrad=False``, …). Any other key of a param group passes through, as in
torch.optim (``initial_lr`` of the LR schedulers, ``name``); an unknown constructor keyword is a
``TypeError``. SharedScaleAdam and AdamMini implement ``foreach`` (``torch._foreach_*`` passes;
``None``: on when every parameter is on a GPU, as torch.optim) and ``fused`` (the moment and the
parameter in one pass: torch's fused momentum-SGD kernel where SharedScaleAdam can use it, by
default, else the step compiled by ``torch.compile``); every other rule refuses
``foreach=True`` and ``fused=True``.

Checkpoints (:mod:`gaugekit.optim.checkpoints`): every param group carries the class that
wrote it, and ``load_state_dict`` refuses, before touching anything, a state of another class
or of another configuration of the rule (``rule_keys``), naming both; a key the checkpoint
lacks gets what its absence meant (``later_keys``).

Weight decay: ``weight_decay`` (``λ >= 0``, default 0, per group, per run) on every rule, saved
in ``state_dict``. Where torch has the rule it keeps torch's meaning: coupled L2
``g ← g + λθ`` in GD, Momentum (torch SGD), RMSprop and Adam (torch Adam); decoupled
``θ ← θ(1 − lr λ)`` before the update in ``Adam(decoupled_weight_decay=True)`` (torch AdamW).
Every other rule (SharedScaleAdam, Lion, Signum, Adafactor, Muon, Shampoo, ScaledGD,
GramPreconditioned, EigenAdam, FlowAdam) decays decoupled. Gauge: decoupled decay multiplies the
factors by a scalar and coupled L2 is the gradient of the invariant ``λ/2 (‖U‖² + ‖V‖²)``, so
every equivariant rule stays equivariant with ``λ > 0`` (the audit's tests check the zoo).
``maximize=True`` (every rule) steps along ``+g``; ``.grad`` is never written.

Per-run hyperparameters (float or tensor of shape ``param.shape[:batch_dims]``): ``lr`` of every
rule; ``weight_decay`` of every rule; ``momentum`` (Momentum, Signum, Muon), ``betas`` (Adam,
SharedScaleAdam, Lion, EigenAdam, FlowAdam), ``alpha``
(RMSprop), ``beta2`` (Adafactor), ``eps`` (Adam, SharedScaleAdam, RMSprop, Adafactor). Matrix
shape hyperparameters (Shampoo's ``damping``, Muon's ``eps``, …) are floats.

Where the paper differs from torch, the paper wins by default and torch's convention is an
option when cheap: Momentum's ``nesterov``; Muon's ``nesterov`` and ``adjust_lr_fn``
(torch.optim.Muon also damps its buffer by ``1 − μ``, clamps the norm ``max(‖M‖, ε)`` instead of
adding ε, runs NS in bfloat16 and defaults to ``weight_decay=0.1``). Adam, AdamW (``Adam(...,
decoupled_weight_decay=True)``), RMSprop and SGD (GD, Momentum) coincide with torch's, weight
decay and ``maximize`` included. ScaledGD's ``sequential=True`` reproduces the script's order
(``V``'s Gram from the updated ``U``).

Non-finite gradients (:mod:`gaugekit.optim.nonfinite`): every rule takes ``nonfinite``,
``"skip"`` (the step changes nothing and warns, naming the parameters), ``"raise"`` or
``"propagate"`` (torch.optim's behaviour); ``None`` is ``"skip"`` for one run except for the
per-coordinate rules (``nonfinite_default = "propagate"``), and ``"propagate"`` for stacked runs.

Distributed training (:mod:`gaugekit.optim.distributed`): DDP needs nothing (every rank holds
whole parameters and averaged gradients). With DTensor parameters (FSDP2 ``fully_shard``) every
reduction over parameters (SharedScaleAdam's and FlowAdam's scalars, FlowAdam's norms and clip)
sums each rank's block and all-reduces once per step, without a host sync; the matrix rules
(Muon, Shampoo, Gram, ScaledGD) gather the matrix they need; elementwise rules communicate
nothing. The update equals the one-process update to round-off. DTensor parameters need
``batch_dims = 0``.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.optim import Optimizer

from gaugekit.optim import distributed as D
from gaugekit.optim import functional_shared as FS
from gaugekit.optim._validation import (
    BATCH_DIMS,
    TORCH_OPTIM_OFF,
    Check,
    Hyper,
    check_optimizer_wide,
    check_torch_option,
    invalid,
)
from gaugekit.optim.checkpoints import (
    OPTIMIZER_KEY,
    checked_state_dict,
    fill_later_keys,
)
from gaugekit.optim.nonfinite import NONFINITE, finite_or_skip

#: the dtypes ``torch.linalg.eigh`` computes in (no float16 or bfloat16 kernel, CPU or CUDA)
EIGH_DTYPES = (torch.float32, torch.float64)



def per_run(value: Hyper, like: Tensor, batch_dims: int) -> Hyper:
    """Broadcast a hyperparameter against ``like`` whose first ``batch_dims`` dims are runs.

    A Python number is returned unchanged. A tensor of shape ``like.shape[:batch_dims]`` is moved
    to ``like``'s device and dtype and viewed as ``batch_shape + (1,) * (like.ndim - batch_dims)``;
    a one-element tensor of any other shape (``()``, ``(1,)``, ``(1, 1)``, as torch.optim takes
    a tensor ``lr``) is one value for every run: moved and viewed as a 0-d tensor.
    """
    if not isinstance(value, Tensor):
        return value
    value = value.to(device=like.device, dtype=like.dtype)
    if value.numel() == 1 and tuple(value.shape) != tuple(like.shape[:batch_dims]):
        return value.reshape(())  # one value for every run, of any one-element shape
    if value.ndim == 0:
        return value
    return value.reshape(tuple(value.shape) + (1,) * (like.ndim - batch_dims))


def _tensor_entries(name: str, value: Any) -> Iterator[tuple[str, Tensor]]:
    if isinstance(value, Tensor):
        yield name, value
    elif isinstance(value, (tuple, list)):
        for i, entry in enumerate(value):
            if isinstance(entry, Tensor):
                yield f"{name}[{i}]", entry


#: The arguments every rule shares, described once: a subclass's docstring lists its own
#: arguments and :meth:`ZooOptimizer.__init_subclass__` appends these to its ``Args:``.
SHARED_ARGS: dict[str, str] = {
    "maximize": "maximize the objective (step along ``+g``).",
    "nonfinite": "what a non-finite gradient does: ``\"skip\"`` the step (with a warning "
                 "naming the parameters), ``\"raise\"``, ``\"propagate\"`` (torch.optim's "
                 "behaviour), or ``None``: the rule's default (module ``gaugekit.optim.base``).",
    "batch_dims": "leading dimensions of every parameter that index independent runs (stacked "
                  "runs; the module ``gaugekit.optim.base``).",
}


class ZooOptimizer(Optimizer):
    """Base of the zoo's optimizers (see the module docstring)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Append the :data:`SHARED_ARGS` the subclass takes and does not describe itself to
        the ``Args:`` section that ends its docstring."""
        super().__init_subclass__(**kwargs)
        doc = cls.__dict__.get("__doc__") or ""
        if "\n    Args:\n" not in doc:
            return
        takes = inspect.signature(cls.__init__).parameters
        lines = [f"        {name}: {text}" for name, text in SHARED_ARGS.items()
                 if name in takes and f"\n        {name}:" not in doc]
        if lines:
            cls.__doc__ = doc.rstrip() + "\n" + "\n".join(lines) + "\n    "

    matrix_only: ClassVar[bool] = False
    #: the hyperparameters that change the rule, its update or its state's layout; a
    #: checkpoint written with another value of one of them is refused at load
    rule_keys: ClassVar[tuple[str, ...]] = ()
    #: hyperparameters added after the first release of a rule, with the value that a checkpoint
    #: without them stands for, besides every rule's
    #: :data:`~gaugekit.optim.checkpoints.LATER_KEYS`
    later_keys: ClassVar[dict[str, Any]] = {}
    #: True when some statistic of the step spans all parameters (FlowAdam's norms and clip),
    #: whether or not the groups couple from the first step
    pools_all_params: ClassVar[bool] = False
    #: True when each group is one pair of factors stepped together (ScaledGD)
    pairs_params: ClassVar[bool] = False
    #: True when one quantity is reduced over all groups (then groups are not separable); a
    #: subclass whose coupling depends on its settings may override it with a property.
    couples_param_groups: ClassVar[bool] = False
    hyper_checks: ClassVar[dict[str, Check]] = {}
    #: ``"coupled"`` (``g ← g + λθ``, torch's SGD, RMSprop, Adam) or ``"decoupled"``
    #: (``θ ← θ − lr λ θ``): what ``weight_decay`` means, and so which value of torch's
    #: ``decoupled_weight_decay`` a rule without that option accepts.
    weight_decay_kind: ClassVar[str] = "decoupled"
    #: what ``nonfinite=None`` means with one run, ``batch_dims = 0``; ``"skip"`` for a rule whose
    #: statistic spans several entries, through which a NaN would spread, ``"propagate"``,
    #: torch's behaviour, for a rule whose statistics are per coordinate. Stacked runs propagate.
    nonfinite_default: ClassVar[str] = "skip"

    def __init__(
        self, params: Any, defaults: dict[str, Any], *, batch_dims: int = 0,
        torch_options: Mapping[str, Any] | None = None,
    ) -> None:
        defaults = {**defaults, "batch_dims": batch_dims}
        for key, value in (torch_options or {}).items():
            if key not in TORCH_OPTIM_OFF:
                raise TypeError(
                    f"{type(self).__name__}.__init__() got an unexpected keyword argument {key!r}"
                )
            self._check_torch_option(key, value)
        self._check_hypers(defaults)
        super().__init__(params, defaults)

    @classmethod
    def display_name(cls) -> str:
        """``gaugekit.optim.<Class>`` for the zoo's classes, ``module.Class`` for others."""
        if cls.__module__.startswith(__package__):
            return f"gaugekit.optim.{cls.__qualname__}"
        return f"{cls.__module__}.{cls.__qualname__}"

    def _check_torch_option(self, key: str, value: Any) -> None:
        accepted = None
        if key == "decoupled_weight_decay":
            accepted = (self.weight_decay_kind == "decoupled",)
        check_torch_option(self.display_name(), key, value, accepted)

    # ----------------------------------------------------------------------------- validation
    def _check_hypers(self, group: dict[str, Any]) -> None:
        BATCH_DIMS("batch_dims", group["batch_dims"])
        if "nonfinite" in group:
            NONFINITE("nonfinite", group["nonfinite"])
        for name, check in self.hyper_checks.items():
            check(name, group[name])
            if group["batch_dims"] == 0:  # one run: a tensor is one value (before any param)
                for label, tensor in _tensor_entries(name, group[name]):
                    if tensor.numel() != 1:
                        raise invalid(label, f"tensor of shape {tuple(tensor.shape)}",
                                      "a float or a one-element tensor with batch_dims=0 "
                                      f"(torch.optim: Tensor {name} must be 1-element)")

    def _check_params(self, params: list[Tensor], group: dict[str, Any]) -> None:
        batch_dims = group["batch_dims"]
        name = type(self).__name__
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p)}")
            if not p.is_floating_point():
                raise invalid("params", f"tensor of dtype {p.dtype}", "real floating tensors")
            D.check_distributed_param(p, batch_dims)
            if p.ndim < batch_dims:
                raise invalid(
                    "params",
                    f"tensor of shape {tuple(p.shape)}",
                    f"at least batch_dims={batch_dims} dimensions",
                )
            if self.matrix_only and p.ndim != batch_dims + 2:
                raise invalid(
                    "params",
                    f"tensor of shape {tuple(p.shape)}",
                    f"a matrix after batch_dims={batch_dims} leading dims "
                    f"({batch_dims + 2} dims in all): {name} updates matrices only. Route "
                    "the other parameters to an elementwise rule, e.g. "
                    "`matrices, others = gaugekit.optim.split_matrix_params(model)`, then "
                    f"{name}(matrices, ...) and Adam(others, ...); for Muon, one optimizer: "
                    "MuonAdam(gaugekit.optim.muon_param_groups(model))",
                )
            for hyper in self.hyper_checks:
                for label, tensor in _tensor_entries(hyper, group[hyper]):
                    if tensor.numel() != 1 and tuple(tensor.shape) != tuple(p.shape[:batch_dims]):
                        raise invalid(
                            label,
                            f"tensor of shape {tuple(tensor.shape)}",
                            f"a float, a one-element tensor (of any shape, as torch.optim) or "
                            f"a tensor of shape {tuple(p.shape[:batch_dims])} "
                            f"(param.shape[:batch_dims], one value per stacked run)",
                        )
        self._check_devices(params, group)

    def _check_devices(self, params: list[Tensor], group: dict[str, Any]) -> None:
        """Refuse parameters on several devices where the rule reduces one statistic over them
        (the groups of a rule that couples its groups; each group of ScaledGD, one pair)."""
        if self.couples_param_groups or self.pools_all_params:
            others = [q for g in self.param_groups for q in g["params"]]
            scope = "all parameters of all groups"
        elif self.pairs_params:
            others, scope = [], "the two factors of a pair"
        else:
            return
        devices = sorted({str(q.device) for q in [*others, *params]})
        if len(devices) > 1:
            raise invalid(
                "params", f"parameters on the devices {devices}",
                f"one device for {scope}: {type(self).__name__} reduces one statistic over them",
            )

    def _check_group(self, group: dict[str, Any]) -> None:
        """Extra checks of a subclass on a complete group (defaults filled in)."""

    def _check_eigh_dtypes(self, group: dict[str, Any], needs: str) -> None:
        """Refuse a parameter whose dtype ``torch.linalg.eigh`` cannot compute in (float16,
        bfloat16: no kernel on the CPU or CUDA); ``needs`` says what of the rule calls it."""
        index = len(self.param_groups)
        for i, p in enumerate(group["params"]):
            if p.dtype not in EIGH_DTYPES:
                raise invalid(
                    "params",
                    f"param_groups[{index}]['params'][{i}] of shape {tuple(p.shape)} and dtype "
                    f"{p.dtype}",
                    f"torch.float32 or torch.float64 parameters: {type(self).__name__}'s "
                    f"{needs} needs torch.linalg.eigh, which has no float16 or bfloat16 kernel "
                    "(keep the parameters in float32; torch.autocast still runs the forward pass "
                    "in low precision)",
                )

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Validate the group (hyperparameters, parameter shapes) before adding it."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections")
        else:
            params = list(params)
        # torch also accepts named parameters, (name, tensor) pairs: validate the tensors
        tensors = [p[1] if isinstance(p, tuple) else p for p in params]
        for key, value in param_group.items():
            if key in TORCH_OPTIM_OFF and key not in self.defaults:
                self._check_torch_option(key, value)
        group = {**self.defaults, **param_group, "params": tensors}
        self._check_hypers(group)
        if "nonfinite" in self.defaults:
            check_optimizer_wide(group, self.defaults, ("nonfinite",),
                                 "one policy for the whole step")
        self._check_params(tensors, group)
        self._check_group(group)
        if any(t.is_meta for t in tensors):
            self._meta_params = True
        _torch_add_param_group(
            self, {**param_group, "params": params, OPTIMIZER_KEY: type(self).__name__}
        )

    # ---------------------------------------------------------------------------- checkpoints
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's loader, after refusing a state saved by another optimizer class (see the
        module docstring)."""
        super().load_state_dict(checked_state_dict(self, state_dict))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """torch's, then the :attr:`later_keys` an older pickled optimizer lacks."""
        super().__setstate__(state)
        fill_later_keys(self)

    # ----------------------------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One update of every parameter that has a gradient; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if getattr(self, "_meta_params", False):
            self._meta_params = False  # warned once
            warnings.warn(
                f"{type(self).__name__}: parameters on the meta device hold no values: the step "
                "computes nothing and the state it makes lives on the meta device. A model "
                "materialized afterwards (model.to_empty(device=...)) gets new parameters, which "
                "this optimizer does not hold: build the optimizer after materializing the "
                "model", RuntimeWarning, stacklevel=2)
        self._update_all(closure)
        return loss

    def _update_all(self, closure: Any = None) -> None:
        """Every group's update, after the non-finite check; ``closure`` is for a rule that
        re-evaluates the gradient."""
        if not self._gradients_finite():
            return
        for group in self.param_groups:
            self._update_group(group)

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------- non-finite gradients
    def _nonfinite_policy(self) -> str:
        """``"skip"``, ``"raise"`` or ``"propagate"``: ``defaults["nonfinite"]``, where ``None``
        resolves to the rule's :attr:`nonfinite_default` for one run, ``"propagate"`` for
        stacked runs (module docstring)."""
        policy = self.defaults.get("nonfinite")
        if policy is None:
            return self.nonfinite_default if self.defaults["batch_dims"] == 0 else "propagate"
        return policy

    def _gradients_finite(self, pairs: Sequence[tuple[Tensor, Tensor]] | None = None) -> bool:
        """:meth:`_finite_or_skip` on the sums of squares of the gradients of ``pairs``
        ``(param, grad)`` (default: every parameter with a gradient); computes nothing under
        ``"propagate"``."""
        if self._nonfinite_policy() == "propagate":
            return True
        if pairs is None:
            pairs = [pg for group in self.param_groups for pg in self._with_grad(group["params"])]
        sums = FS.run_sums_of_squares([g for _, g in pairs], 0)
        return self._finite_or_skip(sums, [p for p, _ in pairs])

    def _finite_or_skip(self, sums: Sequence[Tensor], params: Sequence[Tensor]) -> bool:
        """Whether the step may go on under the policy (:func:`~gaugekit.optim.nonfinite.
        finite_or_skip`): ``sums[i]`` is the statistic of ``params[i]``'s gradient."""
        return finite_or_skip(self, sums, params)

    def _param_label(self, p: Tensor) -> str:
        """``'name'`` (named parameters) or ``param_groups[i]['params'][j]``, with the shape."""
        for i, group in enumerate(self.param_groups):
            for j, q in enumerate(group["params"]):
                if q is p:
                    names = group.get("param_names")
                    where = repr(names[j]) if names else f"param_groups[{i}]['params'][{j}]"
                    return f"{where} (shape {tuple(p.shape)})"
        return f"a parameter of shape {tuple(p.shape)}"

    # -------------------------------------------------------------------------------- helpers
    @staticmethod
    def _with_grad(params: Iterable[Tensor]) -> Iterator[tuple[Tensor, Tensor]]:
        for p in params:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("gaugekit optimizers do not support sparse gradients")
            yield p, p.grad

    def _state(self, p: Tensor, *buffers: str, step: bool = False) -> dict[str, Any]:
        """``self.state[p]``, created with ``buffers`` of zeros like ``p`` (and, with ``step``,
        ``step = 0``); with ``step`` it then counts this update."""
        state = self.state[p]
        if not state:
            if step:
                state["step"] = 0
            for key in buffers:
                state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
        else:
            self._check_state_device(p, state)
        if step:
            state["step"] += 1
        return state

    def _check_state_device(self, p: Tensor, state: dict[str, Any]) -> None:
        """Refuse to step a parameter whose state lives on another device: a parameter moved
        after its state was made (``model.to_empty(device=...)`` after a step on the meta
        device, ``.to("cuda")`` after a CPU step), where torch's kernels would compute nothing
        (meta state) or fail. A state loaded by ``load_state_dict`` is on the parameter's device
        (torch moves it there)."""
        device = D.local(p).device
        for key, value in state.items():
            if not isinstance(value, Tensor) or key == "step":
                continue
            if value.device == device:
                return  # one tensor of the state tells (the state moves as a whole)
            raise RuntimeError(
                    f"{type(self).__name__}: the state {key!r} of {self._param_label(p)} is on "
                    f"{value.device} and the parameter on {device} (was the parameter moved "
                    "after a step, e.g. materialized from the meta device?). Build the "
                    "optimizer after moving the model, or move the state with "
                    "optimizer.load_state_dict(optimizer.state_dict())")

    @staticmethod
    def _hyper(group: dict[str, Any], name: str, like: Tensor) -> Any:
        """``group[name]`` broadcast per run against ``like`` (a tuple is mapped entrywise)."""
        value = group[name]
        batch_dims = group["batch_dims"]
        if isinstance(value, (tuple, list)):
            return tuple(per_run(v, like, batch_dims) for v in value)
        return per_run(value, like, batch_dims)


def _torch_add_param_group(optimizer: Optimizer, group: dict[str, Any]) -> None:
    """torch's ``Optimizer.add_param_group``. torch wraps it in ``torch._disable_dynamo``, whose
    first call imports ``torch._dynamo`` (about 1.5 s, once per process, paid by every sweep
    worker that builds an optimizer). While ``torch._dynamo`` is not loaded nothing is being
    compiled, so the function it wraps is called directly; once it is loaded, torch's wrapper."""
    add = Optimizer.add_param_group
    if "torch._dynamo" not in sys.modules:
        add = getattr(add, "__wrapped__", add)
    add(optimizer, group)
