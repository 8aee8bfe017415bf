"""The two training recipes of the course, and the selector that narrows a retrain to some of them.

Calibration losses correct over-confidence; applied to a model that is already calibrated they can over-correct.
Every comparison therefore runs under two recipes, defined here once (:data:`RECIPES`):

* ``well-regularised`` — SGD with momentum, one-cycle schedule, weight decay 5e-4, batched flips/shifts/rotations;
  the epoch with the best validation NLL is kept.
* ``over-fitting`` — no weight decay, no augmentation, a constant learning rate, and the *last* epoch is kept: the
  regime of the papers' long fine-tuning of large networks, where cross-entropy is over-confident. Its optimiser,
  rate and model width were chosen from cross-entropy runs alone, before any other loss was trained (see
  :data:`RECIPES` and notebook 01).

``CALIBMED_RETRAIN_ONLY`` (:data:`RETRAIN_ONLY_ENV`) narrows a retrain of the stored runs
(:func:`retrain_selected`): ``"recipe=well-regularised dataset=dermamnist"`` retrains only the older runs of that
recipe on that data set (:func:`helpers.training.train_run`).
"""

from __future__ import annotations

import os
from typing import Any

from helpers.losses.base import check_number
from helpers.training.config import TrainConfig

__all__ = [
    "RECIPES",
    "recipe_config",
    "RECIPE_MODELS",
    "recipe_model",
    "RETRAIN_ONLY_ENV",
    "parse_retrain_selector",
    "config_recipe",
    "retrain_selected",
]

RECIPES: dict[str, dict[str, Any]] = {
    "well-regularised": dict(
        optimizer="sgd",
        momentum=0.9,
        weight_decay=5e-4,
        schedule="onecycle",
        augment=True,
        monitor="val_nll",
        monitor_mode="min",
        lr_scale=1.0,
    ),
    "over-fitting": dict(
        optimizer="sgd",
        momentum=0.9,
        weight_decay=0.0,
        schedule="constant",
        augment=False,
        monitor="epoch",
        monitor_mode="max",
        lr_scale=0.5,
    ),
}


def recipe_config(
    recipe: str, *, epochs: int, lr: float, batch_size: int, seed: int = 0, device: str = "auto", **overrides: Any
) -> TrainConfig:
    """The :class:`~helpers.training.TrainConfig` of a named recipe; ``lr`` is the recipe's peak rate before scaling
    (a finite number > 0: ``True`` and text such as ``"0.1"`` are refused before the recipe scales it)."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {list(RECIPES)}")
    check_number("lr", lr, 0.0, low_open=True, why="the recipe's peak learning rate before its scale")
    settings = dict(RECIPES[recipe])
    lr_scale = settings.pop("lr_scale")
    settings.update(overrides)
    return TrainConfig(epochs=epochs, lr=lr * lr_scale, batch_size=batch_size, seed=seed, device=device, **settings)


RECIPE_MODELS: dict[str, dict[str, str]] = {"over-fitting": {"small_cnn": "small_cnn_wide"}}


def recipe_model(recipe: str, model: str) -> str:
    """The model a recipe trains: the over-fitting recipe widens the small CNN (4x the parameters) so that it can
    memorise DermaMNIST; larger models are kept."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {list(RECIPES)}")
    return RECIPE_MODELS.get(recipe, {}).get(model, model)


RETRAIN_ONLY_ENV = "CALIBMED_RETRAIN_ONLY"
_SELECTOR_KEYS = ("recipe", "dataset", "model")
_NOT_RECIPE = ("lr_scale", "augment")


def parse_retrain_selector(text: str) -> dict[str, set[str]]:
    """``"recipe=well-regularised dataset=dermamnist dataset=isic2018_heldout"`` → ``{key: allowed values}``.
    Terms are separated by spaces (or commas); a run is selected when every named key matches one of its values."""
    selector: dict[str, set[str]] = {}
    for term in text.replace(",", " ").split():
        key, sep, value = term.partition("=")
        if not sep or key not in _SELECTOR_KEYS or not value:
            raise ValueError(
                f"{RETRAIN_ONLY_ENV}: {term!r} is not a selector term; write key=value with key one of "
                f"{_SELECTOR_KEYS}, e.g. 'recipe=well-regularised dataset=dermamnist'"
            )
        if key == "recipe" and value not in RECIPES:
            raise ValueError(f"{RETRAIN_ONLY_ENV}: unknown recipe {value!r}; choose one of {list(RECIPES)}")
        selector.setdefault(key, set()).add(value)
    return selector


def config_recipe(config: TrainConfig) -> str | None:
    """The recipe whose settings ``config`` has (:data:`RECIPES`), or ``None`` for a configuration of its own.
    Augmentation is a data set's choice (the synthetic multi-label sets train the well-regularised recipe without
    it), so it does not decide the recipe."""
    for recipe, settings in RECIPES.items():
        if all(getattr(config, name) == value for name, value in settings.items() if name not in _NOT_RECIPE):
            return recipe
    return None


def retrain_selected(bundle: Any, model_name: str, config: TrainConfig) -> bool:
    """Whether ``CALIBMED_RETRAIN_ONLY`` (unset: everything) selects this run for retraining."""
    selector = parse_retrain_selector(os.environ.get(RETRAIN_ONLY_ENV, ""))
    values = {"recipe": config_recipe(config), "dataset": bundle.name, "model": model_name}
    return all(values[key] in allowed for key, allowed in selector.items())
