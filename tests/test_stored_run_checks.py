"""Issue 29, low-severity defects of the run store: a stored run whose definition does not hash to its key, whose loss
state holds NaN or whose history is broken is named and trained again (never served); one damaged file leaves the
other stored runs' records readable; a run cache set by CALIBMED_CACHE_DIR to a file names that setting."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
from tiny_bundles import three_class_bundle

from helpers.course import suites
from helpers.data import Split
from helpers.losses import CrossEntropy, LabelSmoothing
from helpers.training import TrainConfig, run_files, run_store

CONFIG = TrainConfig(epochs=2, batch_size=32, lr=0.05, device="cpu", progress=False)


def tiny_bundle(n=64):
    generator = torch.Generator().manual_seed(0)
    split = Split(
        torch.randint(0, 255, (n, 1, 8, 8), generator=generator, dtype=torch.uint8),
        torch.randint(0, 3, (n,), generator=generator),
    )
    return three_class_bundle(split)


def smoothing():
    return LabelSmoothing(0.1, prior=torch.tensor([0.5, 0.3, 0.2]))


def _rewrite(path, meta=None, loss_state=None):
    """Rewrite a stored run with other metadata or loss state, sealed as the store seals it (so only the changed
    content, not the content hash, can make it refused)."""
    with np.load(path) as stored:
        arrays = dict(stored)
    if meta is not None:
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    if loss_state is not None:
        buffer = io.BytesIO()
        torch.save(loss_state, buffer)
        arrays["loss_state"] = np.frombuffer(buffer.getvalue(), dtype=np.uint8)
    run_files.write_sealed(path, lambda file: np.savez_compressed(file, **arrays))


def _stored(tmp_path, loss_factory=smoothing):
    run = run_store.train_run(
        "ls", loss_factory(), tiny_bundle(), "small_cnn", CONFIG, stored=True, stored_dir=tmp_path
    )
    path = tmp_path / "tiny" / f"{run.key}.npz"
    meta, arrays = run_files.read_stored_arrays(path)
    return run, path, meta, run_files.read_loss_state(path, arrays)


def _served_or_retrained(tmp_path, capsys, loss_factory=smoothing):
    capsys.readouterr()
    again = run_store.train_run(
        "ls", loss_factory(), tiny_bundle(), "small_cnn", CONFIG, stored=True, stored_dir=tmp_path
    )
    return again, capsys.readouterr().out


def test_a_stored_run_whose_definition_does_not_match_its_key_is_retrained(tmp_path, capsys):
    run, path, meta, _ = _stored(tmp_path)
    definition = json.loads(json.dumps(meta["definition"]))
    definition["config"]["epochs"] = 30  # what the file says it is no longer what its key names
    _rewrite(path, meta={**meta, "definition": definition})
    again, printed = _served_or_retrained(tmp_path, capsys)
    assert again.source == "trained"
    assert path.name in printed and "definition" in printed and "training it again" in printed


def test_a_stored_run_whose_loss_state_holds_nan_is_retrained(tmp_path, capsys):
    run, path, meta, state = _stored(tmp_path)
    assert "prior" in state
    state["prior"] = torch.full_like(state["prior"], float("nan"))
    _rewrite(path, loss_state=state)
    loss = smoothing()
    again, printed = _served_or_retrained(tmp_path, capsys, lambda: loss)
    assert again.source == "trained"
    assert path.name in printed and "NaN" in printed and "prior" in printed
    assert torch.isfinite(loss.prior).all()  # the damaged state was not left in the loss


@pytest.mark.parametrize(
    "history",
    [
        "not a list",
        [],
        [1.0, 2.0],
        [{"epoch": 1, "train_loss": 0.5}, {"epoch": 3, "train_loss": 0.4}],
        [{"epoch": 1, "train_loss": [0.5]}, {"epoch": 2, "train_loss": 0.4}],
        [{"train_loss": 0.5}, {"train_loss": 0.4}],
    ],
    ids=["text", "empty", "numbers", "an epoch missing", "a list value", "no epochs"],
)
def test_a_stored_run_with_a_broken_history_is_retrained(tmp_path, capsys, history):
    run, path, meta, _ = _stored(tmp_path)
    _rewrite(path, meta={**meta, "history": history})
    again, printed = _served_or_retrained(tmp_path, capsys)
    assert again.source == "trained"
    assert path.name in printed and "history" in printed


def test_an_intact_stored_run_is_still_served(tmp_path, capsys):
    run, path, meta, state = _stored(tmp_path)
    again, printed = _served_or_retrained(tmp_path, capsys)
    assert again.source == "stored" and torch.equal(again.test_logits, run.test_logits)


def test_one_damaged_stored_run_leaves_the_other_records_readable(tmp_path):
    bundle = tiny_bundle()
    for epochs in (1, 2):
        config = TrainConfig(epochs=epochs, batch_size=32, lr=0.05, device="cpu", progress=False)
        run_store.train_run(
            f"ce {epochs}", CrossEntropy(), bundle, "small_cnn", config, stored=True, stored_dir=tmp_path
        )
    broken = tmp_path / "tiny" / "broken.npz"
    broken.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match=r"broken\.npz.*left out") as caught:
        records = suites.stored_run_records(tmp_path)
    assert [r["name"] for r in records] == ["ce 1", "ce 2"]
    assert sum("broken.npz" in str(w.message) for w in caught) == 1


def test_a_record_whose_definition_does_not_match_its_file_name_is_left_out(tmp_path):
    run, path, meta, _ = _stored(tmp_path, CrossEntropy)
    moved = path.with_name("0123456789abcdef0123.npz")
    path.rename(moved)
    with pytest.warns(UserWarning, match=rf"{moved.name}.*definition.*left out"):
        assert suites.stored_run_records(tmp_path) == []


def test_a_run_cache_set_to_a_file_names_calibmed_cache_dir(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("a file where the run cache should be")
    monkeypatch.setenv(run_store.CACHE_DIR_ENV, str(not_a_folder))
    monkeypatch.delenv("CALIBMED_NO_CACHE", raising=False)
    with pytest.raises(
        NotADirectoryError, match=rf"CALIBMED_CACHE_DIR.*{not_a_folder.name}|{not_a_folder.name}.*CALIBMED_CACHE_DIR"
    ):
        run_store.train_run("ce", CrossEntropy(), tiny_bundle(), "small_cnn", CONFIG)
