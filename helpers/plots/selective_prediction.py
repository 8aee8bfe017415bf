"""Selective prediction (LS+ paper, Figs. 1 and 2; notebook 03): accuracy–retention curves, and the densities of
the top-label confidence of correct and incorrect predictions, which show how well the confidence separates them.

Every function accepts ``ax=None``, draws on the axes it is given (or on a new figure) and returns the Figure; the
curves are computed in :mod:`helpers.metrics` (:func:`helpers.metrics.retention_curve`,
:func:`helpers.metrics.confidence_by_correctness`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.metrics import retention_area
from helpers.plots.style import ACCURACY_COLOR, GAP_COLOR, figure_and_axes, figure_styles, label_axes, to_numpy

__all__ = ["retention_curves", "confidence_densities"]


def retention_curves(curves: Mapping[str, tuple[Any, Any]], ax: Axes | None = None, title: str | None = None) -> Figure:
    """Accuracy–retention curves (LS+ paper Fig. 1), one line per model, R-AUC in the legend.

    ``curves``: {name: (fractions, accuracy)} from :func:`helpers.metrics.retention_curve`.
    """
    if not curves:
        raise ValueError("curves is empty; pass {model name: selective.retention_curve(probs, labels)}")
    figure, ax = figure_and_axes(ax, (5.0, 4.0))
    styles = figure_styles(list(curves))
    for name, (fractions, accuracy) in curves.items():
        fractions, accuracy = to_numpy(fractions), to_numpy(accuracy)
        label = f"{name} (R-AUC {retention_area(fractions, accuracy):.4f})"
        ax.plot(fractions, accuracy, label=label, **styles[name].line_kwargs(markers=False))
    ax.set_xlim(0, 1)
    label_axes(
        ax,
        "retention fraction (most confident predictions kept)",
        "accuracy (referred samples counted correct)",
        title or "retention curves",
        grid=True,
    )
    return figure


def confidence_densities(
    correct: Any,
    incorrect: Any,
    ax: Axes | None = None,
    title: str | None = None,
    bins: int = 20,
    filled: bool = True,
) -> Figure:
    """Density histograms of the top-label confidence of correct (blue, the accuracy colour) and incorrect (red,
    the gap colour) predictions (LS+ paper Fig. 2); each histogram integrates to 1. Neither is a model colour, so a
    figure beside a per-model one does not reuse a model's colour for "correct". ``filled=False`` draws outlines
    (step histograms) instead, so where the two overlap no third, mixed colour appears."""
    correct, incorrect = to_numpy(correct).ravel(), to_numpy(incorrect).ravel()
    if correct.size + incorrect.size == 0:
        raise ValueError("no confidences to plot; pass selective.confidence_by_correctness(probs, labels)")
    figure, ax = figure_and_axes(ax, (4.6, 3.4))
    edges = np.linspace(0, 1, bins + 1)
    for values, color, label in ((correct, ACCURACY_COLOR, "correct"), (incorrect, GAP_COLOR, "incorrect")):
        if values.size:
            style = dict(alpha=0.5) if filled else dict(histtype="step", linewidth=1.8)
            ax.hist(values, bins=edges, density=True, color=color, label=f"{label} (n={values.size})", **style)
    ax.set_xlim(0, 1)
    label_axes(ax, "confidence (top-label probability)", "density", title)
    return figure
