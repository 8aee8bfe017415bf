"""Heat maps and images: an annotated heat map of any matrix, label-correlation matrices side by side, a grid of
training images per class and the number of images per class in each split (the data overview of notebook 00).

Every function accepts ``ax=None`` (or ``axes=None``), draws on the axes it is given (or on a new figure) and returns
the Figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.plots.style import figure_and_axes, figure_styles, label_axes, legend_below, to_numpy

__all__ = ["heatmap", "correlation_comparison", "image_grid", "class_counts"]


def _text_colour(rgba: Sequence[float]) -> str:
    """Black on light cells, white on dark ones (relative luminance of the cell's colour): readable on either
    half of a diverging map, whose light middle made white text vanish."""
    red, green, blue = rgba[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


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
    values = to_numpy(matrix).astype(float)
    if values.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got shape {values.shape}")
    if values.shape != (len(row_names), len(col_names)):
        raise ValueError(
            f"matrix shape {values.shape} does not match {len(row_names)} row names and {len(col_names)} column names"
        )
    figure, ax = figure_and_axes(ax, (1.0 + 0.6 * len(col_names), 0.8 + 0.5 * len(row_names)))
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
    matrices = {title: to_numpy(matrix).astype(float) for title, matrix in correlations.items()}
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


def image_grid(
    images: Any,
    labels: Any,
    class_names: Sequence[str],
    per_class: int = 6,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """The first ``per_class`` images of every class, one row per class (uint8 (N, C, H, W) images, int labels)."""
    images = to_numpy(images)
    labels = to_numpy(labels)
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
    figure, ax = figure_and_axes(ax, (per_class * 0.9, len(class_names) * 0.9))
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
    log_scale: bool = True,
    colors: Sequence[str] | None = None,
) -> Figure:
    """Grouped horizontal bars: images per class in each split (multi-class integer labels or (N, T) multi-label),
    the classes top to bottom in the order given (as :func:`image_grid` lists them). The splits take the course's
    colours for names that are not models (:func:`helpers.plots.style.figure_styles`), never matplotlib's cycle,
    whose orange and green are ASL's and SPA's in the multi-label notebooks; ``colors`` (one per split) gives the
    colours outright. ``log_scale=False`` draws the counts on a linear axis,
    where an imbalance looks as large as it is."""
    if colors is not None and len(colors) < len(labels_by_split):
        raise ValueError(f"colors has {len(colors)} colours for {len(labels_by_split)} splits")
    figure, ax = figure_and_axes(ax, (6, 0.5 + 0.45 * len(class_names)))
    positions = np.arange(len(class_names))
    height = 0.8 / max(len(labels_by_split), 1)
    styles = figure_styles(list(labels_by_split))
    for offset, (split, labels) in enumerate(labels_by_split.items()):
        values = to_numpy(labels)
        counts = values.sum(0) if values.ndim == 2 else np.bincount(values.astype(int), minlength=len(class_names))
        color = colors[offset] if colors is not None else styles[split].color
        ax.barh(positions + offset * height, counts, height=height, label=f"{split} ({len(values):,})", color=color)
    ax.set_yticks(positions + height * (len(labels_by_split) - 1) / 2, labels=list(class_names))
    if log_scale:
        ax.set_xscale("log")
    ax.invert_yaxis()  # the first class on top, as in the image grid beside it (notebook 00), each split in order
    label_axes(ax, "images (log scale)" if log_scale else "images", title=title)
    legend_below(ax, ncols=len(labels_by_split))  # off the bars (the longest reach the right edge)
    return figure
