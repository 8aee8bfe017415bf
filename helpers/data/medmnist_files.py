"""MedMNIST 2D data sets (``dermamnist``, ``chestmnist``, ...) from medmnist's .npz files, read once into uint8
tensors with numpy (no medmnist ``Dataset``, no download while loading); the synthetic sets are written in the same
format and read back through :func:`read_medmnist_file` too.

A missing file raises ``FileNotFoundError`` naming the file expected, the command that downloads it
(``python -m helpers.data fetch NAME``, :mod:`helpers.data.fetch`), its download URL and md5, and where to put it; a
damaged or wrong-shaped file raises ``ValueError``.
"""

from __future__ import annotations

import os
from pathlib import Path

from medmnist import INFO

from helpers.data.bundle import (
    MULTI_CLASS,
    MULTI_LABEL,
    SPLITS,
    DatasetBundle,
    Split,
    images_to_tensor,
    labels_to_tensor,
)
from helpers.data.label_stats import file_md5
from helpers.data.locations import resolve_data_dir
from helpers.data.npz_files import check_regular_file, read_npz
from helpers.utils import DATA_DIR_ENV

MEDMNIST_SIZES = (28, 64, 128, 224)
MEDMNIST_2D = tuple(name for name, info in INFO.items() if not name.endswith("3d"))
_SPLIT_ARRAYS = [f"{split}_{kind}" for split in SPLITS for kind in ("images", "labels")]  # keys of a medmnist .npz


def medmnist_filename(name: str, image_size: int = 28) -> str:
    """medmnist's file name: ``dermamnist.npz`` at 28 px, ``dermamnist_64.npz`` etc. otherwise."""
    return f"{name}.npz" if image_size == 28 else f"{name}_{image_size}.npz"


def _medmnist_key(image_size: int) -> str:
    return "" if image_size == 28 else f"_{image_size}"


def medmnist_task(info: dict) -> str:
    """``multi-class`` or ``multi-label``: the task of a set from its ``medmnist.INFO`` entry."""
    # binary-class and ordinal-regression sets have one integer label per image: treated as multi-class
    return MULTI_LABEL if info["task"].startswith("multi-label") else MULTI_CLASS


def _where_to_put(directory: Path) -> str:
    return (
        f"Put it in the data directory {directory} (chosen by the data_dir argument, else the environment "
        f"variable {DATA_DIR_ENV}, else <repo>/data)."
    )


def load_medmnist(name: str, image_size: int = 28, data_dir: str | os.PathLike | None = None) -> DatasetBundle:
    """A MedMNIST 2D data set (e.g. ``dermamnist``, ``chestmnist``) at 28/64/128/224 px from medmnist's .npz file.

    The file is ``<data dir>/<name>.npz`` (28 px) or ``<name>_<size>.npz`` as medmnist names it; it is read once
    with numpy (no medmnist ``Dataset``, no download). Metadata (task, label names, channels, URL, md5, licence)
    come from ``medmnist.INFO``. A file whose md5 differs from the official release is accepted and the fact is
    noted in ``describe()`` (the shared DermaMNIST copy was rebuilt from JPEG copies); split sizes are not checked
    against INFO either (synthetic files use the same format with other sizes).
    """
    name = name.strip().lower()
    if name not in MEDMNIST_2D:
        raise ValueError(f"unknown MedMNIST 2D data set {name!r}; valid names: {', '.join(MEDMNIST_2D)}")
    if image_size not in MEDMNIST_SIZES:
        raise ValueError(f"MedMNIST 2D comes in sizes {MEDMNIST_SIZES}, got image_size={image_size!r}")
    info = INFO[name]
    directory = resolve_data_dir(data_dir)
    path = directory / medmnist_filename(name, image_size)
    url, md5 = info[f"url{_medmnist_key(image_size)}"], info[f"MD5{_medmnist_key(image_size)}"]
    command = f"python -m helpers.data fetch {name}" + ("" if image_size == 28 else f" --size {image_size}")
    fetch = (
        f"Run `{command}`, or download it from {url} (md5 {md5}); see {info['python_class']} on https://medmnist.com/."
    )
    check_regular_file(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{info['python_class']} ({name}, {image_size} px) not found: expected the file {path}. "
            f"No download is attempted. {fetch} {_where_to_put(directory)}"
        )
    return read_medmnist_file(name, image_size, path, f"Replace it with the official file: {fetch}")


def read_medmnist_file(
    name: str, image_size: int, path: Path, repair_hint: str, generated: bool = False
) -> DatasetBundle:
    """Read a medmnist-format file of the data set ``name``; a damaged file is a ValueError naming it and ending
    with ``repair_hint`` (download the official file, or delete a generated one so it is generated again).
    ``generated``: a synthetic set written in this format, which has no published copy to compare md5s with."""
    info = INFO[name]
    md5 = info[f"MD5{_medmnist_key(image_size)}"]
    task, n_channels = medmnist_task(info), int(info["n_channels"])
    class_names = [info["label"][str(k)] for k in range(len(info["label"]))]
    arrays = read_npz(path, _SPLIT_ARRAYS, repair_hint)
    splits = {}
    try:
        for split in SPLITS:
            images = images_to_tensor(arrays[f"{split}_images"], path, f"{split}_images", n_channels, image_size)
            labels = labels_to_tensor(
                arrays[f"{split}_labels"], path, f"{split}_labels", task, len(class_names), len(images)
            )
            splits[split] = Split(images, labels)
    except ValueError as error:
        raise ValueError(f"{error}. {repair_hint}") from error
    actual_md5 = file_md5(path)
    if generated:
        note = f"A generated file (md5 {actual_md5}); a synthetic set has no published copy to check it against."
    elif actual_md5 == md5:
        note = "The file's md5 matches the official release."
    else:
        note = f"The file's md5 ({actual_md5}) differs from the official release ({md5})."
    return DatasetBundle(
        name=name,
        task=task,
        class_names=class_names,
        **splits,
        source=str(path),
        licence=info["license"],
        image_size=image_size,
        checks=[note],
    )
