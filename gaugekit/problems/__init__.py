"""The problems the book trains on.

Each module generates its instances from explicit :class:`torch.Generator` objects, defines the
loss and the metrics, and knows nothing about optimizers or sweeps (floor 3 does):

``matrix_sensing``  Gaussian measurements of a planted low-rank ``X_star``, fitted by ``U Vᵀ``.
"""

# Developer note (layers, DESIGN.md): floor 2.

__all__ = ["matrix_sensing"]
