"""Tests for helpers.losses.multiclass: reductions to CE, independent formulas, numerics, input errors."""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.losses import (
    DCA,
    FLSD53,
    MDCA,
    Composite,
    CrossEntropy,
    DCARegulariser,
    FocalLoss,
    LabelSmoothing,
    LSPlus,
    MbLS,
    MDCARegulariser,
    MultiClassLoss,
    class_accuracy_from_predictions,
    class_frequencies,
    lsplus_soft_targets,
)

K = 5


def make_batch(n=32, k=K, scale=3.0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    logits = (scale * torch.randn(n, k, generator=g)).to(dtype)
    target = torch.randint(0, k, (n,), generator=g)
    return logits, target


def all_losses():
    return {
        "ce": CrossEntropy(),
        "ls": LabelSmoothing(0.1),
        "ls_prior": LabelSmoothing(0.2, prior=[0.4, 0.3, 0.1, 0.1, 0.1]),
        "focal": FocalLoss(3.0),
        "focal_half": FocalLoss(0.5),
        "flsd53": FLSD53(),
        "mbls": MbLS(),
        "lsplus": LSPlus([0.6, 0.9, 0.3, 1.0, 0.75]),
        "dca": DCA(beta=1.0),
        "mdca": MDCA(beta=1.0),
    }


# ---------------------------------------------------------------- reductions to cross-entropy


@pytest.mark.parametrize(
    "loss",
    [
        LabelSmoothing(0.0),
        LabelSmoothing(0.0, prior=[0.4, 0.3, 0.1, 0.1, 0.1]),
        FocalLoss(0.0),
        MbLS(margin=10.0, lam=0.0),
        MDCA(beta=0.0),
        DCA(beta=0.0),
        LSPlus(torch.ones(K)),
        LSPlus(torch.ones(K), alpha=1.0),
        CrossEntropy(),
    ],
    ids=["ls0", "ls0_prior", "focal0", "mbls0", "mdca0", "dca0", "lsplus1", "lsplus1_alpha1", "ce"],
)
def test_reductions_equal_cross_entropy(loss):
    logits, target = make_batch()
    logits.requires_grad_(True)
    value = loss(logits, target)
    ref = F.cross_entropy(logits, target)
    torch.testing.assert_close(value, ref, rtol=1e-6, atol=1e-6)
    (g,) = torch.autograd.grad(value, logits)
    (g_ref,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(g, g_ref, rtol=1e-5, atol=1e-7)


def test_mbls_margin_larger_than_all_distances_is_cross_entropy():
    logits, target = make_batch(scale=1.0)
    assert float(MbLS.logit_distances(logits).max()) < 50
    torch.testing.assert_close(MbLS(margin=50, lam=1.0)(logits, target), F.cross_entropy(logits, target))


# ---------------------------------------------------------------- label smoothing


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.5228, 1.0])
def test_label_smoothing_uniform_matches_torch(alpha):
    logits, target = make_batch()
    torch.testing.assert_close(
        LabelSmoothing(alpha)(logits, target), F.cross_entropy(logits, target, label_smoothing=alpha)
    )


def test_label_smoothing_prior_is_soft_target_cross_entropy_and_kl_form():
    logits, target = make_batch(dtype=torch.float64)
    prior = torch.tensor([0.4, 0.3, 0.1, 0.1, 0.1], dtype=torch.float64)
    alpha = 0.3
    soft = (1 - alpha) * F.one_hot(target, K).double() + alpha * prior
    log_p = torch.log(torch.softmax(logits, 1))
    direct = -(soft * log_p).sum(1).mean()
    value = LabelSmoothing(alpha, prior=prior)(logits, target)
    assert value.dtype == torch.float64
    torch.testing.assert_close(value, direct)
    # derivation in the docstring: (1 - a) CE + a KL(u || p) + a H(u)
    kl = (prior * (prior.log() - log_p)).sum(1).mean()
    entropy = -(prior * prior.log()).sum()
    kl_form = (1 - alpha) * F.cross_entropy(logits, target) + alpha * kl + alpha * entropy
    torch.testing.assert_close(value, kl_form)


