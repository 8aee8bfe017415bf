"""Calibration–refinement decompositions of the Brier score and the NLL (compute only; no plotting).

Conventions as in :mod:`helpers.metrics.calibration`: multi-class ``probs`` (N, K) with (N,) integer ``labels``;
multi-label ``probs`` (N, T) of P(y_t = 1) with an (N, T) 0/1 ``labels`` matrix. Inputs are validated by the same checks
as the metrics, and equal-width bins are the metrics' bins ((lo, hi], 0 in the first bin; 15 by default).

Brier score: Murphy (1973) with the two within-bin terms (Stephenson, Coelho & Jolliffe 2008)
--------------------------------------------------------------------------------------------------
Binary forecasts p_i of outcomes o_i in {0, 1}, i = 1..N, grouped into bins b with n_b forecasts, mean forecast
p̄_b, outcome frequency ō_b, and overall base rate ō. Inside bin b write

    p_i - o_i = (p̄_b - ō_b) + (p_i - p̄_b) - (o_i - ō_b).

Square and sum over the bin: the cross terms with the constant (p̄_b - ō_b) vanish (deviations from a bin mean sum
to 0), and sum_{i in b} (o_i - ō_b)^2 = n_b ō_b (1 - ō_b). Summing over bins and using
(1/N) sum_b n_b ō_b (1 - ō_b) = ō (1 - ō) - (1/N) sum_b n_b (ō_b - ō)^2 gives the exact identity

    BS = REL - RES + UNC + WBV - WBC,                                                    (1)

    REL = (1/N) sum_b n_b (p̄_b - ō_b)^2          reliability: distance of the bin means from the diagonal
    RES = (1/N) sum_b n_b (ō_b - ō)^2            resolution: how far the bins' frequencies move from the base rate
    UNC = ō (1 - ō)                              uncertainty: the Brier score of the constant base-rate forecast
    WBV = (1/N) sum_b sum_{i in b} (p_i - p̄_b)^2                     within-bin variance of the forecasts
    WBC = (2/N) sum_b sum_{i in b} (o_i - ō_b)(p_i - p̄_b)            within-bin covariance (x 2)

Murphy's (1973) partition BS = REL - RES + UNC is exact only when every forecast in a bin is identical; WBV and WBC
(Stephenson et al. 2008) are what binning non-identical forecasts adds, so (1) holds to float precision
for any bins. A constant forecast equal to the base rate has one bin with p̄ = ō: REL = RES = WBV = WBC = 0 and
BS = UNC. It is perfectly calibrated and has no resolution: the lowest score reachable without looking at the image.

Multi-class (the course's Brier, :func:`helpers.metrics.brier`, is the SUM over classes of (p_ik - 1[y_i = k])^2)
    is decomposed one-vs-rest: BS = sum_k BS_k with BS_k the binary Brier score of column k, and (1) applied to each
    column with its own bins; every component is the sum over classes. Why this choice: it matches the course's
    sum-over-classes convention term by term, needs only K x n_bins cells (Murphy's vector partition groups
    identical probability VECTORS, which are all distinct for a neural network), and UNC = sum_k ō_k (1 - ō_k) =
    1 - sum_k ō_k^2 is exactly the multi-class uncertainty of Murphy (1973). REL is then a class-wise (not top-label)
    reliability, on the squared scale.
Multi-label (the course's :func:`helpers.metrics.multilabel_brier` is the MEAN over (sample, label) pairs):
    (1) per label, every component averaged over the labels, so the components add up to ``multilabel_brier``.

NLL: the calibration–refinement decomposition of a proper score (DeGroot & Fienberg 1983; Bröcker 2009)
--------------------------------------------------------------------------------------------------------
For a proper score S and forecasts p with recalibrated forecast π(p) = P(Y | p), Bröcker (2009) shows

    E S(p, Y) = E d(p, π(p))  +  E S(π(p), Y),            E S(π(p), Y) = UNC - RES,                   (2)
                [calibration]    [refinement]

with d the score's divergence (the KL divergence for the log score), UNC = E S(ō, Y) the score of the base rates
(their entropy, for the log score) and RES = E d(ō, π(p)) = E KL(π(p) || ō). Resolution is invariant to any
injective recalibration of p (the recalibrated forecast of g(p) is π(p) again), so no recalibration map can raise
the population RES. Neither π nor the expectations are known: a recalibration map q = c(p) is fitted and

    calibration = NLL(p) - NLL(q),     refinement = NLL(q),     resolution = UNC - refinement.

Multi-class (the course's NLL, -log p_{i, y_i}), ``estimator=``:

* ``"cross-fitted"`` (default): q is the cross-fitted multinomial recalibration of
  :mod:`helpers.metrics.refinement` (Dirichlet-calibration family on centred log-probabilities, each image's q
  fitted on the other folds). Out-of-sample, it sees class-wise miscalibration, and temperature, vector or matrix
  scaling of the forecasts leave its resolution unchanged (the family is closed under them). The same q gives the
  Brier score's calibration and resolution (``brier_calibration``, ``brier_resolution_cross_fitted`` in the tables).
* ``"rank-chain"``: the EARLIER estimator, kept so that notebook 01 can show why it was replaced. Sort each row's
  classes by probability, p_(1) >= p_(2) >= ..., and write the forecast as a chain of binary forecasts (chain
  rule): stage r forecasts "the label is the class of rank r, given that it is not one of ranks 1..r-1" with
  c_ir = p_(r) / sum_{j >= r} p_(j). Each stage is recalibrated with ``recalibration`` (below), fitted IN-SAMPLE on
  the rows that reach it. It misses class-wise miscalibration at equal confidence (which it counts as lost
  resolution), so a class-wise map fitted elsewhere can RAISE its resolution (notebook 01: vector scaling of the
  over-fitting model, 0.5025 -> 0.5325 in the issue that replaced it); and its in-sample fit over-estimates the
  calibration term and the resolution.

Multi-label (per label, binary log loss, averaged over labels; the components add up to
:func:`helpers.metrics.multilabel_nll`) and the rank-chain stages use an in-sample binary map (``recalibration=``):

* ``"isotonic"`` (default): scikit-learn's IsotonicRegression of the outcome on the forecast (pool-adjacent-
  violators). Isotonic regression minimises every proper score over all non-decreasing maps (Barlow et al. 1972;
  Brümmer & du Preez 2013); the identity is one of them, so the calibration term is >= 0 on the fitted data, and q
  is calibrated in-sample, so refinement = UNC - E KL(q || ō) exactly. For binary forecasts this is the CORP
  decomposition of Dimitriadis, Gneiting & Jordan (2021): calibration = their MCB, resolution = their DSC (also
  in the R package reliabilitydiag and the Python package model-diagnostics). It depends on the forecasts only
  through their ranks: any strictly increasing map of p (a temperature, Platt scaling) leaves it unchanged, so for
  one binary forecast it has the invariance the multi-class rank chain lacks.
* ``"binned"``: q = the outcome frequency of the forecast's equal-width bin (histogram binning). Also calibrated
  in-sample, but the calibration term can be slightly negative when forecasts vary inside a bin (the log-score
  analogue of WBV - WBC in (1)).

Bias of the estimates (they are estimates, not the population values): an in-sample map (binned REL and RES in
(1), isotonic) makes the calibration term and the resolution OVER-estimated, most at small N and with many steps
or bins; the sampling noise of the bin frequencies adds about sum_b p̄_b (1 - p̄_b) / N (at most n_bins / (4 N) per
class) to REL and RES, so a calibrated forecast has REL > 0 on average, as binned ECE does (notebook 01 section 3).
The cross-fitted estimator errs the other way (both terms slightly UNDER-estimated; :mod:`helpers.metrics.refinement`).
Compare models on the same test set, bins and folds, as the course does.

References: A. H. Murphy (1973) "A new vector partition of the probability score", J. Appl. Meteor. 12: 595-600;
D. B. Stephenson, C. A. S. Coelho & I. T. Jolliffe (2008) "Two extra components in the Brier score decomposition",
Weather and Forecasting 23: 752-757; M. H. DeGroot & S. E. Fienberg (1983) "The comparison and evaluation of
forecasters", The Statistician 32: 12-22; J. Bröcker (2009) "Reliability, sufficiency, and the decomposition of
proper scores", Q. J. R. Meteorol. Soc. 135: 1512-1519; T. Dimitriadis, T. Gneiting & A. I. Jordan (2021) "Stable
reliability diagrams for probabilistic classifiers", PNAS 118: e2016191118; Kull et al. (2019) for the multi-class
map: see :mod:`helpers.metrics.refinement`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.isotonic import IsotonicRegression

from helpers.metrics import classification, refinement, stats

# the metrics' own input checks and binning, so the decomposition and the metrics read inputs and bins alike
from helpers.metrics.core import (
    DEFAULT_N_BINS,
    check_n_bins,
    equal_width_bin_index,
    multiclass_inputs,
    multilabel_inputs,
)
from helpers.metrics.multilabel import multilabel_nll
from helpers.metrics.refinement import DEFAULT_FOLDS, ScoreDecomposition

__all__ = [
    "COLUMNS",
    "ESTIMATORS",
    "RECALIBRATIONS",
    "BrierDecomposition",
    "brier_decomposition",
    "decomposition_grid",
    "decomposition_summaries",
    "decomposition_table",
    "multilabel_brier_decomposition",
    "multilabel_nll_decomposition",
    "nll_decomposition",
    "results_record",
]

RECALIBRATIONS = ("isotonic", "binned")
ESTIMATORS = ("cross-fitted", "rank-chain")


@dataclass(frozen=True)
class BrierDecomposition:
    """Brier score = reliability - resolution + uncertainty + within_bin_variance - within_bin_covariance (eq. 1)."""

    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_bin_variance: float
    within_bin_covariance: float

    @property
    def within_bin(self) -> float:
        """WBV - WBC: what binning non-identical forecasts adds to Murphy's three terms."""
        return self.within_bin_variance - self.within_bin_covariance

    def residual(self) -> float:
        """Brier score minus the sum of the components (0 up to float rounding)."""
        return self.brier - (self.reliability - self.resolution + self.uncertainty + self.within_bin)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------------------------
