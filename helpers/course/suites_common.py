"""What every run suite of the notebooks shares: the training seeds, where a run is stored, training (or loading)
one run, the one summary line a suite prints, loading a configuration's data set, and the fair contest's selection
seeds and last step (choose on the complete grids, then train the chosen points at every seed).

The suites themselves: :mod:`helpers.course.suites_multiclass` (notebooks 01–06 and 12) and
:mod:`helpers.course.suites_multilabel` (notebooks 08–11); what each notebook declares:
:mod:`helpers.course.suites`.

Training seeds: a configuration's ``seeds`` knob (``[0, 1, 2, 3, 4]`` in the reference profiles of the notebooks
whose verdicts rest on them: 06, 11, 12), else ``[seed]``; the over-fitting recipe takes ``overfit_seeds`` where a
configuration sets it (06's reference profile: its three GPU-trained seeds, a run being ~15 minutes on a CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from helpers import data
from helpers.lessons import tuning
from helpers.training import run_log, run_store

OVERFITTING = "over-fitting"


def seeds_of(cfg: Any, recipe: str | None = None) -> list[int]:
    """The training seeds of a configuration: its ``seeds`` knob, else ``[seed]``. For the over-fitting ``recipe``
    its ``overfit_seeds`` knob where set (which must be among the seeds, so that every seed index of a recipe
    names the same seed in each of its models)."""
    extra = cfg.extra if hasattr(cfg, "extra") else {}
    seeds = [int(s) for s in extra["seeds"]] if extra.get("seeds") else [int(cfg.seed)]
    if recipe == OVERFITTING and extra.get("overfit_seeds"):
        chosen = [int(s) for s in extra["overfit_seeds"]]
        if chosen != seeds[: len(chosen)]:
            raise ValueError(
                f"overfit_seeds {chosen} must be the first seeds of seeds {seeds} (the over-fitting recipe's seeds "
                "are a prefix of the others, so seed i names one seed in both recipes); e.g. seeds=[0, 1, 2, 3, 4], "
                "overfit_seeds=[0, 1, 2]"
            )
        return chosen
    return seeds


def is_stored(cfg: Any) -> bool:
    """Runs of the reference profile are stored in the repository; others go to the local cache."""
    return cfg.profile == "reference"


def train_or_load(cfg: Any, name: str, loss: nn.Module, bundle: Any, model: str, config: Any) -> run_store.TrainedRun:
    """One run of a suite (:func:`helpers.training.train_run`: loaded when it exists, trained when it does not),
    stored in the repository when the configuration's profile is the reference one (:func:`is_stored`)."""
    return run_store.train_run(name, loss, bundle, model, config, stored=is_stored(cfg))


#: every suite (helpers.course.suites_multiclass, helpers.course.suites_multilabel) adds the runs it loads to the
#: notebook's ledger as one set (helpers.training.run_log; CALIBMED_VERBOSE=1 prints its summary and lists them)
summarised = run_log.summarised(lambda: run_store.training_version())


def load_bundle(cfg: Any, name: str | None = None) -> Any:
    """The configuration's data set (or the data set ``name``) at its image size, data folder, training-set size
    and seed (:func:`helpers.data.load_dataset`)."""
    return data.load_dataset(
        name or cfg.dataset, image_size=cfg.image_size, data_dir=cfg.data_dir, max_train=cfg.max_train, seed=cfg.seed
    )


# ----------------------------------------------------------------------------------------------------------------
# the fair contest (helpers.lessons.tuning): each loss's grid at the selection seeds, then its chosen point at every
# seed

#: how many of a configuration's seeds a grid is trained with (its first ones): a point's score is their mean
N_SELECTION_SEEDS = 2


def selection_seeds(cfg: Any) -> list[int]:
    """The seeds a hyper-parameter grid is trained with: the configuration's first two (its one seed where it has
    only one, as the smoke profile)."""
    return seeds_of(cfg)[:N_SELECTION_SEEDS]


def run_contest(
    grids: dict[str, tuning.Grid],
    grid_runs: dict[tuple[str, tuning.Point, int], run_store.TrainedRun],
    labels: torch.Tensor,
    multilabel: bool,
    tuned_runs: Callable[[dict[str, tuning.Point]], dict[Any, run_store.TrainedRun]],
    default_row: Callable[[str], str],
    split_seed: int,
    seeds: list[int],
) -> tuning.Contest:
    """The fair contest's last step (:mod:`helpers.lessons.tuning`): choose on the grids that are complete (every
    point at every selection seed in ``seeds``; while runs are only planned, a loss whose grid is not trained yet
    declares no tuned runs), then load or train the chosen points at every seed."""
    ready = {key: run for key, run in grid_runs.items() if run.source != "planned"}
    complete = [
        loss for loss in grids if all((loss, point, seed) in ready for point in grids[loss].points for seed in seeds)
    ]
    table, choices = tuning.grid_table(
        {key: run for key, run in ready.items() if key[0] in complete},
        grids,
        labels,
        lambda run: run.val_probs,
        multilabel=multilabel,
        seeds=seeds,
        split_seed=split_seed,
    )
    rows = [(default_row(loss), tuning.tuned_label(loss, grids[loss], point)) for loss, point in choices.items()]
    return tuning.Contest(grids, table, choices, tuned_runs(choices), rows, grid_runs, list(seeds))
