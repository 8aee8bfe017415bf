"""helpers.metrics.decisions: the rule "treat when P(class) ≥ t", its net benefit (Vickers & Elkin 2006) and decision
curves; helpers.plots.decision_plots draws them."""

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import metrics
from helpers.metrics import decisions  # noqa: E402
from helpers.plots import decision_plots


def _probs_with_column(p_class, k=1, n_classes=3):
    """(N, K) float64 probabilities whose column k is p_class and whose other columns share the rest equally."""
    p = torch.as_tensor(p_class, dtype=torch.float64)
    probs = ((1 - p) / (n_classes - 1))[:, None].repeat(1, n_classes)
    probs[:, k] = p
    return probs


# P(class 1) and whether the patient has class 1 (label 1) or not (label 0 or 2)
HAND_P = [0.05, 0.1, 0.3, 0.8, 0.02, 0.15]
HAND_LABELS = torch.tensor([1, 1, 0, 1, 2, 0])


def test_threshold_outcome_on_a_hand_computed_example():
    # treated at t = 0.1 (p >= 0.1, the tie at 0.1 treated): rows 1, 2, 3, 5 -> TP rows 1, 3; FP rows 2, 5;
    # FN row 0 (p = 0.05 < 0.1); TN row 4
    outcome = decisions.threshold_outcome(_probs_with_column(HAND_P), HAND_LABELS, class_index=1, threshold=0.1)
    assert (outcome.true_positives, outcome.false_positives, outcome.false_negatives, outcome.true_negatives) == (
        2,
        2,
        1,
        1,
    )
    assert outcome.sensitivity == pytest.approx(2 / 3)
    assert outcome.specificity == pytest.approx(1 / 3)
    assert outcome.treated_per_1000 == pytest.approx(1000 * 4 / 6)


def test_net_benefit_on_a_hand_computed_example():
    # NB = TP/N - FP/N * t/(1-t) = 2/6 - 2/6 * (0.1/0.9) = 1/3 - 1/27 = 8/27
    probs = _probs_with_column(HAND_P)
    assert decisions.net_benefit(probs, HAND_LABELS, 1, 0.1) == pytest.approx(8 / 27, abs=1e-12)
    # at t = 0.2 only rows 2 and 3 are treated: TP 1, FP 1 -> 1/6 - 1/6 * 0.25 = 1/8
    assert decisions.net_benefit(probs, HAND_LABELS, 1, 0.2) == pytest.approx(1 / 8, abs=1e-12)
    curve = decisions.decision_curve(probs, HAND_LABELS, 1, thresholds=[0.1, 0.2])
    np.testing.assert_allclose(curve.model, [8 / 27, 1 / 8], atol=1e-12)


def test_sensitivity_and_specificity_functions_match_the_counts():
    probs = _probs_with_column(HAND_P)
    assert decisions.sensitivity(probs, HAND_LABELS, 1, 0.2) == pytest.approx(1 / 3)  # only row 3 of rows 0, 1, 3
    assert decisions.specificity(probs, HAND_LABELS, 1, 0.2) == pytest.approx(2 / 3)  # rows 4, 5 of rows 2, 4, 5
    assert decisions.treated_per_1000(probs, HAND_LABELS, 1, 0.2) == pytest.approx(1000 * 2 / 6)
    metric = decisions.threshold_metric("net_benefit", 1, 0.2)
    assert metric(probs, HAND_LABELS) == pytest.approx(1 / 8)


def test_sensitivity_is_nan_without_a_patient_of_the_class():
    probs = _probs_with_column([0.3, 0.05])
    assert math.isnan(decisions.sensitivity(probs, torch.tensor([0, 2]), 1, 0.1))
    assert decisions.specificity(probs, torch.tensor([0, 2]), 1, 0.1) == pytest.approx(0.5)


def test_treat_all_net_benefit_is_prevalence_minus_weighted_rest():
    thresholds = np.array([0.05, 0.1, 0.3, 0.6])
    prevalence = 0.113
    expected = prevalence - (1 - prevalence) * thresholds / (1 - thresholds)
    np.testing.assert_allclose(decisions.treat_all_net_benefit(prevalence, thresholds), expected)
    # a model that forecasts P(class) = 1 for everyone treats everyone: its curve is the treat-all curve
    labels = torch.tensor([1, 0, 0, 2, 1, 0, 0, 0])
    curve = decisions.decision_curve(_probs_with_column(torch.ones(8)), labels, 1, thresholds)
    assert curve.prevalence == pytest.approx(2 / 8)
    np.testing.assert_allclose(curve.model, curve.treat_all, atol=1e-12)
    np.testing.assert_allclose(curve.treat_all, 0.25 - 0.75 * thresholds / (1 - thresholds))
    np.testing.assert_array_equal(curve.treat_none, np.zeros(4))


def _exactly_calibrated_population():
    """Patients in groups whose forecast P(class 1) equals the group's exact share of class 1 (100 patients per
    group, round(100 p) of them positive): the forecasts are the exact posteriors of this population."""
    values = [0.01, 0.03, 0.05, 0.08, 0.1, 0.14, 0.2, 0.3, 0.45, 0.6, 0.8, 0.95]
    forecast, labels = [], []
    for p in values:
        positives = round(100 * p)
        forecast += [p] * 100
        labels += [1] * positives + [0] * (100 - positives)
    return _probs_with_column(forecast, k=1, n_classes=2), torch.tensor(labels), torch.tensor(forecast)


