"""The tables of notebook 06 (every multi-class loss, side by side), built from its models' probabilities.

Notebook 06 asks one primary question — *does any training loss beat cross-entropy + temperature scaling on NLL
and on ECE, in each recipe?* — and answers it with :func:`primary_table`: one row per loss, per recipe the paired
differences against CE + TS with their intervals and a verdict ("beats" / "worse" / "no difference detected", the
course's rule: an interval that excludes 0). Everything else the notebook computes is secondary and folded:

* :func:`metric_functions` — the twelve metrics of the tables, keyed as in the results JSON;
  :data:`LABELS` — their column headers in words (:data:`helpers.metrics.METRIC_LABELS`, the L2 estimate named);
* :func:`seed_table` — mean ± sd over seeds per recipe and model, the class prior (constant) first;
* :class:`Census` — the paired-difference tables of the expert blocks, and the count of distinct comparisons
  (an accuracy difference against CE and against CE + TS is one comparison: temperature scaling keeps the arg-max);
* :func:`point_differences` — differences of seed means with no interval, for the metrics reported as point
  estimates only (the debiased ECE: its n_b − 1 correction assumes distinct samples, and a bootstrap resample
  repeats images);
* :func:`verdict_sentences` — the key numbers as sentences (no printed lists), for the results JSON;
* :func:`history_windows`, :func:`confidence_profile`, :func:`dca_fitted_batch_factor` — what the stored runs show
  about DCA under the over-fitting recipe without retraining (training histories, test confidences, and the DCA
  gradient on a batch the model classifies correctly).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from helpers import metrics
from helpers.calibration import TemperatureScaling
from helpers.metrics import class_focus, decisions, stats

__all__ = [
    "LABELS",
    "POINT_ESTIMATE_ONLY",
    "NO_DIFFERENCE",
    "metric_functions",
    "mean_sd",
    "seed_table",
    "verdict",
    "primary_table",
    "primary_record",
    "point_differences",
    "Census",
    "verdict_sentences",
    "history_windows",
    "confidence_profile",
    "dca_fitted_batch_factor",
    "outside_own_interval",
    "key_number_sentences",
    "epoch_to_epoch_change",
    "typical_seed",
    "posthoc_probabilities",
    "biopsy_decision",
]

#: column headers in words; the L2 estimate of Kumar et al. (2019) is not on the binned ECE's scale, so it says so
LABELS: dict[str, str] = {**stats.METRIC_LABELS, "auroc_ovr": "AUROC (OvR)", "debiased_ece": "debiased ECE (L2)"}
#: metrics reported as a point estimate only, never with a bootstrap interval (the helpers' constant where it exists)
POINT_ESTIMATE_ONLY: frozenset[str] = frozenset(getattr(stats, "POINT_ESTIMATE_ONLY", {"debiased_ece"}))
NO_DIFFERENCE = "no difference detected"


def metric_functions(class_names: Sequence[str]) -> dict[str, Callable[..., float]]:
    """{metric key: function(probs, labels)} of notebook 06's tables: discrimination (accuracy, one-vs-rest AUROC,
    macro F1, Cohen's κ, the recall of the classes
    :mod:`helpers.metrics.class_focus` names), calibration (binned, smooth,
    debiased, adaptive and class-wise ECE) and the proper scores (NLL, Brier)."""
    return {
        "accuracy": metrics.accuracy,
        "auroc_ovr": metrics.auroc_ovr,
        "macro_f1": metrics.macro_f1,
        "cohen_kappa": metrics.cohen_kappa,
        **class_focus.class_recall_metrics(class_names),
        "ece": metrics.ece,
        "smooth_ece": metrics.smooth_ece,
        "debiased_ece": metrics.debiased_ece,
        "adaptive_ece": metrics.adaptive_ece,
        "classwise_ece": metrics.classwise_ece,
        "nll": metrics.nll,
        "brier": metrics.brier,
    }


def mean_sd(cell: Mapping[str, Any], scale: float = 100.0, digits: int = 1) -> str:
    """ "mean ± sd" of a :func:`helpers.metrics.seed_summary` cell (the mean alone for one seed)."""
    text = f"{scale * cell['mean']:.{digits}f}"
    return text + (f" ± {scale * cell['sd']:.{digits}f}" if cell["sd"] is not None else "")


def seed_table(
    summaries: Mapping[str, Mapping[str, Any]],
    recipes: Sequence[str],
    models: Sequence[str],
    columns: Sequence[str],
    baseline: tuple[str, Mapping[str, float]] | None = None,
    extra: Mapping[str, Mapping[str, str]] | None = None,
) -> pd.DataFrame:
    """Rows (recipe, model), cells "mean ± sd" over training seeds of ``summaries["<recipe>/<model>"]``; headers
    in words (:data:`LABELS`). ``baseline`` = (name, {metric: value}) puts a constant predictor first in each
    recipe; ``extra`` adds columns {header: {"<recipe>/<model>": text}} ("—" where a row has none)."""
    frames = {}
    for recipe in recipes:
        rows = {baseline[0]: {m: [baseline[1][m]] for m in columns}} if baseline else {}
        rows.update({model: summaries[f"{recipe}/{model}"] for model in models})
        table = stats.summary_table(rows, columns, labels=LABELS)
        for header, cells in (extra or {}).items():
            table[header] = [cells.get(f"{recipe}/{model}", "—") for model in table.index]
        frames[recipe] = table
    return pd.concat(frames, names=["recipe", "model"])


def verdict(result: Any, metric_name: str) -> str:
    """ "beats" / "worse" where the paired interval excludes 0 (in the metric's better / worse direction), else
    "no difference detected" — never "the same": an interval containing 0 does not show equality."""
    if not (result.low > 0 or result.high < 0):
        return NO_DIFFERENCE
    return "beats" if (result.low > 0) == stats.HIGHER_IS_BETTER[metric_name] else "worse"


def _interval(result: Any, metric_name: str) -> str:
    factor, digits = (100.0, 1) if metric_name in stats.PERCENT_METRICS else (1.0, 3)
    low, high = factor * result.low, factor * result.high
    return f"{factor * result.estimate:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _joint_verdict(verdicts: Mapping[str, str]) -> str:
    """One verdict over several metrics: "worse on NLL and ECE", "beats on NLL; no difference detected on ECE"."""
    if len(set(verdicts.values())) == 1:
        only = next(iter(verdicts.values()))
        return only if only == NO_DIFFERENCE else f"{only} on " + " and ".join(LABELS[m] for m in verdicts)
    groups: dict[str, list[str]] = {}
    for metric_name, text in verdicts.items():
        groups.setdefault(text, []).append(LABELS[metric_name])
    order = ("beats", "worse", NO_DIFFERENCE)
    return "; ".join(f"{text} on {' and '.join(groups[text])}" for text in order if text in groups)


def primary_table(
    differences: Mapping[tuple[str, str], Mapping[str, Any]],
    recipes: Sequence[str],
    losses: Sequence[str],
    reference: str,
    metric_names: Sequence[str] = ("nll", "ece"),
    interval: str = "95 %",
) -> pd.DataFrame:
    """The primary question's table: rows = losses, per recipe the Δ (loss − reference) of each metric with its
    interval (``interval`` names it in the header, e.g. "simultaneous 95 %") and one verdict.
    ``differences[("<recipe>/<loss>", "<recipe>/<reference>")][metric]`` holds the paired bootstrap results
    (:func:`helpers.metrics.paired_comparisons`, or the adjusted ones of
    :func:`helpers.lessons.seed_aware.seed_aware_differences`). NLL differences in nats, ECE differences in
    percentage points."""
    columns: dict[tuple[str, str], list[str]] = {}
    for recipe in recipes:
        for metric_name in metric_names:
            unit = " (pp)" if metric_name in stats.PERCENT_METRICS else ""
            columns[(recipe, f"Δ {LABELS[metric_name]}{unit} [{interval}]")] = []
        columns[(recipe, "verdict")] = []
        for loss in losses:
            by_metric = differences[(f"{recipe}/{loss}", f"{recipe}/{reference}")]
            for metric_name in metric_names:
                unit = " (pp)" if metric_name in stats.PERCENT_METRICS else ""
                columns[(recipe, f"Δ {LABELS[metric_name]}{unit} [{interval}]")].append(
                    _interval(by_metric[metric_name], metric_name)
                )
            columns[(recipe, "verdict")].append(_joint_verdict({m: verdict(by_metric[m], m) for m in metric_names}))
    table = pd.DataFrame(columns, index=pd.Index(list(losses), name=f"loss − ({reference})"))
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["recipe", ""])
    return table


def primary_record(
    differences: Mapping[tuple[str, str], Mapping[str, Any]],
    recipes: Sequence[str],
    losses: Sequence[str],
    reference: str,
    metric_names: Sequence[str] = ("nll", "ece"),
    intervals: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The primary question and its answer for the results JSON: {"question", "reference", "answer": {recipe:
    {loss: {metric: {estimate, low, high, verdict}}}}, "beats": {recipe: {metric: [losses]}}, "intervals": how the
    intervals were made (``intervals``, e.g. :meth:`helpers.lessons.seed_aware.SeedAwareDifferences.record`)}."""
    answer: dict[str, Any] = {}
    beats: dict[str, Any] = {}
    for recipe in recipes:
        answer[recipe], beats[recipe] = {}, {m: [] for m in metric_names}
        for loss in losses:
            by_metric = differences[(f"{recipe}/{loss}", f"{recipe}/{reference}")]
            answer[recipe][loss] = {}
            for m in metric_names:
                result = by_metric[m]
                text = verdict(result, m)
                answer[recipe][loss][m] = {
                    "estimate": result.estimate,
                    "low": result.low,
                    "high": result.high,
                    "verdict": text,
                }
                if text == "beats":
                    beats[recipe][m].append(loss)
    return {
        "question": f"does any training loss beat {reference} on "
        + " and on ".join(LABELS[m] for m in metric_names)
        + ", in each recipe?",
        "reference": reference,
        "answer": answer,
        "beats": beats,
        **({"intervals": dict(intervals)} if intervals is not None else {}),
    }


def point_differences(
    summaries: Mapping[str, Mapping[str, Any]],
    pairs: Iterable[tuple[str, str]],
    metric_names: Iterable[str] = POINT_ESTIMATE_ONLY,
) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """{(model, reference): {metric: {"estimate": mean(model) − mean(reference), "low": None, "high": None,
    "interval": "none: point estimate only"}}} for the metrics reported without an interval."""
    return {
        (model, reference): {
            name: {
                "estimate": summaries[model][name]["mean"] - summaries[reference][name]["mean"],
                "low": None,
                "high": None,
                "interval": "none: point estimate only",
            }
            for name in metric_names
        }
        for model, reference in pairs
    }


class Census:
    """The paired-difference tables of the expert blocks and the count of the comparisons in them.

    ``tally[table] = (comparisons, intervals excluding 0)``; ``distinct`` holds each distinct comparison once: an
    accuracy difference (``argmax_only`` metrics) of "X + TS" − "Y + TS" or − "Y" is that of X − Y, since
    temperature scaling never changes the arg-max. ``clipped`` = {(model, metric)} cells shown as clipped and not
    counted (isotonic regression's NLL, which gives some true classes probability 0)."""

    def __init__(
        self,
        differences: Mapping[tuple[str, str], Mapping[str, Any]],
        clipped: Iterable[tuple[str, str]] = (),
        argmax_only: Iterable[str] = ("accuracy",),
        n_seeds: int | Mapping[str, int] = 1,
        n_resamples: int = 0,
    ):
        self.differences = differences
        self.clipped = set(clipped)
        self.argmax_only = set(argmax_only)
        self.n_seeds, self.n_resamples = n_seeds, n_resamples
        self.tally: dict[str, tuple[int, int]] = {}
        self.distinct: dict[tuple, Any] = {}

    def _register(self, recipe: str, model: str, reference: str, metric_name: str, result: Any) -> None:
        def canonical(name: str) -> str:
            return name.removesuffix(" + TS") if metric_name in self.argmax_only else name

        key = (recipe, canonical(model), canonical(reference), metric_name)
        first = self.distinct.setdefault(key, result)
        if first is not result and not (
            first.estimate == result.estimate and torch.equal(first.samples, result.samples)
        ):
            self.distinct[key + (model, reference)] = result  # not the same numbers after all: its own comparison

    def _seeds_of(self, recipe: str) -> int:
        """The number of training seeds of a recipe (``n_seeds`` per recipe, or one count for all)."""
        return self.n_seeds if isinstance(self.n_seeds, int) else self.n_seeds[recipe]

    def frame(
        self, label: str, recipe: str, references: Mapping[str, Sequence[str]], columns: Sequence[str]
    ) -> tuple[pd.DataFrame, str]:
        """(table, note) of Δ [low, high] for each model − reference of ``references`` ({reference: [models]}) in
        one recipe; the comparisons are counted under ``f"{label}, {recipe}"``."""
        frames, n, flagged, clipped = {}, 0, 0, False
        for reference, models in references.items():
            rows = {model: self.differences[(f"{recipe}/{model}", f"{recipe}/{reference}")] for model in models}
            table = stats.difference_table(rows, reference, columns=columns, labels=LABELS).table
            table.columns = [f"Δ {header.replace('(%)', '(pp)')}" for header in table.columns]
            for model in models:
                for position, c in enumerate(columns):
                    if (model, c) in self.clipped:
                        table.loc[model, table.columns[position]] = "(clipped, not an NLL)"
                        clipped = True
                        continue
                    n += 1
                    flagged += bool(rows[model][c].excludes_zero)
                    self._register(recipe, model, reference, c, rows[model][c])
            frames[f"vs {reference}"] = table
        self.tally[f"{label}, {recipe}"] = (n, flagged)
        note = (
            f"{recipe}: Δ = model − reference, mean over {self._seeds_of(recipe)} seed(s); 95 % paired bootstrap "
            "intervals over "
            f"the test images ({self.n_resamples} resamples shared by all models and seeds; the trained models and "
            f"the calibration split held fixed); {flagged} of {n} comparisons exclude 0 (with no real difference "
            f"about {0.05 * n:.1f} would by chance)"
            + ("; the clipped isotonic NLL is not counted." if clipped else ".")
        )
        return pd.concat(frames, names=["reference", "model"]), textwrap.fill(note, 110)

    def totals(self) -> dict[str, int]:
        """Cells in the tables and distinct comparisons, each with the number whose interval excludes 0."""
        n_cells = sum(n for n, _ in self.tally.values())
        flagged_cells = sum(f for _, f in self.tally.values())
        return {
            "table_cells": n_cells,
            "table_cells_exclude_zero": flagged_cells,
            "total": len(self.distinct),
            "exclude_zero": sum(bool(r.excludes_zero) for r in self.distinct.values()),
        }


def verdict_sentences(
    differences: Mapping[tuple[str, str], Mapping[str, Any]],
    recipe: str,
    reference: str,
    models: Sequence[str],
    metric_names: Sequence[str],
) -> list[str]:
    """One sentence per metric: which models beat / are worse than ``reference`` (interval excluding 0), with their
    Δ [interval], as plain text ("ECE vs cross-entropy: better none; worse LS α=0.1 +4.4 [+2.7, +4.9], …")."""
    sentences = []
    for metric_name in metric_names:
        better, worse = [], []
        for model in models:
            result = differences[(f"{recipe}/{model}", f"{recipe}/{reference}")][metric_name]
            text = verdict(result, metric_name)
            if text != NO_DIFFERENCE:
                (better if text == "beats" else worse).append(f"{model} {_interval(result, metric_name)}")
        sentences.append(
            f"{LABELS[metric_name]} vs {reference}: better {', '.join(better) or 'none'}; "
            f"worse {', '.join(worse) or 'none'}"
        )
    return sentences


# ----------------------------------------------------------------------------------------------------------------
# DCA under the over-fitting recipe: what the stored runs show without retraining


def history_windows(
    histories: Mapping[str, Sequence[Sequence[Mapping[str, float]]]],
    keys: Mapping[str, tuple[str, float, int]],
    windows: Sequence[tuple[int, int]],
) -> pd.DataFrame:
    """Rows = models, columns (quantity, "epochs a–b") = the mean over seeds and over those epochs of a history key,
    and (quantity, "kept (last) epoch") = the seed mean at the last epoch, as text. ``histories[model]`` is a list
    (one per seed) of per-epoch records (:attr:`helpers.training.TrainedRun.history`); ``keys`` = {history key:
    (header, multiplier, decimals)}; epochs are 1-based and inclusive."""
    columns: dict[tuple[str, str], list[str]] = {}
    for key, (header, factor, decimals) in keys.items():
        for first, last in windows:
            columns[(header, f"epochs {first}–{last}")] = [
                f"{factor * _mean([r[key] for h in runs for r in h[first - 1 : last]]):.{decimals}f}"
                for runs in histories.values()
            ]
        columns[(header, "kept (last) epoch")] = [
            f"{factor * _mean([h[-1][key] for h in runs]):.{decimals}f}" for runs in histories.values()
        ]
    table = pd.DataFrame(columns, index=pd.Index(list(histories), name="model"))
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def _mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("no epoch in the window: check the window against the histories' length")
    return float(sum(values) / len(values))


def typical_seed(per_seed: Sequence[float]) -> int:
    """The position of the median value among the seeds (the lower middle one for an even count): the seed to
    plot when one stands for all."""
    order = sorted(range(len(per_seed)), key=per_seed.__getitem__)
    return order[(len(order) - 1) // 2]


def confidence_profile(probs_by_model: Mapping[str, Sequence[torch.Tensor]], labels: torch.Tensor) -> pd.DataFrame:
    """Rows = models; columns (seed means, %): accuracy, mean top-label confidence, their gap (confidence − accuracy,
    which the binned ECE approaches when the model is over-confident at every level) and the share of test
    images with confidence ≥ 0.99."""
    rows = {}
    for model, seed_probs in probs_by_model.items():
        values = []
        for p in seed_probs:
            confidence, predicted = p.max(dim=1)
            accuracy = float((predicted == labels).double().mean())
            values.append((accuracy, float(confidence.mean()), float((confidence >= 0.99).double().mean())))
        accuracy, confidence, sharp = (100 * sum(v[i] for v in values) / len(values) for i in range(3))
        rows[model] = {
            "accuracy (%)": accuracy,
            "mean confidence (%)": confidence,
            "confidence − accuracy (pp)": confidence - accuracy,
            "confidence ≥ 0.99 (% of images)": sharp,
        }
    return pd.DataFrame(rows).T.rename_axis("model")


def dca_fitted_batch_factor(probs: torch.Tensor, labels: torch.Tensor, beta: float = 1.0) -> dict[str, float]:
    """DCA on a batch the model classifies correctly (batch accuracy 1, as on the training batches of a model that
    fits them): the term is 1 − mean confidence, and on each image its gradient with respect to the logits is
    cross-entropy's gradient times β·p_y, so the loss's gradient is CE's times (1 + β·p_y) — it never pulls a
    confidence down. Evaluated on the correctly classified images of ``probs``: {"n_correct", "term" (1 − their
    mean confidence), "factor" (mean of 1 + β·p_y)}."""
    confidence, predicted = probs.max(dim=1)
    correct = predicted == labels
    if not bool(correct.any()):
        raise ValueError("no correctly classified image: a fitted batch cannot be formed")
    p_true = probs[correct].gather(1, labels[correct, None]).squeeze(1)
    return {
        "n_correct": int(correct.sum()),
        "term": float(1.0 - confidence[correct].mean()),
        "factor": float((1.0 + beta * p_true).mean()),
    }


def outside_own_interval(
    differences: Mapping[tuple[str, str], Mapping[str, Any]], clipped: Iterable[tuple[str, str]] = ()
) -> list[str]:
    """One sentence per metric naming the rows whose point estimate lies outside its own percentile interval (a
    binned, upward-biased error on resamples that repeat images can do this); [] when no row does."""
    skip, found = set(clipped), {}
    for (model, reference), by_metric in differences.items():
        recipe, name = model.split("/", 1)
        for metric_name, result in by_metric.items():
            if (name, metric_name) not in skip and not result.low <= result.estimate <= result.high:
                found.setdefault(metric_name, []).append(
                    f"{name} − {reference.split('/', 1)[1]} ({recipe}) {_interval(result, metric_name)}"
                )
    return [f"{LABELS[m]}, {len(rows)} row(s): " + "; ".join(rows) for m, rows in found.items()]


def key_number_sentences(
    recipe: str,
    summaries: Mapping[str, Mapping[str, Any]],
    differences: Mapping[tuple[str, str], Mapping[str, Any]],
    temperatures: Mapping[str, Mapping[str, Any]],
    baseline: Mapping[str, float],
    losses: Sequence[str],
    posthoc_models: Sequence[str],
    clipped: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """The numbers of one recipe that the takeaway and its expert block quote, as sentences for the results JSON:
    cross-entropy's discrimination and calibration, the models not better than the constant predictor in NLL, the
    verdicts of every loss against CE and CE + TS (ECE, NLL, Brier, accuracy), ECE verdicts within a seed sd, the
    post-hoc rows that differ from CE + TS and what TS does to each loss's ECE. ``losses[0]`` is cross-entropy;
    ``posthoc_models`` are the post-hoc maps on it ("cross-entropy + vector scaling", …)."""
    ce_name, skip = losses[0], set(clipped)
    reference = f"{ce_name} + TS"
    ce, ce_ts = summaries[f"{recipe}/{ce_name}"], summaries[f"{recipe}/{reference}"]
    ts_models = [f"{loss} + TS" for loss in losses]
    lines = [
        f"{ce_name}: accuracy {mean_sd(ce['accuracy'])} %, AUROC (OvR) {100 * ce['auroc_ovr']['mean']:.1f} %, "
        f"κ {ce['cohen_kappa']['mean']:.3f}; ECE per seed "
        + ", ".join(f"{100 * v:.1f}" for v in ce["ece"]["per_seed"])
        + f" % (mean {100 * ce['ece']['mean']:.1f} %), T {temperatures[f'{recipe}/{ce_name}']['mean']:.2f}; "
        f"{reference} ECE {100 * ce_ts['ece']['mean']:.1f} %; NLL {ce['nll']['mean']:.3f} → {ce_ts['nll']['mean']:.3f}"
    ]
    above = [
        f"{m} {summaries[f'{recipe}/{m}']['nll']['mean']:.3f}"
        for m in list(losses) + ts_models + list(posthoc_models)
        if (m, "nll") not in skip and summaries[f"{recipe}/{m}"]["nll"]["mean"] >= baseline["nll"]
    ]
    lines.append(
        f"class prior (constant): accuracy {100 * baseline['accuracy']:.1f} %, NLL {baseline['nll']:.3f}; models whose "
        f"mean NLL is not below it: {', '.join(above) or 'none'}"
    )
    for ref in (ce_name, reference):
        lines += verdict_sentences(differences, recipe, ref, losses[1:], ["ece", "nll", "brier"])
    lines += verdict_sentences(differences, recipe, ce_name, losses[1:], ["accuracy"])
    close = []
    for ref in (ce_name, reference):
        for loss in losses[1:]:
            result = differences[(f"{recipe}/{loss}", f"{recipe}/{ref}")]["ece"]
            sd = max(summaries[f"{recipe}/{m}"]["ece"]["sd"] or 0.0 for m in (loss, ref))
            if result.excludes_zero and sd >= abs(result.estimate):
                close.append(f"{loss} − ({ref}) {100 * result.estimate:+.1f} pp, seed sd {100 * sd:.1f}")
    lines.append(f"ECE verdicts no larger than the larger seed sd of the two models: {'; '.join(close) or 'none'}")
    for name in list(posthoc_models) + ts_models[1:]:
        for metric_name in ("ece", "classwise_ece", "nll", "brier", "accuracy"):
            if (name, metric_name) in skip or (metric_name == "accuracy" and name in ts_models):
                continue  # clipped, or a repeat of loss − CE (TS keeps the arg-max)
            result = differences[(f"{recipe}/{name}", f"{recipe}/{reference}")][metric_name]
            if result.excludes_zero:
                lines.append(f"{name} − ({reference}), {LABELS[metric_name]}: {_interval(result, metric_name)}")
    ts_on = {loss: differences[(f"{recipe}/{loss} + TS", f"{recipe}/{loss}")]["ece"] for loss in losses}
    lines.append(
        f"TS on {ce_name}, ECE: {_interval(ts_on[ce_name], 'ece')} pp; TS raised the ECE point estimate of "
        f"{', '.join(loss for loss, r in ts_on.items() if r.estimate > 0) or 'none'}; interval above 0 for "
        f"{', '.join(loss for loss, r in ts_on.items() if r.low > 0) or 'none'}"
    )
    return lines


def epoch_to_epoch_change(
    histories: Mapping[str, Sequence[Sequence[Mapping[str, float]]]], key: str, first: int
) -> dict[str, float]:
    """{model: mean absolute change value(epoch e + 1) − value(epoch e)} of a history key from epoch ``first``
    (1-based) on, over seeds: how much the quantity moves between consecutive epochs. A model whose runs have no
    pair of epochs from ``first`` on (a one-epoch smoke run) is left out."""
    changes = {}
    for model, runs in histories.items():
        steps = [abs(h[e + 1][key] - h[e][key]) for h in runs for e in range(first - 1, len(h) - 1)]
        if steps:
            changes[model] = float(sum(steps) / len(steps))
    return changes


# ----------------------------------------------------------------------------------------------------------------
# the notebook's models and its decision section


def posthoc_probabilities(
    runs: Mapping[tuple[str, str, int], Any],
    val_labels: torch.Tensor,
    calibration: Any,
    on_ce: Mapping[str, Callable[[], Any]],
    ce_name: str = "cross-entropy",
) -> tuple[dict[str, list[torch.Tensor]], dict[str, list[float]]]:
    """Test probabilities of every run, of its temperature-scaled version ("<loss> + TS") and of cross-entropy under
    each post-hoc map of ``on_ce`` ({name: factory}, e.g. vector scaling), every map fitted on the validation images
    ``calibration``. ``runs`` = {(recipe, loss, seed): run with ``val_logits``, ``test_logits``, ``test_probs``}.
    Returns (probs {"<recipe>/<model>": one tensor per seed}, temperatures {"<recipe>/<loss>": one T per seed})."""
    probs: dict[str, list[torch.Tensor]] = {}
    temperatures: dict[str, list[float]] = {}
    for (recipe, loss, _), run in runs.items():
        key = f"{recipe}/{loss}"
        z_cal, y_cal = run.val_logits[calibration], val_labels[calibration]
        scaler = TemperatureScaling().fit(z_cal, y_cal)
        temperatures.setdefault(key, []).append(scaler.temperature)
        probs.setdefault(key, []).append(run.test_probs)
        probs.setdefault(f"{key} + TS", []).append(scaler.transform(run.test_logits))
        if loss == ce_name:
            for name, make in on_ce.items():
                probs.setdefault(f"{key} + {name}", []).append(make().fit(z_cal, y_cal).transform(run.test_logits))
    return probs, temperatures


def biopsy_decision(
    models: Mapping[str, Sequence[torch.Tensor]],
    labels: torch.Tensor,
    class_index: int,
    threshold: float,
    reference: str,
    always_shown: Sequence[str] = (),
    n: int = 1000,
    seed: int = 0,
    n_best: int = 2,
    class_name: str = "melanoma",
) -> dict[str, Any]:
    """The treatment decision "act when P(class) ≥ threshold" for every model of one recipe
    (:mod:`helpers.metrics.decisions`): {"table": sensitivity, specificity, treated and net benefit per 1,000 with the
    paired NB difference against ``reference`` (its note in ``table.attrs["note"]``), "shown": the decision curves
    of ``always_shown``, the reference and the ``n_best`` other models with the highest mean NB at the threshold
    (picked on these test images, for display), "record": the JSON record}."""
    rows = decisions.decision_summaries(models, labels, class_index, threshold)
    differences = decisions.paired_net_benefit(models, labels, class_index, reference, threshold, n=n, seed=seed)
    curves = {m: decisions.decision_curve(p, labels, class_index) for m, p in models.items()}
    others = [m for m in models if m != reference and m not in always_shown]
    best = sorted(others, key=lambda m: rows[m]["net_benefit"]["mean"], reverse=True)[:n_best]
    return {
        "table": decisions.decision_table(rows, differences, reference),
        "shown": {m: curves[m] for m in [*always_shown, reference, *best]},
        "record": decisions.decision_record(rows, curves, class_name, threshold, differences, reference),
    }
