"""ISIC 2018 Task 3 (7 classes) as a :class:`~helpers.data.DatasetBundle`: every split decoded and resized by one
pipeline, a validation split carved by lesion when the official one is absent, and two dataset-shift variants of a
loaded bundle: by acquisition site (:func:`isic_site_split`) and with a held-out in-distribution test set next to
the official one (:func:`isic_heldout_split`). :mod:`helpers.data.isic2018` parses the official layout.
"""

from __future__ import annotations

import numbers
import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from helpers.data import image_files, isic2018
from helpers.data.bundle import DESCRIBE_WIDTH, MULTI_CLASS, SPLITS, DatasetBundle, Split, split_from_arrays
from helpers.data.image_cache import check_image_size, decode_cached
from helpers.utils import display_name

ISIC_CLASSES = isic2018.CLASSES
ISIC_CLASS_NAMES = isic2018.CLASS_NAMES
ISIC_URL = isic2018.URL
ISIC_LICENCE = isic2018.LICENCE


def isic_paths(root: str | os.PathLike, split: str) -> tuple[Path, Path]:
    """(image folder, ground-truth CSV) of one split in the official ISIC 2018 Task 3 layout."""
    return isic2018.split_paths(root, split)


def _isic_image_paths(folder: Path, csv_path: Path, image_ids: list[str]) -> list[Path]:
    paths = [image_files.find_image(folder, image_id) for image_id in image_ids]
    absent = [image_id for image_id, path in zip(image_ids, paths) if path is None]
    if absent:
        raise FileNotFoundError(
            f"{len(absent)} of the {len(image_ids)} images listed in {csv_path} are missing from {folder} (first: "
            f"{', '.join(absent[:3])}; looked for .jpg/.jpeg/.png). Unzip the complete archive into {folder}, or "
            f"remove their rows from the CSV to use the images that are there."
        )
    return paths


def load_isic2018(
    root: str | os.PathLike,
    image_size: int = 28,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    val_fraction: float = 0.15,
    split_seed: int = 0,
) -> DatasetBundle:
    """ISIC 2018 Task 3 (7 classes) from the official layout under ``root`` (see ``helpers.data.isic2018``), every
    split decoded and resized to ``image_size`` by one pipeline (``helpers.data.decode_resized``).

    Without the ``Validation`` folders, ``val_fraction`` of the training lesions (``HAM10000_metadata.csv`` in
    ``root``), else of the training images (with a printed note), become the validation split, stratified by class,
    seeded by ``split_seed``. ``bundle.metadata[split]`` holds per image its ``dx``, ``dx_type``, ``age``, ``sex``,
    ``localization``, ``dataset`` (acquisition site) and ``lesion_id`` from the metadata file (empty where it has
    no row, e.g. the test images); :func:`isic_site_split` builds a site-shift split from them. Decoded images
    are cached in ``cache_dir`` (default ``<data dir>/cache``) while the image files are unchanged.
    """
    check_image_size(image_size)
    _check_split_arguments(val_fraction, split_seed)
    root = Path(root)
    layout = isic2018.find_layout(root)
    truth = {split: isic2018.read_ground_truth(csv_path) for split, (_, csv_path) in layout.items()}
    isic2018.check_disjoint({split: ids for split, (ids, _) in truth.items()}, {s: c for s, (_, c) in layout.items()})
    paths = {
        split: _isic_image_paths(folder, csv_path, truth[split][0]) for split, (folder, csv_path) in layout.items()
    }
    metadata_path = root / isic2018.METADATA_FILE
    ham = isic2018.read_metadata(metadata_path) if metadata_path.is_file() else None  # checked before decoding
    images, cache_path = decode_cached("isic2018", root, paths, image_size, "RGB", cache, cache_dir)
    carve = "val" not in layout
    metadata = {
        split: isic2018.metadata_for(ids, labels, ham, layout[split][0], carve and split == "train" and ham is not None)
        for split, (ids, labels) in truth.items()
    }
    splits = {
        split: split_from_arrays(
            images[split], labels, cache_path, split, 3, image_size, MULTI_CLASS, len(isic2018.CLASSES)
        )
        for split, (_, labels) in truth.items()
    }
    notes = [
        (
            f"Class order {', '.join(isic2018.CLASSES)} (the ground-truth CSV's). Every split resized to "
            f"{image_size} px by one pipeline: {image_files.RESIZE_METHOD}."
        )
    ]
    if carve:
        notes.append(_carve_isic_validation(splits, metadata, ham is not None, val_fraction, split_seed))
    return DatasetBundle(
        name="isic2018",
        task=MULTI_CLASS,
        class_names=list(isic2018.CLASS_NAMES),
        **splits,
        source=str(root),
        licence=isic2018.LICENCE,
        image_size=image_size,
        notes=notes,
        metadata=metadata,
    )


