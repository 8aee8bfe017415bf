"""Figures of the course (matplotlib only, Agg-safe): reliability diagrams, training curves, heat maps, decision
curves and shift figures. Every function draws on the ``ax`` it is given and returns the Figure; what it draws is
computed in :mod:`helpers.metrics` or :mod:`helpers.calibration`.

Modules: :mod:`~helpers.plots.reliability` (binned reliability diagrams, grids, overlays, pooled multi-label
reliability), :mod:`~helpers.plots.smooth_reliability` (smooth reliability diagrams, binned and smooth together),
:mod:`~helpers.plots.curves` (training and validation curves, curves over seeds, estimator bias against sample
size), :mod:`~helpers.plots.intervals` (bootstrap intervals, paired differences, before/after),
:mod:`~helpers.plots.heatmaps` (heat maps, correlation matrices, image grids, class counts),
:mod:`~helpers.plots.retrieval` (retrieval mAP, retrieved images), :mod:`~helpers.plots.loss_behaviour` (risk
minimisers, confidence maps, partial losses, links, weight functions, logit distances),
:mod:`~helpers.plots.selective_prediction` (retention curves, confidence densities),
:mod:`~helpers.plots.decision_plots` (one-vs-rest reliability, decision curves), :mod:`~helpers.plots.shift_plots`
(a metric across test sets, class priors as grouped bars), and :mod:`~helpers.plots.style` (the course palette:
one colour and marker per model, :func:`model_style`; the gap marks and the shared helpers).

Imports :mod:`helpers.metrics`, :mod:`helpers.calibration` and :mod:`helpers.utils`."""

from helpers.plots.curves import (  # noqa: F401
    HISTORY_LABELS,
    curves_over_seeds,
    estimator_curves,
    loss_and_ece_curves,
    seed_band_curves,
    seed_spread_plot,
    training_curves,
    validation_curves,
)
from helpers.plots.decision_plots import (  # noqa: F401
    decision_curve_plot,
    one_vs_rest_reliability,
    reliability_and_decision_curve,
)
from helpers.plots.heatmaps import (  # noqa: F401
    class_counts,
    correlation_comparison,
    heatmap,
    image_grid,
)
from helpers.plots.intervals import (  # noqa: F401
    AFTER_COLOR,
    BETTER_COLOR,
    NEUTRAL_COLOR,
    VERDICT_COLOR,
    before_after_plot,
    bootstrap_interval_plot,
    difference_panels,
    difference_plot,
    interval_plot,
    outlier_rows,
    top_k_hits_plot,
)
from helpers.plots.loss_behaviour import (  # noqa: F401
    confidence_maps,
    distance_histograms,
    link_plot,
    negative_weight_plot,
    partial_loss_plot,
    risk_minimiser_plot,
    weight_function_plot,
)
from helpers.plots.reliability import (  # noqa: F401
    binned_output_plot,
    ece_title,
    pooled_reliability_curves,
    reliability_diagram,
    reliability_grid,
    reliability_overlay,
    sparse_bin_label,
)
from helpers.plots.retrieval import (  # noqa: F401
    image_row,
    retrieval_curve,
    retrieval_curve_spread,
)
from helpers.plots.selective_prediction import (  # noqa: F401
    confidence_densities,
    retention_curves,
)
from helpers.plots.shift_plots import (  # noqa: F401
    class_prior_bars,
    metric_across_test_sets,
)
from helpers.plots.smooth_reliability import (  # noqa: F401
    binned_and_smooth_reliability,
    overlaid_reliability,
    smooth_reliability_diagram,
    smooth_reliability_grid,
)
from helpers.plots.style import (  # noqa: F401
    ACCURACY_COLOR,
    FALLBACK_COLORS,
    GAP_COLOR,
    GAP_EDGE_COLOR,
    MIN_GAP_DISTANCE,
    MODEL_STYLES,
    MULTICLASS_MODELS,
    MULTILABEL_MODELS,
    OVER_GAP_COLOR,
    OVER_GAP_LABEL,
    UNDER_GAP_COLOR,
    UNDER_GAP_LABEL,
    ModelStyle,
    figure_styles,
    model_style,
    normalise_model_name,
)

__all__ = [
    "ACCURACY_COLOR",
    "GAP_COLOR",
    "GAP_EDGE_COLOR",
    "OVER_GAP_COLOR",
    "UNDER_GAP_COLOR",
    "OVER_GAP_LABEL",
    "UNDER_GAP_LABEL",
    "ModelStyle",
    "MODEL_STYLES",
    "MULTICLASS_MODELS",
    "MULTILABEL_MODELS",
    "FALLBACK_COLORS",
    "MIN_GAP_DISTANCE",
    "normalise_model_name",
    "model_style",
    "figure_styles",
    "HISTORY_LABELS",
    "ece_title",
    "reliability_diagram",
    "reliability_grid",
    "reliability_overlay",
    "sparse_bin_label",
    "training_curves",
    "heatmap",
    "image_grid",
    "class_counts",
    "risk_minimiser_plot",
    "partial_loss_plot",
    "link_plot",
    "retrieval_curve",
    "bootstrap_interval_plot",
    "image_row",
    "retention_curves",
    "confidence_densities",
    "distance_histograms",
    "interval_plot",
    "correlation_comparison",
    "smooth_reliability_diagram",
    "confidence_maps",
    "seed_band_curves",
    "seed_spread_plot",
    "curves_over_seeds",
    "estimator_curves",
    "binned_and_smooth_reliability",
    "smooth_reliability_grid",
    "loss_and_ece_curves",
    "negative_weight_plot",
    "validation_curves",
    "BETTER_COLOR",
    "NEUTRAL_COLOR",
    "VERDICT_COLOR",
    "AFTER_COLOR",
    "difference_plot",
    "before_after_plot",
    "overlaid_reliability",
    "retrieval_curve_spread",
    "top_k_hits_plot",
    "binned_output_plot",
    "weight_function_plot",
    "outlier_rows",
    "difference_panels",
    "pooled_reliability_curves",
    "one_vs_rest_reliability",
    "decision_curve_plot",
    "reliability_and_decision_curve",
    "class_prior_bars",
    "metric_across_test_sets",
]
