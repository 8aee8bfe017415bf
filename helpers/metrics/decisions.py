"""Decisions at a probability threshold: what a calibrated probability is for in the clinic (compute only).

Notebook 00 motivates the course with "P(melanoma) ≥ 0.1 triggers a biopsy". A threshold rule treats a patient
when the one-vs-rest probability p_k(x) of class k reaches t; the functions here measure that rule:

* :func:`one_vs_rest` -- the forecast p_k and the outcome 1[y = k] of one class, chosen by name or index
  (:func:`class_index`; :func:`has_class` lets a notebook skip the section on a data set without that class), or
  of a group of classes: ``class_index`` may be a tuple of indices (:func:`class_indices` finds them by name), the
  forecast is then the sum of their probabilities and the outcome 1[y in the group]. The rule "biopsy when
  P(malignant) ≥ t" with malignant = melanoma + basal cell carcinoma + actinic keratosis / intraepithelial carcinoma
  (:data:`MALIGNANT_CLASSES`) counts a biopsied BCC as a true positive, where the melanoma rule counts it a harm;
* :func:`threshold_outcome` -- sensitivity, specificity, the number treated per 1,000 patients and the net benefit
  of the rule "treat when p_k ≥ t";
* :func:`net_benefit` -- Vickers & Elkin (2006, Med Decis Making 26:565, the net-benefit formula of their
  "Methods"): NB(t) = TP/N − FP/N · t/(1 − t). The threshold t encodes how the clinician weighs harms: treating
  at t says a missed case is (1 − t)/t times as bad as an unnecessary treatment (t = 0.1: one missed melanoma
  weighs as much as nine needless biopsies), so a false positive costs t/(1 − t) true positives;
* :func:`decision_curve` -- NB over a range of thresholds beside the references "treat all",
  NB = π − (1 − π) · t/(1 − t) with π the prevalence, and "treat none", NB = 0;
* net benefit at a stated prevalence π instead of the test set's own (``prevalence=`` of :func:`net_benefit`,
  :func:`decision_curve`, :func:`decision_summaries`; :meth:`ThresholdOutcome.net_benefit_at`): the positives are
  reweighted to π and the negatives to 1 − π, which gives NB_π(t) = π · TPR − (1 − π) · FPR · t/(1 − t)
  (Vickers & Elkin's formula with TP/N and FP/N replaced by their values at prevalence π; sensitivity and
  specificity do not change). A curated test set is enriched in the disease; per 1,000 patients *of a clinic*
  needs this reweighting, which assumes the clinic's cases of each kind look like the set's (label shift only);
* :func:`paired_net_benefit` -- paired bootstrap intervals of NB differences between models on the same test
  images, through :func:`helpers.metrics.paired_differences` (the course's one paired bootstrap);
* :func:`one_vs_rest_bins` -- the equal-width reliability bins of p_k against 1[y = k], in the
  :class:`helpers.metrics.ReliabilityBins` that :mod:`helpers.plots.reliability` /
  :mod:`helpers.plots.decision_plots` draw.

Why calibration is what this rule needs: with exact posteriors, treating when P(y = k | x) ≥ t maximises NB(t)
at every t (the Bayes decision; the expected gain of treating one patient is p − (1 − p) t/(1 − t), positive
exactly when p > t). A model whose p_k is too high treats too many, one whose p_k is too low misses cases, even
when its ranking (AUROC) is perfect. Arg-max recall measures ranking-plus-competition, not this decision.

The rule is "treat when p ≥ t" (ties at t are treated), matching "P(melanoma) ≥ 0.1 triggers a biopsy".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from helpers.metrics import class_focus, core, stats
from helpers.metrics.bootstrapping import PairedBootstrapResult
from helpers.metrics.calibration import ReliabilityBins

__all__ = [
    "BIOPSY_THRESHOLD",
    "MALIGNANT_CLASSES",
    "has_class",
    "class_index",
    "class_indices",
    "net_benefit_at_prevalence",
    "one_vs_rest",
    "ThresholdOutcome",
    "threshold_outcome",
    "net_benefit",
    "sensitivity",
    "specificity",
    "treated_per_1000",
    "treat_all_net_benefit",
    "DecisionCurve",
    "decision_curve",
    "threshold_metric",
    "paired_net_benefit",
    "one_vs_rest_bins",
    "THRESHOLD_METRICS",
]

#: the biopsy threshold notebook 00 names: P(melanoma) ≥ 0.1
BIOPSY_THRESHOLD = 0.1
#: the classes of the rule "biopsy when P(malignant) ≥ t", by their names in :data:`helpers.data.isic2018.CLASS_NAMES`:
#: melanoma, basal cell carcinoma and AKIEC (actinic keratosis / intraepithelial carcinoma, i.e. Bowen's disease:
#: premalignant or in-situ carcinoma). The other four ISIC 2018 classes (nevus, benign keratosis, dermatofibroma,
#: vascular lesion) are benign. A clinic that would not excise actinic keratoses drops AKIEC from the group.
MALIGNANT_CLASSES = ("melanoma", "basal cell carcinoma", "actinic keratosis / intraepithelial carcinoma")
#: thresholds of a decision curve: up to 0.5, beyond which no one would biopsy for melanoma
DEFAULT_THRESHOLDS = np.round(np.linspace(0.01, 0.5, 50), 4)


def has_class(class_names: Sequence[str], name: str) -> bool:
    """Whether the data set has a class called ``name`` (case-insensitive), e.g. "melanoma" in DermaMNIST."""
    return class_focus.class_index(class_names, name) is not None


def class_index(class_names: Sequence[str], name_or_index: str | int) -> int:
    """The column of a class given by name (case-insensitive) or by index, with a clear error when absent."""
    if isinstance(name_or_index, (int, np.integer)) and not isinstance(name_or_index, bool):
        if not 0 <= name_or_index < len(class_names):
            raise ValueError(
                f"class index {name_or_index} is outside [0, {len(class_names) - 1}] for the "
                f"{len(class_names)} classes {list(class_names)}"
            )
        return int(name_or_index)
    if not isinstance(name_or_index, str):
        raise TypeError(f"pass a class name (str) or index (int), got {type(name_or_index).__name__}")
    found = class_focus.class_index(class_names, name_or_index)
    if found is None:
        raise ValueError(
            f"no class named {name_or_index!r} among {list(class_names)}; check has_class(...) first "
            "and skip the decision analysis on a data set without it"
        )
    return found


def class_indices(class_names: Sequence[str], names: Sequence[str | int]) -> tuple[int, ...]:
    """The columns of a group of classes, each by name (case-insensitive) or index, e.g.
    ``class_indices(bundle.class_names, MALIGNANT_CLASSES)``: the class-group form of ``class_index`` that every
    function here accepts. Clear errors for a missing name, a repeated class or an empty group."""
    if isinstance(names, (str, int)):
        raise TypeError(f"pass a sequence of class names or indices, got {names!r}; for one class use class_index")
    found = tuple(class_index(class_names, name) for name in names)
    if not found:
        raise ValueError("the class group is empty; pass at least one class name, e.g. MALIGNANT_CLASSES")
    if len(set(found)) != len(found):
        raise ValueError(f"the class group {list(names)} names a class twice (columns {list(found)})")
    return found


def _check_threshold(threshold: float) -> float:
    value = float(threshold)
    if not 0.0 < value < 1.0:
        raise ValueError(
            f"threshold must lie strictly between 0 and 1 (a probability at which to treat), got "
            f"{threshold!r}; net benefit weighs a false positive by t/(1 − t), undefined at 0 and 1"
        )
    return value


def _check_class(k: Any, n_classes: int) -> int | tuple[int, ...]:
    """An index in [0, K), or a non-empty tuple of distinct such indices (a class group)."""
    if isinstance(k, (list, tuple)):
        if not k or len(set(k)) != len(k):
            raise ValueError(f"a class group must be a non-empty tuple of distinct class indices, got {k!r}")
        return tuple(_check_class(one, n_classes) for one in k)  # type: ignore[misc]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < n_classes:
        raise ValueError(
            f"class_index must be an integer in [0, {n_classes - 1}] or a tuple of them, got {k!r}; "
            "use decisions.class_index(class_names, 'melanoma') or decisions.class_indices(...)"
        )
    return int(k)


def _check_prevalence(prevalence: float) -> float:
    value = float(prevalence)
    if not 0.0 < value < 1.0:
        raise ValueError(
            f"prevalence must lie strictly between 0 and 1 (the share of patients with the class), got {prevalence!r}"
        )
    return value


def one_vs_rest(probs: Any, labels: Any, class_index: int | tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_k (N,) float64, 1[y = k] (N,) bool) of one class from (N, K) probabilities and (N,) labels; for a class
    group (a tuple of indices) the summed probability of the group and 1[y in the group]."""
    p, positive = _one_vs_rest_as_given(probs, labels, class_index)
    return p.to(torch.float64), positive


