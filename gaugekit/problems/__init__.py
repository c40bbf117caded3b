"""The problems the book trains on, as plain objects.

Each module generates its instances from explicit :class:`torch.Generator` objects, defines the
loss and the metrics, and knows nothing about optimizers or sweeps (train/ and runs/ do):

``matrix_sensing``  Gaussian measurements of a planted low-rank ``X_star``, fitted by ``U Vᵀ``.
``spectral_tails``  the same with a target of a low-rank head plus a spectral tail.
``hyperspectral``   completion of the pixels × bands matrix of a scene (data.scenes).
``attention``       the paper's small transformer and its modular-addition data.
``families``        the factor problems as families of the stacked trainer (train.factors).
``specs``           the Problem/Budget specs the sensing-type experiments share.
"""

# Developer note (layers, gaugekit/__init__.py): floor 3, problems/, on data/, gauge and linalg.

__all__ = ["attention", "families", "hyperspectral", "matrix_sensing", "specs",
           "spectral_tails"]
