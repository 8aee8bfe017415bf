"""Data sets as uint8 tensors: MedMNIST 2D, ISIC 2018 Task 3, NIH ChestX-ray14, and synthetic sets with exact
posteriors.

Every loader reads its files once into ``uint8 (N, C, H, W)`` tensors (no per-item PIL in the training path) and
returns a :class:`DatasetBundle`. Files are never downloaded: a missing file raises ``FileNotFoundError`` naming
the file expected, the data set, its download URL and md5, and where to put it. Corrupt or wrong-shaped files raise
``ValueError``; nothing is ever substituted silently.

Data directory: the ``data_dir`` argument, else the environment variable ``CALIBMED_DATA_DIR``, else ``data/`` in
the repository root.
"""

from __future__ import annotations

import hashlib
import os
import stat
import textwrap
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from medmnist import INFO

from helpers.data import chestxray14, image_files, isic2018, synthetic
from helpers.utils import display_path, shorten_paths

DATA_DIR_ENV = "CALIBMED_DATA_DIR"
MULTI_CLASS = "multi-class"
MULTI_LABEL = "multi-label"
MEDMNIST_SIZES = (28, 64, 128, 224)
DESCRIBE_WIDTH = 110  # characters per line of DatasetBundle.describe()
MEDMNIST_2D = tuple(name for name, info in INFO.items() if not name.endswith("3d"))
SYNTHETIC_NAMES = tuple(synthetic.GENERATORS)
DATASET_NAMES = MEDMNIST_2D + ("isic2018", "chestxray14") + SYNTHETIC_NAMES
SPLITS = ("train", "val", "test")
_SPLIT_ARRAYS = [f"{split}_{kind}" for split in SPLITS for kind in ("images", "labels")]  # keys of a medmnist .npz

ISIC_CLASSES = isic2018.CLASSES
ISIC_CLASS_NAMES = isic2018.CLASS_NAMES
ISIC_URL = isic2018.URL
ISIC_LICENCE = isic2018.LICENCE
CHEST_LABELS = [INFO["chestmnist"]["label"][str(t)] for t in range(len(INFO["chestmnist"]["label"]))]
_DECODE_CACHE_VERSION = 2  # bump when decode_resized's output changes


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
    ``ground_truth`` (synthetic sets only): the generator's population quantities (see helpers.data.synthetic).
    ``notes``: remarks printed by ``describe()`` (e.g. an md5 that differs from the official release).
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

    def describe(self, width: int = DESCRIBE_WIDTH) -> str:
        """A few lines of at most ``width`` characters: name, task, size, source (as ``display_path`` writes it),
        splits, per-class counts, licence, notes."""
        kind = "positives per label" if self.task == MULTI_LABEL else "images per class"
        unit = "labels" if self.task == MULTI_LABEL else "classes"
        lines = [
            f"{self.name}: {self.task}, {self.n_classes} {unit}, {self.image_size}x{self.image_size} px, "
            f"{self.n_channels} channel(s)"
        ]
        lines += textwrap.wrap(
            f"source: {shorten_paths(self.source)}",
            width,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines.append("splits: " + ", ".join(f"{name} {len(split):,}" for name, split in self.splits().items()))
        counts = [f"{name} {count:,}" for name, count in zip(self.class_names, self.class_counts())]
        lines += _wrap_items(f"training {kind}: ", counts, width)
        lines.append(f"Licence: {self.licence}")
        if self.true_posteriors is not None:
            lines.append("Exact posteriors are known for every image (true_posteriors).")
        for note in self.notes:
            lines += textwrap.wrap(shorten_paths(note), width, break_long_words=False, break_on_hyphens=False)
        return "\n".join(lines)


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
# Data directory
# ---------------------------------------------------------------------------------------------------------------
def repo_root() -> Path:
    """The repository root: the parent of the ``helpers`` package."""
    return Path(__file__).resolve().parents[2]


def resolve_data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data directory: ``path`` if given, else ``$CALIBMED_DATA_DIR``, else ``<repo root>/data``."""
    if path is not None:
        return Path(path).expanduser()
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser()
    return repo_root() / "data"


data_dir = resolve_data_dir  # the public name; loaders use resolve_data_dir because their argument is data_dir


def _where_to_put(directory: Path) -> str:
    return (
        f"Put it in the data directory {directory} (chosen by the data_dir argument, else the environment "
        f"variable {DATA_DIR_ENV}, else <repo>/data)."
    )


# ---------------------------------------------------------------------------------------------------------------
# MedMNIST
# ---------------------------------------------------------------------------------------------------------------
def medmnist_filename(name: str, image_size: int = 28) -> str:
    """medmnist's file name: ``dermamnist.npz`` at 28 px, ``dermamnist_64.npz`` etc. otherwise."""
    return f"{name}.npz" if image_size == 28 else f"{name}_{image_size}.npz"


def _medmnist_key(image_size: int) -> str:
    return "" if image_size == 28 else f"_{image_size}"


def _task_of(info: dict) -> str:
    # binary-class and ordinal-regression sets have one integer label per image: treated as multi-class
    return MULTI_LABEL if info["task"].startswith("multi-label") else MULTI_CLASS


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _not_a_regular_file(path: Path) -> str | None:
    """What is at ``path`` if it exists but is not a regular file (reading a FIFO would block), else None."""
    try:
        mode = path.stat().st_mode  # follows symbolic links
    except FileNotFoundError:
        return None  # missing (or a link to a missing file): the caller's "not found" message applies
    except OSError as error:  # e.g. a symbolic-link loop
        return f"a path that cannot be followed ({error.strerror})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    return "not a regular file"


def _check_regular_file(path: Path) -> None:
    kind = _not_a_regular_file(path)
    if kind is not None:
        raise ValueError(
            f"{path} exists but is {kind}, not the .npz file expected there; remove it or put the file in its place"
        )


def _read_npz(path: Path, keys: list[str], hint: str) -> dict[str, np.ndarray]:
    """Every requested array of an .npz file, or a ValueError naming the file and the problem."""
    try:
        archive = np.load(path, allow_pickle=False)
    except PermissionError as error:
        raise PermissionError(
            error.errno,
            f"cannot read {path}: permission denied; give this user read access (e.g. chmod u+r {path})",
            str(path),
        ) from error
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise ValueError(f"{path} is not a readable .npz file ({type(error).__name__}: {error}). {hint}") from error
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} holds a single array, not an .npz archive of named arrays. {hint}")
    with archive:
        missing = [key for key in keys if key not in archive.files]
        if missing:
            raise ValueError(f"{path} is missing the arrays {missing} (it has {sorted(archive.files)}). {hint}")
        try:
            return {key: _read_member(archive, key) for key in keys}
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as error:
            raise ValueError(
                f"{path} is damaged: reading its arrays failed ({type(error).__name__}: {error}). {hint}"
            ) from error


