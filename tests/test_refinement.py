"""helpers.metrics.refinement: the cross-fitted calibration–refinement decomposition of NLL and Brier score.

The synthetic set has KNOWN posteriors: p = softmax(z) with z Gaussian and the labels drawn from p, so P(Y | p) = p.
A distorted forecast g(p) with g injective has the same population resolution, and its population calibration
term is E KL(p || g(p)) (NLL) or E ||g(p) − p||² (Brier), computed below from the posteriors.
"""

import pytest
import torch
from random_forecasts import random_multiclass

from helpers import metrics
from helpers.calibration import VectorScaling
from helpers.metrics import decomposition, refinement

N, K = 3000, 5
WEIGHTS = torch.tensor([0.5, 1.5, 1.0, 2.0, 0.8], dtype=torch.float64)
BIASES = torch.tensor([0.5, -0.5, 0.0, 0.3, -0.2], dtype=torch.float64)


def _known_posteriors(n=N, k=K, seed=0):
    generator = torch.Generator().manual_seed(seed)
    z = 1.5 * torch.randn(n, k, generator=generator, dtype=torch.float64)
    posteriors = torch.softmax(z, 1)
    return posteriors, torch.multinomial(posteriors, 1, generator=generator)[:, 0]


def _centred(p):
    log_p = p.log()
    return log_p - log_p.mean(1, keepdim=True)


# injective recalibrations of the simplex; the first three are inside the map family (closed under them)
MAPS = {
    "temperature 2.5": lambda p: torch.softmax(_centred(p) / 2.5, 1),
    "vector scaling": lambda p: torch.softmax(WEIGHTS * _centred(p) + BIASES, 1),
    "matrix scaling": lambda p: torch.softmax(
        _centred(p) @ (torch.eye(K, dtype=torch.float64) + 0.3 * torch.ones(K, K, dtype=torch.float64).triu(1)).T, 1
    ),
}
# vector scaling of the uncentred log-probabilities: injective too (w > 0), but outside the family
OUTSIDE = lambda p: torch.softmax(WEIGHTS * p.log() + BIASES, 1)  # noqa: E731


@pytest.fixture(scope="module")
def known():
    posteriors, labels = _known_posteriors()
    return posteriors, labels, refinement.score_decomposition(posteriors, labels)


@pytest.mark.parametrize("name", list(MAPS))
def test_resolution_is_unchanged_by_recalibrations_inside_the_family(known, name):
    posteriors, labels, reference = known
    moved = refinement.score_decomposition(MAPS[name](posteriors), labels)
    # the fit is equivariant: only the small L2 penalty and the solver's tolerance separate the two estimates
    assert moved.resolution == pytest.approx(reference.resolution, abs=2e-3)
    assert moved.calibration > 0.02  # while the calibration term sees the distortion


def test_resolution_moves_within_noise_under_an_injective_map_outside_the_family_but_the_rank_chain_falls(known):
    posteriors, labels, reference = known
    distorted = OUTSIDE(posteriors)
    moved = refinement.score_decomposition(distorted, labels)
    # noise: the resolution of the same posteriors with another fold split
    other_split = refinement.score_decomposition(posteriors, labels, seed=1)
    noise = abs(other_split.resolution - reference.resolution)
    assert abs(moved.resolution - reference.resolution) < max(5 * noise, 0.015)
    # the earlier rank-by-rank estimator loses a large part of the resolution to the class-wise distortion
    old = [decomposition.nll_decomposition(p, labels, estimator="rank-chain") for p in (posteriors, distorted)]
    assert old[0].resolution - old[1].resolution > 0.15


def test_vector_scaling_fitted_elsewhere_cannot_raise_the_resolution_but_raised_the_rank_chains():
    """The issue's case: a model with class-wise miscalibration, vector scaling fitted on a separate validation set.
    The true logits are centred, so the model's probabilities determine its logits and vector scaling is an
    injective map of the probabilities: the population resolution is the same before and after. (With logits whose
    level varies at random, softmax discards the level and vector scaling, which reads it, is no function of the
    probabilities: it can then raise even the population resolution.)"""
    generator = torch.Generator().manual_seed(7)
    z = 1.5 * torch.randn(2 * N, K, generator=generator, dtype=torch.float64)
    z = z - z.mean(1, keepdim=True)
    labels = torch.multinomial(torch.softmax(z, 1), 1, generator=generator)[:, 0]
    logits = z / WEIGHTS - BIASES  # per-class scale and bias: class-wise miscalibration
    val, test = slice(0, N), slice(N, 2 * N)
    raw = torch.softmax(logits[test], 1)
    scaled = VectorScaling().fit(logits[val], labels[val]).transform(logits[test])
    new = [refinement.score_decomposition(p, labels[test]) for p in (raw, scaled)]
    old = [decomposition.nll_decomposition(p, labels[test], estimator="rank-chain") for p in (raw, scaled)]
    assert abs(new[1].resolution - new[0].resolution) < 0.01
    assert new[1].calibration < new[0].calibration - 0.05  # what vector scaling removed was calibration
    assert old[1].resolution - old[0].resolution > 0.03  # the rank chain read part of it as resolution gained


