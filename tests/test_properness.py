"""Tests for helpers.losses.properness: measured strict properness of the multi-label losses (SPA paper sec. 3.3)."""

from __future__ import annotations

import itertools
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
    Composite,
    conditional_risk,
    conditional_risk_minimiser,
    detached_recovery,
    independent_label_distribution,
    joint_risk_minimiser,
    partial_losses,
    phi_recovery,
    properness,
)

ETA = torch.linspace(0.01, 0.99, 99, dtype=torch.float64)


def test_bce_recovers_eta_and_the_minimiser_is_the_logit():
    result = conditional_risk_minimiser(BCE(), ETA)
    assert torch.allclose(result.proba, ETA, atol=1e-4)
    assert torch.allclose(result.logits, torch.log(ETA / (1 - ETA)), atol=1e-5)
    assert not result.at_boundary.any()


def test_spa_with_its_link_recovers_eta_for_random_valid_hyper_parameters():
    rng = torch.Generator().manual_seed(1)
    for _ in range(5):
        u = torch.rand(6, generator=rng, dtype=torch.float64)
        params = dict(
            zeta_pos=0.2 + 9.8 * u[0].item(),
            k_pos=0.2 + 7.8 * u[1].item(),
            b_pos=-3 + 6 * u[2].item(),
            zeta_neg=0.2 + 9.8 * u[3].item(),
            k_neg=0.2 + 7.8 * u[4].item(),
            b_neg=-3 + 6 * u[5].item(),
        )
        result = conditional_risk_minimiser(SPA(**params), ETA, logit_range=(-200.0, 200.0))
        assert not result.at_boundary.any(), params
        assert torch.allclose(result.proba, ETA, atol=1e-4), params


def test_spa_with_the_sigmoid_instead_of_its_link_is_not_calibrated():
    spa = SPA()  # paper default (1, 1, 0, 5, 3, 1)
    result = conditional_risk_minimiser(spa, ETA)
    assert (torch.sigmoid(result.logits) - ETA).abs().max() > 0.05


def test_focal_is_not_recovered_but_phi_of_its_minimiser_is():
    for gamma_pos, gamma_neg in [(1.0, 4.0), (2.0, 2.0), (0.0, 4.0)]:
        result = conditional_risk_minimiser(AsymmetricFocal(gamma_pos=gamma_pos, gamma_neg=gamma_neg), ETA)
        assert (result.proba - ETA).abs().max() > 0.05
        recovered = phi_recovery(result.proba, gamma_pos=gamma_pos, gamma_neg=gamma_neg, margin=0.0)
        assert torch.allclose(recovered, ETA, atol=1e-4)


def test_focal_with_zero_gamma_has_the_bce_minimiser():
    focal = conditional_risk_minimiser(AsymmetricFocal(gamma_pos=0.0, gamma_neg=0.0), ETA)
    bce = conditional_risk_minimiser(BCE(), ETA)
    assert torch.allclose(focal.logits, bce.logits, atol=1e-6)


def test_asl_with_zero_margin_has_the_asymmetric_focal_minimiser():
    asl = conditional_risk_minimiser(ASL(gamma_pos=1.0, gamma_neg=4.0, margin=0.0), ETA)
    focal = conditional_risk_minimiser(AsymmetricFocal(gamma_pos=1.0, gamma_neg=4.0), ETA)
    assert torch.allclose(asl.logits, focal.logits, atol=1e-6)


