"""Which runs each notebook trains: one declaration shared by the notebooks and the reference-run command.

A notebook calls one of the suite functions (:mod:`helpers.course.suites_multiclass`,
:mod:`helpers.course.suites_multilabel`; all of them reachable from here, as ``suites.multiclass_runs(...)``) with
its resolved configuration and gets every trained run it needs, each loaded when it exists (stored reference run or
local cache) and trained when it does not (:func:`helpers.training.train_run`). :data:`DECLARED_RUNS` names, per
notebook, the function that loads every run it reads; the command (:mod:`helpers.course.train_runs`)

    python -m helpers.course.train_runs train [--profile reference] [--notebooks 02 03] [--device cuda] [--workers 4]
    python -m helpers.course.train_runs list  [--profile reference]

builds the same configurations from each notebook's ``PROFILES`` table (:func:`reference_config`) and trains every
declared run that is not stored yet (:func:`train_declared`), one at a time (or ``--workers`` processes side by side
on a GPU), storing each as it finishes: stop it at any point and it resumes where it stopped. In the ``reference``
profile runs are stored in ``stored_runs/`` (committed); in the other profiles they go to the local cache.
``CALIBMED_RETRAIN=1`` retrains the stored runs that older training code produced
(:func:`helpers.training.is_current`), so a retrain resumes too.

Notebook 00 reads the stored runs' records and times the recipes here (:func:`stored_run_records`,
:func:`time_recipes`, :func:`stored_run_table`).

Training seeds: a configuration's ``seeds`` knob (``[0, 1, 2]`` in the reference profile), else ``[seed]``.
"""

from __future__ import annotations

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

from helpers import data
from helpers.course import runner
from helpers.course.profiles import configure, in_words
from helpers.course.suites_common import (  # noqa: F401 (the suites' names, for the notebooks)
    is_stored,
    load_bundle,
    seeds_of,
    selection_seeds,
    summarised,
)
from helpers.course.suites_multiclass import (  # noqa: F401
    MULTICLASS_LOSSES,
    RECIPE_NAMES,
    RunKey,
    ccl_sweep_runs,
    margin_sweep_runs,
    multiclass_contest,
    multiclass_grid_runs,
    multiclass_loss_name,
    multiclass_runs,
    recipe_epochs,
    recipe_model,
    shift_bundles,
    shift_recipes,
    shift_runs,
    synthetic_ccl_runs,
    tuned_multiclass_runs,
)
from helpers.course.suites_multilabel import (  # noqa: F401
    LDACE_LOSSES,
    RETRIEVAL_LOSSES,
    SPA_LPR_LOSSES,
    multilabel_contest,
    multilabel_grid_runs,
    multilabel_runs,
    multilabel_variant_runs,
    selected_losses,
    spa_lpr_runs,
    xray_config,
    xray_runs,
)
from helpers.training import models, run_checks, run_store
from helpers.training import recipes as training_recipes

# ----------------------------------------------------------------------------------------------------------------
# what each notebook declares


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


def _declare_08(cfg: Any) -> None:
    bundles = {"coupled": load_bundle(cfg)}
    if cfg.extra.get("independent_dataset"):
        bundles["independent"] = load_bundle(cfg, cfg.independent_dataset)
    spa_lpr_runs(cfg, bundles)


def _declare_09(cfg: Any) -> None:
    multilabel_runs(cfg, load_bundle(cfg), selected_losses(cfg, LDACE_LOSSES))
    if cfg.extra.get("independent_dataset"):
        multilabel_runs(
            cfg, load_bundle(cfg, cfg.independent_dataset), selected_losses(cfg, LDACE_LOSSES, "independent_losses")
        )


def _declare_10(cfg: Any) -> None:
    multilabel_runs(cfg, load_bundle(cfg), selected_losses(cfg, RETRIEVAL_LOSSES))


