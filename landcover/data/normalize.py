"""Band normalisation applied on the device, batch-wise, just before the model."""

from __future__ import annotations

import torch


class BandNormalizer:
    """Turns channels-last uint8 batches into normalised float NCHW tensors.

    Args:
        mean: Per-band mean on the 0..1 scale.
        std: Per-band standard deviation on the 0..1 scale.
        device: Where the batches will be.
    """

    def __init__(self, mean: list[float], std: list[float], device: torch.device) -> None:
        self.scale = (1.0 / (255.0 * torch.tensor(std, device=device))).view(1, -1, 1, 1)
        self.shift = (torch.tensor(mean, device=device) / torch.tensor(std, device=device)).view(
            1, -1, 1, 1
        )

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Normalises a batch.

        Args:
            images: ``(B, H, W, C)`` uint8 tensor on the device.

        Returns:
            ``(B, C, H, W)`` float32 tensor ``(x / 255 - mean) / std``; its memory stays
            channels-last, which is what ``channels_last`` models want on CUDA.
        """
        x = images.permute(0, 3, 1, 2).float()
        return x * self.scale - self.shift