def test_label_smoothing_value_conventions_of_the_mdca_and_lsplus_repositories():
    """The docstring's conversions: MDCA's LabelSmoothingLoss (true 1 − α′, others α′/(K − 1)) equals ours at
    α = α′K/(K − 1); the LS+ repository's (1 − α)·CE + α·KL(u ‖ p) is ours minus α log K, same gradient."""
    logits, target = make_batch(dtype=torch.float64)
    log_p = torch.log_softmax(logits, 1)
    alpha_mdca = 0.1
    true_dist = torch.full_like(log_p, alpha_mdca / (K - 1)).scatter_(1, target.unsqueeze(1), 1 - alpha_mdca)
    mdca_value = (-true_dist * log_p).sum(1).mean()
    torch.testing.assert_close(LabelSmoothing(alpha_mdca * K / (K - 1))(logits, target), mdca_value)
    assert abs(LabelSmoothing(alpha_mdca)(logits, target).item() - mdca_value.item()) > 1e-4

    alpha = 0.1
    x = logits.clone().requires_grad_(True)
    u = torch.full((K,), 1.0 / K, dtype=torch.float64)
    kl = (u * (u.log() - torch.log_softmax(x, 1))).sum(1).mean()
    lsplus_value = (1 - alpha) * F.cross_entropy(x, target) + alpha * kl
    ours = LabelSmoothing(alpha)(x, target)
    torch.testing.assert_close(ours - lsplus_value, torch.tensor(alpha * math.log(K), dtype=torch.float64))
    (g_ours,) = torch.autograd.grad(ours, x, retain_graph=True)
    (g_lsplus,) = torch.autograd.grad(lsplus_value, x)
    torch.testing.assert_close(g_ours, g_lsplus)


def test_class_frequencies():
    labels = torch.tensor([0, 0, 1, 3, 3, 3])
    torch.testing.assert_close(class_frequencies(labels, 4), torch.tensor([2, 1, 0, 3]) / 6.0)


# ---------------------------------------------------------------- focal / FLSD-53


def brute_force_focal(logits, target, gamma):
    total = 0.0
    for i in range(logits.shape[0]):
        p = math.exp(logits[i, target[i]]) / sum(math.exp(z) for z in logits[i].tolist())
        total += -((1 - p) ** gamma) * math.log(p)
    return total / logits.shape[0]


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0, 3.0, 5.0])
def test_focal_matches_brute_force(gamma):
    logits, target = make_batch(n=16, scale=2.0, dtype=torch.float64)
    value = FocalLoss(gamma)(logits, target)
    assert value.item() == pytest.approx(brute_force_focal(logits, target, gamma), rel=1e-10)


def logits_with_pt(pt_values, k=K):
    """Rows of logits whose softmax gives probability pt to class 0 and equal mass elsewhere."""
    pt = torch.as_tensor(pt_values, dtype=torch.float64)
    other = (1 - pt) / (k - 1)
    logits = torch.log(other).unsqueeze(1).repeat(1, k)
    logits[:, 0] = torch.log(pt)
    return logits, torch.zeros(len(pt_values), dtype=torch.long)


def test_flsd53_switches_gamma_at_pt_0_2():
    below, target = logits_with_pt([0.19999, 0.1, 0.01])
    above, _ = logits_with_pt([0.20001, 0.35, 0.9])
    torch.testing.assert_close(torch.softmax(below, 1)[:, 0], torch.tensor([0.19999, 0.1, 0.01], dtype=torch.float64))
    flsd = FLSD53()
    torch.testing.assert_close(flsd(below, target), FocalLoss(5.0)(below, target))
    torch.testing.assert_close(flsd(above, target), FocalLoss(3.0)(above, target))
    assert not torch.allclose(FocalLoss(5.0)(below, target), FocalLoss(3.0)(below, target))
    mixed = torch.cat([below, above])
    expected = (FocalLoss(5.0)(below, target) + FocalLoss(3.0)(above, target)) / 2
    torch.testing.assert_close(flsd(mixed, torch.cat([target, target])), expected)


