"""Tests for helpers.losses.cclnet (CCL-Net, Wei et al. MICCAI 2020)."""

import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.losses import (
    CCLHead,
    CCLNetLoss,
    DictionaryFreezeRule,
    MultiClassLoss,
    class_correlation_loss,
    normalised_squared_distance,
    soft_labels_from_dictionary,
    uniform_smoothing_epsilon,
)

K = 4
D = 6
SMALL = dict(hidden_dims=(32, 32), embedding_dim=16)


def brute_fd(a, b):
    a = [x / math.sqrt(sum(y * y for y in a)) for x in a]
    b = [x / math.sqrt(sum(y * y for y in b)) for x in b]
    return sum((x - y) ** 2 for x, y in zip(a, b))


def equidistant_embeddings(k, b, dim=16):
    """k unit vectors with pairwise cosine rho = 1 - b/2, i.e. squared distance exactly b (0 < b <= 2)."""
    rho = 1 - b / 2
    emb = torch.zeros(k, dim, dtype=torch.float64)
    emb[:, :k] = math.sqrt(1 - rho) * torch.eye(k, dtype=torch.float64)
    emb[:, k] = math.sqrt(rho)
    return emb


class TinyBackbone(nn.Module):
    def __init__(self, in_dim=5, feature_dim=D, num_classes=K):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, feature_dim), nn.ReLU())
        self.classifier = nn.Linear(feature_dim, num_classes)
        self.feature_dim = feature_dim

    def features(self, x):
        return self.body(x)

    def forward(self, x):
        return self.classifier(self.features(x))


def clusters(n=64, k=K, dim=D, seed=0, spread=0.3):
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(k, dim, generator=g)
    y = torch.arange(n) % k
    return centres[y] + spread * torch.randn(n, dim, generator=g), y


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items() if torch.is_tensor(v)}


def assert_identical(before, module):
    after = {k: v for k, v in module.state_dict().items() if torch.is_tensor(v)}
    assert before.keys() == after.keys()
    for key in before:
        assert torch.equal(before[key], after[key]), key


# ---------------------------------------------------------------- eq. (1), eq. (2), Prop. S1


@pytest.mark.parametrize("k,b", [(7, 2.0), (4, 1.0), (5, 0.3)])
def test_proposition_s1_equidistant_embeddings_give_uniform_label_smoothing(k, b):
    emb = equidistant_embeddings(k, b)
    dist = normalised_squared_distance(emb, emb)
    torch.testing.assert_close(dist, b * (1 - torch.eye(k, dtype=torch.float64)))
    a = math.exp(-b)
    s = 1 + (k - 1) * a
    eps = k * a / s
    lsr = (1 - eps) * torch.eye(k, dtype=torch.float64) + eps / k  # uniform LSR, u(k) = 1/K
    torch.testing.assert_close(soft_labels_from_dictionary(emb), lsr)
    torch.testing.assert_close(
        soft_labels_from_dictionary(emb).diagonal(), torch.full((k,), 1 / s, dtype=torch.float64)
    )
    assert uniform_smoothing_epsilon(k, b) == pytest.approx(eps)


def test_proposition_s1_matches_paper_epsilon():
    # CCL-Net Table 1 footnote: for ISIC (K = 7) the collapsed soft labels equal LSR with eps = 0.5228
    assert uniform_smoothing_epsilon(7, 2.0) == pytest.approx(0.5228, abs=5e-5)


def test_loss_object_soft_labels_from_set_dictionary_follow_prop_s1():
    loss = CCLNetLoss(D, 7, **SMALL)
    with torch.no_grad():
        loss.head.dictionary.copy_(torch.eye(7, 16))  # orthonormal: squared distance exactly 2 = b
    eps = 0.5228
    expected = (1 - eps) * torch.eye(7) + eps / 7
    torch.testing.assert_close(loss.correlation_matrix(), expected, atol=1e-4, rtol=0)
    assert loss.mean_correct_class_probability() == pytest.approx(1 - eps + eps / 7, abs=1e-4)


def test_soft_label_rows_sum_to_one_with_own_class_largest():
    g = torch.Generator().manual_seed(1)
    dictionary = torch.randn(6, 8, generator=g)
    p = soft_labels_from_dictionary(dictionary)
    torch.testing.assert_close(p.sum(1), torch.ones(6))
    assert torch.equal(p.argmax(1), torch.arange(6))
    # entry [k, j] is the brute-force eq. (2) value p_{j,k}
    for k in range(6):
        z = [math.exp(-brute_fd(dictionary[j].tolist(), dictionary[k].tolist())) for j in range(6)]
        for j in range(6):
            assert p[k, j].item() == pytest.approx(z[j] / sum(z), rel=1e-5)


