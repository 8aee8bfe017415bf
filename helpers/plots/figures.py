"""Figures of the course: reliability diagrams, training curves, heat maps (matplotlib only, Agg-safe).

Compute and draw are separate: the diagrams take the :class:`helpers.metrics.ReliabilityBins` computed by
:func:`helpers.metrics.reliability_bins`, so what is drawn is exactly what ECE/MCE/ACE reduce. Every function
accepts ``ax=None`` (or ``axes=None``), draws on the axes it is given (or on a new figure) and returns the Figure.

Reliability diagram (DeGroot & Fienberg 1983; the form of Guo et al. 2017, Fig. 1): bars of per-bin accuracy,
a gap bar between the accuracy and the mean confidence of the bin -- red, hatched ``//``, above the accuracy where
the bin is over-confident; orange, hatched ``\\``, the top of the accuracy bar where it is under-confident (both
named in the legend, which sits beside the axes, off the data) -- the diagonal of perfect calibration, and
underneath a histogram of the fraction of samples per bin, which shows how much weight each bar carries in the ECE.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from mpl_toolkits.axes_grid1 import make_axes_locatable

from helpers.metrics import POOLED, ReliabilityBins, retention_area

__all__ = [
    "reliability_diagram",
    "reliability_grid",
    "reliability_overlay",
    "training_curves",
    "heatmap",
    "ece_title",
    "image_grid",
    "class_counts",
]

ACCURACY_COLOR = "#4C72B0"
GAP_COLOR = "#C44E52"
UNDER_GAP_COLOR = "#DD8452"
#: legend names of the two gap marks of a reliability diagram
OVER_GAP_LABEL = "over-confident gap (confidence above accuracy)"
UNDER_GAP_LABEL = "under-confident gap (accuracy above confidence)"
#: words for the history keys of ``helpers.training.train`` (axis labels and legends of the training curves)
HISTORY_LABELS = {
    "train_loss": "training loss",
    "val_loss": "validation loss",
    "val_nll": "validation NLL",
    "val_accuracy": "validation accuracy",
    "val_ece": "validation ECE",
    "val_auroc": "validation AUROC",
}


def _figure_and_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is None:
        figure, ax = plt.subplots(figsize=figsize)
        return figure, ax
    return ax.figure, ax


def _label_axes(ax: Axes, xlabel: str, ylabel: str | None = None, title: str | None = None, grid: bool = False) -> None:
    """Axis labels, the title (when given) and the small legend every line plot here ends with."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    if grid:
        ax.grid(alpha=0.3)


def _draw_intervals(ax: Axes, names: Sequence[str], values: np.ndarray) -> np.ndarray:
    """One (estimate, low, high) row per name as a dot with whiskers, the first name on top; returns the y."""
    positions = np.arange(len(names))[::-1]
    ax.errorbar(
        values[:, 0],
        positions,
        xerr=[values[:, 0] - values[:, 1], values[:, 2] - values[:, 0]],
        fmt="o",
        capsize=3,
        color=ACCURACY_COLOR,
    )
    ax.set_yticks(positions, labels=list(names))
    ax.grid(axis="x", alpha=0.3)
    return positions


