"""The files of trained runs, read and written with an integrity check: stored runs (``.npz``) and cached runs
(``.pt``) (:mod:`helpers.training.run_store` decides which run lives where).

**The content hash (issue 29).** Both kinds of file are zip archives (``np.savez_compressed``, ``torch.save``).
Every run file this code writes is *sealed*: its zip comment is ``calibmed-sha256:<hex>``, the SHA-256 of every
byte of the file before the 64 hex digits. A reader recomputes it before it reads anything, so a file changed after
it was written (one flipped byte anywhere, a truncation, an edit) is a :class:`DamagedRunError` naming the file, and
the run is trained again. The hash is file integrity, not identity: it is not part of a run's key, and a run's key
and the training version do not depend on it. Both files stay what they were (``np.load`` and ``torch.load`` read
them; the zip comment is ignored there).

* A cached run (``runs/cache/*.pt``) must carry the hash: the cache is local and rebuilt on demand, so a file
  without one (from older code, or whose seal was damaged) is trained again. It is read with
  ``torch.load(weights_only=True)`` (tensors and plain data only: a crafted file cannot run code when loaded).
* A stored run (``stored_runs/*/*.npz``, committed) carries it when it was stored by this code, and its metadata
  says so (``"integrity"``), so a damaged seal is not mistaken for an older file. Runs stored before the hash
  existed have none and are verified by the checks they always had (zip CRC-32s, the metadata's fields, the key,
  the logits' shapes and values); they are read as they are, never rewritten.

:func:`check_run_file_bytes` applies the same checks to the bytes of a run file that another machine sent (the
Ray engine, :mod:`helpers.course.ray_engine`) before they are written into this checkout's store.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import pickle
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from helpers.utils import atomic

__all__ = [
    "DamagedRunError",
    "SEAL_TAG",
    "INTEGRITY",
    "CACHED_FIELDS",
    "STORED_META_FIELDS",
    "seal",
    "verify_seal",
    "write_sealed",
    "check_fields",
    "read_cached_payload",
    "write_cached_payload",
    "read_stored_arrays",
    "read_loss_state",
    "check_run_file_bytes",
]


class DamagedRunError(RuntimeError):
    """A stored or cached run file that cannot be read or does not fit the data it is loaded for."""


#: the start of a sealed file's zip comment; the 64 hex digits of the SHA-256 follow
SEAL_TAG = b"calibmed-sha256:"
#: what a stored run's metadata says when its file is sealed (``meta["integrity"]``)
INTEGRITY = "sha256 of the file in its zip comment"
_DIGITS = 64
_SEAL_SIZE = len(SEAL_TAG) + _DIGITS
_END_RECORD = b"PK\x05\x06"  # the zip end-of-central-directory record: 22 bytes, then the comment
_END_RECORD_SIZE = 22

_NUMBER = (int, float)
#: the entries a cached run (``.pt``) must have, with their types
CACHED_FIELDS: dict[str, type | tuple[type, ...]] = {
    "model": dict,
    "loss": dict,
    "history": list,
    "val_logits": torch.Tensor,
    "test_logits": torch.Tensor,
    "seconds": _NUMBER,
}
#: the entries a stored run's metadata must have, with their types
STORED_META_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "key": str,
    "name": str,
    "history": list,
    "seconds": _NUMBER,
    "definition": dict,
}
#: the arrays of a stored run
STORED_ARRAYS = ("val_logits", "test_logits", "loss_state", "meta")
#: what reading a zip archive or a torch file raises on damaged bytes
_READ_ERRORS = (
    OSError,
    ValueError,
    KeyError,
    EOFError,
    RuntimeError,
    TypeError,
    AttributeError,
    IndexError,
    UnicodeDecodeError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
    zlib.error,
)


# ----------------------------------------------------------------------------------------------------------------
# the seal


def seal(archive: bytes) -> bytes:
    """The zip ``archive`` (without a comment) with its comment set to :data:`SEAL_TAG` and the SHA-256 of every
    byte before the digest."""
    end = archive[-_END_RECORD_SIZE:]
    if len(archive) < _END_RECORD_SIZE or end[:4] != _END_RECORD or end[-2:] != b"\0\0":
        raise ValueError("only a zip archive without a comment can be sealed (np.savez, torch.save)")
    body = archive[:-2] + _SEAL_SIZE.to_bytes(2, "little") + SEAL_TAG
    return body + hashlib.sha256(body).hexdigest().encode()


def verify_seal(path: str | os.PathLike, data: bytes) -> bool:
    """Whether the file ``path`` whose bytes are ``data`` is sealed (:func:`seal`); :class:`DamagedRunError`
    naming the file when its seal does not match its bytes."""
    if len(data) < _END_RECORD_SIZE + _SEAL_SIZE:
        return False
    end = data[-_SEAL_SIZE - _END_RECORD_SIZE : -_SEAL_SIZE]
    comment = data[-_SEAL_SIZE:]
    if end[:4] != _END_RECORD or end[-2:] != _SEAL_SIZE.to_bytes(2, "little") or not comment.startswith(SEAL_TAG):
        return False
    if hashlib.sha256(data[:-_DIGITS]).hexdigest().encode() != comment[len(SEAL_TAG) :]:
        raise DamagedRunError(
            f"{path}: its content hash does not match its bytes: the file was changed or damaged after it was written"
        )
    return True


def write_sealed(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Write the zip archive that ``write(file)`` produces (``np.savez_compressed``, ``torch.save``) to ``path``,
    sealed (:func:`seal`), atomically and with the umask's permissions (:mod:`helpers.utils.atomic`)."""
    buffer = io.BytesIO()
    write(buffer)
    atomic.write_bytes_atomically(path, seal(buffer.getvalue()))


