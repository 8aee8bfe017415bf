"""Devices, seeding and the image data path of the training engine.

The uint8 images are moved to the device once (:func:`place_images`) and batches are cut from them by indexing;
:func:`to_float` normalises on the device. On CUDA the images stay on the GPU when they take at most
:data:`DEVICE_DATA_FRACTION` of its free memory (ChestMNIST at 224 px is ~5.6 GB uint8); otherwise they stay in
pinned CPU memory and each batch is copied over.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DEVICE_DATA_FRACTION", "resolve_device", "seed_everything", "to_float", "preferred_memory_format"]

DEVICE_DATA_FRACTION = 0.5  # keep the uint8 images on a CUDA device if they take at most this share of free memory


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


def preferred_memory_format(device: torch.device) -> torch.memory_format:
    """Channels-last (NHWC) on the CPU, where ``bench/bench_memory_format.py`` measured the small CNN's training
    step 1.4x faster than in the default layout; the default elsewhere (on an H100 the small CNNs are bound by kernel
    launches and both layouts ran within 3 %)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


def place_images(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Put uint8 images on ``device`` when they fit comfortably, else keep them on the CPU (pinned for CUDA)."""
    if device.type == "cpu":
        return images.contiguous()
    if device.type == "cuda":
        free_bytes, _ = torch.cuda.mem_get_info(device)
        if images.numel() * images.element_size() > DEVICE_DATA_FRACTION * free_bytes:
            return images.contiguous().pin_memory()
    return images.to(device)


def amp_dtype(device: torch.device, enabled: bool) -> torch.dtype | None:
    """The autocast dtype of mixed precision (``TrainConfig.amp``): CUDA only, bf16 where supported, else fp16."""
    if not enabled or device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter or buffer (the CPU for a model without any)."""
    for tensor in list(model.parameters()) + list(model.buffers()):
        return tensor.device
    return torch.device("cpu")
