"""Tests for helpers.losses.multilabel: each loss against an independent formula written here."""

from __future__ import annotations

import math

import pytest
import torch

from helpers.losses import (
    ASL,
    BCE,
    LDACE,
    LPR,
    SPA,
    AsymmetricFocal,
    CanonicalCalibrationLoss,
    Composite,
    LDACEWithCCL,
    phi_recovery,
    spa_link_as_printed,
)

DOUBLE = torch.float64


def _data(n=7, t=5, seed=0, scale=3.0, dtype=DOUBLE):
    g = torch.Generator().manual_seed(seed)
    logits = (scale * torch.randn(n, t, generator=g)).to(dtype)
    targets = (torch.rand(n, t, generator=g) < 0.4).to(dtype)
    targets[0] = 1.0  # make sure both label values and mixed rows occur
    targets[1] = 0.0
    return logits, targets


def _grad(loss_fn, logits, targets):
    x = logits.clone().requires_grad_(True)
    value = loss_fn(x, targets)
    (g,) = torch.autograd.grad(value, x)
    return value.detach(), g


# ---------------------------------------------------------------------------------------------- reference formulae
def ridnik_asl_reference(x, y, gamma_neg=4.0, gamma_pos=1.0, clip=0.05, eps=1e-8, disable_torch_grad_focal_loss=False):
    """Re-typed AsymmetricLoss.forward of Ridnik et al.'s public code (Alibaba-MIIL/ASL,
    src/loss_functions/losses.py; sum reduction). The class there defaults ``disable_torch_grad_focal_loss`` to
    True; the default here is False, the course's default."""
    x_sigmoid = torch.sigmoid(x)
    xs_pos = x_sigmoid
    xs_neg = 1 - x_sigmoid
    if clip is not None and clip > 0:
        xs_neg = (xs_neg + clip).clamp(max=1)
    los_pos = y * torch.log(xs_pos.clamp(min=eps))
    los_neg = (1 - y) * torch.log(xs_neg.clamp(min=eps))
    loss = los_pos + los_neg
    if gamma_neg > 0 or gamma_pos > 0:
        if disable_torch_grad_focal_loss:
            torch.set_grad_enabled(False)
        pt = xs_pos * y + xs_neg * (1 - y)
        one_sided_gamma = gamma_pos * y + gamma_neg * (1 - y)
        one_sided_w = torch.pow(1 - pt, one_sided_gamma)
        if disable_torch_grad_focal_loss:
            torch.set_grad_enabled(True)
        loss = loss * one_sided_w
    return -loss.sum()


def focal_eq7(x, y, gamma_pos, gamma_neg):
    p = torch.sigmoid(x)
    pos = -((1 - p) ** gamma_pos) * torch.log(p)
    neg = -(p**gamma_neg) * torch.log(1 - p)
    return (y * pos + (1 - y) * neg).mean()


# --------------------------------------------------------------------------------------------------- BCE and focal
def test_bce_matches_log_loss_formula():
    logits, targets = _data()
    p = torch.sigmoid(logits)
    expected = -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p)).mean()
    assert torch.allclose(BCE()(logits, targets), expected, atol=1e-12)


@pytest.mark.parametrize("gamma_pos,gamma_neg", [(0.0, 4.0), (1.0, 4.0), (2.0, 2.0), (0.5, 0.5)])
def test_asymmetric_focal_matches_eq7(gamma_pos, gamma_neg):
    logits, targets = _data()
    loss = AsymmetricFocal(gamma_pos=gamma_pos, gamma_neg=gamma_neg)
    assert torch.allclose(loss(logits, targets), focal_eq7(logits, targets, gamma_pos, gamma_neg), atol=1e-12)


def test_focal_with_zero_gammas_is_bce_in_value_and_gradient():
    logits, targets = _data(scale=6.0)
    v_focal, g_focal = _grad(AsymmetricFocal(gamma_pos=0.0, gamma_neg=0.0), logits, targets)
    v_bce, g_bce = _grad(BCE(), logits, targets)
    assert torch.allclose(v_focal, v_bce, atol=1e-12)
    assert torch.allclose(g_focal, g_bce, atol=1e-12)


# ------------------------------------------------------------------------------------------------------------- ASL
@pytest.mark.parametrize(
    "gamma_pos,gamma_neg,margin",
    [(0.0, 4.0, 0.05), (1.0, 4.0, 0.05), (1.0, 2.0, 0.2), (0.0, 0.5, 0.1), (2.0, 3.0, 0.0)],
)
def test_asl_matches_reference_code_up_to_mean(gamma_pos, gamma_neg, margin):
    logits, targets = _data(n=9, t=6, scale=4.0)
    loss = ASL(gamma_pos=gamma_pos, gamma_neg=gamma_neg, margin=margin)
    v_ours, g_ours = _grad(loss, logits, targets)
    v_ref, g_ref = _grad(lambda x, y: ridnik_asl_reference(x, y, gamma_neg, gamma_pos, margin), logits, targets)
    n_entries = targets.numel()
    assert torch.allclose(v_ours * n_entries, v_ref, rtol=1e-10, atol=1e-10)
    # With γ⁻ < 1 the reference's pow(p_m, γ⁻) has a NaN gradient where p_m = 0 (p ≤ m); ours is 0 there,
    # which is the limit of the one-sided derivative of the (flat) loss.
    reference_finite = torch.isfinite(g_ref)
    assert torch.isfinite(g_ours).all()
    assert torch.allclose(g_ours[reference_finite] * n_entries, g_ref[reference_finite], rtol=1e-8, atol=1e-10)
    if gamma_neg < 1 and margin > 0:
        flat = (torch.sigmoid(logits) <= margin) & (targets == 0)
        assert flat.any() and torch.isnan(g_ref[flat]).all() and (g_ours[flat] == 0).all()


