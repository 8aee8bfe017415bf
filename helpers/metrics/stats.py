"""Statistics across training seeds and models, and the narrow pandas tables the notebooks show.

* :func:`seed_summary` -- {"per_seed": [...], "mean": x, "sd": y} of one metric over training seeds (the cell format
  of the results JSONs); :func:`seed_summaries` computes it for every model and metric.
* :func:`paired_differences` -- for every model against a reference model, the paired bootstrap interval of the
  seed-averaged difference of every metric (:func:`helpers.metrics.paired_bootstrap`).
* :func:`summary_table` -- rows = models, columns = metrics, cells "mean ± sd" over seeds;
  :func:`difference_table` -- cells "Δ [low, high]" against the reference, flagged "beats" / "worse" where the
  interval excludes 0, with a note giving the number of comparisons.

A module of its own because :mod:`helpers.lessons.logit_analysis` analyses a trained model's logits (MbLS distances,
optimal confidence), whereas this is the reporting layer every comparison notebook (01-11) shares.

Two sources of variation are kept apart: "± sd" is the spread over training seeds (how much a re-run moves the
number); the bracketed interval is test-set sampling of a difference, with image difficulty cancelled by pairing.
A model "beats" the reference only when the interval excludes 0 in the metric's better direction. No correction for
multiple comparisons is applied; the note says how many intervals were computed, so a reader can judge how many
would exclude 0 by chance at the nominal level.

The metrics in :data:`POINT_ESTIMATE_ONLY` (the debiased ECE) are never bootstrapped: :func:`paired_differences`
and :func:`paired_comparisons` give their difference as a point estimate with no interval (``low`` and ``high``
NaN, no resamples), :func:`difference_table` prints the estimate alone and leaves it out of the count of
comparisons, and :func:`difference_record` writes ``low``/``high`` as null. The debiased ECE subtracts each bin's
sampling variance ``acc_b(1 - acc_b)/(n_b - 1)``, a correction that assumes ``n_b`` distinct images; a bootstrap
resample repeats images, so on a resample the correction is wrong and the percentile interval can exclude its own
estimate (docs/reading_the_numbers.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import torch

from helpers.metrics import bootstrapping, core
from helpers.metrics.bootstrapping import PairedBootstrapResult

__all__ = [
    "seed_summary",
    "seed_summaries",
    "paired_differences",
    "summary_table",
    "difference_table",
    "DifferenceTable",
    "difference_record",
    "HIGHER_IS_BETTER",
    "PERCENT_METRICS",
    "METRIC_LABELS",
    "POINT_ESTIMATE_ONLY",
    "point_estimate_only",
    "has_interval",
    "per_seed_table",
    "median_seed",
]

#: direction of every metric name the course's tables use (True: higher is better)
HIGHER_IS_BETTER: dict[str, bool] = {
    **dict.fromkeys(
        [
            "accuracy",
            "auroc_ovr",
            "macro_f1",
            "cohen_kappa",
            "jaccard",
            "melanoma_recall",
            "macro_auroc",
            "fixed_label_macro_auroc",
            "map_per_class",
            "map_per_example",
        ],
        True,
    ),
    **dict.fromkeys(
        [
            "ece",
            "smooth_ece",
            "adaptive_ece",
            "classwise_ece",
            "debiased_ece",
            "average_calibration_error",
            "mce",
            "nll",
            "brier",
            "multilabel_ece",
            "multilabel_ece_per_label",
            "multilabel_smooth_ece",
            "multilabel_average_calibration_error",
            "multilabel_average_calibration_error_per_label",
            "multilabel_mce",
            "multilabel_brier",
            "multilabel_nll",
            "hamming_loss",
            "true_rms",
        ],
        False,
    ),
}

#: metrics shown in percent (× 100) in the tables; the others (NLL, Brier, κ) as they are
PERCENT_METRICS = frozenset(
    name
    for name in HIGHER_IS_BETTER
    if name not in {"nll", "multilabel_nll", "brier", "multilabel_brier", "cohen_kappa"}
)


#: column headers in words for the metric keys of the tables (pass ``labels=METRIC_LABELS`` to the table builders)
METRIC_LABELS: dict[str, str] = {
    "accuracy": "accuracy",
    "auroc_ovr": "AUROC",  # one-vs-rest; a header gets " (%)", so no parentheses here
    "macro_f1": "macro F1",
    "cohen_kappa": "Cohen's κ",
    "melanoma_recall": "melanoma recall",
    "macro_auroc": "macro AUROC",
    "fixed_label_macro_auroc": "macro AUROC (fixed labels)",
    "map_per_class": "mAP@y",
    "map_per_example": "mAP@x",
    "hamming_loss": "Hamming loss",
    "ece": "ECE",
    "smooth_ece": "smooth ECE",
    "adaptive_ece": "adaptive ECE",
    "classwise_ece": "class-wise ECE",
    "debiased_ece": "debiased ECE",
    "average_calibration_error": "average calibration error",
    "mce": "MCE",
    "nll": "NLL",
    "brier": "Brier",
    "multilabel_ece": "ECE (pooled)",
    "multilabel_ece_per_label": "ECE (per label)",
    "multilabel_smooth_ece": "smooth ECE (pooled)",
    "multilabel_brier": "Brier",
    "multilabel_nll": "NLL",
    "true_rms": "RMS error vs exact posteriors",
    "confidence_minus_accuracy": "confidence − accuracy",
    "mean_confidence": "mean confidence",
    "median_distance": "median logit distance",
}


#: metrics reported as a point estimate only, never with a bootstrap interval, by every difference helper here: the
#: debiased ECE's n_b − 1 correction assumes distinct samples, and a bootstrap resample repeats images. A metric is
#: recognised by its key in the metric dict or by its function's name (``functools.partial`` unwrapped).
POINT_ESTIMATE_ONLY: frozenset[str] = frozenset({"debiased_ece"})


def point_estimate_only(name: str, fn: Callable[..., float] | None = None) -> bool:
    """True when the metric ``name`` (computed by ``fn``) is in :data:`POINT_ESTIMATE_ONLY`: its difference is
    reported without an interval."""
    function_name = getattr(getattr(fn, "func", fn), "__name__", None)
    return name in POINT_ESTIMATE_ONLY or function_name in POINT_ESTIMATE_ONLY


def _seed_values(fn: Callable[..., float], probs: Sequence[Any], labels: Any, model: str) -> list[float]:
    values = [float(fn(p, labels)) for p in probs]
    if any(math.isnan(v) for v in values):
        raise ValueError(f"{getattr(fn, '__name__', fn)} is undefined (NaN) on the full test set for {model}: {values}")
    return values


def _point_estimate(values_a: Sequence[float], values_b: Sequence[float], level: float = 0.95) -> PairedBootstrapResult:
    """mean over seeds of a − mean over seeds of b, with no interval: ``low`` and ``high`` NaN (so ``excludes_zero``
    is False) and no resamples."""
    estimate = float(np.mean(values_a) - np.mean(values_b))
    empty = torch.empty(0, dtype=torch.float64)
    return PairedBootstrapResult(estimate, math.nan, math.nan, level, empty, len(values_a), len(values_b))


def has_interval(result: PairedBootstrapResult) -> bool:
    """False for a point estimate of a :data:`POINT_ESTIMATE_ONLY` metric (no resamples, NaN bounds)."""
    return result.samples.numel() > 0 and math.isfinite(result.low) and math.isfinite(result.high)


def seed_summary(values: Sequence[float]) -> dict[str, Any]:
    """{"per_seed": [...], "mean": mean, "sd": sample standard deviation (ddof = 1), None for a single seed}."""
    per_seed = [float(v) for v in values]
    if not per_seed:
        raise ValueError("seed_summary needs at least one value (one per training seed)")
    undefined = [s for s, v in enumerate(per_seed) if not math.isfinite(v)]
    if undefined:
        raise ValueError(
            f"seed_summary: the values of seed position(s) {undefined} are not finite ({per_seed}); "
            "the metric is undefined there: drop it from the table or fix the model"
        )
    sd = float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else None
    return {"per_seed": per_seed, "mean": float(np.mean(per_seed)), "sd": sd}


def _target(targets: Mapping[str, Any] | None, metric_name: str, labels: Any) -> Any:
    return (targets or {}).get(metric_name, labels)


def seed_summaries(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    metric_fns: Mapping[str, Callable[..., float]],
    targets: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{model: {metric: seed_summary([metric(probs_s, labels) for each seed s])}} -- the "models" block of a
    results JSON. ``probs_by_model[model]`` is a list with one probability tensor per training seed (a model without
    seeds, such as the Bayes model, is a list of one). ``targets`` replaces ``labels`` for the named metrics (e.g.
    the exact posteriors for ``true_rms``)."""
    return {
        model: {
            name: seed_summary([fn(p, _target(targets, name, labels)) for p in _as_list(probs, model)])
            for name, fn in metric_fns.items()
        }
        for model, probs in probs_by_model.items()
    }


