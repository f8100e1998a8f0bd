"""The segmentation loss: cross-entropy that ignores no-data, plus an optional Dice term."""

from __future__ import annotations

import torch
from segmentation_models_pytorch.losses import DiceLoss
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.config import LossConfig


class SegmentationLoss(nn.Module):
    """Weighted cross-entropy plus Dice, both skipping :data:`IGNORE_INDEX` pixels.

    Args:
        config: Loss weights and optional class weights.
        num_classes: Number of classes.

    Raises:
        ValueError: If ``class_weights`` does not have one value per class.
    """

    def __init__(self, config: LossConfig, num_classes: int) -> None:
        super().__init__()
        weight = None
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
