"""Which runs each notebook trains: one declaration shared by the notebooks and the reference-run command.

A notebook calls :func:`notebook_runs` (or one of the suite functions below) with its resolved configuration and
gets every trained run it needs, each loaded when it exists (stored reference run or local cache) and trained when
it does not (:func:`helpers.training.train_run`). The command

    python -m helpers.course.suites train [--profile reference] [--notebooks 02 03] [--device cuda] [--workers 4]
    python -m helpers.course.suites list  [--profile reference]

builds the same configurations from each notebook's ``PROFILES`` table and trains every declared run that is not
stored yet, one at a time (or ``--workers`` processes side by side on a GPU), storing each as it finishes: stop it
at any point and it resumes where it stopped. In the ``reference`` profile runs are stored in ``stored_runs/``
(committed); in the other profiles they go to the local cache. ``CALIBMED_RETRAIN=1`` retrains the stored runs
that older training code produced (:func:`helpers.training.is_current`), so a retrain resumes too.

Training seeds: a configuration's ``seeds`` knob (``[0, 1, 2]`` in the reference profile), else ``[seed]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import time
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch
from torch import nn

from helpers import data
from helpers.course import runner as course
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
from helpers.training import models, run_log, run_store

RECIPE_NAMES = tuple(run_store.RECIPES)
#: the multi-class losses of notebooks 02–06, in table order; display names carry their hyper-parameters
MULTICLASS_LOSSES = ("cross-entropy", "LS", "focal", "FLSD-53", "MbLS", "LS+", "CCL-Net", "DCA", "MDCA")


def seeds_of(cfg: Any) -> list[int]:
    seeds = cfg.extra.get("seeds") if hasattr(cfg, "extra") else None
    return [int(s) for s in seeds] if seeds else [int(cfg.seed)]


def is_stored(cfg: Any) -> bool:
    """Runs of the reference profile are stored in the repository; others go to the local cache."""
    return cfg.profile == "reference"


def recipe_epochs(cfg: Any, recipe: str) -> int:
    return cfg.epochs if recipe == "well-regularised" else cfg.overfit_epochs


def _train(cfg: Any, name: str, loss: nn.Module, bundle: Any, model: str, config: Any) -> run_store.TrainedRun:
    return run_store.train_run(name, loss, bundle, model, config, stored=is_stored(cfg))


def recipe_model(cfg: Any, recipe: str) -> str:
    """The model a recipe trains in this configuration: :func:`helpers.training.recipe_model`, unless the
    configuration's ``overfit_model`` knob names the over-fitting recipe's model. The ``quick`` profile keeps the
    small CNN there: on its 1,000 training images cross-entropy becomes over-confident without widening it (test
    ECE 8.0 % against 2.3 % for the well-regularised recipe, notebook 01) at a third of the wide CNN's cost per
    run (``bench/bench_quick_overfit.py``)."""
    override = cfg.extra.get("overfit_model") if hasattr(cfg, "extra") else None
    if recipe != "over-fitting" or override is None:
        return run_store.recipe_model(recipe, cfg.model)
    if override not in models.MODEL_NAMES:
        raise ValueError(f"overfit_model must be one of {models.MODEL_NAMES}, got {override!r}")
    return override


def _recipe_config(cfg: Any, recipe: str, seed: int, **overrides: Any):
    return run_store.recipe_config(
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
#: every suite below prints one summary line for the runs it loads (helpers.training.run_log; CALIBMED_VERBOSE=1
#: lists them)
summarised = run_log.summarised(lambda: run_store.training_version())


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
        for seed in seeds_of(cfg):
            config = _recipe_config(cfg, recipe, seed)
            ce = _train(cfg, f"cross-entropy, {recipe}, seed {seed}", CrossEntropy(), bundle, model, config)
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
                    else _train(
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
    for seed in seeds_of(cfg):
        config = _recipe_config(cfg, recipe, seed)
        for margin in cfg.sweep_margins:
            runs[(float(margin), seed)] = _train(
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
    for seed in seeds_of(cfg):
        config = _recipe_config(cfg, recipe, seed)
        for rate in cfg.sweep_lr_ccl:
            runs[(f"CCL-Net lr={rate:g}", seed)] = _train(
                cfg,
                f"CCL-Net lr={rate:g}, {recipe}, seed {seed}",
                _ccl_loss(cfg, bundle, model, rate, seed),
                bundle,
                model,
                config,
            )
        for eps in cfg.smoothing_epsilons:
            eps = round(float(eps), 4)
            runs[(f"LSR-u ε={eps:g}", seed)] = _train(
                cfg, f"LSR-u ε={eps:g}, {recipe}, seed {seed}", LabelSmoothing(eps), bundle, model, config
            )
            runs[(f"LSR-a ε={eps:g}", seed)] = _train(
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
        seed: _train(
            cfg,
            f"CCL-Net lr={cfg.synthetic_lr_ccl:g}, {recipe}, {synthetic.name}, seed {seed}",
            _ccl_loss(cfg, synthetic, model, cfg.synthetic_lr_ccl, seed),
            synthetic,
            model,
            _recipe_config(cfg, recipe, seed),
        )
        for seed in seeds_of(cfg)
    }


# ----------------------------------------------------------------------------------------------------------------
# multi-label (notebooks 08–11)


@summarised
def multilabel_runs(cfg: Any, bundle: Any, losses: Iterable[str]) -> dict[tuple[str, int], run_store.TrainedRun]:
    """Every (loss, seed) run of the multi-label comparison on ``bundle`` (losses by
    :func:`helpers.lessons.course_losses` name)."""
    from helpers.lessons import multilabel_analysis as mla

    runs = {}
    for seed in seeds_of(cfg):
        config = mla.multilabel_train_config(cfg.epochs, cfg.lr, cfg.batch_size, seed=seed, device=cfg.device)
        for name, loss in mla.course_losses(list(losses), lpr_weight=cfg.extra.get("lpr_weight", 1.0)).items():
            runs[(name, seed)] = _train(cfg, f"{name}, {bundle.name}, seed {seed}", loss, bundle, cfg.model, config)
    return runs


@summarised
def multilabel_variant_runs(
    cfg: Any, bundle: Any, losses: Iterable[str], variant: Any = None, variant_losses: Iterable[str] = ()
) -> tuple[dict[tuple[str, int], run_store.TrainedRun], dict[tuple[str, int], run_store.TrainedRun]]:
    """:func:`multilabel_runs` on ``bundle`` and, when ``variant`` is given, on a second data set (notebook 11's
    independent-label variant), under one summary line for both."""
    runs = multilabel_runs(cfg, bundle, losses)
    return runs, (multilabel_runs(cfg, variant, variant_losses) if variant is not None else {})


# ----------------------------------------------------------------------------------------------------------------
# the fair contest (helpers.lessons.tuning): each loss's grid at the tuning seed, then its chosen value at every seed


def tuning_seed(cfg: Any) -> int:
    """The one seed a hyper-parameter grid is trained with: the configuration's first."""
    return seeds_of(cfg)[0]