def _check_split_arguments(val_fraction: float, split_seed: int) -> None:
    """ValueError naming the argument unless ``val_fraction`` is a number strictly between 0 and 1 and
    ``split_seed`` an integer >= 0 (checked before any image is decoded)."""
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, numbers.Real) or not 0 < val_fraction < 1:
        raise ValueError(
            f"val_fraction must be a number strictly between 0 and 1 (the share of training lesions or images "
            f"held out for validation), got {val_fraction!r}; e.g. val_fraction=0.15"
        )
    if isinstance(split_seed, bool) or not isinstance(split_seed, numbers.Integral) or split_seed < 0:
        raise ValueError(f"split_seed must be an integer >= 0 (it seeds the validation carve), got {split_seed!r}")


def _carve_isic_validation(
    splits: dict[str, Split], metadata: dict, by_lesion: bool, fraction: float, seed: int
) -> str:
    """Move ``fraction`` of the training lesions (or images) into ``splits["val"]`` in place; returns the note."""
    train, train_meta = splits.pop("train"), metadata.pop("train")
    labels = train.labels.numpy()
    groups = train_meta["lesion_id"].to_numpy(dtype=str) if by_lesion else np.arange(len(train))
    keep, held, stratified = isic2018.carve_validation(labels, groups, fraction, seed)
    splits["train"], splits["val"] = _take(train, keep), _take(train, held)
    metadata["train"], metadata["val"] = train_meta.iloc[keep], train_meta.iloc[held]
    unit = "lesion" if by_lesion else "image"
    note = (
        f"No ISIC2018_Task3_Validation folder: validation is {len(held):,} training images "
        f"({fraction:.0%} of the training {unit}s, {_stratified(stratified)}, seed {seed}), carved by {unit}."
    )
    if not by_lesion:
        note += (
            f" {isic2018.METADATA_FILE} was not found, so images of one lesion may fall on both sides; put it "
            "in the ISIC 2018 folder to carve by lesion."
        )
        print(textwrap.fill(note, DESCRIBE_WIDTH))
    return note


def _stratified(stratified: bool) -> str:
    return "stratified by class" if stratified else "not stratified: a class has too few lesions or images"


def _take(split: Split, index: np.ndarray) -> Split:
    index = torch.from_numpy(np.asarray(index, dtype=np.int64))
    return Split(split.images[index], split.labels[index])


def _site_group(sites: tuple[str, ...]) -> str:
    return "vienna" if set(sites) == set(isic2018.VIENNA_SITES) else "+".join(sites)


def isic_site_split(
    bundle: DatasetBundle,
    train_sites: tuple[str, ...] = isic2018.VIENNA_SITES,
    test_sites: tuple[str, ...] = ("rosendahl",),
    val_fraction: float = 0.15,
    seed: int = 0,
) -> DatasetBundle:
    """A dataset-shift split of an ``isic2018`` bundle by acquisition site (HAM10000's ``dataset`` column).

    Every image of the bundle acquired at ``train_sites`` (default: the three Vienna sites) is split by lesion
    into train and validation (``val_fraction``, stratified by class, seeded); the test split is every image
    acquired at ``test_sites`` (default: Rosendahl, Queensland). Images without a site (the ISIC 2018 test and
    validation images) are left out. The bundle's own split is ignored: its training and validation images are
    pooled first.
    """
    if bundle.metadata is None or "dataset" not in next(iter(bundle.metadata.values())).columns:
        raise ValueError(
            f"{bundle.name} carries no acquisition-site metadata: load isic2018 with "
            f"{isic2018.METADATA_FILE} in its folder"
        )
    overlap = sorted(set(train_sites) & set(test_sites))
    if overlap:
        raise ValueError(
            f"sites {overlap} are in both train_sites and test_sites; a site-shift split needs disjoint sites"
        )
    images = torch.cat([split.images for split in bundle.splits().values()])
    labels = torch.cat([split.labels for split in bundle.splits().values()])
    pooled = pd.concat([bundle.metadata[name] for name in SPLITS])
    source, target = (isic2018.site_indices(pooled, sites) for sites in (train_sites, test_sites))
    for sites, index in ((train_sites, source), (test_sites, target)):
        if len(index) == 0:
            raise ValueError(f"no image of {bundle.name} was acquired at {list(sites)}")
    pool = Split(images[source], labels[source])
    keep, held, stratified = isic2018.carve_validation(
        pool.labels.numpy(), pooled["lesion_id"].iloc[source].to_numpy(str), val_fraction, seed
    )
    test_set = f"{_site_group(train_sites)}_to_{_site_group(test_sites)}"
    metadata = {
        "train": pooled.iloc[source[keep]],
        "val": pooled.iloc[source[held]],
        "test": pooled.iloc[target].assign(test_set=test_set),
    }
    note = (
        f"Site-shift split: train and validation from {_site_words(train_sites)} ({len(source):,} images, "
        f"validation {val_fraction:.0%} of their lesions, {_stratified(stratified)}, seed {seed}); test from "
        f"{_site_words(test_sites)} ({len(target):,} images)."
    )
    return DatasetBundle(
        name=f"{bundle.name}_sites",
        task=bundle.task,
        class_names=list(bundle.class_names),
        train=_take(pool, keep),
        val=_take(pool, held),
        test=Split(images[target], labels[target]),
        source=bundle.source,
        licence=bundle.licence,
        image_size=bundle.image_size,
        notes=bundle.notes[:1] + [note],
        metadata=metadata,
    )


