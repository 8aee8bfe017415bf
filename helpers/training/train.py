"""The one training engine of the course: :func:`fit`.

No notebook writes a training loop; they all call :func:`fit` with a model from :mod:`helpers.training.models`, a loss
object from :mod:`helpers.losses`, a :class:`helpers.data.DatasetBundle` and a :class:`helpers.training.TrainConfig`.
A call reads as its steps: :func:`_set_up` (device, data, optimiser, schedule, generators), :func:`_resume` (from a
checkpoint), then per epoch :func:`_train_one_epoch` (:func:`_train_step` per batch), :func:`_validate`,
:func:`_track_best_epoch` and :func:`_save_progress`, and at the end :func:`_restore_best_epoch`. The other pieces
live beside it: :mod:`helpers.training.config`, :mod:`helpers.training.devices`, :mod:`helpers.training.augmentation`,
:mod:`helpers.training.prediction` (``predict``, ``predict_logits``, the validation metrics) and
:mod:`helpers.training.checkpoints`.

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

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from helpers.training import determinism
from helpers.training.augmentation import augment_batch
from helpers.training.checkpoints import (
    CHECKPOINT_FORMAT,
    check_checkpoint_path,
    cpu_state,
    load_checkpoint,
    restore_rng_states,
    rng_states,
    run_identity,
    save_checkpoint,
)
from helpers.training.config import Augmentation, TrainConfig
from helpers.training.devices import (
    amp_dtype,
    place_images,
    preferred_memory_format,
    resolve_device,
    seed_everything,
    to_float,
)
from helpers.training.prediction import batched_outputs, check_image_channels, validation_metrics
from helpers.utils import progress_bar

__all__ = ["FitResult", "fit"]


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


@dataclass
class _TrainingState:
    """What one call of :func:`fit` sets up (:func:`_set_up`) and then works with, epoch after epoch."""

    model: nn.Module
    loss: nn.Module
    data: Any
    config: TrainConfig
    device: torch.device
    memory_format: torch.memory_format
    train_images: torch.Tensor  # uint8, on the device or pinned on the CPU (devices.place_images)
    train_labels: torch.Tensor
    val_images: torch.Tensor
    val_labels: torch.Tensor
    batch_size: int
    steps_per_epoch: int
    parameters: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: Any  # an LR scheduler, or None for the constant schedule
    autocast_dtype: torch.dtype | None
    scaler: torch.amp.GradScaler
    shuffle_generator: torch.Generator
    augment_generator: torch.Generator
    augmentation: Augmentation | None
    after_step: Callable[..., Any] | None
    on_epoch_end: Callable[..., Any] | None
    progress: _Progress
    checkpoint_path: Path | None
    identity: dict[str, str]


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
    """:func:`fit` without its deterministic mode (``bench/bench_determinism.py`` times both)."""
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    _check_fit_inputs(model, loss, data)
    started = time.perf_counter()
    training = _set_up(model, loss, data, config)
    _resume(training)
    _run_epochs(training)
    return _restore_best_epoch(training, started)


# --------------------------------------------------------------------------------------------------------------
# The steps of fit
# --------------------------------------------------------------------------------------------------------------
def _set_up(model: nn.Module, loss: nn.Module, data: Any, config: TrainConfig) -> _TrainingState:
    """Seed, move the model, loss and data to the device, build the optimiser, schedule, gradient scaler and the
    shuffling and augmentation generators, and check the checkpoint path (before the first step)."""
    device = resolve_device(config.device)
    seed_everything(config.seed)
    memory_format = preferred_memory_format(device)
    model.to(device, memory_format=memory_format)
    loss.to(device)

    train_images = place_images(data.train.images, device)
    train_labels = data.train.labels.to(device)
    val_images = place_images(data.val.images, device)
    val_labels = data.val.labels.to(device)
    n_train = train_images.shape[0]
    batch_size = min(config.batch_size, n_train)
    steps_per_epoch = n_train // batch_size

    parameters = _trainable_parameters(model, loss)
    optimizer = _build_optimizer(parameters, config)
    scheduler = _build_scheduler(optimizer, config, steps_per_epoch)
    autocast_dtype = amp_dtype(device, config.amp)
    scaler = torch.amp.GradScaler("cuda", enabled=autocast_dtype == torch.float16)
    shuffle_generator = torch.Generator().manual_seed(config.seed)
    augment_generator = torch.Generator().manual_seed(config.seed + 1)

    checkpoint_path = Path(config.checkpoint_path) if config.checkpoint_path is not None else None
    identity = {}
    if checkpoint_path is not None:
        check_checkpoint_path(checkpoint_path)
        identity = run_identity(model, loss, data)
    return _TrainingState(
        model=model,
        loss=loss,
        data=data,
        config=config,
        device=device,
        memory_format=memory_format,
        train_images=train_images,
        train_labels=train_labels,
        val_images=val_images,
        val_labels=val_labels,
        batch_size=batch_size,
        steps_per_epoch=steps_per_epoch,
        parameters=parameters,
        optimizer=optimizer,
        scheduler=scheduler,
        autocast_dtype=autocast_dtype,
        scaler=scaler,
        shuffle_generator=shuffle_generator,
        augment_generator=augment_generator,
        augmentation=config.augmentation,
        after_step=getattr(loss, "after_step", None),
        on_epoch_end=getattr(loss, "on_epoch_end", None),
        progress=_Progress(),
        checkpoint_path=checkpoint_path,
        identity=identity,
    )


def _resume(training: _TrainingState) -> None:
    """With ``resume=True``, continue from the checkpoint: every state, the RNG streams and the progress so far."""
    config, path = training.config, training.checkpoint_path
    if config.resume and path.exists():
        payload = load_checkpoint(path, config, training.identity)
        training.model.load_state_dict(payload["model"])
        training.loss.load_state_dict(payload["loss"])
        training.optimizer.load_state_dict(payload["optimizer"])
        if training.scheduler is not None:
            training.scheduler.load_state_dict(payload["scheduler"])
        training.scaler.load_state_dict(payload["scaler"])
        restore_rng_states(payload["rng"], training.shuffle_generator, training.augment_generator)
        training.progress = _Progress(**payload["progress"])
    elif config.resume:
        # stacklevel 3: reported at fit's call of _fit, as before fit had named steps
        warnings.warn(f"resume=True but no checkpoint at {path}: training from the start", stacklevel=3)


def _run_epochs(training: _TrainingState) -> None:
    """The remaining epochs, each trained, validated, compared with the best so far and checkpointed; stops early
    when ``early_stopping_patience`` epochs pass without improvement."""
    config, progress = training.config, training.progress
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
        train_loss, last_lr = _train_one_epoch(training, epoch)
        record = _validate(training, epoch, last_lr, train_loss, epoch_started)
        _track_best_epoch(training, epoch, record)
        bar.set_postfix(  # in words: the final line may stand in a notebook's main flow (issue 28, item 3)
            **{
                "training loss": f"{train_loss:.4f}",
                "validation NLL": f"{record['val_nll']:.4f}",
                "validation accuracy": f"{record['val_accuracy']:.3f}",
                "validation ECE": f"{record['val_ece']:.4f}",
            }
        )
        if training.checkpoint_path is not None:
            _save_progress(training)
        if progress.stopped_early:
            break
    bar.close()


def _train_one_epoch(training: _TrainingState, epoch: int) -> tuple[float, float]:
    """One pass over a seeded permutation of the training split in full batches (the last incomplete batch is
    dropped). Returns the epoch's mean training loss and the learning rate of its last step."""
    device = training.device
    training.model.train()
    training.loss.train()
    permutation = torch.randperm(training.train_images.shape[0], generator=training.shuffle_generator)
    label_permutation = permutation.to(device)
    image_permutation = label_permutation if training.train_images.device.type == device.type else permutation
    loss_sum = torch.zeros((), device=device)
    for step in range(training.steps_per_epoch):
        batch = slice(step * training.batch_size, (step + 1) * training.batch_size)
        last_lr = _train_step(training, image_permutation[batch], label_permutation[batch], loss_sum)
    train_loss = float(loss_sum) / training.steps_per_epoch
    if not math.isfinite(train_loss):
        raise FloatingPointError(
            f"training loss is {train_loss} at epoch {epoch}: training diverged "
            "(lower lr, set grad_clip, or check the loss)"
        )
    return train_loss, last_lr


