"""Tests of the figures of helpers.plots: every function returns a Figure, draws on a given axis, and draws what
was computed."""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers import metrics, plots  # noqa: E402


def multiclass_data(n=400, k=5, seed=0, scale=3.0):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(scale * torch.randn(n, k, generator=generator), dim=1)
    labels = torch.randint(k, (n,), generator=generator)
    return probs, labels


def multilabel_data(n=300, t=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.rand(n, t, generator=generator) ** 2
    labels = (torch.rand(n, t, generator=generator) < probs).float()
    return probs, labels


def ece_in_title(ax):
    match = re.search(r"ECE ([0-9.]+) %", ax.get_title())
    assert match, ax.get_title()
    return float(match.group(1)) / 100


def bar_container(ax, label):
    return next(c for c in ax.containers if c.get_label() == label)


def test_reliability_diagram_draws_one_bar_per_nonempty_bin_and_the_ece():
    probs, labels = multiclass_data(n=60)  # few samples over 15 bins: some bins stay empty
    bins = metrics.reliability_bins(probs, labels, n_bins=15)
    n_nonempty = int(bins.nonempty.sum())
    assert 0 < n_nonempty < 15
    figure = plots.reliability_diagram(bins, title="CE")
    assert isinstance(figure, Figure)
    main_ax, histogram_ax = figure.axes
    accuracy_bars = bar_container(main_ax, "accuracy")
    assert len(accuracy_bars) == n_nonempty
    over_bars, under_bars = bar_container(main_ax, plots.OVER_GAP_LABEL), bar_container(main_ax, plots.UNDER_GAP_LABEL)
    assert len(histogram_ax.patches) == n_nonempty
    # bar heights are the per-bin accuracies
    heights = np.array([bar.get_height() for bar in accuracy_bars])
    accuracy, confidence = bins.accuracy[bins.nonempty].numpy(), bins.confidence[bins.nonempty].numpy()
    assert np.allclose(heights, accuracy)
    # over-confident bins: a gap bar from the accuracy up to the confidence; under-confident bins: a bar of the
    # other mark from the confidence up to the accuracy; one gap bar per non-empty bin in all
    over = confidence > accuracy
    assert 0 < over.sum() < n_nonempty and len(over_bars) + len(under_bars) == n_nonempty
    assert np.allclose([bar.get_y() for bar in over_bars], accuracy[over])
    assert np.allclose([bar.get_y() + bar.get_height() for bar in over_bars], confidence[over])
    assert np.allclose([bar.get_y() for bar in under_bars], confidence[~over])
    assert np.allclose([bar.get_y() + bar.get_height() for bar in under_bars], accuracy[~over])
    assert over_bars.patches[0].get_hatch() != under_bars.patches[0].get_hatch()
    assert over_bars.patches[0].get_facecolor() != under_bars.patches[0].get_facecolor()
    # the legend names both marks and sits beside the axes, off the data
    legend = main_ax.get_legend()
    assert {plots.OVER_GAP_LABEL, plots.UNDER_GAP_LABEL} <= {text.get_text() for text in legend.get_texts()}
    figure.canvas.draw()
    legend_box, axes_box = legend.get_window_extent(), main_ax.get_window_extent()
    assert legend_box.x0 >= axes_box.x1
    assert abs(ece_in_title(main_ax) - metrics.ece(probs, labels)) <= 0.5e-4 + 1e-12
    assert main_ax.get_title().startswith("CE")
    # histogram heights are fractions of the samples
    assert sum(bar.get_height() for bar in histogram_ax.patches) == pytest.approx(1.0)


def test_reliability_diagram_leaves_out_bins_below_min_count_and_says_so():
    probs, labels = multiclass_data(n=60)
    bins = metrics.reliability_bins(probs, labels, n_bins=15)
    counts = bins.counts[bins.nonempty].numpy()
    min_count = int(np.median(counts)) + 1  # some bins below it, some at or above
    sparse = counts < min_count
    assert 0 < sparse.sum() < len(counts)
    figure = plots.reliability_diagram(bins, min_count=min_count)
    main_ax = figure.axes[0]
    left = bins.edges[:-1][bins.nonempty].numpy()
    accuracy = bins.accuracy[bins.nonempty].numpy()
    # the sparse bins: nothing drawn over their x-range (no bar, outline or gap mark of any size)
    drawn = [p for p in main_ax.patches if p.get_width() > 0 and p.get_height() != 0]
    drawn_left = np.array([p.get_x() for p in drawn])
    assert not any(np.isclose(drawn_left, x).any() for x in left[sparse])
    # the others: an accuracy bar and one gap mark each
    assert np.allclose([bar.get_height() for bar in bar_container(main_ax, "accuracy")], accuracy[~sparse])
    marks = {plots.OVER_GAP_LABEL, plots.UNDER_GAP_LABEL}  # a mark no bin has is named "_<label>"
    gaps = sum(len(c) for c in main_ax.containers if c.get_label().lstrip("_") in marks)
    assert gaps == int((~sparse).sum())
    # the legend says they are left out, with a handle that draws nothing
    legend = main_ax.get_legend()
    texts = [text.get_text() for text in legend.get_texts()]
    assert plots.sparse_bin_label(min_count) in texts
    assert str(min_count) in plots.sparse_bin_label(min_count)
    note = [p for p in main_ax.patches if p.get_label() == plots.sparse_bin_label(min_count)]
    assert len(note) == 1 and note[0].get_width() == 0 and note[0].get_facecolor()[3] == 0
    # the title still gives the ECE of every bin, and the histogram every non-empty bin
    assert abs(ece_in_title(main_ax) - metrics.ece(probs, labels)) <= 0.5e-4 + 1e-12
    assert len(figure.axes[1].patches) == len(counts)
    # by default every bin is drawn and there is no note; a negative count is an error
    default = plots.reliability_diagram(bins).axes[0]
    assert np.allclose([bar.get_height() for bar in bar_container(default, "accuracy")], accuracy)
    assert plots.sparse_bin_label(0) not in [p.get_label() for p in default.patches]
    with pytest.raises(ValueError, match="min_count"):
        plots.reliability_diagram(bins, min_count=-1)
    grid = plots.reliability_grid({"a": bins}, min_count=min_count)
    assert plots.sparse_bin_label(min_count) in {text.get_text() for text in grid.legends[0].get_texts()}


def test_reliability_diagram_draws_on_a_given_axis():
    probs, labels = multiclass_data()
    bins = metrics.reliability_bins(probs, labels)
    figure, ax = plt.subplots()
    returned = plots.reliability_diagram(bins, ax=ax, show_histogram=False, label="model A")
    assert returned is figure and figure.axes == [ax]
    assert len(bar_container(ax, "model A")) == int(bins.nonempty.sum())


def test_pooled_multilabel_diagram_says_so_and_matches_multilabel_ece():
    probs, labels = multilabel_data()
    bins = metrics.reliability_bins(probs, labels, multilabel=True)
    figure = plots.reliability_diagram(bins)
    main_ax = figure.axes[0]
    assert "pooled over labels" in main_ax.get_title()
    assert abs(ece_in_title(main_ax) - metrics.multilabel_ece(probs, labels)) <= 0.5e-4 + 1e-12
    assert len(bar_container(main_ax, "frequency")) == int(bins.nonempty.sum())


def test_reliability_grid_and_overlay():
    bins_by_model = {f"model {i}": metrics.reliability_bins(*multiclass_data(seed=i, scale=1.0 + i)) for i in range(3)}
    figure = plots.reliability_grid(bins_by_model, ncols=2)
    assert isinstance(figure, Figure)
    # one figure legend naming both gap marks, no legend on any panel
    (legend,) = figure.legends
    assert {plots.OVER_GAP_LABEL, plots.UNDER_GAP_LABEL} <= {text.get_text() for text in legend.get_texts()}
    assert all(ax.get_legend() is None for ax in figure.axes)
    # a panel without under-confident bins still shows the under-confidence mark as drawn, not a default patch
    over_only = metrics.reliability_bins(torch.tensor([[0.9, 0.1], [0.8, 0.2]]), torch.tensor([1, 1]), n_bins=5)
    single = plots.reliability_grid({"over-confident only": over_only})
    handles = dict(zip([t.get_text() for t in single.legends[0].get_texts()], single.legends[0].legend_handles))
    assert handles[plots.UNDER_GAP_LABEL].get_hatch() == "\\\\"
    assert matplotlib.colors.same_color(handles[plots.UNDER_GAP_LABEL].get_facecolor(), plots.ACCURACY_COLOR)
    assert matplotlib.colors.same_color(handles[plots.UNDER_GAP_LABEL].get_edgecolor(), plots.UNDER_GAP_COLOR)
    # the same for a legend built from the axes' own handles (notebook 06 collects them for one figure legend)
    _, ax = plt.subplots()
    plots.reliability_diagram(over_only, ax=ax, legend=False)
    own = dict(zip(*reversed(ax.get_legend_handles_labels())))
    assert {plots.OVER_GAP_LABEL, plots.UNDER_GAP_LABEL} <= set(own)
    assert matplotlib.colors.same_color(own[plots.UNDER_GAP_LABEL].get_facecolor(), plots.ACCURACY_COLOR)
    main_axes = [ax for ax in figure.axes if ax.get_title()]
    assert len(main_axes) == 3
    for ax, (name, bins) in zip(main_axes, bins_by_model.items()):
        assert ax.get_title().startswith(name)
        assert abs(ece_in_title(ax) - bins.ece) <= 0.5e-4 + 1e-12
    figure, axes = plt.subplots(1, 3)
    assert plots.reliability_grid(bins_by_model, axes=axes, show_histogram=False) is figure
    assert all(
        len(bar_container(ax, "accuracy")) == int(b.nonempty.sum()) for ax, b in zip(axes, bins_by_model.values())
    )

    figure, ax = plt.subplots()
    assert plots.reliability_overlay(bins_by_model, ax=ax) is figure
    model_lines = ax.get_lines()[1:]  # the first line is the diagonal
    assert len(model_lines) == 3
    for line, bins in zip(model_lines, bins_by_model.values()):
        assert np.allclose(line.get_xdata(), bins.confidence[bins.nonempty].numpy())
        assert np.allclose(line.get_ydata(), bins.accuracy[bins.nonempty].numpy())
    with pytest.raises(ValueError, match="empty"):
        plots.reliability_grid({})


def test_training_curves():
    history = [
        {"epoch": e, "train_loss": 1.0 / e, "val_loss": 1.2 / e, "val_ece": None if e == 1 else 0.1}
        for e in range(1, 6)
    ]
    figure = plots.training_curves(history)
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"training loss", "validation loss"}  # words, not history keys
    assert list(lines["validation loss"].get_ydata()) == pytest.approx([1.2 / e for e in range(1, 6)])
    assert ax.get_ylabel() == "training loss and validation loss"
    figure, ax = plt.subplots()
    assert plots.training_curves(history, metrics=("val_ece",), ax=ax) is figure
    assert list(ax.get_lines()[0].get_xdata()) == [2, 3, 4, 5]  # the None entry is skipped
    with pytest.raises(ValueError, match="available"):
        plots.training_curves(history, metrics=("val_auc",))


