"""Runs load quietly (issue 16, item 2; issue 28, item 3): nothing printed per suite, one provenance line in words on
request, the summary line and the listing for the folded details or on request (CALIBMED_VERBOSE=1)."""

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


def test_the_provenance_line_is_in_words_without_hash_path_or_list():
    records = [record(seed) for seed in range(5)] * 5 + [record(1, device="CPU (x86_64)", deterministic=False)]
    line = run_log.provenance_line(records, "DermaMNIST 28 px")
    assert line == (
        "26 stored runs · DermaMNIST 28 px · seeds 0–4 · trained on a CPU and a GPU"
    )  # how many deterministically is a detail (the folded summary line); readers counted it as noise (issue 28)
    assert "25 of 26 deterministically" in run_log.summary_line(records, "abc")
    cpu = [record(seed, device="CPU (x86_64)") for seed in (0, 1, 2)] + [record(0, "trained", device="CPU (arm64)")]
    assert run_log.provenance_line(cpu, "x") == (
        "3 stored runs + 1 run trained here · x · seeds 0–2 · trained deterministically on a CPU"
    )
    stale = [record(0, current=False, device="", deterministic=None), record(1, deterministic=None, device="Apple MPS")]
    assert run_log.provenance_line(stale, "x") == (
        "2 stored runs · x · seeds 0–1 · trained on an Apple GPU and an unrecorded device, not deterministically "
        "· 1 of 2 from older training code"
    )
    assert run_log.provenance_line([], "DermaMNIST 28 px") == "DermaMNIST 28 px · no trained model loaded"


@pytest.fixture
def fresh_log(monkeypatch):
    monkeypatch.setattr(run_log, "_warned_stale", False)
    monkeypatch.setattr(run_log, "_session", [])
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
    run_log.reset_session()
    runs = outer()
    assert [run.source for run in runs] == ["stored"] * 3
    assert capsys.readouterr().out == ""  # nothing per suite: the notebook prints one provenance line itself
    assert [record.seed for record in run_log.session_records()] == [0, 1, 0]  # the outer suite's runs, once
    assert run_log.summary_line(run_log.session_records(), "v") == (
        f"3 stored runs loaded — tiny, seeds 0–1, trained deterministically on {determinism.device_name('cpu')}, "
        "training version v"
    )
    monkeypatch.setenv("CALIBMED_VERBOSE", "1")
    outer()
    lines = capsys.readouterr().out.splitlines()
    assert sum(": stored run tiny/" in line for line in lines) == 3 and lines[3].startswith("3 stored runs loaded")


def test_runs_of_older_code_print_nothing_and_are_named_in_provenance(tmp_path, capsys, monkeypatch, fresh_log):
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
    assert capsys.readouterr().out == ""  # the stale warning goes to the folded details (helpers.course.details)
    assert loaded.source == "stored" and torch.isfinite(loaded.test_logits).all()
    records = run_log.session_records()
    assert [r.source for r in records] == ["trained"] + ["stored"] * 3  # the first run was trained here, today
    assert [r.current for r in records] == [True, False, False, False]
    assert run_log.provenance_line(records[1:], "x").endswith("· 3 of 3 from older training code")


def test_a_failing_suite_prints_no_summary_and_leaves_no_collection_behind(capsys, fresh_log):
    with pytest.raises(ValueError):
        with run_log.collecting(lambda: "v"):
            run_log.report(record(), None)
            raise ValueError("a loss failed")
    assert capsys.readouterr().out == "" and run_log._collected is None
    assert run_log.session_records() == []  # a failed suite's runs are not counted


def test_the_stale_warning_says_what_it_means_for_the_numbers_and_fits_a_notebook_line(capsys, fresh_log):
    run_log.warn_stale(54, 54)
    run_log.warn_stale(54, 54)
    lines = capsys.readouterr().out.splitlines()
    text = " ".join(lines)
    assert "54 of 54 stored runs come from older training code" in text
    assert "docs/reading_the_numbers.md" in text and run_log.RETRAIN_COMMAND in text
    assert text.count("warning:") == 1 and max(len(line) for line in lines) <= run_log.LINE_WIDTH
