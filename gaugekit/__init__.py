"""gaugekit: gauge symmetry of factorized losses, and which optimizers respect it.

A loss of a factorization ``L(U Vᵀ)`` is blind to the gauge ``(U, V) → (UQ, VQ)`` with ``Q``
orthogonal; an optimizer need not be. The library provides the gauge tools, the optimizer zoo
as ``torch.optim`` optimizers, an equivariance audit for any optimizer, the problems and the
experiments of the book.

``import gaugekit`` brings the core, which needs torch and numpy only: :mod:`gaugekit.optim`,
:mod:`gaugekit.audit` (the factor audit and the twin audit of attention heads),
:mod:`gaugekit.gauge`, :mod:`gaugekit.linalg`. The experiments and figures need the
``experiments`` extra (``pip install 'gaugekit[experiments]'``) and are imported only when
asked for.

The house, floor by floor (a module imports only from its own floor or a lower one; the
contracts in ``pyproject.toml`` hold it to this in CI, ``lint-imports``)::

    10 cli.py, __main__.py   the command line
    9  report/     what the book and the README show: one module per chapter's figures, tables
                   and glued values, on the shared viz (figures) and tables; the headline
    8  experiments/  one module per experiment: configs, specs, run_batch, summaries
    7  train/      the trainers: factors (every factor run, stacked; the stack in factor_stack),
                   twins (a base and its twins)
    6  runs/       spec, sweep (the one engine), backends (and a call in a child process),
                   records, collection (the one collector), selection, matched_loss, verdicts
    5  theory.py, tail_theory.py   the paper's propositions as functions; twins.py (old address)
    4  audit/      factors (any optimizer on (U₀, V₀) and (U₀Q, V₀Q); its verdicts in
                   factor_results), heads (twins of heads; its parts sites, twin_parts)
    3  optim/      the zoo: functional cores and thin torch.optim classes, the registry
       problems/   plain problem objects: sensing, spectral tails, hyperspectral, attention;
                   the factor families of train/ (families), the Problem/Budget specs
    2  data/       data files: where they are, whether they are the right ones
    1  gauge.py, linalg.py, config.py, _extras.py

Each module says its floor in a developer note under its docstring.
"""

# The one place the version is written: pyproject.toml reads it from here.
__version__ = "0.1.0"

# isort: split
from gaugekit import audit, gauge, linalg, optim, twins
from gaugekit.config import describe, get_data_dir, get_device, get_scale

__all__ = [
    "__version__",
    "audit",
    "describe",
    "gauge",
    "get_data_dir",
    "get_device",
    "get_scale",
    "linalg",
    "optim",
    "twins",
]