def test_exact_posteriors_are_the_bayes_decision_at_every_threshold():
    probs, labels, _ = _exactly_calibrated_population()
    thresholds = np.linspace(0.005, 0.99, 199)
    curve = decisions.decision_curve(probs, labels, 1, thresholds)
    best_reference = np.maximum(curve.treat_all, curve.treat_none)
    assert np.all(curve.model >= best_reference - 1e-12)
    assert np.any(curve.model > best_reference + 1e-3)  # and strictly better somewhere: the test can fail


def test_a_miscalibrated_model_with_the_same_ranking_loses_net_benefit():
    """Over-confidence in the class (p -> sqrt(p), same order of patients, same AUROC) treats too many at t."""
    probs, labels, forecast = _exactly_calibrated_population()
    inflated = _probs_with_column(forecast.sqrt(), k=1, n_classes=2)
    thresholds = np.linspace(0.05, 0.5, 10)
    calibrated = decisions.decision_curve(probs, labels, 1, thresholds).model
    over = decisions.decision_curve(inflated, labels, 1, thresholds).model
    assert np.all(over <= calibrated + 1e-12)
    assert (calibrated - over).max() > 0.01


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_thresholds_outside_the_open_unit_interval_are_refused(threshold):
    probs = _probs_with_column(HAND_P)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        decisions.net_benefit(probs, HAND_LABELS, 1, threshold)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        decisions.decision_curve(probs, HAND_LABELS, 1, [0.1, threshold])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        decisions.treat_all_net_benefit(0.1, [threshold])


def test_empty_inputs_are_refused():
    with pytest.raises(ValueError, match="empty"):
        decisions.net_benefit(torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, dtype=torch.long), 1, 0.1)
    with pytest.raises(ValueError, match="thresholds is empty"):
        decisions.decision_curve(_probs_with_column(HAND_P), HAND_LABELS, 1, [])


def test_a_class_is_found_by_name_or_index_with_a_clear_error_otherwise():
    names = ["actinic keratoses", "nevi", "Melanoma"]
    assert decisions.has_class(names, "melanoma") and not decisions.has_class(["a", "b"], "melanoma")
    assert decisions.class_index(names, "melanoma") == 2
    assert decisions.class_index(names, 1) == 1
    with pytest.raises(ValueError, match="no class named 'melanoma'"):
        decisions.class_index(["a", "b"], "melanoma")
    with pytest.raises(ValueError, match="outside"):
        decisions.class_index(names, 3)
    with pytest.raises(ValueError, match="class_index must be an integer"):
        decisions.net_benefit(_probs_with_column(HAND_P), HAND_LABELS, 3, 0.1)


def test_paired_net_benefit_estimates_the_difference_of_net_benefits():
    probs, labels, forecast = _exactly_calibrated_population()
    inflated = _probs_with_column(forecast.sqrt(), k=1, n_classes=2)
    result = decisions.paired_net_benefit(
        {"calibrated": [probs], "inflated": [inflated]}, labels, 1, reference="calibrated", threshold=0.2, n=200, seed=0
    )
    assert list(result) == ["inflated"]
    expected = decisions.net_benefit(inflated, labels, 1, 0.2) - decisions.net_benefit(probs, labels, 1, 0.2)
    assert result["inflated"].estimate == pytest.approx(expected)
    assert result["inflated"].low <= expected <= result["inflated"].high
    assert result["inflated"].high < 0  # same images, same ranking: the inflated model loses on every resample


def test_one_vs_rest_bins_on_a_hand_example():
    # 2 bins: (0, 0.5] holds p = 0.05, 0.1, 0.3, 0.02, 0.15 (mean 0.124, 2 of 5 have the class); (0.5, 1]: p = 0.8
    bins = decisions.one_vs_rest_bins(_probs_with_column(HAND_P), HAND_LABELS, 1, "melanoma", n_bins=2)
    assert bins.kind == "melanoma vs rest"
    np.testing.assert_allclose(bins.counts.numpy(), [5, 1])
    np.testing.assert_allclose(bins.outcome_sum.numpy(), [2, 1])
    expected_ece = (abs(0.62 - 2) + abs(0.8 - 1)) / 6
    assert bins.ece == pytest.approx(expected_ece)


def test_one_vs_rest_bins_average_to_classwise_ece():
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(2 * torch.randn(500, 4, generator=generator, dtype=torch.float64), 1)
    labels = torch.randint(4, (500,), generator=generator)
    per_class = [decisions.one_vs_rest_bins(probs, labels, k).ece for k in range(4)]
    assert np.mean(per_class) == pytest.approx(metrics.classwise_ece(probs, labels))


