"""Every writer of the course goes through one atomic-write helper (helpers.utils.atomic): unique temporary names, and
the mode the umask gives a normal file (issue 18, defects 11 and 12)."""

import json
import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import course
from helpers.course import output_cleanup, runner
from helpers.data import label_stats, write_npz
from helpers.losses import CrossEntropy
from helpers.training import checkpoints, run_store
from helpers.utils import atomic

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _a_run() -> run_store.TrainedRun:
    model = torch.nn.Linear(2, 3)
    return run_store.TrainedRun(
        "ce",
        model,
        CrossEntropy(),
        [{"epoch": 1, "train_loss": 0.5}],
        torch.zeros(4, 3),
        torch.zeros(4, 3),
        1.5,
        "trained",
        "k" * 20,
        "cpu",
    )


def _write_label_stats(path: Path) -> None:
    csv_path = path.with_suffix(".csv")
    csv_path.write_text("Image Index,Finding Labels,Patient ID\na.png,Effusion,1\nb.png,No Finding,2\n")
    label_stats.write_label_stats(csv_path, path)


WRITERS = {
    "results JSON (course.write_atomically)": lambda path: course.write_atomically(path, "{}"),
    "summary.json and summary.md": lambda path: runner.write_summary(path.parent, [], "smoke", 0.0),
    "published notebook": lambda path: output_cleanup.write_notebook_atomically({"cells": []}, path),
    "cached run": lambda path: run_store._save_cached_run(path, _a_run()),
    "stored run": lambda path: run_store.save_stored_run(path, _a_run(), {"dataset": "tiny"}),
    "checkpoint": lambda path: checkpoints.save_checkpoint(path, {"format": checkpoints.CHECKPOINT_FORMAT}),
    "synthetic data file": lambda path: write_npz(path, {"x": np.arange(3)}),
    "label statistics": _write_label_stats,
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_gives_its_file_the_mode_the_umask_gives_a_normal_file(tmp_path, umask, writer):
    """Defect 12: mkstemp's 0600 survived the rename whatever the umask (summary.md got 0644, summary.json 0600)."""
    path = tmp_path / "out" / "file.json"
    path.parent.mkdir()
    WRITERS[writer](path)
    written = [p for p in path.parent.iterdir() if p.suffix != ".csv"]
    assert written, "nothing was written"
    expected = 0o666 & ~umask
    assert {p.name: oct(_mode(p)) for p in written} == {p.name: oct(expected) for p in written}
    assert not [p for p in written if p.name.endswith(".tmp")]  # no temporary file left behind


def test_a_replaced_file_gets_the_umask_mode_too(tmp_path, umask):
    path = tmp_path / "results.json"
    path.write_text("old")
    path.chmod(0o600)
    course.write_atomically(path, json.dumps({"new": 1}))
    assert json.loads(path.read_text()) == {"new": 1} and _mode(path) == 0o666 & ~umask


def test_concurrent_checkpoint_saves_to_one_path_do_not_collide(tmp_path, monkeypatch):
    """Defect 11: with the fixed temporary name ``<path>.tmp`` a second save while the first was writing renamed
    the first one's temporary file away, and the first save failed with FileNotFoundError."""
    path = tmp_path / "run.pt"
    real_save = torch.save
    nested = []

    def save_while_another_process_saves(payload, target):
        real_save(payload, target)
        if not nested:  # a second writer (another process) saves the same path in the middle of this save
            nested.append(True)
            checkpoints.save_checkpoint(path, {"format": checkpoints.CHECKPOINT_FORMAT, "writer": "second"})

    monkeypatch.setattr(checkpoints.torch, "save", save_while_another_process_saves)
    checkpoints.save_checkpoint(path, {"format": checkpoints.CHECKPOINT_FORMAT, "writer": "first"})
    assert torch.load(path, weights_only=False)["writer"] == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["run.pt"]


def test_temporary_names_are_unique_per_write(tmp_path, monkeypatch):
    names = []
    real_replace = os.replace
    monkeypatch.setattr(
        atomic.os, "replace", lambda source, target: (names.append(Path(source).name), real_replace(source, target))
    )
    for _ in range(3):
        atomic.write_text_atomically(tmp_path / "file.txt", "text")
    assert len(set(names)) == 3 and all(name.startswith(".file.txt.") and name.endswith(".tmp") for name in names)


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("old")

    def failing(file):
        file.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic.write_atomically_with(path, failing)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_no_writer_makes_its_own_temporary_file():
    """Every temporary-file-and-rename in helpers/ and scripts/ is the shared helper's."""
    pattern = re.compile(r"mkstemp|NamedTemporaryFile|os\.replace|\.tmp\b")
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for folder in ("helpers", "scripts")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if path.name != "atomic.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []
