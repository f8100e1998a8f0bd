"""The model factory: a segmentation-models-pytorch U-Net built from the config.

Encoders are always built without pretrained weights (nothing is downloaded); initial weights
can come from a local file.
"""

from __future__ import annotations

from pathlib import Path

import segmentation_models_pytorch as smp
import torch
from torch import nn

from landcover.config import ModelConfig
from landcover.errors import CheckpointError, ConfigError


def build_model(config: ModelConfig, in_channels: int, num_classes: int) -> nn.Module:
    """Builds the segmentation model.

    Args:
        config: The model configuration.
        in_channels: Number of input bands.
        num_classes: Number of output classes.

    Returns:
        An ``smp.Unet`` producing ``(B, num_classes, H, W)`` logits.

    Raises:
        ConfigError: If the encoder name is unknown to segmentation-models-pytorch.
    """
    try:
        return smp.Unet(
            encoder_name=config.encoder,
            encoder_depth=config.encoder_depth,
            encoder_weights=None,
            decoder_channels=tuple(config.decoder_channels),
            in_channels=in_channels,
            classes=num_classes,
        )
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"model.encoder {config.encoder!r}: {exc}") from None


def load_initial_weights(model: nn.Module, path: str) -> None:
    """Loads initial weights from a local file (a landcover checkpoint or a state dict).

    Args:
        model: The freshly built model.
        path: A ``.pt`` file; loaded with ``weights_only=True``.

    Raises:
        CheckpointError: If the file is missing, not loadable, or does not fit the model.
    """
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: weights file not found")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for bad files
        raise CheckpointError(
            f"{path}: not a loadable weights file ({exc.__class__.__name__})"
        ) from None
    state = blob.get("model", blob) if isinstance(blob, dict) else None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: holds no state dict")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise CheckpointError(
            f"{path}: weights do not fit the configured model ({first})"
        ) from None