@pytest.mark.parametrize(
    "gamma_pos,gamma_neg,margin",
    [(1.0, 4.0, 0.05), (0.0, 4.0, 0.05), (1.0, 2.0, 0.2), (2.0, 3.0, 0.0)],
)
def test_asl_detached_weight_matches_the_authors_default_code(gamma_pos, gamma_neg, margin):
    """disable_torch_grad_focal_loss=True (the authors' class default and training setting): same value, their
    gradient, and a gradient that differs from the as-written one (so the test would fail on a no-op option)."""
    logits, targets = _data(n=9, t=6, scale=4.0)
    n_entries = targets.numel()
    v_det, g_det = _grad(ASL(gamma_pos, gamma_neg, margin, detach_focusing_weight=True), logits, targets)
    v_ref, g_ref = _grad(
        lambda x, y: ridnik_asl_reference(x, y, gamma_neg, gamma_pos, margin, disable_torch_grad_focal_loss=True),
        logits,
        targets,
    )
    assert torch.allclose(v_det * n_entries, v_ref, rtol=1e-10, atol=1e-10)
    assert torch.allclose(g_det * n_entries, g_ref, rtol=1e-8, atol=1e-10)
    v_full, g_full = _grad(ASL(gamma_pos, gamma_neg, margin), logits, targets)
    assert torch.allclose(v_full, v_det, atol=1e-12)
    assert (g_full - g_det).abs().max() > 1e-3


def test_asymmetric_focal_detached_matches_the_authors_code_with_zero_clip():
    logits, targets = _data(n=9, t=6, scale=4.0)
    v, g = _grad(AsymmetricFocal(1.0, 4.0, detach_focusing_weight=True), logits, targets)
    reference = lambda x, y: ridnik_asl_reference(x, y, 4.0, 1.0, 0.0, 0.0, disable_torch_grad_focal_loss=True)  # noqa: E731
    v_ref, g_ref = _grad(reference, logits, targets)
    assert torch.allclose(v * targets.numel(), v_ref, rtol=1e-10) and torch.allclose(g * targets.numel(), g_ref)
    assert not torch.allclose(g, _grad(AsymmetricFocal(1.0, 4.0), logits, targets)[1])


def test_detach_option_leaves_the_run_key_inputs_unchanged_when_off():
    """A run's key hashes the loss's repr and state (helpers.training.run_keys): with the option off both are what
    every stored ASL / focal run was keyed with; on, the repr (hence the key) differs."""
    assert repr(ASL()) == "ASL(gamma_pos=0.0, gamma_neg=4.0, margin=0.05, eps=1e-08)"
    assert repr(AsymmetricFocal()) == "AsymmetricFocal(gamma_pos=0.0, gamma_neg=4.0)"
    assert ASL().state_dict() == {} and ASL(detach_focusing_weight=True).state_dict() == {}
    assert repr(ASL(detach_focusing_weight=True)).endswith("eps=1e-08, detach_focusing_weight=True)")
    assert repr(AsymmetricFocal(detach_focusing_weight=True)).endswith("detach_focusing_weight=True)")
    with pytest.raises(TypeError):
        ASL(detach_focusing_weight="yes")


def test_asl_eps_clamp_flattens_the_positive_loss_like_the_reference():
    logits = torch.tensor([[-30.0, -25.0]], dtype=DOUBLE)
    targets = torch.ones_like(logits)
    value, grad = _grad(ASL(), logits, targets)
    assert value.item() == pytest.approx(-math.log(1e-8), rel=1e-12)
    assert torch.all(grad == 0)


def test_asl_with_zero_margin_equals_asymmetric_focal():
    logits, targets = _data(scale=4.0)  # |v| < 18.4, where the eps clamp is inactive
    assert logits.abs().max() < 18
    for gp, gn in [(0.0, 4.0), (1.0, 3.0)]:
        v_asl, g_asl = _grad(ASL(gamma_pos=gp, gamma_neg=gn, margin=0.0), logits, targets)
        v_focal, g_focal = _grad(AsymmetricFocal(gamma_pos=gp, gamma_neg=gn), logits, targets)
        assert torch.allclose(v_asl, v_focal, atol=1e-12) and torch.allclose(g_asl, g_focal, atol=1e-12)
    far = torch.tensor([[-40.0, 40.0]], dtype=DOUBLE)
    both = torch.tensor([[1.0, 0.0]], dtype=DOUBLE)
    assert torch.allclose(ASL(margin=0.0, eps=0.0)(far, both), AsymmetricFocal()(far, both), atol=1e-12)