def test_decision_plots_draw_models_references_and_marks():
    probs, labels, forecast = _exactly_calibrated_population()
    inflated = _probs_with_column(forecast.sqrt(), k=1, n_classes=2)
    thresholds = np.linspace(0.02, 0.5, 25)
    curves = {
        name: decisions.decision_curve(p, labels, 1, thresholds)
        for name, p in {"calibrated": probs, "inflated": inflated}.items()
    }
    ax = decision_plots.decision_curve_plot(curves, threshold=0.1).axes[0]
    labels_drawn = ax.get_legend_handles_labels()[1]
    assert {"calibrated", "inflated", "treat all", "treat none", "threshold t = 0.1"} <= set(labels_drawn)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), 1000 * curves["calibrated"].model)
    bins = {"inflated": decisions.one_vs_rest_bins(inflated, labels, 1, "melanoma")}
    ax = decision_plots.one_vs_rest_reliability(bins, threshold=0.1).axes[0]
    over = [line for line in ax.get_lines() if line.get_marker() == decision_plots.OVER_MARK and len(line.get_xdata())]
    assert len(over[0].get_xdata()) > 0  # every non-empty bin of sqrt(p) forecasts above its frequency
    assert ax.get_xlabel() == "mean forecast P(melanoma) in bin"
    with pytest.raises(ValueError, match="other thresholds"):
        decision_plots.decision_curve_plot(
            {"a": curves["calibrated"], "b": decisions.decision_curve(probs, labels, 1, [0.1, 0.2])}
        )


def test_decision_curve_of_several_seeds_is_the_mean_net_benefit():
    probs, labels, forecast = _exactly_calibrated_population()
    inflated = _probs_with_column(forecast.sqrt(), k=1, n_classes=2)
    thresholds = [0.1, 0.3]
    both = decisions.decision_curve([probs, inflated], labels, 1, thresholds)
    expected = [
        (decisions.net_benefit(probs, labels, 1, t) + decisions.net_benefit(inflated, labels, 1, t)) / 2
        for t in thresholds
    ]
    np.testing.assert_allclose(both.model, expected)
    with pytest.raises(ValueError, match="empty list"):
        decisions.decision_curve([], labels, 1, thresholds)


def test_decision_table_and_record_with_the_treat_all_row_and_paired_differences():
    import json

    probs, labels, forecast = _exactly_calibrated_population()
    inflated = _probs_with_column(forecast.sqrt(), k=1, n_classes=2)
    models = {"calibrated": [probs], "inflated": [inflated]}
    summaries = decisions.decision_summaries(models, labels, 1, 0.2)
    assert list(summaries) == ["calibrated", "inflated", decisions.TREAT_ALL]
    prevalence = float((labels == 1).double().mean())
    everyone = summaries[decisions.TREAT_ALL]
    assert everyone["sensitivity"]["mean"] == 1.0 and everyone["specificity"]["mean"] == 0.0
    assert everyone["net_benefit"]["mean"] == pytest.approx(prevalence - (1 - prevalence) * 0.25)
    differences = decisions.paired_net_benefit(models, labels, 1, "calibrated", 0.2, n=50)
    table = decisions.decision_table(summaries, differences, "calibrated")
    assert list(table.columns) == [
        "sensitivity (%)",
        "specificity (%)",
        "biopsies per 1,000",
        "net benefit per 1,000",
        "Δ NB per 1,000 vs calibrated [95 %]",
    ]
    nb = 1000 * decisions.net_benefit(probs, labels, 1, 0.2)
    assert table.loc["calibrated", "net benefit per 1,000"] == f"{nb:.1f}"
    assert table.loc["calibrated", "Δ NB per 1,000 vs calibrated [95 %]"] == "—"
    assert table.loc["inflated", "Δ NB per 1,000 vs calibrated [95 %]"].endswith("worse")
    assert "1 of 1 comparisons" in table.attrs["note"]
    curves = {m: decisions.decision_curve(p, labels, 1) for m, p in models.items()}
    record = decisions.decision_record(summaries, curves, "melanoma", 0.2, differences, "calibrated")
    assert record["treat_all_net_benefit"] == pytest.approx(everyone["net_benefit"]["mean"])
    assert record["net_benefit_differences"]["inflated"]["estimate"] == pytest.approx(differences["inflated"].estimate)
    json.dumps(record, allow_nan=False)  # a results JSON refuses NaN


def test_treat_none_is_not_drawn_like_the_cross_entropy_line():
    # issue 28: cross-entropy's course style is a solid black line, so "treat none" must look different
    from matplotlib.colors import to_rgba

    from helpers.plots.style import model_style

    probs, labels, _ = _exactly_calibrated_population()
    curves = {"cross-entropy": decisions.decision_curve(probs, labels, 1, np.linspace(0.02, 0.5, 25))}
    ax = decision_plots.decision_curve_plot(curves, threshold=0.1).axes[0]
    lines = dict(zip(ax.get_legend_handles_labels()[1], ax.get_legend_handles_labels()[0]))
    ce, none = lines["cross-entropy"], lines["treat none"]
    assert to_rgba(ce.get_color()) == to_rgba(model_style("cross-entropy").color)
    assert (to_rgba(none.get_color()), none.get_linestyle()) != (to_rgba(ce.get_color()), ce.get_linestyle())
