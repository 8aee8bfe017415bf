"""Smooth reliability figures (Błasiok & Nakkiran 2023; the data from :func:`helpers.metrics.smooth_reliability`,
computed by relplot): the smooth reliability diagram, a grid of them, and the binned and smooth diagrams of the same
forecasts side by side or on one axis (notebook 01).

Every function accepts ``ax=None`` (or ``axes=None``), draws on the axes it is given (or on a new figure) and returns
the Figure; legends sit beside the axes or below the figure, off the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.metrics import POOLED, ReliabilityBins, SmoothReliability
from helpers.plots.reliability import reliability_diagram
from helpers.plots.style import (
    axis_below,
    figure_and_axes,
    figure_legend_below,
    figure_styles,
    legend_beside,
    to_numpy,
)

__all__ = [
    "smooth_reliability_diagram",
    "binned_and_smooth_reliability",
    "smooth_reliability_grid",
    "overlaid_reliability",
]


def smooth_reliability_diagram(
    diagram: SmoothReliability,
    ax: Axes | None = None,
    title: str | None = None,
    label: str | None = None,
    color: str | None = None,
    show_density: bool = True,
    legend: bool = True,
) -> Figure:
    """Smooth reliability diagram (Błasiok & Nakkiran 2023) of ``metrics.smooth_reliability(probs, labels)``.

    The kernel-smoothed E[outcome | forecast] as a line, relplot's bootstrap band around it (2.5-97.5 % of the
    bootstrap fits), the diagonal, and the smooth ECE with its kernel width σ in the title. With ``show_density`` a
    small axis below ``ax`` (sharing x) shows the kernel density of the forecasts: where it is low the curve rests
    on few samples and the band widens. Drawing several models on one ``ax`` with different ``label`` / ``color``
    overlays them (pass ``show_density=False`` after the first); ``color`` None draws the course colour of the
    model named by ``label`` (:func:`helpers.plots.style.figure_styles`), black without a label — never a gap
    colour of the binned diagram. The legend sits beside the axes, off the data (``legend=False``: none).
    """
    if not isinstance(diagram, SmoothReliability):
        raise TypeError(
            f"diagram must be a helpers.metrics.SmoothReliability (from smooth_reliability), got "
            f"{type(diagram).__name__}"
        )
    figure, ax = figure_and_axes(ax, (4.2, 5.0) if show_density else (4.2, 4.2))
    if color is None:
        color = figure_styles([label])[label].color if label else "black"
    pooled = diagram.kind == POOLED
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    ax.fill_between(
        diagram.mesh,
        diagram.lower,
        diagram.upper,
        color=color,
        alpha=0.25,
        linewidth=0,
        label=f"bootstrap band ({diagram.n_bootstrap} fits)",
    )
    ax.plot(
        diagram.mesh,
        diagram.mu,
        color=color,
        linewidth=2,
        label=label or ('smoothed frequency of "present"' if pooled else "smoothed accuracy"),
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel('frequency of "present"' if pooled else "accuracy")
    text = f"smooth ECE {100 * diagram.smooth_ece:.2f} % (σ = {diagram.bandwidth:.3f})"
    if pooled:
        text += f" ({POOLED})"
    ax.set_title(f"{title}\n{text}" if title else text)
    if legend:
        legend_beside(ax)
    x_label = "predicted P(present)" if pooled else "confidence (top-label probability)"
    if show_density:
        density_ax = axis_below(ax)
        density_ax.fill_between(diagram.mesh, 0, diagram.density, color="grey", alpha=0.5, linewidth=0)
        density_ax.set_ylim(bottom=0)
        density_ax.set_ylabel("density")
        density_ax.set_xlabel(x_label)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel(x_label)
    return figure


def binned_and_smooth_reliability(
    binned: Mapping[str, ReliabilityBins], smooth: Mapping[str, SmoothReliability], axes: Any = None
) -> Figure:
    """For each model a binned reliability diagram (top row) above its smooth one with the bootstrap band (bottom
    row): :func:`helpers.plots.reliability_diagram` of ``binned[name]`` and :func:`smooth_reliability_diagram` of
    ``smooth[name]``. ``axes``: a (2, n_models) array of axes to draw on (default: a new figure)."""
    if not binned or list(binned) != list(smooth):
        raise ValueError(
            f"binned and smooth must name the same models in the same order, got {list(binned)} and {list(smooth)}"
        )
    n_models = len(binned)
    if axes is None:
        figure, axes = plt.subplots(2, n_models, figsize=(4.2 * n_models, 10.0), squeeze=False)
        figure.subplots_adjust(wspace=0.35, hspace=0.45)
    else:
        axes = np.asarray(axes, dtype=object).reshape(2, -1)
        if axes.shape[1] != n_models:
            raise ValueError(f"axes has {axes.shape[1]} columns for {n_models} models")
        figure = axes[0, 0].figure
    for column, name in enumerate(binned):
        reliability_diagram(binned[name], ax=axes[0, column], title=name, legend=False)
        smooth_reliability_diagram(smooth[name], ax=axes[1, column], title=name, legend=False)
    figure_legend_below(figure, list(axes[:, 0]), ncols=3)
    return figure


def smooth_reliability_grid(
    smooth: Mapping[str, SmoothReliability], ncols: int = 4, axes: Sequence[Axes] | None = None
) -> Figure:
    """One smooth reliability diagram (:func:`smooth_reliability_diagram`, with its density strip) per model, side
    by side (``ncols`` per row), and one legend below the figure, off the data. ``axes``: axes to draw on."""
    if not smooth:
        raise ValueError("smooth is empty; pass {model name: metrics.smooth_reliability(...)}")
    n_models = len(smooth)
    if axes is None:
        ncols = min(ncols, n_models)
        nrows = math.ceil(n_models / ncols)
        figure, grid = plt.subplots(nrows, ncols, figsize=(2.8 * ncols, 3.2 * nrows), squeeze=False)
        axes = list(grid.ravel())
        for unused in axes[n_models:]:
            unused.remove()
        figure.subplots_adjust(wspace=0.45, hspace=0.6, top=0.82, bottom=0.2)
    else:
        axes = list(axes)
        if len(axes) < n_models:
            raise ValueError(f"{len(axes)} axes given for {n_models} models")
        figure = axes[0].figure
    for ax, (name, diagram) in zip(axes, smooth.items()):
        smooth_reliability_diagram(diagram, ax=ax, title=name, legend=False)
        ax.title.set_fontsize("small")
    for ax in figure.axes:  # the density strips' x label, short enough for narrow panels
        if ax.get_xlabel().startswith("confidence"):
            ax.set_xlabel("confidence")
    figure_legend_below(figure, axes[:n_models], ncols=3)
    return figure


def overlaid_reliability(
    bins: ReliabilityBins,
    diagram: SmoothReliability,
    ax: Axes | None = None,
    title: str | None = None,
    smooth_color: str = "black",
    legend: bool = True,
    min_confidence: float = 0.0,
    min_density: float = 0.02,
) -> Figure:
    """The binned reliability diagram (:func:`helpers.plots.reliability_diagram`, with its histogram below) and the
    smooth one (:func:`smooth_reliability_diagram`: kernel-smoothed accuracy and bootstrap band) of the same
    forecasts on one axis, titled with both errors: the bars show what 15 bins make of the data, the line what a
    kernel makes of it.

    The line is drawn in ``smooth_color`` and its band in the same colour at 25 % opacity (grey for black).
    ``min_confidence`` drops the smooth curve below that confidence (e.g. 1/K: a top-label confidence of K classes
    is never below 1/K, so the kernel curve there rests on no forecast); ``min_density`` leaves out the curve and
    its band where the forecasts' kernel density is below that share of its peak or outside the non-empty bins
    (where there is next to no data the bootstrap band spikes, notebook 06; 0: drawn everywhere). ``legend=False``
    draws no legend on ``ax`` (for one shared figure legend: collect ``ax.get_legend_handles_labels()``)."""
    if min_confidence > 0:
        keep = diagram.mesh >= min_confidence
        diagram = replace(
            diagram,
            mesh=diagram.mesh[keep],
            mu=diagram.mu[keep],
            lower=diagram.lower[keep],
            upper=diagram.upper[keep],
            density=diagram.density[keep],
        )
    if min_density > 0:
        # no forecast there: below the share of the density's peak, or outside the non-empty bins (a wide kernel
        # keeps some density far from the data, where the smoothed accuracy is a ratio of near-zeros)
        edges, counts = to_numpy(bins.edges).astype(float), to_numpy(bins.counts)
        filled = np.flatnonzero(counts > 0)
        first, last = (edges[filled[0]], edges[filled[-1] + 1]) if filled.size else (0.0, 1.0)
        outside = (diagram.mesh < first) | (diagram.mesh > last)
        empty = outside | (diagram.density < min_density * float(np.max(diagram.density)))
        diagram = replace(
            diagram,
            mu=np.where(empty, np.nan, diagram.mu),
            lower=np.where(empty, np.nan, diagram.lower),
            upper=np.where(empty, np.nan, diagram.upper),
        )
    figure = reliability_diagram(bins, ax=ax, show_histogram=True, legend=False)
    ax = ax or figure.axes[0]
    smooth_reliability_diagram(
        diagram, ax=ax, color=smooth_color, show_density=False, label="smoothed accuracy", legend=False
    )
    ax.set_xlabel("")
    ax.set_title(
        f"{title + chr(10) if title else ''}ECE {100 * bins.ece:.2f} %, smooth ECE {100 * diagram.smooth_ece:.2f} %"
    )
    if legend:
        legend_beside(ax)
    elif ax.get_legend() is not None:
        ax.get_legend().remove()
    return figure
