"""Label-shift (prior-shift) estimators of notebook 12: the source prior π_s, Saerens et al.'s EM, MAP-EM with a
Dirichlet prior on the target shares, and BBSE. Each returns the whole estimated target prior vector (float64, sum 1).

**Label shift** means π_t(y) ≠ π_s(y) while every class looks the same, p_t(x | y) = p_s(x | y). Then
p_t(y | x) ∝ [π_t(y) / π_s(y)] p_s(y | x) (Saerens, Latinne & Decaestecker, Neural Computation 14(1), 2002, eq. 2.4:
:func:`adjust_to_prior`), and the unknown π_t can be estimated from unlabelled target images:

* **EM** (Saerens et al. 2002, eqs. 2.9–2.10, :func:`em_target_prior`): maximum likelihood of π_t; it needs
  p_s(y | x) calibrated and π_s equal to the model's *own* mean forecast on source data (:func:`source_prior`),
  else it is biased (see that function).
* **MAP-EM** (:func:`map_em_target_prior`): the same likelihood times a Dirichlet(α) prior on π_t; the M-step becomes
  π_k = (Σ_i p_ik + α_k − 1) / (N + Σ_j α_j − K) (the MAP estimate of Šipka, Šulc & Matas, "The Hitchhiker's Guide to
  Prior-Shift Adaptation", WACV 2022, Sec. 3; not part of Alexandari et al. 2020 or their code
  github:kundajelab/abstention, which has no Dirichlet prior). With α_k > 1 no share can reach 0, where plain EM
  collapses on small or unfamiliar target sets.
* **BBSE** (Lipton, Wang & Smola, "Detecting and correcting for label shift with black box predictors", ICML 2018,
  Sec. 4, ŵ = Ĉ⁻¹ μ̂: :func:`bbse_target_prior`): the weights w = π_t / π_s solve C w = μ, with C[i, j] = P_s(ŷ = i,
  y = j) the joint confusion matrix of hard predictions on labelled held-out source data and μ[i] = P_t(ŷ = i) on
  the target. It needs no calibration, only that the hard predictions' confusion matrix be invertible and the same
  at the target (p(x | y) unchanged again).

EM and MAP-EM use the whole probability vector and are efficient when the model is calibrated; BBSE uses only the
arg-max, is consistent for any fixed predictor, but is noisier (it inverts an estimated K × K matrix). All three
assume p(x | y) unchanged; :func:`class_conditional_shift` tests that assumption class by class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import StratifiedKFold, permutation_test_score

from helpers import metrics

__all__ = [
    "adjust_to_prior",
    "source_prior",
    "em_target_prior",
    "map_em_target_prior",
    "bbse_target_prior",
    "em_fixed_point_gap",
    "DIRICHLET_ALPHA",
    "class_conditional_shift",
    "never_predicted",
]

#: the Dirichlet concentration of :func:`map_em_target_prior` per class: α_k = 2 adds one pseudo-image to every
#: class (add-one smoothing), the weakest symmetric Dirichlet with a mode strictly inside the simplex; not tuned
DIRICHLET_ALPHA = 2.0


def _prior(prior: Any, k: int, what: str) -> torch.Tensor:
    p = torch.as_tensor(prior, dtype=torch.float64).flatten()
    if p.numel() != k or not torch.isfinite(p).all() or (p <= 0).any():
        raise ValueError(f"{what} must be {k} finite positive class frequencies, got {p.tolist()}")
    return p / p.sum()


def _probabilities(probs: Any, what: str = "probs") -> torch.Tensor:
    """(N, K) class probabilities in float64, checked as the metrics check them
    (:func:`helpers.metrics.multiclass_probabilities`: finite, in [0, 1], rows summing to 1)."""
    return metrics.multiclass_probabilities(probs, what).to(torch.float64)


def _check_max_iter(max_iter: Any) -> None:
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r} (EM needs at least one step)")


def adjust_to_prior(probs: Any, source_prior: Any, target_prior: Any) -> torch.Tensor:
    """Saerens et al. (2002), eq. 2.4: probabilities for a population with class prior ``target_prior`` from
    probabilities ``probs`` (N, K) of a model whose training prior was ``source_prior`` (each rescaled to sum 1).
    ``probs`` must be probabilities (a ValueError for logits, NaN, negative or unnormalised rows). Float64 out."""
    p = _probabilities(probs)
    ratio = _prior(target_prior, p.shape[1], "target_prior") / _prior(source_prior, p.shape[1], "source_prior")
    adjusted = p * ratio
    return adjusted / adjusted.sum(1, keepdim=True)


def source_prior(calibrated_source_probs: Any) -> torch.Tensor:
    """π_s for EM: the mean calibrated forecast on labelled-source data the model was not trained on (the
    calibration half of validation), as Alexandari, Kundaje & Shrikumar (ICML 2020) do in their code
    (github:kundajelab/abstention, ``abstention/label_shift.py``, ``EMImbalanceAdapter``: ``valid_class_freq =
    np.mean(softmax_valid_posterior_probs, axis=0)`` unless ``estimate_priors_from_valid_labels``), "to ensure that
    if the valid posterior probs are supplied for 'to fit', then no shift is estimated". EM's update is the mean
    adjusted forecast, so π_s is a fixed point of EM on the source data only when it equals the mean forecast; with
    the label frequencies instead, EM reads the model's calibration-in-the-large error (mean forecast − frequency)
    as a prior shift and amplifies it (:func:`em_fixed_point_gap` measures this)."""
    p = _probabilities(calibrated_source_probs, "calibrated_source_probs")
    if p.shape[0] == 0:
        raise ValueError("calibrated_source_probs has no rows: the mean forecast needs at least one image")
    return _prior(p.mean(0), p.shape[1], "the mean source forecast")


def _em(p: torch.Tensor, source: torch.Tensor, pseudo: torch.Tensor, max_iter: int, tol: float) -> tuple:
    """EM's loop; ``pseudo`` = α − 1 per class (zeros: maximum likelihood)."""
    prior = source.clone()
    for iteration in range(1, max_iter + 1):
        adjusted = p * (prior / source)
        adjusted = adjusted / adjusted.sum(1, keepdim=True)
        updated = (adjusted.sum(0) + pseudo) / (p.shape[0] + pseudo.sum())
        moved = float((updated - prior).abs().max())
        prior = updated.clamp_min(1e-12)
        prior = prior / prior.sum()
        if moved <= tol:
            return prior, iteration
    raise RuntimeError(f"EM for the target prior did not converge in {max_iter} iterations (last move {moved:.2e})")