def test_loss_and_ece_curves_keep_the_ece_on_its_own_axis_in_percent():
    def history(seed):
        return [
            {"epoch": e, "train_loss": 1.0 / e + seed, "val_nll": 0.8 + 0.01 * e, "val_ece": 0.01 * e}
            for e in range(1, 6)
        ]

    histories = {"well-regularised": {0: history(0), 1: history(1)}, "over-fitting": {0: history(0), 1: history(1)}}
    figure, axes = plt.subplots(2, 2)
    assert plots.loss_and_ece_curves(histories, axes=axes) is figure
    for row in axes:
        loss_ax, ece_ax = row
        assert len(loss_ax.get_lines()) >= 4 and len(ece_ax.get_lines()) == 2  # two losses and the ECE per seed
        assert list(ece_ax.get_lines()[1].get_ydata()) == pytest.approx([1.0 * e for e in range(1, 6)])
        assert ece_ax.get_ylabel() == "validation ECE (%)" and "_" not in loss_ax.get_ylabel()
    assert list(axes[0, 0].get_lines()[2].get_ydata()) == pytest.approx([1.0 / e + 1 for e in range(1, 6)])
    (legend,) = figure.legends
    assert {"training loss", "validation NLL", "seed 0", "seed 1"} <= {t.get_text() for t in legend.get_texts()}
    with pytest.raises(ValueError, match="rows"):
        plots.loss_and_ece_curves({"one": {0: history(0)}}, axes=axes)
    with pytest.raises(ValueError, match="no history entry"):
        plots.loss_and_ece_curves({"one": {0: history(0)}}, ece_key="val_auroc")


