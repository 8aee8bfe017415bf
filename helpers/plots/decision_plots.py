"""Figures of the threshold decision (:mod:`helpers.metrics.decisions`): a one-vs-rest reliability diagram and a
decision curve (matplotlib only, Agg-safe). As in :mod:`helpers.plots.reliability`, compute and draw are separate,
every function takes ``ax=None`` and returns the Figure, and legends sit outside the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.metrics import DecisionCurve, ReliabilityBins
from helpers.plots.style import figure_and_axes, figure_styles, to_numpy

__all__ = [
    "one_vs_rest_reliability",
    "decision_curve_plot",
    "reliability_and_decision_curve",
    "OVER_MARK",
    "UNDER_MARK",
]

#: marks of a bin whose mean forecast lies above (over-confident) or below (under-confident) its frequency
OVER_MARK, UNDER_MARK = "v", "^"


def _threshold_line(ax: Axes, threshold: float | None) -> None:
    if threshold is not None:
        ax.axvline(threshold, color="grey", linestyle=":", linewidth=1, label=f"threshold t = {threshold:g}")


def one_vs_rest_reliability(
    bins_by_model: Mapping[str, ReliabilityBins],
    ax: Axes | None = None,
    threshold: float | None = None,
    title: str | None = None,
    x_max: float = 1.0,
) -> Figure:
    """Observed frequency of the class against the mean forecast P(class) per non-empty bin, one line per model
    (bins from :func:`helpers.metrics.one_vs_rest_bins`); the legend gives each model's one-vs-rest ECE of the
    class ("melanoma-vs-rest ECE": melanoma against the rest), not the top-label ECE of the tables. A bin drawn
    with ``OVER_MARK`` ("v") forecasts more than it observes (over-confident in the class), ``UNDER_MARK`` ("^")
    less. ``threshold`` draws the decision threshold; ``x_max`` zooms on the low forecasts where most patients and
    the threshold lie."""
    if not bins_by_model:
        raise ValueError("bins_by_model is empty; pass {model name: decisions.one_vs_rest_bins(...)}")
    figure, ax = figure_and_axes(ax, (5.0, 4.4))
    ax.plot([0, x_max], [0, x_max], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    kind = next(iter(bins_by_model.values())).kind
    styles = figure_styles(list(bins_by_model))
    for name, bins in bins_by_model.items():
        keep = to_numpy(bins.nonempty)
        forecast, observed = to_numpy(bins.confidence)[keep], to_numpy(bins.accuracy)[keep]
        # the one-vs-rest ECE of this class, not the top-label ECE of the tables: the legend says which
        label = f"{name} ({kind.replace(' vs rest', '-vs-rest')} ECE {100 * bins.ece:.1f} %)"
        (line,) = ax.plot(forecast, observed, linewidth=1.2, label=label, **styles[name].line_kwargs(markers=False))
        over = forecast > observed
        ax.plot(forecast[over], observed[over], OVER_MARK, color=line.get_color(), markersize=5)
        ax.plot(forecast[~over], observed[~over], UNDER_MARK, color=line.get_color(), markersize=5)
    ax.plot([], [], OVER_MARK, color="black", label="bin over-confident (forecast > frequency)")
    ax.plot([], [], UNDER_MARK, color="black", label="bin under-confident (forecast < frequency)")
    _threshold_line(ax, threshold)
    ax.set_xlim(0, x_max)
    ax.set_ylim(0, 1)
    class_name = kind.removesuffix(" vs rest")
    ax.set_xlabel(f"mean forecast P({class_name}) in bin")
    ax.set_ylabel(f"observed frequency of {class_name}")
    ax.set_title(title or f"reliability, {kind}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", borderaxespad=0)
    return figure


def decision_curve_plot(
    curves: Mapping[str, DecisionCurve],
    ax: Axes | None = None,
    threshold: float | None = None,
    title: str | None = None,
    per: int = 1000,
    unit: str = "patients",
) -> Figure:
    """Net benefit against the threshold probability, one line per model, with "treat all" and "treat none"
    (Vickers & Elkin 2006, Fig. 1 form). Net benefit is shown per ``per`` ``unit`` (true positives net of the
    weighted false positives): say "images of this set" for a curated, enriched test set. Curves reweighted to a
    stated prevalence (:func:`helpers.metrics.decision_curve` with ``prevalence=``) are labelled with it. The
    y-range stops a little below 0: "treat all" plunges at high thresholds."""
    if not curves:
        raise ValueError("curves is empty; pass {model name: decisions.decision_curve(...)}")
    figure, ax = figure_and_axes(ax, (5.4, 4.4))
    first = next(iter(curves.values()))
    styles = figure_styles(list(curves))
    for name, curve in curves.items():
        if not np.array_equal(curve.thresholds, first.thresholds) or curve.prevalence != first.prevalence:
            raise ValueError(
                f"curve {name!r} has other thresholds or another test set than the first; decision "
                "curves on one axis must share both"
            )
        ax.plot(
            curve.thresholds, per * curve.model, linewidth=1.4, label=name, **styles[name].line_kwargs(markers=False)
        )
    ax.plot(first.thresholds, per * first.treat_all, color="grey", linestyle="--", linewidth=1, label="treat all")
    # grey, not black: a solid black line is cross-entropy's course style (helpers.plots.style)
    ax.plot(first.thresholds, per * first.treat_none, color="0.55", linewidth=1, label="treat none")
    _threshold_line(ax, threshold)
    top = per * max(first.prevalence, max(float(c.model.max()) for c in curves.values()))
    ax.set_ylim(-0.15 * top, 1.1 * top)
    ax.set_xlim(float(first.thresholds[0]), float(first.thresholds[-1]))
    ax.set_xlabel("threshold probability t (treat when P ≥ t)")
    at = f" at prevalence {100 * first.prevalence:.3g} %" if first.reweighted else ""
    ax.set_ylabel(f"net benefit per {per:,} {unit}{at}")
    ax.set_title(title or "decision curve")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", borderaxespad=0)
    return figure


def reliability_and_decision_curve(
    bins_by_model: Mapping[str, ReliabilityBins],
    curves: Mapping[str, DecisionCurve],
    threshold: float | None = None,
    axes: Sequence[Axes] | None = None,
    titles: tuple[str, str] = ("one-vs-rest reliability", "decision curve"),
    unit: str = "patients",
) -> Figure:
    """The two panels of a decision analysis side by side: :func:`one_vs_rest_reliability` (is P(class) right
    near the threshold?) and :func:`decision_curve_plot` (what it is worth there)."""
    if axes is None:
        figure, axes = plt.subplots(1, 2, figsize=(11, 5.2), layout="constrained")
    one_vs_rest_reliability(bins_by_model, ax=axes[0], threshold=threshold, title=titles[0])
    decision_curve_plot(curves, ax=axes[1], threshold=threshold, title=titles[1], unit=unit)
    for ax in axes:  # side by side, each legend goes under its panel (off the data, no room lost to the right)
        longest = max(len(label) for label in ax.get_legend_handles_labels()[1])
        # two columns of long labels (a model name and its ECE) would run into the next panel's legend
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=2 if longest <= 40 else 1,
            fontsize="small",
            borderaxespad=0,
        )
    return axes[0].figure
