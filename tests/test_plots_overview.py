"""Data-overview figures of notebook 00."""

import matplotlib
import matplotlib.colors

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import plots  # noqa: E402


def test_image_grid_puts_each_class_on_its_own_row():
    images = torch.zeros(6, 3, 4, 4, dtype=torch.uint8)
    labels = torch.tensor([0, 1, 1, 2, 2, 2])
    images[labels == 1] = 100
    images[labels == 2] = 200
    figure = plots.image_grid(images, labels, ["a", "b", "c"], per_class=2)
    mosaic = figure.axes[0].images[0].get_array()
    assert mosaic.shape == (12, 8, 3)
    assert (mosaic[0:4, 0:4] == 0).all() and (mosaic[4:8, 0:8] == 100).all() and (mosaic[8:12, :] == 200).all()
    assert (mosaic[0:4, 4:8] == 0).all()  # class "a" has one image: the second tile stays blank


def test_image_grid_rejects_multilabel_targets():
    with pytest.raises(ValueError, match="multi-label"):
        plots.image_grid(torch.zeros(2, 1, 4, 4, dtype=torch.uint8), torch.zeros(2, 3), ["a", "b", "c"])


def test_class_counts_bars_equal_the_counts():
    figure = plots.class_counts({"train": np.array([0, 0, 1]), "test": np.array([[1, 0], [1, 1]])}, ["x", "y"])
    widths = [patch.get_width() for patch in figure.axes[0].patches]
    assert widths == [2, 1, 2, 1]


def test_class_counts_colour_the_splits_with_non_model_colours_by_default():
    """07 drew its splits in matplotlib's orange and green, which mean ASL and SPA in the same notebook; a flag
    (``non_model_colors=True``) fixed it for 07 alone, beside a second way (``colors=``) that 00 used."""
    from matplotlib.colors import to_hex

    splits = {"train": np.array([0, 0, 1]), "val": np.array([1]), "test": np.array([0, 1])}
    figure = plots.class_counts(splits, ["x", "y"])
    colours = {to_hex(patch.get_facecolor()) for patch in figure.axes[0].patches}
    expected = {style.color.lower() for style in plots.figure_styles(list(splits)).values()}
    assert colours == expected and len(colours) == 3
    model_colours = {style.color.lower() for style in plots.MODEL_STYLES.values()}
    assert not colours & model_colours


def test_class_counts_linear_axis_and_given_colours():
    colours = ["#543005", "#01665E"]
    figure = plots.class_counts(
        {"train": np.array([0, 0, 1]), "test": np.array([1, 1])}, ["x", "y"], log_scale=False, colors=colours
    )
    ax = figure.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlabel() == "images"
    drawn = [matplotlib.colors.to_hex(patch.get_facecolor()) for patch in ax.patches]
    assert drawn == [colours[0].lower()] * 2 + [colours[1].lower()] * 2
    with pytest.raises(ValueError, match="colours for 2 splits"):
        plots.class_counts({"train": np.array([0]), "test": np.array([1])}, ["x", "y"], colors=colours[:1])
