"""Multi-label metrics: every (sample, label) pair is one binary forecast of "present". Binned calibration errors
(pooled over labels or per label), the Brier score and binary NLL, the Hamming loss, mAP per class and per example,
the macro AUROC, the pooled smooth ECE, and the report of every multi-label metric.

Conventions as in :mod:`helpers.metrics.calibration`: ``probs`` (N, T) per-label P(y_t = 1), ``labels`` (N, T) in
{0, 1}, torch tensors (any device) or numpy arrays; results are Python floats.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from helpers.metrics.calibration import relplot_smooth_ece
from helpers.metrics.core import (
    DEFAULT_N_BINS,
    BinSums,
    auroc_rows,
    average_error,
    average_precision_rows,
    bin_sums,
    check_n_bins,
    expected_error,
    max_error,
    mean_negative_log,
    mean_over_defined,
    multilabel_inputs,
)

__all__ = [
    "multilabel_ece",
    "multilabel_average_calibration_error",
    "multilabel_mce",
    "multilabel_smooth_ece",
    "multilabel_brier",
    "multilabel_nll",
    "hamming_loss",
    "map_per_class",
    "map_per_example",
    "macro_auroc",
    "fixed_label_macro_auroc",
    "labels_with_positives",
    "multilabel_report",
]


# ----------------------------------------------------------------------------------------------------------------
# binned calibration errors, pooled over labels or per label
# ----------------------------------------------------------------------------------------------------------------
def _multilabel_sums(probs: Any, labels: Any, n_bins: int, per_label: bool) -> BinSums:
    """Pooled: one group of N*T binary forecasts; per_label: T groups of N forecasts."""
    check_n_bins(n_bins)
    p, y = multilabel_inputs(probs, labels)
    if not per_label:
        p, y = p.reshape(-1, 1), y.reshape(-1, 1)
    return bin_sums(p, y, n_bins)


_MULTILABEL_DEFINITION = """
    Each (sample, label) pair is one binary forecast of "present": confidence p_it = P(y_t = 1), outcome y_it.
    This is NOT the top-label confidence max(p, 1 - p): a forecast of 0.1 lands in a low bin and is compared with
    the frequency of "present" there. ``per_label=False`` pools all N*T forecasts into one set of bins;
    ``per_label=True`` computes the metric for each label separately and returns the unweighted mean over labels.
    The SPA paper defers its definition to an appendix that is not in our copy and we could not inspect the
    LDACE evaluation code, so which of the two (pooled or per label) they report is not verified here.
"""


def multilabel_ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, per_label: bool = False) -> float:
    return float(expected_error(_multilabel_sums(probs, labels, n_bins, per_label)).mean())


def multilabel_average_calibration_error(
    probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, per_label: bool = False
) -> float:
    return float(average_error(_multilabel_sums(probs, labels, n_bins, per_label)).mean())


def multilabel_mce(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, per_label: bool = False) -> float:
    return float(max_error(_multilabel_sums(probs, labels, n_bins, per_label)).mean())


multilabel_ece.__doc__ = "Multi-label ECE (sample-weighted, equal-width bins).\n" + _MULTILABEL_DEFINITION
multilabel_average_calibration_error.__doc__ = (
    "Multi-label average calibration error (Neumann et al. 2018; the ACE of the SPA and LDACE papers):\n"
    "    the unweighted mean of ``|freq - conf|`` over non-empty equal-width bins.\n" + _MULTILABEL_DEFINITION
)
multilabel_mce.__doc__ = (
    "Multi-label maximum calibration error (the MCE of the SPA and LDACE papers, Naeini et al. 2015).\n"
    + _MULTILABEL_DEFINITION
)


def multilabel_smooth_ece(probs: Any, labels: Any) -> float:
    """Smooth ECE (see :func:`helpers.metrics.smooth_ece`) of every (sample, label) forecast of "present" pooled into
    one set: ``relplot.smECE`` on the flattened probabilities and their 0/1 outcomes (the pooled analogue of
    :func:`multilabel_ece`)."""
    p, y = multilabel_inputs(probs, labels)
    return relplot_smooth_ece(p.reshape(-1), y.reshape(-1))


# ----------------------------------------------------------------------------------------------------------------
# proper scores, decisions and rankings
# ----------------------------------------------------------------------------------------------------------------
def multilabel_brier(probs: Any, labels: Any) -> float:
    """Mean over all (sample, label) pairs of (p - y)^2, i.e. the per-label binary Brier score averaged."""
    p, y = multilabel_inputs(probs, labels)
    return float(((p.to(torch.float64) - y) ** 2).mean())


def multilabel_nll(probs: Any, labels: Any) -> float:
    """Mean binary negative log-likelihood over all (sample, label) forecasts of "present": -log p where y = 1,
    -log(1 - p) where y = 0 (log(0) handled as in ``mean_negative_log``)."""
    p, y = multilabel_inputs(probs, labels)
    p = p.to(torch.float64)
    return mean_negative_log(torch.where(y == 1, p, 1 - p), "multilabel_nll")


def hamming_loss(probs: Any, labels: Any, threshold: float = 0.5) -> float:
    """Fraction of (sample, label) pairs whose decision 1[p >= threshold] differs from the label."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
    p, y = multilabel_inputs(probs, labels)
    return float(((p >= threshold) != (y == 1)).to(torch.float64).mean())