@pytest.mark.parametrize(
    "kwargs", [{"margin": -0.1}, {"margin": 1.0}, {"gamma_neg": -1.0}, {"eps": 1.0}, {"gamma_pos": float("nan")}]
)
def test_asl_rejects_bad_hyper_parameters(kwargs):
    with pytest.raises(ValueError):
        ASL(**kwargs)


# ------------------------------------------------------------------------------------------------------------- phi
def naive_h(z, gamma):
    return (z**gamma - gamma * z ** (gamma - 1) * (1 - z) * torch.log(1 - z)) / (1 - z)


def naive_phi(z, gamma_pos, gamma_neg, margin):
    q = torch.clamp(z - margin, min=0)
    return naive_h(q, gamma_neg) / (naive_h(q, gamma_neg) + naive_h(1 - z, gamma_pos))


@pytest.mark.parametrize(
    "gamma_pos,gamma_neg,margin", [(1.0, 4.0, 0.0), (0.0, 4.0, 0.05), (2.0, 2.0, 0.0), (0.5, 3.0, 0.1)]
)
def test_phi_matches_eqs_14_15_inside_the_interval(gamma_pos, gamma_neg, margin):
    z = torch.linspace(margin + 0.01, 0.99, 50, dtype=DOUBLE)
    ours = phi_recovery(z, gamma_pos=gamma_pos, gamma_neg=gamma_neg, margin=margin)
    assert torch.allclose(ours, naive_phi(z, gamma_pos, gamma_neg, margin), atol=1e-12)


def test_phi_is_an_increasing_bijection_for_zero_margin():
    z = torch.linspace(0, 1, 2001, dtype=DOUBLE)
    phi = phi_recovery(z, gamma_pos=1.0, gamma_neg=4.0, margin=0.0)
    assert phi[0].item() == 0.0 and phi[-1].item() == 1.0
    assert torch.all(phi[1:] > phi[:-1])


def test_phi_collapses_scores_below_the_margin_and_saturates_for_gamma_pos_zero():
    margin, gamma_neg = 0.05, 4.0
    low = torch.linspace(0, margin, 20, dtype=DOUBLE)
    assert torch.all(phi_recovery(low, gamma_pos=1.0, gamma_neg=gamma_neg, margin=margin) == 0)
    # γ⁺ = 0: φ(1) = h(1 − m) / (1 + h(1 − m)) < 1, worked out by hand from eq. (15)
    q = 1 - margin
    h = (q**4 - 4 * q**3 * (1 - q) * math.log(1 - q)) / (1 - q)
    top = phi_recovery(torch.tensor([1.0], dtype=DOUBLE), gamma_pos=0.0, gamma_neg=gamma_neg, margin=margin)
    assert top.item() == pytest.approx(h / (1 + h), rel=1e-12)
    assert top.item() == pytest.approx(0.9637, abs=1e-4)


def test_phi_rejects_logits_and_bad_margin():
    with pytest.raises(ValueError):
        phi_recovery(torch.tensor([2.0]), 1.0, 4.0)
    with pytest.raises(ValueError):
        phi_recovery(torch.tensor([0.5]), 1.0, 4.0, margin=1.5)


def test_asl_recovered_proba_applies_phi():
    logits, _ = _data()
    loss = ASL(gamma_pos=1.0, gamma_neg=4.0, margin=0.05)
    expected = phi_recovery(torch.sigmoid(logits), 1.0, 4.0, 0.05)
    assert torch.allclose(loss.recovered_proba(logits), expected)


# ------------------------------------------------------------------------------------------------------------- SPA
def test_spa_with_bce_parameters_equals_bce():
    logits, targets = _data(scale=5.0, dtype=torch.float32)
    spa = SPA(zeta_pos=1, k_pos=1, b_pos=0, zeta_neg=1, k_neg=1, b_neg=0)
    v_spa, g_spa = _grad(spa, logits, targets)
    v_bce, g_bce = _grad(BCE(), logits, targets)
    assert torch.allclose(v_spa, v_bce, atol=1e-6)
    assert torch.allclose(g_spa, g_bce, atol=1e-6)
    grid = torch.linspace(-30, 30, 601).reshape(-1, 1)
    assert torch.allclose(spa.predict_proba(grid), torch.sigmoid(grid), atol=1e-6)


def test_spa_partial_losses_are_eq16():
    v = torch.linspace(-5, 5, 11, dtype=DOUBLE)
    spa = SPA(zeta_pos=2.0, k_pos=0.5, b_pos=-1.0, zeta_neg=5.0, k_neg=3.0, b_neg=1.0)
    loss_pos, loss_neg = spa.partial_losses(v)
    assert torch.allclose(loss_pos, -torch.log(1 / (1 + torch.exp(-0.5 * (v + 1.0)))) / 2.0, atol=1e-12)
    assert torch.allclose(loss_neg, -torch.log(1 / (1 + torch.exp(3.0 * (v - 1.0)))) / 5.0, atol=1e-12)


