"""Tests of helpers.lessons.logit_analysis: logit distances and the expected-loss minimiser against closed forms."""

import pytest
import torch

from helpers.lessons import logit_distance_summary, logit_distances, optimal_confidence, stationary_confidence
from helpers.losses import FLSD53, CrossEntropy, FocalLoss, LabelSmoothing


def test_logit_distances_leave_out_the_winner_and_match_a_loop():
    logits = torch.tensor([[1.0, 3.0, -2.0], [0.5, 0.0, 4.0]])
    expected = sorted([3.0 - 1.0, 3.0 + 2.0, 4.0 - 0.5, 4.0 - 0.0])
    assert sorted(logit_distances(logits).tolist()) == pytest.approx(expected)


def test_summary_fraction_above_margin_and_quartiles():
    logits = torch.tensor([[0.0, -1.0, -2.0, -3.0, -4.0]])  # distances 1, 2, 3, 4
    summary = logit_distance_summary(logits, margins=(2.5, 10))
    assert summary["fraction_above_2.5"] == pytest.approx(0.5)
    assert summary["fraction_above_10"] == 0.0
    assert summary["median"] == pytest.approx(2.5)
    assert summary["mean"] == pytest.approx(2.5)
    assert summary["max"] == pytest.approx(4.0)


def test_cross_entropy_is_proper_and_label_smoothing_mixes_with_the_uniform_prior():
    q = torch.tensor([0.3, 0.5, 0.8, 0.95], dtype=torch.float64)
    grid_step = (1 - 1 / 4) / 2001
    assert optimal_confidence(CrossEntropy(), q, 4, grid_size=2000) == pytest.approx(q, abs=grid_step)
    alpha = 0.2
    expected = (1 - alpha) * q + alpha / 4
    assert optimal_confidence(LabelSmoothing(alpha), q, 4, grid_size=2000) == pytest.approx(expected, abs=grid_step)


def test_focal_loss_asks_for_less_than_the_true_probability_when_confident():
    q = torch.tensor([0.8, 0.9, 0.97], dtype=torch.float64)
    theta = optimal_confidence(FocalLoss(3.0), q, 7, grid_size=1000)
    assert bool((theta < q - 0.02).all())
    assert torch.equal(optimal_confidence(FocalLoss(0.0), q, 7, 1000), optimal_confidence(CrossEntropy(), q, 7, 1000))


@pytest.mark.parametrize("bad", [torch.zeros(3), torch.full((2, 1), 1.0), torch.tensor([[float("nan"), 1.0]])])
def test_bad_logits_raise(bad):
    with pytest.raises(ValueError):
        logit_distances(bad)


def test_bad_probability_raises():
    with pytest.raises(ValueError):
        optimal_confidence(CrossEntropy(), [1.0], 3)


# ---------------------------------------------------------------------------------------------------------------
# stationary_confidence: where gradient training on the expected loss comes to rest (γ of FLSD-53 held per side)


def _focal_slope(p, gamma):
    """−d/dp of −(1 − p)^γ log p, written out by hand (independent of the library's autograd path)."""
    import math

    return (1 - p) ** gamma / p - gamma * (1 - p) ** (gamma - 1) * math.log(p)


def _flsd53_rest_point_by_hand(q, k):
    """Mukhoti et al. 2020 sec. 5 with γ held fixed: q·h_γ(θ)(θ) = (1 − q)/(K − 1)·h_γ(r)(r), r = (1 − θ)/(K − 1),
    γ(p) = 5 if p < 0.2 else 3; solved by scipy's brentq on each branch, keeping the branch whose γ matches."""
    from scipy.optimize import brentq

    def condition(theta, gamma_top):
        r = (1 - theta) / (k - 1)
        gamma_rest = 5.0 if r < 0.2 else 3.0
        return q * _focal_slope(theta, gamma_top) - (1 - q) / (k - 1) * _focal_slope(r, gamma_rest)

    roots = [brentq(condition, 1 / k + 1e-12, 1 - 1e-12, args=(g,)) for g in (3.0, 5.0)]
    valid = [r for r, g in zip(roots, (3.0, 5.0)) if (r >= 0.2) == (g == 3.0)]
    assert len(valid) == 1, "the chosen q values lie outside the bistable window"
    return valid[0]


def test_stationary_confidence_reduces_to_the_closed_forms_for_ce_and_label_smoothing():
    q = torch.tensor([0.3, 0.5, 0.8, 0.95], dtype=torch.float64)
    assert stationary_confidence(CrossEntropy(), q, 4) == pytest.approx(q, abs=1e-5)
    alpha = 0.2
    assert stationary_confidence(LabelSmoothing(alpha), q, 4) == pytest.approx((1 - alpha) * q + alpha / 4, abs=1e-5)


def test_stationary_confidence_equals_the_minimiser_when_gamma_is_fixed():
    q = torch.tensor([0.3, 0.6, 0.9, 0.97], dtype=torch.float64)
    grid_step = (1 - 1 / 7) / 2001
    assert stationary_confidence(FocalLoss(3.0), q, 7) == pytest.approx(
        optimal_confidence(FocalLoss(3.0), q, 7, grid_size=2000), abs=2 * grid_step
    )


def test_flsd53_training_rest_point_matches_the_first_order_condition_with_gamma_held_per_side():
    q = [0.3, 0.4, 0.51, 0.7, 0.9, 0.97]
    expected = [_flsd53_rest_point_by_hand(v, 7) for v in q]
    assert stationary_confidence(FLSD53(), q, 7).tolist() == pytest.approx(expected, abs=1e-4)


def test_flsd53_training_does_not_reach_the_minimiser_of_the_loss_value():
    # the expected loss value is lowest just below the γ switch (p = 0.2, where γ = 5 lowers the value);
    # training, which never differentiates the switch, passes it and rests on the γ = 3 branch
    q = torch.tensor([0.4, 0.5], dtype=torch.float64)
    undetached = optimal_confidence(FLSD53(), q, 7, grid_size=2000)
    assert undetached == pytest.approx(torch.full((2,), 0.2, dtype=torch.float64), abs=1e-3)
    assert bool((stationary_confidence(FLSD53(), q, 7) > 0.3).all())


def test_flsd53_has_two_rest_points_in_the_bistable_window_and_the_start_picks_one():
    q = [0.23]
    from_uniform = float(stationary_confidence(FLSD53(), q, 7))
    from_above = float(stationary_confidence(FLSD53(), q, 7, start=0.3))
    assert from_uniform < 0.2 < from_above


def test_stationary_confidence_refuses_a_loss_whose_samples_interact():
    class SquaredBatchMean(torch.nn.Module):
        def forward(self, logits, target):
            return CrossEntropy()(logits, target) ** 2

    with pytest.raises(ValueError, match="per-sample"):
        stationary_confidence(SquaredBatchMean(), [0.5], 3, grid_size=50)


@pytest.mark.parametrize("kwargs", [dict(start=0.1), dict(start=1.0), dict(grid_size=5)])
def test_stationary_confidence_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        stationary_confidence(CrossEntropy(), [0.5], 4, **kwargs)
