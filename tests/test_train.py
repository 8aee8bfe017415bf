"""The training engine: learning, determinism, resume, early stopping, best epoch, clipping, hooks, augmentation,
multi-label losses, prediction through loss.predict_proba, and input checks. Every fit is tiny (< 1 s)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook

from helpers import metrics
from helpers.data import DatasetBundle, Split
from helpers.losses import MultiClassLoss, MultiLabelLoss
from helpers.training import (
    Augmentation,
    SmallCNN,
    TrainConfig,
    affine_sampling_grid,
    augment_batch,
    features_of,
    fit,
    predict,
    predict_logits,
    resolve_device,
    to_float,
)

SIZE = 12


def _images(level: torch.Tensor, generator: torch.Generator, channels: int = 1) -> torch.Tensor:
    """Noisy uint8 images whose mean brightness carries the class: invariant to flips, shifts and rotations."""
    noise = torch.randint(-30, 31, (len(level), channels, SIZE, SIZE), generator=generator)
    return (level.view(-1, 1, 1, 1) + noise).clamp(0, 255).to(torch.uint8)


def _bundle(split: Split, val: Split, task: str, class_names: list[str]) -> DatasetBundle:
    return DatasetBundle(
        name="tiny",
        task=task,
        class_names=class_names,
        train=split,
        val=val,
        test=val,
        source="generated in the test",
        licence="none",
        image_size=SIZE,
        true_posteriors=None,
    )


def multiclass_data(n_train: int = 256, n_val: int = 96, seed: int = 0) -> DatasetBundle:
    generator = torch.Generator().manual_seed(seed)

    def split(n):
        labels = torch.randint(0, 3, (n,), generator=generator)
        return Split(images=_images(40 + 85 * labels, generator), labels=labels)

    return _bundle(split(n_train), split(n_val), "multi-class", ["dark", "mid", "bright"])


def multilabel_data(n_train: int = 256, n_val: int = 96, seed: int = 0) -> DatasetBundle:
    """Two labels: label 0 = bright first channel, label 1 = bright second channel."""
    generator = torch.Generator().manual_seed(seed)

    def split(n):
        labels = torch.randint(0, 2, (n, 2), generator=generator).float()
        images = torch.cat([_images(50 + 150 * labels[:, t], generator) for t in range(2)], dim=1)
        return Split(images=images, labels=labels)

    return _bundle(split(n_train), split(n_val), "multi-label", ["first", "second"])


class CE(MultiClassLoss):
    def forward(self, logits, target):
        return F.cross_entropy(logits.float(), target)


class BCE(MultiLabelLoss):
    def forward(self, logits, target):
        return F.binary_cross_entropy_with_logits(logits.float(), target)


def tiny_model(in_channels: int = 1, num_classes: int = 3, seed: int = 0) -> SmallCNN:
    torch.manual_seed(seed)
    return SmallCNN(in_channels, num_classes, widths=(8, 16))


def quick(**overrides) -> TrainConfig:
    settings = dict(epochs=3, batch_size=64, lr=0.05, progress=False)
    settings.update(overrides)
    return TrainConfig(**settings)


def states_equal(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def without_seconds(history):
    return [{k: v for k, v in record.items() if k != "seconds"} for record in history]


# ---------------------------------------------------------------------------------------------------------------
# learning, determinism, resume
# ---------------------------------------------------------------------------------------------------------------
def test_fit_learns_a_tiny_problem():
    data = multiclass_data()
    result = fit(tiny_model(), CE(), data, quick(epochs=5, lr=0.1))
    history = result.history
    assert [r["epoch"] for r in history] == [1, 2, 3, 4, 5]
    assert history[-1]["train_loss"] < 0.5 * history[0]["train_loss"]
    assert result.history[result.best_epoch - 1]["val_accuracy"] >= 0.95
    assert result.device == "cpu" and result.seconds > 0
    expected_keys = {"epoch", "lr", "train_loss", "val_loss", "val_nll", "val_accuracy", "val_ece", "seconds"}
    assert expected_keys <= history[0].keys()
    probs = predict(result.model, CE(), data.val.images)
    assert metrics.accuracy(probs, data.val.labels) == pytest.approx(history[result.best_epoch - 1]["val_accuracy"])


def test_same_seed_gives_bit_identical_weights():
    data = multiclass_data()
    first = fit(tiny_model(), CE(), data, quick()).model.state_dict()
    second = fit(tiny_model(), CE(), data, quick()).model.state_dict()
    assert states_equal(first, second)
    other_seed = fit(tiny_model(), CE(), data, quick(seed=1)).model.state_dict()
    assert not states_equal(first, other_seed)


class Interrupted(Exception):
    pass


class InterruptingCE(CE):
    """Raises after validating epoch ``at`` (before that epoch's checkpoint is written), like a killed kernel."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def on_epoch_end(self, epoch, history):
        if epoch == self.at:
            raise Interrupted


@pytest.mark.parametrize("schedule", ["onecycle", "cosine"])
def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path, schedule):
    data = multiclass_data()
    config = quick(epochs=4, schedule=schedule, monitor="val_loss")
    uninterrupted = fit(tiny_model(), CE(), data, config)

    path = tmp_path / "run.pt"
    with pytest.raises(Interrupted):
        fit(
            tiny_model(),
            InterruptingCE(at=3),
            data,
            quick(epochs=4, schedule=schedule, monitor="val_loss", checkpoint_path=path),
        )
    assert path.exists()
    resumed = fit(
        tiny_model(seed=99),
        InterruptingCE(at=99),
        data,  # the same loss, never interrupting
        quick(epochs=4, schedule=schedule, monitor="val_loss", checkpoint_path=path, resume=True),
    )
    assert without_seconds(resumed.history) == without_seconds(uninterrupted.history)
    assert resumed.best_epoch == uninterrupted.best_epoch
    assert states_equal(resumed.model.state_dict(), uninterrupted.model.state_dict())


