"""The segmentation loss: a weighted sum of registered terms, no-data ignored.

``optim.loss.terms`` names the terms and their weights; each is a class registered by name
(:mod:`.lossregistry`; the built-ins, cross-entropy and smp's Dice, focal, Lovasz-softmax and
Tversky, in :mod:`.lossterms`, which this module imports, so the registry's functions are
imported from here). Every term skips :data:`~landcover.classes.IGNORE_INDEX` pixels, so a
no-data pixel changes neither the loss nor its gradient. ``class_weights: auto`` is resolved by
:func:`frequency_weights`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from landcover.config import AUTO, ClassWeightScheme, LossConfig
from landcover.errors import ConfigError, first_line
from landcover.training import lossterms  # noqa: F401  (registers the built-in terms)
from landcover.training.lossregistry import LossSpec as LossSpec
from landcover.training.lossregistry import check_terms as check_terms
from landcover.training.lossregistry import create_term as create_term
from landcover.training.lossregistry import fused_form
from landcover.training.lossregistry import loss_names as loss_names
from landcover.training.lossregistry import loss_specs as loss_specs
from landcover.training.lossregistry import register_fused as register_fused
from landcover.training.lossregistry import register_loss as register_loss
from landcover.training.lossregistry import unregister_loss as unregister_loss

DEFAULT_CLASS_WEIGHT_CAP = 10.0
"""Default largest weight ``class_weights: auto`` gives a rare class (``class_weight_cap``)."""

CLASS_WEIGHT_RANGE = (1.0 / DEFAULT_CLASS_WEIGHT_CAP, DEFAULT_CLASS_WEIGHT_CAP)
"""Default bounds of the weights ``class_weights: auto`` derives: ``[1 / cap, cap]``."""

ABSENT_CLASS_WEIGHT = 1.0
"""Weight ``class_weights: auto`` gives a class with no training pixel (it adds no loss)."""


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


@dataclass(frozen=True)
class LossTerm:
    """One term of the loss.

    Attributes:
        name: A registered term (:func:`loss_names`).
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
        config: Term weights (``terms``) and their parameters.
        num_classes: Number of classes.

    Returns:
        ``{name: (weight, module)}`` for the terms whose weight is positive, in the order
        they were registered (the built-ins first: ``ce``, ``dice``, ``focal``, ``lovasz``,
        ``tversky``); every module maps ``(logits (B, K, H, W), target (B, H, W)
        int64)`` to a scalar and ignores :data:`~landcover.classes.IGNORE_INDEX`.

    Raises:
        ValueError: If ``class_weights`` does not have one value per class, or is still
            ``auto`` (the trainer resolves it to numbers first).
        ConfigError: If a term is not registered (one line listing those that are), cannot
            be made as ``cls(config, num_classes, class_weights)``, or does not give a scalar
            on a 64 px probe batch (checked once, here; not when a fused form computes them).
    """
    check_terms(config.terms)
    weights = _class_weights(config, num_classes)
    active = [name for name in loss_names() if config.terms.get(name, 0.0) > 0]
    return {
        name: (config.terms[name], create_term(name, config, num_classes, weights))
        for name in active
    }


PROBE_SIDE = 64
"""Side of the batch each term is tried on when the loss is built (the smallest patch)."""


class SegmentationLoss(nn.Module):
    """The weighted sum of the configured loss terms, all skipping no-data pixels.

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
        # terms with a registered fused form (CE and/or Dice) in one pass: fewer kernels
        form = fused_form(built)
        if form is None:
            self._check_terms(num_classes)
        self.fused = (
            None
            if form is None
            else form.build(
                {name: weight for name, (weight, _) in built.items()},
                num_classes,
                _class_weights(config, num_classes),
            )
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

    def _check_terms(self, num_classes: int) -> None:
        """Each term on a probe batch gives a scalar (a plugin's term may not): one line if not.

        Raises:
            ConfigError: Naming the term and what it gave or raised.
        """
        gen = torch.Generator().manual_seed(0)  # every class, at a training patch's size
        logits = torch.randn(1, num_classes, PROBE_SIDE, PROBE_SIDE, generator=gen)
        target = torch.randint(0, num_classes, (1, PROBE_SIDE, PROBE_SIDE), generator=gen)
        with torch.no_grad():
            for term in self.terms:
                try:
                    value = self.losses[term.name](logits, target)
                except Exception as exc:  # a plugin's term may raise anything
                    raise ConfigError(
                        f"optim.loss.terms.{term.name}: the term fails on a {PROBE_SIDE} px "
                        f"probe batch: {first_line(exc, 200, typed=True)}"
                    ) from None
                if not isinstance(value, torch.Tensor) or value.dim() != 0:
                    gave = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value)
                    raise ConfigError(
                        f"optim.loss.terms.{term.name}: the term gave {gave}, not a scalar "
                        "tensor (a term maps (B, K, H, W) logits and (B, H, W) targets to one "
                        "value)"
                    )

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Computes the loss.

        Args:
            logits: ``(B, K, H, W)`` class scores.
            target: ``(B, H, W)`` int64 class indices.

        Returns:
            The scalar loss: the sum of each term times its weight (terms with a registered
            fused form, CE and Dice: one pass, equal to the terms').
        """
        if self.fused is not None:
            return self.fused(logits, target)
        parts = self.components(logits, target)
        weighted = [term.weight * parts[term.name] for term in self.terms]
        return torch.stack(weighted).sum()
