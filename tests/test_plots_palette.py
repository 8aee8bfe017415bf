"""The course palette of helpers.plots.style: one colour and marker per model in every figure, never a gap colour of
the reliability diagram, name spellings resolved, unknown names a clear error or a documented fallback."""

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex, to_rgb  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from helpers import metrics, plots  # noqa: E402
from helpers.metrics import decisions  # noqa: E402
from helpers.plots import style  # noqa: E402

GAP_COLOURS = (style.ACCURACY_COLOR, style.GAP_COLOR, style.OVER_GAP_COLOR, style.UNDER_GAP_COLOR)


def _lab(colour):
    """CIELAB (D65) of an sRGB colour, the textbook conversion."""
    rgb = np.array(to_rgb(colour))
    rgb = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
    f = np.cbrt(xyz / np.array([0.95047, 1.0, 1.08883]))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_lab_conversion_matches_known_values():
    np.testing.assert_allclose(_lab("#FFFFFF"), [100, 0, 0], atol=0.05)
    np.testing.assert_allclose(_lab("#FF0000"), [53.24, 80.09, 67.20], atol=0.1)


@pytest.mark.parametrize("colour", sorted({s.color for s in style.MODEL_STYLES.values()} | set(style.FALLBACK_COLORS)))
def test_no_model_or_fallback_colour_is_a_gap_colour_or_near_one(colour):
    assert to_hex(colour).lower() not in {to_hex(c).lower() for c in GAP_COLOURS}
    for gap in GAP_COLOURS:
        assert np.linalg.norm(_lab(colour) - _lab(gap)) >= style.MIN_GAP_DISTANCE, (colour, gap)


def test_fallback_colours_never_look_like_a_model_colour():
    for fallback in style.FALLBACK_COLORS:
        for model in {s.color for s in style.MODEL_STYLES.values()}:
            assert np.linalg.norm(_lab(fallback) - _lab(model)) >= 15, (fallback, model)


@pytest.mark.parametrize("family", [style.MULTICLASS_MODELS, style.MULTILABEL_MODELS])
def test_no_two_models_of_a_family_have_colours_a_reader_confuses(family):
    """Focal's pink and FLSD-53's mauve (ΔE 14) read as one colour in 02 and 06 (issue 28)."""
    for first, second in itertools.combinations(family, 2):
        distance = np.linalg.norm(_lab(style.MODEL_STYLES[first].color) - _lab(style.MODEL_STYLES[second].color))
        assert distance >= 20, (first, second, round(float(distance), 1))


@pytest.mark.parametrize("reference", ["oracle", "exact marginals"])
def test_the_exact_posteriors_are_not_drawn_in_the_grey_of_the_perfect_calibration_diagonal(reference):
    """The Bayes row of 08 and 11 was grey, like the dashed diagonal beside it (issue 28)."""
    assert np.linalg.norm(_lab(style.MODEL_STYLES[reference].color) - _lab("grey")) >= 25


@pytest.mark.parametrize("reference", ["oracle", "exact marginals"])
def test_the_exact_posteriors_stand_apart_from_every_multilabel_model(reference):
    """A purple Bayes curve read as focal's pink in 11's reliability diagram (issue 28)."""
    for model in style.MULTILABEL_MODELS:
        distance = np.linalg.norm(_lab(style.MODEL_STYLES[reference].color) - _lab(style.MODEL_STYLES[model].color))
        assert distance >= 30, (reference, model, round(float(distance), 1))


def test_the_exact_joint_and_the_exact_marginals_are_told_apart():
    """10's retrieval figure drew the exact joint and the product of the exact marginals in one teal (a reader took
    a curve for missing where the two coincide); a notebook then recoloured one inline, outside the palette."""
    joint, marginals = style.model_style("exact joint"), style.model_style("exact marginals")
    assert np.linalg.norm(_lab(joint.color) - _lab(marginals.color)) >= 20
    for fallback in style.FALLBACK_COLORS:
        assert np.linalg.norm(_lab(marginals.color) - _lab(fallback)) >= 15, fallback


@pytest.mark.parametrize("family", [style.MULTICLASS_MODELS, style.MULTILABEL_MODELS])
def test_colours_and_markers_are_unique_within_a_family(family):
    colours = [style.MODEL_STYLES[name].color for name in family]
    markers = [style.MODEL_STYLES[name].marker for name in family]
    assert len(set(colours)) == len(family) and len(set(markers)) == len(family)