@pytest.mark.parametrize(
    "params", [(1, 1, 0, 5, 3, 1), (2.0, 0.5, -1.0, 3.0, 2.0, 0.5), (0.3, 4.0, 2.0, 9.0, 0.7, -3.0)]
)
def test_spa_link_is_the_first_order_condition_of_the_conditional_risk(params):
    """η̂(v) must equal ℓ₋'(v) / (ℓ₋'(v) − ℓ₊'(v)), with the derivatives taken by autograd here."""
    spa = SPA(*params)
    v = torch.linspace(-8, 8, 161, dtype=DOUBLE).requires_grad_(True)
    loss_pos, loss_neg = spa.partial_losses(v)
    (d_pos,) = torch.autograd.grad(loss_pos.sum(), v)
    (d_neg,) = torch.autograd.grad(loss_neg.sum(), v)
    expected = d_neg / (d_neg - d_pos)
    with torch.no_grad():
        link = spa.predict_proba(v.detach().reshape(-1, 1)).reshape(-1)
    assert torch.allclose(link, expected, atol=1e-12)
    assert torch.all(link[1:] > link[:-1])
    ends = spa.predict_proba(torch.tensor([[-1e4, 1e4]]))
    assert ends[0, 0].item() == 0.0 and ends[0, 1].item() == 1.0
    log_link = spa.predict_log_proba(v.detach())
    assert torch.allclose(log_link.exp(), link, atol=1e-12)


def test_printed_eq17_is_decreasing_and_is_one_minus_sigmoid_at_bce_parameters():
    v = torch.linspace(-6, 6, 121, dtype=DOUBLE)
    printed = spa_link_as_printed(v, 1, 1, 0, 1, 1, 0)
    assert torch.allclose(printed, 1 - torch.sigmoid(v), atol=1e-12)
    printed_default = spa_link_as_printed(v)
    assert torch.all(printed_default[1:] < printed_default[:-1])


@pytest.mark.parametrize(
    "kwargs",
    [{"k_neg": 0.0}, {"k_pos": -1.0}, {"zeta_neg": 0.0}, {"zeta_pos": -2.0}, {"b_neg": float("inf")}, {"b_pos": "1"}],
)
def test_spa_rejects_hyper_parameters_that_break_strict_properness(kwargs):
    with pytest.raises(ValueError):
        SPA(**kwargs)


# ------------------------------------------------------------------------------------------------------------- LPR
def lpr_brute_force(probs, targets):
    n, t = probs.shape
    total = probs.new_zeros(())
    for i in range(n):
        example = probs.new_zeros(())
        for a in range(t):
            for b in range(t):
                if a != b and targets[i, a] == 1 and targets[i, b] == 0:
                    pa, pb = probs[i, a], probs[i, b]
                    beta = pa * (1 - pb) / (pa * (1 - pb) + pb * (1 - pa))  # eq. (19)
                    example = example - torch.log(beta)
        total = total + 2.0 / (t * (t - 1)) * example  # eq. (20)
    return total / n


@pytest.mark.parametrize("t", [2, 5, 6])
def test_lpr_equals_brute_force_double_loop_in_value_and_gradient(t):
    logits, targets = _data(n=6, t=t, scale=2.0)
    probs = torch.sigmoid(logits)
    v_fast, g_fast = _grad(LPR(), probs, targets)
    v_slow, g_slow = _grad(lpr_brute_force, probs, targets)
    assert torch.allclose(v_fast, v_slow, atol=1e-12)
    assert torch.allclose(g_fast, g_slow, atol=1e-10)


def test_lpr_composes_with_any_base_through_its_probabilities():
    logits, targets = _data(n=6, t=5, scale=2.0)
    spa = SPA()
    total = Composite(spa, [(0.7, LPR())])(logits, targets)
    expected = spa(logits, targets) + 0.7 * lpr_brute_force(spa.predict_proba(logits), targets)
    assert torch.allclose(total, expected, atol=1e-12)


def test_lpr_saturated_probabilities_are_evaluated_at_the_nearest_value_inside_0_1():
    """p = 0 and p = 1 (float saturation) are read as the smallest normal float and 1 − eps/2, value and
    gradient alike: finite, and equal to LPR at those values."""
    info = torch.finfo(DOUBLE)
    targets = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=DOUBLE)
    saturated = torch.tensor([[0.0, 1.0, 0.3, 0.8]], dtype=DOUBLE)
    inside = torch.tensor([[info.tiny, 1.0 - info.eps / 2, 0.3, 0.8]], dtype=DOUBLE)
    v_sat, g_sat = _grad(LPR(), saturated, targets)
    v_in, g_in = _grad(LPR(), inside, targets)
    assert torch.isfinite(v_sat) and torch.isfinite(g_sat).all()
    assert v_sat == v_in and torch.equal(g_sat, g_in)


def test_lpr_single_label_has_no_pairs():
    probs = torch.tensor([[0.3], [0.9]], dtype=DOUBLE)
    assert LPR()(probs, torch.tensor([[1.0], [0.0]], dtype=DOUBLE)).item() == 0.0


def test_lpr_rejects_logits_passed_as_probabilities():
    logits, targets = _data()
    with pytest.raises(ValueError, match="probs"):
        LPR()(logits, targets)


