"""Calibration errors (functional, torch-native, vectorised): the binned ECE, MCE and ACE, the adaptive and class-wise
ECE, reliability-diagram bins, the smooth and the debiased ECE, smooth reliability diagrams, and the error of the
probabilities against exact posteriors.

**Conventions** (of every metric module: this one, :mod:`helpers.metrics.classification` and
:mod:`helpers.metrics.multilabel`)

* Multi-class: ``probs`` (N, K) rows on the simplex, ``labels`` (N,) integer class indices.
  Multi-label: ``probs`` (N, T) per-label P(y_t = 1), ``labels`` (N, T) in {0, 1}.
* Inputs may be torch tensors (any device; computation stays there) or numpy arrays; results are Python floats.
* Calibration sums are accumulated in float64 whatever the input dtype.
* Binned calibration errors use ONE binning routine (in :mod:`helpers.metrics.core`, with the input checks that
  :mod:`helpers.metrics.weighted` and :mod:`helpers.metrics.selective` share: :func:`equal_width_bin_index` for
  equal-width bins, :func:`equal_mass_bin_index` for equal-mass bins, :func:`bin_sums` for the per-bin sums),
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

import math
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from helpers.metrics.core import (
    DEFAULT_N_BINS,
    LOGITS_HINT,
    BinSums,
    average_error,
    bin_edges,
    bin_sums,
    check_n_bins,
    debiased_squared_error,
    equal_mass_bin_index,
    estimate_and_posteriors,
    expected_error,
    max_error,
    multiclass_inputs,
    multilabel_inputs,
    row_sum_tolerance,
    to_numpy,
    top_label,
)

__all__ = [
    "POOLED",
    "ReliabilityBins",
    "reliability_bins",
    "ece",
    "mce",
    "average_calibration_error",
    "adaptive_ece",
    "classwise_ece",
    "smooth_ece",
    "debiased_ece",
    "SmoothReliability",
    "smooth_reliability",
    "TrueCalibrationError",
    "true_calibration_error",
    "true_rms",
]


POOLED = "pooled over labels"  # ReliabilityBins.kind of multi-label bins pooled over every (example, label)


@dataclass(frozen=True)
class ReliabilityBins:
    """Equal-width reliability-diagram data: what :mod:`helpers.plots.reliability` draws and ECE/MCE/ACE reduce.

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

    def _sums(self) -> BinSums:
        return BinSums(self.counts[None], self.confidence_sum[None], self.outcome_sum[None])

    @property
    def ece(self) -> float:
        return float(expected_error(self._sums())[0])

    @property
    def mce(self) -> float:
        return float(max_error(self._sums())[0])

    @property
    def average_calibration_error(self) -> float:
        return float(average_error(self._sums())[0])


def reliability_bins(
    probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS, multilabel: bool = False
) -> ReliabilityBins:
    """Per-bin counts, mean confidence and accuracy for a reliability diagram (equal-width bins, see module doc).

    Multi-class: the top-label forecast (confidence max_k p_k, outcome 1[argmax = label]; Guo et al. 2017, Sec. 2).
    ``multilabel=True``: every (sample, label) pair is one binary forecast p of "present" with outcome y, pooled
    over all labels (see :func:`helpers.metrics.multilabel_ece`).
    """
    check_n_bins(n_bins)
    if multilabel:
        p, y = multilabel_inputs(probs, labels)
        confidence, outcome, kind = p.reshape(-1, 1), y.reshape(-1, 1), POOLED
    else:
        p, y = multiclass_inputs(probs, labels)
        (confidence, outcome), kind = top_label(p, y), "top-label"
    sums = bin_sums(confidence, outcome, n_bins)
    return ReliabilityBins(
        bin_edges(n_bins), sums.counts[0].cpu(), sums.confidence_sum[0].cpu(), sums.outcome_sum[0].cpu(), kind
    )


# ----------------------------------------------------------------------------------------------------------------
# top-label and class-wise binned calibration errors (multi-class)
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
    check_n_bins(n_bins)
    p, y = multiclass_inputs(probs, labels)
    confidence, correct = top_label(p, y)
    index = equal_mass_bin_index(confidence[:, 0], n_bins)[:, None]
    return float(expected_error(bin_sums(confidence, correct, n_bins, bin_index=index))[0])


