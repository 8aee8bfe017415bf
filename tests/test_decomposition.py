"""helpers.metrics.decomposition: Brier = REL − RES + UNC + WBV − WBC and NLL = calibration + refinement."""

import math

import pytest
import torch
from random_forecasts import random_multiclass, random_multilabel

from helpers import metrics
from helpers.calibration import TemperatureScaling
from helpers.metrics import decomposition


# ---------------------------------------------------------------------------------------------------------------
# Brier: the identity, and the components of a hand-computed example
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_bins", [1, 5, 15, 50])
def test_brier_identity_is_exact_on_random_multiclass_forecasts(seed, n_bins):
    probs, labels = random_multiclass(1500, 7, seed)
    parts = decomposition.brier_decomposition(probs, labels, n_bins=n_bins)
    assert parts.brier == pytest.approx(metrics.brier(probs, labels), abs=1e-14)
    assert abs(parts.residual()) < 1e-12
    assert parts.reliability >= 0 and parts.resolution >= 0 and parts.within_bin_variance >= 0
    frequencies = torch.bincount(labels, minlength=7).double() / len(labels)
    assert parts.uncertainty == pytest.approx(1 - float((frequencies**2).sum()), abs=1e-14)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_bins", [3, 15])
def test_brier_identity_is_exact_on_random_multilabel_forecasts(seed, n_bins):
    probs, labels = random_multilabel(1200, 5, seed)
    parts = decomposition.multilabel_brier_decomposition(probs, labels, n_bins=n_bins)
    assert parts.brier == pytest.approx(metrics.multilabel_brier(probs, labels), abs=1e-14)
    assert abs(parts.residual()) < 1e-12


def test_murphy_terms_alone_are_not_exact_when_forecasts_differ_inside_a_bin():
    probs, labels = random_multilabel(1000, 3, 0)
    parts = decomposition.multilabel_brier_decomposition(probs, labels, n_bins=5)
    assert abs(parts.within_bin) > 1e-4  # the Stephenson et al. terms carry a real share of the score
    assert abs(parts.brier - (parts.reliability - parts.resolution + parts.uncertainty)) > 1e-4


def test_brier_components_of_a_hand_computed_example():
    # two bins: {0.1, 0.2} with outcomes {0, 1} and {0.7, 0.9} with outcomes {1, 1}; base rate 3/4
    probs = torch.tensor([[0.1], [0.2], [0.7], [0.9]], dtype=torch.float64)
    labels = torch.tensor([[0.0], [1.0], [1.0], [1.0]], dtype=torch.float64)
    parts = decomposition.multilabel_brier_decomposition(probs, labels, n_bins=2)
    expected = {
        "brier": 0.75 / 4,  # (0.01 + 0.64 + 0.09 + 0.01) / 4
        "reliability": (2 * 0.35**2 + 2 * 0.2**2) / 4,  # bins (0.15 vs 0.5) and (0.8 vs 1)
        "resolution": (2 * 0.25**2 + 2 * 0.25**2) / 4,  # bin frequencies 0.5 and 1 vs 0.75
        "uncertainty": 0.75 * 0.25,
        "within_bin_variance": (2 * 0.05**2 + 2 * 0.1**2) / 4,
        "within_bin_covariance": 2 * ((-0.5) * (-0.05) + 0.5 * 0.05) / 4,
    }
    for name, value in expected.items():
        assert getattr(parts, name) == pytest.approx(value, abs=1e-15), name


