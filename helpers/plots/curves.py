"""Line plots over training and over sample size: training and validation curves of one run or of several, the
loss-and-ECE panels of notebook 01, curves and per-setting values over training seeds (notebooks 02-05), and the
bias of calibration-error estimators against the test-set size (notebook 01).

Every function accepts ``ax=None`` (or ``axes=None``), draws on the axes it is given (or on a new figure) and returns
the Figure; what it draws is computed elsewhere (``helpers.training.fit``'s history, :mod:`helpers.metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.plots.style import (
    FALLBACK_COLORS,
    ModelStyle,
    figure_and_axes,
    figure_legend_below,
    figure_styles,
    label_axes,
    legend_below,
    model_style,
    to_numpy,
)

__all__ = [
    "HISTORY_LABELS",
    "training_curves",
    "validation_curves",
    "loss_and_ece_curves",
    "seed_band_curves",
    "curves_over_seeds",
    "seed_spread_plot",
    "estimator_curves",
]

#: words for the history keys of ``helpers.training.train`` (axis labels and legends of the training curves)
HISTORY_LABELS = {
    "train_loss": "training loss",
    "val_loss": "validation loss",
    "val_nll": "validation NLL",
    "val_accuracy": "validation accuracy",
    "val_ece": "validation ECE",
    "val_auroc": "validation AUROC",
}
#: line styles that tell apart models drawn in :func:`curves_over_seeds` (and its reference lines)
_SEED_LINESTYLES = ("-", "--", "-.", ":")


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
    figure, ax = figure_and_axes(ax, (5.0, 3.6))
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
    label_axes(ax, "epoch", " and ".join(words) if len(metrics) <= 2 else "value", title, grid=True)
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
    figure, ax = figure_and_axes(ax, (5.2, 3.8))
    styles = figure_styles(list(histories))
    for name, history in histories.items():
        points = [
            (entry.get("epoch", i + 1), entry[metric], entry.get(best_key))
            for i, entry in enumerate(history)
            if entry.get(metric) is not None
        ]
        if not points:
            raise ValueError(f"run {name!r} has no {metric!r} in its history")
        epochs, values, keys = zip(*points)
        (line,) = ax.plot(epochs, values, label=name, linewidth=1.2, **styles[name].line_kwargs(markers=False))
        if best_key is not None and all(k is not None for k in keys):
            best = int(np.argmin(keys))
            ax.plot(epochs[best], values[best], marker="o", color=line.get_color())
    label_axes(ax, "epoch", metric, title, grid=True)
    return figure


def loss_and_ece_curves(
    histories: Mapping[str, Mapping[Any, Sequence[Mapping[str, Any]]]],
    axes: Any = None,
    loss_keys: Sequence[str] = ("train_loss", "val_nll"),
    ece_key: str = "val_ece",
    recipe_colors: Mapping[str, str] | None = None,
) -> Figure:
    """The training curves of notebook 01: for each recipe a row of two panels, the losses per epoch (training loss
    solid, validation NLL dashed) and the validation ECE per epoch in %, one colour per training seed, so a metric
    in [0, 1] never shares an axis with one that is not. ``histories`` is {recipe: {seed: TrainedRun.history}};
    ``axes`` a (n_recipes, 2) array of axes (default: a new figure). One legend below the figure, off the data.
    ``recipe_colors`` ({recipe: colour}, every recipe): every seed of a recipe drawn in its recipe's colour, so a
    notebook whose other figures colour the recipes keeps one meaning per colour (the seeds are then not told apart).
    """
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
    missing = [recipe for recipe in histories if recipe_colors is not None and recipe not in recipe_colors]
    if missing:
        raise ValueError(f"recipe_colors has no colour for {missing}; give one for every recipe or pass None")
    styles = ("-", "--", ":", "-.")
    for (recipe, by_seed), (loss_ax, ece_ax) in zip(histories.items(), axes):
        for index, (seed, history) in enumerate(by_seed.items()):
            colour = FALLBACK_COLORS[index % len(FALLBACK_COLORS)] if recipe_colors is None else recipe_colors[recipe]
            for style, key in zip(styles, loss_keys):
                epochs, values = _history_points(history, key)
                loss_ax.plot(epochs, values, color=colour, linestyle=style, linewidth=1.2)
            epochs, values = _history_points(history, ece_key)
            label = f"seed {seed}" if recipe_colors is None else None
            ece_ax.plot(epochs, 100 * np.asarray(values), color=colour, linewidth=1.2, label=label)
        words = [HISTORY_LABELS.get(key, key) for key in loss_keys]
        loss_ax.set(xlabel="epoch", ylabel="loss (nats per image)", title=f"{recipe}: {' and '.join(words)}")
        ece_ax.set(xlabel="epoch", ylabel=f"{HISTORY_LABELS.get(ece_key, ece_key)} (%)", title=f"{recipe}: calibration")
        ece_ax.set_ylim(bottom=0)
        for ax in (loss_ax, ece_ax):
            ax.grid(alpha=0.3)
    for style, key in zip(styles, loss_keys):
        axes[0, 0].plot([], [], color="black", linestyle=style, label=HISTORY_LABELS.get(key, key))
    n_seeds = len(next(iter(histories.values())))
    if recipe_colors is not None:  # the colour is the recipe's (the row titles name it); one line per seed
        axes[0, 0].plot([], [], color="none", label=f"one line per training seed ({n_seeds})")
    ncols = len(loss_keys) + (1 if recipe_colors is not None else n_seeds)
    figure_legend_below(figure, [axes[0, 0], axes[0, 1]], ncols=ncols)
    return figure


def _history_points(history: Sequence[Mapping[str, Any]], key: str) -> tuple[list[Any], list[float]]:
    points = [(entry.get("epoch", i + 1), entry[key]) for i, entry in enumerate(history) if entry.get(key) is not None]
    if not points:
        raise ValueError(f"{key!r} is in no history entry; available: {sorted({k for e in history for k in e})}")
    epochs, values = zip(*points)
    return list(epochs), [float(v) for v in values]


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
    figure, ax = figure_and_axes(ax, (5.6, 3.6))
    styles = figure_styles(list(curves))
    for index, (name, per_seed) in enumerate(curves.items()):
        values = np.array([to_numpy(v).ravel() for v in per_seed], dtype=float)
        if values.ndim != 2:
            raise ValueError(f"{name!r}: the seeds' curves differ in length")
        steps = np.arange(1, values.shape[1] + 1) if x is None else to_numpy(x).ravel()
        step = max(1, steps.size // 10)  # about ten markers a curve, staggered between curves
        kwargs = {**styles[name].line_kwargs(), "markevery": (index * step // len(curves), step), "markersize": 4}
        (line,) = ax.plot(steps, values.mean(0), label=f"{name} (mean of {len(values)})", **kwargs)
        ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2, linewidth=0)
    label_axes(ax, xlabel, ylabel, title, grid=True)
    legend_below(ax)  # below the axes: bands fill the whole plot, a legend inside would hide some
    return figure


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
    or epochs). Models get their course colours and markers (:func:`helpers.plots.style.figure_styles`), the markers
    staggered along the curves, so a curve lying on top of another stays visible;
    ``reference_lines`` {label: y} are drawn as thin grey horizontal lines beneath the curves.
    """
    if not curves:
        raise ValueError("curves is empty; pass {model name: [(x, y) of each seed]}")
    figure, ax = figure_and_axes(ax, (5.6, 4.0))
    styles = figure_styles(list(curves))
    for index, (label, y) in enumerate((reference_lines or {}).items()):
        ax.axhline(y, color="grey", linewidth=1, linestyle=_SEED_LINESTYLES[1 + index % 3], zorder=1, label=label)
    for index, (name, seeds) in enumerate(curves.items()):
        if not seeds:
            raise ValueError(f"model {name!r} has no seed curve")
        x = to_numpy(seeds[0][0]).astype(float)
        ys = []
        for seed, (seed_x, seed_y) in enumerate(seeds):
            seed_x, seed_y = to_numpy(seed_x).astype(float), to_numpy(seed_y).astype(float)
            if seed_x.shape != x.shape or not np.allclose(seed_x, x):
                raise ValueError(
                    f"model {name!r}: seed {seed} has other x values than seed 0; the seeds of a model "
                    "must share x to be averaged"
                )
            if seed_y.shape != x.shape:
                raise ValueError(f"model {name!r}: seed {seed} has {seed_y.shape} y values for {x.shape} x values")
            ys.append(seed_y)
        ys = np.stack(ys)
        style, step = styles[name], max(1, x.size // 8)
        ax.fill_between(x, ys.min(0), ys.max(0), color=style.color, alpha=0.2, linewidth=0, zorder=2)
        ax.plot(
            x,
            ys.mean(0),
            **style.line_kwargs(),
            markevery=(index * step // len(curves), step),
            markersize=5,
            linewidth=1.8,
            zorder=3,
            label=f"{name} (mean of {len(ys)} seeds; band: range)" if index == 0 else name,
        )
    label_axes(ax, xlabel, ylabel, title, grid=True)
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
    model: str | None = None,
    reference_model: str | None = None,
    reference_per_seed: Sequence[float] | None = None,
    reference_setting: str | None = None,
) -> Figure:
    """One column per setting (e.g. an MbLS margin): each training seed as a dot, the mean as a bar-free marker
    with ± sd whiskers; an optional horizontal reference line (e.g. a baseline's mean). ``model`` / ``reference_model``
    name the models (e.g. "MbLS", "cross-entropy"), drawn in their course colours (black without a name).
    ``reference_per_seed``: the reference's own seeds, drawn as one more column (tick ``reference_setting``, by
    default ``reference_label``) with its mean ± sd marker in the reference model's style."""
    if len(settings) != len(per_seed) or not settings:
        raise ValueError(f"{len(settings)} settings for {len(per_seed)} lists of per-seed values")
    if reference_per_seed is not None and reference is None:
        raise ValueError("reference_per_seed needs reference (the value of the horizontal line)")
    figure, ax = figure_and_axes(ax, (5.0, 3.6))
    mean_style = model_style(model) if model else ModelStyle("black", "D")
    columns = [(values, mean_style) for values in per_seed]
    tick_labels = list(settings)
    if reference_per_seed is not None:
        columns.append(
            (reference_per_seed, model_style(reference_model) if reference_model else ModelStyle("black", "s"))
        )
        tick_labels.append(reference_setting or reference_label)
    positions = np.arange(len(columns))
    for position, (values, style) in zip(positions, columns):
        values = to_numpy(values).astype(float).ravel()
        ax.scatter(np.full(values.size, position), values, color="grey", s=14, zorder=2)
        sd = values.std(ddof=1) if values.size > 1 else 0.0
        ax.errorbar(position, values.mean(), yerr=sd, fmt=style.marker, color=style.color, capsize=4, zorder=3)
    if reference is not None:
        colour = model_style(reference_model).color if reference_model else "black"
        ax.axhline(reference, color=colour, linestyle="--", linewidth=1, label=reference_label)
        ax.legend(fontsize="small")
    ax.set_xticks(positions, labels=tick_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return figure


def estimator_curves(
    sample_sizes: Sequence[int],
    curves: Mapping[str, tuple[Any, Any]],
    references: Mapping[str, float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    ylabel: str = "estimate (mean ± sd over draws)",
    avoid_colors: Sequence[str] = (),
) -> Figure:
    """Mean ± sd of calibration-error estimates against the test-set size (log x), one line per estimator.

    ``curves`` is {estimator name: (means, sds)}, one value per entry of ``sample_sizes``; ``references`` is
    {name: value} of the quantities they estimate (e.g. the exact calibration error of a synthetic model), drawn
    as dashed horizontal lines, so the bias is the gap between a curve and its line. The legend sits below the
    axes, off the data. ``avoid_colors``: fallback colours left to other meanings of the notebook
    (:func:`helpers.plots.style.figure_styles`).
    """
    sizes = np.asarray(sample_sizes, dtype=float)
    if sizes.ndim != 1 or sizes.size == 0:
        raise ValueError("sample_sizes must be a non-empty 1-D sequence of test-set sizes")
    if not curves:
        raise ValueError("curves is empty; pass {estimator name: (means, sds)}")
    figure, ax = figure_and_axes(ax, (5.6, 4.0))
    styles = figure_styles(list(curves), avoid=avoid_colors)
    for name, (means, sds) in curves.items():
        means, sds = to_numpy(means).astype(float), to_numpy(sds).astype(float)
        if means.shape != sizes.shape or sds.shape != sizes.shape:
            raise ValueError(
                f"curve {name!r}: means {means.shape} and sds {sds.shape} must have one value per "
                f"sample size {sizes.shape}"
            )
        ax.errorbar(sizes, means, yerr=sds, markersize=4, capsize=3, label=name, **styles[name].line_kwargs())
    for index, (name, value) in enumerate((references or {}).items()):
        ax.axhline(float(value), color="black", linestyle=("--", ":", "-.")[index % 3], linewidth=1, label=name)
    ax.set_xscale("log")
    label_axes(ax, "test-set size n", ylabel, title, grid=True)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2, fontsize="small", frameon=False)
    return figure
