"""Binned reliability figures: the reliability diagram, a grid of them, an overlay of several models on one axis,
and the multi-label reliability curves of notebooks 07-10 (equal-mass bins, predictions against the exact posterior).

Compute and draw are separate: the diagrams take the :class:`helpers.metrics.ReliabilityBins` computed by
:func:`helpers.metrics.reliability_bins`, so what is drawn is exactly what ECE/MCE/ACE reduce. Every function
accepts ``ax=None`` (or ``axes=None``), draws on the axes it is given (or on a new figure) and returns the Figure.

Reliability diagram (DeGroot & Fienberg 1983; the form of Guo et al. 2017, Fig. 1): bars of per-bin accuracy,
a gap bar between the accuracy and the mean confidence of the bin -- grey, hatched ``//``, above the accuracy where
the bin is over-confident; the top of the accuracy bar hatched ``\\`` in white where it is under-confident (both
named in the legend, which sits beside the axes, off the data) -- the diagonal of perfect calibration, and
underneath a histogram of the fraction of samples per bin, which shows how much weight each bar carries in the ECE.
The colours and legend names of the gap marks are in :mod:`helpers.plots.style`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from helpers.metrics import POOLED, ReliabilityBins
from helpers.plots.style import (
    ACCURACY_COLOR,
    GAP_EDGE_COLOR,
    OVER_GAP_COLOR,
    OVER_GAP_LABEL,
    UNDER_GAP_COLOR,
    UNDER_GAP_LABEL,
    axis_below,
    figure_and_axes,
    figure_legend_below,
    figure_styles,
    gap_patch,
    label_axes,
    legend_below,
    legend_beside,
    to_numpy,
)

__all__ = [
    "ece_title",
    "reliability_diagram",
    "reliability_grid",
    "reliability_overlay",
    "pooled_reliability_curves",
    "binned_output_plot",
    "sparse_bin_label",
]


def ece_title(bins: ReliabilityBins, title: str | None = None) -> str:
    """ "<title> - ECE x.xx %" plus "(pooled over labels)" for pooled multi-label bins."""
    text = f"ECE {100 * bins.ece:.2f} %"
    if bins.kind == POOLED:
        text += f" ({POOLED})"
    return f"{title}\n{text}" if title else text


def _draw_accuracy_bars(ax: Axes, left: np.ndarray, width: np.ndarray, accuracy: np.ndarray, label: str) -> None:
    """One accuracy (or frequency) bar per non-empty bin, from 0 to the bin's accuracy."""
    ax.bar(
        left,
        accuracy,
        width=width,
        align="edge",
        color=ACCURACY_COLOR,
        edgecolor="black",
        linewidth=0.5,
        label=label,
    )


def _draw_gap_bars(ax: Axes, left: np.ndarray, width: np.ndarray, accuracy: np.ndarray, confidence: np.ndarray) -> None:
    """The gap marks of the non-empty bins: a grey ``//`` bar from the accuracy up to the confidence where the bin is
    over-confident; where it is under-confident, the top of the accuracy bar, from the confidence up to the accuracy,
    hatched ``\\\\`` in white (so the bar in the accuracy colour reaches the accuracy in every bin). A
    mark that no bin has is still named in the legend, by a drawn placeholder patch."""
    over = confidence > accuracy
    ax.bar(
        left[over],
        (confidence - accuracy)[over],
        bottom=accuracy[over],
        width=width[over],
        align="edge",
        color=OVER_GAP_COLOR,
        hatch="//",
        edgecolor=GAP_EDGE_COLOR,
        linewidth=0.5,
        label=OVER_GAP_LABEL,
    )
    ax.bar(
        left[~over],
        (accuracy - confidence)[~over],
        bottom=confidence[~over],
        width=width[~over],
        align="edge",
        color=ACCURACY_COLOR,  # the top of the accuracy bar itself: the bar reaches the accuracy in every bin
        hatch="\\\\",
        edgecolor=UNDER_GAP_COLOR,
        linewidth=0.5,
        label=UNDER_GAP_LABEL,
    )
    for label, present in ((OVER_GAP_LABEL, over.any()), (UNDER_GAP_LABEL, (~over).any())):
        if not present:  # an empty bar set has no patch to show in a legend: name the mark by a drawn patch
            ax.containers[-1 if label == UNDER_GAP_LABEL else -2].set_label(f"_{label}")
            ax.add_patch(gap_patch(label, linewidth=0.0))


