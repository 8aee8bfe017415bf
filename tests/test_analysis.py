"""Tests of helpers.analysis: logit distances and the expected-loss minimiser against closed forms."""

import pytest
import torch

from helpers.analysis import logit_distance_summary, logit_distances, optimal_confidence
from helpers.losses import CrossEntropy, FocalLoss, LabelSmoothing


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