#: name of the test images of :func:`isic_heldout_split` / :func:`isic_site_split` in ``metadata["test"]["test_set"]``
IN_DISTRIBUTION = "in_distribution"
ISIC_TEST = "isic2018_test"


def isic_heldout_split(bundle: DatasetBundle, test_fraction: float = 0.15, seed: int = 0) -> DatasetBundle:
    """An ``isic2018`` bundle whose test split holds two test sets, told apart by ``metadata["test"]["test_set"]``
    (:func:`helpers.data.test_sets`): ``in_distribution``, ``test_fraction`` of the training lesions held out (by
    lesion, stratified by class, seeded), and ``isic2018_test``, the official ISIC 2018 test images (other clinics
    and devices). Training and validation are the bundle's, less the held-out lesions; every image has been through
    the same decoding and resizing. Needs the lesion metadata (``HAM10000_metadata.csv``)."""
    train_meta = None if bundle.metadata is None else bundle.metadata.get("train")
    if train_meta is None or "lesion_id" not in train_meta.columns:
        raise ValueError(
            f"{bundle.name} has no lesion of every training image: load isic2018 with {isic2018.METADATA_FILE} "
            "in its folder, so that held-out test lesions never share a lesion with training"
        )
    lesions = train_meta["lesion_id"]
    unknown = lesions.isna().to_numpy() | (lesions.astype(str).str.strip() == "").to_numpy()
    if unknown.any():
        raise ValueError(
            f"{bundle.name} has no lesion of every training image: {int(unknown.sum())} of the {len(lesions)} "
            f"training images have no lesion id (first: {train_meta.index[unknown.argmax()]}), and images of one "
            f"lesion must not fall on both sides of the held-out split. Use the complete {isic2018.METADATA_FILE} "
            "of the HAM10000 download"
        )
    keep, held, stratified = isic2018.carve_validation(
        bundle.train.labels.numpy(), train_meta["lesion_id"].to_numpy(str), test_fraction, seed
    )
    held_meta = train_meta.iloc[held].assign(test_set=IN_DISTRIBUTION)
    shifted_meta = bundle.metadata["test"].assign(test_set=ISIC_TEST)
    test = Split(
        torch.cat([bundle.train.images[held], bundle.test.images]),
        torch.cat([bundle.train.labels[held], bundle.test.labels]),
    )
    note = (
        f"Two test sets: {len(held):,} held-out training images ({test_fraction:.0%} of the training lesions, "
        f"{_stratified(stratified)}, seed {seed}) and the {len(bundle.test):,} ISIC 2018 test images."
    )
    return DatasetBundle(
        name=f"{bundle.name}_heldout",
        task=bundle.task,
        class_names=list(bundle.class_names),
        train=_take(bundle.train, keep),
        val=bundle.val,
        test=test,
        source=bundle.source,
        licence=bundle.licence,
        image_size=bundle.image_size,
        notes=bundle.notes + [note],
        metadata={
            "train": train_meta.iloc[keep],
            "val": bundle.metadata["val"],
            "test": pd.concat([held_meta, shifted_meta]),
        },
    )


def _site_words(sites: Sequence[str]) -> str:
    """Acquisition sites in words ("Vienna, MoleMax camera; Queensland practice (Rosendahl)")."""
    return "; ".join(display_name("site", site) for site in sites)
