r"""Hyperspectral scenes — a registry of the published ones and a loader for any ``.mat``.

A *scene* is a cube ``X ∈ ℝ^{rows × cols × bands}`` (one spectrum per pixel). Files come in two
layouts, both read with :func:`scipy.io.loadmat`:

``cube``          one array of shape ``(rows, cols, bands)`` under ``key`` (the GIC collection:
                  Indian Pines, Pavia University, Salinas-A);
``bands_pixels``  one array of shape ``(bands, rows·cols)`` under ``key``, one column per pixel in
                  MATLAB column-major order (pixel ``col·nRow + row``), with the sizes under
                  ``nRow``/``nCol`` (Zhu's unmixing scenes: Samson). The cube is
                  ``V.reshape(bands, nCol, nRow).transpose(2, 1, 0)``.

:data:`SCENES` lists the scenes of the paper and of this machine with their file, key, layout,
shape, source page, download URL and SHA-256 (where known). :func:`load_scene` finds a registered
scene through :func:`gaugebook.engine.datafiles.find_file` (data folder first, then a pooch
download);
:func:`load_mat_scene` reads a user's own file. A file whose checksum, key, shape or dtype does not
match is refused with :class:`~gaugebook.engine.datafiles.DataFileError`, never silently used.

A *scene config* names a scene as JSON data (part of the run ids of the experiments that use
it): ``{"source": "registry", "name", "sha256"}``, ``{"source": "synthetic", "rows", "cols",
"bands", "endmembers", "noise", "seed"}``
(:func:`gaugebook.hyperspectral.synthetic_scene.make_synthetic_scene`)
or ``{"source": "file", "path", "key", "layout", "n_rows", "n_cols", "sha256"}``; the configs
and their loader are :mod:`gaugebook.hyperspectral.scene_refs`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from gaugebook.engine.datafiles import DataFileError, find_file, verify_sha256

__all__ = [
    "LAYOUTS",
    "SCENES",
    "SceneData",
    "SceneInfo",
    "available_scenes",
    "get_scene_info",
    "load_mat_scene",
    "load_scene",
    "scene_names",
]

Layout = Literal["cube", "bands_pixels"]
LAYOUTS: tuple[str, ...] = ("cube", "bands_pixels")

GIC_PAGE = "http://www.ehu.eus/ccwintco/index.php/Hyperspectral_Remote_Sensing_Scenes"
ZHU_PAGE = "https://sites.google.com/site/feiyunzhuhomepage/datasets-ground-truths"


@dataclass(frozen=True)
class SceneInfo:
    """A registered scene: where its file is, what it must hold, where it comes from.

    ``shape`` is the cube's ``(rows, cols, bands)``; ``dtype`` the stored array's dtype when
    known (else any real numeric dtype is accepted); ``rgb_bands`` three band indices for a
    false-colour picture (red, green, blue).
    """

    name: str
    label: str
    file: str
    key: str
    layout: Layout
    shape: tuple[int, int, int]
    source: str
    url: str | None
    sha256: str | None
    dtype: str | None
    rgb_bands: tuple[int, int, int]
    citation: str = ""


#: The registered scenes by name (the paper's, and the others this library knows).
SCENES: dict[str, SceneInfo] = {
    s.name: s
    for s in (
        SceneInfo(
            "indian_pines", "Indian Pines", "hyperspectral/Indian_pines_corrected.mat",
            "indian_pines_corrected", "cube", (145, 145, 200), GIC_PAGE,
            "http://www.ehu.eus/ccwintco/uploads/6/67/Indian_pines_corrected.mat",
            "ec2f8808710919d566f70f0d4aa885aae1ddfd42b734aba71c5e12ca65450939", "uint16",
            (29, 19, 9), "AVIRIS, NW Indiana 1992 (Baumgardner, Biehl, Landgrebe; PURR)",
        ),
        SceneInfo(
            "pavia_u", "Pavia University", "hyperspectral/PaviaU.mat", "paviaU", "cube",
            (610, 340, 103), GIC_PAGE, "http://www.ehu.eus/ccwintco/uploads/e/ee/PaviaU.mat",
            # the GIC file: 34,806,917 bytes (git blob 6eecc933bedec1130bb046483dd12e25cf091b24)
            "28447fa87f7a5797845e9a189c0da85e23b1d06a4ba7361e5ff44efbf834d2fb", None,
            (55, 41, 12), "ROSIS, Pavia (GIC collection)",
        ),
        SceneInfo(
            "salinas_a", "Salinas-A", "hyperspectral/SalinasA_corrected.mat",
            "salinasA_corrected", "cube", (83, 86, 204), GIC_PAGE,
            "http://www.ehu.eus/ccwintco/uploads/1/1a/SalinasA_corrected.mat",
            "d75684ed3ab71a1024cee0f9db9061f50a3523a92ff5edfbbb1eed976b9f1721", "int16",
            (29, 19, 9), "AVIRIS, Salinas Valley (GIC collection)",
        ),
        SceneInfo(
            "samson", "Samson", "hyperspectral/samson_1.mat", "V", "bands_pixels",
            (95, 95, 156), ZHU_PAGE,
            "https://raw.githubusercontent.com/ricardoborsoi/MUA_SparseUnmixing/"
            "508d637e30d314a4f4db9c8606d25cc183e0e464/real_data/samson_1.mat",
            "1ebacaf7cd32bfc31c0ee3fd56c63a7f29a434893a8b45705fb59cd8a0c8beb6", "float64",
            (80, 48, 16), "Zhu et al., ISPRS J. Photogramm. Remote Sens. 88 (2014)",
        ),
    )
}


@dataclass(frozen=True)
class SceneData:
    """A loaded scene: ``cube`` of shape ``(rows, cols, bands)`` (float64, as stored)."""

    name: str
    label: str
    cube: np.ndarray
    path: str | None = None
    rgb_bands: tuple[int, int, int] | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.cube.shape)  # type: ignore[return-value]

    @property
    def num_pixels(self) -> int:
        return int(self.cube.shape[0] * self.cube.shape[1])

    @property
    def num_bands(self) -> int:
        return int(self.cube.shape[2])

    def false_colour(self) -> np.ndarray:
        """An ``(rows, cols, 3)`` image in [0, 1] from three bands, each stretched to its
        2nd–98th percentile (the bands of ``rgb_bands``, else a quarter, half and
        three-quarters of the way through the spectrum)."""
        b = self.num_bands
        idx = self.rgb_bands or (3 * b // 4, b // 2, b // 4)
        img = self.cube[:, :, [min(i, b - 1) for i in idx]].astype(np.float64)
        lo = np.percentile(img, 2, axis=(0, 1))
        hi = np.percentile(img, 98, axis=(0, 1))
        return np.clip((img - lo) / np.maximum(hi - lo, 1e-12), 0.0, 1.0)


def scene_names() -> list[str]:
    """The registered scene names."""
    return list(SCENES)


def get_scene_info(name: str) -> SceneInfo:
    """The registry entry of scene ``name``."""
    if name not in SCENES:
        raise ValueError(f"Invalid scene: {name!r}; expected one of {scene_names()}")
    return SCENES[name]


def _as_int(value: object, name: str, path: str) -> int:
    arr = np.asarray(value)
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
        raise DataFileError(f"Invalid {name} in {path!r}: {value!r}; expected one number")
    return int(arr.reshape(-1)[0])


def load_mat_scene(
    path: str | os.PathLike[str],
    key: str,
    layout: str = "cube",
    *,
    shape: tuple[int, int, int] | None = None,
    dtype: str | None = None,
    sha256: str | None = None,
    n_rows: int | None = None,
    n_cols: int | None = None,
    name: str | None = None,
    label: str | None = None,
    rgb_bands: tuple[int, int, int] | None = None,
) -> SceneData:
    """Read a scene from the ``.mat`` file at ``path`` (any scene, registered or a user's own).

    ``key``: the array's name in the file; ``layout``: ``"cube"`` or ``"bands_pixels"`` (see the
    module docstring; for the latter the sizes are read from ``nRow``/``nCol`` unless ``n_rows``
    and ``n_cols`` are given). ``shape`` (rows, cols, bands), ``dtype`` and ``sha256``, when
    given, must match or the file is refused (:class:`~gaugebook.engine.datafiles.DataFileError`).
    """
    import scipy.io

    if layout not in LAYOUTS:
        raise ValueError(f"Invalid layout: {layout!r}; expected one of {LAYOUTS}")
    p = Path(path)
    if not p.is_file():
        raise DataFileError(f"Missing data file: {str(p)!r} does not exist")
    verify_sha256(p, sha256)
    try:
        data = scipy.io.loadmat(p)
    except Exception as err:  # noqa: BLE001 - scipy raises several types for a bad file
        raise DataFileError(
            f"Invalid data file: {str(p)!r} could not be read as a MAT-file "
            f"({type(err).__name__}: {err}); a v7.3 file needs converting to v7 first"
        ) from err
    keys = sorted(k for k in data if not k.startswith("__"))
    if key not in data:
        raise DataFileError(f"Invalid key: {key!r} is not in {str(p)!r}; it holds {keys}")
    arr = np.asarray(data[key])
    if arr.dtype.kind not in "iuf":
        raise DataFileError(
            f"Invalid dtype: {str(arr.dtype)!r} of {key!r} in {str(p)!r}; expected a real "
            "numeric array (integer or float)"
        )
    if dtype is not None and str(arr.dtype) != dtype:
        raise DataFileError(
            f"Invalid dtype: {str(arr.dtype)!r} of {key!r} in {str(p)!r}; expected {dtype!r}"
        )
    if layout == "cube":
        if arr.ndim != 3:
            raise DataFileError(
                f"Invalid shape: {arr.shape} of {key!r} in {str(p)!r}; expected a cube "
                "(rows, cols, bands)"
            )
        cube = arr
    else:
        if arr.ndim != 2:
            raise DataFileError(
                f"Invalid shape: {arr.shape} of {key!r} in {str(p)!r}; expected a matrix "
                "(bands, pixels)"
            )
        rows = n_rows if n_rows is not None else (
            _as_int(data["nRow"], "nRow", str(p)) if "nRow" in data else None)
        cols = n_cols if n_cols is not None else (
            _as_int(data["nCol"], "nCol", str(p)) if "nCol" in data else None)
        if rows is None or cols is None:
            raise DataFileError(
                f"Invalid data file: {str(p)!r} has no nRow/nCol; pass n_rows and n_cols "
                "for a bands x pixels layout"
            )
        bands, pixels = arr.shape
        if rows * cols != pixels:
            raise DataFileError(
                f"Invalid shape: {arr.shape} of {key!r} in {str(p)!r}; expected "
                f"{rows} x {cols} = {rows * cols} pixel columns"
            )
        cube = arr.reshape(bands, cols, rows).transpose(2, 1, 0)
    if shape is not None and tuple(cube.shape) != tuple(shape):
        raise DataFileError(
            f"Invalid shape: the cube of {key!r} in {str(p)!r} is {tuple(cube.shape)}; "
            f"expected {tuple(shape)} (rows, cols, bands)"
        )
    cube = np.ascontiguousarray(cube, dtype=np.float64)
    if not np.isfinite(cube).all():
        raise DataFileError(f"Invalid data file: {key!r} in {str(p)!r} has non-finite values")
    return SceneData(name or p.stem, label or name or p.stem, cube, str(p), rgb_bands)


def load_scene(
    name: str, data_dir: str | os.PathLike[str] | None = None, *, download: bool = True
) -> SceneData:
    """Load registered scene ``name``: found in the data folder (or downloaded and verified),
    then checked against its registered key, layout, shape, dtype and SHA-256."""
    info = get_scene_info(name)
    path = find_file(info.file, sha256=info.sha256, url=info.url, data_dir=data_dir,
                     download=download)
    return load_mat_scene(
        path, info.key, info.layout, shape=info.shape, dtype=info.dtype, name=info.name,
        label=info.label, rgb_bands=info.rgb_bands,
    )


def available_scenes(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Registered scenes whose file is present in the data folder (no download, no loading)."""
    out = []
    for name, info in SCENES.items():
        try:
            find_file(info.file, data_dir=data_dir, download=False)
        except DataFileError:
            continue
        out.append(name)
    return out
