"""The metrics of :mod:`helpers.metrics.calibration`, :mod:`helpers.metrics.classification` and
:mod:`helpers.metrics.multilabel` on many bootstrap resamples at once (used by ``metrics.paired_bootstrap``).

A bootstrap resample of the N test rows is represented by its multiplicity weights: w_i is how often row i was drawn
(Σ_i w_i = N). Every metric below is a function of weighted sums of per-row quantities, so B resamples become one
(B, N) weight matrix and a few matrix products, cumulative sums and searches, instead of B calls of the metric on
``probs[idx]``. Example: ECE = Σ_b ``|Σ_i w_i 1[i in bin b] (correct_i − conf_i)|`` / N.

``metrics.weighted_evaluator(metric, probs, labels)`` picks the weighted form of a metric here (the table
``metrics.WEIGHTED_METRICS``), which validates the inputs and precomputes the per-row quantities once, and returns
``evaluate(weights) -> (B,) float64`` (NaN where the metric is undefined on a resample, e.g. a recall of a class
that the resample does not contain), or None for a metric without a weighted form here (``smooth_ece``: relplot
computes it; the bootstrap then calls the metric on each resample). ``functools.partial`` of a metric with keyword
arguments (``n_bins``, ``per_label``, ``threshold``, ``class_index``) is recognised.

The table and the look-up live in :mod:`helpers.metrics.bootstrapping`, the module above: this module imports only
:mod:`helpers.metrics.core` (the shared input checks and binning) and :mod:`helpers.metrics.selective`, so imports flow
one way.

Each weighted form is tested equal to the metric itself on the resampled rows. One difference by construction:
equal-mass bins (:func:`helpers.metrics.adaptive_ece`) order tied confidences of *different* rows by row
index here and by position in the resample there; the two can differ only when tied rows with different correctness
straddle a bin boundary (both are valid equal-mass binnings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from helpers.metrics import core, selective

__all__: list[str] = []  # the weighted forms are private: metrics.weighted_evaluator picks one

Evaluate = Callable[[torch.Tensor], torch.Tensor]


def _weighted_mean(per_row: torch.Tensor) -> Evaluate:
    """Σ_i w_i x_i / Σ_i w_i for a (N,) per-row quantity."""
    per_row = per_row.to(torch.float64)
    return lambda weights: weights @ per_row / weights.sum(1)


def _columns(weights: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """weights[:, index] for (B, N) weights; ``gather`` with an expanded index is several times faster on the CPU
    than advanced indexing or ``index_select`` along dim 1."""
    return weights.gather(1, index.expand(weights.shape[0], -1))


def _safe_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, NaN where the denominator is 0."""
    ratio = numerator / torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    return torch.where(denominator > 0, ratio, torch.full_like(ratio, float("nan")))


# ----------------------------------------------------------------------------------------------------------------
# binned calibration errors: per-row cell statistics, summed by one matrix product
# ----------------------------------------------------------------------------------------------------------------
def _cell_statistics(cell: torch.Tensor, confidence: torch.Tensor, outcome: torch.Tensor, n_cells: int) -> torch.Tensor:
    """(N, 3 n_cells) per-row count, confidence sum and outcome sum of each (group, bin) cell.

    ``cell`` (N, G) int64: the cell of each of a row's G forecasts; ``confidence`` / ``outcome`` (N, G) float64.
    """
    n = cell.shape[0]
    statistics = torch.zeros(n, 3 * n_cells, dtype=torch.float64, device=cell.device)
    for offset, values in enumerate((torch.ones_like(confidence), confidence, outcome)):
        statistics.scatter_add_(1, cell + offset * n_cells, values)
    return statistics


def _binned(
    cell: torch.Tensor,
    confidence: torch.Tensor,
    outcome: torch.Tensor,
    n_groups: int,
    n_bins: int,
    reduce: Callable[[core.BinSums], torch.Tensor],
) -> Evaluate:
    """Weighted (group, bin) sums reduced per group by ``reduce`` and averaged over groups."""
    n_cells = n_groups * n_bins
    statistics = _cell_statistics(cell, confidence.to(torch.float64), outcome.to(torch.float64), n_cells)

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        sums = (weights @ statistics).reshape(weights.shape[0], 3, n_groups, n_bins)
        return reduce(core.BinSums(sums[:, 0], sums[:, 1], sums[:, 2])).mean(-1)

    return evaluate