def _as_list(probs: Any, model: str) -> list[Any]:
    if isinstance(probs, (list, tuple)):
        if not probs:
            raise ValueError(f"model {model!r} has no probability tensor (one per training seed expected)")
        return list(probs)
    return [probs]


def paired_differences(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    metric_fns: Mapping[str, Callable[..., float]],
    reference: str,
    n: int = 1000,
    seed: int = 0,
    targets: Mapping[str, Any] | None = None,
    n_by_metric: Mapping[str, int] | None = None,
) -> dict[str, dict[str, PairedBootstrapResult]]:
    """{model: {metric: paired_bootstrap(metric, model's seeds, reference's seeds)}} for every model but the
    reference. The same ``seed`` gives every comparison the same resamples. ``n_by_metric`` overrides ``n`` for
    slow metrics without a weighted form (e.g. {"smooth_ece": 200}: relplot takes ~30 ms per call). A metric of
    :data:`POINT_ESTIMATE_ONLY` gets its point estimate only (no interval, no resamples)."""
    if reference not in probs_by_model:
        raise ValueError(f"reference model {reference!r} is not among the models {list(probs_by_model)}")
    reference_probs = _as_list(probs_by_model[reference], reference)
    n_by_metric = n_by_metric or {}

    def difference(name: str, fn: Callable[..., float], model: str, probs: list[Any]) -> PairedBootstrapResult:
        target = _target(targets, name, labels)
        if point_estimate_only(name, fn):
            y = core.to_tensor(target, "labels")
            return _point_estimate(_seed_values(fn, probs, y, model), _seed_values(fn, reference_probs, y, reference))
        return bootstrapping.paired_bootstrap(fn, probs, reference_probs, target, n=n_by_metric.get(name, n), seed=seed)

    return {
        model: {name: difference(name, fn, model, _as_list(probs, model)) for name, fn in metric_fns.items()}
        for model, probs in probs_by_model.items()
        if model != reference
    }


