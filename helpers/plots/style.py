"""What the figures of :mod:`helpers.plots` share: the palette, the two gap marks of a reliability diagram, and the
small helpers that pick the axes, convert tensors and place labels and legends (beside the axes, below them, or
below the whole figure, always off the data)."""

from __future__ import annotations

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

__all__ = ["ACCURACY_COLOR", "GAP_COLOR", "UNDER_GAP_COLOR", "OVER_GAP_LABEL", "UNDER_GAP_LABEL"]

ACCURACY_COLOR = "#4C72B0"
GAP_COLOR = "#C44E52"
UNDER_GAP_COLOR = "#DD8452"
#: legend names of the two gap marks of a reliability diagram
OVER_GAP_LABEL = "over-confident gap (confidence above accuracy)"
UNDER_GAP_LABEL = "under-confident gap (accuracy above confidence)"


def figure_and_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is None:
        figure, ax = plt.subplots(figsize=figsize)
        return figure, ax
    return ax.figure, ax


def to_numpy(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def axis_below(ax: Axes) -> Axes:
    """A short axis under ``ax``, sharing its x (the histogram or density strip under a reliability diagram)."""
    return make_axes_locatable(ax).append_axes("bottom", size="25%", pad=0.1, sharex=ax)


def label_axes(ax: Axes, xlabel: str, ylabel: str | None = None, title: str | None = None, grid: bool = False) -> None:
    """Axis labels, the title (when given) and the small legend every line plot here ends with."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    if grid:
        ax.grid(alpha=0.3)


def gap_patch(label: str, linewidth: float = 0.5) -> Rectangle:
    """A patch of one gap mark, drawn as in :func:`helpers.plots.reliability_diagram` (also when no bin has that
    gap): a legend handle, or, with no size and ``linewidth=0``, a placeholder on axes whose bars have none of that
    gap."""
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
                handle = gap_patch(label)
            entries.setdefault(label, handle)
    # the gap marks right after the bars they belong to, wherever their placeholder patch was found
    gaps = [label for label in (OVER_GAP_LABEL, UNDER_GAP_LABEL) if label in entries]
    bars = [label for label, handle in entries.items() if label not in gaps and isinstance(handle, BarContainer)]
    order = bars + gaps + [label for label in entries if label not in bars and label not in gaps]
    return {label: entries[label] for label in order}


def legend_beside(ax: Axes, entries: Mapping[str, Any] | None = None) -> None:
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


def legend_below(ax: Axes, ncols: int = 2) -> None:
    """The legend under the axes, off the data."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=ncols, fontsize="small", frameon=False)


def figure_legend_below(figure: Figure, axes: Sequence[Axes], ncols: int = 2) -> None:
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
