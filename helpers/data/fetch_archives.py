"""The real-image data sets as their publishers ship them: the ISIC 2018 Task 3 archives, downloaded and unpacked
into ``<data dir>/ISIC2018`` after saying their sizes (:func:`fetch_isic2018`), and NIH ChestX-ray14, whose
archives are too large to fetch on a user's behalf: :func:`chestxray14_instructions` says what to download and where
to put it. Command line: ``python -m helpers.data fetch isic2018`` / ``chestxray14``.

Downloads go through :func:`helpers.data.fetch.download` (atomic, length-checked; the ISIC archives publish no
md5). An archive is unpacked into a temporary folder next to its target and renamed into place, so a folder of the
layout is either complete or absent; an archive is deleted once unpacked, and kept (and reused) when unpacking
fails.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from helpers.data import chestxray14, isic2018
from helpers.data.fetch import (
    FetchError,
    Source,
    download,
    remote_size,
    size_text,
    with_test_sources,
    writable_directory,
)
from helpers.data.locations import resolve_data_dir
from helpers.utils import atomic

ISIC_FOLDER = "ISIC2018"
#: where the ISIC challenge publishes its 2018 archives (https://challenge.isic-archive.com/data/#2018)
ISIC_ARCHIVE_URL = "https://isic-challenge-data.s3.amazonaws.com/2018/"
#: the Task 3 archives the course needs, each unpacking to the folder of its name (validation is optional: without
#: it the course carves validation from training)
ISIC_ARCHIVES = (
    "ISIC2018_Task3_Training_Input",
    "ISIC2018_Task3_Training_GroundTruth",
    "ISIC2018_Task3_Test_Input",
    "ISIC2018_Task3_Test_GroundTruth",
)
HAM10000_DOI = "doi:10.7910/DVN/DBW86T"
CHESTXRAY14_FOLDER = "ChestXray14"
#: ChestMNIST's patient-wise split lists, as published with the CheXNet reimplementation
CHEXNET_LISTS_URL = "https://github.com/arnoweng/CheXNet/tree/master/ChestX-ray14/labels"


def isic_sources() -> dict[str, Source]:
    """{folder: source of its zip archive} for :data:`ISIC_ARCHIVES`."""
    return {
        stem: with_test_sources(Source(f"{ISIC_ARCHIVE_URL}{stem}.zip", None, f"{stem}.zip")) for stem in ISIC_ARCHIVES
    }


def metadata_note(root: Path) -> str:
    """What notebook 12 still needs when ``HAM10000_metadata.csv`` is not in the ISIC folder ("" when it is)."""
    path = root / isic2018.METADATA_FILE
    if path.is_file():
        return ""
    return (
        f"Notebook 12's acquisition-site split also needs HAM10000's metadata, which the ISIC archives do not hold: "
        f"download HAM10000_metadata from the HAM10000 data set (Harvard Dataverse, {HAM10000_DOI}) and save it as "
        f"{path} (columns lesion_id, image_id, dx, dx_type, age, sex, localization, dataset)."
    )


def _confirm(question: str, yes: bool, ask: Callable[[str], str] | None) -> None:
    """Go on when ``yes``, or when the person at the terminal answers y; else FetchError (nothing downloaded)."""
    if yes:
        return
    if ask is None:
        if not sys.stdin.isatty():
            raise FetchError(f"{question} Nothing was downloaded: pass --yes to download without being asked.")
        ask = input
    if ask(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise FetchError("nothing was downloaded (answer y, or pass --yes, to download)")


def _check_free_space(root: Path, needed: int) -> None:
    free = shutil.disk_usage(root).free
    if free < needed:
        raise FetchError(
            f"{root} has {size_text(free)} free; the archives and their unpacked images need about "
            f"{size_text(needed)}. Free some space or choose another data directory."
        )


def unpack(archive: Path, folder: str, root: Path) -> Path:
    """Unpack the members under ``folder/`` of the zip ``archive`` into ``root/folder`` (through a temporary folder
    renamed into place; zipfile drops absolute and ``..`` parts of member names), then delete the archive. A damaged
    archive or one without that folder is a FetchError and is kept, named in the message."""
    staging = root / f".{folder}.{secrets.token_hex(6)}.unpacking"
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = [info for info in zipped.infolist() if info.filename.startswith(f"{folder}/")]
            if not members:
                tops = sorted({info.filename.split("/")[0] for info in zipped.infolist()})
                raise FetchError(
                    f"{archive} holds no folder {folder}/ (it holds {', '.join(tops[:5]) or 'nothing'}): not the "
                    f"official archive. Delete it and fetch again."
                )
            zipped.extractall(staging, members)
        atomic.move_folder_into_place(staging / folder, root / folder)
    except (zipfile.BadZipFile, EOFError) as error:
        raise FetchError(f"{archive} is not a complete zip archive ({error}): delete it and fetch again") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    archive.unlink()
    return root / folder


def _archive(root: Path, source: Source, size: int | None) -> Path:
    """The downloaded archive: the one already in ``root`` when it has the server's size, else a fresh download."""
    path = root / source.filename
    if path.is_file() and size is not None and path.stat().st_size == size:
        print(f"{path} is already downloaded ({size_text(size)}): unpacking it", flush=True)
        return path
    return download(source, path)