def _text_colour(rgba: Sequence[float]) -> str:
    """Black on light cells, white on dark ones (relative luminance of the cell's colour): readable on either
    half of a diverging map, whose light middle made white text vanish."""
    red, green, blue = rgba[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _numpy(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def ece_title(bins: ReliabilityBins, title: str | None = None) -> str:
    """ "<title> - ECE x.xx %" plus "(pooled over labels)" for pooled multi-label bins."""
    text = f"ECE {100 * bins.ece:.2f} %"
    if bins.kind == POOLED:
        text += f" ({POOLED})"
    return f"{title}\n{text}" if title else text


def _gap_patch(label: str, linewidth: float = 0.5) -> Rectangle:
    """A patch of one gap mark, drawn as in :func:`reliability_diagram` (also when no bin has that gap): a legend
    handle, or, with no size and ``linewidth=0``, a placeholder on axes whose bars have none of that gap."""
    if label == OVER_GAP_LABEL:
        style = {"facecolor": GAP_COLOR, "alpha": 0.35, "hatch": "//", "edgecolor": GAP_COLOR}
    else:
        style = {"facecolor": UNDER_GAP_COLOR, "hatch": "\\\\", "edgecolor": "black"}
    return Rectangle((0.0, 0.0), 0.0, 0.0, linewidth=linewidth, label=label, **style)


def _legend_entries(axes: Sequence[Axes]) -> dict[str, Any]:
    """{label: handle} of the artists on ``axes``, first seen first; the gap marks as drawn patches."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label in (OVER_GAP_LABEL, UNDER_GAP_LABEL):
                handle = _gap_patch(label)
            entries.setdefault(label, handle)
    # the gap marks right after the bars they belong to, wherever their placeholder patch was found
    gaps = [label for label in (OVER_GAP_LABEL, UNDER_GAP_LABEL) if label in entries]
    bars = [label for label, handle in entries.items() if label not in gaps and isinstance(handle, BarContainer)]
    order = bars + gaps + [label for label in entries if label not in bars and label not in gaps]
    return {label: entries[label] for label in order}


def _legend_beside(ax: Axes, entries: Mapping[str, Any] | None = None) -> None:
    """The legend to the right of ``ax``, off the data."""
    entries = _legend_entries([ax]) if entries is None else entries
    ax.legend(
        list(entries.values()),
        list(entries),
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize="small",
        borderaxespad=0,
    )


def _figure_legend_below(figure: Figure, axes: Sequence[Axes], ncols: int = 2) -> None:
    """One legend for ``axes`` (entries by label, first seen first) centred below the figure, off every panel."""
    entries = _legend_entries(axes)
    if entries:
        figure.legend(
            list(entries.values()),
            list(entries),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncols=min(ncols, len(entries)),
            fontsize="small",
            frameon=False,
        )


def reliability_diagram(
    bins: ReliabilityBins,
    ax: Axes | None = None,
    title: str | None = None,
    show_histogram: bool = True,
    label: str | None = None,
    legend: bool = True,
) -> Figure:
    """Reliability diagram of one model from ``metrics.reliability_bins(probs, labels, n_bins, multilabel)``.

    One accuracy bar and one gap bar per NON-EMPTY bin (empty bins have no accuracy to draw); the title gives
    the ECE of these bins (equal to ``metrics.ece`` / ``metrics.multilabel_ece`` on the same data). The gap of an
    over-confident bin (mean confidence above accuracy) is a red ``//`` bar from the accuracy up to the confidence;
    that of an under-confident bin an orange ``\\\\`` bar from the confidence up to the accuracy, over the top of
    the accuracy bar. Both are named in the legend (:data:`OVER_GAP_LABEL`, :data:`UNDER_GAP_LABEL`), drawn beside
    the axes, off the data (``legend=False``: none, e.g. for one shared figure legend). With ``show_histogram`` a
    small axis below ``ax`` (sharing x) shows the fraction of samples in each bin. Pooled multi-label bins are
    labelled as such: x is the forecast P(present), y the frequency of "present".
    """
    if not isinstance(bins, ReliabilityBins):
        raise TypeError(
            f"bins must be a helpers.metrics.ReliabilityBins (from reliability_bins), got {type(bins).__name__}"
        )
    figure, ax = _figure_and_axes(ax, (6.4, 5.0) if show_histogram else (6.4, 4.2))
    edges = _numpy(bins.edges)
    nonempty = _numpy(bins.nonempty)
    left, width = edges[:-1][nonempty], np.diff(edges)[nonempty]
    accuracy, confidence = _numpy(bins.accuracy)[nonempty], _numpy(bins.confidence)[nonempty]
    pooled = bins.kind == POOLED
    over = confidence > accuracy

    ax.bar(
        left,
        accuracy,
        width=width,
        align="edge",
        color=ACCURACY_COLOR,
        edgecolor="black",
        linewidth=0.5,
        label=label or ("frequency" if pooled else "accuracy"),
    )
    ax.bar(
        left[over],
        (confidence - accuracy)[over],
        bottom=accuracy[over],
        width=width[over],
        align="edge",
        color=GAP_COLOR,
        alpha=0.35,
        hatch="//",
        edgecolor=GAP_COLOR,
        linewidth=0.5,
        label=OVER_GAP_LABEL,
    )
    ax.bar(
        left[~over],
        (accuracy - confidence)[~over],
        bottom=confidence[~over],
        width=width[~over],
        align="edge",
        color=UNDER_GAP_COLOR,
        hatch="\\\\",
        edgecolor="black",
        linewidth=0.5,
        label=UNDER_GAP_LABEL,
    )
    for label, present in ((OVER_GAP_LABEL, over.any()), (UNDER_GAP_LABEL, (~over).any())):
        if not present:  # an empty bar set has no patch to show in a legend: name the mark by a drawn patch
            ax.containers[-1 if label == UNDER_GAP_LABEL else -2].set_label(f"_{label}")
            ax.add_patch(_gap_patch(label, linewidth=0.0))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel('frequency of "present"' if pooled else "accuracy")
    ax.set_title(ece_title(bins, title))
    if legend:
        _legend_beside(ax)
    x_label = "predicted P(present)" if pooled else "confidence (top-label probability)"

    if show_histogram:
        histogram_ax = make_axes_locatable(ax).append_axes("bottom", size="25%", pad=0.1, sharex=ax)
        fraction = _numpy(bins.counts)[nonempty] / max(bins.n_samples, 1)
        histogram_ax.bar(left, fraction, width=width, align="edge", color="grey", edgecolor="black", linewidth=0.5)
        histogram_ax.set_ylabel("fraction")
        histogram_ax.set_xlabel(x_label)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel(x_label)
    return figure


def reliability_grid(
    bins_by_model: Mapping[str, ReliabilityBins],
    ncols: int = 3,
    show_histogram: bool = True,
    axes: Sequence[Axes] | None = None,
    suptitle: str | None = None,
) -> Figure:
    """One reliability diagram per model, side by side (``ncols`` per row); ``axes`` to draw on given axes. One
    legend for all of them (accuracy, both gap marks, the diagonal) sits below the figure, off the data."""
    if not bins_by_model:
        raise ValueError("bins_by_model is empty; pass {model name: metrics.reliability_bins(...)}")
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
        reliability_diagram(bins, ax=ax, title=name, show_histogram=show_histogram, legend=False)
    if suptitle:
        figure.suptitle(suptitle, y=1.0, va="bottom")
    figure.subplots_adjust(wspace=0.35, hspace=0.45)
    _figure_legend_below(figure, axes[:n_models])
    return figure


def reliability_overlay(
    bins_by_model: Mapping[str, ReliabilityBins], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Accuracy against mean confidence of the non-empty bins, one line per model, on one axis."""
    if not bins_by_model:
        raise ValueError("bins_by_model is empty; pass {model name: metrics.reliability_bins(...)}")
    figure, ax = _figure_and_axes(ax, (4.6, 4.4))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    pooled = False
    for name, bins in bins_by_model.items():
        nonempty = _numpy(bins.nonempty)
        ax.plot(
            _numpy(bins.confidence)[nonempty],
            _numpy(bins.accuracy)[nonempty],
            marker="o",
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


def training_curves(
    history: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] = ("train_loss", "val_loss"),
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Per-epoch curves from the list-of-dicts history of ``helpers.training.fit`` (x: the "epoch" key, else 1, 2, ...).

    Lines and the y label are named in words (:data:`HISTORY_LABELS`, the key itself for others). Entries missing
    a metric (or holding None) are skipped for that metric; a metric absent from every entry raises ValueError
    listing the keys that are there.
    """
    if not history:
        raise ValueError("history is empty; pass FitResult.history (a list of per-epoch dicts)")
    figure, ax = _figure_and_axes(ax, (5.0, 3.6))
    available = sorted({key for entry in history for key in entry})
    for metric in metrics:
        points = [
            (entry.get("epoch", i + 1), entry[metric])
            for i, entry in enumerate(history)
            if entry.get(metric) is not None
        ]
        if not points:
            raise ValueError(f"metric {metric!r} is in no history entry; available: {available}")
        epochs, values = zip(*points)
        ax.plot(epochs, values, marker="o", markersize=3, label=HISTORY_LABELS.get(metric, metric))
    words = [HISTORY_LABELS.get(metric, metric) for metric in metrics]
    _label_axes(ax, "epoch", " and ".join(words) if len(metrics) <= 2 else "value", title, grid=True)
    return figure


def heatmap(
    matrix: Any,
    row_names: Sequence[str],
    col_names: Sequence[str],
    ax: Axes | None = None,
    title: str | None = None,
    fmt: str = ".2f",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = True,
    colorbar: bool = True,
    aspect: str = "auto",
) -> Figure:
    """Annotated heat map of a (rows, cols) matrix (class-correlation matrices, label co-occurrence).

    ``aspect="equal"`` keeps the cells square however wide the axes are (class-by-class matrices)."""
    values = _numpy(matrix).astype(float)
    if values.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got shape {values.shape}")
    if values.shape != (len(row_names), len(col_names)):
        raise ValueError(
            f"matrix shape {values.shape} does not match {len(row_names)} row names and {len(col_names)} column names"
        )
    figure, ax = _figure_and_axes(ax, (1.0 + 0.6 * len(col_names), 0.8 + 0.5 * len(row_names)))
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect=aspect)
    ax.set_xticks(range(len(col_names)), labels=list(col_names), rotation=45, ha="right")
    ax.set_yticks(range(len(row_names)), labels=list(row_names))
    if annotate:
        for (row, col), value in np.ndenumerate(values):
            ax.text(
                col,
                row,
                format(value, fmt),
                ha="center",
                va="center",
                fontsize="small",
                color=_text_colour(image.cmap(image.norm(value))),
            )
    if colorbar:
        figure.colorbar(image, ax=ax)
    if title:
        ax.set_title(title)
    return figure


# --- data overview ---
def image_grid(
    images: Any,
    labels: Any,
    class_names: Sequence[str],
    per_class: int = 6,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """The first ``per_class`` images of every class, one row per class (uint8 (N, C, H, W) images, int labels)."""
    images = _numpy(images)
    labels = _numpy(labels)
    if images.ndim != 4 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(
            f"need uint8 images (N, C, H, W) and (N,) integer labels, got {images.shape} and "
            f"{labels.shape} (multi-label sets: show labels.argmax(1) or one finding at a time)"
        )
    height, width = images.shape[2:]
    rows = []
    for k in range(len(class_names)):
        chosen = images[labels == k][:per_class]
        tiles = np.zeros((per_class, images.shape[1], height, width), dtype=images.dtype)
        tiles[: len(chosen)] = chosen
        rows.append(np.concatenate(list(tiles.transpose(0, 2, 3, 1)), axis=1))
    mosaic = np.concatenate(rows, axis=0)
    figure, ax = _figure_and_axes(ax, (per_class * 0.9, len(class_names) * 0.9))
    ax.imshow(mosaic.squeeze(-1) if mosaic.shape[-1] == 1 else mosaic, cmap="gray", interpolation="nearest")
    ax.set_yticks([height * (k + 0.5) for k in range(len(class_names))], labels=list(class_names))
    ax.set_xticks([])
    ax.set_title(title or f"{per_class} training images per class")
    return figure


def class_counts(
    labels_by_split: Mapping[str, Any],
    class_names: Sequence[str],
    ax: Axes | None = None,
    title: str | None = "images per class",
) -> Figure:
    """Grouped horizontal bars: images per class in each split (multi-class integer labels or (N, T) multi-label)."""
    figure, ax = _figure_and_axes(ax, (6, 0.5 + 0.45 * len(class_names)))
    positions = np.arange(len(class_names))
    height = 0.8 / max(len(labels_by_split), 1)
    for offset, (split, labels) in enumerate(labels_by_split.items()):
        values = _numpy(labels)
        counts = values.sum(0) if values.ndim == 2 else np.bincount(values.astype(int), minlength=len(class_names))
        ax.barh(positions + offset * height, counts, height=height, label=f"{split} ({len(values):,})")
    ax.set_yticks(positions + height * (len(labels_by_split) - 1) / 2, labels=list(class_names))
    ax.set_xscale("log")
    _label_axes(ax, "images (log scale)", title=title)
    return figure


# --- multi-label track ---
def risk_minimiser_plot(
    eta: Any,
    estimates: Mapping[str, Any],
    ax: Axes | None = None,
    title: str | None = None,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    markers: int | None = None,
    legend_below: bool = False,
) -> Figure:
    """η̂ at the conditional-risk minimiser against the true η, one line per loss (or read-out), with the diagonal
    that a strictly proper loss follows (SPA paper, eq. 11 and Definition 1). ``estimates``: name -> (G,) values
    on the grid ``eta``; NaN entries (e.g. no interior minimiser) are left as gaps.

    ``markers``: draw about that many markers per curve, a different marker per curve and staggered along it,
    with dashed lines of decreasing width, so that curves lying on top of each other (several strictly proper
    read-outs on the diagonal) stay distinguishable; ``legend_below`` puts the legend under the axes."""
    if not estimates:
        raise ValueError("estimates is empty; pass {loss name: estimate at the risk minimiser for each eta}")
    eta = _numpy(eta).astype(float)
    figure, ax = _figure_and_axes(ax, (4.8, 4.4))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="η̂ = η (strictly proper)")
    for index, (name, values) in enumerate(estimates.items()):
        values = _numpy(values).astype(float)
        if values.shape != eta.shape:
            raise ValueError(f"{name}: {values.shape[0] if values.ndim else 0} values for {eta.shape[0]} grid points")
        style: dict[str, Any] = {}
        if markers:
            step = max(1, len(eta) // markers)
            style = dict(
                marker="osD^vP"[index % 6],
                markevery=(index * step // max(1, len(estimates)), step),
                markersize=5,
                linewidth=max(0.8, 2.4 - 0.5 * index),
            )
        ax.plot(eta, values, label=name, **{**style, **dict((styles or {}).get(name, {}))})
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    _label_axes(ax, "true posterior η", "estimate at the risk minimiser η̂*", title or "conditional-risk minimiser")
    if legend_below:
        _legend_below(ax, ncols=1)
    return figure


def partial_loss_plot(
    logits: Any, partials: Mapping[str, tuple[Any, Any]], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Partial losses ℓ₊(v) (solid) and ℓ₋(v) (dashed) against the logit v, one colour per loss (Fig. 2, left)."""
    if not partials:
        raise ValueError("partials is empty; pass {loss name: (loss_pos, loss_neg)} evaluated on logits")
    v = _numpy(logits).astype(float).reshape(-1)
    figure, ax = _figure_and_axes(ax, (5.0, 3.8))
    for index, (name, (positive, negative)) in enumerate(partials.items()):
        color = f"C{index}"
        ax.plot(v, _numpy(positive).astype(float).reshape(-1), color=color, label=f"{name}: ℓ₊ (y = 1)")
        ax.plot(v, _numpy(negative).astype(float).reshape(-1), color=color, linestyle="--", label=f"{name}: ℓ₋ (y = 0)")
    _label_axes(ax, "logit v", "partial loss", title or "partial losses", grid=True)
    return figure


def link_plot(logits: Any, links: Mapping[str, Any], ax: Axes | None = None, title: str | None = None) -> Figure:
    """Inverse links η̂ = [Ψ]⁻¹(v) against the logit v, one line per link (Fig. 2, right)."""
    if not links:
        raise ValueError("links is empty; pass {name: link values on logits}")
    v = _numpy(logits).astype(float).reshape(-1)
    figure, ax = _figure_and_axes(ax, (4.8, 3.8))
    for name, values in links.items():
        ax.plot(v, _numpy(values).astype(float).reshape(-1), label=name)
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.set_ylim(-0.02, 1.02)
    _label_axes(ax, "logit v", "η̂ = [Ψ]⁻¹(v)", title or "inverse link", grid=True)
    return figure


def retrieval_curve(
    map_by_length: Mapping[str, Mapping[int, float]], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Retrieval mAP against the query length ``|P|`` + ``|N|``, one line per model (SPA paper, Fig. 3)."""
    if not map_by_length:
        raise ValueError("map_by_length is empty; pass {model: RetrievalResult.map_by_length()}")
    figure, ax = _figure_and_axes(ax, (5.0, 3.8))
    for name, curve in map_by_length.items():
        lengths = sorted(curve)
        ax.plot(lengths, [100 * curve[length] for length in lengths], marker="o", label=name)
    _label_axes(ax, "query length |P| + |N|", "retrieval mAP (%)", title or "multi-label retrieval", grid=True)
    return figure


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
    figure, ax = _figure_and_axes(ax, (4.6, 0.6 + 0.35 * len(estimates)))
    names = list(estimates)
    values = np.array([[scale * float(x) for x in estimates[name]] for name in names])
    _draw_intervals(ax, names, values)
    ax.set_ylim(-0.6, len(names) - 0.4)
    if xlabel:
        ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return figure


def image_row(
    images: Any,
    relevant: Sequence[bool] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    captions: Sequence[str] | None = None,
) -> Figure:
    """k images (uint8 (k, C, H, W)) side by side on one axis; with ``relevant`` each gets a green (True) or red
    (False) frame, as the retrieval figures of the SPA paper (Fig. 4)."""
    images = _numpy(images)
    if images.ndim != 4 or len(images) == 0:
        raise ValueError(f"images must be a non-empty (k, C, H, W) array, got shape {images.shape}")
    if relevant is not None and len(relevant) != len(images):
        raise ValueError(f"{len(relevant)} relevance flags for {len(images)} images")
    k, _, height, width = images.shape
    gap = 2
    tiles = images.transpose(0, 2, 3, 1).astype(float) / 255.0
    if tiles.shape[-1] == 1:
        tiles = np.repeat(tiles, 3, axis=-1)
    frame = 2
    canvas = np.ones((height + 2 * frame, k * (width + 2 * frame + gap) - gap, 3))
    for index, tile in enumerate(tiles):
        left = index * (width + 2 * frame + gap)
        color = (0.2, 0.7, 0.2) if relevant is None or relevant[index] else (0.85, 0.1, 0.1)
        canvas[:, left : left + width + 2 * frame] = color
        canvas[frame : frame + height, left + frame : left + frame + width] = tile
    figure, ax = _figure_and_axes(ax, (1.1 * k, 1.5))
    ax.imshow(canvas, interpolation="nearest")
    ax.set_yticks([])
    if captions is not None:
        ax.set_xticks(
            [index * (width + 2 * frame + gap) + width / 2 + frame for index in range(k)],
            labels=list(captions),
            fontsize="x-small",
        )
    else:
        ax.set_xticks([])
    if title:
        ax.set_title(title, fontsize="small", loc="left")
    return figure


# --- multi-class track ---


def retention_curves(curves: Mapping[str, tuple[Any, Any]], ax: Axes | None = None, title: str | None = None) -> Figure:
    """Accuracy–retention curves (LS+ paper Fig. 1), one line per model, R-AUC in the legend.

    ``curves``: {name: (fractions, accuracy)} from :func:`helpers.metrics.retention_curve`.
    """
    if not curves:
        raise ValueError("curves is empty; pass {model name: selective.retention_curve(probs, labels)}")
    figure, ax = _figure_and_axes(ax, (5.0, 4.0))
    for name, (fractions, accuracy) in curves.items():
        fractions, accuracy = _numpy(fractions), _numpy(accuracy)
        ax.plot(fractions, accuracy, label=f"{name} (R-AUC {retention_area(fractions, accuracy):.4f})")
    ax.set_xlim(0, 1)
    _label_axes(
        ax,
        "retention fraction (most confident predictions kept)",
        "accuracy (referred samples counted correct)",
        title or "retention curves",
        grid=True,
    )
    return figure


def confidence_densities(
    correct: Any, incorrect: Any, ax: Axes | None = None, title: str | None = None, bins: int = 20
) -> Figure:
    """Density histograms of the top-label confidence of correct (green) and incorrect (red) predictions
    (LS+ paper Fig. 2); each histogram integrates to 1."""
    correct, incorrect = _numpy(correct).ravel(), _numpy(incorrect).ravel()
    if correct.size + incorrect.size == 0:
        raise ValueError("no confidences to plot; pass selective.confidence_by_correctness(probs, labels)")
    figure, ax = _figure_and_axes(ax, (4.6, 3.4))
    edges = np.linspace(0, 1, bins + 1)
    for values, color, label in ((correct, "#55A868", "correct"), (incorrect, GAP_COLOR, "incorrect")):
        if values.size:
            ax.hist(values, bins=edges, density=True, color=color, alpha=0.5, label=f"{label} (n={values.size})")
    ax.set_xlim(0, 1)
    _label_axes(ax, "confidence (top-label probability)", "density", title)
    return figure


def distance_histograms(
    distances_by_model: Mapping[str, Any],
    ax: Axes | None = None,
    margin: float | None = None,
    bins: int = 60,
    title: str | None = None,
) -> Figure:
    """Step histograms (densities) of the non-winning logit distances of each model (notebook 03), with an
    optional vertical line at the MbLS margin m."""
    if not distances_by_model:
        raise ValueError("distances_by_model is empty; pass {model name: logit_analysis.logit_distances(logits)}")
    figure, ax = _figure_and_axes(ax, (5.6, 3.6))
    high = max(float(np.max(_numpy(d))) for d in distances_by_model.values())
    edges = np.linspace(0, max(high, margin or 0) * 1.02 + 1e-9, bins + 1)
    for name, distances in distances_by_model.items():
        ax.hist(_numpy(distances).ravel(), bins=edges, density=True, histtype="step", linewidth=1.5, label=name)
    if margin is not None:
        ax.axvline(margin, color="black", linestyle="--", linewidth=1, label=f"margin m = {margin:g}")
    _label_axes(
        ax, r"logit distance $d_k = \max_j z_j - z_k$ (non-winning classes)", "density", title or "logit distances"
    )
    return figure


def interval_plot(
    rows: Mapping[str, tuple[float, float, float]], ax: Axes | None = None, xlabel: str = "", title: str | None = None
) -> Figure:
    """One estimate with its interval per row (``{name: (estimate, low, high)}``), a dot-and-whisker plot."""
    if not rows:
        raise ValueError("rows is empty; pass {model name: (estimate, low, high)}")
    figure, ax = _figure_and_axes(ax, (5.0, 0.8 + 0.32 * len(rows)))
    names = list(rows)
    values = np.array([rows[n] for n in names], dtype=float)
    if values.ndim != 2 or values.shape[1] != 3:
        raise ValueError("every row must be (estimate, low, high)")
    _draw_intervals(ax, names, values)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return figure


def correlation_comparison(
    correlations: Mapping[str, Any],
    names: Sequence[str],
    axes: Sequence[Axes] | None = None,
    limit: float | None = None,
    annotate: bool = True,
) -> Figure:
    """Label-correlation matrices side by side (e.g. real ChestX-ray14 vs synthetic), one panel per entry.

    Off-diagonal entries only (the unit diagonal would swamp the scale); a diverging colour map centred at 0 with
    one symmetric range shared by all panels (``limit``, default the largest ``|value|``), so negative correlations
    are visible and panels compare cell by cell; values annotated in black on the light middle of the map.
    """
    matrices = {title: _numpy(matrix).astype(float) for title, matrix in correlations.items()}
    n = len(names)
    for title, values in matrices.items():
        if values.shape != (n, n):
            raise ValueError(f"{title!r} has shape {values.shape}, expected ({n}, {n}) to match the names")
    if not matrices:
        raise ValueError("correlations is empty: pass at least one matrix")
    off_diagonal = ~np.eye(n, dtype=bool)
    if limit is None:
        limit = max(float(np.abs(values[off_diagonal]).max()) for values in matrices.values())
    if axes is None:
        figure, axes = plt.subplots(
            1, len(matrices), figsize=(6.2 * len(matrices) + 1.0, 5.8), squeeze=False, layout="constrained"
        )
        axes = axes[0]
    elif len(axes) != len(matrices):
        raise ValueError(f"got {len(axes)} axes for {len(matrices)} matrices")
    figure = axes[0].figure
    for ax, (title, values) in zip(axes, matrices.items()):
        shown = np.where(off_diagonal, values, np.nan)
        image = ax.imshow(shown, cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_xticks(range(n), labels=list(names), rotation=60, ha="right", fontsize="small")
        ax.set_yticks(range(n), labels=list(names), fontsize="small")
        ax.set_title(title)
        if annotate:
            for (row, col), value in np.ndenumerate(shown):
                if np.isfinite(value):
                    ax.text(
                        col,
                        row,
                        f"{100 * value:.0f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="black" if abs(value) < 0.6 * limit else "white",
                    )
    figure.colorbar(image, ax=list(axes), shrink=0.8, label="correlation (annotated ×100)")
    return figure


# ----------------------------------------------------------------------------------------------------------------
# smooth reliability diagram (data from helpers.metrics.smooth_reliability, computed by relplot)
# ----------------------------------------------------------------------------------------------------------------
from helpers.metrics import SmoothReliability  # noqa: E402  (kept with the function it serves)

__all__ += ["smooth_reliability_diagram"]


def smooth_reliability_diagram(
    diagram: SmoothReliability,
    ax: Axes | None = None,
    title: str | None = None,
    label: str | None = None,
    color: str = GAP_COLOR,
    show_density: bool = True,
    legend: bool = True,
) -> Figure:
    """Smooth reliability diagram (Błasiok & Nakkiran 2023) of ``metrics.smooth_reliability(probs, labels)``.

    The kernel-smoothed E[outcome | forecast] as a line, relplot's bootstrap band around it (2.5-97.5 % of the
    bootstrap fits), the diagonal, and the smooth ECE with its kernel width σ in the title. With ``show_density`` a
    small axis below ``ax`` (sharing x) shows the kernel density of the forecasts: where it is low the curve rests
    on few samples and the band widens. Drawing several models on one ``ax`` with different ``label`` / ``color``
    overlays them (pass ``show_density=False`` after the first). The legend sits beside the axes, off the data
    (``legend=False``: none).
    """
    if not isinstance(diagram, SmoothReliability):
        raise TypeError(
            f"diagram must be a helpers.metrics.SmoothReliability (from smooth_reliability), got "
            f"{type(diagram).__name__}"
        )
    figure, ax = _figure_and_axes(ax, (4.2, 5.0) if show_density else (4.2, 4.2))
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
        _legend_beside(ax)
    x_label = "predicted P(present)" if pooled else "confidence (top-label probability)"
    if show_density:
        density_ax = make_axes_locatable(ax).append_axes("bottom", size="25%", pad=0.1, sharex=ax)
        density_ax.fill_between(diagram.mesh, 0, diagram.density, color="grey", alpha=0.5, linewidth=0)
        density_ax.set_ylim(bottom=0)
        density_ax.set_ylabel("density")
        density_ax.set_xlabel(x_label)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel(x_label)
    return figure


# ----------------------------------------------------------------------------------------------------------------
# notebook 02: confidence a loss asks for; notebooks 02-03: a metric per epoch or per setting over training seeds
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["confidence_maps", "seed_band_curves", "seed_spread_plot"]


def confidence_maps(
    true_top_probability: Any,
    maps: Mapping[str, Any],
    ax: Axes | None = None,
    title: str | None = None,
    dashed: Sequence[str] = (),
) -> Figure:
    """θ(q) of each loss against the true top-class probability q (``helpers.lessons.optimal_confidence`` or
    ``stationary_confidence``), with the diagonal θ = q of a proper loss; names in ``dashed`` drawn dashed."""
    q = _numpy(true_top_probability).ravel()
    if not maps:
        raise ValueError("maps is empty; pass {loss name: θ for each q}")
    figure, ax = _figure_and_axes(ax, (5.2, 4.4))
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle=":", label="θ = q (proper)")
    for name, theta in maps.items():
        theta = _numpy(theta).ravel()
        if theta.shape != q.shape:
            raise ValueError(f"{name!r}: {theta.size} values of θ for {q.size} values of q")
        ax.plot(q, theta, label=name, linestyle="--" if name in dashed else "-")
    ax.set_xlim(float(q.min()), 1)
    ax.set_ylim(float(q.min()), 1)
    _label_axes(ax, "true probability q of the top class", "confidence θ", title, grid=True)
    return figure


def seed_band_curves(
    curves: Mapping[str, Sequence[Sequence[float]]],
    x: Sequence[float] | None = None,
    ax: Axes | None = None,
    xlabel: str = "epoch",
    ylabel: str = "",
    title: str | None = None,
) -> Figure:
    """Mean over training seeds (line) and min–max over seeds (band) of each model's per-epoch curve;
    ``curves[name]`` is one sequence per seed, all of the same length."""
    if not curves:
        raise ValueError("curves is empty; pass {model name: [values of seed 0, values of seed 1, ...]}")
    figure, ax = _figure_and_axes(ax, (5.6, 3.6))
    for name, per_seed in curves.items():
        values = np.array([_numpy(v).ravel() for v in per_seed], dtype=float)
        if values.ndim != 2:
            raise ValueError(f"{name!r}: the seeds' curves differ in length")
        steps = np.arange(1, values.shape[1] + 1) if x is None else _numpy(x).ravel()
        (line,) = ax.plot(steps, values.mean(0), label=f"{name} (mean of {len(values)})")
        ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2, linewidth=0)
    _label_axes(ax, xlabel, ylabel, title, grid=True)
    return figure


def seed_spread_plot(
    settings: Sequence[str],
    per_seed: Sequence[Sequence[float]],
    ax: Axes | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    reference: float | None = None,
    reference_label: str = "reference",
) -> Figure:
    """One column per setting (e.g. an MbLS margin): each training seed as a dot, the mean as a bar-free marker
    with ± sd whiskers; an optional horizontal reference line (e.g. a baseline's mean)."""
    if len(settings) != len(per_seed) or not settings:
        raise ValueError(f"{len(settings)} settings for {len(per_seed)} lists of per-seed values")
    figure, ax = _figure_and_axes(ax, (5.0, 3.6))
    positions = np.arange(len(settings))
    for position, values in zip(positions, per_seed):
        values = _numpy(values).astype(float).ravel()
        ax.scatter(np.full(values.size, position), values, color="grey", s=14, zorder=2)
        sd = values.std(ddof=1) if values.size > 1 else 0.0
        ax.errorbar(position, values.mean(), yerr=sd, fmt="D", color=ACCURACY_COLOR, capsize=4, zorder=3)
    if reference is not None:
        ax.axhline(reference, color=GAP_COLOR, linestyle="--", linewidth=1, label=reference_label)
        ax.legend(fontsize="small")
    ax.set_xticks(positions, labels=list(settings))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return figure


# ----------------------------------------------------------------------------------------------------------------
# curves over training seeds (notebooks 04, 05)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["curves_over_seeds"]

_SEED_LINESTYLES = ("-", "--", "-.", ":")


def curves_over_seeds(
    curves: Mapping[str, Sequence[tuple[Any, Any]]],
    ax: Axes | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    reference_lines: Mapping[str, float] | None = None,
) -> Figure:
    """One curve per model: the mean over training seeds as a line and the seeds' range (min to max) as a band.

    ``curves``: {name: [(x, y) of each seed]}, every seed of a model on the same x (e.g. retention fractions i/N
    or epochs). Models get distinct colours *and* line styles, so a curve lying on top of another stays visible;
    ``reference_lines`` {label: y} are drawn as thin grey horizontal lines beneath the curves.
    """
    if not curves:
        raise ValueError("curves is empty; pass {model name: [(x, y) of each seed]}")
    figure, ax = _figure_and_axes(ax, (5.6, 4.0))
    for index, (label, y) in enumerate((reference_lines or {}).items()):
        ax.axhline(y, color="grey", linewidth=1, linestyle=_SEED_LINESTYLES[1 + index % 3], zorder=1, label=label)
    for index, (name, seeds) in enumerate(curves.items()):
        if not seeds:
            raise ValueError(f"model {name!r} has no seed curve")
        x = _numpy(seeds[0][0]).astype(float)
        ys = []
        for seed, (seed_x, seed_y) in enumerate(seeds):
            seed_x, seed_y = _numpy(seed_x).astype(float), _numpy(seed_y).astype(float)
            if seed_x.shape != x.shape or not np.allclose(seed_x, x):
                raise ValueError(
                    f"model {name!r}: seed {seed} has other x values than seed 0; the seeds of a model "
                    "must share x to be averaged"
                )
            if seed_y.shape != x.shape:
                raise ValueError(f"model {name!r}: seed {seed} has {seed_y.shape} y values for {x.shape} x values")
            ys.append(seed_y)
        ys = np.stack(ys)
        color = f"C{index % 10}"
        ax.fill_between(x, ys.min(0), ys.max(0), color=color, alpha=0.2, linewidth=0, zorder=2)
        ax.plot(
            x,
            ys.mean(0),
            color=color,
            linestyle=_SEED_LINESTYLES[index % 4],
            linewidth=1.8,
            zorder=3,
            label=f"{name} (mean of {len(ys)} seeds; band: range)" if index == 0 else name,
        )
    _label_axes(ax, xlabel, ylabel, title, grid=True)
    return figure


# ----------------------------------------------------------------------------------------------------------------
# estimator bias against sample size; binned and smooth reliability diagrams side by side (notebook 01)
# ----------------------------------------------------------------------------------------------------------------
__all__ += [
    "estimator_curves",
    "binned_and_smooth_reliability",
    "smooth_reliability_grid",
    "loss_and_ece_curves",
]


def estimator_curves(
    sample_sizes: Sequence[int],
    curves: Mapping[str, tuple[Any, Any]],
    references: Mapping[str, float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    ylabel: str = "estimate (mean ± sd over draws)",
) -> Figure:
    """Mean ± sd of calibration-error estimates against the test-set size (log x), one line per estimator.

    ``curves`` is {estimator name: (means, sds)}, one value per entry of ``sample_sizes``; ``references`` is
    {name: value} of the quantities they estimate (e.g. the exact calibration error of a synthetic model), drawn
    as dashed horizontal lines, so the bias is the gap between a curve and its line. The legend sits below the
    axes, off the data.
    """
    sizes = np.asarray(sample_sizes, dtype=float)
    if sizes.ndim != 1 or sizes.size == 0:
        raise ValueError("sample_sizes must be a non-empty 1-D sequence of test-set sizes")
    if not curves:
        raise ValueError("curves is empty; pass {estimator name: (means, sds)}")
    figure, ax = _figure_and_axes(ax, (5.6, 4.0))
    for name, (means, sds) in curves.items():
        means, sds = _numpy(means).astype(float), _numpy(sds).astype(float)
        if means.shape != sizes.shape or sds.shape != sizes.shape:
            raise ValueError(
                f"curve {name!r}: means {means.shape} and sds {sds.shape} must have one value per "
                f"sample size {sizes.shape}"
            )
        ax.errorbar(sizes, means, yerr=sds, marker="o", markersize=4, capsize=3, label=name)
    for index, (name, value) in enumerate((references or {}).items()):
        ax.axhline(float(value), color="black", linestyle=("--", ":", "-.")[index % 3], linewidth=1, label=name)
    ax.set_xscale("log")
    _label_axes(ax, "test-set size n", ylabel, title, grid=True)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2, fontsize="small", frameon=False)
    return figure


def binned_and_smooth_reliability(
    binned: Mapping[str, ReliabilityBins], smooth: Mapping[str, SmoothReliability], axes: Any = None
) -> Figure:
    """For each model a binned reliability diagram (top row) above its smooth one with the bootstrap band (bottom
    row): :func:`reliability_diagram` of ``binned[name]`` and :func:`smooth_reliability_diagram` of
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
    _figure_legend_below(figure, list(axes[:, 0]), ncols=3)
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
    _figure_legend_below(figure, axes[:n_models], ncols=3)
    return figure


def loss_and_ece_curves(
    histories: Mapping[str, Mapping[Any, Sequence[Mapping[str, Any]]]],
    axes: Any = None,
    loss_keys: Sequence[str] = ("train_loss", "val_nll"),
    ece_key: str = "val_ece",
) -> Figure:
    """The training curves of notebook 01: for each recipe a row of two panels, the losses per epoch (training loss
    solid, validation NLL dashed) and the validation ECE per epoch in %, one colour per training seed, so a metric
    in [0, 1] never shares an axis with one that is not. ``histories`` is {recipe: {seed: TrainedRun.history}};
    ``axes`` a (n_recipes, 2) array of axes (default: a new figure). One legend below the figure, off the data."""
    if not histories or not all(histories.values()):
        raise ValueError("histories is empty; pass {recipe: {seed: TrainedRun.history}}")
    n_recipes = len(histories)
    if axes is None:
        figure, axes = plt.subplots(n_recipes, 2, figsize=(9.0, 2.5 * n_recipes), squeeze=False, layout="constrained")
    else:
        axes = np.asarray(axes, dtype=object).reshape(-1, 2)
        if axes.shape[0] != n_recipes:
            raise ValueError(f"axes has {axes.shape[0]} rows for {n_recipes} recipes")
        figure = axes[0, 0].figure
    styles = ("-", "--", ":", "-.")
    for (recipe, by_seed), (loss_ax, ece_ax) in zip(histories.items(), axes):
        for index, (seed, history) in enumerate(by_seed.items()):
            colour = f"C{index % 10}"
            for style, key in zip(styles, loss_keys):
                epochs, values = _history_points(history, key)
                loss_ax.plot(epochs, values, color=colour, linestyle=style, linewidth=1.2)
            epochs, values = _history_points(history, ece_key)
            ece_ax.plot(epochs, 100 * np.asarray(values), color=colour, linewidth=1.2, label=f"seed {seed}")
        words = [HISTORY_LABELS.get(key, key) for key in loss_keys]
        loss_ax.set(xlabel="epoch", ylabel="loss (nats per image)", title=f"{recipe}: {' and '.join(words)}")
        ece_ax.set(xlabel="epoch", ylabel=f"{HISTORY_LABELS.get(ece_key, ece_key)} (%)", title=f"{recipe}: calibration")
        ece_ax.set_ylim(bottom=0)
        for ax in (loss_ax, ece_ax):
            ax.grid(alpha=0.3)
    for style, key in zip(styles, loss_keys):
        axes[0, 0].plot([], [], color="black", linestyle=style, label=HISTORY_LABELS.get(key, key))
    _figure_legend_below(figure, [axes[0, 0], axes[0, 1]], ncols=len(loss_keys) + len(next(iter(histories.values()))))
    return figure


def _history_points(history: Sequence[Mapping[str, Any]], key: str) -> tuple[list[Any], list[float]]:
    points = [(entry.get("epoch", i + 1), entry[key]) for i, entry in enumerate(history) if entry.get(key) is not None]
    if not points:
        raise ValueError(f"{key!r} is in no history entry; available: {sorted({k for e in history for k in e})}")
    epochs, values = zip(*points)
    return list(epochs), [float(v) for v in values]


# ----------------------------------------------------------------------------------------------------------------
# notebook 07: how an asymmetric loss re-weights negatives; notebook 08: validation curves on separate axes
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["negative_weight_plot", "validation_curves"]


def negative_weight_plot(
    probability: Any, weights: Mapping[str, Any], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Gradient weight of one negative label relative to BCE's at the same logit, ``|ℓ₋'(v)|`` / σ(v), against the
    predicted probability σ(v) of "present" (log-log): how strongly each loss pushes down a negative of a given
    difficulty (easy negatives on the left). ``weights``: name -> (G,) ratios on the grid ``probability``."""
    if not weights:
        raise ValueError("weights is empty; pass {loss name: |dℓ₋/dv| / σ(v) on the probability grid}")
    p = _numpy(probability).astype(float).reshape(-1)
    figure, ax = _figure_and_axes(ax, (5.2, 3.8))
    for name, values in weights.items():
        values = _numpy(values).astype(float).reshape(-1)
        if values.shape != p.shape:
            raise ValueError(f"{name}: {values.shape[0]} values for {p.shape[0]} grid points")
        ax.plot(p, np.where(values > 0, values, np.nan), label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _label_axes(
        ax,
        "σ(v): predicted probability of a negative label",
        "|∂ℓ₋/∂v| relative to BCE",
        title or "gradient weight of a negative",
        grid=True,
    )
    return figure


def validation_curves(
    histories: Mapping[str, Sequence[Mapping[str, Any]]],
    metric: str,
    ax: Axes | None = None,
    title: str | None = None,
    best_key: str | None = None,
) -> Figure:
    """One validation metric per epoch, one line per run (e.g. one per loss and seed), on one axis; with
    ``best_key`` (e.g. "val_nll") a marker at the epoch where that key is lowest (the kept checkpoint)."""
    if not histories:
        raise ValueError("histories is empty; pass {run name: TrainedRun.history}")
    figure, ax = _figure_and_axes(ax, (5.2, 3.8))
    for index, (name, history) in enumerate(histories.items()):
        points = [
            (entry.get("epoch", i + 1), entry[metric], entry.get(best_key))
            for i, entry in enumerate(history)
            if entry.get(metric) is not None
        ]
        if not points:
            raise ValueError(f"run {name!r} has no {metric!r} in its history")
        epochs, values, keys = zip(*points)
        (line,) = ax.plot(epochs, values, label=name, color=f"C{index % 10}", linewidth=1.2)
        if best_key is not None and all(k is not None for k in keys):
            best = int(np.argmin(keys))
            ax.plot(epochs[best], values[best], marker="o", color=line.get_color())
    _label_axes(ax, "epoch", metric, title, grid=True)
    return figure


# ----------------------------------------------------------------------------------------------------------------
# paired differences and before/after comparisons (notebook 06)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["difference_plot", "before_after_plot"]

BETTER_COLOR = "#55A868"
NEUTRAL_COLOR = "#8C8C8C"
AFTER_COLOR = "#DD8452"


def _interval_rows(rows: Mapping[str, Any], scale: float) -> tuple[list[str], np.ndarray]:
    if not rows:
        raise ValueError("rows is empty; pass {name: (estimate, low, high)}")
    names = list(rows)
    values = scale * np.array([[float(x) for x in rows[name]] for name in names], dtype=float)
    if values.ndim != 2 or values.shape[1] != 3:
        raise ValueError("every row must be (estimate, low, high)")
    return names, values


def difference_plot(
    rows: Mapping[str, Any],
    higher_is_better: bool,
    ax: Axes | None = None,
    xlabel: str = "",
    title: str | None = None,
    scale: float = 100.0,
) -> Figure:
    """Paired differences (model − reference) with their intervals, one row per model, and a line at 0.

    ``rows`` maps a name to (estimate, low, high), e.g. a :class:`helpers.metrics.PairedBootstrapResult`;
    values are multiplied by ``scale``. A row whose interval excludes 0 is drawn green when the model is better in the
    metric's direction (``higher_is_better``), red when worse, grey when the interval contains 0. The estimate is
    drawn as a point and the interval as a bar of its own, so an estimate outside its interval shows as such; a
    point estimate without interval (NaN bounds, :data:`helpers.metrics.POINT_ESTIMATE_ONLY`) as a grey point
    alone.
    """
    names, values = _interval_rows(rows, scale)
    figure, ax = _figure_and_axes(ax, (5.0, 0.8 + 0.32 * len(names)))
    positions = np.arange(len(names))[::-1]
    ax.axvline(0.0, color="black", linewidth=1)
    for y, (estimate, low, high) in zip(positions, values):
        if low > 0 or high < 0:
            color = BETTER_COLOR if (low > 0) == higher_is_better else GAP_COLOR
        else:
            color = NEUTRAL_COLOR
        # the interval and the point drawn apart: a percentile interval of a biased statistic can exclude its own
        # point estimate (e.g. a debiased ECE clipped at 0), which an error bar around the point cannot show
        if np.isfinite(low) and np.isfinite(high):  # no bar for a point estimate only (stats.POINT_ESTIMATE_ONLY)
            middle = (low + high) / 2
            ax.errorbar([middle], [y], xerr=[[middle - low], [high - middle]], fmt="none", capsize=3, ecolor=color)
        ax.plot([estimate], [y], "o", color=color)
    ax.set_yticks(positions, labels=names)
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
) -> Figure:
    """Each model's value before and after a change (e.g. temperature scaling) in two colours, one row per model.

    ``before`` and ``after`` map the same names to (centre, low, high) — e.g. mean and mean ∓ sd over seeds —
    multiplied by ``scale``; the "before" point sits just above the row, the "after" point just below.
    """
    if list(before) != list(after):
        raise ValueError(
            f"before and after must name the same models in the same order: {list(before)} vs {list(after)}"
        )
    names, values_before = _interval_rows(before, scale)
    _, values_after = _interval_rows(after, scale)
    figure, ax = _figure_and_axes(ax, (5.0, 0.8 + 0.4 * len(names)))
    positions = np.arange(len(names))[::-1]
    for offset, values, color, label in (
        (0.15, values_before, ACCURACY_COLOR, labels[0]),
        (-0.15, values_after, AFTER_COLOR, labels[1]),
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
    _label_axes(ax, xlabel, title=title)
    return figure


__all__ += ["overlaid_reliability"]


def overlaid_reliability(
    bins: ReliabilityBins,
    diagram: SmoothReliability,
    ax: Axes | None = None,
    title: str | None = None,
    smooth_color: str = "black",
    legend: bool = True,
    min_confidence: float = 0.0,
) -> Figure:
    """The binned reliability diagram (:func:`reliability_diagram`, with its histogram below) and the smooth one
    (:func:`smooth_reliability_diagram`: kernel-smoothed accuracy and bootstrap band) of the same forecasts on one
    axis, titled with both errors: the bars show what 15 bins make of the data, the line what a kernel makes of it.

    The line is drawn in ``smooth_color`` and its band in the same colour at 25 % opacity (grey for black).
    ``min_confidence`` drops the smooth curve below that confidence (e.g. 1/K: a top-label confidence of K classes
    is never below 1/K, so the kernel curve there rests on no forecast). ``legend=False`` draws no legend on ``ax``
    (for one shared figure legend: collect ``ax.get_legend_handles_labels()``)."""
    if min_confidence > 0:
        from dataclasses import replace

        keep = diagram.mesh >= min_confidence
        diagram = replace(
            diagram,
            mesh=diagram.mesh[keep],
            mu=diagram.mu[keep],
            lower=diagram.lower[keep],
            upper=diagram.upper[keep],
            density=diagram.density[keep],
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
        _legend_beside(ax)
    elif ax.get_legend() is not None:
        ax.get_legend().remove()
    return figure


# ----------------------------------------------------------------------------------------------------------------
# notebook 10: retrieval mAP over seeds; notebooks 09-10: predictions against the exact posterior
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["retrieval_curve_spread", "binned_output_plot"]


def retrieval_curve_spread(
    map_by_length: Mapping[str, Mapping[int, tuple[float, float]]], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Retrieval mAP against the query length ``|P|`` + ``|N|`` (SPA paper, Fig. 3) with the spread over training seeds:
    ``{model: {length: (mean, sd)}}`` (sd None or 0 for a model without seeds, e.g. the exact posteriors), drawn
    as a line with ± sd error bars, in percent."""
    if not map_by_length:
        raise ValueError("map_by_length is empty; pass {model: {length: (mean, sd)}}")
    figure, ax = _figure_and_axes(ax, (6.0, 4.2))
    for name, curve in map_by_length.items():
        lengths = sorted(curve)
        means = np.array([100 * curve[length][0] for length in lengths])
        spread = np.array([100 * (curve[length][1] or 0.0) for length in lengths])
        ax.errorbar(lengths, means, yerr=spread if spread.any() else None, marker="o", capsize=3, label=name)
    ax.set_xticks(sorted({length for curve in map_by_length.values() for length in curve}))
    _label_axes(ax, "query length |P| + |N|", "retrieval mAP (%)", title or "multi-label retrieval", grid=True)
    ax.legend(fontsize="small", ncols=2)
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
    centres = _numpy(centres).astype(float)
    figure, ax = _figure_and_axes(ax, (5.2, 4.6))
    values = [_numpy(v).astype(float) for v in means.values()]
    if any(v.shape != centres.shape for v in values):
        raise ValueError(f"every entry of means must have the shape of centres {centres.shape}")
    low = min(float(centres.min()), *(float(v.min()) for v in values))
    high = max(float(centres.max()), *(float(v.max()) for v in values))
    if log and low <= 0:
        raise ValueError("a log scale needs positive bin centres and means; pass log=False")
    ax.plot([low, high], [low, high], linestyle="--", color="grey", linewidth=1, label="η̂ = η")
    for name, v in zip(means, values):
        ax.plot(centres, v, marker=".", label=name)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    scale = " (log scale)" if log else ""
    _label_axes(
        ax,
        f"exact posterior η, bin mean{scale}",
        f"mean predicted probability{scale}",
        title or "predictions against the exact posterior",
        grid=True,
    )
    return figure


# ----------------------------------------------------------------------------------------------------------------
# notebooks 07-08: figures that read at a glance (issue 16, item 7)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["weight_function_plot", "outlier_rows", "difference_panels", "pooled_reliability_curves"]


def _legend_below(ax: Axes, ncols: int = 2) -> None:
    """The legend under the axes, off the data."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=ncols, fontsize="small", frameon=False)


def weight_function_plot(
    thresholds: Any,
    weights: Mapping[str, Any],
    ax: Axes | None = None,
    title: str | None = None,
    normalise_at: float | None = 0.5,
) -> Figure:
    """Weight functions w(c) of proper losses (:func:`helpers.losses.weight_function`) against the cost
    threshold c, log-scaled, one line per loss, legend below the axes. A weight function is defined up to a
    positive factor (scaling a loss scales it), so each curve is divided by its value at ``normalise_at`` (None:
    drawn as given): the curves then compare which thresholds each loss cares about, not their scale."""
    if not weights:
        raise ValueError("weights is empty; pass {loss name: w(c) on the thresholds}")
    c = _numpy(thresholds).astype(float).reshape(-1)
    figure, ax = _figure_and_axes(ax, (5.2, 4.2))
    for index, (name, values) in enumerate(weights.items()):
        values = _numpy(values).astype(float).reshape(-1)
        if values.shape != c.shape:
            raise ValueError(f"{name}: {values.shape[0]} values for {c.shape[0]} thresholds")
        if normalise_at is not None:
            values = values / np.interp(normalise_at, c, values)
        ax.plot(c, values, label=name, color=f"C{index}", linestyle=("-", "--", "-.", ":")[index % 4])
    ax.set_yscale("log")
    ax.set_xlim(0, 1)
    scaled = f", relative to c = {normalise_at:g}" if normalise_at is not None else ""
    ax.set_xlabel("cost threshold c (act when the predicted probability exceeds c)")
    ax.set_ylabel(f"weight w(c){scaled} (log scale)")
    ax.set_title(title or "which decisions each proper loss rewards")
    ax.grid(alpha=0.3)
    _legend_below(ax)
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
    panels: Sequence[Mapping[str, Any]], ratio: float = 5.0, scale: float = 100.0, width: float = 4.2
) -> Figure:
    """Paired-difference panels side by side (:func:`difference_plot`), each
    ``{"rows": {name: (estimate, low, high)}, "higher_is_better": bool, "xlabel": str, "title": str}``; a row that
    dwarfs the others (:func:`outlier_rows`) is drawn in a panel of its own, on its own scale, right of its panel."""
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
        figsize=(width * len(drawn), 1.2 + 0.35 * max(heights)),
        squeeze=False,
        layout="constrained",
    )
    for ax, (rows, panel, title) in zip(axes[0], drawn):
        difference_plot(
            rows, panel["higher_is_better"], ax=ax, xlabel=panel.get("xlabel", ""), title=title, scale=scale
        )
    return figure


def pooled_reliability_curves(
    curves: Mapping[str, Mapping[str, Any]], ax: Axes | None = None, title: str | None = None, log: bool = True
) -> Figure:
    """Multi-label reliability where the forecasts are: observed frequency of "present" against the mean predicted
    probability in equal-mass bins of the pooled (image, finding) forecasts
    (:func:`helpers.lessons.equal_mass_reliability`), one line per model, both axes log-scaled, the
    diagonal of perfect calibration, legend below. A bin without a positive has no point on a log scale and is
    left out. ``curves``: name -> {"mean_predicted": (B,), "frequency": (B,)}."""
    if not curves:
        raise ValueError("curves is empty; pass {model: equal_mass_reliability(probs, labels)}")
    figure, ax = _figure_and_axes(ax, (5.0, 4.6))
    low, high = 1.0, 0.0
    markers = "osD^vP"
    for index, (name, curve) in enumerate(curves.items()):
        x = _numpy(curve["mean_predicted"]).astype(float)
        y = _numpy(curve["frequency"]).astype(float)
        keep = (x > 0) & (y > 0) if log else np.ones_like(x, dtype=bool)
        ax.plot(x[keep], y[keep], marker=markers[index % len(markers)], markersize=4, label=name)
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
    _legend_below(ax)
    return figure
