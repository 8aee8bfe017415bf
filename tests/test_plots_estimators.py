"""The estimator-bias curves and the binned-beside-smooth reliability figure draw exactly the computed data."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import metrics, plots  # noqa: E402


def test_estimator_curves_draw_means_error_bars_and_reference_lines():
    sizes = [100, 1000, 10000]
    curves = {
        "ECE, 15 bins": ([0.07, 0.02, 0.007], [0.01, 0.004, 0.001]),
        "smooth ECE": ([0.05, 0.02, 0.009], [0.01, 0.003, 0.001]),
    }
    figure = plots.estimator_curves(sizes, curves, {"true CE": 0.0371}, title="Bayes model")
    ax = figure.axes[0]
    containers = {container.get_label(): container for container in ax.containers}
    for name, (means, sds) in curves.items():
        data_line, _, (bar_lines,) = containers[name]
        np.testing.assert_allclose(data_line.get_xdata(), sizes)
        np.testing.assert_allclose(data_line.get_ydata(), means)
        # the error bars span mean ± sd
        np.testing.assert_allclose(
            [segment[:, 1] for segment in bar_lines.get_segments()],
            np.stack([np.subtract(means, sds), np.add(means, sds)], 1),
        )
    reference = next(line for line in ax.get_lines() if line.get_label() == "true CE")
    np.testing.assert_allclose(reference.get_ydata(), [0.0371, 0.0371])
    assert ax.get_xscale() == "log" and ax.get_title() == "Bayes model"
    figure.canvas.draw()  # the legend sits below the axes, off the data
    assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0


def test_estimator_curves_refuse_a_curve_of_the_wrong_length_and_draw_on_a_given_axis():
    with pytest.raises(ValueError, match="one value per sample size"):
        plots.estimator_curves([100, 1000], {"ECE": ([0.1], [0.01])})
    figure, ax = plt.subplots()
    assert plots.estimator_curves([100, 1000], {"ECE": ([0.1, 0.05], [0.01, 0.0])}, ax=ax) is figure


def test_binned_and_smooth_reliability_puts_each_models_two_diagrams_in_its_column():
    generator = torch.Generator().manual_seed(0)
    models = {}
    for name, sharpness in (("calibrated-ish", 1.0), ("sharp", 4.0)):
        probs = torch.softmax(sharpness * torch.randn(400, 3, generator=generator, dtype=torch.float64), 1)
        labels = torch.randint(3, (400,), generator=generator)
        models[name] = (probs, labels)
    binned = {name: metrics.reliability_bins(p, y, n_bins=10) for name, (p, y) in models.items()}
    smooth = {name: metrics.smooth_reliability(p, y, n_bootstrap=5) for name, (p, y) in models.items()}
    figure, axes = plt.subplots(2, 2)
    assert plots.binned_and_smooth_reliability(binned, smooth, axes=axes) is figure
    for column, name in enumerate(models):
        assert axes[0, column].get_title() == plots.ece_title(binned[name], name)
        assert axes[1, column].get_title() == (
            f"{name}\nsmooth ECE {100 * smooth[name].smooth_ece:.2f} % (σ = {smooth[name].bandwidth:.3f})"
        )
    default = plots.binned_and_smooth_reliability(binned, smooth)
    assert len([ax for ax in default.axes if ax.get_title()]) == 4
    assert len(default.legends) == 1 and all(ax.get_legend() is None for ax in default.axes)
    grid = plots.smooth_reliability_grid(smooth)
    titled = [ax for ax in grid.axes if ax.get_title()]
    assert [ax.get_title().split("\n")[0] for ax in titled] == list(smooth)
    assert len(grid.legends) == 1 and all(ax.get_legend() is None for ax in grid.axes)
    with pytest.raises(ValueError, match="empty"):
        plots.smooth_reliability_grid({})
    with pytest.raises(ValueError, match="same models"):
        plots.binned_and_smooth_reliability(binned, {"sharp": smooth["sharp"]})


def test_estimator_curves_avoid_colours_that_mean_something_else_in_the_notebook():
    curves = {"ECE": ([0.1, 0.05], [0.01, 0.0]), "smooth ECE": ([0.08, 0.04], [0.01, 0.0])}
    avoided = plots.FALLBACK_COLORS[:2]
    ax = plots.estimator_curves([100, 1000], curves, avoid_colors=avoided).axes[0]
    drawn = {container.get_label(): container[0].get_color() for container in ax.containers}
    assert drawn == {"ECE": plots.FALLBACK_COLORS[2], "smooth ECE": plots.FALLBACK_COLORS[3]}