def _one_vs_rest_as_given(probs: Any, labels: Any, class_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`one_vs_rest` with p_k in the probabilities' own floating-point type."""
    p, y = core.multiclass_inputs(probs, labels)
    if p.shape[0] == 0:
        raise ValueError("probs and labels are empty (0 rows); a decision needs at least one patient")
    k = _check_class(class_index, p.shape[1])
    if isinstance(k, tuple):
        group = torch.tensor(k, device=y.device)
        return p[:, list(k)].sum(1).clamp(max=1.0), torch.isin(y, group)
    return p[:, k], y == k


def _treated(p: torch.Tensor, thresholds: Any) -> torch.Tensor:
    """1[p ≥ t], (T, N) for T thresholds, decided in the precision of ``p``: each threshold is first rounded to
    ``p``'s floating-point type, so a probability that is t as float32 stores it (0.7 as 0.699999988) is treated
    as p ≥ t holds for it in float64; float32 and float64 probabilities then break a tie at t alike."""
    t = torch.as_tensor(np.atleast_1d(thresholds), dtype=torch.float64).to(p.dtype).to(torch.float64)
    return p.to(torch.float64)[None, :] >= t.to(p.device)[:, None]


@dataclass(frozen=True)
class ThresholdOutcome:
    """The rule "treat when p_k ≥ threshold" on N patients: counts and the rates a clinician reads.

    ``sensitivity`` is NaN when no patient has the class, ``specificity`` when every patient has it."""

    threshold: float
    true_positives: int
    false_positives: int
    true_negatives: int
    false_negatives: int

    @property
    def n(self) -> int:
        return self.true_positives + self.false_positives + self.true_negatives + self.false_negatives

    @property
    def sensitivity(self) -> float:
        positives = self.true_positives + self.false_negatives
        return self.true_positives / positives if positives else math.nan

    @property
    def specificity(self) -> float:
        negatives = self.true_negatives + self.false_positives
        return self.true_negatives / negatives if negatives else math.nan

    @property
    def treated_per_1000(self) -> float:
        """Patients treated (biopsies) per 1,000 patients of this case mix."""
        return 1000.0 * (self.true_positives + self.false_positives) / self.n

    @property
    def net_benefit(self) -> float:
        """Vickers & Elkin (2006): TP/N − FP/N · t/(1 − t), in true positives per patient."""
        t = self.threshold
        return (self.true_positives - self.false_positives * t / (1.0 - t)) / self.n

    def net_benefit_at(self, prevalence: float) -> float:
        """Net benefit in a population of prevalence π with this rule's sensitivity and specificity (positives
        reweighted to π, negatives to 1 − π): π · TPR − (1 − π) · FPR · t/(1 − t). Needs both kinds of patient."""
        pi, t = _check_prevalence(prevalence), self.threshold
        if self.true_positives + self.false_negatives == 0 or self.true_negatives + self.false_positives == 0:
            raise ValueError("reweighting to a prevalence needs patients with and without the class in the set")
        return pi * self.sensitivity - (1.0 - pi) * (1.0 - self.specificity) * t / (1.0 - t)

    @property
    def break_even_prevalence(self) -> float:
        """The prevalence π* at which this rule's NB_π is 0 (biopsying no one is as good): π*·TPR = (1 − π*)·FPR·w
        with w = t/(1 − t), so π* = w·FPR / (TPR + w·FPR). The rule gains over "treat none" only above π*. NaN for
        a rule that biopsies no one (TPR = FPR = 0): it equals "treat none" at every prevalence."""
        w = self.threshold / (1.0 - self.threshold)
        fpr = 1.0 - self.specificity
        denominator = self.sensitivity + w * fpr
        return math.nan if denominator == 0 else w * fpr / denominator


def threshold_outcome(
    probs: Any, labels: Any, class_index: Any, threshold: float = BIOPSY_THRESHOLD
) -> ThresholdOutcome:
    """Confusion counts of "treat when p_k ≥ threshold" (see :class:`ThresholdOutcome` for the rates); p_k ≥ t is
    decided in the probabilities' own precision (a tie at t is treated in float32 and float64 alike)."""
    t = _check_threshold(threshold)
    p, positive = _one_vs_rest_as_given(probs, labels, class_index)
    treated = _treated(p, t)[0]
    tp = int((treated & positive).sum())
    fp = int((treated & ~positive).sum())
    fn = int((~treated & positive).sum())
    return ThresholdOutcome(t, tp, fp, int(positive.numel()) - tp - fp - fn, fn)


def net_benefit(
    probs: Any, labels: Any, class_index: Any, threshold: float = BIOPSY_THRESHOLD, prevalence: float | None = None
) -> float:
    """NB(t) = TP/N − FP/N · t/(1 − t) (Vickers & Elkin 2006) of "treat when p_k ≥ t"; a metric(probs, labels)
    for :mod:`helpers.metrics.stats` through ``functools.partial(net_benefit, class_index=k, threshold=t)``.
    With ``prevalence`` π: the net benefit at π (:meth:`ThresholdOutcome.net_benefit_at`)."""
    outcome = threshold_outcome(probs, labels, class_index, threshold)
    return outcome.net_benefit if prevalence is None else outcome.net_benefit_at(prevalence)


def net_benefit_at_prevalence(
    probs: Any, labels: Any, class_index: Any, threshold: float = BIOPSY_THRESHOLD, prevalence: float = 0.5
) -> float:
    """:func:`net_benefit` at prevalence π = ``prevalence`` (a :data:`THRESHOLD_METRICS` quantity)."""
    return net_benefit(probs, labels, class_index, threshold, prevalence)


def sensitivity(probs: Any, labels: Any, class_index: Any, threshold: float = BIOPSY_THRESHOLD) -> float:
    """P(p_k ≥ t | y = k); NaN if no patient has class k."""
    return threshold_outcome(probs, labels, class_index, threshold).sensitivity


def specificity(probs: Any, labels: Any, class_index: Any, threshold: float = BIOPSY_THRESHOLD) -> float:
    """P(p_k < t | y ≠ k); NaN if every patient has class k."""
    return threshold_outcome(probs, labels, class_index, threshold).specificity


def treated_per_1000(probs: Any, labels: Any, class_index: Any, threshold: float = BIOPSY_THRESHOLD) -> float:
    """Patients with p_k ≥ t (biopsies) per 1,000 patients."""
    return threshold_outcome(probs, labels, class_index, threshold).treated_per_1000


#: the per-threshold quantities a decision table shows, as metric(probs, labels, class_index, threshold)
THRESHOLD_METRICS: dict[str, Callable[..., float]] = {
    "sensitivity": sensitivity,
    "specificity": specificity,
    "biopsies_per_1000": treated_per_1000,
    "net_benefit": net_benefit,
    "net_benefit_at_prevalence": net_benefit_at_prevalence,
}


def treat_all_net_benefit(prevalence: float, thresholds: Any) -> np.ndarray:
    """NB of treating everyone: π − (1 − π) · t/(1 − t) (TP/N = π, FP/N = 1 − π)."""
    if not 0.0 <= prevalence <= 1.0:
        raise ValueError(f"prevalence must lie in [0, 1], got {prevalence}")
    prevalence = float(prevalence)
    t = np.asarray([_check_threshold(v) for v in np.atleast_1d(thresholds)], dtype=np.float64)
    return prevalence - (1.0 - prevalence) * t / (1.0 - t)


@dataclass(frozen=True)
class DecisionCurve:
    """Net benefit of a model over thresholds, with the "treat all" and "treat none" (0) references, at
    ``prevalence`` (the test set's own, ``set_prevalence``, unless the curve was reweighted to another)."""

    thresholds: np.ndarray
    model: np.ndarray
    treat_all: np.ndarray
    prevalence: float
    set_prevalence: float | None = None

    @property
    def reweighted(self) -> bool:
        """Whether the curve is at a stated prevalence rather than the test set's own."""
        return self.set_prevalence is not None and self.set_prevalence != self.prevalence

    @property
    def treat_none(self) -> np.ndarray:
        return np.zeros_like(self.thresholds)


def decision_curve(
    probs: Any,
    labels: Any,
    class_index: Any,
    thresholds: Any = DEFAULT_THRESHOLDS,
    prevalence: float | None = None,
) -> DecisionCurve:
    """NB(t) of "treat when p_k ≥ t" at every threshold (Vickers & Elkin 2006, their Fig. 1 form). ``probs`` is an
    (N, K) tensor, or a list with one per training seed: the curve is then the mean NB over seeds. With
    ``prevalence`` π, model and "treat all" are reweighted to π: π · TPR − (1 − π) · FPR · t/(1 − t)."""
    t = np.asarray([_check_threshold(v) for v in np.atleast_1d(thresholds)], dtype=np.float64)
    if t.size == 0:
        raise ValueError("thresholds is empty; pass e.g. numpy.linspace(0.01, 0.5, 50)")
    if isinstance(probs, (list, tuple)):
        if not probs:
            raise ValueError("probs is an empty list; pass one (N, K) tensor per training seed")
        per_seed = [decision_curve(p, labels, class_index, t, prevalence) for p in probs]
        first = per_seed[0]
        mean = np.mean([c.model for c in per_seed], axis=0)
        return DecisionCurve(t, mean, first.treat_all, first.prevalence, first.set_prevalence)
    p, positive = _one_vs_rest_as_given(probs, labels, class_index)
    treated = _treated(p, t)
    tp = (treated & positive).sum(1).double().cpu().numpy()
    fp = (treated & ~positive).sum(1).double().cpu().numpy()
    n, n_positive = positive.numel(), int(positive.sum())
    own = n_positive / n
    if prevalence is None:
        return DecisionCurve(t, tp / n - fp / n * t / (1.0 - t), treat_all_net_benefit(own, t), own, own)
    pi = _check_prevalence(prevalence)
    if n_positive in (0, n):
        raise ValueError("reweighting to a prevalence needs patients with and without the class in the set")
    model = pi * tp / n_positive - (1.0 - pi) * fp / (n - n_positive) * t / (1.0 - t)
    return DecisionCurve(t, model, treat_all_net_benefit(pi, t), pi, own)


class _bound:
    """metric(probs, labels) of one threshold quantity at a fixed class and threshold, with a ``__name__`` such as
    "net_benefit@0.1" that the bootstrap's messages can name (a ``functools.partial`` has none). It has no weighted
    form, so :func:`helpers.metrics.paired_bootstrap` calls it once per resample and seed (4.1 s for one
    comparison of 3 + 3 seeds, N = 2,005, n = 1000, measured on the shared 2-core CPU while a notebook ran)."""

    def __init__(self, function: Callable[..., float], class_index: Any, threshold: float, **options: Any) -> None:
        self.function, self.class_index, self.threshold, self.options = function, class_index, threshold, options
        self.__name__ = f"{function.__name__}@{threshold:g}"

    def __call__(self, probs: Any, labels: Any) -> float:
        return self.function(probs, labels, self.class_index, self.threshold, **self.options)


def threshold_metric(
    name: str, class_index: Any, threshold: float = BIOPSY_THRESHOLD, prevalence: float | None = None
) -> Callable[..., float]:
    """One of :data:`THRESHOLD_METRICS` as a metric(probs, labels) for :func:`helpers.metrics.seed_summaries`;
    "net_benefit_at_prevalence" needs ``prevalence``."""
    if name not in THRESHOLD_METRICS:
        raise ValueError(f"unknown threshold metric {name!r}; choose one of {list(THRESHOLD_METRICS)}")
    if name == "net_benefit_at_prevalence":
        if prevalence is None:
            raise ValueError("net_benefit_at_prevalence needs prevalence= (the clinic's share of the class)")
        return _bound(net_benefit, class_index, _check_threshold(threshold), prevalence=_check_prevalence(prevalence))
    return _bound(THRESHOLD_METRICS[name], class_index, _check_threshold(threshold))


def paired_net_benefit(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    class_index: Any,
    reference: str,
    threshold: float = BIOPSY_THRESHOLD,
    n: int = 1000,
    seed: int = 0,
    prevalence: float | None = None,
) -> dict[str, PairedBootstrapResult]:
    """{model: paired bootstrap of NB(model) − NB(reference)} at one threshold (at the test set's prevalence, or
    at ``prevalence``), every model's seeds against the reference's on the same resamples
    (:func:`helpers.metrics.paired_differences`)."""
    _check_threshold(threshold)
    options = {} if prevalence is None else {"prevalence": _check_prevalence(prevalence)}
    metric = {"net_benefit": _bound(net_benefit, class_index, threshold, **options)}
    differences = stats.paired_differences(probs_by_model, labels, metric, reference=reference, n=n, seed=seed)
    return {model: row["net_benefit"] for model, row in differences.items()}


@dataclass(frozen=True)
class WindowCalibration:
    """The images whose forecast p_k lies in [low, high): how many, their mean forecast and how often they have the
    class. Near the threshold this is the calibration the decision uses (an average ECE mixes in far bins)."""

    low: float
    high: float
    n: int
    mean_forecast: float
    observed: float


def window_calibration(probs: Any, labels: Any, class_index: Any, low: float, high: float) -> WindowCalibration:
    """:class:`WindowCalibration` of "treat when p_k ≥ t" forecasts in [low, high) (NaN means when it is empty)."""
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"the window must satisfy 0 <= low < high <= 1, got [{low}, {high})")
    p, positive = one_vs_rest(probs, labels, class_index)
    inside = (p >= low) & (p < high)
    n = int(inside.sum())
    mean = float(p[inside].mean()) if n else math.nan
    return WindowCalibration(low, high, n, mean, float(positive[inside].double().mean()) if n else math.nan)