def test_flsd53_gamma_is_constant_for_differentiation():
    logits, target = logits_with_pt([0.1, 0.6])
    logits.requires_grad_(True)
    (grad,) = torch.autograd.grad(FLSD53()(logits, target), logits)
    gamma = torch.tensor([5.0, 3.0], dtype=torch.float64)
    l2 = logits.detach().clone().requires_grad_(True)
    log_pt = F.log_softmax(l2, 1)[:, 0]
    ref = (-((1 - log_pt.exp()) ** gamma) * log_pt).mean()
    (grad_ref,) = torch.autograd.grad(ref, l2)
    torch.testing.assert_close(grad, grad_ref)


# ---------------------------------------------------------------- MbLS


def test_mbls_penalty_matches_brute_force_loop():
    logits, target = make_batch(n=12, k=4, scale=8.0, dtype=torch.float64)
    margin, lam = 3.0, 0.7
    penalty = 0.0
    for i in range(12):
        zmax = max(logits[i].tolist())
        for k in range(4):
            penalty += max(0.0, zmax - logits[i, k].item() - margin)
    penalty /= 12 * 4  # reference averages over all N x K entries
    assert penalty > 0
    expected = F.cross_entropy(logits, target).item() + lam * penalty
    assert MbLS(margin=margin, lam=lam)(logits, target).item() == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------- LS+


def test_lsplus_soft_targets_paper_example():
    # LS+ paper, after eq. (3): three classes, 60 % validation accuracy -> [0.6, 0.2, 0.2]
    v = lsplus_soft_targets([0.6, 0.9, 0.5])
    torch.testing.assert_close(v[0], torch.tensor([0.6, 0.2, 0.2]))
    torch.testing.assert_close(v[1], torch.tensor([0.05, 0.9, 0.05]))
    torch.testing.assert_close(v.sum(1), torch.ones(3))


def test_lsplus_loss_matches_formula():
    acc = [0.6, 0.9, 0.3, 1.0, 0.75]
    logits, target = make_batch(dtype=torch.float64)
    alpha = 0.5
    log_p = F.log_softmax(logits, 1)
    total = 0.0
    for i in range(logits.shape[0]):
        k = target[i].item()
        v = [acc[k] if j == k else (1 - acc[k]) / (K - 1) for j in range(K)]
        kl = sum(vj * (math.log(vj) - log_p[i, j].item()) for j, vj in enumerate(v) if vj > 0)
        total += (1 - alpha) * (-log_p[i, k].item()) + alpha * kl
    value = LSPlus(acc, alpha=alpha)(logits, target)
    assert value.item() == pytest.approx(total / logits.shape[0], rel=1e-6)


def test_lsplus_zero_accuracy_floored_to_uniform_with_warning():
    with pytest.warns(
        UserWarning, match=r"^LS\+: classes 0, 1 of 4 scored below chance \(1/4\) on the validation set"
    ) as w:
        v = lsplus_soft_targets([0.0, 0.1, 0.8, 0.5])
    assert "[" not in str(w[0].message) and "0.1" not in str(w[0].message)  # words, no list of accuracies
    torch.testing.assert_close(v[0], torch.full((4,), 0.25))  # never below uniform for the true class
    torch.testing.assert_close(v[1], torch.full((4,), 0.25))  # 0.1 < 1/4 is floored as well
    torch.testing.assert_close(v[2], torch.tensor([0.2 / 3, 0.2 / 3, 0.8, 0.2 / 3]))
    # literal eq. (3) on request: the true class gets target 0, loss stays finite
    v_literal = lsplus_soft_targets([0.0, 0.1, 0.8, 0.5], min_accuracy=0.0)
    torch.testing.assert_close(v_literal[0], torch.tensor([0.0, 1 / 3, 1 / 3, 1 / 3]))
    logits, _ = make_batch(n=4, k=4)
    value = LSPlus([0.0, 0.1, 0.8, 0.5], min_accuracy=0.0)(logits, torch.zeros(4, dtype=torch.long))
    assert torch.isfinite(value)


