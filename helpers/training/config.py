"""The settings of a training run: :class:`TrainConfig` (every knob of :func:`helpers.training.fit`) and
:class:`Augmentation`, both checked on construction."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from helpers.losses.base import check_number

__all__ = ["OPTIMIZERS", "SCHEDULES", "MONITOR_MODES", "Augmentation", "TrainConfig"]

OPTIMIZERS = ("sgd", "adamw")
SCHEDULES = ("onecycle", "constant", "cosine")
MONITOR_MODES = ("min", "max")

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
    """Every knob of :func:`helpers.training.fit`. Values are checked on construction.

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
