"""gaugekit: gauge symmetry of factorized losses, and which optimizers respect it.

A loss of a factorization ``L(U Vᵀ)`` is blind to the gauge ``(U, V) → (UQ, VQ)`` with ``Q``
orthogonal; an optimizer need not be. The library provides the gauge tools, the optimizer zoo
as ``torch.optim`` optimizers, an equivariance audit for any optimizer, the problems and the
experiments of the book.

``import gaugekit`` brings the core, which needs torch and numpy only: :mod:`gaugekit.optim`,
:mod:`gaugekit.audit`, :mod:`gaugekit.twins`, :mod:`gaugekit.gauge`, :mod:`gaugekit.linalg`.
The experiments, data loaders and figures need the ``experiments`` extra
(``pip install 'gaugekit[experiments]'``) and are imported only when asked for.
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