def test_resume_refuses_a_different_config(tmp_path):
    path = tmp_path / "run.pt"
    data = multiclass_data(n_train=64, n_val=32)
    fit(tiny_model(), CE(), data, quick(epochs=1, checkpoint_path=path))
    with pytest.raises(ValueError, match="lr"):
        fit(tiny_model(), CE(), data, quick(epochs=1, lr=0.3, checkpoint_path=path, resume=True))


def test_resume_of_a_finished_run_returns_its_best_weights(tmp_path):
    path = tmp_path / "run.pt"
    data = multiclass_data(n_train=64, n_val=32)
    finished = fit(tiny_model(), CE(), data, quick(epochs=2, checkpoint_path=path))
    again = fit(tiny_model(seed=5), CE(), data, quick(epochs=2, checkpoint_path=path, resume=True))
    assert len(again.history) == 2
    assert states_equal(again.model.state_dict(), finished.model.state_dict())


def test_resume_without_a_checkpoint_warns_and_trains(tmp_path):
    data = multiclass_data(n_train=64, n_val=32)
    with pytest.warns(UserWarning, match="no checkpoint"):
        result = fit(tiny_model(), CE(), data, quick(epochs=1, checkpoint_path=tmp_path / "new.pt", resume=True))
    assert len(result.history) == 1 and (tmp_path / "new.pt").exists()


# ---------------------------------------------------------------------------------------------------------------
# best epoch and early stopping (a loss hook scripts the monitored metric)
# ---------------------------------------------------------------------------------------------------------------
class ScriptedMetric(CE):
    """Writes a scripted 'score' into each epoch's record and snapshots the model's weights at that epoch."""

    def __init__(self, scores, model):
        super().__init__()
        self.scores = scores
        self.snapshots = {}
        self._model = [model]  # a list, so the model is not registered as a sub-module of the loss

    def on_epoch_end(self, epoch, history):
        history[-1]["score"] = self.scores[epoch - 1]
        self.snapshots[epoch] = {k: v.clone() for k, v in self._model[0].state_dict().items()}


def test_best_epoch_weights_are_restored():
    model = tiny_model()
    loss = ScriptedMetric([0.9, 0.2, 0.5, 0.4], model)
    result = fit(model, loss, multiclass_data(), quick(epochs=4, monitor="score", monitor_mode="min"))
    assert result.best_epoch == 2 and result.best_metric == 0.2
    assert states_equal(result.model.state_dict(), loss.snapshots[2])
    assert not states_equal(result.model.state_dict(), loss.snapshots[4])


