"""Atomic file writes, shared by every writer of the course (results JSON, summaries, notebooks, run caches, stored
runs, checkpoints, data files).

A file is written to a temporary file with a unique name in the target's folder and then renamed over the target
(``os.replace``): a reader sees the old file or the new one, never a partial one, and processes writing the same
path at once never share a temporary file. The temporary file is created with ``os.open(..., 0o666)``, so the
kernel applies the process's umask (and the folder's default ACL) as it does to any new file: 0644 under umask 022.
``tempfile.mkstemp`` would create it with mode 0600 whatever the umask, and the rename keeps that mode.
(The ``atomicwrites`` package did this job but is archived and unmaintained.)
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

_ATTEMPTS = 100  # unique names collide only by chance (48 random bits); a persistent FileExistsError is a real problem


def _create_temporary(path: Path) -> tuple[int, Path]:
    """A new, empty file next to ``path`` with a unique name, opened for writing: (descriptor, its path)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(_ATTEMPTS):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a unique temporary file next to {path} in {_ATTEMPTS} attempts")


def write_atomically_with(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` through ``write(binary_file)`` into a uniquely named temporary file in the same folder, then
    rename it into place; the folder is created when missing. On any failure the temporary file is removed and the
    error raised, and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = _create_temporary(path)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`write_atomically_with`)."""
    write_atomically_with(path, lambda file: file.write(data))


def write_text_atomically(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`write_atomically_with`)."""
    write_bytes_atomically(path, text.encode(encoding))


def move_folder_into_place(staging: str | os.PathLike, target: str | os.PathLike) -> None:
    """Rename a fully written folder ``staging`` to ``target`` in one step (same file system), so ``target`` is
    never seen half written; ``target`` must not exist or be an empty folder (``os.replace``'s rule for folders)."""
    os.replace(staging, target)
