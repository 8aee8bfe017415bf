"""Tests of the estimators added for issues 8 and 9: smooth ECE (agreement with relplot), debiased ECE (agreement
with the uncertainty-calibration package, and its bias), the true RMS error (the excess-Brier identity), class
recall (scikit-learn) and the smooth reliability data."""

import math

import calibration  # the uncertainty-calibration package (Kumar et al. 2019), a test-only oracle
import numpy as np
import pytest
import relplot
import torch
from random_forecasts import random_multiclass, random_multilabel
from sklearn.metrics import recall_score

from helpers import metrics as M


# ------------------------------------------------------------------------------------------------------------
# smooth ECE
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, k", [(500, 3), (2005, 7)])
def test_smooth_ece_is_relplot_on_top_label_confidence_and_correctness(n, k):
    probs, labels = random_multiclass(n, k, seed=k)
    confidence, correct = relplot.multiclass_logits_to_confidences(probs.numpy(), labels.numpy(), probs=True)
    assert M.smooth_ece(probs, labels) == pytest.approx(relplot.smECE(confidence, correct), rel=1e-12)


def test_multilabel_smooth_ece_is_relplot_on_the_pooled_pairs():
    probs, labels = random_multilabel(800, 5, seed=1)
    expected = relplot.smECE(probs.numpy().reshape(-1), labels.numpy().reshape(-1))
    assert M.multilabel_smooth_ece(probs, labels) == pytest.approx(expected, rel=1e-12)


def test_smooth_ece_is_small_when_calibrated_and_below_the_true_ece_when_not():
    generator = torch.Generator().manual_seed(2)
    forecast = torch.rand(20000, 1, generator=generator, dtype=torch.float64)
    calibrated = (torch.rand(20000, 1, generator=generator, dtype=torch.float64) < forecast).double()
    assert M.multilabel_smooth_ece(forecast, calibrated) < 0.02  # finite-sample bias only (0.012 here)
    # outcomes ~ Bernoulli(f²): true ECE = E|f − f²| = 1/6 for f ~ U(0, 1); smoothing can only lower it (Jensen)
    miscalibrated = (torch.rand(20000, 1, generator=generator, dtype=torch.float64) < forecast**2).double()
    assert 0.5 / 6 < M.multilabel_smooth_ece(forecast, miscalibrated) < 1 / 6 + 0.01


def test_smooth_ece_rejects_logits():
    with pytest.raises(ValueError, match="did you pass logits"):
        M.smooth_ece(torch.randn(10, 3), torch.zeros(10, dtype=torch.long))


# ------------------------------------------------------------------------------------------------------------
# debiased ECE (Kumar et al. 2019)
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, k, seed", [(500, 3, 0), (2005, 7, 1), (37, 4, 2), (1000, 10, 3), (16, 2, 4)])
def test_debiased_ece_equals_get_calibration_error_top_label(n, k, seed):
    probs, labels = random_multiclass(n, k, seed)
    assert not calibration.is_discrete(probs.numpy())  # the package takes its equal-mass ("scaling") branch
    expected = calibration.get_calibration_error(probs.numpy(), labels.numpy(), p=2, debias=True, mode="top-label")
    assert M.debiased_ece(probs, labels) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("n_bins", [1, 5, 15, 40])
@pytest.mark.parametrize("ties", [False, True])
def test_debiased_ece_equals_lower_bound_scaling_ce_for_any_bin_count_and_ties(n_bins, ties):
    generator = torch.Generator().manual_seed(n_bins)
    logits = 2 * torch.randn(600, 4, generator=generator, dtype=torch.float64)
    if ties:  # integer logits: few distinct confidences, ties across the chunk boundaries
        logits = logits.round()
    probs, labels = torch.softmax(logits, 1), torch.randint(4, (600,), generator=generator)
    expected = calibration.lower_bound_scaling_ce(
        probs.numpy(), labels.numpy(), p=2, debias=True, num_bins=n_bins, mode="top-label"
    )
    assert M.debiased_ece(probs, labels, n_bins) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_debiased_ece_with_fewer_samples_than_bins():
    probs, labels = random_multiclass(9, 3, seed=5)
    expected = calibration.lower_bound_scaling_ce(
        probs.numpy(), labels.numpy(), p=2, debias=True, num_bins=15, mode="top-label"
    )
    assert M.debiased_ece(probs, labels) == pytest.approx(expected, abs=1e-15)


def test_debiased_ece_removes_the_plug_in_bias():
    # top-label confidence c ~ U(0.5, 1), correct with probability c − 0.1: the true L2 calibration error is 0.1
    debiased, plug_in = [], []
    for seed in range(30):
        generator = torch.Generator().manual_seed(100 + seed)
        confidence = 0.5 + 0.5 * torch.rand(500, generator=generator, dtype=torch.float64)
        correct = torch.rand(500, generator=generator, dtype=torch.float64) < confidence - 0.1
        probs = torch.stack([confidence, 1 - confidence], 1)
        labels = torch.where(correct, 0, 1)
        debiased.append(M.debiased_ece(probs, labels))
        plug_in.append(
            calibration.lower_bound_scaling_ce(
                probs.numpy(), labels.numpy(), p=2, debias=False, num_bins=15, mode="top-label"
            )
        )
    assert abs(np.mean(debiased) - 0.1) < 0.01
    assert np.mean(plug_in) - 0.1 > 2 * abs(np.mean(debiased) - 0.1)


