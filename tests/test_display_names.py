"""The course's one table of display names (issue 28, item 4): every key the code prints has words, an unknown key
is a clear error, and the printouts of data sets and sites use the table."""

import pytest

from helpers.data import catalogue, isic2018
from helpers.training import models, recipes
from helpers.utils import DISPLAY_NAMES, display_name


def test_display_names_give_words_for_data_sets_sites_recipes_and_models():
    assert display_name("dataset", "dermamnist") == "DermaMNIST"
    assert display_name("dataset", "synthetic_chestmnist") == "synthetic chest X-rays (coupled labels)"
    assert display_name("site", "vidir_molemax") == "Vienna, MoleMax camera"
    assert display_name("recipe", "over-fitting") == "over-fitting"
    assert display_name("model", "resnet18") == "ResNet-18"


def test_every_site_recipe_and_model_of_the_code_has_words_and_no_word_is_a_code_name():
    derived = {f"isic2018{suffix}" for suffix in ("_heldout", "_sites")}  # helpers.data.isic2018_bundle's splits
    assert set(DISPLAY_NAMES["dataset"]) == set(catalogue.DATASET_NAMES) | derived
    assert set(DISPLAY_NAMES["site"]) == set(isic2018.SITES)
    assert set(DISPLAY_NAMES["recipe"]) == set(recipes.RECIPES)
    assert set(DISPLAY_NAMES["model"]) == set(models.MODEL_NAMES)
    for names in DISPLAY_NAMES.values():
        assert not any("_" in words for words in names.values())


def test_an_unknown_kind_or_key_is_a_clear_error():
    with pytest.raises(KeyError, match="no display name for the dataset 'dermamnst'.*known dataset keys: dermamnist"):
        display_name("dataset", "dermamnst")
    with pytest.raises(
        KeyError, match="no display names of kind 'loss'; kinds: dataset, site, recipe, model, class_short"
    ):
        display_name("loss", "BCE")


def test_short_class_names_are_one_word_per_dermamnist_class_and_nevi_for_melanocytic_nevi():
    """04 and 05 built the short class names of their tables inline, three times ("the first word, but nevi")."""
    from medmnist import INFO

    from helpers.utils import short_class_names

    full = list(INFO["dermamnist"]["label"].values())
    short = short_class_names(full)
    assert short == ["actinic", "basal", "benign", "dermatofibroma", "melanoma", "nevi", "vascular"]
    assert len(set(short)) == len(full)
    # another data set's classes (the course runs on any MedMNIST multi-class set) keep their names, words already
    assert short_class_names(["normal", "pneumonia"]) == ["normal", "pneumonia"]
