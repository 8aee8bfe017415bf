"""The two training recipes of the course, and a cache of trained runs shared by the notebooks.

**Recipes.** Calibration losses correct over-confidence; applied to a model that is already calibrated they can
over-correct. Every comparison therefore runs under two recipes, defined here once:

* ``well-regularised`` — SGD with momentum, one-cycle schedule, weight decay 5e-4, batched flips/shifts/rotations;
  the epoch with the best validation NLL is kept.
* ``over-fitting`` — constant learning rate (half the peak rate), no weight decay, no augmentation, and the *last*
  epoch is kept: the regime of the papers' long fine-tuning of large networks, where cross-entropy is over-confident.

**Run cache.** A trained run (weights, the loss's own state, history, validation and test logits) is stored under
``runs/cache/`` keyed by everything that determines it: the training and validation images and labels, the
model, the loss (class, hyper-parameters and tensors), the training configuration, and a hash of the source of
the modules that train (``train``, ``models``, ``metrics`` — it picks the kept epoch —, ``losses``, ``cclnet``,
this module).
Notebook 06 therefore reuses the cross-entropy runs of notebooks 01–05 instead of training them again, and any code
change retrains. Set ``CALIBMED_NO_CACHE=1`` to always train.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from . import course, models, train

RECIPES: dict[str, dict[str, Any]] = {
    "well-regularised": dict(optimizer="sgd", momentum=0.9, weight_decay=5e-4, schedule="onecycle", augment=True,
                             monitor="val_nll", monitor_mode="min", lr_scale=1.0),
    "over-fitting": dict(optimizer="sgd", momentum=0.9, weight_decay=0.0, schedule="constant", augment=False,
                         monitor="epoch", monitor_mode="max", lr_scale=0.5),
}
CACHE_DIR = course.REPO_ROOT / "runs" / "cache"
# metrics.py is here because fit keeps the epoch its validation metrics pick (val_nll, val_ece)
_SOURCE_FILES = ("train.py", "models.py", "metrics.py", "experiments.py", "losses/base.py", "losses/multiclass.py",
                 "losses/multilabel.py", "cclnet.py")


def recipe_config(recipe: str, *, epochs: int, lr: float, batch_size: int, seed: int = 0, device: str = "auto",
                  **overrides: Any) -> train.TrainConfig:
    """The :class:`~helpers.train.TrainConfig` of a named recipe; ``lr`` is the recipe's peak rate before scaling."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {list(RECIPES)}")
    settings = dict(RECIPES[recipe])
    lr_scale = settings.pop("lr_scale")
    settings.update(overrides)
    return train.TrainConfig(epochs=epochs, lr=lr * lr_scale, batch_size=batch_size, seed=seed, device=device,
                             **settings)


@dataclass
class TrainedRun:
    """A trained model with its logits on the validation and test splits."""

    name: str
    model: nn.Module
    loss: nn.Module
    history: list[dict[str, float]]
    val_logits: torch.Tensor
    test_logits: torch.Tensor
    seconds: float
    from_cache: bool
    key: str

    @property
    def val_probs(self) -> torch.Tensor:
        with torch.no_grad():
            return self.loss.predict_proba(self.val_logits).float()

    @property
    def test_probs(self) -> torch.Tensor:
        with torch.no_grad():
            return self.loss.predict_proba(self.test_logits).float()


def _source_hash() -> str:
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for name in _SOURCE_FILES:
        digest.update((package / name).read_bytes())
    return digest.hexdigest()[:16]


def _tensor_hash(*tensors: torch.Tensor) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(str((tuple(tensor.shape), tensor.dtype)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy())  # the buffer itself, no bytes copy
    return digest.hexdigest()[:16]


def _loss_fingerprint(loss: nn.Module) -> dict[str, Any]:
    """Class, hyper-parameters and state of a loss; non-tensor state (CCL-Net's optimiser and freeze rule, kept
    as module extra state) is hashed through pickle."""
    state = sorted(loss.state_dict().items())
    tensors = [value for _, value in state if isinstance(value, torch.Tensor)]
    others = [(key, value) for key, value in state if not isinstance(value, torch.Tensor)]
    return {"class": type(loss).__name__, "repr": repr(loss), "state_keys": [k for k, _ in state],
            "state": _tensor_hash(*tensors), "extra_state": hashlib.sha256(pickle.dumps(others)).hexdigest()[:16]}


def run_key(bundle: Any, model_name: str, loss: nn.Module, config: train.TrainConfig, seed_salt: str = "") -> str:
    """A hash of everything that determines a trained run (see the module docstring)."""
    description = {
        "dataset": bundle.name, "image_size": bundle.image_size,
        "data": _tensor_hash(bundle.train.images, bundle.train.labels, bundle.val.images, bundle.val.labels),
        "model": model_name, "loss": _loss_fingerprint(loss),
        "config": {k: (repr(v) if not isinstance(v, (int, float, str, bool, type(None))) else v)
                   for k, v in asdict(replace(config, progress=True, checkpoint_path=None, resume=False)).items()},
        "code": _source_hash(), "salt": seed_salt,
    }
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:20]


def train_run(name: str, loss: nn.Module, bundle: Any, model_name: str, config: train.TrainConfig,
              cache: bool = True, cache_dir: str | os.PathLike | None = None) -> TrainedRun:
    """Train ``model_name`` with ``loss`` on ``bundle`` through :func:`helpers.train.fit`, or load the cached run.

    Prints which of the two happened, so every notebook output says whether its numbers were trained here.
    """
    cache = cache and os.environ.get("CALIBMED_NO_CACHE", "") in ("", "0")
    key = run_key(bundle, model_name, loss, config)
    path = Path(cache_dir or CACHE_DIR) / f"{key}.pt"
    torch.manual_seed(config.seed)
    model = models.build_model(model_name, bundle.n_channels, bundle.n_classes, image_size=bundle.image_size)
    if cache and path.exists():
        stored = torch.load(path, map_location="cpu", weights_only=False)
        model.load_state_dict(stored["model"])
        loss.load_state_dict(stored["loss"])
        print(f"{name}: loaded from the run cache ({path.name}; trained in {stored['seconds']:.0f} s)")
        return TrainedRun(name, model, loss, stored["history"], stored["val_logits"], stored["test_logits"],
                          stored["seconds"], True, key)
    print(f"{name}: training {model_name} with {type(loss).__name__} for {config.epochs} epochs")
    result = train.fit(model, loss, bundle, config)
    val_logits = train.predict_logits(result.model, bundle.val.images, batch_size=config.eval_batch_size)
    test_logits = train.predict_logits(result.model, bundle.test.images, batch_size=config.eval_batch_size)
    run = TrainedRun(name, result.model.cpu(), loss.cpu(), result.history, val_logits, test_logits, result.seconds,
                     False, key)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": run.model.state_dict(), "loss": loss.state_dict(), "history": run.history,
                    "val_logits": val_logits, "test_logits": test_logits, "seconds": result.seconds}, path)
    return run
