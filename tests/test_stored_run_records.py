"""suites.stored_run_records reads what each stored run's metadata says (notebook 00's table of the stored runs)."""

from dataclasses import replace

import pytest
import torch
from tiny_bundles import three_class_bundle

from helpers.course import suites
from helpers.data import Split
from helpers.losses import CrossEntropy
from helpers.training import TrainConfig, run_files, run_store


def tiny_bundle(n=64):
    generator = torch.Generator().manual_seed(0)
    split = Split(
        torch.randint(0, 255, (n, 1, 8, 8), generator=generator, dtype=torch.uint8),
        torch.randint(0, 3, (n,), generator=generator),
    )
    return three_class_bundle(split)


def test_records_come_from_each_stored_runs_metadata(tmp_path):
    bundle = tiny_bundle()
    runs = {}
    for epochs in (1, 2):
        config = TrainConfig(epochs=epochs, batch_size=32, lr=0.05, device="cpu", progress=False)
        runs[epochs] = run_store.train_run(
            f"ce {epochs}", CrossEntropy(), bundle, "small_cnn", config, stored=True, stored_dir=tmp_path
        )
    records = suites.stored_run_records(tmp_path)
    assert [r["name"] for r in records] == ["ce 1", "ce 2"]
    for record, epochs in zip(records, (1, 2)):
        assert record["dataset"] == bundle.name and record["model"] == "small_cnn" and record["epochs"] == epochs
        assert record["n_train"] == len(bundle.train.labels) and record["device"] == "cpu"
        assert record["seconds"] == pytest.approx(runs[epochs].seconds)


def test_a_damaged_file_is_named(tmp_path):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "broken.npz").write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="broken.npz.*left out of the records"):
        assert suites.stored_run_records(tmp_path) == []


def test_the_committed_stored_runs_are_read():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every committed run is readable and its definition is the run its key names
        records = suites.stored_run_records()
    assert records and all(r["seconds"] > 0 and r["epochs"] >= 1 for r in records)


@pytest.mark.parametrize("damage", ["truncated", "empty", "meta_a_list", "no_seconds", "seconds_a_string"])
def test_stored_run_records_names_a_truncated_empty_or_inconsistent_file(tmp_path, damage):
    """Issue 18, defect 5: a truncated or empty .npz raised a bare BadZipFile / EOFError, odd metadata a KeyError,
    AttributeError or ValueError; issue 29: it is named in a warning and left out, not raised."""
    import json

    import numpy as np

    config = TrainConfig(epochs=1, batch_size=32, lr=0.05, device="cpu", progress=False)
    run = run_store.train_run(
        "ce", CrossEntropy(), tiny_bundle(), "small_cnn", config, stored=True, stored_dir=tmp_path
    )
    path = tmp_path / "tiny" / f"{run.key}.npz"
    if damage in ("truncated", "empty"):
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2] if damage == "truncated" else b"")
    else:
        with np.load(path) as stored:
            arrays = dict(stored)
        meta = json.loads(arrays["meta"].tobytes())
        meta = {
            "meta_a_list": [meta],
            "no_seconds": {k: v for k, v in meta.items() if k != "seconds"},
            "seconds_a_string": meta | {"seconds": "fast"},
        }[damage]
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        run_files.write_sealed(path, lambda file: np.savez_compressed(file, **arrays))  # the field checks are tested
    with pytest.warns(UserWarning, match=rf"{run.key}\.npz.*left out of the records"):
        assert suites.stored_run_records(tmp_path) == []


def test_records_say_which_runs_come_from_older_training_code(tmp_path, monkeypatch, capsys):
    """After a retrain, the stored runs still of older code are those no notebook declares any more (LS+ runs get new
    keys when their cross-entropy run is retrained): the train command names them for deletion."""
    bundle = tiny_bundle()
    config = TrainConfig(epochs=1, batch_size=32, lr=0.05, device="cpu", progress=False)
    monkeypatch.setattr(run_store, "training_version", lambda: "older")
    old = run_store.train_run("old", CrossEntropy(), bundle, "small_cnn", config, stored=True, stored_dir=tmp_path)
    monkeypatch.setattr(run_store, "training_version", lambda: "today")
    run_store.train_run(
        "new", CrossEntropy(), bundle, "small_cnn", replace(config, seed=1), stored=True, stored_dir=tmp_path
    )
    records = suites.stored_run_records(tmp_path)
    assert [(r["name"], r["current"]) for r in records] == [("new", True), ("old", False)]
    capsys.readouterr()
    suites.report_runs_of_older_code(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("1 stored run(s) of older training code") and len(lines) == 2
    assert lines[1] == f"  stored_runs/tiny/{old.key}.npz  (old)"


def test_time_recipes_and_the_tables_of_notebook_00(capsys):
    from helpers.course import output_rules

    bundle = tiny_bundle()
    capsys.readouterr()
    timing = suites.time_recipes(
        bundle,
        {"well-regularised": 30},
        model="small_cnn",
        epochs=1,
        lr=0.05,
        batch_size=32,
        device="cpu",
        timing_images=32,
    )
    # the timing prints no training log line ("epochs: 1/1 in 2 s (training loss=...)"): notebook 00 shows its table
    captured = capsys.readouterr()
    assert "training loss" not in captured.out + captured.err and "epochs:" not in captured.out + captured.err
    row = timing["well-regularised"]
    assert row["model"] == "small_cnn" and row["epochs"] == 30 and row["train images/s"] > 0
    assert row["min per run"] == pytest.approx(30 * row["s per full epoch"] / 60)
    shown = suites.timing_table(timing)
    assert shown.loc["well-regularised", "model"] == "small CNN" and "device" not in shown.columns

    def record(dataset, device, seconds):
        return dict(
            dataset=dataset,
            model="small_cnn",
            epochs=30,
            n_train=64,
            schedule="onecycle",
            name="x",
            device=device,
            seconds=seconds,
            key="k",
            current=True,
        )

    records = [
        record("dermamnist", "cuda:0", 45.0),
        record("dermamnist", "cuda:0", 47.0),
        record("chestxray14", "cpu", 12.0),
    ]
    table, hours = suites.stored_run_table(records, timing, n_val=64)
    assert table.loc[("DermaMNIST", "small CNN", 30), "runs"] == 2
    assert table.loc[("DermaMNIST", "small CNN", 30), "median s per run"] == 46
    assert table.loc[("ChestX-ray14", "small CNN", 30), "≈ h here (all runs)"] == "not estimated"
    expected = 2 * 30 * (64 / row["train images/s"] + 64 / row["validation images/s"]) / 3600
    assert hours[("DermaMNIST", "small CNN", 30)] == pytest.approx(expected)
    headers = [*table.columns, *table.index.names, *(label for level in table.index.levels for label in level)]
    assert not any(output_rules.RAW_KEY.match(str(header)) for header in headers)
