"""Temperature scaling, the post-hoc calibration baseline (Guo et al., "On Calibration of Modern Neural Networks",
ICML 2017, section 4.2; reference [6] of the LS+ paper).

One scalar T > 0 divides every logit: q = softmax(z / T). T is fitted on the validation split by minimising the
negative log-likelihood; the arg-max (hence accuracy) cannot change. The NLL of softmax(beta * z) is convex in
beta = 1/T, so the one-dimensional problem has a single minimum; we optimise log T with L-BFGS, which keeps T
positive without constraints.

The multi-label variant (``task="multi-label"``) shares one T across all labels of sigmoid logits,
q_t = sigmoid(z_t / T), fitted by the mean binary NLL over all (sample, label) pairs. It assumes a sigmoid link:
losses with another ``predict_proba`` (SPA's inverse link, LDACE's p²) are not covered by it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

TASKS = ("multi-class", "multi-label")
#: rows within this of summing to 1, with every entry in [0, 1], are taken for probabilities (metrics' tolerance)
PROBABILITY_ROW_SUM_TOLERANCE = 1e-3


class TemperatureScaling:
    """Fit a single temperature on validation logits, then rescale any logits with it.

    >>> ts = TemperatureScaling().fit(val_logits, val_labels)
    >>> test_probs = ts.transform(test_logits)
    """

    def __init__(self, task: str = "multi-class", max_iter: int = 200):
        if task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
        check_max_iter(max_iter)
        self.task = task
        self.max_iter = max_iter
        self.temperature = math.nan

    def __repr__(self) -> str:
        return f"TemperatureScaling(task={self.task!r}, temperature={self.temperature:.4g})"

    def _nll(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.task == "multi-class":
            return F.cross_entropy(logits, labels)
        return F.binary_cross_entropy_with_logits(logits, labels)

    def fit(self, logits: Any, labels: Any) -> TemperatureScaling:
        """Minimise the validation NLL of ``logits / T`` over T > 0 (L-BFGS on log T, float64). Returns self."""
        z = check_logits(logits)
        y = check_labels(labels, z, self.task)
        log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.LBFGS(
            [log_t],
            lr=1.0,
            max_iter=self.max_iter,
            tolerance_grad=1e-9,
            tolerance_change=1e-12,
            line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            value = self._nll(z / log_t.exp(), y)
            value.backward()
            return value

        optimizer.step(closure)
        fitted = float(log_t.detach())
        if not math.isfinite(fitted):
            raise FloatingPointError("temperature fit diverged (non-finite log T); check the logits and labels")
        _warn_if_no_interior_minimum(z, y, self.task)
        self.temperature = math.exp(fitted)
        return self

    def _check_fitted(self) -> None:
        if not math.isfinite(self.temperature):
            raise RuntimeError("TemperatureScaling is not fitted: call fit(val_logits, val_labels) first")

    def scale(self, logits: Any) -> torch.Tensor:
        """Logits divided by the fitted temperature (at least float32, same device)."""
        self._check_fitted()
        z = check_logits(logits, dtype=None)
        return z.to(torch.promote_types(z.dtype, torch.float32)) / self.temperature

    def transform(self, logits: Any) -> torch.Tensor:
        """Calibrated probabilities: softmax (multi-class) or sigmoid (multi-label) of ``logits / T``."""
        scaled = self.scale(logits)
        return torch.softmax(scaled, dim=1) if self.task == "multi-class" else torch.sigmoid(scaled)

    def fit_transform(self, logits: Any, labels: Any) -> torch.Tensor:
        return self.fit(logits, labels).transform(logits)


def check_max_iter(max_iter: int) -> None:
    """A positive int (booleans refused: True is not an iteration count), else a ValueError."""
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")


#: why the temperature NLL has no minimiser with 0 < T < infinity, keyed by where its infimum lies
NO_INTERIOR_MINIMUM = {
    "T -> infinity": "the logits are not better than uninformative on these labels, so the NLL keeps falling as "
    "T -> infinity",
    "T -> 0": "every validation forecast is already correct, so the NLL keeps falling as T -> 0",
}


def no_interior_minimum(z: torch.Tensor, y: torch.Tensor, task: str) -> str | None:
    """Where the temperature NLL, convex in beta = 1/T, has its infimum when it has no minimiser with
    0 < T < infinity: "T -> infinity" or "T -> 0" (a key of :data:`NO_INTERIOR_MINIMUM`); None when it has one.

    With f(beta) the mean NLL of the logits times beta: if f'(0) >= 0 the logits are no better than uninformative
    and the infimum lies at T -> infinity; if f'(beta) -> 0 as beta -> infinity (every validation forecast already
    on the right side, e.g. 100 % accuracy) the infimum lies at T -> 0. A fitted T is then wherever L-BFGS
    stopped and should not be trusted.
    """
    if task == "multi-class":
        true_logit = z.gather(1, y[:, None])[:, 0]
        slope_at_zero = float((z.mean(1) - true_logit).mean())
        separable = bool((true_logit >= z.max(1).values).all())
    else:
        slope_at_zero = float(((0.5 - y) * z).mean())
        separable = bool(((z > 0) & (y == 1) | (z < 0) & (y == 0) | (z == 0)).all())
    if slope_at_zero >= 0:
        return "T -> infinity"
    return "T -> 0" if separable else None


def _warn_if_no_interior_minimum(z: torch.Tensor, y: torch.Tensor, task: str) -> None:
    """Warn when the NLL has no minimiser with 0 < T < infinity (see :func:`no_interior_minimum`)."""
    limit = no_interior_minimum(z, y, task)
    if limit is not None:
        advice = " (use a larger validation split)" if limit == "T -> 0" else ""
        warnings.warn(
            f"temperature scaling: {NO_INTERIOR_MINIMUM[limit]}; the fitted temperature is not meaningful{advice}",
            RuntimeWarning,
            stacklevel=3,
        )


def check_logits(logits: Any, dtype: torch.dtype | None = torch.float64) -> torch.Tensor:
    if isinstance(logits, np.ndarray):
        logits = torch.from_numpy(logits)
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor or numpy array, got {type(logits).__name__}")
    if not logits.dtype.is_floating_point:
        raise ValueError(f"logits must be floating point, got {logits.dtype}")
    if logits.ndim != 2 or logits.shape[0] == 0:
        raise ValueError(f"logits must have shape (N, K) with N >= 1, got {tuple(logits.shape)}")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("logits contain NaN or infinite values")
    logits = logits.detach()
    _refuse_probabilities(logits)
    return logits.to(dtype) if dtype is not None else logits


def _refuse_probabilities(logits: torch.Tensor) -> None:
    """Raise when (N, K >= 2) ``logits`` look like probabilities: every entry in [0, 1] and every row summing to 1.

    Softmax outputs passed as logits fit a meaningless temperature (T = 0.4 on a well-calibrated model) without
    any error, so they are refused. Logits of a real model essentially never meet both conditions, and
    log-probabilities (rows <= 0) never do: softmax(log p) = p, so they are valid logits.
    """
    if logits.shape[1] < 2:
        return
    low, high = torch.aminmax(logits)
    if low < 0 or high > 1:
        return
    row_sums = logits.to(torch.float64).sum(1)
    if float((row_sums - 1.0).abs().max()) > PROBABILITY_ROW_SUM_TOLERANCE:
        return
    raise ValueError(
        "the logits look like probabilities: every entry lies in [0, 1] and every row sums to 1. "
        "Post-hoc calibrators rescale logits (the model's outputs before the softmax); pass those, or, "
        "if probabilities are all you have, their logarithm torch.log(probs): log-probabilities are "
        "logits with the same softmax"
    )


def check_labels(labels: Any, logits: torch.Tensor, task: str) -> torch.Tensor:
    if isinstance(labels, np.ndarray):
        labels = torch.from_numpy(labels)
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels must be a torch.Tensor or numpy array, got {type(labels).__name__}")
    labels = labels.detach().to(logits.device)
    if task == "multi-class":
        if logits.shape[1] < 2:
            raise ValueError(
                "multi-class temperature scaling needs K >= 2 logit columns; use task='multi-label' "
                "for a single sigmoid output"
            )
        if labels.ndim != 1 or labels.shape[0] != logits.shape[0]:
            raise ValueError(
                f"multi-class labels must be (N,) = ({logits.shape[0]},) class indices, got shape "
                f"{tuple(labels.shape)}; did you mean task='multi-label'?"
            )
        if labels.dtype.is_floating_point or labels.dtype == torch.bool:
            raise ValueError(f"multi-class labels must be integer class indices, got {labels.dtype}")
        if int(labels.min()) < 0 or int(labels.max()) >= logits.shape[1]:
            raise ValueError(
                f"labels must lie in [0, {logits.shape[1] - 1}], got range [{int(labels.min())}, {int(labels.max())}]"
            )
        return labels.long()
    if labels.shape != logits.shape:
        raise ValueError(
            f"multi-label labels must have the logits' shape {tuple(logits.shape)}, got {tuple(labels.shape)}"
        )
    labels = labels.to(torch.float64)
    if not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("multi-label labels must be 0 or 1")
    return labels
