"""gaugekit: gauge symmetry of factorized losses, and which optimizers respect it.

A loss of a factorization ``L(U Vᵀ)`` is blind to the gauge ``(U, V) → (UQ, VQ)`` with ``Q``
orthogonal; an optimizer need not be. The library provides the gauge tools, the optimizer zoo
as ``torch.optim`` optimizers, an equivariance audit for any optimizer, the problems and the
experiments of the book.
"""

from gaugekit.config import describe, get_data_dir, get_device, get_scale

__version__ = "0.1.0"

__all__ = ["__version__", "describe", "get_data_dir", "get_device", "get_scale"]
