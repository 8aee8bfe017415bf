"""Estimates with their intervals, one row per model: forest plots of bootstrap intervals, paired differences
coloured by their verdict (better, worse, undecided), before/after comparisons (e.g. temperature scaling), and
side-by-side difference panels that give a row dwarfing the others a panel of its own (notebooks 03-08), and the
relevant images in a query's top k per ranking, each row in its model's course colour (notebook 10).

Every function accepts ``ax=None``, draws on the axes it is given (or on a new figure) and returns the Figure; the
intervals are computed in :mod:`helpers.metrics` (e.g. :class:`helpers.metrics.BootstrapResult`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.plots.style import ACCURACY_COLOR, GAP_COLOR, ModelStyle, figure_and_axes, figure_styles, label_axes

__all__ = [
    "BETTER_COLOR",
    "NEUTRAL_COLOR",
    "VERDICT_COLOR",
    "AFTER_COLOR",
    "bootstrap_interval_plot",
    "interval_plot",
    "difference_plot",
    "before_after_plot",
    "outlier_rows",
    "difference_panels",
    "top_k_hits_plot",
]

BETTER_COLOR = "#55A868"
NEUTRAL_COLOR = "#8C8C8C"
#: the colour of a resolved difference when the verdict is written out (``verdict_marks=True``): a dark grey that is
#: no model's colour, so a figure whose models include a green one (SPA) does not give green a second meaning
VERDICT_COLOR = "#333333"
AFTER_COLOR = "#DD8452"


def _draw_intervals(
    ax: Axes, names: Sequence[str], values: np.ndarray, styles: Mapping[str, ModelStyle] | None = None
) -> np.ndarray:
    """One (estimate, low, high) row per name as a dot with whiskers, the first name on top, in one colour or, with
    ``styles``, each row in its model's course colour and marker; returns the y."""
    positions = np.arange(len(names))[::-1]
    if styles is None:
        ax.errorbar(
            values[:, 0],
            positions,
            xerr=[values[:, 0] - values[:, 1], values[:, 2] - values[:, 0]],
            fmt="o",
            capsize=3,
            color=ACCURACY_COLOR,
        )
    else:
        for position, name, (estimate, low, high) in zip(positions, names, values):
            style = styles[name]
            ax.errorbar(
                [estimate],
                [position],
                xerr=[[estimate - low], [high - estimate]],
                capsize=3,
                color=style.color,
                marker=style.marker,
                markerfacecolor="none" if style.hollow else style.color,
                linestyle="none",
                label=name,  # no legend is drawn: the rows are labelled on the y axis
            )
    ax.set_yticks(positions, labels=list(names))
    ax.grid(axis="x", alpha=0.3)
    return positions


def _interval_rows(rows: Mapping[str, Any], scale: float) -> tuple[list[str], np.ndarray]:
    if not rows:
        raise ValueError("rows is empty; pass {name: (estimate, low, high)}")
    names = list(rows)
    values = scale * np.array([[float(x) for x in rows[name]] for name in names], dtype=float)
    if values.ndim != 2 or values.shape[1] != 3:
        raise ValueError("every row must be (estimate, low, high)")
    return names, values


def bootstrap_interval_plot(
    estimates: Mapping[str, tuple[float, float, float]],
    ax: Axes | None = None,
    xlabel: str | None = None,
    title: str | None = None,
    scale: float = 100.0,
) -> Figure:
    """Point estimates with their intervals, one row per model (a forest plot); values are (estimate, low, high),
    e.g. a :class:`helpers.metrics.BootstrapResult`, multiplied by ``scale``."""
    if not estimates:
        raise ValueError("estimates is empty; pass {model: (estimate, low, high)}")
    figure, ax = figure_and_axes(ax, (4.6, 0.6 + 0.35 * len(estimates)))
    names = list(estimates)
    values = np.array([[scale * float(x) for x in estimates[name]] for name in names])
    _draw_intervals(ax, names, values)
    ax.set_ylim(-0.6, len(names) - 0.4)
    if xlabel:
        ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return figure