def test_monitor_mode_max():
    model = tiny_model()
    loss = ScriptedMetric([0.1, 0.2, 0.9, 0.4], model)
    result = fit(
        model, loss, multiclass_data(n_train=64, n_val=32), quick(epochs=4, monitor="score", monitor_mode="max")
    )
    assert result.best_epoch == 3
    assert states_equal(result.model.state_dict(), loss.snapshots[3])


def test_early_stopping_stops_after_patience_epochs_without_improvement():
    model = tiny_model()
    loss = ScriptedMetric([1.0, 0.5, 0.6, 0.7, 0.1, 0.1], model)
    result = fit(
        model, loss, multiclass_data(n_train=64, n_val=32), quick(epochs=6, monitor="score", early_stopping_patience=2)
    )
    assert len(result.history) == 4 and result.stopped_early
    assert result.best_epoch == 2
    no_stopping = fit(
        tiny_model(),
        ScriptedMetric([1.0, 0.5, 0.6, 0.7, 0.1, 0.1], model),
        multiclass_data(n_train=64, n_val=32),
        quick(epochs=6, monitor="score"),
    )
    assert len(no_stopping.history) == 6 and not no_stopping.stopped_early and no_stopping.best_epoch == 5


def test_unknown_monitor_key_is_reported():
    with pytest.raises(ValueError, match="val_nll"):
        fit(tiny_model(), CE(), multiclass_data(n_train=64, n_val=32), quick(epochs=1, monitor="val_typo"))


# ---------------------------------------------------------------------------------------------------------------
# gradient clipping, hooks, schedules
# ---------------------------------------------------------------------------------------------------------------
def _gradient_norms_at_each_step(config: TrainConfig) -> list[float]:
    norms = []

    def record(optimizer, args, kwargs):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))

    handle = register_optimizer_step_pre_hook(record)
    try:
        fit(tiny_model(), CE(), multiclass_data(n_train=128, n_val=32), config)
    finally:
        handle.remove()
    return norms


def test_gradient_clipping_bounds_the_norm_seen_by_the_optimiser():
    unclipped = _gradient_norms_at_each_step(quick(epochs=2, lr=0.5))
    clipped = _gradient_norms_at_each_step(quick(epochs=2, lr=0.5, grad_clip=0.05))
    assert len(clipped) == len(unclipped) == 4
    assert max(unclipped) > 0.05  # otherwise the test could not tell clipping from no clipping
    assert max(clipped) <= 0.05 * (1 + 1e-5)


class RecordingCE(CE):
    def __init__(self):
        super().__init__()
        self.steps, self.epochs = [], []

    def after_step(self, features, targets):
        self.steps.append((features.shape, features.dtype, features.requires_grad, targets.clone()))

    def on_epoch_end(self, epoch, history):
        self.epochs.append((epoch, len(history)))


def test_hooks_get_detached_features_of_each_batch_and_epoch_ends():
    loss = RecordingCE()
    model = tiny_model()
    fit(model, loss, multiclass_data(n_train=100, n_val=32), quick(epochs=2, batch_size=32))
    assert len(loss.steps) == 2 * (100 // 32)  # the last incomplete batch of each epoch is dropped
    for shape, dtype, requires_grad, targets in loss.steps:
        assert shape == (32, model.feature_dim) and dtype == torch.float32 and not requires_grad
        assert targets.shape == (32,) and targets.dtype == torch.int64
    assert loss.epochs == [(1, 1), (2, 2)]


class JointCE(CE):
    """A loss with its own trainable parameter (a logit bias), trained by the model's optimiser."""

    def __init__(self, num_classes):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(num_classes))

    def forward(self, logits, target):
        return F.cross_entropy(logits.float() + self.bias, target)

    def joint_parameters(self):
        return [self.bias]


def test_joint_parameters_are_trained_and_others_are_not():
    trained = JointCE(3)
    fit(tiny_model(), trained, multiclass_data(n_train=64, n_val=32), quick(epochs=1))
    assert trained.bias.abs().sum() > 0

    class NotJoint(JointCE):
        def joint_parameters(self):
            return []

    untouched = NotJoint(3)
    fit(tiny_model(), untouched, multiclass_data(n_train=64, n_val=32), quick(epochs=1))
    assert untouched.bias.abs().sum() == 0