def difference_record(result: PairedBootstrapResult) -> dict[str, Any]:
    """A JSON-ready dict of one paired difference (estimate, interval, level, resamples, degenerate resamples);
    a point estimate without interval (:data:`POINT_ESTIMATE_ONLY`) has ``low`` and ``high`` None and 0 resamples."""
    interval = has_interval(result)
    return {
        "estimate": result.estimate,
        "low": result.low if interval else None,
        "high": result.high if interval else None,
        "level": result.level,
        "n_resamples": int(result.samples.numel()),
        "n_degenerate": result.n_degenerate,
    }


def _scale_and_digits(
    metric_name: str,
    scale: Mapping[str, float] | None,
    digits: Mapping[str, int] | None,
    labels: Mapping[str, str] | None = None,
) -> tuple[float, int, str]:
    """(multiplier, decimals, column header) of one metric; the header is the metric's key, or its label in
    ``labels`` when given (then every metric needs one)."""
    percent = metric_name in PERCENT_METRICS
    factor = (scale or {}).get(metric_name, 100.0 if percent else 1.0)
    decimals = (digits or {}).get(metric_name, 1 if factor == 100.0 else 3)
    if labels is not None and metric_name not in labels:
        raise ValueError(
            f"no label for metric {metric_name!r} in labels; add one (stats.METRIC_LABELS has the course's metrics)"
        )
    name = labels[metric_name] if labels is not None else metric_name
    return factor, decimals, f"{name} (%)" if factor == 100.0 else name


def _metric_names(rows: Mapping[str, Mapping[str, Any]], columns: Sequence[str] | None) -> list[str]:
    if columns is not None:
        return list(columns)
    if not rows:
        raise ValueError("the table has no model")
    return list(next(iter(rows.values())))