def _draw_bin_fractions(
    ax: Axes, left: np.ndarray, width: np.ndarray, fraction: np.ndarray, x_label: str, top: float | None = None
) -> None:
    """The fraction of samples in each non-empty bin, as grey bars on a short axis under ``ax`` (sharing x); ``top``
    fixes the top of its y-axis (else matplotlib's own)."""
    histogram_ax = axis_below(ax)
    histogram_ax.bar(left, fraction, width=width, align="edge", color="grey", edgecolor="black", linewidth=0.5)
    if top is not None:
        histogram_ax.set_ylim(0, top)
    histogram_ax.set_ylabel("fraction")
    histogram_ax.set_xlabel(x_label)
    ax.tick_params(labelbottom=False)


def _name_omitted_bins(ax: Axes, n_omitted: int, min_count: int) -> None:
    """The bins with fewer than ``min_count`` samples are not drawn on ``ax`` (an accuracy of a handful of images is
    mostly sampling noise, and any bar or outline of it reads as a calibration gap); when there is one, the legend
    says so by an entry with an invisible handle."""
    if n_omitted:
        ax.add_patch(
            Rectangle((0.0, 0.0), 0.0, 0.0, facecolor="none", edgecolor="none", label=sparse_bin_label(min_count))
        )


def sparse_bin_label(min_count: int) -> str:
    """The legend note of :func:`reliability_diagram` on the bins it leaves out (fewer than ``min_count`` samples)."""
    return f"bins with fewer than {min_count} images: not drawn (too few to read)"


def reliability_diagram(
    bins: ReliabilityBins,
    ax: Axes | None = None,
    title: str | None = None,
    show_histogram: bool = True,
    label: str | None = None,
    legend: bool = True,
    histogram_top: float | None = None,
    min_count: int = 0,
) -> Figure:
    """Reliability diagram of one model from ``metrics.reliability_bins(probs, labels, n_bins, multilabel)``.

    One accuracy bar and one gap bar per NON-EMPTY bin (empty bins have no accuracy to draw); the title gives
    the ECE of these bins (equal to ``metrics.ece`` / ``metrics.multilabel_ece`` on the same data). The gap of an
    over-confident bin (mean confidence above accuracy) is a grey ``//`` bar from the accuracy up to the confidence;
    that of an under-confident bin is the top of the accuracy bar, from the confidence up to the accuracy, hatched
    ``\\\\`` in white. Both are named in the legend (:data:`helpers.plots.OVER_GAP_LABEL`,
    :data:`helpers.plots.UNDER_GAP_LABEL`), drawn beside the axes, off the data (``legend=False``: none, e.g. for
    one shared figure legend). With ``show_histogram`` a small axis below ``ax`` (sharing x) shows the fraction of
    samples in each bin (``histogram_top``: the top of its y-axis, e.g. one scale for several diagrams). Pooled
    multi-label bins are labelled as such: x is the forecast P(present), y the frequency of "present".
    ``min_count``: a bin with fewer samples is left out of the diagram (no bar, no gap mark), and the legend says
    so, because a near-empty bin's accuracy is mostly noise and any mark of it reads as a gap; the title's ECE and
    the histogram below still count it, with its small weight.
    """
    if not isinstance(bins, ReliabilityBins):
        raise TypeError(
            f"bins must be a helpers.metrics.ReliabilityBins (from reliability_bins), got {type(bins).__name__}"
        )
    if min_count < 0:
        raise ValueError(f"min_count must be >= 0, got {min_count}")
    figure, ax = figure_and_axes(ax, (6.4, 5.0) if show_histogram else (6.4, 4.2))
    edges = to_numpy(bins.edges)
    nonempty = to_numpy(bins.nonempty)
    left, width = edges[:-1][nonempty], np.diff(edges)[nonempty]
    accuracy, confidence = to_numpy(bins.accuracy)[nonempty], to_numpy(bins.confidence)[nonempty]
    pooled = bins.kind == POOLED
    sparse = to_numpy(bins.counts)[nonempty] < min_count

    kept = ~sparse
    _draw_accuracy_bars(ax, left[kept], width[kept], accuracy[kept], label or ("frequency" if pooled else "accuracy"))
    _draw_gap_bars(ax, left[kept], width[kept], accuracy[kept], confidence[kept])
    _name_omitted_bins(ax, int(sparse.sum()), min_count)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel('frequency of "present"' if pooled else "accuracy")
    ax.set_title(ece_title(bins, title))
    if legend:
        legend_beside(ax)
    x_label = "predicted P(present)" if pooled else "confidence (top-label probability)"

    if show_histogram:
        fraction = to_numpy(bins.counts)[nonempty] / max(bins.n_samples, 1)
        _draw_bin_fractions(ax, left, width, fraction, x_label, top=histogram_top)
    else:
        ax.set_xlabel(x_label)
    return figure


