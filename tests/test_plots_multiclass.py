"""Tests of the multi-class plot functions of helpers.plots (Agg backend, no display)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from helpers import plots  # noqa: E402
from helpers.metrics import confidence_by_correctness, r_auc, retention_curve  # noqa: E402
from helpers.plots import style  # noqa: E402


@pytest.fixture
def probs_labels():
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(300, 4, generator=generator) * 2, 1)
    return probs, torch.randint(4, (300,), generator=generator)


def test_retention_curves_legend_reports_the_r_auc(probs_labels):
    probs, labels = probs_labels
    figure = plots.retention_curves({"model": retention_curve(probs, labels)})
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == [f"model (R-AUC {r_auc(probs, labels):.4f})"]
    plt.close(figure)


def test_confidence_densities_integrate_to_one_and_draw_on_given_axes(probs_labels):
    figure, ax = plt.subplots()
    returned = plots.confidence_densities(*confidence_by_correctness(*probs_labels), ax=ax, bins=10)
    assert returned is figure
    heights = np.array([patch.get_height() for patch in ax.patches])
    assert heights.size == 20
    assert heights[:10].sum() * 0.1 == pytest.approx(1.0)
    assert heights[10:].sum() * 0.1 == pytest.approx(1.0)
    plt.close(figure)


def test_confidence_densities_use_no_model_colour_for_correct_and_incorrect(probs_labels):
    figure, ax = plt.subplots()
    plots.confidence_densities(*confidence_by_correctness(*probs_labels), ax=ax, bins=10)
    colours = [to_hex(patch.get_facecolor()[:3]).lower() for patch in ax.patches]
    assert set(colours[:10]) == {style.ACCURACY_COLOR.lower()} and set(colours[10:]) == {style.GAP_COLOR.lower()}
    model_colours = {to_hex(s.color).lower() for s in style.MODEL_STYLES.values()}
    assert not model_colours & set(colours)
    plt.close(figure)


def test_confidence_densities_outlines_keep_the_two_colours_unmixed(probs_labels):
    figure, ax = plt.subplots()
    plots.confidence_densities(*confidence_by_correctness(*probs_labels), ax=ax, bins=10, filled=False)
    assert len(ax.patches) == 2  # one step outline per histogram, no filled bars
    assert [patch.get_fill() for patch in ax.patches] == [False, False]
    edges = [to_hex(patch.get_edgecolor()[:3]).lower() for patch in ax.patches]
    assert edges == [style.ACCURACY_COLOR.lower(), style.GAP_COLOR.lower()]
    plt.close(figure)


def test_distance_histograms_and_interval_plot():
    figure = plots.distance_histograms({"a": torch.tensor([0.5, 1.0, 3.0]), "b": np.array([2.0, 4.0])}, margin=10)
    assert figure.axes[0].get_xlim()[1] >= 10
    plt.close(figure)
    figure = plots.interval_plot({"x": (0.5, 0.4, 0.6), "y": (0.2, 0.1, 0.35)}, xlabel="ECE")
    line = figure.axes[0].lines[0]
    assert list(line.get_xdata()) == [0.5, 0.2] and list(line.get_ydata()) == [1, 0]  # first row on top
    plt.close(figure)
    with pytest.raises(ValueError):
        plots.interval_plot({})
    with pytest.raises(ValueError):
        plots.retention_curves({})


def test_curves_over_seeds_draws_the_seed_mean_and_range_in_distinct_styles():
    x = np.linspace(0, 1, 5)
    curves = {"a": [(x, x), (x, x + 0.2)], "b": [(x, x + 0.1), (x, x + 0.1)]}  # b's mean lies inside a's band
    fig, ax = plt.subplots()
    assert plots.curves_over_seeds(curves, ax=ax, reference_lines={"ref": 0.5}) is fig
    lines = [line for line in ax.get_lines() if line.get_zorder() == 3]
    np.testing.assert_allclose(lines[0].get_ydata(), x + 0.1)
    np.testing.assert_allclose(lines[1].get_ydata(), x + 0.1)
    assert lines[0].get_marker() != lines[1].get_marker() and lines[0].get_color() != lines[1].get_color()
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(0.0) and band[:, 1].max() == pytest.approx(1.2)
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_zorder() == 1] == [0.5]
    plt.close(fig)
    with pytest.raises(ValueError, match="share x"):
        plots.curves_over_seeds({"a": [(x, x), (x + 1, x)]})
    with pytest.raises(ValueError, match="empty"):
        plots.curves_over_seeds({})


def test_heatmap_keeps_cells_square_when_asked():
    fig, ax = plt.subplots(figsize=(10, 3))
    plots.heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"], ax=ax, aspect="equal")
    assert ax.get_aspect() == 1.0
    plt.close(fig)


def test_distance_histograms_share_an_x_range_and_tell_models_apart_by_line_style():
    distances = {"cross-entropy": np.array([1.0, 2.0, 30.0, 40.0]), "MbLS": np.array([1.0, 3.0])}
    figure, ax = plt.subplots()
    plots.distance_histograms(distances, ax=ax, margin=10, x_max=25, bins=5, linestyles={"cross-entropy": ":"})
    assert ax.get_xlim() == pytest.approx((0, 25))
    ce, mbls = ax.patches[0], ax.patches[1]
    assert ce.get_linestyle()[1] is not None and mbls.get_linestyle()[1] is None  # dotted vs solid
    # two of cross-entropy's four distances lie beyond x_max: its drawn density still counts them (area 0.5)
    heights = ce.get_path().vertices[:, 1]
    assert heights.max() == pytest.approx(2 / (4 * 5.0))
    assert mbls.get_path().vertices[:, 1].max() == pytest.approx(2 / (2 * 5.0))
    plt.close(figure)
    with pytest.raises(ValueError, match="x_max"):
        plots.distance_histograms(distances, x_max=0)
    with pytest.raises(ValueError, match="linestyles"):
        plots.distance_histograms(distances, linestyles={"focal": ":"})