def _multiclass_points(cfg: Any, bundle: Any, values: dict[str, float], seeds: Iterable[int]) -> dict[Any, Any]:
    """(loss, seed) → run of every loss of ``values`` at its value, through one :func:`multiclass_runs` call, so
    cross-entropy (which LS+ needs) is loaded once a seed. A run not declared yet (LS+ while its cross-entropy run is
    only planned) is absent."""
    seeds = [int(seed) for seed in seeds]
    knobs = {tuning.MULTICLASS_GRIDS[loss].knob: value for loss, value in values.items()}
    point = dataclasses.replace(cfg, extra={**cfg.extra, **knobs, "seeds": seeds})
    runs = multiclass_runs(point, bundle, ("cross-entropy", *values), (tuning.TUNING_RECIPE,))
    keys = {
        (loss, seed): (tuning.TUNING_RECIPE, multiclass_loss_name(loss, point), seed)
        for loss in values
        for seed in seeds
    }
    return {key: runs[found] for key, found in keys.items() if found in runs}


def multiclass_grid_runs(cfg: Any, bundle: Any) -> dict[tuple[str, float], run_store.TrainedRun]:
    """(loss, value) → the run at the tuning seed, for every value of every loss's grid (notebook 06): the i-th
    values of all grids share one :func:`multiclass_runs` call."""
    seed, grids = tuning_seed(cfg), tuning.MULTICLASS_GRIDS
    runs = {}
    for index in range(max(len(grid.values) for grid in grids.values())):
        values = {loss: grid.values[index] for loss, grid in grids.items() if index < len(grid.values)}
        points = _multiclass_points(cfg, bundle, values, [seed])
        runs.update({(loss, values[loss]): run for (loss, _), run in points.items()})
    return runs


