"""Tests of helpers.metrics (calibration, classification, multilabel, bootstrapping): agreement with torchmetrics and
scikit-learn, hand-computed examples, bin edges, bad input, bootstrap and true calibration error."""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as sk
from torchmetrics.functional.classification import binary_calibration_error, multiclass_calibration_error

from helpers import metrics as M
from helpers.metrics import core


def random_multiclass(n, k, seed, dtype=torch.float64, scale=2.0):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(scale * torch.randn(n, k, generator=generator, dtype=dtype), dim=1)
    labels = torch.randint(k, (n,), generator=generator)
    return probs, labels


def random_multilabel(n, t, seed, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.rand(n, t, generator=generator, dtype=dtype) ** 2
    # labels drawn from a distorted version of probs, so the forecasts are miscalibrated in both directions
    labels = (torch.rand(n, t, generator=generator, dtype=dtype) < probs.sqrt() * 0.8).to(dtype)
    return probs, labels


def distance_to_nearest_edge(values, n_bins):
    scaled = values.double() * n_bins
    return float(((scaled - scaled.round()).abs() / n_bins).min())


# ------------------------------------------------------------------------------------------------------------
# agreement with torchmetrics (data kept away from bin edges, where torchmetrics uses [lo, hi) bins)
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 7])
@pytest.mark.parametrize("n_bins", [5, 15, 20])
def test_ece_and_mce_agree_with_torchmetrics_multiclass(k, n_bins):
    probs, labels = random_multiclass(3000, k, seed=10 * k + n_bins)
    assert distance_to_nearest_edge(probs.max(1).values, n_bins) > 1e-9
    expected_l1 = multiclass_calibration_error(probs, labels, k, n_bins=n_bins, norm="l1")
    expected_max = multiclass_calibration_error(probs, labels, k, n_bins=n_bins, norm="max")
    assert M.ece(probs, labels, n_bins) == pytest.approx(float(expected_l1), abs=1e-6)
    assert M.mce(probs, labels, n_bins) == pytest.approx(float(expected_max), abs=1e-6)


@pytest.mark.parametrize("n_bins", [10, 15])
def test_multilabel_pooled_and_per_label_agree_with_torchmetrics_binary(n_bins):
    probs, labels = random_multilabel(2000, 5, seed=n_bins)
    assert distance_to_nearest_edge(probs, n_bins) > 1e-9
    pooled_l1 = binary_calibration_error(probs.reshape(-1), labels.reshape(-1).long(), n_bins=n_bins, norm="l1")
    pooled_max = binary_calibration_error(probs.reshape(-1), labels.reshape(-1).long(), n_bins=n_bins, norm="max")
    assert M.multilabel_ece(probs, labels, n_bins) == pytest.approx(float(pooled_l1), abs=1e-6)
    assert M.multilabel_mce(probs, labels, n_bins) == pytest.approx(float(pooled_max), abs=1e-6)
    per_label_l1 = [float(binary_calibration_error(probs[:, t], labels[:, t].long(), n_bins=n_bins)) for t in range(5)]
    per_label_max = [
        float(binary_calibration_error(probs[:, t], labels[:, t].long(), n_bins=n_bins, norm="max")) for t in range(5)
    ]
    assert M.multilabel_ece(probs, labels, n_bins, per_label=True) == pytest.approx(np.mean(per_label_l1), abs=1e-6)
    assert M.multilabel_mce(probs, labels, n_bins, per_label=True) == pytest.approx(np.mean(per_label_max), abs=1e-6)


def test_classwise_ece_agrees_with_torchmetrics_binary_per_class():
    probs, labels = random_multiclass(3000, 7, seed=3)
    assert distance_to_nearest_edge(probs, 15) > 1e-9
    reference = np.mean(
        [float(binary_calibration_error(probs[:, c], (labels == c).long(), n_bins=15)) for c in range(7)]
    )
    assert M.classwise_ece(probs, labels) == pytest.approx(reference, abs=1e-6)


def test_float32_input_gives_the_float64_result():
    probs, labels = random_multiclass(2000, 5, seed=4, dtype=torch.float32)
    assert M.ece(probs, labels) == pytest.approx(M.ece(probs.double(), labels), abs=1e-12)
    assert M.classwise_ece(probs, labels) == pytest.approx(M.classwise_ece(probs.double(), labels), abs=1e-12)