def _top_label_binned(probs: Any, labels: Any, n_bins: int, reduce: Callable[[core.BinSums], torch.Tensor]) -> Evaluate:
    core.check_n_bins(n_bins)
    p, y = core.multiclass_inputs(probs, labels)
    confidence, correct = core.top_label(p, y)
    return _binned(core.equal_width_bin_index(confidence, n_bins), confidence, correct, 1, n_bins, reduce)


def ece(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS) -> Evaluate:
    return _top_label_binned(probs, labels, n_bins, core.expected_error)


def mce(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS) -> Evaluate:
    return _top_label_binned(probs, labels, n_bins, core.max_error)


def average_calibration_error(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS) -> Evaluate:
    return _top_label_binned(probs, labels, n_bins, core.average_error)


def classwise_ece(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS) -> Evaluate:
    core.check_n_bins(n_bins)
    p, y = core.multiclass_inputs(probs, labels)
    k = p.shape[1]
    cell = core.cell_index(core.equal_width_bin_index(p, n_bins), n_bins)
    outcome = torch.nn.functional.one_hot(y, k)
    return _binned(cell, p, outcome, k, n_bins, core.expected_error)


def _multilabel_binned(
    probs: Any, labels: Any, n_bins: int, per_label: bool, reduce: Callable[[core.BinSums], torch.Tensor]
) -> Evaluate:
    core.check_n_bins(n_bins)
    p, y = core.multilabel_inputs(probs, labels)
    index = core.equal_width_bin_index(p, n_bins)
    n_groups = p.shape[1] if per_label else 1
    cell = core.cell_index(index, n_bins) if per_label else index
    return _binned(cell, p, y, n_groups, n_bins, reduce)


def multilabel_ece(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS, per_label: bool = False) -> Evaluate:
    return _multilabel_binned(probs, labels, n_bins, per_label, core.expected_error)


def multilabel_mce(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS, per_label: bool = False) -> Evaluate:
    return _multilabel_binned(probs, labels, n_bins, per_label, core.max_error)


def multilabel_average_calibration_error(
    probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS, per_label: bool = False
) -> Evaluate:
    return _multilabel_binned(probs, labels, n_bins, per_label, core.average_error)


