"""helpers.lessons.loss_comparison: notebook 06's primary table, its census of comparisons and the DCA diagnostics."""

import pandas as pd
import pytest
import torch

from helpers.lessons import loss_comparison as lc
from helpers.losses import DCA
from helpers.metrics import PairedBootstrapResult


def result(estimate, low, high, samples=None):
    samples = torch.tensor([estimate, low, high], dtype=torch.float64) if samples is None else samples
    return PairedBootstrapResult(estimate, low, high, 0.95, samples, 3, 3)


@pytest.fixture
def differences():
    ref = "cross-entropy + TS"
    return {
        ("wr/LS", f"wr/{ref}"): {"nll": result(0.05, 0.04, 0.06), "ece": result(0.04, 0.02, 0.05)},
        ("wr/focal", f"wr/{ref}"): {"nll": result(-0.02, -0.03, -0.01), "ece": result(0.002, -0.01, 0.01)},
        ("of/LS", f"of/{ref}"): {"nll": result(-0.01, -0.03, 0.01), "ece": result(0.001, -0.01, 0.02)},
        ("of/focal", f"of/{ref}"): {"nll": result(-0.02, -0.04, -0.001), "ece": result(-0.02, -0.03, -0.01)},
    }


def test_primary_table_has_one_row_per_loss_intervals_and_a_verdict_per_recipe(differences):
    table = lc.primary_table(differences, ["wr", "of"], ["LS", "focal"], "cross-entropy + TS")
    assert list(table.index) == ["LS", "focal"] and table.index.name == "loss − (cross-entropy + TS)"
    assert list(table.columns.get_level_values(0)) == ["wr"] * 3 + ["of"] * 3
    assert table.loc["LS", ("wr", "Δ NLL [95 %]")] == "+0.050 [+0.040, +0.060]"
    assert table.loc["LS", ("wr", "Δ ECE (pp) [95 %]")] == "+4.0 [+2.0, +5.0]"
    assert table.loc["LS", ("wr", "verdict")] == "worse on NLL and ECE"
    assert table.loc["focal", ("wr", "verdict")] == "beats on NLL; no difference detected on ECE"
    assert table.loc["LS", ("of", "verdict")] == "no difference detected"
    assert table.loc["focal", ("of", "verdict")] == "beats on NLL and ECE"
    # no raw metric key as a header
    assert not any("_" in str(header) for header in table.columns.get_level_values(1))


def test_primary_record_lists_the_losses_that_beat_the_reference(differences):
    record = lc.primary_record(differences, ["wr", "of"], ["LS", "focal"], "cross-entropy + TS")
    assert record["question"] == "does any training loss beat cross-entropy + TS on NLL and on ECE, in each recipe?"
    assert record["beats"] == {"wr": {"nll": ["focal"], "ece": []}, "of": {"nll": ["focal"], "ece": ["focal"]}}
    assert record["answer"]["of"]["LS"]["ece"]["verdict"] == lc.NO_DIFFERENCE


def test_verdict_never_says_equal():
    assert lc.verdict(result(0.0, -0.1, 0.1), "nll") == "no difference detected"
    assert lc.verdict(result(0.02, 0.01, 0.03), "accuracy") == "beats"
    assert lc.verdict(result(0.02, 0.01, 0.03), "ece") == "worse"


def test_the_debiased_ece_gets_point_differences_without_an_interval():
    assert "debiased_ece" in lc.POINT_ESTIMATE_ONLY
    summaries = {"a": {"debiased_ece": {"mean": 0.05}}, "b": {"debiased_ece": {"mean": 0.02}}}
    record = lc.point_differences(summaries, [("a", "b")])[("a", "b")]["debiased_ece"]
    assert record["estimate"] == pytest.approx(0.03) and record["low"] is None and record["high"] is None


def test_census_counts_an_accuracy_difference_repeated_by_ts_rows_once():
    same = result(0.01, 0.005, 0.02)
    differences = {
        ("r/LS", "r/CE"): {"accuracy": same, "ece": result(0.01, -0.01, 0.02)},
        ("r/LS", "r/CE + TS"): {"accuracy": same, "ece": result(0.01, 0.005, 0.02)},
    }
    census = lc.Census(differences, n_seeds=3, n_resamples=3)
    table, note = census.frame("t", "r", {"CE": ["LS"], "CE + TS": ["LS"]}, ["ece", "accuracy"])
    assert list(table.columns) == ["Δ ECE (pp)", "Δ accuracy (pp)"]
    assert census.tally == {"t, r": (4, 3)}
    assert census.totals() == {"table_cells": 4, "table_cells_exclude_zero": 3, "total": 3, "exclude_zero": 2}
    assert "3 of 4 comparisons exclude 0" in " ".join(note.split())
    assert "mean over 3 seed(s)" in " ".join(note.split())


def test_census_notes_each_recipes_own_number_of_seeds():
    differences = {
        ("r/LS", "r/CE"): {"ece": result(0.01, -0.01, 0.02)},
        ("o/LS", "o/CE"): {"ece": result(0.01, -0.01, 0.02)},
    }
    census = lc.Census(differences, n_seeds={"r": 5, "o": 3}, n_resamples=3)
    assert "mean over 5 seed(s)" in " ".join(census.frame("t", "r", {"CE": ["LS"]}, ["ece"])[1].split())
    assert "mean over 3 seed(s)" in " ".join(census.frame("t", "o", {"CE": ["LS"]}, ["ece"])[1].split())


