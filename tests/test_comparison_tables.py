"""helpers.lessons.comparison_tables: the model tables of notebooks 04 and 05 (human column names, the same numbers as
helpers.metrics.stats, no bootstrap interval for the debiased ECE) and the temperature-scaled rows."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from helpers import metrics as M
from helpers.calibration import TemperatureScaling
from helpers.course import output_rules
from helpers.lessons import comparison_tables as C
from helpers.metrics import stats


def models(n=400, k=4, seeds=2):
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(k, (n,), generator=generator)
    onehot = torch.nn.functional.one_hot(labels, k).double()
    reference = [
        torch.softmax(torch.randn(n, k, generator=generator, dtype=torch.float64) + onehot, 1) for _ in range(seeds)
    ]
    return {"CE": reference, "smoothed": [0.8 * p + 0.05 for p in reference]}, labels


def test_mean_confidence_is_the_mean_top_label_probability():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.4, 0.5, 0.1]])
    assert C.mean_confidence(probs, None) == pytest.approx(0.6)


def test_summary_tables_name_every_column_in_words_and_keep_the_numbers():
    by_model, labels = models()
    groups = [{"accuracy": M.accuracy, "auroc_ovr": M.auroc_ovr}, {"mean_confidence": C.mean_confidence, "ece": M.ece}]
    summaries, tables = C.summary_tables(by_model, labels, groups, scale={"mean_confidence": 100})
    assert summaries == stats.seed_summaries(by_model, labels, {**groups[0], **groups[1]})
    assert list(tables[0].columns) == ["accuracy (%)", "AUROC (%)"]
    assert list(tables[1].columns) == ["mean confidence (%)", "ECE (%)"]
    for table in tables:
        assert not any(output_rules.RAW_KEY.match(column) for column in table.columns)


def test_difference_tables_match_stats_and_count_the_intervals():
    by_model, labels = models()
    groups = [{"ece": M.ece, "nll": M.nll}, {"accuracy": M.accuracy}]
    differences, tables, count = C.difference_tables(by_model, labels, "CE", groups, n=50, seed=0)
    expected = stats.paired_differences(by_model, labels, {**groups[0], **groups[1]}, reference="CE", n=50, seed=0)
    assert differences["smoothed"]["ece"].estimate == expected["smoothed"]["ece"].estimate
    assert differences["smoothed"]["ece"].low == expected["smoothed"]["ece"].low
    assert count == 3 and [list(t.columns) for t in tables] == [["ECE (%)", "NLL"], ["accuracy (%)"]]


def test_the_debiased_ece_gets_no_bootstrap_interval():
    by_model, labels = models()
    groups = [{"ece": M.ece, "debiased_ece": M.debiased_ece}]
    _, tables, count = C.difference_tables(by_model, labels, "CE", groups, n=20, seed=0)
    assert "debiased_ece" in stats.POINT_ESTIMATE_ONLY
    assert count == 1  # the ECE's interval only
    assert "[" not in tables[0].loc["smoothed", "debiased ECE (%)"] and "[" in tables[0].loc["smoothed", "ECE (%)"]


def test_temperature_scaled_fits_one_temperature_per_run_on_the_calibration_half():
    generator = torch.Generator().manual_seed(1)
    val_labels = torch.randint(3, (200,), generator=generator)
    onehot = torch.nn.functional.one_hot(val_labels, 3).double()
    runs = [
        SimpleNamespace(
            # informative but over-confident logits: the fitted temperature is above 1
            val_logits=3 * (torch.randn(200, 3, generator=generator, dtype=torch.float64) + 2 * onehot),
            test_logits=torch.randn(50, 3, generator=generator, dtype=torch.float64),
        )
        for _ in range(2)
    ]
    index = torch.arange(0, 200, 2)
    scaled, temperatures = C.temperature_scaled(runs, val_labels, index)
    for run, probs, temperature in zip(runs, scaled, temperatures):
        ts = TemperatureScaling().fit(run.val_logits[index], val_labels[index])
        assert temperature == pytest.approx(ts.temperature)
        assert torch.allclose(probs, ts.transform(run.test_logits))
        assert temperature > 1
        assert torch.equal(probs.argmax(1), run.test_logits.argmax(1))  # a temperature keeps every arg-max


def test_interval_note_names_the_level_and_the_resamples():
    note = C.interval_note(1000)
    assert "95 % paired bootstrap intervals" in note and "1000 resamples" in note
    assert len(note) < 2 * output_rules.MAX_LINE


def test_column_groups_cut_a_wide_table_into_consecutive_groups_keeping_every_row():
    table = pd.DataFrame([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], index=["a", "b"], columns=list("vwxyz"))
    first, second = C.column_groups(table)
    assert list(first.columns) == ["v", "w", "x"] and list(second.columns) == ["y", "z"]
    assert list(first.index) == list(second.index) == ["a", "b"]
    pd.testing.assert_frame_equal(pd.concat([first, second], axis=1), table)
    assert [list(g.columns) for g in C.column_groups(table, 3)] == [["v", "w"], ["x", "y"], ["z"]]


@pytest.mark.parametrize("parts", [0, 6, 1.5])
def test_column_groups_refuse_a_count_of_groups_the_table_cannot_have(parts):
    table = pd.DataFrame([[1, 2, 3, 4, 5]], columns=list("vwxyz"))
    with pytest.raises(ValueError, match="group"):
        C.column_groups(table, parts)