def test_numpy_input_gives_the_torch_result():
    probs, labels = random_multiclass(500, 4, seed=5)
    assert M.ece(probs.numpy(), labels.numpy()) == M.ece(probs, labels)
    assert M.brier(probs.numpy(), labels.numpy()) == M.brier(probs, labels)
    probs_ml, labels_ml = random_multilabel(300, 3, seed=5)
    assert M.multilabel_ece(probs_ml.numpy(), labels_ml.numpy()) == M.multilabel_ece(probs_ml, labels_ml)


# ------------------------------------------------------------------------------------------------------------
# agreement with scikit-learn
# ------------------------------------------------------------------------------------------------------------
def test_classification_metrics_agree_with_sklearn():
    probs, labels = random_multiclass(1000, 5, seed=6)
    y, prediction, p = labels.numpy(), probs.argmax(1).numpy(), probs.numpy()
    assert M.accuracy(probs, labels) == pytest.approx(sk.accuracy_score(y, prediction), abs=1e-12)
    assert M.macro_f1(probs, labels) == pytest.approx(sk.f1_score(y, prediction, average="macro"), abs=1e-12)
    assert M.cohen_kappa(probs, labels) == pytest.approx(sk.cohen_kappa_score(y, prediction), abs=1e-12)
    assert M.jaccard(probs, labels) == pytest.approx(sk.jaccard_score(y, prediction, average="macro"), abs=1e-12)
    assert M.auroc_ovr(probs, labels) == pytest.approx(
        sk.roc_auc_score(y, p, multi_class="ovr", average="macro"), abs=1e-12
    )
    assert M.nll(probs, labels) == pytest.approx(sk.log_loss(y, p, labels=range(5)), abs=1e-12)


@pytest.mark.parametrize("with_ties", [False, True])
def test_multilabel_ranking_metrics_agree_with_sklearn(with_ties):
    probs, labels = random_multilabel(400, 6, seed=7)
    if with_ties:
        probs = (probs * 8).round() / 8  # many tied scores: AP and AUROC must treat a tie group as one threshold
    y, p = labels.numpy(), probs.numpy()
    assert M.macro_auroc(probs, labels) == pytest.approx(sk.roc_auc_score(y, p, average="macro"), abs=1e-12)
    assert M.map_per_class(probs, labels) == pytest.approx(sk.average_precision_score(y, p, average="macro"), abs=1e-12)
    has_positive = y.sum(1) > 0
    assert not has_positive.all()  # the exclusion of samples without a positive label is exercised
    expected_per_example = np.mean([sk.average_precision_score(y[i], p[i]) for i in np.flatnonzero(has_positive)])
    assert M.map_per_example(probs, labels) == pytest.approx(expected_per_example, abs=1e-12)
    assert M.hamming_loss(probs, labels) == pytest.approx(sk.hamming_loss(y, (p >= 0.5).astype(float)), abs=1e-12)


def test_binary_problem_k2():
    probs, labels = random_multiclass(800, 2, seed=8)
    assert M.auroc_ovr(probs, labels) == pytest.approx(sk.roc_auc_score(labels.numpy(), probs[:, 1].numpy()))
    assert M.accuracy(probs, labels) == pytest.approx(float((probs.argmax(1) == labels).double().mean()))
    # the multi-class Brier score of K = 2 is twice the binary Brier score of p_1
    binary_brier = sk.brier_score_loss(labels.numpy(), probs[:, 1].numpy())
    assert M.brier(probs, labels) == pytest.approx(2 * binary_brier, abs=1e-12)


def test_class_absent_from_labels():
    probs, labels = random_multiclass(1000, 4, seed=9)
    labels[labels == 3] = 0  # class 3 never occurs
    assert M.ece(probs, labels) == pytest.approx(
        float(multiclass_calibration_error(probs, labels, 4, n_bins=15)), abs=1e-6
    )
    # class 3's one-vs-rest ECE is the mean of p_3 (all its outcomes are 0), whatever the bins
    per_class = [float(binary_calibration_error(probs[:, c], (labels == c).long(), n_bins=15)) for c in range(4)]
    assert per_class[3] == pytest.approx(float(probs[:, 3].mean()), abs=1e-9)
    assert M.classwise_ece(probs, labels) == pytest.approx(np.mean(per_class), abs=1e-6)
    with pytest.warns(RuntimeWarning, match="class"):
        value = M.auroc_ovr(probs, labels)
    expected = np.mean([sk.roc_auc_score(labels.numpy() == c, probs[:, c].numpy()) for c in range(3)])
    assert value == pytest.approx(expected, abs=1e-12)


