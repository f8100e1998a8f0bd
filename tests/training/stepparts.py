"""The trainer's step from its parts, for the tests of the step: tiny tiles, the CPU config.

``configs/cpu.yaml``'s model and input path (photometric, per-tile normalisation, class
balance) on random tiles, with fixed band statistics and class weights and a gradient clip, as
:class:`~landcover.training.steprunner.StepRunner` takes it in the trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from landcover.config import Config
from landcover.config.loading import load_config
from landcover.data.raster import TileArrays
from landcover.feed.inputs import TrainingInput
from landcover.models.factory import build_model
from landcover.parallel.engine import Replica
from landcover.training.ema import ModelEMA
from landcover.training.losses import SegmentationLoss
from landcover.training.step import build_optimizer
from landcover.training.steprunner import StepParts

REPO = Path(__file__).resolve().parents[2]
CLASSES = 6


def step_config(patch: int, batch: int, augment_on: str, **sets: Any) -> Config:
    """configs/cpu.yaml's model and data settings for ``patch`` px patches.

    Args:
        patch: The patch size.
        batch: The batch size.
        augment_on: ``data.augment_on`` (``host`` or ``device``).
        sets: Further ``section.key`` overrides, as ``load_config`` takes them.

    Returns:
        The config.
    """
    config = load_config(REPO / "configs" / "cpu.yaml", sets)
    data = config.data.model_copy(
        update={
            "mean": [0.4, 0.4, 0.35, 0.5],
            "std": [0.15, 0.14, 0.1, 0.18],
            "patch_size": patch,
            "augment_on": augment_on,
        }
    )
    loss = config.optim.loss.model_copy(update={"class_weights": [1.0, 0.5, 0.4, 2.0, 2.0, 1.0]})
    optim = config.optim.model_copy(update={"loss": loss, "grad_clip": 1.0, "batch_size": batch})
    return config.model_copy(update={"data": data, "optim": optim})


def random_tiles(size: int) -> list[TileArrays]:
    """Two ``size`` px tiles of random imagery and classes (the same every call)."""
    rng = np.random.default_rng(3)
    return [
        TileArrays(
            f"t{i}",
            rng.integers(0, 256, (size, size, 4)).astype(np.uint8),
            rng.integers(0, CLASSES, (size, size)).astype(np.uint8),
            None,
        )
        for i in range(2)
    ]


def step_parts(
    config: Config, tiles: list[TileArrays], device: torch.device, ema_decay: float
) -> StepParts:
    """The step's parts on ``device`` (the model from seed 0, the input from seed 5).

    Args:
        config: The config (:func:`step_config`).
        tiles: The worker's tiles.
        device: The device.
        ema_decay: The moving average's decay.

    Returns:
        The parts, fp32, channels-first.
    """
    torch.manual_seed(0)
    model = build_model(config.model, 4, CLASSES).to(device)
    prepare = TrainingInput(config.data, tiles, device, seed=5)
    prepare.start_epoch(0, 0)
    return StepParts(
        replica=Replica(model, model),
        model=model,
        criterion=SegmentationLoss(config.optim.loss, CLASSES).to(device),
        optimizer=build_optimizer(model.parameters(), config),
        prepare=prepare,
        ema=ModelEMA(model, ema_decay),
        autocast_dtype=None,
        grad_clip=config.optim.grad_clip,
        scaler=None,
        channels_last=False,
    )
