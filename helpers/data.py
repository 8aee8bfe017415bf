"""Data sets as uint8 tensors: MedMNIST 2D, ISIC 2018 Task 3, and synthetic sets with exact posteriors.

Every loader reads its files once into ``uint8 (N, C, H, W)`` tensors (no per-item PIL in the training path) and
returns a :class:`DatasetBundle`. Files are never downloaded: a missing file raises ``FileNotFoundError`` naming
the file expected, the data set, its download URL and md5, and where to put it. Corrupt or wrong-shaped files raise
``ValueError``; nothing is ever substituted silently.

Data directory: the ``data_dir`` argument, else the environment variable ``CALIBMED_DATA_DIR``, else ``data/`` in
the repository root.
"""

from __future__ import annotations

import collections
import csv
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
import torch
from medmnist import INFO

from helpers import synthetic
from helpers.paths import display_path, shorten_paths

DATA_DIR_ENV = "CALIBMED_DATA_DIR"
MULTI_CLASS = "multi-class"
MULTI_LABEL = "multi-label"
MEDMNIST_SIZES = (28, 64, 128, 224)
DESCRIBE_WIDTH = 110  # characters per line of DatasetBundle.describe()
MEDMNIST_2D = tuple(name for name, info in INFO.items() if not name.endswith("3d"))
SYNTHETIC_NAMES = tuple(synthetic.GENERATORS)
DATASET_NAMES = MEDMNIST_2D + ("isic2018",) + SYNTHETIC_NAMES
SPLITS = ("train", "val", "test")
_SPLIT_ARRAYS = [f"{split}_{kind}" for split in SPLITS for kind in ("images", "labels")]  # keys of a medmnist .npz

ISIC_CLASSES = ("MEL", "NV", "BCC", "AKIEC", "BKL", "DF", "VASC")
ISIC_CLASS_NAMES = ["melanoma", "melanocytic nevus", "basal cell carcinoma",
                    "actinic keratosis / intraepithelial carcinoma", "benign keratosis", "dermatofibroma",
                    "vascular lesion"]
ISIC_SPLIT_NAMES = {"train": "Training", "val": "Validation", "test": "Test"}
ISIC_URL = "https://challenge.isic-archive.com/data/#2018"
ISIC_LICENCE = "CC BY-NC 4.0 (ISIC 2018 Task 3 / HAM10000, Tschandl et al. 2018; Codella et al. 2019)"
_ISIC_CACHE_VERSION = 1


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
    ``ground_truth`` (synthetic sets only): the generator's population quantities (see helpers.synthetic).
    ``notes``: remarks printed by ``describe()`` (e.g. an md5 that differs from the official release).
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
        lines = [f"{self.name}: {self.task}, {self.n_classes} {unit}, {self.image_size}x{self.image_size} px, "
                 f"{self.n_channels} channel(s)"]
        lines += textwrap.wrap(f"source: {shorten_paths(self.source)}", width, subsequent_indent="  ",
                               break_long_words=False, break_on_hyphens=False)
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
    return [line.replace("\xa0", " ") for line in textwrap.wrap(prefix + glued, width, subsequent_indent="  ",
                                                                break_long_words=False, break_on_hyphens=False)]


# ---------------------------------------------------------------------------------------------------------------
# Data directory
# ---------------------------------------------------------------------------------------------------------------
def repo_root() -> Path:
    """The repository root: the parent of the ``helpers`` package."""
    return Path(__file__).resolve().parent.parent


