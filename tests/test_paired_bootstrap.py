"""Tests of metrics.paired_bootstrap and of the weighted (all-resamples-at-once) metrics behind it: every weighted
form equals the metric itself on the resampled rows; the resamples are shared by both models and every seed;
degenerate resamples are counted, not fatal."""

import functools
import math
import warnings

import numpy as np
import pytest
import torch
from random_forecasts import random_multiclass, random_multilabel

from helpers import metrics as M
from helpers.metrics import selective


def resample_indices(n_rows, n, seed):
    """The index sets paired_bootstrap documents: one torch.randint call seeded by ``seed``."""
    return torch.randint(n_rows, (n, n_rows), generator=torch.Generator().manual_seed(seed))


MULTICLASS_METRICS = [
    M.accuracy,
    M.nll,
    M.brier,
    M.ece,
    M.mce,
    M.average_calibration_error,
    M.classwise_ece,
    M.adaptive_ece,
    M.debiased_ece,
    M.auroc_ovr,
    M.macro_f1,
    M.jaccard,
    M.cohen_kappa,
    functools.partial(M.class_recall, class_index=2),
    functools.partial(M.ece, n_bins=7),
    functools.partial(M.adaptive_ece, n_bins=40),
    functools.partial(M.debiased_ece, n_bins=40),
]
MULTILABEL_METRICS = [
    M.multilabel_ece,
    M.multilabel_mce,
    M.multilabel_average_calibration_error,
    functools.partial(M.multilabel_ece, per_label=True, n_bins=10),
    functools.partial(M.multilabel_mce, per_label=True),
    functools.partial(M.multilabel_average_calibration_error, per_label=True),
    M.multilabel_brier,
    M.multilabel_nll,
    M.hamming_loss,
    functools.partial(M.hamming_loss, threshold=0.3),
    M.macro_auroc,
    functools.partial(M.fixed_label_macro_auroc, columns=(0, 2, 5)),
    M.map_per_class,
    M.map_per_example,
]


def name(metric):
    if isinstance(metric, functools.partial):
        return f"{metric.func.__name__}{metric.keywords}"
    return metric.__name__


def test_every_weighted_metric_is_tested():
    tested = {getattr(m, "func", m) for m in MULTICLASS_METRICS + MULTILABEL_METRICS} | {M.true_rms, selective.r_auc}
    assert set(M.WEIGHTED_METRICS) == tested


@pytest.mark.parametrize("metric", MULTICLASS_METRICS, ids=name)
def test_weighted_multiclass_metric_equals_the_metric_on_each_resample(metric):
    probs_a = [random_multiclass(240, 5, seed=s)[0] for s in range(2)]
    probs_b = [random_multiclass(240, 5, seed=10 + s)[0] for s in range(3)]
    labels = random_multiclass(240, 5, seed=0)[1]
    fast = M.paired_bootstrap(metric, probs_a, probs_b, labels, n=40, seed=1)
    slow = M.paired_bootstrap(metric, probs_a, probs_b, labels, n=40, seed=1, vectorised=False)
    torch.testing.assert_close(fast.samples, slow.samples, rtol=1e-12, atol=1e-12)
    assert (fast.estimate, fast.low, fast.high) == pytest.approx((slow.estimate, slow.low, slow.high), abs=1e-12)


