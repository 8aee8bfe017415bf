"""Notebook 13's real-X-ray section: the multi-label losses on real NIH ChestX-ray14 images, per-label and pooled.

The shared sample (1,000 images of NIH ChestX-ray14, Wang et al., "ChestX-ray8: Hospital-scale Chest X-ray
Database and Benchmarks on Weakly-Supervised Classification and Localization of Common Thorax Diseases", CVPR
2017) keeps ChestMNIST's patient-wise split (725 / 94 / 181 images); :func:`helpers.data.load_chestxray14`
reads it. This module checks that its folder is there (the section is skipped, and says so, where it is not: never a
silent fall-back to synthetic data) and builds the section's one table: per loss read-out, macro AUROC over a fixed
label set (the labels with at least 10 test positives), the pooled ECE
(every (image, label) forecast in one reliability diagram), the per-label ECE and ACE (each label's own
diagram, averaged over the 14 labels; ACE as in Neumann et al. 2018), mean ± sd over training seeds, beside the
constant-prevalence predictor, and paired bootstrap intervals of the difference to BCE
(:func:`helpers.metrics.paired_differences`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import torch

from helpers import data, metrics
from helpers.lessons import multilabel_comparison
from helpers.metrics import stats
from helpers.utils import display_name, display_path

#: the losses the section trains (focal and ASL add their φ read-outs, notebook 07)
XRAY_LOSSES = ("BCE", "focal", "ASL", "SPA", "SPA+LPR")
#: data set name → its folder in the data directory
FOLDERS = {"chestxray14": "ChestXray14"}
REFERENCE = "BCE"
#: metrics.macro_auroc's warning for a label with one class (directly, or summarised by a bootstrap)
AUROC_SKIP_WARNING = r"(.*e\.g\.: )?macro_auroc: skipped \d+ label[(]s[)] with a single class present"

#: macro AUROC averages the labels with at least this many test positives (and negatives), chosen once on the
#: whole test split so that every bootstrap resample averages the same labels
MIN_AUROC_POSITIVES = 10
#: the table's calibration metrics, by the names :data:`helpers.metrics.HIGHER_IS_BETTER` knows (the AUROC over the
#: fixed label set is added per table: its labels depend on the test split)
METRICS = {
    "multilabel_ece": metrics.multilabel_ece,
    "multilabel_ece_per_label": functools.partial(metrics.multilabel_ece, per_label=True),
    "multilabel_average_calibration_error_per_label": functools.partial(
        metrics.multilabel_average_calibration_error, per_label=True
    ),
}
HEADERS = {
    "fixed_label_macro_auroc": "macro AUROC, fixed labels (%)",
    "multilabel_ece": "ECE pooled (%)",
    "multilabel_ece_per_label": "ECE per label (%)",
    "multilabel_average_calibration_error_per_label": "ACE per label (%)",
}
#: the differences to BCE the table prints (the results JSON keeps every metric's)
SHOWN_DIFFERENCES = {
    "fixed_label_macro_auroc": "Δ AUROC",
    "multilabel_ece": "Δ ECE pooled",
    "multilabel_ece_per_label": "Δ ECE per label",
}
#: the reference row: every image gets each label's training prevalence (calibrated on average, ranks nothing)
CONSTANT = "constant prevalence"


class XrayDataMissing(FileNotFoundError):
    """The real X-rays' folder is not in the data directory."""


def folder(dataset: str, data_dir: str | None = None) -> Path:
    """Where ``dataset``'s files must be: ``<data dir>/<FOLDERS[dataset]>``."""
    if dataset not in FOLDERS:
        raise ValueError(f"the real-X-ray section reads one of {sorted(FOLDERS)}, not {dataset!r}")
    return data.resolve_data_dir(data_dir) / FOLDERS[dataset]


def require_folder(dataset: str, data_dir: str | None = None) -> Path:
    """The folder of :func:`folder`, or :class:`XrayDataMissing` saying where to put (or link) it."""
    path = folder(dataset, data_dir)
    if not path.is_dir():
        shown = display_path(path)  # no folder of this machine in notebook outputs and results
        raise XrayDataMissing(
            f"no {FOLDERS[dataset]} folder in the data directory ({shown} is absent): `python -m helpers.data fetch "
            f"{dataset}` says what to download and where to put it (or link a copy there: ln -s "
            f"<copy>/{FOLDERS[dataset]} {shown}, or pass data_dir); the real-X-ray section is skipped"
        )
    return path


class XrayTable(NamedTuple):
    """The section's printed table, the note under it, and the numbers for the results JSON."""

    table: pd.DataFrame
    note: str
    record: dict[str, Any]


def probabilities(
    runs: Mapping[tuple[str, int], Any], bundle: Any, losses: Sequence[str], seeds: Sequence[int]
) -> dict[str, list[torch.Tensor]]:
    """:func:`helpers.lessons.trained_probabilities` (each loss through its own link, focal / ASL also
    through φ) and the :data:`CONSTANT` row (one "seed"): a model that learnt only each label's
    prevalence would sit there, so a trained model's ECE is read against it."""
    prevalence = bundle.train.labels.float().mean(0)
    return {
        **multilabel_comparison.trained_probabilities(runs, losses, seeds),
        CONSTANT: [prevalence.expand_as(bundle.test.labels).clone()],
    }


