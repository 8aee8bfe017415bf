"""Figures of notebook 12 (:mod:`helpers.calibration.shift`): one metric of each model on several test sets, and
estimated class priors against the true one as grouped bars (matplotlib only, Agg-safe). As in
:mod:`helpers.plots.reliability`, compute and draw are separate, functions take ``ax=None`` and return the Figure,
and legends sit outside the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.metrics import stats
from helpers.plots.style import figure_and_axes, figure_styles, legend_beside

__all__ = ["metric_across_test_sets", "class_prior_bars"]

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


def class_prior_bars(
    priors: Mapping[str, Sequence[Sequence[float]]],
    class_names: Sequence[str],
    ax: Axes | None = None,
    title: str | None = None,
    legend: bool = True,
) -> Figure:
    """Grouped bars of class priors: one group per class, one bar per entry of ``priors`` ({label: one share vector
    per training seed, each summing to 1}, e.g. the true shares, the source prior π_s and each estimator's π̂_t of
    :func:`helpers.calibration.shift.prior_vector_table`), in the order given. A bar is the seed mean in percent,
    with ± 1 sd over seeds as an error bar where there is more than one seed. Colours come from
    :func:`helpers.plots.style.figure_styles` (fallback colours for names that are not models); ``legend=False``
    leaves the legend to the caller (one legend for several panels)."""
    if not priors:
        raise ValueError("pass at least one prior")
    k = len(class_names)
    vectors = {}
    for label, per_seed in priors.items():
        values = 100.0 * np.asarray(per_seed, dtype=float).reshape(-1, k)
        if not np.allclose(values.sum(axis=1), 100.0, atol=0.05):
            raise ValueError(f"the shares of {label!r} do not sum to 1 in every seed")
        vectors[label] = values
    figure, ax = figure_and_axes(ax, (1.1 * k + 2.5, 3.6))
    styles = figure_styles(list(vectors))
    width = 0.8 / len(vectors)
    groups = np.arange(k)
    for index, (label, values) in enumerate(vectors.items()):
        means = values.mean(axis=0)
        errors = values.std(axis=0, ddof=1) if len(values) > 1 else None
        ax.bar(
            groups + (index - (len(vectors) - 1) / 2) * width,
            means,
            width,
            yerr=errors,
            capsize=2 if errors is not None else 0,
            color=styles[label].color,
            label=label,
            error_kw={"elinewidth": 0.8},
        )
    ax.set_xticks(groups, list(class_names))
    ax.set_ylabel("class share (%)")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    if legend:
        legend_beside(ax)
    return figure
