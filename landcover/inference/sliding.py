"""Sliding-window prediction over whole tiles with smooth blending.

Windows of the patch size overlap by ``overlap`` pixels; each window's class probabilities are
weighted by a window that falls off linearly toward its edges over the overlap, and the
weighted sum is divided by the summed weights. Overlapping windows therefore cross-fade and no
seams appear at window borders.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from landcover.devices import autocast


def window_starts(length: int, size: int, overlap: int) -> list[int]:
    """Start offsets of windows covering ``length`` pixels.

    Args:
        length: Extent to cover (at least ``size``).
        size: Window size.
        overlap: Overlap between neighbouring windows (less than ``size``).

    Returns:
        Offsets from 0 to ``length - size``, the last window flush with the end.
    """
    if length <= size:
        return [0]
    stride = size - overlap
    starts = list(range(0, length - size, stride))
    starts.append(length - size)
    return starts


def blend_weights(size: int, overlap: int) -> torch.Tensor:
    """A 2-D weight window: 1 in the middle, falling linearly to near 0 over ``overlap`` px.

    Args:
        size: Window size.
        overlap: Width of the ramp at each edge.

    Returns:
        A ``(size, size)`` float32 tensor of positive weights.
    """
    ramp = max(overlap, 1)
    i = torch.arange(size, dtype=torch.float32) + 0.5
    one_d = torch.clamp(torch.minimum(i, size - i) / ramp, max=1.0)
    return torch.outer(one_d, one_d)


@torch.no_grad()
def predict_probabilities(
    model: nn.Module,
    image: np.ndarray,
    patch_size: int,
    overlap: int,
    batch_size: int,
    prepare: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device,
    autocast_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Predicts class probabilities for a whole image with blended sliding windows.

    Args:
        model: The segmentation model (in eval mode).
        image: ``(H, W, C)`` uint8 imagery.
        patch_size: Window size.
        overlap: Overlap between windows (less than half the window).
        batch_size: Windows per forward pass.
        prepare: Turns a ``(B, h, w, C)`` uint8 device batch into model input.
        device: The model's device.
        autocast_dtype: Autocast dtype on CUDA (e.g. ``torch.bfloat16``), or ``None``.

    Returns:
        ``(K, H, W)`` float32 probabilities on the CPU.
    """
    height, width = image.shape[:2]
    ph, pw = max(height, patch_size), max(width, patch_size)
    if (ph, pw) != (height, width):
        image = np.pad(image, ((0, ph - height), (0, pw - width), (0, 0)))
    weights = blend_weights(patch_size, overlap).to(device)
    windows = [
        (y, x)
        for y in window_starts(ph, patch_size, overlap)
        for x in window_starts(pw, patch_size, overlap)
    ]
    acc: torch.Tensor | None = None
    norm = torch.zeros((ph, pw), device=device)
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        batch = torch.from_numpy(
            np.stack([image[y : y + patch_size, x : x + patch_size] for y, x in chunk])
        ).to(device, non_blocking=True)
        with autocast(device, autocast_dtype):
            logits = model(prepare(batch))
        probs = torch.softmax(logits.float(), dim=1) * weights
        if acc is None:
            acc = torch.zeros((probs.shape[1], ph, pw), device=device)
        for (y, x), p in zip(chunk, probs, strict=True):
            acc[:, y : y + patch_size, x : x + patch_size] += p
            norm[y : y + patch_size, x : x + patch_size] += weights
    assert acc is not None
    return (acc / norm)[:, :height, :width].cpu()