def resolve_data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data directory: ``path`` if given, else $CALIBMED_DATA_DIR, else ``<repo root>/data``."""
    if path is not None:
        return Path(path).expanduser()
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser()
    return repo_root() / "data"


data_dir = resolve_data_dir  # the public name; loaders use resolve_data_dir because their argument is data_dir


def _where_to_put(directory: Path) -> str:
    return (f"Put it in the data directory {directory} (chosen by the data_dir argument, else the environment "
            f"variable {DATA_DIR_ENV}, else <repo>/data).")


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
        raise ValueError(f"{path} exists but is {kind}, not the .npz file expected there; remove it or put the "
                         "file in its place")


def _read_npz(path: Path, keys: list[str], hint: str) -> dict[str, np.ndarray]:
    """Every requested array of an .npz file, or a ValueError naming the file and the problem."""
    try:
        archive = np.load(path, allow_pickle=False)
    except PermissionError as error:
        raise PermissionError(error.errno, f"cannot read {path}: permission denied; give this user read access "
                              f"(e.g. chmod u+r {path})", str(path)) from error
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
            raise ValueError(f"{path} is damaged: reading its arrays failed ({type(error).__name__}: {error}). "
                             f"{hint}") from error


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
        raise ValueError(f"{path}: {key} must have shape (N, {', '.join(map(str, expected))}) for "
                         f"{n_channels} channel(s) at {image_size} px, got {images.shape}")
    tensor = torch.from_numpy(np.ascontiguousarray(images))
    return tensor.unsqueeze(1) if n_channels == 1 else tensor.permute(0, 3, 1, 2).contiguous()


def _labels_to_tensor(labels: np.ndarray, path: Path, key: str, task: str, n_classes: int,
                      n_images: int) -> torch.Tensor:
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
        raise ValueError(f"{path}: {key} must be integers in [0, {n_classes - 1}], got values in "
                         f"[{values.min()}, {values.max()}]")
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
            f"No download is attempted. {fetch} {_where_to_put(directory)}")
    task, n_channels = _task_of(info), int(info["n_channels"])
    class_names = [info["label"][str(k)] for k in range(len(info["label"]))]
    arrays = _read_npz(path, _SPLIT_ARRAYS, f"Replace it with the official file: {fetch}")
    splits = {}
    for split in SPLITS:
        images = _images_to_tensor(arrays[f"{split}_images"], path, f"{split}_images", n_channels, image_size)
        labels = _labels_to_tensor(arrays[f"{split}_labels"], path, f"{split}_labels", task, len(class_names),
                                   len(images))
        splits[split] = Split(images, labels)
    actual_md5 = _md5(path)
    note = ("The file's md5 matches the official release." if actual_md5 == md5 else
            f"The file's md5 ({actual_md5}) differs from the official release ({md5}).")
    return DatasetBundle(name=name, task=task, class_names=class_names, **splits, source=str(path),
                         licence=info["license"], image_size=image_size, notes=[note])


# ---------------------------------------------------------------------------------------------------------------
# ISIC 2018 Task 3
# ---------------------------------------------------------------------------------------------------------------
def isic_paths(root: str | os.PathLike, split: str) -> tuple[Path, Path]:
    """(image folder, ground-truth CSV) of one split in the official ISIC 2018 Task 3 layout."""
    stem = f"ISIC2018_Task3_{ISIC_SPLIT_NAMES[split]}"
    root = Path(root)
    return root / f"{stem}_Input", root / f"{stem}_GroundTruth" / f"{stem}_GroundTruth.csv"


def _read_isic_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        missing = [c for c in ("image",) + ISIC_CLASSES if c not in columns]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; ISIC 2018 Task 3 ground truth has the columns "
                             f"image,{','.join(ISIC_CLASSES)}")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path} has no rows")
    image_ids = [row["image"] for row in rows]
    repeated = [image_id for image_id, count in collections.Counter(image_ids).items() if count > 1]
    if repeated:
        first = repeated[0]
        raise ValueError(f"{path}: {len(repeated)} image(s) are listed more than once (first: {first!r}, "
                         f"{image_ids.count(first)} times); each image must have exactly one row")
    try:
        one_hot = np.array([[float(row[c]) for c in ISIC_CLASSES] for row in rows])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: the class columns must be numbers 0/1 ({error})") from error
    bad = np.flatnonzero(~np.isin(one_hot, (0.0, 1.0)).all(axis=1) | (one_hot.sum(axis=1) != 1))
    if len(bad):
        raise ValueError(f"{path}: {len(bad)} row(s) are not one-hot over {','.join(ISIC_CLASSES)} (first: image "
                         f"{rows[bad[0]]['image']!r}, values {one_hot[bad[0]].tolist()})")
    return [row["image"] for row in rows], one_hot.argmax(axis=1)


def _find_image(folder: Path, image_id: str) -> Path | None:
    for suffix in (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG"):
        candidate = folder / (image_id + suffix)
        if candidate.is_file():
            return candidate
    return None


def _load_isic_images(paths: list[Path], image_size: int) -> np.ndarray:
    """Decode and resize every image once (bicubic; JPEG draft mode decodes at >= 2x the target first)."""
    from PIL import Image

    out = np.empty((len(paths), image_size, image_size, 3), dtype=np.uint8)
    for index, path in enumerate(paths):  # decoding files is inherently per file; this runs once per size
        with Image.open(path) as image:
            image.draft("RGB", (2 * image_size, 2 * image_size))
            out[index] = np.asarray(image.convert("RGB").resize((image_size, image_size),
                                                                Image.Resampling.BICUBIC))
    return out


def load_isic2018(root: str | os.PathLike, image_size: int = 28, cache: bool = True) -> DatasetBundle:
    """ISIC 2018 Task 3 (7 classes) from the official layout under ``root``, resized to ``image_size``.

    Layout (as downloaded from the challenge site): ``ISIC2018_Task3_{Training,Validation,Test}_Input/`` with
    ``<image>.jpg`` files and ``ISIC2018_Task3_{...}_GroundTruth/ISIC2018_Task3_{...}_GroundTruth.csv`` with the
    columns ``image,MEL,NV,BCC,AKIEC,BKL,DF,VASC`` (one-hot). Class order is the CSV's. Images are resized to a
    square (aspect ratio not kept, as MedMNIST does). With ``cache=True`` the resized arrays are saved as
    ``calibmed_cache_<size>px.npz`` in ``root`` and reused while the ground-truth CSVs are unchanged.
    """
    if not isinstance(image_size, int) or image_size < 8:
        raise ValueError(f"image_size must be an integer >= 8, got {image_size!r}")
    root = Path(root)
    layout = {split: isic_paths(root, split) for split in SPLITS}
    missing = [str(p) for folder, csv_path in layout.values() for p in (folder, csv_path) if not p.exists()]
    if missing:
        raise FileNotFoundError(
            f"ISIC 2018 Task 3 not found under {root}: missing {missing}. No download is attempted. Download the "
            f"Task 3 training, validation and test inputs and ground truths from {ISIC_URL} and unzip them into "
            f"{root} (default: <data dir>/ISIC2018, data dir from {DATA_DIR_ENV}).")
    fingerprint = hashlib.sha256(str(_ISIC_CACHE_VERSION).encode())
    for _, csv_path in layout.values():
        fingerprint.update(csv_path.read_bytes())
    cache_path = root / f"calibmed_cache_{image_size}px.npz"
    arrays = _read_isic_cache(cache_path, fingerprint.hexdigest()) if cache else None
    if arrays is None:
        arrays = {}
        for split, (folder, csv_path) in layout.items():
            image_ids, labels = _read_isic_csv(csv_path)
            paths = [_find_image(folder, image_id) for image_id in image_ids]
            absent = [image_id for image_id, path in zip(image_ids, paths) if path is None]
            if absent:
                raise FileNotFoundError(f"{len(absent)} image(s) listed in {csv_path} are missing from {folder} "
                                        f"(first: {absent[0]}.jpg)")
            arrays[f"{split}_images"] = _load_isic_images(paths, image_size)
            arrays[f"{split}_labels"] = labels.astype(np.int64)
        if cache:
            try:
                synthetic._write_npz(cache_path, {**arrays, "fingerprint": np.array(fingerprint.hexdigest())})
            except OSError as error:  # the cache only saves time; the data are already loaded
                warnings.warn(f"could not write the ISIC cache {cache_path} ({error}); the next load decodes the "
                              f"images again", stacklevel=2)
    splits = {}
    for split in SPLITS:  # the same checks as a medmnist file: a malformed cache raises instead of loading
        images = _images_to_tensor(arrays[f"{split}_images"], cache_path, f"{split}_images", 3, image_size)
        labels = _labels_to_tensor(arrays[f"{split}_labels"], cache_path, f"{split}_labels", MULTI_CLASS,
                                   len(ISIC_CLASSES), len(images))
        splits[split] = Split(images, labels)
    return DatasetBundle(name="isic2018", task=MULTI_CLASS, class_names=list(ISIC_CLASS_NAMES), **splits,
                         source=str(root), licence=ISIC_LICENCE, image_size=image_size,
                         notes=[f"Class order {', '.join(ISIC_CLASSES)} (the ground-truth CSV's)."])


def _read_isic_cache(path: Path, fingerprint: str) -> dict[str, np.ndarray] | None:
    if not path.is_file():
        return None
    arrays = _read_npz(path, _SPLIT_ARRAYS + ["fingerprint"], "Delete this cache file; it is rebuilt from the images.")
    return arrays if str(arrays["fingerprint"]) == fingerprint else None


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
            raise OSError(f"cannot write the synthetic set {name} into {folder} ({error}); point {DATA_DIR_ENV} "
                          f"(or data_dir) at a writable folder") from error
    bundle = load_medmnist(flag, 28, folder)
    extra_keys = [f"{split}_posteriors" for split in SPLITS]
    posteriors_file = synthetic.posteriors_path(path)
    arrays = _read_npz(posteriors_file, extra_keys, f"Delete {folder} to regenerate it.")
    true_posteriors = {}
    for split in SPLITS:
        values = torch.from_numpy(arrays[f"{split}_posteriors"].astype(np.float64))
        if values.shape != (len(bundle.splits()[split]), bundle.n_classes):
            raise ValueError(f"{posteriors_file}: {split}_posteriors has shape {tuple(values.shape)}, expected "
                             f"({len(bundle.splits()[split])}, {bundle.n_classes}). Delete {folder} to regenerate.")
        true_posteriors[split] = values
    with np.load(posteriors_file, allow_pickle=False) as archive:
        version = int(archive["generator_version"]) if "generator_version" in archive.files else None
        ground_truth = {key[3:]: torch.from_numpy(archive[key]) for key in archive.files if key.startswith("gt_")}
    if version != synthetic.GENERATOR_VERSION:
        raise ValueError(f"{posteriors_file} was written by generator version {version}, this code is version "
                         f"{synthetic.GENERATOR_VERSION}. Delete {folder} to regenerate it.")
    bundle.name = name
    bundle.source = f"{path} (generated by helpers.synthetic v{synthetic.GENERATOR_VERSION}, seed {seed})"
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
def inventory(data_dir: str | os.PathLike | None = None,
              names: tuple[str, ...] = ("dermamnist", "chestmnist")) -> list[dict[str, object]]:
    """Which dataset files are present in the data directory: one row per MedMNIST set and size, plus ISIC 2018.

    Only looks at file names (nothing is loaded); notebook 00 prints it as the data check.
    """
    directory = resolve_data_dir(data_dir)
    rows: list[dict[str, object]] = []
    for name in names:
        for size in MEDMNIST_SIZES:
            path = directory / medmnist_filename(name, size)
            rows.append({"dataset": name, "size": size, "file": str(path), "present": path.is_file()})
    isic_root = directory / "ISIC2018"
    rows.append({"dataset": "isic2018", "size": "any", "file": str(isic_root), "present": isic_root.is_dir()})
    return rows


def inventory_report(data_dir: str | os.PathLike | None = None) -> str:
    """``inventory`` as the lines notebook 00 prints: the data directory and one line per file, every path as
    ``helpers.paths.display_path`` writes it (relative to the repository, or under ``$CALIBMED_DATA_DIR``)."""
    lines = [f"data directory: {display_path(resolve_data_dir(data_dir))}"]
    for row in inventory(data_dir):
        size = f"{row['size']} px" if isinstance(row["size"], int) else "folder"
        lines.append(f"  {row['dataset']:12s} {size:>7s}  {'present' if row['present'] else 'missing':8s} "
                     f"{display_path(str(row['file']))}")
    return "\n".join(lines)


def subsample_train(bundle: DatasetBundle, max_train: int, seed: int = 0) -> DatasetBundle:
    """The bundle with a seeded random subset of ``max_train`` training images (kept in their original order).

    Validation and test splits are untouched; the training true posteriors (if any) follow the subset.
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