def test_colour_marker_pairs_are_unique_across_the_course_but_for_the_shared_baseline():
    pairs = {}
    for name, s in style.MODEL_STYLES.items():
        if s.linestyle == "-":  # a variant ("ASL (detached)") shares its loss's colour and marker on purpose
            pairs.setdefault((s.color, s.marker), []).append(name)
    assert [names for names in pairs.values() if len(names) > 1] == [["cross-entropy", "BCE"]]


@pytest.mark.parametrize(
    ("spelling", "canonical", "variant"),
    [
        ("LS α=0.1", "LS", None),
        ("LS α = 0.05", "LS", None),
        ("label smoothing", "LS", None),
        ("focal γ=3", "focal", None),
        ("MbLS m=6, α=0.1", "MbLS", None),
        ("SPA (1,1,0,5,3,1)", "SPA", None),
        ("ASL (0, 4, 0.05)", "ASL", None),
        ("SPA+LPR λ=1", "SPA+LPR", None),
        ("CE", "cross-entropy", None),
        ("FLSD-53", "FLSD-53", None),
        ("Cross-entropy + TS", "cross-entropy", "post-hoc"),
        ("LS + temperature scaling", "LS", "post-hoc"),
        ("ASL+φ", "ASL", "post-hoc"),
        ("ideal focal", "focal", "ideal"),
        ("ASL (detached)", "ASL (detached)", None),
        ("LDACE+CCL", "LDACE+CCL", None),
        ("class-prior", "class prior", None),
        ("class-frequency predictor: R-AUC 83.44 %", "class prior", None),
        ("exact joint (ceiling)", "oracle", None),
        ("exact marginals (eq. 22)", "exact marginals", None),
        ("SPA: derived link", "SPA", None),
        ("FLSD-53: where gradient training rests", "FLSD-53", None),
        ("seed 0", None, None),
    ],
)
def test_names_are_normalised(spelling, canonical, variant):
    assert style.normalise_model_name(spelling) == (canonical, variant)


def test_a_variant_keeps_its_loss_colour_and_marker_but_not_its_line():
    trained, calibrated, ideal = (
        style.model_style("LS α=0.1"),
        style.model_style("LS + TS"),
        style.model_style("ideal LS"),
    )
    assert (calibrated.color, calibrated.marker) == (ideal.color, ideal.marker) == (trained.color, trained.marker)
    assert (calibrated.linestyle, calibrated.hollow) == ("--", True) and trained.linestyle == "-"
    assert (ideal.linestyle, ideal.hollow) == (":", True)
    assert calibrated.line_kwargs()["markerfacecolor"] == "none"


def test_an_unknown_model_is_a_clear_error():
    with pytest.raises(KeyError, match="no model of the course palette.*cross-entropy"):
        style.model_style("my new loss")


def test_other_names_get_the_documented_deterministic_fallback():
    styles = style.figure_styles(["seed 0", "LS", "seed 1"])
    assert styles["LS"] == style.model_style("LS")
    free = [c for c in style.FALLBACK_COLORS if c != style.model_style("LS").color]
    assert [styles["seed 0"].color, styles["seed 1"].color] == free[:2]  # next free fallback colours, in order
    assert style.figure_styles(["seed 0", "LS", "seed 1"]) == styles
    # a post-hoc variant of a name that is no model shares that name's colour and marker, dashed and hollow
    recipes = style.figure_styles(["recipe A", "recipe B", "recipe A + TS"])
    assert (recipes["recipe A + TS"].color, recipes["recipe A + TS"].marker) == (
        recipes["recipe A"].color,
        recipes["recipe A"].marker,
    )
    assert recipes["recipe A + TS"].linestyle == "--" and recipes["recipe B"].color != recipes["recipe A"].color
    # a fallback never takes the colour of a model in the same figure
    crowded = style.figure_styles(["MbLS", "SPA", "other"])
    assert crowded["other"].color not in {crowded["MbLS"].color, crowded["SPA"].color}


def _drawn_colours(ax):
    """{legend label: colour} of the labelled artists on ``ax`` (lines, error bars, step histograms, bands)."""
    colours = {}
    for handle, label in zip(*ax.get_legend_handles_labels()):
        if isinstance(handle, ErrorbarContainer):
            handle = handle.lines[0]
        if isinstance(handle, Line2D):
            colour = handle.get_color()
        elif isinstance(handle, Patch):
            colour = handle.get_edgecolor()
        else:
            colour = handle.get_facecolor()[0]
        colours.setdefault(label, to_hex(colour))
    return colours


