"""helpers.lessons.multilabel_analysis: the shared loss set, Table 1 measured, label correlation, bootstrap tables."""

import numpy as np
import pytest
import torch

from helpers import metrics
from helpers.lessons import multilabel_analysis as mla
from helpers.losses import ASL, BCE, SPA, AsymmetricFocal, Composite, detached_recovery, phi_recovery


def test_course_losses_are_fresh_and_named():
    first, second = mla.course_losses(), mla.course_losses()
    assert list(first) == list(mla.LOSS_NAMES)
    assert first["SPA"] is not second["SPA"]
    assert isinstance(first["SPA+LPR"], Composite) and isinstance(first["SPA+LPR"].base, SPA)
    assert (first["ASL"].gamma_neg, first["ASL"].margin) == (4.0, 0.05)
    with pytest.raises(ValueError, match="unknown loss"):
        mla.course_losses(["BCE", "hinge"])


def test_train_config_has_no_augmentation_and_is_the_regularised_recipe():
    config = mla.multilabel_train_config(epochs=2, lr=0.1, batch_size=64)
    assert config.augment is False and config.augmentation is None
    assert (config.weight_decay, config.schedule, config.monitor) == (5e-4, "onecycle", "val_nll")


def test_readouts_add_phi_only_for_focal_and_asl():
    logits = torch.linspace(-4, 4, 12).reshape(3, 4)
    assert list(mla.probability_readouts("BCE", BCE(), logits)) == ["BCE"]
    asl = ASL()
    readouts = mla.probability_readouts("ASL", asl, logits)
    assert torch.allclose(readouts["ASL"], torch.sigmoid(logits))
    expected = phi_recovery(torch.sigmoid(logits), gamma_pos=0.0, gamma_neg=4.0, margin=0.05)
    assert torch.allclose(readouts["ASL+φ"], expected.float())


def test_detached_asl_is_declarable_without_changing_the_course_losses():
    """ "ASL (detached)" is a name a profile may list; it is in no default list, and it differs from "ASL" only by
    the option (same value, a repr — hence a run key — of its own)."""
    assert "ASL (detached)" not in mla.LOSS_NAMES
    both = mla.course_losses(["ASL", "ASL (detached)"])
    plain, detached = both["ASL"], both["ASL (detached)"]
    assert detached.detach_focusing_weight and not plain.detach_focusing_weight
    assert repr(detached) != repr(plain) and repr(plain) == repr(ASL())
    logits = torch.linspace(-4, 4, 12).reshape(3, 4)
    readouts = mla.probability_readouts("ASL (detached)", detached, logits)
    assert list(readouts) == ["ASL (detached)", "ASL (detached)+ψ"]
    expected = detached_recovery(torch.sigmoid(logits), gamma_pos=0.0, gamma_neg=4.0, margin=0.05)
    assert torch.allclose(readouts["ASL (detached)+ψ"], expected.float())


def test_table_one_is_measured_as_the_paper_states():
    bce = mla.loss_properties(BCE())
    focal = mla.loss_properties(AsymmetricFocal(0.0, 4.0), recover=lambda z: phi_recovery(z, 0.0, 4.0, 0.0))
    asl = mla.loss_properties(ASL(), recover=lambda z: phi_recovery(z, 0.0, 4.0, 0.05))
    spa = mla.loss_properties(SPA())
    columns = ("asymmetric", "strictly_proper", "recover_eta")
    assert tuple(bce[c] for c in columns) == (False, True, True)
    assert tuple(focal[c] for c in columns) == (True, False, True)
    assert tuple(asl[c] for c in columns) == (True, False, False)
    assert tuple(spa[c] for c in columns) == (True, True, True)
    assert asl["n_eta_at_boundary"] > 0  # η ≥ 0.964 all share the minimiser v → +∞


def test_spa_read_through_the_sigmoid_is_not_proper():
    class SigmoidSPA(SPA):
        def predict_proba(self, logits):
            return torch.sigmoid(logits)

    assert not mla.loss_properties(SigmoidSPA())["strictly_proper"]


def test_label_correlation_matches_numpy():
    generator = torch.Generator().manual_seed(0)
    labels = (torch.rand(500, 5, generator=generator) < torch.tensor([0.1, 0.3, 0.5, 0.2, 0.4])).float()
    labels[:, 4] = labels[:, 0]  # a perfectly correlated pair
    expected = np.corrcoef(labels.numpy().T)
    assert np.allclose(mla.label_correlation(labels).numpy(), expected)
    assert mla.label_correlation(labels)[0, 4] == pytest.approx(1.0)