# ----------------------------------------------------------------------------------------------------------- LDACE
def ldace_brute_force(logits, targets, diagonal):
    p = torch.sigmoid(logits)
    n, t = p.shape
    total = p.new_zeros(())
    for b in range(n):
        for i in range(t):
            for j in range(i, t):
                if i == j:
                    q = p[b, i] ** 2 if diagonal == "p_squared" else p[b, i]
                    y = targets[b, i]
                else:
                    q = p[b, i] * p[b, j]
                    y = targets[b, i] * targets[b, j]
                total = total - (y * torch.log(q) + (1 - y) * torch.log(1 - q))
    return total / (n * t * (t + 1) / 2)


@pytest.mark.parametrize("t", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("diagonal", ["p_squared", "p"])
def test_ldace_equals_brute_force_pairwise_bce(diagonal, t):
    """Value and gradient; odd and even T (the fused form lists pairs by cyclic offsets, see _cyclic_pairs)."""
    logits, targets = _data(n=5, t=t, scale=2.5)
    v_fast, g_fast = _grad(LDACE(diagonal=diagonal), logits, targets)
    v_slow, g_slow = _grad(lambda x, y: ldace_brute_force(x, y, diagonal), logits, targets)
    assert torch.allclose(v_fast, v_slow, atol=1e-12)
    assert torch.allclose(g_fast, g_slow, atol=1e-10)


def test_ldace_matches_the_reference_clamped_formula_with_half_weights_off_the_diagonal():
    """Reference: full T×T BCE matrix, weight 1 on the diagonal and 0.5 off it, / (B·T(T+1)/2), clamp 1e-7."""
    logits, targets = _data(n=5, t=4, scale=2.0)
    p = torch.sigmoid(logits).clamp(1e-7, 1 - 1e-7)
    q = (p.unsqueeze(2) * p.unsqueeze(1)).clamp(1e-7, 1 - 1e-7)
    y = targets.unsqueeze(2) * targets.unsqueeze(1)
    bce = -(y * torch.log(q) + (1 - y) * torch.log(1 - q))
    t = logits.shape[1]
    weight = torch.full((t, t), 0.5, dtype=DOUBLE).fill_diagonal_(1.0)
    reference = (bce * weight).sum() / (logits.shape[0] * t * (t + 1) / 2)
    assert torch.allclose(LDACE()(logits, targets), reference, atol=1e-9)


def test_ldace_reference_clamp_zeroes_the_gradient_beyond_16_and_ours_does_not():
    """The docstring's departure: σ(v) clamped to [1e-7, 1 − 1e-7] has zero gradient for |v| > ≈ 16.1."""
    logits = torch.tensor([[-16.5, 16.5], [-15.5, 15.5]], dtype=DOUBLE)
    targets = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=DOUBLE)  # each logit contradicts its label

    def reference(x, y):
        p = torch.sigmoid(x).clamp(1e-7, 1 - 1e-7)
        q = (p.unsqueeze(2) * p.unsqueeze(1)).clamp(1e-7, 1 - 1e-7)
        yy = y.unsqueeze(2) * y.unsqueeze(1)
        bce = -(yy * torch.log(q) + (1 - yy) * torch.log(1 - q))
        weight = torch.full((2, 2), 0.5, dtype=DOUBLE).fill_diagonal_(1.0)
        return (bce * weight).sum() / (x.shape[0] * 3)

    _, g_ref = _grad(reference, logits, targets)
    _, g_ours = _grad(LDACE(), logits, targets)
    assert (g_ref[0] == 0).all() and (g_ref[1] != 0).all()
    assert (g_ours.abs() > 1e-3).all()


def test_ldace_probability_readings():
    logits, _ = _data()
    assert torch.allclose(LDACE(diagonal="p_squared").predict_proba(logits), torch.sigmoid(logits) ** 2)
    assert torch.allclose(LDACE(diagonal="p").predict_proba(logits), torch.sigmoid(logits))
    with pytest.raises(ValueError, match="diagonal"):
        LDACE(diagonal="sqrt")


def test_ldace_stays_accurate_when_both_probabilities_approach_one():
    """−log(1 − σ(a)σ(b)) for large a = b: exact value log(1 + 2e^a) − ... ≈ a − log 2 when e^{−a} ≪ 1."""
    a = 40.0
    logits = torch.tensor([[a, a]], dtype=DOUBLE)
    targets = torch.tensor([[0.0, 1.0]], dtype=DOUBLE)
    # terms: diag BCE(p_a², 0), diag BCE(p_b², 1), off BCE(p_a p_b, 0); with p = σ(a):
    # −log(1 − p²) = −log((1 − p)(1 + p)) ≈ a − log 2, −log p² ≈ 2e^{−a}, −log(1 − p²) again for the pair
    expected = (2 * (a - math.log(2.0)) + 2 * math.exp(-a)) / 3
    assert LDACE()(logits, targets).item() == pytest.approx(expected, rel=1e-12)


def _exact_one_minus_pair(a, b):
    """1 − σ(a)σ(b) = σ(−a) + σ(a)σ(−b) in float64 scalars (no cancellation)."""

    def sig(x):
        return 1.0 / (1.0 + math.exp(-x))

    return sig(-a) + sig(a) * sig(-b)