def test_class_correlation_loss_matches_brute_force():
    g = torch.Generator().manual_seed(2)
    dictionary = torch.randn(5, 8, generator=g, dtype=torch.float64)
    dictionary[1] = -dictionary[0] + 0.1  # make some pairs farther apart than b
    for b in (2.0, 1.0, 0.5):
        total = 0.0
        for k1 in range(5):
            for k2 in range(5):
                total += max(0.0, brute_fd(dictionary[k1].tolist(), dictionary[k2].tolist()) - b)
        expected = total / 25
        assert expected > 0
        assert class_correlation_loss(dictionary, b).item() == pytest.approx(expected, rel=1e-10)


def test_head_architecture_is_as_in_paper():
    head = CCLHead(feature_dim=20, num_classes=7)
    kinds = [type(m).__name__ for m in head.embed]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU", "Linear"]
    widths = [m.out_features for m in head.embed if isinstance(m, nn.Linear)]
    assert widths == [1024, 1024, 512]
    assert head.dictionary.shape == (7, 512)


def test_ccl_loss_matches_brute_force():
    torch.manual_seed(0)
    head = CCLHead(D, K, **SMALL).double().eval()
    x, y = clusters(n=8)
    x = x.double()
    e = head.embed(x)
    total = 0.0
    for i in range(8):
        d = [brute_fd(e[i].tolist(), head.dictionary[k].tolist()) for k in range(K)]
        log_z = math.log(sum(math.exp(-dk) for dk in d))
        total += d[y[i]] + log_z  # -log softmax(-d)_y
    l_cc = class_correlation_loss(head.dictionary, 2.0).item()
    expected = total / 8 + 10.0 * l_cc
    assert head.loss(x, y, alpha_cc=10.0, b=2.0).item() == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------- eq. (3)


def test_backbone_loss_is_ce_plus_kl_to_soft_labels():
    torch.manual_seed(0)
    loss = CCLNetLoss(D, K, **SMALL)
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(10, K, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (10,), generator=g)
    p_sl = soft_labels_from_dictionary(loss.head.dictionary.detach().double())
    total = 0.0
    for i in range(10):
        q = torch.softmax(logits[i], 0)
        ce = -math.log(q[y[i]].item())
        kl = sum(p_sl[y[i], j].item() * math.log(p_sl[y[i], j].item() / q[j].item()) for j in range(K))
        total += ce + kl
    assert loss(logits, y).item() == pytest.approx(total / 10, rel=1e-5)


def test_backbone_loss_sends_no_gradient_into_the_head():
    loss = CCLNetLoss(D, K, **SMALL)
    logits = torch.randn(8, K, requires_grad=True)
    value = loss(logits, torch.arange(8) % K)
    value.backward()
    assert torch.isfinite(logits.grad).all()
    assert all(p.grad is None for p in loss.parameters())
    assert loss.joint_parameters() == []
    assert isinstance(loss, MultiClassLoss) and loss.task == "multi-class"


def test_finite_values_and_gradients_at_extremes():
    loss = CCLNetLoss(D, K, **SMALL)
    logits = torch.tensor([[1e4, -1e4, 0.0, 0.0], [-1e4, 1e4, 0.0, 0.0]], requires_grad=True)
    value = loss(logits, torch.tensor([1, 1]))
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(logits.grad).all()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        v16 = loss(logits.to(torch.bfloat16), torch.tensor([0, 1]))
    assert v16.dtype == torch.float32 and torch.isfinite(v16)
    # head step with huge and zero features: finite everywhere
    feats = torch.cat([torch.full((2, D), 1e4), torch.zeros(2, D), torch.randn(4, D)])
    l_ccl = loss.after_step(feats, torch.arange(8) % K)
    assert torch.isfinite(l_ccl)
    assert all(torch.isfinite(p).all() for p in loss.parameters())


def test_gradcheck_head_loss_float64():
    torch.manual_seed(0)
    head = CCLHead(3, 3, hidden_dims=(5,), embedding_dim=4).double().eval()
    x = torch.randn(4, 3, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0])
    dictionary = head.dictionary.detach().clone().requires_grad_(True)

    def f(feats, dic):
        return F.cross_entropy(-normalised_squared_distance(head.embed(feats), dic), y) + 10 * class_correlation_loss(
            dic, 0.5
        )

    assert torch.autograd.gradcheck(f, (x.clone().requires_grad_(True), dictionary), eps=1e-6, atol=1e-5)


