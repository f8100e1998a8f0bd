"""Architectures of your own, by name: ``model.arch`` beside segmentation-models-pytorch's.

A plugin (:mod:`landcover.plugins`) registers a builder under a name; ``model.arch: NAME``
then builds the model through it, in training and in every checkpoint reader (predict,
evaluate, export), since the plugin is loaded in every process. The builder is called as
``build(model_config, in_channels, num_classes)`` and returns a module that maps
``(B, in_channels, H, W)`` input to ``(B, num_classes, H, W)`` logits; ``model.arch_options``
is its to read. The factory checks its output on a probe (:mod:`landcover.models.factory`).

This module is plain data (no torch), so that the configuration can check a name against it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Builder = Callable[[Any, int, int], Any]
"""``build(model_config, in_channels, num_classes) -> torch.nn.Module`` of logits."""

ARCHITECTURES = {
    "unet": "Unet",
    "unetplusplus": "UnetPlusPlus",
    "fpn": "FPN",
    "pspnet": "PSPNet",
    "deeplabv3": "DeepLabV3",
    "deeplabv3plus": "DeepLabV3Plus",
    "linknet": "Linknet",
    "manet": "MAnet",
    "pan": "PAN",
    "upernet": "UPerNet",
    "segformer": "Segformer",
    "dpt": "DPT",
}
"""segmentation-models-pytorch architectures by lower-case name (``model.arch``)."""

_BUILDERS: dict[str, Builder] = {}


def arch_key(name: str) -> str:
    """A ``model.arch`` name as the configuration keeps it: lower case, ``_`` and ``-`` dropped."""
    return str(name).lower().replace("_", "").replace("-", "")


def register_architecture(name: str) -> Callable[[Builder], Builder]:
    """A decorator that registers a model builder as ``model.arch: NAME``.

    Args:
        name: The architecture's name (kept as :func:`arch_key` leaves it; registering a name
            again replaces it; a name of smp's is refused).

    Returns:
        The decorator; it returns the builder unchanged.

    Raises:
        ValueError: If the name is empty or one of smp's architectures.
    """
    key = arch_key(name)
    if not key.isalnum() or not key.isascii():
        raise ValueError(f"architecture name {name!r}: use letters and digits")
    if key in ARCHITECTURES:
        raise ValueError(
            f"architecture {name!r} is smp's ({ARCHITECTURES[key]}): pick another name"
        )

    def register(build: Builder) -> Builder:
        _BUILDERS[key] = build
        return build

    return register


def unregister_architecture(name: str) -> None:
    """Removes a registered architecture (for tests that register one)."""
    _BUILDERS.pop(arch_key(name), None)


def registered_builder(key: str) -> Builder | None:
    """The builder registered under a ``model.arch`` key, or ``None``."""
    return _BUILDERS.get(key)


def registered_architectures() -> list[str]:
    """The registered names, in registration order."""
    return list(_BUILDERS)
