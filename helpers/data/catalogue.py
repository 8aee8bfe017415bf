"""Every data set by name: MedMNIST 2D, ISIC 2018 Task 3, NIH ChestX-ray14 and the synthetic sets with exact
posteriors; their tasks without loading them, which files the data directory holds, and :func:`load_dataset`.

Every loader reads its files once into ``uint8 (N, C, H, W)`` tensors (no per-item PIL in the training path) and
returns a :class:`~helpers.data.DatasetBundle`. Loading never downloads: a missing file raises
``FileNotFoundError`` naming the file expected, the data set, its download URL and md5, and where to put it
(``python -m helpers.data fetch NAME`` downloads it, :mod:`helpers.data.fetch`).
Corrupt or wrong-shaped files raise ``ValueError``; nothing is ever substituted silently.

Data directory: the ``data_dir`` argument, else the environment variable ``CALIBMED_DATA_DIR``, else ``data/`` in
the repository root (:mod:`helpers.data.locations`).
"""

from __future__ import annotations

import os

from medmnist import INFO

from helpers.data.bundle import MULTI_CLASS, DatasetBundle, subsample_train
from helpers.data.chestxray14_bundle import load_chestxray14
from helpers.data.isic2018_bundle import load_isic2018
from helpers.data.locations import cache_dir_default, resolve_data_dir
from helpers.data.medmnist_files import MEDMNIST_2D, MEDMNIST_SIZES, load_medmnist, medmnist_filename, medmnist_task
from helpers.data.synthetic_sets import GENERATORS, MEDMNIST_FLAGS, load_synthetic
from helpers.utils import display_path

SYNTHETIC_NAMES = tuple(GENERATORS)
DATASET_NAMES = MEDMNIST_2D + ("isic2018", "chestxray14") + SYNTHETIC_NAMES


def inventory(
    data_dir: str | os.PathLike | None = None, names: tuple[str, ...] = ("dermamnist", "chestmnist")
) -> list[dict[str, object]]:
    """Which dataset files are present in the data directory: one row per MedMNIST set and size, plus the ISIC 2018
    and ChestX-ray14 folders.

    Only looks at file names (nothing is loaded); notebook 00 prints it as the data check.
    """
    directory = resolve_data_dir(data_dir)
    rows: list[dict[str, object]] = []
    for name in names:
        for size in MEDMNIST_SIZES:
            path = directory / medmnist_filename(name, size)
            rows.append({"dataset": name, "size": size, "file": str(path), "present": path.is_file()})
    for name, folder in (("isic2018", "ISIC2018"), ("chestxray14", "ChestXray14")):
        rows.append(
            {"dataset": name, "size": "any", "file": str(directory / folder), "present": (directory / folder).is_dir()}
        )
    return rows


def inventory_report(data_dir: str | os.PathLike | None = None) -> str:
    """``inventory`` as the lines notebook 00 prints: the data directory and one line per file, every path as
    ``helpers.utils.display_path`` writes it (relative to the repository, or under ``$CALIBMED_DATA_DIR``)."""
    lines = [f"data directory: {display_path(resolve_data_dir(data_dir))}"]
    for row in inventory(data_dir):
        size = f"{row['size']} px" if isinstance(row["size"], int) else "folder"
        lines.append(
            f"  {row['dataset']:12s} {size:>7s}  {'present' if row['present'] else 'missing':8s} "
            f"{display_path(str(row['file']))}"
        )
    return "\n".join(lines)


def dataset_task(name: str) -> str:
    """``multi-class`` or ``multi-label``: the task of a data set :func:`load_dataset` knows, without loading it
    (binary and ordinal MedMNIST sets count as multi-class, as when loaded)."""
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in DATASET_NAMES:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASET_NAMES)}")
    if key == "isic2018":
        return MULTI_CLASS
    return medmnist_task(INFO[MEDMNIST_FLAGS.get(key, key)])


def load_dataset(
    name: str,
    image_size: int = 28,
    data_dir: str | os.PathLike | None = None,
    max_train: int | None = None,
    seed: int = 0,
    label_disagreement: str | None = None,
) -> DatasetBundle:
    """Load a data set by name: a MedMNIST 2D name (``dermamnist``, ``chestmnist``, ...), ``isic2018`` (from
    ``<data dir>/ISIC2018``, :func:`helpers.data.load_isic2018`), ``chestxray14`` (from ``<data dir>/ChestXray14``,
    :func:`helpers.data.load_chestxray14`) or a synthetic set: ``synthetic_dermamnist``, ``synthetic_chestmnist``
    (labels coupled given the image) or ``synthetic_chestmnist_independent`` (independent given the image), 28 px
    only.
    The two real-data folders take any ``image_size`` and cache their decoded images in ``<data dir>/cache``.

    ``max_train`` keeps a seeded random subset of the training split (``seed``); validation and test are
    untouched. Synthetic sets are always generated with seed 0, and ISIC 2018's validation carve uses seed 0, so
    ``seed`` only picks the subset. ``label_disagreement``: ``chestxray14`` only (see
    :func:`helpers.data.load_chestxray14`; default ``"lists"``).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in DATASET_NAMES:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASET_NAMES)}")
    if key != "chestxray14" and label_disagreement is not None:
        raise ValueError(f"label_disagreement applies to chestxray14 only, not to {key}")
    if key in SYNTHETIC_NAMES:
        if image_size != 28:
            raise ValueError(f"{key} exists only at 28 px, got image_size={image_size!r}")
        bundle = load_synthetic(key, data_dir)
    elif key == "isic2018":
        bundle = load_isic2018(
            resolve_data_dir(data_dir) / "ISIC2018", image_size, cache_dir=cache_dir_default(data_dir)
        )
    elif key == "chestxray14":
        bundle = load_chestxray14(
            resolve_data_dir(data_dir) / "ChestXray14",
            image_size,
            cache_dir=cache_dir_default(data_dir),
            label_disagreement=label_disagreement or "lists",
        )
    else:
        bundle = load_medmnist(key, image_size, data_dir)
    if max_train is not None:
        bundle = subsample_train(bundle, max_train, seed)
    return bundle
