"""The committed results of notebook 12 (results/reference/12_dataset_shift.json), in the schema of issue 20:
top-level ``profile``, ``seeds`` and ``models``: "<recipe>/<model>" → test set → metric → per-seed values, mean
and sd."""

import json
import math
import statistics

import pytest

from helpers.course import suites
from helpers.utils import REPO_ROOT

RESULTS = REPO_ROOT / "results" / "reference" / "12_dataset_shift.json"
TEST_SETS = {"in_distribution", "isic2018_test", "vienna_to_rosendahl"}
METRICS = {"accuracy", "auroc_ovr", "ece", "classwise_ece", "nll", "brier"}


@pytest.fixture(scope="module")
def payload():
    assert RESULTS.is_file(), f"{RESULTS.relative_to(REPO_ROOT)} is missing: publish the reference run of notebook 12"
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_top_level_names_the_profile_the_seeds_and_the_models(payload):
    assert payload["profile"] == "reference"
    assert payload["seeds"] == [0, 1, 2, 3, 4]
    assert payload["models"] == payload["results"]["models"]


def test_every_model_is_recipe_slash_model_with_test_sets_and_metrics(payload):
    models = payload["models"]
    for key, by_set in models.items():
        recipe, _, model = key.partition("/")
        assert recipe in suites.RECIPE_NAMES and model, key
        assert set(by_set) <= TEST_SETS and by_set, key
        for name, by_metric in by_set.items():
            assert set(by_metric) == METRICS, (key, name)
            for metric, summary in by_metric.items():
                assert len(summary["per_seed"]) == 5, (key, name, metric)
                assert math.isclose(summary["mean"], statistics.fmean(summary["per_seed"]), rel_tol=1e-9)
                assert math.isclose(summary["sd"], statistics.stdev(summary["per_seed"]), rel_tol=1e-9)


def test_the_questions_models_are_all_there(payload):
    models = payload["models"]
    recipes = {key.partition("/")[0] for key in models}
    assert "well-regularised" in recipes
    for recipe in recipes:
        for suffix in ("", " + TS", " + TS + prior (EM)", " + TS fitted on the test set"):
            assert set(models[f"{recipe}/cross-entropy{suffix}"]) == TEST_SETS, (recipe, suffix)
        for loss in ("LS α=0.1", "focal γ=3", "MbLS m=10"):
            assert set(models[f"{recipe}/{loss} + TS"]) == {"in_distribution", "isic2018_test"}
