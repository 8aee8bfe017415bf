"""Base classes shared by every loss in the course.

A loss object owns two things: the training objective ``loss(logits, target)`` (mean reduction) and the map from
logits to the probabilities it estimates, ``predict_proba(logits)``. The training engine never assumes a softmax
or a sigmoid: SPA uses its own inverse link and LDACE can read its probability as p², so the loss decides.

Inputs are taken as the metrics take them: torch tensors (unchanged, so gradients flow) or numpy arrays (converted,
see :func:`as_tensor`). Non-finite logits raise :class:`NonFiniteError` in the loss and in ``predict_proba`` alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

MULTI_CLASS = "multi-class"
MULTI_LABEL = "multi-label"


def check_number(
    name: str,
    value,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
    why: str = "",
) -> float:
    """``value`` as a float, or a ValueError naming ``name`` when it is not a finite real number in the interval
    [low, high] (ends open on request; ``why`` explains the bound in the message)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must lie in {interval}, got {value}" + (f": {why}" if why else ""))
    return float(value)


def promote_float(x: torch.Tensor) -> torch.Tensor:
    """float16 / bfloat16 (autocast) and integer inputs -> float32; float32 and float64 unchanged.

    Losses compute in float32 (or float64, which the properness checks and gradcheck use) whatever the autocast
    dtype of the logits, so values and gradients stay finite at logits of +-1e4.
    """
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def as_tensor(values, name: str = "logits") -> torch.Tensor:
    """A loss's input as a tensor, taking what the metrics take: a tensor unchanged (its graph and device kept), a
    numpy array or a (nested) list converted to a CPU tensor of the same dtype; anything else is a TypeError."""
    if isinstance(values, torch.Tensor):
        return values
    if isinstance(values, (np.ndarray, list, tuple)):
        array = np.asarray(values)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, got an array of dtype {array.dtype}")
        return torch.from_numpy(np.array(array, copy=True, order="C"))  # a copy: never shares a read-only buffer
    raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(values).__name__}")


def _as_tensor_like(values, name: str, reference: torch.Tensor) -> torch.Tensor:
    """:func:`as_tensor`, with a converted array moved to ``reference``'s device (targets to their logits)."""
    return values if isinstance(values, torch.Tensor) else as_tensor(values, name).to(reference.device)


class NonFiniteError(ValueError, FloatingPointError):
    """Non-finite values where finite ones are needed. A ValueError for whoever passed them; a FloatingPointError
    too, because in a training loop they mean the run diverged."""


def check_finite(values: torch.Tensor, name: str = "logits") -> None:
    """Raise :class:`NonFiniteError` counting the NaN and infinite entries of ``values`` if there are any."""
    if not bool(torch.isfinite(values).all()):
        n_nan, n_inf = int(torch.isnan(values).sum()), int(torch.isinf(values).sum())
        raise NonFiniteError(
            f"{name} are not finite ({n_nan} NaN, {n_inf} infinite of {values.numel()}): in "
            "training this means the run diverged (lower lr, set grad_clip); otherwise check the "
            "inputs"
        )


def prediction_logits(logits, name: str = "logits") -> torch.Tensor:
    """Logits a ``predict_proba`` can read: converted by :func:`as_tensor`, finite (:func:`check_finite`)."""
    logits = as_tensor(logits, name)
    check_finite(logits, name)
    return logits


def check_class_columns(values: torch.Tensor, name: str = "logits") -> None:
    """Raise a ValueError unless the last dimension of ``values`` holds K >= 2 classes.

    With one column the softmax is exactly 1, so every multi-class loss would be exactly 0 and learn nothing;
    the metrics and temperature scaling refuse K < 2 for the same reason. The message gives the two-column form
    of a binary task: logits (0, z) have softmax (1 − σ(z), σ(z)), the single logit's own binary probabilities.
    """
    n_columns = values.shape[-1] if values.ndim else 0
    if n_columns >= 2:
        return
    if name == "probs":
        how = "pass (N, 2) probabilities torch.cat([1 - p, p], dim=1) for a single probability column p"
    else:
        how = (
            "pass (N, 2) logits torch.cat([torch.zeros_like(z), z], dim=1) for a single logit column z (its "
            "softmax is (1 − sigmoid(z), sigmoid(z)))"
        )
    raise ValueError(
        f"a multi-class loss needs K >= 2 {name} columns, one per class, got {n_columns} (shape "
        f"{tuple(values.shape)}): with one column the softmax is 1 and the loss is exactly 0. For a "
        f"binary task pass two columns: {how}; or use a multi-label loss (helpers.losses.BCE) with "
        "(N, 1) 0/1 targets"
    )


class MultiClassLoss(nn.Module):
    """A loss on (N, K) logits and (N,) integer class targets; probabilities are the softmax."""

    task = MULTI_CLASS

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        logits = prediction_logits(logits)  # softmax of an infinite logit is a NaN row
        check_class_columns(logits)
        return torch.softmax(logits.float(), dim=-1)

    def joint_parameters(self) -> list[nn.Parameter]:
        """Parameters of the loss trained by the same optimiser as the model (none by default)."""
        return []