def test_macro_auroc_skips_single_class_labels_with_a_warning():
    probs, labels = random_multilabel(300, 4, seed=11)
    labels[:, 2] = 0
    with pytest.warns(RuntimeWarning, match=r"columns \[2\]"):
        value = M.macro_auroc(probs, labels)
    keep = [0, 1, 3]
    assert value == pytest.approx(sk.roc_auc_score(labels[:, keep].numpy(), probs[:, keep].numpy()), abs=1e-12)
    labels[:] = 0
    with pytest.raises(ValueError, match="macro_auroc"):
        M.macro_auroc(probs, labels)


# ------------------------------------------------------------------------------------------------------------
# hand-computed examples
# ------------------------------------------------------------------------------------------------------------
# Five samples, K = 3. Top-label (confidence, correct): (0.6, 1), (0.7, 0), (0.8, 1), (0.9, 1), (0.4, 0).
HAND_PROBS = torch.tensor(
    [
        [0.60, 0.30, 0.10],  # y = 0: correct, confidence 0.6
        [0.20, 0.70, 0.10],  # y = 0: wrong,   confidence 0.7
        [0.10, 0.10, 0.80],  # y = 2: correct, confidence 0.8
        [0.05, 0.90, 0.05],  # y = 1: correct, confidence 0.9
        [0.40, 0.30, 0.30],  # y = 2: wrong,   confidence 0.4
    ],
    dtype=torch.float64,
)
HAND_LABELS = torch.tensor([0, 0, 2, 1, 2])


def test_hand_computed_top_label_metrics():
    # 4 bins (0, .25], (.25, .5], (.5, .75], (.75, 1]:
    #   bin 1: {0.4 wrong}            conf 0.4,  acc 0,   gap 0.40, n = 1
    #   bin 2: {0.6 right, 0.7 wrong} conf 0.65, acc 0.5, gap 0.15, n = 2
    #   bin 3: {0.8 right, 0.9 right} conf 0.85, acc 1,   gap 0.15, n = 2
    assert M.ece(HAND_PROBS, HAND_LABELS, n_bins=4) == pytest.approx((1 * 0.40 + 2 * 0.15 + 2 * 0.15) / 5)  # 0.2
    assert M.mce(HAND_PROBS, HAND_LABELS, n_bins=4) == pytest.approx(0.40)
    assert M.average_calibration_error(HAND_PROBS, HAND_LABELS, n_bins=4) == pytest.approx((0.40 + 0.15 + 0.15) / 3)
    bins = M.reliability_bins(HAND_PROBS, HAND_LABELS, n_bins=4)
    assert bins.counts.tolist() == [0, 1, 2, 2]
    assert torch.allclose(bins.confidence[1:], torch.tensor([0.4, 0.65, 0.85], dtype=torch.float64))
    assert torch.allclose(bins.accuracy[1:], torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64))
    assert math.isnan(bins.confidence[0]) and math.isnan(bins.accuracy[0])


def test_hand_computed_adaptive_ece():
    # sorted confidences 0.4 (wrong), 0.6 (right), 0.7 (wrong), 0.8 (right), 0.9 (right); 3 equal-mass bins,
    # rank r -> bin floor(3 r / 5): ranks 0,1 -> 0; 2,3 -> 1; 4 -> 2.
    #   bin 0: outcomes 0+1 = 1, confidences 0.4+0.6 = 1.0 -> |1 - 1.0| = 0
    #   bin 1: outcomes 0+1 = 1, confidences 0.7+0.8 = 1.5 -> 0.5
    #   bin 2: outcomes 1,        confidences 0.9       -> 0.1
    assert M.adaptive_ece(HAND_PROBS, HAND_LABELS, n_bins=3) == pytest.approx((0 + 0.5 + 0.1) / 5)  # 0.12


