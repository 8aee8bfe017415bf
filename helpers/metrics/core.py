"""Input checks, the one binning routine, rank helpers and the reductions shared by the metric modules (the floor
below them).

The metrics (:mod:`helpers.metrics.calibration`, :mod:`helpers.metrics.classification`,
:mod:`helpers.metrics.multilabel`), their forms on many bootstrap resamples at once (:mod:`helpers.metrics.weighted`)
and the retention curves (:mod:`helpers.metrics.selective`) all validate their inputs and bin confidences with the
functions here, so they agree by construction. This module imports none of them: imports flow one way, from
``bootstrapping`` (the intervals) through ``classification`` and ``multilabel`` to ``calibration``, and through
``weighted`` to ``selective``, each down to ``core``. Binning conventions: see :mod:`helpers.metrics.calibration`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np
import torch

DEFAULT_N_BINS = 15
ROW_SUM_TOLERANCE = 1e-3
LOGITS_HINT = (
    "did you pass logits? Apply torch.softmax(logits, dim=1) (multi-class), torch.sigmoid (multi-label), "
    "or better loss.predict_proba(logits)"
)


# ----------------------------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------------------------
def to_tensor(values: Any, name: str) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values.detach()
    if isinstance(values, (np.ndarray, list, tuple)):
        array = np.ascontiguousarray(values)
        if array.dtype == object:
            raise TypeError(f"{name} must be numeric, got a numpy array of dtype object")
        return torch.from_numpy(array if array.flags.writeable else array.copy())
    raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(values).__name__}")


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def check_n_bins(n_bins: int) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")


def _probability_matrix(probs: Any, name: str = "probs") -> torch.Tensor:
    """(N, C) float tensor with finite entries in [0, 1]; raises ValueError otherwise."""
    p = to_tensor(probs, name)
    if p.dtype == torch.bool or p.is_complex():
        raise ValueError(f"{name} must hold real probabilities, got dtype {p.dtype}")
    if not p.is_floating_point():
        p = p.to(torch.float64)
    elif p.dtype in (torch.float16, torch.bfloat16):
        p = p.float()
    if p.ndim != 2:
        raise ValueError(
            f"{name} must have shape (N, C) (samples x classes or labels), got shape {tuple(p.shape)}; "
            "for a binary problem pass (N, 2) probabilities torch.stack([1 - p, p], dim=1)"
        )
    if p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(p.shape)}); metrics need at least one sample")
    low, high = torch.aminmax(p)
    if not (torch.isfinite(low) and torch.isfinite(high)):
        n_nan = int(torch.isnan(p).sum())
        n_inf = int(torch.isinf(p).sum())
        raise ValueError(f"{name} contains {n_nan} NaN and {n_inf} infinite values; metrics need finite probabilities")
    if low < 0 or high > 1:
        raise ValueError(
            f"{name} must lie in [0, 1], got values in [{float(low):.4g}, {float(high):.4g}]; " + LOGITS_HINT
        )
    return p


def row_sum_tolerance(probs: Any) -> float:
    """How far a row of ``probs`` may sum from 1: ROW_SUM_TOLERANCE, or the machine epsilon of a coarser dtype.

    Rounding each entry of a row to a float format moves the row sum by up to eps / 2 (relative error eps / 2 per
    entry, entries summing to 1), so bfloat16 rows (eps = 2^-7) can sum to 1 +- 3.9e-3 however they were made.
    """
    dtype = getattr(probs, "dtype", None)
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return max(ROW_SUM_TOLERANCE, torch.finfo(dtype).eps)
    return ROW_SUM_TOLERANCE


def multiclass_probabilities(probs: Any, name: str = "probs") -> torch.Tensor:
    """Validated (N, K >= 2) multi-class probabilities: finite, in [0, 1], every row summing to 1 (within
    :func:`row_sum_tolerance`); a ValueError naming ``name`` and what is wrong otherwise (what every multi-class
    metric checks)."""
    tolerance = row_sum_tolerance(probs)
    p = _probability_matrix(probs, name)
    if p.shape[1] < 2:
        raise ValueError(
            f"multi-class {name} need K >= 2 columns, got {p.shape[1]}; for a binary problem pass (N, 2) "
            "probabilities torch.stack([1 - p, p], dim=1), or use the multilabel_* metrics"
        )
    # a matrix-vector product is several times faster than p.sum(1) for narrow rows
    row_sums = torch.mv(p, torch.ones(p.shape[1], dtype=p.dtype, device=p.device))
    low, high = torch.aminmax(row_sums)
    if low < 1.0 - tolerance or high > 1.0 + tolerance:
        worst = int((row_sums - 1.0).abs().argmax())
        raise ValueError(
            f"rows of multi-class {name} must sum to 1 (within {tolerance:.3g}); row {worst} sums to "
            f"{float(row_sums[worst]):.6g}; " + LOGITS_HINT
        )
    return p


def multiclass_inputs(probs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated (N, K) probabilities and (N,) int64 labels on the probabilities' device."""
    p = multiclass_probabilities(probs)
    y = to_tensor(labels, "labels")
    if y.ndim != 1:
        raise ValueError(
            f"multi-class labels must have shape (N,) of class indices, got shape {tuple(y.shape)}; "
            "for one-hot labels pass labels.argmax(1); for multi-label data use the multilabel_* metrics"
        )
    if y.dtype == torch.bool or y.is_floating_point() or y.is_complex():
        raise ValueError(f"labels must hold integer class indices, got dtype {y.dtype}; pass labels.long()")
    if y.shape[0] != p.shape[0]:
        raise ValueError(f"probs has {p.shape[0]} rows but labels has {y.shape[0]} entries; they must match")
    y = y.to(device=p.device, dtype=torch.long)
    low, high = torch.aminmax(y)
    if low < 0 or high >= p.shape[1]:
        raise ValueError(
            f"labels must lie in [0, {p.shape[1] - 1}] for K = {p.shape[1]} columns of probs, "
            f"got range [{int(low)}, {int(high)}]"
        )
    return p, y


