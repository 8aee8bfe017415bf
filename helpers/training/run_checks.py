"""Checks of what a run file holds beyond its integrity (:mod:`helpers.training.run_files` checks the bytes and the
fields' types): that a stored run's definition is the run its key names, that a loss state holds finite numbers and
that a history is the epoch-by-epoch record training writes. Each raises
:class:`helpers.training.run_files.DamagedRunError` naming the file, so the run is trained again, never served."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from helpers.training.run_files import DamagedRunError
from helpers.training.run_keys import definition_key

__all__ = ["check_stored_definition", "check_finite_state", "check_history"]


def check_stored_definition(path: Any, meta: Mapping[str, Any], key: str) -> None:
    """The stored run's definition must hash to ``key`` (its file's name and the key it is loaded for): a definition
    edited after the run was stored, or a file copied under another run's name, describes another run."""
    found = definition_key(meta["definition"])
    if found != key:
        raise DamagedRunError(
            f"{path}: its stored definition hashes to the key {found}, not to {key}: the file was edited or "
            "belongs to another run (delete it; the run it is named for is trained again)"
        )


def check_finite_state(path: Any, state: Mapping[str, Any], what: str) -> None:
    """Every floating-point tensor of a state (``what``: "the loss state") must be finite."""
    bad = [
        name
        for name, value in state.items()
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all())
    ]
    if bad:
        raise DamagedRunError(f"{path}: {what} holds NaN or infinite values (in {', '.join(map(str, bad))})")


def _plain_value(value: Any) -> bool:
    return value is None or isinstance(value, (bool, str)) or isinstance(value, (int, float))


def check_history(path: Any, history: Any) -> None:
    """A run's history: a non-empty list with one record (a mapping of named numbers, flags, text or None) per
    epoch, their ``epoch`` entries 1, 2, 3, ... (training appends one such record per epoch)."""
    if not isinstance(history, list) or not history:
        raise DamagedRunError(f"{path}: the history is {'empty' if history == [] else type(history).__name__}")
    for number, record in enumerate(history, start=1):
        if not isinstance(record, Mapping):
            raise DamagedRunError(f"{path}: the history's entry {number} is a {type(record).__name__}, not a record")
        epoch = record.get("epoch")
        if isinstance(epoch, bool) or epoch != number:
            raise DamagedRunError(f"{path}: the history's entry {number} is for epoch {epoch!r}, not {number}")
        odd = sorted(str(name) for name, value in record.items() if not _plain_value(value))
        if odd:
            raise DamagedRunError(f"{path}: the history's epoch {number} holds values that are not numbers: {odd}")
