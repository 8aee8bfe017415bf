"""Selective prediction: accuracy–retention curves, R-AUC, and confidences split by correctness.

Used by notebook 04 to reproduce the reliability analysis of the LS+ paper (Sambyal et al., MICCAI 2024,
section 4, Fig. 1 and Fig. 2), which follows Malinin et al. (ref. [1] there).

**Retention curve (LS+ Fig. 1).** Sort the N test predictions by confidence, most confident first. At retention
fraction r the ⌈rN⌉ most confident samples keep their *predicted* label and every other sample is replaced by its
ground truth (the "second opinion" of a clinician), so

    A(r) = 1 − E(rN) / N,    E(n) = number of errors among the n most confident predictions.

A(0) = 1 (everything referred), A(1) = the model's accuracy. A confidence score that ranks its errors last keeps
A(r) = 1 longest. R-AUC is the area under A(r) on [0, 1] (trapezoid rule on r = 0, 1/N, …, 1; higher is better).
Closed forms with error rate e (used by the tests): a perfect ranking gives 1 − e²/2, a score that carries no
information (ties everywhere) 1 − e/2, the worst ranking (errors first) 1 − e + e²/2.

**Ties.** Samples with exactly the same confidence cannot be ordered by it; we use the *expected* curve under a
random order within each tie group, i.e. E(n) is interpolated linearly inside the group. (The paper does not say
how ties are broken; a fixed tie-break would make the curve depend on the order of the test set.)
"""

from __future__ import annotations

from typing import Any

import torch

from helpers.metrics import core

__all__ = ["retention_curve", "r_auc", "retention_area", "confidence_by_correctness"]


def confidences_and_errors(probs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-label confidence and 0/1 error per sample (float64), after the metrics module's input checks."""
    p, y = core.multiclass_inputs(probs, labels)
    confidence, predicted = p.double().max(dim=1)
    return confidence, (predicted != y).double()


def retention_curve(probs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The accuracy–retention curve of LS+ Fig. 1: ``(fractions, accuracy)``, both float64 of length N + 1.

    ``fractions[i] = i / N``; ``accuracy[i] = 1 − E(i)/N`` with E(i) the (tie-averaged) number of errors among the
    i most confident predictions. ``probs``: (N, K) probabilities, ``labels``: (N,) class indices.
    """
    confidence, errors = confidences_and_errors(probs, labels)
    n = confidence.shape[0]
    order = torch.argsort(confidence, descending=True, stable=True)
    confidence, errors = confidence[order], errors[order]
    _, group_sizes = torch.unique_consecutive(confidence, return_counts=True)
    group_of = torch.repeat_interleave(torch.arange(group_sizes.numel(), device=confidence.device), group_sizes)
    group_errors = torch.zeros(group_sizes.numel(), dtype=torch.float64, device=confidence.device)
    group_errors.index_add_(0, group_of, errors)
    group_end = torch.cumsum(group_sizes, 0)
    group_start = group_end - group_sizes
    errors_before_group = torch.cumsum(group_errors, 0) - group_errors
    position = torch.arange(1, n + 1, device=confidence.device, dtype=torch.float64)
    within = position - group_start[group_of].double()
    cumulative = errors_before_group[group_of] + within * group_errors[group_of] / group_sizes[group_of].double()
    cumulative = torch.cat([cumulative.new_zeros(1), cumulative])
    fractions = torch.arange(n + 1, device=confidence.device, dtype=torch.float64) / n
    return fractions.cpu(), (1.0 - cumulative / n).cpu()


def r_auc(probs: Any, labels: Any) -> float:
    """Area under the accuracy–retention curve (LS+ paper's R-AUC; trapezoid rule, higher is better)."""
    return retention_area(*retention_curve(probs, labels))


def retention_area(fractions: Any, accuracy: Any) -> float:
    """Trapezoid area under a computed accuracy–retention curve (what :func:`r_auc` reports)."""
    return float(torch.trapezoid(torch.as_tensor(accuracy), torch.as_tensor(fractions)))


def confidence_by_correctness(probs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-label confidences of the correct and of the incorrect predictions (the two densities of LS+ Fig. 2)."""
    confidence, errors = confidences_and_errors(probs, labels)
    wrong = errors.bool()
    return confidence[~wrong].float().cpu(), confidence[wrong].float().cpu()
