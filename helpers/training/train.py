"""The one training engine of the course: ``fit``, ``predict``, ``predict_logits``, ``features_of``.

No notebook writes a training loop; they all call :func:`fit` with a model from :mod:`helpers.training.models`, a loss
object from :mod:`helpers.losses` and a :class:`helpers.data.DatasetBundle`.

Design choices (why the engine is fast on 2 CPU cores and on a GPU alike):

* The uint8 images are moved to the device once and batches are cut from them by indexing with a seeded
  permutation; no ``Dataset``/``DataLoader``, no per-item PIL. ``to_float`` normalises on the device. On CUDA the
  images stay on the GPU when they take at most half of its free memory (ChestMNIST at 224 px is ~5.6 GB uint8);
  otherwise they stay in pinned CPU memory and each batch is copied over.
* Augmentation is batched on the device: per-sample random flips, shifts and rotations in one ``grid_sample``
  call per batch (exact ``torch.where`` flips when shifts and rotations are off). Its random numbers come from a
  seeded CPU generator, so the augmentation stream is reproducible and identical on every device.
* The engine is loss-agnostic: ``loss(logits, target)`` is the objective and ``loss.predict_proba(logits)``
  defines the probabilities (SPA and LDACE do not use a plain sigmoid). Optional hooks
  ``loss.after_step(features, targets)`` and ``loss.on_epoch_end(epoch, history)`` let CCL-Net run its alternating
  updates; ``loss.joint_parameters()`` are trained by the model's optimiser.
* Weight decay applies to weights with two or more dimensions (convolutions, linear layers, embeddings) and not
  to BatchNorm scales/shifts or biases, the common practice (decaying BN scales only changes the effective
  learning rate of the next layer).
* The last incomplete batch of every epoch is dropped (a different random subset each epoch), so BatchNorm never
  sees a batch of one and every step has the same size.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import pickle
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers.losses.base import check_number
from helpers.training import determinism
from helpers.utils import progress_bar, write_atomically_with

OPTIMIZERS = ("sgd", "adamw")
SCHEDULES = ("onecycle", "constant", "cosine")
MONITOR_MODES = ("min", "max")
DEVICE_DATA_FRACTION = 0.5  # keep the uint8 images on a CUDA device if they take at most this share of free memory
CHECKPOINT_FORMAT = 2  # 2: checkpoints record the model, loss and data they were trained with

# Config fields that change the training trajectory: a checkpoint can only be resumed with the same values.
_TRAJECTORY_FIELDS = (
    "epochs",
    "batch_size",
    "lr",
    "weight_decay",
    "optimizer",
    "momentum",
    "nesterov",
    "schedule",
    "augment",
    "grad_clip",
    "seed",
    "monitor",
    "monitor_mode",
)


# --------------------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Augmentation:
    """Batched, seeded augmentation applied to training batches only.

    ``max_shift`` is a fraction of the image side (0.1 = up to ±2.8 px at 28 px), ``max_rotation`` is in degrees.
    Flips are on by default in both directions because skin lesions have no canonical orientation; chest X-rays
    do (heart on the left, diaphragm at the bottom), so for ChestMNIST consider
    ``Augmentation(vertical_flip=False)``. Set ``max_shift=0`` and ``max_rotation=0`` for flips only (then no
    interpolation happens at all).
    """

    horizontal_flip: bool = True
    vertical_flip: bool = True
    max_shift: float = 0.1
    max_rotation: float = 15.0

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.max_shift) <= 0.5:
            raise ValueError(f"max_shift is a fraction of the image side in [0, 0.5], got {self.max_shift}")
        if not 0.0 <= float(self.max_rotation) <= 180.0:
            raise ValueError(f"max_rotation is in degrees in [0, 180], got {self.max_rotation}")

    @property
    def uses_affine(self) -> bool:
        return self.max_shift > 0 or self.max_rotation > 0


@dataclass
class TrainConfig:
    """Every knob of :func:`fit`. Values are checked on construction.

    ``augment``: True (default :class:`Augmentation`), False (none) or an :class:`Augmentation`.
    ``schedule``: "onecycle" (``OneCycleLR`` with max lr ``lr``, stepped per batch, its default momentum cycling
    0.85–0.95), "cosine" (cosine annealing from ``lr`` to 0 over all batches) or "constant".
    ``amp``: mixed precision on CUDA only (bf16 where supported, else fp16 with a gradient scaler).
    ``monitor``: the history key that picks the best epoch (``val_nll``, ``val_loss``, ``val_ece``,
    ``val_accuracy``, multi-label also ``val_auroc``, or a key the loss's ``on_epoch_end`` adds).
    """

    epochs: int = 10
    batch_size: int = 128
    lr: float = 0.05
    weight_decay: float = 5e-4
    optimizer: str = "sgd"
    momentum: float = 0.9
    nesterov: bool = False
    schedule: str = "onecycle"
    augment: bool | Augmentation = True
    grad_clip: float | None = None
    amp: bool = True
    device: str = "auto"
    seed: int = 0
    monitor: str = "val_nll"
    monitor_mode: str = "min"
    early_stopping_patience: int | None = None
    checkpoint_path: str | os.PathLike | None = None
    resume: bool = False
    eval_batch_size: int = 1024
    progress: bool = True

    def __post_init__(self) -> None:
        _check_int("epochs", self.epochs, 1)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("eval_batch_size", self.eval_batch_size, 1)
        _check_int("seed", self.seed, 0)
        # check_number also refuses booleans (lr=True would train at rate 1) and infinities
        check_number("lr", self.lr, 0.0, low_open=True)
        check_number("weight_decay", self.weight_decay, 0.0)
        check_number("momentum", self.momentum, 0.0, 1.0, high_open=True)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}")
        if self.monitor_mode not in MONITOR_MODES:
            raise ValueError(f"monitor_mode must be 'min' or 'max', got {self.monitor_mode!r}")
        if not isinstance(self.monitor, str) or not self.monitor:
            raise ValueError(f"monitor must name a history key such as 'val_nll', got {self.monitor!r}")
        if self.grad_clip is not None:
            check_number("grad_clip", self.grad_clip, 0.0, low_open=True, why="None or a positive max gradient norm")
        if self.early_stopping_patience is not None:
            _check_int("early_stopping_patience", self.early_stopping_patience, 1)
        if not isinstance(self.augment, (bool, Augmentation)):
            raise TypeError(f"augment must be True, False or an Augmentation, got {type(self.augment).__name__}")
        if self.nesterov and (self.optimizer != "sgd" or self.momentum == 0):
            raise ValueError("nesterov=True needs optimizer='sgd' and momentum > 0")
        if self.resume and self.checkpoint_path is None:
            raise ValueError("resume=True needs checkpoint_path (the file to resume from)")
        if not isinstance(self.device, str):
            raise TypeError(
                f"device must be a string such as 'auto', 'cpu', 'cuda', 'cuda:1' or 'mps', got {self.device!r}"
            )

    @property
    def augmentation(self) -> Augmentation | None:
        if self.augment is True:
            return Augmentation()
        return self.augment or None

    def trajectory_dict(self) -> dict[str, Any]:
        """The settings that determine the weights, as plain Python values (stored in checkpoints)."""
        values = {name: getattr(self, name) for name in _TRAJECTORY_FIELDS}
        augmentation = self.augmentation
        values["augment"] = asdict(augmentation) if augmentation is not None else None
        return values


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


@dataclass
class FitResult:
    """What :func:`fit` returns. ``model`` holds the best epoch's weights; ``seconds`` is this call's wall time."""

    history: list[dict[str, float]]
    best_epoch: int
    best_metric: float
    model: nn.Module
    device: str
    seconds: float
    stopped_early: bool = False
    monitor: str = "val_nll"
    software: dict[str, Any] = field(default_factory=dict)  # helpers.training.software_record of the run


# --------------------------------------------------------------------------------------------------------------
# Devices, seeding and the tensor data path
# --------------------------------------------------------------------------------------------------------------
def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """'auto' picks CUDA, then Apple MPS, then CPU; an explicit device must be available."""
    if isinstance(device, torch.device):
        device = str(device)
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"unknown device {device!r}; use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available here; use device='auto' or 'cpu'")
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} was requested but MPS is not available here; use device='auto' or 'cpu'")
    return resolved


def seed_everything(seed: int) -> None:
    """Seed torch's global generators (CPU and every CUDA device): call before building a model."""
    torch.manual_seed(seed)


def to_float(images_uint8: torch.Tensor) -> torch.Tensor:
    """uint8 images (N, C, H, W) -> float32 in [-1, 1]: ``(x / 255 - 0.5) / 0.5``, on the images' device.

    The same normalisation as medmnist's getting-started notebook (``ToTensor`` + ``Normalize([.5], [.5])``).
    """
    if not isinstance(images_uint8, torch.Tensor) or images_uint8.dtype != torch.uint8:
        found = images_uint8.dtype if isinstance(images_uint8, torch.Tensor) else type(images_uint8).__name__
        raise TypeError(
            f"to_float expects a uint8 image tensor (N, C, H, W), got {found}; "
            "pass the raw uint8 images of a Split, not already-normalised floats"
        )
    return images_uint8.to(torch.float32).div_(255.0).sub_(0.5).div_(0.5)


def augment_batch(
    images: torch.Tensor, generator: torch.Generator, augmentation: Augmentation | None = None
) -> torch.Tensor:
    """Randomly flip, shift and rotate a float batch (N, C, H, W), each sample independently.

    All random numbers (5 per sample, drawn whatever the settings so the stream does not depend on them) come from
    ``generator``, a CPU ``torch.Generator``; the work runs on ``images.device``. Flips are exact (no
    interpolation) when there are no shifts or rotations; otherwise flips, shifts and rotations are folded into
    one ``grid_sample`` call on :func:`affine_sampling_grid` (bilinear, reflection padding).
    ``augmentation=None`` returns the input unchanged.
    """
    if augmentation is None:
        return images
    if images.ndim != 4 or not images.dtype.is_floating_point:
        raise ValueError(f"augment_batch expects a float batch (N, C, H, W), got {images.dtype} {tuple(images.shape)}")
    n = images.shape[0]
    draws = torch.rand(n, 5, generator=generator).to(images.device, non_blocking=True)
    flip_x = draws[:, 0] < 0.5 if augmentation.horizontal_flip else torch.zeros_like(draws[:, 0], dtype=torch.bool)
    flip_y = draws[:, 1] < 0.5 if augmentation.vertical_flip else torch.zeros_like(draws[:, 1], dtype=torch.bool)
    if not augmentation.uses_affine:
        if augmentation.horizontal_flip:
            images = torch.where(flip_x.view(n, 1, 1, 1), images.flip(3), images)
        if augmentation.vertical_flip:
            images = torch.where(flip_y.view(n, 1, 1, 1), images.flip(2), images)
        return images
    angle = (draws[:, 2] * 2 - 1) * math.radians(augmentation.max_rotation)
    # Sampling coordinates are normalised so that the image spans [-1, 1]: a shift of a fraction f of the side is
    # 2f there. Flips are folded into the same grid (a sign on the x or y coordinate), so one grid_sample does all.
    shift = (draws[:, 3:5] * 2 - 1) * (2 * augmentation.max_shift)
    flip_sign = 1 - 2 * torch.stack([flip_x, flip_y], dim=1).to(images.dtype)
    grid = affine_sampling_grid(
        angle.to(images.dtype), shift.to(images.dtype), flip_sign, images.shape[-2], images.shape[-1]
    )
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="reflection", align_corners=False)


