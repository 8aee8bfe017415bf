"""Tests of helpers.metrics.selective: retention curves and R-AUC against closed forms and a brute-force loop."""

import math

import pytest
import torch

from helpers.metrics import confidence_by_correctness, r_auc, retention_curve


def _probs_from(confidence: torch.Tensor, predicted: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Rows with top probability ``confidence`` at ``predicted`` and the rest spread evenly (confidence > 1/k)."""
    rest = ((1 - confidence) / (k - 1)).unsqueeze(1).repeat(1, k)
    return rest.scatter(1, predicted.unsqueeze(1), confidence.unsqueeze(1))


def _case(n: int, n_errors: int, errors_first: bool | None, seed: int = 0):
    """n samples, n_errors wrong; confidence ranks correct first (False), errors first (True)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(3, (n,), generator=generator)
    wrong = torch.zeros(n, dtype=torch.bool)
    wrong[torch.randperm(n, generator=generator)[:n_errors]] = True
    predicted = torch.where(wrong, (labels + 1) % 3, labels)
    rank = torch.rand(n, generator=generator) * 0.1
    confidence = 0.5 + rank + torch.where(wrong, 0.3, 0.0) * (1 if errors_first else -1) + 0.3 * (not errors_first)
    return _probs_from(confidence.double(), predicted), labels


def test_perfect_ranking_matches_closed_form():
    probs, labels = _case(200, 30, errors_first=False)
    e = 30 / 200
    assert r_auc(probs, labels) == pytest.approx(1 - e**2 / 2, abs=1e-12)


def test_worst_ranking_matches_closed_form():
    probs, labels = _case(200, 30, errors_first=True)
    e = 30 / 200
    assert r_auc(probs, labels) == pytest.approx(1 - e + e**2 / 2, abs=1e-12)


def test_constant_confidence_gives_the_random_ranking_curve():
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    predicted = torch.tensor([0, 1, 2, 1, 1, 0, 0, 1])  # 2 errors of 8
    probs = _probs_from(torch.full((8,), 0.6, dtype=torch.float64), predicted)
    fractions, accuracy = retention_curve(probs, labels)
    e = 2 / 8
    torch.testing.assert_close(accuracy, 1 - fractions * e)
    assert r_auc(probs, labels) == pytest.approx(1 - e / 2, abs=1e-12)


def test_endpoints_and_brute_force_loop_without_ties():
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(57, 5, generator=generator, dtype=torch.float64)
    probs = torch.softmax(logits, 1)
    labels = torch.randint(5, (57,), generator=generator)
    fractions, accuracy = retention_curve(probs, labels)
    assert accuracy[0] == 1.0
    assert accuracy[-1].item() == pytest.approx(float((probs.argmax(1) == labels).double().mean()))
    # brute force: refer the least confident samples one by one
    confidence, predicted = probs.max(1)
    expected = []
    for i in range(58):
        kept = torch.argsort(confidence, descending=True)[:i]
        expected.append(1 - float((predicted[kept] != labels[kept]).sum()) / 57)
    torch.testing.assert_close(accuracy, torch.tensor(expected, dtype=torch.float64))
    area = sum((expected[i] + expected[i + 1]) / 2 / 57 for i in range(57))
    assert r_auc(probs, labels) == pytest.approx(area, abs=1e-12)
    assert math.isclose(float(fractions[-1]), 1.0)


def test_curve_does_not_depend_on_test_set_order_with_ties():
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    predicted = torch.tensor([0, 2, 2, 1, 1, 2])
    confidence = torch.tensor([0.9, 0.9, 0.7, 0.7, 0.7, 0.5], dtype=torch.float64)
    probs = _probs_from(confidence, predicted)
    permutation = torch.tensor([5, 3, 1, 0, 4, 2])
    torch.testing.assert_close(
        retention_curve(probs, labels)[1], retention_curve(probs[permutation], labels[permutation])[1]
    )


def test_confidence_by_correctness_splits_the_confidences():
    labels = torch.tensor([0, 1, 2])
    probs = _probs_from(torch.tensor([0.9, 0.6, 0.8], dtype=torch.float64), torch.tensor([0, 2, 2]))
    correct, incorrect = confidence_by_correctness(probs, labels)
    torch.testing.assert_close(correct, torch.tensor([0.9, 0.8]))
    torch.testing.assert_close(incorrect, torch.tensor([0.6]))


@pytest.mark.parametrize(
    "probs, labels",
    [
        (torch.rand(4), torch.tensor([0, 1, 0, 1])),
        (torch.rand(4, 3), torch.tensor([0, 1, 0])),
        (torch.rand(4, 3), torch.tensor([0, 1, 0, 3])),
        (torch.rand(4, 3), torch.tensor([0.0, 1.0, 0.0, 1.0])),
    ],
)
def test_bad_input_raises(probs, labels):
    with pytest.raises(ValueError):
        retention_curve(probs, labels)
