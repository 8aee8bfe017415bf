"""The synthetic sets by name (:data:`GENERATORS`), written as medmnist-format files plus a posteriors file into
``<data dir>/synthetic`` on first use and read back through the real-data code path (:func:`load_synthetic`).
The generators: :mod:`helpers.data.synthetic_multiclass` and :mod:`helpers.data.synthetic_multilabel`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from helpers.data import synthetic_multiclass, synthetic_multilabel
from helpers.data.bundle import MULTI_CLASS, MULTI_LABEL, SPLITS, DatasetBundle
from helpers.data.locations import resolve_data_dir
from helpers.data.medmnist_files import medmnist_filename, read_medmnist_file
from helpers.data.npz_files import read_npz, write_npz
from helpers.data.synthetic_common import GENERATOR_VERSION, SyntheticDataset
from helpers.data.synthetic_multiclass import make_synthetic_dermamnist
from helpers.data.synthetic_multilabel import make_synthetic_chestmnist
from helpers.utils import DATA_DIR_ENV

GENERATORS: dict[str, Callable[..., SyntheticDataset]] = {
    "synthetic_dermamnist": make_synthetic_dermamnist,
    "synthetic_chestmnist": make_synthetic_chestmnist,
    "synthetic_chestmnist_independent": functools.partial(make_synthetic_chestmnist, variant="independent"),
}
#: the medmnist file format (and label names) each synthetic set is written in
MEDMNIST_FLAGS: dict[str, str] = {
    "synthetic_dermamnist": "dermamnist",
    "synthetic_chestmnist": "chestmnist",
    "synthetic_chestmnist_independent": "chestmnist",
}
#: the module that generates each task's sets, named in a bundle's ``source``
_GENERATOR_MODULES = {MULTI_CLASS: synthetic_multiclass.__name__, MULTI_LABEL: synthetic_multilabel.__name__}


def posteriors_path(path: str | os.PathLike) -> Path:
    """Where the posteriors file of a medmnist-format file lives: ``<stem>_posteriors.npz`` next to it."""
    path = Path(path)
    return path.with_name(path.stem + "_posteriors.npz")


def write_medmnist_npz(path: str | os.PathLike, dataset: SyntheticDataset) -> tuple[Path, Path]:
    """Write ``dataset`` as a medmnist-format file at ``path`` plus its posteriors file; returns both paths.

    medmnist layout: ``{split}_images`` uint8 (N, 28, 28) or (N, 28, 28, 3); ``{split}_labels`` uint8 (N, 1)
    (multi-class) or (N, T) (multi-label). The posteriors file holds ``{split}_posteriors`` (float64),
    ``gt_<name>`` for each ground-truth array, ``generator_version`` and ``seed``.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"path must end in .npz (medmnist names files like {dataset.medmnist_flag}.npz), got {path}")
    images_and_labels, posteriors = {}, {}
    for split_name, split in dataset.splits().items():
        labels = split.labels.reshape(-1, 1) if dataset.task == MULTI_CLASS else split.labels
        images_and_labels[f"{split_name}_images"] = split.images.astype(np.uint8)
        images_and_labels[f"{split_name}_labels"] = labels.astype(np.uint8)
        posteriors[f"{split_name}_posteriors"] = split.posteriors.astype(np.float64)
    posteriors.update({f"gt_{key}": np.asarray(value) for key, value in dataset.ground_truth.items()})
    posteriors["generator_version"] = np.array(GENERATOR_VERSION)
    posteriors["seed"] = np.array(dataset.seed)
    write_npz(path, images_and_labels)
    write_npz(posteriors_path(path), posteriors)
    return path, posteriors_path(path)


def synthetic_dir(name: str, data_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """Folder of a generated synthetic set: ``<data dir>/synthetic/<name>-v<version>-seed<seed>``."""
    return resolve_data_dir(data_dir) / "synthetic" / f"{name}-v{GENERATOR_VERSION}-seed{seed}"


def load_synthetic(name: str, data_dir: str | os.PathLike | None = None, seed: int = 0) -> DatasetBundle:
    """A synthetic set with exact posteriors (default sizes), generated into the data directory on first use.

    The medmnist-format file is read back as :func:`helpers.data.load_medmnist` reads a file (the real-data code
    path); the true posteriors and the generator's ground truth come from the posteriors file next to it.
    """
    if name not in GENERATORS:
        raise ValueError(f"unknown synthetic set {name!r}; valid names: {', '.join(GENERATORS)}")
    folder = synthetic_dir(name, data_dir, seed)
    flag = MEDMNIST_FLAGS[name]
    path = folder / medmnist_filename(flag)
    if not (path.is_file() and posteriors_path(path).is_file()):
        try:
            write_medmnist_npz(path, GENERATORS[name](seed=seed))
        except OSError as error:
            raise OSError(
                f"cannot write the synthetic set {name} into {folder} ({error}); point {DATA_DIR_ENV} "
                f"(or data_dir) at a writable folder"
            ) from error
    regenerate = f"Delete {folder} to regenerate it."
    bundle = read_medmnist_file(flag, 28, path, regenerate, generated=True)
    extra_keys = [f"{split}_posteriors" for split in SPLITS]
    posteriors_file = posteriors_path(path)
    arrays = read_npz(posteriors_file, extra_keys, regenerate)
    true_posteriors = {}
    for split in SPLITS:
        values = torch.from_numpy(arrays[f"{split}_posteriors"].astype(np.float64))
        if values.shape != (len(bundle.splits()[split]), bundle.n_classes):
            raise ValueError(
                f"{posteriors_file}: {split}_posteriors has shape {tuple(values.shape)}, expected "
                f"({len(bundle.splits()[split])}, {bundle.n_classes}). Delete {folder} to regenerate."
            )
        true_posteriors[split] = values
    with np.load(posteriors_file, allow_pickle=False) as archive:
        version = int(archive["generator_version"]) if "generator_version" in archive.files else None
        ground_truth = {key[3:]: torch.from_numpy(archive[key]) for key in archive.files if key.startswith("gt_")}
    if version != GENERATOR_VERSION:
        raise ValueError(
            f"{posteriors_file} was written by generator version {version}, this code is version "
            f"{GENERATOR_VERSION}. Delete {folder} to regenerate it."
        )
    bundle.name = name
    bundle.source = f"{path} (generated by {_GENERATOR_MODULES[bundle.task]} v{GENERATOR_VERSION}, seed {seed})"
    bundle.licence = "generated data, no third-party licence (label names from MedMNIST)"
    bundle.true_posteriors = true_posteriors
    bundle.ground_truth = ground_truth
    bundle.notes = ["Labels were sampled from the exact posteriors, so they are noisy by design."]
    if bundle.task == MULTI_CLASS:
        bayes = float(true_posteriors["test"].max(dim=1).values.mean())
        bundle.notes.append(f"Expected test accuracy of the Bayes classifier: {bayes:.3f}.")
    return bundle