def _multiclass(seed):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.softmax(2 * torch.randn(300, 3, generator=generator), dim=1)
    return probs, torch.randint(0, 3, (300,), generator=generator)


def _draw(kind, names, ax):
    """Draw ``names`` with the plot function ``kind``; every model gets data of its own."""
    x = np.linspace(0.01, 0.99, 30)
    data = {name: _multiclass(seed) for seed, name in enumerate(sorted(names))}
    if kind == "validation_curves":
        plots.validation_curves(
            {n: [{"epoch": 1, "val_nll": 1.0}, {"epoch": 2, "val_nll": 0.9}] for n in names}, "val_nll", ax=ax
        )
    elif kind == "seed_band_curves":
        plots.seed_band_curves({n: [x, x + 0.1] for n in names}, ax=ax)
    elif kind == "curves_over_seeds":
        plots.curves_over_seeds({n: [(x, x), (x, x + 0.1)] for n in names}, ax=ax)
    elif kind == "estimator_curves":
        plots.estimator_curves([10, 100], {n: ([1.0, 0.5], [0.1, 0.1]) for n in names}, ax=ax)
    elif kind == "reliability_overlay":
        plots.reliability_overlay({n: metrics.reliability_bins(*data[n]) for n in names}, ax=ax)
    elif kind == "pooled_reliability_curves":
        plots.pooled_reliability_curves({n: {"mean_predicted": x, "frequency": x} for n in names}, ax=ax)
    elif kind == "binned_output_plot":
        plots.binned_output_plot(x, {n: x for n in names}, ax=ax)
    elif kind == "one_vs_rest_reliability":
        plots.one_vs_rest_reliability({n: decisions.one_vs_rest_bins(*data[n], 1) for n in names}, ax=ax)
    elif kind == "decision_curve_plot":
        plots.decision_curve_plot({n: decisions.decision_curve(*data[n][:1], data["LS"][1], 1) for n in names}, ax=ax)
    elif kind == "retention_curves":
        plots.retention_curves({n: metrics.retention_curve(*data[n]) for n in names}, ax=ax)
    elif kind == "retrieval_curve":
        plots.retrieval_curve({n: {1: 0.5, 2: 0.4} for n in names}, ax=ax)
    elif kind == "retrieval_curve_spread":
        plots.retrieval_curve_spread({n: {1: (0.5, 0.1), 2: (0.4, 0.1)} for n in names}, ax=ax)
    elif kind == "top_k_hits_plot":
        plots.top_k_hits_plot({n: {"mean": 2.0, "low": 1.5, "high": 2.5} for n in names}, k=6, ax=ax)
    elif kind == "risk_minimiser_plot":
        plots.risk_minimiser_plot(x, {n: x for n in names}, ax=ax, markers=5)
    elif kind == "confidence_maps":
        plots.confidence_maps(x, {n: x for n in names}, ax=ax)
    elif kind == "partial_loss_plot":
        plots.partial_loss_plot(x, {n: (x, x) for n in names}, ax=ax)
    elif kind == "link_plot":
        plots.link_plot(x, {n: x for n in names}, ax=ax)
    elif kind == "negative_weight_plot":
        plots.negative_weight_plot(x, {n: x for n in names}, ax=ax)
    elif kind == "weight_function_plot":
        plots.weight_function_plot(x, {n: x for n in names}, ax=ax)
    elif kind == "distance_histograms":
        plots.distance_histograms({n: x for n in names}, ax=ax)
    elif kind == "smooth_reliability_diagram":
        for n in names:
            diagram = metrics.smooth_reliability(*data[n], n_bootstrap=3)
            plots.smooth_reliability_diagram(diagram, ax=ax, label=n, show_density=False, legend=False)
    else:
        raise AssertionError(kind)


KINDS = [
    "validation_curves",
    "seed_band_curves",
    "curves_over_seeds",
    "estimator_curves",
    "reliability_overlay",
    "pooled_reliability_curves",
    "binned_output_plot",
    "one_vs_rest_reliability",
    "decision_curve_plot",
    "retention_curves",
    "retrieval_curve",
    "retrieval_curve_spread",
    "top_k_hits_plot",
    "risk_minimiser_plot",
    "confidence_maps",
    "partial_loss_plot",
    "link_plot",
    "negative_weight_plot",
    "weight_function_plot",
    "distance_histograms",
    "smooth_reliability_diagram",
]