def test_class_accuracy_from_predictions_matches_sklearn():
    recall_score = pytest.importorskip("sklearn.metrics").recall_score
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 4, (200,), generator=g)
    probs = torch.softmax(torch.randn(200, 4, generator=g) + 2 * F.one_hot(labels, 4), 1)
    acc = class_accuracy_from_predictions(probs, labels, 4)
    ref = recall_score(labels.numpy(), probs.argmax(1).numpy(), average=None)
    torch.testing.assert_close(acc, torch.as_tensor(ref, dtype=torch.float32))
    torch.testing.assert_close(class_accuracy_from_predictions(probs.argmax(1), labels, 4), acc)


def test_class_accuracy_missing_class_raises_or_fills():
    labels = torch.tensor([0, 0, 1, 1])
    preds = torch.tensor([0, 1, 1, 1])
    with pytest.raises(ValueError, match="no validation sample"):
        class_accuracy_from_predictions(preds, labels, 3)
    acc = class_accuracy_from_predictions(preds, labels, 3, fill_missing=1 / 3)
    torch.testing.assert_close(acc, torch.tensor([0.5, 1.0, 1 / 3]))


# ---------------------------------------------------------------- DCA / MDCA


def test_mdca_and_dca_terms_match_brute_force():
    logits, target = make_batch(n=20, dtype=torch.float64)
    probs = torch.softmax(logits, 1)
    n = 20
    mdca = (
        sum(
            abs(sum(probs[i, k].item() for i in range(n)) / n - sum(int(target[i] == k) for i in range(n)) / n)
            for k in range(K)
        )
        / K
    )
    conf = sum(max(probs[i].tolist()) for i in range(n)) / n
    acc = sum(int(int(probs[i].argmax()) == int(target[i])) for i in range(n)) / n
    assert MDCARegulariser()(probs, target).item() == pytest.approx(mdca, rel=1e-12)
    assert DCARegulariser()(probs, target).item() == pytest.approx(abs(conf - acc), rel=1e-12)
    ce = F.cross_entropy(logits, target).item()
    assert MDCA(beta=2.0)(logits, target).item() == pytest.approx(ce + 2 * mdca, rel=1e-12)
    assert DCA(beta=3.0)(logits, target).item() == pytest.approx(ce + 3 * abs(conf - acc), rel=1e-12)


def test_mdca_on_other_base_equals_composite():
    logits, target = make_batch()
    loss = MDCA(beta=1.5, base=FocalLoss(3.0))
    comp = Composite(FocalLoss(3.0), [(1.5, MDCARegulariser())])
    torch.testing.assert_close(loss(logits, target), comp(logits, target))


# ---------------------------------------------------------------- numerics


@pytest.mark.parametrize("name", list(all_losses()))
def test_finite_value_and_gradient_at_extreme_logits(name):
    loss = all_losses()[name]
    logits = torch.tensor(
        [
            [1e4, -1e4, 0.0, 5e3, -5e3],
            [-1e4, 1e4, 1e4, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 1e4],
            [-1e4, -1e4, -1e4, -1e4, 1e4],
        ],
        requires_grad=True,
    )
    target = torch.tensor([0, 3, 4, 1])  # correct, wrong, correct, extremely wrong
    value = loss(logits, target)
    value.backward()
    assert torch.isfinite(value), name
    assert torch.isfinite(logits.grad).all(), name


