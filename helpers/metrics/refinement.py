"""Out-of-sample calibration–refinement decomposition of the multi-class NLL and Brier score (compute only).

The population identity (DeGroot & Fienberg 1983; Bröcker 2009, eqs. 10–13)
---------------------------------------------------------------------------
For a proper score S, forecasts p of a label Y in K classes, the recalibrated forecast π(p) = P(Y | p) and the
base rates ō = P(Y), Bröcker (2009) shows

    E S(p, Y) = E d(p, π(p)) − E d(ō, π(p)) + E S(ō, Y),      i.e.   S = CAL − RES + UNC,                     (1)

with d the score's divergence: the KL divergence KL(π || p) for the log score (NLL), the squared Euclidean distance
||π − p||² for the Brier score summed over classes. CAL (calibration, "reliability") is what the best
recalibration could remove; RES (resolution) is how far the recalibrated forecasts move from the base rates; UNC is
the score of the constant base-rate forecast (the entropy of ō for the NLL, 1 − Σ_k ō_k² for the Brier score). The
Brier case with binned forecasts is Murphy (1973); :mod:`helpers.metrics.decomposition` has it, exact for any bins
with the within-bin terms of Stephenson et al. (2008).

Resolution is invariant to any injective recalibration g: g(p) carries the same information about Y as p, so
π(g(p)) = π(p) as random variables and RES(g(p)) = RES(p) (Bröcker 2009, Sec. 4: resolution is a property of the
information the forecast carries, calibration of how it is stated). A recalibration map fitted on other data
(temperature, vector or matrix scaling, Dirichlet calibration) can therefore change CAL, never RES: a lower score
after such a map is calibration the forecast had lost, not resolution gained.

The estimator: cross-fitted multinomial recalibration (Kull et al. 2019, with a departure)
------------------------------------------------------------------------------------------
π is unknown. It is estimated by a multinomial logistic regression of the label on the centred log-probabilities

    q(p) = softmax(A · clr(p) + b),    clr(p) = log p − mean_k(log p_k) 1   (the centred log-ratio, i.e. the
                                                                           logits centred to mean 0),

fitted K-fold CROSS-FITTED on the evaluated (p, y): every image's q comes from a map fitted on the other folds
(stratified folds, ``folds`` = 5 by default). Then, on the N evaluated images (ō their class frequencies),

    CAL = S(p) − S(q),    RES = UNC − S(q),    UNC = S(ō),    so   S(p) = CAL − RES + UNC  exactly.        (2)

The map family is Kull et al.'s (2019) Dirichlet calibration, q = softmax(W log p + b) (their eq. 3; the
project's :class:`helpers.calibration.DirichletCalibration`), with one departure: the features are centred per image
(clr(p) instead of log p), i.e. the row sums of W are tied. Why: the family {softmax(A clr(p) + b)} is closed under
every map p -> softmax(M clr(p) + c) with M invertible on the centred subspace, and such maps include temperature
scaling and vector and matrix scaling of centred logits; the fit is equivariant under them (the features are also
standardised per column), so the estimated RES is unchanged by them up to the small L2 penalty and the solver's
tolerance, as the population RES is. Kull et al.'s uncentred log p adds one per-image feature, mean_k log p_k, which
such a map changes non-linearly, so their family on g(p) is not their family on p (both contain the centred one).
Caveat on "injective": temperature scaling of logits is a function of the probabilities (softmax(z/T) depends on z
only through clr(z)); vector scaling with unequal weights also reads the level of the logits, which softmax
discards, so it is an injective map of the probabilities only when that level is itself a function of them (e.g.
centred logits). A network's logit level could carry information the probabilities lack; notebook 01 measures
that the estimated resolution hardly moves under vector scaling of its models.

The L2 penalty ``penalty`` (λ/2 ||A||² added to the mean log loss; scikit-learn's ``LogisticRegression`` with
C = 1/(λ N_fit)) is small and keeps rare classes finite; Kull et al.'s ODIR penalty shrinks the off-diagonal towards
0 instead, which needs a choice of λ by inner cross-validation.

What the estimate is (and is not). Cross-fitting makes q an out-of-sample forecast: S(q) is an honest (slightly
pessimistic) estimate of the score of the fitted map on new images, so RES is UNDER-estimated by the map's
estimation noise (which shrinks like 1/N; on the tests' synthetic posteriors, 5 classes and 3,000 images, about
0.001 nats) and CAL under-estimated by the same amount. For a calibrated forecast CAL is ≈ 0 and can be slightly
negative (the map's noise costs more than it removes), not biased upwards as an in-sample fit (binned REL,
in-sample isotonic) is. A parametric map also misses miscalibration outside its family (e.g. a non-monotone
distortion of one class's probability): CAL is then a lower bound on what a more flexible map could remove, and
the part it misses is counted as lost resolution (RES under-estimated) -- the error the earlier rank-by-rank
isotonic estimator (:func:`helpers.metrics.decomposition.nll_decomposition` with ``estimator="rank-chain"``) made
on a larger scale: it cannot see class-wise miscalibration at equal confidence, which this family can (a per-class
bias or scale), so vector scaling fitted elsewhere could raise the rank chain's resolution but not this one.

References: M. H. DeGroot & S. E. Fienberg (1983) "The comparison and evaluation of forecasters", The Statistician
32: 12–22; J. Bröcker (2009) "Reliability, sufficiency, and the decomposition of proper scores", Q. J. R. Meteorol.
Soc. 135: 1512–1519; A. H. Murphy (1973) "A new vector partition of the probability score", J. Appl. Meteor. 12:
595–600; M. Kull, M. Perelló-Nieto, M. Kängsepp, T. Silva Filho, H. Song & P. Flach (2019) "Beyond temperature
scaling: obtaining well-calibrated multi-class probabilities with Dirichlet calibration", NeurIPS; V. Chernozhukov
et al. (2018) "Double/debiased machine learning", Econometrics Journal 21: C1–C68 (cross-fitting).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from helpers.metrics.core import multiclass_inputs, to_numpy

__all__ = [
    "DEFAULT_FOLDS",
    "DEFAULT_PENALTY",
    "SCORES",
    "ScoreDecomposition",
    "cross_fitted_recalibration",
    "score_decomposition",
    "score_decomposition_from",
]

DEFAULT_FOLDS = 5
DEFAULT_PENALTY = 1e-4
SCORES = ("nll", "brier")


@dataclass(frozen=True)
class ScoreDecomposition:
    """score = calibration + refinement, refinement = uncertainty − resolution (Bröcker 2009; eq. 1 of
    :mod:`helpers.metrics.refinement`), as estimated by ``recalibration`` (how the recalibrated forecast was made)."""

    score: float
    calibration: float
    refinement: float
    uncertainty: float
    resolution: float
    recalibration: str

    @classmethod
    def from_refinement(
        cls, score: float, refinement: float, uncertainty: float, recalibration: str
    ) -> ScoreDecomposition:
        """The decomposition whose calibration and resolution follow from eq. 1: calibration = score − refinement,
        resolution = uncertainty − refinement (exact when the recalibrated forecast is the one scored)."""
        return cls(
            score=score,
            calibration=score - refinement,
            refinement=refinement,
            uncertainty=uncertainty,
            resolution=uncertainty - refinement,
            recalibration=recalibration,
        )

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)


def _check_folds(folds: Any) -> int:
    if isinstance(folds, bool) or not isinstance(folds, numbers.Integral) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2 (the number of cross-fitting folds), got {folds!r}")
    return int(folds)


def _check_penalty(penalty: Any) -> float:
    if (
        isinstance(penalty, bool)
        or not isinstance(penalty, numbers.Real)
        or not (math.isfinite(penalty) and penalty > 0)
    ):
        raise ValueError(f"penalty must be a finite number > 0 (the L2 penalty on the map's weights), got {penalty!r}")
    return float(penalty)


def _check_class_counts(y: torch.Tensor, n_classes: int, folds: int) -> None:
    """Every class that occurs must occur at least ``folds`` times, so that each fold's map has seen it."""
    counts = torch.bincount(y, minlength=n_classes)
    rare = [k for k in range(n_classes) if 0 < int(counts[k]) < folds]
    if rare:
        raise ValueError(
            f"classes {rare} occur {[int(counts[k]) for k in rare]} time(s), fewer than folds = {folds}: a fold's "
            "map would never see them and give them probability 0 (use fewer folds or a larger evaluation set)"
        )