def interval_plot(
    rows: Mapping[str, tuple[float, float, float]], ax: Axes | None = None, xlabel: str = "", title: str | None = None
) -> Figure:
    """One estimate with its interval per row (``{name: (estimate, low, high)}``), a dot-and-whisker plot."""
    if not rows:
        raise ValueError("rows is empty; pass {model name: (estimate, low, high)}")
    figure, ax = figure_and_axes(ax, (5.0, 0.8 + 0.32 * len(rows)))
    names = list(rows)
    values = np.array([rows[n] for n in names], dtype=float)
    if values.ndim != 2 or values.shape[1] != 3:
        raise ValueError("every row must be (estimate, low, high)")
    _draw_intervals(ax, names, values)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return figure


def difference_plot(
    rows: Mapping[str, Any],
    higher_is_better: bool,
    ax: Axes | None = None,
    xlabel: str = "",
    title: str | None = None,
    scale: float = 100.0,
    verdict_marks: bool = False,
    verdict_words: tuple[str, str] = ("better", "worse"),
) -> Figure:
    """Paired differences (model − reference) with their intervals, one row per model, and a line at 0.

    ``rows`` maps a name to (estimate, low, high), e.g. a :class:`helpers.metrics.PairedBootstrapResult`;
    values are multiplied by ``scale``. A row whose interval excludes 0 is drawn green when the model is better in the
    metric's direction (``higher_is_better``), red when worse, grey when the interval contains 0. The estimate is
    drawn as a point and the interval as a bar of its own, so an estimate outside its interval shows as such; a
    point estimate without interval (NaN bounds, :data:`helpers.metrics.POINT_ESTIMATE_ONLY`) as a grey point
    alone. ``verdict_marks=True`` writes the verdict into the row's label instead ("SPA+LPR · better",
    "ASL · worse") and draws every resolved row in :data:`VERDICT_COLOR` with a filled point, an undecided one grey
    and hollow: no colour carries the verdict, so model colours keep their one meaning. ``verdict_words`` are the
    (better, worse) words written, e.g. ``("beats", "worse")`` to match a table's verdict column.
    """
    names, values = _interval_rows(rows, scale)
    figure, ax = figure_and_axes(ax, (5.0, 0.8 + 0.32 * len(names)))
    positions = np.arange(len(names))[::-1]
    ax.axvline(0.0, color="black", linewidth=1)
    labels = list(names)
    for index, (y, (estimate, low, high)) in enumerate(zip(positions, values)):
        face = None
        if low > 0 or high < 0:
            better = (low > 0) == higher_is_better
            color = BETTER_COLOR if better else GAP_COLOR
            if verdict_marks:
                color = VERDICT_COLOR
                labels[index] = f"{names[index]} · {verdict_words[0] if better else verdict_words[1]}"
        else:
            color = NEUTRAL_COLOR
            face = "none" if verdict_marks else None
        # the interval and the point drawn apart: a percentile interval of a biased statistic can exclude its own
        # point estimate (e.g. a debiased ECE clipped at 0), which an error bar around the point cannot show
        if np.isfinite(low) and np.isfinite(high):  # no bar for a point estimate only (stats.POINT_ESTIMATE_ONLY)
            middle = (low + high) / 2
            ax.errorbar([middle], [y], xerr=[[middle - low], [high - middle]], fmt="none", capsize=3, ecolor=color)
        ax.plot([estimate], [y], "o", color=color, markerfacecolor=face)
    ax.set_yticks(positions, labels=labels)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return figure


def before_after_plot(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    ax: Axes | None = None,
    xlabel: str = "",
    title: str | None = None,
    labels: tuple[str, str] = ("before", "after"),
    scale: float = 100.0,
    colors: tuple[str, str] = (ACCURACY_COLOR, AFTER_COLOR),
) -> Figure:
    """Each model's value before and after a change (e.g. temperature scaling) in two colours, one row per model.
    ``colors`` (before, after) lets a notebook keep them apart from another figure's colours (e.g. its reliability
    diagrams' blue bars and orange gaps).

    ``before`` and ``after`` map the same names to (centre, low, high) — e.g. mean and mean ∓ sd over seeds —
    multiplied by ``scale``; the "before" point sits just above the row, the "after" point just below.
    """
    if list(before) != list(after):
        raise ValueError(
            f"before and after must name the same models in the same order: {list(before)} vs {list(after)}"
        )
    names, values_before = _interval_rows(before, scale)
    _, values_after = _interval_rows(after, scale)
    figure, ax = figure_and_axes(ax, (5.0, 0.8 + 0.4 * len(names)))
    positions = np.arange(len(names))[::-1]
    for offset, values, color, label in (
        (0.15, values_before, colors[0], labels[0]),
        (-0.15, values_after, colors[1], labels[1]),
    ):
        ax.errorbar(
            values[:, 0],
            positions + offset,
            xerr=[values[:, 0] - values[:, 1], values[:, 2] - values[:, 0]],
            fmt="o",
            capsize=3,
            color=color,
            label=label,
        )
    ax.set_yticks(positions, labels=names)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    label_axes(ax, xlabel, title=title)
    return figure