@pytest.mark.parametrize("name", list(all_losses()))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_and_low_precision_inputs(name, dtype):
    loss = all_losses()[name]
    layer = torch.nn.Linear(8, K)
    x = torch.randn(16, 8) * 10
    target = torch.randint(0, K, (16,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = layer(x)
        assert logits.dtype == torch.bfloat16
        value = loss(logits, target)
    value.backward()
    assert value.dtype == torch.float32 and torch.isfinite(value)
    assert torch.isfinite(layer.weight.grad).all()
    # low-precision logits handed in directly are computed in float32 too
    low = (torch.randn(16, K) * 100).to(dtype)
    v_low = loss(low, target)
    torch.testing.assert_close(v_low, loss(low.float(), target))


@pytest.mark.parametrize("name", list(all_losses()))
def test_gradcheck_float64(name):
    loss = all_losses()[name]
    logits, target = make_batch(n=6, scale=2.0, seed=5, dtype=torch.float64)
    if name == "mbls":
        loss = MbLS(margin=1.5, lam=0.5)  # small margin so the penalty is active
        d = MbLS.logit_distances(logits)
        assert ((d - 1.5).abs() > 1e-3).all()
    logits.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: loss(z, target), (logits,), eps=1e-6, atol=1e-6)


def test_predict_proba_is_softmax():
    logits, _ = make_batch()
    for name, loss in all_losses().items():
        assert isinstance(loss, MultiClassLoss) and loss.task == "multi-class", name
        torch.testing.assert_close(loss.predict_proba(logits), torch.softmax(logits, 1))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "build",
    [
        lambda: LabelSmoothing(-0.1),
        lambda: LabelSmoothing(1.5),
        lambda: LabelSmoothing(0.1, prior=[0.5, 0.6]),
        lambda: LabelSmoothing(0.1, prior=[1.2, -0.2]),
        lambda: LabelSmoothing(0.1, prior=[[0.5, 0.5]]),
        lambda: FocalLoss(-1.0),
        lambda: FocalLoss(float("nan")),
        lambda: MbLS(margin=-1.0),
        lambda: MbLS(lam=-0.1),
        lambda: LSPlus([0.5, 1.2, 0.3]),
        lambda: LSPlus([0.5, float("nan"), 0.3]),
        lambda: LSPlus([0.5, 0.5], alpha=2.0),
        lambda: LSPlus([0.7]),
        lambda: DCA(beta=-1.0),
        lambda: MDCA(beta=float("inf")),
    ],
)
def test_bad_construction_raises(build):
    with pytest.raises(ValueError):
        build()


def test_bad_base_type_raises():
    class FakeMultiLabel(torch.nn.Module):
        task = "multi-label"

    with pytest.raises(TypeError, match="multi-class"):
        MDCA(beta=1.0, base=FakeMultiLabel())


@pytest.mark.parametrize("name", list(all_losses()))
def test_bad_inputs_raise(name):
    loss = all_losses()[name]
    logits, target = make_batch(n=4)
    with pytest.raises(ValueError, match="class indices"):
        loss(logits, torch.tensor([0, 1, 2, K]))
    with pytest.raises(ValueError, match="integer"):
        loss(logits, target.float())
    with pytest.raises(ValueError, match="shape"):
        loss(logits[0], target)
    with pytest.raises(ValueError):
        loss(logits, F.one_hot(target, K))


def test_class_count_mismatch_raises():
    logits, target = make_batch(n=4, k=3)
    with pytest.raises(ValueError, match="classes"):
        LabelSmoothing(0.1, prior=[0.2] * 5)(logits, target)
    with pytest.raises(ValueError, match="classes"):
        LSPlus([0.5] * 5)(logits, target)