# ---------------------------------------------------------------- alternating updates (Algorithm 1)


def test_alternating_step_leaves_frozen_parameters_bit_identical():
    torch.manual_seed(0)
    model = TinyBackbone()
    loss = CCLNetLoss(D, K, lr_ccl=1e-2, **SMALL)
    model_opt = torch.optim.SGD(list(model.parameters()) + loss.joint_parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 5), torch.arange(16) % K

    for _ in range(2):
        # line 6: backbone + classifier step on L_cls, CCL head frozen
        head_before = snapshot(loss.head)
        model_before = snapshot(model)
        model_opt.zero_grad()
        features = model.features(x)
        value = loss(model.classifier(features), y)
        value.backward()
        model_opt.step()
        assert_identical(head_before, loss.head)  # parameters AND batch-norm buffers
        assert any(not torch.equal(model_before[k], v) for k, v in model.state_dict().items())

        # line 7: head + dictionary step on L_CCL, backbone frozen
        model_before = snapshot(model)
        head_before = snapshot(loss.head)
        loss.after_step(features.detach(), y)
        assert_identical(model_before, model)
        assert not torch.equal(head_before["dictionary"], loss.head.dictionary)
        assert not torch.equal(head_before["embed.0.weight"], loss.head.embed[0].weight)


def test_after_step_ignores_graph_attached_features():
    model = TinyBackbone()
    loss = CCLNetLoss(D, K, lr_ccl=1e-2, **SMALL)
    before = snapshot(model)
    loss.after_step(model.features(torch.randn(8, 5)), torch.arange(8) % K)  # not detached by the caller
    assert all(p.grad is None for p in model.parameters())
    assert_identical(before, model)


def test_head_training_on_separable_features_learns_classes():
    torch.manual_seed(0)
    loss = CCLNetLoss(D, K, lr_ccl=1e-2, optimizer="adam", **SMALL)
    x, y = clusters(n=128)
    first = loss.after_step(x, y).item()
    for _ in range(60):
        last = loss.after_step(x, y).item()
    assert last < first
    assert (loss.ccl_proba(x).argmax(1) == y).float().mean() > 0.95
    p = loss.correlation_matrix()
    torch.testing.assert_close(p.sum(1), torch.ones(K))
    assert torch.equal(p.argmax(1), torch.arange(K))


# ---------------------------------------------------------------- convergence / freeze rule


def run_rule(values, patience):
    rule = DictionaryFreezeRule(patience=patience)
    return [rule.update(v, epoch) for epoch, v in enumerate(values, start=1)], rule


def test_freeze_rule_fires_exactly_after_patience_epochs_without_drop():
    # drops at epochs 1-3; 4..7 do not drop below 0.50 (epoch 5 equals it: not a drop)
    fired, rule = run_rule([0.60, 0.55, 0.50, 0.52, 0.50, 0.51, 0.53, 0.40], patience=4)
    assert fired == [False] * 6 + [True, False]
    assert rule.fired_epoch == 7 and rule.best_epoch == 3 and rule.best == 0.50


def test_freeze_rule_resets_on_a_new_minimum():
    fired, rule = run_rule([0.6, 0.5, 0.55, 0.56, 0.49, 0.5, 0.5, 0.5, 0.5], patience=3)
    assert fired.index(True) == 7 and sum(fired) == 1  # epoch 8: three epochs after the drop at 5
    assert rule.best_epoch == 5


def test_freeze_rule_never_fires_while_dropping():
    fired, _ = run_rule([1.0 - 0.01 * t for t in range(30)], patience=10)
    assert not any(fired)


def test_freeze_rule_min_delta():
    rule = DictionaryFreezeRule(patience=2, min_delta=0.05)
    assert [rule.update(v) for v in (0.6, 0.58, 0.57)] == [False, False, True]  # drops < 0.05 do not count