def _train_step(
    training: _TrainingState, image_indices: torch.Tensor, label_indices: torch.Tensor, loss_sum: torch.Tensor
) -> float:
    """One optimiser step on one batch: augment, forward (under autocast with mixed precision), backward, clip,
    step the optimiser and the schedule, add the batch's loss to ``loss_sum`` (in place), then the loss's
    ``after_step`` hook. Returns the learning rate the step used."""
    config, device, optimizer, scaler = training.config, training.device, training.optimizer, training.scaler
    x = to_float(training.train_images[image_indices].to(device, non_blocking=True))
    x = augment_batch(x, training.augment_generator, training.augmentation)
    x = x.contiguous(memory_format=training.memory_format)
    y = training.train_labels[label_indices]
    autocast_dtype = training.autocast_dtype
    with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        features = training.model.features(x)
        logits = training.model.classifier(features)
        value = training.loss(logits, y)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(value).backward()
    if config.grad_clip is not None:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(training.parameters, config.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    last_lr = optimizer.param_groups[0]["lr"]
    if training.scheduler is not None:
        training.scheduler.step()
    loss_sum += value.detach().float()
    if training.after_step is not None:
        training.after_step(features.detach().float(), y)
    return last_lr


def _validate(
    training: _TrainingState, epoch: int, last_lr: float, train_loss: float, epoch_started: float
) -> dict[str, float]:
    """The epoch's history record: the loss and metrics on the whole validation split, appended to the history,
    then the loss's ``on_epoch_end`` hook (which may add keys). The monitored key must be in the record."""
    model, loss, config = training.model, training.loss, training.config
    loss.eval()
    with torch.no_grad():
        val_logits = batched_outputs(model, training.val_images, training.device, config.eval_batch_size, "logits")
        val_loss = float(loss(val_logits, training.val_labels))
        val_probs = loss.predict_proba(val_logits).double().cpu()
    record = {
        "epoch": epoch,
        "lr": last_lr,
        "train_loss": train_loss,
        "val_loss": val_loss,
        **validation_metrics(val_probs, training.val_labels.cpu(), training.data.task),
    }
    record["seconds"] = time.perf_counter() - epoch_started
    training.progress.history.append(record)
    if training.on_epoch_end is not None:
        training.on_epoch_end(epoch, training.progress.history)
    if config.monitor not in record:
        raise ValueError(f"monitor {config.monitor!r} is not in the history; available: {', '.join(record)}")
    return record


def _track_best_epoch(training: _TrainingState, epoch: int, record: dict[str, float]) -> None:
    """Keep a copy of the model's and loss's state when the monitored value improves; count the epochs without
    improvement and decide whether to stop early."""
    progress, config = training.progress, training.config
    value = float(record[config.monitor])
    if _is_improvement(value, progress.best_metric, config.monitor_mode):
        progress.best_epoch, progress.best_metric = epoch, value
        progress.best_model, progress.best_loss = cpu_state(training.model), cpu_state(training.loss)
        progress.epochs_without_improvement = 0
    else:
        progress.epochs_without_improvement += 1
    patience = config.early_stopping_patience
    progress.stopped_early = patience is not None and progress.epochs_without_improvement >= patience


def _save_progress(training: _TrainingState) -> None:
    """Checkpoint everything a resumed run needs to continue exactly (:mod:`helpers.training.checkpoints`)."""
    scheduler = training.scheduler
    save_checkpoint(
        training.checkpoint_path,
        {
            "format": CHECKPOINT_FORMAT,
            "config": training.config.trajectory_dict(),
            "identity": training.identity,
            "model": cpu_state(training.model),
            "loss": cpu_state(training.loss),
            "optimizer": training.optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": training.scaler.state_dict(),
            "rng": rng_states(training.shuffle_generator, training.augment_generator),
            "progress": asdict(training.progress),
        },
    )


def _restore_best_epoch(training: _TrainingState, started: float) -> FitResult:
    """Load the best epoch's model and loss state and return the run's :class:`FitResult`."""
    progress, model = training.progress, training.model
    if progress.best_model is None:
        raise FloatingPointError(f"no epoch had a finite {training.config.monitor}; cannot pick a best epoch")
    model.load_state_dict(progress.best_model)
    training.loss.load_state_dict(progress.best_loss)
    model.eval()
    return FitResult(
        history=progress.history,
        best_epoch=progress.best_epoch,
        best_metric=progress.best_metric,
        model=model,
        device=str(training.device),
        seconds=time.perf_counter() - started,
        stopped_early=progress.stopped_early,
        monitor=training.config.monitor,
        software=determinism.software_record(training.device),
    )


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
        check_image_channels(model, images, f"{split_name} images")
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
