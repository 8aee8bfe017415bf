"""The data a run of the course needs, checked before anything runs (``python -m helpers.course check-data``, which
``make test`` and ``make course`` run before their notebook stage), and the notebooks a run skips.

A notebook's data sets are its knob ``dataset`` and every other ``*_dataset`` knob (but the optional ones,
:data:`OPTIONAL_KNOBS`) at its ``image_size``, as the run resolves them: the run's parameters, else the notebook's
parameters cell, else its ``PROFILES`` table in the run's profile (or the notebook's default profile). Three kinds:

* **a MedMNIST file** (``dermamnist.npz``): downloaded when missing and the network answers
  (:func:`helpers.data.download`, md5-checked); when it cannot be, the check stops, before anything runs, with one
  message that names the file, where to put it and the fetch command;
* **a real-image folder** that cannot be fetched cheaply (ISIC 2018 Task 3, NIH ChestX-ray14; and the files of
  :data:`NOTEBOOK_FILES`): when it is absent the notebook is skipped, with one line saying why and how to enable it.
  The runner records it in the run's summary as ``skipped`` with that reason, and ``check`` accepts it. With
  ``CALIBMED_REQUIRE_ALL_DATA=1`` (CI, which has the shared data) an absent folder stops the run instead, so there
  every notebook runs;
* **a synthetic set**: generated on first use; nothing to check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medmnist import INFO

from helpers import data
from helpers.data import fetch_archives
from helpers.utils import DATA_DIR_ENV

#: set to 1 where every notebook must run (CI): a notebook that would be skipped for want of data fails the check
REQUIRE_ALL_DATA_ENV = "CALIBMED_REQUIRE_ALL_DATA"
#: data-set knobs a notebook treats as optional (notebook 13's section 1 says it is skipped without the real X-rays)
OPTIONAL_KNOBS = ("xray_dataset",)
#: files a notebook needs beyond its data sets: {notebook: ((path in the data directory, what for, how to get it))}
NOTEBOOK_FILES = {
    "12_dataset_shift": (
        (
            f"{fetch_archives.ISIC_FOLDER}/{data.METADATA_FILE}",
            "HAM10000's metadata (its acquisition-site split)",
            f"download HAM10000_metadata from the HAM10000 data set ({fetch_archives.HAM10000_DOI}) and save it "
            "there as CSV",
        ),
    ),
}


@dataclass(frozen=True)
class Need:
    """Files a notebook needs: what they are (``label``), the paths that must exist, and how to get them (``hint``);
    ``medmnist`` is (name, image size) for a MedMNIST file the check can download."""

    label: str
    paths: tuple[Path, ...]
    hint: str
    medmnist: tuple[str, int] | None = None

    def absent(self) -> list[Path]:
        """The paths that do not exist."""
        return [path for path in self.paths if not path.exists()]


def require_all_data() -> bool:
    """Whether every notebook must run (``CALIBMED_REQUIRE_ALL_DATA=1``): nothing may be skipped for want of data."""
    return os.environ.get(REQUIRE_ALL_DATA_ENV, "").strip() == "1"


def dataset_needs(name: str, image_size: int, data_dir: Path) -> list[Need]:
    """What the data set ``name`` at ``image_size`` px needs in ``data_dir``; [] for a generated (synthetic) set and
    for a name the course does not know (the notebook's own check names it)."""
    if name in data.MEDMNIST_2D and image_size in data.MEDMNIST_SIZES:
        filename = data.medmnist_filename(name, image_size)
        return [
            Need(
                f"{INFO[name]['python_class']} ({filename}, {image_size} px)",
                (data_dir / filename,),
                data.fetch_command(name, image_size),
                (name, image_size),
            )
        ]
    if name == "isic2018":
        root = data_dir / fetch_archives.ISIC_FOLDER
        paths = tuple(path for split in ("train", "test") for path in data.split_paths(root, split))
        hint = (
            "`python -m helpers.data fetch isic2018` downloads the official archives (their size is said first), or "
            "link a copy of the official layout there (data/README.md)"
        )
        return [Need("ISIC 2018 Task 3", paths, hint)]
    if name == "chestxray14":
        root = data_dir / fetch_archives.CHESTXRAY14_FOLDER
        paths = (root / "images", root / data.LABEL_FILE, root / data.LIST_FOLDER)
        hint = "`python -m helpers.data fetch chestxray14` says what to download and where to put it"
        return [Need("NIH ChestX-ray14", paths, hint)]
    return []


def notebook_needs(
    stem: str,
    profiles: Mapping[str, Mapping[str, Any]],
    defaults: Mapping[str, Any],
    profile: str | None,
    extra: Mapping[str, Any],
    data_dir: Path,
) -> list[Need]:
    """The needs of notebook ``stem`` in a run: its ``PROFILES`` table (``profiles``), its parameters cell's values
    (``defaults``), the run's profile (None: the notebook's own) and parameters (``extra``); ``data_dir`` is the
    data directory the notebook will read."""
    chosen = extra.get("profile") or profile or defaults.get("profile")
    table = profiles.get(chosen, {}) if isinstance(chosen, str) else {}

    def knob(name: str) -> Any:
        for source in (extra, defaults, table):
            if source.get(name) is not None:
                return source[name]
        return None

    image_size = knob("image_size")
    knobs = sorted({name for source in (table, defaults, extra) for name in source if name.endswith("dataset")})
    needs = [
        need
        for name in knobs
        if name not in OPTIONAL_KNOBS and isinstance(knob(name), str)
        for need in dataset_needs(
            knob(name).strip().lower(), image_size if isinstance(image_size, int) else 28, data_dir
        )
    ]
    needs += [Need(label, (data_dir / path,), hint) for path, label, hint in NOTEBOOK_FILES.get(stem, ())]
    return needs


def skip_reason(needs: list[Need]) -> str | None:
    """Why a notebook cannot run with these needs, in one line with how to enable it; None when it can (a missing
    MedMNIST file is not a reason to skip: the check downloads it or stops)."""
    for need in needs:
        absent = need.absent()
        if need.medmnist is None and absent:
            more = f", and {len(absent) - 1} more of its paths" if len(absent) > 1 else ""
            return f"it needs {need.label}, which is not in place ({absent[0]} is absent{more}); to run it, {need.hint}"
    return None


def _missing_medmnist(needs_by_notebook: Mapping[str, list[Need]]) -> list[Need]:
    unique = {need.paths: need for needs in needs_by_notebook.values() for need in needs if need.medmnist}
    return [need for need in unique.values() if need.absent()]


def _fetch(need: Need) -> str | None:
    """Download a missing MedMNIST file; None when it arrived, else why not."""
    name, size = need.medmnist
    source, target = data.medmnist_source(name, size), need.paths[0]
    print(f"{need.label} is missing from {target.parent}: downloading it from {source.url}", flush=True)
    try:
        data.download(source, target)
    except (data.FetchError, OSError, ValueError) as error:
        return str(error)
    print(f"{target}: md5 {source.md5} checked", flush=True)
    return None


def _unfetched_message(failures: list[tuple[Need, str]]) -> str:
    """The one message for MedMNIST files that are missing and could not be downloaded."""
    parts = []
    for need, why in failures:
        name, size = need.medmnist
        source, target = data.medmnist_source(name, size), need.paths[0]
        parts.append(
            f"{need.label} is missing and could not be downloaded ({why}). Put {target.name} in the data directory "
            f"{target.parent} (set {DATA_DIR_ENV} to use another folder): run `{need.hint}` (make data) once the "
            f"network answers, or download {source.url} (md5 {source.md5}) and save it as {target}."
        )
    return "error: nothing was run. " + " ".join(parts)


def check_data(needs_by_notebook: Mapping[str, list[Need]], fetch: bool = True) -> dict[str, str]:
    """Make sure a run can start: download every missing MedMNIST file (unless not ``fetch``), else SystemExit with
    one message; print one line per notebook that will be skipped (SystemExit instead under
    ``CALIBMED_REQUIRE_ALL_DATA=1``). Returns {notebook: why it is skipped}."""
    failures = []
    for need in _missing_medmnist(needs_by_notebook):
        why = _fetch(need) if fetch else "--no-fetch: not downloaded"
        if why is not None:
            failures.append((need, why))
    if failures:
        raise SystemExit(_unfetched_message(failures))
    skipped = {stem: reason for stem, needs in needs_by_notebook.items() if (reason := skip_reason(needs))}
    if skipped and require_all_data():
        lines = [f"{stem}: {reason}" for stem, reason in skipped.items()]
        raise SystemExit(
            f"error: {REQUIRE_ALL_DATA_ENV}=1 (every notebook must run) but data are missing; nothing was run:\n  "
            + "\n  ".join(lines)
        )
    for stem, reason in skipped.items():
        print(f"{stem} will be skipped: {reason}")
    ready = len(needs_by_notebook) - len(skipped)
    print(f"data check: the data of {ready} of {len(needs_by_notebook)} notebook(s) are in place")
    return skipped
