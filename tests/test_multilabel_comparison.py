"""helpers.lessons.multilabel_comparison: notebook 11's read-outs, reference and post-hoc rows, answer table, per-label
view."""

from types import SimpleNamespace

import pytest
import torch

from helpers.calibration import posthoc
from helpers.lessons import multilabel_comparison as mc
from helpers.losses import BCE, LDACE, LPR, SPA, AsymmetricFocal, Composite
from helpers.metrics import PairedBootstrapResult, stats


def fake_data(n=200, t=3, seed=0, posteriors=True):
    generator = torch.Generator().manual_seed(seed)
    eta = torch.rand(n, t, generator=generator) * 0.5

    def split(m):
        return SimpleNamespace(labels=(torch.rand(m, t, generator=generator) < 0.3).float())

    return SimpleNamespace(
        train=split(n),
        val=split(100),
        test=split(n),
        true_posteriors={"test": eta} if posteriors else None,
    )


def fake_runs(data, names=("BCE", "focal"), seeds=(0, 1)):
    generator = torch.Generator().manual_seed(1)
    losses = {"BCE": BCE(), "focal": AsymmetricFocal(gamma_pos=0.0, gamma_neg=4.0)}
    return {
        (name, s): SimpleNamespace(
            loss=losses[name],
            test_logits=torch.randn(data.test.labels.shape, generator=generator),
            val_logits=torch.randn(data.val.labels.shape, generator=generator),
        )
        for name in names
        for s in seeds
    }


def test_trained_probabilities_add_the_phi_readout_of_focal_only():
    data = fake_data()
    probs = mc.trained_probabilities(fake_runs(data), ["BCE", "focal"], [0, 1])
    assert list(probs) == ["BCE", "focal", "focal+φ"]
    assert all(len(v) == 2 and v[0].shape == data.test.labels.shape for v in probs.values())


def test_reference_rows_and_metrics_follow_the_known_posteriors():
    data = fake_data()
    rows = mc.reference_probabilities(data)
    assert set(rows) == {"constant prevalence", "Bayes"}
    torch.testing.assert_close(rows["constant prevalence"][0][0], data.train.labels.mean(0))
    assert set(mc.reference_probabilities(fake_data(posteriors=False))) == {"constant prevalence"}
    assert "true_rms" in mc.comparison_metrics(True) and "true_rms" not in mc.comparison_metrics(False)


def test_posthoc_rows_fit_on_the_calibration_half_only():
    data = fake_data()
    runs = fake_runs(data)
    rows, n_calibration = mc.posthoc_probabilities(
        runs, data, "focal", {"Platt": posthoc.PerLabelPlatt, "isotonic": posthoc.PerLabelIsotonic}, [0, 1]
    )
    _, calibration = posthoc.split_calibration(100, seed=0)
    assert n_calibration == 50 == calibration.numel()
    expected = posthoc.PerLabelPlatt().fit(runs[("focal", 1)].val_logits[calibration], data.val.labels[calibration])
    torch.testing.assert_close(rows["Platt"][1], expected.transform(runs[("focal", 1)].test_logits).float())
    assert len(rows["isotonic"]) == 2


def result(estimate, low, high):
    return PairedBootstrapResult(estimate, low, high, 0.95, torch.zeros(10), 1, 1)


def test_answer_table_says_yes_only_for_better_calibration_without_worse_ranking():
    differences = {
        "better": {"multilabel_nll": result(-0.01, -0.02, -0.005), "map_per_class": result(0.0, -0.01, 0.01)},
        "ranks worse": {"multilabel_nll": result(-0.01, -0.02, -0.005), "map_per_class": result(-0.02, -0.03, -0.01)},
        "worse": {"multilabel_nll": result(0.01, 0.005, 0.02), "map_per_class": result(0.02, 0.01, 0.03)},
        "null": {"multilabel_nll": result(0.0, -0.01, 0.01), "map_per_class": result(0.0, -0.01, 0.01)},
    }
    table = mc.answer_table(differences, "BCE", ["multilabel_nll"], ["map_per_class"], labels=stats.METRIC_LABELS)
    answers = table.table["better probabilities, ranking kept?"].to_dict()
    assert answers == {
        "better": "yes",
        "ranks worse": "no: ranks worse",
        "worse": "no: worse probabilities",
        "null": "no difference detected",
    }
    assert list(table.table.columns)[:2] == ["NLL", "mAP@y (%)"] and table.n_comparisons == 8
    record = mc.answer_record(differences, "BCE", ["multilabel_nll"], ["map_per_class"])
    assert record["models"]["better"]["answer"] == "yes"
    assert record["models"]["worse"]["differences"]["map_per_class"]["low"] == pytest.approx(0.01)
    with pytest.raises(KeyError, match="no paired difference"):
        mc.answer_table(differences, "BCE", ["multilabel_brier"], ["map_per_class"])


