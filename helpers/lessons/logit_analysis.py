"""Small analyses of trained multi-class models: logit distances (MbLS) and the confidence a loss asks for.

* :func:`logit_distances` / :func:`logit_distance_summary` — the distances d_k = max_j z_j − z_k of Liu et al.
  (CVPR 2022, "The devil is in the margin"; summarised in ``shared/papers/mbls_summary.txt``):
  label smoothing and focal loss push every d_k towards 0, cross-entropy lets them grow without bound, and MbLS
  only penalises d_k > m. Notebook 03 plots their distribution per loss.
* :func:`optimal_confidence` — for a K-class problem whose true conditional distribution is
  (q, (1 − q)/(K − 1), …), the top-class probability θ that minimises a loss's *expected* value
  E_{y∼q}[ℓ(z(θ), y)] over predictions of the same shape (θ, (1 − θ)/(K − 1), …). A strictly proper loss
  (cross-entropy) returns θ = q; label smoothing returns (1 − α)q + α/K; focal loss returns θ < q for confident q
  (Mukhoti et al. 2020 discuss the entropy bonus; Charoenphakdee et al. 2021 show focal loss is not proper).
  Notebook 02 draws this "calibration map" of each loss.
* :func:`stationary_confidence` — the θ that *gradient training* reaches on the same expected loss: the first zero
  of the training gradient met when θ moves downhill from a near-uniform start. It differs from
  :func:`optimal_confidence` when the loss value has a jump that no gradient sees — FLSD-53 (Mukhoti et al. 2020)
  switches γ per sample at p_t = 0.2; γ is piecewise constant in p_t, so (detached or not) training follows ∂ℓ/∂z
  with each side's γ fixed and stops where that vanishes, not at the minimiser of the value, which sits at the jump.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

__all__ = ["logit_distances", "logit_distance_summary", "optimal_confidence", "stationary_confidence"]


def _logits(logits: Any) -> torch.Tensor:
    z = torch.as_tensor(logits)
    if z.ndim != 2 or z.shape[1] < 2 or z.shape[0] == 0:
        raise ValueError(f"logits must be a non-empty (N, K) matrix with K >= 2, got shape {tuple(z.shape)}")
    if not z.is_floating_point() or not bool(torch.isfinite(z).all()):
        raise ValueError("logits must be finite floating-point values (pass the raw logits, not probabilities)")
    return z.double()


def logit_distances(logits: Any) -> torch.Tensor:
    """d_k = max_j z_j − z_k for every NON-winning class: a flat float64 tensor of N·(K − 1) values ≥ 0.

    The winning class (d = 0 by definition) is left out, once per row, so the distribution shows only the
    distances the losses act on.
    """
    z = _logits(logits)
    distances = z.max(dim=1, keepdim=True).values - z
    winner = torch.zeros_like(distances, dtype=torch.bool).scatter(1, z.argmax(dim=1, keepdim=True), True)
    return distances[~winner].cpu()


def logit_distance_summary(logits: Any, margins: Sequence[float] = (10.0,)) -> dict[str, float]:
    """Mean, quartiles and maximum of the non-winning logit distances, and the fraction above each margin m."""
    d = logit_distances(logits)
    quartiles = torch.quantile(d, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
    summary = {
        "mean": float(d.mean()),
        "q25": quartiles[0],
        "median": quartiles[1],
        "q75": quartiles[2],
        "max": float(d.max()),
    }
    for m in margins:
        summary[f"fraction_above_{m:g}"] = float((d > m).double().mean())
    return summary


def _check_calibration_map_inputs(
    true_top_probability: Sequence[float] | torch.Tensor, num_classes: int, grid_size: int
) -> torch.Tensor:
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    if isinstance(grid_size, bool) or not isinstance(grid_size, int) or grid_size < 10:
        raise ValueError(f"grid_size must be an integer >= 10, got {grid_size!r}")
    q = torch.as_tensor(true_top_probability, dtype=torch.float64).reshape(-1)
    if bool(((q <= 0) | (q >= 1)).any()):
        raise ValueError("true_top_probability values must lie strictly between 0 and 1")
    return q


def _symmetric_logits(theta: torch.Tensor, k: int) -> torch.Tensor:
    """log(θ, (1 − θ)/(K − 1), …): one row per θ, the top class first."""
    rest = (1.0 - theta) / (k - 1)
    return torch.log(torch.cat([theta.unsqueeze(1), rest.unsqueeze(1).expand(-1, k - 1)], dim=1))


def optimal_confidence(
    loss: nn.Module, true_top_probability: Sequence[float] | torch.Tensor, num_classes: int, grid_size: int = 400
) -> torch.Tensor:
    """For each q, the θ on a grid minimising E_{y∼q}[loss(z(θ), y)] with z(θ) = log(θ, (1−θ)/(K−1), …).

    The expectation needs the loss of one sample with label 0 (weight q) and with label 1 (weight (1 − q)/(K − 1),
    times the K − 1 symmetric wrong classes); the loss is called once per grid point and label on a batch of one,
    so any ``MultiClassLoss`` works unchanged. θ ranges over (1/K, 1) (predictions whose top class is class 0).
    Returns float64 (len(q),).
    """
    q = _check_calibration_map_inputs(true_top_probability, num_classes, grid_size)
    k = num_classes
    theta = torch.linspace(1.0 / k, 1.0, grid_size + 2, dtype=torch.float64)[1:-1]
    logits = _symmetric_logits(theta, k)
    with torch.no_grad():
        loss_true = torch.stack([loss(row.unsqueeze(0), torch.zeros(1, dtype=torch.long)) for row in logits])
        loss_other = torch.stack([loss(row.unsqueeze(0), torch.ones(1, dtype=torch.long)) for row in logits])
    expected = q.unsqueeze(1) * loss_true.double() + (1.0 - q).unsqueeze(1) * loss_other.double()
    return theta[expected.argmin(dim=1)]


def _training_slopes(loss: nn.Module, theta: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b): the derivative along θ of the loss's *training* gradient for label 0 (the top class) and label 1,
    a(θ) = ∇_z ℓ(z(θ), 0) · dz/dθ, by autograd through the loss object — so FLSD-53's γ, piecewise constant in
    p_t, is held at each side's value, exactly as in training.

    All grid points go through the loss as one batch (N · mean = sum of per-sample terms); a loss whose samples
    interact (e.g. DCA's batch-level term) would give wrong slopes, so three points are checked against
    one-sample calls and a mismatch raises."""
    n = len(theta)
    slopes = []
    for label in (0, 1):
        t = theta.clone().requires_grad_(True)
        value = loss(_symmetric_logits(t, k), torch.full((n,), label, dtype=torch.long)) * n
        (grad,) = torch.autograd.grad(value, t)
        for i in (0, n // 2, n - 1):
            single = theta[i : i + 1].clone().requires_grad_(True)
            (expected,) = torch.autograd.grad(loss(_symmetric_logits(single, k), torch.full((1,), label)), single)
            if not torch.allclose(grad[i], expected[0], rtol=1e-6, atol=1e-9):
                raise ValueError(
                    f"{type(loss).__name__} is not a mean of independent per-sample terms (its batch "
                    "gradient differs from one-sample calls); stationary_confidence needs such a loss"
                )
        slopes.append(grad.double())
    return slopes[0], slopes[1]


def stationary_confidence(
    loss: nn.Module,
    true_top_probability: Sequence[float] | torch.Tensor,
    num_classes: int,
    start: float | None = None,
    grid_size: int = 2000,
) -> torch.Tensor:
    """For each q, the θ at which gradient training on E_{y∼q}[loss(z(θ), y)] comes to rest.

    Same symmetric family as :func:`optimal_confidence`: truth (q, (1 − q)/(K − 1), …), prediction
    z(θ) = log(θ, (1 − θ)/(K − 1), …). By symmetry the expected logit gradient of a symmetric prediction points
    along this family, so training moves θ only, at the sign of the slope

        D(θ) = q·a(θ) + (1 − q)·b(θ),   a, b: the training gradient along θ for label 0 and label 1,

    computed by autograd through the loss (for FLSD-53 this holds γ at its value on each side of the switch, as
    any gradient does: the first-order condition with γ evaluated at the solution). Starting from ``start``
    (default: just above 1/K, the near-uniform prediction of a freshly initialised network) θ moves downhill
    (against the sign of D) to the first sign change of D: a stationary point of the training gradient, or, where
    D jumps across 0 (a γ switch), the switch itself. The root is interpolated linearly inside its grid cell.
    For a loss whose gradient is the gradient of its value and whose expected loss has one minimum (CE, LS, focal
    loss with a fixed γ) this equals :func:`optimal_confidence`. Returns float64 (len(q),).
    """
    q = _check_calibration_map_inputs(true_top_probability, num_classes, grid_size)
    k = num_classes
    theta = torch.linspace(1.0 / k, 1.0, grid_size + 2, dtype=torch.float64)[1:-1]
    if start is None:
        start_index = 0
    else:
        if not (1.0 / k < float(start) < 1.0):
            raise ValueError(f"start must lie strictly between 1/K = {1.0 / k:.4f} and 1, got {start!r}")
        start_index = int(
            torch.searchsorted(theta, torch.tensor(float(start), dtype=torch.float64)).clamp(max=grid_size - 1)
        )
    a, b = _training_slopes(loss, theta, k)
    slope = q.unsqueeze(1) * a + (1.0 - q).unsqueeze(1) * b  # (len(q), grid)
    return torch.stack([_first_rest_point(theta, row, start_index) for row in slope])


def _first_rest_point(theta: torch.Tensor, slope: torch.Tensor, start: int) -> torch.Tensor:
    """Where θ, moving against the sign of ``slope`` from ``theta[start]``, first meets a sign change (or a zero);
    the grid's edge when there is none."""
    if slope[start] == 0:
        return theta[start]
    if slope[start] < 0:  # the loss falls as θ grows: θ grows until the slope turns non-negative
        ahead = torch.nonzero(slope[start + 1 :] >= 0)
        if ahead.numel() == 0:
            return theta[-1]
        hi = start + 1 + int(ahead[0])
        lo = hi - 1
    else:  # θ falls until the slope turns non-positive
        behind = torch.nonzero(slope[:start] <= 0)
        if behind.numel() == 0:
            return theta[0]
        lo = int(behind[-1])
        hi = lo + 1
    if slope[lo] == slope[hi]:
        return theta[lo] if slope[lo] == 0 else theta[hi]
    weight = slope[lo] / (slope[lo] - slope[hi])
    return theta[lo] + weight * (theta[hi] - theta[lo])


# ----------------------------------------------------------------------------------------------------------------
# the batch penalties DCA / MDCA of a calibrated model
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["calibrated_batch_penalties"]


def calibrated_batch_penalties(prior: Sequence[float] | torch.Tensor, batch_size: int) -> dict[str, Any]:
    """Expected DCA and MDCA penalties (without their weight β) of the constant class-prior predictor — the least
    sharp calibrated model — on batches of ``batch_size`` labels drawn i.i.d. from ``prior``.

    DCA (Liang et al., BMVC 2020) is ``|mean confidence − batch accuracy|`` and MDCA (Hebbalaguppe et al., CVPR 2022)
    (1/K) Σ_k ``|mean p_k − batch frequency of k|``. For the prior predictor p ≡ π, the batch count C_k of class k is
    Binomial(B, π_k), so each class term is ``|π_k − C_k / B|``, whose expectation is computed exactly from the binomial
    probabilities; DCA is the term of the arg-max class of π (confidence π_max, accuracy C_max / B). Calibration
    makes the *signed* batch differences zero in expectation, not their absolute values: a calibrated model pays
    E|·| ≈ sqrt(2/π) · sd of the batch mean. That sd depends on the model's sharpness: for a calibrated model
    Var(p_k − 1[y = k]) = E[p_k (1 − p_k)] ≤ π_k (1 − π_k) (and the DCA term's variance is E[c (1 − c)] ≤
    acc (1 − acc) for the confidence c, ≤ π_max (1 − π_max) when π_max ≥ 1/2, since a calibrated model's accuracy
    is at least π_max), with equality for the prior predictor, whose sd is sqrt(π_k (1 − π_k) / B). Its penalties
    are therefore an upper value among calibrated models — a sharper calibrated model pays less — not the penalty
    every calibrated model pays. Note also that E|c − C_k / B| over constants c is smallest at the median of
    C_k / B, not at its mean π_k; the two differ for a rare class at a small batch (e.g. π_k = 0.0114, B = 128:
    median count 1, mean 1.46).

    Returns float64 tensors ``class_terms`` (K,) = E|π_k − C_k/B| and ``class_sd`` (K,) = sd of C_k/B, and the
    floats ``mdca`` = mean of ``class_terms`` (linearity of expectation) and ``dca``.
    """
    from scipy.stats import binom

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    pi = torch.as_tensor(prior, dtype=torch.float64).reshape(-1)
    if pi.numel() < 2 or bool((pi < 0).any()) or abs(float(pi.sum()) - 1.0) > 1e-6:
        raise ValueError(f"prior must hold K >= 2 non-negative class probabilities summing to 1, got {pi.tolist()}")
    counts = torch.arange(batch_size + 1, dtype=torch.float64)
    pmf = torch.as_tensor(binom.pmf(counts.numpy()[None, :], batch_size, pi.numpy()[:, None]), dtype=torch.float64)
    class_terms = (pmf * (pi[:, None] - counts[None, :] / batch_size).abs()).sum(1)
    return {
        "class_terms": class_terms,
        "class_sd": (pi * (1 - pi) / batch_size).sqrt(),
        "mdca": float(class_terms.mean()),
        "dca": float(class_terms[int(pi.argmax())]),
    }