def affine_sampling_grid(
    angle: torch.Tensor, shift: torch.Tensor, flip_sign: torch.Tensor, height: int, width: int
) -> torch.Tensor:
    """The grid of ``F.affine_grid(theta, (N, C, height, width), align_corners=False)`` for
    theta = [[cos a * fx, -sin a * fy, shift_x], [sin a * fx, cos a * fy, shift_y]]: flip (fx, fy = ±1), then
    rotate by a, then shift. Built by broadcasting into one buffer (about 4x faster on the CPU than
    ``affine_grid``'s batched matmul at 28 px). ``angle`` (N,) radians, ``shift`` (N, 2) normalised units,
    ``flip_sign`` (N, 2) of ±1.
    """
    n, options = angle.shape[0], dict(dtype=angle.dtype, device=angle.device)
    xs = ((torch.arange(width, **options) * 2 + 1) / width - 1).view(1, 1, width)  # pixel centres
    ys = ((torch.arange(height, **options) * 2 + 1) / height - 1).view(1, height, 1)
    cos, sin = torch.cos(angle), torch.sin(angle)
    fx, fy = flip_sign[:, 0], flip_sign[:, 1]
    column = lambda values: values.view(n, 1, 1)  # noqa: E731
    grid = torch.empty(n, height, width, 2, **options)
    torch.add(column(cos * fx) * xs, column(-sin * fy) * ys + column(shift[:, 0]), out=grid[..., 0])
    torch.add(column(sin * fx) * xs, column(cos * fy) * ys + column(shift[:, 1]), out=grid[..., 1])
    return grid


