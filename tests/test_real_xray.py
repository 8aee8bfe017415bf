"""Notebook 13's real-X-ray section: the data folder check (skipped and said so, never a silent fall-back), the
section's run configuration, and its table of per-label and pooled calibration with paired intervals vs BCE."""

import functools
import math
import warnings
from types import SimpleNamespace

import pytest
import torch

from helpers import course, metrics
from helpers.course import suites, suites_multilabel
from helpers.lessons import multilabel_comparison, real_xray


def test_require_folder_names_the_missing_folder_and_how_to_fix_it(tmp_path):
    fetch = r"`python -m helpers\.data fetch chestxray14` says what to download and where to put it"
    with pytest.raises(real_xray.XrayDataMissing, match=rf"ChestXray14.*absent.*{fetch}.*ln -s.*skipped"):
        real_xray.require_folder("chestxray14", str(tmp_path))
    (tmp_path / "ChestXray14").mkdir()
    assert real_xray.require_folder("chestxray14", str(tmp_path)) == tmp_path / "ChestXray14"


def test_the_folder_follows_the_data_directory_environment_and_the_message_names_no_machine_folder(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CALIBMED_DATA_DIR", str(tmp_path))
    assert real_xray.folder("chestxray14") == tmp_path / "ChestXray14"
    with pytest.raises(real_xray.XrayDataMissing) as missing:
        real_xray.require_folder("chestxray14")
    assert "$CALIBMED_DATA_DIR/ChestXray14 is absent" in str(missing.value) and str(tmp_path) not in str(missing.value)


def test_an_unknown_dataset_is_refused():
    with pytest.raises(ValueError, match="chestxray14.*'chestmnist'"):
        real_xray.folder("chestmnist")


def notebook_13_config(tmp_path, profile="smoke"):
    profiles = course.notebook_profiles("13_multilabel_xrays_and_contest")
    return course.configure("13_multilabel_xrays_and_contest", profiles, profile=profile, data_dir=str(tmp_path))


def test_every_profile_of_notebook_13_declares_the_section_with_its_five_losses():
    profiles = course.notebook_profiles("13_multilabel_xrays_and_contest")
    for name, profile in profiles.items():
        assert profile["xray_dataset"] == "chestxray14", name
        assert profile["xray_losses"] == list(real_xray.XRAY_LOSSES), name
    assert profiles["reference"]["xray_seeds"] == [0, 1, 2, 3, 4]


def test_the_section_config_takes_the_xray_knobs_and_keeps_the_rest(tmp_path):
    cfg = notebook_13_config(tmp_path, "reference")
    xray = suites.xray_config(cfg)
    assert (xray.dataset, xray.image_size, xray.epochs, xray.max_train) == ("chestxray14", 28, 20, None)
    assert suites.seeds_of(xray) == [0, 1, 2, 3, 4]
    assert (xray.model, xray.lr, xray.batch_size) == (cfg.model, cfg.lr, cfg.batch_size)
    assert (cfg.dataset, cfg.max_train) == ("synthetic_chestmnist", None)  # the original untouched
    assert suites.seeds_of(cfg) == [0, 1, 2, 3, 4]  # the reference seeds (issue 28: five, as the X-rays')


def test_without_the_folder_the_runs_raise_and_the_declaration_warns_instead_of_training(tmp_path, monkeypatch):
    cfg = notebook_13_config(tmp_path)
    with pytest.raises(real_xray.XrayDataMissing):
        suites.xray_runs(cfg)
    declared = []
    contests = []
    monkeypatch.setattr(suites, "multilabel_runs", lambda cfg, bundle, losses: declared.append(bundle))
    monkeypatch.setattr(suites, "multilabel_contest", lambda cfg, bundle, split_seed=0: contests.append(bundle))
    monkeypatch.setattr(suites, "load_bundle", lambda cfg, name=None: name or cfg.dataset)
    with pytest.warns(UserWarning, match="real-X-ray runs are not declared.*ChestXray14"):
        suites.DECLARED_RUNS["13_multilabel_xrays_and_contest"](cfg)
    assert declared == ["synthetic_chestmnist"]  # the contest's paper rows; no X-ray bundle, no fall-back
    assert contests == ["synthetic_chestmnist"]  # the fair contest (helpers.lessons.tuning) on the coupled set only


def test_notebook_11_declares_both_variants_and_neither_the_contest_nor_the_xrays(tmp_path, monkeypatch):
    """Since the split (issue 28 item 7) the real X-rays and the contest are notebook 13's; 11 keeps its losses on
    the coupled and the independent set."""
    (tmp_path / "ChestXray14").mkdir()
    profiles = course.notebook_profiles("11_multilabel_comparison")
    assert not [knob for profile in profiles.values() for knob in profile if knob.startswith("xray_")]
    cfg = course.configure("11_multilabel_comparison", profiles, profile="smoke", data_dir=str(tmp_path))
    declared, contests = [], []
    for module in (suites, suites_multilabel):
        monkeypatch.setattr(module, "multilabel_runs", lambda cfg, bundle, losses: declared.append((bundle, losses)))
        monkeypatch.setattr(module, "load_bundle", lambda cfg, name=None: name or cfg.dataset)
    monkeypatch.setattr(suites, "multilabel_contest", lambda cfg, bundle, split_seed=0: contests.append(bundle))
    suites.DECLARED_RUNS["11_multilabel_comparison"](cfg)
    assert declared == [
        ("synthetic_chestmnist", cfg.losses),
        ("synthetic_chestmnist_independent", cfg.independent_losses),
    ]
    assert contests == []


def test_with_the_folder_the_declaration_loads_the_real_xrays(tmp_path, monkeypatch):
    (tmp_path / "ChestXray14").mkdir()
    cfg = notebook_13_config(tmp_path)
    declared = []
    for module in (suites, suites_multilabel):  # the declaration's names, and those of xray_runs
        monkeypatch.setattr(module, "multilabel_runs", lambda cfg, bundle, losses: declared.append((bundle, losses)))
        monkeypatch.setattr(module, "load_bundle", lambda cfg, name=None: name or cfg.dataset)
    monkeypatch.setattr(suites, "multilabel_contest", lambda cfg, bundle, split_seed=0: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        suites.DECLARED_RUNS["13_multilabel_xrays_and_contest"](cfg)
    assert declared[-1] == ("chestxray14", cfg.xray_losses)


def forecasts(seed, n=400, labels_count=4):
    """Labels drawn from known probabilities p: p itself is calibrated; p ** 0.4 is over-forecast."""
    generator = torch.Generator().manual_seed(seed)
    p = torch.rand(n, labels_count, generator=generator) * 0.5
    labels = (torch.rand(n, labels_count, generator=torch.Generator().manual_seed(99)) < p).float()
    return p, labels


def labelled_split(labels):
    return SimpleNamespace(test=SimpleNamespace(labels=labels), class_names=[f"l{t}" for t in range(labels.shape[1])])


def test_the_table_measures_every_read_out_and_flags_a_miscalibrated_one_worse_than_bce():
    p, labels = forecasts(0)
    probs = {"BCE": [p, p.clone()], "focal": [p**0.4, p**0.4]}
    result = real_xray.xray_table(probs, labelled_split(labels), n=200, seed=0)
    assert list(result.table.index) == ["BCE", "focal"]
    assert list(result.table.columns)[:4] == list(real_xray.HEADERS.values())
    pooled = result.record["models"]["focal"]["multilabel_ece"]
    assert pooled["mean"] == pytest.approx(metrics.multilabel_ece(p**0.4, labels))
    per_label = result.record["models"]["BCE"]["multilabel_ece_per_label"]["mean"]
    assert per_label == pytest.approx(metrics.multilabel_ece(p, labels, per_label=True))
    difference = result.record["differences_vs_bce"]["focal"]["multilabel_ece"]
    assert difference["low"] > 0.05  # p ** 0.4 forecasts far more positives than occur
    assert result.table.loc["focal", "Δ ECE pooled vs BCE (points)"].endswith("worse")
    assert result.table.loc["BCE", "Δ ECE pooled vs BCE (points)"] == ""
    assert "2 training seeds" in result.note and "n = 200" in result.note


def test_the_table_needs_bce_as_its_reference():
    p, labels = forecasts(0)
    with pytest.raises(ValueError, match="'BCE'"):
        real_xray.xray_table({"SPA": [p]}, labelled_split(labels), n=20, seed=0)


def test_test_probabilities_add_the_phi_read_outs_of_focal_and_asl():
    from helpers.lessons import multilabel_analysis as mla

    losses = mla.course_losses(["BCE", "focal"])
    logits = torch.linspace(-3, 3, 12).reshape(6, 2)
    runs = {(name, seed): SimpleNamespace(loss=losses[name], test_logits=logits) for name in losses for seed in (0, 1)}
    probs = multilabel_comparison.trained_probabilities(runs, ["BCE", "focal"], [0, 1])
    assert list(probs) == ["BCE", "focal", "focal+φ"] and all(len(v) == 2 for v in probs.values())
    assert torch.allclose(probs["BCE"][0], torch.sigmoid(logits))
    assert not torch.allclose(probs["focal+φ"][0], probs["focal"][0])


def test_run_facts_count_the_test_positives_of_each_label_and_the_line_names_them():
    from helpers.data import DatasetBundle, Split

    labels = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=torch.float32)
    split = Split(torch.zeros(3, 1, 4, 4, dtype=torch.uint8), labels)
    bundle = DatasetBundle(
        name="chestxray14",
        task="multi-label",
        class_names=["a", "b", "hernia"],
        train=Split(split.images[:2], labels[:2]),
        val=split,
        test=split,
        source="generated in the test",
        licence="none",
        image_size=4,
    )
    cfg = SimpleNamespace(xray_image_size=4, xray_epochs=2, xray_seeds=[0, 1])
    facts = real_xray.run_facts(bundle, cfg)
    assert facts["test_positives"] == {"a": 2, "b": 1, "hernia": 0}
    assert facts["split_sizes"] == {"train": 2, "val": 3, "test": 3}
    line = real_xray.facts_line(facts)
    assert "train / val / test 2 / 3 / 3" in line and line.endswith("a 2, b 1, hernia 0")


def test_probabilities_add_the_constant_prevalence_row_from_the_training_labels():
    from helpers.lessons import multilabel_analysis as mla

    train_labels = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    test_labels = torch.zeros(3, 2)
    bundle = SimpleNamespace(train=SimpleNamespace(labels=train_labels), test=SimpleNamespace(labels=test_labels))
    runs = {("BCE", 0): SimpleNamespace(loss=mla.course_losses(["BCE"])["BCE"], test_logits=torch.zeros(3, 2))}
    probs = real_xray.probabilities(runs, bundle, ["BCE"], [0])
    assert list(probs) == ["BCE", real_xray.CONSTANT]
    assert torch.equal(probs[real_xray.CONSTANT][0], torch.tensor([[0.75, 0.25]] * 3))


def test_macro_auroc_averages_the_labels_with_ten_test_positives_named_in_the_note():
    p, labels = forecasts(0)
    labels[:, 3] = 0  # like hernia in the shared sample's test split
    labels[:, 2] = 0
    labels[:4, 2] = 1  # 4 positives: like mass, out of the fixed set
    probs = {"BCE": [p], "focal": [p**0.4]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = real_xray.xray_table(probs, labelled_split(labels), n=50, seed=0)
    assert not [w for w in caught if "auroc" in str(w.message)]
    assert result.record["auroc_labels"] == ["l0", "l1"]
    assert "the 2 labels with at least 10 test positives (l0, l1)" in result.note
    expected = metrics.macro_auroc(p[:, :2], labels[:, :2])
    assert result.record["models"]["BCE"]["fixed_label_macro_auroc"]["mean"] == pytest.approx(expected)


def test_the_auroc_label_set_is_fixed_across_resamples():
    """A resample that leaves a chosen label without positives is NaN (degenerate), not a mean over fewer labels as
    metrics.macro_auroc's weighted form gives; a resample that keeps them averages exactly those labels."""
    from helpers.metrics import bootstrapping

    p, labels = forecasts(0, n=60, labels_count=3)
    columns = metrics.labels_with_positives(labels, 3)
    assert columns == [0, 1, 2]
    fixed = functools.partial(metrics.fixed_label_macro_auroc, columns=tuple(columns))
    evaluate = bootstrapping.weighted_evaluator(fixed, p, labels)
    free = bootstrapping.weighted_evaluator(metrics.macro_auroc, p, labels)
    weights = torch.ones(2, len(labels), dtype=torch.float64)
    weights[1, labels[:, 0] == 1] = 0  # resample 1 drops every positive of label 0
    fixed_values, free_values = evaluate(weights), free(weights)
    assert fixed_values[0].item() == pytest.approx(metrics.macro_auroc(p, labels))
    assert torch.isnan(fixed_values[1])
    kept = labels[:, 0] == 0
    assert free_values[1].item() == pytest.approx(metrics.macro_auroc(p[kept][:, 1:], labels[kept][:, 1:]))
    with pytest.warns(RuntimeWarning, match="single class"):
        assert math.isnan(fixed(p[labels[:, 0] == 0], labels[labels[:, 0] == 0]))


def test_other_warnings_still_pass_while_the_table_is_computed(monkeypatch):
    p, labels = forecasts(0)
    labels[:, 3] = 0

    def warning_metric(probs, labels):
        warnings.warn("something else went wrong", RuntimeWarning, stacklevel=2)
        return 0.0

    monkeypatch.setitem(real_xray.METRICS, "multilabel_ece", warning_metric)
    with pytest.warns(RuntimeWarning, match="something else went wrong"):
        real_xray.xray_table({"BCE": [p], "SPA": [p]}, labelled_split(labels), n=20, seed=0)


def test_without_a_label_of_ten_positives_the_table_refuses():
    p, labels = forecasts(0, n=30)
    with pytest.raises(ValueError, match="10 test positives"):
        real_xray.xray_table({"BCE": [p]}, labelled_split(labels[:, :1] * 0), n=20, seed=0)


def test_facts_line_names_the_data_set_and_the_seeds_in_words():
    facts = {
        "dataset": "chestxray14",
        "image_size": 28,
        "epochs": 20,
        "seeds": [0, 1, 2, 3, 4],
        "split_sizes": {"train": 725, "val": 94, "test": 181},
        "test_positives": {"atelectasis": 24, "hernia": 0},
    }
    line = real_xray.facts_line(facts)
    assert line.startswith("ChestX-ray14, 28 px, train / val / test 725 / 94 / 181, 20 epochs, seeds 0–4;")
    assert "[" not in line and "chestxray14" not in line
    assert "seeds 0, 2, 3;" in real_xray.facts_line({**facts, "seeds": [0, 2, 3]})
