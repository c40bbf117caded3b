"""The synthetic scene: reproducible from its seed, and low-rank up to the noise."""

from __future__ import annotations

import numpy as np
import pytest

from gaugebook.hyperspectral.synthetic_scene import make_synthetic_scene


def test_reproducible_and_seed_dependent():
    a = make_synthetic_scene(rows=8, cols=9, bands=12, seed=3)
    b = make_synthetic_scene(rows=8, cols=9, bands=12, seed=3)
    c = make_synthetic_scene(rows=8, cols=9, bands=12, seed=4)
    assert a.shape == (8, 9, 12)
    np.testing.assert_array_equal(a.cube, b.cube)
    assert not np.allclose(a.cube, c.cube)


def test_noiseless_scene_has_rank_at_most_endmembers():
    scene = make_synthetic_scene(rows=10, cols=10, bands=30, endmembers=4, noise=0.0, seed=1)
    s = np.linalg.svd(scene.cube.reshape(-1, 30), compute_uv=False)
    assert s[4] < 1e-10 * s[0]   # rank <= 4
    assert s[3] > 1e-6 * s[0]    # and not fewer: four distinct endmembers mix
    noisy = make_synthetic_scene(rows=10, cols=10, bands=30, endmembers=4, noise=0.01, seed=1)
    assert np.linalg.svd(noisy.cube.reshape(-1, 30), compute_uv=False)[4] > 1e-4


def test_invalid_sizes():
    with pytest.raises(ValueError, match="Invalid rows"):
        make_synthetic_scene(rows=0)
    with pytest.raises(ValueError, match="Invalid noise"):
        make_synthetic_scene(noise=-1.0)
