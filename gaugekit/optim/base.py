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
:data:`~gaugekit.optim._validation.TORCH_OPTIM_OFF`) raise ``ValueError`` naming the argument
and the optimizer, in the constructor and in a param group, unless their value asks for nothing
(``foreach=None``, ``amsgrad=False``, …). Any other key of a param group passes through, as in
torch.optim (``initial_lr`` of the LR schedulers, ``name``); an unknown constructor keyword is a
``TypeError``.

Checkpoints. Every param group carries ``"gaugekit_optimizer": <class name>`` (it travels with
``state_dict()``, also through tools that keep only ``state`` and ``param_groups``), and
:meth:`ZooOptimizer.load_state_dict` refuses, before touching anything, a state saved by another
class (another zoo rule, or a torch.optim optimizer, named from its param-group keys). A
checkpoint saved before the marker existed loads when its groups hold ``batch_dims`` and this
class's hyperparameters and no other rule's; the hyperparameters added since then get the values
that reproduce the old rule (``weight_decay = 0``, ``maximize = False``), and a subclass may
convert old state (:meth:`ZooOptimizer._upgrade_legacy_state`). Such a checkpoint cannot tell
rules with the same hyperparameter names apart (Adam and SharedScaleAdam).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.optim import Optimizer

from gaugekit.optim import distributed as D
from gaugekit.optim._validation import (
    BATCH_DIMS,
    TORCH_OPTIM_OFF,
    Check,
    Hyper,
    check_torch_option,
    invalid,
)

#: The param-group key naming the class that owns the group (and wrote a checkpoint of it).
OPTIMIZER_KEY = "gaugekit_optimizer"
#: Values of hyperparameters added after the first checkpoints that reproduce the old rules.
LEGACY_HYPERS: dict[str, Any] = {
    "weight_decay": 0.0, "decoupled_weight_decay": False, "maximize": False,
}


def per_run(value: Hyper, like: Tensor, batch_dims: int) -> Hyper:
    """Broadcast a hyperparameter against ``like`` whose first ``batch_dims`` dims are runs.

    A Python number is returned unchanged. A tensor of shape ``like.shape[:batch_dims]`` is moved
    to ``like``'s device and dtype and viewed as ``batch_shape + (1,) * (like.ndim - batch_dims)``;
    a 0-d tensor is only moved.
    """
    if not isinstance(value, Tensor):
        return value
    value = value.to(device=like.device, dtype=like.dtype)
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