def test_schedules_and_optimisers():
    data = multiclass_data(n_train=256, n_val=32)  # 8 steps per epoch at batch 32
    config = dict(epochs=2, batch_size=32, lr=0.03)
    constant = fit(tiny_model(), CE(), data, quick(schedule="constant", **config))
    assert [r["lr"] for r in constant.history] == [0.03, 0.03]
    cosine = fit(tiny_model(), CE(), data, quick(schedule="cosine", **config))
    # the lr used by the last step of each epoch: step 7 and step 15 of 16 on the half-cosine
    expected = [0.03 * (1 + math.cos(math.pi * step / 16)) / 2 for step in (7, 15)]
    assert [r["lr"] for r in cosine.history] == pytest.approx(expected, rel=1e-6)
    onecycle = fit(tiny_model(), CE(), data, quick(schedule="onecycle", **config))
    assert 0.03 / 25 < onecycle.history[0]["lr"] <= 0.03  # warmed up from max/25 to the peak at 30 % of the steps
    assert onecycle.history[-1]["lr"] < 0.03 * 1e-3  # and it ends far below the initial max/25
    adamw = fit(tiny_model(), CE(), data, quick(optimizer="adamw", lr=1e-3, epochs=1))
    assert math.isfinite(adamw.history[-1]["train_loss"])


def test_weight_decay_skips_batchnorm_and_biases():
    """With zero data gradient (lr > 0, loss ignoring the model), only >= 2-D weights shrink."""

    class ZeroGradient(CE):
        def forward(self, logits, target):
            return 0.0 * logits.sum()

    model = tiny_model()
    model.body[1].bias.data.fill_(0.5)  # a BatchNorm shift; decaying it would move it towards 0
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fit(
        model,
        ZeroGradient(),
        multiclass_data(n_train=64, n_val=32),
        quick(epochs=1, schedule="constant", lr=0.1, weight_decay=0.1, monitor="val_loss"),
    )
    after = model.state_dict()
    assert torch.equal(after["body.1.bias"], before["body.1.bias"])
    assert torch.equal(after["classifier.bias"], before["classifier.bias"])
    assert after["body.0.weight"].abs().sum() < before["body.0.weight"].abs().sum()


# ---------------------------------------------------------------------------------------------------------------
# multi-label and loss-defined probabilities
# ---------------------------------------------------------------------------------------------------------------
def test_fit_with_a_multilabel_loss():
    data = multilabel_data()
    result = fit(tiny_model(in_channels=2, num_classes=2), BCE(), data, quick(epochs=5, lr=0.1))
    record = result.history[result.best_epoch - 1]
    assert {"val_auroc", "val_ece", "val_accuracy", "val_nll"} <= record.keys()
    assert record["val_auroc"] > 0.95
    probs = predict(result.model, BCE(), data.val.images)
    assert record["val_ece"] == pytest.approx(metrics.multilabel_ece(probs, data.val.labels), abs=1e-6)
    assert record["val_accuracy"] == pytest.approx(1 - metrics.hamming_loss(probs, data.val.labels), abs=1e-9)
    binary_nll = F.binary_cross_entropy(probs.double(), data.val.labels.double()).item()
    assert record["val_nll"] == pytest.approx(binary_nll, rel=1e-5)


class SquashedCE(CE):
    """Its probabilities are softmax(logits / 3), not the softmax of the logits."""

    def predict_proba(self, logits):
        return torch.softmax(logits.float() / 3.0, dim=-1)


def test_predict_and_validation_use_loss_predict_proba():
    data = multiclass_data(n_train=128, n_val=64)
    loss = SquashedCE()
    result = fit(tiny_model(), loss, data, quick(epochs=1))
    logits = predict_logits(result.model, data.val.images)
    probs = predict(result.model, loss, data.val.images)
    assert torch.allclose(probs, torch.softmax(logits / 3.0, dim=1), atol=1e-6)
    assert not torch.allclose(probs, torch.softmax(logits, dim=1), atol=1e-3)
    record = result.history[0]
    assert record["val_nll"] == pytest.approx(metrics.nll(probs, data.val.labels), rel=1e-5)
    assert record["val_ece"] == pytest.approx(metrics.ece(probs, data.val.labels), abs=1e-6)
    assert record["val_loss"] == pytest.approx(F.cross_entropy(logits, data.val.labels).item(), rel=1e-5)


