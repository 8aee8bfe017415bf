"""ISIC 2018 Task 3 in its official layout: which folders are there, ground truth, HAM10000 metadata, splits.

Layout under ``root`` (as the challenge's archives unzip; https://challenge.isic-archive.com/data/#2018)::

    ISIC2018_Task3_Training_Input/<image>.jpg
    ISIC2018_Task3_Training_GroundTruth/ISIC2018_Task3_Training_GroundTruth.csv   image,MEL,NV,BCC,AKIEC,BKL,DF,VASC
    ISIC2018_Task3_Validation_Input/, ISIC2018_Task3_Validation_GroundTruth/      optional, both or neither
    ISIC2018_Task3_Test_Input/, ISIC2018_Task3_Test_GroundTruth/                  as for training
    HAM10000_metadata.csv   optional: lesion_id, image_id, dx, dx_type, age, sex, localization, dataset

Without the validation folders, validation is carved from training: by lesion when ``HAM10000_metadata.csv`` is
present (the 10,015 HAM10000 training images show 7,470 lesions, several images each; an image of a validation
lesion in training would leak), else by image. The carve is stratified by class and seeded.

HAM10000 (Tschandl et al., Scientific Data 5, 180161, 2018) gives, per training image, the lesion, the
diagnosis method (``dx_type``: histo, follow_up, consensus, confocal), age, sex, body site (``localization``) and
the acquisition site (``dataset``): vidir_molemax, vidir_modern and vienna_dias (Medical University of Vienna),
rosendahl (a skin-cancer practice in Queensland, Australia). :func:`site_indices` picks images by site for
dataset-shift splits. This module parses; ``helpers.data.isic2018_bundle`` builds the tensors and the bundle.
"""

from __future__ import annotations

import collections
import csv
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from helpers.data.text_files import read_csv_frame, read_text

CLASSES = ("MEL", "NV", "BCC", "AKIEC", "BKL", "DF", "VASC")  # the ground-truth CSV's column order
CLASS_NAMES = [
    "melanoma",
    "melanocytic nevus",
    "basal cell carcinoma",
    "actinic keratosis / intraepithelial carcinoma",
    "benign keratosis",
    "dermatofibroma",
    "vascular lesion",
]
DX_CODES = {"mel": "MEL", "nv": "NV", "bcc": "BCC", "akiec": "AKIEC", "bkl": "BKL", "df": "DF", "vasc": "VASC"}
FOLDER_NAMES = {"train": "Training", "val": "Validation", "test": "Test"}
URL = "https://challenge.isic-archive.com/data/#2018"
LICENCE = "CC BY-NC 4.0 (ISIC 2018 Task 3 / HAM10000, Tschandl et al. 2018; Codella et al. 2019)"
METADATA_FILE = "HAM10000_metadata.csv"
METADATA_COLUMNS = ("lesion_id", "image_id", "dx", "dx_type", "age", "sex", "localization", "dataset")
SITES = ("vidir_molemax", "vidir_modern", "vienna_dias", "rosendahl")
VIENNA_SITES = ("vidir_molemax", "vidir_modern", "vienna_dias")
_METADATA_FIX = (
    "replace it with the file from the HAM10000 download (doi:10.7910/DVN/DBW86T), or remove it to carve "
    "validation by image"
)


def split_paths(root: str | Path, split: str) -> tuple[Path, Path]:
    """(image folder, ground-truth CSV) of one split in the official layout."""
    stem = f"ISIC2018_Task3_{FOLDER_NAMES[split]}"
    root = Path(root)
    return root / f"{stem}_Input", root / f"{stem}_GroundTruth" / f"{stem}_GroundTruth.csv"


def _fix(what: str) -> str:
    return (
        f"Run `python -m helpers.data fetch isic2018`, or download the Task 3 {what} from {URL} and unzip it into "
        "the ISIC 2018 folder (default: <data dir>/ISIC2018), keeping the archive's folder name."
    )