@pytest.mark.parametrize("metric", MULTILABEL_METRICS, ids=name)
def test_weighted_multilabel_metric_equals_the_metric_on_each_resample(metric):
    probs_a = [random_multilabel(150, 6, seed=s)[0] for s in range(2)]
    probs_b = [random_multilabel(150, 6, seed=10 + s)[0] for s in range(2)]
    labels = random_multilabel(150, 6, seed=0)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # labels without a positive on some resamples
        fast = M.paired_bootstrap(metric, probs_a, probs_b, labels, n=40, seed=2)
        slow = M.paired_bootstrap(metric, probs_a, probs_b, labels, n=40, seed=2, vectorised=False)
    torch.testing.assert_close(fast.samples, slow.samples, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_weighted_true_rms_resamples_the_posteriors_with_the_predictions():
    probs_a = [random_multilabel(150, 6, seed=s)[0] for s in range(2)]
    probs_b = [random_multilabel(150, 6, seed=10 + s)[0] for s in range(2)]
    posteriors = random_multilabel(150, 6, seed=99)[0]
    fast = M.paired_bootstrap(M.true_rms, probs_a, probs_b, posteriors, n=40)
    slow = M.paired_bootstrap(M.true_rms, probs_a, probs_b, posteriors, n=40, vectorised=False)
    torch.testing.assert_close(fast.samples, slow.samples, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("metric", [M.auroc_ovr, M.macro_f1, M.cohen_kappa, M.debiased_ece], ids=name)
def test_weighted_forms_handle_tied_scores(metric):
    generator = torch.Generator().manual_seed(3)
    probs = [torch.softmax(torch.randint(-2, 3, (200, 4), generator=generator).double(), 1) for _ in range(2)]
    labels = torch.randint(4, (200,), generator=generator)
    fast = M.paired_bootstrap(metric, probs[:1], probs[1:], labels, n=30)
    slow = M.paired_bootstrap(metric, probs[:1], probs[1:], labels, n=30, vectorised=False)
    torch.testing.assert_close(fast.samples, slow.samples, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("metric", [M.macro_auroc, M.map_per_class, M.map_per_example], ids=name)
def test_weighted_ranking_metrics_handle_tied_scores(metric):
    generator = torch.Generator().manual_seed(4)
    probs = [torch.randint(0, 5, (200, 4), generator=generator).double() / 4 for _ in range(2)]
    labels = (torch.rand(200, 4, generator=generator) < 0.3).double()
    fast = M.paired_bootstrap(metric, probs[:1], probs[1:], labels, n=30)
    slow = M.paired_bootstrap(metric, probs[:1], probs[1:], labels, n=30, vectorised=False)
    torch.testing.assert_close(fast.samples, slow.samples, rtol=1e-12, atol=1e-12)


def test_one_resample_is_shared_by_both_models_and_every_seed():
    probs_a = [random_multiclass(100, 3, seed=s)[0] for s in range(3)]
    probs_b = [random_multiclass(100, 3, seed=10 + s)[0] for s in range(3)]
    labels = random_multiclass(100, 3, seed=0)[1]
    result = M.paired_bootstrap(M.nll, probs_a, probs_b, labels, n=25, seed=7)
    indices = resample_indices(100, 25, seed=7)
    for b in (0, 11, 24):
        i = indices[b]
        expected = np.mean([M.nll(p[i], labels[i]) for p in probs_a]) - np.mean(
            [M.nll(p[i], labels[i]) for p in probs_b]
        )
        assert float(result.samples[b]) == pytest.approx(expected, rel=1e-12)
    assert result.estimate == pytest.approx(
        np.mean([M.nll(p, labels) for p in probs_a]) - np.mean([M.nll(p, labels) for p in probs_b]), rel=1e-12
    )
    low, high = torch.quantile(result.samples, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    assert (result.low, result.high) == pytest.approx((low, high), rel=1e-12)
    assert result.n_degenerate == 0 and result.n_seeds_a == 3 and result.level == 0.95


def test_identical_models_give_a_zero_interval_and_pairing_narrows_it():
    probs, labels = random_multiclass(400, 4, seed=5)
    same = M.paired_bootstrap(M.ece, [probs], [probs.clone()], labels, n=50)
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0) and not same.excludes_zero
    # a slightly sharpened copy: image difficulty cancels in the paired difference, not in independent resamples
    sharper = torch.softmax(1.1 * probs.log(), 1)
    paired = M.paired_bootstrap(M.nll, sharper, probs, labels, n=200)
    unpaired = (
        M.bootstrap(M.nll, sharper, labels, n=200, seed=1).samples
        - M.bootstrap(M.nll, probs, labels, n=200, seed=2).samples
    )
    assert paired.high - paired.low < 0.2 * float(unpaired.quantile(0.975) - unpaired.quantile(0.025))


def test_excludes_zero_flags_a_real_difference():
    probs, labels = random_multiclass(1000, 4, seed=6, scale=1.0)
    onehot = torch.nn.functional.one_hot(labels, 4).double()
    better = 0.5 * probs + 0.5 * onehot  # closer to the labels: lower Brier score on every image
    result = M.paired_bootstrap(M.brier, better, probs, labels, n=100)
    assert result.high < 0 and result.excludes_zero


@pytest.mark.parametrize("vectorised", [True, False])
def test_resamples_without_the_class_are_counted_as_degenerate(vectorised):
    probs, labels = random_multiclass(60, 3, seed=8)
    labels = torch.where(labels == 2, 0, labels)
    labels[17] = 2  # class 2 appears once: about e^-1 of the resamples miss it
    recall = functools.partial(M.class_recall, class_index=2)
    result = M.paired_bootstrap(
        recall, [probs, probs.flip(0)], probs.roll(1, 0), labels, n=200, seed=9, vectorised=vectorised
    )
    missing = int((resample_indices(60, 200, seed=9) == 17).sum(1).eq(0).sum())
    assert 40 < missing < 110
    assert result.n_degenerate == missing
    assert torch.isnan(result.samples).sum() == missing


def test_a_metric_raising_value_error_on_a_resample_is_degenerate_not_fatal():
    probs, labels = random_multiclass(50, 3, seed=10)
    labels[0] = 0

    def picky_metric(p, y):  # "undefined" whenever the resample's first image has label 2
        if int(y[0]) == 2:
            raise ValueError("undefined here")
        return M.accuracy(p, y)

    result = M.paired_bootstrap(picky_metric, probs, probs.roll(1, 1), labels, n=100)
    expected = int((labels[resample_indices(50, 100, seed=0)[:, 0]] == 2).sum())
    assert 0 < result.n_degenerate == expected < 100 and math.isfinite(result.low)


def test_metric_without_a_weighted_form_uses_the_loop():
    probs_a = [random_multiclass(300, 3, seed=s)[0] for s in range(2)]
    probs_b = [random_multiclass(300, 3, seed=5)[0]]
    labels = random_multiclass(300, 3, seed=0)[1]
    assert M.weighted_evaluator(M.smooth_ece, probs_a[0], labels) is None
    result = M.paired_bootstrap(M.smooth_ece, probs_a, probs_b, labels, n=5)
    i = resample_indices(300, 5, seed=0)[3]
    expected = np.mean([M.smooth_ece(p[i], labels[i]) for p in probs_a]) - M.smooth_ece(probs_b[0][i], labels[i])
    assert float(result.samples[3]) == pytest.approx(expected, rel=1e-12)
    assert result.n_seeds_a == 2 and result.n_seeds_b == 1


def test_paired_bootstrap_rejects_bad_input():
    probs, labels = random_multiclass(30, 3, seed=11)
    with pytest.raises(ValueError, match="same test images"):
        M.paired_bootstrap(M.accuracy, [probs], [probs[:20]], labels)
    with pytest.raises(TypeError, match="one per training seed"):
        M.paired_bootstrap(M.accuracy, [], [probs], labels)
    with pytest.raises(ValueError, match="n \\(number of bootstrap resamples\\)"):
        M.paired_bootstrap(M.accuracy, probs, probs, labels, n=1)
    with pytest.raises(ValueError, match="level"):
        M.paired_bootstrap(M.accuracy, probs, probs, labels, level=95)
    absent = functools.partial(M.class_recall, class_index=2)
    with pytest.raises(ValueError, match="undefined \\(NaN\\) on the full test set"):
        M.paired_bootstrap(absent, probs, probs, torch.zeros(30, dtype=torch.long))
    with pytest.raises(ValueError, match="did you pass logits"):
        M.paired_bootstrap(M.ece, probs.log(), probs, labels)


def test_the_callers_thread_setting_is_restored():
    probs, labels = random_multiclass(50, 3, seed=12)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        M.paired_bootstrap(M.ece, probs, probs.roll(1, 1), labels, n=5)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("tied", [False, True], ids=["distinct", "tied"])
def test_weighted_r_auc_equals_r_auc_on_each_resample(tied):
    """R-AUC (LS+ Fig. 1) from multiplicity weights: the copies of a drawn row, and rows with equal confidence, form
    one tie group, exactly as selective.retention_curve averages over orders within ties."""
    generator = torch.Generator().manual_seed(5)
    if tied:
        probs = [torch.softmax(torch.randint(-2, 3, (200, 4), generator=generator).double(), 1) for _ in range(3)]
    else:
        probs = [random_multiclass(200, 4, seed=20 + s)[0] for s in range(3)]
    labels = torch.randint(4, (200,), generator=generator)
    assert M.weighted_evaluator(selective.r_auc, probs[0], labels) is not None
    fast = M.paired_bootstrap(selective.r_auc, probs[:2], probs[2:], labels, n=30)
    slow = M.paired_bootstrap(selective.r_auc, probs[:2], probs[2:], labels, n=30, vectorised=False)
    assert not torch.all(fast.samples == 0)
    torch.testing.assert_close(fast.samples, slow.samples, rtol=1e-12, atol=1e-12)