def _model_colours(ax, names):
    """{model: colour of its first legend entry} (legend labels start with the model's name)."""
    drawn = _drawn_colours(ax)
    found = {}
    for name in names:
        labels = [
            label for label in drawn if label == name or label.startswith(name + " ") or label.startswith(name + ":")
        ]
        assert labels, f"{name!r} not in the legend labels {list(drawn)}"
        found[name] = drawn[labels[0]]
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_every_plot_function_gives_a_model_its_course_colour_whatever_the_company_and_order(kind):
    first, second = ["cross-entropy", "LS", "focal"], ["MbLS", "focal", "LS", "DCA"]
    figure, (ax_a, ax_b) = plt.subplots(1, 2)
    _draw(kind, first, ax_a)
    _draw(kind, second, ax_b)
    colours_a, colours_b = _model_colours(ax_a, first), _model_colours(ax_b, second)
    for name in ("LS", "focal"):
        assert colours_a[name] == colours_b[name] == to_hex(style.model_style(name).color).lower(), (kind, name)
    for name in itertools.chain(first, second):
        assert (colours_a | colours_b)[name] not in {to_hex(c).lower() for c in GAP_COLOURS}
    plt.close(figure)


def test_every_plot_function_that_draws_models_is_covered():
    """A new plot function that takes {model: ...} must join KINDS (or be listed here as not colouring models)."""
    not_models = {
        "training_curves",  # metrics of one run
        "loss_and_ece_curves",  # one colour per seed
        "seed_spread_plot",  # one model's settings; its model named by argument (own test)
        "metric_across_test_sets",  # rows are models, colours are test sets (or the rows' models: own test)
        "class_prior_bars",  # bars are priors (truth, estimators): fallback colours, never a model's (own test)
        "reliability_diagram",
        "reliability_grid",
        "smooth_reliability_grid",
        "binned_and_smooth_reliability",
        "overlaid_reliability",
        "reliability_and_decision_curve",  # both panels are covered functions
        "bootstrap_interval_plot",
        "interval_plot",
        "difference_plot",
        "difference_panels",
        "before_after_plot",
        "confidence_densities",
        "heatmap",
        "correlation_comparison",
        "image_grid",
        "class_counts",
        "image_row",
        "ece_title",
        "sparse_bin_label",  # a legend label, draws nothing
        "outlier_rows",
    }
    palette = {"normalise_model_name", "model_style", "figure_styles"}
    functions = {name for name in plots.__all__ if name[0].islower()} - palette
    assert functions - not_models == set(KINDS)


def test_seed_spread_plot_draws_its_models_in_their_course_colours():
    figure, ax = plt.subplots()
    plots.seed_spread_plot(["2", "6"], [[1, 2], [2, 3]], ax=ax, reference=1.5, model="MbLS", reference_model="CE")
    means = [line for line in ax.get_lines() if line.get_marker() == style.model_style("MbLS").marker]
    assert means and {to_hex(line.get_color()) for line in means} == {style.model_style("MbLS").color.lower()}
    reference = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert to_hex(reference[0].get_color()) == style.model_style("cross-entropy").color.lower()
    plt.close(figure)


def test_settings_of_one_model_share_its_colour_and_differ_in_line_style():
    styles = style.figure_styles(["LS α=0.05", "LS α=0.1", "LS α=0.3", "focal γ=3"])
    ls = [styles[name] for name in ("LS α=0.05", "LS α=0.1", "LS α=0.3")]
    assert {s.color for s in ls} == {style.model_style("LS").color}
    assert len({str(s.linestyle) for s in ls}) == 3 and ls[0].linestyle == "-"
    assert styles["focal γ=3"] == style.model_style("focal")


# --- figure defects of issue 28 that a test can catch ---------------------------------------------------------------


def test_confidence_maps_show_a_map_that_dips_below_the_lowest_q():
    """02's θ(q) panel started its y-axis at q's lowest value (0.2) and hid a minimiser at 0.198."""
    q = np.linspace(0.2, 0.99, 50)
    dipping = np.where(q < 0.5, 0.198, q)
    figure, ax = plt.subplots()
    plots.confidence_maps(q, {"FLSD-53: minimiser of the value": dipping, "LS α=0.1": q}, ax=ax)
    assert ax.get_ylim()[0] < 0.198 and ax.get_ylim()[1] == 1
    plt.close(figure)