# Brier
# ----------------------------------------------------------------------------------------------------------------
def _binned_sums(forecast: torch.Tensor, outcome: torch.Tensor, n_bins: int) -> dict[str, torch.Tensor]:
    """Per-(column, bin) sums of 1, p, o, p^2 and p*o, each (G, n_bins) float64, for (N, G) forecasts/outcomes."""
    n_columns = forecast.shape[1]
    cell = (equal_width_bin_index(forecast, n_bins) + n_bins * torch.arange(n_columns, device=forecast.device)).reshape(
        -1
    )
    p = forecast.to(torch.float64).reshape(-1)
    o = outcome.to(torch.float64).reshape(-1)
    sums = {}
    for name, values in (("n", torch.ones_like(p)), ("p", p), ("o", o), ("pp", p * p), ("po", p * o)):
        total = torch.zeros(n_columns * n_bins, dtype=torch.float64, device=forecast.device)
        sums[name] = total.scatter_add_(0, cell, values).reshape(n_columns, n_bins)
    return sums


def _brier_terms(forecast: torch.Tensor, outcome: torch.Tensor, n_bins: int) -> dict[str, torch.Tensor]:
    """The six terms of eq. (1) for each column of (N, G) binary forecasts, each a (G,) float64 tensor."""
    s = _binned_sums(forecast, outcome, n_bins)
    n_rows = forecast.shape[0]
    occupied = s["n"] > 0
    n_b = s["n"].clamp_min(1.0)  # empty bins have all sums 0: any positive divisor gives 0 for them
    base_rate = s["o"].sum(1, keepdim=True) / n_rows
    p = forecast.to(torch.float64)
    o = outcome.to(torch.float64)
    return {
        "brier": ((p - o) ** 2).mean(0),
        "reliability": ((s["p"] - s["o"]) ** 2 / n_b).sum(1) / n_rows,
        "resolution": torch.where(occupied, s["n"] * (s["o"] / n_b - base_rate) ** 2, 0.0).sum(1) / n_rows,
        "uncertainty": (base_rate * (1 - base_rate))[:, 0],
        "within_bin_variance": (s["pp"] - s["p"] ** 2 / n_b).sum(1) / n_rows,
        "within_bin_covariance": 2 * (s["po"] - s["p"] * s["o"] / n_b).sum(1) / n_rows,
    }