def test_the_dca_gradient_on_a_fitted_batch_is_ce_times_one_plus_beta_p_y():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(16, 5, generator=generator, dtype=torch.float64) * 2
    labels = logits.argmax(1)  # every image classified correctly: batch accuracy 1
    for beta in (0.5, 1.0):
        z = logits.clone().requires_grad_(True)
        DCA(beta=beta)(z, labels).backward()
        z_ce = logits.clone().requires_grad_(True)
        torch.nn.functional.cross_entropy(z_ce, labels).backward()
        p_y = logits.softmax(1).gather(1, labels[:, None])
        torch.testing.assert_close(z.grad, z_ce.grad * (1 + beta * p_y))
    found = lc.dca_fitted_batch_factor(logits.softmax(1), labels, beta=1.0)
    assert found["n_correct"] == 16
    assert found["factor"] == pytest.approx(float((1 + p_y).mean()))
    assert found["term"] == pytest.approx(float(1 - logits.softmax(1).max(1).values.mean()))


def test_history_windows_average_over_seeds_and_epochs():
    run = [{"val_accuracy": a} for a in (0.5, 0.7, 0.9)]
    other = [{"val_accuracy": a} for a in (0.3, 0.5, 0.7)]
    keys = {"val_accuracy": ("validation accuracy (%)", 100.0, 1)}
    table = lc.history_windows({"m": [run, other]}, keys, [(1, 2), (2, 3)])
    assert table.loc["m", ("validation accuracy (%)", "epochs 1–2")] == "50.0"
    assert table.loc["m", ("validation accuracy (%)", "epochs 2–3")] == "70.0"
    assert table.loc["m", ("validation accuracy (%)", "kept (last) epoch")] == "80.0"
    assert lc.epoch_to_epoch_change({"m": [run, other]}, "val_accuracy", 1) == pytest.approx({"m": 0.2})
    assert lc.epoch_to_epoch_change({"m": [run[:1]]}, "val_accuracy", 1) == {}  # one epoch: nothing to compare
    assert lc.typical_seed([0.3, 0.1, 0.2]) == 2 and lc.typical_seed([0.5]) == 0


def test_confidence_profile_in_percent():
    probs = torch.tensor([[0.995, 0.005], [0.6, 0.4]], dtype=torch.float64)
    table = lc.confidence_profile({"m": [probs]}, torch.tensor([0, 1]))
    assert table.loc["m", "accuracy (%)"] == pytest.approx(50.0)
    assert table.loc["m", "mean confidence (%)"] == pytest.approx(79.75)
    assert table.loc["m", "confidence ≥ 0.99 (% of images)"] == pytest.approx(50.0)
    assert isinstance(table, pd.DataFrame)


def test_seed_table_puts_the_baseline_first_with_headers_in_words():
    cell = {"per_seed": [0.1, 0.2], "mean": 0.15, "sd": 0.07}
    summaries = {"r/CE": {"ece": cell, "nll": cell}}
    table = lc.seed_table(
        summaries,
        ["r"],
        ["CE"],
        ["ece", "nll"],
        baseline=("prior", {"ece": 0.0, "nll": 1.0}),
        extra={"temperature T": {"r/CE": "0.93"}},
    )
    assert list(table.columns) == ["ECE (%)", "NLL", "temperature T"]
    assert list(table.index) == [("r", "prior"), ("r", "CE")]
    assert table.loc[("r", "CE"), "ECE (%)"] == "15.0 ± 7.0" and table.loc[("r", "prior"), "temperature T"] == "—"


def test_outside_own_interval_names_the_rows():
    differences = {("r/a", "r/b"): {"ece": result(0.10, 0.02, 0.08), "nll": result(0.1, 0.0, 0.2)}}
    assert lc.outside_own_interval(differences) == ["ECE, 1 row(s): a − b (r) +10.0 [+2.0, +8.0]"]
    assert lc.outside_own_interval(differences, clipped={("a", "ece")}) == []


class _Run:
    def __init__(self, generator):
        self.val_logits = torch.randn(40, 3, generator=generator, dtype=torch.float64)
        self.test_logits = torch.randn(30, 3, generator=generator, dtype=torch.float64)
        self.test_probs = self.test_logits.softmax(1)


@pytest.mark.filterwarnings("ignore:temperature scaling")  # random logits: no informative temperature
def test_posthoc_probabilities_scale_every_run_and_map_cross_entropy():
    from helpers.calibration import posthoc

    generator = torch.Generator().manual_seed(2)
    runs = {("r", loss, s): _Run(generator) for loss in ("cross-entropy", "LS") for s in (0, 1)}
    val_labels = torch.randint(3, (40,), generator=generator)
    probs, temperatures = lc.posthoc_probabilities(
        runs, val_labels, torch.arange(20), {"vector scaling": lambda: posthoc.VectorScaling(max_iter=20)}
    )
    assert sorted(probs) == [
        "r/LS",
        "r/LS + TS",
        "r/cross-entropy",
        "r/cross-entropy + TS",
        "r/cross-entropy + vector scaling",
    ]
    assert all(len(v) == 2 for v in probs.values()) and len(temperatures["r/LS"]) == 2
    torch.testing.assert_close(probs["r/LS + TS"][0].sum(1), torch.ones(30, dtype=torch.float64))


def test_biopsy_decision_shows_the_reference_and_the_best_others():
    generator = torch.Generator().manual_seed(3)
    labels = torch.randint(3, (200,), generator=generator)
    models = {name: [torch.randn(200, 3, generator=generator, dtype=torch.float64).softmax(1)] for name in "abcd"}
    found = lc.biopsy_decision(models, labels, 1, 0.3, reference="b", always_shown=["a"], n=20, n_best=1)
    assert list(found["shown"])[:2] == ["a", "b"] and len(found["shown"]) == 3
    assert "Δ NB per 1,000 vs b [95 %]" in found["table"].columns and found["record"]["class"] == "melanoma"