def find_layout(root: Path) -> dict[str, tuple[Path, Path]]:
    """The splits present under ``root``: train and test always, val only when both its folder and CSV exist.

    Raises FileNotFoundError naming each missing part and how to fix it, and for a validation split that is only
    half there (images without ground truth or the reverse)."""
    if not root.is_dir():
        raise FileNotFoundError(
            f"ISIC 2018 Task 3 not found: {root} is not a folder. No download is attempted. "
            f"{_fix('training and test inputs and ground truths')}"
        )
    layout, problems = {}, []
    for split in ("train", "test"):
        folder, csv_path = split_paths(root, split)
        for path, what in ((folder, "input"), (csv_path, "ground truth")):
            if not path.exists():
                problems.append(f"{path} is missing. {_fix(f'{FOLDER_NAMES[split]} {what}')}")
        layout[split] = (folder, csv_path)
    folder, csv_path = split_paths(root, "val")
    if folder.exists() != csv_path.exists():
        present, absent = (folder, csv_path) if folder.exists() else (csv_path, folder)
        problems.append(
            f"the validation split is incomplete: {present} exists but {absent} does not. "
            f"{_fix('Validation input and ground truth')} Or remove {present} to carve validation "
            "from the training images."
        )
    elif folder.exists():
        layout["val"] = (folder, csv_path)
    if problems:
        raise FileNotFoundError(f"ISIC 2018 Task 3 under {root} is incomplete:\n- " + "\n- ".join(problems))
    return dict(sorted(layout.items(), key=lambda item: list(FOLDER_NAMES).index(item[0])))


def read_ground_truth(path: Path) -> tuple[list[str], np.ndarray]:
    """Image ids and class indices (in ``CLASSES`` order) of an official ground-truth CSV (one-hot rows)."""
    reader = csv.DictReader(io.StringIO(read_text(path, _fix("ground truth"))))
    columns = reader.fieldnames or []
    missing = [c for c in ("image",) + CLASSES if c not in columns]
    if missing:
        raise ValueError(
            f"{path}: missing columns {missing}; ISIC 2018 Task 3 ground truth has the columns "
            f"image,{','.join(CLASSES)}"
        )
    rows = list(reader)
    if not rows:
        raise ValueError(f"{path} has no rows")
    image_ids = [row["image"] for row in rows]
    repeated = [image_id for image_id, count in collections.Counter(image_ids).items() if count > 1]
    if repeated:
        first = repeated[0]
        raise ValueError(
            f"{path}: {len(repeated)} image(s) are listed more than once (first: {first!r}, "
            f"{image_ids.count(first)} times); each image must have exactly one row"
        )
    try:
        one_hot = np.array([[float(row[c]) for c in CLASSES] for row in rows])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: the class columns must be numbers 0/1 ({error})") from error
    bad = np.flatnonzero(~np.isin(one_hot, (0.0, 1.0)).all(axis=1) | (one_hot.sum(axis=1) != 1))
    if len(bad):
        raise ValueError(
            f"{path}: {len(bad)} row(s) are not one-hot over {','.join(CLASSES)} (first: image "
            f"{rows[bad[0]]['image']!r}, values {one_hot[bad[0]].tolist()})"
        )
    return image_ids, one_hot.argmax(axis=1)


def check_disjoint(image_ids: dict[str, list[str]], csv_paths: dict[str, Path]) -> None:
    """ValueError naming both ground-truth CSVs when an image is listed in two splits (it would be trained on and
    scored, or selected and scored)."""
    splits = list(image_ids)
    for index, first in enumerate(splits):
        for second in splits[index + 1 :]:
            shared = sorted(set(image_ids[first]) & set(image_ids[second]))
            if shared:
                raise ValueError(
                    f"{len(shared)} image(s) are listed in both {csv_paths[first]} and {csv_paths[second]} (first: "
                    f"{shared[0]!r}); the splits must not share images. Use the official ground truths, or remove "
                    f"those rows from one of the two files"
                )


def read_metadata(path: Path) -> pd.DataFrame:
    """``HAM10000_metadata.csv`` indexed by ``image_id``; ValueError naming the file when it is empty, not UTF-8
    text or not CSV, for missing columns, repeated images, unknown diagnoses or unknown acquisition sites."""
    frame = read_csv_frame(
        path,
        {
            "lesion_id": str,
            "image_id": str,
            "dx": str,
            "dx_type": str,
            "sex": str,
            "localization": str,
            "dataset": str,
        },
        _METADATA_FIX,
    )
    missing = [column for column in METADATA_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: missing columns {missing}; HAM10000's metadata file has the columns "
            f"{', '.join(METADATA_COLUMNS)}. Replace it with the file from the HAM10000 download "
            f"(doi:10.7910/DVN/DBW86T) or remove it to carve validation by image."
        )
    repeated = frame["image_id"][frame["image_id"].duplicated()]
    if len(repeated):
        raise ValueError(f"{path}: {len(repeated)} image(s) have more than one row (first: {repeated.iloc[0]!r})")
    unknown = sorted(set(frame["dx"].dropna()) - set(DX_CODES))
    if unknown:
        raise ValueError(f"{path}: unknown diagnoses {unknown} in the dx column; expected {sorted(DX_CODES)}")
    unknown_sites = sorted(set(frame["dataset"].dropna()) - set(SITES))
    if unknown_sites:
        raise ValueError(
            f"{path}: unknown acquisition site(s) {unknown_sites} in the dataset column; HAM10000's sites are "
            f"{', '.join(SITES)}. {_METADATA_FIX[0].upper()}{_METADATA_FIX[1:]}."
        )
    return frame.set_index("image_id")[list(METADATA_COLUMNS[2:]) + ["lesion_id"]]


