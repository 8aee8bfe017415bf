"""The estimator-bias study of notebook 01: exact calibration errors of the sharpened Bayes model, draws with fresh
labels, and the study's means and sds equal to the estimators applied draw by draw."""

import numpy as np
import pytest
import torch

from helpers import metrics
from helpers.metrics import estimator_bias as eb


def random_posteriors(n=400, k=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(2.0 * torch.randn(n, k, generator=generator, dtype=torch.float64), 1)


def test_sharpened_keeps_the_predictions_and_moves_lambda_onto_the_predicted_class():
    p = random_posteriors()
    q = eb.sharpened(p, 0.3)
    assert torch.equal(q.argmax(1), p.argmax(1))
    torch.testing.assert_close(q.sum(1), torch.ones(len(p), dtype=torch.float64))
    torch.testing.assert_close(q.max(1).values, 0.7 * p.max(1).values + 0.3)
    torch.testing.assert_close(eb.sharpened(p, 0.0), p)
    with pytest.raises(ValueError, match=r"lam .* \[0, 1\]"):
        eb.sharpened(p, 1.5)
    with pytest.raises(ValueError, match="rows summing to 1"):
        eb.sharpened(torch.randn(4, 3), 0.1)


def test_exact_errors_by_hand_and_against_true_calibration_error():
    # confidences c* = 0.6 and 1.0: CE_1 = λ (0.4 + 0) / 2, CE_2 = λ sqrt(0.16 / 2)
    p = torch.tensor([[0.6, 0.4], [1.0, 0.0]], dtype=torch.float64)
    ce1, ce2 = eb.exact_top_label_errors(p, 0.5)
    assert ce1 == pytest.approx(0.5 * 0.2) and ce2 == pytest.approx(0.5 * np.sqrt(0.08))
    # |p̂(ŷ) − p*(ŷ)| = λ (1 − c*) row by row, so CE_1 is metrics.true_calibration_error's top-label error
    posteriors = random_posteriors()
    assert eb.exact_top_label_errors(posteriors, 0.3)[0] == pytest.approx(
        metrics.true_calibration_error(eb.sharpened(posteriors, 0.3), posteriors).top_label
    )
    assert eb.exact_top_label_errors(posteriors, 0.0) == (0.0, 0.0)


def test_draws_take_labels_from_the_exact_posteriors():
    one_hot = torch.eye(4, dtype=torch.float64)[[2, 0, 3, 1, 1]]
    indices, labels = eb.draw_test_sets(one_hot, 50, 3, torch.Generator().manual_seed(0))
    assert indices.shape == labels.shape == (3, 50)
    assert torch.equal(labels, one_hot.argmax(1)[indices])
    coin = torch.tensor([[0.3, 0.7], [0.3, 0.7]], dtype=torch.float64)
    _, labels = eb.draw_test_sets(coin, 20_000, 1, torch.Generator().manual_seed(1))
    assert float(labels.double().mean()) == pytest.approx(0.7, abs=0.01)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        eb.draw_test_sets(coin, 0, 1, torch.Generator())


def test_study_equals_the_estimators_applied_to_each_draw():
    posteriors = random_posteriors(300, 4, seed=2)
    models = {"Bayes": posteriors, "over-confident": eb.sharpened(posteriors, 0.4)}
    estimators = {"ECE": metrics.ece, "debiased": metrics.debiased_ece}
    study = eb.estimator_study(
        models, posteriors, estimators, [50, 200], repeats=6, repeats_by_estimator={"debiased": 2}, seed=5
    )
    generator = torch.Generator().manual_seed(5)
    for column, n in enumerate([50, 200]):
        indices, labels = eb.draw_test_sets(posteriors, n, 6, generator)
        for model, probs in models.items():
            for name, estimator in estimators.items():
                count = 2 if name == "debiased" else 6
                values = [estimator(probs[indices[r]], labels[r]) for r in range(count)]
                means, sds = study[model][name]
                assert means[column] == pytest.approx(np.mean(values)) and sds[column] == pytest.approx(np.std(values))


def test_binned_ece_of_the_bayes_model_is_positive_and_shrinks_with_n_while_the_truth_is_zero():
    posteriors = random_posteriors(2000, 5, seed=3)
    study = eb.estimator_study({"Bayes": posteriors}, posteriors, {"ECE": metrics.ece}, [100, 3000], repeats=20)
    means, _ = study["Bayes"]["ECE"]
    assert means[0] > means[1] > 0


def test_study_refuses_models_of_the_wrong_shape_and_too_many_repeats():
    posteriors = random_posteriors(50, 3)
    with pytest.raises(ValueError, match="one row per pool image"):
        eb.estimator_study({"x": posteriors[:10]}, posteriors, {"ECE": metrics.ece}, [10], repeats=2)
    with pytest.raises(ValueError, match="repeats_by_estimator"):
        eb.estimator_study(
            {"x": posteriors}, posteriors, {"ECE": metrics.ece}, [10], repeats=2, repeats_by_estimator={"ECE": 5}
        )


def test_study_table_reads_mean_and_sd_of_the_named_model_and_size_in_percent():
    study = {
        "Bayes": {"ECE": (np.array([0.07, 0.0165]), np.array([0.018, 0.0038])), "smooth": (np.zeros(2), np.zeros(2))},
        "sharp": {"ECE": (np.array([0.05, 0.038]), np.array([0.02, 0.0072])), "smooth": (np.ones(2), np.ones(2))},
    }
    table = eb.study_table(study, [100, 2005], {"Bayes, n = 2,005": ("Bayes", 2005), "sharp, n = 100": ("sharp", 100)})
    assert list(table.index) == ["ECE", "smooth"] and table.index.name == "estimate (%)"
    assert table.loc["ECE", "Bayes, n = 2,005"] == "1.65 ± 0.38"
    assert table.loc["ECE", "sharp, n = 100"] == "5.00 ± 2.00"
    assert table.loc["smooth", "sharp, n = 100"] == "100.00 ± 100.00"
    with pytest.raises(ValueError, match="sample sizes"):
        eb.study_table(study, [100, 2005], {"x": ("Bayes", 300)})
    with pytest.raises(ValueError, match="models"):
        eb.study_table(study, [100, 2005], {"x": ("other", 100)})
