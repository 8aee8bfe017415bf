"""Post-hoc calibrators beside temperature scaling (:mod:`helpers.calibration.temperature`), and the calibration split.

Every calibrator has the interface of :class:`helpers.calibration.TemperatureScaling`: ``fit(logits,
labels)`` returns the calibrator, ``transform(logits)`` returns probabilities, ``fit_transform`` does both. The
parametric ones minimise the (penalised) mean NLL with L-BFGS in float64, as TemperatureScaling does.

Multi-class (logits (N, K), labels (N,) class indices):

* :class:`VectorScaling` -- q = softmax(w ⊙ z + b), one weight and one bias per class (Guo et al., "On calibration
  of modern neural networks", ICML 2017, Sec. 4.2). w = (1/T, ..., 1/T), b = 0 is temperature scaling.
* :class:`MatrixScaling` -- q = softmax(W z + b) with the off-diagonal and intercept regulariser ODIR of Kull et al.
  ("Beyond temperature scaling: obtaining well-calibrated multi-class probabilities with Dirichlet calibration",
  NeurIPS 2019, Sec. 4): λ/(K(K−1)) Σ_{i≠j} W_ij² + μ/K Σ_j b_j² added to the mean NLL, so the diagonal (a vector
  scaling) is free and the K(K−1) cross-class weights are shrunk. :class:`DirichletCalibration` is the same map on
  the log-probabilities, softmax(W log softmax(z) + b) (Kull et al.'s Dirichlet calibration, "Dir-ODIR").
  :meth:`MatrixScaling.cross_validated` picks λ and μ by k-fold held-out NLL, as Kull et al. do.
* :class:`IsotonicCalibration` -- one-vs-rest isotonic regression of 1[y = k] on p_k = softmax(z)_k (Zadrozny &
  Elkan, KDD 2002), scikit-learn's ``IsotonicRegression`` per class, rows renormalised to sum to 1 (a row mapped
  to all zeros becomes uniform, as scikit-learn's ``CalibratedClassifierCV`` does). Not rank-preserving: it can
  change the arg-max and create ties.

Multi-label (logits (N, T), labels (N, T) in {0, 1}; a sigmoid link as in TemperatureScaling's multi-label task):

* :class:`PerLabelTemperatureScaling` -- q_t = σ(z_t / T_t), one temperature per label;
* :class:`PerLabelPlatt` -- q_t = σ(a_t z_t + b_t) (Platt 1999; plain 0/1 targets, without Platt's smoothed
  targets; the slope is not constrained, so a negative fitted a_t reverses label t's ranking, and the fit says so
  with a :class:`RankingReversedWarning`); the shared-temperature baseline is
  ``TemperatureScaling(task="multi-label")``;
* :class:`PerLabelIsotonic` -- q_t = g_t(z_t), one isotonic regression of y_t on its own logit per label (Zadrozny
  & Elkan 2002), clipped away from 0 and 1 so that the NLL of a test set stays finite.

Why not a library: ``dirichletcal`` 0.3.dev4 (the reference Dirichlet calibration) does not build (its sdist's
install_requires is malformed, and it needs jax); ``netcal`` 1.4.0 pulls in pyro-ppl, gpytorch and tensorboard;
``probmetrics`` 1.3.0 installs, but its calibrators take probabilities rather than logits and it has no ODIR (its
structured matrix scaling uses a different ridge penalty after a temperature pre-fit). These fits are a few lines of
torch each; the tests check them against scikit-learn's ``LogisticRegression``, ``IsotonicRegression`` and
``CalibratedClassifierCV``, an independent scipy minimiser, and known reductions.

Calibrators must be fitted on data that did not select the checkpoint: :func:`split_calibration` splits the
validation indices into a selection half (early stopping) and a calibration half with a fixed seed.
"""

from __future__ import annotations

import itertools
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.isotonic import IsotonicRegression

from helpers.calibration.temperature import (
    NO_INTERIOR_MINIMUM,
    check_labels,
    check_logits,
    check_max_iter,
    no_interior_minimum,
)

