"""Paths as the notebooks print them: relative to the repository, or under ``$CALIBMED_DATA_DIR``.

A stored notebook output must not carry the absolute location of the machine that executed it (it means nothing
to a reader and changes with every checkout), so everything the helpers print goes through ``display_path`` or
``shorten_paths``, and so do the paths a results JSON records (``helpers.course.save_results``). The run cache
keeps full paths: it is local to one machine and never committed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR_ENV = "CALIBMED_DATA_DIR"


def _prefixes() -> list[tuple[str, str]]:
    """(absolute prefix, replacement) pairs, most specific first; each prefix in its plain and resolved form."""
    pairs: list[tuple[str, str]] = []
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir:
        for form in {os.path.abspath(os.path.expanduser(data_dir)), str(Path(data_dir).expanduser().resolve())}:
            pairs.append((form, f"${DATA_DIR_ENV}"))
    for form in {os.path.abspath(REPO_ROOT), str(REPO_ROOT.resolve())}:
        pairs.append((form, ""))
    home = os.path.expanduser("~")
    if home not in ("/", "~"):
        pairs.append((home, "~"))
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def display_path(path: str | os.PathLike) -> str:
    """``/repo/runs/results/x.json`` → ``runs/results/x.json``; a file in the data directory named by the
    environment → ``$CALIBMED_DATA_DIR/x.npz``; under the home folder → ``~/…``; anything else unchanged."""
    text = os.path.abspath(os.fspath(path))
    for prefix, replacement in _prefixes():
        if text == prefix:
            return replacement or "."
        if text.startswith(prefix + os.sep):
            rest = text[len(prefix) + 1 :]
            return f"{replacement}/{rest}" if replacement else rest
    return os.fspath(path)


def shorten_paths(text: str) -> str:
    """Every absolute repository, data-directory or home path inside ``text`` written as ``display_path`` does."""
    for prefix, replacement in _prefixes():
        text = re.sub(re.escape(prefix + os.sep), lambda _, r=replacement: f"{r}/" if r else "", text)
        # the bare prefix only where it ends a path, not inside a longer name such as /work/main2
        text = re.sub(re.escape(prefix) + r"(?![\w.-])", lambda _, r=replacement: r or ".", text)
    return text
