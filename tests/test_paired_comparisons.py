"""stats.paired_comparisons: every model evaluated once on the shared resamples, each result equal to
metrics.paired_bootstrap of the same pair (same resamples, estimate, interval and samples)."""

import functools

import pytest
import torch

from helpers import metrics
from helpers.metrics import stats


def random_models(n, k, n_models, n_seeds, seed):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(k, (n,), generator=generator)
    models = {
        f"m{i}": [
            torch.softmax((1.0 + i) * torch.randn(n, k, generator=generator, dtype=torch.float64), 1)
            for _ in range(n_seeds)
        ]
        for i in range(n_models)
    }
    return models, labels


@pytest.mark.parametrize(
    "metric",
    [
        metrics.ece,
        metrics.nll,
        metrics.accuracy,
        metrics.classwise_ece,
        functools.partial(metrics.class_recall, class_index=1),
    ],
    ids=["ece", "nll", "accuracy", "classwise_ece", "class_recall"],
)
def test_equals_paired_bootstrap_of_each_pair(metric):
    models, labels = random_models(150, 3, 3, 2, seed=0)
    pairs = [("m1", "m0"), ("m2", "m0"), ("m2", "m1")]
    results = stats.paired_comparisons(models, labels, {"x": metric}, pairs, n=60, seed=4)
    for model, reference in pairs:
        expected = metrics.paired_bootstrap(metric, models[model], models[reference], labels, n=60, seed=4)
        got = results[(model, reference)]["x"]
        assert got.estimate == pytest.approx(expected.estimate, abs=1e-12)
        torch.testing.assert_close(got.samples, expected.samples, equal_nan=True)
        assert (got.low, got.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
        assert got.n_degenerate == expected.n_degenerate


def test_metric_without_weighted_form_uses_the_same_resamples():
    models, labels = random_models(80, 3, 2, 2, seed=1)

    def top_confidence(probs, labels):  # no weighted form: evaluated resample by resample
        return float(torch.as_tensor(probs).max(1).values.mean())

    got = stats.paired_comparisons(models, labels, {"c": top_confidence}, [("m1", "m0")], n=20, seed=2)
    expected = metrics.paired_bootstrap(top_confidence, models["m1"], models["m0"], labels, n=20, seed=2)
    torch.testing.assert_close(got[("m1", "m0")]["c"].samples, expected.samples)


def test_resampled_difference_is_zero_for_a_model_against_itself():
    models, labels = random_models(100, 4, 1, 3, seed=2)
    result = stats.paired_comparisons(
        {"a": models["m0"], "b": models["m0"]}, labels, {"ece": metrics.ece}, [("a", "b")], n=30
    )[("a", "b")]["ece"]
    assert result.estimate == 0 and result.low == 0 and result.high == 0


def test_unknown_model_in_pairs_is_refused():
    models, labels = random_models(50, 3, 2, 1, seed=3)
    with pytest.raises(ValueError, match="not in probs_by_model"):
        stats.paired_comparisons(models, labels, {"ece": metrics.ece}, [("m1", "missing")], n=10)
