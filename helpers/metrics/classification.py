"""Multi-class classification metrics: the proper scores (Brier, NLL), the arg-max decisions' accuracy, macro F1,
Cohen's κ, Jaccard index and class recall, the one-vs-rest AUROC, and the report of every multi-class metric.

Conventions as in :mod:`helpers.metrics.calibration`: ``probs`` (N, K) rows on the simplex, ``labels`` (N,) integer
class indices, torch tensors (any device) or numpy arrays; results are Python floats.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from sklearn import metrics as sk_metrics

from helpers.metrics.calibration import adaptive_ece, classwise_ece, reliability_bins
from helpers.metrics.core import (
    DEFAULT_N_BINS,
    auroc_rows,
    checked_class_index,
    mean_negative_log,
    mean_over_defined,
    multiclass_inputs,
    to_numpy,
)

__all__ = [
    "brier",
    "nll",
    "accuracy",
    "confidence_minus_accuracy",
    "macro_f1",
    "cohen_kappa",
    "jaccard",
    "auroc_ovr",
    "class_recall",
    "multiclass_report",
]


# ----------------------------------------------------------------------------------------------------------------
# proper scores
# ----------------------------------------------------------------------------------------------------------------
def brier(probs: Any, labels: Any) -> float:
    """Multi-class Brier score: (1/N) sum_i sum_k (p_ik - 1[y_i = k])^2 (Brier 1950), in [0, 2]."""
    p, y = multiclass_inputs(probs, labels)
    p = p.to(torch.float64)
    p_true = p.gather(1, y[:, None])[:, 0]
    return float(((p * p).sum(1) - 2.0 * p_true + 1.0).mean())


def nll(probs: Any, labels: Any) -> float:
    """Mean negative log-likelihood -(1/N) sum_i log p_{i, y_i} (log(0) handled as in ``mean_negative_log``)."""
    p, y = multiclass_inputs(probs, labels)
    return mean_negative_log(p.gather(1, y[:, None])[:, 0].to(torch.float64), "nll")


# ----------------------------------------------------------------------------------------------------------------
# decisions of the arg-max (scikit-learn) and the one-vs-rest AUROC
# ----------------------------------------------------------------------------------------------------------------
def _decisions(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p, y = multiclass_inputs(probs, labels)
    return to_numpy(y), to_numpy(p.argmax(dim=1))


def accuracy(probs: Any, labels: Any) -> float:
    """Top-1 accuracy (sklearn ``accuracy_score`` of argmax predictions)."""
    y, prediction = _decisions(probs, labels)
    return float(sk_metrics.accuracy_score(y, prediction))


def confidence_minus_accuracy(probs: Any, labels: Any) -> float:
    """Mean top-label confidence minus top-1 accuracy: positive for an over-confident model, negative for an
    under-confident one (the sign that the ECE, an average of absolute gaps, hides)."""
    p, y = multiclass_inputs(probs, labels)
    return float(p.max(dim=1).values.to(torch.float64).mean()) - accuracy(p, y)


def macro_f1(probs: Any, labels: Any) -> float:
    """Macro F1 (sklearn ``f1_score``) over the classes present in the labels or the predictions; a class that
    is in neither is not counted; a class with no true or predicted sample scores 0 (``zero_division=0``)."""
    y, prediction = _decisions(probs, labels)
    return float(sk_metrics.f1_score(y, prediction, average="macro", zero_division=0))


def cohen_kappa(probs: Any, labels: Any) -> float:
    """Cohen's kappa between argmax predictions and labels (sklearn ``cohen_kappa_score``, unweighted).
    NaN when kappa is undefined (labels and predictions all one and the same class)."""
    y, prediction = _decisions(probs, labels)
    if np.unique(np.concatenate([y, prediction])).size == 1:
        return math.nan
    return float(sk_metrics.cohen_kappa_score(y, prediction))


def jaccard(probs: Any, labels: Any) -> float:
    """Macro Jaccard index (sklearn ``jaccard_score``), same class set and zero_division as :func:`macro_f1`."""
    y, prediction = _decisions(probs, labels)
    return float(sk_metrics.jaccard_score(y, prediction, average="macro", zero_division=0))


def auroc_ovr(probs: Any, labels: Any) -> float:
    """One-vs-rest macro AUROC: the mean over classes k of the ROC AUC of ``p_k`` for ``labels == k``.

    Equals sklearn's ``roc_auc_score(..., multi_class="ovr", average="macro")`` (tested, ties included) when every
    class is present, but is computed by the same torch Mann-Whitney routine as :func:`helpers.metrics.macro_auroc`: the
    bootstrap calls it 1,000 times per model, and sklearn's per-class calls made one interval take about a
    minute. K = 2: the AUROC of p_1 (= that of p_0). A class absent from the labels has no AUROC: skipped with a
    RuntimeWarning.
    """
    p, y = multiclass_inputs(probs, labels)
    if p.shape[1] == 2:
        p, onehot = p[:, 1:], (y == 1)[:, None]
    else:
        onehot = torch.nn.functional.one_hot(y, p.shape[1])
    return mean_over_defined(auroc_rows(p.T, onehot.T.to(p.dtype)), "auroc_ovr", "class(es) absent from the labels")


def class_recall(probs: Any, labels: Any, class_index: int) -> float:
    """Recall of one class, P(argmax = k | y = k) (e.g. melanoma recall on DermaMNIST); NaN if no sample has label
    k (the bootstrap then counts the resample as degenerate)."""
    p, y = multiclass_inputs(probs, labels)
    class_index = checked_class_index(class_index, p.shape[1])
    is_class = y == class_index
    n_class = int(is_class.sum())
    if n_class == 0:
        return math.nan
    return float((p.argmax(1)[is_class] == class_index).sum()) / n_class


# ----------------------------------------------------------------------------------------------------------------
# every multi-class metric
# ----------------------------------------------------------------------------------------------------------------
def multiclass_report(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> dict[str, float]:
    """Every multi-class metric of this module and the binned calibration errors of :mod:`helpers.metrics.calibration`
    as a flat dict of floats (for result tables)."""
    bins = reliability_bins(probs, labels, n_bins)  # validates the inputs first: one clear message
    return {
        "accuracy": accuracy(probs, labels),
        "macro_f1": macro_f1(probs, labels),
        "cohen_kappa": cohen_kappa(probs, labels),
        "jaccard": jaccard(probs, labels),
        "auroc_ovr": auroc_ovr(probs, labels),
        "nll": nll(probs, labels),
        "brier": brier(probs, labels),
        "ece": bins.ece,
        "adaptive_ece": adaptive_ece(probs, labels, n_bins),
        "average_calibration_error": bins.average_calibration_error,
        "mce": bins.mce,
        "classwise_ece": classwise_ece(probs, labels, n_bins),
    }