def em_target_prior(
    probs: Any, source_prior: Any, max_iter: int = 10_000, tol: float = 1e-6
) -> tuple[torch.Tensor, int]:
    """Saerens et al. (2002), eqs. 2.9–2.10: the maximum-likelihood class prior of unlabelled images with source
    probabilities ``probs`` (N, K), by EM from ``source_prior``; returns (prior, iterations). Stops when no class's
    prior moves by more than ``tol``; raises if ``max_iter`` is reached first (the estimate would be unfinished).
    ``probs`` must be probabilities (a ValueError for logits, NaN, negative or unnormalised rows). Pass
    :func:`source_prior` of the calibrated source forecasts as ``source_prior`` (why: see there). A share may
    collapse to ~0 (the likelihood's maximum on the simplex's edge): :func:`map_em_target_prior` prevents that."""
    _check_max_iter(max_iter)
    p = _probabilities(probs)
    source = _prior(source_prior, p.shape[1], "source_prior")
    return _em(p, source, torch.zeros_like(source), max_iter, tol)


def map_em_target_prior(
    probs: Any, source_prior: Any, alpha: Any = DIRICHLET_ALPHA, max_iter: int = 10_000, tol: float = 1e-6
) -> tuple[torch.Tensor, int]:
    """MAP-EM: EM (Saerens et al. 2002) with a Dirichlet(``alpha``) prior on the target shares; the M-step is
    π_k = (Σ_i p_ik + α_k − 1) / (N + Σ_j α_j − K) (Šipka, Šulc & Matas, WACV 2022, Sec. 3). ``alpha``: one value
    for every class or K values, each >= 1 (α_k = 1 everywhere is plain EM; default :data:`DIRICHLET_ALPHA` = 2, one
    pseudo-image per class). Every share stays >= (α_k − 1) / (N + Σ α − K) > 0. Returns (prior, iterations)."""
    _check_max_iter(max_iter)
    p = _probabilities(probs)
    source = _prior(source_prior, p.shape[1], "source_prior")
    a = torch.as_tensor(alpha, dtype=torch.float64).flatten()
    if a.numel() == 1:
        a = a.expand(p.shape[1]).clone()
    if a.numel() != p.shape[1] or not torch.isfinite(a).all() or (a < 1).any():
        raise ValueError(
            f"alpha must be one number or {p.shape[1]} numbers, each finite and >= 1 (a Dirichlet with a mode in "
            f"the simplex), got {a.tolist()}"
        )
    return _em(p, source, a - 1, max_iter, tol)


