"""The segmentation loss: a weighted sum of cross-entropy and smp's losses, no-data ignored.

Every term skips :data:`~landcover.classes.IGNORE_INDEX` pixels: cross-entropy through its
``ignore_index``, and the terms from ``segmentation_models_pytorch.losses`` (Dice, focal,
Lovasz-softmax, Tversky) through theirs, so a no-data pixel changes neither the loss nor its
gradient. ``class_weights: auto`` is resolved by :func:`frequency_weights`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from segmentation_models_pytorch.losses import DiceLoss, FocalLoss, LovaszLoss, TverskyLoss
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.config import AUTO, ClassWeightScheme, LossConfig
from landcover.training.fusedloss import CeDiceLoss

DEFAULT_CLASS_WEIGHT_CAP = 10.0
"""Default largest weight ``class_weights: auto`` gives a rare class (``class_weight_cap``)."""

CLASS_WEIGHT_RANGE = (1.0 / DEFAULT_CLASS_WEIGHT_CAP, DEFAULT_CLASS_WEIGHT_CAP)
"""Default bounds of the weights ``class_weights: auto`` derives: ``[1 / cap, cap]``."""

ABSENT_CLASS_WEIGHT = 1.0
"""Weight ``class_weights: auto`` gives a class with no training pixel (it adds no loss)."""

MULTICLASS = "multiclass"


def weight_bounds(cap: float) -> tuple[float, float]:
    """The clip range of automatic class weights for a cap.

    Args:
        cap: The largest weight (``optim.loss.class_weight_cap``, at least 1).

    Returns:
        ``(1 / cap, cap)``.
    """
    return 1.0 / cap, cap


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
    return frequency_weights(frequencies, "median_frequency", bounds)


def frequency_weights(
    frequencies: Sequence[float],
    scheme: ClassWeightScheme = "median_frequency",
    bounds: tuple[float, float] = CLASS_WEIGHT_RANGE,
) -> list[float]:
    """Class weights from class frequencies, clipped to ``bounds``.

    ``median_frequency``: ``w_c = median(f) / f_c`` (Eigen & Fergus, 2015);
    ``inverse_sqrt``: ``w_c = sqrt(median(f) / f_c)``. The median is taken over the classes
    present (``f > 0``), so the frequencies need not sum to 1 and a class as common as the
    median gets 1; classes absent from the data get :data:`ABSENT_CLASS_WEIGHT`.

    Args:
        frequencies: Each class's share (or count) of the labelled training pixels.
        scheme: ``median_frequency`` or ``inverse_sqrt``.
        bounds: ``(low, high)`` clip range of the weights.

    Returns:
        One weight per class.

    Raises:
        ValueError: If ``scheme`` is unknown.
    """
    if scheme not in ("median_frequency", "inverse_sqrt"):
        raise ValueError(f"unknown class weight scheme {scheme!r}")
    present = [f for f in frequencies if f > 0]
    if not present:
        return [ABSENT_CLASS_WEIGHT] * len(frequencies)
    median = float(np.median(present))
    low, high = bounds
    weights = []
    for f in frequencies:
        if f <= 0:
            weights.append(ABSENT_CLASS_WEIGHT)
            continue
        ratio = median / f
        w = math.sqrt(ratio) if scheme == "inverse_sqrt" else ratio
        weights.append(min(max(w, low), high))
    return weights


class _Lovasz(LovaszLoss):
    """smp's multi-class Lovasz-softmax, and 0 (with a zero gradient) for an all no-data batch."""

    def forward(self, y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
        """Computes the loss (see :class:`LovaszLoss`)."""
        if not bool((y_true != IGNORE_INDEX).any()):
            return y_pred.sum() * 0.0
        return super().forward(y_pred, y_true)


@dataclass(frozen=True)
class LossTerm:
    """One term of the loss.

    Attributes:
        name: ``ce``, ``dice``, ``focal``, ``lovasz`` or ``tversky``.
        weight: Its factor in the sum.
    """

    name: str
    weight: float


def _class_weights(config: LossConfig, num_classes: int) -> list[float] | None:
    if config.class_weights == AUTO:
        raise ValueError("optim.loss.class_weights: auto must be resolved to numbers first")
    if config.class_weights is not None and len(config.class_weights) != num_classes:
        raise ValueError(
            f"optim.loss.class_weights needs {num_classes} values, got {len(config.class_weights)}"
        )
    return config.class_weights


def build_terms(config: LossConfig, num_classes: int) -> dict[str, tuple[float, nn.Module]]:
    """The loss terms a config switches on, each with its weight.

    Args:
        config: Term weights and their parameters.
        num_classes: Number of classes.

    Returns:
        ``{name: (weight, module)}`` for the terms whose weight is positive; every module
        maps ``(logits (B, K, H, W), target (B, H, W) int64)`` to a scalar and ignores
        :data:`IGNORE_INDEX`.

    Raises:
        ValueError: If ``class_weights`` does not have one value per class, or is still
            ``auto`` (the trainer resolves it to numbers first).
    """
    weights = _class_weights(config, num_classes)
    ignore = IGNORE_INDEX
    makers = {
        "ce": (
            config.ce_weight,
            lambda: nn.CrossEntropyLoss(
                weight=None if weights is None else torch.tensor(weights, dtype=torch.float32),
                ignore_index=ignore,
            ),
        ),
        "dice": (
            config.dice_weight,
            lambda: DiceLoss(MULTICLASS, from_logits=True, ignore_index=ignore),
        ),
        "focal": (
            config.focal_weight,
            lambda: FocalLoss(
                MULTICLASS, gamma=config.focal_gamma, ignore_index=ignore, class_weights=weights
            ),
        ),
        "lovasz": (config.lovasz_weight, lambda: _Lovasz(MULTICLASS, ignore_index=ignore)),
        "tversky": (
            config.tversky_weight,
            lambda: TverskyLoss(
                MULTICLASS,
                from_logits=True,
                ignore_index=ignore,
                alpha=config.tversky_alpha,
                beta=config.tversky_beta,
            ),
        ),
    }
    return {name: (w, make()) for name, (w, make) in makers.items() if w > 0}


class SegmentationLoss(nn.Module):
    """The weighted sum of the configured loss terms, all skipping :data:`IGNORE_INDEX` pixels.

    Args:
        config: Term weights, their parameters and optional class weights.
        num_classes: Number of classes.

    Raises:
        ValueError: If ``class_weights`` does not have one value per class, or is still
            ``auto`` (the trainer resolves it to numbers first).
    """

    def __init__(self, config: LossConfig, num_classes: int) -> None:
        super().__init__()
        built = build_terms(config, num_classes)
        self.terms = [LossTerm(name, weight) for name, (weight, _) in built.items()]
        self.losses = nn.ModuleDict({name: module for name, (_, module) in built.items()})
        # the default terms (CE and/or Dice) in one pass: fewer kernels (issue 43)
        fused = bool(built) and set(built) <= {"ce", "dice"}
        self.fused = (
            CeDiceLoss(
                num_classes,
                built["ce"][0] if "ce" in built else 0.0,
                built["dice"][0] if "dice" in built else 0.0,
                _class_weights(config, num_classes),
            )
            if fused
            else None
        )

    def components(self, logits: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """Computes each term, unweighted.

        Args:
            logits: ``(B, K, H, W)`` class scores.
            target: ``(B, H, W)`` int64 class indices.

        Returns:
            ``{name: scalar}`` for each term, in :attr:`terms` order.
        """
        scores = logits.float()
        return {term.name: self.losses[term.name](scores, target) for term in self.terms}

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Computes the loss.

        Args:
            logits: ``(B, K, H, W)`` class scores.
            target: ``(B, H, W)`` int64 class indices.

        Returns:
            The scalar loss: the sum of each term times its weight (CE and Dice alone: one
            fused pass, :class:`~landcover.training.fusedloss.CeDiceLoss`, equal to the terms').
        """
        if self.fused is not None:
            return self.fused(logits, target)
        parts = self.components(logits, target)
        weighted = [term.weight * parts[term.name] for term in self.terms]
        return torch.stack(weighted).sum()