def reliability_grid(
    bins_by_model: Mapping[str, ReliabilityBins],
    ncols: int = 3,
    show_histogram: bool = True,
    axes: Sequence[Axes] | None = None,
    suptitle: str | None = None,
    shared_histogram: bool = False,
    min_count: int = 0,
) -> Figure:
    """One reliability diagram per model, side by side (``ncols`` per row); ``axes`` to draw on given axes. One
    legend for all of them (accuracy, both gap marks, the diagonal) sits below the figure, off the data.
    ``min_count``: bins with fewer samples are left out of the diagrams, not of the histograms
    (:func:`reliability_diagram`).
    ``shared_histogram``: every histogram gets the same y-axis (0 to the largest bin fraction of any model, plus
    5 %), so the panels' bin masses compare by eye; by default each histogram has its own scale."""
    if not bins_by_model:
        raise ValueError("bins_by_model is empty; pass {model name: metrics.reliability_bins(...)}")
    if shared_histogram and not show_histogram:
        raise ValueError("shared_histogram=True needs show_histogram=True (there is no histogram to share)")
    histogram_top = None
    if shared_histogram:
        histogram_top = 1.05 * max(float(b.counts.max()) / max(b.n_samples, 1) for b in bins_by_model.values())
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    n_models = len(bins_by_model)
    if axes is None:
        ncols = min(ncols, n_models)
        nrows = math.ceil(n_models / ncols)
        figure, grid = plt.subplots(
            nrows, ncols, figsize=(4.0 * ncols, (4.8 if show_histogram else 4.0) * nrows), squeeze=False
        )
        axes = list(grid.ravel())
        for unused in axes[n_models:]:
            unused.remove()
    else:
        axes = list(axes)
        if len(axes) < n_models:
            raise ValueError(f"{len(axes)} axes given for {n_models} models")
        figure = axes[0].figure
    for ax, (name, bins) in zip(axes, bins_by_model.items()):
        reliability_diagram(
            bins,
            ax=ax,
            title=name,
            show_histogram=show_histogram,
            legend=False,
            histogram_top=histogram_top,
            min_count=min_count,
        )
    if suptitle:
        figure.suptitle(suptitle, y=1.0, va="bottom")
    figure.subplots_adjust(wspace=0.35, hspace=0.45)
    figure_legend_below(figure, axes[:n_models])
    return figure