def multilabel_inputs(probs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated (N, T) probabilities and (N, T) float64 {0, 1} labels on the probabilities' device."""
    p = _probability_matrix(probs)
    y = to_tensor(labels, "labels")
    if y.shape != p.shape:
        raise ValueError(
            f"multi-label labels must have the same (N, T) shape as probs, got {tuple(y.shape)} vs "
            f"{tuple(p.shape)}; for multi-class (N,) labels use the multi-class metrics"
        )
    y = y.to(device=p.device, dtype=torch.float64)
    if not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("multi-label labels must be 0 or 1 (no NaN, no soft labels)")
    return p, y


def checked_class_index(class_index: Any, n_classes: int) -> int:
    """``class_index`` checked to be an integer column of K = ``n_classes`` (what :func:`metrics.class_recall`
    accepts)."""
    if (
        isinstance(class_index, bool)
        or not isinstance(class_index, (int, np.integer))
        or not 0 <= class_index < n_classes
    ):
        raise ValueError(f"class_index must be an integer in [0, {n_classes - 1}], got {class_index!r}")
    return int(class_index)


def estimate_and_posteriors(probs: Any, true_posteriors: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated float64 (N, C) predicted probabilities and exact posteriors of the same shape, on one device."""
    p_hat = _probability_matrix(probs, "probs")
    p_true = _probability_matrix(true_posteriors, "true_posteriors").to(p_hat.device)
    if p_hat.shape != p_true.shape:
        raise ValueError(
            f"probs and true_posteriors must have the same shape, got {tuple(p_hat.shape)} vs {tuple(p_true.shape)}"
        )
    return p_hat.to(torch.float64), p_true.to(torch.float64)


# ----------------------------------------------------------------------------------------------------------------
# the one binning implementation
# ----------------------------------------------------------------------------------------------------------------
def bin_edges(n_bins: int = DEFAULT_N_BINS, device: torch.device | str | None = None) -> torch.Tensor:
    """Equal-width bin edges in [0, 1], float64, shape (n_bins + 1,)."""
    check_n_bins(n_bins)
    return torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64, device=device)


# Fast-path margin, in bin widths. It must exceed the rounding error of float32 c * n_bins (<= n_bins 2**-24)
# plus that of the float32 edges (<= n_bins 2**-23): 3 n_bins 2**-24 <= 3.6e-4 for n_bins <= 2000.
_NEAR_EDGE = 1e-3
_FAST_BINNING_MAX_BINS = 2000


def equal_width_bin_index(confidence: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Bin of each confidence for bins (edge_b, edge_{b+1}], with 0 in the first bin (any shape, int64).

    The edges are the float64 :func:`bin_edges`; a float32 input is compared with each edge rounded DOWN to
    float32, which is exactly the float64 comparison (for a float32 c: c <= e iff c <= round_down(e)).
    Fast path (n_bins <= 2000): floor(c * n_bins) is the bin of every confidence whose scaled value lies farther
    than 1e-3 bin widths from an integer (a margin larger than the rounding errors, see ``_NEAR_EDGE``); only
    the few near an edge go through torch.bucketize against the exact edges. Several times faster than
    bucketize on everything; the tests check the two agree, on and around every edge.
    """
    interior = bin_edges(n_bins, confidence.device)[1:-1]
    if confidence.dtype != torch.float64:
        confidence = confidence.float()
        rounded = interior.float()
        interior = torch.where(
            rounded.double() > interior, torch.nextafter(rounded, torch.zeros_like(rounded)), rounded
        )
    if n_bins > _FAST_BINNING_MAX_BINS:
        return torch.bucketize(confidence, interior, right=False)
    scaled = confidence * n_bins
    index = scaled.long().contiguous()  # a transposed or Fortran-ordered input keeps its strides: view(-1) needs this
    near_edge = torch.nonzero(((scaled - scaled.round()).abs_() < _NEAR_EDGE).reshape(-1))[:, 0]
    # right=False: index i satisfies interior[i-1] < c <= interior[i]; c = 0 gives 0, c = 1 gives n_bins - 1.
    index.view(-1)[near_edge] = torch.bucketize(confidence.reshape(-1)[near_edge], interior, right=False)
    return index


def equal_mass_bin_index(confidence: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Equal-mass bins of a (N,) confidence vector.

    Samples are sorted by confidence (stable sort, so ties keep their input order) and the sample of rank r
    (0-based) goes to bin floor(r * n_bins / N): contiguous chunks whose sizes differ by at most one. Ties that
    straddle a chunk boundary are split between the two chunks. With N < n_bins some bins stay empty.
    """
    n = confidence.shape[0]
    order = torch.argsort(confidence, stable=True)
    rank_bin = torch.arange(n, device=confidence.device) * n_bins // n
    index = torch.empty_like(order)
    index[order] = rank_bin
    return index


class BinSums(NamedTuple):
    """Per-group, per-bin sums, each (G, n_bins) float64: sample count, sum of confidences, sum of outcomes."""

    counts: torch.Tensor
    confidence_sum: torch.Tensor
    outcome_sum: torch.Tensor


def cell_index(bin_index: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Flat (group, bin) cell g * n_bins + b of an (N, G) bin index."""
    if bin_index.shape[1] == 1:
        return bin_index
    return bin_index + torch.arange(bin_index.shape[1], device=bin_index.device) * n_bins


# Rows are processed in chunks of about 2**20 entries: int64 temporaries of 8 MB stay below glibc's mmap
# threshold (32 MB), so they are recycled instead of being page-faulted in from the OS on every allocation,
# which made one pass over 10^6 x 7 entries several times slower than over 10^6.
CHUNK_ENTRIES = 2**20


def bin_sums(
    confidence: torch.Tensor, outcome: torch.Tensor, n_bins: int, bin_index: torch.Tensor | None = None
) -> BinSums:
    """Per-(group, bin) sums over samples. ``confidence`` is (N, G): column g is forecast group g.

    ``outcome`` is (N, G) in {0, 1}, or, for one-vs-rest groups (class-wise ECE), an (N,) int64 tensor giving
    the one column whose outcome is 1 in each row. Bins are equal-width (:func:`equal_width_bin_index`) unless
    an (N, G) ``bin_index`` is given.
    """
    n_rows, n_groups = confidence.shape
    size = n_groups * n_bins
    device = confidence.device
    counts, confidence_sum, outcome_sum = (torch.zeros(size, dtype=torch.float64, device=device) for _ in range(3))
    one_vs_rest = outcome.ndim == 1
    rows_per_chunk = max(1, CHUNK_ENTRIES // n_groups)
    for start in range(0, n_rows, rows_per_chunk):
        rows = slice(start, start + rows_per_chunk)
        chunk = confidence[rows]
        index = equal_width_bin_index(chunk, n_bins) if bin_index is None else bin_index[rows]
        cell = cell_index(index, n_bins)
        flat = cell.reshape(-1)
        counts.scatter_add_(0, flat, torch.ones(1, dtype=torch.float64, device=device).expand_as(flat))
        confidence_sum.scatter_add_(0, flat, chunk.reshape(-1).to(torch.float64))
        if one_vs_rest:
            positive_cell = cell.gather(1, outcome[rows, None]).reshape(-1)
            outcome_sum.scatter_add_(
                0, positive_cell, torch.ones(1, dtype=torch.float64, device=device).expand_as(positive_cell)
            )
        else:
            outcome_sum.scatter_add_(0, flat, outcome[rows].reshape(-1).to(torch.float64))
    shape = (n_groups, n_bins)
    return BinSums(counts.reshape(shape), confidence_sum.reshape(shape), outcome_sum.reshape(shape))


def _bin_gaps(sums: BinSums) -> torch.Tensor:
    """|accuracy - mean confidence| per bin; NaN for empty bins."""
    gap = (sums.outcome_sum - sums.confidence_sum).abs() / sums.counts
    return torch.where(sums.counts > 0, gap, torch.full_like(gap, math.nan))


def expected_error(sums: BinSums) -> torch.Tensor:
    """``sum_b (n_b / N) |acc_b - conf_b| = sum_b |sum of outcomes - sum of confidences| / N``, per group."""
    return (sums.outcome_sum - sums.confidence_sum).abs().sum(-1) / sums.counts.sum(-1)


def max_error(sums: BinSums) -> torch.Tensor:
    """max over non-empty bins of ``|acc_b - conf_b|``, per group (gaps are >= 0, so empty bins may count as 0)."""
    return _bin_gaps(sums).nan_to_num(nan=0.0).amax(-1)


def average_error(sums: BinSums) -> torch.Tensor:
    """mean over non-empty bins of ``|acc_b - conf_b|``, each bin weighted equally, per group."""
    return _bin_gaps(sums).nanmean(-1)


def top_label(p: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 1) top-label confidence and (N, 1) correctness (ties in the max: the first maximal class)."""
    confidence, prediction = p.max(dim=1)
    return confidence[:, None], (prediction == y)[:, None]


# ----------------------------------------------------------------------------------------------------------------
# ranks with ties (average precision, AUROC) and the debiased squared error
# ----------------------------------------------------------------------------------------------------------------
def tie_groups(sorted_scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last position (along dim 1) of the group of equal scores each entry of a row-sorted matrix is in."""
    n_columns = sorted_scores.shape[1]
    position = torch.arange(n_columns, device=sorted_scores.device).expand(sorted_scores.shape)
    changes = sorted_scores[:, 1:] != sorted_scores[:, :-1]
    # an explicit (rows, 1) column: changes[:, :1] is (rows, 0) when there is a single column
    boundary = torch.ones(sorted_scores.shape[0], 1, dtype=torch.bool, device=sorted_scores.device)
    is_first = torch.cat([boundary, changes], dim=1)
    is_last = torch.cat([changes, boundary], dim=1)
    first = torch.where(is_first, position, torch.zeros_like(position)).cummax(1).values
    last = torch.where(is_last, position, torch.full_like(position, n_columns)).flip(1).cummin(1).values.flip(1)
    return first, last


def average_precision_rows(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Average precision of each row (ranking its columns by score); NaN for rows without a positive.

    AP = sum_n (R_n - R_{n-1}) P_n over the distinct score thresholds n, as in sklearn's
    ``average_precision_score``: tied scores form one threshold, so each positive in a tie group gets the
    precision measured at the end of the group.
    """
    sorted_scores, order = scores.sort(dim=1, descending=True, stable=True)
    sorted_targets = targets.gather(1, order).to(torch.float64)
    rank = torch.arange(1, scores.shape[1] + 1, device=scores.device, dtype=torch.float64)
    precision = sorted_targets.cumsum(1) / rank
    _, last = tie_groups(sorted_scores)
    n_positive = sorted_targets.sum(1)
    ap = (sorted_targets * precision.gather(1, last)).sum(1) / n_positive
    return torch.where(n_positive > 0, ap, torch.full_like(ap, math.nan))


def auroc_rows(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """ROC AUC of each row via the Mann-Whitney U statistic with mid-ranks for ties (= sklearn roc_auc_score);
    NaN for rows holding a single class."""
    sorted_scores, order = scores.sort(dim=1)
    sorted_targets = targets.gather(1, order).to(torch.float64)
    first, last = tie_groups(sorted_scores)
    mid_rank = (first + last).to(torch.float64) / 2 + 1
    n_positive = sorted_targets.sum(1)
    n_negative = scores.shape[1] - n_positive
    u_statistic = (sorted_targets * mid_rank).sum(1) - n_positive * (n_positive + 1) / 2
    auc = u_statistic / (n_positive * n_negative)
    return torch.where((n_positive > 0) & (n_negative > 0), auc, torch.full_like(auc, math.nan))


def debiased_squared_error(sums: BinSums) -> torch.Tensor:
    """Σ_b (n_b / N) [(conf_b − acc_b)² − acc_b (1 − acc_b) / (n_b − 1)] per group; bins with n_b < 2 add 0."""
    counts = sums.counts
    usable = counts >= 2
    safe_counts = torch.where(usable, counts, torch.ones_like(counts))
    accuracy_in_bin = sums.outcome_sum / safe_counts
    gap = sums.confidence_sum / safe_counts - accuracy_in_bin
    variance = accuracy_in_bin * (1.0 - accuracy_in_bin) / (safe_counts - 1.0).clamp_min(1.0)
    per_bin = torch.where(usable, gap * gap - variance, torch.zeros_like(gap))
    return (counts * per_bin).sum(-1) / counts.sum(-1)


# ----------------------------------------------------------------------------------------------------------------
# reductions: the mean of -log p with log(0) handled, the mean over defined columns
# ----------------------------------------------------------------------------------------------------------------
def mean_negative_log(p_outcome: torch.Tensor, metric: str) -> float:
    """Mean of -log of the probabilities given to the observed outcomes (float64).

    A probability of exactly 0 on the observed outcome makes the NLL infinite. Instead of returning inf (which
    poisons averages and bootstrap intervals) log is evaluated at ``torch.finfo(float64).tiny`` for those entries,
    i.e. about 708.4 is added per such entry, with a warning. No other input is altered.
    """
    tiny = torch.finfo(torch.float64).tiny
    n_zero = int((p_outcome == 0).sum())
    if n_zero:
        warnings.warn(
            f"{metric}: {n_zero} forecast(s) give probability 0 to the observed outcome; each contributes "
            f"-log(float64 tiny) = {-math.log(tiny):.1f} instead of infinity",
            RuntimeWarning,
            stacklevel=3,
        )
    return float(-p_outcome.clamp_min(tiny).log().mean())


def mean_over_defined(values: torch.Tensor, metric: str, what: str) -> float:
    defined = ~torch.isnan(values)
    if not bool(defined.any()):
        raise ValueError(f"{metric}: undefined for every column ({what})")
    n_skipped = int((~defined).sum())
    if n_skipped:
        skipped = torch.nonzero(~defined)[:, 0].tolist()
        warnings.warn(f"{metric}: skipped {n_skipped} {what}: columns {skipped}", RuntimeWarning, stacklevel=3)
    return float(values[defined].mean())
