"""One quiet line of provenance and one folded details cell (issue 28, item 3): helpers.course.provenance."""

import pytest
import torch
from test_progress import PROFILES
from tiny_bundles import three_class_bundle

from helpers import course
from helpers.course import output_rules
from helpers.data import Split
from helpers.training import run_log


def record(seed, current=True, device="CPU (x86_64)"):
    return run_log.RunRecord(f"run {seed}", "stored", "dermamnist", seed, device, True, current)


@pytest.fixture
def cfg(monkeypatch):
    monkeypatch.delenv("CALIBMED_VERBOSE", raising=False)
    return course.configure("01_measuring_calibration", PROFILES, profile="reference")


def bundle(checks=()):
    split = Split(torch.zeros(6, 1, 8, 8, dtype=torch.uint8), torch.tensor([0, 1, 2, 0, 1, 2]))
    made = three_class_bundle(split, source="/data/dermamnist.npz")
    made.name, made.checks = "dermamnist", list(checks)
    return made


def test_the_provenance_line_counts_the_runs_since_configure_in_words(cfg, capsys):
    run_log.report(record(9), None)  # a run of an earlier notebook in the same kernel ...
    cfg = course.configure("01_measuring_calibration", PROFILES, profile="reference")  # ... is forgotten here
    for seed in (0, 1, 2):
        run_log.report(record(seed), None)
    assert capsys.readouterr().out == ""
    course.provenance(cfg)
    line = capsys.readouterr().out
    assert line == "3 stored runs · DermaMNIST 28 px · seeds 0–2 · trained deterministically on a CPU\n"
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [{"output_type": "stream", "text": line}]}]}
    assert output_rules.main_flow_quiet(nb) == [] and len(output_rules.provenance_lines(nb)) == 1


def test_another_profile_is_named_first_and_no_run_is_said(monkeypatch):
    smoke = course.configure("01_measuring_calibration", PROFILES, profile="smoke")
    assert course.provenance_line(smoke, bundle()) == "smoke profile · DermaMNIST 8 px · no trained model loaded"


def test_the_details_hold_what_the_main_flow_does_not(cfg):
    for seed in (0, 1):
        run_log.report(record(seed, current=seed == 0), None)
    _ = cfg.epochs
    md5 = "The file's md5 (a032e8b21d33ac007a130d549262064c) differs from the official release."
    text = course.details_text(cfg, bundle([md5]), results_file="results/reference/01_measuring_calibration.json")
    assert max(len(line) for line in text.splitlines()) <= output_rules.MAX_LINE
    text = text.replace("\n  ", " ")  # wrapped lines joined
    assert "settings this run read: epochs=1\n" in text
    assert "data: DermaMNIST, source /data/dermamnist.npz. The file's md5 (a032e8b21d33ac007a130d549262064c)" in text
    assert "2 stored runs loaded — dermamnist, seeds 0–1" in text
    assert "1 of 2 from older training code (today's: " in text
    assert "1 of 2 stored runs come from older training code" in text and run_log.RETRAIN_COMMAND in text
    assert "results written to results/reference/01_measuring_calibration.json" in text
    assert "compute time since configure:" in text
    main = course.provenance_line(cfg, bundle([md5]))
    assert main.endswith("· 1 of 2 from older training code") and "md5" not in main