def _place_images(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Put uint8 images on ``device`` when they fit comfortably, else keep them on the CPU (pinned for CUDA)."""
    if device.type == "cpu":
        return images.contiguous()
    if device.type == "cuda":
        free_bytes, _ = torch.cuda.mem_get_info(device)
        if images.numel() * images.element_size() > DEVICE_DATA_FRACTION * free_bytes:
            return images.contiguous().pin_memory()
    return images.to(device)


def _amp_dtype(device: torch.device, enabled: bool) -> torch.dtype | None:
    if not enabled or device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _model_device(model: nn.Module) -> torch.device:
    for tensor in list(model.parameters()) + list(model.buffers()):
        return tensor.device
    return torch.device("cpu")


# --------------------------------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------------------------------
def _as_uint8_images(images: Any) -> torch.Tensor:
    images = torch.as_tensor(images)
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(
            f"expected uint8 images of shape (N, C, H, W), got {images.dtype} {tuple(images.shape)}; "
            "pass a Split's raw images (normalisation happens inside)"
        )
    return images


def _check_image_channels(model: nn.Module, images: torch.Tensor, what: str = "images") -> None:
    """Images (N, C, H, W) whose C is what the model's first convolution takes, else a ValueError that names a
    channels-last (N, H, W, C) layout or says to rebuild the model (shared by ``fit`` and the prediction functions;
    without it the convolution fails with a raw RuntimeError)."""
    first_conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if first_conv is None or images.shape[1] == first_conv.in_channels:
        return
    expected = first_conv.in_channels
    if images.shape[-1] == expected:
        raise ValueError(
            f"the {what} have shape {tuple(images.shape)}, which looks channels-last (N, H, W, C); the "
            f"model takes (N, C, H, W) with C = {expected}: pass images.permute(0, 3, 1, 2).contiguous()"
        )
    raise ValueError(
        f"the model takes {expected} input channels but the {what} have {images.shape[1]} channel(s); "
        "build it with in_channels=data.n_channels"
    )


def preferred_memory_format(device: torch.device) -> torch.memory_format:
    """Channels-last (NHWC) on the CPU, where ``bench/bench_memory_format.py`` measured the small CNN's training
    step 1.4x faster than in the default layout; the default elsewhere (on an H100 the small CNNs are bound by kernel
    launches and both layouts ran within 3 %)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


@torch.no_grad()
def _batched_outputs(
    model: nn.Module, images: torch.Tensor, device: torch.device | None, batch_size: int, what: str
) -> torch.Tensor:
    """Run ``model`` in eval mode over ``images`` in batches; ``what`` is 'logits' or 'features'. Stays on device."""
    images = _as_uint8_images(images)
    _check_image_channels(model, images)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    device = _model_device(model) if device is None else resolve_device(device)
    memory_format = preferred_memory_format(device)
    model.to(device, memory_format=memory_format)
    was_training = model.training
    model.eval()
    try:
        outputs = []
        for start in range(0, images.shape[0], batch_size):
            x = to_float(images[start : start + batch_size].to(device, non_blocking=True))
            features = model.features(x.contiguous(memory_format=memory_format))
            outputs.append(features if what == "features" else model.classifier(features))
        if not outputs:
            dim = model.feature_dim if what == "features" else model.classifier.out_features
            return torch.empty(0, dim, device=device)
        return torch.cat(outputs).float()
    finally:
        model.train(was_training)


def predict_logits(
    model: nn.Module, images_uint8: torch.Tensor, device: str | torch.device | None = None, batch_size: int = 1024
) -> torch.Tensor:
    """Logits (N, K) as a float32 CPU tensor; eval mode, no gradients, batched.

    ``device=None`` uses the model's device; another device moves the model there.
    """
    return _batched_outputs(model, images_uint8, device, batch_size, "logits").cpu()


def predict(
    model: nn.Module,
    loss: nn.Module,
    images_uint8: torch.Tensor,
    device: str | torch.device | None = None,
    batch_size: int = 1024,
) -> torch.Tensor:
    """Probabilities through ``loss.predict_proba(logits)`` (not a fixed softmax/sigmoid), float32 CPU tensor.

    ``predict_proba`` runs on the model's device (the loss is moved there, in case it holds buffers).
    """
    logits = _batched_outputs(model, images_uint8, device, batch_size, "logits")
    loss.to(logits.device)
    with torch.no_grad():
        return loss.predict_proba(logits).float().cpu()


def features_of(
    model: nn.Module, images_uint8: torch.Tensor, device: str | torch.device | None = None, batch_size: int = 1024
) -> torch.Tensor:
    """Pooled features ``model.features(x)`` (N, D) as a float32 CPU tensor; eval mode, no gradients, batched."""
    return _batched_outputs(model, images_uint8, device, batch_size, "features").cpu()


# --------------------------------------------------------------------------------------------------------------
# Validation metrics
# --------------------------------------------------------------------------------------------------------------
def _validation_metrics(probs: torch.Tensor, labels: torch.Tensor, task: str) -> dict[str, float]:
    """NLL, accuracy and ECE of validation probabilities (CPU float64), through :mod:`helpers.metrics.functional`.

    Multi-class: top-label ECE (15 bins), accuracy of the arg-max. Multi-label: pooled ECE over all (sample, label)
    forecasts, ``val_accuracy`` = 1 − Hamming loss at 0.5, ``val_nll`` = :func:`metrics.multilabel_nll`,
    ``val_auroc`` = macro AUROC.
    """
    from helpers import metrics  # imported lazily: metrics is optional for prediction-only use

    if not bool(torch.isfinite(probs).all()):
        raise FloatingPointError(
            "validation probabilities are not finite: training diverged (lower lr, set grad_clip, or check the loss)"
        )
    if task == "multi-class":
        return {
            "val_nll": metrics.nll(probs, labels),
            "val_accuracy": metrics.accuracy(probs, labels),
            "val_ece": metrics.ece(probs, labels),
        }
    return {
        "val_nll": metrics.multilabel_nll(probs, labels),
        "val_accuracy": 1.0 - metrics.hamming_loss(probs, labels),
        "val_ece": metrics.multilabel_ece(probs, labels),
        "val_auroc": metrics.macro_auroc(probs, labels),
    }


# --------------------------------------------------------------------------------------------------------------
# Optimiser and schedule
# --------------------------------------------------------------------------------------------------------------
def _trainable_parameters(model: nn.Module, loss: nn.Module) -> list[nn.Parameter]:
    joint = list(getattr(loss, "joint_parameters", lambda: [])())
    model_ids = {id(p) for p in model.parameters()}
    if any(id(p) in model_ids for p in joint):
        raise ValueError("loss.joint_parameters() returned parameters of the model itself; return only the loss's own")
    return [p for p in list(model.parameters()) + joint if p.requires_grad]


def _build_optimizer(parameters: list[nn.Parameter], config: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for p in parameters if p.ndim >= 2]
    no_decay = [p for p in parameters if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum, nesterov=config.nesterov)
    return torch.optim.AdamW(groups, lr=config.lr)


def _build_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, steps_per_epoch: int):
    total_steps = config.epochs * steps_per_epoch
    if config.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.lr, total_steps=total_steps)
    if config.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
    return None