def test_regularisers_called_directly_check_their_inputs():
    probs = torch.softmax(torch.randn(6, K), dim=1)
    for regulariser in (DCARegulariser(), MDCARegulariser()):
        with pytest.raises(ValueError, match="class indices"):
            regulariser(probs, torch.full((6,), K))
        with pytest.raises(ValueError, match="integer"):
            regulariser(probs, torch.zeros(6))
    assert isinstance(DCA(beta=2.0), Composite) and DCA(beta=2.0).beta == 2.0


# ---------------------------------------------------------------- issue 10: target dtypes, empty and non-finite


@pytest.mark.parametrize("name", list(all_losses()) + ["ccl_net", "mdca_composite"])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_every_integer_target_dtype_gives_the_int64_value_and_gradient(name, dtype):
    """Issue 10 #11: int32 targets raised a raw torch error (CE, MbLS, DCA, MDCA) and uint8 ones were read as a
    mask (LS, focal, FLSD-53, MDCA, LS+, CCL-Net)."""
    from helpers.losses import CCLNetLoss

    torch.manual_seed(0)
    extra = {
        "ccl_net": lambda: CCLNetLoss(8, K),
        "mdca_composite": lambda: Composite(FocalLoss(2.0), [(1.0, MDCARegulariser())]),
    }
    loss = extra[name]() if name in extra else all_losses()[name]
    logits, target = make_batch(n=12)
    logits.requires_grad_(True)
    expected = loss(logits, target)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    value = loss(logits, target.to(dtype))
    (grad,) = torch.autograd.grad(value, logits)
    torch.testing.assert_close(value, expected, rtol=0, atol=0)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=0)


def test_regularisers_called_directly_accept_every_integer_target_dtype():
    probs = torch.softmax(torch.randn(10, K, generator=torch.Generator().manual_seed(1)), dim=1)
    target = torch.arange(10) % K
    for regulariser in (DCARegulariser(), MDCARegulariser()):
        for dtype in (torch.int32, torch.uint8):
            torch.testing.assert_close(regulariser(probs, target.to(dtype)), regulariser(probs, target))


@pytest.mark.parametrize("name", list(all_losses()) + ["ccl_net"])
def test_empty_batches_and_non_finite_logits_raise_instead_of_returning_nan(name):
    """Issue 10 #12: every multi-class loss returned NaN on an empty batch and on infinite logits."""
    from helpers.losses import CCLNetLoss

    loss = CCLNetLoss(8, K) if name == "ccl_net" else all_losses()[name]
    with pytest.raises(ValueError, match="empty batch"):
        loss(torch.zeros(0, K), torch.zeros(0, dtype=torch.long))
    logits, target = make_batch(n=4)
    for bad in (math.inf, -math.inf, math.nan):
        corrupted = logits.clone()
        corrupted[1, 2] = bad
        with pytest.raises(ValueError, match="not finite"):
            loss(corrupted, target)
        with pytest.raises(FloatingPointError, match="not finite"):  # what a diverged training run sees
            loss(corrupted, target)
        with pytest.raises(ValueError, match="not finite"):
            loss.predict_proba(corrupted)


def test_predict_proba_of_an_infinite_logit_raises_instead_of_a_nan_row():
    with pytest.raises(ValueError, match=r"1 infinite"):
        CrossEntropy().predict_proba(torch.tensor([[math.inf, 0.0, 0.0, 0.0]]))
    assert torch.isfinite(CrossEntropy().predict_proba(torch.tensor([[1e4, 0.0, 0.0, 0.0]]))).all()