def test_answer_table_lets_an_ece_neither_earn_a_yes_nor_veto_one():
    # an ECE alone is no evidence of better probabilities (the constant predictor has the lowest ECE), so it is no
    # evidence of worse ones either: "yes" and "worse" are decided by the proper scores (NLL, Brier, the RMS error
    # against the exact posteriors); a worse ECE is reported beside the verdict, never decides it
    calibration = ["multilabel_nll", "multilabel_ece"]
    null, better, worse = result(0.0, -0.01, 0.01), result(-0.01, -0.02, -0.005), result(0.01, 0.005, 0.02)
    rows = {
        "ECE only better": (null, better),
        "ECE only worse": (null, worse),
        "NLL better, ECE worse": (better, worse),
        "NLL better": (better, null),
        "NLL worse, ECE better": (worse, better),
    }
    differences = {
        model: {"multilabel_nll": nll, "multilabel_ece": ece, "map_per_class": null}
        for model, (nll, ece) in rows.items()
    }
    answers = mc.answer_table(differences, "BCE", calibration, ["map_per_class"]).table.iloc[:, -1].to_dict()
    assert answers == {
        "ECE only better": "no difference detected",
        "ECE only worse": "no difference detected (ECE worse)",
        "NLL better, ECE worse": "yes (ECE worse)",
        "NLL better": "yes",
        "NLL worse, ECE better": "no: worse probabilities",
    }
    record = mc.answer_record(differences, "BCE", calibration, ["map_per_class"])["models"]
    assert {model: entry["answer"] for model, entry in record.items()} == answers
    with pytest.raises(ValueError, match="proper score"):
        mc.answer_table(differences, "BCE", ["multilabel_ece"], ["map_per_class"])


def test_answer_table_a_worse_proper_score_outweighs_a_better_one():
    differences = {
        "mixed": {
            "true_rms": result(0.01, 0.005, 0.02),
            "multilabel_nll": result(-0.01, -0.02, -0.005),
            "map_per_class": result(0.0, -0.01, 0.01),
        }
    }
    answer = mc.answer_table(differences, "BCE", ["true_rms", "multilabel_nll"], ["map_per_class"]).table.iloc[0, -1]
    assert answer == "no: worse probabilities"


def test_deciding_metrics_name_the_columns_behind_each_verdict():
    calibration, ranking = ["true_rms", "multilabel_nll", "multilabel_ece"], ["map_per_class"]
    null, better, worse = result(0.0, -0.01, 0.01), result(-0.01, -0.02, -0.005), result(0.01, 0.005, 0.02)
    map_better, map_worse = result(0.02, 0.01, 0.03), result(-0.02, -0.03, -0.01)

    def row(rms, nll, ece, ranks):
        return {"true_rms": rms, "multilabel_nll": nll, "multilabel_ece": ece, "map_per_class": ranks}

    cases = {
        # a "yes": the proper scores that are better (a better ranking is not what decides it)
        "yes": (row(better, better, null, map_better), ("better", ["true_rms", "multilabel_nll"])),
        # worse probabilities: only the worse proper scores, not the worse ECE or ranking beside them
        "worse": (row(worse, null, worse, map_worse), ("worse", ["true_rms"])),
        "ranks worse": (row(null, null, null, map_worse), ("worse", ["map_per_class"])),
        # an ECE decides nothing: a worse ECE alone is "no difference detected (ECE worse)", decided by no column
        "ECE worse": (row(null, null, worse, null), ("", [])),
        "nothing": (row(null, null, better, null), ("", [])),
    }
    for name, (differences, expected) in cases.items():
        assert mc.deciding_metrics(differences, calibration, ranking) == expected, name


