"""helpers.metrics.stats: seed summaries (statistics.stdev), paired differences (= metrics.paired_bootstrap), and the
two tables: cell formats, the beats/worse flag in each metric's direction, and the note's count of comparisons."""

import functools
import statistics

import pandas as pd
import pytest
import torch

from helpers import metrics as M
from helpers.metrics import stats


def models(n=600, k=4, seeds=3):
    """A reference model, a better one (mixed with the one-hot labels) and a worse one (sharpened: same arg-max,
    over-confident)."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(k, (n,), generator=generator)
    onehot = torch.nn.functional.one_hot(labels, k).double()
    reference = [
        torch.softmax(1.5 * torch.randn(n, k, generator=generator, dtype=torch.float64) + onehot, 1)
        for _ in range(seeds)
    ]
    better = [0.7 * p + 0.3 * onehot for p in reference]
    worse = [torch.softmax(3.0 * p.log(), 1) for p in reference]
    return {"CE": reference, "better": better, "worse": worse}, labels


def test_seed_summary_is_mean_and_sample_sd():
    summary = stats.seed_summary([0.1, 0.2, 0.4])
    assert summary["per_seed"] == [0.1, 0.2, 0.4]
    assert summary["mean"] == pytest.approx(statistics.mean([0.1, 0.2, 0.4]), rel=1e-15)
    assert summary["sd"] == pytest.approx(statistics.stdev([0.1, 0.2, 0.4]), rel=1e-12)
    assert stats.seed_summary([torch.tensor(0.3, dtype=torch.float64)]) == {"per_seed": [0.3], "mean": 0.3, "sd": None}
    with pytest.raises(ValueError, match="at least one"):
        stats.seed_summary([])
    with pytest.raises(ValueError, match="not finite"):
        stats.seed_summary([0.1, float("nan")])


def test_seed_summaries_hold_each_seeds_metric():
    probs, labels = models()
    summaries = stats.seed_summaries(probs, labels, {"accuracy": M.accuracy, "ece": M.ece})
    assert list(summaries) == ["CE", "better", "worse"]
    assert summaries["worse"]["ece"]["per_seed"] == [M.ece(p, labels) for p in probs["worse"]]
    posteriors = torch.softmax(torch.zeros(600, 4, dtype=torch.float64), 1)
    true = stats.seed_summaries({"CE": probs["CE"]}, labels, {"true_rms": M.true_rms}, targets={"true_rms": posteriors})
    assert true["CE"]["true_rms"]["per_seed"] == [M.true_rms(p, posteriors) for p in probs["CE"]]


def test_paired_differences_are_paired_bootstraps_against_the_reference():
    probs, labels = models()
    differences = stats.paired_differences(
        probs, labels, {"nll": M.nll, "smooth_ece": M.smooth_ece}, "CE", n=50, seed=4, n_by_metric={"smooth_ece": 3}
    )
    assert list(differences) == ["better", "worse"]
    direct = M.paired_bootstrap(M.nll, probs["worse"], probs["CE"], labels, n=50, seed=4)
    assert torch.equal(differences["worse"]["nll"].samples, direct.samples)
    assert differences["better"]["smooth_ece"].samples.numel() == 3
    with pytest.raises(ValueError, match="reference model 'BCE'"):
        stats.paired_differences(probs, labels, {"nll": M.nll}, "BCE")


def test_tables_name_their_columns_in_words_when_given_labels():
    """Issue 16 item 6: a notebook table shows "mAP@y (%)", not the metric key "map_per_class (%)"."""
    summaries = {"BCE": {"map_per_class": [0.31, 0.33], "multilabel_brier": [0.0343, 0.0345]}}
    table = stats.summary_table(summaries, labels=stats.METRIC_LABELS)
    assert list(table.columns) == ["mAP@y (%)", "Brier"]
    assert table.loc["BCE", "mAP@y (%)"] == "32.0 ± 1.4"
    assert not [label for label in stats.METRIC_LABELS.values() if "_" in label]  # words, not keys
    result = M.PairedBootstrapResult(0.01, -0.02, 0.03, 0.95, torch.zeros(4), 2, 2)
    deltas = stats.difference_table({"SPA": {"map_per_class": result}}, "BCE", labels=stats.METRIC_LABELS).table
    assert list(deltas.columns) == ["mAP@y (%)"]
    with pytest.raises(ValueError, match="no label for metric"):
        stats.summary_table(summaries, labels={"map_per_class": "mAP@y"})


def test_summary_table_cells_and_headers():
    summaries = {
        "CE": {"ece": stats.seed_summary([0.05, 0.07]), "nll": [0.61, 0.65, 0.60]},
        "Bayes": {"ece": [0.012], "nll": [0.5]},
    }
    table = stats.summary_table(summaries)
    assert isinstance(table, pd.DataFrame) and list(table.columns) == ["ece (%)", "nll"]
    assert table.loc["CE", "ece (%)"] == f"6.0 ± {100 * statistics.stdev([0.05, 0.07]):.1f}"
    assert table.loc["CE", "nll"] == f"0.620 ± {statistics.stdev([0.61, 0.65, 0.60]):.3f}"
    assert table.loc["Bayes", "ece (%)"] == "1.2" and table.loc["Bayes", "nll"] == "0.500"
    custom = stats.summary_table(summaries, columns=["nll"], scale={"nll": 10.0}, digits={"nll": 2})
    assert custom.loc["Bayes", "nll"] == "5.00"
    with pytest.raises(KeyError, match="no value for metric 'brier'"):
        stats.summary_table(summaries, columns=["brier"])


def test_difference_table_flags_in_each_metrics_direction_and_counts_comparisons():
    probs, labels = models()
    fns = {"accuracy": M.accuracy, "brier": M.brier, "nll": M.nll}
    differences = stats.paired_differences(probs, labels, fns, "CE", n=200)
    result = stats.difference_table(differences, "CE")
    table = result.table
    assert list(table.index) == ["better", "worse"] and table.index.name == "vs CE"
    # mixing in the labels lowers Brier and NLL (Δ < 0) and raises accuracy (Δ > 0): better in all three directions
    assert table.loc["better", "brier"].endswith(" beats") and table.loc["better", "nll"].endswith(" beats")
    assert differences["better"]["brier"].high < 0
    assert table.loc["better", "accuracy (%)"].endswith(" beats") and differences["better"]["accuracy"].low > 0
    # sharpening raises Brier (worse, Δ > 0) and keeps every arg-max (Δ = 0, no flag)
    assert table.loc["worse", "brier"].endswith(" worse") and differences["worse"]["brier"].low > 0
    assert table.loc["worse", "accuracy (%)"] == "+0.0 [+0.0, +0.0]"
    brier = differences["better"]["brier"]
    assert table.loc["better", "brier"] == (f"{brier.estimate:+.3f} [{brier.low:+.3f}, {brier.high:+.3f}] beats")
    assert result.n_comparisons == 6
    n_flagged = sum(cell.endswith(("beats", "worse")) for cell in table.to_numpy().ravel())
    assert f"{n_flagged} of 6 comparisons" in result.note and "n = 200 resamples" in result.note
    assert "about 0.3 would exclude 0 by chance" in result.note


def test_difference_table_reports_degenerate_resamples_and_needs_a_direction():
    probs, labels = models(n=80)
    labels = labels.clone()
    labels[labels == 3] = 0
    labels[5] = 3  # one image of class 3: a third of the resamples miss it
    recall = functools.partial(M.class_recall, class_index=3)
    differences = stats.paired_differences(
        {"CE": probs["CE"], "worse": probs["worse"]}, labels, {"rare_recall": recall}, "CE", n=60
    )
    with pytest.raises(ValueError, match="no direction known for metric\\(s\\) \\['rare_recall'\\]"):
        stats.difference_table(differences, "CE")
    result = stats.difference_table(differences, "CE", higher_is_better={"rare_recall": True})
    n_degenerate = differences["worse"]["rare_recall"].n_degenerate
    assert n_degenerate > 0 and f"worse/rare_recall {n_degenerate}" in result.note


def test_difference_record_is_json_ready():
    probs, labels = models(n=100, seeds=2)
    result = M.paired_bootstrap(M.ece, probs["better"], probs["CE"], labels, n=20)
    record = stats.difference_record(result)
    assert record == {
        "estimate": result.estimate,
        "low": result.low,
        "high": result.high,
        "level": 0.95,
        "n_resamples": 20,
        "n_degenerate": 0,
    }
    assert all(isinstance(v, (int, float)) for v in record.values())


def test_the_debiased_ece_is_a_point_estimate_only_in_every_difference_helper():
    """Issue 16: the debiased ECE's n_b − 1 correction assumes distinct samples and a bootstrap resample repeats
    images, so no helper gives it an interval (01, 04, 05 and 06 printed intervals excluding their own estimate)."""
    import math

    assert "debiased_ece" in stats.POINT_ESTIMATE_ONLY
    probs, labels = models(n=300, seeds=2)
    fns = {"debiased_ece": M.debiased_ece, "ece": M.ece, "dECE, 5 bins": functools.partial(M.debiased_ece, n_bins=5)}
    differences = stats.paired_differences(probs, labels, fns, "CE", n=30, seed=1)
    pairs = [("better", "CE"), ("worse", "CE")]
    compared = stats.paired_comparisons(probs, labels, fns, pairs, n=30, seed=1)
    for model, reference in pairs:
        for name in ("debiased_ece", "dECE, 5 bins"):
            fn = fns[name]
            expected = statistics.fmean(fn(p, labels) for p in probs[model]) - statistics.fmean(
                fn(p, labels) for p in probs[reference]
            )
            for result in (differences[model][name], compared[(model, reference)][name]):
                assert result.estimate == pytest.approx(expected, abs=1e-12)
                assert math.isnan(result.low) and math.isnan(result.high) and result.samples.numel() == 0
                assert not result.excludes_zero and not stats.has_interval(result)
        assert stats.has_interval(differences[model]["ece"]) and differences[model]["ece"].samples.numel() == 30
    result = stats.difference_table(
        differences,
        "CE",
        higher_is_better={"dECE, 5 bins": False},
        labels={**stats.METRIC_LABELS, "dECE, 5 bins": "dECE"},
    )
    estimate = differences["worse"]["debiased_ece"].estimate
    assert result.table.loc["worse", "debiased ECE (%)"] == f"{100 * estimate:+.1f}"  # no brackets, no verdict
    assert result.n_comparisons == 2  # the ECE intervals only
    assert "of 2 comparisons" in result.note and "debiased ECE (%), dECE: point estimate only" in result.note
    record = stats.difference_record(differences["worse"]["debiased_ece"])
    assert record["low"] is None and record["high"] is None and record["n_resamples"] == 0
    assert record["estimate"] == estimate


def test_per_seed_table_lists_each_seed_with_the_summary_tables_format():
    summaries = {
        "CE": {"ece": stats.seed_summary([0.019, 0.016, 0.015]), "nll": [0.623, 0.619, 0.621]},
        "prior": {"ece": [0.001], "nll": [1.133]},
    }
    table = stats.per_seed_table(summaries, ["ece", "nll"], [0, 1, 2], labels=stats.METRIC_LABELS)
    assert list(table.columns) == ["ECE (%)", "NLL"] and list(table.index) == [("CE", 0), ("CE", 1), ("CE", 2)]
    assert table.loc[("CE", 1), "ECE (%)"] == "1.6" and table.loc[("CE", 2), "NLL"] == "0.621"
    with pytest.raises(ValueError, match="no model has one value per seed"):
        stats.per_seed_table({"prior": summaries["prior"]}, ["ece"], [0, 1, 2])


def test_median_seed_is_the_typical_seed():
    assert stats.median_seed([0.063, 0.141, 0.129]) == 2  # 02's focal loss: seed 0 is the unusual one
    assert stats.median_seed([0.3, 0.1, 0.2, 0.4]) == 2  # lower median of an even count
    assert stats.median_seed([0.5]) == 0
    with pytest.raises(ValueError):
        stats.median_seed([])