def test_hand_computed_classwise_ece():
    # 4 bins; per class sum over bins of |sum of outcomes - sum of p_k|, divided by N = 5:
    # class 0: p = .6 .2 .1 .05 .4, y = 1 1 0 0 0; bin 0 {.2,.1,.05}: |1 - .35| = .65; bin 1 {.4}: .4;
    #          bin 2 {.6}: |1 - .6| = .4                                     -> 1.45 / 5 = .29
    # class 1: p = .3 .7 .1 .9 .3, y = 0 0 0 1 0; bin 0 {.1}: .1; bin 1 {.3,.3}: .6; bin 2 {.7}: .7;
    #          bin 3 {.9}: |1 - .9| = .1                                    -> 1.5 / 5 = .30
    # class 2: p = .1 .1 .8 .05 .3, y = 0 0 1 0 1; bin 0 {.1,.1,.05}: .25; bin 1 {.3}: |1 - .3| = .7;
    #          bin 3 {.8}: |1 - .8| = .2                                    -> 1.15 / 5 = .23
    assert M.classwise_ece(HAND_PROBS, HAND_LABELS, n_bins=4) == pytest.approx((0.29 + 0.30 + 0.23) / 3)


def test_hand_computed_brier_and_nll():
    # squared error per row, sum over k of (p_k - 1[y = k])²:
    #   (.6-1)² + .3² + .1² = .26;  (.2-1)² + .7² + .1² = 1.14;  .1² + .1² + (.8-1)² = .06;
    #   .05² + (.9-1)² + .05² = .015;  .4² + .3² + (.3-1)² = .74;  mean = 2.215 / 5 = .443
    assert M.brier(HAND_PROBS, HAND_LABELS) == pytest.approx(0.443)
    expected_nll = -(math.log(0.6) + math.log(0.2) + math.log(0.8) + math.log(0.9) + math.log(0.3)) / 5
    assert M.nll(HAND_PROBS, HAND_LABELS) == pytest.approx(expected_nll)


ML_PROBS = torch.tensor([[0.9, 0.2], [0.6, 0.1], [0.3, 0.7]], dtype=torch.float64)
ML_LABELS = torch.tensor([[1, 0], [0, 0], [1, 1]], dtype=torch.float64)


def test_hand_computed_multilabel_pooled_and_per_label():
    # 2 bins (0, .5], (.5, 1]; forecasts are p of "present" (not max(p, 1 - p)).
    # pooled: bin 0 {.2:0, .1:0, .3:1}: |1 - .6| = .4 (gap .4/3); bin 1 {.9:1, .6:0, .7:1}: |2 - 2.2| = .2 (gap .2/3)
    assert M.multilabel_ece(ML_PROBS, ML_LABELS, n_bins=2) == pytest.approx((0.4 + 0.2) / 6)
    assert M.multilabel_mce(ML_PROBS, ML_LABELS, n_bins=2) == pytest.approx(0.4 / 3)
    assert M.multilabel_average_calibration_error(ML_PROBS, ML_LABELS, n_bins=2) == pytest.approx(
        (0.4 / 3 + 0.2 / 3) / 2
    )
    # label 0: bin 0 {.3:1}: gap .7; bin 1 {.9:1, .6:0}: |1 - 1.5| = .5, gap .25 -> ECE 1.2/3 = .4, ACE .475, MCE .7
    # label 1: bin 0 {.2:0, .1:0}: .3, gap .15; bin 1 {.7:1}: gap .3       -> ECE .6/3 = .2, ACE .225, MCE .3
    assert M.multilabel_ece(ML_PROBS, ML_LABELS, n_bins=2, per_label=True) == pytest.approx((0.4 + 0.2) / 2)
    assert M.multilabel_average_calibration_error(ML_PROBS, ML_LABELS, 2, per_label=True) == pytest.approx(
        (0.475 + 0.225) / 2
    )
    assert M.multilabel_mce(ML_PROBS, ML_LABELS, n_bins=2, per_label=True) == pytest.approx((0.7 + 0.3) / 2)
    # decisions p >= .5: [[1,0],[1,0],[0,1]] vs labels [[1,0],[0,0],[1,1]]: 2 of 6 differ
    assert M.hamming_loss(ML_PROBS, ML_LABELS) == pytest.approx(2 / 6)
    bins = M.reliability_bins(ML_PROBS, ML_LABELS, n_bins=2, multilabel=True)
    assert bins.kind == "pooled over labels" and bins.counts.tolist() == [3, 3]
    assert bins.ece == M.multilabel_ece(ML_PROBS, ML_LABELS, n_bins=2)