def test_debiased_ece_checks_inputs():
    probs, labels = random_multiclass(20, 3, seed=0)
    with pytest.raises(ValueError, match="n_bins"):
        M.debiased_ece(probs, labels, n_bins=0)
    with pytest.raises(ValueError, match="sum to 1"):
        M.debiased_ece(probs * 0.5, labels)


# ------------------------------------------------------------------------------------------------------------
# true RMS error
# ------------------------------------------------------------------------------------------------------------
def test_true_rms_squared_is_the_expected_excess_brier_risk_exactly():
    eta, _ = random_multilabel(300, 6, seed=7)
    eta_hat, _ = random_multilabel(300, 6, seed=8)

    def expected_brier(p):  # E_{y ~ Bernoulli(eta)} (p − y)², averaged over every (image, label) pair
        return float((eta * (1 - p) ** 2 + (1 - eta) * p**2).mean())

    assert M.true_rms(eta_hat, eta) ** 2 == pytest.approx(expected_brier(eta_hat) - expected_brier(eta), rel=1e-12)


def test_true_rms_squared_matches_the_excess_brier_over_sampled_labels():
    eta, _ = random_multilabel(400, 5, seed=9)
    eta_hat = (eta + 0.15).clamp(0, 1)
    generator = torch.Generator().manual_seed(10)
    differences = []
    for _ in range(200):
        y = (torch.rand(eta.shape, generator=generator, dtype=torch.float64) < eta).double()
        differences.append(M.multilabel_brier(eta_hat, y) - M.multilabel_brier(eta, y))
    standard_error = np.std(differences) / math.sqrt(len(differences))
    assert abs(np.mean(differences) - M.true_rms(eta_hat, eta) ** 2) < 4 * standard_error


def test_true_rms_is_zero_for_the_bayes_model_and_is_the_rms_of_true_calibration_error():
    eta, _ = random_multilabel(100, 4, seed=11)
    assert M.true_rms(eta, eta) == 0.0
    other, _ = random_multilabel(100, 4, seed=12)
    assert M.true_rms(other, eta) == pytest.approx(float(((other - eta) ** 2).mean().sqrt()), rel=1e-12)
    with pytest.raises(ValueError, match="same shape"):
        M.true_rms(other, eta[:, :3])


# ------------------------------------------------------------------------------------------------------------
# class recall
# ------------------------------------------------------------------------------------------------------------
def test_class_recall_agrees_with_sklearn_and_is_nan_for_an_absent_class():
    probs, labels = random_multiclass(300, 5, seed=13)
    per_class = recall_score(labels.numpy(), probs.argmax(1).numpy(), labels=range(5), average=None)
    for k in range(5):
        assert M.class_recall(probs, labels, k) == pytest.approx(per_class[k], rel=1e-12)
    assert math.isnan(M.class_recall(probs, torch.zeros(300, dtype=torch.long), 3))
    with pytest.raises(ValueError, match="class_index"):
        M.class_recall(probs, labels, 5)


# ------------------------------------------------------------------------------------------------------------
# smooth reliability data
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Passing a dict to DataFrame.from_records")  # inside relplot, with pandas 3
def test_smooth_reliability_is_relplots_diagram_and_leaves_numpys_random_state_alone():
    probs, labels = random_multiclass(1500, 4, seed=14, scale=1.0)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    diagram = M.smooth_reliability(probs, labels, n_bootstrap=20, seed=3)
    assert np.array_equal(np.random.get_state()[1], before)
    np.random.seed(3)
    confidence, correct = relplot.multiclass_logits_to_confidences(probs.numpy(), labels.numpy(), probs=True)
    reference = relplot.prepare_rel_diagram(confidence, correct, num_bootstrap=20, report_CE_std=False)
    for field in ("mesh", "mu", "lower", "upper", "density"):
        np.testing.assert_allclose(getattr(diagram, field), reference[field], rtol=1e-12)
    assert diagram.smooth_ece == pytest.approx(M.smooth_ece(probs, labels), rel=1e-12)
    assert diagram.bandwidth == reference["sigma"] and diagram.kind == "top-label" and diagram.n_samples == 1500
    again = M.smooth_reliability(probs, labels, n_bootstrap=20, seed=3)
    np.testing.assert_array_equal(again.upper, diagram.upper)


def test_smooth_reliability_of_calibrated_forecasts_follows_the_diagonal():
    generator = torch.Generator().manual_seed(15)
    forecast = torch.rand(5000, 3, generator=generator, dtype=torch.float64)
    outcome = (torch.rand(5000, 3, generator=generator, dtype=torch.float64) < forecast).double()
    diagram = M.smooth_reliability(forecast, outcome, multilabel=True, n_bootstrap=20)
    inside = (diagram.mesh > 0.2) & (diagram.mesh < 0.8)
    # the bandwidth is the (small) smooth ECE itself, so the curve is noisy point by point but centred on the diagonal
    assert np.abs(diagram.mu - diagram.mesh)[inside].mean() < 0.02
    assert np.all(diagram.lower[inside] <= diagram.upper[inside])
    assert diagram.kind == M.POOLED and diagram.n_samples == 15000
    with pytest.raises(ValueError, match="n_bootstrap"):
        M.smooth_reliability(forecast, outcome, multilabel=True, n_bootstrap=1)