def load_dataset(name: str, image_size: int = 28, data_dir: str | os.PathLike | None = None,
                 max_train: int | None = None, seed: int = 0) -> DatasetBundle:
    """Load a data set by name: a MedMNIST 2D name (``dermamnist``, ``chestmnist``, ...), ``isic2018`` (from
    ``<data dir>/ISIC2018``) or a synthetic set: ``synthetic_dermamnist``, ``synthetic_chestmnist`` (labels coupled
    given the image) or ``synthetic_chestmnist_independent`` (independent given the image), 28 px only.

    ``max_train`` keeps a seeded random subset of the training split (``seed``); validation and test are
    untouched. Synthetic sets are always generated with seed 0, so ``seed`` only picks the subset.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in DATASET_NAMES:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASET_NAMES)}")
    if key in SYNTHETIC_NAMES:
        if image_size != 28:
            raise ValueError(f"{key} exists only at 28 px, got image_size={image_size!r}")
        bundle = load_synthetic(key, data_dir)
    elif key == "isic2018":
        bundle = load_isic2018(resolve_data_dir(data_dir) / "ISIC2018", image_size)
    else:
        bundle = load_medmnist(key, image_size, data_dir)
    if max_train is not None:
        bundle = subsample_train(bundle, max_train, seed)
    return bundle