def test_hand_computed_map():
    # mAP@x, sample 0: ranking .9 (y=1), .2 (y=0) -> AP 1; sample 1 has no positive -> excluded;
    # sample 2: ranking .7 (y=1), .3 (y=1) -> AP 1. mAP@y, label 0: ranking .9 (1), .6 (0), .3 (1) ->
    # AP = (1/1 + 2/3) / 2 = 5/6; label 1: .7 (1) first -> AP 1.
    assert M.map_per_example(ML_PROBS, ML_LABELS) == pytest.approx(1.0)
    assert M.map_per_class(ML_PROBS, ML_LABELS) == pytest.approx((5 / 6 + 1) / 2)


# ------------------------------------------------------------------------------------------------------------
# bin edges
# ------------------------------------------------------------------------------------------------------------
def test_confidence_one_goes_to_last_bin_and_zero_to_first_bin():
    # multi-label forecasts can be exactly 0 and 1; 4 bins
    bins = M.reliability_bins(torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [1.0]]), n_bins=4, multilabel=True)
    assert bins.counts.tolist() == [1, 0, 0, 1]
    assert bins.ece == 0.0  # both forecasts are perfect
    # multi-class: a one-hot prediction has confidence 1 and must count in the last bin, not be dropped
    probs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.4]])
    labels = torch.tensor([0, 1, 1])
    bins = M.reliability_bins(probs, labels, n_bins=4)
    assert bins.counts.tolist() == [0, 0, 1, 2]
    assert M.ece(probs, labels, n_bins=4) == pytest.approx(0.6 / 3)  # only the wrong 0.6 forecast is off
    # class-wise: p_k = 0 lands in the first bin, with outcome 0: no error from it
    assert M.classwise_ece(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])) == 0.0


