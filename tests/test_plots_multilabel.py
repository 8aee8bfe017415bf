"""Multi-label plot functions of helpers.plots: each draws what it is given, on a given axis, and checks input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers import plots  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_risk_minimiser_plot_draws_diagonal_and_each_curve():
    eta = torch.linspace(0, 1, 11)
    figure, ax = plt.subplots()
    returned = plots.risk_minimiser_plot(eta, {"BCE": eta, "focal": eta ** 2}, ax=ax)
    assert returned is figure and len(ax.lines) == 3
    assert np.allclose(ax.lines[2].get_ydata(), (eta ** 2).numpy())
    with pytest.raises(ValueError, match="grid points"):
        plots.risk_minimiser_plot(eta, {"bad": eta[:5]})


def test_partial_loss_and_link_plots():
    v = torch.linspace(-3, 3, 7)
    figure = plots.partial_loss_plot(v, {"BCE": (torch.nn.functional.softplus(-v), torch.nn.functional.softplus(v))})
    ax = figure.axes[0]
    assert len(ax.lines) == 2 and ax.lines[1].get_linestyle() == "--"
    figure = plots.link_plot(v, {"sigmoid": torch.sigmoid(v)})
    assert np.allclose(figure.axes[0].lines[0].get_ydata(), torch.sigmoid(v).numpy())
    with pytest.raises(ValueError):
        plots.link_plot(v, {})


def test_retrieval_curve_plots_percent_in_length_order():
    figure = plots.retrieval_curve({"BCE": {2: 0.5, 1: 0.8}})
    line = figure.axes[0].lines[0]
    assert list(line.get_xdata()) == [1, 2] and np.allclose(line.get_ydata(), [80.0, 50.0])


def test_interval_plot_rows_and_error_bars():
    figure, ax = plt.subplots()
    plots.bootstrap_interval_plot({"a": (0.1, 0.05, 0.2), "b": (0.3, 0.2, 0.35)}, ax=ax, xlabel="ACE (%)")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert np.allclose(ax.lines[0].get_xdata(), [10.0, 30.0])


def test_image_row_frames_relevant_green_and_irrelevant_red():
    images = torch.full((2, 1, 4, 4), 128, dtype=torch.uint8)
    figure = plots.image_row(images, relevant=[True, False])
    canvas = figure.axes[0].images[0].get_array()
    assert isinstance(figure, Figure)
    assert np.allclose(canvas[0, 0], (0.2, 0.7, 0.2)) and np.allclose(canvas[0, -1], (0.85, 0.1, 0.1))
    with pytest.raises(ValueError, match="relevance flags"):
        plots.image_row(images, relevant=[True])
