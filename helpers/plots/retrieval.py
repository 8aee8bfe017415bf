"""Multi-label retrieval figures (SPA paper, Figs. 3 and 4; notebook 10): retrieval mAP against the query length,
for one run per model or with the spread over training seeds, and a row of retrieved images framed by relevance
(the relevant images in the top k over many queries are an interval plot: :func:`helpers.plots.top_k_hits_plot`).

Every function accepts ``ax=None``, draws on the axes it is given (or on a new figure) and returns the Figure; the
mAP is computed in :mod:`helpers.metrics` (:class:`helpers.metrics.RetrievalResult`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.plots.style import figure_and_axes, figure_styles, label_axes, to_numpy

__all__ = ["retrieval_curve", "retrieval_curve_spread", "image_row"]


def retrieval_curve(
    map_by_length: Mapping[str, Mapping[int, float]], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Retrieval mAP against the query length ``|P|`` + ``|N|``, one line per model (SPA paper, Fig. 3)."""
    if not map_by_length:
        raise ValueError("map_by_length is empty; pass {model: RetrievalResult.map_by_length()}")
    figure, ax = figure_and_axes(ax, (5.0, 3.8))
    styles = figure_styles(list(map_by_length))
    for name, curve in map_by_length.items():
        lengths = sorted(curve)
        ax.plot(lengths, [100 * curve[length] for length in lengths], label=name, **styles[name].line_kwargs())
    label_axes(ax, "query length |P| + |N|", "retrieval mAP (%)", title or "multi-label retrieval", grid=True)
    return figure


def retrieval_curve_spread(
    map_by_length: Mapping[str, Mapping[int, tuple[float, float]]], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Retrieval mAP against the query length ``|P|`` + ``|N|`` (SPA paper, Fig. 3) with the spread over training seeds:
    ``{model: {length: (mean, sd)}}`` (sd None or 0 for a model without seeds, e.g. the exact posteriors), drawn
    as a line with ± sd error bars, in percent."""
    if not map_by_length:
        raise ValueError("map_by_length is empty; pass {model: {length: (mean, sd)}}")
    figure, ax = figure_and_axes(ax, (6.0, 4.2))
    styles = figure_styles(list(map_by_length))
    for name, curve in map_by_length.items():
        lengths = sorted(curve)
        means = np.array([100 * curve[length][0] for length in lengths])
        spread = np.array([100 * (curve[length][1] or 0.0) for length in lengths])
        ax.errorbar(
            lengths, means, yerr=spread if spread.any() else None, capsize=3, label=name, **styles[name].line_kwargs()
        )
    ax.set_xticks(sorted({length for curve in map_by_length.values() for length in curve}))
    label_axes(ax, "query length |P| + |N|", "retrieval mAP (%)", title or "multi-label retrieval", grid=True)
    ax.legend(fontsize="small", ncols=2)
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
    images = to_numpy(images)
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
    figure, ax = figure_and_axes(ax, (1.1 * k, 1.5))
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