def classwise_ece(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> float:
    """Class-wise ECE, the LS+ paper's "SCE" (static calibration error, Nixon et al. 2019).

    SCE = (1/K) sum_k sum_b (``|B_bk|`` / N) ``|acc(b, k) - conf(b, k)|``, where for class k every sample is the
    one-vs-rest forecast p_k with outcome 1[y = k], binned by p_k in equal-width bins (module doc).
    """
    check_n_bins(n_bins)
    p, y = multiclass_inputs(probs, labels)
    # the outcome 1[y = k] is 1 only in column y: pass y instead of a dense (N, K) one-hot
    return float(expected_error(bin_sums(p, y, n_bins)).mean())


# ----------------------------------------------------------------------------------------------------------------
# smooth and debiased calibration errors, smooth reliability diagrams
# ----------------------------------------------------------------------------------------------------------------
def relplot_smooth_ece(forecast: torch.Tensor, outcome: torch.Tensor) -> float:
    import relplot  # imports pandas, seaborn and scikit-learn estimators: loaded only when a smooth ECE is asked for

    return float(relplot.smECE(to_numpy(forecast.to(torch.float64)), to_numpy(outcome.to(torch.float64))))


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
    p, y = multiclass_inputs(probs, labels)
    confidence, correct = top_label(p, y)
    return relplot_smooth_ece(confidence[:, 0], correct[:, 0])


def _kumar_equal_mass_bin_index(confidence: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Bins of ``calibration.get_equal_bins`` + ``calibration.fast_bin`` (uncertainty-calibration 0.1.4).

    The sorted confidences are cut into min(n_bins, N) chunks as ``numpy.array_split`` does (the first N mod k
    chunks one longer); each interior boundary is the midpoint of the last value of a chunk and the first value of
    the next, the last boundary is 1.0, and a confidence c goes to the first bin whose boundary is >= c. Unlike
    :func:`equal_mass_bin_index`, tied confidences therefore always share a bin (a tie across a chunk boundary
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
    check_n_bins(n_bins)
    p, y = multiclass_inputs(probs, labels)
    confidence, correct = top_label(p, y)
    confidence = confidence.to(torch.float64)
    index = _kumar_equal_mass_bin_index(confidence[:, 0], n_bins)[:, None]
    squared = debiased_squared_error(bin_sums(confidence, correct, n_bins, bin_index=index))[0]
    return float(squared.clamp_min(0.0).sqrt())


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
        p, y = multilabel_inputs(probs, labels)
        forecast, outcome, kind = p.reshape(-1), y.reshape(-1), POOLED
    else:
        p, y = multiclass_inputs(probs, labels)
        (confidence, correct), kind = top_label(p, y), "top-label"
        forecast, outcome = confidence[:, 0], correct[:, 0]
    import relplot

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            # relplot 1.0.3 builds its band with a pandas call that pandas 3 deprecates (harmless; once per fit)
            warnings.filterwarnings("ignore", message="Passing a dict to DataFrame.from_records is deprecated")
            diagram = relplot.prepare_rel_diagram(
                to_numpy(forecast.to(torch.float64)),
                to_numpy(outcome.to(torch.float64)),
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
# synthetic data: the error of the probabilities against the exact posteriors
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
    p_hat, p_true = estimate_and_posteriors(probs, true_posteriors)
    tolerance = max(row_sum_tolerance(probs), row_sum_tolerance(true_posteriors))
    if not multilabel:
        for name, rows in (("probs", p_hat), ("true_posteriors", p_true)):
            worst = (rows.sum(1) - 1).abs().max()
            if worst > tolerance:
                raise ValueError(
                    f"multi-class {name} must have rows summing to 1 (a row is off by "
                    f"{float(worst):.3g}); for per-label (multi-label) probabilities pass "
                    f"multilabel=True; otherwise " + LOGITS_HINT
                )
    difference = p_hat - p_true
    top_label = None
    if not multilabel:
        prediction = p_hat.argmax(1, keepdim=True)
        top_label = float(difference.gather(1, prediction).abs().mean())
    return TrueCalibrationError(float(difference.abs().mean()), float(difference.pow(2).mean().sqrt()), top_label)


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
