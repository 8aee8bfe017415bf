"""LDACE and the canonical calibration loss (CCL), multi-label losses that couple labels or examples.

Paper: Pal, Panda & Garain, "Label Dependency Aware Loss for Reliable Multi-Label Medical Image Classification",
ICASSP 2025 (LDACE, CCL; we follow the facts gathered from the authors' reference code, see
``shared/papers/README.md``). The conventions of :mod:`helpers.losses.multilabel` hold here too: targets in
{0, 1}, the loss's own ``predict_proba``, logs from ``logsigmoid``, autocast off and float16 / bfloat16 promoted to
float32 inside the loss.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from helpers.losses.base import (
    MULTI_LABEL,
    Composite,
    MultiLabelLoss,
    check_multilabel_inputs,
    prediction_logits,
    promote_float,
)
from helpers.losses.multilabel import check_probability_inputs, no_autocast

__all__ = ["LDACE", "CanonicalCalibrationLoss", "LDACEWithCCL"]


_DIAGONAL_READINGS = ("p_squared", "p")


class LDACE(MultiLabelLoss):
    """Label Dependency Aware Cross-Entropy (Pal et al., ICASSP 2025), as in the authors' reference code.

    With p = σ(v) and the pairwise model q_ij = p_i p_j, the loss is the BCE between q_ij and y_i y_j over all
    label pairs, weight 1 on the diagonal and 0.5 off it (so each unordered pair i < j counts once), normalised by
    B·T(T + 1)/2: the mean over the upper triangle including the diagonal. Computed without forming products
    that could round: log q_ij = log p_i + log p_j (logsigmoid), and 1 − p_i p_j = (1 − p_i) + p_i (1 − p_j)
    with 1 − p = σ(−v), which stays accurate when p_i p_j → 1 (logaddexp in log space for the extreme pairs).
    The positive-target part is separable, O(N·T); the T(T + 1)/2 terms log(1 − p_i p_j) are one batched pass.
    Fused (see :class:`_LDACEFunction`): the forward pass also forms the closed-form gradient, so backward is a
    single multiplication (first derivatives only; ``torch.autograd.gradgradcheck`` is not supported).

    ``diagonal`` chooses the reading of the diagonal term:

    * ``"p_squared"`` (reference): q_ii = p_i², i.e. BCE(p_i², y_i). ``predict_proba`` returns p², as the
      reference's evaluation does: the diagonal term alone is minimised at p_i² = η_i. With T ≥ 2 the
      off-diagonal terms (minimised at p_i p_j = P(y_i = y_j = 1)) pull the other way even for independent
      labels, so p² is biased: for T = 2, η = (½, ½) the joint minimiser is p² = 5/12 (p ≈ 0.645).
    * ``"p"``: q_ii = p_i (the model's own P(y_i = 1, y_i = 1)), i.e. BCE(p_i, y_i); ``predict_proba``
      returns p. Every term is then minimised at p = η when labels are independent, so this reading is strictly
      proper under label independence; dependent labels bias both readings.

    Departure from the reference: no clamping of p to [1e-7, 1 − 1e-7] (the reference's ``LDACE_Loss`` clamps
    σ(v) before forming p_i p_j). Values differ only beyond it, but gradients do too: where the clamp binds,
    abs(v) > log(1/1e-7 − 1) ≈ 16.1, the reference's gradient is exactly 0, so a logit that confidently contradicts
    its label stops receiving gradient there, while here it still does (the log-space form keeps value and
    gradient finite at logits ±1e4).
    """

    def __init__(self, diagonal: str = "p_squared"):
        super().__init__()
        if diagonal not in _DIAGONAL_READINGS:
            raise ValueError(
                f"diagonal must be one of {_DIAGONAL_READINGS}, got {diagonal!r}: 'p_squared' is the "
                "reference code (BCE(p², y) on the diagonal, probability p²), 'p' uses BCE(p, y)"
            )
        self.diagonal = diagonal

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = check_multilabel_inputs(logits, targets)
        with no_autocast(logits):
            logits = promote_float(logits)
            needs_grad = logits.requires_grad and torch.is_grad_enabled()
            return _LDACEFunction.apply(logits, targets.to(logits.dtype), self.diagonal == "p_squared", needs_grad)

    def partial_losses(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Elementwise (ℓ₊, ℓ₋) of the single-label case T = 1, where LDACE is its diagonal term alone:
        (−log p², −log(1 − p²)) under "p_squared", BCE's (−log p, −log(1 − p)) under "p". With T ≥ 2 the loss
        couples labels and has no per-label partial losses (see helpers.losses.joint_risk_minimiser)."""
        log_p, log_1mp = F.logsigmoid(logits), F.logsigmoid(-logits)
        if self.diagonal == "p_squared":
            return -2.0 * log_p, -(log_1mp + torch.log1p(torch.exp(log_p)))
        return -log_p, -log_1mp

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        logits = prediction_logits(logits)
        with no_autocast(logits):
            logits = promote_float(logits)
            if self.diagonal == "p_squared":
                return torch.exp(2.0 * F.logsigmoid(logits))
            return torch.sigmoid(logits)

    def extra_repr(self) -> str:
        return f"diagonal={self.diagonal!r}"


@functools.lru_cache(maxsize=64)
def _cyclic_pairs(t: int, include_diagonal: bool, device: torch.device, dtype: torch.dtype):
    """The label pairs as cyclic offsets: pair (i, (i + d) mod T) for d = d₀ … ⌊T/2⌋ covers every unordered pair
    i < j once (d₀ = 1) or every i ≤ j (d₀ = 0), except that for even T the offset T/2 lists each of its pairs
    twice, so its block gets weight ½. Returns (d₀, number of offsets, block weights (D, 1, 1), partner index of
    every (d, i) row, flattened) — cached per T, device and dtype."""
    first = 0 if include_diagonal else 1
    offsets = torch.arange(first, t // 2 + 1, device=device)
    weight = torch.ones(offsets.numel(), 1, 1, dtype=dtype, device=device)
    if t % 2 == 0 and t // 2 >= first:
        weight[-1] = 0.5
    partner = ((torch.arange(t, device=device) + offsets.unsqueeze(1)) % t).reshape(-1)
    return first, offsets.numel(), weight, partner


class _LDACEFunction(torch.autograd.Function):
    """LDACE's value and its gradient with respect to the logits in one pass (one autograd node).

    With a = log p, q = 1 − p, Y_ij = y_i y_j, S = Σ_j y_j and L_ij = log(1 − p_i p_j), the loss times
    Z = N·T(T + 1)/2 is, per example,

        −Σ_{i ≤ j} [Y_ij (a_i + a_j) + (1 − Y_ij) L_ij] = −Σ_i y_i a_i (S + 1) − Σ_{i ≤ j} (1 − Y_ij) L_ij

    under the reading "p_squared" (the diagonal pair is BCE(p_i², y_i)); reading "p" sums the pairs i < j,
    −Σ_i y_i a_i (S − 1), and adds BCE(p_i, y_i). Gradient: ∂a_i/∂z_i = q_i and ∂L_ij/∂z_i = −q_i p_i p_j /
    (1 − p_i p_j), so

        ∂(Z·loss)/∂z_k = q_k [Σ_{pairs ∋ k} (1 − Y_ij) p_i p_j / (1 − p_i p_j) − y_k c]   (+ p_k − y_k for "p"),

    c = S + 1 ("p_squared") or S − 1 ("p"); a diagonal pair (k, k) counts twice. Layout: labels-major (T, N),
    and the pairs as cyclic offsets (:func:`_cyclic_pairs`), so every pair's partner row is a strided view of the
    label rows repeated twice — no gather. 1 − p_i p_j = q_i + p_i q_j (no cancellation as p_i p_j → 1); when a
    logit exceeds 60 that sum could underflow, and the pairs are formed in log space instead (logaddexp), with
    q_k p_i p_j / (1 − p_i p_j) ≤ 1 exponentiated as one term.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, p_squared: bool, needs_grad: bool):
        n, t = logits.shape
        first, n_offsets, block_weight, partner = _cyclic_pairs(t, p_squared, logits.device, logits.dtype)
        z, y = logits.t(), targets.t()
        log_p = F.logsigmoid(z)
        extreme = logits.numel() > 0 and logits.max().item() > 60.0
        rows = torch.stack([log_p, F.logsigmoid(-z), y]) if extreme else torch.stack([z, -z, y])
        if not extreme:
            rows[:2].sigmoid_()  # p, q
        # ends[c, d, i] = rows[c, (i + first + d) mod T]: the partner of label i at offset first + d
        ends = torch.cat([rows, rows], dim=1).as_strided((3, n_offsets, t, n), (2 * t * n, n, n, 1), first * n)
        unpaired = torch.mul(ends[2], rows[2], out=logits.new_empty((n_offsets, t, n)))
        unpaired = torch.addcmul(block_weight, block_weight, unpaired, value=-1.0)  # w_d (1 − y_i y_j)
        if extreme:
            log_p_i, log_q_i = rows[0], rows[1]
            log_one_minus = torch.logaddexp(log_q_i, log_p_i + ends[1], out=logits.new_empty((n_offsets, t, n)))
            p, q = torch.exp(log_p_i), torch.exp(log_q_i)
        else:
            p, q = rows[0], rows[1]
            one_minus = torch.addcmul(q, p, ends[1], out=logits.new_empty((n_offsets, t, n)))
            log_one_minus = torch.log(one_minus)
        y_coefficient = y * (y.sum(0) + (1.0 if p_squared else -1.0))
        total = torch.dot(unpaired.reshape(-1), log_one_minus.reshape(-1)) + (y_coefficient * log_p).sum()
        if not p_squared:
            total = total - F.binary_cross_entropy_with_logits(z, y, reduction="sum")
        normaliser = n * t * (t + 1) / 2
        grad = None
        if needs_grad:
            if extreme:
                log_ratio = log_p_i + ends[0] - log_one_minus  # log p_i p_j / (1 − p_i p_j)
                to_partner = (unpaired * torch.exp(log_ratio + ends[1])).reshape(n_offsets * t, n)
                per_label = (unpaired * torch.exp(log_ratio + log_q_i)).sum(0).index_add_(0, partner, to_partner)
                grad = per_label - q * y_coefficient
            else:
                pair_weight = unpaired.mul_(p).mul_(ends[0]).div_(one_minus)
                per_label = pair_weight.sum(0).index_add_(0, partner, pair_weight.view(n_offsets * t, n))
                grad = per_label.sub_(y_coefficient).mul_(q)
            if not p_squared:
                grad += p - y
            grad = grad.t().div_(normaliser)
        ctx.save_for_backward(grad)
        return -total / normaliser

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None, None


class CanonicalCalibrationLoss(nn.Module):
    """Canonical Calibration Loss (Pal et al., ICASSP 2025), a regulariser ``reg(probs, targets)``.

    Per label t, the predictions q_nt are binned into ``n_bins`` equal-width bins on [0, 1] (q = 1 goes to the
    last bin) and the loss is the ECE-style sum (1/N) Σ_b ``|Σ_{n ∈ b} (q_nt − y_nt)|``, averaged over labels. With
    one bin — the reference — it is mean_t ``|mean_n q_nt − mean_n y_nt|``: the gap between the batch-mean
    prediction and the batch prevalence of each label. A batch-level term (not a sum over examples). In the
    reference q = p², LDACE's probability; ``Composite`` passes ``base.predict_proba``, which is exactly that.
    Gradients flow through q (bin membership is piecewise constant).
    """

    task = MULTI_LABEL

    def __init__(self, n_bins: int = 1):
        super().__init__()
        if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
            raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
        self.n_bins = n_bins

    def forward(self, probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        probs, targets = check_probability_inputs(probs, targets)
        return self.penalty(probs, targets)

    def penalty(self, probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The regulariser without the input checks (``Composite`` calls this on checked inputs)."""
        with no_autocast(probs):
            q = promote_float(probs)
            y = targets.to(q.dtype)
            n, t = q.shape
            if n == 0:
                raise ValueError("CanonicalCalibrationLoss needs a non-empty batch")
            if self.n_bins == 1:
                return (q.mean(0) - y.mean(0)).abs().mean()
            bins = torch.clamp((q.detach() * self.n_bins).long(), max=self.n_bins - 1)
            flat_index = (bins + self.n_bins * torch.arange(t, device=q.device)).reshape(-1)
            gaps = torch.zeros(t * self.n_bins, dtype=q.dtype, device=q.device)
            gaps = gaps.index_add(0, flat_index, (q - y).reshape(-1))
            return gaps.abs().sum() / (n * t)

    def extra_repr(self) -> str:
        return f"n_bins={self.n_bins}"


class LDACEWithCCL(Composite):
    """LDACE + λ·CCL as trained in the reference (λ = 1, one bin): ``Composite(LDACE(diagonal), [(λ, CCL)])``.

    CCL acts on LDACE's own probability (p² under the reference reading).
    """

    def __init__(self, diagonal: str = "p_squared", ccl_weight: float = 1.0, n_bins: int = 1):
        super().__init__(LDACE(diagonal=diagonal), [(ccl_weight, CanonicalCalibrationLoss(n_bins=n_bins))])