def map_per_class(probs: Any, labels: Any) -> float:
    """mAP@y: mean over labels of the average precision ranking the samples by p_t (SPA paper, Sec. 6).

    Labels with no positive sample have no AP; they are skipped with a warning (ValueError if none is left).
    """
    p, y = multilabel_inputs(probs, labels)
    ap = average_precision_rows(p.T, y.T)
    return mean_over_defined(ap, "map_per_class", "label(s) without a positive sample")


def map_per_example(probs: Any, labels: Any) -> float:
    """mAP@x: mean over samples of the average precision ranking that sample's labels by p (SPA paper, Sec. 6).

    Samples with no positive label (most ChestMNIST images) have no AP and are excluded from the mean, silently:
    this is the usual protocol (Ridnik et al. 2021) and not an anomaly. ValueError if no sample has a positive.
    """
    p, y = multilabel_inputs(probs, labels)
    ap = average_precision_rows(p, y)
    defined = ~torch.isnan(ap)
    if not bool(defined.any()):
        raise ValueError("map_per_example: no sample has a positive label, so no average precision is defined")
    return float(ap[defined].mean())


def macro_auroc(probs: Any, labels: Any) -> float:
    """Macro AUROC over labels: the unweighted mean over labels of each label's ROC AUC.

    Computed in torch for all labels at once (Mann-Whitney U with mid-ranks; tested equal to sklearn's
    ``roc_auc_score(..., average="macro")``), about 50x faster than sklearn per call, which matters for the
    bootstrap. A label whose column holds a single class (no positive or no negative) has no AUROC: it is
    skipped with a RuntimeWarning naming it; ValueError if every label is like that.
    """
    p, y = multilabel_inputs(probs, labels)
    return mean_over_defined(auroc_rows(p.T, y.T), "macro_auroc", "label(s) with a single class present")


def fixed_label_macro_auroc(probs: Any, labels: Any, *, columns: Any) -> float:
    """Macro AUROC over a FIXED set of label columns (e.g. the labels with at least 10 test positives, chosen once
    on the full test set): NaN, with a RuntimeWarning, when any of them holds a single class, instead of averaging
    over fewer labels. A bootstrap of :func:`macro_auroc` on a set whose rare labels have 1–3 positives averages
    over a label set that changes between resamples; with this one every resample averages the same labels (and a
    resample that loses one is counted as degenerate). Pass ``columns`` as a keyword (``functools.partial``)."""
    p, y = multilabel_inputs(probs, labels)
    index = torch.as_tensor(columns, dtype=torch.long).reshape(-1)
    if index.numel() == 0 or index.unique().numel() != index.numel():
        raise ValueError(f"columns must be distinct label indices, at least one, got {index.tolist()}")
    if bool(((index < 0) | (index >= p.shape[1])).any()):
        raise ValueError(f"columns {index.tolist()} out of range for {p.shape[1]} labels")
    values = auroc_rows(p[:, index].T, y[:, index].T)
    if bool(torch.isnan(values).any()):
        warnings.warn("fixed_label_macro_auroc: a fixed label holds a single class: NaN", RuntimeWarning, stacklevel=2)
        return float("nan")
    return float(values.mean())


def labels_with_positives(labels: Any, minimum: int = 10) -> list[int]:
    """Indices of the label columns with at least ``minimum`` positives and ``minimum`` negatives in ``labels``."""
    y = torch.as_tensor(labels)
    if y.ndim != 2:
        raise ValueError(f"labels must be (N, T), got shape {tuple(y.shape)}")
    positives = y.to(torch.int64).sum(0)
    keep = (positives >= minimum) & (len(y) - positives >= minimum)
    return torch.nonzero(keep)[:, 0].tolist()


# ----------------------------------------------------------------------------------------------------------------
# every multi-label metric
# ----------------------------------------------------------------------------------------------------------------
def multilabel_report(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> dict[str, float]:
    """Every multi-label metric of this module as a flat dict of floats; ``*_per_label`` = macro over labels."""
    multilabel_inputs(probs, labels)
    report = {
        "hamming_loss": hamming_loss(probs, labels),
        "macro_auroc": macro_auroc(probs, labels),
        "map_per_class": map_per_class(probs, labels),
        "map_per_example": map_per_example(probs, labels),
        "brier": multilabel_brier(probs, labels),
    }
    for per_label, suffix in ((False, ""), (True, "_per_label")):
        sums = _multilabel_sums(probs, labels, n_bins, per_label)  # binned once for the three errors
        report["ece" + suffix] = float(expected_error(sums).mean())
        report["average_calibration_error" + suffix] = float(average_error(sums).mean())
        report["mce" + suffix] = float(max_error(sums).mean())
    return report
