"""Backbones used throughout the course, all with the same small interface.

Every model built here exposes

* ``model.features(x) -> (N, D)``: the globally pooled feature vector (the CCL-Net head and the retrieval analyses
  read it),
* ``model.classifier``: an ``nn.Linear(D, num_classes)``,
* ``model.feature_dim``: ``D``,
* ``model(x) == model.classifier(model.features(x))``.

Inputs are float images ``(N, C, H, W)`` normalised by :func:`helpers.training.to_float`. All models end in global
average pooling, so one model works at 28, 64, 128 and 224 px.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from torchvision.models import resnet18, resnet50

SMALL_INPUT_MAX_SIZE = 64  # at or below this size the ResNet stem keeps full resolution (3x3 stride 1, no max-pool)


class SmallCNN(nn.Module):
    """Three conv blocks (conv 3x3 -> BatchNorm -> ReLU, max-pool between blocks) and global average pooling.

    With the default widths (32, 64, 128) it has ~94k parameters. A training step (batch 128, 28 px, SGD) ran at
    about 1,100 images/s on this project's 2-core machine when it was otherwise idle, so 30 epochs of DermaMNIST
    (7,007 images) take about three minutes; two convolutions per block halve that speed. Training is
    compute-bound: see ``bench/bench_training.py`` for the data path versus the step.
    """

    def __init__(
        self, in_channels: int, num_classes: int, widths: Sequence[int] = (32, 64, 128), convs_per_block: int = 1
    ):
        super().__init__()
        _check_sizes(in_channels, num_classes)
        if len(widths) == 0 or any(int(w) < 1 for w in widths):
            raise ValueError(f"widths must be a non-empty sequence of positive channel counts, got {widths!r}")
        if convs_per_block < 1:
            raise ValueError(f"convs_per_block must be >= 1, got {convs_per_block}")
        layers: list[nn.Module] = []
        channels = in_channels
        for block_index, width in enumerate(widths):
            if block_index > 0:
                layers.append(nn.MaxPool2d(2))
            for _ in range(convs_per_block):
                layers += [
                    nn.Conv2d(channels, width, 3, padding=1, bias=False),
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                ]
                channels = width
        self.body = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.feature_dim = int(channels)
        self.classifier = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.pool(self.body(x)), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class ResNetClassifier(nn.Module):
    """A torchvision ResNet (randomly initialised, never downloaded) split into pooled features and a linear head.

    For small inputs (``image_size <= 64``) the stem is a 3x3 stride-1 convolution without the initial max-pool, the
    usual CIFAR-style adaptation (He et al. 2016, section 4.2) also used by MedMNIST's 28 px baselines; otherwise
    the standard 7x7 stride-2 stem with max-pool is kept. The first convolution takes any channel count.
    """

    def __init__(self, constructor: Callable[..., nn.Module], in_channels: int, num_classes: int, image_size: int):
        super().__init__()
        _check_sizes(in_channels, num_classes)
        if image_size < 1:
            raise ValueError(f"image_size must be a positive number of pixels, got {image_size}")
        backbone = constructor(weights=None)
        if image_size <= SMALL_INPUT_MAX_SIZE:
            backbone.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
            backbone.maxpool = nn.Identity()
        else:
            backbone.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(backbone.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.feature_dim = int(backbone.fc.in_features)
        backbone.fc = nn.Identity()  # the backbone now returns the pooled, flattened features
        self.backbone = backbone
        self.classifier = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def _check_sizes(in_channels: int, num_classes: int) -> None:
    if not isinstance(in_channels, int) or in_channels < 1:
        raise ValueError(f"in_channels must be a positive int (1 for grayscale, 3 for RGB), got {in_channels!r}")
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int (classes or labels), got {num_classes!r}")


MODEL_NAMES = ("small_cnn", "small_cnn_wide", "resnet18", "resnet50")
#: channel widths of ``small_cnn_wide``: four times the parameters of ``small_cnn``'s (32, 64, 128), enough capacity
#: to memorise DermaMNIST's 7,007 training images, which the over-fitting recipe needs
WIDE_SMALL_CNN_WIDTHS = (64, 128, 256)


def build_model(name: str, in_channels: int, num_classes: int, image_size: int = 28) -> nn.Module:
    """Build one of :data:`MODEL_NAMES` with ``in_channels`` inputs and ``num_classes`` outputs.

    Weights are random (seed with ``torch.manual_seed`` first for reproducibility); nothing is ever downloaded.
    """
    key = name.lower().replace("-", "_") if isinstance(name, str) else name
    if key == "small_cnn":
        return SmallCNN(in_channels, num_classes)
    if key == "small_cnn_wide":
        return SmallCNN(in_channels, num_classes, widths=WIDE_SMALL_CNN_WIDTHS)
    if key == "resnet18":
        return ResNetClassifier(resnet18, in_channels, num_classes, image_size)
    if key == "resnet50":
        return ResNetClassifier(resnet50, in_channels, num_classes, image_size)
    raise ValueError(f"unknown model name {name!r}; choose one of {', '.join(MODEL_NAMES)}")
