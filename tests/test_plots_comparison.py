"""difference_plot colours each paired difference by its verdict; before_after_plot draws two colours."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from helpers import plots  # noqa: E402


def _point_colors(ax):
    return [to_hex(line.get_color()) for line in ax.get_lines() if line.get_marker() == "o"]


def test_difference_plot_colours_by_verdict_and_direction():
    rows = {"better": (-0.02, -0.03, -0.01), "worse": (0.02, 0.01, 0.03), "unclear": (0.0, -0.01, 0.01)}
    figure = plots.difference_plot(rows, higher_is_better=False, xlabel="Δ ECE (%)")
    ax = figure.axes[0]
    assert _point_colors(ax) == [plots.BETTER_COLOR.lower(), plots.GAP_COLOR.lower(), plots.NEUTRAL_COLOR.lower()]
    xs = [line.get_xdata()[0] for line in ax.get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose(xs, [-2.0, 2.0, 0.0])  # scaled to percent
    assert [t.get_text() for t in ax.get_yticklabels()] == list(rows)
    flipped = plots.difference_plot(rows, higher_is_better=True).axes[0]
    assert _point_colors(flipped)[:2] == [plots.GAP_COLOR.lower(), plots.BETTER_COLOR.lower()]


def test_difference_plot_verdict_marks_write_the_verdict_and_use_no_verdict_colour():
    """With a green model (SPA) in the figure, green must not also mean "better": the verdict goes into the label."""
    rows = {"SPA+LPR": (0.02, 0.01, 0.03), "ASL": (-0.02, -0.03, -0.01), "SPA": (0.0, -0.01, 0.01)}
    ax = plots.difference_plot(rows, higher_is_better=True, verdict_marks=True).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["SPA+LPR · better", "ASL · worse", "SPA"]
    assert _point_colors(ax) == [plots.VERDICT_COLOR.lower()] * 2 + [plots.NEUTRAL_COLOR.lower()]
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert [line.get_markerfacecolor() for line in points][2] == "none"  # undecided: hollow
    panels = plots.difference_panels([{"rows": rows, "higher_is_better": True}], verdict_marks=True)
    assert [t.get_text() for t in panels.axes[0].get_yticklabels()][0] == "SPA+LPR · better"
    assert plots.BETTER_COLOR.lower() not in _point_colors(panels.axes[0])


def test_difference_panels_write_the_verdict_words_given():
    """A notebook whose tables say "beats" must be able to say "beats" in its figure too (08 c34)."""
    rows = {"SPA+LPR": (0.02, 0.01, 0.03), "ASL": (-0.02, -0.03, -0.01), "SPA": (0.0, -0.01, 0.01)}
    panels = plots.difference_panels(
        [{"rows": rows, "higher_is_better": True}], verdict_marks=True, verdict_words=("beats", "worse")
    )
    labels = [t.get_text() for t in panels.axes[0].get_yticklabels()]
    assert labels == ["SPA+LPR · beats", "ASL · worse", "SPA"]


def test_difference_plot_shows_an_estimate_outside_its_own_interval():
    """A percentile interval of a clipped statistic (debiased ECE) can exclude its point estimate; drawing the
    interval as error bars around the point then failed (negative error-bar lengths)."""
    figure = plots.difference_plot({"clipped": (0.118, 0.078, 0.116)}, higher_is_better=False)
    ax = figure.axes[0]
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose(points[0].get_xdata(), [11.8])
    (segments,) = [c for c in ax.collections if len(c.get_segments())]
    np.testing.assert_allclose(sorted(segments.get_segments()[0][:, 0]), [7.8, 11.6])


def test_before_after_plot_uses_two_colours_and_a_legend():
    before = {"CE": (0.15, 0.14, 0.16), "LS": (0.05, 0.04, 0.06)}
    after = {"CE": (0.03, 0.02, 0.04), "LS": (0.04, 0.03, 0.05)}
    ax = plots.before_after_plot(before, after, labels=("before TS", "after TS")).axes[0]
    colors = _point_colors(ax)
    assert len(set(colors)) == 2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["before TS", "after TS"]


def test_before_after_plot_takes_the_colours_it_is_given():
    before = {"CE": (0.15, 0.14, 0.16)}
    after = {"CE": (0.03, 0.02, 0.04)}
    ax = plots.before_after_plot(before, after, colors=("#1B9E77", "#7570B3")).axes[0]
    assert sorted(_point_colors(ax)) == ["#1b9e77", "#7570b3"]


def test_before_after_plot_refuses_different_models():
    with pytest.raises(ValueError, match="same models"):
        plots.before_after_plot({"a": (1, 0, 2)}, {"b": (1, 0, 2)})


def test_overlaid_reliability_draws_both_on_one_axis():
    import torch

    from helpers import metrics

    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(2.0 * torch.randn(600, 4, generator=generator, dtype=torch.float64), 1)
    labels = torch.randint(4, (600,), generator=generator)
    bins = metrics.reliability_bins(probs, labels, n_bins=15)
    diagram = metrics.smooth_reliability(probs, labels, n_bootstrap=5)
    figure = plots.overlaid_reliability(bins, diagram, title="CE")
    ax = figure.axes[0]
    line = next(line for line in ax.get_lines() if line.get_label() == "smoothed accuracy")
    shown = np.asarray(line.get_ydata())
    drawn = np.isfinite(shown)  # left out only where no forecast lies (the tails of the kernel density)
    np.testing.assert_array_equal(shown[drawn], diagram.mu[drawn])
    assert drawn.mean() > 0.5
    assert f"ECE {100 * bins.ece:.2f} %" in ax.get_title() and f"{100 * diagram.smooth_ece:.2f}" in ax.get_title()
    labels_shown = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels_shown) == len(set(labels_shown)) and "accuracy" in labels_shown