def tuned_multiclass_runs(cfg: Any, bundle: Any, choices: dict[str, float]) -> dict[RunKey, run_store.TrainedRun]:
    """(recipe, "<loss> <symbol>=<value> (tuned)", seed) → run: each loss at its chosen value, every seed."""
    label = {loss: tuning.tuned_label(loss, tuning.MULTICLASS_GRIDS[loss], value) for loss, value in choices.items()}
    points = _multiclass_points(cfg, bundle, choices, seeds_of(cfg))
    return {(tuning.TUNING_RECIPE, label[loss], seed): run for (loss, seed), run in points.items()}


def _multilabel_at(cfg: Any, bundle: Any, loss: str, value: float, seeds: Iterable[int]) -> dict[int, Any]:
    from helpers.lessons import multilabel_analysis as mla

    label = tuning.value_label(loss, tuning.MULTILABEL_GRIDS[loss], value)
    runs = {}
    for seed in seeds:
        config = mla.multilabel_train_config(cfg.epochs, cfg.lr, cfg.batch_size, seed=seed, device=cfg.device)
        loss_module = tuning.multilabel_loss(loss, value)
        runs[seed] = _train(cfg, f"{label}, {bundle.name}, seed {seed}", loss_module, bundle, cfg.model, config)
    return runs


def multilabel_grid_runs(cfg: Any, bundle: Any) -> dict[tuple[str, float], run_store.TrainedRun]:
    """(loss, value) → the multi-label run at the tuning seed, for every value of every loss's grid (notebook 11)."""
    seed = tuning_seed(cfg)
    return {
        (loss, value): _multilabel_at(cfg, bundle, loss, value, [seed])[seed]
        for loss, grid in tuning.MULTILABEL_GRIDS.items()
        for value in grid.values
    }


def tuned_multilabel_runs(
    cfg: Any, bundle: Any, choices: dict[str, float]
) -> dict[tuple[str, int], run_store.TrainedRun]:
    """("<loss> <symbol>=<value> (tuned)", seed) → run: each loss at its chosen value, every seed."""
    return {
        (tuning.tuned_label(loss, tuning.MULTILABEL_GRIDS[loss], value), seed): run
        for loss, value in choices.items()
        for seed, run in _multilabel_at(cfg, bundle, loss, value, seeds_of(cfg)).items()
    }


def _contest(
    grids: dict[str, tuning.Grid],
    grid_runs: dict[tuple[str, float], run_store.TrainedRun],
    labels: torch.Tensor,
    multilabel: bool,
    tuned_runs: Callable[[dict[str, float]], dict[Any, run_store.TrainedRun]],
    default_row: Callable[[str], str],
    split_seed: int,
) -> tuning.Contest:
    """Choose on the grids that are complete (while runs are only planned, a loss whose grid is not trained yet
    declares no tuned runs), then load or train the chosen values at every seed."""
    ready = {key: run for key, run in grid_runs.items() if run.source != "planned"}
    complete = [loss for loss in grids if all((loss, value) in ready for value in grids[loss].values)]
    table, choices = tuning.grid_table(
        {key: run for key, run in ready.items() if key[0] in complete},
        grids,
        labels,
        lambda run: run.val_probs,
        multilabel=multilabel,
        split_seed=split_seed,
    )
    rows = [
        (default_row(loss), None if value == grids[loss].default else tuning.tuned_label(loss, grids[loss], value))
        for loss, value in choices.items()
    ]
    return tuning.Contest(table, choices, tuned_runs(choices), rows, grid_runs)


