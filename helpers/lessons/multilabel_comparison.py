"""The plumbing of notebook 11 (every multi-label loss, side by side): test probabilities per read-out, the
reference and post-hoc rows, the metric set, the answer table of the primary question, and the per-label view of
calibration.

* :func:`trained_probabilities` -- {read-out: [test probabilities per training seed]}; focal and ASL add their φ
  read-outs (:func:`helpers.lessons.probability_readouts`).
* :func:`reference_probabilities` -- the constant-prevalence predictor and, where the posteriors are known, the
  Bayes model.
* :func:`posthoc_probabilities` -- one trained model recalibrated per label (``helpers.calibration.posthoc``),
  each calibrator fitted on the calibration half of validation (:func:`helpers.calibration.split_calibration`) and
  applied to the test logits.
* :func:`answer_table` -- the primary question's table: paired differences to a reference model on calibration
  and ranking metrics, and an "answer" column (a proper score better, none worse, ranking kept?);
  :func:`deciding_metrics` names the columns behind each answer.
* :func:`per_label_view` -- per label: prevalence, mean forecast, 15-bin ECE, so that a reader sees what the pooled
  diagram averages away; :func:`query_level_error` -- calibration of each image's predicted number of findings;
  :func:`calibration_levels` -- pooled, per-label and query-level errors side by side.
* :func:`summarise` -- mean ± sd over training seeds of every metric, with the pooled smooth ECE (point estimates).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from helpers import metrics
from helpers.calibration import posthoc
from helpers.lessons import multilabel_analysis
from helpers.losses import ASL, BCE, SPA, Composite
from helpers.metrics import PairedBootstrapResult, stats

__all__ = [
    "COMPARISON_METRICS",
    "PROPER_SCORES",
    "trained_probabilities",
    "reference_probabilities",
    "posthoc_probabilities",
    "comparison_metrics",
    "answer_table",
    "deciding_metrics",
    "answer_record",
    "per_label_view",
    "query_level_error",
    "calibration_levels",
    "summarise",
    "readout_logits",
    "contest_probabilities",
    "tuned_phi_probabilities",
]

#: the metrics of the comparison tables, by the names :data:`helpers.metrics.HIGHER_IS_BETTER` knows
COMPARISON_METRICS: dict[str, Callable[..., float]] = {
    "macro_auroc": metrics.macro_auroc,
    "map_per_class": metrics.map_per_class,
    "map_per_example": metrics.map_per_example,
    "hamming_loss": metrics.hamming_loss,
    "multilabel_ece": metrics.multilabel_ece,
    "multilabel_brier": metrics.multilabel_brier,
    "multilabel_nll": metrics.multilabel_nll,
}
#: the proper scores among the comparison metrics -- and the RMS error against the exact posteriors, whose square
#: is the Brier score's excess over the Bayes model's: an answer of "yes" needs one of them better
PROPER_SCORES = ("true_rms", "multilabel_nll", "multilabel_brier")
#: the pooled (every (image, label) forecast in one diagram) and per-label (each label's diagram, averaged) ECE
ECE_METRICS: dict[str, Callable[..., float]] = {
    "multilabel_ece": metrics.multilabel_ece,
    "multilabel_ece_per_label": functools.partial(metrics.multilabel_ece, per_label=True),
}


def comparison_metrics(has_posteriors: bool) -> dict[str, Callable[..., float]]:
    """:data:`COMPARISON_METRICS`, plus the RMS error against the exact posteriors where they are known."""
    return {**COMPARISON_METRICS, **({"true_rms": metrics.true_rms} if has_posteriors else {})}


def trained_probabilities(
    runs: Mapping[tuple[str, int], Any], names: Sequence[str], seeds: Sequence[int]
) -> dict[str, list[torch.Tensor]]:
    """{read-out: [test probabilities per training seed]} for the losses ``names``; a run needs ``loss`` and
    ``test_logits``. focal and ASL add "focal+φ" / "ASL+φ", the same model read through the recovery map φ."""
    probs: dict[str, list[torch.Tensor]] = {}
    for name in names:
        for seed in seeds:
            run = runs[(name, seed)]
            for readout, p in multilabel_analysis.probability_readouts(name, run.loss, run.test_logits).items():
                probs.setdefault(readout, []).append(p)
    return probs


def reference_probabilities(data: Any) -> dict[str, list[torch.Tensor]]:
    """The constant-prevalence predictor (each label's training prevalence for every test image: calibrated on
    average, ranks nothing) and, where ``data.true_posteriors`` is known, the Bayes model (the exact posteriors)."""
    prevalence = data.train.labels.float().mean(0)
    rows = {"constant prevalence": [prevalence.expand_as(data.test.labels).clone()]}
    if data.true_posteriors is not None:
        rows["Bayes"] = [data.true_posteriors["test"].float()]
    return rows


def posthoc_probabilities(
    runs: Mapping[tuple[str, int], Any],
    data: Any,
    model: str,
    calibrators: Mapping[str, Callable[[], Any]],
    seeds: Sequence[int],
    split_seed: int = 0,
    reversals: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, list[torch.Tensor]], int]:
    """({row: [test probabilities per seed]}, number of calibration images): each calibrator (a factory of an
    object with ``fit(logits, labels)`` / ``transform(logits)``) fitted on ``model``'s validation logits of the
    calibration half (``posthoc.split_calibration(len(val), seed=split_seed)``, the same half for every seed) and
    applied to its test logits. The test set takes part in no fit.

    A fitted map that reverses a label's ranking (a per-label Platt slope below 0) warns
    (:class:`helpers.calibration.RankingReversedWarning`); pass a list as ``reversals`` to receive those fits as
    records instead ({"map", "training seed", "finding", "slope", "calibration positives"}), for a table that says
    which findings were reversed."""
    _, calibration = posthoc.split_calibration(len(data.val.labels), seed=split_seed)
    labels = data.val.labels[calibration]
    rows: dict[str, list[torch.Tensor]] = {}
    for row, make in calibrators.items():
        rows[row] = []
        for seed in seeds:
            run = runs[(model, seed)]
            with warnings.catch_warnings():
                if reversals is not None:
                    warnings.simplefilter("ignore", posthoc.RankingReversedWarning)
                calibrator = make().fit(run.val_logits[calibration], labels)
            if reversals is not None:
                reversals.extend(
                    {
                        "map": row,
                        "training seed": seed,
                        "finding": data.class_names[t],
                        "slope": float(calibrator.slope[t]),
                        "calibration positives": int(labels[:, t].sum()),
                    }
                    for t in getattr(calibrator, "reversed_labels", [])
                )
            rows[row].append(calibrator.transform(run.test_logits).float())
    return rows, int(calibration.numel())


def _verdicts(row: Mapping[str, PairedBootstrapResult], names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(metrics where the model is better, metrics where it is worse), by intervals that exclude 0."""
    better, worse = [], []
    for name in names:
        result = row[name]
        if result.excludes_zero:
            is_better = (result.low > 0) == stats.HIGHER_IS_BETTER[name]
            (better if is_better else worse).append(name)
    return better, worse