def test_a_constant_base_rate_forecast_has_no_reliability_and_no_resolution():
    _, labels = random_multiclass(2000, 7, 3)
    base_rate = torch.bincount(labels, minlength=7).double() / len(labels)
    probs = base_rate.expand(len(labels), -1)
    brier = decomposition.brier_decomposition(probs, labels)
    assert brier.reliability < 1e-15 and brier.resolution < 1e-15 and abs(brier.within_bin) < 1e-15
    assert brier.brier == pytest.approx(brier.uncertainty, abs=1e-14)
    nll = decomposition.nll_decomposition(probs, labels, estimator="rank-chain")
    assert abs(nll.calibration) < 1e-12 and abs(nll.resolution) < 1e-12
    assert nll.score == pytest.approx(nll.uncertainty, abs=1e-12)
    # cross-fitted: each fold's map learns its training folds' frequencies, a hair off the test set's own
    crossed = decomposition.nll_decomposition(probs, labels)
    assert abs(crossed.calibration) < 2e-3 and abs(crossed.resolution) < 2e-3


def test_a_constant_base_rate_forecast_per_label_has_no_reliability_and_no_resolution():
    _, labels = random_multilabel(1500, 4, 2)
    probs = labels.mean(0).expand_as(labels)
    brier = decomposition.multilabel_brier_decomposition(probs, labels)
    nll = decomposition.multilabel_nll_decomposition(probs, labels)
    assert brier.reliability < 1e-15 and brier.resolution < 1e-15
    assert abs(nll.calibration) < 1e-12 and abs(nll.resolution) < 1e-12


def _overconfident_model(n=4000, k=5, sharpen=3.0, seed=0):
    """True posteriors softmax(z), labels drawn from them, and a perfectly ranked but over-confident model's logits."""
    generator = torch.Generator().manual_seed(seed)
    z = 1.5 * torch.randn(n, k, generator=generator, dtype=torch.float64)
    labels = torch.multinomial(torch.softmax(z, 1), 1, generator=generator)[:, 0]
    return sharpen * z, labels


def test_temperature_scaling_lowers_reliability_but_leaves_resolution_nearly_unchanged():
    logits, labels = _overconfident_model()
    raw = torch.softmax(logits, 1)
    scaled = TemperatureScaling().fit(logits, labels).transform(logits)
    before, after = (decomposition.brier_decomposition(p, labels) for p in (raw, scaled))
    assert after.reliability < before.reliability / 5
    assert abs(after.resolution - before.resolution) < 0.1 * before.resolution
    nll_before, nll_after = (decomposition.nll_decomposition(p, labels) for p in (raw, scaled))
    assert nll_after.calibration < nll_before.calibration / 5
    # a temperature is inside the cross-fitted map's family: the resolution estimate does not move
    assert nll_after.resolution == pytest.approx(nll_before.resolution, abs=1e-3)


def test_binary_isotonic_refinement_ignores_any_strictly_increasing_map_of_the_forecasts():
    probs, labels = random_multilabel(1000, 4, 5)
    sharpened = probs**3 / (probs**3 + (1 - probs) ** 3)  # a temperature of 1/3 on the logit scale
    before, after = (decomposition.multilabel_nll_decomposition(p, labels) for p in (probs, sharpened))
    assert after.refinement == pytest.approx(before.refinement, abs=1e-12)
    assert after.resolution == pytest.approx(before.resolution, abs=1e-12)
    assert after.calibration != pytest.approx(before.calibration, abs=1e-3)