def test_seed_band_legend_lies_below_the_axes_off_the_bands():
    """02's validation-ECE bands filled the panel and the legend sat on them."""
    x = np.linspace(0, 1, 30)
    figure, ax = plt.subplots()
    plots.seed_band_curves({"cross-entropy": [x, x + 0.1], "LS α=0.1": [x + 0.05, x + 0.2]}, ax=ax)
    figure.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.y1 <= ax.get_window_extent().y0  # wholly below the plotting area
    plt.close(figure)


def test_binned_output_plot_spans_the_bins_not_an_empty_decade():
    """09's η-bin panels ran the x-axis (and the diagonal) down to the smallest prediction, 1e-5, leaving most of
    each panel empty; x now spans the bins, y every value."""
    centres = np.geomspace(7e-4, 0.4, 12)
    figure, ax = plt.subplots()
    plots.binned_output_plot(centres, {"LDACE p² (optimum)": centres**2 / 10, "BCE (trained)": centres}, ax=ax)
    low, high = ax.get_xlim()
    assert centres.min() / 2 < low < centres.min() and centres.max() < high < 2 * centres.max()
    assert ax.get_ylim()[0] <= (centres**2 / 10).min()  # the lowest prediction stays in view
    plt.close(figure)


def test_difference_panels_are_never_squashed_flat():
    """08's three-row panels were 2.3 inches tall with a legend-free title and axis label: squashed."""
    rows = {name: (0.01, 0.0, 0.02) for name in ("SPA", "SPA+LPR", "BCE+LPR")}
    figure = plots.difference_panels([{"rows": rows, "higher_is_better": True, "xlabel": "Δ", "title": "t"}])
    assert figure.get_size_inches()[1] >= 2.8
    plt.close(figure)


def test_class_counts_list_the_classes_top_to_bottom_like_the_image_grid():
    """00's bar chart listed the classes bottom to top, against the image grid beside it."""
    figure = plots.class_counts({"train": np.array([0, 0, 1, 2])}, ["first", "second", "third"])
    ax = figure.axes[0]
    figure.canvas.draw()
    labels = sorted(ax.get_yticklabels(), key=lambda text: -text.get_window_extent().y0)  # top of the page first
    assert [text.get_text() for text in labels] == ["first", "second", "third"]
    plt.close(figure)


def test_overlaid_reliability_draws_no_band_where_there_are_no_forecasts():
    """06's grey bootstrap band spiked at confidences where no forecast lies."""
    generator = torch.Generator().manual_seed(0)
    top = 0.6 + 0.4 * torch.rand(400, generator=generator)  # confidences in [0.6, 1] only
    probs = torch.stack([top, 1 - top], dim=1)
    labels = (torch.rand(400, generator=generator) > top).long()
    diagram = metrics.smooth_reliability(probs, labels, n_bootstrap=5)
    figure, ax = plt.subplots()
    plots.overlaid_reliability(metrics.reliability_bins(probs, labels, n_bins=10), diagram, ax=ax, legend=False)
    supported = diagram.mesh[diagram.density >= 0.02 * diagram.density.max()]
    band = [c for c in ax.collections if c.get_label().startswith("bootstrap band")][0]
    xs = np.concatenate([path.vertices[:, 0] for path in band.get_paths()])
    assert xs.min() >= supported.min() - 1e-9 and supported.min() > 0.5  # nothing drawn left of the data
    line = [line for line in ax.get_lines() if line.get_label() == "smoothed accuracy"][0]
    drawn = np.asarray(line.get_xdata())[np.isfinite(line.get_ydata())]
    assert drawn.min() >= supported.min() - 1e-9
    plt.close(figure)


def test_overlaid_reliability_stops_the_smooth_curve_at_the_last_non_empty_bin():
    """A wide kernel keeps a little density far from narrow forecasts (06's one-epoch models): the curve
    ends with the data, not where the density's tail crosses a threshold."""
    generator = torch.Generator().manual_seed(1)
    top = 0.75 + 0.1 * torch.rand(60, generator=generator)  # few forecasts, top-label confidence in [0.75, 0.85]
    probs = torch.stack([top, 1 - top], dim=1)
    labels = (torch.rand(60, generator=generator) > top).long()
    bins = metrics.reliability_bins(probs, labels, n_bins=10)
    diagram = metrics.smooth_reliability(probs, labels, n_bootstrap=3)
    figure, ax = plt.subplots()
    plots.overlaid_reliability(bins, diagram, ax=ax, legend=False, min_density=1e-12)
    line = [line for line in ax.get_lines() if line.get_label() == "smoothed accuracy"][0]
    drawn = np.asarray(line.get_xdata())[np.isfinite(line.get_ydata())]
    assert drawn.max() <= 0.9 + 1e-9 and drawn.min() >= 0.7 - 1e-9  # the bins [0.7, 0.8) and [0.8, 0.9) hold them
    plt.close(figure)