def test_per_label_view_shows_what_pooling_cancels():
    # label 0 over-forecast, label 1 under-forecast by the same amount at the same probability: the pooled ECE
    # of these forecasts is 0, each label's own ECE is not
    labels = torch.zeros(200, 2)
    labels[:10, 0] = 1.0  # label a: forecast 0.3 on the first 100 images, 10 % present (over-forecast by 20 points)
    labels[:50, 1] = 1.0  # label b: the same forecast, 50 % present (under-forecast by 20 points)
    labels[100, :] = 1.0  # the other 100 images: forecast 0.01, 1 % present in both labels (calibrated)
    probs = torch.full((200, 2), 0.3)
    probs[100:] = 0.01
    view = mc.per_label_view([probs], labels, ["a", "b"], torch.tensor([0.15, 0.5]))
    assert list(view.columns)[-1] == "ECE of the label (%)"
    assert view.loc["a", "ECE of the label (%)"] == pytest.approx(10) == view.loc["b", "ECE of the label (%)"]
    assert mc.metrics.multilabel_ece(probs, labels) < 1e-6 < view["ECE of the label (%)"].min()
    assert view.loc["b", "forecast − frequency (points)"] < 0 < view.loc["a", "forecast − frequency (points)"]


def test_variant_runs_load_both_data_sets_under_one_summary(monkeypatch):
    from helpers.course import suites, suites_multilabel

    calls = []
    monkeypatch.setattr(
        suites_multilabel, "multilabel_runs", lambda cfg, bundle, losses: calls.append(bundle) or {bundle: 1}
    )
    assert suites.multilabel_variant_runs(None, "coupled", ["BCE"], "independent", ["BCE"]) == (
        {"coupled": 1},
        {"independent": 1},
    )
    assert suites.multilabel_variant_runs(None, "coupled", ["BCE"]) == ({"coupled": 1}, {})
    assert calls == ["coupled", "independent", "coupled"]


def test_query_level_error_sees_images_that_pooled_and_per_label_errors_do_not():
    # two labels, each present on half of the images: forecasting 0.5 everywhere is calibrated pooled and per
    # label; if the two labels always occur together, an image has 0 or 2 findings, never the predicted 1, yet
    # the predicted count is right on average
    labels = torch.tensor([[1.0, 1.0], [0.0, 0.0]] * 50)
    flat = torch.full((100, 2), 0.5)
    assert mc.query_level_error(flat, labels) == pytest.approx(0.0, abs=1e-12)  # no image's count is known
    informed = torch.tensor([[0.9, 0.9], [0.1, 0.1]] * 50)  # right order, too timid: 1.8 and 0.2 against 2 and 0
    assert mc.query_level_error(informed, labels) == pytest.approx(0.2)
    levels = mc.calibration_levels({"timid": [informed], "flat": [flat]}, labels, ["timid", "flat"])
    assert levels.loc["timid", "ECE pooled (%)"] == pytest.approx(10.0)
    assert levels.loc["flat", "query-level error (findings per image)"] == pytest.approx(0.0)


def test_calibration_levels_print_the_ece_to_two_decimals_like_the_other_tables():
    # one forecast for every image: the ECE is |forecast − frequency|, here not a round number of percent
    labels = torch.zeros(100, 1)
    labels[:13] = 1.0  # frequency 0.13 against a forecast of 0.1234: ECE 0.66 %
    probs = {"m": [torch.full((100, 1), 0.1234)]}
    levels = mc.calibration_levels(probs, labels, ["m"])
    assert levels.loc["m", "ECE pooled (%)"] == pytest.approx(0.66)
    assert mc.calibration_levels(probs, labels, ["m"], digits=1).loc["m", "ECE pooled (%)"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="digits"):
        mc.calibration_levels(probs, labels, ["m"], digits=-1)


def test_summarise_adds_the_smooth_ece_to_every_model():
    data = fake_data(n=300)
    probs = {"a": [data.true_posteriors["test"]] * 2, "b": [torch.full((300, 3), 0.3)]}
    summaries = mc.summarise(data, probs, mc.comparison_metrics(True))
    assert set(summaries["a"]) == {*mc.comparison_metrics(True), "multilabel_smooth_ece"}
    assert summaries["a"]["true_rms"]["mean"] == pytest.approx(0.0, abs=1e-7)


