"""Calibration and classification metrics (functional, torch-native, vectorised).

**Conventions**

* Multi-class: ``probs`` (N, K) rows on the simplex, ``labels`` (N,) integer class indices.
  Multi-label: ``probs`` (N, T) per-label P(y_t = 1), ``labels`` (N, T) in {0, 1}.
* Inputs may be torch tensors (any device; computation stays there) or numpy arrays; results are Python floats.
* Calibration sums are accumulated in float64 whatever the input dtype.
* Binned calibration errors use ONE binning routine (in :mod:`helpers.metrics.core`, with the input checks that
  :mod:`helpers.metrics.weighted` and :mod:`helpers.metrics.selective` share: :func:`_equal_width_bin_index` for
  equal-width bins, :func:`_equal_mass_bin_index` for equal-mass bins, :func:`_bin_sums` for the per-bin sums),
  shared by :func:`reliability_bins` (what the plots draw) and every ECE-like number.

Equal-width bins
    ``n_bins`` bins with edges ``torch.linspace(0, 1, n_bins + 1, dtype=float64)``. Bin b is the half-open
    interval (edge_b, edge_{b+1}], except that a confidence of exactly 0 falls in the first bin. So a
    confidence of exactly 1 falls in the last bin and a confidence exactly on an interior edge falls in the
    lower bin. (torchmetrics uses [lo, hi) bins and puts a confidence of 1 in an extra, (n_bins+1)-th bin:
    Lightning-AI/torchmetrics issues 1646 and 3510. Away from the edges the two agree; the tests check this.)

Which "ACE"? The literature uses the acronym for two different things:
    * :func:`adaptive_ece` -- top-label, equal-mass bins, sample-weighted (the "AdaECE" of Mukhoti et al. 2020,
      "Calibrating deep neural networks using focal loss"; the "ACE" of the LS+ paper, Sambyal et al. MICCAI 2024,
      its ref. [22]). Not the ACE of Nixon et al. 2019 ("Measuring calibration in deep learning"), which shares only
      the equal-mass ranges and is class-wise and unweighted (see :func:`adaptive_ece`);
    * :func:`average_calibration_error` -- equal-width bins, every NON-EMPTY bin weighted equally (Neumann et al.
      2018, "Relaxed softmax"; the "ACE" of the SPA paper, Cheng & Vasconcelos CVPR 2024, its ref. [51], and of
      the LDACE paper, Pal et al. ICASSP 2025).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from sklearn import metrics as sk_metrics

from helpers.metrics import selective, weighted
from helpers.metrics.core import (  # noqa: F401  (re-exported: other modules and the tests use these names)
    _CHUNK_ENTRIES,
    _FAST_BINNING_MAX_BINS,
    _LOGITS_HINT,
    _NEAR_EDGE,
    DEFAULT_N_BINS,
    ROW_SUM_TOLERANCE,
    _auroc_rows,
    _average_error,
    _average_precision_rows,
    _bin_gaps,
    _bin_sums,
    _BinSums,
    _cell_index,
    _check_n_bins,
    _class_index,
    _debiased_squared_error,
    _equal_mass_bin_index,
    _equal_width_bin_index,
    _estimate_and_posteriors,
    _expected_error,
    _max_error,
    _multiclass_inputs,
    _multilabel_inputs,
    _probability_matrix,
    _row_sum_tolerance,
    _tie_groups,
    _to_tensor,
    _top_label,
    bin_edges,
)

__all__ = [
    "ece",
    "adaptive_ece",
    "average_calibration_error",
    "mce",
    "classwise_ece",
    "brier",
    "nll",
    "multilabel_ece",
    "multilabel_average_calibration_error",
    "multilabel_mce",
    "multilabel_brier",
    "multilabel_nll",
    "hamming_loss",
    "macro_auroc",
    "map_per_class",
    "map_per_example",
    "accuracy",
    "confidence_minus_accuracy",
    "macro_f1",
    "cohen_kappa",
    "jaccard",
    "auroc_ovr",
    "bootstrap",
    "BootstrapResult",
    "true_calibration_error",
    "TrueCalibrationError",
    "reliability_bins",
    "ReliabilityBins",
    "bin_edges",
    "multiclass_report",
    "multilabel_report",
]

POOLED = "pooled over labels"  # ReliabilityBins.kind of multi-label bins pooled over every (example, label)


@dataclass(frozen=True)
class ReliabilityBins:
    """Equal-width reliability-diagram data: what :mod:`helpers.plots.figures` draws and what ECE/MCE/ACE reduce.

    ``edges`` (n_bins + 1,), ``counts`` / ``confidence_sum`` / ``outcome_sum`` (n_bins,), float64 on the CPU.
    ``kind`` is "top-label" (multi-class) or "pooled over labels" (multi-label).
    """

    edges: torch.Tensor
    counts: torch.Tensor
    confidence_sum: torch.Tensor
    outcome_sum: torch.Tensor
    kind: str

    @property
    def n_bins(self) -> int:
        return self.counts.shape[0]

    @property
    def n_samples(self) -> int:
        return int(self.counts.sum())

    @property
    def nonempty(self) -> torch.Tensor:
        return self.counts > 0

    @property
    def confidence(self) -> torch.Tensor:
        """Mean confidence per bin (NaN for empty bins)."""
        return torch.where(self.nonempty, self.confidence_sum / self.counts, torch.full_like(self.counts, math.nan))

    @property
    def accuracy(self) -> torch.Tensor:
        """Per-bin accuracy (top-label) or frequency of "present" (pooled multi-label); NaN for empty bins."""
        return torch.where(self.nonempty, self.outcome_sum / self.counts, torch.full_like(self.counts, math.nan))

    def _sums(self) -> _BinSums:
        return _BinSums(self.counts[None], self.confidence_sum[None], self.outcome_sum[None])

    @property
    def ece(self) -> float:
        return float(_expected_error(self._sums())[0])

    @property
    def mce(self) -> float:
        return float(_max_error(self._sums())[0])

    @property
    def average_calibration_error(self) -> float:
        return float(_average_error(self._sums())[0])


def reliability_bins(
    probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, multilabel: bool = False
) -> ReliabilityBins:
    """Per-bin counts, mean confidence and accuracy for a reliability diagram (equal-width bins, see module doc).

    Multi-class: the top-label forecast (confidence max_k p_k, outcome 1[argmax = label]; Guo et al. 2017, Sec. 2).
    ``multilabel=True``: every (sample, label) pair is one binary forecast p of "present" with outcome y, pooled
    over all labels (see :func:`multilabel_ece`).
    """
    _check_n_bins(n_bins)
    if multilabel:
        p, y = _multilabel_inputs(probs, labels)
        confidence, outcome, kind = p.reshape(-1, 1), y.reshape(-1, 1), POOLED
    else:
        p, y = _multiclass_inputs(probs, labels)
        (confidence, outcome), kind = _top_label(p, y), "top-label"
    sums = _bin_sums(confidence, outcome, n_bins)
    return ReliabilityBins(
        bin_edges(n_bins), sums.counts[0].cpu(), sums.confidence_sum[0].cpu(), sums.outcome_sum[0].cpu(), kind
    )


# ----------------------------------------------------------------------------------------------------------------
# multi-class calibration
# ----------------------------------------------------------------------------------------------------------------
def ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Top-label expected calibration error with equal-width bins.

    ECE = sum_b (``|B_b|`` / N) ``|acc(B_b) - conf(B_b)|`` (Naeini et al. 2015; Guo et al. 2017 eq. 3). Bins are
    (lo, hi] with 0 in the first bin (module doc).
    """
    return reliability_bins(probs, labels, n_bins).ece


