"""The .npz archives every data file and cache is: read with every problem a ``ValueError`` (or
``PermissionError``) that names the file and says how to repair it, never a substituted default; written atomically
with fixed zip timestamps, so identical arrays give identical bytes.
"""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from helpers.utils import write_atomically_with


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


def check_regular_file(path: Path) -> None:
    """A ValueError if something other than a regular file (a directory, a FIFO) is at ``path``."""
    kind = _not_a_regular_file(path)
    if kind is not None:
        raise ValueError(
            f"{path} exists but is {kind}, not the .npz file expected there; remove it or put the file in its place"
        )


def read_npz(path: Path, keys: list[str], hint: str) -> dict[str, np.ndarray]:
    """Every requested array of an .npz file, or a ValueError naming the file and the problem (the file is closed
    either way)."""
    try:
        with open(path, "rb") as handle:
            return _read_arrays(path, handle, keys, hint)
    except PermissionError as error:
        raise PermissionError(
            error.errno,
            f"cannot read {path}: permission denied; give this user read access (e.g. chmod u+r {path})",
            str(path),
        ) from error


def _read_arrays(path: Path, handle: Any, keys: list[str], hint: str) -> dict[str, np.ndarray]:
    try:
        archive = np.load(handle, allow_pickle=False)
    except PermissionError:
        raise
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


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed with fixed zip timestamps (identical bytes for identical arrays), written atomically."""

    def write(file) -> None:
        with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for key, value in arrays.items():
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.asarray(value), allow_pickle=False)
                info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, buffer.getvalue())

    write_atomically_with(path, write)