# ---------------------------------------------------------------------------------------------------------------
# NLL
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("scale", [0.3, 2.0, 6.0])
def test_isotonic_calibration_term_is_nonnegative_and_the_sum_exact_multiclass(seed, scale):
    probs, labels = random_multiclass(800, 6, seed, scale=scale)
    parts = decomposition.nll_decomposition(probs, labels, estimator="rank-chain", recalibration="isotonic")
    assert parts.score == pytest.approx(metrics.nll(probs, labels), abs=1e-14)
    assert parts.calibration >= -1e-12
    assert parts.calibration + parts.refinement == pytest.approx(parts.score, abs=1e-12)
    assert parts.uncertainty - parts.resolution == pytest.approx(parts.refinement, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("recalibration", decomposition.RECALIBRATIONS)
def test_multilabel_nll_sum_is_exact_and_resolution_matches_its_own_definition(seed, recalibration):
    probs, labels = random_multilabel(900, 4, seed)
    parts = decomposition.multilabel_nll_decomposition(probs, labels, recalibration=recalibration)
    assert parts.score == pytest.approx(metrics.multilabel_nll(probs, labels), abs=1e-14)
    assert parts.calibration + parts.refinement == pytest.approx(parts.score, abs=1e-12)
    # resolution is computed as mean KL(q || base rate), independently of the refinement: the identity holds
    # only because the recalibrated q is calibrated on these data
    assert parts.uncertainty - parts.resolution == pytest.approx(parts.refinement, abs=1e-12)
    if recalibration == "isotonic":
        assert parts.calibration >= -1e-12


def test_nll_decomposition_of_a_hand_computed_binary_example():
    probs = torch.tensor([[0.1], [0.2], [0.7], [0.9]], dtype=torch.float64)
    labels = torch.tensor([[0.0], [1.0], [0.0], [1.0]], dtype=torch.float64)
    score = -(math.log(0.9) + math.log(0.2) + math.log(0.3) + math.log(0.9)) / 4
    # isotonic: outcomes 0, 1, 0, 1 in forecast order; pool-adjacent-violators pools the middle pair -> 0, .5, .5, 1
    isotonic = decomposition.multilabel_nll_decomposition(probs, labels, recalibration="isotonic")
    assert isotonic.score == pytest.approx(score, abs=1e-15)
    assert isotonic.refinement == pytest.approx(2 * math.log(2) / 4, abs=1e-15)
    assert isotonic.uncertainty == pytest.approx(math.log(2), abs=1e-15)
    assert isotonic.resolution == pytest.approx(math.log(2) / 2, abs=1e-15)
    # two bins, each with frequency 1/2: the recalibrated forecast is the base rate, no resolution left
    binned = decomposition.multilabel_nll_decomposition(probs, labels, recalibration="binned", n_bins=2)
    assert binned.refinement == pytest.approx(math.log(2), abs=1e-15)
    assert abs(binned.resolution) < 1e-15


def test_nll_decomposition_of_a_hand_computed_multiclass_example():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.5, 0.1, 0.4], [0.2, 0.5, 0.3]], dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 1])
    # stage 1, every row: top confidences .7 .6 .5 .5, correct 1 0 0 1 -> isotonic 1, 1/3, 1/3, 1/3
    # stage 2, rows B and C (label not on top): conditionals .3/.4 and .4/.5, both hits -> isotonic 1
    refinement = (0 + math.log(3 / 2) + math.log(3 / 2) + math.log(3)) / 4
    parts = decomposition.nll_decomposition(probs, labels, estimator="rank-chain")
    assert parts.score == pytest.approx(-(math.log(0.7) + math.log(0.3) + math.log(0.4) + math.log(0.5)) / 4)
    assert parts.refinement == pytest.approx(refinement, abs=1e-15)
    assert parts.uncertainty == pytest.approx(-(0.25 * math.log(0.25) * 2 + 0.5 * math.log(0.5)), abs=1e-15)


# ---------------------------------------------------------------------------------------------------------------
# bad input, and the notebook tables
# ---------------------------------------------------------------------------------------------------------------
def test_bad_inputs_are_refused_with_a_reason():
    probs, labels = random_multiclass(50, 3, 0)
    with pytest.raises(ValueError, match="recalibration must be one of"):
        decomposition.nll_decomposition(probs, labels, estimator="rank-chain", recalibration="platt")
    with pytest.raises(ValueError, match="estimator must be one of"):
        decomposition.nll_decomposition(probs, labels, estimator="isotonic")
    with pytest.raises(ValueError, match="n_bins must be a positive integer"):
        decomposition.brier_decomposition(probs, labels, n_bins=0)
    with pytest.raises(ValueError, match="did you pass logits"):
        decomposition.brier_decomposition(torch.log(probs), labels)
    with pytest.raises(ValueError, match="same \\(N, T\\) shape"):
        decomposition.multilabel_brier_decomposition(probs, labels)