def test_asl_with_margin_is_not_recovered_and_saturates_for_gamma_pos_zero():
    loss = ASL()  # reference defaults: γ⁺ = 0, γ⁻ = 4, m = 0.05
    result = conditional_risk_minimiser(loss, ETA)
    raw = torch.sigmoid(result.logits)
    assert (raw - ETA).abs().max() > 0.1
    # For η > 0 the minimiser lies above the margin: the flat part of ℓ₋ is never optimal.
    assert torch.all(raw > loss.margin)
    # Derived saturation: every η ≥ h(1 − m)/(1 + h(1 − m)) ≈ 0.9637 is minimised at p̂ → 1 (logit → +∞).
    saturation = phi_recovery(torch.tensor([1.0], dtype=torch.float64), 0.0, 4.0, 0.05).item()
    assert torch.equal(result.at_boundary, ETA > saturation)
    recovered = phi_recovery(raw, 0.0, 4.0, 0.05)
    inside = ~result.at_boundary
    assert torch.allclose(recovered[inside], ETA[inside], atol=1e-4)
    assert torch.all(recovered[~inside] < ETA[~inside] - 0.005)


def test_asl_with_margin_and_positive_gamma_pos_is_inverted_by_phi_on_its_range():
    result = conditional_risk_minimiser(ASL(gamma_pos=1.0, gamma_neg=4.0, margin=0.05), ETA)
    assert not result.at_boundary.any()
    assert (result.proba - ETA).abs().max() > 0.1
    assert torch.allclose(phi_recovery(result.proba, 1.0, 4.0, 0.05), ETA, atol=1e-4)


def test_ldace_single_label_case_recovers_eta_only_through_p_squared():
    """LDACE with T = 1 is BCE(p², y): its minimiser has p² = η, i.e. σ(v*) = √η."""
    eta = torch.linspace(0.05, 0.95, 7, dtype=torch.float64)
    loss = LDACE(diagonal="p_squared")
    v = torch.linspace(-6, 6, 13, dtype=torch.float64).reshape(-1, 1)
    loss_pos, loss_neg = partial_losses(loss, v)  # the T = 1 loss, one logit at a time
    assert torch.allclose(loss_pos.mean(), loss(v, torch.ones_like(v)), atol=1e-12)
    assert torch.allclose(loss_neg.mean(), loss(v, torch.zeros_like(v)), atol=1e-12)
    result = conditional_risk_minimiser(loss, eta)
    assert torch.allclose(result.proba, eta, atol=1e-4)
    assert torch.allclose(torch.sigmoid(result.logits), eta.sqrt(), atol=1e-4)


class _BCEWithoutPartialLosses(torch.nn.Module):
    """A loss exposing only forward/predict_proba, to exercise the generic (vmap) path."""

    def forward(self, logits, targets):
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)

    def predict_proba(self, logits):
        return torch.sigmoid(logits)


def test_losses_without_partial_losses_are_evaluated_per_logit_with_vmap():
    v = torch.linspace(-5, 5, 11, dtype=torch.float64)
    loss_pos, loss_neg = partial_losses(_BCEWithoutPartialLosses(), v)
    assert torch.allclose(loss_pos, torch.nn.functional.softplus(-v), atol=1e-12)
    assert torch.allclose(loss_neg, torch.nn.functional.softplus(v), atol=1e-12)
    eta = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64)
    assert torch.allclose(conditional_risk_minimiser(_BCEWithoutPartialLosses(), eta).proba, eta, atol=1e-6)


def test_conditional_risk_matrix_and_partial_losses():
    eta = torch.tensor([0.2, 0.7], dtype=torch.float64)
    v = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    risk = conditional_risk(BCE(), eta, v)
    p = torch.sigmoid(v)
    expected = -(eta[:, None] * torch.log(p)[None] + (1 - eta[:, None]) * torch.log(1 - p)[None])
    assert risk.shape == (2, 3) and torch.allclose(risk, expected, atol=1e-12)
    with pytest.raises(TypeError, match="Composite"):
        partial_losses(Composite(BCE(), [(1.0, LPR())]), v)
    with pytest.raises(ValueError):
        conditional_risk_minimiser(BCE(), [0.5, 1.5])