def test_interior_edge_goes_to_lower_bin():
    # 0.5 and 0.75 are exact in binary floating point and are edges of 4 bins: (.25, .5] and (.5, .75]
    probs = torch.tensor([[0.5, 0.5], [0.75, 0.25], [0.25, 0.75]], dtype=torch.float32)
    bins = M.reliability_bins(probs, torch.tensor([0, 0, 1]), n_bins=4)
    assert bins.counts.tolist() == [0, 1, 2, 0]
    forecasts = torch.tensor([[0.25], [0.5], [0.75]], dtype=torch.float64)
    bins = M.reliability_bins(forecasts, torch.zeros(3, 1), n_bins=4, multilabel=True)
    assert bins.counts.tolist() == [1, 1, 1, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fast_binning_equals_bucketize_on_and_around_every_edge(dtype):
    for n_bins in (1, 3, 7, 10, 15, 30, 100, 2000, 2001):
        edges = M.bin_edges(n_bins).to(dtype)
        values = torch.cat(
            [
                torch.rand(5000, dtype=dtype),
                edges,
                torch.nextafter(edges, torch.ones_like(edges)).clamp(0, 1),
                torch.nextafter(edges, torch.zeros_like(edges)).clamp(0, 1),
                torch.arange(1001, dtype=dtype) / 1000,
            ]
        )
        expected = torch.bucketize(values.double(), M.bin_edges(n_bins)[1:-1], right=False)
        assert torch.equal(core.equal_width_bin_index(values, n_bins), expected), n_bins
        assert torch.equal(core.equal_width_bin_index(values.reshape(-1, 1), n_bins)[:, 0], expected), n_bins


def test_equal_mass_bins_have_sizes_differing_by_at_most_one():
    confidence = torch.rand(103, generator=torch.Generator().manual_seed(0))
    index = core.equal_mass_bin_index(confidence, 10)
    sizes = torch.bincount(index, minlength=10)
    assert sizes.sum() == 103 and int(sizes.max() - sizes.min()) <= 1
    # contiguous: every confidence of bin b is <= every confidence of bin b + 1
    for b in range(9):
        assert confidence[index == b].max() <= confidence[index == b + 1].min()


def test_metrics_share_the_reliability_bins():
    probs, labels = random_multiclass(1500, 6, seed=12)
    bins = M.reliability_bins(probs, labels)
    counts, conf, acc = bins.counts, bins.confidence, bins.accuracy
    weights = counts / counts.sum()
    nonempty = counts > 0
    assert M.ece(probs, labels) == pytest.approx(float((weights * (acc - conf).abs()).nansum()), abs=1e-12)
    assert M.mce(probs, labels) == pytest.approx(float((acc - conf).abs()[nonempty].max()), abs=1e-12)
    assert M.average_calibration_error(probs, labels) == pytest.approx(
        float((acc - conf).abs()[nonempty].mean()), abs=1e-12
    )


def test_adaptive_and_equal_width_ece_differ_when_gaps_change_sign():
    # accuracy oscillates around the confidence (period ~0.16), and confidences crowd near 0.5: the gaps of
    # opposite sign cancel differently inside equal-width and equal-mass bins
    generator = torch.Generator().manual_seed(13)
    confidence = 0.5 + 0.5 * torch.rand(4000, generator=generator, dtype=torch.float64) ** 2
    correct_probability = (confidence + 0.2 * torch.sin(40 * confidence)).clamp(0, 1)
    correct = torch.rand(4000, generator=generator, dtype=torch.float64) < correct_probability
    probs = torch.stack([confidence, 1 - confidence], 1)
    labels = (~correct).long()
    assert abs(M.adaptive_ece(probs, labels) - M.ece(probs, labels)) > 5e-3
    # brute force of the documented equal-mass rule: the sample of confidence rank r goes to bin floor(15 r / N)
    outcome_sums, confidence_sums = [0.0] * 15, [0.0] * 15
    for rank, i in enumerate(confidence.argsort(stable=True).tolist()):
        outcome_sums[rank * 15 // 4000] += float(correct[i])
        confidence_sums[rank * 15 // 4000] += float(confidence[i])
    expected = sum(abs(o - c) for o, c in zip(outcome_sums, confidence_sums)) / 4000
    assert M.adaptive_ece(probs, labels) == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------------------
GOOD_PROBS = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
GOOD_LABELS = torch.tensor([0, 1])


@pytest.mark.parametrize(
    "probs, labels, message",
    [
        (torch.tensor([[0.7, float("nan"), 0.3], [0.1, 0.8, 0.1]]), GOOD_LABELS, "NaN"),
        (torch.tensor([[0.7, float("inf"), 0.3], [0.1, 0.8, 0.1]]), GOOD_LABELS, "infinite"),
        (torch.tensor([[2.0, -1.5, 0.5], [0.1, 0.8, 0.1]]), GOOD_LABELS, "logits"),
        (torch.tensor([[0.5, 0.2, 0.1], [0.1, 0.8, 0.1]]), GOOD_LABELS, "sum to 1.*softmax"),
        (GOOD_PROBS, torch.tensor([0, 3]), r"labels must lie in \[0, 2\]"),
        (GOOD_PROBS, torch.tensor([-1, 0]), r"labels must lie in \[0, 2\]"),
        (GOOD_PROBS, torch.tensor([0.0, 1.0]), "integer class indices"),
        (GOOD_PROBS, torch.tensor([0, 1, 1]), "must match"),
        (GOOD_PROBS, torch.tensor([[1, 0, 0], [0, 1, 0]]), r"shape \(N,\)"),
        (torch.zeros(0, 3), torch.zeros(0, dtype=torch.long), "empty"),
        (torch.tensor([0.7, 0.3]), torch.tensor([0]), r"shape \(N, C\)"),
        (torch.ones(2, 3, 1) / 3, GOOD_LABELS, r"shape \(N, C\)"),
        (torch.ones(2, 1), GOOD_LABELS, "K >= 2"),
    ],
)
def test_bad_multiclass_input_raises_a_clear_error(probs, labels, message):
    for metric in (M.ece, M.adaptive_ece, M.classwise_ece, M.brier, M.nll, M.accuracy, M.auroc_ovr):
        with pytest.raises(ValueError, match=message):
            metric(probs, labels)


@pytest.mark.parametrize(
    "probs, labels, message",
    [
        (ML_PROBS, torch.tensor([[1, 0], [0, 2], [1, 1]]), "0 or 1"),
        (ML_PROBS, torch.tensor([[1, 0], [0, float("nan")], [1, 1]]), "0 or 1"),
        (ML_PROBS, torch.tensor([1, 0, 1]), "same .* shape"),
        (ML_PROBS * 3 - 1, ML_LABELS, "logits"),
        (torch.zeros(3, 0), torch.zeros(3, 0), "empty"),
    ],
)
def test_bad_multilabel_input_raises_a_clear_error(probs, labels, message):
    for metric in (M.multilabel_ece, M.multilabel_mce, M.hamming_loss, M.macro_auroc, M.map_per_class):
        with pytest.raises(ValueError, match=message):
            metric(probs, labels)


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_bins"):
        M.ece(GOOD_PROBS, GOOD_LABELS, n_bins=0)
    with pytest.raises(TypeError, match="torch.Tensor or numpy"):
        M.ece("probs", GOOD_LABELS)
    with pytest.raises(ValueError, match="threshold"):
        M.hamming_loss(ML_PROBS, ML_LABELS, threshold=1.5)
    with pytest.raises(ValueError, match="resamples"):
        M.bootstrap(M.ece, GOOD_PROBS, GOOD_LABELS, n=1)


def test_nll_of_a_zero_probability_is_large_finite_and_warned():
    probs = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="probability 0"):
        value = M.nll(probs, torch.tensor([1, 0]))
    expected = (-math.log(torch.finfo(torch.float64).tiny) - math.log(0.5)) / 2
    assert value == pytest.approx(expected)


# ------------------------------------------------------------------------------------------------------------
# bootstrap
# ------------------------------------------------------------------------------------------------------------
def test_bootstrap_interval_contains_the_estimate_and_is_deterministic():
    probs, labels = random_multiclass(600, 4, seed=14, scale=3.0)
    for metric in (M.ece, M.brier, M.accuracy):
        estimate, low, high = M.bootstrap(metric, probs, labels, n=100, seed=1)
        assert estimate == metric(probs, labels)
        assert low < estimate < high
    result = M.bootstrap(M.ece, probs, labels, n=100, seed=1)
    again = M.bootstrap(M.ece, probs, labels, n=100, seed=1)
    assert (again.low, again.high) == (result.low, result.high) and torch.equal(again.samples, result.samples)
    other = M.bootstrap(M.ece, probs, labels, n=100, seed=2)
    assert (other.low, other.high) != (result.low, result.high)


def test_bootstrap_resamples_rows_with_the_documented_generator():
    probs, labels = random_multiclass(50, 3, seed=15)
    result = M.bootstrap(M.brier, probs, labels, n=5, seed=7)
    indices = torch.randint(50, (5, 50), generator=torch.Generator().manual_seed(7))
    expected = [M.brier(probs[i], labels[i]) for i in indices]
    assert result.samples.tolist() == pytest.approx(expected, abs=1e-15)
    assert result.low == pytest.approx(float(torch.quantile(torch.tensor(expected, dtype=torch.float64), 0.025)))


def test_bootstrap_interval_narrows_with_n():
    small = random_multiclass(250, 3, seed=16)
    large = random_multiclass(4000, 3, seed=16)
    result_small = M.bootstrap(M.brier, *small, n=200)
    result_large = M.bootstrap(M.brier, *large, n=200)
    # width scales like 1 / sqrt(N): expected ratio sqrt(16) = 4
    assert result_large.high - result_large.low < 0.5 * (result_small.high - result_small.low)


def test_bootstrap_of_multilabel_metric_with_keyword_and_warnings_summarised():
    probs, labels = random_multilabel(60, 3, seed=17)
    labels[:, 2] = 0
    labels[0, 2] = 1  # a rare label: most resamples lack it and macro_auroc warns
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        M.bootstrap(M.macro_auroc, probs, labels, n=50)
    bootstrap_warnings = [w for w in caught if "bootstrap" in str(w.message)]
    assert len(bootstrap_warnings) == 1
    result = M.bootstrap(M.multilabel_ece, probs, labels, n=20, per_label=True)
    assert result.estimate == M.multilabel_ece(probs, labels, per_label=True)


# ------------------------------------------------------------------------------------------------------------
# true calibration error and reports
# ------------------------------------------------------------------------------------------------------------
def test_true_calibration_error():
    posteriors, _ = random_multiclass(300, 5, seed=18)
    zero = M.true_calibration_error(posteriors, posteriors)
    assert zero == (0.0, 0.0, 0.0)
    # |.6-.3| = .3, |.3-.6| = .3, |.1-.1| = 0: mean .2, rms sqrt(.18/3); predicted class 0: top-label error .3
    result = M.true_calibration_error(torch.tensor([[0.6, 0.3, 0.1]]), torch.tensor([[0.3, 0.6, 0.1]]))
    assert result.mean_abs == pytest.approx(0.2) and result.rms == pytest.approx(math.sqrt(0.06))
    assert result.top_label == pytest.approx(0.3)
    multilabel_truth = torch.rand(200, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.8
    shifted = M.true_calibration_error(multilabel_truth + 0.1, multilabel_truth, multilabel=True)
    assert shifted.top_label is None
    assert shifted.mean_abs == pytest.approx(0.1) and shifted.rms == pytest.approx(0.1)
    with pytest.raises(ValueError, match="same shape"):
        M.true_calibration_error(posteriors, posteriors[:10])


def test_reports_collect_the_individual_metrics():
    probs, labels = random_multiclass(500, 4, seed=19)
    report = M.multiclass_report(probs, labels)
    assert report["ece"] == M.ece(probs, labels) and report["classwise_ece"] == M.classwise_ece(probs, labels)
    assert report["auroc_ovr"] == M.auroc_ovr(probs, labels) and report["nll"] == M.nll(probs, labels)
    assert all(isinstance(value, float) for value in report.values()) and len(report) == 12
    probs_ml, labels_ml = random_multilabel(500, 4, seed=19)
    report = M.multilabel_report(probs_ml, labels_ml)
    assert report["ece"] == M.multilabel_ece(probs_ml, labels_ml)
    assert report["mce_per_label"] == M.multilabel_mce(probs_ml, labels_ml, per_label=True)
    assert report["map_per_example"] == M.map_per_example(probs_ml, labels_ml)
    assert all(isinstance(value, float) for value in report.values())


def test_auroc_ovr_equals_sklearn_with_ties():
    generator = torch.Generator().manual_seed(7)
    probs = torch.softmax(torch.randn(300, 5, generator=generator, dtype=torch.float64), 1)
    probs = (probs * 20).round() / 20  # many tied scores
    probs = probs / probs.sum(1, keepdim=True)
    labels = torch.randint(0, 5, (300,), generator=generator)
    expected = sk.roc_auc_score(labels.numpy(), probs.numpy(), multi_class="ovr", average="macro")
    assert M.auroc_ovr(probs, labels) == pytest.approx(expected, abs=1e-12)


def test_multilabel_nll_equals_sklearn_log_loss_over_all_forecasts():
    probs, labels = random_multilabel(300, 6, seed=11)
    expected = sk.log_loss(labels.numpy().ravel(), probs.numpy().ravel(), labels=[0, 1])
    assert M.multilabel_nll(probs, labels) == pytest.approx(expected, abs=1e-10)
    saturated = probs.clone()
    row, column = torch.nonzero(labels == 1)[0].tolist()
    saturated[row, column] = 0.0  # a present finding given probability 0: finite, with a warning
    with pytest.warns(RuntimeWarning, match="multilabel_nll"):
        assert math.isfinite(M.multilabel_nll(saturated, labels))


def test_confidence_minus_accuracy_has_the_sign_of_the_miscalibration():
    probs = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55]], dtype=torch.float64)
    labels = torch.tensor([0, 1, 1, 1])  # confidences 0.9, 0.8, 0.7, 0.55 (mean 0.7375), accuracy 3/4
    assert M.confidence_minus_accuracy(probs, labels) == pytest.approx(0.7375 - 0.75, abs=1e-12)
    assert M.confidence_minus_accuracy(probs, torch.tensor([1, 0, 0, 0])) == pytest.approx(0.7375 - 0.25, abs=1e-12)
