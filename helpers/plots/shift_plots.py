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
from matplotlib.lines import Line2D

from helpers.metrics import stats
from helpers.plots.style import figure_and_axes, figure_styles, legend_beside, model_style, normalise_model_name

__all__ = ["metric_across_test_sets", "class_prior_bars"]

_MARKERS = ("o", "s", "D", "^")
#: the legend marks of the test sets when rows take their model colours: no model's colour
_LEGEND_GREY = "#555555"


def metric_across_test_sets(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    models: Sequence[str],
    test_sets: Sequence[str],
    metric: str,
    ax: Axes | None = None,
    set_labels: Mapping[str, str] | None = None,
    row_labels: Mapping[str, str] | None = None,
    title: str | None = None,
    model_colors: bool = False,
) -> Figure:
    """One row per model: the seed mean of ``metric`` on each test set (a marker each, ± 1 sd over seeds as a bar),
    joined by a grey line, so the move from one test set to the next reads at a glance. ``summaries`` is
    :func:`helpers.calibration.shift_summaries`' {model: {test set: {metric: seed summary}}}; a model missing a
    test set has no marker there. ``model_colors=True`` draws each row in its loss's course colour
    (:func:`helpers.plots.style.model_style` of the name before any " + ", after any "recipe/"; black where no loss
    is named) and tells the test sets apart by marker alone, the first filled, the others hollow, so that no test
    set takes a colour that means a model elsewhere in the course."""
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
    handles: list[Line2D] = []
    for offset, (name, marker) in enumerate(zip(test_sets, _MARKERS)):
        xs, ys, errors, drawn = [], [], [], []
        for row, model in zip(rows, models):
            value = summaries.get(model, {}).get(name, {}).get(metric)
            if value is not None:
                drawn.append(model)
                xs.append(factor * value["mean"])
                ys.append(row + 0.12 * (offset - (len(test_sets) - 1) / 2))
                errors.append(factor * (value["sd"] or 0.0))
        label = (set_labels or {}).get(name, name)
        if not model_colors:
            ax.errorbar(xs, ys, xerr=errors, fmt=marker, markersize=6, capsize=2, label=label, zorder=2)
            continue
        handles.append(_draw_in_model_colors(ax, xs, ys, errors, drawn, marker, hollow=offset > 0, label=label))
    ax.set_yticks(rows, [(row_labels or {}).get(model, model) for model in models])
    unit = " (%)" if factor == 100.0 else ""
    ax.set_xlabel(f"{stats.METRIC_LABELS.get(metric, metric)}{unit}, mean ± sd over training seeds")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(
        **({"handles": handles} if model_colors else {}),
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize="small",
        borderaxespad=0,
        title="test set",
    )
    return figure


def _draw_in_model_colors(
    ax: Axes,
    xs: Sequence[float],
    ys: Sequence[float],
    errors: Sequence[float],
    models: Sequence[str],
    marker: str,
    hollow: bool,
    label: str,
) -> Line2D:
    """One test set's markers, each in its row's model colour (hollow or filled); returns its grey legend mark."""
    for x, y, error, model in zip(xs, ys, errors, models):
        color = _row_color(model)
        face = "none" if hollow else color
        ax.errorbar([x], [y], xerr=[error], fmt=marker, markersize=6, capsize=2, color=color, markerfacecolor=face)
    face = "none" if hollow else _LEGEND_GREY
    return Line2D([], [], marker=marker, linestyle="none", color=_LEGEND_GREY, markerfacecolor=face, label=label)


def _row_color(model: str) -> str:
    """The course colour of the loss a row names ("recipe/LS α=0.1 + TS" → LS), black where none is named."""
    base = model.rsplit("/", 1)[-1].split(" + ")[0]
    return model_style(base).color if normalise_model_name(base)[0] is not None else "#000000"


def class_prior_bars(
    priors: Mapping[str, Sequence[Sequence[float]]],
    class_names: Sequence[str],
    ax: Axes | None = None,
    title: str | None = None,
    legend: bool = True,
    colors: Mapping[str, str] | None = None,
) -> Figure:
    """Grouped bars of class priors: one group per class, one bar per entry of ``priors`` ({label: one share vector
    per training seed, each summing to 1}, e.g. the true shares, the source prior π_s and each estimator's π̂_t of
    :func:`helpers.calibration.shift.prior_vector_table`), in the order given. A bar is the seed mean in percent,
    with ± 1 sd over seeds as an error bar where there is more than one seed. Colours come from
    :func:`helpers.plots.style.figure_styles` (fallback colours for names that are not models), except the labels
    ``colors`` names (e.g. the colour a notebook's other figures give the correction that uses that prior);
    ``legend=False`` leaves the legend to the caller (one legend for several panels)."""
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
    given = dict(colors or {})
    unknown = sorted(set(given) - set(vectors))
    if unknown:
        raise ValueError(f"colors names labels that are not priors: {unknown}")
    fallback = iter(s.color for s in figure_styles(list(vectors)).values() if s.color not in given.values())
    palette = {label: given[label] if label in given else next(fallback) for label in vectors}
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
            color=palette[label],
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
