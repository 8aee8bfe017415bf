"""Strict properness, measured: numerical minimisers of the conditional risk of multi-label losses.

Cheng & Vasconcelos (CVPR 2024), eq. (11) and Definition 1: a per-label loss with partial losses ℓ₊, ℓ₋ is
strictly proper when the conditional risk C(η, v) = η ℓ₊(v) + (1 − η) ℓ₋(v) is uniquely minimised, for every η,
at a score v* whose probability estimate ``loss.predict_proba(v*)`` equals η. :func:`conditional_risk_minimiser`
finds v* numerically (dense grid, then vectorised golden-section refinement, float64) for a whole grid of η at
once and returns the loss's own estimate there: the identity for BCE and SPA, not for focal or ASL (whose
minimiser φ maps back, eqs. 13–15).

Losses that couple labels (LPR, LDACE, CCL) have no per-label conditional risk. For them
:func:`joint_risk_minimiser` minimises the expected loss over the whole label vector, E_y[loss(v, y)], for a
given distribution of y over {0, 1}^T (small T), e.g. independent labels from :func:`independent_label_distribution`.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from helpers.losses.base import Composite

__all__ = [
    "RiskMinimum",
    "JointRiskMinimum",
    "partial_losses",
    "conditional_risk",
    "conditional_risk_minimiser",
    "independent_label_distribution",
    "joint_risk_minimiser",
]

_INV_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class RiskMinimum(NamedTuple):
    """Result of :func:`conditional_risk_minimiser`, one entry per η (all float64, shape (G,))."""

    eta: torch.Tensor
    logits: torch.Tensor  # the minimising score v*(η)
    proba: torch.Tensor  # loss.predict_proba(v*): equals eta for a strictly proper loss
    at_boundary: torch.Tensor  # bool: v* is at an end of the searched range (the infimum may lie beyond it)


class JointRiskMinimum(NamedTuple):
    """Result of :func:`joint_risk_minimiser` (float64): minimising logits (T,), their probabilities, the risk."""

    logits: torch.Tensor
    proba: torch.Tensor
    risk: float


def partial_losses(loss: nn.Module, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Elementwise (ℓ₊(v), ℓ₋(v)) of a per-label multi-label loss, same shape as ``logits``.

    Uses ``loss.partial_losses(logits)`` where the loss defines it (every per-element loss in
    ``helpers.losses.multilabel``). Otherwise each logit is evaluated as its own one-label batch, ``loss(v (1, 1),
    target (1, 1))``, vectorised with ``torch.func.vmap``; for a pairwise loss such as LDACE this is its T = 1
    special case. ``Composite`` losses are refused: their regularisers couple labels or examples, so they have no
    per-label partial losses (use :func:`joint_risk_minimiser`).
    """
    if isinstance(loss, Composite):
        raise TypeError(
            "a Composite loss (base + regularisers on label pairs or batch statistics) has no per-label "
            "partial losses; use joint_risk_minimiser, or pass its .base"
        )
    if hasattr(loss, "partial_losses"):
        return loss.partial_losses(logits)
    flat = logits.reshape(-1, 1, 1)

    def per_logit(target_value: float) -> torch.Tensor:
        target = torch.full((1, 1), target_value, dtype=logits.dtype, device=logits.device)
        return torch.func.vmap(lambda v: loss(v, target))(flat).reshape(logits.shape)

    try:
        return per_logit(1.0), per_logit(0.0)
    except RuntimeError as error:
        raise TypeError(
            f"{type(loss).__name__} defines no partial_losses(logits) and cannot be evaluated per "
            f"logit with torch.func.vmap ({error}); add a partial_losses method"
        ) from error


def _as_eta(eta) -> torch.Tensor:
    eta = torch.as_tensor(eta, dtype=torch.float64).reshape(-1)
    if eta.numel() == 0 or not bool(((eta >= 0) & (eta <= 1)).all()):
        raise ValueError("eta must be a non-empty set of probabilities in [0, 1]")
    return eta


