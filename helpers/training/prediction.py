"""What a trained model gives: logits (:func:`predict_logits`), the loss's probabilities (:func:`predict`), pooled
features (:func:`features_of`) and per-class accuracy (:func:`class_accuracy_from_model`), all batched, in eval
mode and without gradients; and the validation metrics :func:`helpers.training.fit` records after every epoch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from helpers.losses import class_accuracy_from_predictions
from helpers.training.devices import model_device, preferred_memory_format, resolve_device, to_float

__all__ = ["predict_logits", "predict", "features_of", "class_accuracy_from_model"]


def _as_uint8_images(images: Any) -> torch.Tensor:
    images = torch.as_tensor(images)
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(
            f"expected uint8 images of shape (N, C, H, W), got {images.dtype} {tuple(images.shape)}; "
            "pass a Split's raw images (normalisation happens inside)"
        )
    return images


def check_image_channels(model: nn.Module, images: torch.Tensor, what: str = "images") -> None:
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


@torch.no_grad()
def batched_outputs(
    model: nn.Module, images: torch.Tensor, device: torch.device | None, batch_size: int, what: str
) -> torch.Tensor:
    """Run ``model`` in eval mode over ``images`` in batches; ``what`` is 'logits' or 'features'. Stays on device."""
    images = _as_uint8_images(images)
    check_image_channels(model, images)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    device = model_device(model) if device is None else resolve_device(device)
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
    return batched_outputs(model, images_uint8, device, batch_size, "logits").cpu()


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
    logits = batched_outputs(model, images_uint8, device, batch_size, "logits")
    loss.to(logits.device)
    with torch.no_grad():
        return loss.predict_proba(logits).float().cpu()


def features_of(
    model: nn.Module, images_uint8: torch.Tensor, device: str | torch.device | None = None, batch_size: int = 1024
) -> torch.Tensor:
    """Pooled features ``model.features(x)`` (N, D) as a float32 CPU tensor; eval mode, no gradients, batched."""
    return batched_outputs(model, images_uint8, device, batch_size, "features").cpu()


def class_accuracy_from_model(
    model: nn.Module,
    images_uint8: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int | None = None,
    device=None,
    batch_size: int = 1024,
    fill_missing: float | None = None,
) -> torch.Tensor:
    """Per-class validation accuracy of a trained (plain cross-entropy) model — the LS+ priors' input (Sambyal et
    al., MICCAI 2024, Algorithm 1 line 2; see :class:`helpers.losses.LSPlus`).

    Thin wrapper: :func:`predict_logits` then :func:`helpers.losses.class_accuracy_from_predictions`.
    """
    logits = predict_logits(model, images_uint8, device=device, batch_size=batch_size)
    k = logits.shape[1] if num_classes is None else num_classes
    return class_accuracy_from_predictions(logits, torch.as_tensor(labels).to(logits.device), k, fill_missing)


def validation_metrics(probs: torch.Tensor, labels: torch.Tensor, task: str) -> dict[str, float]:
    """NLL, accuracy and ECE of validation probabilities (CPU float64), through :mod:`helpers.metrics`.

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
