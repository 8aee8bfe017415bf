"""Bootstrap intervals of the metrics of :mod:`helpers.metrics`: the percentile bootstrap of one model's metric
(:func:`bootstrap`), the paired bootstrap of a difference between two models averaged over training seeds
(:func:`paired_bootstrap`), and the table of the metrics' weighted forms (:data:`WEIGHTED_METRICS`,
:func:`weighted_evaluator`, the forms in :mod:`helpers.metrics.weighted`) with which the paired bootstrap evaluates
all its resamples at once.

The table names every metric, so this module sits above the metric modules (:mod:`helpers.metrics.calibration`,
:mod:`helpers.metrics.classification`, :mod:`helpers.metrics.multilabel`, :mod:`helpers.metrics.selective`) and
:mod:`helpers.metrics.weighted`; none of them imports it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from helpers.metrics import calibration, classification, multilabel, selective, weighted
from helpers.metrics.core import CHUNK_ENTRIES, to_tensor

__all__ = [
    "BootstrapResult",
    "bootstrap",
    "PairedBootstrapResult",
    "paired_bootstrap",
    "WEIGHTED_METRICS",
    "weighted_evaluator",
]


# ----------------------------------------------------------------------------------------------------------------
# the percentile bootstrap of one metric
# ----------------------------------------------------------------------------------------------------------------
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
    """Non-parametric bootstrap of any metric of :mod:`helpers.metrics` (Efron & Tibshirani 1993, percentile interval).

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
    p = to_tensor(probs, "probs")
    y = to_tensor(labels, "labels").to(p.device)
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


# ----------------------------------------------------------------------------------------------------------------
# paired bootstrap of a difference between two models, averaged over training seeds
# ----------------------------------------------------------------------------------------------------------------
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


def per_seed(probs: Any, name: str, n_rows: int) -> list[torch.Tensor]:
    """A list of (N, C) tensors, one per training seed, from a list/tuple of arrays or a single (N, C) array."""
    if isinstance(probs, (torch.Tensor, np.ndarray)):
        probs = [probs]
    if not isinstance(probs, (list, tuple)) or not probs:
        raise TypeError(
            f"{name} must be a non-empty list of (N, C) probability tensors, one per training seed "
            f"(or a single (N, C) tensor), got {type(probs).__name__}"
        )
    tensors = [to_tensor(p, f"{name}[{s}]") for s, p in enumerate(probs)]
    for s, p in enumerate(tensors):
        if p.ndim != 2 or p.shape[0] != n_rows:
            raise ValueError(
                f"{name}[{s}] must be (N, C) with N = {n_rows} rows (the same test images as labels), "
                f"got shape {tuple(p.shape)}"
            )
    return tensors