def _read_member(archive: np.lib.npyio.NpzFile, key: str) -> np.ndarray:
    try:
        return archive[key]
    except MemoryError as error:  # the member's header claims a shape larger than memory: a damaged file
        raise ValueError(f"the array {key} claims more memory than is available ({error})") from error


def _images_to_tensor(images: np.ndarray, path: Path, key: str, n_channels: int, image_size: int) -> torch.Tensor:
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


def _labels_to_tensor(
    labels: np.ndarray, path: Path, key: str, task: str, n_classes: int, n_images: int
) -> torch.Tensor:
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
    fetch = f"Download it from {url} (md5 {md5}); see {info.get('python_class', name)} on https://medmnist.com/."
    _check_regular_file(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{info['python_class']} ({name}, {image_size} px) not found: expected the file {path}. "
            f"No download is attempted. {fetch} {_where_to_put(directory)}"
        )
    return _read_medmnist_file(name, image_size, path, f"Replace it with the official file: {fetch}")


def _read_medmnist_file(name: str, image_size: int, path: Path, repair_hint: str) -> DatasetBundle:
    """Read a medmnist-format file of the data set ``name``; a damaged file is a ValueError naming it and ending
    with ``repair_hint`` (download the official file, or delete a generated one so it is generated again)."""
    info = INFO[name]
    md5 = info[f"MD5{_medmnist_key(image_size)}"]
    task, n_channels = _task_of(info), int(info["n_channels"])
    class_names = [info["label"][str(k)] for k in range(len(info["label"]))]
    arrays = _read_npz(path, _SPLIT_ARRAYS, repair_hint)
    splits = {}
    try:
        for split in SPLITS:
            images = _images_to_tensor(arrays[f"{split}_images"], path, f"{split}_images", n_channels, image_size)
            labels = _labels_to_tensor(
                arrays[f"{split}_labels"], path, f"{split}_labels", task, len(class_names), len(images)
            )
            splits[split] = Split(images, labels)
    except ValueError as error:
        raise ValueError(f"{error}. {repair_hint}") from error
    actual_md5 = _md5(path)
    note = (
        "The file's md5 matches the official release."
        if actual_md5 == md5
        else f"The file's md5 ({actual_md5}) differs from the official release ({md5})."
    )
    return DatasetBundle(
        name=name,
        task=task,
        class_names=class_names,
        **splits,
        source=str(path),
        licence=info["license"],
        image_size=image_size,
        notes=[note],
    )