# --------------------------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------------------------
def _check_fit_inputs(model: nn.Module, loss: nn.Module, data: Any) -> None:
    for attribute in ("features", "classifier"):
        if not hasattr(model, attribute):
            raise TypeError(f"model needs a '{attribute}' attribute (build it with helpers.training.build_model)")
    for attribute in ("task", "predict_proba"):
        if not hasattr(loss, attribute):
            raise TypeError(f"loss needs '{attribute}' (subclass helpers.losses.MultiClassLoss/MultiLabelLoss)")
    for attribute in ("task", "train", "val"):
        if not hasattr(data, attribute):
            raise TypeError(f"data must be a helpers.data.DatasetBundle (missing '{attribute}')")
    if loss.task != data.task:
        raise ValueError(f"a {loss.task} loss cannot train on the {data.task} dataset {getattr(data, 'name', '')!r}")
    outputs = model.classifier.out_features
    n_classes = getattr(data, "n_classes", outputs)
    if outputs != n_classes:
        raise ValueError(
            f"the model has {outputs} outputs but {getattr(data, 'name', 'the data')!r} has {n_classes} "
            f"{'labels' if data.task == 'multi-label' else 'classes'}; build it with "
            f"num_classes=data.n_classes"
        )
    for split_name in ("train", "val"):
        split = getattr(data, split_name)
        images, labels = split.images, split.labels
        if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8 or images.ndim != 4:
            raise ValueError(f"{split_name} images must be a uint8 tensor (N, C, H, W)")
        _check_image_channels(model, images, f"{split_name} images")
        if images.shape[0] == 0 or labels.shape[0] != images.shape[0]:
            raise ValueError(
                f"{split_name} split must be non-empty with one label per image, got "
                f"{images.shape[0]} images and {labels.shape[0]} labels"
            )
        if data.task == "multi-class":
            if labels.ndim != 1 or labels.dtype != torch.int64:
                raise ValueError(
                    f"multi-class {split_name} labels must be int64 (N,), got {labels.dtype} {tuple(labels.shape)}"
                )
            if int(labels.min()) < 0 or int(labels.max()) >= outputs:
                raise ValueError(
                    f"{split_name} labels range over [{int(labels.min())}, {int(labels.max())}] but the "
                    f"model has {outputs} outputs"
                )
        elif labels.ndim != 2 or labels.shape[1] != outputs or not labels.dtype.is_floating_point:
            raise ValueError(
                f"multi-label {split_name} labels must be float (N, {outputs}), got {labels.dtype} "
                f"{tuple(labels.shape)}"
            )


