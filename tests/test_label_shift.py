"""helpers.calibration.label_shift against synthetic label shift with known p(x | y): three Gaussian classes on a line,
exact posteriors by Bayes' rule, so the true target prior is known and every estimator can be checked against it."""

import pytest
import torch

from helpers.calibration import label_shift

MEANS, SD = torch.tensor([-2.0, 0.0, 2.0], dtype=torch.float64), 1.0
SOURCE = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
TARGET = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)


def sample(prior, n, seed):
    """n images of a population with class prior ``prior``: (x, y)."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.multinomial(prior, n, replacement=True, generator=generator)
    x = MEANS[y] + SD * torch.randn(n, generator=generator, dtype=torch.float64)
    return x, y


def posterior(x, prior):
    """Exact p(y | x) of a population with class prior ``prior`` (Gaussian classes, Bayes' rule)."""
    log_joint = torch.log(prior) - 0.5 * ((x[:, None] - MEANS) / SD) ** 2
    return torch.softmax(log_joint, 1)


@pytest.fixture(scope="module")
def shifted():
    x_s, y_s = sample(SOURCE, 20_000, seed=0)
    x_t, y_t = sample(TARGET, 20_000, seed=1)
    return x_s, y_s, x_t, y_t


def test_the_mean_forecast_prior_is_a_fixed_point_of_em_on_the_source_data(shifted):
    """EM run on the source validation images returns π_s (no shift where there is none) only when π_s is the mean
    forecast; with the label frequencies of a model that over-forecasts class 2 it moves by the forecast excess."""
    x_s, y_s, _, _ = shifted
    over = posterior(x_s, torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))  # over-forecasts class 2
    pi_s = label_shift.source_prior(over)
    assert torch.allclose(pi_s, over.mean(0))
    assert label_shift.em_fixed_point_gap(over, pi_s) < 1e-12
    estimate, iterations = label_shift.em_target_prior(over, pi_s)
    assert torch.allclose(estimate, pi_s, atol=1e-9) and iterations == 1
    frequencies = torch.bincount(y_s, minlength=3).double() / len(y_s)
    gap = label_shift.em_fixed_point_gap(over, frequencies)
    assert gap == pytest.approx(float((over.mean(0) - frequencies).abs().max()), rel=1e-9) and gap > 0.02


def test_em_with_the_mean_forecast_recovers_the_true_target_prior(shifted):
    x_s, _, x_t, y_t = shifted
    pi_s = label_shift.source_prior(posterior(x_s, SOURCE))
    estimate, _ = label_shift.em_target_prior(posterior(x_t, SOURCE), pi_s)
    truth = torch.bincount(y_t, minlength=3).double() / len(y_t)
    assert torch.allclose(estimate, truth, atol=0.015), (estimate, truth)
    assert float(estimate.sum()) == pytest.approx(1.0)


def test_em_with_the_label_frequencies_of_a_model_that_over_forecasts_a_class_overestimates_it(shifted):
    """Issue 27 (1): π_s = label frequencies while the model's mean forecast of a class exceeds them: EM reads the
    excess as a prior shift towards that class and overestimates its target share; π_s = mean forecast is closer."""
    x_s, y_s, x_t, y_t = shifted
    model_prior = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    val, test = posterior(x_s, model_prior), posterior(x_t, model_prior)
    truth = torch.bincount(y_t, minlength=3).double() / len(y_t)
    frequencies = torch.bincount(y_s, minlength=3).double() / len(y_s)
    assert val.mean(0)[2] > frequencies[2] + 0.02  # the over-forecast, as TS leaves melanoma in notebook 12
    biased, _ = label_shift.em_target_prior(test, frequencies)
    better, _ = label_shift.em_target_prior(test, label_shift.source_prior(val))
    assert biased[2] > truth[2] + 0.05, (biased, truth)
    assert abs(better[2] - truth[2]) < 0.6 * abs(biased[2] - truth[2]), (better, biased, truth)


