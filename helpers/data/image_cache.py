"""Decoded images of the real-data folders (ISIC 2018, ChestX-ray14), cached in the data directory: every image
decoded and resized by one pipeline (:func:`helpers.data.decode_resized`) once, then read back from
``<data dir>/cache`` while the image files are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np

from helpers.data import image_files
from helpers.data.locations import cache_dir_default
from helpers.data.npz_files import read_npz, write_npz

_DECODE_CACHE_VERSION = 3  # bump when decode_resized's output changes (3: 16-bit images scaled, not clipped)


def check_image_size(image_size: int) -> None:
    """A ValueError unless ``image_size`` (the side of the decoded images) is an integer >= 8."""
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 8:
        raise ValueError(f"image_size must be an integer >= 8, got {image_size!r}")


def decode_cached(
    dataset: str,
    root: Path,
    paths: dict[str, list[Path]],
    image_size: int,
    mode: str,
    cache: bool,
    cache_dir: str | os.PathLike | None,
) -> tuple[dict[str, np.ndarray], Path]:
    """(split -> uint8 images decoded by ``image_files.decode_resized``, cache path), from the cache when its
    fingerprint (the files' names, sizes, modification and status-change times and inodes
    (:func:`helpers.data.image_files.files_fingerprint`), the size, mode and resize method) matches, else decoded
    and cached; a damaged cache file is rebuilt with a warning. The cache file is
    ``<cache dir>/<dataset>-<hash of root>-<size>px.npz``, written atomically."""
    fingerprint = hashlib.sha256(f"{_DECODE_CACHE_VERSION}|{image_size}|{mode}|{image_files.RESIZE_METHOD}".encode())
    for split, split_paths in paths.items():
        fingerprint.update(f"|{split}:{image_files.files_fingerprint(split_paths)}".encode())
    root_key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    cache_path = Path(cache_dir or cache_dir_default()) / f"{dataset}-{root_key}-{image_size}px.npz"
    keys = [f"{split}_images" for split in paths]
    if cache:
        arrays = _read_cache(cache_path, keys, fingerprint.hexdigest())
        if arrays is not None:
            return {split: arrays[f"{split}_images"] for split in paths}, cache_path
    every_image = image_files.decode_resized(
        [path for split_paths in paths.values() for path in split_paths], image_size, mode, f"decoding {dataset} images"
    )
    ends = np.cumsum([len(split_paths) for split_paths in paths.values()])
    decoded = dict(zip(paths, np.split(every_image, ends[:-1])))
    if cache:
        try:
            write_npz(
                cache_path,
                {
                    **{f"{split}_images": images for split, images in decoded.items()},
                    "fingerprint": np.array(fingerprint.hexdigest()),
                },
            )
        except OSError as error:  # the cache only saves time; the data are already loaded
            warnings.warn(
                f"could not write the image cache {cache_path} ({error}); the next load decodes the images again",
                stacklevel=3,
            )
    return decoded, cache_path


def _read_cache(path: Path, keys: list[str], fingerprint: str) -> dict[str, np.ndarray] | None:
    """The cached arrays when the cache file at ``path`` matches ``fingerprint``; None when there is none or it is
    of other images. A damaged cache file (truncated, not an archive, an array missing) is only derived data: a
    warning names it and None lets the images be decoded again and the file rewritten."""
    if not path.is_file():
        return None
    try:
        stored = read_npz(path, ["fingerprint"], "")
        if str(stored["fingerprint"]) != fingerprint:
            return None
        return read_npz(path, keys, "")
    except ValueError as error:
        warnings.warn(
            f"the image cache {path} is damaged ({error}); it is rebuilt from the images (decoding them again)",
            stacklevel=4,
        )
        return None
