r"""The optimizer zoo, as ``torch.optim`` optimizers (a map; each class's docstring has its
update in math, its deviations from the paper and its gauge class).

========================  ======================================================================
``gd`` ``momentum``       :class:`GD`, :class:`Momentum` (``sgd.py``)
``adam`` ``scalar_adam``  :class:`Adam` (AdamW with ``decoupled_weight_decay``),
                          :class:`SharedScaleAdam`, :class:`AdamMini` (``adam.py``)
``rmsprop``               :class:`RMSprop` (``rmsprop.py``)
``lion`` ``signum``       :class:`Lion`, :class:`Signum` (``sign.py``)
``adafactor``             :class:`Adafactor` (``adafactor.py``)
``muon`` ``shampoo``      :class:`Muon`, :class:`Shampoo` (``muon.py``, ``shampoo.py``);
                          :class:`MuonAdam`, Muon and Adam in one optimizer (``muon_adam.py``)
``scaled_gd`` ``gram``    :class:`ScaledGD`, :class:`GramPreconditioned` (``scaled_gd.py``,
                          ``gram.py``)
``eigen_adam``            :class:`EigenAdam` (``eigen_adam.py``)
``flow_adam``             :class:`FlowAdam` and its presets (``flow_adam.py``; its math in
                          ``flow_functional.py`` and ``flow_ode.py``)
========================  ======================================================================

Around them: the functional cores (``functional.py``, ``functional_shared.py``,
``functional_matrix.py``: each rule's math, once, on tensors), how it runs (``execution.py``:
loop, multi-tensor, compiled, torch's fused kernel; ``orthogonalize.py``: Muon's matrices
oriented, cut and stacked), the base class (``base.py``: validation, stacked runs, weight decay;
:class:`ZooOptimizer`), one policy for non-finite gradients (``nonfinite.py``), checkpoints
(``checkpoints.py``), the registry (``registry.py``: name → class, schedule and
gauge class with the reason), the learning-rate schedules (``schedules.py``), the routing of
matrices and the rest (``params.py``: :func:`split_matrix_params` by shape,
:func:`muon_param_groups` by module) and the reductions under ``torch.distributed``
(``distributed.py``).
"""
from gaugekit.optim.adafactor import Adafactor
from gaugekit.optim.adam import Adam, AdamMini, SharedScaleAdam
from gaugekit.optim.base import ZooOptimizer, per_run
from gaugekit.optim.eigen_adam import EigenAdam
from gaugekit.optim.flow_adam import FlowAdam
from gaugekit.optim.gram import GramPreconditioned
from gaugekit.optim.muon import Muon
from gaugekit.optim.muon_adam import MuonAdam
from gaugekit.optim.params import fused_qkv_blocks, muon_param_groups, split_matrix_params
from gaugekit.optim.registry import (
    OptimizerSpec,
    all_specs,
    get_spec,
    make_optimizer,
    optimizer_names,
    register_optimizer,
)
from gaugekit.optim.rmsprop import RMSprop
from gaugekit.optim.scaled_gd import ScaledGD
from gaugekit.optim.schedules import lr_factor, scheduled_lr
from gaugekit.optim.sgd import GD, Momentum
from gaugekit.optim.shampoo import Shampoo
from gaugekit.optim.sign import Lion, Signum

__all__ = [
    "GD",
    "Adafactor",
    "Adam",
    "AdamMini",
    "EigenAdam",
    "FlowAdam",
    "GramPreconditioned",
    "Lion",
    "Momentum",
    "Muon",
    "MuonAdam",
    "OptimizerSpec",
    "RMSprop",
    "ScaledGD",
    "Shampoo",
    "SharedScaleAdam",
    "Signum",
    "ZooOptimizer",
    "all_specs",
    "fused_qkv_blocks",
    "get_spec",
    "lr_factor",
    "make_optimizer",
    "muon_param_groups",
    "optimizer_names",
    "per_run",
    "register_optimizer",
    "scheduled_lr",
    "split_matrix_params",
]
