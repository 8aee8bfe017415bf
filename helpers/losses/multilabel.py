"""Multi-label losses: BCE, asymmetric focal, ASL, the φ recovery map, SPA and LPR (LDACE and CCL are in
:mod:`helpers.losses.multilabel_ldace`).

Papers: Cheng & Vasconcelos, "Towards Calibrated Multi-label Deep Neural Networks", CVPR 2024 (equation numbers
below refer to it: BCE eq. 6, asymmetric focal eq. 7, ASL eq. 8, φ eqs. 13–15, SPA eqs. 16–17, LPR eqs. 19–21);
Ridnik et al., "Asymmetric Loss for Multi-Label Classification", ICCV 2021 (ASL).

Conventions shared by every multi-label loss (here and in :mod:`helpers.losses.multilabel_ldace`):

* ``loss(logits (N, T), targets (N, T) in {0, 1})`` returns the MEAN over all N×T entries (per-element losses) or
  over the batch of per-example normalised sums (LPR, LDACE); where a reference sums, the class says so.
* Per-element losses expose ``partial_losses(logits) -> (ℓ₊(v), ℓ₋(v))`` elementwise; ``helpers.losses.properness``
  uses them to minimise the conditional risk ``η ℓ₊ + (1 − η) ℓ₋`` (eq. 11).
* ``predict_proba(logits)`` is the loss's own estimate of P(y = 1): the sigmoid for BCE / focal / ASL, SPA's
  inverse link, σ² or σ for LDACE.
* Logs come from ``logsigmoid`` / ``softplus`` (never ``log(sigmoid)``): value and gradient stay finite for
  logits up to ±1e4. float16 / bfloat16 inputs are promoted to float32 and autocast is switched off inside the
  loss, so every op runs in float32 whatever the autocast policy (this removes ASL's known fp16 NaNs); float64
  stays float64 so that ``torch.autograd.gradcheck`` and the properness checks run in double precision.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from helpers.losses.base import (
    MULTI_LABEL,
    MultiLabelLoss,
    as_tensor,
    check_multilabel_inputs,
    check_number,
    prediction_logits,
    promote_float,
)

__all__ = [
    "BCE",
    "AsymmetricFocal",
    "ASL",
    "phi_recovery",
    "detached_recovery",
    "SPA",
    "spa_link_as_printed",
    "LPR",
]


# ----------------------------------------------------------------------------------------------- shared utilities


def no_autocast(x: torch.Tensor):
    """Switch autocast off inside a loss (a no-op context when it is not on: entering one costs microseconds)."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.autocast(device_type=x.device.type, enabled=False)
    return contextlib.nullcontext()