__all__ = [
    "VectorScaling",
    "MatrixScaling",
    "DirichletCalibration",
    "IsotonicCalibration",
    "PerLabelTemperatureScaling",
    "PerLabelPlatt",
    "RankingReversedWarning",
    "PerLabelIsotonic",
    "split_calibration",
]


def _minimise(objective: Callable[[], torch.Tensor], parameters: list[torch.Tensor], max_iter: int) -> None:
    """L-BFGS with a strong-Wolfe line search on a smooth objective of ``parameters`` (in place)."""
    optimizer = torch.optim.LBFGS(
        parameters,
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-10,
        tolerance_change=1e-14,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        value = objective()
        value.backward()
        return value

    optimizer.step(closure)
    if not all(bool(torch.isfinite(p).all()) for p in parameters):
        raise FloatingPointError("calibrator fit diverged (non-finite parameters); check the logits and labels")


class _LogitCalibrator:
    """Shared fit/transform plumbing: subclasses define ``task``, ``_fit(z, y)`` and ``_calibrated_logits(z)``."""

    task = "multi-class"

    def __init__(self, max_iter: int = 500):
        check_max_iter(max_iter)
        self.max_iter = max_iter
        self.fitted = False

    def fit(self, logits: Any, labels: Any) -> _LogitCalibrator:
        z = check_logits(logits)
        y = check_labels(labels, z, self.task)
        self._fit(z, y)
        self.fitted = True
        self._warn_if_no_finite_fit(z, y)
        return self

    def _warn_if_no_finite_fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        """Warn where the NLL has no finite minimiser (see :func:`_warn_multiclass_fit`); nothing by default."""

    def _check_fitted(self) -> None:
        if not self.fitted:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(val_logits, val_labels) first")

    def calibrated_logits(self, logits: Any) -> torch.Tensor:
        """The calibrated logits (float64, on the logits' device) whose softmax / sigmoid is :meth:`transform`."""
        self._check_fitted()
        z = check_logits(logits)
        if z.shape[1] != self.n_columns:
            raise ValueError(f"logits have {z.shape[1]} columns but the calibrator was fitted on {self.n_columns}")
        with torch.no_grad():
            return self._calibrated_logits(z)

    def transform(self, logits: Any) -> torch.Tensor:
        """Calibrated probabilities: softmax (multi-class) or sigmoid (multi-label) of the calibrated logits."""
        calibrated = self.calibrated_logits(logits)
        return torch.softmax(calibrated, 1) if self.task == "multi-class" else torch.sigmoid(calibrated)

    def fit_transform(self, logits: Any, labels: Any) -> torch.Tensor:
        return self.fit(logits, labels).transform(logits)


# ----------------------------------------------------------------------------------------------------------------
# multi-class
# ----------------------------------------------------------------------------------------------------------------
class VectorScaling(_LogitCalibrator):
    """q = softmax(w ⊙ z + b), fitted by the validation NLL (Guo et al. 2017, Sec. 4.2).

    Starts from w = 1, b = 0. Softmax ignores a common shift of b, so b is only defined up to a constant.
    """

    def _fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        k = z.shape[1]
        self.weight = torch.ones(k, dtype=torch.float64, device=z.device, requires_grad=True)
        self.bias = torch.zeros(k, dtype=torch.float64, device=z.device, requires_grad=True)
        _minimise(lambda: F.cross_entropy(z * self.weight + self.bias, y), [self.weight, self.bias], self.max_iter)
        self.weight, self.bias = self.weight.detach(), self.bias.detach()
        self.n_columns = k

    def _calibrated_logits(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.weight.to(z.device) + self.bias.to(z.device)

    def _warn_if_no_finite_fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        with torch.no_grad():
            _warn_multiclass_fit(type(self).__name__, self._calibrated_logits(z), y)

    def __repr__(self) -> str:
        return f"VectorScaling(fitted={self.fitted})"


class MatrixScaling(_LogitCalibrator):
    """q = softmax(W f(z) + b) with f(z) = z, fitted by the mean NLL plus ODIR (Kull et al. 2019):

        λ / (K (K − 1)) Σ_{i≠j} W_ij²  +  μ / K Σ_j b_j²

    ``off_diagonal_penalty`` = λ, ``bias_penalty`` = μ (0 and 0: plain matrix scaling, i.e. multinomial logistic
    regression on the logits). Starts from the vector-scaling fit (W diagonal), the optimum as λ → ∞ with μ = 0:
    from W = I a large λ makes the problem so ill-conditioned that L-BFGS stops short of it.
    """

    def __init__(self, off_diagonal_penalty: float = 1e-2, bias_penalty: float = 1e-2, max_iter: int = 1000):
        super().__init__(max_iter)
        for name, value in (("off_diagonal_penalty", off_diagonal_penalty), ("bias_penalty", bias_penalty)):
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        self.off_diagonal_penalty = float(off_diagonal_penalty)
        self.bias_penalty = float(bias_penalty)

    @staticmethod
    def _features(z: torch.Tensor) -> torch.Tensor:
        return z

    def objective(self, z: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """Mean NLL of softmax(W f(z) + b) plus the ODIR penalty (what ``fit`` minimises)."""
        k = weight.shape[0]
        off_diagonal = weight - torch.diag(weight.diagonal())
        penalty = (
            self.off_diagonal_penalty / (k * (k - 1)) * off_diagonal.pow(2).sum()
            + self.bias_penalty / k * bias.pow(2).sum()
        )
        return F.cross_entropy(self._features(z) @ weight.T + bias, y) + penalty

    def _fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        k = z.shape[1]
        start = VectorScaling(self.max_iter)
        start._fit(self._features(z), y)
        self.weight = torch.diag(start.weight).requires_grad_(True)
        self.bias = start.bias.clone().requires_grad_(True)
        _minimise(lambda: self.objective(z, y, self.weight, self.bias), [self.weight, self.bias], self.max_iter)
        self.weight, self.bias = self.weight.detach(), self.bias.detach()
        self.n_columns = k

    def _calibrated_logits(self, z: torch.Tensor) -> torch.Tensor:
        return self._features(z) @ self.weight.to(z.device).T + self.bias.to(z.device)

    def _warn_if_no_finite_fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        with torch.no_grad():
            _warn_multiclass_fit(type(self).__name__, self._calibrated_logits(z), y)

    @classmethod
    def cross_validated(
        cls,
        logits: Any,
        labels: Any,
        grid: Sequence[float] = (1e-1, 1e-2, 1e-3, 1e-4),
        folds: int = 5,
        seed: int = 0,
        max_iter: int = 1000,
    ) -> MatrixScaling:
        """Choose (λ, μ) from ``grid`` × ``grid`` by the mean held-out NLL of a ``folds``-fold split (shuffled with
        ``seed``), then refit on all the data with the chosen pair. ``cv_nll`` holds each pair's held-out NLL."""
        if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
            raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
        grid = _check_penalty_grid(grid)
        z = check_logits(logits)
        y = check_labels(labels, z, "multi-class")
        if z.shape[0] < folds:
            raise ValueError(f"{folds}-fold cross-validation needs at least {folds} samples, got {z.shape[0]}")
        permutation = torch.randperm(z.shape[0], generator=torch.Generator().manual_seed(seed)).to(z.device)
        fold_of = torch.empty_like(permutation)
        fold_of[permutation] = torch.arange(z.shape[0], device=z.device) % folds
        held_out_nll = {}
        for off_diagonal, bias in itertools.product(grid, grid):
            losses = []
            for fold in range(folds):
                train, test = fold_of != fold, fold_of == fold
                model = cls(off_diagonal, bias, max_iter).fit(z[train], y[train])
                losses.append(float(F.cross_entropy(model.calibrated_logits(z[test]), y[test])) * int(test.sum()))
            held_out_nll[(off_diagonal, bias)] = sum(losses) / z.shape[0]
        best = min(held_out_nll, key=held_out_nll.get)
        chosen = cls(*best, max_iter).fit(z, y)
        chosen.cv_nll = held_out_nll
        return chosen

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(off_diagonal_penalty={self.off_diagonal_penalty:g}, "
            f"bias_penalty={self.bias_penalty:g}, fitted={self.fitted})"
        )


def _check_penalty_grid(grid: Any) -> list[float]:
    """The penalties of :meth:`MatrixScaling.cross_validated`'s grid: a non-empty sequence of finite numbers > 0."""
    try:
        values = [] if isinstance(grid, (str, bytes)) else list(grid)
    except TypeError:
        values = [grid]
    if not values:
        raise ValueError(f"grid is empty (got {grid!r}); pass the penalties > 0 to try, e.g. (1e-1, 1e-2, 1e-3)")
    bad = [
        v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (math.isfinite(v) and v > 0)
    ]
    if bad:
        raise ValueError(f"grid holds {bad}, but its values are L2 penalties > 0 (finite numbers); got {grid!r}")
    return [float(v) for v in values]


def _warn_multiclass_fit(name: str, calibrated: torch.Tensor, y: torch.Tensor) -> None:
    """Temperature scaling's warning (:func:`helpers.calibration.no_interior_minimum`) for the multi-class maps:
    the NLL has no finite minimiser when a class does not occur in the calibration labels (its bias heads to
    -infinity) or when the fitted map classifies every calibration sample correctly (separable data: scaling the
    parameters up keeps lowering the NLL). The fitted parameters are then wherever L-BFGS stopped."""
    absent = sorted(set(range(calibrated.shape[1])) - set(y.unique().tolist()))
    if absent:
        warnings.warn(
            f"{name}: classes {absent} do not occur in the calibration labels, so the NLL keeps falling as their "
            "biases head to -infinity; the fitted parameters are not meaningful (calibrate on data with every "
            "class, e.g. a stratified split_calibration)",
            RuntimeWarning,
            stacklevel=4,
        )
        return
    true_logit = calibrated.gather(1, y[:, None])[:, 0]
    others = calibrated.scatter(1, y[:, None], -math.inf).max(1).values
    if bool((true_logit > others).all()):
        warnings.warn(
            f"{name}: the fitted map classifies every calibration sample correctly (the data are separable), so "
            "the NLL keeps falling as its parameters grow; the fitted parameters are not meaningful (use a larger "
            "calibration split, or temperature scaling)",
            RuntimeWarning,
            stacklevel=4,
        )


class DirichletCalibration(MatrixScaling):
    """Dirichlet calibration with ODIR (Kull et al. 2019): :class:`MatrixScaling` on the log-probabilities,
    q = softmax(W log softmax(z) + b). W = I, b = 0 returns softmax(z) unchanged."""

    @staticmethod
    def _features(z: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(z, 1)


class IsotonicCalibration:
    """One-vs-rest isotonic regression on the softmax probabilities, renormalised (scikit-learn per class).

    Not a smooth parametric map: fitted on few samples per class it returns step functions (ties in confidence),
    and a class whose calibration data hold no positive maps every probability of that class to 0.
    """

    task = "multi-class"

    def __init__(self) -> None:
        self.regressions: list[IsotonicRegression] = []

    def fit(self, logits: Any, labels: Any) -> IsotonicCalibration:
        z = check_logits(logits)
        y = check_labels(labels, z, self.task)
        probs = torch.softmax(z, 1).cpu().numpy()
        targets = F.one_hot(y, z.shape[1]).cpu().numpy().astype(np.float64)
        self.regressions = [
            IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(probs[:, k], targets[:, k])
            for k in range(z.shape[1])
        ]
        return self

    def transform(self, logits: Any) -> torch.Tensor:
        if not self.regressions:
            raise RuntimeError("IsotonicCalibration is not fitted: call fit(val_logits, val_labels) first")
        z = check_logits(logits)
        if z.shape[1] != len(self.regressions):
            raise ValueError(
                f"logits have {z.shape[1]} columns but the calibrator was fitted on {len(self.regressions)}"
            )
        probs = torch.softmax(z, 1).cpu().numpy()
        calibrated = np.stack([r.predict(probs[:, k]) for k, r in enumerate(self.regressions)], 1)
        total = calibrated.sum(1, keepdims=True)
        uniform = np.full_like(calibrated, 1.0 / calibrated.shape[1])
        calibrated = np.divide(calibrated, total, out=uniform, where=total > 0)
        return torch.from_numpy(calibrated).to(z.device)

    def fit_transform(self, logits: Any, labels: Any) -> torch.Tensor:
        return self.fit(logits, labels).transform(logits)


# ----------------------------------------------------------------------------------------------------------------
# multi-label
# ----------------------------------------------------------------------------------------------------------------
class PerLabelTemperatureScaling(_LogitCalibrator):
    """q_t = σ(z_t / T_t), one temperature per label, fitted by the mean binary NLL (the objective is a sum over
    labels, so each T_t is the temperature fitted to its own column). ``temperatures`` is a (T,) tensor."""

    task = "multi-label"

    def _fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        log_t = torch.zeros(z.shape[1], dtype=torch.float64, device=z.device, requires_grad=True)
        _minimise(lambda: F.binary_cross_entropy_with_logits(z / log_t.exp(), y), [log_t], self.max_iter)
        self.temperatures = log_t.detach().exp()
        self.n_columns = z.shape[1]
        _warn_labels_without_interior_minimum(z, y)

    def _calibrated_logits(self, z: torch.Tensor) -> torch.Tensor:
        return z / self.temperatures.to(z.device)

    def __repr__(self) -> str:
        return f"PerLabelTemperatureScaling(fitted={self.fitted})"


def _warn_labels_without_interior_minimum(z: torch.Tensor, y: torch.Tensor) -> None:
    """TemperatureScaling's warning (:func:`helpers.calibration.no_interior_minimum`), per label: name the labels
    whose NLL has no minimiser with 0 < T_t < infinity (all-zero, uninformative or perfectly separated labels)."""
    by_limit: dict[str, list[int]] = {}
    for t in range(z.shape[1]):
        limit = no_interior_minimum(z[:, t : t + 1], y[:, t : t + 1], "multi-label")
        if limit is not None:
            by_limit.setdefault(limit, []).append(t)
    advice = {
        "T -> infinity": "check that those labels take both values in the calibration data",
        "T -> 0": "use a larger calibration split",
    }
    for limit, labels in by_limit.items():
        warnings.warn(
            f"per-label temperature scaling, labels {labels}: {NO_INTERIOR_MINIMUM[limit]}; their fitted "
            f"temperatures are not meaningful ({advice[limit]})",
            RuntimeWarning,
            stacklevel=4,
        )


class RankingReversedWarning(RuntimeWarning):
    """A fitted per-label map decreases in the logit, so it reverses that label's ranking (its AUROC becomes
    1 − AUROC of the raw logits)."""


class PerLabelPlatt(_LogitCalibrator):
    """q_t = σ(a_t z_t + b_t), a slope and an intercept per label (Platt scaling per label), fitted by the mean
    binary NLL; ``slope`` and ``intercept`` are (T,) tensors. Starts from a = 1, b = 0.

    The slope is left free, as in Platt (1999) and scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``: where
    a label has few positives in the calibration data its fitted slope can come out negative, and the map then
    reverses that label's ranking (notebook 11: a slope of −0.58 on a finding with 3 calibration positives).
    ``reversed_labels`` lists those labels and the fit warns (:class:`RankingReversedWarning`)."""

    task = "multi-label"

    def _fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        slope = torch.ones(z.shape[1], dtype=torch.float64, device=z.device, requires_grad=True)
        intercept = torch.zeros(z.shape[1], dtype=torch.float64, device=z.device, requires_grad=True)
        _minimise(
            lambda: F.binary_cross_entropy_with_logits(z * slope + intercept, y), [slope, intercept], self.max_iter
        )
        self.slope, self.intercept = slope.detach(), intercept.detach()
        self.n_columns = z.shape[1]

    def _calibrated_logits(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.slope.to(z.device) + self.intercept.to(z.device)

    def _warn_if_no_finite_fit(self, z: torch.Tensor, y: torch.Tensor) -> None:
        """Name the labels whose NLL has no finite minimiser: one value only (the intercept heads to +-infinity)
        or separated by the fitted line (the slope heads to infinity), as PerLabelTemperatureScaling does."""
        with torch.no_grad():
            positive = self._calibrated_logits(z) > 0
        one_valued = [t for t in range(y.shape[1]) if y[:, t].min() == y[:, t].max()]
        separated = [
            t for t in range(y.shape[1]) if t not in one_valued and bool((positive[:, t] == (y[:, t] == 1)).all())
        ]
        for labels, why in (
            (one_valued, "take only one value in the calibration data, so their intercepts head to +-infinity"),
            (separated, "are perfectly separated by their fitted line, so their slopes head to infinity"),
        ):
            if labels:
                warnings.warn(
                    f"per-label Platt scaling, labels {labels}: they {why}; their fitted slopes and intercepts are "
                    "not meaningful (check that those labels take both values, or use a larger calibration split)",
                    RuntimeWarning,
                    stacklevel=4,
                )
        self._warn_if_ranking_reversed(y)

    @property
    def reversed_labels(self) -> list[int]:
        """The labels whose fitted slope is negative: the map reverses their ranking."""
        self._check_fitted()
        return [t for t in range(self.n_columns) if float(self.slope[t]) < 0]

    def _warn_if_ranking_reversed(self, y: torch.Tensor) -> None:
        reversed_labels = self.reversed_labels
        if reversed_labels:
            slopes = [round(float(self.slope[t]), 2) for t in reversed_labels]
            positives = ", ".join(f"{int(y[:, t].sum())} positives" for t in reversed_labels)
            warnings.warn(
                f"per-label Platt scaling, labels {reversed_labels}: fitted slopes {slopes} are negative, so the "
                f"map reverses the ranking of those labels (their AUROC becomes 1 − AUROC); the calibration data "
                f"has {positives} for them. With few positives this is more likely noise than signal: use a larger "
                "calibration split, or a per-label temperature (which keeps every label's ranking)",
                RankingReversedWarning,
                stacklevel=5,
            )

    def __repr__(self) -> str:
        return f"PerLabelPlatt(fitted={self.fitted})"


class PerLabelIsotonic:
    """q_t = g_t(z_t): per label, scikit-learn's ``IsotonicRegression`` of the 0/1 outcome y_t on the label's own
    logit z_t (a non-decreasing step function, the non-parametric counterpart of :class:`PerLabelPlatt`; on the
    logit or on σ(z_t) it is the same fit, since σ is increasing).

    A step at the bottom of a rare label often holds no positive, so g_t = 0 there and one test positive in it
    would make the NLL infinite: every output is clipped to [ε, 1 − ε] with ε = ``min_probability``, by default
    1 / (2 (n + 1)) for n fitting samples (half of the add-one estimate of a step that saw no event in n draws).
    Not strictly increasing: it ties the logits inside a step, so it can change a label's AUROC and AP.
    ``regressions`` holds the T fitted regressions.
    """

    task = "multi-label"

    def __init__(self, min_probability: float | None = None) -> None:
        if min_probability is not None and not 0.0 < min_probability < 0.5:
            raise ValueError(f"min_probability must lie in (0, 0.5), got {min_probability}")
        self.min_probability = min_probability
        self.regressions: list[IsotonicRegression] = []
        self.epsilon = float("nan")

    @property
    def fitted(self) -> bool:
        return bool(self.regressions)

    def fit(self, logits: Any, labels: Any) -> PerLabelIsotonic:
        z = check_logits(logits)
        y = check_labels(labels, z, self.task)
        self.epsilon = self.min_probability or 1.0 / (2.0 * (z.shape[0] + 1))
        zs, ys = z.detach().cpu().double().numpy(), y.detach().cpu().double().numpy()
        self.regressions = [
            IsotonicRegression(y_min=self.epsilon, y_max=1.0 - self.epsilon, out_of_bounds="clip").fit(
                zs[:, t], ys[:, t]
            )
            for t in range(z.shape[1])
        ]
        return self

    def transform(self, logits: Any) -> torch.Tensor:
        if not self.regressions:
            raise RuntimeError("PerLabelIsotonic is not fitted: call fit(val_logits, val_labels) first")
        z = check_logits(logits)
        if z.shape[1] != len(self.regressions):
            raise ValueError(
                f"logits have {z.shape[1]} columns but the calibrator was fitted on {len(self.regressions)}"
            )
        zs = z.detach().cpu().double().numpy()
        calibrated = np.stack([r.predict(zs[:, t]) for t, r in enumerate(self.regressions)], 1)
        return torch.from_numpy(calibrated).to(z.device)

    def fit_transform(self, logits: Any, labels: Any) -> torch.Tensor:
        return self.fit(logits, labels).transform(logits)

    def __repr__(self) -> str:
        return f"PerLabelIsotonic(fitted={self.fitted})"


# ----------------------------------------------------------------------------------------------------------------
# the calibration split
# ----------------------------------------------------------------------------------------------------------------
def split_calibration(
    n_val: int, seed: int = 0, calibration_fraction: float = 0.5, labels: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split validation indices 0..n_val−1 into (selection, calibration), two sorted, disjoint int64 tensors.

    The selection part picks the checkpoint (early stopping on its NLL); post-hoc calibrators are fitted on the
    calibration part, which did not select the checkpoint, so the calibrator does not inherit the selection's
    optimism. The permutation comes from ``torch.randperm`` with a generator seeded by ``seed`` (the same split
    for every model and training seed). With multi-class ``labels`` (N,) the split is stratified: each class is
    split in the same proportion, so rare classes appear on both sides. round(calibration_fraction · n) indices
    (per class when stratified) go to the calibration part. A split that would leave either part empty (e.g. every
    class a single sample: round(0.5 · 1) = 0) raises a ValueError.
    """
    if isinstance(n_val, bool) or not isinstance(n_val, (int, np.integer)) or n_val < 2:
        raise ValueError(f"n_val must be an integer >= 2, got {n_val!r}")
    if not 0.0 < calibration_fraction < 1.0:
        raise ValueError(f"calibration_fraction must lie in (0, 1), got {calibration_fraction}")
    generator = torch.Generator().manual_seed(seed)
    if labels is None:
        groups = [torch.arange(int(n_val))]
    else:
        y = torch.as_tensor(labels)
        if y.ndim != 1 or y.shape[0] != n_val or y.is_floating_point() or y.dtype == torch.bool:
            raise ValueError(
                f"labels must be (n_val,) = ({n_val},) integer class indices to stratify by, got "
                f"shape {tuple(y.shape)} and dtype {y.dtype}; pass labels=None for multi-label data"
            )
        groups = [torch.nonzero(y.cpu() == k)[:, 0] for k in torch.unique(y.cpu())]
    selection, calibration = [], []
    for group in groups:
        shuffled = group[torch.randperm(group.numel(), generator=generator)]
        n_calibration = int(round(calibration_fraction * group.numel()))
        calibration.append(shuffled[:n_calibration])
        selection.append(shuffled[n_calibration:])
    selection, calibration = torch.cat(selection).sort().values, torch.cat(calibration).sort().values
    _check_split_parts(selection, calibration, calibration_fraction, [g.numel() for g in groups], labels is not None)
    return selection, calibration


def _check_split_parts(
    selection: torch.Tensor,
    calibration: torch.Tensor,
    calibration_fraction: float,
    group_sizes: list[int],
    stratified: bool,
) -> None:
    """A ValueError naming the empty part, the group sizes that rounded to it and what to change."""
    for part, indices in (("calibration", calibration), ("selection", selection)):
        if indices.numel() == 0:
            groups = f"class sizes {group_sizes}" if stratified else f"{group_sizes[0]} validation indices"
            fixes = "pass labels=None for an unstratified split, " if stratified else ""
            raise ValueError(
                f"split_calibration would leave the {part} part empty: round({calibration_fraction:g} "
                f"× size) gives it nothing for {groups}; {fixes}use a larger validation split or "
                "change calibration_fraction"
            )