def outlier_rows(rows: Mapping[str, Any], ratio: float = 5.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split interval rows ``{name: (estimate, low, high)}`` into (ordinary, outliers): the outliers are the rows
    whose largest absolute value exceeds ``ratio`` times that of every ordinary row (cut at the largest such gap),
    so that a row like ASL's +27 points gets a panel of its own and the others stay readable."""
    if ratio <= 1:
        raise ValueError(f"ratio must be > 1, got {ratio}")
    extent = {name: max(abs(float(x)) for x in row) for name, row in rows.items()}
    ordered = sorted(extent, key=extent.get, reverse=True)
    cut, widest = 0, ratio
    for k in range(1, len(ordered)):
        gap = extent[ordered[k - 1]] / max(extent[ordered[k]], 1e-300)
        if gap > widest:
            cut, widest = k, gap
    outliers = set(ordered[:cut])
    return (
        {n: r for n, r in rows.items() if n not in outliers},
        {n: r for n, r in rows.items() if n in outliers},
    )


def difference_panels(
    panels: Sequence[Mapping[str, Any]],
    ratio: float = 5.0,
    scale: float = 100.0,
    width: float = 4.2,
    verdict_marks: bool = False,
    verdict_words: tuple[str, str] = ("better", "worse"),
) -> Figure:
    """Paired-difference panels side by side (:func:`difference_plot`), each
    ``{"rows": {name: (estimate, low, high)}, "higher_is_better": bool, "xlabel": str, "title": str}``; a row that
    dwarfs the others (:func:`outlier_rows`) is drawn in a panel of its own, on its own scale, right of its panel.
    ``verdict_marks`` and ``verdict_words`` are passed to every :func:`difference_plot`."""
    if not panels:
        raise ValueError("panels is empty")
    drawn = []
    for panel in panels:
        ordinary, outliers = outlier_rows(panel["rows"], ratio)
        drawn.append((ordinary, panel, panel.get("title")))
        if outliers:
            drawn.append((outliers, panel, f"{panel.get('title') or ''} (own scale)".strip()))
    heights = [len(rows) for rows, _, _ in drawn]
    figure, axes = plt.subplots(
        1,
        len(drawn),
        figsize=(width * len(drawn), max(2.8, 1.4 + 0.4 * max(heights))),  # never squashed flat (08 c26)
        squeeze=False,
        layout="constrained",
    )
    for ax, (rows, panel, title) in zip(axes[0], drawn):
        difference_plot(
            rows,
            panel["higher_is_better"],
            ax=ax,
            xlabel=panel.get("xlabel", ""),
            title=title,
            scale=scale,
            verdict_marks=verdict_marks,
            verdict_words=verdict_words,
        )
    return figure


def top_k_hits_plot(
    rows: Mapping[str, Mapping[str, float]], k: int, ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Mean number of relevant images among the top k of a query, one row per ranking, with its interval:
    ``{name: {"mean", "low", "high"}}`` (:func:`helpers.metrics.mean_over_queries` of
    :func:`helpers.metrics.hits_at_k`), each in the course colour and marker of its model, the first row on top."""
    if not rows:
        raise ValueError("rows is empty; pass {ranking: {'mean': ..., 'low': ..., 'high': ...}}")
    figure, ax = figure_and_axes(ax, (6.0, 0.8 + 0.4 * len(rows)))
    names = list(rows)
    values = np.array([[rows[name]["mean"], rows[name]["low"], rows[name]["high"]] for name in names], dtype=float)
    _draw_intervals(ax, names, values, styles=figure_styles(names))
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, k)
    ax.set_xlabel(f"relevant images among the top {k} (mean over queries, 95 % interval)")
    if title:
        ax.set_title(title)
    return figure
