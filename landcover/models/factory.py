"""The model factory: a segmentation-models-pytorch U-Net built from the config.

Encoders are always built without pretrained weights (nothing is downloaded here); initial
weights (``model.weights``) are loaded by :mod:`landcover.models.weights`.
"""

from __future__ import annotations

import segmentation_models_pytorch as smp
import torch
from torch import nn

from landcover.config import ModelConfig
from landcover.errors import ConfigError


def build_model(config: ModelConfig, in_channels: int, num_classes: int) -> nn.Module:
    """Builds the segmentation model.

    Args:
        config: The model configuration.
        in_channels: Number of input bands.
        num_classes: Number of output classes.

    Returns:
        An ``smp.Unet`` producing ``(B, num_classes, H, W)`` logits; parameters its forward
        pass never uses (deep encoder stages with ``encoder_depth < 5``) are frozen.

    Raises:
        ConfigError: If the encoder name is unknown to segmentation-models-pytorch.
    """
    try:
        model = smp.Unet(
            encoder_name=config.encoder,
            encoder_depth=config.encoder_depth,
            encoder_weights=None,
            decoder_channels=tuple(config.decoder_channels),
            in_channels=in_channels,
            classes=num_classes,
        )
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"model.encoder {config.encoder!r}: {exc}") from None
    freeze_unused_parameters(model, in_channels)
    return model


UNITS_PER_CLASS = 2
"""Units the last decoder stage should have per class (smp's default 16 gives 2 for 8 classes)."""


def final_stage_warning(config: ModelConfig, num_classes: int) -> str | None:
    """Says when the last decoder stage is too narrow for the number of classes.

    The last U-Net decoder stage is a full-resolution conv + batch-norm + ReLU block whose
    units are all the segmentation head sees. When every unit is inactive at the pixels of a
    class (ReLU outputs 0), no gradient from those pixels reaches the network any more, so the
    class is never learned; with about one unit per class (8 channels for 6 classes) a large
    early update switches a rare class's only unit off for good. This is how the CPU config
    once stopped learning water. Two or more units per class make it unlikely.

    Args:
        config: The model configuration.
        num_classes: Number of output classes.

    Returns:
        A warning to log, or ``None`` when the stage is wide enough.
    """
    last = config.decoder_channels[-1]
    if last >= UNITS_PER_CLASS * num_classes:
        return None
    return (
        f"model.decoder_channels ends with {last} channels for {num_classes} classes: a final "
        f"decoder stage this narrow can switch a class's units off for good (dead ReLUs) and "
        f"that class is never learned; use at least {UNITS_PER_CLASS * num_classes}"
    )


def freeze_unused_parameters(model: nn.Module, in_channels: int) -> list[str]:
    """Stops gradients for parameters the forward pass never uses.

    With ``encoder_depth < 5`` smp keeps the deeper encoder stages but skips them. DDP waits
    for a gradient of every parameter that requires one, so such parameters would stall its
    all-reduce; freezing them keeps DDP exact without ``find_unused_parameters`` overhead.

    Args:
        model: The model (on the CPU, freshly built).
        in_channels: Number of input bands.

    Returns:
        Names of the parameters frozen.
    """
    was_training = model.training
    model.eval()
    model(torch.zeros(1, in_channels, 64, 64)).sum().backward()
    unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    for name, param in model.named_parameters():
        if name in unused:
            param.requires_grad_(False)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return unused
