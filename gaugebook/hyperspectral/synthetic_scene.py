r"""A small synthetic hyperspectral scene from a seed (the quick-scale default).

Linear mixing: ``p`` smooth endmember spectra ``E ∈ ℝ^{p × bands}`` mixed by spatially smooth
abundances ``A ∈ Δ^{p}`` (non-negative, summing to one at every pixel), plus white noise:

.. math::  X_{ij\cdot} = \sum_{l=1}^{p} A_{ijl} E_{l\cdot} + \sigma \varepsilon_{ij\cdot},
           \qquad \varepsilon \sim \mathcal N(0, 1).

So the noiseless pixels × bands matrix has rank at most ``p``, as a real scene does approximately.
Each endmember is a baseline plus three Gaussian bumps along the band axis (random centres,
widths and heights); each abundance map is a softmax over endmembers of a sum of random Gaussian
blobs, so neighbouring pixels mix alike. All draws come from one CPU generator seeded ``seed``,
in float64, in this order: bumps, baselines, blobs, noise.
"""

from __future__ import annotations

import torch

from gaugebook.hyperspectral.scenes import SceneData

__all__ = ["make_synthetic_scene"]


def make_synthetic_scene(
    rows: int = 40,
    cols: int = 40,
    bands: int = 64,
    endmembers: int = 5,
    noise: float = 0.005,
    seed: int = 0,
) -> SceneData:
    """The synthetic scene (see the module docstring) as a
    :class:`~gaugebook.hyperspectral.scenes.SceneData`, values ≈ [0, 1]."""
    for name, value in (("rows", rows), ("cols", cols), ("bands", bands),
                        ("endmembers", endmembers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"Invalid {name}: {value!r}; expected an integer >= 1")
    if not noise >= 0:
        raise ValueError(f"Invalid noise: {noise!r}; expected a number >= 0")
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    lam = torch.linspace(0.0, 1.0, bands, dtype=f64)
    centres = torch.rand(endmembers, 3, generator=g, dtype=f64)
    widths = 0.05 + 0.2 * torch.rand(endmembers, 3, generator=g, dtype=f64)
    heights = 0.2 + 0.8 * torch.rand(endmembers, 3, generator=g, dtype=f64)
    baseline = 0.05 + 0.2 * torch.rand(endmembers, 1, generator=g, dtype=f64)
    bumps = heights[..., None] * torch.exp(
        -0.5 * ((lam - centres[..., None]) / widths[..., None]) ** 2)
    E = baseline + bumps.sum(dim=1)  # (p, bands)

    blobs = 4
    yy = torch.linspace(0.0, 1.0, rows, dtype=f64)[:, None]
    xx = torch.linspace(0.0, 1.0, cols, dtype=f64)[None, :]
    cy = torch.rand(endmembers, blobs, generator=g, dtype=f64)
    cx = torch.rand(endmembers, blobs, generator=g, dtype=f64)
    scale = 0.1 + 0.25 * torch.rand(endmembers, blobs, generator=g, dtype=f64)
    d2 = (yy - cy[..., None, None]) ** 2 + (xx - cx[..., None, None]) ** 2
    field = (torch.exp(-0.5 * d2 / scale[..., None, None] ** 2)).sum(dim=1)  # (p, rows, cols)
    A = torch.softmax(4.0 * field, dim=0)  # abundances on the simplex

    clean = torch.einsum("prc,pb->rcb", A, E)
    X = clean + noise * torch.randn(rows, cols, bands, generator=g, dtype=f64)
    X = X / clean.max()
    label = f"synthetic ({rows}×{cols}×{bands}, {endmembers} endmembers, seed {seed})"
    rgb = (3 * bands // 4, bands // 2, bands // 4)
    return SceneData("synthetic", label, X.numpy(), None, rgb)
