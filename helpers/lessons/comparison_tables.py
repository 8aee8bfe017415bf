"""The model tables of notebooks 04 and 05: losses against cross-entropy and cross-entropy + temperature scaling.

Both notebooks show, per recipe, the same two kinds of table, and this module builds them so that their code cells
stay short:

* :func:`summary_tables` — "mean ± sd over training seeds" of every model, one table per group of metrics
  (discrimination, calibration, …), with the columns named in words (:data:`TABLE_LABELS`);
* :func:`difference_tables` — "model − reference" with its paired bootstrap interval, one table per group, and the
  number of intervals shown.

:func:`temperature_scaled` fits one temperature per seed on the calibration half of the validation set and returns
the scaled test probabilities (the "cross-entropy + TS" rows); :func:`mean_confidence` is the average top-label
probability (above the accuracy: over-confident).

The debiased ECE (Kumar et al. 2019) is never given a bootstrap interval: its n_b − 1 correction assumes distinct
samples, and a bootstrap resample repeats images (``docs/reading_the_numbers.md``). The rule lives in one place,
:data:`helpers.metrics.POINT_ESTIMATE_ONLY`: a difference table built here shows its estimate alone and does not
count it among the intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from helpers.calibration import TemperatureScaling
from helpers.metrics import stats

__all__ = [
    "TABLE_LABELS",
    "mean_confidence",
    "temperature_scaled",
    "summary_tables",
    "difference_tables",
    "interval_note",
]

#: column names in words for every metric key of these tables (stats.METRIC_LABELS and the notebooks' own)
TABLE_LABELS: dict[str, str] = {**stats.METRIC_LABELS, "mean_confidence": "mean confidence", "r_auc": "R-AUC"}

MetricGroups = Sequence[Mapping[str, Callable[..., float]]]


def mean_confidence(probs: torch.Tensor, labels: Any = None) -> float:
    """The average top-label probability of ``probs`` (N, K); ``labels`` is ignored (the metric signature)."""
    return float(torch.as_tensor(probs).max(1).values.mean())


def temperature_scaled(
    runs: Sequence[Any], val_labels: torch.Tensor, calibration_index: torch.Tensor
) -> tuple[list[torch.Tensor], list[float]]:
    """Per run (one per seed; each with ``val_logits`` and ``test_logits``): fit one temperature on the validation
    images ``calibration_index`` and return (the scaled test probabilities, the temperatures)."""
    fitted = [
        TemperatureScaling().fit(run.val_logits[calibration_index], val_labels[calibration_index]) for run in runs
    ]
    return [ts.transform(run.test_logits) for ts, run in zip(fitted, runs)], [ts.temperature for ts in fitted]


def summary_tables(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    groups: MetricGroups,
    scale: Mapping[str, float] | None = None,
    digits: Mapping[str, int] | None = None,
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[pd.DataFrame]]:
    """(the seed summaries of every model and metric, one "mean ± sd" table per group of metrics)."""
    metric_fns = {name: fn for group in groups for name, fn in group.items()}
    summaries = stats.seed_summaries(probs_by_model, labels, metric_fns)
    tables = [
        stats.summary_table(summaries, columns=list(group), scale=scale, digits=digits, labels=TABLE_LABELS)
        for group in groups
    ]
    return summaries, tables


def difference_tables(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    reference: str,
    groups: MetricGroups,
    n: int,
    seed: int,
    higher_is_better: Mapping[str, bool] | None = None,
    scale: Mapping[str, float] | None = None,
    digits: Mapping[str, int] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[pd.DataFrame], int]:
    """(the paired differences of every model but ``reference``, one "Δ [low, high]" table per group of metrics,
    the number of intervals in those tables). A metric of :data:`helpers.metrics.POINT_ESTIMATE_ONLY` (the
    debiased ECE) gets its estimate alone, no interval, and is not counted."""
    metric_fns = {name: fn for group in groups for name, fn in group.items()}
    differences = stats.paired_differences(probs_by_model, labels, metric_fns, reference=reference, n=n, seed=seed)
    tables, count = [], 0
    for group in groups:
        table = stats.difference_table(
            differences,
            reference,
            columns=list(group),
            higher_is_better=higher_is_better,
            scale=scale,
            digits=digits,
            labels=TABLE_LABELS,
        )
        tables.append(table.table)
        count += table.n_comparisons
    return differences, tables, count


def interval_note(n_resamples: int, level: float = 0.95) -> str:
    """The sentence printed once under a notebook's difference tables: what Δ and its interval are."""
    return (
        f"Δ = model − reference, mean over training seeds; {100 * level:g} % paired bootstrap intervals over the test "
        f"set ({n_resamples} resamples, each shared by both models and every seed)."
    )


def column_groups(table: pd.DataFrame, parts: int = 2) -> list[pd.DataFrame]:
    """``table`` cut into ``parts`` consecutive groups of columns, each with every row, as near equal in width as
    the column count allows (the first groups one column wider), so that a wide comparison table fits the website's
    text column when each group is displayed in turn."""
    if not isinstance(parts, int) or parts < 1:
        raise ValueError(f"parts must be a positive whole number of column groups, got {parts!r}")
    if parts > table.shape[1]:
        raise ValueError(f"cannot cut {table.shape[1]} columns into {parts} groups; ask for at most {table.shape[1]}")
    size, extra = divmod(table.shape[1], parts)
    bounds = [0]
    for part in range(parts):
        bounds.append(bounds[-1] + size + (part < extra))
    return [table.iloc[:, start:stop] for start, stop in zip(bounds, bounds[1:])]
