"""How a loss behaves: what it asks the model to predict (the conditional-risk minimiser against the true
posterior, SPA paper eq. 11 and Definition 1; the confidence θ(q) a multi-class loss asks for, notebook 02), the
parts it is made of (partial losses and inverse links, SPA paper Fig. 2; the gradient weight of a negative label,
notebook 07; the weight functions of proper losses, notebook 08), and what it did to a trained model's logits (the
logit distances against the MbLS margin, notebook 03).

Every function accepts ``ax=None``, draws on the axes it is given (or on a new figure) and returns the Figure; the
curves are computed in :mod:`helpers.losses` and :mod:`helpers.lessons`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from helpers.plots.style import figure_and_axes, figure_styles, label_axes, to_numpy
from helpers.plots.style import legend_below as place_legend_below

__all__ = [
    "risk_minimiser_plot",
    "confidence_maps",
    "partial_loss_plot",
    "link_plot",
    "negative_weight_plot",
    "weight_function_plot",
    "distance_histograms",
]


def _proper_diagonal(ax: Axes, label: str) -> None:
    """The diagonal a proper loss follows, as a wide pale band under the curves: not a thin dashed or dotted line,
    which a curve lying on the diagonal hides (BCE in 07) or a dotted loss variant resembles (02)."""
    ax.plot([0, 1], [0, 1], color="0.82", linewidth=4, linestyle="-", zorder=1, label=label)


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
    eta = to_numpy(eta).astype(float)
    figure, ax = figure_and_axes(ax, (4.8, 4.4))
    _proper_diagonal(ax, "η̂ = η (strictly proper)")
    course = figure_styles(list(estimates))
    for index, (name, values) in enumerate(estimates.items()):
        values = to_numpy(values).astype(float)
        if values.shape != eta.shape:
            raise ValueError(f"{name}: {values.shape[0] if values.ndim else 0} values for {eta.shape[0]} grid points")
        style: dict[str, Any] = course[name].line_kwargs(markers=bool(markers))
        if markers:
            step = max(1, len(eta) // markers)
            style.update(
                markevery=(index * step // max(1, len(estimates)), step),
                markersize=5,
                linewidth=max(0.8, 2.4 - 0.5 * index),
            )
        ax.plot(eta, values, label=name, **{**style, **dict((styles or {}).get(name, {}))})
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    label_axes(ax, "true posterior η", "estimate at the risk minimiser η̂*", title or "conditional-risk minimiser")
    if legend_below:
        place_legend_below(ax, ncols=1)
    return figure


def confidence_maps(
    true_top_probability: Any,
    maps: Mapping[str, Any],
    ax: Axes | None = None,
    title: str | None = None,
    dashed: Sequence[str] = (),
    proper_label: str = "θ = q (proper)",
) -> Figure:
    """θ(q) of each loss against the true top-class probability q (``helpers.lessons.optimal_confidence`` or
    ``stationary_confidence``), with the diagonal θ = q of a proper loss as a wide pale band, labelled
    ``proper_label`` (e.g. "cross-entropy (θ = q)" where cross-entropy's map is that band); names in ``dashed``
    drawn dashed."""
    q = to_numpy(true_top_probability).ravel()
    if not maps:
        raise ValueError("maps is empty; pass {loss name: θ for each q}")
    figure, ax = figure_and_axes(ax, (5.2, 4.4))
    _proper_diagonal(ax, proper_label)
    styles = figure_styles(list(maps))
    for name, theta in maps.items():
        theta = to_numpy(theta).ravel()
        if theta.shape != q.shape:
            raise ValueError(f"{name!r}: {theta.size} values of θ for {q.size} values of q")
        line = "--" if name in dashed else styles[name].linestyle
        ax.plot(q, theta, label=name, color=styles[name].color, linestyle=line)
    # the y-range starts at the lowest θ drawn (not at q's lowest): a map dipping below it stays visible
    low = min(float(q.min()), *(float(np.nanmin(to_numpy(theta))) for theta in maps.values()))
    ax.set_xlim(float(q.min()), 1)
    ax.set_ylim(low - 0.02 * (1 - low), 1)
    label_axes(ax, "true probability q of the top class", "confidence θ", title, grid=True)
    return figure


def partial_loss_plot(
    logits: Any, partials: Mapping[str, tuple[Any, Any]], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Partial losses ℓ₊(v) (solid) and ℓ₋(v) (dashed) against the logit v, one colour per loss (Fig. 2, left)."""
    if not partials:
        raise ValueError("partials is empty; pass {loss name: (loss_pos, loss_neg)} evaluated on logits")
    v = to_numpy(logits).astype(float).reshape(-1)
    figure, ax = figure_and_axes(ax, (5.0, 3.8))
    styles = figure_styles(list(partials))
    for name, (positive, negative) in partials.items():
        color = styles[name].color
        ax.plot(v, to_numpy(positive).astype(float).reshape(-1), color=color, label=f"{name}: ℓ₊ (y = 1)")
        ax.plot(
            v, to_numpy(negative).astype(float).reshape(-1), color=color, linestyle="--", label=f"{name}: ℓ₋ (y = 0)"
        )
    label_axes(ax, "logit v", "partial loss", title or "partial losses", grid=True)
    return figure


def link_plot(logits: Any, links: Mapping[str, Any], ax: Axes | None = None, title: str | None = None) -> Figure:
    """Inverse links η̂ = [Ψ]⁻¹(v) against the logit v, one line per link (Fig. 2, right)."""
    if not links:
        raise ValueError("links is empty; pass {name: link values on logits}")
    v = to_numpy(logits).astype(float).reshape(-1)
    figure, ax = figure_and_axes(ax, (4.8, 3.8))
    styles = figure_styles(list(links))
    for name, values in links.items():
        ax.plot(v, to_numpy(values).astype(float).reshape(-1), label=name, **styles[name].line_kwargs(markers=False))
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.set_ylim(-0.02, 1.02)
    label_axes(ax, "logit v", "η̂ = [Ψ]⁻¹(v)", title or "inverse link", grid=True)
    return figure


def negative_weight_plot(
    probability: Any, weights: Mapping[str, Any], ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Gradient weight of one negative label relative to BCE's at the same logit, ``|ℓ₋'(v)|`` / σ(v), against the
    predicted probability σ(v) of "present" (log-log): how strongly each loss pushes down a negative of a given
    difficulty (easy negatives on the left). ``weights``: name -> (G,) ratios on the grid ``probability``."""
    if not weights:
        raise ValueError("weights is empty; pass {loss name: |dℓ₋/dv| / σ(v) on the probability grid}")
    p = to_numpy(probability).astype(float).reshape(-1)
    figure, ax = figure_and_axes(ax, (5.2, 3.8))
    styles = figure_styles(list(weights))
    for name, values in weights.items():
        values = to_numpy(values).astype(float).reshape(-1)
        if values.shape != p.shape:
            raise ValueError(f"{name}: {values.shape[0]} values for {p.shape[0]} grid points")
        ax.plot(p, np.where(values > 0, values, np.nan), label=name, **styles[name].line_kwargs(markers=False))
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_axes(
        ax,
        "σ(v): predicted probability of a negative label",
        "|∂ℓ₋/∂v| relative to BCE",
        title or "gradient weight of a negative",
        grid=True,
    )
    return figure


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
    c = to_numpy(thresholds).astype(float).reshape(-1)
    figure, ax = figure_and_axes(ax, (5.2, 4.2))
    styles = figure_styles(list(weights))
    for index, (name, values) in enumerate(weights.items()):
        values = to_numpy(values).astype(float).reshape(-1)
        if values.shape != c.shape:
            raise ValueError(f"{name}: {values.shape[0]} values for {c.shape[0]} thresholds")
        if normalise_at is not None:
            values = values / np.interp(normalise_at, c, values)
        ax.plot(c, values, label=name, color=styles[name].color, linestyle=("-", "--", "-.", ":")[index % 4])
    ax.set_yscale("log")
    ax.set_xlim(0, 1)
    scaled = f", relative to c = {normalise_at:g}" if normalise_at is not None else ""
    ax.set_xlabel("cost threshold c (act when the predicted probability exceeds c)")
    ax.set_ylabel(f"weight w(c){scaled} (log scale)")
    ax.set_title(title or "which decisions each proper loss rewards")
    ax.grid(alpha=0.3)
    place_legend_below(ax)
    return figure


def distance_histograms(
    distances_by_model: Mapping[str, Any],
    ax: Axes | None = None,
    margin: float | None = None,
    bins: int = 60,
    title: str | None = None,
    x_max: float | None = None,
    linestyles: Mapping[str, Any] | None = None,
) -> Figure:
    """Step histograms (densities) of the non-winning logit distances of each model (notebook 03), with an
    optional vertical line at the MbLS margin m.

    ``x_max`` fixes the right end of the bins and the x axis (e.g. the same for two panels, so the margin line sits
    at the same place); distances beyond it are left out of the drawing but not of the density's normalisation.
    ``linestyles`` ({model name: matplotlib line style}) tells apart models whose colours are close (solid by
    default)."""
    if not distances_by_model:
        raise ValueError("distances_by_model is empty; pass {model name: logit_analysis.logit_distances(logits)}")
    if x_max is not None and not x_max > 0:
        raise ValueError(f"x_max must be positive, got {x_max}")
    unknown = set(linestyles or {}) - set(distances_by_model)
    if unknown:
        raise ValueError(f"linestyles names models not drawn: {sorted(unknown)}")
    figure, ax = figure_and_axes(ax, (5.6, 3.6))
    high = max(float(np.max(to_numpy(d))) for d in distances_by_model.values())
    right = float(x_max) if x_max is not None else max(high, margin or 0) * 1.02 + 1e-9
    edges = np.linspace(0, right, bins + 1)
    styles = figure_styles(list(distances_by_model))
    for name, distances in distances_by_model.items():
        values = to_numpy(distances).ravel()
        weights = np.full(values.size, 1.0 / (values.size * (edges[1] - edges[0])))  # density over all distances
        ax.hist(
            values,
            bins=edges,
            weights=weights,
            histtype="step",
            linewidth=1.5,
            label=name,
            color=styles[name].color,
            linestyle=(linestyles or {}).get(name, "-"),
        )
    if x_max is not None:
        ax.set_xlim(0, right)
    if margin is not None:
        ax.axvline(margin, color="black", linestyle="--", linewidth=1, label=f"margin m = {margin:g}")
    label_axes(
        ax, r"logit distance $d_k = \max_j z_j - z_k$ (non-winning classes)", "density", title or "logit distances"
    )
    return figure
