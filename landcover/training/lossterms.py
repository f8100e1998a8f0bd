"""The built-in loss terms, one class each, registered by name (:mod:`.lossregistry`).

Cross-entropy is torch's; Dice, focal, Lovasz-softmax and Tversky are
``segmentation_models_pytorch.losses``' (imported when a term is built, so that the launcher
can check the names without loading smp). Every term skips
:data:`~landcover.classes.IGNORE_INDEX` pixels through its ``ignore_index``, so a no-data
pixel changes neither the loss nor its gradient. Cross-entropy and Dice also register their
fused form, :class:`~landcover.training.fusedloss.CeDiceLoss`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.config import LossConfig
from landcover.training.fusedloss import CeDiceLoss
from landcover.training.lossregistry import register_fused, register_loss

MULTICLASS = "multiclass"

Weights = Sequence[float] | None


@register_loss("ce", "cross-entropy (torch), per-class weighted", class_weights=True)
class CrossEntropy(nn.CrossEntropyLoss):
    """``nn.CrossEntropyLoss`` with the class weights and ``ignore_index``."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: Weights) -> None:
        weight = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float32)
        super().__init__(weight=weight, ignore_index=IGNORE_INDEX)


class _SmpTerm(nn.Module):
    """A term computed by one of smp's losses (:attr:`loss`)."""

    loss: nn.Module

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Computes the term (see smp's loss)."""
        return self.loss(logits, target)


@register_loss("dice", "multi-class Dice (smp), from logits")
class Dice(_SmpTerm):
    """smp's multi-class ``DiceLoss``: ``1 - score`` per class present, the mean over classes."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: Weights) -> None:
        from segmentation_models_pytorch.losses import DiceLoss

        super().__init__()
        self.loss = DiceLoss(MULTICLASS, from_logits=True, ignore_index=IGNORE_INDEX)


@register_loss("focal", "multi-class focal (smp), one-vs-rest", class_weights=True)
class Focal(_SmpTerm):
    """smp's multi-class ``FocalLoss`` (``optim.loss.focal_gamma``), one-vs-rest, averaged."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: Weights) -> None:
        from segmentation_models_pytorch.losses import FocalLoss

        super().__init__()
        self.loss = FocalLoss(
            MULTICLASS,
            gamma=config.focal_gamma,
            ignore_index=IGNORE_INDEX,
            class_weights=None if class_weights is None else list(class_weights),
        )


@register_loss("lovasz", "Lovasz-softmax (smp), an IoU surrogate")
class Lovasz(_SmpTerm):
    """smp's multi-class Lovasz-softmax, and 0 (with a zero gradient) for an all no-data batch."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: Weights) -> None:
        from segmentation_models_pytorch.losses import LovaszLoss

        super().__init__()
        self.loss = LovaszLoss(MULTICLASS, ignore_index=IGNORE_INDEX)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Computes the term (see smp's ``LovaszLoss``)."""
        if not bool((target != IGNORE_INDEX).any()):
            return logits.sum() * 0.0
        return self.loss(logits, target)


@register_loss("tversky", "Tversky (smp): false positives and negatives weighed apart")
class Tversky(_SmpTerm):
    """smp's multi-class ``TverskyLoss`` (``optim.loss.tversky_alpha``, ``tversky_beta``)."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: Weights) -> None:
        from segmentation_models_pytorch.losses import TverskyLoss

        super().__init__()
        self.loss = TverskyLoss(
            MULTICLASS,
            from_logits=True,
            ignore_index=IGNORE_INDEX,
            alpha=config.tversky_alpha,
            beta=config.tversky_beta,
        )


def _fused_ce_dice(
    weights: Mapping[str, float], num_classes: int, class_weights: Weights
) -> nn.Module:
    """Cross-entropy and/or Dice in one pass: fewer kernels (issue 43)."""
    return CeDiceLoss(num_classes, weights.get("ce", 0.0), weights.get("dice", 0.0), class_weights)


register_fused(("ce", "dice"), _fused_ce_dice)
