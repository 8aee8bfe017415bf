"""Models: the shared interface (features / classifier / feature_dim), input sizes, stems, errors."""

import pytest
import torch
from torch import nn

from helpers.training import MODEL_NAMES, ResNetClassifier, SmallCNN, build_model


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model tried to download weights")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)


@pytest.mark.parametrize(
    "name, in_channels, num_classes",
    [
        ("small_cnn", 3, 7),
        ("small_cnn", 1, 14),
        ("resnet18", 3, 7),
        ("resnet18", 1, 14),
        ("resnet50", 3, 7),
    ],
)
def test_interface_at_28px(name, in_channels, num_classes):
    torch.manual_seed(0)
    model = build_model(name, in_channels, num_classes, image_size=28).eval()
    x = torch.randn(3, in_channels, 28, 28)
    features = model.features(x)
    assert features.shape == (3, model.feature_dim)
    assert isinstance(model.classifier, nn.Linear)
    assert (model.classifier.in_features, model.classifier.out_features) == (model.feature_dim, num_classes)
    assert torch.equal(model(x), model.classifier(features))


def test_feature_dims():
    assert build_model("small_cnn", 3, 7).feature_dim == 128
    assert build_model("resnet18", 3, 7).feature_dim == 512
    assert build_model("resnet50", 3, 7).feature_dim == 2048


@pytest.mark.parametrize("size", [28, 64, 128, 224])
def test_small_cnn_any_input_size(size):
    model = SmallCNN(3, 7).eval()
    assert model(torch.randn(2, 3, size, size)).shape == (2, 7)


def test_resnet_stem_depends_on_input_size():
    small = build_model("resnet18", 1, 2, image_size=28)
    assert small.backbone.conv1.kernel_size == (3, 3) and small.backbone.conv1.stride == (1, 1)
    assert small.backbone.conv1.in_channels == 1
    assert isinstance(small.backbone.maxpool, nn.Identity)
    at_64 = build_model("resnet18", 3, 2, image_size=64)
    assert at_64.backbone.conv1.stride == (1, 1)
    large = build_model("resnet18", 3, 2, image_size=128)
    assert large.backbone.conv1.kernel_size == (7, 7) and large.backbone.conv1.stride == (2, 2)
    assert isinstance(large.backbone.maxpool, nn.MaxPool2d)


def test_resnet_keeps_resolution_at_28px():
    """The CIFAR-style stem leaves a 4x4 map before pooling at 28 px (a 7x7/2 stem + max-pool would leave 1x1)."""
    model = build_model("resnet18", 3, 7, image_size=28).eval()
    seen = {}
    model.backbone.layer4.register_forward_hook(lambda module, args, output: seen.update(shape=output.shape))
    model(torch.randn(1, 3, 28, 28))
    assert seen["shape"][-2:] == (4, 4)


def test_resnet_large_input():
    model = build_model("resnet18", 3, 5, image_size=128).eval()
    assert model(torch.randn(2, 3, 128, 128)).shape == (2, 5)


@pytest.mark.parametrize("name", ["small_cnn", "resnet18"])
def test_every_parameter_gets_a_gradient(name):
    model = build_model(name, 3, 4)
    loss = nn.functional.cross_entropy(model(torch.randn(4, 3, 28, 28)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing


def test_build_is_seeded():
    torch.manual_seed(3)
    first = build_model("small_cnn", 3, 7).state_dict()
    torch.manual_seed(3)
    second = build_model("small_cnn", 3, 7).state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_name_is_case_and_dash_insensitive():
    assert isinstance(build_model("ResNet18", 3, 7), ResNetClassifier)
    assert isinstance(build_model("small-cnn", 3, 7), SmallCNN)


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError) as error:
        build_model("vgg16", 3, 7)
    for name in MODEL_NAMES:
        assert name in str(error.value)


@pytest.mark.parametrize("in_channels, num_classes", [(0, 7), (3, 0), (3.0, 7), (3, -1)])
def test_bad_sizes_are_rejected(in_channels, num_classes):
    with pytest.raises(ValueError):
        build_model("small_cnn", in_channels, num_classes)
    with pytest.raises(ValueError):
        build_model("resnet18", in_channels, num_classes)


def test_bad_small_cnn_settings_are_rejected():
    with pytest.raises(ValueError, match="widths"):
        SmallCNN(3, 7, widths=())
    with pytest.raises(ValueError, match="convs_per_block"):
        SmallCNN(3, 7, convs_per_block=0)
