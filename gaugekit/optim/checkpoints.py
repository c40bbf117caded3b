"""Checkpoints of the zoo's optimizers: what wrote them, and what a missing key meant.

Every param group carries ``"gaugekit_optimizer": <class name>`` (:data:`OPTIMIZER_KEY`; it
travels with ``state_dict()``, also through tools that keep only ``state`` and
``param_groups``). :func:`checked_state_dict`, run by ``ZooOptimizer.load_state_dict`` before
torch's loader touches anything, refuses a state saved by another class (another zoo rule,
named; any state without the marker: torch.optim's, another library's; a subclass loads its base
class's state, not the other way round) and a state written with another value of a key that
changes the rule (a class's ``rule_keys``: MuonAdam's ``adam``, the Newton–Schulz precision,
Adam-mini's blocks, ...), naming both values. A key the checkpoint lacks (written before the key
existed) gets the value that stood for its absence (:data:`LATER_KEYS` and a class's
``later_keys``), else the value the optimizer was built with.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gaugekit.optim._validation import invalid

#: The param-group key naming the class that owns the group (and wrote a checkpoint of it).
OPTIMIZER_KEY = "gaugekit_optimizer"

#: Hyperparameters every rule gained after its first checkpoints, and the value a checkpoint
#: without one stands for (its behaviour then).
LATER_KEYS: dict[str, Any] = {"weight_decay": 0.0, "maximize": False, "nonfinite": None,
                              "batch_dims": 0, "foreach": None, "fused": None}

_WHY = {"ns_dtype": " (the precision of Newton–Schulz)",
        "adam": " (AdamW's per-coordinate second moment or one shared scale)",
        "blocks": " and the shape of its second moment",
        "use_muon": " (Muon or Adam for the group)",
        "side": " and the side of its eigenbasis"}


def checked_state_dict(opt: Any, state_dict: dict[str, Any]) -> dict[str, Any]:
    """``state_dict`` ready for torch's loader into ``opt`` (a ``ZooOptimizer``): marked with
    ``opt``'s class, its missing keys filled; or ``ValueError`` (module doc)."""
    groups = list(state_dict["param_groups"])
    marks = {group.get(OPTIMIZER_KEY) for group in groups}
    if marks == {None}:
        raise _refusal(opt, "a state_dict without gaugekit's optimizer marker (one of "
                            "torch.optim or another library)")
    if None in marks:
        raise _refusal(opt, "a state_dict whose param groups are partly unmarked")
    rules = [c for c in type(opt).__mro__ if hasattr(c, "rule_keys")]
    accepted = {c.__name__ for c in rules if c.__name__ != "ZooOptimizer"}
    strangers = sorted(str(m) for m in marks - accepted)
    if strangers:
        raise _refusal(opt, f"a state_dict saved by {_display_name(opt, strangers[0])}")
    own = type(opt).__name__
    groups = [{**_filled(opt, group, current), OPTIMIZER_KEY: own}
              for group, current in zip(groups, opt.param_groups, strict=False)]
    for i, (group, current) in enumerate(zip(groups, opt.param_groups, strict=False)):
        for key in opt.rule_keys:
            if not same_value(group[key], current[key]):
                raise invalid(
                    "state_dict",
                    f"a state_dict of {opt.display_name()} with {key}={group[key]!r} "
                    f"(param_groups[{i}])",
                    f"one with {key}={current[key]!r}, as this optimizer was built: {key} "
                    f"changes the rule{_WHY.get(key, '')} (build the optimizer with "
                    f"{key}={group[key]!r} to resume this checkpoint)",
                )
    return {**state_dict, "param_groups": groups}


def fill_later_keys(opt: Any) -> None:
    """The later keys an older pickled optimizer's groups lack, as their absence meant."""
    for group in opt.param_groups:
        for key, value in {**LATER_KEYS, **opt.later_keys}.items():
            if key in opt.defaults:
                group.setdefault(key, value)


def same_value(a: Any, b: Any) -> bool:
    """Whether two hyperparameter values are the same (tensors entry by entry, on the CPU)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape
                and bool(torch.equal(a.detach().cpu(), b.detach().cpu())))
    return type(a) is type(b) and a == b


def _filled(opt: Any, saved: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    later = {**LATER_KEYS, **opt.later_keys}
    missing = {key: later.get(key, current[key]) for key in current
               if key in opt.defaults and key not in saved}
    return {**saved, **missing}


def _refusal(opt: Any, what: str) -> ValueError:
    name = opt.display_name()
    return invalid("state_dict", what, f"a state_dict of {name} (load it into the optimizer "
                                       f"that saved it, or build a fresh {name})")


def _display_name(opt: Any, name: str) -> str:
    """``gaugekit.optim.<Class>`` of the zoo rule called ``name`` (any subclass of the zoo's
    base), else ``name`` quoted."""
    base = next(c for c in type(opt).__mro__ if c.__name__ == "ZooOptimizer")
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__name__ == name:
            return cls.display_name()
        todo.extend(cls.__subclasses__())
    return repr(name)