# --------------------------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------------------------
def _cpu_state(module: nn.Module) -> dict[str, Any]:
    return {
        k: (v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else copy.deepcopy(v))
        for k, v in module.state_dict().items()
    }


def _check_checkpoint_path(path: Path) -> None:
    """Fail before training, not after the first epoch, when the checkpoint cannot be written at ``path``."""
    if path.is_dir():
        raise ValueError(f"checkpoint_path {path} is a directory; pass a file path such as {path / 'run.pt'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"checkpoint_path {path}: cannot create the folder {path.parent} ({error})") from error
    if not os.access(path.parent, os.W_OK):
        raise ValueError(f"checkpoint_path {path}: the folder {path.parent} is not writable")


def _save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Atomic, under a unique temporary name: an interrupted save never leaves a half-written checkpoint, and
    processes saving one path at once do not collide."""
    write_atomically_with(path, lambda file: torch.save(payload, file))


def _digest(*tensors: torch.Tensor) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(str((tuple(tensor.shape), tensor.dtype)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy())
    return digest.hexdigest()[:16]


def _run_identity(model: nn.Module, loss: nn.Module, data: Any) -> dict[str, str]:
    """What a checkpoint was trained with, beyond the config: the model's architecture, the loss (class and
    hyper-parameters, through its repr) and the training and validation data (sizes and a content hash)."""
    shapes = [(name, tuple(value.shape)) for name, value in model.state_dict().items()]
    architecture = hashlib.sha256(repr((repr(model), shapes)).encode()).hexdigest()[:16]
    n_parameters = sum(p.numel() for p in model.parameters())
    identity = {
        "model": f"{type(model).__name__} with {n_parameters:,} parameters (architecture {architecture})",
        "loss": repr(loss),
    }  # an nn.Module's repr: class name, hyper-parameters (extra_repr), sub-modules
    for split_name, label in (("train", "training data"), ("val", "validation data")):
        split = getattr(data, split_name)
        content = _digest(split.images, split.labels)
        identity[label] = (
            f"{split.images.shape[0]} images {tuple(split.images.shape[1:])}, labels "
            f"{tuple(split.labels.shape)} {split.labels.dtype} (content {content})"
        )
    return identity


def _load_checkpoint(path: Path, config: TrainConfig, identity: dict[str, str]) -> dict[str, Any]:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as error:
        raise ValueError(
            f"cannot resume from {path}: the file is damaged or not a checkpoint "
            f"({type(error).__name__}: {error}); delete it to train from the start, or pass another "
            "checkpoint_path"
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else None
        raise ValueError(
            f"{path} is not a CalibMed training checkpoint of format {CHECKPOINT_FORMAT} (found "
            f"{found!r}: an older version, or another file); use a new checkpoint_path"
        )
    saved, wanted = payload["config"], config.trajectory_dict()
    differing = sorted(k for k in wanted if saved.get(k) != wanted[k])
    if differing:
        details = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs config {wanted[k]!r}" for k in differing)
        raise ValueError(
            f"cannot resume from {path}: the config differs ({details}); use the same settings or a new checkpoint_path"
        )
    for what, now in identity.items():
        if payload["identity"].get(what) != now:
            raise ValueError(
                f"cannot resume from {path}: the {what} differs (checkpoint: "
                f"{payload['identity'].get(what)}; now: {now}); resume with the same {what}, or "
                "train into a new checkpoint_path"
            )
    return payload


def _rng_states(shuffle: torch.Generator, augment: torch.Generator) -> dict[str, Any]:
    states = {"shuffle": shuffle.get_state(), "augment": augment.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _restore_rng_states(states: dict[str, Any], shuffle: torch.Generator, augment: torch.Generator) -> None:
    shuffle.set_state(states["shuffle"])
    augment.set_state(states["augment"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


# --------------------------------------------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------------------------------------------
@dataclass
class _Progress:
    """Mutable bookkeeping of a run, saved in checkpoints."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_metric: float = math.nan
    best_model: dict[str, Any] | None = None
    best_loss: dict[str, Any] | None = None
    epochs_without_improvement: int = 0
    stopped_early: bool = False


