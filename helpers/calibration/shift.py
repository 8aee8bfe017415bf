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

The estimators (EM, MAP-EM, BBSE, the source prior) are in :mod:`helpers.calibration.label_shift`.

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
from helpers.calibration import label_shift, posthoc
from helpers.calibration.label_shift import adjust_to_prior, em_target_prior
from helpers.calibration.temperature import TemperatureScaling
from helpers.metrics import stats

__all__ = [
    "adjust_to_prior",
    "em_target_prior",
    "PRIOR_MAP",
    "PRIOR_BBSE",
    "prior_vector_table",
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
PRIOR_MAP = " + TS + prior (MAP-EM)"
PRIOR_BBSE = " + TS + prior (BBSE)"
#: EM's iteration limit in :func:`model_probabilities`: where a share tends to 0 EM converges slowly (a 1-epoch smoke
#: model needed more than 10,000 iterations to move by less than 1e-6)
EM_MAX_ITER = 200_000
ORACLE_TS = " + TS fitted on the test set"


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
    cross-entropy also + vector scaling, + isotonic, and the prior corrections of
    :mod:`helpers.calibration.label_shift` on each test set's images (no labels): + TS + prior (EM), + TS + prior
    (MAP-EM), + TS + prior (BBSE, hard predictions on the calibration half as the labelled source data; soft BBSE
    where a class is never predicted there, listed in "bbse_never_predicted"),
    + vector scaling + prior (EM) (per-class biases first, as Alexandari et al. recommend), + TS + prior (true) (the
    test set's own class frequencies: an oracle) and + TS fitted on the test set (:func:`crossfit_temperature`: an
    oracle). The source prior π_s of every correction is the mean calibrated forecast on the calibration half
    (:func:`helpers.calibration.label_shift.source_prior`), per seed and calibrator. Returns ({test set: {model: one
    tensor per seed}}, {"temperatures", "em_priors", "priors" ({model: {test set: one vector per seed}}),
    "mean_forecast_priors" ({calibrated model: one π_s per seed}), "em_fixed_point_gaps" ({CE + TS: how far one EM
    step on the calibration half moves from π_s = "mean forecast" and from its "label frequencies", per seed}),
    "source_prior" (training label frequencies)})."""
    sets = data.test_sets(bundle)
    y_val, y_test = bundle.val.labels, bundle.test.labels
    probs: dict[str, dict[str, list[torch.Tensor]]] = {name: {} for name in sets}
    extras: dict[str, Any] = {"temperatures": {}, "em_priors": {}, "priors": {}, "mean_forecast_priors": {}}
    for (recipe, loss, _), run in runs.items():
        z_cal, y_cal = run.val_logits[calibration], y_val[calibration]
        scaler = TemperatureScaling().fit(z_cal, y_cal)
        key = f"{recipe}/{loss}"
        extras["temperatures"].setdefault(key, {}).setdefault("validation", []).append(float(scaler.temperature))
        scaled = scaler.transform(run.test_logits).double()
        for name, index in sets.items():
            probs[name].setdefault(key, []).append(run.test_probs[index].double())
            probs[name].setdefault(key + TS, []).append(scaled[index])
        if loss == CE:
            calibrators = {
                TS: scaler,
                " + vector scaling": posthoc.VectorScaling(max_iter=posthoc_max_iter).fit(z_cal, y_cal),
                " + isotonic": posthoc.IsotonicCalibration().fit(z_cal, y_cal),
            }
            _prior_corrections(probs, extras, key, run, calibrators, (z_cal, y_cal), sets, y_test, bundle.n_classes)
            for name, index in sets.items():
                oracle, fitted = crossfit_temperature(run.test_logits[index], y_test[index], seed=seed)
                probs[name].setdefault(key + ORACLE_TS, []).append(oracle)
                extras["temperatures"][key].setdefault(name, []).append(float(np.mean(fitted)))
    extras["source_prior"] = class_prior(bundle.train.labels, bundle.n_classes).tolist()
    return probs, extras


def _bbse(hard_cal, y_cal, scaled_cal, scaled, n_classes) -> torch.Tensor:
    """Hard BBSE (Lipton et al. 2018) where its confusion matrix is invertible; soft BBSE (probabilities, as
    Alexandari et al.'s code allows) where some class is never the arg-max on the calibration half.
    Where even soft BBSE's matrix is singular (a class absent from the calibration half, as in tiny smoke runs), BBSE
    cannot estimate the prior and π_s (no shift) is returned."""
    try:
        if label_shift.never_predicted(hard_cal, n_classes):
            return label_shift.bbse_target_prior(scaled_cal, y_cal, scaled, n_classes, soft=True)[0]
        return label_shift.bbse_target_prior(hard_cal, y_cal, scaled.argmax(1), n_classes)[0]
    except ValueError:
        return label_shift.source_prior(scaled_cal)


def _prior_corrections(probs, extras, key, run, calibrators, calibration_data, sets, y_test, n_classes) -> None:
    """Adds cross-entropy's + vector scaling, + isotonic and the prior corrections of :func:`model_probabilities`."""
    z_cal, y_cal = calibration_data
    source_ts = label_shift.source_prior(calibrators[TS].transform(z_cal).double())
    vector = calibrators[" + vector scaling"]
    source_vs = label_shift.source_prior(vector.transform(z_cal).double())
    extras["mean_forecast_priors"].setdefault(key + TS, []).append(source_ts.tolist())
    extras["mean_forecast_priors"].setdefault(key + " + vector scaling", []).append(source_vs.tolist())
    scaled_cal = calibrators[TS].transform(z_cal).double()
    frequencies = class_prior(y_cal, n_classes).clamp_min(1e-6)
    check = extras.setdefault("em_fixed_point_gaps", {}).setdefault(key + TS, {})
    check.setdefault("mean forecast", []).append(label_shift.em_fixed_point_gap(scaled_cal, source_ts))
    check.setdefault("label frequencies", []).append(label_shift.em_fixed_point_gap(scaled_cal, frequencies))
    hard_cal = z_cal.argmax(1)
    extras.setdefault("bbse_never_predicted", {}).setdefault(key, []).append(
        label_shift.never_predicted(hard_cal, n_classes)
    )
    for name, index in sets.items():
        add = probs[name]
        for suffix in (" + vector scaling", " + isotonic"):
            add.setdefault(key + suffix, []).append(calibrators[suffix].transform(run.test_logits[index]).double())
        scaled, vs = add[key + TS][-1], add[key + " + vector scaling"][-1]
        estimates = {
            PRIOR_EM: (scaled, source_ts, label_shift.em_target_prior(scaled, source_ts, EM_MAX_ITER)[0]),
            PRIOR_MAP: (scaled, source_ts, label_shift.map_em_target_prior(scaled, source_ts, max_iter=EM_MAX_ITER)[0]),
            PRIOR_BBSE: (scaled, source_ts, _bbse(hard_cal, y_cal, scaled_cal, scaled, n_classes)),
            PRIOR_EM_VS: (vs, source_vs, label_shift.em_target_prior(vs, source_vs, EM_MAX_ITER)[0]),
        }
        for suffix, (base, source, prior) in estimates.items():
            extras["priors"].setdefault(key + suffix, {}).setdefault(name, []).append(prior.tolist())
            add.setdefault(key + suffix, []).append(adjust_to_prior(base, source, prior.clamp_min(1e-12)))
        extras["em_priors"].setdefault(key + TS, {}).setdefault(name, []).append(
            extras["priors"][key + PRIOR_EM][name][-1]
        )
        em_vs = extras["priors"][key + PRIOR_EM_VS][name][-1]
        extras["em_priors"].setdefault(key + " + vector scaling", {}).setdefault(name, []).append(em_vs)
        true_prior = class_prior(y_test[index], n_classes).clamp_min(1e-6)
        add.setdefault(key + PRIOR_TRUE, []).append(adjust_to_prior(scaled, source_ts, true_prior))


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


def prior_vector_table(
    priors: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    labels: Mapping[str, Any],
    class_names: Sequence[str],
    mean_forecast_priors: Sequence[Sequence[float]],
    set_labels: Mapping[str, str] | None = None,
    row_labels: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The whole estimated target prior against the truth, per test set: rows (test set, estimate) with the true
    class shares, the source prior π_s (the mean calibrated forecast on the calibration half, ``mean_forecast_priors``
    one vector per seed) and each estimator of ``priors`` ({model: {test set: one vector per seed}}, as
    :func:`model_probabilities` returns); columns the classes (%, mean ± sd over seeds) and the total-variation
    distance to the truth, ½ Σ_k abs(π̂_k − π_k) (percentage points)."""
    k = len(class_names)

    def cell(values: Sequence[float]) -> str:
        summary = stats.seed_summary(values)
        return f"{summary['mean']:.1f}" + (f" ± {summary['sd']:.1f}" if summary["sd"] else "")

    def row(vectors: Sequence[Sequence[float]], truth: torch.Tensor) -> dict[str, str]:
        v = 100 * torch.as_tensor(vectors, dtype=torch.float64).reshape(-1, k)
        out = {c: cell(v[:, j].tolist()) for j, c in enumerate(class_names)}
        out["distance to truth (pp)"] = cell((0.5 * (v - 100 * truth).abs().sum(1)).tolist())
        return out

    rows = {}
    test_sets = dict.fromkeys(name for by_set in priors.values() for name in by_set)
    for name in test_sets:
        label = (set_labels or {}).get(name, name)
        truth = class_prior(labels[name], k)
        rows[(label, "truth")] = row([truth.tolist()], truth)
        rows[(label, "π_s: mean calibrated forecast, source")] = row(mean_forecast_priors, truth)
        for model, by_set in priors.items():
            if name in by_set:
                rows[(label, (row_labels or {}).get(model, model))] = row(by_set[name], truth)
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["test set", "class share (%)"])
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
