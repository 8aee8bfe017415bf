"""Recipes and the run cache: a cached run must reproduce the trained one, and any change must miss the cache."""

import pytest
import torch

from helpers import experiments
from helpers.data import DatasetBundle, Split
from helpers.losses import CrossEntropy, LabelSmoothing


def tiny_bundle(seed=0, n=96):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=generator)
    images = torch.randint(0, 60, (n, 1, 8, 8), generator=generator, dtype=torch.uint8)
    images[:, :, :4] += (labels * 60).to(torch.uint8).view(-1, 1, 1, 1)  # a learnable class signal
    split = Split(images, labels)
    return DatasetBundle(name="tiny", task="multi-class", class_names=["a", "b", "c"], train=split, val=split,
                         test=split, source="generated in the test", licence="none", image_size=8)


def config(**overrides):
    settings = dict(epochs=2, lr=0.05, batch_size=32, device="cpu", progress=False) | overrides
    return experiments.recipe_config("well-regularised", **settings)


def test_recipes_differ_where_the_course_says():
    regularised = experiments.recipe_config("well-regularised", epochs=3, lr=0.1, batch_size=64)
    overfitting = experiments.recipe_config("over-fitting", epochs=3, lr=0.1, batch_size=64)
    assert (regularised.weight_decay, regularised.augment, regularised.schedule) == (5e-4, True, "onecycle")
    assert (overfitting.weight_decay, overfitting.augment, overfitting.schedule) == (0.0, False, "constant")
    assert overfitting.lr == pytest.approx(0.05) and overfitting.monitor == "epoch"  # keeps the last epoch
    with pytest.raises(ValueError, match="unknown recipe"):
        experiments.recipe_config("long", epochs=1, lr=0.1, batch_size=8)


def test_cached_run_reproduces_the_trained_run(tmp_path):
    bundle = tiny_bundle()
    trained = experiments.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    loaded = experiments.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    assert not trained.from_cache and loaded.from_cache and trained.key == loaded.key
    assert torch.equal(trained.test_logits, loaded.test_logits)
    assert loaded.history == trained.history
    # the reloaded weights give the stored logits
    from helpers.train import predict_logits
    assert torch.allclose(predict_logits(loaded.model, bundle.test.images), loaded.test_logits, atol=1e-5)
    assert torch.allclose(loaded.test_probs.sum(1), torch.ones(len(bundle.test.labels)))


def test_any_change_of_loss_config_or_data_changes_the_key():
    bundle = tiny_bundle()
    base = experiments.run_key(bundle, "small_cnn", CrossEntropy(), config())
    assert base == experiments.run_key(bundle, "small_cnn", CrossEntropy(), config())
    assert base != experiments.run_key(bundle, "small_cnn", LabelSmoothing(0.1), config())
    assert experiments.run_key(bundle, "small_cnn", LabelSmoothing(0.1), config()) != \
        experiments.run_key(bundle, "small_cnn", LabelSmoothing(0.2), config())
    assert base != experiments.run_key(bundle, "small_cnn", CrossEntropy(), config(epochs=3))
    assert base != experiments.run_key(bundle, "resnet18", CrossEntropy(), config())
    assert base != experiments.run_key(tiny_bundle(seed=1), "small_cnn", CrossEntropy(), config())


def test_the_key_follows_the_data_content_and_the_code_not_where_the_data_lives(monkeypatch):
    bundle = tiny_bundle()
    base = experiments.run_key(bundle, "small_cnn", CrossEntropy(), config())
    moved = tiny_bundle()
    moved.source = "/somewhere/else/tiny.npz"
    assert experiments.run_key(moved, "small_cnn", CrossEntropy(), config()) == base
    monkeypatch.setattr(experiments, "_source_hash", lambda: "edited-code")
    assert experiments.run_key(bundle, "small_cnn", CrossEntropy(), config()) != base


def test_cache_can_be_disabled(tmp_path, monkeypatch):
    bundle = tiny_bundle()
    experiments.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    monkeypatch.setenv("CALIBMED_NO_CACHE", "1")
    again = experiments.train_run("ce", CrossEntropy(), bundle, "small_cnn", config(), cache_dir=tmp_path)
    assert not again.from_cache


def test_ccl_net_loss_with_non_tensor_extra_state_has_a_key():
    from helpers.cclnet import CCLNetLoss

    bundle = tiny_bundle()
    torch.manual_seed(0)
    slow = experiments.run_key(bundle, "small_cnn", CCLNetLoss(feature_dim=128, num_classes=3), config())
    torch.manual_seed(0)
    same = experiments.run_key(bundle, "small_cnn", CCLNetLoss(feature_dim=128, num_classes=3), config())
    torch.manual_seed(0)
    fast = experiments.run_key(bundle, "small_cnn", CCLNetLoss(feature_dim=128, num_classes=3, lr_ccl=5e-2),
                               config())
    assert slow == same and slow != fast


def test_ccl_net_run_round_trips_through_the_cache(tmp_path):
    """CCL-Net's non-tensor state (optimiser, freeze rule, epoch log) is stored with the run and restored."""
    from helpers.cclnet import CCLNetLoss

    bundle = tiny_bundle()
    torch.manual_seed(0)
    trained = experiments.train_run("ccl", CCLNetLoss(feature_dim=128, num_classes=3), bundle, "small_cnn",
                                    config(), cache_dir=tmp_path)
    torch.manual_seed(0)
    loaded = experiments.train_run("ccl", CCLNetLoss(feature_dim=128, num_classes=3), bundle, "small_cnn",
                                   config(), cache_dir=tmp_path)
    assert loaded.from_cache and not trained.from_cache
    assert loaded.loss.epoch_log == trained.loss.epoch_log and len(loaded.loss.epoch_log) == 2
    assert torch.equal(loaded.loss.head.dictionary, trained.loss.head.dictionary)
    assert loaded.loss.optimizer.state_dict()["state"].keys() == trained.loss.optimizer.state_dict()["state"].keys()
    assert torch.equal(loaded.test_logits, trained.test_logits)