@contextlib.contextmanager
def one_cpu_thread() -> Iterator[None]:
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
    chunk = max(1, min(n_resamples, CHUNK_ENTRIES // n_rows))
    differences = []
    for start in range(0, n_resamples, chunk):
        rows = indices[start : start + chunk]
        weights = torch.zeros(rows.shape, dtype=torch.float64, device=rows.device)
        weights.scatter_add_(1, rows, torch.ones(1, dtype=torch.float64, device=rows.device).expand_as(rows))
        mean_a = torch.stack([evaluate(weights) for evaluate in evaluators_a]).mean(0)
        mean_b = torch.stack([evaluate(weights) for evaluate in evaluators_b]).mean(0)
        differences.append(mean_a - mean_b)
    return torch.cat(differences).cpu()


def metric_or_nan(metric: Callable[..., float], probs: torch.Tensor, labels: torch.Tensor) -> float:
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
        mean_a = np.mean([metric_or_nan(metric, p[index], y) for p in probs_a])
        mean_b = np.mean([metric_or_nan(metric, p[index], y) for p in probs_b])
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

    ``probs_a`` / ``probs_b``: one (N, C) probability tensor per training seed (a list; a single tensor is one seed),
    all on the same N test images as ``labels`` (for :func:`helpers.metrics.true_rms` pass the exact posteriors as
    labels). Estimate: mean_s metric(a_s) − mean_s metric(b_s) on the full test set (with equal seed counts this is the
    mean of the per-seed differences). Each of the ``n`` replicates draws ONE set of N test indices with replacement and
    applies it to both models and every seed, so image difficulty cancels in the difference (a paired design); the
    interval is the (1 − level)/2 and (1 + level)/2 quantiles of the replicate differences (percentile interval, Efron &
    Tibshirani 1993). The index sets come from ``torch.randint`` seeded by ``seed``, exactly as in :func:`bootstrap`. It
    captures test-set sampling only; the spread over training seeds is reported separately
    (``helpers.metrics.seed_summary``).

    A replicate on which the metric is undefined for some model or seed (NaN, or a ValueError such as "no sample has a
    positive label") is left out of the interval and counted in ``n_degenerate``.

    Speed: metrics with a weighted form in :mod:`helpers.metrics.weighted` (every binned, proper-score, ranking and
    confusion-matrix metric of :mod:`helpers.metrics`) evaluate all replicates at once from multiplicity weights;
    ``vectorised=False``, or a metric without one (:func:`helpers.metrics.smooth_ece`,
    :func:`helpers.metrics.multilabel_smooth_ece`, any other callable), calls the metric on each replicate: n × (seeds
    of a + seeds of b) calls (relplot's smooth ECE takes about 30 ms per call, so about 3 minutes for n = 1000 and 3 + 3
    seeds; pass a smaller n for it). The resamples are evaluated with one torch CPU thread (faster here, see
    ``one_cpu_thread``).

    The course's difference helpers (:func:`helpers.metrics.paired_differences`,
    :func:`helpers.metrics.paired_comparisons`) do not call this for the metrics of
    ``helpers.metrics.POINT_ESTIMATE_ONLY`` (the debiased ECE, whose n_b − 1 correction assumes distinct samples while a
    resample repeats images): they report its point estimate only.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n (number of bootstrap resamples) must be an integer >= 2, got {n!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    y = to_tensor(labels, "labels")
    if y.ndim < 1 or y.shape[0] == 0:
        raise ValueError(f"labels is empty (shape {tuple(y.shape)}); metrics need at least one sample")
    a = per_seed(probs_a, "probs_a", y.shape[0])
    b = per_seed(probs_b, "probs_b", y.shape[0])
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
    with warnings.catch_warnings(record=True) as caught, one_cpu_thread():
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
# weighted forms: the metrics on many bootstrap resamples at once (helpers.metrics.weighted)
# ----------------------------------------------------------------------------------------------------------------
#: metric -> its weighted form in :mod:`helpers.metrics.weighted` (same keyword arguments)
WEIGHTED_METRICS: dict[Callable[..., float], Callable[..., weighted.Evaluate]] = {
    classification.accuracy: weighted.accuracy,
    classification.nll: weighted.nll,
    classification.brier: weighted.brier,
    calibration.ece: weighted.ece,
    calibration.mce: weighted.mce,
    calibration.average_calibration_error: weighted.average_calibration_error,
    calibration.classwise_ece: weighted.classwise_ece,
    calibration.adaptive_ece: weighted.adaptive_ece,
    calibration.debiased_ece: weighted.debiased_ece,
    classification.auroc_ovr: weighted.auroc_ovr,
    classification.macro_f1: weighted.macro_f1,
    classification.jaccard: weighted.jaccard,
    classification.cohen_kappa: weighted.cohen_kappa,
    classification.class_recall: weighted.class_recall,
    multilabel.multilabel_ece: weighted.multilabel_ece,
    multilabel.multilabel_mce: weighted.multilabel_mce,
    multilabel.multilabel_average_calibration_error: weighted.multilabel_average_calibration_error,
    multilabel.multilabel_brier: weighted.multilabel_brier,
    multilabel.multilabel_nll: weighted.multilabel_nll,
    multilabel.hamming_loss: weighted.hamming_loss,
    multilabel.macro_auroc: weighted.macro_auroc,
    multilabel.fixed_label_macro_auroc: weighted.fixed_label_macro_auroc,
    multilabel.map_per_class: weighted.map_per_class,
    multilabel.map_per_example: weighted.map_per_example,
    calibration.true_rms: weighted.true_rms,
    selective.r_auc: weighted.r_auc,
}


def weighted_evaluator(metric: Callable[..., float], probs: Any, labels: Any) -> weighted.Evaluate | None:
    """``evaluate(weights) -> (B,)`` for a metric with a weighted form (or a keyword-only ``functools.partial`` of
    one), else None (see :mod:`helpers.metrics.weighted`)."""
    function, keywords = metric, {}
    if isinstance(metric, functools.partial) and not metric.args:
        function, keywords = metric.func, dict(metric.keywords)
    weighted_form = WEIGHTED_METRICS.get(function)
    return None if weighted_form is None else weighted_form(probs, labels, **keywords)