def one_vs_rest_bins(
    probs: Any, labels: Any, class_index: int, class_name: str | None = None, n_bins: int = core.DEFAULT_N_BINS
) -> ReliabilityBins:
    """Equal-width reliability bins of the forecast p_k against 1[y = k] (the one-vs-rest diagram of one class,
    the forecasts that :func:`helpers.metrics.classwise_ece` averages over classes); its ``ece`` is that
    class's one-vs-rest ECE. ``kind`` names the class ("melanoma vs rest")."""
    core.check_n_bins(n_bins)
    p, positive = one_vs_rest(probs, labels, class_index)
    sums = core.bin_sums(p[:, None], positive[:, None], n_bins)
    kind = f"{class_name or f'class {class_index}'} vs rest"
    return ReliabilityBins(
        core.bin_edges(n_bins), sums.counts[0].cpu(), sums.confidence_sum[0].cpu(), sums.outcome_sum[0].cpu(), kind
    )


# ----------------------------------------------------------------------------------------------------------------
# the notebooks' decision tables and results record
# ----------------------------------------------------------------------------------------------------------------
#: (multiplier, decimals, column header) of each threshold quantity in a decision table
_COLUMNS = {
    "sensitivity": (100.0, 1, "sensitivity (%)"),
    "specificity": (100.0, 1, "specificity (%)"),
    "biopsies_per_1000": (1.0, 0, "biopsies per 1,000"),
    "net_benefit": (1000.0, 1, "net benefit per 1,000"),
    "net_benefit_at_prevalence": (1000.0, 1, "net benefit per 1,000 at π"),
}


