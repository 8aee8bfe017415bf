"""Where the data live: the data directory (the ``data_dir`` argument, else the environment variable
``CALIBMED_DATA_DIR``, else ``data/`` in the repository root) and the folder of decoded-image caches in it.

Loading never downloads: a loader that misses a file raises ``FileNotFoundError`` naming the file expected, the
data set, its download URL and md5, and where to put it; ``python -m helpers.data fetch NAME``
(:mod:`helpers.data.fetch`) downloads it.
"""

from __future__ import annotations

import os
from pathlib import Path

from helpers.utils import DATA_DIR_ENV, REPO_ROOT


def repo_root() -> Path:
    """The repository root: the parent of the ``helpers`` package."""
    return REPO_ROOT


def resolve_data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data directory: ``path`` if given, else ``$CALIBMED_DATA_DIR``, else ``<repo root>/data``."""
    if path is not None:
        return Path(path).expanduser()
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser()
    return repo_root() / "data"


data_dir = resolve_data_dir  # the public name; loaders use resolve_data_dir because their argument is data_dir


def cache_dir_default(data_dir: str | os.PathLike | None = None) -> Path:
    """Where decoded image arrays are cached: ``<data dir>/cache`` (derived data, like the synthetic sets; never
    inside the data set's own folder, which may be read-only or shared)."""
    return resolve_data_dir(data_dir) / "cache"
