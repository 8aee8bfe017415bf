"""Multi-class calibration losses: CE, label smoothing, focal / FLSD-53, MbLS, LS+, DCA, MDCA.

Every loss takes ``(logits (N, K), target (N,) int64)`` and returns the MEAN over the batch. Where a reference
implementation sums over the batch (Mukhoti et al.'s focal code), the mean only rescales the learning rate by
the batch size; this is said at the class. Logits in float16/bfloat16 (autocast) are promoted to float32 before
any arithmetic; float64 stays float64 so that ``torch.autograd.gradcheck`` can run. Log-probabilities always come
from ``log_softmax`` (never ``log(softmax)``), which keeps value and gradient finite for logits up to ±1e4.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from helpers.losses.base import (
    Composite,
    MultiClassLoss,
    as_tensor,
    check_class_columns,
    check_class_targets,
    check_multiclass_inputs,
    check_number,
    prediction_logits,
    promote_float,
)

__all__ = [
    "CrossEntropy",
    "LabelSmoothing",
    "FocalLoss",
    "FLSD53",
    "MbLS",
    "LSPlus",
    "lsplus_soft_targets",
    "class_accuracy_from_predictions",
    "class_frequencies",
    "DCARegulariser",
    "MDCARegulariser",
    "DCA",
    "MDCA",
]


def _target_log_probs(log_probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return log_probs.gather(1, target.unsqueeze(1)).squeeze(1)


class _SoftmaxLoss(MultiClassLoss):
    """MultiClassLoss whose softmax keeps float64 (for gradcheck); low precision still goes to float32."""

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        logits = prediction_logits(logits)  # softmax of an infinite logit is a NaN row
        check_class_columns(logits)
        return torch.softmax(promote_float(logits), dim=-1)


class CrossEntropy(_SoftmaxLoss):
    """Cross-entropy ``-log softmax(z)_y`` averaged over the batch (the baseline every other loss reduces to)."""

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = check_multiclass_inputs(logits, target)
        return F.cross_entropy(promote_float(logits), target)


class LabelSmoothing(_SoftmaxLoss):
    """Label smoothing (Szegedy et al. 2016) towards a uniform or a-priori class prior.

    The target ``y' = (1 - α)·onehot(y) + α·u`` replaces the one-hot label, so (LS+ paper eq. 1)

        LS = H(y', p) = (1 - α)·CE(y, p) + α·CE(u, p).

    Since ``CE(u, p) = KL(u ‖ p) + H(u)`` and ``H(u)`` does not depend on the model (LS+ paper eq. 2),

        LS = (1 - α)·CE(y, p) + α·KL(u ‖ p) + α·H(u),

    i.e. cross-entropy down-weighted by ``1 - α`` plus a pull of every prediction towards the prior. (Note the
    ``1 - α`` on CE: it is *not* ``CE + α·KL`` up to a constant.) With ``prior=None`` ``u`` is uniform and this
    equals ``F.cross_entropy(..., label_smoothing=α)``; passing the training-set class frequencies gives the
    "a priori" LSR of CCL-Net Table 1 (LSR-a; see :func:`class_frequencies`). CCL-Net writes the weight as ε.
    The value returned is ``H(y', p)`` (the form with the constant). Conventions of the authors' code the course
    compares with: the MDCA repository (mdca-loss/MDCA-Calibration, ``solvers/loss.py``, ``LabelSmoothingLoss``)
    gives the true class 1 − α′ and each other class α′/(K − 1), the same target as here when
    α = α′K/(K − 1) (same value then); the LS+ repository (abhisheksambyal/lsplus, ``distiller.py``, method
    ``LS``) returns (1 − α)·CE + α·KL(u ‖ p), the same α and gradient but a value lower by α·H(u) = α log K.
    """

    def __init__(self, alpha: float, prior: Sequence[float] | torch.Tensor | None = None):
        super().__init__()
        self.alpha = check_number("alpha", alpha, 0.0, 1.0)
        if prior is None:
            self.register_buffer("prior", None)
        else:
            prior_t = torch.as_tensor(prior, dtype=torch.float64).detach().clone()
            if prior_t.ndim != 1 or prior_t.numel() < 2:
                raise ValueError(
                    f"prior must be a 1-D probability vector of length K >= 2, got shape {tuple(prior_t.shape)}"
                )
            if not bool(torch.isfinite(prior_t).all()) or bool((prior_t < 0).any()):
                raise ValueError(f"prior must hold finite non-negative probabilities, got {prior_t.tolist()}")
            if abs(float(prior_t.sum()) - 1.0) > 1e-5:
                raise ValueError(
                    f"prior must sum to 1 (got {float(prior_t.sum()):.6g}); "
                    "normalise it first, e.g. prior / prior.sum()"
                )
            self.register_buffer("prior", prior_t.float())

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = check_multiclass_inputs(logits, target)
        logits = promote_float(logits)
        log_probs = F.log_softmax(logits, dim=1)
        ce = -_target_log_probs(log_probs, target)
        if self.prior is None:
            ce_prior = -log_probs.mean(dim=1)
        else:
            if self.prior.numel() != logits.shape[1]:
                raise ValueError(f"prior has {self.prior.numel()} classes but logits have {logits.shape[1]}")
            ce_prior = -(log_probs * self.prior.to(log_probs)).sum(dim=1)
        return ((1.0 - self.alpha) * ce + self.alpha * ce_prior).mean()

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}, prior={'uniform' if self.prior is None else self.prior.tolist()}"


def _focal_terms(log_pt: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
    """``-(1 - p_t)^γ log p_t`` computed from ``log p_t`` (Lin et al. 2017; Mukhoti et al. 2020 eq. 1).

    ``1 - p_t = -expm1(log p_t)`` keeps its relative precision as p_t -> 1. When p_t rounds to exactly 1 the
    base is floored at the smallest normal float so that ``d/dx x^γ`` stays finite for 0 < γ < 1; the term it
    multiplies, ``-log p_t``, is then exactly 0, so neither value nor gradient changes.
    """
    one_minus_pt = (-torch.expm1(log_pt)).clamp_min(torch.finfo(log_pt.dtype).tiny)
    return -torch.pow(one_minus_pt, gamma) * log_pt


class FocalLoss(_SoftmaxLoss):
    """Focal loss ``-(1 - p_t)^γ log p_t`` (Lin et al. 2017), the calibration view of Mukhoti et al. 2020.

    Mukhoti et al. (eq. 2-3) show focal loss upper-bounds ``KL(q ‖ p) - γ·H(p)``: cross-entropy plus an
    entropy bonus that keeps predictions away from one-hot. γ = 0 is cross-entropy. The reference code
    (torrvision/focal_calibration) sums over the batch by default; this class takes the mean.
    """

    def __init__(self, gamma: float):
        super().__init__()
        self.gamma = check_number("gamma", gamma, 0.0)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = check_multiclass_inputs(logits, target)
        log_pt = _target_log_probs(F.log_softmax(promote_float(logits), dim=1), target)
        return _focal_terms(log_pt, self.gamma).mean()

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}"


class FLSD53(_SoftmaxLoss):
    """Sample-dependent focal loss FLSD-53 (Mukhoti et al. 2020): γ = 5 if p_t < 0.2, else γ = 3.

    γ is chosen per sample from p_t, detached as the reference code does with ``.item()`` (p_t = 0.2 exactly gets
    γ = 3). Detaching changes no gradient: γ(p_t) is piecewise constant, so its jump at 0.2 is invisible to any
    gradient, and autograd differentiates the focal term with each side's fixed γ. Mean over the batch (the
    reference sums).
    """

    threshold = 0.2
    gamma_low_pt = 5.0
    gamma_high_pt = 3.0

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = check_multiclass_inputs(logits, target)
        log_pt = _target_log_probs(F.log_softmax(promote_float(logits), dim=1), target)
        gamma = self.sample_gamma(log_pt.detach())
        return _focal_terms(log_pt, gamma).mean()

    def sample_gamma(self, log_pt: torch.Tensor) -> torch.Tensor:
        """Per-sample γ from log p_t (compared in log space so the switch is exact at p_t = 0.2)."""
        low = torch.full_like(log_pt, self.gamma_low_pt)
        high = torch.full_like(log_pt, self.gamma_high_pt)
        return torch.where(log_pt < math.log(self.threshold), low, high)


class MbLS(_SoftmaxLoss):
    """Margin-based label smoothing (Liu et al., CVPR 2022): CE + λ·mean ReLU(max_j z_j − z_k − m).

    Label smoothing and focal loss both act as penalties pushing every logit distance d_k = max_j z_j − z_k
    towards 0 (an equality constraint); MbLS relaxes it to the inequality d_k ≤ m with a linear penalty. As in
    the authors' code for this paper (by-liu/MbLS, ``calibrate/losses/logit_margin_l1.py``, ``LogitMarginL1``;
    Bala93/MarginLoss is the later repository of the segmentation follow-ups) the penalty is averaged over all N×K
    entries (the k = argmax entry contributes ReLU(−m) = 0 but still counts in the denominator), and the
    gradient flows through the max as well. Defaults m = 10, λ = 0.1 (the paper's and that code's; its optional
    schedule of λ, off by default and unused in the paper, is not offered).
    """

    def __init__(self, margin: float = 10.0, lam: float = 0.1):
        super().__init__()
        self.margin = check_number("margin", margin, 0.0)
        self.lam = check_number("lam", lam, 0.0)

    @staticmethod
    def logit_distances(logits: torch.Tensor) -> torch.Tensor:
        """d_k = max_j z_j − z_k, shape (N, K), non-negative."""
        logits = promote_float(logits)
        return logits.max(dim=1, keepdim=True).values - logits

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = check_multiclass_inputs(logits, target)
        logits = promote_float(logits)
        ce = F.cross_entropy(logits, target)
        if self.lam == 0.0:
            return ce
        penalty = F.relu(self.logit_distances(logits) - self.margin).mean()
        return ce + self.lam * penalty

    def extra_repr(self) -> str:
        return f"margin={self.margin}, lam={self.lam}"


# ----------------------------------------------------------------------------------------------------------
# LS+ (Sambyal et al., MICCAI 2024)
# ----------------------------------------------------------------------------------------------------------


def lsplus_soft_targets(
    class_accuracy: Sequence[float] | torch.Tensor, min_accuracy: float | None = None
) -> torch.Tensor:
    """Informed priors of LS+ eq. (3): row k is v^k with v^k_k = c_k and v^k_j = (1 − c_k)/(K − 1) otherwise.

    ``min_accuracy`` (default ``1/K``, chance level) floors c_k before eq. (3) is applied. Below 1/K eq. (3)
    alone ranks the true class *last* in v^k (at c_k = 0 its entry is 0). The full LS+ loss does not train
    towards a wrong class, though: its minimiser for a class-k image is the mixture (1 − α)·e_k + α·v^k, which
    gives the true class (1 − α) + α·c_k against α(1 − c_k)/(K − 1) for each other class (K = 7, α = 0.5,
    c_k = 0: 0.5 against 0.083); at c_k = 0 the true class loses its top rank only if α > (K − 1)/K. The floor
    is a library choice that departs from eq. (3) (the paper does not discuss the case): such a class gets the
    uniform v^k instead (mixture target 0.571 against 0.071 for K = 7, α = 0.5).
    Flooring is announced with a ``UserWarning``; pass ``min_accuracy=0.0`` to apply eq. (3) literally.
    A class accuracy of exactly 1 gives a one-hot v^k, for which KL(v^k ‖ p) = CE (allowed, no special case).
    Returns a float32 (K, K) tensor.
    """
    acc = torch.as_tensor(class_accuracy, dtype=torch.float64).detach().clone().cpu()
    if acc.ndim != 1 or acc.numel() < 2:
        raise ValueError(
            f"class_accuracy must be a 1-D vector with one accuracy per class (K >= 2), got shape {tuple(acc.shape)}"
        )
    if not bool(torch.isfinite(acc).all()):
        raise ValueError(
            "class_accuracy contains NaN/inf — a class may be absent from the validation set; "
            "see class_accuracy_from_predictions(..., fill_missing=...)"
        )
    if bool((acc < 0).any()) or bool((acc > 1).any()):
        raise ValueError(f"class accuracies must lie in [0, 1], got {acc.tolist()}")
    num_classes = acc.numel()
    floor = 1.0 / num_classes if min_accuracy is None else check_number("min_accuracy", min_accuracy, 0.0, 1.0)
    below = acc < floor
    if bool(below.any()):
        # in words and without the accuracies, so the same classes warn once per session (issue 28, item 3)
        classes = below.nonzero().flatten().tolist()
        named = ("class " if len(classes) == 1 else "classes ") + ", ".join(map(str, classes))
        level = f"chance (1/{num_classes})" if min_accuracy is None else f"the floor {floor:.3g}"
        warnings.warn(
            f"LS+: {named} of {num_classes} scored below {level} on the validation set; the target accuracy is "
            "raised to it, so the target is at least uniform (a departure from eq. 3; min_accuracy=0 keeps eq. 3).",
            UserWarning,
            stacklevel=2,
        )
        acc = acc.clamp_min(floor)
    off_diagonal = ((1.0 - acc) / (num_classes - 1)).unsqueeze(1).expand(num_classes, num_classes)
    eye = torch.eye(num_classes, dtype=torch.bool)
    return torch.where(eye, acc.unsqueeze(1).expand(num_classes, num_classes), off_diagonal).float()


class LSPlus(_SoftmaxLoss):
    """LS+ informed label smoothing (Sambyal et al., MICCAI 2024, eq. 3 and Algorithm 1 line 7):

        L = (1 − α)·CE(y, p̂) + α·KL(v^k ‖ p̂),   k = the sample's true class,

    with v^k from :func:`lsplus_soft_targets` (c_k = validation accuracy of class k of a plain cross-entropy
    model, Algorithm 1 line 2 — see :func:`helpers.training.class_accuracy_from_model`). The KL uses
    0·log 0 = 0, so a class with c_k = 1 contributes KL(onehot ‖ p̂) = CE and an all-ones accuracy vector gives
    exactly cross-entropy. The authors' code does not use c_k = 1: in ``d3_skin_code/distiller.py`` (method
    ``ours_alpha05``) the classes whose validation accuracy was 1 are given c_k = 1/K = 0.1428 by hand, "because
    using 1 we will end up having one hot encoded label" — a uniform v^k; pass such values in ``class_accuracy``
    to follow them. That code also uses Keras' ``KLDivergence``, which clips both distributions to [1e-7, 1].
    Classes below ``min_accuracy`` (default 1/K) are floored, with a warning (see :func:`lsplus_soft_targets`).
    The paper uses α = 0.5. Mean over the batch.
    """

    def __init__(
        self, class_accuracy: Sequence[float] | torch.Tensor, alpha: float = 0.5, min_accuracy: float | None = None
    ):
        super().__init__()
        self.alpha = check_number("alpha", alpha, 0.0, 1.0)
        self.register_buffer("soft_targets", lsplus_soft_targets(class_accuracy, min_accuracy))

    @property
    def num_classes(self) -> int:
        return self.soft_targets.shape[0]

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = check_multiclass_inputs(logits, target)
        if logits.shape[1] != self.num_classes:
            raise ValueError(f"LSPlus was built for {self.num_classes} classes, logits have {logits.shape[1]}")
        logits = promote_float(logits)
        log_probs = F.log_softmax(logits, dim=1)
        v = self.soft_targets.to(log_probs)[target]
        ce = -_target_log_probs(log_probs, target)
        kl = (torch.xlogy(v, v) - v * log_probs).sum(dim=1)
        return ((1.0 - self.alpha) * ce + self.alpha * kl).mean()

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}, class_accuracy={self.soft_targets.diagonal().tolist()}"


def class_accuracy_from_predictions(
    probs_or_preds: torch.Tensor, labels: torch.Tensor, num_classes: int, fill_missing: float | None = None
) -> torch.Tensor:
    """Per-class accuracy (recall) c_k = #{i: y_i = k, ŷ_i = k} / #{i: y_i = k} — LS+ Algorithm 1 line 2.

    ``probs_or_preds``: (N, K) probabilities/logits (arg-max taken) or (N,) integer predictions. A class with no
    validation sample has no accuracy: by default this raises; ``fill_missing`` (e.g. ``1/num_classes``) sets
    its value explicitly instead. Returns float32 (K,) on the input's device.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    probs_or_preds = as_tensor(probs_or_preds, "probs_or_preds")
    if probs_or_preds.ndim == 2:
        if probs_or_preds.shape[1] != num_classes:
            raise ValueError(f"probabilities have {probs_or_preds.shape[1]} columns but num_classes={num_classes}")
        preds = probs_or_preds.argmax(dim=1)
    elif probs_or_preds.ndim == 1 and not probs_or_preds.dtype.is_floating_point:
        preds = probs_or_preds.long()
    else:
        raise ValueError(
            "probs_or_preds must be (N, K) probabilities or (N,) integer predictions, got "
            f"shape {tuple(probs_or_preds.shape)} dtype {probs_or_preds.dtype}"
        )
    labels = torch.as_tensor(labels, device=preds.device)
    labels = check_class_targets(labels, num_classes, preds.shape[0])
    if preds.numel() and (int(preds.min()) < 0 or int(preds.max()) >= num_classes):
        raise ValueError(f"predictions must lie in [0, {num_classes - 1}]")
    counts = torch.bincount(labels, minlength=num_classes).float()
    hits = torch.bincount(labels[preds == labels], minlength=num_classes).float()
    missing = counts == 0
    if bool(missing.any()):
        if fill_missing is None:
            raise ValueError(
                f"classes {missing.nonzero().flatten().tolist()} have no validation sample, so their "
                "accuracy is undefined; use a larger validation split or pass fill_missing "
                "(e.g. 1/num_classes) to set it explicitly"
            )
        fill = check_number("fill_missing", fill_missing, 0.0, 1.0)
        return torch.where(missing, torch.full_like(counts, fill), hits / counts.clamp_min(1.0))
    return hits / counts