def conditional_risk(loss: nn.Module, eta, logits) -> torch.Tensor:
    """C(η, v) = η ℓ₊(v) + (1 − η) ℓ₋(v) (eq. 11) for every (η, v) pair: shape (len(eta), len(logits)), float64."""
    eta = _as_eta(eta)
    logits = torch.as_tensor(logits, dtype=torch.float64).reshape(-1)
    with torch.no_grad():
        loss_pos, loss_neg = partial_losses(loss, logits.reshape(-1, 1))
    loss_pos, loss_neg = loss_pos.reshape(1, -1).double(), loss_neg.reshape(1, -1).double()
    return eta.unsqueeze(1) * loss_pos + (1.0 - eta.unsqueeze(1)) * loss_neg


def conditional_risk_minimiser(
    loss: nn.Module,
    eta,
    logit_range: tuple[float, float] = (-40.0, 40.0),
    grid_size: int = 4001,
    refine_steps: int = 60,
) -> RiskMinimum:
    """Minimise C(η, v) over the logit v for every η at once and return the loss's estimate at the minimiser.

    A dense grid of ``grid_size`` logits over ``logit_range`` locates the global minimum (robust to flat or
    non-convex risks such as ASL's), then ``refine_steps`` golden-section steps inside the neighbouring grid
    cells shrink the bracket by 0.618 each (60 steps: from 0.04 to below 1e-13, i.e. float64 resolution).
    Ties (flat risk) resolve to the smallest logit. For η = 0 or 1 (and for ASL's saturated η, see
    ``phi_recovery``) the infimum lies at ∓∞: such entries are marked ``at_boundary`` (the risk at an end of the
    range is no larger than at v*), and their ``logits`` / ``proba`` only say "as far as the range goes".
    """
    eta = _as_eta(eta)
    low, high = (float(x) for x in logit_range)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"logit_range must be two finite numbers low < high, got {logit_range!r}")
    if grid_size < 3:
        raise ValueError(f"grid_size must be at least 3, got {grid_size}")
    grid = torch.linspace(low, high, grid_size, dtype=torch.float64)
    index = conditional_risk(loss, eta, grid).argmin(dim=1)
    a = grid[(index - 1).clamp(min=0)]
    b = grid[(index + 1).clamp(max=grid_size - 1)]

    one_eta = eta.reshape(-1, 1)

    def risk_at(v: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            loss_pos, loss_neg = partial_losses(loss, v.reshape(-1, 1))
        return (one_eta * loss_pos.double() + (1.0 - one_eta) * loss_neg.double()).reshape(-1)

    c = b - _INV_GOLDEN * (b - a)
    d = a + _INV_GOLDEN * (b - a)
    fc, fd = risk_at(c), risk_at(d)
    for _ in range(refine_steps):
        left = fc <= fd  # the minimum lies in [a, d]
        a, b = torch.where(left, a, c), torch.where(left, d, b)
        new = torch.where(left, b - _INV_GOLDEN * (b - a), a + _INV_GOLDEN * (b - a))
        f_new = risk_at(new)
        c, d, fc, fd = (
            torch.where(left, new, d),
            torch.where(left, c, new),
            torch.where(left, f_new, fd),
            torch.where(left, fc, f_new),
        )
    best = torch.where(fc <= fd, c, d)
    # keep the grid point if refinement did not improve on it (e.g. a minimum at an end of the range)
    grid_best = grid[index]
    best = torch.where(risk_at(grid_best) < risk_at(best), grid_best, best)
    with torch.no_grad():
        proba = loss.predict_proba(best.reshape(-1, 1)).reshape(-1).double()
    # The infimum is (also) approached at an end of the range when the risk there is no larger than at v*: a
    # minimiser at ∓∞, or a risk that is flat out to the end (e.g. ASL once σ(v) rounds to 1 in float64).
    min_risk = risk_at(best)
    slack = 1e-12 * (1.0 + min_risk.abs())
    at_boundary = (risk_at(torch.full_like(best, low)) <= min_risk + slack) | (
        risk_at(torch.full_like(best, high)) <= min_risk + slack
    )
    return RiskMinimum(eta=eta, logits=best, proba=proba, at_boundary=at_boundary)


def independent_label_distribution(eta) -> tuple[torch.Tensor, torch.Tensor]:
    """All 2^T label vectors (K, T) and their probabilities (K,) when labels are independent with marginals η."""
    eta = _as_eta(eta)
    configs = torch.tensor(list(itertools.product([0.0, 1.0], repeat=eta.numel())), dtype=torch.float64)
    weights = torch.where(configs == 1, eta, 1.0 - eta).prod(dim=1)
    return configs, weights


def joint_risk_minimiser(
    loss: nn.Module,
    label_configs: torch.Tensor,
    weights: torch.Tensor,
    init_logits: torch.Tensor | None = None,
    max_iter: int = 500,
) -> JointRiskMinimum:
    """Minimise the expected loss Σ_k w_k · loss(v, y_k) over one logit vector v ∈ R^T (L-BFGS, float64).

    ``label_configs`` (K, T) in {0, 1} with probabilities ``weights`` (K,) describe the distribution of the label
    vector given x. The loss is evaluated on one-example batches, one per configuration with w_k > 0 (a loop
    over the support of the distribution, not over data; keep T ≤ 10). Valid for losses whose value is a mean
    of per-example terms (BCE, SPA, LPR, LDACE and their Composites); a batch-level regulariser such as CCL has
    no per-example value, so this is not its risk. Returns ``loss.predict_proba`` at the minimiser.
    """
    configs = torch.as_tensor(label_configs, dtype=torch.float64)
    weights = torch.as_tensor(weights, dtype=torch.float64).reshape(-1)
    if configs.ndim != 2 or configs.shape[0] != weights.numel():
        raise ValueError(
            f"label_configs must be (K, T) with one weight per row, got {tuple(configs.shape)} and "
            f"{weights.numel()} weights"
        )
    if configs.shape[1] > 10:
        raise ValueError(f"T = {configs.shape[1]} is too many labels for an exact expectation (at most 10)")
    if not bool(((configs == 0) | (configs == 1)).all()):
        raise ValueError("label_configs must hold 0/1 label vectors")
    if bool((weights < 0).any()) or abs(float(weights.sum()) - 1.0) > 1e-9:
        raise ValueError(f"weights must be non-negative and sum to 1, got sum {float(weights.sum()):.6g}")
    support = weights > 0
    configs, weights = configs[support], weights[support]
    t = configs.shape[1]
    start = (
        torch.zeros(t, dtype=torch.float64)
        if init_logits is None
        else torch.as_tensor(init_logits, dtype=torch.float64).reshape(t)
    )
    logits = start.clone().requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [logits],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-10,
        tolerance_change=1e-14,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def expected_loss() -> torch.Tensor:
        row = logits.unsqueeze(0)
        return sum(w * loss(row, y.unsqueeze(0)) for w, y in zip(weights, configs))

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        risk = expected_loss()
        risk.backward()
        return risk

    optimiser.step(closure)
    with torch.no_grad():
        final = logits.detach()
        proba = loss.predict_proba(final.unsqueeze(0)).reshape(-1).double()
        risk = float(expected_loss())
    return JointRiskMinimum(logits=final, proba=proba, risk=risk)


__all__ += ["lpr_population_minimiser"]


def lpr_population_minimiser(
    base: nn.Module,
    lpr_weight: float,
    marginals: torch.Tensor,
    pair_posteriors: torch.Tensor,
    max_iter: int = 50,
    tolerance: float = 1e-10,
) -> torch.Tensor:
    """The population optimum of base + λ·LPR (Cheng & Vasconcelos, eq. 21) for each image, from its exact
    marginals η (N, T) and pairwise posteriors P(y_s = 1, y_t = 1 | x) (N, T, T); returns ``base.predict_proba`` at
    the minimiser (N, T).

    The expected loss of one image needs only these: E[base] = (1/T) Σ_t [η_t ℓ₊(v_t) + (1 − η_t) ℓ₋(v_t)] (the
    base loss averages over labels) and, with ℓ = logit of the base loss's read-out and
    P(y_t = 1, y_t' = 0 | x) = η_t − P(y_t = 1, y_t' = 1 | x),
    E[LPR] = 2/(T(T−1)) Σ_{t≠t'} P(y_t = 1, y_t' = 0 | x) softplus(ℓ_t' − ℓ_t) (eq. 20). Under Assumption 1
    (P(1, 1) = η_t η_t') the minimiser is the base loss's own, η̂ = η; with labels coupled given x it is not.
    Minimised by Newton's method for all images at once (the images do not interact: the Hessian is
    block-diagonal, its T columns come from T Hessian-vector products), starting at the base loss's minimiser
    (interpolated from a grid of η).
    Agrees with :func:`joint_risk_minimiser` (enumeration over all label vectors) on small T (tested).
    """
    eta = torch.as_tensor(marginals, dtype=torch.float64)
    pairs = torch.as_tensor(pair_posteriors, dtype=torch.float64)
    n, t = eta.shape
    if pairs.shape != (n, t, t):
        raise ValueError(
            f"pair_posteriors must have shape {(n, t, t)} to match the marginals, got {tuple(pairs.shape)}"
        )
    if t < 2:
        raise ValueError("LPR needs at least two labels")
    one_zero = (eta[:, :, None] - pairs) * (1 - torch.eye(t, dtype=torch.float64))  # P(y_t = 1, y_t' = 0 | x)
    scale = 2.0 * lpr_weight / (t * (t - 1))

    def total_risk(v: torch.Tensor) -> torch.Tensor:
        loss_pos, loss_neg = partial_losses(base, v)
        readout = base.predict_proba(v).clamp(1e-300, 1 - 1e-16)
        logit = torch.log(readout) - torch.log1p(-readout)
        pairwise = torch.nn.functional.softplus(logit[:, None, :] - logit[:, :, None])  # [n, t, t'] = sp(ℓ_t' − ℓ_t)
        return (eta * loss_pos + (1 - eta) * loss_neg).sum() / t + scale * (one_zero * pairwise).sum()

    grid = torch.linspace(1e-4, 1 - 1e-4, 2001, dtype=torch.float64)  # start: the base loss's own minimiser
    start = conditional_risk_minimiser(base, grid).logits
    v = torch.from_numpy(np.interp(eta.reshape(-1).numpy(), grid.numpy(), start.numpy())).reshape(n, t)
    for _ in range(max_iter):
        v.requires_grad_(True)
        gradient = torch.autograd.grad(total_risk(v), v, create_graph=True)[0]
        columns = [torch.autograd.grad(gradient[:, k].sum(), v, retain_graph=k < t - 1)[0] for k in range(t)]
        hessian = torch.stack(columns, dim=2).detach()  # [n, i, k] = ∂²R/∂v_i∂v_k of image n
        step = torch.linalg.solve(hessian, gradient.detach()[..., None])[..., 0]
        v = v.detach() - step.clamp(-2.0, 2.0)
        if float(step.abs().max()) < tolerance:
            break
    with torch.no_grad():
        return base.predict_proba(v).double()


def _log1mexp(log_q: torch.Tensor) -> torch.Tensor:
    """log(1 − e^x) for x ≤ 0, accurate at both ends (Mächler 2012)."""
    return torch.where(log_q > -math.log(2.0), torch.log(-torch.expm1(log_q)), torch.log1p(-torch.exp(log_q)))


def pairwise_expected_ldace(
    logits: torch.Tensor, marginals: torch.Tensor, pair_marginals: torch.Tensor, diagonal: str = "p_squared"
) -> torch.Tensor:
    """E_y[LDACE(v, y) | x] per row (N,), from the first and second moments of y given x alone.

    LDACE (Pal et al., ICASSP 2025; ``helpers.losses.LDACE``) is the mean over the upper triangle i ≤ j of
    BCE(q_ij, y_i y_j), q_ij = p_i p_j, p = σ(v); BCE is linear in its target, so its expectation is
    BCE(q_ij, π_ij) with π_ij = P(y_i = y_j = 1 | x) (``pair_marginals``) and π_ii = η_i (``marginals``).
    ``diagonal``: "p_squared" (reference, q_ii = p_i²) or "p" (q_ii = p_i)."""
    if diagonal not in ("p_squared", "p"):
        raise ValueError(f"diagonal must be 'p_squared' or 'p', got {diagonal!r}")
    n_labels = logits.shape[1]
    log_p = torch.nn.functional.logsigmoid(logits)
    log_q = log_p[:, :, None] + log_p[:, None, :]
    if diagonal == "p":
        log_q = log_q - torch.diag_embed(log_p)  # q_ii = p_i
    targets = pair_marginals.clone()
    targets.diagonal(dim1=1, dim2=2).copy_(marginals)
    terms = -(targets * log_q + (1.0 - targets) * _log1mexp(log_q))
    upper = torch.triu(torch.ones(n_labels, n_labels, dtype=torch.bool, device=logits.device))
    return terms[:, upper].mean(dim=1)


def pairwise_risk_minimiser(
    marginals, pair_marginals, diagonal: str = "p_squared", max_iter: int = 100
) -> JointRiskMinimum:
    """LDACE's population optimum for each image: argmin_v E_y[LDACE(v, y) | x] (:func:`pairwise_expected_ldace`),
    given η(x) (N, T) and π(x) (N, T, T), e.g. a synthetic set's exact moments. Damped Newton steps with the exact
    (T × T) Hessian of every image (closed form, float64), on the images whose gradient has not vanished yet
    (largest component < 1e-12); raises if some image does not converge in ``max_iter`` steps.
    Returns logits (N, T), ``LDACE(diagonal).predict_proba`` at them (p² or p) and the mean risk.

    Unlike :func:`joint_risk_minimiser` this needs no enumeration of label vectors, so T = 14 is cheap; for small T
    both agree (tested)."""
    eta = torch.as_tensor(marginals, dtype=torch.float64)
    pairs = torch.as_tensor(pair_marginals, dtype=torch.float64)
    if eta.ndim != 2 or pairs.shape != (*eta.shape, eta.shape[1]):
        raise ValueError(
            f"marginals must be (N, T) and pair_marginals (N, T, T), got {tuple(eta.shape)} and {tuple(pairs.shape)}"
        )
    if not bool(((eta > 0) & (eta < 1)).all()) or not bool(((pairs >= 0) & (pairs <= 1)).all()):
        raise ValueError("marginals must lie in (0, 1) and pair_marginals in [0, 1]")

    v = torch.special.logit(eta.clamp(1e-12, 1 - 1e-12)) / (2.0 if diagonal == "p_squared" else 1.0)
    active = torch.arange(v.shape[0])  # images whose gradient has not vanished yet
    eye = torch.eye(v.shape[1], dtype=v.dtype)
    for _ in range(max_iter):
        e, p2, x = eta[active], pairs[active], v[active]
        grad, hess = _ldace_gradient_and_hessian(x, e, p2, diagonal)
        done = grad.abs().amax(dim=1) < 1e-12
        active, e, p2, x, grad, hess = active[~done], e[~done], p2[~done], x[~done], grad[~done], hess[~done]
        if active.numel() == 0:
            break
        step = torch.linalg.solve(hess + 1e-12 * eye, grad.unsqueeze(-1)).squeeze(-1)
        current, scale = pairwise_expected_ldace(x, e, p2, diagonal), torch.ones(len(x), 1, dtype=v.dtype)
        for _ in range(30):  # backtracking per image: accept where the risk does not increase
            worse = pairwise_expected_ldace(x - scale * step, e, p2, diagonal) > current + 1e-15
            if not bool(worse.any()):
                break
            scale = torch.where(worse[:, None], scale / 2, scale)
        v[active] = x - scale * step
    else:
        raise RuntimeError(
            f"pairwise_risk_minimiser: no convergence in {max_iter} Newton steps for "
            f"{active.numel()} image(s) (largest gradient {float(grad.abs().max()):.2e})"
        )
    from helpers.losses.multilabel_ldace import LDACE

    with torch.no_grad():
        proba = LDACE(diagonal=diagonal).predict_proba(v).double()
    risk = float(pairwise_expected_ldace(v, eta, pairs, diagonal).mean())
    return JointRiskMinimum(logits=v, proba=proba, risk=risk)


def _ldace_gradient_and_hessian(
    v: torch.Tensor, eta: torch.Tensor, pairs: torch.Tensor, diagonal: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form gradient (N, T) and Hessian (N, T, T) of :func:`pairwise_expected_ldace` in v.

    Each term is f(ℓ) = −π ℓ − (1 − π) log(1 − e^ℓ) of ℓ = log q, with f' = (q − π)/(1 − q) and
    f'' = q (1 − π)/(1 − q)²; ℓ_ij = a_i + a_j off the diagonal and d·a_i on it (d = 2 for p², 1 for p), with
    a = log σ(v), a' = 1 − p, a'' = −p (1 − p). (Tested against autograd.)"""
    n_labels = v.shape[1]
    d = 2.0 if diagonal == "p_squared" else 1.0
    a = torch.nn.functional.logsigmoid(v)
    eye = torch.eye(n_labels, dtype=torch.bool, device=v.device)
    log_q = torch.where(eye, d * a[:, :, None], a[:, :, None] + a[:, None, :])
    target = torch.where(eye, torch.diag_embed(eta), pairs)
    q, one_minus_q = torch.exp(log_q), -torch.expm1(log_q)
    first = (q - target) / one_minus_q
    second = q * (1.0 - target) / one_minus_q**2
    weight = torch.where(eye, torch.full_like(first[0], d), torch.ones_like(first[0]))
    grad_a = (first * weight).sum(dim=2)
    hess_a = torch.where(eye, torch.diag_embed((second * weight**2).sum(dim=2)), second)
    slope, p = torch.sigmoid(-v), torch.sigmoid(v)
    n_terms = n_labels * (n_labels + 1) / 2
    grad = grad_a * slope / n_terms
    hess = (slope[:, :, None] * hess_a * slope[:, None, :] + torch.diag_embed(grad_a * (-p * slope))) / n_terms
    return grad, hess


# ----------------------------------------------------------------------------------------------------------------
# the structure of proper losses: weight functions (Savage 1971; Schervish 1989) and composite losses
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["BrierScore", "inverse_link", "weight_function"]


class BrierScore(nn.Module):
    """The Brier score as a per-label loss of the logit, ℓ₊(v) = (1 − σ(v))², ℓ₋(v) = σ(v)² (read-out σ): strictly
    proper with the sigmoid link, weight function w(c) = 2 (:func:`weight_function`). For the weight-function map
    of notebook 07; not a training loss of the course."""

    def partial_losses(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = torch.sigmoid(logits)
        return (1.0 - q) ** 2, q**2

    def predict_proba(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(logits)


def inverse_link(
    loss: nn.Module, q, logit_range: tuple[float, float] = (-60.0, 60.0), steps: int = 200
) -> torch.Tensor:
    """The logit v with ``loss.predict_proba(v) = q`` for every entry of ``q`` (bisection in float64; the read-out
    must be increasing, as every link of the course is): the link ψ(q) of a composite loss, ψ = [Ψ⁻¹]⁻¹."""
    q = torch.as_tensor(q, dtype=torch.float64).reshape(-1)
    if q.numel() == 0 or not bool(((q > 0) & (q < 1)).all()):
        raise ValueError("q must be probabilities strictly inside (0, 1)")
    low = torch.full_like(q, float(logit_range[0]))
    high = torch.full_like(q, float(logit_range[1]))
    with torch.no_grad():
        ends = loss.predict_proba(torch.stack([low[:1], high[:1]]).reshape(-1, 1)).reshape(-1).double()
        if not (ends[0] <= q.min() and q.max() <= ends[1]):
            raise ValueError(f"the read-out spans [{float(ends[0]):.3g}, {float(ends[1]):.3g}] on {logit_range}")
        for _ in range(steps):
            middle = (low + high) / 2
            above = loss.predict_proba(middle.reshape(-1, 1)).reshape(-1).double() >= q
            low, high = torch.where(above, low, middle), torch.where(above, middle, high)
    return (low + high) / 2


def weight_function(loss: nn.Module, c, tolerance: float = 1e-6) -> torch.Tensor:
    """The weight function w(c) of a strictly proper binary loss read through its own link (``predict_proba``).

    Savage/Schervish representation: a proper loss of a probability q is a mixture, over thresholds c, of the
    cost-weighted misclassification losses ℓ_c(1, q) = (1 − c)·1[q ≤ c], ℓ_c(0, q) = c·1[q > c], with weight w(c):
    ℓ(1, q) = ∫_q^1 (1 − c) w(c) dc and ℓ(0, q) = ∫_0^q c w(c) dc. A composite loss is a proper loss of
    q = [Ψ]⁻¹(v) written in the logit, ℓ±(v) = λ±([Ψ]⁻¹(v)), so by the chain rule, at v = ψ(c),

        w(c) = ℓ₋'(v) / (c · dq/dv) = −ℓ₊'(v) / ((1 − c) · dq/dv).

    BCE: w(c) = 1/(c(1 − c)); Brier: w(c) = 2; weighted BCE = SPA (1, 1, 0, ζ, 1, 0) with link σ(v − log ζ):
    w(c) = 1/(c(1 − c)(1 − c + ζc)). The two expressions agree only for a loss that is strictly proper with its
    read-out: a ``ValueError`` when they differ by more than ``tolerance`` (relative), e.g. focal read through σ.
    """
    c = torch.as_tensor(c, dtype=torch.float64).reshape(-1)
    v = inverse_link(loss, c).clone().requires_grad_(True)
    q = loss.predict_proba(v.reshape(-1, 1)).reshape(-1).double()
    dq = torch.autograd.grad(q.sum(), v)[0]
    loss_pos, loss_neg = partial_losses(loss, v.reshape(-1, 1))
    d_pos = torch.autograd.grad(loss_pos.double().sum(), v, retain_graph=True)[0]
    d_neg = torch.autograd.grad(loss_neg.double().sum(), v)[0]
    from_negative = (d_neg / (c * dq)).detach()
    from_positive = (-d_pos / ((1.0 - c) * dq)).detach()
    mismatch = float(((from_negative - from_positive).abs() / from_positive.abs().clamp_min(1e-300)).max())
    if mismatch > tolerance:
        raise ValueError(
            f"{type(loss).__name__} is not strictly proper with its read-out (the two weight formulas differ by a "
            f"relative {mismatch:.2g}): it has no weight function"
        )
    return from_negative


# ----------------------------------------------------------------------------------------------------------------
# the gradient of the negatives (notebook 07, section 5)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["gradient_masses", "negative_share", "negative_gradient_weight"]


def gradient_masses(loss: nn.Module, logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(``|∂ℓ₊/∂v|`` on the positive entries, ``|∂ℓ₋/∂v|`` on the negative entries), elementwise in float64, for logits
    broadcast to the shape of ``labels`` (one logit per entry, or one per label for a constant predictor)."""
    labels = torch.as_tensor(labels, dtype=torch.float64)
    v = torch.as_tensor(logits, dtype=torch.float64).expand_as(labels).clone().requires_grad_(True)
    loss_pos, loss_neg = partial_losses(loss, v)
    grad_pos = torch.autograd.grad(loss_pos.sum(), v, retain_graph=True)[0].abs()
    grad_neg = torch.autograd.grad(loss_neg.sum(), v)[0].abs()
    return grad_pos * labels, grad_neg * (1 - labels)


def negative_share(loss: nn.Module, logits: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of the summed gradient magnitude that comes from the negative entries (:func:`gradient_masses`)."""
    positive, negative = gradient_masses(loss, logits, labels)
    return float(negative.sum() / (positive.sum() + negative.sum()))


def negative_gradient_weight(loss: nn.Module, logits: torch.Tensor) -> torch.Tensor:
    """``|ℓ₋'(v)|`` / σ(v): the gradient on a negative relative to BCE's at the same logit (1 for BCE), float64."""
    v = torch.as_tensor(logits, dtype=torch.float64).reshape(-1, 1).clone().requires_grad_(True)
    loss_neg = partial_losses(loss, v)[1]
    return (torch.autograd.grad(loss_neg.sum(), v)[0].abs() / torch.sigmoid(v.detach())).reshape(-1)


# ----------------------------------------------------------------------------------------------------------------
# where training stops: the stationary point of a loss's gradient field (ASL with a detached focusing weight)
# ----------------------------------------------------------------------------------------------------------------
__all__ += ["gradient_implied_proba", "stationary_point"]


def gradient_implied_proba(loss: nn.Module, logits) -> torch.Tensor:
    """η(v) = g₋(v) / (g₋(v) − g₊(v)), g± = ∂ℓ±/∂v as autograd computes it: the label probability for which the
    expected gradient η g₊ + (1 − η) g₋ vanishes at v (float64, shape of ``logits``).

    For a loss differentiated as written this is the first-order condition of eq. (11), so for focal / ASL it is
    φ(σ(v)) (eqs. 13–15). With the focusing weight detached (Ridnik et al.'s ``disable_torch_grad_focal_loss``,
    ``ASL(detach_focusing_weight=True)``) the weights are constants of the backward pass; for margin 0,
    g₊ = −(1 − p)^(γ⁺+1), g₋ = p^(γ⁻+1), so η(v) = p^(γ⁻+1) / (p^(γ⁻+1) + (1 − p)^(γ⁺+1)), p = σ(v) — not φ.
    Where both gradients are 0 (a flat loss) the value is NaN.
    """
    g_pos, g_neg = _label_gradients(loss, logits)
    return g_neg / (g_neg - g_pos)


def _label_gradients(loss: nn.Module, logits) -> tuple[torch.Tensor, torch.Tensor]:
    """(∂ℓ₊/∂v, ∂ℓ₋/∂v) as autograd computes them (a detached weight stays detached), float64."""
    v = torch.as_tensor(logits, dtype=torch.float64).clone().requires_grad_(True)
    loss_pos, loss_neg = partial_losses(loss, v)
    g_pos = torch.autograd.grad(loss_pos.double().sum(), v, retain_graph=True)[0]
    g_neg = torch.autograd.grad(loss_neg.double().sum(), v)[0]
    return g_pos.detach(), g_neg.detach()


def _reaches(loss: nn.Module, logits: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
    """η(v) ≥ η where the positive gradient is not 0: ASL's eps clamp makes ℓ₊ flat below v ≈ −18.4 (η(v) = 1
    there, stationary for η = 1 only), which would otherwise break the monotone search."""
    g_pos, g_neg = _label_gradients(loss, logits)
    return (g_pos < 0) & (g_neg >= eta * (g_neg - g_pos))


def stationary_point(
    loss: nn.Module, eta, logit_range: tuple[float, float] = (-25.0, 25.0), grid_size: int = 2001, steps: int = 60
) -> RiskMinimum:
    """Where training stops for a label of probability η: the logit v* at which the expected gradient vanishes,
    :func:`gradient_implied_proba` (v*) = η, for every η at once (float64).

    The first grid logit with η(v) ≥ η brackets the root, then ``steps`` bisections refine it (η(v) is
    non-decreasing for focal / ASL either way, outside the flat regions of ASL's eps clamp, which are skipped).
    For a loss differentiated as written this is the conditional-risk minimiser of
    :func:`conditional_risk_minimiser` (where the risk is unimodal); with a detached focusing weight it is a
    different point, and φ(σ(v*)) is then not η. ``at_boundary`` marks η the gradient field never reaches
    inside the range (e.g. ASL with γ⁺ = 0 and m > 0 above its saturation: training drives v to +∞).
    Returned as a :class:`RiskMinimum` (``proba`` = ``loss.predict_proba(v*)``). The default range stops at
    abs(v) = 25: beyond it float64's σ(v)(1 − σ(v)) (the gradient through ASL's margin) has lost its digits and the
    gradient ratio is noise, which would show a spurious root for a saturated η.
    """
    eta = _as_eta(eta)
    low, high = (float(x) for x in logit_range)
    if not (math.isfinite(low) and math.isfinite(high) and low < high) or grid_size < 3:
        raise ValueError(f"need finite logit_range low < high and grid_size >= 3, got {logit_range!r}, {grid_size}")
    grid = torch.linspace(low, high, grid_size, dtype=torch.float64)
    reached = _reaches(loss, grid.unsqueeze(0), eta.unsqueeze(1))  # (G, grid)
    at_boundary = ~reached.any(dim=1) | reached[:, 0]
    first = reached.int().argmax(dim=1)
    a = grid[(first - 1).clamp(min=0)]
    b = grid[first]
    b = torch.where(reached.any(dim=1), b, torch.full_like(b, high))
    for _ in range(steps):
        middle = (a + b) / 2
        above = _reaches(loss, middle, eta)
        a, b = torch.where(above, a, middle), torch.where(above, middle, b)
    best = (a + b) / 2
    with torch.no_grad():
        proba = loss.predict_proba(best.reshape(-1, 1)).reshape(-1).double()
    return RiskMinimum(eta=eta, logits=best, proba=proba, at_boundary=at_boundary)