# ---------------------------------------------------------------------------------------------------------------
# Decoded images of real-data folders, cached in the data directory
# ---------------------------------------------------------------------------------------------------------------
def cache_dir_default(data_dir: str | os.PathLike | None = None) -> Path:
    """Where decoded image arrays are cached: ``<data dir>/cache`` (derived data, like the synthetic sets; never
    inside the data set's own folder, which may be read-only or shared)."""
    return resolve_data_dir(data_dir) / "cache"


def _decode_cached(
    dataset: str,
    root: Path,
    paths: dict[str, list[Path]],
    image_size: int,
    mode: str,
    cache: bool,
    cache_dir: str | os.PathLike | None,
) -> tuple[dict[str, np.ndarray], Path]:
    """(split -> uint8 images decoded by ``image_files.decode_resized``, cache path), from the cache when its
    fingerprint (the files' names, sizes and modification times, the size, mode and resize method) matches, else
    decoded and cached. The cache file is ``<cache dir>/<dataset>-<hash of root>-<size>px.npz``, written atomically."""
    fingerprint = hashlib.sha256(f"{_DECODE_CACHE_VERSION}|{image_size}|{mode}|{image_files.RESIZE_METHOD}".encode())
    for split, split_paths in paths.items():
        fingerprint.update(f"|{split}:{image_files.files_fingerprint(split_paths)}".encode())
    root_key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    cache_path = Path(cache_dir or cache_dir_default()) / f"{dataset}-{root_key}-{image_size}px.npz"
    keys = [f"{split}_images" for split in paths]
    if cache and _cache_matches(cache_path, fingerprint.hexdigest()):
        arrays = _read_npz(cache_path, keys, "Delete this cache file; it is rebuilt from the images.")
        return {split: arrays[f"{split}_images"] for split in paths}, cache_path
    every_image = image_files.decode_resized(
        [path for split_paths in paths.values() for path in split_paths], image_size, mode, f"decoding {dataset} images"
    )
    ends = np.cumsum([len(split_paths) for split_paths in paths.values()])
    decoded = dict(zip(paths, np.split(every_image, ends[:-1])))
    if cache:
        try:
            synthetic._write_npz(
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


def _cache_matches(path: Path, fingerprint: str) -> bool:
    if not path.is_file():
        return False
    stored = _read_npz(path, ["fingerprint"], "Delete this cache file; it is rebuilt from the images.")
    return str(stored["fingerprint"]) == fingerprint


# ---------------------------------------------------------------------------------------------------------------
# ISIC 2018 Task 3
# ---------------------------------------------------------------------------------------------------------------
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


def _check_image_size(image_size: int) -> None:
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 8:
        raise ValueError(f"image_size must be an integer >= 8, got {image_size!r}")


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
    _check_image_size(image_size)
    root = Path(root)
    layout = isic2018.find_layout(root)
    truth = {split: isic2018.read_ground_truth(csv_path) for split, (_, csv_path) in layout.items()}
    paths = {
        split: _isic_image_paths(folder, csv_path, truth[split][0]) for split, (folder, csv_path) in layout.items()
    }
    images, cache_path = _decode_cached("isic2018", root, paths, image_size, "RGB", cache, cache_dir)
    metadata_path = root / isic2018.METADATA_FILE
    ham = isic2018.read_metadata(metadata_path) if metadata_path.is_file() else None
    carve = "val" not in layout
    metadata = {
        split: isic2018.metadata_for(ids, labels, ham, layout[split][0], carve and split == "train" and ham is not None)
        for split, (ids, labels) in truth.items()
    }
    splits = {
        split: _split_from_arrays(
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


def _split_from_arrays(
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
    tensor = _images_to_tensor(images, path, f"{split}_images", n_channels, image_size)
    return Split(tensor, _labels_to_tensor(labels, path, f"{split}_labels", task, n_classes, len(tensor)))


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
        f"Site-shift split: train and validation from {', '.join(train_sites)} ({len(source):,} images, "
        f"validation {val_fraction:.0%} of their lesions, {_stratified(stratified)}, seed {seed}); test from "
        f"{', '.join(test_sites)} ({len(target):,} images)."
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
    (:func:`test_sets`): ``in_distribution``, ``test_fraction`` of the training lesions held out (by lesion,
    stratified by class, seeded), and ``isic2018_test``, the official ISIC 2018 test images (other clinics and
    devices). Training and validation are the bundle's, less the held-out lesions; every image has been through
    the same decoding and resizing. Needs the lesion metadata (``HAM10000_metadata.csv``)."""
    train_meta = None if bundle.metadata is None else bundle.metadata.get("train")
    if train_meta is None or "lesion_id" not in train_meta.columns or (train_meta["lesion_id"] == "").any():
        raise ValueError(
            f"{bundle.name} has no lesion of every training image: load isic2018 with {isic2018.METADATA_FILE} "
            "in its folder, so that held-out test lesions never share a lesion with training"
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


def test_sets(bundle: DatasetBundle, default: str = "test") -> dict[str, np.ndarray]:
    """Test set name -> positions in ``bundle.test``: the ``test_set`` column of the test metadata when present
    (:func:`isic_heldout_split`, :func:`isic_site_split`), else the whole split under ``default``."""
    meta = None if bundle.metadata is None else bundle.metadata.get("test")
    if meta is None or "test_set" not in meta.columns:
        return {default: np.arange(len(bundle.test))}
    names = meta["test_set"].to_numpy(str)
    return {str(name): np.flatnonzero(names == name) for name in dict.fromkeys(names)}


# ---------------------------------------------------------------------------------------------------------------
# NIH ChestX-ray14 with ChestMNIST's split
# ---------------------------------------------------------------------------------------------------------------
def load_chestxray14(
    root: str | os.PathLike,
    image_size: int = 28,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    label_disagreement: str = "lists",
) -> DatasetBundle:
    """NIH ChestX-ray14 from its official layout under ``root`` (see ``helpers.data.chestxray14``) as a multi-label
    bundle like ChestMNIST's: 14 labels in ChestMNIST's order, ChestMNIST's patient-wise split from the lists,
    grayscale images (one channel) resized to ``image_size`` by one pipeline (``image_files.decode_resized``).

    Listed images absent from ``images/`` are skipped and counted (one printed line); images in ``images/`` that
    no list names are named in a warning. Labels come from the lists and are checked against
    ``Data_Entry_2017.csv``: where they disagree, ``label_disagreement="lists"`` (the default: ChestMNIST's
    labels, which the course's multi-label track follows) keeps the lists' labels and prints one line naming the
    count, ``"data_entry"`` takes the CSV's (the lists' for images it has no row for), either noted in
    ``describe()``; ``"error"`` raises naming the images. (The shared 1,000-image sample has two such images.)
    ``bundle.metadata[split]``: patient_id, follow_up, age, sex, view_position per image. Decoded images are cached
    in ``cache_dir`` (default ``<data dir>/cache``) while the image files are unchanged.
    """
    _check_image_size(image_size)
    if label_disagreement not in chestxray14.LABEL_SOURCES:
        raise ValueError(f"label_disagreement must be one of {chestxray14.LABEL_SOURCES}, got {label_disagreement!r}")
    root = Path(root)
    layout = chestxray14.find_layout(root)
    lists = {split: chestxray14.read_split_list(path) for split, path in layout.lists.items()}
    chestxray14.check_patient_wise({split: names for split, (names, _) in lists.items()}, root)
    entries, entry_metadata = chestxray14.read_data_entry(layout.label_file)
    notes = [
        (
            f"Labels in ChestMNIST's order; ChestMNIST's patient-wise split ({chestxray14.LIST_FOLDER}/). Every "
            f"split resized to {image_size} px by one pipeline: {image_files.RESIZE_METHOD}, grayscale."
        )
    ]
    present = chestxray14.present_images(layout.images)
    kept = {split: [k for k, name in enumerate(names) if name in present] for split, (names, _) in lists.items()}
    _report_chest_files(lists, kept, present, layout)
    labels, disagreement_note = _chest_labels(lists, kept, entries, layout.label_file, label_disagreement)
    if disagreement_note:
        notes.append(disagreement_note)
        summary = (
            f"ChestX-ray14: {disagreement_note.split(' (')[0]}; {label_disagreement!r} labels used (see describe())."
        )
        print(textwrap.fill(summary, DESCRIBE_WIDTH))
    paths = {split: [present[lists[split][0][k]] for k in kept[split]] for split in SPLITS}
    images, cache_path = _decode_cached("chestxray14", root, paths, image_size, "L", cache, cache_dir)
    splits = {
        split: _split_from_arrays(
            images[split], labels[split], cache_path, split, 1, image_size, MULTI_LABEL, len(chestxray14.FINDINGS)
        )
        for split in SPLITS
    }
    metadata = {split: entry_metadata.reindex([lists[split][0][k] for k in kept[split]]) for split in SPLITS}
    return DatasetBundle(
        name="chestxray14",
        task=MULTI_LABEL,
        class_names=list(CHEST_LABELS),
        **splits,
        source=str(root),
        licence=chestxray14.LICENCE,
        image_size=image_size,
        notes=notes,
        metadata=metadata,
    )


def _report_chest_files(lists: dict, kept: dict, present: dict[str, Path], layout: chestxray14.ChestLayout) -> None:
    """Print the counts of listed images that are absent; warn naming images that no list names; raise for a
    split with no image at all."""
    listed = {name for names, _ in lists.values() for name in names}
    n_listed = len(listed)
    n_kept = sum(len(k) for k in kept.values())
    if n_kept < n_listed:  # at most 120 characters: the limit for a printed line in a stored notebook
        counts = ", ".join(f"{split} {len(kept[split]):,}" for split in SPLITS)
        print(
            f"ChestX-ray14: {n_kept:,} of {n_listed:,} listed images present ({counts}), "
            f"{n_listed - n_kept:,} absent: skipped."
        )
    empty = [split for split in SPLITS if not kept[split]]
    if empty:
        raise FileNotFoundError(
            f"no image of the {', '.join(empty)} list(s) is in {layout.images}: every split "
            "needs at least one image; unpack more of the ChestX-ray14 images there"
        )
    unlisted = sorted(set(present) - listed)
    if unlisted:
        warnings.warn(
            f"{len(unlisted)} image(s) in {layout.images} are in no split list and are not used: "
            f"{', '.join(unlisted[:10])}{', ...' if len(unlisted) > 10 else ''}",
            stacklevel=3,
        )


def _chest_labels(
    lists: dict, kept: dict, entries: dict[str, np.ndarray], label_file: Path, source: str
) -> tuple[dict[str, np.ndarray], str | None]:
    """split -> labels (N, 14) of the kept images, and a note when the lists and the CSV disagree somewhere."""
    differing = [line for split in SPLITS for line in chestxray14.disagreements(*lists[split], entries)]
    if differing and source == "error":
        raise ValueError(
            f"{len(differing)} listed image(s) have labels that differ from {label_file}: "
            f"{'; '.join(differing[:5])}{'; ...' if len(differing) > 5 else ''}. Check that the lists and the "
            "label file belong together, then pass label_disagreement='lists' to keep the lists' (ChestMNIST's) "
            "labels or 'data_entry' to take the label file's."
        )
    labels = {}
    for split in SPLITS:
        names, rows = lists[split]
        chosen = [entries.get(names[k], rows[k]) if source == "data_entry" else rows[k] for k in kept[split]]
        labels[split] = np.array(chosen, dtype=np.uint8).reshape(-1, len(chestxray14.FINDINGS))
    if not differing:
        return labels, None
    which = "the lists'" if source == "lists" else f"{chestxray14.LABEL_FILE}'s"
    return labels, (
        f"{len(differing)} listed image(s) have labels that differ between the split lists and "
        f"{chestxray14.LABEL_FILE} ({'; '.join(differing[:3])}); {which} labels are used."
    )


# ---------------------------------------------------------------------------------------------------------------
# Synthetic sets, written as medmnist files and read back through load_medmnist
# ---------------------------------------------------------------------------------------------------------------
def synthetic_dir(name: str, data_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """Folder of a generated synthetic set: ``<data dir>/synthetic/<name>-v<version>-seed<seed>``."""
    return resolve_data_dir(data_dir) / "synthetic" / f"{name}-v{synthetic.GENERATOR_VERSION}-seed{seed}"


def load_synthetic(name: str, data_dir: str | os.PathLike | None = None, seed: int = 0) -> DatasetBundle:
    """A synthetic set with exact posteriors (default sizes), generated into the data directory on first use.

    The medmnist-format file is read back by :func:`load_medmnist` (the real-data code path); the true posteriors
    and the generator's ground truth come from the posteriors file next to it.
    """
    if name not in synthetic.GENERATORS:
        raise ValueError(f"unknown synthetic set {name!r}; valid names: {', '.join(synthetic.GENERATORS)}")
    folder = synthetic_dir(name, data_dir, seed)
    flag = synthetic.MEDMNIST_FLAGS[name]
    path = folder / medmnist_filename(flag)
    if not (path.is_file() and synthetic.posteriors_path(path).is_file()):
        try:
            synthetic.write_medmnist_npz(path, synthetic.GENERATORS[name](seed=seed))
        except OSError as error:
            raise OSError(
                f"cannot write the synthetic set {name} into {folder} ({error}); point {DATA_DIR_ENV} "
                f"(or data_dir) at a writable folder"
            ) from error
    regenerate = f"Delete {folder} to regenerate it."
    bundle = _read_medmnist_file(flag, 28, path, regenerate)
    extra_keys = [f"{split}_posteriors" for split in SPLITS]
    posteriors_file = synthetic.posteriors_path(path)
    arrays = _read_npz(posteriors_file, extra_keys, regenerate)
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
    if version != synthetic.GENERATOR_VERSION:
        raise ValueError(
            f"{posteriors_file} was written by generator version {version}, this code is version "
            f"{synthetic.GENERATOR_VERSION}. Delete {folder} to regenerate it."
        )
    bundle.name = name
    bundle.source = f"{path} (generated by helpers.data.synthetic v{synthetic.GENERATOR_VERSION}, seed {seed})"
    bundle.licence = "generated data, no third-party licence (label names from MedMNIST)"
    bundle.true_posteriors = true_posteriors
    bundle.ground_truth = ground_truth
    bundle.notes = ["Labels were sampled from the exact posteriors, so they are noisy by design."]
    if bundle.task == MULTI_CLASS:
        bayes = float(true_posteriors["test"].max(dim=1).values.mean())
        bundle.notes.append(f"Expected test accuracy of the Bayes classifier: {bayes:.3f}.")
    return bundle


# ---------------------------------------------------------------------------------------------------------------
# Dispatcher
# ---------------------------------------------------------------------------------------------------------------
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


def dataset_task(name: str) -> str:
    """``multi-class`` or ``multi-label``: the task of a data set :func:`load_dataset` knows, without loading it
    (binary and ordinal MedMNIST sets count as multi-class, as when loaded)."""
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in DATASET_NAMES:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASET_NAMES)}")
    if key == "isic2018":
        return MULTI_CLASS
    return _task_of(INFO[synthetic.MEDMNIST_FLAGS.get(key, key)])


def load_dataset(
    name: str,
    image_size: int = 28,
    data_dir: str | os.PathLike | None = None,
    max_train: int | None = None,
    seed: int = 0,
    label_disagreement: str | None = None,
) -> DatasetBundle:
    """Load a data set by name: a MedMNIST 2D name (``dermamnist``, ``chestmnist``, ...), ``isic2018`` (from
    ``<data dir>/ISIC2018``, :func:`load_isic2018`), ``chestxray14`` (from ``<data dir>/ChestXray14``,
    :func:`load_chestxray14`) or a synthetic set: ``synthetic_dermamnist``, ``synthetic_chestmnist`` (labels
    coupled given the image) or ``synthetic_chestmnist_independent`` (independent given the image), 28 px only.
    The two real-data folders take any ``image_size`` and cache their decoded images in ``<data dir>/cache``.

    ``max_train`` keeps a seeded random subset of the training split (``seed``); validation and test are
    untouched. Synthetic sets are always generated with seed 0, and ISIC 2018's validation carve uses seed 0, so
    ``seed`` only picks the subset. ``label_disagreement``: ``chestxray14`` only (see :func:`load_chestxray14`;
    default ``"lists"``).
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