def test_predict_logits_and_features_are_batched_eval_mode_cpu_float32():
    model = tiny_model()
    images = multiclass_data(n_train=16, n_val=50).val.images
    model.train()
    logits = predict_logits(model, images, batch_size=7)
    assert logits.dtype == torch.float32 and logits.device.type == "cpu" and logits.shape == (50, 3)
    assert model.training  # the caller's mode is restored
    with torch.no_grad():
        expected = model.eval()(to_float(images))
    assert torch.allclose(logits, expected, atol=1e-5)
    features = features_of(model, images, batch_size=1024)
    assert features.shape == (50, model.feature_dim)
    assert torch.allclose(model.classifier(features), expected, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# augmentation and the data path
# ---------------------------------------------------------------------------------------------------------------
def test_to_float_matches_totensor_normalize():
    images = torch.tensor([0, 51, 128, 255], dtype=torch.uint8).view(1, 1, 2, 2)
    expected = (images.double() / 255 - 0.5) / 0.5
    assert torch.allclose(to_float(images).double(), expected, atol=1e-6)
    assert to_float(images).dtype == torch.float32
    with pytest.raises(TypeError, match="uint8"):
        to_float(images.float())


def _batch(n=64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return to_float(torch.randint(0, 256, (n, 3, SIZE, SIZE), dtype=torch.uint8, generator=generator))


def test_flips_are_exact_flips_of_each_sample():
    x = _batch()
    flips_only = Augmentation(vertical_flip=False, max_shift=0, max_rotation=0)
    y = augment_batch(x, torch.Generator().manual_seed(0), flips_only)
    same = (y == x).flatten(1).all(1)
    flipped = (y == x.flip(3)).flatten(1).all(1)
    assert bool((same | flipped).all())
    assert 10 < int(flipped.sum()) < 54  # about half, independently per sample

    both = Augmentation(max_shift=0, max_rotation=0)
    z = augment_batch(x, torch.Generator().manual_seed(1), both)
    candidates = torch.stack([x, x.flip(3), x.flip(2), x.flip(2).flip(3)])
    matches = (candidates == z.unsqueeze(0)).flatten(2).all(2)  # (4, N)
    assert bool(matches.any(0).all())
    assert bool(matches[2].any() and matches[3].any())  # vertical flips happen too


def test_augmentation_is_seeded_shape_preserving_and_off_when_disabled():
    x = _batch()
    first = augment_batch(x, torch.Generator().manual_seed(5), Augmentation())
    second = augment_batch(x, torch.Generator().manual_seed(5), Augmentation())
    other = augment_batch(x, torch.Generator().manual_seed(6), Augmentation())
    assert torch.equal(first, second) and not torch.equal(first, other)
    assert first.shape == x.shape and first.dtype == x.dtype
    assert augment_batch(x, torch.Generator().manual_seed(5), None) is x
    none = Augmentation(horizontal_flip=False, vertical_flip=False, max_shift=0, max_rotation=0)
    assert torch.equal(augment_batch(x, torch.Generator().manual_seed(5), none), x)


def test_shifts_and_rotations_move_pixels_but_keep_a_constant_image_constant():
    x = _batch()
    moved = augment_batch(x, torch.Generator().manual_seed(0), Augmentation(horizontal_flip=False, vertical_flip=False))
    assert (moved - x).abs().mean() > 0.1
    constant = torch.full((8, 3, SIZE, SIZE), 0.3)
    augmented = augment_batch(constant, torch.Generator().manual_seed(0), Augmentation())
    assert torch.allclose(augmented, constant, atol=1e-6)


def test_sampling_grid_equals_affine_grid():
    generator = torch.Generator().manual_seed(0)
    angle = torch.rand(16, generator=generator) - 0.5
    shift = 0.4 * torch.rand(16, 2, generator=generator) - 0.2
    sign = torch.where(torch.rand(16, 2, generator=generator) < 0.5, -1.0, 1.0)
    cos, sin = torch.cos(angle), torch.sin(angle)
    theta = torch.stack(
        [
            torch.stack([cos * sign[:, 0], -sin * sign[:, 1], shift[:, 0]], 1),
            torch.stack([sin * sign[:, 0], cos * sign[:, 1], shift[:, 1]], 1),
        ],
        1,
    )
    expected = F.affine_grid(theta, [16, 3, 10, 14], align_corners=False)
    assert torch.allclose(affine_sampling_grid(angle, shift, sign, 10, 14), expected, atol=1e-6)


def _sample(x, angle, shift, sign):
    grid = affine_sampling_grid(angle, shift, sign, x.shape[-2], x.shape[-1])
    return F.grid_sample(x, grid, align_corners=False, padding_mode="reflection")


def test_a_one_pixel_shift_moves_the_image_by_one_pixel_and_signs_flip_it():
    x = _batch(n=1)
    one_pixel = torch.tensor([[2.0 / SIZE, 0.0]])  # normalised units: the image spans 2
    shifted = _sample(x, torch.zeros(1), one_pixel, torch.ones(1, 2))
    assert torch.allclose(shifted[..., :-1], x[..., 1:], atol=1e-5)  # output column j samples input column j + 1
    flipped = _sample(x, torch.zeros(1), torch.zeros(1, 2), torch.tensor([[-1.0, -1.0]]))
    assert torch.allclose(flipped, x.flip(2).flip(3), atol=1e-5)


def test_flips_happen_on_the_interpolating_path_too():
    """With a negligible rotation the one-grid path must still flip about half the samples each way."""
    x = _batch()
    y = augment_batch(x, torch.Generator().manual_seed(2), Augmentation(max_shift=0, max_rotation=1e-6))
    candidates = torch.stack([x, x.flip(3), x.flip(2), x.flip(2).flip(3)])
    matches = ((candidates - y.unsqueeze(0)).abs() < 1e-4).flatten(2).all(2)
    assert bool(matches.any(0).all())
    assert all(10 < int(count) < 40 for count in matches.sum(1))


def test_config_augment_false_trains_without_augmentation(monkeypatch):
    calls = []
    import helpers.training.train as train

    original = train.augment_batch
    monkeypatch.setattr(train, "augment_batch", lambda x, g, a: calls.append(a) or original(x, g, a))
    fit(tiny_model(), CE(), multiclass_data(n_train=64, n_val=32), quick(epochs=1, augment=False))
    assert calls and all(a is None for a in calls)
    calls.clear()
    fit(tiny_model(), CE(), multiclass_data(n_train=64, n_val=32), quick(epochs=1))
    assert calls and all(a == Augmentation() for a in calls)


# ---------------------------------------------------------------------------------------------------------------
# configuration and input checks
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(optimizer="adam"), "sgd, adamw"),
        (dict(schedule="step"), "onecycle, constant, cosine"),
        (dict(monitor_mode="lowest"), "min"),
        (dict(epochs=0), "epochs"),
        (dict(lr=-1.0), "lr"),
        (dict(grad_clip=0.0), "grad_clip"),
        (dict(resume=True), "checkpoint_path"),
        (dict(early_stopping_patience=0), "early_stopping_patience"),
        (dict(nesterov=True, optimizer="adamw"), "nesterov"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**overrides)


def test_augmentation_rejects_bad_ranges():
    with pytest.raises(ValueError, match="max_shift"):
        Augmentation(max_shift=0.9)
    with pytest.raises(ValueError, match="max_rotation"):
        Augmentation(max_rotation=-5)


def test_fit_rejects_mismatched_inputs():
    data = multiclass_data(n_train=32, n_val=16)
    with pytest.raises(ValueError, match="multi-label loss cannot train on the multi-class"):
        fit(tiny_model(), BCE(), data, quick(epochs=1))
    with pytest.raises(ValueError, match="outputs"):
        fit(tiny_model(num_classes=2), CE(), data, quick(epochs=1))
    float_images = _bundle(
        Split(data.train.images.float(), data.train.labels), data.val, "multi-class", ["a", "b", "c"]
    )
    with pytest.raises(ValueError, match="uint8"):
        fit(tiny_model(), CE(), float_images, quick(epochs=1))
    with pytest.raises(TypeError, match="TrainConfig"):
        fit(tiny_model(), CE(), data, {"epochs": 1})


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert resolve_device("auto").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu-ish")


def test_mixed_precision_only_on_cuda():
    from helpers.training.devices import amp_dtype

    assert amp_dtype(torch.device("cpu"), True) is None
    assert amp_dtype(torch.device("cuda"), False) is None
    if torch.cuda.is_available():
        assert amp_dtype(torch.device("cuda"), True) in (torch.bfloat16, torch.float16)


# ---------------------------------------------------------------------------------------------------------------
# issue 10: silent acceptance and unclear errors
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(lr=True), "lr"),
        (dict(weight_decay=math.inf), "weight_decay"),
        (dict(weight_decay=math.nan), "weight_decay"),
        (dict(weight_decay=True), "weight_decay"),
        (dict(momentum=False), "momentum"),
        (dict(grad_clip=True), "grad_clip"),
        (dict(grad_clip=math.inf), "grad_clip"),
    ],
)
def test_config_rejects_booleans_and_non_finite_numbers(overrides, message):
    """Issue 10 #12: TrainConfig(lr=True) trained with lr 1; weight_decay=inf was accepted and failed later."""
    with pytest.raises(ValueError, match=message):
        TrainConfig(**overrides)