@pytest.mark.parametrize("dtype", [torch.float32, DOUBLE])
def test_ldace_extreme_pairs_use_the_exact_log_space_branch(dtype):
    row = [100.0, 100.0, 0.5, -3.0]
    logits = torch.tensor([row], dtype=dtype, requires_grad=True)
    targets = torch.tensor([[0.0, 0.0, 1.0, 0.0]], dtype=dtype)
    y = targets[0].tolist()
    total = 0.0
    for i in range(4):
        for j in range(i, 4):
            pi, pj = 1 / (1 + math.exp(-row[i])), 1 / (1 + math.exp(-row[j]))
            if y[i] * y[j] == 1:
                total -= math.log(pi) + math.log(pj)
            elif i == j:  # BCE(p², 0): 1 − p² = (1 − p)(1 + p)
                total -= math.log(1 / (1 + math.exp(row[i]))) + math.log1p(pi)
            else:
                total -= math.log(_exact_one_minus_pair(row[i], row[j]))
    value = LDACE()(logits, targets)
    value.backward()
    assert value.item() == pytest.approx(total / 10, rel=1e-6)
    assert torch.isfinite(logits.grad).all()


def ldace_log_space_reference(logits, targets, diagonal):
    """LDACE with every log formed by logsigmoid / logaddexp (independent of the fused code's branches)."""
    n, t = logits.shape
    log_p, log_q = torch.nn.functional.logsigmoid(logits), torch.nn.functional.logsigmoid(-logits)
    total = logits.new_zeros(())
    for i in range(t):
        for j in range(i, t):
            if i == j and diagonal == "p":
                log_pair, log_one_minus = log_p[:, i], log_q[:, i]
            else:
                log_pair = log_p[:, i] + log_p[:, j]
                log_one_minus = torch.logaddexp(log_q[:, i], log_p[:, i] + log_q[:, j])  # 1 − p_i p_j
            y = targets[:, i] * targets[:, j]
            total = total - (y * log_pair + (1 - y) * log_one_minus).sum()
    return total / (n * t * (t + 1) / 2)


@pytest.mark.parametrize("diagonal", ["p_squared", "p"])
def test_ldace_log_space_branch_gradient_matches_a_log_space_reference(diagonal):
    """A logit above 60 switches the fused code to its log-space branch: value and gradient must not change."""
    logits = torch.tensor([[61.0, 75.0, 0.5, -3.0, 64.0], [2.0, -1.0, 0.0, 3.0, -70.0]], dtype=DOUBLE)
    targets = torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 1.0, 0.0]], dtype=DOUBLE)
    v_fast, g_fast = _grad(LDACE(diagonal=diagonal), logits, targets)
    v_ref, g_ref = _grad(lambda x, y: ldace_log_space_reference(x, y, diagonal), logits, targets)
    assert torch.allclose(v_fast, v_ref, rtol=1e-12)
    assert torch.allclose(g_fast, g_ref, rtol=1e-9, atol=1e-15)
    x = logits.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: LDACE(diagonal=diagonal)(z, targets), (x,))


def test_fused_losses_give_the_same_value_without_a_graph():
    logits, targets = _data(n=6, t=5)
    probs = torch.sigmoid(logits)
    with torch.no_grad():
        values = [LDACE()(logits, targets), LDACE(diagonal="p")(logits, targets), LPR()(probs, targets)]
    assert torch.allclose(values[0], ldace_brute_force(logits, targets, "p_squared"), atol=1e-12)
    assert torch.allclose(values[1], ldace_brute_force(logits, targets, "p"), atol=1e-12)
    assert torch.allclose(values[2], lpr_brute_force(probs, targets), atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, DOUBLE])
def test_lpr_at_probabilities_near_0_and_1_matches_the_brute_force(dtype):
    probs64 = torch.tensor([[1e-35, 1 - 1e-7, 0.3], [0.5, 0.2, 0.9]], dtype=DOUBLE)
    targets = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 1.0]], dtype=DOUBLE)
    probs = probs64.to(dtype).requires_grad_(True)
    value = LPR()(probs, targets.to(dtype))
    value.backward()
    assert value.item() == pytest.approx(lpr_brute_force(probs.detach().double(), targets).item(), rel=1e-5)
    assert torch.isfinite(probs.grad).all()


# ------------------------------------------------------------------------------------------------------------- CCL
def test_ccl_single_bin_is_the_gap_between_mean_prediction_and_prevalence():
    logits, targets = _data(n=20, t=4)
    probs = torch.sigmoid(logits)
    expected = sum(abs(probs[:, t].mean() - targets[:, t].mean()) for t in range(4)) / 4
    assert torch.allclose(CanonicalCalibrationLoss()(probs, targets), expected, atol=1e-12)


def test_ccl_binned_equals_a_brute_force_loop():
    logits, targets = _data(n=40, t=3, scale=2.0)
    probs = torch.sigmoid(logits)
    probs[0, 0] = 1.0  # the closed last bin
    n_bins = 4
    total = 0.0
    for t in range(3):
        for b in range(n_bins):
            lo, hi = b / n_bins, (b + 1) / n_bins
            inside = (probs[:, t] >= lo) & ((probs[:, t] < hi) | ((b == n_bins - 1) & (probs[:, t] == 1.0)))
            total += abs(float((probs[inside, t] - targets[inside, t]).sum())) / 40
    assert CanonicalCalibrationLoss(n_bins=n_bins)(probs, targets).item() == pytest.approx(total / 3, abs=1e-12)
    with pytest.raises(ValueError):
        CanonicalCalibrationLoss(n_bins=0)