@pytest.mark.filterwarnings("ignore:per-label temperature scaling")  # random logits: no interior minimum
def test_the_contest_rows_are_each_tuned_loss_read_raw_and_after_per_label_ts_as_bce_s_own():
    """A tuned row's "+ TS/label" is per-label TS fitted on the calibration half (the half BCE + TS/label uses), on
    the logit of the loss's own read-out: for a sigmoid read-out exactly BCE's per-label TS."""
    data = fake_data()
    base = fake_runs(data)
    tuned = {("BCE+LPR λ=0 (BCE) (tuned)", s): base[("BCE", s)] for s in (0, 1)}
    tuned.update({("focal γ⁻=2 (tuned)", s): base[("focal", s)] for s in (0, 1)})
    rows = [("BCE+LPR", "BCE+LPR λ=0 (BCE) (tuned)"), ("focal", "focal γ⁻=2 (tuned)")]
    probs = mc.contest_probabilities(tuned, rows, data, [0, 1], split_seed=3)
    assert list(probs) == [
        "BCE+LPR λ=0 (BCE) (tuned)",
        "BCE+LPR λ=0 (BCE) (tuned) + TS/label",
        "focal γ⁻=2 (tuned)",
        "focal γ⁻=2 (tuned) + TS/label",
    ]
    bce_ts, _ = mc.posthoc_probabilities(base, data, "BCE", {"TS": posthoc.PerLabelTemperatureScaling}, [0, 1], 3)
    for seed in (0, 1):
        torch.testing.assert_close(probs["BCE+LPR λ=0 (BCE) (tuned) + TS/label"][seed], bce_ts["TS"][seed])
        torch.testing.assert_close(probs["focal γ⁻=2 (tuned)"][seed], torch.sigmoid(base[("focal", seed)].test_logits))
    assert not torch.equal(probs["focal γ⁻=2 (tuned) + TS/label"][0], probs["focal γ⁻=2 (tuned)"][0])


def test_per_label_ts_reads_spa_through_its_own_link_and_refuses_an_unknown_readout():
    logits = torch.linspace(-30.0, 30.0, 61).reshape(-1, 1)
    spa = SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0)
    torch.testing.assert_close(torch.sigmoid(mc.readout_logits(spa, logits)), spa.predict_proba(logits))
    assert torch.isfinite(mc.readout_logits(spa, logits)).all()
    with_lpr = Composite(SPA(1.0, 1.0, 0.0, 5.0, 3.0, 1.0), [(1.0, LPR())])
    torch.testing.assert_close(mc.readout_logits(with_lpr, logits), mc.readout_logits(spa, logits))
    assert torch.equal(mc.readout_logits(BCE(), logits), logits)
    with pytest.raises(ValueError, match="no logit read-out for LDACE"):
        mc.readout_logits(LDACE(), logits)


def test_the_phi_readouts_of_the_tuned_focal_rows_name_phi_before_the_value():
    data = fake_data()
    base = fake_runs(data)
    tuned = {("focal γ⁻=2 (tuned)", s): base[("focal", s)] for s in (0, 1)}
    tuned.update({("BCE+LPR λ=3 (tuned)", s): base[("BCE", s)] for s in (0, 1)})
    moved = [("focal", "focal γ⁻=2 (tuned)"), ("BCE+LPR", "BCE+LPR λ=3 (tuned)")]
    probs = mc.tuned_phi_probabilities(tuned, moved, [0, 1])
    assert list(probs) == ["focal+φ γ⁻=2 (tuned)"]
    assert mc.raw_readout("focal+φ γ⁻=2 (tuned)") == "focal γ⁻=2 (tuned)"
    expected = base[("focal", 0)].loss.recovered_proba(base[("focal", 0)].test_logits)
    torch.testing.assert_close(probs["focal+φ γ⁻=2 (tuned)"][0], expected)


def test_posthoc_rows_report_the_findings_whose_platt_map_reverses_the_ranking():
    """Notebook 11's per-label Platt row reversed one finding in one seed (slope −0.58, 3 calibration positives)
    without a word; with ``reversals=`` the fits that reverse a finding come back as records, else they warn."""
    data = fake_data()
    data.class_names = ["a", "b", "c"]
    runs = fake_runs(data)
    _, calibration = posthoc.split_calibration(100, seed=0)
    for seed in (0, 1):  # findings 0 and 1 follow their logits; finding 2 runs against it in seed 1 only
        sign = torch.tensor([1.0, 1.0, -1.0 if seed == 1 else 1.0])
        runs[("BCE", seed)].val_logits = 4.0 * sign * (data.val.labels - 0.5) + runs[("BCE", seed)].val_logits
    reversals = []
    rows, _ = mc.posthoc_probabilities(runs, data, "BCE", {"Platt": posthoc.PerLabelPlatt}, [0, 1], reversals=reversals)
    assert [(r["training seed"], r["finding"]) for r in reversals] == [(1, "c")]
    assert reversals[0]["slope"] < 0
    assert reversals[0]["calibration positives"] == int(data.val.labels[calibration, 2].sum())
    assert len(rows["Platt"]) == 2
    with pytest.warns(posthoc.RankingReversedWarning, match=r"labels \[2\]"):
        mc.posthoc_probabilities(runs, data, "BCE", {"Platt": posthoc.PerLabelPlatt}, [1])
