"""Data files — where they are, whether they are the right ones, how to load them.

``files``      find a data file in the data folder, verify its SHA-256, download it with pooch
``scenes``     the hyperspectral scene registry and loaders for any ``.mat`` scene
``synthetic``  a small synthetic hyperspectral scene from a seed (the quick-scale default)
``text``       the tiny-shakespeare corpus (character-level language modelling)
"""

# Developer note (layers, gaugekit/__init__.py): floor 2, data/, on config.

from gaugekit.data.files import (
    DataFileError,
    MissingDataFileError,
    find_file,
    search_dirs,
    sha256_file,
    verify_sha256,
)

__all__ = [
    "DataFileError",
    "MissingDataFileError",
    "find_file",
    "search_dirs",
    "sha256_file",
    "verify_sha256",
]