def metadata_for(
    image_ids: list[str], labels: np.ndarray, metadata: pd.DataFrame | None, where: Path, required: bool
) -> pd.DataFrame:
    """One row per image (index ``image_id``, in ``image_ids``' order) with the HAM10000 columns, empty (NaN) for
    images the metadata does not cover. With ``required`` every image must be covered. A covered image whose
    ``dx`` disagrees with the ground truth raises ValueError."""
    frame = pd.DataFrame(index=pd.Index(image_ids, name="image_id"))
    if metadata is None:
        return frame.assign(
            **{column: pd.Series(dtype=object) for column in METADATA_COLUMNS[2:]}, lesion_id=pd.Series(dtype=object)
        )
    frame = frame.join(metadata, how="left")
    uncovered = frame.index[frame["lesion_id"].isna()]
    if required and len(uncovered):
        raise ValueError(
            f"{METADATA_FILE} has no row for {len(uncovered)} of the {len(image_ids)} images of "
            f"{where} (first: {uncovered[0]}), so their lesions are unknown and validation cannot be "
            f"carved by lesion. Use the complete {METADATA_FILE} of the HAM10000 download, or remove "
            f"it to carve validation by image."
        )
    covered = frame["dx"].notna().to_numpy()
    expected = np.array([CLASSES[k] for k in labels])
    found = frame["dx"].map(DX_CODES).to_numpy()
    wrong = np.flatnonzero(covered & (found != expected))
    if len(wrong):
        first = wrong[0]
        raise ValueError(
            f"{len(wrong)} image(s) of {where} have a diagnosis in {METADATA_FILE} that disagrees with "
            f"the ground-truth CSV (first: {image_ids[first]}, dx {frame['dx'].iloc[first]!r} against "
            f"{expected[first]}); the two files must come from the same release"
        )
    return frame


def carve_validation(
    labels: np.ndarray, groups: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(train indices, validation indices, whether stratified), indices sorted: ``fraction`` of the groups
    (lesions, or images when each image is its own group) go to validation, stratified by class when every class
    has at least two groups and room on both sides (otherwise a plain seeded split).
    All images of a group share one class in HAM10000 (one diagnosis per lesion); the group's class is its first
    image's."""
    if not 0 < fraction < 1:
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), got {fraction!r}")
    unique, first = np.unique(groups, return_index=True)
    group_class = labels[first]
    stratified = _can_stratify(group_class, fraction)
    _, val_groups = train_test_split(
        unique, test_size=fraction, random_state=seed, stratify=group_class if stratified else None
    )
    in_val = np.isin(groups, val_groups)
    return np.flatnonzero(~in_val), np.flatnonzero(in_val), stratified


def _can_stratify(group_class: np.ndarray, fraction: float) -> bool:
    """sklearn's stratified split needs two groups per class and room for every class on both sides."""
    counts = np.bincount(group_class)
    counts = counts[counts > 0]
    n_val = math.ceil(fraction * len(group_class))
    return bool(counts.min() >= 2 and min(n_val, len(group_class) - n_val) >= len(counts))


def site_indices(metadata: pd.DataFrame, sites: tuple[str, ...]) -> np.ndarray:
    """Positions of the images acquired at ``sites`` (HAM10000's ``dataset`` column); ValueError for a name that is
    not a HAM10000 site."""
    unknown = sorted(set(sites) - set(SITES))
    if unknown:
        raise ValueError(f"unknown acquisition site(s) {unknown}; HAM10000's sites are {', '.join(SITES)}")
    return np.flatnonzero(metadata["dataset"].isin(sites).to_numpy())