def test_bootstrap_table_pairs_resamples_and_accepts_other_targets():
    generator = torch.Generator().manual_seed(1)
    eta = torch.rand(300, 4, generator=generator, dtype=torch.float64)
    labels = (torch.rand(300, 4, generator=generator, dtype=torch.float64) < eta).float()
    noisy = (eta + 0.1).clamp(0, 1)
    fns = {
        "ece": metrics.multilabel_ece,
        "true": lambda p, q: metrics.true_calibration_error(p, q, multilabel=True).mean_abs,
    }
    table = mla.bootstrap_table({"bayes": eta, "noisy": noisy}, labels, fns, n=20, seed=3, targets={"true": eta})
    assert table["bayes"]["true"].estimate == 0.0
    assert table["noisy"]["true"].estimate == pytest.approx(float((noisy - eta).abs().mean()))
    direct = metrics.bootstrap(metrics.multilabel_ece, noisy, labels, n=20, seed=3)
    assert torch.equal(table["noisy"]["ece"].samples, direct.samples)
    text = mla.format_interval_table(table)
    assert "bayes" in text and "[" in text and len(text.splitlines()) == 3


def test_bootstrap_table_restores_the_thread_setting():
    before = torch.get_num_threads()
    eta = torch.full((50, 3), 0.3, dtype=torch.float64)
    labels = (torch.arange(150).reshape(50, 3) % 3 == 0).float()
    mla.bootstrap_table({"m": eta}, labels, {"hamming": metrics.hamming_loss}, n=5)
    assert torch.get_num_threads() == before


def test_binned_calibration_with_counts_agrees_with_the_metrics_and_counts_bins():
    """ACE / MCE / per-label ACE equal helpers.metrics.multilabel's values; the counts are those of an independent numpy
    binning (equal-width bins, (lo, hi], 0 in the first bin)."""
    import numpy as np

    from helpers import metrics
    from helpers.lessons import binned_calibration_with_counts

    generator = torch.Generator().manual_seed(3)
    probs = torch.rand(400, 5, generator=generator) ** 3
    labels = (torch.rand(400, 5, generator=generator) < probs).float()
    result = binned_calibration_with_counts(probs, labels, n_bins=10)
    assert result["ace"] == pytest.approx(metrics.multilabel_average_calibration_error(probs, labels, 10))
    assert result["mce"] == pytest.approx(metrics.multilabel_mce(probs, labels, 10))
    assert result["ace_per_label"] == pytest.approx(
        metrics.multilabel_average_calibration_error(probs, labels, 10, per_label=True)
    )
    index = np.clip(np.ceil(probs.numpy().astype(np.float64) * 10).astype(int) - 1, 0, 9)
    pooled = np.bincount(index.ravel(), minlength=10)
    assert result["pooled_nonempty_bins"] == int((pooled > 0).sum())
    assert result["pooled_smallest_bin"] == int(pooled[pooled > 0].min())
    per_label = [(np.bincount(index[:, t], minlength=10) > 0).sum() for t in range(5)]
    assert result["nonempty_bins_per_label"] == pytest.approx(np.mean(per_label))


def test_ideal_output_is_the_conditional_risk_minimiser_read_out_and_keeps_the_ranking():
    from helpers.losses import conditional_risk_minimiser

    g = torch.Generator().manual_seed(3)
    eta = torch.sigmoid(torch.randn(40, 3, dtype=torch.float64, generator=g) * 3)
    torch.testing.assert_close(mla.ideal_output(BCE(), eta), eta, rtol=0, atol=1e-7)
    for loss in (AsymmetricFocal(gamma_pos=0.0, gamma_neg=4.0), ASL(0.0, 4.0, 0.05)):
        ideal = mla.ideal_output(loss, eta)
        direct = conditional_risk_minimiser(loss, eta.reshape(-1)).proba.reshape(eta.shape)
        interior = eta < 0.96  # ASL's minimiser runs to +inf above 0.9637
        torch.testing.assert_close(ideal[interior], direct[interior], rtol=1e-5, atol=1e-7)
        assert (ideal - eta).abs().max() > 0.05  # not proper: the distortion is visible
        order = torch.argsort(eta[interior])
        assert bool((ideal[interior][order].diff() > 0).all())  # same ranking as η
    with pytest.raises(ValueError, match="strictly inside"):
        mla.ideal_output(BCE(), torch.tensor([0.0, 0.5]))


def test_equal_mass_reliability_puts_equal_counts_where_the_forecasts_are():
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(1000, 14, generator=generator, dtype=torch.float64) ** 4  # most forecasts near 0
    labels = (torch.rand(1000, 14, generator=generator, dtype=torch.float64) < probs).double()
    curve = mla.equal_mass_reliability(probs, labels, n_bins=10)
    assert curve["counts"].sum() == 14_000 and set(curve["counts"]) == {1400}
    assert np.all(np.diff(curve["mean_predicted"]) > 0)
    assert curve["mean_predicted"][3] < 0.02  # four of ten bins below 0.02, where equal-width bins put one
    assert np.allclose(curve["frequency"], curve["mean_predicted"], atol=0.05)
    with pytest.raises(ValueError):
        mla.equal_mass_reliability(probs, labels[:10], n_bins=10)