@summarised
def multiclass_contest(cfg: Any, bundle: Any, split_seed: int | None = None) -> tuning.Contest:
    """Notebook 06's fair contest (:mod:`helpers.lessons.tuning`) in the well-regularised recipe; the selection half is
    that of ``posthoc.split_calibration(..., seed=split_seed)`` (default: the configuration's ``seed``, as 06)."""
    return _contest(
        tuning.MULTICLASS_GRIDS,
        multiclass_grid_runs(cfg, bundle),
        bundle.val.labels,
        False,
        lambda choices: tuned_multiclass_runs(cfg, bundle, choices),
        lambda loss: multiclass_loss_name(loss, cfg),
        cfg.seed if split_seed is None else split_seed,
    )


@summarised
def multilabel_contest(cfg: Any, bundle: Any, split_seed: int = 0) -> tuning.Contest:
    """Notebook 11's fair contest (:mod:`helpers.lessons.tuning`) on ``bundle``; the selection half is that of
    ``posthoc.split_calibration(..., seed=split_seed)`` (11's calibration split seed, 0)."""
    return _contest(
        tuning.MULTILABEL_GRIDS,
        multilabel_grid_runs(cfg, bundle),
        bundle.val.labels,
        True,
        lambda choices: tuned_multilabel_runs(cfg, bundle, choices),
        lambda loss: loss,
        split_seed,
    )


# ----------------------------------------------------------------------------------------------------------------
# what each notebook declares


def load_bundle(cfg: Any, name: str | None = None) -> Any:
    return data.load_dataset(
        name or cfg.dataset, image_size=cfg.image_size, data_dir=cfg.data_dir, max_train=cfg.max_train, seed=cfg.seed
    )


def _declare_multiclass(losses: Iterable[str] = MULTICLASS_LOSSES) -> Callable[[Any], None]:
    return lambda cfg: multiclass_runs(cfg, load_bundle(cfg), losses)


def _declare_06(cfg: Any) -> None:
    bundle = load_bundle(cfg)
    multiclass_runs(cfg, bundle)
    multiclass_contest(cfg, bundle)


def _declare_03(cfg: Any) -> None:
    bundle = load_bundle(cfg)
    multiclass_runs(cfg, bundle, ("cross-entropy", "LS", "focal", "MbLS"))
    margin_sweep_runs(cfg, bundle)


def _declare_05(cfg: Any) -> None:
    bundle = load_bundle(cfg)
    multiclass_runs(cfg, bundle, ("cross-entropy", "CCL-Net"))
    ccl_sweep_runs(cfg, bundle)
    synthetic_ccl_runs(cfg, load_bundle(cfg, cfg.synthetic_dataset))


#: the losses notebook 08 compares (SPA and LPR against BCE, focal and ASL); 09-11 read all of ``cfg.losses``
SPA_LPR_LOSSES = ("BCE", "focal", "ASL", "SPA", "SPA+LPR", "BCE+LPR")


@summarised
def spa_lpr_runs(cfg: Any, bundles: dict[str, Any]) -> dict[str, dict[tuple[str, int], run_store.TrainedRun]]:
    """Notebook 08: the runs of :data:`SPA_LPR_LOSSES` among ``cfg.losses`` on ``bundles["coupled"]`` and among
    ``cfg.independent_losses`` on ``bundles["independent"]`` (when that set is configured)."""
    lists = {"coupled": cfg.losses, "independent": cfg.extra.get("independent_losses", [])}
    return {
        variant: multilabel_runs(cfg, bundle, [name for name in lists[variant] if name in SPA_LPR_LOSSES])
        for variant, bundle in bundles.items()
    }


def _declare_08(cfg: Any) -> None:
    bundles = {"coupled": load_bundle(cfg)}
    if cfg.extra.get("independent_dataset"):
        bundles["independent"] = load_bundle(cfg, cfg.independent_dataset)
    spa_lpr_runs(cfg, bundles)


#: the losses notebook 09 compares (LDACE against BCE) and those notebook 10 ranks with (the SPA paper's per-label
#: losses); each notebook reads only these of its configuration's ``losses`` / ``independent_losses``
LDACE_LOSSES = ("BCE", "LDACE", "LDACE+CCL")
RETRIEVAL_LOSSES = SPA_LPR_LOSSES


