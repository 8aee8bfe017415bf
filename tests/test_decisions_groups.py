"""helpers.metrics.decisions: the rule "biopsy when P(class group) ≥ t" (P(malignant) = melanoma + BCC + AKIEC) and
net benefit reweighted to a stated prevalence, NB_π(t) = π · TPR − (1 − π) · FPR · t/(1 − t)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers.data import isic2018  # noqa: E402
from helpers.metrics import decisions  # noqa: E402
from helpers.plots import decision_plots  # noqa: E402

# three classes: 0 melanoma, 1 nevus, 2 basal cell carcinoma; rows are (P(mel), P(nevus), P(BCC))
NAMES = ["melanoma", "nevus", "basal cell carcinoma"]
PROBS = torch.tensor(
    [
        [0.50, 0.40, 0.10],  # melanoma
        [0.05, 0.55, 0.40],  # BCC: P(mel) 0.05 (not biopsied by the melanoma rule), P(malignant) 0.45
        [0.12, 0.80, 0.08],  # nevus: P(mel) 0.12, P(malignant) 0.20
        [0.02, 0.90, 0.08],  # nevus: P(mel) 0.02, P(malignant) 0.10 (a tie at t = 0.1: treated)
        [0.01, 0.97, 0.02],  # nevus: P(malignant) 0.03
        [0.15, 0.10, 0.75],  # BCC: P(mel) 0.15 (biopsied by the melanoma rule: counted a harm there)
    ],
    dtype=torch.float64,
)
LABELS = torch.tensor([0, 2, 1, 1, 1, 2])


def test_class_indices_find_the_malignant_group_by_name_in_isic_2018():
    found = decisions.class_indices(isic2018.CLASS_NAMES, decisions.MALIGNANT_CLASSES)
    assert [isic2018.CLASSES[k] for k in found] == ["MEL", "BCC", "AKIEC"]


def test_melanoma_rule_by_hand_counts_a_biopsied_bcc_as_a_harm():
    # P(mel) >= 0.1: rows 0 (melanoma: TP), 2 (nevus: FP), 5 (BCC: FP for this rule) -> NB = 1/6 - 2/6 * 1/9
    outcome = decisions.threshold_outcome(PROBS, LABELS, 0, 0.1)
    assert (outcome.true_positives, outcome.false_positives) == (1, 2)
    assert outcome.net_benefit == pytest.approx(1 / 6 - 2 / 6 / 9, abs=1e-12)


def test_malignant_rule_by_hand_counts_both_bccs_as_true_positives():
    # P(mel) + P(BCC) >= 0.1: rows 0, 1, 5 (malignant: TP), 2 and 3 (nevi, row 3 a tie at 0.1: FP); row 4 not treated
    group = decisions.class_indices(NAMES, ["melanoma", "basal cell carcinoma"])
    assert group == (0, 2)
    outcome = decisions.threshold_outcome(PROBS, LABELS, group, 0.1)
    assert (outcome.true_positives, outcome.false_positives, outcome.false_negatives, outcome.true_negatives) == (
        3,
        2,
        0,
        1,
    )
    assert decisions.net_benefit(PROBS, LABELS, group, 0.1) == pytest.approx(3 / 6 - 2 / 6 / 9, abs=1e-12)
    p, positive = decisions.one_vs_rest(PROBS, LABELS, group)
    np.testing.assert_allclose(p.numpy(), [0.6, 0.45, 0.2, 0.1, 0.03, 0.9])
    assert positive.tolist() == [True, True, False, False, False, True]


def test_net_benefit_at_a_prevalence_is_the_closed_form_and_the_nb_of_a_replicated_population():
    group = (0, 2)
    # TPR 3/3, FPR 2/3 at t = 0.1: closed form at π = 0.2
    expected = 0.2 * 1.0 - 0.8 * (2 / 3) * (0.1 / 0.9)
    assert decisions.net_benefit(PROBS, LABELS, group, 0.1, prevalence=0.2) == pytest.approx(expected, abs=1e-12)
    # the set's own prevalence (1/2) gives back the plain net benefit
    own = decisions.net_benefit(PROBS, LABELS, group, 0.1)
    assert decisions.net_benefit(PROBS, LABELS, group, 0.1, prevalence=0.5) == pytest.approx(own, abs=1e-12)
    # the melanoma rule (1 positive, 5 negatives): π = 1/2 equals NB on the set with the melanoma row copied 5 times
    replicated_probs = torch.cat([PROBS, PROBS[:1].repeat(4, 1)])
    replicated_labels = torch.cat([LABELS, LABELS[:1].repeat(4)])
    direct = decisions.net_benefit(replicated_probs, replicated_labels, 0, 0.1)
    assert decisions.net_benefit(PROBS, LABELS, 0, 0.1, prevalence=0.5) == pytest.approx(direct, abs=1e-12)
    metric = decisions.threshold_metric("net_benefit_at_prevalence", 0, 0.1, prevalence=0.5)
    assert metric(PROBS, LABELS) == pytest.approx(direct, abs=1e-12)


def test_reweighted_curve_matches_the_closed_form_at_every_threshold():
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(2 * torch.randn(300, 4, generator=generator, dtype=torch.float64), dim=1)
    labels = torch.randint(0, 4, (300,), generator=generator)
    thresholds = np.array([0.05, 0.1, 0.2, 0.4])
    curve = decisions.decision_curve(probs, labels, (1, 3), thresholds, prevalence=0.07)
    p = (probs[:, 1] + probs[:, 3]).numpy()
    positive = np.isin(labels.numpy(), [1, 3])
    for t, nb, all_ in zip(thresholds, curve.model, curve.treat_all):
        tpr, fpr = (p[positive] >= t).mean(), (p[~positive] >= t).mean()
        assert nb == pytest.approx(0.07 * tpr - 0.93 * fpr * t / (1 - t), abs=1e-12)
        assert all_ == pytest.approx(0.07 - 0.93 * t / (1 - t), abs=1e-12)
    assert curve.prevalence == 0.07 and curve.set_prevalence == pytest.approx(positive.mean()) and curve.reweighted


def test_decision_curve_of_a_perfect_and_of_an_uninformative_model():
    labels = torch.tensor([0, 2, 1, 1, 1, 2, 1, 1])
    perfect = torch.nn.functional.one_hot(labels, 3).double()
    thresholds = np.array([0.05, 0.2, 0.5, 0.9])
    for prevalence, pi in ((None, 3 / 8), (0.1, 0.1)):
        curve = decisions.decision_curve(perfect, labels, (0, 2), thresholds, prevalence=prevalence)
        np.testing.assert_allclose(curve.model, pi, atol=1e-12)  # every case found, no one else treated
        # the same forecast for everyone (P(group) = 0.3): treat all below 0.3, treat none above
        flat = torch.tensor([[0.1, 0.7, 0.2]], dtype=torch.float64).repeat(len(labels), 1)
        curve = decisions.decision_curve(flat, labels, (0, 2), thresholds, prevalence=prevalence)
        np.testing.assert_allclose(curve.model, np.where(thresholds <= 0.3, curve.treat_all, 0.0), atol=1e-12)
        np.testing.assert_allclose(curve.treat_none, 0.0)


def test_decision_summaries_and_table_at_a_prevalence_with_the_treat_all_row():
    models = {"a": [PROBS, PROBS.flip(0)], "b": [PROBS]}
    rows = decisions.decision_summaries(models, LABELS, (0, 2), 0.1, prevalence=0.2)
    everyone = rows[decisions.TREAT_ALL]["net_benefit_at_prevalence"]["mean"]
    assert everyone == pytest.approx(0.2 - 0.8 / 9, abs=1e-12)
    assert rows[decisions.TREAT_ALL]["net_benefit"]["mean"] == pytest.approx(0.5 - 0.5 / 9, abs=1e-12)
    table = decisions.decision_table(rows)
    assert "net benefit per 1,000 at π" in table.columns
    plain = decisions.decision_table(decisions.decision_summaries(models, LABELS, (0, 2), 0.1))
    assert "net benefit per 1,000 at π" not in plain.columns
    curves = {m: decisions.decision_curve(p, LABELS, (0, 2), prevalence=0.2) for m, p in models.items()}
    record = decisions.decision_record(rows, curves, "malignant", 0.1)
    assert record["prevalence"] == 0.2 and record["set_prevalence"] == pytest.approx(0.5)
    figure = decision_plots.decision_curve_plot(curves, threshold=0.1)
    assert figure.axes[0].get_ylabel() == "net benefit per 1,000 patients at prevalence 20 %"
    own = {m: decisions.decision_curve(p, LABELS, (0, 2)) for m, p in models.items()}
    figure = decision_plots.decision_curve_plot(own, threshold=0.1, unit="images of this set")
    assert figure.axes[0].get_ylabel() == "net benefit per 1,000 images of this set"


@pytest.mark.parametrize("prevalence", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_a_prevalence_outside_the_open_unit_interval_is_refused(prevalence):
    with pytest.raises(ValueError, match="prevalence must lie strictly between 0 and 1"):
        decisions.net_benefit(PROBS, LABELS, 0, 0.1, prevalence=prevalence)
    with pytest.raises(ValueError, match="prevalence must lie strictly between 0 and 1"):
        decisions.decision_curve(PROBS, LABELS, 0, [0.1], prevalence=prevalence)


def test_reweighting_a_set_without_positives_is_refused():
    no_melanoma = torch.tensor([1, 2, 1, 1, 1, 2])
    with pytest.raises(ValueError, match="with and without the class"):
        decisions.net_benefit(PROBS, no_melanoma, 0, 0.1, prevalence=0.1)
    with pytest.raises(ValueError, match="with and without the class"):
        decisions.decision_curve(PROBS, no_melanoma, 0, [0.1], prevalence=0.1)
    with pytest.raises(ValueError, match="needs prevalence="):
        decisions.threshold_metric("net_benefit_at_prevalence", 0, 0.1)


def test_bad_class_groups_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match="no class named 'squamous cell carcinoma'"):
        decisions.class_indices(NAMES, ["melanoma", "squamous cell carcinoma"])
    with pytest.raises(ValueError, match="names a class twice"):
        decisions.class_indices(NAMES, ["melanoma", "Melanoma"])
    with pytest.raises(ValueError, match="empty"):
        decisions.class_indices(NAMES, [])
    with pytest.raises(TypeError, match="for one class use class_index"):
        decisions.class_indices(NAMES, "melanoma")
    with pytest.raises(ValueError, match="distinct class indices"):
        decisions.net_benefit(PROBS, LABELS, (0, 0), 0.1)
    with pytest.raises(ValueError, match="integer in"):
        decisions.net_benefit(PROBS, LABELS, (0, 3), 0.1)


def test_window_calibration_on_a_hand_example():
    # P(malignant) = 0.6, 0.45, 0.2, 0.1, 0.03, 0.9; in [0.1, 0.5): rows 1 (BCC), 2 and 3 (nevi)
    window = decisions.window_calibration(PROBS, LABELS, (0, 2), 0.1, 0.5)
    assert window.n == 3
    assert window.mean_forecast == pytest.approx((0.45 + 0.2 + 0.1) / 3)
    assert window.observed == pytest.approx(1 / 3)
    empty = decisions.window_calibration(PROBS, LABELS, (0, 2), 0.7, 0.8)
    assert empty.n == 0 and np.isnan(empty.mean_forecast) and np.isnan(empty.observed)
    with pytest.raises(ValueError, match="0 <= low < high <= 1"):
        decisions.window_calibration(PROBS, LABELS, 0, 0.5, 0.5)


def test_paired_net_benefit_at_a_prevalence_estimates_the_reweighted_difference():
    worse = PROBS.clone()
    worse[:, [0, 2]] *= 0.3  # P(malignant) shrunk: fewer biopsies
    worse[:, 1] = 1 - worse[:, [0, 2]].sum(1)
    models = {"calibrated": [PROBS], "shrunk": [worse]}
    result = decisions.paired_net_benefit(models, LABELS, (0, 2), "calibrated", 0.1, n=50, seed=0, prevalence=0.2)
    expected = decisions.net_benefit(worse, LABELS, (0, 2), 0.1, 0.2) - decisions.net_benefit(
        PROBS, LABELS, (0, 2), 0.1, 0.2
    )
    assert result["shrunk"].estimate == pytest.approx(expected, abs=1e-12)


def test_decision_overview_puts_tables_side_by_side_and_marks_missing_models():
    rows = decisions.decision_summaries({"a": [PROBS], "b": [PROBS]}, LABELS, 0, 0.1, prevalence=0.02)
    only_a = decisions.decision_summaries({"a": [PROBS]}, LABELS, 0, 0.1, prevalence=0.02)
    overview = decisions.decision_overview(
        {"set 1": decisions.decision_table(rows), "set 2": decisions.decision_table(only_a)}
    )
    assert list(overview.columns.get_level_values(0).unique()) == ["set 1", "set 2"]
    assert ("set 1", "net benefit per 1,000 at π") in overview.columns
    assert ("set 2", "sensitivity (%)") not in overview.columns
    assert overview.loc["b", ("set 2", "net benefit per 1,000")] == "—"
    with pytest.raises(ValueError, match="has no column"):
        decisions.decision_overview({"set 1": decisions.decision_table(rows)}, ["no such column"])
    with pytest.raises(ValueError, match="tables is empty"):
        decisions.decision_overview({})


def test_break_even_prevalence_is_where_the_reweighted_net_benefit_is_zero():
    outcome = decisions.threshold_outcome(PROBS, LABELS, 0, 0.1)  # TPR 1, FPR 2/5
    assert outcome.break_even_prevalence == pytest.approx((0.4 / 9) / (1 + 0.4 / 9), abs=1e-12)
    assert outcome.net_benefit_at(outcome.break_even_prevalence) == pytest.approx(0.0, abs=1e-12)
    assert outcome.net_benefit_at(outcome.break_even_prevalence + 0.01) > 0


def test_the_reliability_legend_names_the_one_vs_rest_ece_not_the_top_label_ece():
    bins = {"model": decisions.one_vs_rest_bins(PROBS, LABELS, 0, "melanoma")}
    figure = decision_plots.one_vs_rest_reliability(bins)
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert f"model (melanoma-vs-rest ECE {100 * bins['model'].ece:.1f} %)" in labels  # not the tables' top-label ECE