#: the row of the reference rule "treat everyone" in a decision table
TREAT_ALL = "biopsy everyone (treat all)"


def decision_summaries(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    class_index: Any,
    threshold: float = BIOPSY_THRESHOLD,
    treat_all: bool = True,
    prevalence: float | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{model: {quantity: seed_summary}} of every :data:`THRESHOLD_METRICS` quantity at one threshold, over the
    training seeds (:func:`helpers.metrics.seed_summaries`); with ``treat_all`` a last row :data:`TREAT_ALL`, the
    reference a model must beat (sensitivity 100 %, specificity 0, NB = π − (1 − π) t/(1 − t)). "Treat none" has
    every value 0 but specificity 100 % and is not listed. "net_benefit_at_prevalence" only with ``prevalence``."""
    names = [name for name in THRESHOLD_METRICS if prevalence is not None or name != "net_benefit_at_prevalence"]
    fns = {name: threshold_metric(name, class_index, threshold, prevalence) for name in names}
    summaries = stats.seed_summaries(probs_by_model, labels, fns)
    if treat_all:
        p, _ = core.multiclass_inputs(next(iter(_seed_list(probs_by_model))), labels)
        everyone = torch.zeros_like(p)
        k = _check_class(class_index, p.shape[1])
        everyone[:, k[0] if isinstance(k, tuple) else k] = 1.0  # P(class or group) = 1: every patient is treated
        summaries.update(stats.seed_summaries({TREAT_ALL: [everyone]}, labels, fns))
    return summaries


def _seed_list(probs_by_model: Mapping[str, Sequence[Any]]) -> list[Any]:
    if not probs_by_model:
        raise ValueError("probs_by_model is empty; pass {model name: [one (N, K) tensor per training seed]}")
    first = next(iter(probs_by_model.values()))
    return list(first) if isinstance(first, (list, tuple)) else [first]


def decision_table(
    summaries: Mapping[str, Mapping[str, Any]],
    differences: Mapping[str, PairedBootstrapResult] | None = None,
    reference: str | None = None,
) -> pd.DataFrame:
    """Rows = models, cells "mean ± sd" over seeds (sensitivity and specificity in %, biopsies and net benefit per
    1,000 images of the test set, and at the stated prevalence π where the summaries have it); with
    ``differences`` (from :func:`paired_net_benefit`) a last column "Δ NB vs <reference>" with its paired
    interval, flagged "beats" / "worse" where it excludes 0, and ``table.attrs["note"]`` the note of
    :func:`helpers.metrics.difference_table` (resamples, number of comparisons) to print under it."""
    first = next(iter(summaries.values()), {})
    shown = {name: column for name, column in _COLUMNS.items() if name in first}
    scale = {name: factor for name, (factor, _, _) in shown.items()}
    digits = {name: decimals for name, (_, decimals, _) in shown.items()}
    table = stats.summary_table(summaries, list(shown), scale=scale, digits=digits)
    table.columns = [header for _, _, header in shown.values()]
    if differences is not None:
        if reference is None:
            raise ValueError("pass reference= (the model the differences were taken against) with differences")
        delta = stats.difference_table(
            {m: {"net_benefit": r} for m, r in differences.items()},
            reference,
            higher_is_better={"net_benefit": True},
            scale={"net_benefit": 1000.0},
            digits={"net_benefit": 1},
        )
        table[f"Δ NB per 1,000 vs {reference} [95 %]"] = [delta.table.iloc[:, 0].get(m, "—") for m in table.index]
        table.attrs["note"] = delta.note
    return table


def decision_overview(tables: Mapping[str, pd.DataFrame], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Several :func:`decision_table` side by side, {label (a test set): table} → one table with two header levels
    (label, column); ``columns`` picks columns (default: biopsies, net benefit and its Δ columns). A model absent
    from one set reads "—" there."""
    if not tables:
        raise ValueError("tables is empty; pass {test set label: decisions.decision_table(...)}")
    picked = {}
    for label, table in tables.items():
        keep = (
            list(columns)
            if columns is not None
            else [c for c in table.columns if "biops" in c or "NB" in c or "net benefit" in c]
        )
        missing = [c for c in keep if c not in table.columns]
        if missing:
            raise ValueError(f"table {label!r} has no column(s) {missing}; it has {list(table.columns)}")
        picked[label] = table[keep]
    return pd.concat(picked, axis=1).fillna("—")


def decision_record(
    summaries: Mapping[str, Mapping[str, Any]],
    curves: Mapping[str, DecisionCurve],
    class_name: str,
    threshold: float = BIOPSY_THRESHOLD,
    differences: Mapping[str, PairedBootstrapResult] | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    """A JSON-ready record of the decision analysis: the class, the threshold, the test prevalence, "treat all"
    at the threshold, per-model seed summaries, the mean decision curves and the paired NB differences."""
    if not curves:
        raise ValueError(
            "curves is empty: decision_record needs at least one model's decision curve (decisions.decision_curve "
            "of its test probabilities, one entry per model)"
        )
    first = next(iter(curves.values()))
    record = {
        "class": class_name,
        "threshold": threshold,
        "rule": "biopsy when P(class) >= threshold",
        "prevalence": first.prevalence,
        "set_prevalence": first.set_prevalence,
        "treat_all_net_benefit": float(treat_all_net_benefit(first.prevalence, [threshold])[0]),
        "models": {m: dict(row) for m, row in summaries.items()},
        "decision_curves": {
            "thresholds": first.thresholds.tolist(),
            "treat_all": first.treat_all.tolist(),
            "net_benefit_mean_over_seeds": {m: c.model.tolist() for m, c in curves.items()},
        },
    }
    if differences is not None:
        record["net_benefit_differences"] = {
            "reference": reference,
            **{m: stats.difference_record(r) for m, r in differences.items()},
        }
    return record


__all__ += [
    "DEFAULT_THRESHOLDS",
    "TREAT_ALL",
    "decision_summaries",
    "decision_table",
    "decision_overview",
    "decision_record",
    "WindowCalibration",
    "window_calibration",
]