class ZooOptimizer(Optimizer):
    """Base of the zoo's optimizers (see the module docstring)."""

    matrix_only: ClassVar[bool] = False
    #: True when one quantity is reduced over all groups (then groups are not separable); a
    #: subclass whose coupling depends on its settings may override it with a property.
    couples_param_groups: ClassVar[bool] = False
    hyper_checks: ClassVar[dict[str, Check]] = {}
    #: ``"coupled"`` (``g ← g + λθ``, torch's SGD, RMSprop, Adam) or ``"decoupled"``
    #: (``θ ← θ − lr λ θ``): what ``weight_decay`` means, and so which value of torch's
    #: ``decoupled_weight_decay`` a rule without that option accepts.
    weight_decay_kind: ClassVar[str] = "decoupled"

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
        if cls.__module__.startswith("gaugekit.optim"):
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
        for name, check in self.hyper_checks.items():
            check(name, group[name])

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
                    f"{name}(matrices, ...) and Adam(others, ...)",
                )
            for hyper in self.hyper_checks:
                for label, tensor in _tensor_entries(hyper, group[hyper]):
                    if tensor.ndim and tuple(tensor.shape) != tuple(p.shape[:batch_dims]):
                        raise invalid(
                            label,
                            f"tensor of shape {tuple(tensor.shape)}",
                            f"a float, a 0-d tensor or a tensor of shape "
                            f"{tuple(p.shape[:batch_dims])} (param.shape[:batch_dims])",
                        )

    def _check_group(self, group: dict[str, Any]) -> None:
        """Extra checks of a subclass on a complete group (defaults filled in)."""

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
        self._check_params(tensors, group)
        self._check_group(group)
        _torch_add_param_group(
            self, {**param_group, "params": params, OPTIMIZER_KEY: type(self).__name__}
        )

    # ---------------------------------------------------------------------------- checkpoints
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's loader, after refusing a state saved by another optimizer class (see the
        module docstring; a checkpoint from before the class marker is upgraded)."""
        super().load_state_dict(self._checked_state_dict(state_dict))

    def _checked_state_dict(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        groups = list(state_dict["param_groups"])
        marks = {group.get(OPTIMIZER_KEY) for group in groups}
        own = type(self).__name__
        legacy = marks <= {None}
        if legacy:
            self._check_legacy_groups(groups)
        else:
            rules = [c for c in type(self).__mro__ if issubclass(c, ZooOptimizer)]
            accepted = {c.__name__ for c in rules if c is not ZooOptimizer}
            strangers = sorted(str(m) for m in marks - accepted - {None})
            if strangers:
                raise self._refusal(f"a state_dict saved by {_rule_display_name(strangers[0])}")
            if None in marks:
                raise self._refusal("a state_dict whose param groups are partly unmarked")
        defaults = {k: v for k, v in LEGACY_HYPERS.items() if k in self.defaults}
        groups = [
            {**(defaults if legacy else {}), **group, OPTIMIZER_KEY: own} for group in groups
        ]
        state = state_dict["state"]
        if legacy:
            state = self._upgrade_legacy_state(state, groups)
        return {**state_dict, "param_groups": groups, "state": state}

    def _refusal(self, what: str) -> ValueError:
        name = self.display_name()
        return invalid(
            "state_dict", what,
            f"a state_dict of {name} (load it into the optimizer that saved it, or build a "
            f"fresh {name})",
        )

    def _check_legacy_groups(self, groups: list[dict[str, Any]]) -> None:
        """Refuse unmarked groups unless they look like this class's before the marker."""
        required = set(self.hyper_checks) - set(LEGACY_HYPERS) | {"batch_dims"}
        known = {key for cls in _rules() for key in cls.hyper_checks} | set(TORCH_OPTIM_OFF)
        for group in groups:
            keys = set(group) - {"params"}
            if "batch_dims" not in keys:
                torch_name = _torch_optimizer_of(keys)
                raise self._refusal(
                    f"a state_dict of {torch_name}" if torch_name else
                    f"a state_dict of another optimizer (param-group keys {_listed(keys)})"
                )
            others = (keys & known) - set(self.defaults)
            if not required <= keys or others:
                raise self._refusal(
                    f"an unmarked gaugekit state_dict of another rule (param-group keys "
                    f"{_listed(keys)})"
                )

    def _upgrade_legacy_state(
        self, state: dict[Any, Any], groups: list[dict[str, Any]]
    ) -> dict[Any, Any]:
        """Convert the state of a checkpoint saved before the class marker (here: unchanged);
        ``groups`` are the saved groups (``params`` holds the state keys of their params)."""
        return state

    # ----------------------------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One update of every parameter that has a gradient; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._update_all(closure)
        return loss

    def _update_all(self, closure: Any = None) -> None:
        """Every group's update; ``closure`` is for a rule that re-evaluates the gradient."""
        for group in self.param_groups:
            self._update_group(group)

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

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
        if step:
            state["step"] += 1
        return state

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


def _listed(keys: set[str]) -> str:
    return ", ".join(sorted(keys))


def _rules() -> list[type[ZooOptimizer]]:
    out, todo = [], list(ZooOptimizer.__subclasses__())
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def _rule_display_name(name: str) -> str:
    for cls in _rules():
        if cls.__name__ == name:
            return cls.display_name()
    return repr(name)


def _torch_optimizer_of(keys: set[str]) -> str | None:
    """The torch.optim class whose constructor arguments are the most of ``keys`` (its
    param groups hold them all), or ``None``."""
    best, size = None, 0
    for name in sorted(dir(torch.optim)):
        cls = getattr(torch.optim, name)
        if not (isinstance(cls, type) and issubclass(cls, Optimizer)) or cls is Optimizer:
            continue
        try:
            parameters = inspect.signature(cls.__init__).parameters.values()
        except (TypeError, ValueError):
            continue
        names = {
            p.name for p in parameters
            if p.name not in ("self", "params") and p.kind is not p.VAR_KEYWORD
            and p.kind is not p.VAR_POSITIONAL
        }
        if names and names <= keys and len(names) > size:
            best, size = name, len(names)
    return f"torch.optim.{best}" if best else None