def fetch_isic2018(
    data_dir: str | os.PathLike | None = None, yes: bool = False, ask: Callable[[str], str] | None = None
) -> Path:
    """Download and unpack the ISIC 2018 Task 3 archives the course needs (:data:`ISIC_ARCHIVES`) into
    ``<data dir>/ISIC2018``, after printing their sizes and asking (``yes`` skips the question; ``ask`` replaces
    ``input``). Folders already there are kept. Returns the ISIC folder."""
    root = resolve_data_dir(data_dir) / ISIC_FOLDER
    todo = {folder: source for folder, source in isic_sources().items() if not (root / folder).is_dir()}
    if not todo:
        print(f"ISIC 2018 Task 3 is already in {root}")
    else:
        sizes = {folder: remote_size(source) for folder, source in todo.items()}
        total = sum(size or 0 for size in sizes.values())
        print(f"ISIC 2018 Task 3 (licence {isic2018.LICENCE}): {len(todo)} archive(s) from {ISIC_ARCHIVE_URL}")
        for folder, source in todo.items():
            print(f"  {source.filename:45s} {size_text(sizes[folder]):>12s}")
        _confirm(f"Download {size_text(total)} into {root} and unpack it there?", yes, ask)
        writable_directory(root)
        _check_free_space(root, 2 * total)
        for folder, source in todo.items():
            unpack(_archive(root, source, sizes[folder]), folder, root)
            print(f"unpacked {root / folder}", flush=True)
    note = metadata_note(root)
    if note:
        print(note)
    return root


def chestxray14_instructions(data_dir: str | os.PathLike | None = None) -> str:
    """What to download for NIH ChestX-ray14 and where to put it (the course does not download it: 112,120 images
    in 12 archives of about 42 GB in all, offered by the NIH Clinical Center in a Box folder)."""
    root = resolve_data_dir(data_dir) / CHESTXRAY14_FOLDER
    return "\n".join(
        [
            "NIH ChestX-ray14 is not downloaded by the course: its 112,120 images come as 12 archives",
            "(images_001.tar.gz ... images_012.tar.gz, about 42 GB in all) from the NIH Clinical Center:",
            f"{chestxray14.URL} (the folder's batch_download_zips.py lists a direct link for each archive).",
            "Any subset of the archives works.",
            f"Put into {root}:",
            f"  1. the images: tar -xzf images_001.tar.gz -C {root}   (each archive unpacks into images/)",
            f"  2. the label file {chestxray14.LABEL_FILE} from the same folder, as {root / chestxray14.LABEL_FILE}",
            f"  3. ChestMNIST's split lists train_list.txt, val_list.txt and test_list.txt from {CHEXNET_LISTS_URL},",
            f"     into {root / chestxray14.LIST_FOLDER}/",
            "Then use the dataset option chestxray14 (e.g. -p dataset chestxray14); notebook 13's section 1 reads it",
            f"when present. Licence: {chestxray14.LICENCE}.",
        ]
    )