def test_loss_and_ece_curves_draw_every_seed_in_its_recipe_colour_when_asked():
    history = [{"epoch": e, "train_loss": 1.0 / e, "val_nll": 0.8, "val_ece": 0.01 * e} for e in range(1, 4)]
    histories = {"well-regularised": {0: history, 1: history}, "over-fitting": {0: history, 1: history}}
    colours = {"well-regularised": "#543005", "over-fitting": "#01665E"}
    figure = plots.loss_and_ece_curves(histories, recipe_colors=colours)
    axes = np.asarray(figure.axes[:4]).reshape(2, 2)
    for colour, row in zip(colours.values(), axes):
        drawn = {line.get_color() for ax in row for line in ax.get_lines() if len(line.get_xdata())}
        assert drawn == {colour}  # both seeds, both panels: the recipe's colour only
    texts = {t.get_text() for t in figure.legends[0].get_texts()}
    assert "seed 0" not in texts and "one line per training seed (2)" in texts
    with pytest.raises(ValueError, match="no colour for"):
        plots.loss_and_ece_curves(histories, recipe_colors={"over-fitting": "#01665E"})


def test_heatmap():
    matrix = torch.tensor([[1.0, 0.25], [0.5, 0.125]])
    figure = plots.heatmap(matrix, ["a", "b"], ["x", "y"], title="co-occurrence")
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    assert np.array_equal(ax.images[0].get_array(), matrix.numpy())
    assert sorted(text.get_text() for text in ax.texts) == ["0.12", "0.25", "0.50", "1.00"]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["x", "y"]
    figure, ax = plt.subplots()
    assert plots.heatmap(np.eye(3), list("abc"), list("abc"), ax=ax, fmt=".0f", colorbar=False) is figure
    with pytest.raises(ValueError, match="names"):
        plots.heatmap(np.eye(3), ["a"], ["b"])