def reliability_overlay(
    bins_by_model: Mapping[str, ReliabilityBins], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Accuracy against mean confidence of the non-empty bins, one line per model, on one axis."""
    if not bins_by_model:
        raise ValueError("bins_by_model is empty; pass {model name: metrics.reliability_bins(...)}")
    figure, ax = figure_and_axes(ax, (4.6, 4.4))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    pooled = False
    styles = figure_styles(list(bins_by_model))
    for name, bins in bins_by_model.items():
        nonempty = to_numpy(bins.nonempty)
        ax.plot(
            to_numpy(bins.confidence)[nonempty],
            to_numpy(bins.accuracy)[nonempty],
            **styles[name].line_kwargs(),
            markersize=4,
            label=f"{name} (ECE {100 * bins.ece:.2f} %)",
        )
        pooled = pooled or bins.kind == POOLED
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean predicted P(present) in bin" if pooled else "mean confidence in bin")
    ax.set_ylabel('frequency of "present"' if pooled else "accuracy")
    default_title = "reliability" + (f" ({POOLED})" if pooled else "")
    ax.set_title(title or default_title)
    ax.legend(loc="upper left", fontsize="small")
    return figure


def pooled_reliability_curves(
    curves: Mapping[str, Mapping[str, Any]],
    ax: Axes | None = None,
    title: str | None = None,
    log: bool = True,
    legend: str = "below",
    markersize: float = 4.0,
) -> Figure:
    """Multi-label reliability where the forecasts are: observed frequency of "present" against the mean predicted
    probability in equal-mass bins of the pooled (image, finding) forecasts
    (:func:`helpers.lessons.equal_mass_reliability`), one line per model, both axes log-scaled, the
    diagonal of perfect calibration, legend below. A bin without a positive has no point on a log scale and is
    left out. ``curves``: name -> {"mean_predicted": (B,), "frequency": (B,)}. ``legend``: "below" the axes or
    "beside" them (no gap under a tall legend); ``markersize``: larger markers show a post-hoc variant's hollow
    ones apart from its loss's filled ones."""
    if not curves:
        raise ValueError("curves is empty; pass {model: equal_mass_reliability(probs, labels)}")
    if legend not in ("below", "beside"):
        raise ValueError(f'legend must be "below" or "beside", got {legend!r}')
    figure, ax = figure_and_axes(ax, (5.0, 4.6))
    low, high = 1.0, 0.0
    styles = figure_styles(list(curves))
    for name, curve in curves.items():
        x = to_numpy(curve["mean_predicted"]).astype(float)
        y = to_numpy(curve["frequency"]).astype(float)
        keep = (x > 0) & (y > 0) if log else np.ones_like(x, dtype=bool)
        ax.plot(x[keep], y[keep], markersize=markersize, label=name, **styles[name].line_kwargs())
        low, high = min(low, x[keep].min(), y[keep].min()), max(high, x[keep].max(), y[keep].max())
    ax.plot([low, high], [low, high], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    scaled = " (log scale)" if log else ""
    ax.set_xlabel(f"mean predicted probability in the bin{scaled}")
    ax.set_ylabel(f'observed frequency of "present"{scaled}')
    ax.set_title(title or "pooled reliability, equal-mass bins")
    ax.grid(alpha=0.3)
    if legend == "beside":
        legend_beside(ax)
    else:
        legend_below(ax)
    return figure


def binned_output_plot(
    centres: Any, means: Mapping[str, Any], ax: Axes | None = None, title: str | None = None, log: bool = True
) -> Figure:
    """Mean predicted probability per bin of the exact posterior η against the bin's mean η, one line per model,
    with the diagonal of perfect calibration (a reliability diagram against the truth, possible on synthetic data).
    ``centres`` (B,) and each ``means[name]`` (B,) come from the caller's binning; ``log`` draws both axes on a log
    scale, where the many small posteriors of a multi-label set are visible."""
    if not means:
        raise ValueError("means is empty; pass {model: mean prediction per η bin}")
    centres = to_numpy(centres).astype(float)
    figure, ax = figure_and_axes(ax, (5.2, 4.6))
    values = [to_numpy(v).astype(float) for v in means.values()]
    if any(v.shape != centres.shape for v in values):
        raise ValueError(f"every entry of means must have the shape of centres {centres.shape}")
    low = min(float(centres.min()), *(float(v.min()) for v in values))
    if log and low <= 0:
        raise ValueError("a log scale needs positive bin centres and means; pass log=False")
    # x spans the bins only (a prediction far below the lowest bin stretches y, not x into an empty region)
    first, last = float(centres.min()), float(centres.max())
    ax.plot([first, last], [first, last], linestyle="--", color="grey", linewidth=1, label="η̂ = η")
    styles = figure_styles(list(means))
    for name, v in zip(means, values):
        ax.plot(centres, v, markersize=4, label=name, **styles[name].line_kwargs())
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(first / 1.5, last * 1.5)
    else:
        pad = 0.03 * (last - first)
        ax.set_xlim(first - pad, last + pad)
    scale = " (log scale)" if log else ""
    label_axes(
        ax,
        f"exact posterior η, bin mean{scale}",
        f"mean predicted probability{scale}",
        title or "predictions against the exact posterior",
        grid=True,
    )
    return figure
