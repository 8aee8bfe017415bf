"""Image files on disk: find them, fingerprint them, decode them into one uint8 array with one resize method.

Every real-data layout (ISIC 2018 Task 3, NIH ChestX-ray14) goes through ``decode_resized``, so every split of
every data set is preprocessed the same way: the whole image is read, a 16-bit image scaled to 8 bits by its bit
depth, converted to RGB or grayscale, and resized
to ``image_size x image_size`` with PIL's antialiased bicubic filter (aspect ratio not kept, as MedMNIST does).
No JPEG draft decoding: its scale depends on the source size, which differs between the splits of ISIC 2018.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

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
    """sha256 over each file's name, size, inode, modification and status-change time: changes when a file is
    replaced, rewritten or touched, also when it is rewritten at the same size and its modification time is put back
    (``os.utime``, ``touch -r``, ``cp -p``), since that sets the status-change time (``st_ctime``), which no user
    can set. It does not read the files' bytes (hashing every image would cost seconds on each load), so a file
    rewritten by someone who also resets the system clock is not seen; delete the cache to be sure."""
    digest = hashlib.sha256()
    for path in paths:
        status = os.stat(path)
        digest.update(
            f"{path.name}\0{status.st_size}\0{status.st_ino}\0{status.st_mtime_ns}\0{status.st_ctime_ns}\n".encode()
        )
    return digest.hexdigest()


#: PIL's modes of 16-bit grayscale images (a 16-bit PNG opens as "I;16"): scaled to 8 bits by their bit depth
SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N")


def eight_bit(image: Any, path: Path) -> Any:
    """``image`` with 8 bits per channel: a 16-bit grayscale image scaled by its bit depth (v / 257, rounded: 0 -> 0,
    65535 -> 255), as an 8-bit export of it would be; PIL's own ``convert("L")`` clips every value above 255, which
    leaves an X-ray two grey levels. A 32-bit integer or floating-point image (no fixed range) raises ValueError
    naming the file. Other images are returned as they are."""
    from PIL import Image

    if image.mode in SIXTEEN_BIT_MODES:
        scaled = np.rint(np.asarray(image, dtype=np.float64) / 257.0).astype(np.uint8)
        return Image.fromarray(scaled, mode="L")
    if image.mode in ("I", "F"):
        raise ValueError(
            f"{path} is a {'32-bit integer' if image.mode == 'I' else 'floating-point'} image (PIL mode "
            f"{image.mode}) with no fixed range to scale to 8 bits; export it as an 8-bit or 16-bit PNG or a JPEG"
        )
    return image


def decode_resized(paths: list[Path], image_size: int, mode: str, desc: str) -> np.ndarray:
    """Every image decoded once and resized to ``image_size``: uint8 (N, H, W, 3) for ``mode="RGB"``, (N, H, W)
    for ``mode="L"``; a 16-bit image is first scaled to 8 bits by its bit depth (:func:`eight_bit`). A file PIL
    cannot read, or refuses as a decompression bomb, raises ValueError naming it. Shows progress (``desc``)."""
    from PIL import Image, UnidentifiedImageError

    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    shape = (image_size, image_size) + ((3,) if mode == "RGB" else ())
    out = np.empty((len(paths), *shape), dtype=np.uint8)
    bar = progress_bar(paths, desc=desc, total=len(paths))
    for index, path in enumerate(bar):  # decoding files is inherently one file at a time
        try:
            with Image.open(path) as image:
                resized = (
                    eight_bit(image, path).convert(mode).resize((image_size, image_size), Image.Resampling.BICUBIC)
                )
        except Image.DecompressionBombError as error:
            raise ValueError(
                f"cannot decode the image {path}: PIL refuses it as a possible decompression bomb ({error}); "
                "replace it with the file from the official download, or, if it is a genuine image that large, "
                "raise PIL.Image.MAX_IMAGE_PIXELS before loading"
            ) from error
        except (UnidentifiedImageError, OSError, SyntaxError) as error:
            raise ValueError(
                f"cannot decode the image {path} ({type(error).__name__}: {error}); replace it with "
                f"the file from the official download"
            ) from error
        out[index] = np.asarray(resized)
    bar.close()
    return out