def em_fixed_point_gap(calibrated_source_probs: Any, prior: Any) -> float:
    """How far one EM step on the source data themselves moves from ``prior`` (largest absolute change of a share):
    0 when ``prior`` is a fixed point, i.e. EM estimates no shift where there is none. It is 0 (to rounding) for
    :func:`source_prior` of the same forecasts and equals the calibration-in-the-large error for other priors."""
    p = _probabilities(calibrated_source_probs, "calibrated_source_probs")
    start = _prior(prior, p.shape[1], "prior")
    return float((adjust_to_prior(p, start, start).mean(0) - start).abs().max())


def bbse_target_prior(
    source_predictions: Any,
    source_labels: Any,
    target_predictions: Any,
    n_classes: int,
    soft: bool = False,
    max_condition: float = 1e8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BBSE (Lipton, Wang & Smola 2018, Sec. 4): ŵ = Ĉ⁻¹ μ̂ from hard predictions (class indices) on labelled
    held-out source data (``source_predictions``, ``source_labels``) and on the unlabelled target
    (``target_predictions``); Ĉ[i, j] = fraction of source images predicted i with label j, μ̂[i] = fraction of
    target images predicted i. With ``soft=True`` the predictions are (N, K) probabilities and Ĉ[i, j] = mean of
    p_i(x) 1{y = j}, μ̂ = mean target forecast (the "soft" BBSE of Alexandari et al.'s code, ``BBSEImbalanceAdapter``
    with ``soft=True``): invertible even when some class is never the arg-max. Returns (target prior
    π̂_t ∝ max(ŵ, 0) · π̂_s with π̂_s the source label frequencies, the raw ŵ). Negative weights are clipped to 0 and
    the prior renormalised: a departure from the paper's estimator (which leaves ŵ unconstrained), as in Alexandari
    et al.'s code ("mask out negative weights"). Raises when Ĉ is singular or its condition number exceeds
    ``max_condition`` (with hard predictions: a class never predicted, or never present, in the source data)."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    y_s = _indices(source_labels, n_classes, "source_labels")
    if soft:
        pred_s = _probabilities(source_predictions, "source_predictions")
        pred_t = _probabilities(target_predictions, "target_predictions")
        if pred_s.shape[1] != n_classes or pred_t.shape[1] != n_classes:
            raise ValueError(f"soft predictions must have {n_classes} columns, got {pred_s.shape} and {pred_t.shape}")
    else:
        pred_s = _one_hot(_indices(source_predictions, n_classes, "source_predictions"), n_classes)
        pred_t = _one_hot(_indices(target_predictions, n_classes, "target_predictions"), n_classes)
    if len(pred_s) != len(y_s):
        raise ValueError(f"source_predictions ({len(pred_s)} rows) and source_labels ({len(y_s)}) differ in length")
    joint = pred_s.T @ _one_hot(y_s, n_classes) / len(y_s)
    condition = float(torch.linalg.cond(joint)) if torch.linalg.matrix_rank(joint) == n_classes else float("inf")
    if not np.isfinite(condition) or condition > max_condition:
        raise ValueError(
            f"the source confusion matrix is singular or ill-conditioned (condition number {condition:.3g}): BBSE "
            "needs every class present in the source labels and predicted on the source data (or soft=True)"
        )
    weights = torch.linalg.solve(joint, pred_t.mean(0))
    prior = weights.clamp_min(0) * joint.sum(0)
    if prior.sum() <= 0:
        raise ValueError(f"every BBSE weight is <= 0 ({weights.tolist()}): no target prior can be formed")
    return prior / prior.sum(), weights


def never_predicted(predictions: Any, n_classes: int) -> list[int]:
    """The classes that are never the arg-max in ``predictions`` (N,) of class indices: where hard BBSE's confusion
    matrix has an empty row."""
    counts = torch.bincount(_indices(predictions, n_classes, "predictions"), minlength=n_classes)
    return [k for k in range(n_classes) if counts[k] == 0]


def _one_hot(y: torch.Tensor, n_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(y, n_classes).double()


def _indices(values: Any, n_classes: int, what: str) -> torch.Tensor:
    y = torch.as_tensor(values)
    if y.ndim != 1 or y.numel() == 0:
        raise ValueError(f"{what} must be a non-empty (N,) array of class indices, got shape {tuple(y.shape)}")
    if y.dtype == torch.bool or y.is_floating_point() or y.is_complex():
        raise ValueError(f"{what} must hold integer class indices (hard predictions), got dtype {y.dtype}")
    if int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(f"{what} must lie in [0, {n_classes - 1}], got range [{int(y.min())}, {int(y.max())}]")
    return y.long()


def class_conditional_shift(
    source_features: Any,
    source_labels: Any,
    target_features: Any,
    target_labels: Any,
    class_names: Sequence[str],
    n_permutations: int = 100,
    min_images: int = 10,
    seed: int = 0,
) -> pd.DataFrame:
    """A test of the label-shift assumption p_t(x | y) = p_s(x | y), one class at a time: a domain classifier
    (linear discriminant analysis, cheap to refit, on features such as the model's logits) tells source images of
    class y from target images of class y; its 5-fold cross-validated AUROC is 0.5 in expectation when the class
    looks the same at both sites, and the permutation p-value (scikit-learn's ``permutation_test_score``; Ojala &
    Garriga, JMLR 2010, test 1: domain labels shuffled ``n_permutations`` times) says whether the AUROC is above
    chance. Under pure label shift the features' class-conditional distribution cannot change, whatever the class
    shares. Rows = classes; classes with fewer than ``min_images`` images on either side get no test (NaN)."""
    x_s, x_t = (np.asarray(torch.as_tensor(v, dtype=torch.float64)) for v in (source_features, target_features))
    y_s = np.asarray(_indices(source_labels, len(class_names), "source_labels"))
    y_t = np.asarray(_indices(target_labels, len(class_names), "target_labels"))
    if x_s.ndim != 2 or x_t.ndim != 2 or x_s.shape[1] != x_t.shape[1] or len(x_s) != len(y_s) or len(x_t) != len(y_t):
        raise ValueError(
            f"features must be (N, D) with one label per row and the same D on both sides, got source "
            f"{x_s.shape} / {y_s.shape}, target {x_t.shape} / {y_t.shape}"
        )
    rows = {}
    for k, name in enumerate(class_names):
        a, b = x_s[y_s == k], x_t[y_t == k]
        row = {"source images": len(a), "target images": len(b), "domain AUROC": np.nan, "permutation p": np.nan}
        if min(len(a), len(b)) >= min_images:
            features = np.concatenate([a, b])
            domain = np.r_[np.zeros(len(a)), np.ones(len(b))]
            folds = StratifiedKFold(5, shuffle=True, random_state=seed)
            score, _, p = permutation_test_score(
                LinearDiscriminantAnalysis(), features, domain, cv=folds, scoring="roc_auc",
                n_permutations=n_permutations, random_state=seed,
            )  # fmt: skip
            row.update({"domain AUROC": float(score), "permutation p": float(p)})
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("class")