def mce(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Top-label maximum calibration error: max over non-empty equal-width bins of ``|acc - conf|``
    (Guo et al. eq. 5)."""
    return reliability_bins(probs, labels, n_bins).mce


def average_calibration_error(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Top-label average calibration error: the unweighted mean of ``|acc - conf|`` over the NON-EMPTY equal-width bins.

    Neumann et al. 2018 ("Relaxed softmax", ACE); the "ACE" of the SPA and LDACE papers. Unlike ECE a bin with one
    sample weighs as much as a bin with thousands, so ACE is noisier on small test sets.
    """
    return reliability_bins(probs, labels, n_bins).average_calibration_error


def adaptive_ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Top-label ECE with equal-mass bins (sample-weighted ``|acc - conf|``): the "AdaECE" of Mukhoti et al. 2020
    ("Calibrating deep neural networks using focal loss", NeurIPS), and the "ACE" of the LS+ paper.

    Bins: the samples sorted by confidence and cut into ``n_bins`` contiguous chunks of sizes floor/ceil(N / n_bins)
    (rank r goes to bin floor(r n_bins / N); ties keep their input order and may be split between neighbouring
    chunks). Not Nixon et al. 2019's ACE ("Measuring calibration in deep learning"), which borrows only the
    equal-mass ("adaptive") ranges: their ACE is class-wise (ranges of every class's p_k, outcomes 1[y = k]) and
    unweighted, (1 / KR) Σ_k Σ_r ``|acc(r, k) − conf(r, k)|``. The LS+ numbers (ACE close to ECE, far from SCE) indicate
    the top-label, sample-weighted form computed here.
    """
    _check_n_bins(n_bins)
    p, y = _multiclass_inputs(probs, labels)
    confidence, correct = _top_label(p, y)
    index = _equal_mass_bin_index(confidence[:, 0], n_bins)[:, None]
    return float(_expected_error(_bin_sums(confidence, correct, n_bins, bin_index=index))[0])


def classwise_ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Class-wise ECE, the LS+ paper's "SCE" (static calibration error, Nixon et al. 2019).

    SCE = (1/K) sum_k sum_b (``|B_bk|`` / N) ``|acc(b, k) - conf(b, k)|``, where for class k every sample is the
    one-vs-rest forecast p_k with outcome 1[y = k], binned by p_k in equal-width bins (module doc).
    """
    _check_n_bins(n_bins)
    p, y = _multiclass_inputs(probs, labels)
    # the outcome 1[y = k] is 1 only in column y: pass y instead of a dense (N, K) one-hot
    return float(_expected_error(_bin_sums(p, y, n_bins)).mean())


def brier(probs: Any, labels: Any) -> float:
    """Multi-class Brier score: (1/N) sum_i sum_k (p_ik - 1[y_i = k])^2 (Brier 1950), in [0, 2]."""
    p, y = _multiclass_inputs(probs, labels)
    p = p.to(torch.float64)
    p_true = p.gather(1, y[:, None])[:, 0]
    return float(((p * p).sum(1) - 2.0 * p_true + 1.0).mean())


def _mean_negative_log(p_outcome: torch.Tensor, metric: str) -> float:
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


def nll(probs: Any, labels: Any) -> float:
    """Mean negative log-likelihood -(1/N) sum_i log p_{i, y_i} (log(0) handled as in ``_mean_negative_log``)."""
    p, y = _multiclass_inputs(probs, labels)
    return _mean_negative_log(p.gather(1, y[:, None])[:, 0].to(torch.float64), "nll")


def multilabel_nll(probs: Any, labels: Any) -> float:
    """Mean binary negative log-likelihood over all (sample, label) forecasts of "present": -log p where y = 1,
    -log(1 - p) where y = 0 (log(0) handled as in ``_mean_negative_log``)."""
    p, y = _multilabel_inputs(probs, labels)
    p = p.to(torch.float64)
    return _mean_negative_log(torch.where(y == 1, p, 1 - p), "multilabel_nll")


# ----------------------------------------------------------------------------------------------------------------
# multi-label calibration
# ----------------------------------------------------------------------------------------------------------------
def _multilabel_sums(probs: Any, labels: Any, n_bins: int, per_label: bool) -> _BinSums:
    """Pooled: one group of N*T binary forecasts; per_label: T groups of N forecasts."""
    _check_n_bins(n_bins)
    p, y = _multilabel_inputs(probs, labels)
    if not per_label:
        p, y = p.reshape(-1, 1), y.reshape(-1, 1)
    return _bin_sums(p, y, n_bins)


_MULTILABEL_DEFINITION = """
    Each (sample, label) pair is one binary forecast of "present": confidence p_it = P(y_t = 1), outcome y_it.
    This is NOT the top-label confidence max(p, 1 - p): a forecast of 0.1 lands in a low bin and is compared with
    the frequency of "present" there. ``per_label=False`` pools all N*T forecasts into one set of bins;
    ``per_label=True`` computes the metric for each label separately and returns the unweighted mean over labels.
    The SPA paper defers its definition to an appendix that is not in our copy and we could not inspect the
    LDACE evaluation code, so which of the two (pooled or per label) they report is not verified here.
"""


def multilabel_ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, per_label: bool = False) -> float:
    return float(_expected_error(_multilabel_sums(probs, labels, n_bins, per_label)).mean())


def multilabel_average_calibration_error(
    probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, per_label: bool = False
) -> float:
    return float(_average_error(_multilabel_sums(probs, labels, n_bins, per_label)).mean())


def multilabel_mce(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, per_label: bool = False) -> float:
    return float(_max_error(_multilabel_sums(probs, labels, n_bins, per_label)).mean())


multilabel_ece.__doc__ = "Multi-label ECE (sample-weighted, equal-width bins).\n" + _MULTILABEL_DEFINITION
multilabel_average_calibration_error.__doc__ = (
    "Multi-label average calibration error (Neumann et al. 2018; the ACE of the SPA and LDACE papers):\n"
    "    the unweighted mean of ``|freq - conf|`` over non-empty equal-width bins.\n" + _MULTILABEL_DEFINITION
)
multilabel_mce.__doc__ = (
    "Multi-label maximum calibration error (the MCE of the SPA and LDACE papers, Naeini et al. 2015).\n"
    + _MULTILABEL_DEFINITION
)


def multilabel_brier(probs: Any, labels: Any) -> float:
    """Mean over all (sample, label) pairs of (p - y)^2, i.e. the per-label binary Brier score averaged."""
    p, y = _multilabel_inputs(probs, labels)
    return float(((p.to(torch.float64) - y) ** 2).mean())


def hamming_loss(probs: Any, labels: Any, threshold: float = 0.5) -> float:
    """Fraction of (sample, label) pairs whose decision 1[p >= threshold] differs from the label."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
    p, y = _multilabel_inputs(probs, labels)
    return float(((p >= threshold) != (y == 1)).to(torch.float64).mean())


def map_per_class(probs: Any, labels: Any) -> float:
    """mAP@y: mean over labels of the average precision ranking the samples by p_t (SPA paper, Sec. 6).

    Labels with no positive sample have no AP; they are skipped with a warning (ValueError if none is left).
    """
    p, y = _multilabel_inputs(probs, labels)
    ap = _average_precision_rows(p.T, y.T)
    return _mean_over_defined(ap, "map_per_class", "label(s) without a positive sample")


def map_per_example(probs: Any, labels: Any) -> float:
    """mAP@x: mean over samples of the average precision ranking that sample's labels by p (SPA paper, Sec. 6).

    Samples with no positive label (most ChestMNIST images) have no AP and are excluded from the mean, silently:
    this is the usual protocol (Ridnik et al. 2021) and not an anomaly. ValueError if no sample has a positive.
    """
    p, y = _multilabel_inputs(probs, labels)
    ap = _average_precision_rows(p, y)
    defined = ~torch.isnan(ap)
    if not bool(defined.any()):
        raise ValueError("map_per_example: no sample has a positive label, so no average precision is defined")
    return float(ap[defined].mean())


def _mean_over_defined(values: torch.Tensor, metric: str, what: str) -> float:
    defined = ~torch.isnan(values)
    if not bool(defined.any()):
        raise ValueError(f"{metric}: undefined for every column ({what})")
    n_skipped = int((~defined).sum())
    if n_skipped:
        skipped = torch.nonzero(~defined)[:, 0].tolist()
        warnings.warn(f"{metric}: skipped {n_skipped} {what}: columns {skipped}", RuntimeWarning, stacklevel=3)
    return float(values[defined].mean())


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def macro_auroc(probs: Any, labels: Any) -> float:
    """Macro AUROC over labels: the unweighted mean over labels of each label's ROC AUC.

    Computed in torch for all labels at once (Mann-Whitney U with mid-ranks; tested equal to sklearn's
    ``roc_auc_score(..., average="macro")``), about 50x faster than sklearn per call, which matters for the
    bootstrap. A label whose column holds a single class (no positive or no negative) has no AUROC: it is
    skipped with a RuntimeWarning naming it; ValueError if every label is like that.
    """
    p, y = _multilabel_inputs(probs, labels)
    return _mean_over_defined(_auroc_rows(p.T, y.T), "macro_auroc", "label(s) with a single class present")


# ----------------------------------------------------------------------------------------------------------------
# multi-class classification metrics (scikit-learn)
# ----------------------------------------------------------------------------------------------------------------
def _decisions(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p, y = _multiclass_inputs(probs, labels)
    return _numpy(y), _numpy(p.argmax(dim=1))


def accuracy(probs: Any, labels: Any) -> float:
    """Top-1 accuracy (sklearn ``accuracy_score`` of argmax predictions)."""
    y, prediction = _decisions(probs, labels)
    return float(sk_metrics.accuracy_score(y, prediction))


def confidence_minus_accuracy(probs: Any, labels: Any) -> float:
    """Mean top-label confidence minus top-1 accuracy: positive for an over-confident model, negative for an
    under-confident one (the sign that the ECE, an average of absolute gaps, hides)."""
    p, y = _multiclass_inputs(probs, labels)
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
    class is present, but is computed by the same torch Mann-Whitney routine as :func:`macro_auroc`: the
    bootstrap calls it 1,000 times per model, and sklearn's per-class calls made one interval take about a
    minute. K = 2: the AUROC of p_1 (= that of p_0). A class absent from the labels has no AUROC: skipped with a
    RuntimeWarning.
    """
    p, y = _multiclass_inputs(probs, labels)
    if p.shape[1] == 2:
        p, onehot = p[:, 1:], (y == 1)[:, None]
    else:
        onehot = torch.nn.functional.one_hot(y, p.shape[1])
    return _mean_over_defined(_auroc_rows(p.T, onehot.T.to(p.dtype)), "auroc_ovr", "class(es) absent from the labels")


# ----------------------------------------------------------------------------------------------------------------
# synthetic data, bootstrap, reports
# ----------------------------------------------------------------------------------------------------------------
class TrueCalibrationError(NamedTuple):
    """Estimation error of p_hat against the known posterior p (all entries), and its top-label form.

    ``mean_abs`` = mean over all entries ``|p_hat - p|``, ``rms`` = sqrt(mean (p_hat - p)^2);
    ``top_label`` = mean_i ``|p_hat_i(yhat_i) - p_i(yhat_i)|`` for multi-class (None for multi-label).
    """

    mean_abs: float
    rms: float
    top_label: float | None


def true_calibration_error(probs: Any, true_posteriors: Any, multilabel: bool = False) -> TrueCalibrationError:
    """Distance between predicted probabilities and the exact posteriors of a synthetic data set.

    This is the error of the probability estimate itself. It upper-bounds the true calibration error: by Jensen,
    ``|E[p(x) | p_hat(x)] - p_hat(x)| <= E[|p(x) - p_hat(x)| | p_hat(x)]``, so ``top_label`` bounds the true
    top-label ECE and ``mean_abs`` (multi-label) bounds the true pooled multi-label ECE; both are 0 when
    probs equal the posteriors, where a binned ECE estimate is still positive (its bias).

    The task is given, never inferred from the values (T = 2 multi-label posteriors may happen to sum to 1):
    multi-class by default, whose rows must sum to 1; ``multilabel=True`` for per-label probabilities.
    """
    if not isinstance(multilabel, bool):
        raise TypeError(f"multilabel must be True or False (the task is not inferred), got {multilabel!r}")
    p_hat, p_true = _estimate_and_posteriors(probs, true_posteriors)
    tolerance = max(_row_sum_tolerance(probs), _row_sum_tolerance(true_posteriors))
    if not multilabel:
        for name, rows in (("probs", p_hat), ("true_posteriors", p_true)):
            worst = (rows.sum(1) - 1).abs().max()
            if worst > tolerance:
                raise ValueError(
                    f"multi-class {name} must have rows summing to 1 (a row is off by "
                    f"{float(worst):.3g}); for per-label (multi-label) probabilities pass "
                    f"multilabel=True; otherwise " + _LOGITS_HINT
                )
    difference = p_hat - p_true
    top_label = None
    if not multilabel:
        prediction = p_hat.argmax(1, keepdim=True)
        top_label = float(difference.gather(1, prediction).abs().mean())
    return TrueCalibrationError(float(difference.abs().mean()), float(difference.pow(2).mean().sqrt()), top_label)


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimate on the full data and a percentile interval; unpacks as ``estimate, low, high``."""

    estimate: float
    low: float
    high: float
    level: float
    samples: torch.Tensor  # (n,) metric on each resample, float64; NaN where the metric was undefined

    def __iter__(self) -> Iterator[float]:
        return iter((self.estimate, self.low, self.high))

    @property
    def n_valid(self) -> int:
        return int((~torch.isnan(self.samples)).sum())


def bootstrap(
    metric: Callable[..., float],
    probs: Any,
    labels: Any,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    **metric_kwargs: Any,
) -> BootstrapResult:
    """Non-parametric bootstrap of any metric of this module (Efron & Tibshirani 1993, percentile interval).

    All n index sets (sampling N rows with replacement) come from one ``torch.randint`` call with a
    ``torch.Generator`` seeded by ``seed``, so the result is deterministic. The interval is the (1-level)/2 and
    (1+level)/2 quantiles (linear interpolation) of the n resampled values; resamples where the metric is NaN
    (e.g. kappa on a one-class resample) or raises ValueError (e.g. AUROC with no class left to score) are NaN in
    ``samples`` and left out of the quantiles, with a warning giving their count (``n_valid`` says how many
    remain).
    Warnings raised inside resamples are collected and re-issued once, with their count.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n (number of bootstrap resamples) must be an integer >= 2, got {n!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    p = _to_tensor(probs, "probs")
    y = _to_tensor(labels, "labels").to(p.device)
    if p.ndim < 1 or p.shape[0] == 0:
        raise ValueError(f"probs is empty (shape {tuple(p.shape)}); metrics need at least one sample")
    if y.shape[:1] != p.shape[:1]:
        raise ValueError(f"probs has {p.shape[0]} rows but labels has {tuple(y.shape)[:1]} rows; they must match")
    estimate = float(metric(p, y, **metric_kwargs))
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(p.shape[0], (n, p.shape[0]), generator=generator).to(p.device)
    undefined: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        samples = torch.tensor(
            [_resample_value(metric, p[i], y[i], metric_kwargs, undefined) for i in indices], dtype=torch.float64
        )
    if caught:
        warnings.warn(
            f"bootstrap: {len(caught)} warning(s) inside the {n} resamples, e.g.: {caught[0].message}",
            RuntimeWarning,
            stacklevel=2,
        )
    if undefined:
        warnings.warn(
            f"bootstrap: {len(undefined)} of {n} resamples left out (NaN in samples): "
            f"{getattr(metric, '__name__', metric)} is undefined on them, e.g.: {undefined[0]}",
            RuntimeWarning,
            stacklevel=2,
        )
    valid = samples[~torch.isnan(samples)]
    if valid.numel() == 0:
        raise ValueError(f"bootstrap: {getattr(metric, '__name__', metric)} is NaN on every resample")
    tails = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(valid, tails).tolist()
    return BootstrapResult(estimate, low, high, level, samples)


def _resample_value(
    metric: Callable[..., float],
    probs: torch.Tensor,
    labels: torch.Tensor,
    metric_kwargs: dict[str, Any],
    undefined: list[str],
) -> float:
    """The metric on one resample; NaN (and the reason appended to ``undefined``) where it is undefined there.

    The inputs were validated by the estimate on the full data, so a ValueError on a resample means a degenerate
    resample (e.g. a single class: no AUROC), which the percentile bootstrap leaves out.
    """
    try:
        return float(metric(probs, labels, **metric_kwargs))
    except ValueError as error:
        undefined.append(str(error))
        return math.nan


def multiclass_report(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> dict[str, float]:
    """Every multi-class metric of this module as a flat dict of floats (for result tables)."""
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


def multilabel_report(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> dict[str, float]:
    """Every multi-label metric of this module as a flat dict of floats; ``*_per_label`` = macro over labels."""
    _multilabel_inputs(probs, labels)
    report = {
        "hamming_loss": hamming_loss(probs, labels),
        "macro_auroc": macro_auroc(probs, labels),
        "map_per_class": map_per_class(probs, labels),
        "map_per_example": map_per_example(probs, labels),
        "brier": multilabel_brier(probs, labels),
    }
    for per_label, suffix in ((False, ""), (True, "_per_label")):
        sums = _multilabel_sums(probs, labels, n_bins, per_label)  # binned once for the three errors
        report["ece" + suffix] = float(_expected_error(sums).mean())
        report["average_calibration_error" + suffix] = float(_average_error(sums).mean())
        report["mce" + suffix] = float(_max_error(sums).mean())
    return report


# ----------------------------------------------------------------------------------------------------------------
# smooth and debiased calibration errors, the true RMS error, smooth reliability diagrams
# ----------------------------------------------------------------------------------------------------------------
__all__ += [
    "smooth_ece",
    "multilabel_smooth_ece",
    "debiased_ece",
    "true_rms",
    "class_recall",
    "smooth_reliability",
    "SmoothReliability",
]


def _relplot_smooth_ece(forecast: torch.Tensor, outcome: torch.Tensor) -> float:
    import relplot  # imports pandas, seaborn and scikit-learn estimators: loaded only when a smooth ECE is asked for

    return float(relplot.smECE(_numpy(forecast.to(torch.float64)), _numpy(outcome.to(torch.float64))))


def smooth_ece(probs: Any, labels: Any) -> float:
    """Top-label smooth ECE (Błasiok & Nakkiran 2023, "Smooth ECE: principled reliability diagrams via kernel
    smoothing"), computed by ``relplot.smECE`` on the top-label confidences and their correctness.

    smECE_σ = ∫ ``|r̂_σ(t)|`` δ̂_σ(t) dt, where r̂_σ is the Nadaraya-Watson kernel regression of the residual
    confidence − correctness on the confidence (reflected Gaussian kernel of bandwidth σ) and δ̂_σ the kernel
    density of the confidences; the bandwidth is the fixed point σ* = smECE_σ* (found by relplot's bisection).
    No bin count to choose, and a consistent calibration measure in the paper's sense (within constant factors of
    the distance to the nearest calibrated predictor). Like any estimate from a finite sample it is still positive
    for a perfectly calibrated model. relplot discretises the kernel on a 1,000-point grid and reflects it at 1
    without duplicating the last grid point, so confidences within 0.001 of 1 carry between half and all of the
    weight of any other (exactly 1: half). Where many confidences sit there and are better calibrated than the
    rest, the estimate is inflated: notebook 01's over-fitting recipe (35–47 % of its confidences, 97–98 % correct)
    reads 18.1 % against a binned ECE of 15.2 %, and 14.5–15.5 % once those confidences are moved to 0.998.
    """
    p, y = _multiclass_inputs(probs, labels)
    confidence, correct = _top_label(p, y)
    return _relplot_smooth_ece(confidence[:, 0], correct[:, 0])


def multilabel_smooth_ece(probs: Any, labels: Any) -> float:
    """Smooth ECE (see :func:`smooth_ece`) of every (sample, label) forecast of "present" pooled into one set:
    ``relplot.smECE`` on the flattened probabilities and their 0/1 outcomes (the pooled analogue of
    :func:`multilabel_ece`)."""
    p, y = _multilabel_inputs(probs, labels)
    return _relplot_smooth_ece(p.reshape(-1), y.reshape(-1))


def _kumar_equal_mass_bin_index(confidence: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Bins of ``calibration.get_equal_bins`` + ``calibration.fast_bin`` (uncertainty-calibration 0.1.4).

    The sorted confidences are cut into min(n_bins, N) chunks as ``numpy.array_split`` does (the first N mod k
    chunks one longer); each interior boundary is the midpoint of the last value of a chunk and the first value of
    the next, the last boundary is 1.0, and a confidence c goes to the first bin whose boundary is >= c. Unlike
    :func:`_equal_mass_bin_index`, tied confidences therefore always share a bin (a tie across a chunk boundary
    falls in the lower bin). Returns (N,) int64 bin indices in [0, min(n_bins, N)).
    """
    n = confidence.shape[0]
    n_chunks = min(n_bins, n)
    sorted_confidence = confidence.sort().values
    sizes = torch.full((n_chunks,), n // n_chunks, dtype=torch.long, device=confidence.device)
    sizes[: n % n_chunks] += 1
    ends = sizes.cumsum(0)[:-1]  # first index of chunks 1..k-1
    interior = (sorted_confidence[ends - 1] + sorted_confidence[ends]) / 2.0
    boundaries = torch.cat([interior, torch.ones(1, dtype=confidence.dtype, device=confidence.device)])
    # bucketize(right=False) is numpy.searchsorted(side="left"): the first boundary >= c
    return torch.bucketize(confidence, boundaries, right=False)


def debiased_ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Debiased top-label L2 calibration error of Kumar, Liang & Ma (NeurIPS 2019, "Verified uncertainty
    calibration"), with equal-mass bins.

    With bins B_b of n_b samples (equal mass, :func:`_kumar_equal_mass_bin_index`), mean confidence conf_b and
    accuracy acc_b:  CE² = Σ_b (n_b / N) [(conf_b − acc_b)² − acc_b (1 − acc_b) / (n_b − 1)], and the result is
    sqrt(max(CE², 0)). The subtracted term removes the plug-in estimate's upward bias from the label noise within a
    bin (a bin with fewer than 2 samples contributes 0). An L2 error, so it is not on the same scale as the L1
    :func:`ece`. Equal to the ``uncertainty-calibration`` package's
    ``calibration.lower_bound_scaling_ce(probs, labels, p=2, debias=True, num_bins=n_bins, mode="top-label")``,
    which is what ``get_calibration_error(probs, labels, p=2, debias=True, mode="top-label")`` computes for a
    model with continuous outputs (tested). Not reproduced: for probabilities with few distinct values (fewer than
    N/4 per class, e.g. the output of histogram binning) that function instead puts every distinct value in its
    own bin and ignores ``n_bins``.
    """
    _check_n_bins(n_bins)
    p, y = _multiclass_inputs(probs, labels)
    confidence, correct = _top_label(p, y)
    confidence = confidence.to(torch.float64)
    index = _kumar_equal_mass_bin_index(confidence[:, 0], n_bins)[:, None]
    squared = _debiased_squared_error(_bin_sums(confidence, correct, n_bins, bin_index=index))[0]
    return float(squared.clamp_min(0.0).sqrt())


def true_rms(probs: Any, true_posteriors: Any) -> float:
    """RMS error of the predicted probabilities against the exact posteriors of a synthetic set:
    sqrt(mean over every (image, label) pair of (η̂ − η)²).

    Its square is the excess Brier risk over the Bayes model: for each pair, E_y[(η̂ − y)²] − E_y[(η − y)²]
    = (η̂ − η)² when y ~ Bernoulli(η), so true_rms² = E_y[multilabel_brier(η̂, y) − multilabel_brier(η, y)] (tested).
    Unlike the mean absolute error it cannot be beaten by a constant forecast at each label's median posterior.
    This is :func:`true_calibration_error`'s ``rms`` over all entries (also meaningful for multi-class posteriors,
    where the excess multi-class Brier risk is K · true_rms²).
    """
    return true_calibration_error(probs, true_posteriors, multilabel=True).rms


def class_recall(probs: Any, labels: Any, class_index: int) -> float:
    """Recall of one class, P(argmax = k | y = k) (e.g. melanoma recall on DermaMNIST); NaN if no sample has label
    k (the bootstrap then counts the resample as degenerate)."""
    p, y = _multiclass_inputs(probs, labels)
    class_index = _class_index(class_index, p.shape[1])
    is_class = y == class_index
    n_class = int(is_class.sum())
    if n_class == 0:
        return math.nan
    return float((p.argmax(1)[is_class] == class_index).sum()) / n_class


@dataclass(frozen=True)
class SmoothReliability:
    """A smooth reliability diagram (Błasiok & Nakkiran 2023) computed by ``relplot.prepare_rel_diagram``.

    All arrays are float64 numpy arrays on the same ``mesh`` (M points in [0, 1]): ``mu`` the kernel regression of
    the outcome on the forecast (relplot's line: the mean of its bootstrap fits), ``lower`` / ``upper`` the 2.5 and
    97.5 % quantiles of ``n_bootstrap`` bootstrap fits (relplot's band), ``density`` the kernel density of the
    forecasts. ``smooth_ece`` and its ``bandwidth`` σ* (the kernel width of every curve) are relplot's smECE.
    ``kind`` is "top-label" or "pooled over labels", as in :class:`ReliabilityBins`.
    """

    mesh: np.ndarray
    mu: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    density: np.ndarray
    smooth_ece: float
    bandwidth: float
    kind: str
    n_samples: int
    n_bootstrap: int


def smooth_reliability(
    probs: Any, labels: Any, multilabel: bool = False, n_bootstrap: int = 200, seed: int = 0
) -> SmoothReliability:
    """Data of a smooth reliability diagram with its bootstrap band, computed by relplot (what
    :func:`helpers.plots.smooth_reliability_diagram` draws).

    Multi-class: top-label confidence and correctness; ``multilabel=True``: every (sample, label) forecast pooled.
    relplot draws its bootstrap resamples from numpy's global random state; it is seeded with ``seed`` for this
    call and restored afterwards, so the result is reproducible and the caller's random stream is unchanged.
    """
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 2:
        raise ValueError(f"n_bootstrap must be an integer >= 2, got {n_bootstrap!r}")
    if multilabel:
        p, y = _multilabel_inputs(probs, labels)
        forecast, outcome, kind = p.reshape(-1), y.reshape(-1), POOLED
    else:
        p, y = _multiclass_inputs(probs, labels)
        (confidence, correct), kind = _top_label(p, y), "top-label"
        forecast, outcome = confidence[:, 0], correct[:, 0]
    import relplot

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            # relplot 1.0.3 builds its band with a pandas call that pandas 3 deprecates (harmless; once per fit)
            warnings.filterwarnings("ignore", message="Passing a dict to DataFrame.from_records is deprecated")
            diagram = relplot.prepare_rel_diagram(
                _numpy(forecast.to(torch.float64)),
                _numpy(outcome.to(torch.float64)),
                plot_confidence_band=True,
                num_bootstrap=n_bootstrap,
                report_CE=True,
                report_CE_std=False,
            )
    finally:
        np.random.set_state(state)
    return SmoothReliability(
        diagram["mesh"],
        diagram["mu"],
        diagram["lower"],
        diagram["upper"],
        diagram["density"],
        float(diagram["ce"]),
        float(diagram["sigma"]),
        kind,
        int(forecast.numel()),
        n_bootstrap,
    )


# ----------------------------------------------------------------------------------------------------------------
# paired bootstrap of a difference between two models, averaged over training seeds
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["paired_bootstrap", "PairedBootstrapResult"]

import contextlib  # noqa: E402  (kept with the code that uses it, so this block merges cleanly)


@dataclass(frozen=True)
class PairedBootstrapResult:
    """Mean over seeds of metric(model a) − metric(model b) and its paired percentile interval; unpacks as
    ``estimate, low, high``. ``samples`` (n,) float64 holds the seed-averaged difference on each resample, NaN on the
    ``n_degenerate`` resamples where the metric was undefined for some model or seed (left out of the interval)."""

    estimate: float
    low: float
    high: float
    level: float
    samples: torch.Tensor
    n_seeds_a: int
    n_seeds_b: int

    def __iter__(self) -> Iterator[float]:
        return iter((self.estimate, self.low, self.high))

    @property
    def n_degenerate(self) -> int:
        return int(torch.isnan(self.samples).sum())

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _per_seed(probs: Any, name: str, n_rows: int) -> list[torch.Tensor]:
    """A list of (N, C) tensors, one per training seed, from a list/tuple of arrays or a single (N, C) array."""
    if isinstance(probs, (torch.Tensor, np.ndarray)):
        probs = [probs]
    if not isinstance(probs, (list, tuple)) or not probs:
        raise TypeError(
            f"{name} must be a non-empty list of (N, C) probability tensors, one per training seed "
            f"(or a single (N, C) tensor), got {type(probs).__name__}"
        )
    tensors = [_to_tensor(p, f"{name}[{s}]") for s, p in enumerate(probs)]
    for s, p in enumerate(tensors):
        if p.ndim != 2 or p.shape[0] != n_rows:
            raise ValueError(
                f"{name}[{s}] must be (N, C) with N = {n_rows} rows (the same test images as labels), "
                f"got shape {tuple(p.shape)}"
            )
    return tensors


@contextlib.contextmanager
def _one_cpu_thread() -> Iterator[None]:
    """torch's intra-op threads cost more than they save on the resamples' small operations: measured with
    bench/bench_paired_bootstrap.py on the 2-core machine, 2 threads took 4-5x as long as 1
    (``multilabel_analysis.bootstrap_table`` measured the same for its loop). The caller's setting is restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _resampled_differences_weighted(evaluators_a: list, evaluators_b: list, indices: torch.Tensor) -> torch.Tensor:
    n_resamples, n_rows = indices.shape
    chunk = max(1, min(n_resamples, _CHUNK_ENTRIES // n_rows))
    differences = []
    for start in range(0, n_resamples, chunk):
        rows = indices[start : start + chunk]
        weights = torch.zeros(rows.shape, dtype=torch.float64, device=rows.device)
        weights.scatter_add_(1, rows, torch.ones(1, dtype=torch.float64, device=rows.device).expand_as(rows))
        mean_a = torch.stack([evaluate(weights) for evaluate in evaluators_a]).mean(0)
        mean_b = torch.stack([evaluate(weights) for evaluate in evaluators_b]).mean(0)
        differences.append(mean_a - mean_b)
    return torch.cat(differences).cpu()


def _metric_or_nan(metric: Callable[..., float], probs: torch.Tensor, labels: torch.Tensor) -> float:
    try:
        return float(metric(probs, labels))
    except ValueError:  # undefined on this resample (e.g. no positive for any label): a degenerate resample
        return math.nan


def _resampled_differences_loop(
    metric: Callable[..., float],
    probs_a: list[torch.Tensor],
    probs_b: list[torch.Tensor],
    labels: torch.Tensor,
    indices: torch.Tensor,
) -> torch.Tensor:
    differences = torch.empty(indices.shape[0], dtype=torch.float64)
    for b, index in enumerate(indices):
        y = labels[index]
        mean_a = np.mean([_metric_or_nan(metric, p[index], y) for p in probs_a])
        mean_b = np.mean([_metric_or_nan(metric, p[index], y) for p in probs_b])
        differences[b] = mean_a - mean_b
    return differences


def paired_bootstrap(
    metric: Callable[..., float],
    probs_a: Any,
    probs_b: Any,
    labels: Any,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    vectorised: bool = True,
) -> PairedBootstrapResult:
    """Paired bootstrap of a difference between two models over the same test images, averaged over training seeds.

    ``probs_a`` / ``probs_b``: one (N, C) probability tensor per training seed (a list; a single tensor is one
    seed), all on the same N test images as ``labels`` (for :func:`true_rms` pass the exact posteriors as labels).
    Estimate: mean_s metric(a_s) − mean_s metric(b_s) on the full test set (with equal seed counts this is the mean
    of the per-seed differences). Each of the ``n`` replicates draws ONE set of N test indices with replacement and
    applies it to both models and every seed, so image difficulty cancels in the difference (a paired design); the
    interval is the (1 − level)/2 and (1 + level)/2 quantiles of the replicate differences (percentile interval,
    Efron & Tibshirani 1993). The index sets come from ``torch.randint`` seeded by ``seed``, exactly as in
    :func:`bootstrap`. It captures test-set sampling only; the spread over training seeds is reported separately
    (``helpers.metrics.seed_summary``).

    A replicate on which the metric is undefined for some model or seed (NaN, or a ValueError such as "no sample
    has a positive label") is left out of the interval and counted in ``n_degenerate``.

    Speed: metrics with a weighted form in :mod:`helpers.metrics.weighted` (every binned, proper-score, ranking and
    confusion-matrix metric of this module) evaluate all replicates at once from multiplicity weights;
    ``vectorised=False``, or a metric without one (:func:`smooth_ece`, :func:`multilabel_smooth_ece`, any other
    callable), calls the metric on each replicate: n × (seeds of a + seeds of b) calls (relplot's smooth ECE
    takes about 30 ms per call, so about 3 minutes for n = 1000 and 3 + 3 seeds; pass a smaller n for it).
    The resamples are evaluated with one torch CPU thread (faster here, see ``_one_cpu_thread``).

    The course's difference helpers (:func:`helpers.metrics.paired_differences`,
    :func:`helpers.metrics.paired_comparisons`)
    do not call this for the metrics of ``helpers.metrics.POINT_ESTIMATE_ONLY`` (the debiased ECE, whose n_b − 1
    correction assumes distinct samples while a resample repeats images): they report its point estimate only.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n (number of bootstrap resamples) must be an integer >= 2, got {n!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    y = _to_tensor(labels, "labels")
    if y.ndim < 1 or y.shape[0] == 0:
        raise ValueError(f"labels is empty (shape {tuple(y.shape)}); metrics need at least one sample")
    a = _per_seed(probs_a, "probs_a", y.shape[0])
    b = _per_seed(probs_b, "probs_b", y.shape[0])
    y = y.to(a[0].device)
    values_a = [float(metric(p, y)) for p in a]
    values_b = [float(metric(p, y)) for p in b]
    if any(math.isnan(v) for v in values_a + values_b):
        raise ValueError(
            f"paired_bootstrap: {getattr(metric, '__name__', metric)} is undefined (NaN) on the full "
            f"test set for some model or seed: a {values_a}, b {values_b}"
        )
    estimate = float(np.mean(values_a) - np.mean(values_b))
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(y.shape[0], (n, y.shape[0]), generator=generator).to(y.device)
    with warnings.catch_warnings(record=True) as caught, _one_cpu_thread():
        warnings.simplefilter("always")
        samples = None
        if vectorised:
            evaluators_a = [weighted_evaluator(metric, p, y) for p in a]
            if evaluators_a[0] is not None:
                evaluators_b = [weighted_evaluator(metric, p, y) for p in b]
                samples = _resampled_differences_weighted(evaluators_a, evaluators_b, indices)
        if samples is None:
            samples = _resampled_differences_loop(metric, a, b, y, indices)
    if caught:
        warnings.warn(
            f"paired_bootstrap: {len(caught)} warning(s) inside the {n} resamples, e.g.: {caught[0].message}",
            RuntimeWarning,
            stacklevel=2,
        )
    valid = samples[~torch.isnan(samples)]
    if valid.numel() == 0:
        raise ValueError(f"paired_bootstrap: {getattr(metric, '__name__', metric)} is undefined on every resample")
    tails = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(valid, tails).tolist()
    return PairedBootstrapResult(estimate, low, high, level, samples, len(a), len(b))


# ----------------------------------------------------------------------------------------------------------------
# weighted forms: the metrics above on many bootstrap resamples at once (helpers.metrics.weighted)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["WEIGHTED_METRICS", "weighted_evaluator"]

#: metric -> its weighted form in :mod:`helpers.metrics.weighted` (same keyword arguments)
WEIGHTED_METRICS: dict[Callable[..., float], Callable[..., weighted.Evaluate]] = {
    accuracy: weighted._accuracy,
    nll: weighted._nll,
    brier: weighted._brier,
    ece: weighted._ece,
    mce: weighted._mce,
    average_calibration_error: weighted._average_calibration_error,
    classwise_ece: weighted._classwise_ece,
    adaptive_ece: weighted._adaptive_ece,
    debiased_ece: weighted._debiased_ece,
    auroc_ovr: weighted._auroc_ovr,
    macro_f1: weighted._macro_f1,
    jaccard: weighted._jaccard,
    cohen_kappa: weighted._cohen_kappa,
    class_recall: weighted._class_recall,
    multilabel_ece: weighted._multilabel_ece,
    multilabel_mce: weighted._multilabel_mce,
    multilabel_average_calibration_error: weighted._multilabel_average_calibration_error,
    multilabel_brier: weighted._multilabel_brier,
    multilabel_nll: weighted._multilabel_nll,
    hamming_loss: weighted._hamming_loss,
    macro_auroc: weighted._macro_auroc,
    map_per_class: weighted._map_per_class,
    map_per_example: weighted._map_per_example,
    true_rms: weighted._true_rms,
    selective.r_auc: weighted._r_auc,
}


def weighted_evaluator(metric: Callable[..., float], probs: Any, labels: Any) -> weighted.Evaluate | None:
    """``evaluate(weights) -> (B,)`` for a metric with a weighted form (or a keyword-only ``functools.partial`` of
    one), else None (see :mod:`helpers.metrics.weighted`)."""
    function, keywords = metric, {}
    if isinstance(metric, functools.partial) and not metric.args:
        function, keywords = metric.func, dict(metric.keywords)
    weighted = WEIGHTED_METRICS.get(function)
    return None if weighted is None else weighted(probs, labels, **keywords)
