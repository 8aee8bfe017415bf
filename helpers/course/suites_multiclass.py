"""The multi-class run suites: the comparison of notebooks 01–06 (every recipe, loss and seed), the sweeps of
notebooks 03 and 05, notebook 06's fair contest and notebook 12's runs under dataset shift.

LS+ needs a cross-entropy run's per-class validation accuracy (LS+ Algorithm 1, line 2), so the cross-entropy run of
the same recipe and seed is always loaded (or trained) first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from helpers import data
from helpers.course.suites_common import (
    load_bundle,
    run_contest,
    seeds_of,
    selection_seeds,
    summarised,
    train_or_load,
)
from helpers.lessons import tuning
from helpers.losses import (
    DCA,
    FLSD53,
    MDCA,
    CrossEntropy,
    FocalLoss,
    LabelSmoothing,
    LSPlus,
    MbLS,
    class_accuracy_from_predictions,
    class_frequencies,
)
from helpers.training import models, run_store
from helpers.training import recipes as training_recipes

RECIPE_NAMES = tuple(training_recipes.RECIPES)
#: the multi-class losses of notebooks 02–06, in table order; display names carry their hyper-parameters
MULTICLASS_LOSSES = ("cross-entropy", "LS", "focal", "FLSD-53", "MbLS", "LS+", "CCL-Net", "DCA", "MDCA")


def recipe_epochs(cfg: Any, recipe: str) -> int:
    return cfg.epochs if recipe == "well-regularised" else cfg.overfit_epochs


def recipe_model(cfg: Any, recipe: str) -> str:
    """The model a recipe trains in this configuration: :func:`helpers.training.recipe_model`, unless the
    configuration's ``overfit_model`` knob names the over-fitting recipe's model. The ``quick`` profile keeps the
    small CNN there: on its 1,000 training images cross-entropy becomes over-confident without widening it (test
    ECE 8.0 % against 2.3 % for the well-regularised recipe, notebook 01) at a third of the wide CNN's cost per
    run (``bench/bench_quick_overfit.py``)."""
    override = cfg.extra.get("overfit_model") if hasattr(cfg, "extra") else None
    if recipe != "over-fitting" or override is None:
        return training_recipes.recipe_model(recipe, cfg.model)
    if override not in models.MODEL_NAMES:
        raise ValueError(f"overfit_model must be one of {models.MODEL_NAMES}, got {override!r}")
    return override


def _recipe_config(cfg: Any, recipe: str, seed: int, **overrides: Any):
    return training_recipes.recipe_config(
        recipe,
        epochs=recipe_epochs(cfg, recipe),
        lr=cfg.lr,
        batch_size=cfg.batch_size,
        seed=seed,
        device=cfg.device,
        **overrides,
    )


# ----------------------------------------------------------------------------------------------------------------
# multi-class (notebooks 01–06)


def multiclass_loss_name(name: str, cfg: Any) -> str:
    """The display name of a course loss, with its hyper-parameters (``"focal γ=3"``)."""
    labels = {
        "LS": f"LS α={cfg.extra.get('alpha', 0):g}",
        "focal": f"focal γ={cfg.extra.get('gamma', 0):g}",
        "MbLS": f"MbLS m={cfg.extra.get('margin', 0):g}",
        "DCA": f"DCA β={cfg.extra.get('dca_beta', 0):g}",
        "MDCA": f"MDCA β={cfg.extra.get('mdca_beta', 0):g}",
    }
    return labels.get(name, name)


def _make_multiclass_loss(
    name: str, cfg: Any, bundle: Any, model: str, lsplus_accuracy: torch.Tensor | None, seed: int
) -> nn.Module:
    if name == "cross-entropy":
        return CrossEntropy()
    if name == "LS":
        return LabelSmoothing(cfg.alpha)
    if name == "focal":
        return FocalLoss(cfg.gamma)
    if name == "FLSD-53":
        return FLSD53()
    if name == "MbLS":
        return MbLS(margin=cfg.margin, lam=cfg.mbls_lambda)
    if name == "LS+":
        return LSPlus(lsplus_accuracy, alpha=cfg.lsplus_alpha)
    if name == "CCL-Net":
        return _ccl_loss(cfg, bundle, model, cfg.lr_ccl, seed)
    if name == "DCA":
        return DCA(beta=cfg.dca_beta)
    if name == "MDCA":
        return MDCA(beta=cfg.mdca_beta)
    raise ValueError(f"unknown multi-class loss {name!r}; choose from {MULTICLASS_LOSSES}")


def _ccl_loss(cfg: Any, bundle: Any, model: str, lr_ccl: float, seed: int) -> nn.Module:
    from helpers.losses import CCLNetLoss

    feature_dim = models.build_model(
        model, bundle.n_channels, bundle.n_classes, image_size=bundle.image_size
    ).feature_dim
    torch.manual_seed(seed)  # the head's initialisation is part of the run (and of its key)
    b = cfg.extra.get("ccl_b", tuning.MULTICLASS_GRIDS["CCL-Net"].default)  # the embedding distance (eq. 2)
    return CCLNetLoss(feature_dim, bundle.n_classes, lr_ccl=lr_ccl, b=b, optimizer=cfg.ccl_optimizer)


RunKey = tuple[str, str, int]  # (recipe, loss display name, seed)


@summarised
def multiclass_runs(
    cfg: Any, bundle: Any, losses: Iterable[str] = MULTICLASS_LOSSES, recipes: Iterable[str] = RECIPE_NAMES
) -> dict[RunKey, run_store.TrainedRun]:
    """Every (recipe, loss, seed) run of the course's multi-class comparison.

    LS+ needs a cross-entropy model's per-class validation accuracy (LS+ Algorithm 1, line 2): it comes from the
    cross-entropy run of the same recipe and seed, which is therefore always trained first.
    """
    losses = list(losses)
    runs: dict[RunKey, run_store.TrainedRun] = {}
    for recipe in recipes:
        model = recipe_model(cfg, recipe)
        for seed in seeds_of(cfg, recipe):
            config = _recipe_config(cfg, recipe, seed)
            ce = train_or_load(cfg, f"cross-entropy, {recipe}, seed {seed}", CrossEntropy(), bundle, model, config)
            accuracy = (  # LS+'s smoothing needs every class in validation; the other losses do not
                class_accuracy_from_predictions(ce.val_probs, bundle.val.labels, bundle.n_classes)
                if "LS+" in losses
                else None
            )
            for name in losses:
                if name == "LS+" and ce.source == "planned":
                    continue  # declared once its cross-entropy run exists (helpers.course.suites.train_declared)
                display = multiclass_loss_name(name, cfg)
                runs[(recipe, display, seed)] = (
                    ce
                    if name == "cross-entropy"
                    else train_or_load(
                        cfg,
                        f"{display}, {recipe}, seed {seed}",
                        _make_multiclass_loss(name, cfg, bundle, model, accuracy, seed),
                        bundle,
                        model,
                        config,
                    )
                )
    return runs


@summarised
def margin_sweep_runs(cfg: Any, bundle: Any) -> dict[tuple[float, int], run_store.TrainedRun]:
    """Notebook 03: MbLS at each margin of ``cfg.sweep_margins`` under ``cfg.sweep_recipe``, every seed."""
    recipe = cfg.sweep_recipe
    model = recipe_model(cfg, recipe)
    runs = {}
    for seed in seeds_of(cfg, recipe):
        config = _recipe_config(cfg, recipe, seed)
        for margin in cfg.sweep_margins:
            runs[(float(margin), seed)] = train_or_load(
                cfg,
                f"MbLS m={margin:g}, {recipe}, seed {seed}",
                MbLS(margin=margin, lam=cfg.mbls_lambda),
                bundle,
                model,
                config,
            )
    return runs


@summarised
def ccl_sweep_runs(cfg: Any, bundle: Any) -> dict[tuple[str, int], run_store.TrainedRun]:
    """Notebook 05: CCL-Net at each rate of ``cfg.sweep_lr_ccl`` and the label-smoothing baselines LSR-u / LSR-a
    at each ε of ``cfg.smoothing_epsilons``, under ``cfg.sweep_recipe``, every seed."""
    recipe = cfg.sweep_recipe
    model = recipe_model(cfg, recipe)
    prior = class_frequencies(bundle.train.labels, bundle.n_classes)
    runs = {}
    for seed in seeds_of(cfg, recipe):
        config = _recipe_config(cfg, recipe, seed)
        for rate in cfg.sweep_lr_ccl:
            runs[(f"CCL-Net lr={rate:g}", seed)] = train_or_load(
                cfg,
                f"CCL-Net lr={rate:g}, {recipe}, seed {seed}",
                _ccl_loss(cfg, bundle, model, rate, seed),
                bundle,
                model,
                config,
            )
        for eps in cfg.smoothing_epsilons:
            eps = round(float(eps), 4)
            runs[(f"LSR-u ε={eps:g}", seed)] = train_or_load(
                cfg, f"LSR-u ε={eps:g}, {recipe}, seed {seed}", LabelSmoothing(eps), bundle, model, config
            )
            runs[(f"LSR-a ε={eps:g}", seed)] = train_or_load(
                cfg,
                f"LSR-a ε={eps:g}, {recipe}, seed {seed}",
                LabelSmoothing(eps, prior=prior / prior.sum()),
                bundle,
                model,
                config,
            )
    return runs


@summarised
def synthetic_ccl_runs(cfg: Any, synthetic: Any) -> dict[int, run_store.TrainedRun]:
    """Notebook 05: CCL-Net on the synthetic DermaMNIST-like set (whose true class similarity is known)."""
    recipe = cfg.sweep_recipe
    model = recipe_model(cfg, recipe)
    return {
        seed: train_or_load(
            cfg,
            f"CCL-Net lr={cfg.synthetic_lr_ccl:g}, {recipe}, {synthetic.name}, seed {seed}",
            _ccl_loss(cfg, synthetic, model, cfg.synthetic_lr_ccl, seed),
            synthetic,
            model,
            _recipe_config(cfg, recipe, seed),
        )
        for seed in seeds_of(cfg, recipe)
    }


# ----------------------------------------------------------------------------------------------------------------
# the fair contest (helpers.lessons.tuning): each loss's grid at the selection seeds, then its chosen point at every
# seed


def _multiclass_points(
    cfg: Any, bundle: Any, points: dict[str, tuning.Point], seeds: Iterable[int]
) -> dict[tuple[str, int], run_store.TrainedRun]:
    """(loss, seed) → run of every loss of ``points`` at its point, through one :func:`multiclass_runs` call, so
    cross-entropy (which LS+ needs) is loaded once a seed. A loss at :data:`helpers.lessons.tuning.LIMIT` gets the
    cross-entropy run of the seed itself (the same run, the same key). A run not declared yet (LS+ while its
    cross-entropy run is only planned) is absent."""
    seeds = [int(seed) for seed in seeds]
    trained = {loss: value for loss, value in points.items() if value is not tuning.LIMIT}
    knobs = {tuning.MULTICLASS_GRIDS[loss].knob: value for loss, value in trained.items()}
    point = dataclasses.replace(cfg, extra={**cfg.extra, **knobs, "seeds": seeds})
    runs = multiclass_runs(point, bundle, ("cross-entropy", *trained), (tuning.TUNING_RECIPE,))
    names = {
        loss: tuning.MULTICLASS_GRIDS[loss].limit if loss not in trained else multiclass_loss_name(loss, point)
        for loss in points
    }
    keys = {(loss, seed): (tuning.TUNING_RECIPE, names[loss], seed) for loss in points for seed in seeds}
    return {key: runs[found] for key, found in keys.items() if found in runs}


def multiclass_grid_runs(cfg: Any, bundle: Any) -> dict[tuple[str, tuning.Point, int], run_store.TrainedRun]:
    """(loss, point, seed) → run, for every point of every loss's grid (notebook 06) at the selection seeds: the
    i-th points of all grids share one :func:`multiclass_runs` call; the cross-entropy point is the cross-entropy
    run."""
    seeds, grids = selection_seeds(cfg), tuning.MULTICLASS_GRIDS
    runs = {}
    for index in range(max(len(grid.points) for grid in grids.values())):
        points = {loss: grid.points[index] for loss, grid in grids.items() if index < len(grid.points)}
        found = _multiclass_points(cfg, bundle, points, seeds)
        runs.update({(loss, points[loss], seed): run for (loss, seed), run in found.items()})
    return runs


def tuned_multiclass_runs(
    cfg: Any, bundle: Any, choices: dict[str, tuning.Point]
) -> dict[RunKey, run_store.TrainedRun]:
    """(recipe, "<loss> <symbol>=<value> (tuned)", seed) → run: each loss at its chosen point, every seed (the
    cross-entropy runs where the choice is the cross-entropy point)."""
    label = {loss: tuning.tuned_label(loss, tuning.MULTICLASS_GRIDS[loss], point) for loss, point in choices.items()}
    points = _multiclass_points(cfg, bundle, choices, seeds_of(cfg))
    return {(tuning.TUNING_RECIPE, label[loss], seed): run for (loss, seed), run in points.items()}


@summarised
def multiclass_contest(cfg: Any, bundle: Any, split_seed: int | None = None) -> tuning.Contest:
    """Notebook 06's fair contest (:mod:`helpers.lessons.tuning`) in the well-regularised recipe; the selection half is
    that of ``posthoc.split_calibration(..., seed=split_seed)`` (default: the configuration's ``seed``, as 06)."""
    return run_contest(
        tuning.MULTICLASS_GRIDS,
        multiclass_grid_runs(cfg, bundle),
        bundle.val.labels,
        False,
        lambda choices: tuned_multiclass_runs(cfg, bundle, choices),
        lambda loss: multiclass_loss_name(loss, cfg),
        cfg.seed if split_seed is None else split_seed,
        selection_seeds(cfg),
    )


# ----------------------------------------------------------------------------------------------------------------
# dataset shift (notebook 12)


def shift_bundles(cfg: Any) -> dict[str, Any]:
    """Notebook 12's two training sets, from one ``isic2018`` load (one decoding and resizing pipeline):
    ``ham10000`` (:func:`helpers.data.isic_heldout_split`: tested on held-out lesions and on the ISIC 2018 test
    set) and ``sites`` (:func:`helpers.data.isic_site_split`: trained at the Vienna sites, tested at
    Rosendahl)."""
    if cfg.dataset != "isic2018":
        raise ValueError(
            f"notebook 12 studies ISIC 2018's own shifts (held-out lesions, the ISIC 2018 test set, acquisition "
            f"sites): its dataset must be 'isic2018', got {cfg.dataset!r}"
        )
    bundle = load_bundle(cfg)
    return {
        "ham10000": data.isic_heldout_split(bundle, cfg.heldout_fraction, seed=cfg.seed),
        "sites": data.isic_site_split(bundle, seed=cfg.seed),
    }


@summarised
def shift_runs(cfg: Any, bundles: dict[str, Any]) -> dict[str, dict[RunKey, run_store.TrainedRun]]:
    """Notebook 12: the multi-class runs of ``cfg.losses`` on ``bundles["ham10000"]`` and of ``cfg.site_losses``
    on ``bundles["sites"]``, every seed, under the recipes of :func:`shift_recipes`."""
    recipes = shift_recipes(cfg)
    return {
        "ham10000": multiclass_runs(cfg, bundles["ham10000"], cfg.losses, recipes),
        "sites": multiclass_runs(cfg, bundles["sites"], cfg.site_losses, recipes),
    }


def shift_recipes(cfg: Any) -> list[str]:
    """The recipes of ``cfg.recipes`` (both when the knob is absent); a name that is not a recipe is refused."""
    recipes = list(cfg.extra.get("recipes") or RECIPE_NAMES)
    unknown = [name for name in recipes if name not in RECIPE_NAMES]
    if unknown:
        raise ValueError(f"unknown recipe(s) {unknown} in the recipes knob; choose from {list(RECIPE_NAMES)}")
    return recipes