def test_class_counts_legend_lies_below_the_bars():
    """00's split legend sat on the top class's bars once the first class was drawn on top."""
    figure = plots.class_counts({"train": np.array([0, 0, 1, 2]), "test": np.array([0, 1, 2])}, ["a", "b", "c"])
    ax = figure.axes[0]
    figure.canvas.draw()
    assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0
    plt.close(figure)


def test_side_by_side_decision_legends_do_not_overlap():
    """12's two panels had two-column legends of long model names that ran into each other."""
    probs, labels = _multiclass(0)
    names = ["cross-entropy + TS + prior (EM)", "cross-entropy + TS fitted on the test set"]
    bins = {name: decisions.one_vs_rest_bins(probs, labels, 1, "melanoma") for name in names}
    curves = {name: decisions.decision_curve(probs, labels, 1) for name in names}
    figure = plots.reliability_and_decision_curve(bins, curves, threshold=0.1)
    figure.canvas.draw()
    left, right = (ax.get_legend().get_window_extent() for ax in figure.axes[:2])
    assert left.x1 <= right.x0
    plt.close(figure)


def test_figure_styles_avoid_leaves_the_named_fallback_colours_to_other_meanings():
    recipes = style.FALLBACK_COLORS[:2]  # a notebook's recipes are brown and teal
    styles = style.figure_styles(["ECE, 5 bins", "ECE, 15 bins", "LS"], avoid=recipes)
    assert [styles["ECE, 5 bins"].color, styles["ECE, 15 bins"].color] == list(style.FALLBACK_COLORS[2:4])
    assert styles["LS"] == style.model_style("LS")  # a model keeps its colour
    assert style.figure_styles(["a", "b"]) == style.figure_styles(["a", "b"], avoid=())  # default unchanged
    with pytest.raises(ValueError, match="not fallback colours"):
        style.figure_styles(["a"], avoid=["#123456"])


def test_the_gap_marks_add_no_hue_and_every_bin_shows_its_accuracy_as_a_full_bar():
    """Readers of 01, 02 and 06 named the gap marks (red and orange) "focal's pink" and "FLSD-53's orange"; then a
    white under-confidence mark covered the top of the accuracy bar, so its visible bar stopped at the confidence
    and a reader of 02 took under-confident bins for over-confident ones. Now the over-confidence gap is a grey
    hatched box above the bar, and the under-confidence gap is the top of the accuracy bar itself (its colour),
    hatched in white: in every bin the bar in the accuracy colour reaches the accuracy."""
    probs = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.55, 0.45], [0.52, 0.48]])
    bins = metrics.reliability_bins(probs, torch.tensor([1, 0, 0, 0, 0]), n_bins=5)
    assert (bins.confidence > bins.accuracy).any() and (bins.confidence < bins.accuracy).any()
    figure, ax = plt.subplots()
    plots.reliability_diagram(bins, ax=ax, legend=False)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    over, under = handles[plots.OVER_GAP_LABEL], handles[plots.UNDER_GAP_LABEL]
    for patch in over.patches:
        lab = _lab(patch.get_facecolor()[:3])
        assert patch.get_hatch() == "//" and np.hypot(lab[1], lab[2]) < 3  # a grey: no hue
    for patch in under.patches:
        assert patch.get_hatch() == "\\\\"
        assert to_hex(patch.get_facecolor()) == to_hex(style.ACCURACY_COLOR)  # the bar's own colour
        assert to_hex(patch.get_edgecolor()) == "#ffffff"
    legend = {label: style.gap_patch(label) for label in (plots.OVER_GAP_LABEL, plots.UNDER_GAP_LABEL)}
    assert to_hex(legend[plots.UNDER_GAP_LABEL].get_facecolor()) == to_hex(style.ACCURACY_COLOR)
    assert legend[plots.OVER_GAP_LABEL].get_hatch() == "//"
    plt.close(figure)
