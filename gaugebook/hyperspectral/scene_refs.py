"""Scenes in run configs: the JSON config that names a scene (a registered one, a synthetic
one, or a user's ``.mat`` file) and carries its SHA-256 into every run id, and the loader that
turns the config back into the checked :class:`~gaugebook.hyperspectral.scenes.SceneData`.

:class:`SceneRef` carries a scene config with what an experiment needs to plan its runs
(bands, non-zero pixels, sampling densities); :func:`registered_scene`, :func:`synthetic_scene`
and :func:`user_scene` make one; :func:`load_scene_config` loads its scene back, checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gaugebook.engine.datafiles import sha256_file
from gaugebook.hyperspectral.scenes import (
    SCENES,
    SceneData,
    get_scene_info,
    load_mat_scene,
    load_scene,
)
from gaugebook.hyperspectral.synthetic_scene import make_synthetic_scene

__all__ = [
    "DENSITY_LABELS",
    "SceneRef",
    "load_scene_config",
    "registered_scene",
    "synthetic_scene",
    "user_scene",
]


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
        kw = {k: config[k] for k in ("rows", "cols", "bands", "endmembers", "noise", "seed")}
        return make_synthetic_scene(**kw)
    if source == "file":
        return load_mat_scene(config["path"], config["key"], config["layout"],
                              sha256=config["sha256"], n_rows=config.get("n_rows"),
                              n_cols=config.get("n_cols"))
    raise ValueError(f"Invalid scene source: {source!r}; expected registry, synthetic or file")


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
    (:func:`~gaugebook.hyperspectral.synthetic_scene.make_synthetic_scene`)."""
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