def _read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise DamagedRunError(f"{path}: cannot read this run file ({error.strerror or error})") from error


# ----------------------------------------------------------------------------------------------------------------
# fields


def check_fields(
    path: str | os.PathLike, record: Any, fields: Mapping[str, type | tuple[type, ...]], what: str
) -> None:
    """Raise :class:`DamagedRunError` naming ``path`` unless ``record`` is a dict with every field of ``fields``
    of its type (a number is never a bool, and finite)."""
    if not isinstance(record, dict):
        raise DamagedRunError(f"{path}: {what} is a {type(record).__name__}, not a mapping of named entries")
    missing = [name for name in fields if name not in record]
    if missing:
        raise DamagedRunError(f"{path}: {what} lacks {missing}")
    wrong = [
        f"{name} is {type(record[name]).__name__}"
        for name, kind in fields.items()
        if not isinstance(record[name], kind)
        or (kind is _NUMBER and (isinstance(record[name], bool) or not math.isfinite(record[name])))
    ]
    if wrong:
        raise DamagedRunError(f"{path}: {what} has entries of the wrong type ({', '.join(wrong)})")


# ----------------------------------------------------------------------------------------------------------------
# cached runs (.pt)


def read_cached_payload(path: str | os.PathLike, data: bytes | None = None) -> dict[str, Any]:
    """The entries of the cached run at ``path`` (or of its bytes ``data``), after its seal and fields are checked,
    read with ``torch.load(weights_only=True)``; :class:`DamagedRunError` naming the file otherwise."""
    data = _read_bytes(Path(path)) if data is None else data
    if not verify_seal(path, data):
        raise DamagedRunError(
            f"{path}: this cached run carries no content hash (a file of older code, or one whose hash was damaged)"
        )
    try:
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except _READ_ERRORS as error:
        raise DamagedRunError(f"{path}: cannot read this cached run ({type(error).__name__}: {error})") from error
    check_fields(path, payload, CACHED_FIELDS, "the cached run")
    return payload


def write_cached_payload(path: str | os.PathLike, payload: Mapping[str, Any]) -> None:
    """Write a cached run's entries (tensors and plain data only), sealed, atomically."""
    write_sealed(path, lambda file: torch.save(dict(payload), file))


# ----------------------------------------------------------------------------------------------------------------
# stored runs (.npz)


def read_stored_arrays(path: str | os.PathLike, data: bytes | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata, arrays) of the stored run at ``path`` (or of its bytes ``data``): its seal checked when it has
    one (required when its metadata says it was sealed), every array read (``allow_pickle=False``) and the
    metadata's fields checked; :class:`DamagedRunError` naming the file otherwise."""
    data = _read_bytes(Path(path)) if data is None else data
    sealed = verify_seal(path, data)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in STORED_ARRAYS}
        meta = json.loads(arrays["meta"].tobytes())
    except _READ_ERRORS as error:
        raise DamagedRunError(f"{path}: cannot read this stored run ({type(error).__name__}: {error})") from error
    check_fields(path, meta, STORED_META_FIELDS, "the metadata")
    if not sealed and meta.get("integrity") == INTEGRITY:
        raise DamagedRunError(f"{path}: this stored run was written with a content hash, and the hash is missing")
    return meta, arrays


def read_loss_state(path: str | os.PathLike, arrays: Mapping[str, Any]) -> dict[str, Any]:
    """A stored run's loss state (``torch.load(weights_only=True)`` of its ``loss_state`` bytes), a mapping;
    :class:`DamagedRunError` naming the file otherwise."""
    try:
        state = torch.load(io.BytesIO(arrays["loss_state"].tobytes()), map_location="cpu", weights_only=True)
    except _READ_ERRORS as error:
        raise DamagedRunError(
            f"{path}: cannot read this stored run's loss state ({type(error).__name__}: {error})"
        ) from error
    if not isinstance(state, dict):
        raise DamagedRunError(f"{path}: the loss state is a {type(state).__name__}, not a mapping of named entries")
    return state


# ----------------------------------------------------------------------------------------------------------------
# files from another machine


def check_run_file_bytes(relative: str, data: bytes, key: str) -> None:
    """Check the bytes ``data`` of a run file that another machine sent, to be written under ``relative``
    (``<dataset>/<key>.npz`` or ``<key>-<training version>.pt``) for the run ``key``: the name, the seal, the
    structure (read with ``allow_pickle=False`` / ``weights_only=True``: nothing in it runs) and, for a stored
    run, the key in its metadata. :class:`DamagedRunError` naming the file and what is wrong otherwise."""
    if not isinstance(data, bytes):
        raise DamagedRunError(f"{relative}: the file's content is a {type(data).__name__}, not bytes")
    if relative.endswith(".npz"):
        meta, arrays = read_stored_arrays(relative, data)
        if meta["key"] != key:
            raise DamagedRunError(f"{relative}: its metadata names the run {meta['key']}, not {key}")
        read_loss_state(relative, arrays)
        for name in ("val_logits", "test_logits"):
            if arrays[name].ndim != 2 or not np.issubdtype(arrays[name].dtype, np.floating):
                raise DamagedRunError(f"{relative}: {name} is not a matrix of floating-point logits")
    elif relative.endswith(".pt"):
        payload = read_cached_payload(relative, data)
        for name in ("val_logits", "test_logits"):
            if payload[name].ndim != 2 or not payload[name].is_floating_point():
                raise DamagedRunError(f"{relative}: {name} is not a matrix of floating-point logits")
    else:
        raise DamagedRunError(f"{relative}: not a run file (a stored run ends in .npz, a cached run in .pt)")