def selected_losses(cfg: Any, wanted: Iterable[str], key: str = "losses") -> list[str]:
    """The losses of ``wanted`` that the configuration's ``key`` list holds, in ``wanted``'s order."""
    available = cfg.extra.get(key) or []
    return [name for name in wanted if name in available]


def _declare_09(cfg: Any) -> None:
    multilabel_runs(cfg, load_bundle(cfg), selected_losses(cfg, LDACE_LOSSES))
    if cfg.extra.get("independent_dataset"):
        multilabel_runs(
            cfg, load_bundle(cfg, cfg.independent_dataset), selected_losses(cfg, LDACE_LOSSES, "independent_losses")
        )


def _declare_10(cfg: Any) -> None:
    multilabel_runs(cfg, load_bundle(cfg), selected_losses(cfg, RETRIEVAL_LOSSES))


def xray_config(cfg: Any) -> Any:
    """Notebook 11's configuration for its real-X-ray section: the ``xray_dataset`` at ``xray_image_size``, trained
    ``xray_epochs`` epochs with the ``xray_seeds``; model, rate and batch size as the rest of the notebook."""
    return dataclasses.replace(
        cfg,
        dataset=cfg.xray_dataset,
        image_size=cfg.xray_image_size,
        epochs=cfg.xray_epochs,
        max_train=None,
        extra={**cfg.extra, "seeds": list(cfg.xray_seeds)},
    )


def xray_runs(cfg: Any) -> tuple[Any, dict[tuple[str, int], run_store.TrainedRun]]:
    """Notebook 11, last section: (bundle, runs) of ``cfg.xray_losses`` on the real X-rays (:func:`xray_config`).
    Raises :class:`helpers.lessons.XrayDataMissing` when the data folder is absent."""
    from helpers.lessons import real_xray

    real_xray.require_folder(cfg.xray_dataset, cfg.data_dir)
    xray_cfg = xray_config(cfg)
    bundle = load_bundle(xray_cfg)
    return bundle, multilabel_runs(xray_cfg, bundle, cfg.xray_losses)


def _declare_multilabel(cfg: Any) -> None:
    from helpers.lessons import real_xray

    bundle = load_bundle(cfg)
    multilabel_runs(cfg, bundle, cfg.losses)
    multilabel_contest(cfg, bundle)
    if cfg.extra.get("independent_dataset"):
        multilabel_runs(cfg, load_bundle(cfg, cfg.independent_dataset), cfg.independent_losses)
    if cfg.extra.get("xray_dataset"):
        try:
            xray_runs(cfg)
        except real_xray.XrayDataMissing as missing:  # the section is skipped; say so where the runs are trained
            warnings.warn(f"{cfg.notebook}: the real-X-ray runs are not declared: {missing}", stacklevel=2)


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


def _declare_12(cfg: Any) -> None:
    shift_runs(cfg, shift_bundles(cfg))


#: notebook → the function that trains (or loads) every run it reads
DECLARED_RUNS: dict[str, Callable[[Any], None]] = {
    "01_measuring_calibration": _declare_multiclass(("cross-entropy",)),
    "02_label_smoothing_and_focal": _declare_multiclass(("cross-entropy", "LS", "focal", "FLSD-53")),
    "03_margin_based_label_smoothing": _declare_03,
    "04_informed_label_smoothing_lsplus": _declare_multiclass(("cross-entropy", "LS", "LS+")),
    "05_ccl_net_class_correlations": _declare_05,
    "06_multiclass_comparison": _declare_06,
    "08_spa_and_lpr": _declare_08,
    "09_ldace_and_label_dependencies": _declare_09,
    "10_multilabel_retrieval": _declare_10,
    "11_multilabel_comparison": _declare_multilabel,
    "12_dataset_shift": _declare_12,
}


def reference_config(notebook: str, profile: str = "reference", **knobs: Any) -> Any:
    """A notebook's resolved configuration for ``profile``, from its own ``PROFILES`` table (printing nothing)."""
    profiles = course.notebook_profiles(notebook)
    with contextlib.redirect_stdout(io.StringIO()):
        return course.configure(notebook, profiles, profile=profile, **knobs)