def check_probability_inputs(probs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Shape / label checks of base.py plus: probabilities must be floating point in [0, 1]. Returns tensors."""
    probs, targets = check_multilabel_inputs(probs, targets, name="probs")
    if not probs.dtype.is_floating_point:
        raise TypeError(f"probs must be a floating-point tensor, got dtype {probs.dtype}")
    if probs.numel():
        low, high = torch.aminmax(probs.detach())
        if not (low.item() >= 0.0 and high.item() <= 1.0):  # also catches NaN
            raise ValueError(
                "probs must lie in [0, 1]: a regulariser takes the base loss's predict_proba(logits), "
                "not logits (compose it with helpers.losses.Composite)"
            )
    return probs, targets


class _ElementwiseLoss(MultiLabelLoss):
    """A multi-label loss that is a sum of per-label terms ``y ℓ₊(v) + (1 − y) ℓ₋(v)``, averaged over N×T."""

    def partial_losses(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = check_multilabel_inputs(logits, targets)
        with no_autocast(logits):
            logits = promote_float(logits)
            targets = targets.to(logits.dtype)
            loss_pos, loss_neg = self.partial_losses(logits)
            return (targets * loss_pos + (1.0 - targets) * loss_neg).mean()

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        logits = prediction_logits(logits)  # as the multi-class losses: no NaN or saturated read-out of a diverged run
        with no_autocast(logits):
            return torch.sigmoid(promote_float(logits))


# ------------------------------------------------------------------------------------------------------ BCE, focal
class BCE(_ElementwiseLoss):
    """Binary cross-entropy (eq. 6): ℓ₊ = −log σ(v), ℓ₋ = −log(1 − σ(v)); strictly proper with the sigmoid link."""

    def partial_losses(self, logits):
        return F.softplus(-logits), F.softplus(logits)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = check_multilabel_inputs(logits, targets)
        with no_autocast(logits):
            logits = promote_float(logits)
            return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


def _focusing_weight(log_base: torch.Tensor, gamma: float) -> torch.Tensor:
    """base^γ from log(base); exactly 1 for γ = 0, exactly 0 where base = 0 (log_base = −inf), finite gradient."""
    if gamma == 0.0:
        return torch.ones_like(log_base)
    return torch.exp(gamma * log_base)


class ASL(_ElementwiseLoss):
    """Asymmetric loss ASL (eq. 8; Ridnik et al. 2021): focusing γ⁺, γ⁻ plus a probability margin on negatives.

        ℓ₊(v) = −(1 − p)^γ⁺ · log max(p, eps)
        ℓ₋(v) = −p_m^γ⁻ · log max(1 − p_m, eps),      p = σ(v),  p_m = max(p − m, 0)

    ``eps`` is the reference code's clamp of the probability inside the log (``log(p.clamp(min=eps))``): below
    v ≈ log(eps) ≈ −18.4 the positive loss is flat with zero gradient, exactly as in the reference.
    ``eps = 0`` removes the clamp. Defaults (γ⁺, γ⁻, m, eps) = (0, 4, 0.05, 1e-8) are the setting of the authors'
    training script (``train.py``: ``AsymmetricLoss(gamma_neg=4, gamma_pos=0, clip=0.05,
    disable_torch_grad_focal_loss=True)``), not their class's defaults, which are γ⁺ = 1, γ⁻ = 4, m = 0.05,
    eps = 1e-8 with the focusing weight detached (``AsymmetricLoss`` in ``src/loss_functions/losses.py`` of
    Alibaba-MIIL/ASL; its ``AsymmetricLossOptimized`` twin defaults to not detaching).

    ``detach_focusing_weight``: False (the default, and every run the course trains) differentiates the loss as
    written in eq. (8), so training stops at the minimiser of the conditional risk and φ (eqs. 13–15) maps it
    back. True does what the authors' ``disable_torch_grad_focal_loss=True`` does: the weights (1 − p)^γ⁺ and
    p_m^γ⁻ are constants in the backward pass. The value is the same; the gradient is that of another loss (per
    label, the integral over v of the detached derivatives), not of eq. (8), and training stops where the
    expected detached gradient vanishes (:func:`helpers.losses.properness.stationary_point`), which is not the
    minimiser and not what φ inverts: :func:`detached_recovery` (ψ) does, and ``recovered_proba`` uses it.
    The option enters the run key (through ``extra_repr``) only when it is True.

    Departures from the reference: the mean over all N×T entries (the reference sums: multiply by N·T to get its
    value; the sum only rescales the learning rate); by default the focusing weight is differentiated (above);
    logs come from ``logsigmoid`` and the loss is computed in float32 with autocast off, which removes the fp16
    NaNs the reference is known for.

    Not strictly proper (Theorem 1): ``predict_proba`` is the raw sigmoid; ``recovered_proba`` applies φ
    (eqs. 13–15, :func:`phi_recovery`). With m > 0 that recovery is not a bijection (see there).
    """

    def __init__(
        self,
        gamma_pos: float = 0.0,
        gamma_neg: float = 4.0,
        margin: float = 0.05,
        eps: float = 1e-8,
        detach_focusing_weight: bool = False,
    ):
        super().__init__()
        if not isinstance(detach_focusing_weight, bool):
            raise TypeError(f"detach_focusing_weight must be True or False, got {detach_focusing_weight!r}")
        self.detach_focusing_weight = detach_focusing_weight
        self.gamma_pos = check_number("gamma_pos", gamma_pos, 0.0)
        self.gamma_neg = check_number("gamma_neg", gamma_neg, 0.0)
        self.margin = check_number(
            "margin",
            margin,
            0.0,
            1.0,
            high_open=True,
            why="m is a shift of the probability; m >= 1 discards every negative",
        )
        self.eps = check_number("eps", eps, 0.0, 1.0, high_open=True)

    def _clamped_log(self, log_x: torch.Tensor) -> torch.Tensor:
        return log_x if self.eps == 0.0 else log_x.clamp_min(math.log(self.eps))

    def _weight(self, log_base: torch.Tensor, gamma: float) -> torch.Tensor:
        """The focusing weight, a constant of the backward pass when ``detach_focusing_weight``."""
        return _focusing_weight(log_base.detach() if self.detach_focusing_weight else log_base, gamma)

    def partial_losses(self, logits):
        log_p = F.logsigmoid(logits)
        log_1mp = F.logsigmoid(-logits)
        loss_pos = -self._weight(log_1mp, self.gamma_pos) * self._clamped_log(log_p)
        if self.margin == 0.0:
            loss_neg = -self._weight(log_p, self.gamma_neg) * self._clamped_log(log_1mp)
        else:
            shifted = torch.relu(torch.sigmoid(logits) - self.margin)  # p_m ∈ [0, 1 − m]
            positive = shifted > 0
            log_shifted = torch.log(torch.where(positive, shifted, torch.ones_like(shifted)))
            log_shifted = torch.where(positive, log_shifted, torch.full_like(shifted, -math.inf))
            loss_neg = -self._weight(log_shifted, self.gamma_neg) * self._clamped_log(torch.log1p(-shifted))
        return loss_pos, loss_neg

    def recovered_proba(self, logits: torch.Tensor) -> torch.Tensor:
        """φ(σ(v); γ⁻, γ⁺, m) of eq. (13): the posterior implied by the risk minimiser (\"ASY+φ\" in Table 3).
        With ``detach_focusing_weight`` the map of the detached gradient instead, :func:`detached_recovery`."""
        recovery = detached_recovery if self.detach_focusing_weight else phi_recovery
        return recovery(
            self.predict_proba(logits), gamma_pos=self.gamma_pos, gamma_neg=self.gamma_neg, margin=self.margin
        )

    def _detach_repr(self) -> str:
        """Empty when off, so that the run keys of every run trained before the option existed are unchanged."""
        return ", detach_focusing_weight=True" if self.detach_focusing_weight else ""

    def extra_repr(self) -> str:
        text = f"gamma_pos={self.gamma_pos}, gamma_neg={self.gamma_neg}, margin={self.margin}, eps={self.eps}"
        return text + self._detach_repr()


class AsymmetricFocal(ASL):
    """Asymmetric focal loss (eq. 7; Lin et al. 2017, Ridnik et al. 2021): ASL with margin 0 and no eps clamp.

        ℓ₊(v) = −(1 − p)^γ⁺ log p,   ℓ₋(v) = −p^γ⁻ log(1 − p),   p = σ(v).

    γ⁺ = γ⁻ = 0 is BCE. Not strictly proper (Corollary 1), but φ (margin 0) is a bijection, so
    ``recovered_proba`` returns the posterior (\"Focal+φ\" in Table 3). Defaults (0, 4) are ASL's focusing values.
    ``detach_focusing_weight`` as in :class:`ASL` (off by default; then φ no longer inverts where training stops).
    """

    def __init__(self, gamma_pos: float = 0.0, gamma_neg: float = 4.0, detach_focusing_weight: bool = False):
        super().__init__(
            gamma_pos=gamma_pos,
            gamma_neg=gamma_neg,
            margin=0.0,
            eps=0.0,
            detach_focusing_weight=detach_focusing_weight,
        )

    def extra_repr(self) -> str:
        return f"gamma_pos={self.gamma_pos}, gamma_neg={self.gamma_neg}" + self._detach_repr()


# ------------------------------------------------------------------------------------------------------------- phi
def _log_h(x: torch.Tensor, gamma: float) -> torch.Tensor:
    """log h(x; γ) of eq. (15), h = [x^γ − γ x^(γ−1) (1 − x) log(1 − x)] / (1 − x), for x ∈ [0, 1].

    Rewritten as h = x^γ · [1 + γ g(x)] / (1 − x) with g(x) = −(1 − x) log(1 − x) / x ∈ [0, 1] (g(0) = 1,
    g(1) = 0), which has no 0·∞ at either end: h(0; γ > 0) = 0, h(0; 0) = 1, h(1; ·) = ∞.
    """
    interior = (x > 0) & (x < 1)
    x_safe = torch.where(interior, x, torch.full_like(x, 0.5))
    g = -(1.0 - x_safe) * torch.log1p(-x_safe) / x_safe
    g = torch.where(x <= 0, torch.ones_like(x), torch.where(x >= 1, torch.zeros_like(x), g))
    log_power = torch.zeros_like(x) if gamma == 0.0 else gamma * torch.log(x)
    return log_power + torch.log1p(gamma * g) - torch.log1p(-x)


def _recovery_inputs(
    probs: Any, gamma_pos: float, gamma_neg: float, margin: float
) -> tuple[torch.Tensor, torch.dtype, float, float, float]:
    """The checked inputs of φ and ψ: forecasts in [0, 1] as float64, the dtype to return, and the parameters."""
    gamma_pos = check_number("gamma_pos", gamma_pos, 0.0)
    gamma_neg = check_number("gamma_neg", gamma_neg, 0.0)
    margin = check_number("margin", margin, 0.0, 1.0, high_open=True)
    probs = as_tensor(probs, "probs")
    if probs.numel() and not bool(((probs >= 0) & (probs <= 1)).all()):
        raise ValueError("probs must be probabilities in [0, 1] (pass sigmoid(logits), not logits)")
    out_dtype = probs.dtype if probs.dtype.is_floating_point else torch.float32
    return probs.to(torch.float64), out_dtype, gamma_pos, gamma_neg, margin


def phi_recovery(probs: torch.Tensor, gamma_pos: float, gamma_neg: float, margin: float = 0.0) -> torch.Tensor:
    """Map the conditional-risk minimiser of focal / ASL back to the class posterior (eqs. 13–15, Theorem 2).

        φ(z) = h((z − m)₊; γ⁻) / [h((z − m)₊; γ⁻) + h(1 − z; γ⁺)]

    Derivation (it matches the printed eqs. 14–15): with ℓ₊(z) = −(1 − z)^γ⁺ log z and ℓ₋(z) = −q^γ⁻ log(1 − q),
    q = (z − m)₊, the first-order condition η ℓ₊'(z) + (1 − η) ℓ₋'(z) = 0 of the conditional risk (eq. 11) gives
    η = ℓ₋'(z) / (ℓ₋'(z) − ℓ₊'(z)), and ℓ₋'(z) = h(q; γ⁻), −ℓ₊'(z) = h(1 − z; γ⁺).

    Bijective only for m = 0. For m > 0:

    * every z ∈ [0, m] maps to the same value (0 when γ⁻ > 0): ℓ₋ is identically 0 there, so those scores carry
      no information about η, and φ ties all of them, which changes rankings (mAP) — the "ASY+φ" drop in Table 3.
      For η > 0 the risk minimiser always lies above m (at z = m the risk still decreases), so φ inverts the
      minimiser on (m, 1) — but trained networks do output z ≤ m for easy negatives;
    * with γ⁺ = 0 (the ASL default) φ(1) = h(1 − m; γ⁻) / (1 + h(1 − m; γ⁻)) < 1: every η above that value
      has its risk minimised at z → 1 (logit → +∞), so no map can recover it. For (γ⁻, m) = (4, 0.05) this
      saturation value is ≈ 0.964.

    Computed in float64 in log space; returns the dtype of ``probs`` (float32 for non-float inputs).
    """
    z, out_dtype, gamma_pos, gamma_neg, margin = _recovery_inputs(probs, gamma_pos, gamma_neg, margin)
    shifted = torch.clamp(z - margin, min=0.0) if margin > 0 else z
    log_ratio = _log_h(shifted, gamma_neg) - _log_h(1.0 - z, gamma_pos)
    return torch.sigmoid(log_ratio).to(out_dtype)


def detached_recovery(probs: torch.Tensor, gamma_pos: float, gamma_neg: float, margin: float = 0.0) -> torch.Tensor:
    """The posterior at which training with a DETACHED focusing weight stops (Ridnik et al.'s default), the
    counterpart of φ for ``ASL(detach_focusing_weight=True)``.

    With the weights constant in the backward pass, ∂ℓ₊/∂v = −(1 − z)^γ⁺ (1 − z) and
    ∂ℓ₋/∂v = q^γ⁻ z (1 − z) / (1 − q), q = (z − m)₊ (0 for z ≤ m when m > 0), so the expected gradient
    η ∂ℓ₊ + (1 − η) ∂ℓ₋ vanishes at

        ψ(z) = A / (A + (1 − z)^γ⁺),      A = q^γ⁻ z / (1 − q);

    for m = 0, ψ(z) = z^(γ⁻+1) / (z^(γ⁻+1) + (1 − z)^(γ⁺+1)). ψ omits the γ x^(γ−1) log terms of φ's h (eq. 15),
    which come from differentiating the weight. Like φ it is not a bijection for m > 0: it is 0 on [0, m], and
    with γ⁺ = 0 it saturates at ψ(1) = (1 − m)^γ⁻ / ((1 − m)^γ⁻ + m) (≈ 0.942 for (γ⁻, m) = (4, 0.05), against
    φ's 0.964): above it no score is stationary and training drives the logit to +∞.
    ``helpers.losses.properness.stationary_point`` solves the same condition numerically from autograd.
    float64 in log space; returns the dtype of ``probs``. The eps clamp of :class:`ASL` (inactive for
    z ∈ [1e-8, 1 − 1e-8]) is ignored.
    """
    z, out_dtype, gamma_pos, gamma_neg, margin = _recovery_inputs(probs, gamma_pos, gamma_neg, margin)
    q = torch.clamp(z - margin, min=0.0)
    with torch.no_grad():
        log_q_power = torch.zeros_like(q) if gamma_neg == 0.0 else gamma_neg * torch.log(q)
        log_a = log_q_power + torch.log(z) - torch.log1p(-q)
        if margin > 0:
            log_a = torch.where(q > 0, log_a, torch.full_like(q, -math.inf))
        log_b = torch.zeros_like(z) if gamma_pos == 0.0 else gamma_pos * torch.log1p(-z)
        out = torch.sigmoid(log_a - log_b)
    return out.to(out_dtype)


# ------------------------------------------------------------------------------------------------------------- SPA
class SPA(_ElementwiseLoss):
    """Strictly Proper Asymmetric loss: composite partial losses of eq. (16) with the inverse link they imply.

        ℓ₊(v) = softplus(−k⁺(v − b⁺)) / ζ⁺,      ℓ₋(v) = softplus(k⁻(v − b⁻)) / ζ⁻          (eq. 16)

    Inverse link, derived from the first-order condition of C(η, v) = η ℓ₊(v) + (1 − η) ℓ₋(v):
    ℓ₊'(v) = −(k⁺/ζ⁺) σ(−k⁺(v − b⁺)), ℓ₋'(v) = (k⁻/ζ⁻) σ(k⁻(v − b⁻)), so η*(v) = ℓ₋' / (ℓ₋' − ℓ₊'):

        η̂(v) = (k⁻/ζ⁻) σ(k⁻(v − b⁻)) / [(k⁻/ζ⁻) σ(k⁻(v − b⁻)) + (k⁺/ζ⁺) σ(−k⁺(v − b⁺))].

    The text copy of eq. (17) has the two sigmoid arguments with the opposite signs (σ(−k⁻(v − b⁻)) over
    σ(k⁺(v − b⁺))); that function DEcreases with v and equals 1 − σ(v) at (1, 1, 0, 1, 1, 0), so it cannot be
    the link (it is kept as :func:`spa_link_as_printed` for the notebook). See docs/spa_link_derivation.md.

    Validity (Theorem 3, re-derived): with ζ± > 0 and k± > 0 the numerator increases and the second denominator
    term decreases in v, so η̂ is a strictly increasing bijection R → (0, 1), the risk derivative changes sign
    exactly once, and C(η, ·) is uniquely minimised at η̂⁻¹(η): strictly proper for every finite b⁺, b⁻.
    k ≤ 0 makes a partial loss constant or point the wrong way and ζ ≤ 0 turns the risk into a maximisation,
    so those raise ``ValueError``. (1, 1, 0, 1, 1, 0) is BCE with the sigmoid link; the paper's default is
    (1, 1, 0, 5, 3, 1). ``predict_proba`` is computed in log space (no 0/0 at logits ±1e4).
    """

    def __init__(
        self,
        zeta_pos: float = 1.0,
        k_pos: float = 1.0,
        b_pos: float = 0.0,
        zeta_neg: float = 5.0,
        k_neg: float = 3.0,
        b_neg: float = 1.0,
    ):
        super().__init__()
        why_zeta = "ζ scales a partial loss; ζ <= 0 flips or removes it and the loss is no longer proper"
        why_k = "k is the slope of a partial loss in the logit; k <= 0 makes it constant or point the wrong way"
        self.zeta_pos = check_number("zeta_pos", zeta_pos, 0.0, low_open=True, why=why_zeta)
        self.zeta_neg = check_number("zeta_neg", zeta_neg, 0.0, low_open=True, why=why_zeta)
        self.k_pos = check_number("k_pos", k_pos, 0.0, low_open=True, why=why_k)
        self.k_neg = check_number("k_neg", k_neg, 0.0, low_open=True, why=why_k)
        self.b_pos = check_number("b_pos", b_pos)
        self.b_neg = check_number("b_neg", b_neg)

    def partial_losses(self, logits):
        loss_pos = F.softplus(-self.k_pos * (logits - self.b_pos)) / self.zeta_pos
        loss_neg = F.softplus(self.k_neg * (logits - self.b_neg)) / self.zeta_neg
        return loss_pos, loss_neg

    def _log_link_terms(self, logits):
        """(log ℓ₋'(v), log(−ℓ₊'(v))): the two positive terms whose normalised first one is the link."""
        log_neg = math.log(self.k_neg / self.zeta_neg) + F.logsigmoid(self.k_neg * (logits - self.b_neg))
        log_pos = math.log(self.k_pos / self.zeta_pos) + F.logsigmoid(-self.k_pos * (logits - self.b_pos))
        return log_neg, log_pos

    def predict_log_proba(self, logits: torch.Tensor) -> torch.Tensor:
        """log η̂(v) of the derived inverse link (log space; −∞ never occurs for finite logits up to ±1e4)."""
        logits = prediction_logits(logits)
        with no_autocast(logits):
            log_neg, log_pos = self._log_link_terms(promote_float(logits))
            return log_neg - torch.logaddexp(log_neg, log_pos)

    def predict_logit(self, logits: torch.Tensor) -> torch.Tensor:
        """logit η̂(v) = log ℓ₋'(v) − log(−ℓ₊'(v)), in log space (finite where η̂ rounds to 0 or 1): the scale on
        which temperature scaling rescales SPA's probabilities (notebook 13's fair contest)."""
        logits = prediction_logits(logits)
        with no_autocast(logits):
            log_neg, log_pos = self._log_link_terms(promote_float(logits))
            return log_neg - log_pos

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        """η̂(v), the inverse link; equals σ(log ℓ₋'(v) − log(−ℓ₊'(v))), a sigmoid of a log-ratio."""
        logits = prediction_logits(logits)
        with no_autocast(logits):
            log_neg, log_pos = self._log_link_terms(promote_float(logits))
            return torch.sigmoid(log_neg - log_pos)

    def extra_repr(self) -> str:
        return (
            f"zeta_pos={self.zeta_pos}, k_pos={self.k_pos}, b_pos={self.b_pos}, "
            f"zeta_neg={self.zeta_neg}, k_neg={self.k_neg}, b_neg={self.b_neg}"
        )


def spa_link_as_printed(
    logits: torch.Tensor,
    zeta_pos: float = 1.0,
    k_pos: float = 1.0,
    b_pos: float = 0.0,
    zeta_neg: float = 5.0,
    k_neg: float = 3.0,
    b_neg: float = 1.0,
) -> torch.Tensor:
    """Eq. (17) exactly as it reads in the text copy — NOT a valid link; for the notebook's comparison only.

        (k⁻/ζ⁻) σ(−k⁻(v − b⁻)) / [(k⁻/ζ⁻) σ(−k⁻(v − b⁻)) + (k⁺/ζ⁺) σ(k⁺(v − b⁺))]

    It decreases with v and is 1 − σ(v) at (1, 1, 0, 1, 1, 0); :meth:`SPA.predict_proba` is the derived link.
    """
    logits = promote_float(as_tensor(logits))
    log_a = math.log(k_neg / zeta_neg) + F.logsigmoid(-k_neg * (logits - b_neg))
    log_b = math.log(k_pos / zeta_pos) + F.logsigmoid(k_pos * (logits - b_pos))
    return torch.sigmoid(log_a - log_b)


# ------------------------------------------------------------------------------------------------------------- LPR
class LPR(nn.Module):
    """Label Pair Regulariser (eqs. 19–20), called ``LPR()(probs, targets)`` on a base loss's probabilities.

    For labels t ≠ t' with different values, β̂^{tt'} = η̂_t (1 − η̂_t') / [η̂_t (1 − η̂_t') + η̂_t' (1 − η̂_t)]
    (eq. 19) is the model's probability that t is the positive one. With odds u = η̂ / (1 − η̂) and
    ℓ = logit η̂, −log β̂^{tt'} = log(1 + u_t' / u_t) = softplus(ℓ_t' − ℓ_t), and per example (eq. 20)

        L_LPR = 2 / (T(T − 1)) · Σ_{t: y_t = 1} Σ_{t': y_t' = 0} softplus(ℓ_t' − ℓ_t),

    averaged over the batch. Vectorised over all pairs at once: one row of T partners per positive label
    (K positives -> a (K, T) block; partners with y = 1 get ℓ = −∞, so their softplus and its gradient are 0),
    so the cost grows with the number of positives rather than with N·T². Fused (see :class:`_LPRFunction`):
    the forward pass also forms the gradient, ∂/∂ℓ_t' = σ(ℓ_t' − ℓ_t) = −∂/∂ℓ_t, and ∂ℓ/∂η̂ = 1 / (η̂(1 − η̂)).

    Compose with any base loss via ``Composite(base, [(λ, LPR())])`` (eq. 21, Table 4); it regularises whatever
    ``base.predict_proba`` returns (SPA's link, LDACE's p², ...). Under label independence (Assumption 1) the
    pairwise risk P(10)(−log β̂) + P(01)(−log(1 − β̂)) is minimised by β̂ = β (eq. 18), which η̂ = η already
    gives, so base + λ·LPR stays strictly proper; with dependent labels β differs from its plug-in value and LPR
    pulls the marginals (``helpers.losses.joint_risk_minimiser`` shows both). Probabilities exactly 0 or 1
    (float saturation) are evaluated at the nearest representable value inside (0, 1) — the smallest normal
    float and 1 − eps/2 — value and gradient alike (the gradient there is finite; a saturated sigmoid upstream
    multiplies it by 0). T = 1 has no pairs and gives 0.
    """

    task = MULTI_LABEL

    def forward(self, probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        probs, targets = check_probability_inputs(probs, targets)
        return self.penalty(probs, targets)

    def penalty(self, probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The regulariser without the input checks (``Composite`` calls this on checked inputs)."""
        with no_autocast(probs):
            probs = promote_float(probs)
            needs_grad = probs.requires_grad and torch.is_grad_enabled()
            return _LPRFunction.apply(probs, targets.to(probs.dtype), needs_grad)


class _LPRFunction(torch.autograd.Function):
    """LPR's value and its gradient with respect to the probabilities in one pass (one autograd node)."""

    @staticmethod
    def forward(ctx, probs: torch.Tensor, targets: torch.Tensor, needs_grad: bool) -> torch.Tensor:
        n, t = probs.shape
        positive = targets.bool()
        flat = positive.view(-1).nonzero().squeeze(1)  # positive entries, row-major
        if t < 2 or flat.numel() == 0:
            ctx.save_for_backward(torch.zeros_like(probs) if needs_grad else None)
            return probs.new_zeros(())
        info = torch.finfo(probs.dtype)
        p = probs.clamp(min=info.tiny, max=1.0 - info.eps / 2)
        logit = torch.logit(p)
        rows = flat.div(t, rounding_mode="floor")
        partner_logit = logit.masked_fill(positive, -math.inf).index_select(0, rows)  # (K, T), −∞ at positives
        difference = partner_logit - logit.view(-1).index_select(0, flat).unsqueeze(1)  # ℓ_t' − ℓ_t
        scale = 2.0 / (t * (t - 1) * n)
        value = F.softplus(difference).sum() * scale
        grad = None
        if needs_grad:
            weight = torch.sigmoid(difference)
            grad_logit = torch.zeros_like(p).index_add_(0, rows, weight)
            grad_logit.view(-1).index_add_(0, flat, weight.sum(1), alpha=-1.0)
            grad = grad_logit.div_(p * (1.0 - p)).mul_(scale)
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None
