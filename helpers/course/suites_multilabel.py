"""The multi-label run suites: every (loss, seed) run of notebooks 08–11 and 13 on a data set, notebook 11's
independent-label variant, notebook 13's fair contest and real-X-ray section, and which of a configuration's losses
notebooks 08, 09 and 10 read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from helpers.course.suites_common import (
    load_bundle,
    run_contest,
    seeds_of,
    selection_seeds,
    summarised,
    train_or_load,
)
from helpers.lessons import tuning
from helpers.training import run_store


@summarised
def multilabel_runs(cfg: Any, bundle: Any, losses: Iterable[str]) -> dict[tuple[str, int], run_store.TrainedRun]:
    """Every (loss, seed) run of the multi-label comparison on ``bundle`` (losses by
    :func:`helpers.lessons.course_losses` name)."""
    from helpers.lessons import multilabel_analysis as mla

    runs = {}
    for seed in seeds_of(cfg):
        config = mla.multilabel_train_config(cfg.epochs, cfg.lr, cfg.batch_size, seed=seed, device=cfg.device)
        for name, loss in mla.course_losses(list(losses), lpr_weight=cfg.extra.get("lpr_weight", 1.0)).items():
            runs[(name, seed)] = train_or_load(
                cfg, f"{name}, {bundle.name}, seed {seed}", loss, bundle, cfg.model, config
            )
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
# the fair contest (helpers.lessons.tuning) of notebook 13


def _multilabel_at(cfg: Any, bundle: Any, loss: str, point: tuning.Point, seeds: Iterable[int]) -> dict[int, Any]:
    """seed → the run of ``loss`` at ``point``; at :data:`helpers.lessons.tuning.LIMIT` the run of the grid's limit
    (BCE, or SPA for SPA + LPR) as :func:`multilabel_runs` trains it: the same name, loss and key."""
    from helpers.lessons import multilabel_analysis as mla

    grid = tuning.MULTILABEL_GRIDS[loss]
    label = grid.limit if point is tuning.LIMIT else tuning.value_label(loss, grid, point)
    runs = {}
    for seed in seeds:
        config = mla.multilabel_train_config(cfg.epochs, cfg.lr, cfg.batch_size, seed=seed, device=cfg.device)
        if point is tuning.LIMIT:
            loss_module = mla.course_losses([grid.limit])[grid.limit]
        else:
            loss_module = tuning.multilabel_loss(loss, point)
        runs[seed] = train_or_load(cfg, f"{label}, {bundle.name}, seed {seed}", loss_module, bundle, cfg.model, config)
    return runs


def multilabel_grid_runs(cfg: Any, bundle: Any) -> dict[tuple[str, tuning.Point, int], run_store.TrainedRun]:
    """(loss, point, seed) → the multi-label run, for every point of every loss's grid (notebook 13) at the
    selection seeds; the BCE point is the BCE run."""
    seeds = selection_seeds(cfg)
    return {
        (loss, point, seed): run
        for loss, grid in tuning.MULTILABEL_GRIDS.items()
        for point in grid.points
        for seed, run in _multilabel_at(cfg, bundle, loss, point, seeds).items()
    }


def tuned_multilabel_runs(
    cfg: Any, bundle: Any, choices: dict[str, tuning.Point]
) -> dict[tuple[str, int], run_store.TrainedRun]:
    """("<loss> <symbol>=<value> (tuned)", seed) → run: each loss at its chosen point, every seed."""
    return {
        (tuning.tuned_label(loss, tuning.MULTILABEL_GRIDS[loss], point), seed): run
        for loss, point in choices.items()
        for seed, run in _multilabel_at(cfg, bundle, loss, point, seeds_of(cfg)).items()
    }


@summarised
def multilabel_contest(cfg: Any, bundle: Any, split_seed: int = 0) -> tuning.Contest:
    """Notebook 13's fair contest (:mod:`helpers.lessons.tuning`) on ``bundle``; the selection half is that of
    ``posthoc.split_calibration(..., seed=split_seed)`` (the calibration split seed of 11 and 13, 0)."""
    return run_contest(
        tuning.MULTILABEL_GRIDS,
        multilabel_grid_runs(cfg, bundle),
        bundle.val.labels,
        True,
        lambda choices: tuned_multilabel_runs(cfg, bundle, choices),
        lambda loss: loss,
        split_seed,
        selection_seeds(cfg),
    )


# ----------------------------------------------------------------------------------------------------------------
# the losses each notebook reads, and notebook 13's real X-rays


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


#: the losses notebook 09 compares (LDACE against BCE) and those notebook 10 ranks with (the SPA paper's per-label
#: losses); each notebook reads only these of its configuration's ``losses`` / ``independent_losses``
LDACE_LOSSES = ("BCE", "LDACE", "LDACE+CCL")
RETRIEVAL_LOSSES = SPA_LPR_LOSSES


def selected_losses(cfg: Any, wanted: Iterable[str], key: str = "losses") -> list[str]:
    """The losses of ``wanted`` that the configuration's ``key`` list holds, in ``wanted``'s order."""
    available = cfg.extra.get(key) or []
    return [name for name in wanted if name in available]


def xray_config(cfg: Any) -> Any:
    """Notebook 13's configuration for its real-X-ray section: the ``xray_dataset`` at ``xray_image_size``, trained
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
    """Notebook 13, section 1: (bundle, runs) of ``cfg.xray_losses`` on the real X-rays (:func:`xray_config`).
    Raises :class:`helpers.lessons.XrayDataMissing` when the data folder is absent."""
    from helpers.lessons import real_xray

    real_xray.require_folder(cfg.xray_dataset, cfg.data_dir)
    xray_cfg = xray_config(cfg)
    bundle = load_bundle(xray_cfg)
    return bundle, multilabel_runs(xray_cfg, bundle, cfg.xray_losses)
