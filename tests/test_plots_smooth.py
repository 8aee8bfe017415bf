"""The smooth reliability diagram draws what metrics.smooth_reliability computed: its line, band and density."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers import metrics, plots  # noqa: E402


@pytest.fixture(scope="module")
def diagram():
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(2.0 * torch.randn(800, 4, generator=generator, dtype=torch.float64), 1)
    labels = torch.randint(4, (800,), generator=generator)
    return metrics.smooth_reliability(probs, labels, n_bootstrap=20)


def test_draws_the_computed_line_band_density_and_smooth_ece(diagram):
    figure = plots.smooth_reliability_diagram(diagram, title="CE")
    assert isinstance(figure, Figure)
    main_ax, density_ax = figure.axes
    line = next(line for line in main_ax.get_lines() if line.get_label() == "smoothed accuracy")
    np.testing.assert_array_equal(line.get_xdata(), diagram.mesh)
    np.testing.assert_array_equal(line.get_ydata(), diagram.mu)
    band = next(c for c in main_ax.collections if c.get_label().startswith("bootstrap band"))
    assert isinstance(band, PolyCollection)
    vertices = band.get_paths()[0].vertices
    assert np.isclose(vertices[:, 1].max(), diagram.upper.max()) and np.isclose(
        vertices[:, 1].min(), diagram.lower.min()
    )
    assert any(line.get_label() == "perfect calibration" for line in main_ax.get_lines())
    assert main_ax.get_title() == f"CE\nsmooth ECE {100 * diagram.smooth_ece:.2f} % (σ = {diagram.bandwidth:.3f})"
    density = density_ax.collections[0].get_paths()[0].vertices
    assert np.isclose(density[:, 1].max(), diagram.density.max())


def test_draws_on_a_given_axis_and_overlays(diagram):
    figure, ax = plt.subplots()
    assert plots.smooth_reliability_diagram(diagram, ax=ax, label="A", show_density=False) is figure
    plots.smooth_reliability_diagram(diagram, ax=ax, label="B", color="C0", show_density=False)
    assert len(figure.axes) == 1
    assert [line.get_label() for line in ax.get_lines() if line.get_label() in "AB"] == ["A", "B"]


def test_pooled_multilabel_diagram_says_so_and_rejects_bins():
    generator = torch.Generator().manual_seed(1)
    probs = torch.rand(300, 3, generator=generator, dtype=torch.float64)
    labels = (torch.rand(300, 3, generator=generator, dtype=torch.float64) < probs).double()
    pooled = metrics.smooth_reliability(probs, labels, multilabel=True, n_bootstrap=10)
    figure = plots.smooth_reliability_diagram(pooled, show_density=False)
    assert metrics.POOLED in figure.axes[0].get_title()
    assert figure.axes[0].get_xlabel() == "predicted P(present)"
    with pytest.raises(TypeError, match="SmoothReliability"):
        plots.smooth_reliability_diagram(metrics.reliability_bins(probs, labels, multilabel=True))
