"""Figures of notebook 12 (:mod:`helpers.calibration.shift`): one metric of each model on several test sets
(matplotlib only, Agg-safe). As in :mod:`helpers.plots.reliability`, compute and draw are separate, functions take
``ax=None`` and return the Figure, and legends sit outside the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.metrics import stats
from helpers.plots.style import figure_and_axes

__all__ = ["metric_across_test_sets"]

_MARKERS = ("o", "s", "D", "^")


def metric_across_test_sets(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    models: Sequence[str],
    test_sets: Sequence[str],
    metric: str,
    ax: Axes | None = None,
    set_labels: Mapping[str, str] | None = None,
    row_labels: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """One row per model: the seed mean of ``metric`` on each test set (a marker each, ± 1 sd over seeds as a bar),
    joined by a grey line, so the move from one test set to the next reads at a glance. ``summaries`` is
    :func:`helpers.calibration.shift_summaries`' {model: {test set: {metric: seed summary}}}; a model missing a
    test set has no marker there."""
    if not models or not test_sets:
        raise ValueError("pass at least one model and one test set")
    figure, ax = figure_and_axes(ax, (6.4, 0.42 * len(models) + 1.4))
    factor = 100.0 if metric in stats.PERCENT_METRICS else 1.0
    rows = np.arange(len(models))[::-1]
    for row, model in zip(rows, models):
        values = [summaries.get(model, {}).get(name, {}).get(metric) for name in test_sets]
        means = [factor * v["mean"] for v in values if v is not None]
        if len(means) > 1:
            ax.plot(means, [row] * len(means), color="lightgrey", linewidth=2, zorder=1)
    for offset, (name, marker) in enumerate(zip(test_sets, _MARKERS)):
        xs, ys, errors = [], [], []
        for row, model in zip(rows, models):
            value = summaries.get(model, {}).get(name, {}).get(metric)
            if value is not None:
                xs.append(factor * value["mean"])
                ys.append(row + 0.12 * (offset - (len(test_sets) - 1) / 2))
                errors.append(factor * (value["sd"] or 0.0))
        label = (set_labels or {}).get(name, name)
        ax.errorbar(xs, ys, xerr=errors, fmt=marker, markersize=6, capsize=2, label=label, zorder=2)
    ax.set_yticks(rows, [(row_labels or {}).get(model, model) for model in models])
    unit = " (%)" if factor == 100.0 else ""
    ax.set_xlabel(f"{stats.METRIC_LABELS.get(metric, metric)}{unit}, mean ± sd over training seeds")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", borderaxespad=0, title="test set")
    return figure