def _sides(
    row: Mapping[str, PairedBootstrapResult], calibration: Sequence[str], ranking: Sequence[str]
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(proper scores better, proper scores worse, ECEs worse, ranking metrics worse), by intervals excluding 0."""
    calibration_better, calibration_worse = _verdicts(row, calibration)
    _, ranking_worse = _verdicts(row, ranking)
    proper_better = [name for name in calibration_better if name in PROPER_SCORES]
    proper_worse = [name for name in calibration_worse if name in PROPER_SCORES]
    ece_worse = [name for name in calibration_worse if name not in PROPER_SCORES]
    return proper_better, proper_worse, ece_worse, ranking_worse


def _answer(row: Mapping[str, PairedBootstrapResult], calibration: Sequence[str], ranking: Sequence[str]) -> str:
    proper_better, proper_worse, ece_worse, ranking_worse = _sides(row, calibration, ranking)
    if proper_worse:
        return "no: worse probabilities"
    if ranking_worse:
        return "no: ranks worse"
    if proper_better:
        return "yes (ECE worse)" if ece_worse else "yes"
    return "no difference detected (ECE worse)" if ece_worse else "no difference detected"


def deciding_metrics(
    row: Mapping[str, PairedBootstrapResult], calibration: Sequence[str], ranking: Sequence[str]
) -> tuple[str, list[str]]:
    """The metrics behind one row's answer (the rule of :func:`answer_table`) and their side, "better" or "worse":
    the better proper scores of a "yes", the worse proper scores of "no: worse probabilities", the worse ranking
    metrics of "no: ranks worse"; ``("", [])`` when no difference is detected, "(ECE worse)" included, since an ECE
    decides no answer."""
    proper_better, proper_worse, _, ranking_worse = _sides(row, calibration, ranking)
    for side, names in (("worse", proper_worse), ("worse", ranking_worse), ("better", proper_better)):
        if names:
            return side, names
    return "", []


def _require_proper_score(calibration: Sequence[str]) -> None:
    if not any(name in PROPER_SCORES for name in calibration):
        raise ValueError(
            f"the calibration metrics {list(calibration)} hold no proper score ({', '.join(PROPER_SCORES)}): "
            "an ECE alone cannot answer 'better probabilities'"
        )


def answer_table(
    differences: Mapping[str, Mapping[str, PairedBootstrapResult]],
    reference: str,
    calibration: Sequence[str],
    ranking: Sequence[str],
    digits: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> stats.DifferenceTable:
    """The primary question's table: :func:`helpers.metrics.difference_table` of ``differences`` (model →
    metric → paired bootstrap against ``reference``) on the ``calibration`` and ``ranking`` metrics, and a last
    column "better probabilities, ranking kept?". The proper scores of :data:`PROPER_SCORES` among ``calibration``
    decide; an ECE neither earns a "yes" nor vetoes one, since a constant predictor can have the lowest ECE of all
    (notebook 11, section 3), so a better ECE is no evidence of better probabilities and a worse one none of worse
    probabilities. A worse ECE is reported in the verdict's words:

    * "no: worse probabilities" -- some proper score's interval excludes 0 on the worse side (even if another proper
      score is better);
    * "no: ranks worse" -- no proper score worse, but some ranking interval excludes 0 on the worse side;
    * "yes" -- some proper score better (interval excludes 0), none worse, no ranking metric worse; "yes (ECE
      worse)" when an ECE interval excludes 0 on the worse side as well;
    * "no difference detected (ECE worse)" -- no proper score or ranking metric differs, but an ECE is worse;
    * "no difference detected" -- otherwise (a better ECE alone included).

    :func:`deciding_metrics` names the metrics behind each answer.

    ``calibration`` must hold at least one proper score (``ValueError`` otherwise).
    """
    _require_proper_score(calibration)
    columns = [*calibration, *ranking]
    missing = [(m, c) for m, row in differences.items() for c in columns if c not in row]
    if missing:
        raise KeyError(f"no paired difference for (model, metric) {missing[:3]}")
    table = stats.difference_table(differences, reference, columns, digits=digits, labels=labels)
    frame = table.table.copy()
    frame["better probabilities, ranking kept?"] = [_answer(row, calibration, ranking) for row in differences.values()]
    return stats.DifferenceTable(frame, table.note, table.n_comparisons)


def answer_record(
    differences: Mapping[str, Mapping[str, PairedBootstrapResult]],
    reference: str,
    calibration: Sequence[str],
    ranking: Sequence[str],
) -> dict[str, Any]:
    """The answer table as JSON: reference, metric lists, and per model every difference
    (:func:`helpers.metrics.difference_record`) and the answer (the rule of :func:`answer_table`)."""
    _require_proper_score(calibration)
    return {
        "reference": reference,
        "calibration_metrics": list(calibration),
        "ranking_metrics": list(ranking),
        "models": {
            model: {
                "differences": {name: stats.difference_record(row[name]) for name in [*calibration, *ranking]},
                "answer": _answer(row, calibration, ranking),
            }
            for model, row in differences.items()
        },
    }


def per_label_view(
    probs: Sequence[torch.Tensor],
    labels: torch.Tensor,
    class_names: Sequence[str],
    train_prevalence: torch.Tensor,
    n_bins: int = metrics.DEFAULT_N_BINS,
) -> pd.DataFrame:
    """Per label, means over the training seeds of one model's test forecasts: training prevalence, mean forecast,
    test frequency, the gap mean forecast − frequency, and the label's own 15-bin ECE, all in percent.

    The pooled ECE puts the forecasts of every label into the same bins, so one label's over-forecasts and
    another's under-forecasts at the same probability cancel, and the frequent near-zero forecasts of the rare
    labels fill the first bin; this table shows each label's own numbers.
    """
    y = labels.float()
    mean_forecast = torch.stack([p.float().mean(0) for p in probs]).mean(0)
    per_label_ece = [
        sum(metrics.multilabel_ece(p[:, t : t + 1], labels[:, t : t + 1], n_bins) for p in probs) / len(probs)
        for t in range(labels.shape[1])
    ]
    frame = pd.DataFrame(
        {
            "training prevalence (%)": (100 * train_prevalence.float()).tolist(),
            "mean forecast (%)": (100 * mean_forecast).tolist(),
            "test frequency (%)": (100 * y.mean(0)).tolist(),
            "forecast − frequency (points)": (100 * (mean_forecast - y.mean(0))).tolist(),
            "ECE of the label (%)": [100 * float(v) for v in per_label_ece],
        },
        index=pd.Index(list(class_names), name="finding"),
    )
    return frame.round(2)


def query_level_error(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = 10) -> float:
    """Calibration at the level of the image (the query): the images sorted by their predicted number of findings
    Σ_t η̂_t and cut into ``n_bins`` equal-mass bins; the error is Σ_b (n_b / N) times the absolute difference of
    the mean predicted count and the mean observed count Σ_t y_t, in findings per image. Calibrated marginals give
    0 in expectation; a model can be calibrated pooled and per label and still put too many findings on some images
    and too few on others."""
    predicted = probs.double().sum(1)
    observed = labels.double().sum(1)
    order = torch.argsort(predicted, stable=True)
    chunks = torch.tensor_split(order, n_bins)
    n = predicted.numel()
    return float(sum(len(c) / n * abs(predicted[c].mean() - observed[c].mean()) for c in chunks if len(c)))


def calibration_levels(
    probs: Mapping[str, Sequence[torch.Tensor]], labels: torch.Tensor, models: Sequence[str], digits: int = 2
) -> pd.DataFrame:
    """Rows = ``models``; the pooled and per-label 15-bin ECE and ACE (percent, rounded to ``digits`` decimals, as
    the course's other ECE tables) and the query-level error (findings per image, 3 decimals), each the mean over
    the model's training seeds."""
    if not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be a non-negative whole number of decimals, got {digits!r}")

    def mean(fn: Callable[..., float], model: str) -> float:
        return float(sum(fn(p, labels) for p in probs[model]) / len(probs[model]))

    rows = {
        model: {
            "ECE pooled (%)": 100 * mean(metrics.multilabel_ece, model),
            "ECE per label (%)": 100 * mean(functools.partial(metrics.multilabel_ece, per_label=True), model),
            "ACE pooled (%)": 100 * mean(metrics.multilabel_average_calibration_error, model),
            "ACE per label (%)": 100
            * mean(functools.partial(metrics.multilabel_average_calibration_error, per_label=True), model),
            "query-level error (findings per image)": mean(query_level_error, model),
        }
        for model in models
    }
    return (
        pd.DataFrame(rows)
        .T.rename_axis("model")
        .round({**dict.fromkeys(list(rows[models[0]])[:4], digits), "query-level error (findings per image)": 3})
    )


def summarise(data: Any, probs: Mapping[str, Sequence[torch.Tensor]], metric_fns: Mapping[str, Callable[..., float]]):
    """{model: {metric: seed summary}} (:func:`helpers.metrics.seed_summaries`; the RMS error against
    ``data.true_posteriors["test"]`` where known), plus relplot's pooled smooth ECE as point estimates per seed."""
    targets = {"true_rms": data.true_posteriors["test"]} if data.true_posteriors is not None else None
    summaries = stats.seed_summaries(probs, data.test.labels, metric_fns, targets=targets)
    for model, per_seed in probs.items():
        summaries[model]["multilabel_smooth_ece"] = stats.seed_summary(
            [metrics.multilabel_smooth_ece(p, data.test.labels) for p in per_seed]
        )
    return summaries


def tuned_readout(name: str) -> str:
    """``"focal+φ γ⁻=2 (tuned)"`` for the φ read-out ``"focal γ⁻=2 (tuned)+φ"`` that
    :func:`helpers.lessons.probability_readouts` names; other names unchanged."""
    if not name.endswith(" (tuned)+φ"):
        return name
    loss, value = name.removesuffix("+φ").split(" ", 1)
    return f"{loss}+φ {value}"


def raw_readout(name: str) -> str:
    """The sigmoid read-out of the same model: ``"focal γ⁻=2 (tuned)"`` for ``"focal+φ γ⁻=2 (tuned)"``."""
    return name.replace("+φ", "")


def readout_logits(loss: Any, logits: torch.Tensor) -> torch.Tensor:
    """The logit of the loss's own probability read-out (``loss.predict_proba``): the logits themselves for the
    sigmoid read-outs (BCE, focal, ASL, + LPR), SPA's ``predict_logit`` (the logit of its inverse link, eq. 17)
    for SPA (+ LPR). The scale on which "loss + per-label TS" rescales a loss's probabilities; another read-out is
    refused."""
    base = loss.base if isinstance(loss, Composite) else loss
    if isinstance(base, SPA):
        return base.predict_logit(logits)
    if isinstance(base, (BCE, ASL)):
        return logits
    raise ValueError(
        f"no logit read-out for {type(base).__name__}: per-label TS is defined here for the sigmoid read-outs "
        "(BCE, focal, ASL) and SPA's inverse link"
    )


def contest_probabilities(
    runs: Mapping[tuple[str, int], Any],
    rows: Sequence[tuple[str, str]],
    data: Any,
    seeds: Sequence[int],
    split_seed: int = 0,
    ts_suffix: str = " + TS/label",
) -> dict[str, list[torch.Tensor]]:
    """The fair contest's rows (:class:`helpers.lessons.Contest`): {row: [test probabilities per seed]} for every
    loss's tuned row, read as the loss reads it (``predict_proba``), and the same model after per-label
    temperature scaling (``<row> + TS/label``): one temperature per label fitted on the calibration half of
    validation (``posthoc.split_calibration(len(val), seed=split_seed)``, the half BCE + TS/label is fitted on) on
    :func:`readout_logits`, so that for a sigmoid read-out it is BCE's own per-label TS."""
    _, calibration = posthoc.split_calibration(len(data.val.labels), seed=split_seed)
    y_calibration = data.val.labels[calibration]
    probs: dict[str, list[torch.Tensor]] = {}
    for _, tuned in rows:
        for seed in seeds:
            run = runs[(tuned, seed)]
            with torch.no_grad():
                probs.setdefault(tuned, []).append(run.loss.predict_proba(run.test_logits).float())
                val_z = readout_logits(run.loss, run.val_logits)
                scaler = posthoc.PerLabelTemperatureScaling().fit(val_z[calibration], y_calibration)
                test_z = readout_logits(run.loss, run.test_logits)
                probs.setdefault(f"{tuned}{ts_suffix}", []).append(scaler.transform(test_z).float())
    return probs


def tuned_phi_probabilities(
    runs: Mapping[tuple[str, int], Any], moved: Sequence[tuple[str, str]], seeds: Sequence[int]
) -> dict[str, list[torch.Tensor]]:
    """The φ read-outs of the tuned focal and ASL rows among ``moved`` ((paper row, tuned row) pairs), named
    ``"focal+φ γ⁻=2 (tuned)"`` (:func:`tuned_readout`): {read-out: [test probabilities per seed]}."""
    tuned_rows = [tuned for _, tuned in moved]
    readouts = trained_probabilities(runs, tuned_rows, seeds)
    return {tuned_readout(name): p for name, p in readouts.items() if name.endswith("+φ")}