def _single_class_labels(labels: torch.Tensor, class_names: Sequence[str]) -> list[str]:
    counts = labels.sum(0)
    return [name for name, count in zip(class_names, counts.tolist()) if count in (0, len(labels))]


def xray_table(probs: Mapping[str, Sequence[torch.Tensor]], bundle: Any, n: int, seed: int) -> XrayTable:
    """Mean ± sd over seeds of :data:`METRICS` per read-out on ``bundle``'s test split, and paired intervals of each
    read-out − BCE.

    Macro AUROC averages a FIXED set of labels, those with at least :data:`MIN_AUROC_POSITIVES` positives (and
    negatives) among the test images, chosen once before resampling (``metrics.fixed_label_macro_auroc``): every
    resample averages the same labels, and one that leaves a chosen label without positives is counted as
    degenerate. (``metrics.macro_auroc`` would average, in each resample, whichever labels still hold both classes:
    labels with 1–3 positives would drop in and out.) The note names the labels; a warning about single-class
    labels is replaced by that sentence, every other warning passes."""
    if REFERENCE not in probs:
        raise ValueError(f"the table compares every read-out with {REFERENCE!r}, which is not among {list(probs)}")
    labels = bundle.test.labels
    auroc_columns = metrics.labels_with_positives(labels, MIN_AUROC_POSITIVES)
    if not auroc_columns:
        raise ValueError(f"no label has {MIN_AUROC_POSITIVES} test positives and negatives: no macro AUROC to report")
    auroc_labels = [bundle.class_names[t] for t in auroc_columns]
    fns = {
        "fixed_label_macro_auroc": functools.partial(metrics.fixed_label_macro_auroc, columns=tuple(auroc_columns)),
        **METRICS,
    }
    single_class = _single_class_labels(labels, bundle.class_names)
    with warnings.catch_warnings():
        if single_class:
            warnings.filterwarnings("ignore", message=AUROC_SKIP_WARNING, category=RuntimeWarning)
        summaries = stats.seed_summaries(probs, labels, fns)
        differences = stats.paired_differences(probs, labels, fns, REFERENCE, n=n, seed=seed)
    table = stats.summary_table(summaries, list(fns)).set_axis(list(HEADERS.values()), axis=1)
    deltas = stats.difference_table(differences, REFERENCE, list(SHOWN_DIFFERENCES))
    for name, header in SHOWN_DIFFERENCES.items():
        column = deltas.table[f"{name} (%)"]
        table[f"{header} vs BCE (points)"] = [column.get(model, "") for model in probs]
    seeds = len(next(iter(probs.values())))
    auroc = (
        f" Macro AUROC averages the {len(auroc_labels)} labels with at least {MIN_AUROC_POSITIVES} test positives "
        f"({', '.join(auroc_labels)}), the same labels in every resample."
    )
    note = (
        f"{len(labels)} test images × {labels.shape[1]} labels; mean ± sd over {seeds} training "
        f"seed{'s' if seeds > 1 else ''}; 15 "
        f"equal-width bins.{auroc} {deltas.note}"
    )
    record = {
        "n_test": len(labels),
        "auroc_labels": auroc_labels,
        "models": summaries,
        "differences_vs_bce": {
            model: {name: stats.difference_record(result) for name, result in row.items()}
            for model, row in differences.items()
        },
    }
    return XrayTable(table, note, record)


def run_facts(bundle: Any, cfg: Any) -> dict[str, Any]:
    """What the section trained on, for its printed line and the results JSON: data set, size, epochs, seeds, split
    sizes and the test positives of each label (the per-label numbers rest on these few)."""
    return {
        "dataset": bundle.name,
        "image_size": int(cfg.xray_image_size),
        "epochs": int(cfg.xray_epochs),
        "seeds": [int(s) for s in cfg.xray_seeds],
        "split_sizes": {name: len(split.labels) for name, split in bundle.splits().items()},
        "test_positives": dict(zip(bundle.class_names, bundle.test.labels.sum(0).int().tolist())),
    }


def facts_line(facts: Mapping[str, Any]) -> str:
    """One line of :func:`run_facts`, for the notebook, in words: the data set's display name (a data set without
    one is a ``KeyError``) and the seeds as a range ("0–4") where they are consecutive."""
    sizes = " / ".join(f"{n:,}" for n in facts["split_sizes"].values())
    positives = ", ".join(f"{name} {count}" for name, count in facts["test_positives"].items())
    seeds = [int(s) for s in facts["seeds"]]
    consecutive = len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds)))
    seed_words = f"{seeds[0]}–{seeds[-1]}" if consecutive else ", ".join(map(str, seeds))
    return (
        f"{display_name('dataset', facts['dataset'])}, {facts['image_size']} px, train / val / test {sizes}, "
        f"{facts['epochs']} epochs, seeds {seed_words}; test positives per label: {positives}"
    )
