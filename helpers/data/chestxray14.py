"""NIH ChestX-ray14 in its official layout with ChestMNIST's patient-wise split: files, labels, checks.

Layout under ``root`` (Wang et al., "ChestX-ray8: Hospital-scale Chest X-ray Database and Benchmarks on
Weakly-Supervised Classification and Localization of Common Thorax Diseases", CVPR 2017; data: NIH Clinical
Center, https://nihcc.app.box.com/v/ChestXray-NIHCC)::

    images/<patient>_<follow-up>.png          the X-rays (any size; read as grayscale)
    Data_Entry_2017.csv                        Image Index, Finding Labels ("A|B" or "No Finding"), Patient ID, ...
    chestmnist_split/{train,val,test}_list.txt one line per image: "<image> y_1 ... y_14", 0/1 in ChestMNIST's
                                               label order, 78,468 / 11,219 / 22,433 images (ChestMNIST's sizes)

The lists give ChestMNIST's patient-wise split (from the CheXNet reimplementation arnoweng/CheXNet); their labels
are checked against ``Data_Entry_2017.csv`` wherever both name an image. Listed images that are absent from
``images/`` are skipped and counted (a sample or a partial download); images present but in no list are named.
This module parses and checks; ``helpers.data.chestxray14_bundle`` decodes the images and builds the bundle.
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.data.image_files import IMAGE_SUFFIXES
from helpers.data.label_stats import CHESTXRAY14_NAMES, finding_vector
from helpers.data.text_files import read_csv_frame, read_text

FINDINGS = list(CHESTXRAY14_NAMES.values())  # ChestMNIST's label order, as Data_Entry_2017.csv spells them
SPLITS = ("train", "val", "test")
LIST_FOLDER = "chestmnist_split"
LABEL_FILE = "Data_Entry_2017.csv"
URL = "https://nihcc.app.box.com/v/ChestXray-NIHCC"
_LIST_FIX = (
    "replace it with ChestMNIST's split list from the CheXNet reimplementation https://github.com/arnoweng/CheXNet "
    "(dataset/*_list.txt)"
)
LICENCE = "no restriction on use; acknowledge the NIH Clinical Center and cite Wang et al., CVPR 2017"
LABEL_SOURCES = ("error", "lists", "data_entry")  # what to do where the lists and Data_Entry_2017.csv disagree
METADATA_COLUMNS = {
    "Patient ID": "patient_id",
    "Follow-up #": "follow_up",
    "Patient Age": "age",
    "Patient Gender": "sex",
    "View Position": "view_position",
}


@dataclass
class ChestLayout:
    images: Path
    label_file: Path
    lists: dict[str, Path]


def find_layout(root: Path) -> ChestLayout:
    """The files under ``root``; FileNotFoundError naming every missing one and where it comes from."""
    layout = ChestLayout(
        root / "images", root / LABEL_FILE, {split: root / LIST_FOLDER / f"{split}_list.txt" for split in SPLITS}
    )
    missing = [path for path in (layout.images, layout.label_file, *layout.lists.values()) if not path.exists()]
    if missing:
        raise FileNotFoundError(
            f"NIH ChestX-ray14 under {root} is incomplete: missing {', '.join(map(str, missing))}. No download is "
            f"attempted. The images (images_*.tar.gz, unpacked into {layout.images}) and {LABEL_FILE} come from "
            f"{URL}; the split lists {LIST_FOLDER}/{{train,val,test}}_list.txt (ChestMNIST's patient-wise split, "
            "'<image> y_1 ... y_14' per line) from the CheXNet reimplementation https://github.com/arnoweng/CheXNet "
            "(dataset/*_list.txt). Default folder: <data dir>/ChestXray14."
        )
    if not layout.images.is_dir():
        raise FileNotFoundError(f"{layout.images} is not a folder; unpack the ChestX-ray14 images into it")
    return layout


def read_split_list(path: Path) -> tuple[list[str], np.ndarray]:
    """Image names and labels (N, 14) uint8 of one split list; ValueError naming the line of a malformed entry
    and any image listed twice."""
    names, rows = [], []
    for line_number, line in enumerate(read_text(path, _LIST_FIX).splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 1 + len(FINDINGS) or any(value not in ("0", "1") for value in fields[1:]):
            raise ValueError(
                f"{path}, line {line_number}: expected an image name and {len(FINDINGS)} labels "
                f"0/1 ({', '.join(FINDINGS)}), got {line.strip()[:120]!r}"
            )
        names.append(fields[0])
        rows.append([int(value) for value in fields[1:]])
    if not names:
        raise ValueError(f"{path} lists no images")
    repeated = [name for name, count in collections.Counter(names).items() if count > 1]
    if repeated:
        raise ValueError(f"{path}: {len(repeated)} image(s) are listed more than once (first: {repeated[0]})")
    return names, np.array(rows, dtype=np.uint8)


def read_data_entry(path: Path) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """(image name -> 14 labels uint8 in ChestMNIST's order, per-image metadata indexed by image name) from
    ``Data_Entry_2017.csv``; ValueError for missing columns, repeated images or unknown findings."""
    frame = read_csv_frame(
        path, {"Image Index": str, "Finding Labels": str}, f"replace it with {LABEL_FILE} from {URL}"
    )
    needed = ["Image Index", "Finding Labels", *METADATA_COLUMNS]
    missing = [column for column in needed if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: missing columns {missing}; ChestX-ray14's {LABEL_FILE} has the columns "
            f"{', '.join(needed)}, ... Replace it with the file from {URL}."
        )
    repeated = frame["Image Index"][frame["Image Index"].duplicated()]
    if len(repeated):
        raise ValueError(f"{path}: {len(repeated)} image(s) have more than one row (first: {repeated.iloc[0]})")
    labels = {
        name: finding_vector(str(text), f"{path}, image {name}")
        for name, text in zip(frame["Image Index"], frame["Finding Labels"])
    }
    metadata = frame.set_index("Image Index")[list(METADATA_COLUMNS)].rename(columns=METADATA_COLUMNS)
    return labels, metadata.rename_axis("image")


def check_patient_wise(lists: dict[str, list[str]], where: Path) -> None:
    """ValueError if an image is in two lists or a patient (``<patient>_<follow-up>.png``) in two splits."""
    owner: dict[str, str] = {}
    for split, names in lists.items():
        for name in names:
            if name in owner:
                raise ValueError(
                    f"{name} is listed in both {owner[name]}_list.txt and {split}_list.txt under "
                    f"{where}: the split lists must not overlap"
                )
            owner[name] = split
    patient_splits = collections.defaultdict(set)
    for name, split in owner.items():
        patient_splits[name.split("_")[0]].add(split)
    shared = {patient: sorted(splits) for patient, splits in patient_splits.items() if len(splits) > 1}
    if shared:
        patient, splits = next(iter(shared.items()))
        raise ValueError(
            f"the split lists under {where} are not patient-wise: {len(shared)} patient(s) have images "
            f"in more than one split (first: patient {patient} in {splits}); use ChestMNIST's lists"
        )


def disagreements(names: list[str], labels: np.ndarray, entries: dict[str, np.ndarray]) -> list[str]:
    """One line per listed image whose labels differ from ``Data_Entry_2017.csv``'s (images in both only)."""
    lines = []
    for name, row in zip(names, labels):
        expected = entries.get(name)
        if expected is not None and not np.array_equal(row, expected):
            lines.append(f"{name}: list {_findings(row)}, {LABEL_FILE} {_findings(expected)}")
    return lines


def _findings(row: np.ndarray) -> str:
    return "|".join(FINDINGS[t] for t in np.flatnonzero(row)) or "No Finding"


def present_images(folder: Path) -> dict[str, Path]:
    """Image file name -> path for every image file directly in ``folder``."""
    with os.scandir(folder) as entries:
        return {
            entry.name: Path(entry.path) for entry in entries if entry.name.endswith(IMAGE_SUFFIXES) and entry.is_file()
        }