def test_confidence_maps_draws_each_map_and_the_diagonal():
    q = torch.linspace(0.2, 0.99, 30)
    fig = plots.confidence_maps(q, {"CE": q, "LS": 0.9 * q + 0.1 / 7}, dashed=["CE"])
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"θ = q (proper)", "CE", "LS"}
    assert np.allclose(lines["LS"].get_ydata(), (0.9 * q + 0.1 / 7).numpy())
    assert lines["CE"].get_linestyle() == "--"
    with pytest.raises(ValueError):
        plots.confidence_maps(q, {"bad": q[:5]})


def test_confidence_maps_names_the_diagonal_band_as_asked():
    # notebook 02 draws cross-entropy as the band itself: a reader must find it by name in the legend
    q = torch.linspace(0.2, 0.99, 30)
    fig = plots.confidence_maps(q, {"LS α=0.1": 0.9 * q + 0.1 / 7}, proper_label="cross-entropy (θ = q)")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["cross-entropy (θ = q)", "LS α=0.1"]


def test_confidence_maps_diagonal_has_a_line_style_no_map_gets():
    # readers took the dotted diagonal for a dotted loss variant (LS α=0.3, focal γ=5 are drawn dotted)
    q = torch.linspace(0.2, 0.99, 30)
    names = ["LS α=0.05", "LS α=0.1", "LS α=0.3", "focal γ=1", "focal γ=3", "focal γ=5"]
    fig = plots.confidence_maps(q, {name: q * (1 - 0.1 * i) for i, name in enumerate(names)})
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    diagonal = lines.pop("θ = q (proper)")
    assert all(
        (line.get_linestyle(), line.get_linewidth()) != (diagonal.get_linestyle(), diagonal.get_linewidth())
        for line in lines.values()
    )
    assert all(
        line.get_linestyle() != diagonal.get_linestyle() for line in lines.values() if line.get_linestyle() != "-"
    )
    assert diagonal.get_linewidth() > max(line.get_linewidth() for line in lines.values())