class MultiLabelLoss(nn.Module):
    """A loss on (N, T) logits and (N, T) binary targets; probabilities are the sigmoid unless overridden."""

    task = MULTI_LABEL

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        logits = prediction_logits(logits)  # sigmoid(NaN) is NaN, sigmoid(±inf) a confident 1 or 0 of a diverged run
        return torch.sigmoid(logits.float())

    def joint_parameters(self) -> list[nn.Parameter]:
        return []


class Composite(nn.Module):
    """``base(logits, target) + sum_i weight_i * regulariser_i(base.predict_proba(logits), target)``.

    The regularisers (LPR, CCL, DCA, MDCA) act on the base loss's *own* probability estimate, so they compose
    with any base loss (SPA paper eq. 21; Hebbalaguppe et al. 2022 for MDCA). Probabilities are those of the
    base loss: ``predict_proba`` is delegated to it. A regulariser that has a ``penalty(probs, target)`` method
    (the course's do) is called through it: its ``forward`` would check the target again, which the base loss
    has just checked, and the probabilities, which the base loss has just produced.
    """

    def __init__(self, base: nn.Module, regularisers: Sequence[tuple[float, nn.Module]]):
        super().__init__()
        self.base = base
        self.weights = [check_number("regulariser weight", w, 0.0) for w, _ in regularisers]
        self.regularisers = nn.ModuleList([r for _, r in regularisers])
        self.task = base.task

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = as_tensor(logits, "logits")
        target = _as_tensor_like(target, "target", logits)  # the regularisers' penalty takes tensors
        total = self.base(logits, target)
        if self.regularisers:
            probs = self.base.predict_proba(logits)
            for weight, regulariser in zip(self.weights, self.regularisers):
                if weight != 0.0:
                    total = total + weight * getattr(regulariser, "penalty", regulariser)(probs, target)
        return total

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        return self.base.predict_proba(logits)

    def joint_parameters(self) -> list[nn.Parameter]:
        return list(getattr(self.base, "joint_parameters", lambda: [])())

    def extra_repr(self) -> str:
        return "weights=" + repr(self.weights)


def check_class_targets(target: torch.Tensor, num_classes: int, n: int | None = None) -> torch.Tensor:
    """(N,) integer class indices in [0, num_classes) as int64; a clear error otherwise.

    Every integer dtype is accepted and converted once here (torch's own kernels take only int64 class indices,
    and indexing with uint8 would read them as a mask). ``n``: the batch size the targets must match.
    """
    if target.ndim != 1 or (n is not None and target.shape[0] != n):
        raise ValueError(
            f"target must be a (N,) tensor of class indices matching logits (N={n}), "
            f"got shape {tuple(target.shape)}; for one-hot targets pass target.argmax(1)"
        )
    if target.dtype.is_floating_point or target.dtype.is_complex or target.dtype == torch.bool:
        raise ValueError(f"target must hold integer class indices, got dtype {target.dtype}; pass target.long()")
    target = target.long()
    if target.numel():
        low, high = torch.aminmax(target)
        if int(low) < 0 or int(high) >= num_classes:
            raise ValueError(f"class indices must lie in [0, {num_classes - 1}], got range [{int(low)}, {int(high)}]")
    return target


def _check_batch(logits, name: str, columns: str) -> torch.Tensor:
    """(N, C) with N >= 1 and finite entries: a mean over an empty batch, or any term of a non-finite logit, is
    NaN, which would surface only later as a diverged run. Returns ``logits`` as a tensor (:func:`as_tensor`)."""
    logits = as_tensor(logits, name)
    if logits.ndim != 2:
        raise ValueError(f"{name} must have shape (N, {columns}), got {tuple(logits.shape)}")
    if logits.shape[0] == 0:
        raise ValueError(
            f"empty batch: {name} has shape {tuple(logits.shape)}; a loss needs at least one sample "
            "(its mean over none is NaN)"
        )
    check_finite(logits, name)
    return logits


def check_multiclass_inputs(logits, target, name: str = "logits") -> tuple[torch.Tensor, torch.Tensor]:
    """Raise a clear error for shapes, values or labels a multi-class loss cannot use; return the inputs as
    tensors (numpy arrays converted, :func:`as_tensor`), the target as int64."""
    logits = _check_batch(logits, name, "K")
    check_class_columns(logits, name)
    target = _as_tensor_like(target, "target", logits)
    return logits, check_class_targets(target, logits.shape[1], logits.shape[0])


def check_multilabel_inputs(logits, targets, name: str = "logits") -> tuple[torch.Tensor, torch.Tensor]:
    """Raise a clear error for shapes, values or labels a multi-label loss cannot use; return the inputs as
    tensors (numpy arrays converted, :func:`as_tensor`)."""
    logits = _check_batch(logits, name, "T")
    targets = _as_tensor_like(targets, "targets", logits)
    if targets.shape != logits.shape:
        raise ValueError(
            f"targets must have the same (N, T) shape as logits, got {tuple(targets.shape)} vs {tuple(logits.shape)}"
        )
    if targets.numel() and targets.dtype != torch.bool:
        # y − y² is 0 exactly for y ∈ {0, 1}, > 0 inside (0, 1), < 0 outside [0, 1] and NaN for NaN: one pass.
        low, high = torch.aminmax(torch.addcmul(targets, targets, targets, value=-1))
        if not (low.item() == 0 and high.item() == 0):
            raise ValueError(
                "multi-label targets must be 0 or 1; got other values (soft labels are not supported here)"
            )
    return logits, targets
