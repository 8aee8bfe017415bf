"""The committed results of notebook 06 (results/reference/06_multiclass_comparison.json) keep the schema of
issue 8: top-level profile, dataset, n_train, seeds and models["<recipe>/<loss>"][metric] = {per_seed, mean, sd}
for every recipe × loss (and its "+ TS" row), three seeds, mean and sd equal to those of per_seed."""

import json
import math
import statistics

import pytest

from helpers import course
from helpers.course import suites

PATH = course.REPO_ROOT / "results" / "reference" / "06_multiclass_comparison.json"
RECIPES = ("well-regularised", "over-fitting")
METRICS = (
    "accuracy",
    "auroc_ovr",
    "macro_f1",
    "cohen_kappa",
    "ece",
    "smooth_ece",
    "adaptive_ece",
    "classwise_ece",
    "nll",
    "brier",
    "melanoma_recall",
    "debiased_ece",
)


@pytest.fixture(scope="module")
def payload():
    assert PATH.is_file(), f"{PATH.name} is not committed: run notebook 06 in the reference profile and publish it"
    return json.loads(PATH.read_text())


@pytest.fixture(scope="module")
def loss_names():
    cfg = suites.reference_config("06_multiclass_comparison")
    return [suites.multiclass_loss_name(name, cfg) for name in suites.MULTICLASS_LOSSES]


def test_top_level_describes_the_reference_run(payload):
    assert payload["profile"] == "reference" and payload["dataset"] == "dermamnist"
    assert payload["n_train"] == 7007 and payload["seeds"] == [0, 1, 2, 3, 4]
    assert payload["results"]["models"] == payload["models"]


def test_every_recipe_and_loss_with_and_without_ts(payload, loss_names):
    assert loss_names[0] == "cross-entropy"
    expected = {f"{recipe}/{loss}{suffix}" for recipe in RECIPES for loss in loss_names for suffix in ("", " + TS")}
    missing = sorted(expected - set(payload["models"]))
    assert not missing, f"models missing from the results: {missing}"
    for recipe in RECIPES:  # the other post-hoc rows of cross-entropy
        for name in ("vector scaling", "matrix scaling (ODIR)", "isotonic"):
            assert f"{recipe}/cross-entropy + {name}" in payload["models"]


#: training seeds per recipe in 06's reference profile (issue 26: five where a verdict rests; the over-fitting
#: recipe's wide CNN keeps three)
SEEDS_PER_RECIPE = {"well-regularised": 5, "over-fitting": 3}


def test_every_cell_holds_its_recipes_seeds_and_their_mean_and_sd(payload):
    for model, cells in payload["models"].items():
        n_seeds = SEEDS_PER_RECIPE[model.split("/")[0]]
        assert set(METRICS) <= set(cells), f"{model} lacks {sorted(set(METRICS) - set(cells))}"
        for metric, cell in cells.items():
            values = cell["per_seed"]
            assert len(values) == n_seeds and all(math.isfinite(v) for v in values), (model, metric, values)
            assert cell["mean"] == pytest.approx(statistics.fmean(values), abs=1e-12), (model, metric)
            assert cell["sd"] == pytest.approx(statistics.stdev(values), abs=1e-12), (model, metric)


def test_paired_differences_against_ce_and_ce_ts(payload, loss_names):
    differences = payload["paired_differences"]
    for recipe in RECIPES:
        for loss in loss_names[1:]:
            for reference in ("cross-entropy", "cross-entropy + TS"):
                record = differences[f"{recipe}/{loss} − {recipe}/{reference}"]["ece"]
                assert record["n_resamples"] >= 1000 and record["low"] <= record["high"]
                # the estimate is the difference of the seed means in the models block
                means = (
                    payload["models"][f"{recipe}/{loss}"]["ece"]["mean"]
                    - payload["models"][f"{recipe}/{reference}"]["ece"]["mean"]
                )
                assert record["estimate"] == pytest.approx(means, abs=1e-9)


def test_the_fair_contest_chose_by_the_selection_nll_and_kept_every_seed(payload):
    """Issue 20 item 4: every tuned loss's grid, the choice the lowest selection NLL (a tie keeps the paper
    value), the tuned rows with every seed (five), and an answer row against CE + TS for the paper and the tuned
    value."""
    from helpers.lessons import tuning

    contest = payload["results"]["fair_contest"]
    assert contest["recipe"] == tuning.TUNING_RECIPE and contest["tuning_seed"] == 0
    assert set(contest["choices"]) == set(tuning.MULTICLASS_GRIDS)
    for loss, grid in tuning.MULTICLASS_GRIDS.items():
        rows = [row for row in contest["grid"] if row["loss"] == loss]
        assert len(rows) == len(grid.values)
        scores = {value: row["selection NLL"] for value, row in zip(grid.values, rows)}
        assert contest["choices"][loss] == tuning.choose(scores, grid.default)
        tuned = tuning.tuned_label(loss, grid, contest["choices"][loss])
        assert len(contest["models"][f"{tuning.TUNING_RECIPE}/{tuned}"]["ece"]["per_seed"]) == 5
        moved = contest["choices"][loss] != grid.default  # a kept value shows the paper row only
        assert (tuned in contest["answer"]["answer"][tuning.TUNING_RECIPE]) == moved