# ---------------------------------------------------------------------------------------------- joint minimiser
def test_independent_label_distribution():
    configs, weights = independent_label_distribution([0.2, 0.9])
    assert configs.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert torch.allclose(weights, torch.tensor([0.08, 0.72, 0.02, 0.18], dtype=torch.float64))


def test_bce_plus_lpr_stays_proper_for_independent_labels():
    eta = [0.1, 0.3, 0.7]
    configs, weights = independent_label_distribution(eta)
    result = joint_risk_minimiser(Composite(BCE(), [(1.0, LPR())]), configs, weights)
    assert torch.allclose(result.proba, torch.tensor(eta, dtype=torch.float64), atol=1e-5)


def dependent_pair():
    """P(11) = 0.3, P(10) = 0.3, P(01) = 0.05, P(00) = 0.35: marginals (0.6, 0.35), β = 0.3 / 0.35."""
    configs = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    weights = torch.tensor([0.35, 0.05, 0.3, 0.3], dtype=torch.float64)
    return configs, weights, torch.tensor([0.6, 0.35], dtype=torch.float64)


def test_lpr_pulls_the_marginals_when_labels_are_dependent():
    configs, weights, marginals = dependent_pair()
    bce = joint_risk_minimiser(BCE(), configs, weights)
    assert torch.allclose(bce.proba, marginals, atol=1e-6)
    with_lpr = joint_risk_minimiser(Composite(BCE(), [(1.0, LPR())]), configs, weights)
    assert (with_lpr.proba - marginals).abs().max() > 0.01
    # and the pair estimate moves towards the true β = 6/7 (the plug-in from the marginals is 0.736)
    p1, p2 = with_lpr.proba
    beta_hat = p1 * (1 - p2) / (p1 * (1 - p2) + p2 * (1 - p1))
    assert 0.3 * 0.65 / (0.3 * 0.65 + 0.35 * 0.4) < 0.736 < beta_hat < 6 / 7