def test_summaries_and_table_follow_the_per_seed_values():
    seeds = [random_multiclass(300, 4, s) for s in (0, 1)]
    labels = seeds[0][1]
    probs = {"model a": [p for p, _ in seeds], "model b": seeds[0][0]}
    summaries = decomposition.decomposition_summaries(probs, labels)
    first = decomposition.brier_decomposition(seeds[0][0], labels)
    second = decomposition.brier_decomposition(seeds[1][0], labels)
    assert summaries["model a"]["brier_reliability"]["per_seed"] == [first.reliability, second.reliability]
    assert summaries["model b"]["brier_resolution"]["sd"] is None
    table = decomposition.decomposition_table(summaries, models=["model b"], digits=3)
    assert list(table.index) == ["model b"]
    assert list(table.columns) == list(decomposition.COLUMNS.values())
    assert table.loc["model b", "reliability"] == round(first.reliability, 3)
    with pytest.raises(KeyError, match="no decomposition for model"):
        decomposition.decomposition_table(summaries, models=["model c"])


def test_grid_puts_each_model_under_its_group():
    probs = {name: [random_multiclass(200, 3, seed)[0]] for seed, name in enumerate(["a", "a + TS", "b", "b + TS"])}
    labels = random_multiclass(200, 3, 9)[1]
    summaries = decomposition.decomposition_summaries(probs, labels)
    grid = {"a": {"raw": "a", "+ TS": "a + TS"}, "b": {"raw": "b", "+ TS": "b + TS"}}
    table = decomposition.decomposition_grid(summaries, grid, digits=6)
    assert table.shape == (2, 4)
    assert table.loc["b", ("+ TS", "RES")] == round(summaries["b + TS"]["brier_resolution"]["mean"], 6)
    assert table.loc["a", ("raw", "REL")] == round(summaries["a"]["brier_reliability"]["mean"], 6)
    with pytest.raises(KeyError, match="no decomposition for model"):
        decomposition.decomposition_grid(summaries, {"c": {"raw": "c"}})


def test_results_record_names_the_method_and_keeps_every_model():
    probs, labels = random_multilabel(300, 3, 0)
    summaries = decomposition.decomposition_summaries({"m": [probs]}, labels, multilabel=True)
    record = decomposition.results_record(summaries, multilabel=True)
    assert "per label" in record["method"]["brier"] and "isotonic" in record["method"]["nll"]
    assert record["models"]["m"]["nll_calibration"] == summaries["m"]["nll_calibration"]


def test_multiclass_summaries_use_one_cross_fitted_map_for_both_scores():
    probs, labels = random_multiclass(400, 4, 3)
    summaries = decomposition.decomposition_summaries({"m": [probs]}, labels, folds=4, seed=2)
    q = metrics.cross_fitted_recalibration(probs, labels, folds=4, seed=2)
    nll = metrics.score_decomposition_from(probs, labels, q, "nll")
    brier = metrics.score_decomposition_from(probs, labels, q, "brier")
    assert summaries["m"]["nll_resolution"]["mean"] == nll.resolution
    assert summaries["m"]["brier_calibration"]["mean"] == brier.calibration
    assert summaries["m"]["brier_resolution_cross_fitted"]["mean"] == brier.resolution
    record = decomposition.results_record(summaries, folds=4)
    assert "4-fold cross-fitted" in record["method"]["nll"]


def test_table_shows_a_tiny_negative_component_as_zero_not_minus_zero():
    summaries = {"m": {key: {"mean": -1e-17, "sd": None, "per_seed": [-1e-17]} for key in decomposition.COLUMNS}}
    table = decomposition.decomposition_table(summaries, digits=4)
    assert str(table.loc["m", "within-bin"]) == "0.0"
