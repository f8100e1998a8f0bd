"""Untrained checkpoints of other architectures, with the tiny trained model's data settings.

Their batch-norm statistics are measured on a few random batches, as training would set them,
and the segmentation head is scaled so the logits spread as a trained model's do (standard
deviation :data:`LOGIT_STD`): a random network's logits reach the hundreds (PAN's 500 even with
measured statistics), where float32 rounding alone moves a probability by more than a trained
model's ever does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import ModelConfig
from landcover.models import build_model

LOGIT_STD = 3.0
"""The logits' standard deviation the head is scaled to: a trained model's order (the tiny
trained model's logits spread by 1.4 and reach 5.5 on random input)."""


def arch_checkpoint(
    checkpoint: Path,
    folder: Path,
    settings: dict[str, Any],
    name: str,
    data: dict | None = None,
    calibrated: bool = True,
) -> Path:
    """A checkpoint of another model (random weights, seeded), the tiny model's data settings.

    Args:
        checkpoint: The tiny trained model's checkpoint.
        folder: Where to write ``NAME.pt``.
        settings: What replaces in its ``model`` section.
        name: The file's name.
        data: What replaces in its ``data`` section.
        calibrated: Whether to set the batch-norm statistics and the logits' spread
            (:func:`calibrate`; a model to be refused needs neither).

    Returns:
        The checkpoint's path.
    """
    state = load_checkpoint(checkpoint)
    config = yaml.safe_load(yaml.safe_dump(state.config))
    config["model"].update(settings)
    config["data"].update(data or {})
    data = config["data"]
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(**config["model"]),
        len(data["bands"]),
        len(data["classes"]["classes"]),
        data["patch_size"],
    )
    if calibrated:
        calibrate(model, len(data["bands"]), data["patch_size"])
    path = folder / f"{name}.pt"
    path.write_bytes(Checkpoint(model=model.state_dict(), config=config).serialize())
    return path


def calibrate(model: nn.Module, bands: int, patch: int, batches: int = 2) -> None:
    """Sets the batch-norm statistics from random batches and the logits' spread (in place).

    Args:
        model: An smp model, left in eval mode.
        bands: Input bands.
        patch: The batches' side.
        batches: How many batches of 4 to average over.
    """
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.reset_running_stats()
            module.momentum = None  # a plain average over the batches
    generator = torch.Generator().manual_seed(1)
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(4, bands, patch, patch, generator=generator))
    model.eval()
    with torch.no_grad():
        window = 4 * patch  # predict's window: PAN's logits grow with the input's side
        spread = float(model(torch.randn(1, bands, window, window, generator=generator)).std())
        head = model.segmentation_head[0]  # smp's head: a convolution to the classes first
        head.weight.mul_(LOGIT_STD / spread)
        head.bias.mul_(LOGIT_STD / spread)