def test_loss_freezes_dictionary_and_writes_history():
    torch.manual_seed(0)
    loss = CCLNetLoss(D, K, lr_ccl=1e-2, freeze_patience=2, **SMALL)
    x, y = clusters(n=32)
    history = []
    for epoch in range(1, 4):
        history.append({"epoch": epoch, "train_loss": 1.0})
        # no head step: p-bar is constant, so it drops only at epoch 1 (from +inf)
        record = loss.on_epoch_end(epoch, history)
        assert history[-1]["ccl_mean_correct_prob"] == record["ccl_mean_correct_prob"]
        assert history[-1]["ccl_dictionary_frozen"] == (epoch == 3)
        assert loss.dictionary_frozen == (epoch == 3)
    assert loss.frozen_epoch == 3 and loss.converged_epoch == 1
    assert math.isnan(history[0]["ccl_loss"])
    # dictionary stays put from now on; the rest of the head keeps learning
    dict_before = loss.head.dictionary.detach().clone()
    w_before = loss.head.embed[0].weight.detach().clone()
    loss.after_step(x, y)
    assert torch.equal(dict_before, loss.head.dictionary)
    assert not torch.equal(w_before, loss.head.embed[0].weight)
    epoch_dict = {"epoch": 4}
    loss.on_epoch_end(4, epoch_dict)
    assert epoch_dict["ccl_dictionary_frozen"] and not math.isnan(epoch_dict["ccl_loss"])
    assert 0 <= epoch_dict["ccl_accuracy"] <= 1


def test_state_dict_round_trip_including_optimizer_and_freeze_state():
    torch.manual_seed(0)
    args = dict(feature_dim=D, num_classes=K, lr_ccl=1e-2, freeze_patience=1, **SMALL)
    a = CCLNetLoss(**args)
    x, y = clusters(n=32)
    for _ in range(3):
        a.after_step(x, y)
    a.on_epoch_end(1)
    a.on_epoch_end(2)
    assert a.dictionary_frozen
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(123)
    b = CCLNetLoss(**args)
    b.load_state_dict(torch.load(buffer, weights_only=True))
    assert b.dictionary_frozen and b.frozen_epoch == 2 and len(b.epoch_log) == 2
    torch.testing.assert_close(b.correlation_matrix(), a.correlation_matrix(), rtol=0, atol=0)
    a.after_step(x, y)
    b.after_step(x, y)  # identical only if the momentum buffers were restored too
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name


def test_lr_decay_milestones():
    loss = CCLNetLoss(D, K, lr_ccl=1e-2, lr_decay_epochs=(2,), **SMALL)
    loss.on_epoch_end(1)
    assert loss.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2)
    loss.on_epoch_end(2)
    assert loss.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr_ccl=0.0),
        dict(alpha_cc=-1.0),
        dict(b=float("nan")),
        dict(freeze_patience=0),
        dict(optimizer="rmsprop"),
        dict(grad_clip=-1.0),
        dict(hidden_dims=(0,)),
    ],
)
def test_bad_construction_raises(kwargs):
    with pytest.raises(ValueError):
        CCLNetLoss(D, K, **{**SMALL, **kwargs})


def test_bad_inputs_raise():
    loss = CCLNetLoss(D, K, **SMALL)
    with pytest.raises(ValueError, match="classes"):
        loss(torch.randn(4, K + 1), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="class indices"):
        loss(torch.randn(4, K), torch.full((4,), K))
    with pytest.raises(ValueError, match="features must have shape"):
        loss.after_step(torch.randn(4, D + 1), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError):
        loss.after_step(torch.randn(4, D), torch.zeros(3, dtype=torch.long))
    with pytest.warns(RuntimeWarning, match="one sample"):
        assert loss.after_step(torch.randn(1, D), torch.zeros(1, dtype=torch.long)) is None
    with pytest.raises(ValueError, match="finite"):
        DictionaryFreezeRule().update(float("nan"))


def test_stored_state_round_trip_keeps_the_freeze_rule():
    """A stored reference run keeps the dictionary and the epoch log only (``stored_state``); its converged and
    frozen epochs (Table 2's "epochs to converge") must survive loading, rebuilt from the logged p̄."""
    torch.manual_seed(0)
    args = dict(feature_dim=D, num_classes=K, lr_ccl=1e-2, freeze_patience=2, **SMALL)
    a = CCLNetLoss(**args)
    for epoch in range(1, 5):  # p̄ constant: drops at epoch 1 (from +inf) only, the rule fires at epoch 3
        a.on_epoch_end(epoch)
    assert (a.converged_epoch, a.frozen_epoch) == (1, 3)
    torch.manual_seed(7)
    b = CCLNetLoss(**args)
    b.load_stored_state(a.stored_state())
    assert (b.converged_epoch, b.frozen_epoch) == (1, 3) and b.dictionary_frozen
    assert b.freeze_rule.state_dict() == a.freeze_rule.state_dict()
    c = CCLNetLoss(**args)
    c.load_stored_state({**a.stored_state(), "epoch_log": a.epoch_log[:2], "dictionary_frozen": False})
    assert c.converged_epoch is None and not c.freeze_rule.fired and c.freeze_rule.epochs_without_drop == 1