def summary_table(
    summaries: Mapping[str, Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    scale: Mapping[str, float] | None = None,
    digits: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Rows = models, columns = metrics, cells "mean ± sd" over training seeds ("mean" alone for one seed).

    ``summaries`` is {model: {metric: seed_summary dict, or the list of per-seed values}} (:func:`seed_summaries`).
    Metrics in :data:`PERCENT_METRICS` are shown × 100 with 1 decimal and "(%)" in the header, the others as they
    are with 3 decimals; ``scale`` / ``digits`` override per metric name; ``labels`` (e.g. :data:`METRIC_LABELS`)
    names the columns in words instead of by metric key.
    """
    names = _metric_names(summaries, columns)
    table = {}
    for name in names:
        factor, decimals, header = _scale_and_digits(name, scale, digits, labels)
        cells = []
        for model, row in summaries.items():
            if name not in row:
                raise KeyError(f"model {model!r} has no value for metric {name!r}")
            summary = row[name] if isinstance(row[name], Mapping) else seed_summary(row[name])
            cell = f"{factor * summary['mean']:.{decimals}f}"
            if summary["sd"] is not None:
                cell += f" ± {factor * summary['sd']:.{decimals}f}"
            cells.append(cell)
        table[header] = cells
    return pd.DataFrame(table, index=pd.Index(list(summaries), name="model"))


def per_seed_table(
    summaries: Mapping[str, Mapping[str, Any]],
    columns: Sequence[str],
    seeds: Sequence[int],
    scale: Mapping[str, float] | None = None,
    digits: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per (model, training seed), columns = metrics: the values behind the "mean ± sd" cells of
    :func:`summary_table` (same scaling, decimals and ``labels``). A model with one value (no seeds, e.g. the
    constant predictor) is left out. For an expert block: with several models it has more than 12 rows."""
    rows, index = [], []
    for model, row in summaries.items():
        values = {
            name: row[name]["per_seed"] if isinstance(row[name], Mapping) else list(row[name]) for name in columns
        }
        if any(len(v) != len(seeds) for v in values.values()):
            continue
        for position, seed in enumerate(seeds):
            cells = {}
            for name in columns:
                factor, decimals, header = _scale_and_digits(name, scale, digits, labels)
                cells[header] = f"{factor * values[name][position]:.{decimals}f}"
            rows.append(cells)
            index.append((model, seed))
    if not rows:
        raise ValueError(f"no model has one value per seed for seeds {list(seeds)}")
    return pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index, names=["model", "seed"]))