class OtherCE(CE):
    """A different loss with cross-entropy's value (what matters is that it is another loss object)."""


def _checkpointed_run(tmp_path, data):
    """A 4-epoch run interrupted after the checkpoint of epoch 2; resume it with InterruptingCE(at=99)."""
    path = tmp_path / "run.pt"
    with pytest.raises(Interrupted):
        fit(tiny_model(), InterruptingCE(at=3), data, quick(epochs=4, checkpoint_path=path))
    return path


def resume(epochs=4, **overrides):
    return quick(epochs=epochs, resume=True, **overrides)


def test_resume_refuses_another_loss_even_for_a_finished_run(tmp_path):
    """Issue 10 #3: a CE checkpoint resumed with another loss continued (or was returned) silently."""
    from helpers.losses import FocalLoss

    data = multiclass_data(n_train=64, n_val=32)
    path = _checkpointed_run(tmp_path, data)
    with pytest.raises(ValueError, match=r"loss differs.*InterruptingCE\(\).*FocalLoss\(gamma=3.0\)"):
        fit(tiny_model(), FocalLoss(3.0), data, resume(checkpoint_path=path))
    finished = tmp_path / "finished.pt"
    fit(tiny_model(), CE(), data, quick(epochs=2, checkpoint_path=finished))
    with pytest.raises(ValueError, match="loss differs"):  # was returned under the new loss
        fit(tiny_model(), OtherCE(), data, resume(epochs=2, checkpoint_path=finished))