def test_calibration_term_is_zero_for_the_posteriors_and_the_population_value_for_a_distortion(known):
    posteriors, labels, reference = known
    brier_reference = refinement.score_decomposition(posteriors, labels, "brier")
    assert abs(reference.calibration) < 5e-3 and abs(brier_reference.calibration) < 3e-3
    distorted = MAPS["vector scaling"](posteriors)
    population_nll = float((posteriors * (posteriors.log() - distorted.log())).sum(1).mean())  # E KL(p || g(p))
    population_brier = float(((distorted - posteriors) ** 2).sum(1).mean())  # E ||g(p) − p||²
    nll = refinement.score_decomposition(distorted, labels)
    brier = refinement.score_decomposition(distorted, labels, "brier")
    assert nll.calibration == pytest.approx(population_nll, rel=0.1)
    assert brier.calibration == pytest.approx(population_brier, rel=0.1)


@pytest.mark.parametrize("score", refinement.SCORES)
def test_the_identity_holds_exactly_and_the_score_is_the_metric(score):
    probs, labels = random_multiclass(400, 4, 1)
    parts = refinement.score_decomposition(probs, labels, score, folds=4)
    metric = metrics.nll if score == "nll" else metrics.brier
    assert parts.score == pytest.approx(metric(probs, labels), abs=1e-12)
    assert parts.calibration - parts.resolution + parts.uncertainty == pytest.approx(parts.score, abs=1e-12)
    assert parts.refinement == pytest.approx(parts.uncertainty - parts.resolution, abs=1e-12)
    # for any recalibrated forecast, by definition; UNC is the score of the class frequencies
    q = torch.softmax(torch.randn(400, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64), 1)
    given = refinement.score_decomposition_from(probs, labels, q, score)
    assert given.calibration - given.resolution + given.uncertainty == pytest.approx(given.score, abs=1e-12)
    frequency = torch.bincount(labels, minlength=4).double() / len(labels)
    assert given.uncertainty == pytest.approx(metric(frequency.expand(400, -1), labels), abs=1e-12)


def test_forecasts_unrelated_to_the_labels_get_no_resolution_out_of_sample():
    probs, labels = random_multiclass(600, 7, 4)  # labels drawn independently of the forecasts
    parts = refinement.score_decomposition(probs, labels)
    assert parts.resolution < 0  # cross-fitted: the map's noise costs, it does not pass for resolution
    assert parts.resolution > -0.05


def test_classes_that_never_occur_get_probability_zero():
    probs, labels = random_multiclass(300, 4, 5)
    labels = labels.clamp_max(2)  # class 3 never occurs
    q = refinement.cross_fitted_recalibration(probs, labels)
    assert torch.all(q[:, 3] == 0) and torch.allclose(q.sum(1), torch.ones(300, dtype=torch.float64))


def test_bad_inputs_are_refused_with_a_reason():
    probs, labels = random_multiclass(60, 3, 0)
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        refinement.cross_fitted_recalibration(probs, labels, folds=1)
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        refinement.cross_fitted_recalibration(probs, labels, folds=2.5)
    with pytest.raises(ValueError, match="penalty must be a finite number > 0"):
        refinement.cross_fitted_recalibration(probs, labels, penalty=0)
    with pytest.raises(ValueError, match="at least 20 images"):
        refinement.cross_fitted_recalibration(probs[:15], labels[:15], folds=10)
    rare = labels.clone()
    rare[rare == 2] = 1
    rare[:3] = 2
    with pytest.raises(ValueError, match=r"classes \[2\] occur \[3\] time\(s\), fewer than folds = 5"):
        refinement.cross_fitted_recalibration(probs, rare)
    with pytest.raises(ValueError, match="score must be one of"):
        refinement.score_decomposition(probs, labels, "ece")
    with pytest.raises(ValueError, match="recalibrated has shape"):
        refinement.score_decomposition_from(probs, labels, probs[:, :2], "nll")
    with pytest.raises(ValueError, match="did you pass logits"):
        refinement.score_decomposition(torch.log(probs), labels)