def test_map_em_stays_off_the_simplex_edge_where_em_collapses():
    """A small target sample that lies on class 0's side: EM's maximum likelihood puts ~0 on a class whose true
    share is 30 %; MAP-EM with α = 2 keeps every share at least 1 / (N + K)."""
    x_t = torch.tensor([-3.1, -2.6, -2.4, -2.2, -1.9, -1.7, -0.4, -0.2, 0.1, 0.3], dtype=torch.float64)
    probs = posterior(x_t, torch.full((3,), 1 / 3, dtype=torch.float64))
    em, _ = label_shift.em_target_prior(probs, [1 / 3] * 3)
    assert float(em.min()) < 1e-3, em
    regularised, _ = label_shift.map_em_target_prior(probs, [1 / 3] * 3, alpha=2.0)
    assert float(regularised.min()) >= 1 / (len(x_t) + 3) - 1e-9, regularised
    assert float(regularised.sum()) == pytest.approx(1.0)
    same, _ = label_shift.map_em_target_prior(probs, [1 / 3] * 3, alpha=1.0)  # α = 1: plain EM
    assert torch.allclose(same, em, atol=1e-6)


def test_map_em_tends_to_em_on_a_large_target_set(shifted):
    x_s, _, x_t, _ = shifted
    pi_s = label_shift.source_prior(posterior(x_s, SOURCE))
    em, _ = label_shift.em_target_prior(posterior(x_t, SOURCE), pi_s)
    regularised, _ = label_shift.map_em_target_prior(posterior(x_t, SOURCE), pi_s)
    assert torch.allclose(em, regularised, atol=1e-3)


def test_bbse_recovers_the_target_prior_from_hard_predictions(shifted):
    x_s, y_s, x_t, y_t = shifted
    prior, weights = label_shift.bbse_target_prior(
        posterior(x_s, SOURCE).argmax(1), y_s, posterior(x_t, SOURCE).argmax(1), 3
    )
    truth = torch.bincount(y_t, minlength=3).double() / len(y_t)
    assert torch.allclose(prior, truth, atol=0.03), (prior, truth)
    source = torch.bincount(y_s, minlength=3).double() / len(y_s)
    assert torch.allclose(weights, truth / source, rtol=0.15), (weights, truth / source)