def _declare_11(cfg: Any) -> None:
    multilabel_runs(cfg, load_bundle(cfg), cfg.losses)
    if cfg.extra.get("independent_dataset"):
        multilabel_runs(cfg, load_bundle(cfg, cfg.independent_dataset), cfg.independent_losses)


def _declare_13(cfg: Any) -> None:
    """Notebook 13: the real-X-ray runs (section 1) and the fair contest with its paper rows (section 2)."""
    from helpers.lessons import real_xray

    bundle = load_bundle(cfg)
    multilabel_runs(cfg, bundle, cfg.losses)
    multilabel_contest(cfg, bundle)
    if cfg.extra.get("xray_dataset"):
        try:
            xray_runs(cfg)
        except real_xray.XrayDataMissing as missing:  # the section is skipped; say so where the runs are trained
            warnings.warn(f"{cfg.notebook}: the real-X-ray runs are not declared: {missing}", stacklevel=2)


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
    "11_multilabel_comparison": _declare_11,
    "12_dataset_shift": _declare_12,
    "13_multilabel_xrays_and_contest": _declare_13,
}


def reference_config(notebook: str, profile: str = "reference", **knobs: Any) -> Any:
    """A notebook's resolved configuration for ``profile``, from its own ``PROFILES`` table (printing nothing)."""
    profiles = runner.notebook_profiles(notebook)
    with contextlib.redirect_stdout(io.StringIO()):
        return configure(notebook, profiles, profile=profile, **knobs)


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
    dataset, model and name. A file that cannot be read, or whose definition is not the run its name is the key of,
    is named in a warning and left out (the other runs' records are still read)."""
    from pathlib import Path

    records = []
    for path in sorted(Path(root or run_store.STORED_RUNS_DIR).glob("*/*.npz")):
        try:
            records.append(_stored_run_record(path))
        except run_store.DamagedRunError as error:
            warnings.warn(
                f"{error}; this stored run is left out of the records. Restore it (git checkout -- {path}) or "
                "delete it and train it again (make reference-runs)",
                stacklevel=2,
            )
    return sorted(records, key=lambda r: (r["dataset"], r["model"], r["name"]))


def _stored_run_record(path: Any) -> dict[str, Any]:
    """One record of :func:`stored_run_records`; :class:`helpers.training.DamagedRunError` naming the file when
    it cannot be read or its definition is not the run its name is the key of."""
    meta = run_store.read_stored_meta(path)
    definition = meta["definition"]
    try:
        run_checks.check_stored_definition(path, meta, path.stem)
        return {
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
    except (ValueError, KeyError, TypeError) as error:
        raise run_store.DamagedRunError(
            f"{path}: cannot read this stored run's metadata ({type(error).__name__}: {error})"
        ) from error


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
    The timed trainings print nothing (no progress bar or log line).
    """
    from helpers.losses import CrossEntropy
    from helpers.training import prediction, train

    n_timed = min(timing_images, len(bundle.train.labels))
    subset = dataclasses.replace(
        bundle,
        train=data.Split(bundle.train.images[:n_timed], bundle.train.labels[:n_timed]),
        val=data.Split(bundle.val.images[:128], bundle.val.labels[:128]),
    )
    timing = {}
    for recipe, n_epochs in run_epochs.items():
        model_name = training_recipes.recipe_model(recipe, model)
        torch.manual_seed(seed)
        net = models.build_model(model_name, bundle.n_channels, bundle.n_classes, image_size=bundle.image_size)
        config = training_recipes.recipe_config(
            recipe, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, device=device, progress=False
        )  # no training log line: the notebook prints the timing table
        fitted = train.fit(net, CrossEntropy(), subset, config)
        started = time.perf_counter()
        prediction.predict_logits(fitted.model, bundle.val.images, batch_size=config.eval_batch_size)
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
    table["model"] = table["model"].map(in_words)
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
    table = table.rename(index=in_words).rename_axis(["data set", "model", "epochs"])
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
