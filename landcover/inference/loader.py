"""Loading a trained model from a checkpoint for inference.

The checkpoint alone carries everything needed: the model settings, classes and colours,
bands, normalisation and patch size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from landcover.checkpoint import load_checkpoint
from landcover.classes import ClassMapping
from landcover.config import Config, config_from_dict
from landcover.data.normalize import BandNormalizer, TileStats, tile_normalizer
from landcover.errors import CheckpointError, first_line
from landcover.inference.tileread import TileSource
from landcover.models import build_model
from landcover.parallel.devices import choose_precision, resolve_device
from landcover.parallel.env import DistEnv


@dataclass
class InferenceModel:
    """A trained model ready to predict.

    Attributes:
        model: The network, in eval mode on ``device``.
        config: The training run's resolved configuration.
        device: Where the model runs.
        prepare: Normalises uint8 channels-last batches into model input.
        autocast_dtype: bf16 on CUDA, else ``None``.
        checkpoint: Path of the checkpoint.
        epoch: Epochs the model was trained for.
        pixel_size_m: The pixel size in metres the model was trained at; ``None`` when the
            checkpoint does not record it (older checkpoints).
        exported_from: An exported model's card's ``weights_sha256`` (the weights it was
            exported from, as a checkpoint's maps name them); ``None`` for a checkpoint.
    """

    model: nn.Module
    config: Config
    device: torch.device
    prepare: BandNormalizer
    autocast_dtype: torch.dtype | None
    checkpoint: str
    epoch: int
    pixel_size_m: float | None = None
    exported_from: str | None = None

    @property
    def mapping(self) -> ClassMapping:
        """The class mapping the model was trained with."""
        return self.config.data.classes

    @property
    def bands(self) -> int:
        """Number of input bands the model expects."""
        return len(self.config.data.bands)


def load_inference_model(
    checkpoint: str | Path, device: str = "auto", local_rank: int = 0
) -> InferenceModel:
    """Loads a landcover checkpoint for inference.

    Args:
        checkpoint: The checkpoint file (loaded with ``weights_only=True``).
        device: ``auto``, ``cpu`` or ``cuda``.
        local_rank: Selects the GPU when several processes share a machine: round-robin,
            so workers beyond the GPU count share them (one process's host work, decoding,
            blending and writing COGs, keeps a GPU busy only about a tenth of the time).

    Returns:
        The model and everything needed to feed it.

    Raises:
        CheckpointError: If the checkpoint is missing, corrupt, foreign, or does not fit its
            own model settings.
        ConfigError: If CUDA is requested but not available.
    """
    state = load_checkpoint(checkpoint)
    config = config_from_dict(state.config, source=f"{checkpoint}: config")
    if config.data.stats_auto:
        raise CheckpointError(
            f"{checkpoint}: holds no band statistics (data.mean/std are 'auto'); "
            "it was not written by a training run"
        )
    torch_device = resolve_device(
        device, DistEnv(local_rank=local_rank, local_world_size=local_rank + 1), share_gpus=True
    )
    model = build_model(
        config.model,
        len(config.data.bands),
        config.data.classes.num_classes,
        config.data.patch_size,
        strict=False,  # an option a model trained before the check had: warned, not refused
    )
    try:
        model.load_state_dict(state.model)
    except (RuntimeError, KeyError) as exc:
        first = first_line(exc, 160)
        raise CheckpointError(
            f"{checkpoint}: weights do not fit the model it describes ({first})"
        ) from None
    model.to(torch_device).eval()
    cuda = torch_device.type == "cuda"
    if cuda and config.run.channels_last:
        model.to(memory_format=torch.channels_last)
    return InferenceModel(
        model=model,
        config=config,
        device=torch_device,
        prepare=BandNormalizer(config.data.mean, config.data.std, torch_device),
        autocast_dtype=choose_precision(torch_device, config.run.bf16).autocast_dtype,
        checkpoint=str(checkpoint),
        epoch=state.epoch,
        pixel_size_m=checkpoint_pixel_size(state.pixel_size_m),
    )


def checkpoint_pixel_size(value: object) -> float | None:
    """The checkpoint's training pixel size, ``None`` when absent or not a positive number."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def dataset_normalizer(
    im: InferenceModel,
    ds: Any,
    name: str,
    stats: Callable[[], TileStats | None] | None = None,
) -> BandNormalizer:
    """The normaliser of one raster as the checkpoint's ``data.normalize`` says.

    ``global``: the training statistics (``im.prepare``). ``per_tile``: the raster's own band
    statistics over its valid pixels (one extra read of it, unless ``stats`` has them from
    pixels already in memory), the same numbers training measured on a tile in memory;
    ``predict`` and ``evaluate`` both call this on the grid they predict on, so they give the
    same map.

    Args:
        im: The loaded model.
        ds: The open raster (or warped VRT) about to be predicted.
        name: Its path, for messages.
        stats: Measures the raster's statistics (called only under ``per_tile``); default:
            read ``ds`` strip by strip.

    Returns:
        The normaliser.

    Raises:
        DataError: If the raster cannot be read.
    """
    if im.config.data.normalize != "per_tile":
        return im.prepare
    if stats is None:  # read strip by strip (pixels already in memory pass their own)
        stats = TileSource(ds, name, in_memory=False).stats
    return tile_normalizer(im.config.data, stats(), im.device)