def test_bbse_clips_negative_weights_and_renormalises():
    """Source: perfect predictions except a little confusion; target: class 2 never predicted and class 1 predicted
    less than class 0's confusion into it explains, so ŵ_1 < 0: clipped to 0, the prior renormalised."""
    y_s = torch.tensor([0] * 8 + [1] * 8 + [2] * 8)
    pred_s = torch.tensor([0] * 4 + [1] * 4 + [1] * 8 + [2] * 8)  # half of class 0 predicted as 1
    pred_t = torch.tensor([0] * 9 + [1] * 1)
    prior, weights = label_shift.bbse_target_prior(pred_s, y_s, pred_t, 3)
    assert float(weights[1]) < 0
    assert float(prior[1]) == 0.0 and float(prior[2]) == 0.0 and float(prior.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: label_shift.em_target_prior(torch.full((4, 3), 1 / 3), [0.5, 0.5]), "3 finite positive"),
        (lambda: label_shift.em_target_prior(torch.full((4, 3), 1 / 3), [0.5, 0.6, -0.1]), "finite positive"),
        (lambda: label_shift.em_target_prior(torch.tensor([[2.0, -1.0, 0.0]]), [1, 1, 1]), "probs"),
        (lambda: label_shift.map_em_target_prior(torch.full((4, 3), 1 / 3), [1, 1, 1], alpha=0.5), ">= 1"),
        (lambda: label_shift.map_em_target_prior(torch.full((4, 3), 1 / 3), [1, 1, 1], alpha=[2, 2]), "3 numbers"),
        (lambda: label_shift.source_prior(torch.zeros(0, 3)), "empty"),
        (lambda: label_shift.source_prior(torch.tensor([[0.5, 0.6, -0.1]])), "calibrated_source_probs"),
        (
            lambda: label_shift.bbse_target_prior(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([0]), 2),
            "differ",
        ),
        (
            lambda: label_shift.bbse_target_prior(torch.tensor([0.0, 1.0]), torch.tensor([0, 1]), torch.tensor([0]), 2),
            "integer class indices",
        ),  # fmt: skip
        (
            lambda: label_shift.bbse_target_prior(torch.tensor([0, 3]), torch.tensor([0, 1]), torch.tensor([0]), 2),
            r"\[0, 1\]",
        ),  # fmt: skip
        (
            lambda: label_shift.bbse_target_prior(torch.tensor([0, 0]), torch.tensor([0, 1]), torch.tensor([0]), 2),
            "singular",
        ),  # fmt: skip
        (lambda: label_shift.bbse_target_prior(torch.tensor([0]), torch.tensor([0]), torch.tensor([0]), 1), ">= 2"),
    ],
)
def test_bad_inputs_get_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_class_conditional_shift_finds_a_moved_class_and_not_a_reweighted_one():
    """Pure label shift (other class shares, same p(x | y)): no class is flagged. One class's images moved at the
    target: that class's domain AUROC is high with a small permutation p; the unmoved class stays near 0.5."""
    x_s, y_s = sample(SOURCE, 600, seed=3)
    x_t, y_t = sample(TARGET, 600, seed=4)
    features_s = torch.stack([x_s, x_s**2], 1)
    names = ["a", "b", "c"]
    same = label_shift.class_conditional_shift(features_s, y_s, torch.stack([x_t, x_t**2], 1), y_t, names, 50)
    assert (same["domain AUROC"] < 0.62).all() and (same["permutation p"] > 0.02).all(), same
    moved = x_t + 1.5 * (y_t == 2)  # class c looks different at the target
    shifted = label_shift.class_conditional_shift(features_s, y_s, torch.stack([moved, moved**2], 1), y_t, names, 50)
    assert shifted.loc["c", "domain AUROC"] > 0.75 and shifted.loc["c", "permutation p"] < 0.03, shifted
    assert shifted.loc["a", "domain AUROC"] < 0.62
    few = label_shift.class_conditional_shift(features_s, y_s, features_s[:5], y_s[:5], names, 10)
    assert few["domain AUROC"].isna().all() and few["target images"].sum() == 5
    with pytest.raises(ValueError, match="same D"):
        label_shift.class_conditional_shift(features_s, y_s, x_t[:, None], y_t, names)


def test_soft_bbse_recovers_the_prior_where_hard_bbse_has_a_class_never_predicted(shifted):
    """Class 2 is never the arg-max of a model that shrinks its posteriors towards [0.6, 0.4, 0]: hard BBSE's
    confusion matrix has an empty row (a clear error); soft BBSE (probabilities) still recovers the target prior,
    as BBSE does for any fixed predictor whose confusion matrix is invertible."""
    x_s, y_s, x_t, y_t = shifted
    shrink = torch.tensor([0.6, 0.4, 0.0], dtype=torch.float64)
    p_s, p_t = (0.7 * shrink + 0.3 * posterior(x, SOURCE) for x in (x_s, x_t))
    assert label_shift.never_predicted(p_s.argmax(1), 3) == [2]
    with pytest.raises(ValueError, match="singular"):
        label_shift.bbse_target_prior(p_s.argmax(1), y_s, p_t.argmax(1), 3)
    prior, _ = label_shift.bbse_target_prior(p_s, y_s, p_t, 3, soft=True)
    truth = torch.bincount(y_t, minlength=3).double() / len(y_t)
    assert torch.allclose(prior, truth, atol=0.03), (prior, truth)
    with pytest.raises(ValueError, match="3 columns"):
        label_shift.bbse_target_prior(p_s[:, :2] / p_s[:, :2].sum(1, keepdim=True), y_s, p_t, 3, soft=True)