def median_seed(per_seed: Sequence[float]) -> int:
    """The position of the seed whose value is the median (the lower median for an even count): the typical seed
    to plot, rather than the first one."""
    if not per_seed:
        raise ValueError("median_seed needs at least one value")
    order = sorted(range(len(per_seed)), key=lambda position: (per_seed[position], position))
    return order[(len(order) - 1) // 2]


class DifferenceTable(NamedTuple):
    """The paired-difference DataFrame, the note to print under it, and the number of intervals in it."""

    table: pd.DataFrame
    note: str
    n_comparisons: int


def _verdict(result: PairedBootstrapResult, higher_is_better: bool) -> str:
    if not result.excludes_zero:
        return ""
    return "beats" if (result.low > 0) == higher_is_better else "worse"


def difference_table(
    differences: Mapping[str, Mapping[str, PairedBootstrapResult]],
    reference: str,
    columns: Sequence[str] | None = None,
    higher_is_better: Mapping[str, bool] | None = None,
    scale: Mapping[str, float] | None = None,
    digits: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> DifferenceTable:
    """Rows = models, columns = metrics, cells "Δ [low, high]" of (model − reference), suffixed "beats" or "worse"
    where the interval excludes 0 (better or worse in the metric's direction, :data:`HIGHER_IS_BETTER`, overridden
    by ``higher_is_better``). ``differences`` comes from :func:`paired_differences`; scaling and ``labels`` as in
    :func:`summary_table`. A difference without interval (:data:`POINT_ESTIMATE_ONLY`) shows its estimate alone
    and is not counted as a comparison. Returns the table, a note (reference, level, resamples, number of
    comparisons, degenerate resamples, the point estimates) and the number of comparisons (intervals)."""
    names = _metric_names(differences, columns)
    directions = {**HIGHER_IS_BETTER, **(higher_is_better or {})}
    unknown = [name for name in names if name not in directions]
    if unknown:
        raise ValueError(f"no direction known for metric(s) {unknown}; pass higher_is_better={{name: True/False}}")
    table, n_resamples, degenerate, levels, n_flagged, n_comparisons = {}, {}, {}, set(), 0, 0
    point_only = []
    for name in names:
        factor, decimals, header = _scale_and_digits(name, scale, digits, labels)
        cells = []
        for model, row in differences.items():
            result = row[name]
            if not has_interval(result):
                cells.append(f"{factor * result.estimate:+.{decimals}f}")
                if header not in point_only:
                    point_only.append(header)
                continue
            n_comparisons += 1
            verdict = _verdict(result, directions[name])
            n_flagged += bool(verdict)
            cell = (
                f"{factor * result.estimate:+.{decimals}f} "
                f"[{factor * result.low:+.{decimals}f}, {factor * result.high:+.{decimals}f}]"
            )
            cells.append(f"{cell} {verdict}" if verdict else cell)
            n_resamples[name] = int(result.samples.numel())
            levels.add(result.level)
            if result.n_degenerate:
                degenerate[f"{model}/{name}"] = result.n_degenerate
        table[header] = cells
    if n_comparisons:
        most = max(set(n_resamples.values()), key=list(n_resamples.values()).count)
        exceptions = ", ".join(f"{name}: {count}" for name, count in n_resamples.items() if count != most)
        level = ", ".join(f"{100 * value:g} %" for value in sorted(levels))
        note = (
            f"Δ = model − {reference}, mean over training seeds; {level} paired bootstrap intervals over the test "
            f"set (n = {most} resamples{f'; {exceptions}' if exceptions else ''}; each resample is shared by both "
            f'models and every seed). "beats"/"worse": the interval excludes 0 — {n_flagged} of {n_comparisons} '
            f"comparisons, no correction for multiple comparisons (with no real difference about "
            f"{(1 - min(levels)) * n_comparisons:.1f} would exclude 0 by chance)."
        )
    else:
        note = f"Δ = model − {reference}, mean over training seeds."
    if degenerate:
        note += " Resamples left out (metric undefined): " + ", ".join(f"{k} {v}" for k, v in degenerate.items()) + "."
    if point_only:
        note += (
            f" {', '.join(point_only)}: point estimate only, no interval (its n_b − 1 correction assumes distinct "
            "images; a bootstrap resample repeats them)."
        )
    frame = pd.DataFrame(table, index=pd.Index(list(differences), name=f"vs {reference}"))
    return DifferenceTable(frame, note, n_comparisons)


# ----------------------------------------------------------------------------------------------------------------
# many paired comparisons on shared resamples, each model evaluated once
# ----------------------------------------------------------------------------------------------------------------
__all__ += [
    "resampled_metric",
    "resampled_metric_per_seed",
    "models_of_pairs",
    "percentile_result",
    "paired_comparisons",
]


def _resample_indices(n_rows: int, n: int, seed: int, device: torch.device) -> torch.Tensor:
    """The (n, N) index sets :func:`helpers.metrics.paired_bootstrap` draws for ``seed`` (same generator calls)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(n_rows, (n, n_rows), generator=generator).to(device)


def resampled_metric(
    metric: Callable[..., float], probs: Sequence[Any], labels: Any, n: int = 1000, seed: int = 0
) -> tuple[float, torch.Tensor]:
    """(mean over seeds of metric on the full test set, (n,) mean over seeds of metric on each resample).

    The resamples are exactly those of :func:`helpers.metrics.paired_bootstrap` with the same ``n`` and ``seed``,
    so the difference of two models' resampled values is that function's ``samples`` (NaN where the metric is
    undefined for some seed). Metrics with a weighted form (:mod:`helpers.metrics.weighted`) evaluate all resamples
    at once; others are called once per resample and seed.
    """
    full, resampled = resampled_metric_per_seed(metric, probs, labels, n=n, seed=seed)
    return float(np.mean(full)), resampled.mean(0)


def resampled_metric_per_seed(
    metric: Callable[..., float], probs: Sequence[Any], labels: Any, n: int = 1000, seed: int = 0
) -> tuple[list[float], torch.Tensor]:
    """(metric of each training seed on the full test set, (S, n) metric of each seed on each resample): the
    per-seed values :func:`resampled_metric` averages (the same resamples; NaN where undefined)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n (number of bootstrap resamples) must be an integer >= 2, got {n!r}")
    y = core.to_tensor(labels, "labels")
    if y.ndim < 1 or y.shape[0] == 0:
        raise ValueError(f"labels is empty (shape {tuple(y.shape)}); metrics need at least one sample")
    per_seed = bootstrapping.per_seed(probs, "probs", y.shape[0])
    y = y.to(per_seed[0].device)
    full = [float(metric(p, y)) for p in per_seed]
    if any(math.isnan(v) for v in full):
        raise ValueError(
            f"{getattr(metric, '__name__', metric)} is undefined (NaN) on the full test set for some seed: {full}"
        )
    indices = _resample_indices(y.shape[0], n, seed, y.device)
    with bootstrapping.one_cpu_thread():
        evaluators = [bootstrapping.weighted_evaluator(metric, p, y) for p in per_seed]
        if evaluators[0] is not None:
            chunk = max(1, min(n, core.CHUNK_ENTRIES // y.shape[0]))
            values = []
            for start in range(0, n, chunk):
                rows = indices[start : start + chunk]
                weights = torch.zeros(rows.shape, dtype=torch.float64, device=rows.device)
                weights.scatter_add_(1, rows, torch.ones(1, dtype=torch.float64, device=rows.device).expand_as(rows))
                values.append(torch.stack([evaluate(weights) for evaluate in evaluators]))
            resampled = torch.cat(values, dim=1).cpu()
        else:
            resampled = torch.tensor(
                [[bootstrapping.metric_or_nan(metric, p[index], y[index]) for index in indices] for p in per_seed],
                dtype=torch.float64,
            )
    return full, resampled


def models_of_pairs(
    probs_by_model: Mapping[str, Sequence[Any]], pairs: Sequence[tuple[str, str]], level: float
) -> list[str]:
    """The models that ``pairs`` name, each once in order of appearance, after checking ``level`` and that every
    model named is in ``probs_by_model`` (the argument checks of :func:`paired_comparisons` and
    :func:`helpers.metrics.two_stage_comparisons`)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    unknown = sorted({name for pair in pairs for name in pair} - set(probs_by_model))
    if unknown:
        raise ValueError(f"pairs name model(s) {unknown} that are not in probs_by_model {list(probs_by_model)}")
    return list(dict.fromkeys(name for pair in pairs for name in pair))


def percentile_result(
    estimate: float,
    samples: torch.Tensor,
    level: float,
    n_seeds: tuple[int, int],
    metric_name: str,
    pair: tuple[str, str],
) -> PairedBootstrapResult:
    """A paired difference's result from its replicate ``samples``: the (1 ∓ level)/2 quantiles of the defined
    (non-NaN) replicates; ValueError naming the metric and the pair when no replicate is defined."""
    valid = samples[~torch.isnan(samples)]
    if valid.numel() == 0:
        raise ValueError(f"{metric_name} is undefined on every resample for {pair[0]} vs {pair[1]}")
    tails = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(valid, tails).tolist()
    return PairedBootstrapResult(estimate, low, high, level, samples, *n_seeds)


def paired_comparisons(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    metric_fns: Mapping[str, Callable[..., float]],
    pairs: Sequence[tuple[str, str]],
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[tuple[str, str], dict[str, PairedBootstrapResult]]:
    """{(model, reference): {metric: paired bootstrap of model − reference}} for every pair in ``pairs``.

    Equal, result by result, to :func:`helpers.metrics.paired_bootstrap` (and so to :func:`paired_differences`)
    with the same ``n``, ``seed`` and ``level``, but each model's metric is evaluated on the shared resamples once
    (:func:`resampled_metric`) rather than once per comparison it takes part in: with many comparisons against a
    few references (every loss against CE and against CE + TS) this divides the cost by about twice the number of
    comparisons per model. A metric of :data:`POINT_ESTIMATE_ONLY` is evaluated on the full test set only: its
    results are point estimates without interval (as in :func:`paired_differences`).
    """
    needed = models_of_pairs(probs_by_model, pairs, level)
    results: dict[tuple[str, str], dict[str, PairedBootstrapResult]] = {tuple(pair): {} for pair in pairs}
    for metric_name, fn in metric_fns.items():
        if point_estimate_only(metric_name, fn):
            y = core.to_tensor(labels, "labels")
            full = {model: _seed_values(fn, _as_list(probs_by_model[model], model), y, model) for model in needed}
            for model, reference in pairs:
                results[(model, reference)][metric_name] = _point_estimate(full[model], full[reference], level)
            continue
        values = {
            model: resampled_metric(fn, _as_list(probs_by_model[model], model), labels, n=n, seed=seed)
            for model in needed
        }
        for model, reference in pairs:
            (full_a, samples_a), (full_b, samples_b) = values[model], values[reference]
            results[(model, reference)][metric_name] = percentile_result(
                full_a - full_b,
                samples_a - samples_b,
                level,
                (len(_as_list(probs_by_model[model], model)), len(_as_list(probs_by_model[reference], reference))),
                metric_name,
                (model, reference),
            )
    return results
