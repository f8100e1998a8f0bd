"""Weighted cross-entropy plus multi-class Dice in one pass: few kernels, no read-back.

The default loss (``ce`` and/or ``dice``) built from ``nn.CrossEntropyLoss`` and smp's
``DiceLoss`` launches about 40 operations forward and 30 backward, each a kernel on a GPU, where
a small batch's step is bound by launches (issue 43). :class:`CeDiceLoss` computes the same two
terms from one ``log_softmax`` and a handful of per-class sums: the cross-entropy is
``-sum_c w_c S_c / sum_c w_c n_c`` (``S_c`` the summed log-probability of class ``c`` at its
pixels, ``n_c`` its pixel count), the Dice score of class ``c`` is
``I_c / max((P_c + n_c) / 2, eps)`` (``I_c`` the summed probability of ``c`` at its pixels,
``P_c`` over every labelled pixel), as smp's ``soft_dice_score``. No-data pixels
(:data:`~landcover.classes.IGNORE_INDEX`) match no class, so they add to no sum. The gradient
is written out (:class:`_CeDice`) rather than left to autograd: fewer bytes moved, a
memory-bound part of the step at a large batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

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
        loss = _CeDice.apply(
            logits,
            target,
            self.classes,
            self.class_weights,
            self.ce_numerator,
            self.ce_weight,
            self.dice_weight,
        )
        return loss  # type: ignore[no-any-return]


class _CeDice(torch.autograd.Function):
    """The loss's forward pass and its gradient, written out (:class:`CeDiceLoss`).

    Autograd's own backward of the forward's products and sums moved about 145 bytes an element
    of the logits, forward and backward (each operation's inputs read and outputs written
    once); written out, about 114, in 46 operations instead of 50 (at batch 64 of the default
    config some 0.8 GB a step less, ``benchmarks/traffic_bench.py``: a memory-bound part of
    the step). Its gradient is not itself differentiable (``once_differentiable``).
    With ``p`` the softmax (0 at no-data pixels), ``o`` the one-hot labels and ``g`` the
    incoming gradient, the gradient of the logits is ``e - p * sum_c e`` with
    ``e = o * A + p * (o * alpha + beta)``: ``A`` the cross-entropy's weight of each class
    over the labelled pixels' total, ``alpha = dL/dI``, ``beta = dL/dP`` of the Dice sums.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        logits: torch.Tensor,
        target: torch.Tensor,
        classes: torch.Tensor,
        class_weights: torch.Tensor,
        ce_numerator: torch.Tensor,
        ce_weight: float,
        dice_weight: float,
    ) -> torch.Tensor:
        logp = torch.log_softmax(logits, dim=1, dtype=torch.float32)
        labels = target.unsqueeze(1)
        onehot = labels == classes  # (B, K, H, W); a no-data pixel matches no class
        dims = (0, 2, 3)
        count = onehot.sum(dims)  # n_c
        parts = []
        ce_scale = d_inter = d_pred = None  # dL/dS_c, dL/dI_c, dL/dP_c
        if ce_weight > 0:
            log_sums = (logp * onehot).sum(dims)  # S_c
            weight = (class_weights * count).sum()
            # the sum divided (not the factors): weights at float32's limit make the loss nan,
            # as nn.CrossEntropyLoss's, while the gradient's factors stay finite (0)
            parts.append((ce_numerator * log_sums).sum() / weight)
            ce_scale = ce_numerator / weight
        if dice_weight > 0:
            # the softmax of labelled pixels (no-data: 0): P_c's terms, I_c's, the gradient's
            prob = logp.exp_().mul_(labels != IGNORE_INDEX)
            inter = (prob * onehot).sum(dims)  # I_c
            denom = (prob.sum(dims) + count) * 0.5  # (P_c + n_c) / 2
            held = denom.clamp_min(DICE_EPS)
            score = inter / held
            present = (count > 0) * (dice_weight / len(count))
            parts.append(((1.0 - score) * present).sum())
            d_inter = -present / held
            # the clamp passes a gradient where it did not bite
            d_pred = d_inter * score * (denom >= DICE_EPS) * -0.5
        ctx.dtype = logits.dtype
        ctx.ce = ce_weight > 0
        ctx.dice = dice_weight > 0
        # the backward's per-class factors, one tensor: [on the pixel's class, elsewhere, CE]
        zero = torch.zeros_like(class_weights) if None in (ce_scale, d_pred) else None
        on_class = zero if d_inter is None or d_pred is None else d_inter + d_pred
        rows = [
            on_class,
            zero if d_pred is None else d_pred,
            zero if ce_scale is None else ce_scale,
        ]
        factors = torch.stack(rows).view(3, 1, -1, 1, 1)
        ctx.save_for_backward(prob if ctx.dice else logp, onehot, factors)
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        saved, onehot, factors = ctx.saved_tensors
        on_class, elsewhere, ce = factors * grad
        if ctx.dice:
            prob = saved
            coef = torch.where(onehot, on_class, elsewhere)
            e = torch.where(onehot, ce, 0.0).addcmul_(prob, coef) if ctx.ce else coef.mul_(prob)
        else:
            prob = saved.exp()  # no-data pixels' e is 0: so is their gradient
            e = torch.where(onehot, ce, 0.0)
        out = e.addcmul_(prob, e.sum(1, keepdim=True), value=-1.0)
        return out.to(ctx.dtype), None, None, None, None, None, None
