"""Batched augmentation on the device: per-sample random flips, shifts and rotations of a training batch
(:class:`helpers.training.Augmentation` holds the settings).

All of a batch's samples are transformed in one ``grid_sample`` call (exact ``torch.where`` flips when shifts and
rotations are off). The random numbers come from a seeded CPU generator, so the augmentation stream is
reproducible and identical on every device.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers.training.config import Augmentation

__all__ = ["augment_batch", "affine_sampling_grid"]


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
