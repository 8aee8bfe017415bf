"""What every loader returns: :class:`DatasetBundle`, three :class:`Split` s of uint8 ``(N, C, H, W)`` images and
their labels plus what a notebook needs to describe them; the checks that turn a file's arrays into a split (a
malformed array raises ``ValueError`` naming the file, never loads); and what is done to a loaded bundle
(:func:`subsample_train`, :func:`test_sets`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from helpers.utils import display_name, shorten_paths

MULTI_CLASS = "multi-class"
MULTI_LABEL = "multi-label"
SPLITS = ("train", "val", "test")
DESCRIBE_WIDTH = 110  # characters per line of DatasetBundle.describe()


@dataclass
class Split:
    """One split: images uint8 (N, C, H, W); labels int64 (N,) (multi-class) or float32 (N, T) in {0, 1}."""

    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.images.shape[0])


@dataclass
class DatasetBundle:
    """Three splits plus what a notebook needs to describe them.

    ``true_posteriors`` (synthetic sets only): split name -> (N, K) P(k | x) or (N, T) P(y_t = 1 | x), float64.
    ``ground_truth`` (synthetic sets only): the generator's population quantities (see
    :mod:`helpers.data.synthetic_multiclass` and :mod:`helpers.data.synthetic_multilabel`).
    ``notes``: remarks printed by ``describe()`` (how a split was carved, how labels were sampled).
    ``checks``: file checks (the md5 against the official release), printed only by ``describe(details=True)``:
    a notebook's folded details cell, not its main flow (issue 28, item 3).
    ``metadata`` (real-data folders only): split name -> a DataFrame with one row per image, in the split's order
    (e.g. lesion, acquisition site and diagnosis method for ISIC 2018; patient, age and sex for ChestX-ray14).
    """

    name: str
    task: str
    class_names: list[str]
    train: Split
    val: Split
    test: Split
    source: str
    licence: str
    image_size: int
    true_posteriors: dict[str, torch.Tensor] | None = None
    ground_truth: dict[str, torch.Tensor] | None = None
    notes: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    metadata: dict[str, pd.DataFrame] | None = None

    @property
    def n_classes(self) -> int:
        """Number of classes (multi-class) or labels (multi-label)."""
        return len(self.class_names)

    @property
    def n_channels(self) -> int:
        return int(self.train.images.shape[1])

    def splits(self) -> dict[str, Split]:
        return {"train": self.train, "val": self.val, "test": self.test}

    def class_counts(self, split: str = "train") -> list[int]:
        """Images per class (multi-class) or positives per label (multi-label) in one split."""
        labels = self.splits()[split].labels
        if self.task == MULTI_LABEL:
            return [int(v) for v in labels.sum(dim=0).round().long()]
        return [int(v) for v in torch.bincount(labels, minlength=self.n_classes)]

    def describe(self, width: int = DESCRIBE_WIDTH, details: bool = False) -> str:
        """A few lines of at most ``width`` characters, in words: the data set's display name
        (:func:`helpers.utils.display_name`), task, size, splits, per-class counts, licence, notes. With
        ``details`` (a notebook's folded details cell) also the source file, as ``display_path`` writes it, and the
        file checks (md5); the main flow shows neither."""
        kind = "positives per label" if self.task == MULTI_LABEL else "images per class"
        unit = "labels" if self.task == MULTI_LABEL else "classes"
        channels = "1 channel" if self.n_channels == 1 else f"{self.n_channels} channels"
        lines = _wrap(
            f"{display_name('dataset', self.name)}: {self.task}, {self.n_classes} {unit}, "
            f"{self.image_size}×{self.image_size} px, {channels}",
            width,
            "  ",
        )
        if details:
            lines += _wrap(f"source: {shorten_paths(self.source)}", width, "  ")
        lines.append("splits: " + ", ".join(f"{name} {len(split):,}" for name, split in self.splits().items()))
        counts = [f"{name} {count:,}" for name, count in zip(self.class_names, self.class_counts())]
        lines += _wrap_items(f"training {kind}: ", counts, width)
        lines.append(f"Licence: {self.licence}")
        if self.true_posteriors is not None:
            lines.append("Exact posteriors are known for every image.")
        for note in self.notes + (self.checks if details else []):
            lines += _wrap(shorten_paths(note), width)
        return "\n".join(lines)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _wrap_items(prefix: str, items: list[str], width: int) -> list[str]:
    """``prefix`` + comma-separated ``items`` in lines of at most ``width`` characters, never splitting an item."""
    glued = ", ".join(item.replace(" ", "\xa0") for item in items)  # textwrap does not break at a no-break space
    return [
        line.replace("\xa0", " ")
        for line in textwrap.wrap(
            prefix + glued, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
    ]


# ---------------------------------------------------------------------------------------------------------------
# Arrays to a split, checked
# ---------------------------------------------------------------------------------------------------------------
def images_to_tensor(images: np.ndarray, path: Path, key: str, n_channels: int, image_size: int) -> torch.Tensor:
    """uint8 images in medmnist's layout, (N, H, W) or (N, H, W, C), as a (N, C, H, W) tensor; a wrong dtype or
    shape, or no image, is a ValueError naming ``path`` and the array ``key``."""
    expected = (image_size, image_size) if n_channels == 1 else (image_size, image_size, n_channels)
    if images.dtype != np.uint8:
        raise ValueError(f"{path}: {key} must be uint8, got {images.dtype}")
    if images.shape[:1] == (0,):
        raise ValueError(f"{path}: {key} has no images")
    if images.ndim != len(expected) + 1 or images.shape[1:] != expected:
        raise ValueError(
            f"{path}: {key} must have shape (N, {', '.join(map(str, expected))}) for "
            f"{n_channels} channel(s) at {image_size} px, got {images.shape}"
        )
    tensor = torch.from_numpy(np.ascontiguousarray(images))
    return tensor.unsqueeze(1) if n_channels == 1 else tensor.permute(0, 3, 1, 2).contiguous()


def labels_to_tensor(
    labels: np.ndarray, path: Path, key: str, task: str, n_classes: int, n_images: int
) -> torch.Tensor:
    """Labels as int64 (N,) class indices (multi-class) or float32 (N, T) in {0, 1} (multi-label), one row per
    image; anything else is a ValueError naming ``path`` and the array ``key``."""
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim != 2 or labels.shape[0] != n_images:
        raise ValueError(f"{path}: {key} must have one row per image ({n_images}), got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) and not np.issubdtype(labels.dtype, np.floating):
        raise ValueError(f"{path}: {key} must be numeric, got {labels.dtype}")
    if task == MULTI_LABEL:
        if labels.shape[1] != n_classes:
            raise ValueError(f"{path}: {key} must have {n_classes} columns (one per label), got {labels.shape[1]}")
        if not np.isin(labels, (0, 1)).all():
            raise ValueError(f"{path}: {key} must contain only 0 and 1")
        return torch.from_numpy(labels.astype(np.float32))
    if labels.shape[1] != 1:
        raise ValueError(f"{path}: {key} must have shape (N, 1) for a {task} set, got {labels.shape}")
    values = labels[:, 0]
    if not np.all(values == np.round(values)) or values.min() < 0 or values.max() >= n_classes:
        raise ValueError(
            f"{path}: {key} must be integers in [0, {n_classes - 1}], got values in [{values.min()}, {values.max()}]"
        )
    return torch.from_numpy(values.astype(np.int64))


def split_from_arrays(
    images: np.ndarray,
    labels: np.ndarray,
    path: Path,
    split: str,
    n_channels: int,
    image_size: int,
    task: str,
    n_classes: int,
) -> Split:
    """A Split after the same checks as a medmnist file's arrays (a malformed cache raises instead of loading)."""
    tensor = images_to_tensor(images, path, f"{split}_images", n_channels, image_size)
    return Split(tensor, labels_to_tensor(labels, path, f"{split}_labels", task, n_classes, len(tensor)))


# ---------------------------------------------------------------------------------------------------------------
# Operations on a loaded bundle
# ---------------------------------------------------------------------------------------------------------------
def subsample_train(bundle: DatasetBundle, max_train: int, seed: int = 0) -> DatasetBundle:
    """The bundle with a seeded random subset of ``max_train`` training images (kept in their original order).

    Validation and test splits are untouched; the training true posteriors and metadata (if any) follow the subset.
    """
    if not isinstance(max_train, int) or isinstance(max_train, bool) or max_train < 1:
        raise ValueError(f"max_train must be a positive integer or None, got {max_train!r}")
    n = len(bundle.train)
    if max_train >= n:
        return bundle
    generator = torch.Generator().manual_seed(int(seed))
    keep = torch.randperm(n, generator=generator)[:max_train].sort().values
    bundle.train = Split(bundle.train.images[keep], bundle.train.labels[keep])
    if bundle.true_posteriors is not None:
        bundle.true_posteriors = {**bundle.true_posteriors, "train": bundle.true_posteriors["train"][keep]}
    if bundle.metadata is not None:
        bundle.metadata = {**bundle.metadata, "train": bundle.metadata["train"].iloc[keep.numpy()]}
    bundle.notes = bundle.notes + [f"Training split: a random subset of {max_train:,} of {n:,} images (seed {seed})."]
    return bundle


def test_sets(bundle: DatasetBundle, default: str = "test") -> dict[str, np.ndarray]:
    """Test set name -> positions in ``bundle.test``: the ``test_set`` column of the test metadata when present
    (:func:`helpers.data.isic_heldout_split`, :func:`helpers.data.isic_site_split`), else the whole split under
    ``default``."""
    meta = None if bundle.metadata is None else bundle.metadata.get("test")
    if meta is None or "test_set" not in meta.columns:
        return {default: np.arange(len(bundle.test))}
    names = meta["test_set"].to_numpy(str)
    return {str(name): np.flatnonzero(names == name) for name in dict.fromkeys(names)}
