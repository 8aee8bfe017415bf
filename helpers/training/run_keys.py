"""What defines a trained run, and its key.

A run is defined (:func:`run_definition`) by the data set's name, the size and content (a hash) of its training,
validation *and* test splits, the model, the loss (class, hyper-parameters and initial state) and the training
configuration (recipe settings, epochs, batch size, rate, seed). Where the data live, the device and the training
version do not define a run: the key (:func:`run_key`) is a hash of the definition, and names the run's stored and
cached files (:mod:`helpers.training.run_store`).
"""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import asdict, replace
from typing import Any

import torch
from torch import nn

from helpers.training.config import TrainConfig

__all__ = ["definition_key", "run_definition", "run_key"]

# settings of a TrainConfig that do not change what is trained
_NOT_DEFINING = ("device", "progress", "checkpoint_path", "resume", "eval_batch_size")


def _tensor_hash(*tensors: torch.Tensor) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(str((tuple(tensor.shape), tensor.dtype)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy())  # the buffer itself, no bytes copy
    return digest.hexdigest()[:16]


def _stable_repr(module: nn.Module) -> str:
    """``repr(module)`` as ``nn.Module.__repr__`` writes it, except that PyTorch's own layers show only their class
    name: their ``extra_repr`` changes between PyTorch versions (BatchNorm1d gained ``bias=True``), and a run's key
    must not. Their sizes are in the state's shapes."""
    own = not type(module).__module__.startswith("torch.")
    extra_lines = module.extra_repr().split("\n") if own and module.extra_repr() else []
    child_lines = []
    for key, child in module._modules.items():
        text = _stable_repr(child).replace("\n", "\n  ")
        child_lines.append(f"({key}): {text}")
    lines = extra_lines + child_lines
    body = ""
    if lines:
        body = extra_lines[0] if len(extra_lines) == 1 and not child_lines else "\n  " + "\n  ".join(lines) + "\n"
    return f"{module._get_name()}({body})"


def _loss_fingerprint(loss: nn.Module) -> dict[str, Any]:
    """Class, hyper-parameters and state of a loss; non-tensor state (CCL-Net's optimiser and freeze rule, kept
    as module extra state) is hashed through pickle."""
    state = sorted(loss.state_dict().items())
    tensors = [value for _, value in state if isinstance(value, torch.Tensor)]
    others = [(key, value) for key, value in state if not isinstance(value, torch.Tensor)]
    return {
        "class": type(loss).__name__,
        "repr": _stable_repr(loss),
        "state_keys": [k for k, _ in state],
        "state": _tensor_hash(*tensors),
        "extra_state": hashlib.sha256(pickle.dumps(others)).hexdigest()[:16],
    }


def plain_value(value: Any) -> Any:
    """A JSON scalar as it is, any other value as its ``repr`` (a run's definition and metadata are JSON)."""
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def run_definition(bundle: Any, model_name: str, loss: nn.Module, config: TrainConfig) -> dict[str, Any]:
    """Everything that determines a trained run and its stored logits, as plain JSON values (the module docstring)."""
    splits = {name: getattr(bundle, name) for name in ("train", "val", "test")}
    config_values = asdict(replace(config, progress=True, checkpoint_path=None, resume=False))
    return {
        "dataset": bundle.name,
        "image_size": bundle.image_size,
        "split_sizes": {name: len(split.labels) for name, split in splits.items()},
        "data": {name: _tensor_hash(split.images, split.labels) for name, split in splits.items()},
        "model": model_name,
        "loss": _loss_fingerprint(loss),
        "config": {k: plain_value(v) for k, v in config_values.items() if k not in _NOT_DEFINING},
    }


def run_key(bundle: Any, model_name: str, loss: nn.Module, config: TrainConfig) -> str:
    """A hash of :func:`run_definition`."""
    return definition_key(run_definition(bundle, model_name, loss, config))


def definition_key(definition: dict[str, Any]) -> str:
    """The key of a run definition (a stored run's metadata holds its definition: it must hash to the file's key)."""
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:20]
