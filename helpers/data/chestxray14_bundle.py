"""NIH ChestX-ray14 as a :class:`~helpers.data.DatasetBundle` like ChestMNIST's: 14 labels in ChestMNIST's order,
ChestMNIST's patient-wise split, grayscale images decoded and resized by one pipeline (cached), labels checked
against ``Data_Entry_2017.csv``. :mod:`helpers.data.chestxray14` parses and checks the official layout.
"""

from __future__ import annotations

import os
import textwrap
import warnings
from pathlib import Path

import numpy as np
from medmnist import INFO

from helpers.data import chestxray14, image_files
from helpers.data.bundle import DESCRIBE_WIDTH, MULTI_LABEL, SPLITS, DatasetBundle, split_from_arrays
from helpers.data.image_cache import check_image_size, decode_cached

CHEST_LABELS = [INFO["chestmnist"]["label"][str(t)] for t in range(len(INFO["chestmnist"]["label"]))]


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
    check_image_size(image_size)
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
    images, cache_path = decode_cached("chestxray14", root, paths, image_size, "L", cache, cache_dir)
    splits = {
        split: split_from_arrays(
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
