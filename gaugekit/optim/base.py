"""The base class of the zoo: validation, stacked runs (``batch_dims``), closure, per-run values.

Every optimizer of :mod:`gaugekit.optim` derives from :class:`ZooOptimizer`. A subclass declares

* ``hyper_checks``: hyperparameter name → check (see :mod:`gaugekit.optim.validation`), run on
  the defaults at construction (before any parameter is touched) and on every param group;
* ``matrix_only``: whether each parameter must be a matrix after its batch dimensions;
* ``couples_param_groups``: whether a quantity is shared by all groups (the shared scalar);
* ``_update_group(group)``: the update of one param group, written through a functional core.

Stacked runs. With ``batch_dims = b`` the first ``b`` dimensions of every parameter index
independent runs. A per-run hyperparameter may be a tensor of shape ``param.shape[:b]``;
:func:`per_run` reshapes it to broadcast against a tensor whose first ``b`` dimensions are the
runs. Every reduction inside an update rule is taken over the non-batch dimensions only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.optim import Optimizer

from gaugekit.optim import distributed as D
from gaugekit.optim.validation import BATCH_DIMS, Check, Hyper, invalid


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

    def __init__(self, params: Any, defaults: dict[str, Any], *, batch_dims: int = 0) -> None:
        defaults = {**defaults, "batch_dims": batch_dims}
        self._check_hypers(defaults)
        super().__init__(params, defaults)

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
        group = {**self.defaults, **param_group, "params": tensors}
        self._check_hypers(group)
        self._check_params(tensors, group)
        self._check_group(group)
        super().add_param_group({**param_group, "params": params})

    # ----------------------------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One update of every parameter that has a gradient; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._update_all()
        return loss

    def _update_all(self) -> None:
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

    @staticmethod
    def _hyper(group: dict[str, Any], name: str, like: Tensor) -> Any:
        """``group[name]`` broadcast per run against ``like`` (a tuple is mapped entrywise)."""
        value = group[name]
        batch_dims = group["batch_dims"]
        if isinstance(value, (tuple, list)):
            return tuple(per_run(v, like, batch_dims) for v in value)
        return per_run(value, like, batch_dims)
