"""The segmentation loss: cross-entropy that ignores no-data, plus an optional Dice term."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from segmentation_models_pytorch.losses import DiceLoss
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.config import AUTO, LossConfig

CLASS_WEIGHT_RANGE = (0.1, 10.0)
"""Bounds of the weights ``class_weights: auto`` derives (a rare class gets at most 10x)."""

ABSENT_CLASS_WEIGHT = 1.0
"""Weight ``class_weights: auto`` gives a class with no training pixel (it adds no loss)."""


def median_frequency_weights(
    frequencies: Sequence[float], bounds: tuple[float, float] = CLASS_WEIGHT_RANGE
) -> list[float]:
    """Cross-entropy class weights by median-frequency balancing (Eigen & Fergus, 2015).

    ``w_c = median(f) / f_c``, the median taken over the classes present (``f > 0``), clipped
    to ``bounds``; classes absent from the data get :data:`ABSENT_CLASS_WEIGHT` (they
    contribute no pixels to the loss anyway).

    Args:
        frequencies: Each class's share of the labelled training pixels.
        bounds: ``(low, high)`` clip range of the weights.

    Returns:
        One weight per class.
    """
    present = [f for f in frequencies if f > 0]
    if not present:
        return [ABSENT_CLASS_WEIGHT] * len(frequencies)
    median = float(np.median(present))
    low, high = bounds
    return [min(max(median / f, low), high) if f > 0 else ABSENT_CLASS_WEIGHT for f in frequencies]


class SegmentationLoss(nn.Module):
    """Weighted cross-entropy plus Dice, both skipping :data:`IGNORE_INDEX` pixels.

    Args:
        config: Loss weights and optional class weights.
        num_classes: Number of classes.

    Raises:
        ValueError: If ``class_weights`` does not have one value per class, or is still
            ``auto`` (the trainer resolves it to numbers first).
    """

    def __init__(self, config: LossConfig, num_classes: int) -> None:
        super().__init__()
        weight = None
        if config.class_weights == AUTO:
            raise ValueError("optim.loss.class_weights: auto must be resolved to numbers first")
        if config.class_weights is not None:
            if len(config.class_weights) != num_classes:
                raise ValueError(
                    f"optim.loss.class_weights needs {num_classes} values, "
                    f"got {len(config.class_weights)}"
                )
            weight = torch.tensor(config.class_weights, dtype=torch.float32)
        self.ce = nn.CrossEntropyLoss(weight=weight, ignore_index=IGNORE_INDEX)
        self.ce_weight = config.ce_weight
        self.dice_weight = config.dice_weight
        self.dice = (
            DiceLoss("multiclass", from_logits=True, ignore_index=IGNORE_INDEX)
            if config.dice_weight > 0
            else None
        )

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Computes the loss.

        Args:
            logits: ``(B, K, H, W)`` class scores.
            target: ``(B, H, W)`` int64 class indices.

        Returns:
            The scalar loss.
        """
        loss = self.ce_weight * self.ce(logits.float(), target)
        if self.dice is not None:
            loss = loss + self.dice_weight * self.dice(logits.float(), target)
        return loss
