"""Runs load quietly (issue 16, item 2): one summary line per suite, the listing on request, one warning once."""

import pytest
import torch
from test_experiments import config, tiny_bundle

from helpers.losses import CrossEntropy, LabelSmoothing
from helpers.training import determinism, run_log, run_store


def record(
    seed=0, source="stored", dataset="dermamnist", device="NVIDIA H100 80GB HBM3", deterministic=True, current=True
):
    return run_log.RunRecord(f"run {seed}", source, dataset, seed, device, deterministic, current)


def test_the_summary_line_names_count_data_seeds_device_determinism_and_version():
    records = [record(seed) for seed in (0, 1, 2)] * 18
    assert run_log.summary_line(records, "1a2b3c") == (
        "54 stored runs loaded — dermamnist, seeds 0–2, trained deterministically on NVIDIA H100 80GB HBM3, "
        "training version 1a2b3c"
    )
    mixed = [
        record(0, "stored", "synthetic_chestmnist", "cuda:0", None, False),
        record(2, "trained", device="CPU"),
        record(5, "cache", device="CPU"),
    ]
    assert run_log.summary_line(mixed, "1a2b3c") == (
        "1 stored runs loaded, 1 runs loaded from the run cache, 1 runs trained here — dermamnist, "
        "synthetic_chestmnist, seeds 0, 2, 5, trained on CPU, cuda:0, 2 of 3 deterministically, 1 of 3 from older "
        "training code (today's: 1a2b3c)"
    )


@pytest.fixture
def fresh_log(monkeypatch):
    monkeypatch.setattr(run_log, "_warned_stale", False)
    monkeypatch.delenv("CALIBMED_VERBOSE", raising=False)


def test_a_suite_prints_one_summary_and_lists_runs_only_on_request(tmp_path, capsys, monkeypatch, fresh_log):
    bundle = tiny_bundle()
    suite = run_log.summarised(lambda: run_store.training_version())

    @suite
    def inner(seeds):
        return [
            run_store.train_run(
                f"ce {s}", CrossEntropy(), bundle, "small_cnn", config(seed=s), stored=True, stored_dir=tmp_path
            )
            for s in seeds
        ]

    @suite
    def outer():  # a suite that calls another (helpers.course.spa_lpr_runs calls multilabel_runs) prints once
        return inner([0, 1]) + [
            run_store.train_run(
                "ls", LabelSmoothing(0.1), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path
            )
        ]

    outer()
    capsys.readouterr()
    runs = outer()
    out = capsys.readouterr().out
    assert [run.source for run in runs] == ["stored"] * 3
    assert " ".join(out.splitlines()) == (
        f"3 stored runs loaded — tiny, seeds 0–1, trained deterministically on "
        f"{determinism.device_name('cpu')}, training version "
        f"{run_store.training_version()}"
    )
    assert len(out.splitlines()) <= 2 and max(map(len, out.splitlines())) <= run_log.LINE_WIDTH
    monkeypatch.setenv("CALIBMED_VERBOSE", "1")
    outer()
    lines = capsys.readouterr().out.splitlines()
    assert sum(": stored run tiny/" in line for line in lines) == 3 and lines[3].startswith("3 stored runs loaded")


def test_runs_of_older_code_give_one_warning_per_process_and_no_mark(tmp_path, capsys, monkeypatch, fresh_log):
    bundle = tiny_bundle()
    monkeypatch.setattr(run_store, "training_version", lambda: "older")
    run_store.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path)
    monkeypatch.setattr(run_store, "training_version", lambda: "today")
    capsys.readouterr()
    for _ in range(3):  # three suites, as notebook 05 loads
        with run_log.collecting(lambda: "today"):
            loaded = run_store.train_run(
                "ce", CrossEntropy(), bundle, "small_cnn", config(), stored=True, stored_dir=tmp_path
            )
    lines = capsys.readouterr().out.splitlines()
    text = " ".join(lines)
    assert loaded.source == "stored" and torch.isfinite(loaded.test_logits).all()
    assert sum("warning:" in line for line in lines) == 1 and "(*)" not in text
    assert sum(line.startswith("1 stored runs loaded") for line in lines) == 3
    assert text.count("1 of 1 from older training code (today's: today)") == 3


def test_a_failing_suite_prints_no_summary_and_leaves_no_collection_behind(capsys, fresh_log):
    with pytest.raises(ValueError):
        with run_log.collecting(lambda: "v"):
            run_log.report(record(), None)
            raise ValueError("a loss failed")
    assert capsys.readouterr().out == "" and run_log._collected is None


def test_the_stale_warning_says_what_it_means_for_the_numbers_and_fits_a_notebook_line(capsys, fresh_log):
    run_log.warn_stale(54, 54)
    run_log.warn_stale(54, 54)
    lines = capsys.readouterr().out.splitlines()
    text = " ".join(lines)
    assert "54 of 54 stored runs come from older training code" in text
    assert "docs/reading_the_numbers.md" in text and run_log.RETRAIN_COMMAND in text
    assert text.count("warning:") == 1 and max(len(line) for line in lines) <= run_log.LINE_WIDTH