def centred_log_probabilities(p: torch.Tensor) -> np.ndarray:
    """clr(p) = log p − mean_k log p_k per row (float64 numpy); an exact 0 is read as float64 tiny (log ≈ −708)."""
    log_p = p.to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny).log()
    return to_numpy(log_p - log_p.mean(1, keepdim=True))


def cross_fitted_recalibration(
    probs: Any, labels: Any, folds: int = DEFAULT_FOLDS, seed: int = 0, penalty: float = DEFAULT_PENALTY
) -> torch.Tensor:
    """The cross-fitted recalibrated forecasts q (N, K) float64 of the module docstring: stratified ``folds``-fold
    split shuffled with ``seed``; on each fold, q = softmax(A clr(p) + b) with (A, b) fitted by scikit-learn's
    multinomial ``LogisticRegression`` (L2 penalty λ = ``penalty`` on the mean-log-loss scale, standardised features)
    on the other folds. Classes that never occur in ``labels`` get q = 0."""
    folds, penalty = _check_folds(folds), _check_penalty(penalty)
    p, y = multiclass_inputs(probs, labels)
    n, n_classes = p.shape
    if n < 2 * folds:
        raise ValueError(f"cross-fitting with {folds} folds needs at least {2 * folds} images, got {n}")
    _check_class_counts(y, n_classes, folds)
    features, target = centred_log_probabilities(p), to_numpy(y)
    q = np.zeros((n, n_classes), dtype=np.float64)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for fit_rows, held_out in splitter.split(features, target):
        if np.unique(target[fit_rows]).size == 1:  # one class only: its frequency, 1, is the fitted map
            q[np.ix_(held_out, [int(target[fit_rows][0])])] = 1.0
            continue
        model = make_pipeline(
            StandardScaler(),
            LogisticRegression(C=1.0 / (penalty * len(fit_rows)), tol=1e-6, max_iter=5000),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            model.fit(features[fit_rows], target[fit_rows])
        q[np.ix_(held_out, model.classes_)] = model.predict_proba(features[held_out])
    return torch.from_numpy(q).to(p.device)


def _score_rows(score: str, forecast: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-row score of (N, K) float64 forecasts: −log q_y (floored at float64 tiny) or Σ_k (q_k − 1[y = k])²."""
    if score == "nll":
        return -forecast.gather(1, y[:, None])[:, 0].clamp_min(torch.finfo(torch.float64).tiny).log()
    one_hot = torch.nn.functional.one_hot(y, forecast.shape[1]).to(torch.float64)
    return ((forecast - one_hot) ** 2).sum(1)


def score_decomposition_from(
    probs: Any, labels: Any, recalibrated: torch.Tensor, score: str = "nll", recalibration: str = "given"
) -> ScoreDecomposition:
    """Eq. (2) of the module docstring for a given recalibrated forecast q (N, K): CAL = S(p) − S(q),
    RES = UNC − S(q), UNC = S(class frequencies). The identity S(p) = CAL − RES + UNC holds exactly for any q."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}, got {score!r}")
    p, y = multiclass_inputs(probs, labels)
    q = torch.as_tensor(recalibrated, dtype=torch.float64, device=p.device)
    if q.shape != p.shape:
        raise ValueError(f"recalibrated has shape {tuple(q.shape)}, but probs {tuple(p.shape)}: they must match")
    frequency = torch.bincount(y, minlength=p.shape[1]).to(torch.float64) / len(y)
    value = float(_score_rows(score, p.to(torch.float64), y).mean())
    refinement = float(_score_rows(score, q, y).mean())
    uncertainty = float(_score_rows(score, frequency.expand_as(q), y).mean())
    return ScoreDecomposition.from_refinement(value, refinement, uncertainty, recalibration)


def score_decomposition(
    probs: Any,
    labels: Any,
    score: str = "nll",
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    penalty: float = DEFAULT_PENALTY,
) -> ScoreDecomposition:
    """The NLL (``score="nll"``, :func:`helpers.metrics.nll`) or the Brier score (``"brier"``, summed over classes,
    :func:`helpers.metrics.brier`) as CAL − RES + UNC with the cross-fitted recalibration of the module docstring."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}, got {score!r}")
    q = cross_fitted_recalibration(probs, labels, folds=folds, seed=seed, penalty=penalty)
    return score_decomposition_from(probs, labels, q, score, f"cross-fitted ({folds} folds)")