def _is_improvement(value: float, best: float, mode: str) -> bool:
    if not math.isfinite(value):
        return False
    if math.isnan(best):
        return True
    return value < best if mode == "min" else value > best


def fit(model: nn.Module, loss: nn.Module, data: Any, config: TrainConfig | None = None) -> FitResult:
    """Train ``model`` with ``loss`` on ``data.train``, validating on ``data.val`` after every epoch.

    Returns a :class:`FitResult` whose model holds the weights of the best epoch by ``config.monitor``. With
    ``checkpoint_path`` the full state (model, loss, optimiser, scheduler, scaler, RNG states, history, best
    weights) is saved after every epoch; ``resume=True`` continues from that file and, on the CPU, ends with the
    same weights as an uninterrupted run. A checkpoint trained with another config, model, loss or data is refused
    (the error says which), and an unusable ``checkpoint_path`` fails before the first step. Seeded and
    deterministic (:func:`helpers.training.deterministic`: one seed gives the same weights bit for bit on
    one machine and software); seed the model's initialisation yourself (``seed_everything(seed)`` before
    ``build_model``).

    History records: epoch (1-based), lr (used by the epoch's last step), train_loss (mean over the epoch's
    batches), val_loss (the training loss on the whole validation split at once), val_nll, val_accuracy, val_ece
    (and val_auroc for multi-label), seconds (the epoch's wall time, validation included), plus whatever the loss's
    ``on_epoch_end`` writes into the last record. The loss's state (``loss.state_dict()``, including
    ``get_extra_state``) is checkpointed with the model and, like the model, restored to the best epoch at the end.
    """
    with determinism.deterministic():
        return _fit(model, loss, data, config)