def test_resume_refuses_other_data_of_the_same_or_another_size(tmp_path):
    data = multiclass_data(n_train=64, n_val=32)
    path = _checkpointed_run(tmp_path, data)
    same_size = multiclass_data(n_train=64, n_val=32, seed=1)
    with pytest.raises(ValueError, match="training data differs"):
        fit(tiny_model(), InterruptingCE(at=99), same_size, resume(checkpoint_path=path))
    other_size = multiclass_data(n_train=80, n_val=32)
    with pytest.raises(ValueError, match=r"training data differs.*64 images.*80 images"):
        fit(tiny_model(), InterruptingCE(at=99), other_size, resume(checkpoint_path=path))
    other_val = _bundle(data.train, multiclass_data(n_train=8, n_val=32, seed=2).val, data.task, data.class_names)
    with pytest.raises(ValueError, match="validation data differs"):
        fit(tiny_model(), InterruptingCE(at=99), other_val, resume(checkpoint_path=path))


def test_resume_refuses_another_model_and_resumes_the_same_run(tmp_path):
    data = multiclass_data(n_train=64, n_val=32)
    path = _checkpointed_run(tmp_path, data)
    torch.manual_seed(0)
    wider = SmallCNN(1, 3, widths=(8, 32))
    with pytest.raises(ValueError, match="model differs"):
        fit(wider, InterruptingCE(at=99), data, resume(checkpoint_path=path))
    resumed = fit(tiny_model(seed=3), InterruptingCE(at=99), data, resume(checkpoint_path=path))
    assert [r["epoch"] for r in resumed.history] == [1, 2, 3, 4]