def test_ldace_p_squared_reading_is_biased_even_for_independent_labels():
    """T = 2, η = (½, ½): minimise 2·BCE(s, ½) + BCE(s, ¼) over s = p² (symmetric): s = (2·½ + ¼)/3 = 5/12."""
    configs, weights = independent_label_distribution([0.5, 0.5])
    result = joint_risk_minimiser(LDACE(diagonal="p_squared"), configs, weights)
    assert torch.allclose(result.proba, torch.full((2,), 5 / 12, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(
        torch.sigmoid(result.logits), torch.full((2,), math.sqrt(5 / 12), dtype=torch.float64), atol=1e-6
    )


def test_ldace_p_reading_is_proper_for_independent_labels_only():
    eta = [0.1, 0.3, 0.7]
    configs, weights = independent_label_distribution(eta)
    result = joint_risk_minimiser(LDACE(diagonal="p"), configs, weights)
    assert torch.allclose(result.proba, torch.tensor(eta, dtype=torch.float64), atol=1e-5)
    configs, weights, marginals = dependent_pair()
    dependent = joint_risk_minimiser(LDACE(diagonal="p"), configs, weights)
    assert (dependent.proba - marginals).abs().max() > 0.01


def test_joint_minimiser_rejects_bad_distributions():
    configs, weights = independent_label_distribution([0.5, 0.5])
    with pytest.raises(ValueError, match="sum to 1"):
        joint_risk_minimiser(BCE(), configs, weights * 2)
    with pytest.raises(ValueError, match="0/1"):
        joint_risk_minimiser(BCE(), configs * 0.5, weights)


# --- lpr_population_minimiser (notebook 08: LPR's population bias) ---------------------------------------------
def _coupled_three_label_distribution():
    configs = torch.tensor(list(itertools.product([0.0, 1.0], repeat=3)), dtype=torch.float64)
    energy = (
        configs @ torch.tensor([-1.0, -0.3, 0.4], dtype=torch.float64)
        + 1.5 * configs[:, 0] * configs[:, 1]
        - 1.0 * configs[:, 1] * configs[:, 2]
    )
    weights = torch.softmax(energy, 0)
    marginals = (weights[:, None] * configs).sum(0)
    pairs = torch.einsum("k,ks,kt->st", weights, configs, configs)
    return configs, weights, marginals, pairs


@pytest.mark.parametrize("base", [BCE(), SPA()], ids=["BCE", "SPA"])
def test_lpr_population_minimiser_agrees_with_enumeration_on_coupled_labels(base):
    configs, weights, marginals, pairs = _coupled_three_label_distribution()
    found = properness.lpr_population_minimiser(base, 1.0, marginals[None], pairs[None])[0]
    enumerated = properness.joint_risk_minimiser(Composite(base, [(1.0, LPR())]), configs, weights).proba
    assert torch.allclose(found, enumerated, atol=1e-6)
    assert (found - marginals).abs().max() > 1e-3  # coupled labels: LPR moves the marginals


@pytest.mark.parametrize("base", [BCE(), SPA()], ids=["BCE", "SPA"])
def test_lpr_population_minimiser_is_proper_under_independence(base):
    eta = torch.tensor([[0.1, 0.3, 0.7, 0.02], [0.5, 0.9, 0.05, 0.2]], dtype=torch.float64)
    pairs = eta[:, :, None] * eta[:, None, :]
    pairs[:, range(4), range(4)] = eta
    found = properness.lpr_population_minimiser(base, 2.0, eta, pairs)
    assert torch.allclose(found, eta, atol=1e-8)


def test_lpr_population_minimiser_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="pair_posteriors must have shape"):
        properness.lpr_population_minimiser(BCE(), 1.0, torch.full((2, 3), 0.2), torch.zeros(2, 3, 2))


def _moments(configs, weights):
    return (configs * weights[:, None]).sum(0), torch.einsum("k,ki,kj->ij", weights, configs, configs)


@pytest.mark.parametrize("diagonal", ["p_squared", "p"])
def test_pairwise_risk_minimiser_agrees_with_the_enumerated_ldace_risk(diagonal):
    """LDACE's risk depends on y only through η and π = E[y yᵀ]: the moment-based minimiser must find what
    joint_risk_minimiser finds by evaluating the real loss on every label vector."""
    from helpers.losses import pairwise_risk_minimiser

    dependent = (
        torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=torch.float64),
        torch.tensor([0.3, 0.2, 0.15, 0.05, 0.3], dtype=torch.float64),
    )
    for configs, weights in (independent_label_distribution([0.1, 0.3, 0.7]), dependent):
        eta, pairs = _moments(configs, weights)
        expected = joint_risk_minimiser(LDACE(diagonal), configs, weights)
        found = pairwise_risk_minimiser(eta[None], pairs[None], diagonal)
        torch.testing.assert_close(found.proba[0], expected.proba, rtol=0, atol=1e-6)
        assert found.risk == pytest.approx(expected.risk, abs=1e-10)


