"""Training checkpoints: the full state of a :func:`helpers.training.fit` run after an epoch (model, loss,
optimiser, scheduler, gradient scaler, RNG states, history, best weights), written atomically, and checked on
resume against the config, model, loss and data it was trained with."""

from __future__ import annotations

import copy
import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

import torch
from torch import nn

from helpers.training.config import TrainConfig
from helpers.utils import write_atomically_with

__all__ = ["CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = 2  # 2: checkpoints record the model, loss and data they were trained with


def cpu_state(module: nn.Module) -> dict[str, Any]:
    """A copy of ``module.state_dict()`` on the CPU (tensors detached and copied, other entries deep-copied)."""
    return {
        k: (v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else copy.deepcopy(v))
        for k, v in module.state_dict().items()
    }


def check_checkpoint_path(path: Path) -> None:
    """Fail before training, not after the first epoch, when the checkpoint cannot be written at ``path``."""
    if path.is_dir():
        raise ValueError(f"checkpoint_path {path} is a directory; pass a file path such as {path / 'run.pt'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"checkpoint_path {path}: cannot create the folder {path.parent} ({error})") from error
    if not os.access(path.parent, os.W_OK):
        raise ValueError(f"checkpoint_path {path}: the folder {path.parent} is not writable")


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Atomic, under a unique temporary name: an interrupted save never leaves a half-written checkpoint, and
    processes saving one path at once do not collide."""
    write_atomically_with(path, lambda file: torch.save(payload, file))


def _digest(*tensors: torch.Tensor) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(str((tuple(tensor.shape), tensor.dtype)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy())
    return digest.hexdigest()[:16]


def run_identity(model: nn.Module, loss: nn.Module, data: Any) -> dict[str, str]:
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


def load_checkpoint(path: Path, config: TrainConfig, identity: dict[str, str]) -> dict[str, Any]:
    """The checkpoint at ``path``, refused (ValueError naming what differs) when it is damaged, of another format,
    or was trained with another config, model, loss or data than ``config`` and ``identity``."""
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


def rng_states(shuffle: torch.Generator, augment: torch.Generator) -> dict[str, Any]:
    """The states of the shuffling and augmentation generators and of torch's global ones (CPU, every CUDA device)."""
    states = {"shuffle": shuffle.get_state(), "augment": augment.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any], shuffle: torch.Generator, augment: torch.Generator) -> None:
    """Set the generators back to the states :func:`rng_states` recorded."""
    shuffle.set_state(states["shuffle"])
    augment.set_state(states["augment"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
