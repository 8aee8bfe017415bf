"""Issue 10: metric inputs at the edges (one column or row, non-contiguous layouts, bf16, degenerate bootstrap
resamples, explicit task) and a seeded fuzz test of the input checks against a plain reference."""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as sk

from helpers import metrics as M


# ------------------------------------------------------------------------------------------------------------
# defect 2: average precision with a single column or a single row
# ------------------------------------------------------------------------------------------------------------
def test_map_per_example_with_one_label_column_equals_sklearn():
    probs = torch.tensor([[0.9], [0.2], [0.7]])
    labels = torch.tensor([[1.0], [1.0], [0.0]])
    # one label per sample: each sample with a positive ranks its single label first, AP = 1
    assert M.map_per_example(probs, labels) == pytest.approx(1.0)
    expected = sk.label_ranking_average_precision_score(labels.numpy()[:2], probs.numpy()[:2])
    assert M.map_per_example(probs, labels) == pytest.approx(expected)


def test_map_per_class_with_one_sample_row_equals_sklearn():
    probs = torch.tensor([[0.9, 0.4]])
    labels = torch.tensor([[1.0, 1.0]])
    expected = np.mean([sk.average_precision_score(labels[:, t].numpy(), probs[:, t].numpy()) for t in range(2)])
    assert expected == pytest.approx(1.0)
    assert M.map_per_class(probs, labels) == pytest.approx(expected)


def test_average_precision_of_one_column_matrices_equals_sklearn():
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(40, 1, generator=generator, dtype=torch.float64)
    labels = (torch.rand(40, 1, generator=generator, dtype=torch.float64) < 0.4).double()
    expected = sk.average_precision_score(labels[:, 0].numpy(), probs[:, 0].numpy())
    assert M.map_per_class(probs, labels) == pytest.approx(expected, abs=1e-12)
    assert M.macro_auroc(probs, labels) == pytest.approx(sk.roc_auc_score(labels[:, 0], probs[:, 0]), abs=1e-12)


# ------------------------------------------------------------------------------------------------------------
# defect 8: non-contiguous inputs (transposed views, Fortran-ordered numpy arrays)
# ------------------------------------------------------------------------------------------------------------
def test_non_contiguous_multiclass_inputs_give_the_contiguous_result():
    generator = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(4, 100, generator=generator), 0).T  # (100, 4), column-major view
    labels = torch.randint(4, (100,), generator=generator)
    assert not probs.is_contiguous()
    dense = probs.contiguous()
    assert M.classwise_ece(probs, labels) == M.classwise_ece(dense, labels)
    assert M.ece(probs, labels) == M.ece(dense, labels)
    assert M.multiclass_report(probs, labels) == M.multiclass_report(dense, labels)
    fortran = torch.from_numpy(np.asfortranarray(dense.numpy()))
    assert not fortran.is_contiguous()
    assert M.classwise_ece(fortran, labels) == M.classwise_ece(dense, labels)


def test_non_contiguous_multilabel_inputs_give_the_contiguous_result():
    generator = torch.Generator().manual_seed(2)
    probs = torch.rand(5, 80, generator=generator).T
    labels = (torch.rand(5, 80, generator=generator) < 0.3).float().T
    dense_probs, dense_labels = probs.contiguous(), labels.contiguous()
    assert M.multilabel_ece(probs, labels, per_label=True) == M.multilabel_ece(dense_probs, dense_labels,
                                                                               per_label=True)
    report, dense_report = M.multilabel_report(probs, labels), M.multilabel_report(dense_probs, dense_labels)
    assert report == dense_report


# ------------------------------------------------------------------------------------------------------------
# defect 9: resamples on which a metric is undefined are left out and counted, not fatal
# ------------------------------------------------------------------------------------------------------------
def _one_class(labels):
    return labels.unique().numel() < 2


def _every_label_one_class(labels):
    positives = labels.sum(0)
    return bool(((positives == 0) | (positives == labels.shape[0])).all())


def _no_positive(labels):
    return bool(labels.sum() == 0)


