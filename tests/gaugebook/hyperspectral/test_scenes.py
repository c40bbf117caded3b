"""Scene loaders on small ``.mat`` files written here: both layouts, and every refusal."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io

from gaugebook.engine.datafiles import DataFileError, MissingDataFileError, sha256_file
from gaugebook.hyperspectral.scenes import (
    SCENES,
    available_scenes,
    get_scene_info,
    load_mat_scene,
    load_scene,
)


def _cube(rows=3, cols=4, bands=5, dtype=np.int16):
    return (np.arange(rows * cols * bands).reshape(rows, cols, bands) + 1).astype(dtype)


def test_cube_layout(tmp_path):
    cube = _cube()
    path = tmp_path / "cube.mat"
    scipy.io.savemat(path, {"img": cube})
    scene = load_mat_scene(path, "img", "cube", shape=(3, 4, 5), dtype="int16")
    assert scene.shape == (3, 4, 5)
    assert scene.cube.dtype == np.float64
    np.testing.assert_array_equal(scene.cube, cube)


def test_bands_pixels_layout_is_column_major(tmp_path):
    cube = _cube(rows=3, cols=4, bands=5, dtype=np.float64)
    # one column per pixel, pixel index col * nRow + row (MATLAB order)
    V = np.empty((5, 12))
    for r in range(3):
        for c in range(4):
            V[:, c * 3 + r] = cube[r, c]
    path = tmp_path / "bp.mat"
    scipy.io.savemat(path, {"V": V, "nRow": np.uint8(3), "nCol": np.uint8(4)})
    scene = load_mat_scene(path, "V", "bands_pixels")
    np.testing.assert_array_equal(scene.cube, cube)
    # a row-major reading would be a different cube (negative control of the pixel order)
    assert not np.array_equal(V.reshape(5, 3, 4).transpose(1, 2, 0), cube)
    # sizes can be passed when the file has no nRow/nCol
    scipy.io.savemat(tmp_path / "bare.mat", {"V": V})
    np.testing.assert_array_equal(
        load_mat_scene(tmp_path / "bare.mat", "V", "bands_pixels", n_rows=3, n_cols=4).cube,
        cube)
    with pytest.raises(DataFileError, match="nRow"):
        load_mat_scene(tmp_path / "bare.mat", "V", "bands_pixels")


def test_wrong_checksum_refused(tmp_path):
    path = tmp_path / "cube.mat"
    scipy.io.savemat(path, {"img": _cube()})
    assert load_mat_scene(path, "img", sha256=sha256_file(path)).shape == (3, 4, 5)
    with pytest.raises(DataFileError, match="sha256"):
        load_mat_scene(path, "img", sha256="ab" * 32)


def test_wrong_key_refused_and_keys_listed(tmp_path):
    path = tmp_path / "cube.mat"
    scipy.io.savemat(path, {"img": _cube()})
    with pytest.raises(DataFileError, match=r"'other' is not in .*\['img'\]"):
        load_mat_scene(path, "other")


def test_wrong_shape_refused(tmp_path):
    path = tmp_path / "cube.mat"
    scipy.io.savemat(path, {"img": _cube(), "flat": np.ones((4, 6))})
    with pytest.raises(DataFileError, match="expected"):
        load_mat_scene(path, "img", shape=(3, 4, 6))
    with pytest.raises(DataFileError, match="cube"):
        load_mat_scene(path, "flat", "cube")
    scipy.io.savemat(path, {"V": np.ones((5, 11)), "nRow": 3, "nCol": 4})
    with pytest.raises(DataFileError, match="12 pixel columns"):
        load_mat_scene(path, "V", "bands_pixels")


def test_wrong_dtype_refused(tmp_path):
    path = tmp_path / "cube.mat"
    scipy.io.savemat(path, {"img": _cube(dtype=np.float32), "z": _cube() * 1j})
    with pytest.raises(DataFileError, match="'int16'"):
        load_mat_scene(path, "img", dtype="int16")
    with pytest.raises(DataFileError, match="real numeric"):
        load_mat_scene(path, "z")


def test_bad_layout_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="Invalid layout"):
        load_mat_scene(tmp_path / "x.mat", "img", "pixels_bands")
    with pytest.raises(DataFileError, match="does not exist"):
        load_mat_scene(tmp_path / "x.mat", "img")
    with pytest.raises(MissingDataFileError) as err:
        load_scene("indian_pines", data_dir=tmp_path, download=False)
    text = str(err.value)
    assert "Indian_pines_corrected.mat" in text and str(tmp_path) in text
    assert "GAUGEKIT_DATA" in text and SCENES["indian_pines"].url in text


def test_registered_scene_with_wrong_bytes_is_refused(tmp_path):
    path = tmp_path / "hyperspectral" / "SalinasA_corrected.mat"
    path.parent.mkdir()
    scipy.io.savemat(path, {"salinasA_corrected": _cube()})
    with pytest.raises(DataFileError, match="sha256"):
        load_scene("salinas_a", data_dir=tmp_path, download=False)
    assert available_scenes(tmp_path) == ["salinas_a"]
    with pytest.raises(ValueError, match="Invalid scene"):
        get_scene_info("nowhere")


@pytest.mark.parametrize("name", ["salinas_a", "samson"])
def test_real_scenes_when_present(name):
    if name not in available_scenes():
        pytest.skip(f"{name} is not in the data folder")
    info = get_scene_info(name)
    scene = load_scene(name, download=False)
    assert scene.shape == info.shape
    assert np.isfinite(scene.cube).all() and scene.cube.max() > 0
    img = scene.false_colour()
    assert img.shape == (*info.shape[:2], 3) and 0 <= img.min() and img.max() <= 1