@pytest.mark.parametrize("name", list(all_losses()) + ["ccl_net", "dca_term", "mdca_term"])
def test_multiclass_losses_refuse_a_single_logit_column(name):
    """Issue 18 #7: a binary task passed as one logit column made every multi-class loss return exactly 0 (the
    softmax of one column is 1); the metrics and temperature scaling refuse K < 2, so the losses must too."""
    from helpers.losses import CCLNetLoss

    loss = {"ccl_net": CCLNetLoss(8, K), "dca_term": DCARegulariser(), "mdca_term": MDCARegulariser()}.get(
        name
    ) or all_losses()[name]
    one_column = torch.randn(6, 1, generator=torch.Generator().manual_seed(0))
    if name.endswith("_term"):
        one_column = torch.ones(6, 1)  # a regulariser takes probabilities
    with pytest.raises(ValueError, match="two columns"):
        loss(one_column, torch.zeros(6, dtype=torch.long))
    with pytest.raises(ValueError, match="K >= 2"):
        loss(torch.zeros(6, 0), torch.zeros(6, dtype=torch.long))
    if not name.endswith("_term"):
        with pytest.raises(ValueError, match="two columns"):
            loss.predict_proba(one_column)


def test_the_single_column_hint_gives_the_binary_softmax_of_the_sigmoid():
    """The message's recipe, torch.cat([zeros, z], 1), has softmax (1 − σ(z), σ(z)): the model's own binary
    probabilities, so cross-entropy on it is the binary cross-entropy of the single logit."""
    z = torch.randn(9, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"torch\.cat\(\[torch\.zeros_like\(z\), z\], dim=1\)"):
        CrossEntropy()(z, y)
    two_columns = torch.cat([torch.zeros_like(z), z], dim=1)
    torch.testing.assert_close(CrossEntropy()(two_columns, y), F.binary_cross_entropy_with_logits(z[:, 0], y.double()))


@pytest.mark.parametrize("name", list(all_losses()) + ["ccl_net", "dca_term", "mdca_term"])
def test_multiclass_losses_accept_numpy_arrays_like_the_metrics(name):
    """Issue 18 #10: numpy logits failed with "isfinite(): argument 'input' must be Tensor"; the losses now take
    numpy arrays as the metrics do (converted, the same value) and say clearly what else they cannot take."""
    from helpers.losses import CCLNetLoss

    torch.manual_seed(0)
    loss = {"ccl_net": CCLNetLoss(8, K), "dca_term": DCARegulariser(), "mdca_term": MDCARegulariser()}.get(
        name
    ) or all_losses()[name]
    logits, target = make_batch(n=8)
    if name.endswith("_term"):
        logits = torch.softmax(logits, dim=1)
    expected = loss(logits, target)
    torch.testing.assert_close(loss(logits.numpy(), target.numpy()), expected)
    torch.testing.assert_close(loss(logits, target.numpy().astype("int32")), expected)
    torch.testing.assert_close(loss(logits.double().numpy(), target), loss(logits.double(), target))
    if not name.endswith("_term"):
        torch.testing.assert_close(loss.predict_proba(logits.numpy()), loss.predict_proba(logits))
    argument = "probs" if name.endswith("_term") else "logits"
    with pytest.raises(TypeError, match=argument + r" must be a torch\.Tensor or numpy array, got str"):
        loss("0.5", target)
    with pytest.raises(TypeError, match="numeric"):
        loss(logits.numpy().astype(object), target)


def test_numpy_logits_keep_the_gradient_of_tensor_logits():
    """Converting is for arrays only: a tensor passes through unchanged, so its gradient still reaches it."""
    logits, target = make_batch(n=8)
    logits.requires_grad_(True)
    FocalLoss(2.0)(logits, target.numpy()).backward()
    assert logits.grad is not None and bool(logits.grad.abs().sum() > 0)


def test_class_accuracy_from_predictions_accepts_numpy_arrays():
    """Issue 18 #10, the LS+ helper beside the losses: numpy probabilities failed on ``argmax(dim=1)``."""
    logits, target = make_batch(n=40)
    expected = class_accuracy_from_predictions(logits, target, K)
    torch.testing.assert_close(class_accuracy_from_predictions(logits.numpy(), target.numpy(), K), expected)
    torch.testing.assert_close(class_accuracy_from_predictions(logits.argmax(1).numpy(), target, K), expected)