def declared_runs(notebooks: list[str], profile: str, knobs: dict[str, Any]) -> list[run_store.PlannedRun]:
    """The runs the notebooks declare that are neither stored nor cached, without training any (each once)."""
    with run_store.planning() as plan, contextlib.redirect_stdout(io.StringIO()):
        for notebook in notebooks:
            DECLARED_RUNS[notebook](reference_config(notebook, profile, **knobs))
    unique = {}
    for planned in plan:
        unique.setdefault(planned.key, planned)
    return list(unique.values())


_pending: list[run_store.PlannedRun] = []


def _train_planned(index: int) -> tuple[str, float]:
    planned = _pending[index]
    torch.set_num_threads(int(os.environ.get("CALIBMED_SUITE_THREADS", "1")))
    run = run_store.train_run(
        planned.name, planned.loss, planned.bundle, planned.model_name, planned.config, stored=planned.stored
    )
    target = run_store.stored_run_path(planned.bundle, planned.key)
    if planned.stored and not target.is_file():  # train_run warned and went on; this command exists to store runs
        raise OSError(
            f"{planned.name}: trained, but its stored run {target} could not be written (see the warning "
            "above); make stored_runs/ writable and run the command again"
        )
    return planned.name, run.seconds


def train_declared(notebooks: list[str], profile: str, knobs: dict[str, Any], workers: int = 1) -> int:
    """Train every run the notebooks declare that is not stored yet, storing each as it finishes; return how many.

    Runs that need another run's result (LS+ needs its cross-entropy run) are declared once that run exists, so
    this plans and trains in rounds until nothing is missing. ``workers > 1`` trains runs side by side in forked
    processes (for a GPU; on 2 CPU cores one at a time is fastest).
    """
    global _pending
    trained = 0
    while True:
        _pending = declared_runs(notebooks, profile, knobs)
        if not _pending:
            return trained
        print(f"{len(_pending)} runs to train", flush=True)
        if workers <= 1:
            outcomes = map(_train_planned, range(len(_pending)))
        else:
            import multiprocessing

            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            outcomes = pool.map(_train_planned, range(len(_pending)))
        for name, seconds in outcomes:
            trained += 1
            print(f"[{trained}] {name}: {seconds:.0f} s", flush=True)
        if workers > 1:
            pool.shutdown()


def stored_run_records(root: Any = None) -> list[dict[str, Any]]:
    """One record per stored reference run (``stored_runs/<dataset>/<key>.npz``, or under ``root``), read from its
    metadata only: dataset, model, epochs, training images, schedule, name, device, the seconds it trained (notebook
    00 tabulates them), its key and whether it is current (:func:`helpers.training.is_current`). Sorted by
    dataset, model and name."""
    from pathlib import Path

    records = []
    for path in sorted(Path(root or run_store.STORED_RUNS_DIR).glob("*/*.npz")):
        meta = run_store.read_stored_meta(path)  # a DamagedRunError naming the file when unreadable
        definition = meta["definition"]
        try:
            records.append(
                {
                    "dataset": definition["dataset"],
                    "model": definition["model"],
                    "epochs": int(definition["config"]["epochs"]),
                    "n_train": int(definition["split_sizes"]["train"]),
                    "schedule": definition["config"]["schedule"],
                    "name": meta["name"],
                    "device": meta.get("device", ""),
                    "seconds": float(meta["seconds"]),
                    "key": path.stem,
                    "current": run_store.is_current(meta),
                }
            )
        except (ValueError, KeyError, TypeError) as error:
            raise run_store.DamagedRunError(
                f"{path}: cannot read this stored run's metadata ({type(error).__name__}: {error})"
            ) from error
    return sorted(records, key=lambda r: (r["dataset"], r["model"], r["name"]))


