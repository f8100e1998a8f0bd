"""Weighted cross-entropy plus multi-class Dice in one pass: few kernels, no read-back.

The default loss (``ce`` and/or ``dice``) built from ``nn.CrossEntropyLoss`` and smp's
``DiceLoss`` launches about 40 operations forward and 30 backward, each a kernel on a GPU, where
a small batch's step is bound by launches (issue 43). :class:`CeDiceLoss` computes the same two
terms from one ``log_softmax`` and a handful of per-class sums: the cross-entropy is
``-sum_c w_c S_c / sum_c w_c n_c`` (``S_c`` the summed log-probability of class ``c`` at its
pixels, ``n_c`` its pixel count), the Dice score of class ``c`` is
``I_c / max((P_c + n_c) / 2, eps)`` (``I_c`` the summed probability of ``c`` at its pixels,
``P_c`` over every labelled pixel), as smp's ``soft_dice_score``. No-data pixels
(:data:`~landcover.classes.IGNORE_INDEX`) match no class, so they add to no sum.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from landcover.classes import IGNORE_INDEX

DICE_EPS = 1e-7
"""smp's ``DiceLoss`` default ``eps``: the least denominator of a class's Dice score."""


class CeDiceLoss(nn.Module):
    """``ce_weight * CE + dice_weight * Dice``, as ``nn.CrossEntropyLoss`` and smp's ``DiceLoss``.

    The cross-entropy is weighted per class (``class_weights``) and averaged over the labelled
    pixels' weights, as ``nn.CrossEntropyLoss(weight, ignore_index=IGNORE_INDEX)``; the Dice
    loss is smp's multi-class ``DiceLoss(from_logits=True, ignore_index=IGNORE_INDEX)``
    (smooth 0, eps 1e-7): ``1 - score`` per class, 0 for a class absent from the batch, the
    mean over classes.

    Args:
        num_classes: Number of classes.
        ce_weight: Factor of the cross-entropy (0: left out).
        dice_weight: Factor of the Dice loss (0: left out).
        class_weights: Optional per-class cross-entropy weights.
    """

    def __init__(
        self,
        num_classes: int,
        ce_weight: float,
        dice_weight: float,
        class_weights: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        if ce_weight <= 0 and dice_weight <= 0:
            raise ValueError("CeDiceLoss needs a positive ce_weight or dice_weight")
        self.ce_weight = ce_weight
        self.dice_weight = dice_weight
        weights = [1.0] * num_classes if class_weights is None else list(class_weights)
        classes = torch.arange(num_classes, dtype=torch.long).view(1, num_classes, 1, 1)
        self.register_buffer("classes", classes, persistent=False)
        self.register_buffer(
            "class_weights", torch.tensor(weights, dtype=torch.float32), persistent=False
        )
        # the CE's numerator weights, its factor and sign folded in (one kernel fewer)
        self.register_buffer("ce_numerator", -ce_weight * self.class_weights, persistent=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Computes the loss.

        Args:
            logits: ``(B, K, H, W)`` class scores (taken as float32).
            target: ``(B, H, W)`` int64 class indices, :data:`IGNORE_INDEX` for no data.

        Returns:
            The scalar loss.
        """
        logp = torch.log_softmax(logits.float(), dim=1)
        labels = target.unsqueeze(1)
        onehot = labels == self.classes  # (B, K, H, W); a no-data pixel matches no class
        dims = (0, 2, 3)
        count = onehot.sum(dims)  # n_c
        parts = []
        if self.ce_weight > 0:
            log_sums = (logp * onehot).sum(dims)  # S_c
            weight = (self.class_weights * count).sum()
            parts.append((self.ce_numerator * log_sums).sum() / weight)
        if self.dice_weight > 0:
            prob = logp.exp()
            inter = (prob * onehot).sum(dims)  # I_c
            predicted = (prob * (labels != IGNORE_INDEX)).sum(dims)  # P_c
            score = inter / ((predicted + count) * 0.5).clamp_min(DICE_EPS)
            present = (count > 0) * (self.dice_weight / len(count))
            parts.append(((1.0 - score) * present).sum())
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]
