"""Image files on disk: find them, fingerprint them, decode them into one uint8 array with one resize method.

Every real-data layout (ISIC 2018 Task 3, NIH ChestX-ray14) goes through ``decode_resized``, so every split of
every data set is preprocessed the same way: the whole image is read, converted to RGB or grayscale, and resized
to ``image_size x image_size`` with PIL's antialiased bicubic filter (aspect ratio not kept, as MedMNIST does).
No JPEG draft decoding: its scale depends on the source size, which differs between the splits of ISIC 2018.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from helpers.utils import progress_bar

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG")
RESIZE_METHOD = "PIL bicubic (antialiased), whole image, aspect ratio not kept"
MODES = {"RGB": 3, "L": 1}


def find_image(folder: Path, stem: str) -> Path | None:
    """The file ``<folder>/<stem><suffix>`` for the first image suffix that exists, else None."""
    for suffix in IMAGE_SUFFIXES:
        candidate = folder / (stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def files_fingerprint(paths: list[Path]) -> str:
    """sha256 over each file's name, size and modification time: changes when a file is replaced or touched."""
    digest = hashlib.sha256()
    for path in paths:
        status = os.stat(path)
        digest.update(f"{path.name}\0{status.st_size}\0{status.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def decode_resized(paths: list[Path], image_size: int, mode: str, desc: str) -> np.ndarray:
    """Every image decoded once and resized to ``image_size``: uint8 (N, H, W, 3) for ``mode="RGB"``, (N, H, W)
    for ``mode="L"``. A file PIL cannot read raises ValueError naming it. Shows progress (``desc``)."""
    from PIL import Image, UnidentifiedImageError

    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    shape = (image_size, image_size) + ((3,) if mode == "RGB" else ())
    out = np.empty((len(paths), *shape), dtype=np.uint8)
    bar = progress_bar(paths, desc=desc, total=len(paths))
    for index, path in enumerate(bar):  # decoding files is inherently one file at a time
        try:
            with Image.open(path) as image:
                resized = image.convert(mode).resize((image_size, image_size), Image.Resampling.BICUBIC)
        except (UnidentifiedImageError, OSError, SyntaxError) as error:
            raise ValueError(
                f"cannot decode the image {path} ({type(error).__name__}: {error}); replace it with "
                f"the file from the official download"
            ) from error
        out[index] = np.asarray(resized)
    bar.close()
    return out