@pytest.mark.parametrize("metric, probs, labels, undefined_on", [
    (M.auroc_ovr, torch.tensor([[0.8, 0.2], [0.3, 0.7]] * 3), torch.tensor([0, 1] * 3), _one_class),
    (M.macro_auroc, torch.tensor([[0.8, 0.3], [0.3, 0.6]] * 3), torch.tensor([[1.0, 0.0], [0.0, 1.0]] * 3),
     _every_label_one_class),
    (M.map_per_class, torch.tensor([[0.8, 0.3], [0.3, 0.6]] * 3), torch.tensor([[1.0, 0.0], [0.0, 0.0]] * 3),
     _no_positive),
])
def test_bootstrap_leaves_out_undefined_resamples_and_says_how_many(metric, probs, labels, undefined_on):
    n = 200
    # the documented index sets: one torch.randint call with a generator seeded by seed (0)
    indices = torch.randint(probs.shape[0], (n, probs.shape[0]), generator=torch.Generator().manual_seed(0))
    degenerate = torch.tensor([undefined_on(labels[i]) for i in indices])
    assert 0 < int(degenerate.sum()) < n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the per-resample "skipped label" warnings are summarised separately
        with pytest.warns(RuntimeWarning, match=rf"{int(degenerate.sum())} of {n} resamples"):
            result = M.bootstrap(metric, probs, labels, n=n)
    assert torch.equal(torch.isnan(result.samples), degenerate)
    assert result.n_valid == n - int(degenerate.sum())
    valid = result.samples[~degenerate]
    assert (result.low, result.high) == pytest.approx(np.quantile(valid.numpy(), [0.025, 0.975]).tolist())


# ------------------------------------------------------------------------------------------------------------
# defect 10: the row-sum tolerance follows the input dtype (bf16 resolution is 2^-7)
# ------------------------------------------------------------------------------------------------------------
def reference_top_label_ece(probs, labels, n_bins=15):
    """Plain float64 numpy ECE with (lo, hi] bins and 0 in the first bin (the module's documented binning)."""
    p = np.asarray(probs, dtype=np.float64)
    confidence, correct = p.max(1), (p.argmax(1) == np.asarray(labels)).astype(np.float64)
    edges = np.linspace(0, 1, n_bins + 1)
    index = np.clip(np.searchsorted(edges[1:-1], confidence, side="left"), 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        members = index == b
        total += abs(correct[members].sum() - confidence[members].sum())
    return total / len(p)


@pytest.mark.parametrize("k", [3, 7, 50])
def test_bfloat16_probabilities_are_accepted_and_scored_as_their_values(k):
    generator = torch.Generator().manual_seed(k)
    logits = 3 * torch.randn(2000, k, generator=generator)
    labels = torch.randint(k, (2000,), generator=generator)
    probs = torch.softmax(logits, 1).bfloat16()
    assert float((probs.float().sum(1) - 1).abs().max()) > M.ROW_SUM_TOLERANCE  # what the fixed 1e-3 rejected
    expected = reference_top_label_ece(probs.float().numpy(), labels.numpy())
    assert M.ece(probs, labels) == pytest.approx(expected, abs=1e-9)


def test_bfloat16_logits_and_clearly_unnormalised_rows_are_still_rejected():
    logits = torch.tensor([[0.5, 0.2, 0.1], [0.3, 0.3, 0.3]]).bfloat16()  # in [0, 1] but rows sum to 0.8, 0.9
    with pytest.raises(ValueError, match="must sum to 1"):
        M.ece(logits, torch.tensor([0, 1]))
    off_by_two_percent = torch.tensor([[0.52, 0.5]]).bfloat16()
    with pytest.raises(ValueError, match="must sum to 1"):
        M.ece(off_by_two_percent, torch.tensor([0]))
    with pytest.raises(ValueError, match="must sum to 1"):  # float32 keeps the tight check
        M.ece(torch.tensor([[0.502, 0.5]]), torch.tensor([0]))


# ------------------------------------------------------------------------------------------------------------
# defect 14 (metrics part): true_calibration_error takes the task, it does not guess it from the values
# ------------------------------------------------------------------------------------------------------------
def test_true_calibration_error_takes_the_task_explicitly():
    # T = 2 multi-label posteriors whose rows happen to sum to 1, and predictions whose rows do not
    truth = torch.tensor([[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]], dtype=torch.float64)
    predicted = torch.tensor([[0.2, 0.9], [0.6, 0.1], [0.5, 0.6]], dtype=torch.float64)
    result = M.true_calibration_error(predicted, truth, multilabel=True)
    assert result.top_label is None
    assert result.mean_abs == pytest.approx(float((predicted - truth).abs().mean()))
    with pytest.raises(ValueError, match="multilabel=True"):  # no silent switch to the other task
        M.true_calibration_error(predicted, truth)
    with pytest.raises(TypeError, match="multilabel must be True or False"):
        M.true_calibration_error(predicted, truth, multilabel=None)
    # the default is the multi-class task: predicted class argmax of [.7, .3], [.4, .6], [.5, .5] (first max)
    multiclass = M.true_calibration_error(truth.flip(1), truth)
    assert multiclass.top_label == pytest.approx((0.4 + 0.2 + 0.0) / 3)