def brier_decomposition(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> BrierDecomposition:
    """Multi-class Brier score (:func:`helpers.metrics.brier`, summed over classes) split as in eq. (1), one-vs-rest:
    column k of ``probs`` forecasts 1[y = k] with its own ``n_bins`` equal-width bins; each component is the sum
    over the K classes (see the module docstring for the derivation and why one-vs-rest)."""
    check_n_bins(n_bins)
    p, y = multiclass_inputs(probs, labels)
    one_hot = torch.nn.functional.one_hot(y, p.shape[1])
    terms = _brier_terms(p, one_hot, n_bins)
    return BrierDecomposition(**{name: float(values.sum()) for name, values in terms.items()})


def multilabel_brier_decomposition(probs: Any, labels: Any, n_bins: int = DEFAULT_N_BINS) -> BrierDecomposition:
    """Multi-label Brier score (:func:`helpers.metrics.multilabel_brier`) split as in eq. (1) per label, each
    component averaged over the T labels (so they add up to the mean over all (sample, label) pairs)."""
    check_n_bins(n_bins)
    p, y = multilabel_inputs(probs, labels)
    terms = _brier_terms(p, y, n_bins)
    return BrierDecomposition(**{name: float(values.mean()) for name, values in terms.items()})


# ----------------------------------------------------------------------------------------------------------------
# NLL
# ----------------------------------------------------------------------------------------------------------------
def _check_recalibration(recalibration: str, n_bins: int) -> None:
    if recalibration not in RECALIBRATIONS:
        raise ValueError(f"recalibration must be one of {', '.join(RECALIBRATIONS)}, got {recalibration!r}")
    check_n_bins(n_bins)


def _recalibrate(forecast: torch.Tensor, outcome: torch.Tensor, recalibration: str, n_bins: int) -> torch.Tensor:
    """q = c(p) for one column of binary forecasts, c fitted on these (p, o): isotonic or bin frequencies (float64)."""
    p = forecast.to(torch.float64)
    o = outcome.to(torch.float64)
    if recalibration == "isotonic":
        fit = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        q = fit.fit_transform(p.cpu().numpy(), o.cpu().numpy())
        return torch.from_numpy(np.asarray(q, dtype=np.float64)).to(p.device)
    s = _binned_sums(p[:, None], o[:, None], n_bins)
    frequency = s["o"][0] / s["n"][0].clamp_min(1.0)
    return frequency[equal_width_bin_index(p, n_bins)]


def _binary_log_loss(q: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """Mean of -[o log q + (1 - o) log(1 - q)] with 0 log 0 = 0 (a recalibrated q is never 0 on its outcome)."""
    return -(torch.xlogy(o, q) + torch.xlogy(1 - o, 1 - q)).mean(0)


def _binary_entropy(rate: torch.Tensor) -> torch.Tensor:
    return -(torch.xlogy(rate, rate) + torch.xlogy(1 - rate, 1 - rate))


def _binary_kl(q: torch.Tensor, rate: torch.Tensor) -> torch.Tensor:
    """KL(Bernoulli(q) || Bernoulli(rate)) elementwise (0 log 0 = 0)."""
    return (
        torch.xlogy(q, q)
        - torch.xlogy(q, rate.expand_as(q))
        + torch.xlogy(1 - q, 1 - q)
        - torch.xlogy(1 - q, (1 - rate).expand_as(q))
    )


def multilabel_nll_decomposition(
    probs: Any, labels: Any, recalibration: str = "isotonic", n_bins: int = DEFAULT_N_BINS
) -> ScoreDecomposition:
    """Multi-label NLL (:func:`helpers.metrics.multilabel_nll`) = calibration + refinement (eq. 2), per label with a
    recalibration map fitted per label on these data, each component averaged over labels. The resolution is the
    mean KL(q || base rate), computed on its own: refinement = uncertainty - resolution holds because q is
    calibrated in-sample (module docstring)."""
    _check_recalibration(recalibration, n_bins)
    p, y = multilabel_inputs(probs, labels)
    q = torch.stack([_recalibrate(p[:, t], y[:, t], recalibration, n_bins) for t in range(p.shape[1])], dim=1)
    base_rate = y.mean(0)
    score = multilabel_nll(p, y)
    refinement = float(_binary_log_loss(q, y).mean())
    return ScoreDecomposition(
        score=score,
        calibration=score - refinement,
        refinement=refinement,
        uncertainty=float(_binary_entropy(base_rate).mean()),
        resolution=float(_binary_kl(q, base_rate).mean()),
        recalibration=recalibration,
    )


def _rank_chain_log_loss(p: torch.Tensor, y: torch.Tensor, recalibration: str, n_bins: int) -> float:
    """Mean NLL of the rank-by-rank recalibrated forecast (module docstring): stage r recalibrates, among the rows
    whose label is not among their r most probable classes, the conditional probability of the (r+1)-th."""
    p = p.to(torch.float64)
    order = torch.argsort(p, dim=1, descending=True, stable=True)
    by_rank = p.gather(1, order)
    label_rank = (order == y[:, None]).to(torch.int64).argmax(1)
    remaining = by_rank.flip(1).cumsum(1).flip(1)  # mass of the classes at rank >= r
    n_classes = p.shape[1]
    total = 0.0
    for r in range(n_classes - 1):
        at_risk = label_rank >= r
        if not bool(at_risk.any()):
            break
        mass = remaining[at_risk, r]
        conditional = torch.where(
            mass > 0, by_rank[at_risk, r] / mass.clamp_min(torch.finfo(p.dtype).tiny), 1.0 / (n_classes - r)
        )
        hit = (label_rank[at_risk] == r).to(torch.float64)
        q = _recalibrate(conditional.clamp(0.0, 1.0), hit, recalibration, n_bins)
        total += float(_binary_log_loss(q, hit) * len(hit))
    return total / len(y)


def _check_estimator(estimator: str) -> None:
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")


def nll_decomposition(
    probs: Any,
    labels: Any,
    estimator: str = "cross-fitted",
    recalibration: str = "isotonic",
    n_bins: int = DEFAULT_N_BINS,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> ScoreDecomposition:
    """Multi-class NLL (:func:`helpers.metrics.nll`) = calibration + refinement, refinement = uncertainty -
    resolution (eq. 2); uncertainty = the entropy of the class frequencies (the NLL of the constant base-rate
    forecast). ``estimator="cross-fitted"`` (default): :func:`helpers.metrics.refinement.score_decomposition`
    (``folds``, ``seed``); ``"rank-chain"``: the earlier in-sample rank-by-rank map of the module docstring, its
    stages recalibrated by ``recalibration`` with ``n_bins``."""
    _check_estimator(estimator)
    if estimator == "cross-fitted":
        return refinement.score_decomposition(probs, labels, "nll", folds=folds, seed=seed)
    _check_recalibration(recalibration, n_bins)
    p, y = multiclass_inputs(probs, labels)
    score = classification.nll(p, y)
    refined = _rank_chain_log_loss(p, y, recalibration, n_bins)
    frequency = torch.bincount(y, minlength=p.shape[1]).to(torch.float64) / len(y)
    uncertainty = float(-torch.xlogy(frequency, frequency).sum())
    return ScoreDecomposition.from_refinement(score, refined, uncertainty, f"rank-chain {recalibration} (in-sample)")


# ----------------------------------------------------------------------------------------------------------------
# tables for the notebooks
# ----------------------------------------------------------------------------------------------------------------
def _components(
    probs: Any, labels: Any, multilabel: bool, n_bins: int, recalibration: str, folds: int, seed: int
) -> dict[str, float]:
    """Every component of both decompositions of one probability tensor, under flat names (the results JSON keys).
    Multi-class: one cross-fitted recalibration gives the NLL's and the Brier score's calibration and resolution."""
    if multilabel:
        brier = multilabel_brier_decomposition(probs, labels, n_bins=n_bins)
        nll = multilabel_nll_decomposition(probs, labels, recalibration=recalibration, n_bins=n_bins)
        cross_fitted = {}
    else:
        brier = brier_decomposition(probs, labels, n_bins=n_bins)
        q = refinement.cross_fitted_recalibration(probs, labels, folds=folds, seed=seed)
        nll = refinement.score_decomposition_from(probs, labels, q, "nll")
        brier_q = refinement.score_decomposition_from(probs, labels, q, "brier")
        cross_fitted = {
            "brier_calibration": brier_q.calibration,
            "brier_resolution_cross_fitted": brier_q.resolution,
        }
    return {
        "brier": brier.brier,
        "brier_reliability": brier.reliability,
        "brier_resolution": brier.resolution,
        "brier_uncertainty": brier.uncertainty,
        "brier_within_bin": brier.within_bin,
        **cross_fitted,
        "nll": nll.score,
        "nll_calibration": nll.calibration,
        "nll_refinement": nll.refinement,
        "nll_resolution": nll.resolution,
        "nll_uncertainty": nll.uncertainty,
    }


def decomposition_summaries(
    probs_by_model: Mapping[str, Sequence[Any]],
    labels: Any,
    multilabel: bool = False,
    n_bins: int = DEFAULT_N_BINS,
    recalibration: str = "isotonic",
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{model: {component: :func:`helpers.metrics.seed_summary` over the model's seeds}}, the shape of
    :func:`helpers.metrics.seed_summaries` (so it goes into a results JSON as is). ``probs_by_model`` is a
    notebook's {model: [test probabilities per training seed]} (a single tensor counts as one seed). Multi-class
    NLL and Brier calibration / resolution: cross-fitted (``folds``, ``seed``); multi-label NLL: in-sample
    ``recalibration`` per label; the binned Brier terms of eq. (1): ``n_bins``."""
    out = {}
    for model, per_seed in probs_by_model.items():
        per_seed = list(per_seed) if isinstance(per_seed, (list, tuple)) else [per_seed]
        if not per_seed:
            raise ValueError(f"model {model!r} has no probability tensor (one per training seed expected)")
        values = [_components(p, labels, multilabel, n_bins, recalibration, folds, seed) for p in per_seed]
        out[model] = {name: stats.seed_summary([v[name] for v in values]) for name in values[0]}
    return out


def _rounded(value: float, digits: int) -> float:
    """round(value, digits), with a rounded -0.0 shown as 0.0."""
    return round(value, digits) + 0.0


COLUMNS = {
    "brier": "Brier",
    "brier_reliability": "reliability",
    "brier_resolution": "resolution",
    "brier_uncertainty": "uncertainty",
    "brier_within_bin": "within-bin",
    "nll": "NLL",
    "nll_calibration": "NLL calibration",
    "nll_resolution": "NLL resolution",
}


def decomposition_table(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    models: Sequence[str] | None = None,
    columns: Mapping[str, str] | None = None,
    digits: int = 4,
) -> pd.DataFrame:
    """Rows = models, columns = components with readable names (``columns``: key -> header, default
    :data:`COLUMNS`), cells = the mean over training seeds, rounded to ``digits``."""
    columns = dict(COLUMNS if columns is None else columns)
    models = list(summaries) if models is None else list(models)
    missing = [m for m in models if m not in summaries]
    if missing:
        raise KeyError(f"no decomposition for model(s) {missing}; computed: {list(summaries)}")
    rows = {m: {header: _rounded(summaries[m][key]["mean"], digits) for key, header in columns.items()} for m in models}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def decomposition_grid(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    grid: Mapping[str, Mapping[str, str]],
    components: Mapping[str, str] | None = None,
    digits: int = 4,
) -> pd.DataFrame:
    """A compact comparison: rows = ``grid``'s keys, ``grid[row]`` = {column group: model key of ``summaries``},
    columns = (group, component header) for each of ``components`` (key -> header; default reliability and
    resolution of the Brier score), cells = the mean over training seeds, rounded to ``digits``. E.g. rows = losses,
    groups = "<recipe>" and "<recipe> + TS", to show what temperature scaling does to each component."""
    components = dict(components or {"brier_reliability": "REL", "brier_resolution": "RES"})
    missing = sorted({key for groups in grid.values() for key in groups.values() if key not in summaries})
    if missing:
        raise KeyError(f"no decomposition for model(s) {missing}; computed: {list(summaries)}")
    rows = {
        row: {
            (group, header): _rounded(summaries[key][component]["mean"], digits)
            for group, key in groups.items()
            for component, header in components.items()
        }
        for row, groups in grid.items()
    }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def results_record(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    multilabel: bool = False,
    n_bins: int = DEFAULT_N_BINS,
    recalibration: str = "isotonic",
    folds: int = DEFAULT_FOLDS,
) -> dict[str, Any]:
    """The block a notebook stores in its results JSON: how the components were computed, and every model's
    per-seed components (:func:`decomposition_summaries`, called with the same ``multilabel``, ``n_bins``,
    ``recalibration`` and ``folds``)."""
    brier = "per label, averaged over labels" if multilabel else "one-vs-rest per class, summed over classes"
    if multilabel:
        nll = (
            f"{recalibration} recalibration per label fitted on the evaluated (test) data itself: an in-sample estimate"
        )
    else:
        nll = (
            f"recalibrated forecast q = softmax(A clr(p) + b), multinomial logistic regression on the centred "
            f"log-probabilities (Dirichlet-calibration family, Kull et al. 2019), {folds}-fold cross-fitted on the "
            "test set (helpers.metrics.refinement); the same q gives brier_calibration = Brier(p) - Brier(q) and "
            "brier_resolution_cross_fitted = uncertainty - Brier(q)"
        )
    return {
        "method": {
            "brier": f"Murphy (1973) REL - RES + UNC with the within-bin terms of Stephenson et al. (2008), {brier}; "
            f"{n_bins} equal-width bins; brier_within_bin = WBV - WBC",
            "nll": "calibration = NLL - NLL(q), refinement = NLL(q), resolution = uncertainty - refinement "
            f"(DeGroot & Fienberg 1983; Bröcker 2009); {nll}",
        },
        "models": {model: dict(components) for model, components in summaries.items()},
    }