def time_recipes(
    bundle: Any,
    run_epochs: dict[str, int],
    *,
    model: str,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int = 0,
    device: str = "auto",
    timing_images: int = 2048,
) -> dict[str, dict[str, Any]]:
    """Notebook 00's estimate of what retraining a stored run costs on this machine.

    For each recipe of ``run_epochs`` (recipe → the epochs of its stored runs): ``epochs`` timed training epochs of
    the recipe's model (:func:`helpers.training.recipe_model`) with cross-entropy, through ``train.fit`` and
    the recipe's settings, on the first ``timing_images`` training images (128 validation images during training), then
    one timed pass over the full validation split. Returns, per recipe, the model, its parameter count, the training
    and validation speeds (images/s), the seconds of one full epoch, the run's epochs and the minutes of one run.
    """
    from helpers.losses import CrossEntropy
    from helpers.training import train

    n_timed = min(timing_images, len(bundle.train.labels))
    subset = dataclasses.replace(
        bundle,
        train=data.Split(bundle.train.images[:n_timed], bundle.train.labels[:n_timed]),
        val=data.Split(bundle.val.images[:128], bundle.val.labels[:128]),
    )
    timing = {}
    for recipe, n_epochs in run_epochs.items():
        model_name = run_store.recipe_model(recipe, model)
        torch.manual_seed(seed)
        net = models.build_model(model_name, bundle.n_channels, bundle.n_classes, image_size=bundle.image_size)
        config = run_store.recipe_config(recipe, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, device=device)
        fitted = train.fit(net, CrossEntropy(), subset, config)
        started = time.perf_counter()
        train.predict_logits(fitted.model, bundle.val.images, batch_size=config.eval_batch_size)
        validation_seconds = max(time.perf_counter() - started, 1e-9)
        seconds_per_image = fitted.seconds / (epochs * n_timed)
        epoch_seconds = seconds_per_image * len(bundle.train.labels) + validation_seconds
        timing[recipe] = {
            "model": model_name,
            "parameters": sum(p.numel() for p in net.parameters()),
            "train images/s": 1 / seconds_per_image,
            "validation images/s": len(bundle.val.labels) / validation_seconds,
            "s per full epoch": epoch_seconds,
            "epochs": n_epochs,
            "min per run": n_epochs * epoch_seconds / 60,
            "device": str(fitted.device),
        }
    return timing


def timing_table(timing: dict[str, dict[str, Any]]) -> Any:
    """:func:`time_recipes` as notebook 00 shows it: one row per recipe, the model in words, values rounded."""
    import pandas as pd

    table = pd.DataFrame(timing).T.drop(columns="device", errors="ignore").rename_axis("recipe")
    numeric = table.columns.drop("model")
    table[numeric] = table[numeric].astype(float).round(1)
    table["model"] = table["model"].map(course.in_words)
    return table.astype({"parameters": int, "epochs": int})