# ----------------------------------------------------------------------------------------------------------------
# equal-mass bins: the rows sorted once by confidence; a resample's rank r is found by searching cumulative weights
# ----------------------------------------------------------------------------------------------------------------
class _SortedTopLabel:
    """Top-label confidence and correctness sorted by confidence (stable), and per-resample cumulative sums."""

    def __init__(self, probs: Any, labels: Any):
        p, y = core.multiclass_inputs(probs, labels)
        confidence, correct = core.top_label(p, y)
        self.order = torch.argsort(confidence[:, 0], stable=True)
        self.confidence = confidence[:, 0].to(torch.float64)[self.order]
        self.correct = correct[:, 0].to(torch.float64)[self.order]

    def row_at_rank(self, cumulative_weights: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        """(B, R) sorted-row position holding rank r of each resample (a row's copies occupy ranks
        [cum_w − w, cum_w)); rank N gives the last row."""
        ranks = ranks.to(cumulative_weights.dtype).expand(cumulative_weights.shape[0], -1).contiguous()
        row = torch.searchsorted(cumulative_weights, ranks, right=True)
        return row.clamp_max(cumulative_weights.shape[1] - 1)  # rank N (a bound past the last row): the last row


def adaptive_ece(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS) -> Evaluate:
    """Rank r of a resample goes to bin floor(r n_bins / N) (``metrics._equal_mass_bin_index``): bin b holds
    ranks [L_b, L_{b+1}) with L_b = ceil(b N / n_bins). The confidence (or correctness) summed over ranks [0, L) is
    the cumulative sum up to the row holding rank L plus that row's share of copies below L."""
    core.check_n_bins(n_bins)
    rows = _SortedTopLabel(probs, labels)
    n = rows.confidence.shape[0]
    device = rows.confidence.device
    bounds = (torch.arange(n_bins + 1, device=device) * n + n_bins - 1) // n_bins  # L_0 = 0 ... L_{n_bins} = N

    def sums_below(weights: torch.Tensor, values: torch.Tensor, cumulative: torch.Tensor) -> torch.Tensor:
        cumulative_values = (weights * values).cumsum(1)
        inner = bounds[1:-1]
        row = rows.row_at_rank(cumulative, inner)
        w_row = weights.gather(1, row)
        start = cumulative.gather(1, row) - w_row
        below = cumulative_values.gather(1, row) - w_row * values[row] + values[row] * (inner - start)
        zero = torch.zeros_like(below[:, :1])
        return torch.cat([zero, below, cumulative_values[:, -1:]], 1)

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        weights = _columns(weights, rows.order)
        cumulative = weights.cumsum(1)
        confidence_sum = sums_below(weights, rows.confidence, cumulative).diff(dim=1)
        outcome_sum = sums_below(weights, rows.correct, cumulative).diff(dim=1)
        counts = bounds.diff().to(torch.float64).expand_as(confidence_sum)
        return core.expected_error(core.BinSums(counts, confidence_sum, outcome_sum))

    return evaluate


def debiased_ece(probs: Any, labels: Any, n_bins: int = core.DEFAULT_N_BINS) -> Evaluate:
    """The resample's sorted confidences at the chunk ends give its bin boundaries
    (``metrics._kumar_equal_mass_bin_index``); each row is then binned against its resample's boundaries."""
    core.check_n_bins(n_bins)
    rows = _SortedTopLabel(probs, labels)
    n = rows.confidence.shape[0]
    device = rows.confidence.device
    n_chunks = min(n_bins, n)
    sizes = torch.full((n_chunks,), n // n_chunks, dtype=torch.long, device=device)
    sizes[: n % n_chunks] += 1
    ends = sizes.cumsum(0)[:-1]

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        weights = _columns(weights, rows.order)
        cumulative = weights.cumsum(1)
        last_of_chunk = rows.confidence[rows.row_at_rank(cumulative, ends - 1)]
        first_of_next = rows.confidence[rows.row_at_rank(cumulative, ends)]
        ones = torch.ones(weights.shape[0], 1, dtype=torch.float64, device=device)
        boundaries = torch.cat([(last_of_chunk + first_of_next) / 2.0, ones], 1)
        index = torch.searchsorted(boundaries, rows.confidence.expand(weights.shape[0], -1).contiguous())
        shape = (weights.shape[0], n_chunks)
        counts = torch.zeros(shape, dtype=torch.float64, device=device).scatter_add_(1, index, weights)
        confidence_sum = torch.zeros(shape, dtype=torch.float64, device=device).scatter_add_(
            1, index, weights * rows.confidence
        )
        outcome_sum = torch.zeros(shape, dtype=torch.float64, device=device).scatter_add_(
            1, index, weights * rows.correct
        )
        squared = core.debiased_squared_error(core.BinSums(counts, confidence_sum, outcome_sum))
        return squared.clamp_min(0.0).sqrt()

    return evaluate


# ----------------------------------------------------------------------------------------------------------------
# ranking metrics: each column sorted once, weighted cumulative sums per resample
# ----------------------------------------------------------------------------------------------------------------
def _weighted_auroc_column(scores: torch.Tensor, targets: torch.Tensor) -> Evaluate:
    """Mann-Whitney AUROC of one column with tied scores counted half (= ``metrics._auroc_rows``); NaN where the
    resample holds a single class. Each positive row j adds w_j (negatives below its tie group + half the negatives
    in it); only the positive rows are gathered."""
    sorted_scores, order = scores.sort()
    sorted_targets = targets.to(torch.float64)[order]
    first, last = (index[0] for index in core.tie_groups(sorted_scores[None]))
    positive_rows = torch.nonzero(sorted_targets)[:, 0]
    before_group = (first[positive_rows] - 1).clamp_min(0)
    has_rows_before = (first[positive_rows] > 0).to(torch.float64)
    group_end = last[positive_rows]

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        weights = _columns(weights, order)
        negative_cumulative = (weights * (1.0 - sorted_targets)).cumsum(1)
        below = _columns(negative_cumulative, before_group) * has_rows_before
        through_group = _columns(negative_cumulative, group_end)
        positive = _columns(weights, positive_rows)
        numerator = (positive * (below + through_group) * 0.5).sum(1)
        return _safe_ratio(numerator, positive.sum(1) * negative_cumulative[:, -1])

    return evaluate


def _weighted_average_precision_column(scores: torch.Tensor, targets: torch.Tensor) -> Evaluate:
    """Average precision of one column (= ``metrics._average_precision_rows``: each positive gets the precision at
    the end of its tie group); NaN where the resample holds no positive."""
    sorted_scores, order = scores.sort(descending=True, stable=True)
    sorted_targets = targets.to(torch.float64)[order]
    _, last = (index[0] for index in core.tie_groups(sorted_scores[None]))
    positive_rows = torch.nonzero(sorted_targets)[:, 0]
    group_end = last[positive_rows]

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        weights = _columns(weights, order)
        true_positives = _columns((weights * sorted_targets).cumsum(1), group_end)
        retrieved = _columns(weights.cumsum(1), group_end)
        positive = _columns(weights, positive_rows)
        precision = true_positives / retrieved.clamp_min(1.0)  # retrieved >= 1 wherever positive > 0
        return _safe_ratio((positive * precision).sum(1), positive.sum(1))

    return evaluate


def _mean_over_columns(columns: list[Evaluate]) -> Evaluate:
    """Mean over the columns defined on each resample (as ``metrics._mean_over_defined``), NaN if none is."""
    return lambda weights: torch.stack([column(weights) for column in columns], 1).nanmean(1)


def auroc_ovr(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multiclass_inputs(probs, labels)
    if p.shape[1] == 2:
        return _weighted_auroc_column(p[:, 1], y == 1)
    return _mean_over_columns([_weighted_auroc_column(p[:, k], y == k) for k in range(p.shape[1])])


def macro_auroc(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multilabel_inputs(probs, labels)
    return _mean_over_columns([_weighted_auroc_column(p[:, t], y[:, t]) for t in range(p.shape[1])])


def fixed_label_macro_auroc(probs: Any, labels: Any, *, columns: Any) -> Evaluate:
    """The mean over the fixed ``columns`` (plain mean: NaN on a resample where one of them has a single class)."""
    p, y = core.multilabel_inputs(probs, labels)
    index = torch.as_tensor(columns, dtype=torch.long).reshape(-1).tolist()
    evaluators = [_weighted_auroc_column(p[:, t], y[:, t]) for t in index]
    return lambda weights: torch.stack([column(weights) for column in evaluators], 1).mean(1)


def map_per_class(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multilabel_inputs(probs, labels)
    return _mean_over_columns([_weighted_average_precision_column(p[:, t], y[:, t]) for t in range(p.shape[1])])


def map_per_example(probs: Any, labels: Any) -> Evaluate:
    """A row's AP depends on that row only: the weighted mean of the per-row APs over rows that have one."""
    p, y = core.multilabel_inputs(probs, labels)
    ap = core.average_precision_rows(p, y)
    defined = ~torch.isnan(ap)
    ap = torch.where(defined, ap, torch.zeros_like(ap))
    return lambda weights: _safe_ratio(weights @ ap, weights @ defined.to(torch.float64))


# ----------------------------------------------------------------------------------------------------------------
# per-row means and confusion-matrix metrics
# ----------------------------------------------------------------------------------------------------------------
def accuracy(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multiclass_inputs(probs, labels)
    return _weighted_mean(p.argmax(1) == y)


def nll(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multiclass_inputs(probs, labels)
    p_true = p.gather(1, y[:, None])[:, 0].to(torch.float64)
    return _weighted_mean(-p_true.clamp_min(torch.finfo(torch.float64).tiny).log())


def brier(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multiclass_inputs(probs, labels)
    p = p.to(torch.float64)
    return _weighted_mean((p * p).sum(1) - 2.0 * p.gather(1, y[:, None])[:, 0] + 1.0)


def multilabel_nll(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multilabel_inputs(probs, labels)
    p = p.to(torch.float64)
    p_outcome = torch.where(y == 1, p, 1 - p)
    return _weighted_mean(-p_outcome.clamp_min(torch.finfo(torch.float64).tiny).log().mean(1))


def multilabel_brier(probs: Any, labels: Any) -> Evaluate:
    p, y = core.multilabel_inputs(probs, labels)
    return _weighted_mean(((p.to(torch.float64) - y) ** 2).mean(1))


def hamming_loss(probs: Any, labels: Any, threshold: float = 0.5) -> Evaluate:
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
    p, y = core.multilabel_inputs(probs, labels)
    return _weighted_mean(((p >= threshold) != (y == 1)).to(torch.float64).mean(1))


def true_rms(probs: Any, true_posteriors: Any) -> Evaluate:
    p_hat, p_true = core.estimate_and_posteriors(probs, true_posteriors)
    mean_square = _weighted_mean(((p_hat - p_true) ** 2).mean(1))
    return lambda weights: mean_square(weights).sqrt()


def class_recall(probs: Any, labels: Any, class_index: int) -> Evaluate:
    p, y = core.multiclass_inputs(probs, labels)
    class_index = core.checked_class_index(class_index, p.shape[1])
    is_class = (y == class_index).to(torch.float64)
    hit = is_class * (p.argmax(1) == class_index).to(torch.float64)
    return lambda weights: _safe_ratio(weights @ hit, weights @ is_class)


def _confusion(probs: Any, labels: Any) -> tuple[int, Callable[[torch.Tensor], torch.Tensor]]:
    """K and a function giving the (B, K, K) weighted confusion matrices [true class, predicted class]."""
    p, y = core.multiclass_inputs(probs, labels)
    k = p.shape[1]
    cells = torch.nn.functional.one_hot(y * k + p.argmax(1), k * k).to(torch.float64)
    return k, lambda weights: (weights @ cells).reshape(-1, k, k)


def _per_class_counts(confusion: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """True positives, false positives, false negatives per class, and which classes are in labels or predictions
    (the class set of sklearn's macro averages)."""
    true_positive = confusion.diagonal(dim1=1, dim2=2)
    false_positive = confusion.sum(1) - true_positive
    false_negative = confusion.sum(2) - true_positive
    present = (confusion.sum(1) + confusion.sum(2)) > 0
    return true_positive, false_positive, false_negative, present


def _macro_over_present(score: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    return (torch.where(present, score, torch.zeros_like(score))).sum(1) / present.sum(1)


def macro_f1(probs: Any, labels: Any) -> Evaluate:
    _, confusion = _confusion(probs, labels)

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        tp, fp, fn, present = _per_class_counts(confusion(weights))
        f1 = _safe_ratio(2 * tp, 2 * tp + fp + fn).nan_to_num(nan=0.0)  # zero_division=0
        return _macro_over_present(f1, present)

    return evaluate


def jaccard(probs: Any, labels: Any) -> Evaluate:
    _, confusion = _confusion(probs, labels)

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        tp, fp, fn, present = _per_class_counts(confusion(weights))
        return _macro_over_present(_safe_ratio(tp, tp + fp + fn).nan_to_num(nan=0.0), present)

    return evaluate


def cohen_kappa(probs: Any, labels: Any) -> Evaluate:
    """κ = (p_o − p_e) / (1 − p_e) from the confusion matrix; NaN when p_e = 1 (one class in labels and
    predictions), as :func:`helpers.metrics.cohen_kappa`."""
    _, confusion = _confusion(probs, labels)

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        c = confusion(weights)
        total = c.sum((1, 2))
        observed = c.diagonal(dim1=1, dim2=2).sum(1) / total
        expected = (c.sum(2) * c.sum(1)).sum(1) / total**2
        single_class = (c.sum(2) + c.sum(1) > 0).sum(1) == 1
        kappa = (observed - expected) / torch.where(single_class, torch.ones_like(expected), 1 - expected)
        return torch.where(single_class, torch.full_like(kappa, float("nan")), kappa)

    return evaluate


# ----------------------------------------------------------------------------------------------------------------
# R-AUC, the area under the accuracy–retention curve (helpers.metrics.selective; LS+ paper Fig. 1)
# ----------------------------------------------------------------------------------------------------------------
def r_auc(probs: Any, labels: Any) -> Evaluate:
    """R-AUC = 1 − (Σ_{i=1}^{N} E(i) − E(N)/2) / N² (trapezoid rule on r = i/N). With tie groups g of n_g rows
    starting after a_g rows and holding e_g errors, the tie-averaged E of
    :func:`helpers.metrics.retention_curve` gives Σ_i E(i) = Σ_g e_g (N − a_g − (n_g − 1)/2). Under
    multiplicity weights every copy of a row falls in the row's tie group, so n_g, e_g and a_g are weighted sums over
    the rows sorted once by confidence."""
    confidence, errors = selective.confidences_and_errors(probs, labels)
    order = torch.argsort(confidence, descending=True, stable=True)
    _, group_sizes = torch.unique_consecutive(confidence[order], return_counts=True)
    group_of = torch.repeat_interleave(torch.arange(group_sizes.numel(), device=confidence.device), group_sizes)
    sorted_errors = errors[order]

    def evaluate(weights: torch.Tensor) -> torch.Tensor:
        w = _columns(weights.to(torch.float64), order)
        shape = (w.shape[0], group_sizes.numel())
        n_g = torch.zeros(shape, dtype=torch.float64, device=w.device).index_add_(1, group_of, w)
        e_g = torch.zeros(shape, dtype=torch.float64, device=w.device).index_add_(1, group_of, w * sorted_errors)
        a_g = torch.cumsum(n_g, 1) - n_g
        n = w.sum(1)
        summed_errors = (e_g * (n[:, None] - a_g - (n_g - 1) / 2)).sum(1)
        return 1 - (summed_errors - e_g.sum(1) / 2) / n**2

    return evaluate
