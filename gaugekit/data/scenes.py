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
scene through :func:`gaugekit.data.find_file` (data folder first, then a pooch download);
:func:`load_mat_scene` reads a user's own file. A file whose checksum, key, shape or dtype does not
match is refused with :class:`~gaugekit.data.DataFileError`, never silently used.

A *scene config* names a scene as JSON data (part of the run ids of the experiments that use
it): ``{"source": "registry", "name", "sha256"}``, ``{"source": "synthetic", "rows", "cols",
"bands", "endmembers", "noise", "seed"}`` (:func:`gaugekit.data.synthetic.make_synthetic_scene`)
or ``{"source": "file", "path", "key", "layout", "n_rows", "n_cols", "sha256"}``;
:class:`SceneRef` carries one with what an experiment needs to plan its runs
(:func:`registered_scene`, :func:`synthetic_scene`, :func:`user_scene`), and
:func:`load_scene_config` loads it back, checked.
"""

# Developer note (layers, gaugekit/__init__.py): floor 2, data/, on config.

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gaugekit._extras import require_extra
from gaugekit.data.files import DataFileError, find_file, sha256_file, verify_sha256

__all__ = [
    "DENSITY_LABELS",
    "LAYOUTS",
    "SCENES",
    "SceneData",
    "SceneInfo",
    "SceneRef",
    "available_scenes",
    "get_scene_info",
    "load_mat_scene",
    "load_scene",
    "load_scene_config",
    "registered_scene",
    "scene_names",
    "synthetic_scene",
    "user_scene",
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


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"Invalid layout: {layout!r}; expected one of {LAYOUTS}")


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
    given, must match or the file is refused (:class:`~gaugekit.data.DataFileError`).
    """
    require_extra("load_mat_scene", "experiments", "scipy")
    import scipy.io

    _check_layout(layout)
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


def load_scene_config(config: Mapping[str, Any]) -> SceneData:
    """Load the scene of a scene config (registry, synthetic or file; module docstring),
    checked: a registry config must carry the registry's SHA-256, a file config its file's."""
    source = config.get("source")
    if source == "registry":
        scene = load_scene(config["name"])
        if config.get("sha256") != SCENES[config["name"]].sha256:
            raise ValueError(f"Invalid scene config: {dict(config)!r}; its sha256 is not the "
                             "registry's")
        return scene
    if source == "synthetic":
        from gaugekit.data.synthetic import make_synthetic_scene  # synthetic stands on SceneData

        kw = {k: config[k] for k in ("rows", "cols", "bands", "endmembers", "noise", "seed")}
        return make_synthetic_scene(**kw)
    if source == "file":
        return load_mat_scene(config["path"], config["key"], config["layout"],
                              sha256=config["sha256"], n_rows=config.get("n_rows"),
                              n_cols=config.get("n_cols"))
    raise ValueError(f"Invalid scene source: {source!r}; expected registry, synthetic or file")


# --------------------------------------------------------------------------------------------
# scenes in run configs
# --------------------------------------------------------------------------------------------

#: The labels of the two sampling densities of the hyperspectral experiment (low, high).
DENSITY_LABELS: tuple[str, ...] = ("low", "high")


@dataclass(frozen=True)
class SceneRef:
    """A scene as an experiment's config holds it: its scene ``config`` (JSON data, part of
    every run id; module docstring), a label, the number of bands and of non-zero pixels, and
    the labels of the sampling densities an experiment runs on it (:data:`DENSITY_LABELS`)."""

    name: str
    label: str
    config: Mapping[str, Any]
    bands: int
    pixels: int
    densities: tuple[str, ...] = DENSITY_LABELS

    def __hash__(self) -> int:
        return hash((self.name, json.dumps(dict(self.config), sort_keys=True), self.densities))


def registered_scene(name: str, densities: tuple[str, ...] = DENSITY_LABELS) -> SceneRef:
    """The :class:`SceneRef` of a registered scene (no file needed: shapes come from the
    registry; every pixel of a registered scene is non-zero somewhere)."""
    info = get_scene_info(name)
    rows, cols, bands = info.shape
    config = {"source": "registry", "name": name, "sha256": info.sha256}
    return SceneRef(name, info.label, config, bands, rows * cols, densities)


def synthetic_scene(
    rows: int = 40, cols: int = 40, bands: int = 64, endmembers: int = 5,
    noise: float = 0.005, seed: int = 0, densities: tuple[str, ...] = DENSITY_LABELS,
) -> SceneRef:
    """The :class:`SceneRef` of a synthetic scene
    (:func:`~gaugekit.data.synthetic.make_synthetic_scene`)."""
    config = {"source": "synthetic", "rows": rows, "cols": cols, "bands": bands,
              "endmembers": endmembers, "noise": noise, "seed": seed}
    label = f"synthetic ({rows}×{cols}×{bands}, {endmembers} endmembers)"
    return SceneRef("synthetic", label, config, bands, rows * cols, densities)


def user_scene(
    path: str | Path,
    key: str,
    layout: str = "cube",
    *,
    n_rows: int | None = None,
    n_cols: int | None = None,
    name: str | None = None,
    densities: tuple[str, ...] = DENSITY_LABELS,
) -> SceneRef:
    """The :class:`SceneRef` of a user's ``.mat`` scene (loaded once here to check it and count
    its pixels; its SHA-256 enters the run ids, so a changed file never reuses records)."""
    p = Path(path).expanduser().resolve()
    scene = load_mat_scene(p, key, layout, n_rows=n_rows, n_cols=n_cols, name=name)
    config = {"source": "file", "path": str(p), "key": key, "layout": layout,
              "n_rows": n_rows, "n_cols": n_cols, "sha256": sha256_file(p)}
    flat = scene.cube.reshape(-1, scene.num_bands)
    pixels = int((flat != 0).any(axis=1).sum())
    stem = name or p.stem
    return SceneRef(stem, stem, config, scene.num_bands, pixels, densities)