def stored_run_table(
    records: list[dict[str, Any]], timing: dict[str, dict[str, Any]] | None = None, n_val: int = 0
) -> tuple[Any, Any]:
    """Notebook 00's table of the stored runs (:func:`stored_run_records`): per data set, model and epochs, how many
    runs, on which device, the median seconds of one run and the total minutes; with ``timing``
    (:func:`time_recipes`), also about how many hours all of them would take on this machine, for the runs on
    DermaMNIST-format images only (the models timed there; ``n_val`` validation images per epoch). Data sets and
    models in words. Returns the table and the estimated hours per row (NaN where not estimated)."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(records)
    groups = frame.groupby(["dataset", "model", "epochs"])
    table = pd.DataFrame(
        {
            "runs": groups.size(),
            "device": groups["device"].agg(lambda d: ", ".join(sorted(set(d)))),
            "median s per run": groups["seconds"].median().round(0),
            "total min": (groups["seconds"].sum() / 60).round(1),
        }
    )
    rates = {t["model"]: t for t in (timing or {}).values()}

    def hours_here(row: Any) -> float:
        dataset_name, model_name, n_epochs = row.name
        measured = rates.get(model_name)
        if measured is None or not dataset_name.endswith("dermamnist"):
            return np.nan
        n_train = frame[(frame.dataset == dataset_name) & (frame.model == model_name)].n_train.iloc[0]
        seconds = n_epochs * (n_train / measured["train images/s"] + n_val / measured["validation images/s"])
        return row["runs"] * seconds / 3600

    estimated = table.apply(hours_here, axis=1) if rates else pd.Series(np.nan, index=table.index)
    if rates:
        table["≈ h here (all runs)"] = [f"{h:,.0f}" if np.isfinite(h) else "not estimated" for h in estimated]
    table = table.rename(index=course.in_words).rename_axis(["data set", "model", "epochs"])
    return table, pd.Series(estimated.to_numpy(), index=table.index)


def report_runs_of_older_code(root: Any = None) -> None:
    """Name the stored runs of older training code. After ``CALIBMED_RETRAIN=1`` every declared run is current, so
    these are runs no notebook declares any more (an LS+ run's key follows its retrained cross-entropy run)."""
    older = [record for record in stored_run_records(root) if not record["current"]]
    if older:
        print(
            f"{len(older)} stored run(s) of older training code remain; after a complete RETRAIN=1 no notebook "
            "declares them (git rm them):"
        )
        for record in older:
            print(f"  stored_runs/{record['dataset']}/{record['key']}.npz  ({record['name']})")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine ray`` and its options (helpers/ray_engine.py; Ray is the optional extra ``scale``)."""
    parser.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: this process (or --workers forked processes); ray: every run a Ray task",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join: auto (the one `ray start` runs here) or HOST:PORT; default: a "
        "local Ray on this machine",
    )
    parser.add_argument("--gpus-per-run", type=float, default=0.0, help="GPU share of each Ray task (0.0625: 16 a GPU)")
    parser.add_argument("--cpus-per-run", type=int, default=1, help="CPUs (and torch threads) of each Ray task")


def check_engine_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse Ray options without ``--engine ray`` (they would be ignored without a word)."""
    given = [
        flag
        for flag, value in (
            ("--address", args.address),
            ("--gpus-per-run", args.gpus_per_run),
            ("--cpus-per-run", args.cpus_per_run != 1),
        )
        if value
    ]
    if args.engine != "ray" and given:
        parser.error(f"{', '.join(given)} only apply with --engine ray")


def main(argv: list[str] | None = None, ray_engine: Any = None) -> None:
    """The command line. ``ray_engine``: the module :mod:`helpers.course.ray_engine`, which
    ``python -m helpers.course.suites`` passes
    (the engine sits above this module and imports it; this module never imports the engine)."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.course.suites",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=("train", "list"))
    parser.add_argument("--profile", default="reference", choices=course.PROFILE_NAMES)
    parser.add_argument("--notebooks", nargs="*", default=None, help="prefixes such as 02 03 (default: all)")
    parser.add_argument("--device", default=None, help="override the profile's device (auto, cpu, cuda)")
    parser.add_argument("--workers", type=int, default=1, help="training processes side by side (GPU)")
    add_engine_arguments(parser)
    args = parser.parse_args(argv)
    check_engine_arguments(parser, args)
    if args.engine == "ray" and args.workers != 1:
        parser.error("--workers is the local process pool; with --engine ray the cluster's resources decide")
    stems = [p.stem for p in course.list_notebooks(args.notebooks)]
    notebooks = [s for s in stems if s in DECLARED_RUNS]
    knobs = {"device": args.device} if args.device else {}
    if args.command == "list":
        missing = declared_runs(notebooks, args.profile, knobs)
        for planned in missing:
            print(f"missing: {planned.name} ({planned.bundle.name}/{planned.key})")
        print(f"{len(missing)} declared runs missing (runs that depend on a missing run are listed once it exists)")
        return
    print(f"training every run declared by {notebooks} (profile {args.profile!r})", flush=True)
    started = time.perf_counter()
    if args.engine == "ray":
        if ray_engine is None:
            raise SystemExit(
                "--engine ray is a command-line option: run python -m helpers.course.suites train --engine ray"
            )
        outcomes = ray_engine.train_declared(
            notebooks,
            args.profile,
            knobs,
            address=args.address,
            gpus_per_run=args.gpus_per_run,
            cpus_per_run=args.cpus_per_run,
        )
        count = sum(outcome["status"] == "trained" for outcome in outcomes)
    else:
        count = train_declared(notebooks, args.profile, knobs, args.workers)
    print(f"trained {count} runs in {time.perf_counter() - started:.0f} s; every declared run is present", flush=True)
    if args.profile == "reference":
        report_runs_of_older_code()


if __name__ == "__main__":
    # only the program's entry imports the Ray engine (which imports this module as helpers.course.suites): no cycle
    from helpers.course import ray_engine

    main(ray_engine=ray_engine)