def class_frequencies(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Empirical class prior (training-set frequencies), the "a priori" u(k) of CCL-Net's LSR-a setting."""
    labels = torch.as_tensor(labels)
    labels = check_class_targets(labels, num_classes)
    if labels.numel() == 0:
        raise ValueError("labels is empty; class frequencies need at least one label")
    counts = torch.bincount(labels, minlength=num_classes).float()
    return counts / counts.sum()


# ----------------------------------------------------------------------------------------------------------
# DCA / MDCA auxiliary terms
# ----------------------------------------------------------------------------------------------------------


class _ProbabilityRegulariser(nn.Module):
    """A term ``reg(probs, target)`` on a multi-class loss's probabilities: ``forward`` checks the inputs and
    calls ``penalty``, which ``Composite`` calls directly on inputs the base loss has already checked."""

    def forward(self, probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        probs, target = check_multiclass_inputs(probs, target, name="probs")
        return self.penalty(probs, target)

    def penalty(self, probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class DCARegulariser(_ProbabilityRegulariser):
    """DCA term (Liang et al., BMVC 2020): ``|mean_i max_k p_ik − mean_i 1[argmax_k p_ik = y_i]|``.

    Called as ``reg(probs, target)`` on probabilities, WITHOUT its weight β (Composite or :class:`DCA` applies
    it). The accuracy is a constant for differentiation; the gradient flows through the mean confidence.
    """

    def penalty(self, probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        probs = promote_float(probs)
        confidence, predicted = probs.max(dim=1)
        accuracy = (predicted == target).to(probs.dtype).mean()
        return (confidence.mean() - accuracy).abs()


class MDCARegulariser(_ProbabilityRegulariser):
    """MDCA term (Hebbalaguppe et al., CVPR 2022): (1/K) Σ_k ``|mean_i p_ik − mean_i 1[y_i = k]|``.

    Called as ``reg(probs, target)`` on probabilities, WITHOUT its weight β.
    """

    def penalty(self, probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        probs = promote_float(probs)
        frequency = F.one_hot(target.long(), probs.shape[1]).to(probs.dtype).mean(dim=0)
        return (probs.mean(dim=0) - frequency).abs().mean()


class _AuxiliaryCalibrationLoss(Composite, MultiClassLoss):
    """``base(logits, target) + β·term(base.predict_proba(logits), target)``: a :class:`Composite` with one
    regulariser and a multi-class base (default cross-entropy); β = 0 gives exactly ``base``."""

    def __init__(self, term: nn.Module, beta: float, base: nn.Module | None):
        if base is None:
            base = CrossEntropy()
        if getattr(base, "task", None) != MultiClassLoss.task:
            raise TypeError(f"base must be a multi-class loss (task 'multi-class'), got {type(base).__name__}")
        super().__init__(base, [(check_number("beta", beta, 0.0), term)])

    @property
    def beta(self) -> float:
        return self.weights[0]


class DCA(_AuxiliaryCalibrationLoss):
    """Loss = base (default cross-entropy) + β·DCA (Liang et al., BMVC 2020). See :class:`DCARegulariser`."""

    def __init__(self, beta: float = 1.0, base: nn.Module | None = None):
        super().__init__(DCARegulariser(), beta, base)


class MDCA(_AuxiliaryCalibrationLoss):
    """Loss = base (default cross-entropy) + β·MDCA (Hebbalaguppe et al., CVPR 2022). See :class:`MDCARegulariser`.

    The paper combines MDCA with CE, NLL+LS or focal loss; pass any multi-class loss as ``base``.
    """

    def __init__(self, beta: float = 1.0, base: nn.Module | None = None):
        super().__init__(MDCARegulariser(), beta, base)
