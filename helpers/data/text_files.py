"""The text files of the real-data folders (ground-truth and metadata CSVs, split lists): read as UTF-8 with or
without a byte-order mark (as spreadsheet programs save them), every problem a ``ValueError`` that names the file,
says what is wrong and how to fix it (``fix``: where to get the file again)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd


def read_text(path: Path, fix: str) -> str:
    """The file's text (UTF-8, a leading byte-order mark dropped); ValueError naming the file when it is empty
    (0 bytes) or not UTF-8 (e.g. UTF-16 or Latin-1, as some editors save a CSV)."""
    data = Path(path).read_bytes()
    if not data:
        raise ValueError(f"{path} is empty (0 bytes); {fix}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start} cannot be decoded); "
            f"save it as UTF-8 (CSV UTF-8 in a spreadsheet program), or {fix}"
        ) from error


def read_csv_frame(path: Path, dtype: dict[str, Any], fix: str) -> pd.DataFrame:
    """``pandas.read_csv`` of the file's text (:func:`read_text`); ValueError naming the file when it has no
    columns or cannot be parsed as CSV."""
    text = read_text(path, fix)
    try:
        return pd.read_csv(io.StringIO(text), dtype=dtype)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as error:
        raise ValueError(f"{path} is not a readable CSV file ({type(error).__name__}: {error}); {fix}") from error