def test_seed_band_curves_plots_the_mean_and_the_seed_range():
    fig, ax = plt.subplots()
    assert plots.seed_band_curves({"CE": [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]}, ax=ax) is fig
    assert np.allclose(ax.get_lines()[0].get_ydata(), [2.0, 3.0, 4.0])
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(1.0) and band[:, 1].max() == pytest.approx(5.0)


def test_seed_spread_plot_marks_mean_and_reference():
    fig = plots.seed_spread_plot(["1", "2"], [[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]], reference=2.5)
    ax = fig.axes[0]
    means = [line.get_ydata()[0] for line in ax.get_lines() if line.get_marker() == "D"]
    assert means == pytest.approx([2.0, 4.0])
    assert any(np.allclose(line.get_ydata(), 2.5) for line in ax.get_lines() if line.get_linestyle() == "--")
    with pytest.raises(ValueError):
        plots.seed_spread_plot(["1"], [[1.0], [2.0]])


def test_seed_spread_plot_draws_the_reference_seeds_as_their_own_column():
    fig = plots.seed_spread_plot(
        ["1", "2"], [[1.0, 2.0], [4.0, 4.0]], reference=6.0, reference_per_seed=[5.0, 7.0], reference_setting="∞"
    )
    ax = fig.axes[0]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["1", "2", "∞"]
    dots = np.vstack([collection.get_offsets() for collection in ax.collections if len(collection.get_offsets())])
    assert {(float(x), float(y)) for x, y in dots} >= {(2.0, 5.0), (2.0, 7.0)}
    means = [line.get_ydata()[0] for line in ax.get_lines() if line.get_marker() in ("D", "s")]
    assert means == pytest.approx([1.5, 4.0, 6.0])
    with pytest.raises(ValueError, match="reference"):
        plots.seed_spread_plot(["1"], [[1.0]], reference_per_seed=[1.0])
    plt.close(fig)


def test_reliability_grid_can_share_the_histogram_scale():
    # two models whose largest bin fractions differ a lot: shared, every histogram axis gets the same top
    spread = metrics.reliability_bins(*multiclass_data(seed=0, scale=1.0))
    peaked = metrics.reliability_bins(*multiclass_data(seed=1, scale=8.0))
    tops = [float((b.counts / b.n_samples).max()) for b in (spread, peaked)]
    assert max(tops) > 1.5 * min(tops)
    figure = plots.reliability_grid({"spread": spread, "peaked": peaked}, shared_histogram=True)
    histograms = [ax for ax in figure.axes if ax.get_ylabel() == "fraction"]
    assert len(histograms) == 2
    assert histograms[0].get_ylim() == histograms[1].get_ylim()
    assert histograms[0].get_ylim()[1] >= max(tops)
    # the default keeps each panel's own scale
    figure = plots.reliability_grid({"spread": spread, "peaked": peaked})
    histograms = [ax for ax in figure.axes if ax.get_ylabel() == "fraction"]
    assert histograms[0].get_ylim() != histograms[1].get_ylim()
    with pytest.raises(ValueError, match="histogram"):
        plots.reliability_grid({"spread": spread}, show_histogram=False, shared_histogram=True)