def test_ldace_with_ccl_is_ldace_plus_ccl_on_p_squared():
    logits, targets = _data(n=10, t=4)
    combined = LDACEWithCCL()(logits, targets)
    expected = LDACE()(logits, targets) + CanonicalCalibrationLoss()(torch.sigmoid(logits) ** 2, targets)
    assert torch.allclose(combined, expected, atol=1e-12)
    assert torch.allclose(LDACEWithCCL().predict_proba(logits), torch.sigmoid(logits) ** 2)


# --------------------------------------------------------------------------------------------- numerics, precision
ALL_LOSSES = {
    "bce": BCE(),
    "focal": AsymmetricFocal(gamma_pos=1.0, gamma_neg=4.0),
    "focal_small_gamma": AsymmetricFocal(gamma_pos=0.3, gamma_neg=0.5),
    "asl": ASL(),
    "asl_small_gamma": ASL(gamma_pos=0.5, gamma_neg=0.5, margin=0.1),
    "spa": SPA(),
    "spa_steep": SPA(zeta_pos=0.5, k_pos=4.0, b_pos=-2.0, zeta_neg=9.0, k_neg=7.0, b_neg=3.0),
    "bce_lpr": Composite(BCE(), [(1.0, LPR())]),
    "spa_lpr": Composite(SPA(), [(1.0, LPR())]),
    "ldace": LDACE(),
    "ldace_p": LDACE(diagonal="p"),
    "ldace_ccl": LDACEWithCCL(n_bins=1),
    "ldace_ccl_binned": LDACEWithCCL(n_bins=10),
}


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_finite_value_gradient_and_probabilities_at_extreme_logits(name):
    loss = ALL_LOSSES[name]
    logits = torch.tensor([[1e4, -1e4, 1e4, -1e4, 0.0, 30.0], [-1e4, 1e4, 1e4, -1e4, -30.0, 5.0]])
    targets = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]])
    value, grad = _grad(loss, logits, targets)
    assert value.dtype == torch.float32
    assert torch.isfinite(value) and torch.isfinite(grad).all()
    probs = loss.predict_proba(logits)
    assert torch.isfinite(probs).all() and bool(((probs >= 0) & (probs <= 1)).all())


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_half_precision_inputs_and_bf16_autocast_are_safe(name):
    loss = ALL_LOSSES[name]
    logits, targets = _data(n=16, t=6, scale=8.0, dtype=torch.float32)
    rounded = logits.to(torch.bfloat16).float()
    reference = loss(rounded, targets)
    x = logits.to(torch.bfloat16).requires_grad_(True)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        value = loss(x, targets)
    value.backward()
    assert value.dtype == torch.float32 and torch.isfinite(value) and torch.isfinite(x.grad.float()).all()
    assert torch.allclose(value, reference, rtol=1e-5, atol=1e-6)
    half = logits.half().requires_grad_(True)
    half_value = loss(half, targets)
    half_value.backward()
    assert torch.isfinite(half_value) and torch.isfinite(half.grad.float()).all()


def test_asl_is_finite_for_large_float16_logits():
    """The reference ASL evaluates log(clamp(p, eps)) in the input dtype: eps = 1e-8 underflows in float16."""
    raw = [[-20.0, 12.0, -12.0, 65000.0]]
    targets = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    reference_logits = torch.tensor(raw, dtype=torch.float16, requires_grad=True)
    reference = ridnik_asl_reference(reference_logits, targets.half(), 4.0, 0.0, 0.05)
    reference.backward()
    assert not torch.isfinite(reference) and not torch.isfinite(reference_logits.grad).all()
    logits = torch.tensor(raw, dtype=torch.float16, requires_grad=True)
    value = ASL()(logits, targets)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(logits.grad.float()).all()
    assert value.item() == pytest.approx(ASL()(torch.tensor(raw, dtype=DOUBLE), targets.double()).item(), rel=1e-6)


@pytest.mark.parametrize("name", ["bce", "focal", "focal_small_gamma", "asl", "spa", "spa_steep", "ldace", "ldace_p"])
def test_gradcheck_float64(name):
    logits, targets = _data(n=3, t=4, scale=2.0)
    x = logits.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: ALL_LOSSES[name](z, targets), (x,))


@pytest.mark.parametrize("regulariser", [LPR(), CanonicalCalibrationLoss()])
def test_gradcheck_float64_regularisers(regulariser):
    logits, targets = _data(n=5, t=4, scale=1.5)
    probs = torch.sigmoid(logits).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: regulariser(p, targets), (probs,))


def test_bad_inputs_raise_clear_errors():
    logits, targets = _data()
    with pytest.raises(ValueError, match="same"):
        BCE()(logits, targets[:, :2])
    for bad in (targets * 0.5, targets + 1.0, -targets, targets.masked_fill(targets == 0, float("nan"))):
        with pytest.raises(ValueError, match="0 or 1"):
            SPA()(logits, bad)
    with pytest.raises(ValueError, match="0 or 1"):
        LDACE()(logits, targets.long() * 2)
    assert torch.allclose(BCE()(logits, targets.bool()), BCE()(logits, targets))
    assert torch.allclose(LDACE()(logits, targets.long()), LDACE()(logits, targets))
    with pytest.raises(ValueError, match="shape"):
        LDACE()(logits.reshape(-1), targets.reshape(-1))


