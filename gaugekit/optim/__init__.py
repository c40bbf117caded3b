r"""The optimizer zoo of gaugekit, as ``torch.optim`` optimizers.

Every rule is a :class:`torch.optim.Optimizer` with torch's argument and state names, a
functional core in :mod:`gaugekit.optim.functional` (FlowAdam's in
:mod:`gaugekit.optim.flow_functional` and :mod:`gaugekit.optim.flow_ode`), and a ``batch_dims``
argument: the first ``batch_dims`` dimensions of each parameter index independent runs, and every
reduction of a rule (the shared scalar, Adafactor's means, Newton–Schulz normalisation,
Shampoo's ``L`` and ``R``, ScaledGD's Grams) is taken per run. ``lr`` and the other float
hyperparameters marked *per run* below may be a tensor of shape ``param.shape[:batch_dims]``.
:mod:`gaugekit.optim.registry` maps names to classes (built with the classes' own defaults),
grids and gauge classification.

Conventions (the paper's zoo, ``experiments/optimizer_zoo_bias.py`` and
``experiments/nibi/common.py`` of ``idevender/loss-basis-adam``). ``g`` gradient, ``t`` step
(1 at the first update), ``ε`` always added OUTSIDE the square root; weight decay ``0`` by
default (the paper runs ``wd = 0``), see "Weight decay" below.

Each entry: registry name, class — update; the paper's settings (its ``lr`` is a point of the
experiments' grid, not the class default); lr schedule; gauge.

* ``gd``, :class:`GD` — ``θ −= lr g``; constant; equivariant.
* ``momentum``, :class:`Momentum` — ``b = μ b + g``, ``θ −= lr b`` (torch SGD with
  ``dampening = 0``); μ = 0.9; constant; equivariant.
* ``adam``, :class:`Adam` — ``m = β₁m + (1−β₁)g``, ``v = β₂v + (1−β₂)g²``, both bias-corrected,
  ``θ −= lr m̂ / (√v̂ + ε)``; β = (0.9, 0.999), ε = 1e-8; constant; not equivariant.
* ``scalar_adam``, :class:`SharedScaleAdam` — Adam's moments, ``θ −= lr m̂ / s`` with ONE
  ``s = √mean(v̂) + ε``, the mean over all entries of all parameters of all groups (per run),
  computed once per step (``mean v`` follows its own recurrence: no ``v`` tensor is kept);
  β = (0.9, 0.999), ε = 1e-8; constant; equivariant.
* ``rmsprop``, :class:`RMSprop` — ``v = αv + (1−α)g²``, ``θ −= lr g / (√v + ε)``, no momentum,
  no bias correction; α = 0.99, ε = 1e-8; cosine; not equivariant.
* ``lion``, :class:`Lion` — ``c = sign(β₁m + (1−β₁)g)``, then ``m = β₂m + (1−β₂)g``,
  ``θ −= lr c``; β = (0.9, 0.99); cosine; not equivariant.
* ``signum``, :class:`Signum` — ``m = βm + (1−β)g``, ``θ −= lr sign(m)``; β = 0.9; cosine;
  not equivariant.
* ``adafactor``, :class:`Adafactor` — ``R``, ``C``: EMAs of the row and column means of ``g²``,
  ``v̂ = R C / (mean R + 1e-30)``, ``θ −= lr g / (√v̂ + ε)``; no first moment, no bias
  correction (vectors: unfactored ``v``); β₂ = 0.999, ε = 1e-8; constant; not equivariant.
* ``muon``, :class:`Muon` — ``M = μM + g`` (no Nesterov), ``θ −= lr NS₅(M)``: ``M/(‖M‖_F + ε)``
  per matrix, quintic (3.4445, −4.7750, 2.0315), tall matrices transposed; μ = 0.9, ε = 1e-7,
  5 steps; cosine; equivariant.
* ``shampoo``, :class:`Shampoo` — ``L += g gᵀ``, ``R += gᵀ g``,
  ``θ −= lr (L + λI)^{-1/4} g (R + λI)^{-1/4}``, roots by eigh with eigenvalues clamped at 1e-6,
  refreshed at steps 1, 21, 41, …; λ = 1; constant; equivariant.
* ``scaled_gd``, :class:`ScaledGD` — ``U −= lr G_U (VᵀV + λI)⁻¹``, ``V −= lr G_V (UᵀU + λI)⁻¹``,
  both Grams before the step, one ``[U, V]`` per group; ``λ = 1e-4 · tr(Gram)/k + 1e-12``;
  constant; equivariant.
* ``gram``, :class:`GramPreconditioned` — ``θ −= lr H(G Gᵀ) G``, default
  ``H(P) = (P + λI)^{-s}``; s = 1/2, λ = 1e-6; constant; equivariant (the paper's Theorem 4.5).
* ``eigen_adam``, :class:`EigenAdam` — Adam run in the eigenbasis ``E`` of ``R = EMA(gᵀg)``
  (refreshed every 10 steps, ``m`` kept in parameter coordinates, ``v`` carried by ``C∘C``),
  ``θ −= lr (m̂E / (√v̂ + ε)) Eᵀ``; β = (0.9, 0.999), ε = 1e-8, β_R = 0.95; constant;
  equivariant where every refresh sees a simple spectrum of ``R``.

Where the paper differs from torch, the paper wins by default and torch's convention is an
option when cheap: Momentum's ``nesterov``; Muon's ``nesterov`` and ``adjust_lr_fn``
(torch.optim.Muon also damps its buffer by ``1 − μ``, clamps the norm ``max(‖M‖, ε)`` instead of
adding ε, runs NS in bfloat16 and defaults to ``weight_decay=0.1``). Adam, AdamW (``Adam(...,
decoupled_weight_decay=True)``), RMSprop and SGD (GD, Momentum) coincide with torch's, weight
decay and ``maximize`` included. ScaledGD's ``sequential=True`` reproduces the script's order
(``V``'s Gram from the updated ``U``).

Weight decay: ``weight_decay`` (``λ >= 0``, default 0, per group, per run) on every rule, saved
in ``state_dict``. Where torch has the rule it keeps torch's meaning: coupled L2
``g ← g + λθ`` in GD, Momentum (torch SGD), RMSprop and Adam (torch Adam); decoupled
``θ ← θ(1 − lr λ)`` before the update in ``Adam(decoupled_weight_decay=True)`` (torch AdamW).
Every other rule (SharedScaleAdam, Lion, Signum, Adafactor, Muon, Shampoo, ScaledGD,
GramPreconditioned, EigenAdam, FlowAdam) decays decoupled. Gauge: decoupled decay multiplies the
factors by a scalar and coupled L2 is the gradient of the invariant ``λ/2 (‖U‖² + ‖V‖²)``, so
every equivariant rule stays equivariant with ``λ > 0`` (the audit's tests check the zoo).
``maximize=True`` (every rule) steps along ``+g``; ``.grad`` is never written.

torch.optim arguments a rule does not implement (``amsgrad``, ``foreach``, ``fused``,
``dampening``, ``centered``, ``momentum`` on Adam, …: the union of torch's Adam, AdamW, SGD,
RMSprop and Adagrad arguments) raise ``ValueError`` naming the argument and the optimizer, in the
constructor or a param group, unless their value asks for nothing (``foreach=None``,
``amsgrad=False``, ``momentum=0``, …). Other param-group keys (``initial_lr``, ``name``) pass
through.

Per-run hyperparameters (float or tensor of shape ``param.shape[:batch_dims]``): ``lr`` of every
rule; ``weight_decay`` of every rule; ``momentum`` (Momentum, Signum, Muon), ``betas`` (Adam,
SharedScaleAdam, Lion, EigenAdam, FlowAdam), ``alpha``
(RMSprop), ``beta2`` (Adafactor), ``eps`` (Adam, SharedScaleAdam, RMSprop, Adafactor). Matrix
shape hyperparameters (Shampoo's ``damping``, Muon's ``eps``, …) are floats.

State: created lazily at the first step with torch's key names (``step`` as a Python int,
``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``, ``square_avg``; SharedScaleAdam ``exp_avg``
and the per-run mean ``exp_avg_sq_mean``, half of Adam's memory; Adafactor ``row_var``,
``col_var``, ``variance``; Shampoo ``left_gram``, ``right_gram``, ``left_inv_root``,
``right_inv_root``). ``state_dict``/``load_state_dict`` round-trip exactly. Each param group
carries ``"gaugekit_optimizer"`` (the class name), and ``load_state_dict`` refuses a state saved
by another class (torch.optim's included) before touching anything; a gaugekit checkpoint from
before that marker loads into its own class (see ``gaugekit.optim.base``).

Non-finite gradients: no check and no host synchronisation; a NaN or inf propagates, like in
torch.optim, into what the rule couples — the entry (elementwise rules; ``sign(NaN)`` is NaN
here, not torch's 0), the row of the factor (ScaledGD), the whole matrix (Adafactor, Muon,
Shampoo, Gram; their ``eigh`` never sees the NaN, the result is set to NaN instead), or every
parameter of the run (SharedScaleAdam) — and never into another run of the stack.

Errors: hyperparameters are validated at construction, before any parameter is touched, with
``ValueError("Invalid <name>: <value>; expected ...")``. Matrix-only rules (Muon, Shampoo,
ScaledGD, GramPreconditioned) refuse a parameter without exactly ``batch_dims + 2`` dims; route
the others with :func:`split_matrix_params`.

Distributed training (:mod:`gaugekit.optim.distributed`): DDP needs nothing (every rank holds
whole parameters and averaged gradients). With DTensor parameters (FSDP2 ``fully_shard``) every
reduction over parameters (SharedScaleAdam's and FlowAdam's scalars, FlowAdam's norms and clip)
sums each rank's block and all-reduces once per step, without a host sync; the matrix rules
(Muon, Shampoo, Gram, ScaledGD) gather the matrix they need; elementwise rules communicate
nothing. The update equals the one-process update to round-off. DTensor parameters need
``batch_dims = 0``.
"""

from gaugekit.optim.adafactor import Adafactor
from gaugekit.optim.adam import Adam, AdamMini, SharedScaleAdam
from gaugekit.optim.base import ZooOptimizer, per_run
from gaugekit.optim.eigen_adam import EigenAdam
from gaugekit.optim.flow_adam import FlowAdam
from gaugekit.optim.gram import GramPreconditioned
from gaugekit.optim.muon import Muon
from gaugekit.optim.params import split_matrix_params
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
    "OptimizerSpec",
    "RMSprop",
    "ScaledGD",
    "Shampoo",
    "SharedScaleAdam",
    "Signum",
    "ZooOptimizer",
    "all_specs",
    "get_spec",
    "lr_factor",
    "make_optimizer",
    "optimizer_names",
    "per_run",
    "register_optimizer",
    "scheduled_lr",
    "split_matrix_params",
]
