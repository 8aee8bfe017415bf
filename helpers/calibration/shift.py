"""Calibration under dataset shift (notebook 12): the prior-shift correction, an oracle temperature, and every
model of a shift study evaluated on each of its test sets.

**Prior (label) shift.** If a new hospital sees the classes in other proportions, π_t ≠ π_s, but each class looks
the same, p_t(x | y) = p_s(x | y), Bayes' rule gives the new posterior from the old one:

    p_t(y | x) = [π_t(y) / π_s(y)] p_s(y | x) / Σ_k [π_t(k) / π_s(k)] p_s(k | x)

(Saerens, Latinne & Decaestecker, "Adjusting the outputs of a classifier to new a priori probabilities", Neural
Computation 14(1), 2002, eq. 2.4: :func:`adjust_to_prior`). In logits it adds log π_t(k) − log π_s(k) to class k: a
per-class offset, which one temperature cannot express. With π_t unknown, their EM algorithm (eqs. 2.9–2.10,
:func:`em_target_prior`) alternates the adjustment above and π_t(k) = mean of the adjusted p_t(k | x) over the
unlabelled test images. The adjustment assumes p_s(y | x) is calibrated on the source; Alexandari, Kundaje &
Shrikumar (ICML 2020) find EM hard to beat once the source model is calibrated first, which is why the course
applies it after temperature scaling. It corrects prior shift only: images that look different (other devices,
other clinics: covariate shift) are not its business.

**Oracle temperature.** :func:`crossfit_temperature` fits a temperature on the *shifted* test images themselves
(two-fold cross-fitting, so no image is scored by a temperature fitted on it): what temperature scaling could do
with labelled data from the new hospital, the upper bound a validation-fitted temperature is compared with.

Compute only; the figures are in :mod:`helpers.plots.shift_plots`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from helpers import data, metrics
from helpers import metrics as metrics_module  # shift_difference_table's argument `metrics` shadows the package
from helpers.calibration import posthoc
from helpers.calibration.temperature import TemperatureScaling
from helpers.metrics import stats

__all__ = [
    "adjust_to_prior",
    "em_target_prior",
    "crossfit_temperature",
    "class_prior",
    "class_share_table",
    "CE",
    "model_probabilities",
    "shift_summaries",
    "temperature_table",
    "prior_estimate_table",
    "without_recipe",
    "shift_table",
    "shift_differences",
    "shift_difference_table",
    "results_block",
]

CE = "cross-entropy"
TS = " + TS"
#: the post-hoc maps notebook 12 applies to cross-entropy, by the suffix of the model's name
PRIOR_EM = " + TS + prior (EM)"
PRIOR_TRUE = " + TS + prior (true)"
PRIOR_EM_VS = " + vector scaling + prior (EM)"
ORACLE_TS = " + TS fitted on the test set"


def _prior(prior: Any, k: int, what: str) -> torch.Tensor:
    p = torch.as_tensor(prior, dtype=torch.float64).flatten()
    if p.numel() != k or not torch.isfinite(p).all() or (p <= 0).any():
        raise ValueError(f"{what} must be {k} finite positive class frequencies, got {p.tolist()}")
    return p / p.sum()


def _probabilities(probs: Any) -> torch.Tensor:
    """(N, K) class probabilities in float64, checked as the metrics check them
    (:func:`helpers.metrics.multiclass_probabilities`: finite, in [0, 1], rows summing to 1)."""
    return metrics.multiclass_probabilities(probs, "probs").to(torch.float64)


def adjust_to_prior(probs: Any, source_prior: Any, target_prior: Any) -> torch.Tensor:
    """Saerens et al. (2002), eq. 2.4: probabilities for a population with class prior ``target_prior`` from
    probabilities ``probs`` (N, K) of a model whose training prior was ``source_prior`` (each rescaled to sum 1).
    ``probs`` must be probabilities (a ValueError for logits, NaN, negative or unnormalised rows). Float64 out."""
    p = _probabilities(probs)
    ratio = _prior(target_prior, p.shape[1], "target_prior") / _prior(source_prior, p.shape[1], "source_prior")
    adjusted = p * ratio
    return adjusted / adjusted.sum(1, keepdim=True)


def em_target_prior(
    probs: Any, source_prior: Any, max_iter: int = 10_000, tol: float = 1e-6
) -> tuple[torch.Tensor, int]:
    """Saerens et al. (2002), eqs. 2.9–2.10: the maximum-likelihood class prior of unlabelled images with source
    probabilities ``probs`` (N, K), by EM from ``source_prior``; returns (prior, iterations). Stops when no class's
    prior moves by more than ``tol``; raises if ``max_iter`` is reached first (the estimate would be unfinished).
    ``probs`` must be probabilities (a ValueError for logits, NaN, negative or unnormalised rows)."""
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r} (EM needs at least one step)")
    p = _probabilities(probs)
    source = _prior(source_prior, p.shape[1], "source_prior")
    prior = source.clone()
    for iteration in range(1, max_iter + 1):
        updated = adjust_to_prior(p, source, prior).mean(0)
        moved = float((updated - prior).abs().max())
        prior = updated.clamp_min(1e-12)
        if moved <= tol:
            return prior / prior.sum(), iteration
    raise RuntimeError(f"EM for the target prior did not converge in {max_iter} iterations (last move {moved:.2e})")


def crossfit_temperature(logits: Any, labels: Any, folds: int = 2, seed: int = 0) -> tuple[torch.Tensor, list[float]]:
    """The oracle of a shifted test set: each image's probabilities under a temperature fitted on the other folds
    of the same set (stratified, seeded). Returns (probabilities (N, K), the fitted temperatures)."""
    z = torch.as_tensor(logits)
    y = torch.as_tensor(labels)
    _check_folds(folds, y)
    generator = torch.Generator().manual_seed(seed)
    fold_of = torch.empty(len(y), dtype=torch.long)
    for k in torch.unique(y):
        members = torch.nonzero(y == k)[:, 0]
        members = members[torch.randperm(members.numel(), generator=generator)]
        fold_of[members] = torch.arange(members.numel()) % folds
    probs = torch.empty(z.shape, dtype=torch.float64)
    temperatures = []
    for fold in range(folds):
        held = fold_of == fold
        scaler = TemperatureScaling().fit(z[~held], y[~held])
        probs[held] = scaler.transform(z[held]).double()
        temperatures.append(float(scaler.temperature))
    return probs, temperatures


def _check_folds(folds: Any, labels: torch.Tensor) -> None:
    """``folds`` must be an integer >= 2 (no image is scored by a temperature fitted on it) and at most the size of
    the largest class: the folds are dealt out class by class, so a fold beyond that would be empty."""
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(
            f"folds must be an integer, at least 2 (no image is scored by a temperature fitted on it), got {folds!r}"
        )
    largest = int(torch.unique(labels, return_counts=True)[1].max()) if labels.numel() else 0
    if folds > largest:
        raise ValueError(
            f"folds={folds} but the largest class has {largest} images: each fold takes one image of a class in "
            f"turn, so folds beyond that would be empty; use folds <= {largest}"
        )


def class_prior(labels: Any, n_classes: int) -> torch.Tensor:
    """Class frequencies of ``labels`` (float64, sum 1); a class absent from the labels gets frequency 0.
    ``labels`` must be a non-empty (N,) array of integer class indices in [0, ``n_classes``)."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise ValueError(f"n_classes must be a positive integer, got {n_classes!r}")
    y = torch.as_tensor(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must have shape (N,) of class indices, got shape {tuple(y.shape)}")
    if y.dtype == torch.bool or y.is_floating_point() or y.is_complex():
        raise ValueError(f"labels must hold integer class indices, got dtype {y.dtype}; pass labels.long()")
    if y.numel() == 0:
        raise ValueError("no labels: class frequencies need at least one label")
    low, high = int(y.min()), int(y.max())
    if low < 0 or high >= n_classes:
        raise ValueError(
            f"labels must lie in [0, {n_classes - 1}] for n_classes = {n_classes}, got range [{low}, {high}]"
        )
    counts = torch.bincount(y.long(), minlength=n_classes).double()
    return counts / counts.sum()


def class_share_table(labels_by_set: Mapping[str, Any], class_names: Sequence[str]) -> pd.DataFrame:
    """Rows = image sets, columns = classes (% of the set's images) and the set's size: the class priors a
    model meets."""
    rows = {}
    for name, labels in labels_by_set.items():
        share = 100 * class_prior(labels, len(class_names))
        rows[name] = {**{c: round(float(v), 1) for c, v in zip(class_names, share)}, "images": len(labels)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("class share (%)")


def model_probabilities(
    runs: Mapping[tuple[str, str, int], Any],
    bundle: data.DatasetBundle,
    calibration: torch.Tensor,
    posthoc_max_iter: int = 300,
    seed: int = 0,
) -> tuple[dict[str, dict[str, list[torch.Tensor]]], dict[str, Any]]:
    """Test probabilities of every model of a shift study, per test set (:func:`helpers.data.test_sets`).

    ``runs`` maps (recipe, loss, seed) to a trained run (:func:`helpers.course.shift_runs`). Models, named
    ``"<recipe>/<model>"``: each loss raw and + TS (fitted on the ``calibration`` part of validation); for
    cross-entropy also + vector scaling, + isotonic, + TS + prior (EM) (:func:`em_target_prior` on each test set's
    images, no labels), + vector scaling + prior (EM) (per-class biases first, as Alexandari et al. recommend),
    + TS + prior (true) (the test set's own class frequencies: an oracle) and + TS fitted on
    the test set (:func:`crossfit_temperature`: an oracle). The source prior is the training split's. Returns
    ({test set: {model: one tensor per seed}}, {"temperatures": …, "em_priors": …}) for the results JSON."""
    sets = data.test_sets(bundle)
    source = class_prior(bundle.train.labels, bundle.n_classes)
    y_val, y_test = bundle.val.labels, bundle.test.labels
    probs: dict[str, dict[str, list[torch.Tensor]]] = {name: {} for name in sets}
    temperatures: dict[str, dict[str, list[float]]] = {}
    em_priors: dict[str, dict[str, list[list[float]]]] = {}
    for (recipe, loss, _), run in runs.items():
        z_cal, y_cal = run.val_logits[calibration], y_val[calibration]
        scaler = TemperatureScaling().fit(z_cal, y_cal)
        key = f"{recipe}/{loss}"
        temperatures.setdefault(key, {}).setdefault("validation", []).append(float(scaler.temperature))
        scaled = scaler.transform(run.test_logits).double()
        extra = {}
        if loss == CE:
            extra = {
                " + vector scaling": posthoc.VectorScaling(max_iter=posthoc_max_iter).fit(z_cal, y_cal),
                " + isotonic": posthoc.IsotonicCalibration().fit(z_cal, y_cal),
            }
        for name, index in sets.items():
            add = probs[name]
            add.setdefault(key, []).append(run.test_probs[index].double())
            add.setdefault(key + TS, []).append(scaled[index])
            if loss != CE:
                continue
            for suffix, calibrator in extra.items():
                add.setdefault(key + suffix, []).append(calibrator.transform(run.test_logits[index]).double())
            prior, _ = em_target_prior(scaled[index], source)
            em_priors.setdefault(key + TS, {}).setdefault(name, []).append(prior.tolist())
            add.setdefault(key + PRIOR_EM, []).append(adjust_to_prior(scaled[index], source, prior))
            vector = add[key + " + vector scaling"][-1]
            vector_prior, _ = em_target_prior(vector, source)
            em_priors.setdefault(key + " + vector scaling", {}).setdefault(name, []).append(vector_prior.tolist())
            add.setdefault(key + PRIOR_EM_VS, []).append(adjust_to_prior(vector, source, vector_prior))
            true_prior = class_prior(y_test[index], bundle.n_classes).clamp_min(1e-6)
            add.setdefault(key + PRIOR_TRUE, []).append(adjust_to_prior(scaled[index], source, true_prior))
            oracle, fitted = crossfit_temperature(run.test_logits[index], y_test[index], seed=seed)
            add.setdefault(key + ORACLE_TS, []).append(oracle)
            temperatures[key].setdefault(name, []).append(float(np.mean(fitted)))
    return probs, {"temperatures": temperatures, "em_priors": em_priors, "source_prior": source.tolist()}


def shift_summaries(
    probs: Mapping[str, Mapping[str, Sequence[torch.Tensor]]],
    labels: Mapping[str, Any],
    metric_fns: Mapping[str, Callable[..., float]],
) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """{model: {test set: {metric: seed summary}}} (:func:`helpers.metrics.seed_summaries` per test set, re-nested
    model first: the ``models`` block of notebook 12's results JSON). ``labels``: {test set: its labels}."""
    nested: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for name, by_model in probs.items():
        for model, summary in stats.seed_summaries(by_model, labels[name], metric_fns).items():
            nested.setdefault(model, {})[name] = summary
    return nested


def without_recipe(models: Sequence[str]) -> dict[str, str]:
    """{"<recipe>/<model>": "<model>"}: row labels for a table of one recipe."""
    return {model: model.split("/", 1)[-1] for model in models}


def temperature_table(
    temperatures: Mapping[str, Mapping[str, Sequence[float]]],
    set_labels: Mapping[str, str] | None = None,
    validation_label: str = "validation (HAM10000)",
) -> pd.DataFrame:
    """Rows = "<recipe>/<model>", columns = where the temperature was fitted ("validation", then each test set's
    oracle), cells "mean ± sd" over seeds (:func:`model_probabilities`' ``temperatures``)."""
    rows = {}
    for model, by_source in temperatures.items():
        rows[model] = {}
        for source, values in by_source.items():
            summary = stats.seed_summary(values)
            cell = f"{summary['mean']:.2f}" + (f" ± {summary['sd']:.2f}" if summary["sd"] is not None else "")
            label = validation_label if source == "validation" else f"{(set_labels or {}).get(source, source)} (oracle)"
            rows[model][label] = cell
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("temperature T fitted on")


def prior_estimate_table(
    em_priors: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    labels: Mapping[str, Any],
    class_names: Sequence[str],
    class_name: str,
    source_prior: Sequence[float],
    set_labels: Mapping[str, str] | None = None,
    probs: Mapping[str, Mapping[str, Sequence[torch.Tensor]]] | None = None,
) -> pd.DataFrame:
    """One class's prior (%) per test set: its share in training, its true share in the test set, EM's estimate
    from the unlabelled test images and, with ``probs`` ({test set: {model: one tensor per seed}}), the model's
    mean forecast of the class on that test set (mean ± sd over seeds), per model (for one recipe). EM starts
    from the training share and stays there when the mean forecast equals it; the mean forecast shows how far the
    model's own probabilities are from the training share before EM amplifies the difference."""
    k = list(class_names).index(class_name)

    def cell(values: Sequence[float]) -> str:
        summary = stats.seed_summary(values)
        return f"{summary['mean']:.1f}" + (f" ± {summary['sd']:.1f}" if summary["sd"] else "")

    rows = {}
    for model, by_set in em_priors.items():
        for name, priors in by_set.items():
            true_share = 100 * float(class_prior(labels[name], len(class_names))[k])
            row = {
                f"{class_name}, training (%)": round(100 * source_prior[k], 1),
                f"{class_name}, test set (%)": round(true_share, 1),
            }
            if probs is not None:
                row["mean forecast (%)"] = cell([100 * float(p[:, k].mean()) for p in probs[name][model]])
            row["EM estimate (%)"] = cell([100 * p[k] for p in priors])
            rows[(model.split("/", 1)[-1], (set_labels or {}).get(name, name))] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["EM on the outputs of", "test set"])
    return frame


def _column(metric: str, test_set: str, set_labels: Mapping[str, str]) -> str:
    unit = " (%)" if metric in stats.PERCENT_METRICS else ""
    return f"{stats.METRIC_LABELS.get(metric, metric)}{unit}, {set_labels.get(test_set, test_set)}"


def shift_table(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    models: Sequence[str],
    columns: Sequence[tuple[str, str]],
    set_labels: Mapping[str, str] | None = None,
    row_labels: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Rows = ``models``, columns = (metric, test set) pairs, cells "mean ± sd" over seeds; percent metrics × 100
    with 1 decimal, the others with 3. A model without that test set shows "—"."""
    set_labels = set_labels or {}
    table = {}
    for metric, test_set in columns:
        factor, decimals = (100.0, 1) if metric in stats.PERCENT_METRICS else (1.0, 3)
        cells = []
        for model in models:
            summary = summaries.get(model, {}).get(test_set, {}).get(metric)
            if summary is None:
                cells.append("—")
                continue
            cell = f"{factor * summary['mean']:.{decimals}f}"
            cells.append(cell + (f" ± {factor * summary['sd']:.{decimals}f}" if summary["sd"] is not None else ""))
        table[_column(metric, test_set, set_labels)] = cells
    index = [(row_labels or {}).get(model, model) for model in models]
    return pd.DataFrame(table, index=pd.Index(index, name="model"))


def _compared_per_set(
    probs: Mapping[str, Mapping[str, Any]], models: Sequence[str], reference: str
) -> list[tuple[str, dict[str, Any]]]:
    """(test set, {model: probabilities}) for every test set that holds the reference and at least one model."""
    found = []
    for name, by_model in probs.items():
        present = {m: by_model[m] for m in [reference, *models] if m in by_model}
        if reference in present and len(present) > 1:
            found.append((name, present))
    return found


def shift_differences(
    probs: Mapping[str, Mapping[str, Sequence[torch.Tensor]]],
    labels: Mapping[str, Any],
    metric_fns: Mapping[str, Callable[..., float]],
    models: Sequence[str],
    reference: str,
    n: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{test set: {model: {metric: paired bootstrap result}}} of each of ``models`` against ``reference`` on every
    test set that holds both (:func:`helpers.metrics.paired_differences`, the same resamples for every model)."""
    return {
        name: stats.paired_differences(present, labels[name], metric_fns, reference, n=n, seed=seed)
        for name, present in _compared_per_set(probs, models, reference)
    }


def seed_aware_shift_differences(
    probs: Mapping[str, Mapping[str, Sequence[torch.Tensor]]],
    labels: Mapping[str, Any],
    metric_fns: Mapping[str, Callable[..., float]],
    models: Sequence[str],
    reference: str,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[dict[str, dict[str, dict[str, Any]]], float, str]:
    """As :func:`shift_differences` (same shape), but each interval resamples the training seeds as well as the test
    images (:func:`helpers.metrics.two_stage_comparisons`) and all of them, over every test set, model and metric,
    are simultaneous max-T intervals (:func:`helpers.metrics.max_t_adjust`); also returns the critical value and
    what was resampled, in words (with one training seed, as in the smoke profile, the test images only)."""
    raw: dict[str, dict[str, dict[str, Any]]] = {}
    one_seed = any(len(seeds) < 2 for by_model in probs.values() for seeds in by_model.values())
    compare = metrics.paired_comparisons if one_seed else metrics.two_stage_comparisons
    resampled = "the test images only (one training seed)" if one_seed else metrics.TWO_STAGE
    for name, present in _compared_per_set(probs, models, reference):
        pairs = [(m, reference) for m in present if m != reference]
        found = compare(present, labels[name], metric_fns, pairs, n=n, seed=seed, level=level)
        raw[name] = {m: found[(m, reference)] for m, _ in pairs}
    flat = {(name, m, k): r for name, by_model in raw.items() for m, row in by_model.items() for k, r in row.items()}
    adjusted, critical = metrics.max_t_adjust(flat, level=level)
    out: dict[str, dict[str, dict[str, Any]]] = {name: {m: {} for m in by_model} for name, by_model in raw.items()}
    for (name, model, metric_name), result in adjusted.items():
        out[name][model][metric_name] = result
    return out, critical, resampled


def shift_difference_table(
    differences: Mapping[str, Mapping[str, Mapping[str, Any]]],
    reference: str,
    metrics: Sequence[str],
    set_labels: Mapping[str, str] | None = None,
    row_labels: Mapping[str, str] | None = None,
    critical: float | None = None,
    resampled: str = "",
) -> stats.DifferenceTable:
    """Rows = models, columns = (metric, test set), cells "Δ [low, high]" of model − ``reference`` with "beats" /
    "worse" where the interval excludes 0 (:func:`helpers.metrics.difference_table` per test set, side by side).
    ``critical`` (and ``resampled``): the intervals are the simultaneous ones of :func:`seed_aware_shift_differences`,
    and the note says so."""
    set_labels = set_labels or {}
    frames, notes, n_comparisons = [], [], 0
    for name, by_model in differences.items():
        result = stats.difference_table(by_model, reference, columns=list(metrics))
        result.table.columns = [f"Δ {_column(m, name, set_labels)}" for m in metrics]
        frames.append(result.table)
        notes.append(result.note)
        n_comparisons += result.n_comparisons
    table = pd.concat(frames, axis=1).fillna("—")
    table.index = pd.Index([(row_labels or {}).get(m, m) for m in table.index], name=f"vs {reference}")
    flagged = sum(cell.endswith(("beats", "worse")) for cell in table.to_numpy().ravel())
    if critical is not None:
        note = (
            f"Δ = model − {reference}, mean over training seeds; intervals: {resampled or metrics_module.TWO_STAGE}, "
            "simultaneous "
            f"over the table's {n_comparisons} intervals (max-T, {critical:.2f} standard errors where one interval "
            f'alone would use 1.96). "beats"/"worse": the interval excludes 0 — {flagged} of {n_comparisons}.'
        )
        return stats.DifferenceTable(table, note, n_comparisons)
    note = notes[0].split('"beats"')[0] + (
        f'"beats"/"worse": the interval excludes 0 — {flagged} of {n_comparisons} comparisons, no correction for '
        f"multiple comparisons (about {0.05 * n_comparisons:.1f} would exclude 0 by chance with no real difference)."
    )
    return stats.DifferenceTable(table, note, n_comparisons)


def results_block(differences: Mapping[str, Mapping[str, Mapping[str, Any]]], reference: str) -> dict[str, Any]:
    """JSON-ready {test set: {"<model> − <reference>": {metric: difference record}}}."""
    return {
        name: {
            f"{model} − {reference}": {metric: stats.difference_record(r) for metric, r in row.items()}
            for model, row in by_model.items()
        }
        for name, by_model in differences.items()
    }
