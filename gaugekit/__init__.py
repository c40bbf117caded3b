"""gaugekit: gauge symmetry of factorized losses, and which optimizers respect it.

A loss of a factorization ``L(U Vᵀ)`` is blind to the gauge ``(U, V) → (UQ, VQ)`` with ``Q``
orthogonal; an optimizer need not be. Needs torch and numpy only::

    optim/      the optimizer zoo as torch.optim optimizers (functional cores, thin classes,
                one validation) and its registry of verdicts
    audit/      the factor audit of any optimizer (audit_equivariance) and the twin audit of
                any attention model (audit_twins)
    gauge.py    the gauge group, its actions, invariants and distances
    linalg.py   small linear-algebra kernels (Newton–Schulz, matrix functions)
    theory.py   the paper's propositions as functions (first steps, spectral transfer, flows)
    cli.py      ``gaugekit audit CLASS KEY=VALUE ...``

The book that uses it (experiments, figures, records) is a separate package of the
repository, ``gaugebook``, which is not in the wheel.
"""

# The one place the version is written: pyproject.toml reads it from here.
__version__ = "0.1.0"

# isort: split
from gaugekit import audit, gauge, linalg, optim, theory

__all__ = ["__version__", "audit", "gauge", "linalg", "optim", "theory"]