def test_pairwise_risk_minimiser_reproduces_five_twelfths_and_the_p_reading_is_proper_under_independence():
    from helpers.losses import pairwise_risk_minimiser

    found = pairwise_risk_minimiser(torch.tensor([[0.5, 0.5]]), torch.tensor([[[0.5, 0.25], [0.25, 0.5]]]))
    torch.testing.assert_close(found.proba, torch.full((1, 2), 5 / 12, dtype=torch.float64), rtol=0, atol=1e-10)
    eta = torch.rand(50, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 0.98 + 0.01
    pairs = eta[:, :, None] * eta[:, None, :]
    proper = pairwise_risk_minimiser(eta, pairs, "p")
    torch.testing.assert_close(proper.proba, eta, rtol=0, atol=1e-9)
    assert (pairwise_risk_minimiser(eta, pairs, "p_squared").proba - eta).abs().max() > 0.05


def test_closed_form_ldace_gradient_and_hessian_match_autograd():
    from helpers.losses.properness import _ldace_gradient_and_hessian, pairwise_expected_ldace

    g = torch.Generator().manual_seed(1)
    eta = torch.rand(4, 5, dtype=torch.float64, generator=g) * 0.8 + 0.1
    pairs = eta[:, :, None] * eta[:, None, :] * (0.8 + 0.4 * torch.rand(4, 5, 5, dtype=torch.float64, generator=g))
    pairs = (pairs + pairs.transpose(1, 2)) / 2
    v = torch.randn(4, 5, dtype=torch.float64, generator=g)
    for diagonal in ("p_squared", "p"):
        grad, hess = _ldace_gradient_and_hessian(v, eta, pairs, diagonal)
        row_risk = lambda row, e, p, d=diagonal: pairwise_expected_ldace(row[None], e[None], p[None], d)[0]
        torch.testing.assert_close(grad, torch.func.vmap(torch.func.grad(row_risk))(v, eta, pairs))
        torch.testing.assert_close(hess, torch.func.vmap(torch.func.hessian(row_risk))(v, eta, pairs))


# --- weight functions (Savage/Schervish) and composite losses: notebook 07, section 7 -----------------------------
THRESHOLDS = torch.linspace(0.01, 0.99, 99, dtype=torch.float64)


def test_weight_functions_of_bce_brier_and_weighted_bce_are_the_textbook_ones():
    c = THRESHOLDS
    assert torch.allclose(properness.weight_function(BCE(), c), 1 / (c * (1 - c)), rtol=1e-9)
    assert torch.allclose(properness.weight_function(properness.BrierScore(), c), torch.full_like(c, 2.0), rtol=1e-9)
    zeta = 5.0
    weighted = SPA(1, 1, 0, zeta, 1, 0)  # weighted BCE: negatives weighted 1/ζ
    assert torch.allclose(properness.weight_function(weighted, c), 1 / (c * (1 - c) * (1 - c + zeta * c)), rtol=1e-9)
    v = torch.linspace(-6, 6, 121, dtype=torch.float64)
    assert torch.allclose(weighted.predict_proba(v), torch.sigmoid(v - math.log(zeta)), atol=1e-12)


def test_the_weight_function_rebuilds_the_partial_losses_of_spa():
    # ℓ₋(ψ(q)) − ℓ₋(ψ(q₀)) = ∫_{q₀}^{q} c w(c) dc: the representation, for the paper's default SPA
    loss = SPA()
    c = torch.linspace(0.02, 0.98, 4001, dtype=torch.float64)
    w = properness.weight_function(loss, c)
    integral = torch.cumulative_trapezoid(c * w, c)
    v = properness.inverse_link(loss, c)
    negative = partial_losses(loss, v.reshape(-1, 1))[1].reshape(-1)
    assert torch.allclose(integral, (negative - negative[0])[1:], rtol=1e-5, atol=1e-7)


def test_inverse_link_inverts_the_read_out_and_improper_losses_have_no_weight_function():
    q = THRESHOLDS
    assert torch.allclose(
        SPA().predict_proba(properness.inverse_link(SPA(), q).reshape(-1, 1)).reshape(-1), q, atol=1e-12
    )
    with pytest.raises(ValueError, match="not strictly proper"):
        properness.weight_function(AsymmetricFocal(0.0, 4.0), q)
    with pytest.raises(ValueError, match="strictly inside"):
        properness.inverse_link(BCE(), torch.tensor([0.0, 0.5]))


def test_gradient_masses_split_at_the_own_optimum_is_even_and_bce_weight_is_one():
    labels = torch.tensor([[1.0, 0.0, 1.0]] + [[0.0, 1.0, 1.0]] * 4 + [[0.0, 0.0, 0.0]] * 45, dtype=torch.float64)
    pi = labels.mean(0)
    for loss in (BCE(), AsymmetricFocal(0.0, 4.0), SPA()):
        own = conditional_risk_minimiser(loss, pi).logits.reshape(1, -1)
        assert properness.negative_share(loss, own, labels) == pytest.approx(0.5, abs=1e-6)
    positive, negative = properness.gradient_masses(BCE(), torch.zeros(1, 3), labels)
    assert torch.all(positive[labels == 0] == 0) and torch.all(negative[labels == 1] == 0)
    v = torch.linspace(-5, 5, 11, dtype=torch.float64)
    assert torch.allclose(properness.negative_gradient_weight(BCE(), v), torch.ones(11, dtype=torch.float64))
    focal = properness.negative_gradient_weight(AsymmetricFocal(0.0, 4.0), v)
    assert float(focal[0]) < 1e-3 and bool((focal[:6].diff() > 0).all())  # easy negatives down-weighted


# ------------------------------------------------------------------------ the stationary point of a detached weight
def _detached_root_by_finite_differences(eta, gamma_pos, gamma_neg, margin, h=1e-6):
    """Independent solve (numpy + scipy): the weight frozen at v0, the log terms differenced centrally at v0."""
    from scipy.optimize import brentq

    def sig(v):
        return 1.0 / (1.0 + math.exp(-v))

    def expected_gradient(v0):
        p0 = sig(v0)
        w_pos, w_neg = (1 - p0) ** gamma_pos, max(p0 - margin, 0.0) ** gamma_neg
        pos = lambda v: -math.log(sig(v))  # noqa: E731
        neg = lambda v: -math.log(1 - max(sig(v) - margin, 0.0))  # noqa: E731
        g_pos = w_pos * (pos(v0 + h) - pos(v0 - h)) / (2 * h)
        g_neg = w_neg * (neg(v0 + h) - neg(v0 - h)) / (2 * h)
        return eta * g_pos + (1 - eta) * g_neg

    return sig(brentq(expected_gradient, math.log(margin + 1e-3) if margin else -15.0, 15.0, xtol=1e-12))


ETA_FEW = torch.tensor([0.02, 0.1, 0.3, 0.5, 0.7, 0.9], dtype=torch.float64)


def test_stationary_points_coincide_with_eta_for_zero_gammas_both_ways():
    for detach in (False, True):
        result = properness.stationary_point(AsymmetricFocal(0.0, 0.0, detach_focusing_weight=detach), ETA_FEW)
        assert torch.allclose(result.proba, ETA_FEW, atol=1e-10) and not result.at_boundary.any()


@pytest.mark.parametrize("gamma_pos,gamma_neg,margin", [(0.0, 4.0, 0.05), (1.0, 4.0, 0.05), (0.0, 4.0, 0.0)])
def test_as_written_stationary_point_is_the_risk_minimiser_and_phi_recovers_it(gamma_pos, gamma_neg, margin):
    loss = ASL(gamma_pos, gamma_neg, margin)
    stationary = properness.stationary_point(loss, ETA_FEW)
    minimum = conditional_risk_minimiser(loss, ETA_FEW)
    assert torch.allclose(stationary.proba, minimum.proba, atol=1e-7)
    assert torch.allclose(phi_recovery(stationary.proba, gamma_pos, gamma_neg, margin), ETA_FEW, atol=1e-6)


@pytest.mark.parametrize("gamma_pos,gamma_neg,margin", [(0.0, 4.0, 0.05), (1.0, 4.0, 0.05), (1.0, 2.0, 0.0)])
def test_detached_stationary_point_matches_a_finite_difference_solve_and_differs_from_the_minimiser(
    gamma_pos, gamma_neg, margin
):
    detached = properness.stationary_point(ASL(gamma_pos, gamma_neg, margin, detach_focusing_weight=True), ETA_FEW)
    expected = [_detached_root_by_finite_differences(e, gamma_pos, gamma_neg, margin) for e in ETA_FEW.tolist()]
    assert torch.allclose(detached.proba, torch.tensor(expected, dtype=torch.float64), atol=1e-6)
    minimum = conditional_risk_minimiser(ASL(gamma_pos, gamma_neg, margin), ETA_FEW)
    assert (detached.proba - minimum.proba).abs().max() > 0.02  # training stops elsewhere
    # φ, derived for the minimiser, over-corrects the detached stopping point: it does not give η back
    assert (phi_recovery(detached.proba, gamma_pos, gamma_neg, margin) - ETA_FEW).abs().max() > 0.05


def test_gradient_implied_proba_has_the_closed_forms_both_ways():
    v = torch.linspace(-6.0, 6.0, 41, dtype=torch.float64)
    p = torch.sigmoid(v)
    detached = properness.gradient_implied_proba(AsymmetricFocal(1.0, 4.0, detach_focusing_weight=True), v)
    assert torch.allclose(detached, p**5 / (p**5 + (1 - p) ** 2), atol=1e-12)
    as_written = properness.gradient_implied_proba(AsymmetricFocal(1.0, 4.0), v)
    assert torch.allclose(as_written, phi_recovery(p, 1.0, 4.0), atol=1e-10)


def test_detached_asl_saturates_earlier_than_as_written():
    """γ⁺ = 0, m = 0.05, γ⁻ = 4: the detached field saturates at r/(1 + r), r = (1 − m)^γ⁻ / m (≈ 0.942);
    the minimiser at 0.9637 (phi_recovery's docstring)."""
    r = 0.95**4 / 0.05
    saturation = r / (1 + r)
    eta = torch.tensor([saturation - 0.01, saturation + 0.01], dtype=torch.float64)
    detached = properness.stationary_point(ASL(detach_focusing_weight=True), eta)
    assert detached.at_boundary.tolist() == [False, True]
    assert not properness.stationary_point(ASL(), eta).at_boundary.any()


@pytest.mark.parametrize("gamma_pos,gamma_neg,margin", [(0.0, 4.0, 0.05), (1.0, 4.0, 0.05), (1.0, 2.0, 0.0)])
def test_detached_recovery_is_the_detached_gradient_map_and_inverts_the_stationary_point(gamma_pos, gamma_neg, margin):
    loss = ASL(gamma_pos, gamma_neg, margin, detach_focusing_weight=True)
    v = torch.linspace(-8.0, 8.0, 81, dtype=torch.float64)
    implied = properness.gradient_implied_proba(loss, v)
    closed = detached_recovery(torch.sigmoid(v), gamma_pos, gamma_neg, margin)
    defined = torch.isfinite(implied)
    assert torch.allclose(closed[defined], implied[defined], atol=1e-10)
    stationary = properness.stationary_point(loss, ETA_FEW)
    assert torch.allclose(detached_recovery(stationary.proba, gamma_pos, gamma_neg, margin), ETA_FEW, atol=1e-6)
    assert torch.allclose(loss.recovered_proba(stationary.logits.reshape(-1, 1)).reshape(-1), ETA_FEW, atol=1e-6)
    assert not torch.allclose(
        ASL(gamma_pos, gamma_neg, margin).recovered_proba(v.reshape(-1, 1)), closed.reshape(-1, 1)
    )


def test_detached_recovery_saturation_and_ends():
    z = torch.tensor([0.0, 0.03, 1.0], dtype=torch.float64)
    out = detached_recovery(z, 0.0, 4.0, 0.05)
    assert out[0] == 0 and out[1] == 0
    assert out[2].item() == pytest.approx(0.95**4 / (0.95**4 + 0.05), rel=1e-12)
    assert detached_recovery(torch.tensor([1.0]), 1.0, 4.0, 0.05).item() == 1.0
    with pytest.raises(ValueError):
        detached_recovery(torch.tensor([1.5]), 0.0, 4.0)
