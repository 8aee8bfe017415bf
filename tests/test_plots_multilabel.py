"""Multi-label plot functions of helpers.plots: each draws what it is given, on a given axis, and checks input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers import plots  # noqa: E402


def test_risk_minimiser_plot_draws_diagonal_and_each_curve():
    eta = torch.linspace(0, 1, 11)
    figure, ax = plt.subplots()
    returned = plots.risk_minimiser_plot(eta, {"BCE": eta, "focal": eta**2}, ax=ax)
    assert returned is figure and len(ax.lines) == 3
    assert np.allclose(ax.lines[2].get_ydata(), (eta**2).numpy())
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


def test_top_k_hits_plot_draws_each_ranking_at_its_mean_in_its_model_colour():
    from helpers.plots.style import model_style

    rows = {"BCE": {"mean": 2.0, "low": 1.5, "high": 2.5}, "ASL": {"mean": 1.0, "low": 0.8, "high": 1.4}}
    figure, ax = plt.subplots()
    assert plots.top_k_hits_plot(rows, k=6, ax=ax) is figure
    labels = {float(y): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    assert labels == {1.0: "BCE", 0.0: "ASL"}  # the first row on top
    assert ax.get_xlim() == (0.0, 6.0)
    data_lines = [container.lines[0] for container in ax.containers]  # one error bar per ranking
    points = [(float(line.get_xdata()[0]), float(line.get_ydata()[0]), line.get_color()) for line in data_lines]
    assert points == [(2.0, 1.0, model_style("BCE").color), (1.0, 0.0, model_style("ASL").color)]
    with pytest.raises(ValueError, match="empty"):
        plots.top_k_hits_plot({}, k=6)


def test_image_row_frames_relevant_green_and_irrelevant_red():
    images = torch.full((2, 1, 4, 4), 128, dtype=torch.uint8)
    figure = plots.image_row(images, relevant=[True, False])
    canvas = figure.axes[0].images[0].get_array()
    assert isinstance(figure, Figure)
    assert np.allclose(canvas[0, 0], (0.2, 0.7, 0.2)) and np.allclose(canvas[0, -1], (0.85, 0.1, 0.1))
    with pytest.raises(ValueError, match="relevance flags"):
        plots.image_row(images, relevant=[True])


def test_correlation_comparison_is_diverging_centred_and_hides_the_diagonal():
    real = np.array([[1.0, 0.16, -0.02], [0.16, 1.0, 0.05], [-0.02, 0.05, 1.0]])
    synthetic = real + np.array([[0, 0.01, 0.0], [0.01, 0, -0.01], [0.0, -0.01, 0]])
    figure = plots.correlation_comparison({"real": real, "synthetic": synthetic}, ["a", "b", "c"])
    assert isinstance(figure, Figure)
    panels = [ax for ax in figure.axes if ax.get_title() in ("real", "synthetic")]
    assert len(panels) == 2
    for ax, matrix in zip(panels, (real, synthetic)):
        image = ax.get_images()[0]
        low, high = image.get_clim()
        assert low == -high == -0.17  # symmetric around 0, shared: the largest |off-diagonal| of both
        assert image.get_cmap().name == "RdBu_r"
        shown = image.get_array()
        assert np.ma.is_masked(shown[0, 0]) or np.isnan(shown[0, 0])
        assert shown[0, 2] == matrix[0, 2] < 0
        assert "-2" in [text.get_text() for text in ax.texts]  # annotated ×100, negative values shown
    plt.close(figure)
    figure, axes = plt.subplots(1, 2)
    assert plots.correlation_comparison({"x": real, "y": real}, list("abc"), axes=axes) is figure
    plt.close(figure)
    with pytest.raises(ValueError, match="expected \\(2, 2\\)"):
        plots.correlation_comparison({"real": real}, ["a", "b"])


def test_negative_weight_plot_draws_one_line_per_loss_on_log_axes():
    p = np.logspace(-3, -0.1, 50)
    fig = plots.negative_weight_plot(p, {"BCE": np.ones(50), "focal": p**4})
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["BCE", "focal"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    np.testing.assert_allclose(ax.lines[1].get_ydata(), p**4)
    with pytest.raises(ValueError, match="values for 50 grid points"):
        plots.negative_weight_plot(p, {"bad": np.ones(3)})
    plt.close("all")


def test_validation_curves_marks_the_kept_epoch():
    histories = {
        "a": [
            {"epoch": 1, "val_nll": 0.3, "val_ece": 0.05},
            {"epoch": 2, "val_nll": 0.2, "val_ece": 0.07},
            {"epoch": 3, "val_nll": 0.25, "val_ece": 0.02},
        ]
    }
    fig = plots.validation_curves(histories, "val_ece", best_key="val_nll")
    curve, marker = fig.axes[0].lines
    np.testing.assert_allclose(curve.get_ydata(), [0.05, 0.07, 0.02])
    assert list(marker.get_xdata()) == [2] and list(marker.get_ydata()) == [0.07]  # best val NLL at epoch 2
    with pytest.raises(ValueError, match="has no 'val_auroc'"):
        plots.validation_curves(histories, "val_auroc")
    plt.close("all")


def test_heatmap_annotations_are_black_on_light_cells_of_a_diverging_map():
    """Issue 9: small negative correlations were written white on the white middle of RdBu_r."""
    import matplotlib.pyplot as plt

    from helpers import plots

    values = np.array([[-0.02, 0.02], [-1.0, 1.0]])
    figure = plots.heatmap(values, ["a", "b"], ["c", "d"], cmap="RdBu_r", vmin=-1, vmax=1)
    colours = {text.get_text(): text.get_color() for text in figure.axes[0].texts}
    assert colours == {"-0.02": "black", "0.02": "black", "-1.00": "white", "1.00": "white"}
    plt.close(figure)


def test_retrieval_curve_spread_draws_one_errorbar_line_per_model():
    import matplotlib.pyplot as plt

    from helpers import plots

    figure = plots.retrieval_curve_spread(
        {"exact": {1: (0.4, None), 2: (0.3, None)}, "BCE": {1: (0.35, 0.01), 2: (0.25, 0.02)}}
    )
    ax = figure.axes[0]
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["exact", "BCE"]
    np.testing.assert_allclose(ax.containers[1].lines[0].get_ydata(), [35.0, 25.0])
    with pytest.raises(ValueError, match="empty"):
        plots.retrieval_curve_spread({})
    plt.close(figure)


def test_binned_output_plot_draws_the_diagonal_and_one_line_per_model_on_log_axes():
    import matplotlib.pyplot as plt

    from helpers import plots

    figure = plots.binned_output_plot(np.array([0.01, 0.1, 0.5]), {"model": np.array([0.02, 0.08, 0.4])})
    ax = figure.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [0.02, 0.08, 0.4])
    with pytest.raises(ValueError, match="log scale"):
        plots.binned_output_plot(np.array([0.0, 0.5]), {"m": np.array([0.1, 0.2])})
    plt.close(figure)


def test_weight_function_plot_normalises_each_curve_and_keeps_the_legend_off_the_axes():
    c = np.linspace(0.01, 0.99, 99)
    fig = plots.weight_function_plot(c, {"BCE": 1 / (c * (1 - c)), "Brier": np.full_like(c, 2.0)})
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    for line in ax.get_lines():
        assert np.interp(0.5, line.get_xdata(), line.get_ydata()) == pytest.approx(1.0)
    assert ax.get_legend().get_bbox_to_anchor().y0 < ax.get_window_extent().y0
    with pytest.raises(ValueError):
        plots.weight_function_plot(c, {"BCE": c[:5]})
    plt.close(fig)


def test_outlier_rows_give_a_dwarfing_row_its_own_panel():
    rows = {"ASL": (27.3, 27.1, 27.5), "SPA": (-0.01, -0.05, 0.04), "SPA+LPR": (-0.7, -0.8, -0.6)}
    ordinary, outliers = plots.outlier_rows(rows)
    assert list(outliers) == ["ASL"] and list(ordinary) == ["SPA", "SPA+LPR"]
    assert plots.outlier_rows({"a": (1, 0, 2), "b": (2, 1, 3)}) == ({"a": (1, 0, 2), "b": (2, 1, 3)}, {})
    fig = plots.difference_panels(
        [
            {"rows": {"SPA": (0.2, -0.4, 0.8)}, "higher_is_better": True, "xlabel": "Δ mAP@y", "title": "ranking"},
            {"rows": rows, "higher_is_better": False, "xlabel": "Δ RMS", "title": "error"},
        ],
        scale=1.0,
    )
    assert len(fig.axes) == 3
    assert [t.get_text() for t in fig.axes[2].get_yticklabels()] == ["ASL"]
    plt.close(fig)


def test_pooled_reliability_curves_on_log_axes_leave_out_bins_without_a_positive():
    curves = {"model": {"mean_predicted": np.array([0.01, 0.1, 0.5]), "frequency": np.array([0.0, 0.12, 0.45])}}
    fig = plots.pooled_reliability_curves(curves)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(ax.get_lines()[0].get_xdata()) == 2
    plt.close(fig)


def test_pooled_reliability_curves_can_put_the_legend_beside_with_larger_markers():
    x = np.array([0.01, 0.1, 0.5])
    curves = {"focal": {"mean_predicted": x, "frequency": x}, "focal+φ": {"mean_predicted": x, "frequency": x}}
    fig = plots.pooled_reliability_curves(curves, legend="beside", markersize=6)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_markersize() for line in lines[:2]] == [6, 6]
    assert lines[1].get_markerfacecolor() == "none"  # the post-hoc variant's markers are hollow
    fig.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 > ax.get_window_extent().x1  # to the right of the axes, not below them
    with pytest.raises(ValueError, match="legend"):
        plots.pooled_reliability_curves(curves, legend="above")
    plt.close("all")


def test_risk_minimiser_plot_staggers_markers_of_curves_on_the_diagonal():
    eta = np.linspace(0.01, 0.99, 99)
    fig = plots.risk_minimiser_plot(eta, {"a": eta, "b": eta}, markers=10, legend_below=True)
    lines = fig.axes[0].get_lines()[1:]
    assert lines[0].get_marker() != lines[1].get_marker()
    assert lines[0].get_markevery() != lines[1].get_markevery()
    plt.close(fig)


def test_risk_minimiser_diagonal_stays_visible_under_a_curve_on_it():
    # BCE's curve lies on the diagonal: the diagonal must be a wider band drawn below it, or readers cannot see it
    eta = np.linspace(0.01, 0.99, 99)
    fig = plots.risk_minimiser_plot(eta, {"BCE": eta})
    diagonal, curve = fig.axes[0].get_lines()
    assert diagonal.get_zorder() < curve.get_zorder()
    assert diagonal.get_linewidth() > curve.get_linewidth()
    plt.close(fig)