class CountingCE(CE):
    calls = 0

    def forward(self, logits, target):
        CountingCE.calls += 1
        return super().forward(logits, target)


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_resume_from_a_damaged_checkpoint_names_the_file(tmp_path, damage):
    """Issue 10 #13: a truncated or empty checkpoint gave OSError [Errno 22] / EOFError without the path."""
    data = multiclass_data(n_train=64, n_val=32)
    path = tmp_path / "run.pt"
    fit(tiny_model(), CE(), data, quick(epochs=1, checkpoint_path=path))
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2] if damage == "truncated" else b"")
    with pytest.raises(ValueError, match=rf"{path}.*damaged or not a checkpoint.*delete it"):
        fit(tiny_model(), CE(), data, quick(epochs=2, checkpoint_path=path, resume=True))


def test_unusable_checkpoint_paths_fail_before_training_and_leave_nothing(tmp_path):
    """Issue 10 #13: a directory as checkpoint_path failed only after the first epoch and left <dir>.tmp."""
    data = multiclass_data(n_train=64, n_val=32)
    folder = tmp_path / "a_folder"
    folder.mkdir()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for path, message in ((folder, "is a directory"), (blocker / "run.pt", "cannot create the folder")):
        CountingCE.calls = 0
        with pytest.raises(ValueError, match=message):
            fit(tiny_model(), CountingCE(), data, quick(epochs=1, checkpoint_path=path))
        assert CountingCE.calls == 0  # nothing was trained
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "a_folder"] and not any(folder.iterdir())


def test_a_failed_checkpoint_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    from helpers.training import checkpoints

    def failing_save(payload, target):  # target: the open temporary file
        target.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints.torch, "save", failing_save)
    path = tmp_path / "run.pt"
    with pytest.raises(OSError, match="No space left"):
        checkpoints.save_checkpoint(path, {"format": checkpoints.CHECKPOINT_FORMAT})
    assert list(tmp_path.iterdir()) == []


def test_a_model_built_for_other_channels_is_refused_before_training():
    """Issue 10 #14: a model with the wrong channel count got a raw convolution error from fit."""
    data = multiclass_data(n_train=32, n_val=16)  # one channel
    with pytest.raises(ValueError, match=r"3 input channels.*1 channel.*in_channels=data.n_channels"):
        fit(tiny_model(in_channels=3), CE(), data, quick(epochs=1))


def test_predict_logits_refuses_channels_last_or_wrong_channel_images_as_fit_does():
    """Issue 18 #14: predict_logits (and predict, features_of) on channels-last or wrong-channel uint8 images
    failed with a raw convolution RuntimeError; they now share fit's check, which also names channels-last."""
    model = tiny_model(in_channels=3)
    images = torch.randint(0, 256, (5, 3, SIZE, SIZE), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    for read in (predict_logits, features_of, lambda m, x: predict(m, CE(), x)):
        with pytest.raises(ValueError, match=r"channels-last \(N, H, W, C\).*permute\(0, 3, 1, 2\)"):
            read(model, images.permute(0, 2, 3, 1).contiguous())
        with pytest.raises(ValueError, match=r"3 input channels.*1 channel.*in_channels=data.n_channels"):
            read(model, images[:, :1])
    assert predict_logits(model, images).shape == (5, 3)
    data = multiclass_data(n_train=32, n_val=16)  # one channel, stored channels-last below
    data.train.images = data.train.images.permute(0, 2, 3, 1).contiguous()
    with pytest.raises(ValueError, match=r"train images.*channels-last.*permute\(0, 3, 1, 2\)"):
        fit(tiny_model(in_channels=1), CE(), data, quick(epochs=1))


def test_class_accuracy_from_model_uses_predict_logits(monkeypatch):
    """The LS+ prior of a trained model: its logits (predict_logits) through class_accuracy_from_predictions."""
    from helpers.training import class_accuracy_from_model, prediction

    fixed = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0], [5.0, 0.0, 0.0]])
    monkeypatch.setattr(prediction, "predict_logits", lambda model, images, device=None, batch_size=1024: fixed)
    acc = class_accuracy_from_model(None, torch.zeros(4, 1, 2, 2, dtype=torch.uint8), torch.tensor([0, 1, 1, 2]))
    torch.testing.assert_close(acc, torch.tensor([1.0, 0.5, 0.0]))  # preds 0,1,2,0