def _fit(model: nn.Module, loss: nn.Module, data: Any, config: TrainConfig | None) -> FitResult:
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    _check_fit_inputs(model, loss, data)
    started = time.perf_counter()
    device = resolve_device(config.device)
    seed_everything(config.seed)
    memory_format = preferred_memory_format(device)
    model.to(device, memory_format=memory_format)
    loss.to(device)

    train_images = _place_images(data.train.images, device)
    train_labels = data.train.labels.to(device)
    val_images = _place_images(data.val.images, device)
    val_labels = data.val.labels.to(device)
    n_train = train_images.shape[0]
    batch_size = min(config.batch_size, n_train)
    steps_per_epoch = n_train // batch_size

    parameters = _trainable_parameters(model, loss)
    optimizer = _build_optimizer(parameters, config)
    scheduler = _build_scheduler(optimizer, config, steps_per_epoch)
    amp_dtype = _amp_dtype(device, config.amp)
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    shuffle_generator = torch.Generator().manual_seed(config.seed)
    augment_generator = torch.Generator().manual_seed(config.seed + 1)
    augmentation = config.augmentation
    after_step = getattr(loss, "after_step", None)
    on_epoch_end = getattr(loss, "on_epoch_end", None)

    progress = _Progress()
    checkpoint_path = Path(config.checkpoint_path) if config.checkpoint_path is not None else None
    identity = {}
    if checkpoint_path is not None:
        _check_checkpoint_path(checkpoint_path)
        identity = _run_identity(model, loss, data)
    if config.resume and checkpoint_path.exists():
        payload = _load_checkpoint(checkpoint_path, config, identity)
        model.load_state_dict(payload["model"])
        loss.load_state_dict(payload["loss"])
        optimizer.load_state_dict(payload["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(payload["scheduler"])
        scaler.load_state_dict(payload["scaler"])
        _restore_rng_states(payload["rng"], shuffle_generator, augment_generator)
        progress = _Progress(**payload["progress"])
    elif config.resume:
        warnings.warn(f"resume=True but no checkpoint at {checkpoint_path}: training from the start", stacklevel=2)

    first_epoch = len(progress.history) + 1
    finished = progress.stopped_early or first_epoch > config.epochs
    # a tqdm bar for a person watching, one final line in papermill / nbval / CI runs (see helpers.utils.progress)
    bar = progress_bar(
        range(first_epoch, config.epochs + 1),
        disable=not config.progress or finished,
        desc="epochs",
        initial=first_epoch - 1,
        total=config.epochs,
    )
    for epoch in [] if finished else bar:
        epoch_started = time.perf_counter()
        model.train()
        loss.train()
        permutation = torch.randperm(n_train, generator=shuffle_generator)
        label_permutation = permutation.to(device)
        image_permutation = label_permutation if train_images.device.type == device.type else permutation
        loss_sum = torch.zeros((), device=device)
        for step in range(steps_per_epoch):
            batch = slice(step * batch_size, (step + 1) * batch_size)
            x = to_float(train_images[image_permutation[batch]].to(device, non_blocking=True))
            x = augment_batch(x, augment_generator, augmentation).contiguous(memory_format=memory_format)
            y = train_labels[label_permutation[batch]]
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                features = model.features(x)
                logits = model.classifier(features)
                value = loss(logits, y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(value).backward()
            if config.grad_clip is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters, config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            last_lr = optimizer.param_groups[0]["lr"]
            if scheduler is not None:
                scheduler.step()
            loss_sum += value.detach().float()
            if after_step is not None:
                after_step(features.detach().float(), y)
        train_loss = float(loss_sum) / steps_per_epoch
        if not math.isfinite(train_loss):
            raise FloatingPointError(
                f"training loss is {train_loss} at epoch {epoch}: training diverged "
                "(lower lr, set grad_clip, or check the loss)"
            )

        loss.eval()
        with torch.no_grad():
            val_logits = _batched_outputs(model, val_images, device, config.eval_batch_size, "logits")
            val_loss = float(loss(val_logits, val_labels))
            val_probs = loss.predict_proba(val_logits).double().cpu()
        record = {
            "epoch": epoch,
            "lr": last_lr,
            "train_loss": train_loss,
            "val_loss": val_loss,
            **_validation_metrics(val_probs, val_labels.cpu(), data.task),
        }
        record["seconds"] = time.perf_counter() - epoch_started
        progress.history.append(record)
        if on_epoch_end is not None:
            on_epoch_end(epoch, progress.history)
        if config.monitor not in record:
            raise ValueError(f"monitor {config.monitor!r} is not in the history; available: {', '.join(record)}")

        value = float(record[config.monitor])
        if _is_improvement(value, progress.best_metric, config.monitor_mode):
            progress.best_epoch, progress.best_metric = epoch, value
            progress.best_model, progress.best_loss = _cpu_state(model), _cpu_state(loss)
            progress.epochs_without_improvement = 0
        else:
            progress.epochs_without_improvement += 1
        patience = config.early_stopping_patience
        progress.stopped_early = patience is not None and progress.epochs_without_improvement >= patience
        bar.set_postfix(
            train_loss=f"{train_loss:.4f}",
            val_nll=f"{record['val_nll']:.4f}",
            val_acc=f"{record['val_accuracy']:.3f}",
            val_ece=f"{record['val_ece']:.4f}",
        )

        if checkpoint_path is not None:
            _save_checkpoint(
                checkpoint_path,
                {
                    "format": CHECKPOINT_FORMAT,
                    "config": config.trajectory_dict(),
                    "identity": identity,
                    "model": _cpu_state(model),
                    "loss": _cpu_state(loss),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict() if scheduler is not None else None,
                    "scaler": scaler.state_dict(),
                    "rng": _rng_states(shuffle_generator, augment_generator),
                    "progress": asdict(progress),
                },
            )
        if progress.stopped_early:
            break
    bar.close()

    if progress.best_model is None:
        raise FloatingPointError(f"no epoch had a finite {config.monitor}; cannot pick a best epoch")
    model.load_state_dict(progress.best_model)
    loss.load_state_dict(progress.best_loss)
    model.eval()
    return FitResult(
        history=progress.history,
        best_epoch=progress.best_epoch,
        best_metric=progress.best_metric,
        model=model,
        device=str(device),
        seconds=time.perf_counter() - started,
        stopped_early=progress.stopped_early,
        monitor=config.monitor,
        software=determinism.software_record(device),
    )