def test_evaluation_of_stored_runs_against_bce_gives_tables_with_headers_in_words():
    from types import SimpleNamespace

    from helpers.course import output_rules

    generator = torch.Generator().manual_seed(3)
    truth = torch.rand(120, 4, generator=generator, dtype=torch.float64) * 0.3 + 0.06  # above ASL's margin
    labels = (torch.rand(120, 4, generator=generator, dtype=torch.float64) < truth).float()
    bundle = SimpleNamespace(true_posteriors={"test": truth}, train=SimpleNamespace(labels=labels))
    losses = mla.course_losses(["BCE", "ASL", "SPA", "SPA+LPR"])
    runs = {
        (name, seed): SimpleNamespace(loss=losses[name], test_logits=torch.logit(truth).float() + 0.1 * seed)
        for name in losses
        for seed in (0, 1)
    }
    probs = mla.readouts_by_model(runs, bundle)
    assert list(probs) == ["BCE", "ASL", "ASL+φ", "SPA", "SPA+LPR", "constant prevalence", "Bayes"]
    assert all(len(probs[name]) == 2 for name in ("BCE", "ASL+φ", "SPA+LPR"))
    summaries, differences = mla.evaluate_against_bce(probs, labels, truth, n=10)
    assert set(differences) == {"ASL", "SPA", "SPA+LPR"}
    assert "macro_auroc" not in differences["ASL"] and "macro_auroc" in differences["SPA"]
    tables = mla.evaluation_tables(summaries, differences)
    assert len(tables) == 5 and tables[3][1].startswith("Δ = model − BCE")
    headers = [str(h) for table, _ in tables for h in table.columns]
    assert "RMS error vs exact posteriors (%)" in headers and "ACE (%)" in headers
    assert not any(output_rules.RAW_KEY.match(h) for h in headers)


def _ablation_case():
    g = torch.Generator().manual_seed(3)
    eta = torch.rand(60, 3, generator=g, dtype=torch.float64) * 0.8 + 0.1
    labels = (torch.rand(60, 3, generator=g, dtype=torch.float64) < eta).long()
    distorted = eta.sqrt()  # a monotone over-estimating map, like focal's and ASL's
    queries = torch.tensor([[1, -1, 0], [1, 0, 0], [1, 1, -1], [0, 1, -1]])
    return eta, distorted, labels, queries


def test_term_distortion_ablation_matches_hand_built_scores():
    eta, distorted, labels, queries = _ablation_case()
    aps = mla.term_distortion_ablation(eta, distorted, labels, queries, chunk=3)
    relevant = metrics.query_relevance(labels, queries)
    # query 0 = {0 wanted, 1 unwanted}: wanted-only distortion scores log g0 + log(1 − η1)
    hand = (torch.log(distorted[:, 0]) + torch.log1p(-eta[:, 1]))[None]
    assert torch.allclose(aps["wanted terms only"][:1], metrics.average_precision(hand, relevant[:1]))
    hand = (torch.log(eta[:, 0]) + torch.log1p(-distorted[:, 1]))[None]
    assert torch.allclose(aps["unwanted terms only"][:1], metrics.average_precision(hand, relevant[:1]))
    assert torch.allclose(aps["exact"], metrics.average_precision(metrics.query_log_scores(eta, queries), relevant))
    assert torch.allclose(
        aps["both"], metrics.average_precision(metrics.query_log_scores(distorted, queries), relevant)
    )
    # query 1 has no unwanted label: distorting only unwanted terms changes nothing, a monotone map on one
    # wanted label keeps its ranking
    assert aps["unwanted terms only"][1] == aps["exact"][1] == aps["wanted terms only"][1]
    assert not torch.allclose(aps["both"], aps["exact"])  # the multi-term queries do change


def test_ablation_table_rows_and_bad_input():
    eta, distorted, labels, queries = _ablation_case()
    aps = mla.term_distortion_ablation(eta, distorted, labels, queries)
    table = mla.ablation_table(aps, queries)
    assert list(table.columns) == ["L=1", "L=2", "L=3"]
    expected = 100 * float(aps["both"][2] - aps["exact"][2])  # the one query of length 3
    assert table.loc["both", "L=3"] == pytest.approx(expected)
    # the no-unwanted-label row at L=1 is query 1 alone, unchanged by a monotone map
    assert table.loc["both, queries with no unwanted label", "L=1"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="same shape"):
        mla.term_distortion_ablation(eta, distorted[:, :2], labels, queries)
    with pytest.raises(ValueError, match="chunk"):
        mla.term_distortion_ablation(eta, distorted, labels, queries, chunk=0)