def test_composite_rejects_weights_that_are_not_finite_non_negative_numbers():
    for weight in (float("nan"), float("inf"), -0.5, True, "1"):
        with pytest.raises(ValueError, match="regulariser weight"):
            Composite(BCE(), [(weight, LPR())])


def test_composite_calls_the_regularisers_penalty_without_rechecking_inputs():
    """Composite skips a regulariser's input checks (the base loss checked the target and produced the
    probabilities); called directly, the regulariser still checks them."""

    class CountingLPR(LPR):
        checks = 0

        def forward(self, probs, targets):
            CountingLPR.checks += 1
            return super().forward(probs, targets)

    logits, targets = _data(n=6, t=5)
    regulariser = CountingLPR()
    total = Composite(BCE(), [(0.5, regulariser)])(logits, targets)
    assert CountingLPR.checks == 0
    expected = BCE()(logits, targets) + 0.5 * regulariser(torch.sigmoid(logits), targets)
    assert CountingLPR.checks == 1 and torch.allclose(total, expected, atol=1e-12)
    with pytest.raises(ValueError, match="probs"):
        regulariser(logits, targets)


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_empty_batches_and_non_finite_logits_raise_clearly(name):
    """Issue 10 #12 and #14: empty batches gave NaN (LDACE + CCL raised its own error) and a NaN logit made
    LDACEWithCCL(n_bins=5) raise IndexError."""
    loss = ALL_LOSSES[name]
    with pytest.raises(ValueError, match="empty batch"):
        loss(torch.zeros(0, 6), torch.zeros(0, 6))
    logits, targets = _data(n=5, t=6)
    for bad in (math.inf, -math.inf, math.nan):
        corrupted = logits.clone()
        corrupted[2, 3] = bad
        with pytest.raises(ValueError, match="not finite"):
            loss(corrupted, targets)


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_multilabel_predict_proba_refuses_non_finite_logits_like_multiclass(name):
    """Issue 18 #9: predict_proba returned NaN for a NaN logit and 1.0 (or 0) for ±inf, where the multi-class
    losses raise; a non-finite logit means a diverged run, so every probability read-out raises the same error."""
    from helpers.losses.base import NonFiniteError

    loss = ALL_LOSSES[name]
    logits, _ = _data(n=5, t=6)
    for bad in (math.inf, -math.inf, math.nan):
        corrupted = logits.clone()
        corrupted[2, 3] = bad
        with pytest.raises(NonFiniteError, match="not finite"):
            loss.predict_proba(corrupted)
    corrupted = logits.clone()
    corrupted[0, 0] = math.nan
    with pytest.raises(NonFiniteError, match="not finite"):
        SPA().predict_log_proba(corrupted)
    with pytest.raises(NonFiniteError, match="not finite"):
        ASL().recovered_proba(corrupted)


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_multilabel_losses_accept_numpy_arrays_like_the_metrics(name):
    """Issue 18 #10: numpy logits failed with "isfinite(): argument 'input' must be Tensor"; every loss, its
    predict_proba and the regulariser terms take numpy arrays as the metrics do (converted, the same value)."""
    loss = ALL_LOSSES[name]
    logits, targets = _data(n=6, t=5)
    expected = loss(logits, targets)
    torch.testing.assert_close(loss(logits.numpy(), targets.numpy()), expected)
    torch.testing.assert_close(loss(logits.numpy(), targets.numpy().astype(bool)), expected)
    torch.testing.assert_close(loss.predict_proba(logits.numpy()), loss.predict_proba(logits))
    with pytest.raises(TypeError, match=r"logits must be a torch\.Tensor or numpy array, got str"):
        loss("0.5", targets)


def test_multilabel_regularisers_accept_numpy_arrays():
    logits, targets = _data(n=6, t=5)
    probs = torch.sigmoid(logits)
    for regulariser in (LPR(), CanonicalCalibrationLoss(), CanonicalCalibrationLoss(n_bins=4)):
        torch.testing.assert_close(regulariser(probs.numpy(), targets.numpy()), regulariser(probs, targets))
    torch.testing.assert_close(SPA().predict_log_proba(logits.numpy()), SPA().predict_log_proba(logits))
    torch.testing.assert_close(ASL().recovered_proba(logits.numpy()), ASL().recovered_proba(logits))


def test_the_loss_modules_maps_accept_numpy_arrays_too():
    """Issue 18 #10, the functions beside the losses: φ recovery and the printed SPA link convert numpy input."""
    logits, _ = _data(n=6, t=5)
    probs = torch.sigmoid(logits)
    torch.testing.assert_close(phi_recovery(probs.numpy(), 1.0, 4.0, 0.05), phi_recovery(probs, 1.0, 4.0, 0.05))
    torch.testing.assert_close(spa_link_as_printed(logits.numpy()), spa_link_as_printed(logits))
    with pytest.raises(TypeError, match="probs must be a torch.Tensor or numpy array"):
        phi_recovery("0.5", 1.0, 4.0)
