"""A training step reads nothing back from the device, so a GPU never waits for the host.

A CUDA GPU runs the work the host queues; each value read back on the host (``.item()``,
``.tolist()``, ``bool(tensor)``, a blocking copy) empties that queue first, and the host's own
work then stops overlapping the GPU's. On the ``meta`` device (shapes without values) every
read back is an error, so the step of :class:`~landcover.training.trainer.Trainer` (the
sampler's batch made model input by ``TrainingInput.model_batch``: moved, D4 on the device,
photometric and per-tile normalisation; the loss; AdamW with a gradient clip; the weights'
moving average) is run there on the CPU; on a GPU the same step runs under torch's sync
debug mode, which also catches blocking copies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from landcover.config import Config
from landcover.config.loading import load_config
from landcover.data.raster import TileArrays
from landcover.data.sampler import PatchSampler, epoch_rng
from landcover.models.factory import build_model
from landcover.training.ema import ModelEMA
from landcover.training.inputs import TrainingInput
from landcover.training.losses import SegmentationLoss
from landcover.training.step import accumulation_step, build_optimizer

REPO = Path(__file__).resolve().parents[2]
CLASSES = 6
PATCH = 32
BATCH = 4


def _config(augment_on: str) -> Config:
    """configs/cpu.yaml's model and data settings (photometric, per_tile, class balance)."""
    config = load_config(REPO / "configs" / "cpu.yaml")
    data = config.data.model_copy(
        update={
            "mean": [0.4, 0.4, 0.35, 0.5],
            "std": [0.15, 0.14, 0.1, 0.18],
            "patch_size": PATCH,
            "augment_on": augment_on,
        }
    )
    loss = config.optim.loss.model_copy(update={"class_weights": [1.0, 0.5, 0.4, 2.0, 2.0, 1.0]})
    optim = config.optim.model_copy(update={"loss": loss, "grad_clip": 1.0, "batch_size": BATCH})
    return config.model_copy(update={"data": data, "optim": optim})


def _tiles() -> list[TileArrays]:
    rng = np.random.default_rng(3)
    return [
        TileArrays(
            f"t{i}",
            rng.integers(0, 256, (64, 64, 4)).astype(np.uint8),
            rng.integers(0, CLASSES, (64, 64)).astype(np.uint8),
            None,
        )
        for i in range(2)
    ]


class _Step:
    """The trainer's step on ``device``: model, loss, optimizer, moving average, input."""

    def __init__(self, config: Config, device: torch.device) -> None:
        tiles = _tiles()
        self.sampler = PatchSampler(tiles, PATCH, CLASSES, class_balance=0.5, augment=True)
        self.prepare = TrainingInput(config.data, tiles, device, seed=5)
        self.prepare.start_epoch(0, 0)
        self.model = build_model(config.model, 4, CLASSES).to(device)
        self.criterion = SegmentationLoss(config.optim.loss, CLASSES).to(device)
        self.optimizer = build_optimizer(self.model.parameters(), config)
        self.ema = ModelEMA(self.model, 0.99)
        self.grad_clip = config.optim.grad_clip
        self.rng = epoch_rng(0, 0, 0)
        self.pin = device.type == "cuda"

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        draw = (
            self.sampler.batch_with_tiles
            if self.prepare.d4_table is None
            else self.sampler.batch_for_device
        )
        batch = draw(BATCH, self.rng)
        if self.pin:  # as the Prefetcher hands batches to a CUDA run
            batch = tuple(t.pin_memory() for t in batch)
        inputs, labels = self.prepare.model_batch(batch)
        loss = accumulation_step(
            self.model, self.criterion, self.optimizer, [(inputs, labels)], None, self.grad_clip
        )
        self.ema.update(self.model)
        return inputs, loss


@pytest.mark.parametrize("augment_on", ["host", "device"])
def test_a_training_step_reads_nothing_back_on_the_meta_device(augment_on: str) -> None:
    config = _config(augment_on)
    assert config.data.photometric > 0 and config.data.normalize == "per_tile"
    step = _Step(config, torch.device("meta"))
    assert (step.prepare.d4_table is not None) == (augment_on == "device")
    for _ in range(2):
        inputs, loss = step()  # a value read back raises on meta
        assert inputs.device.type == loss.device.type == "meta"
        assert inputs.shape == (BATCH, 4, PATCH, PATCH) and loss.shape == ()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("augment_on", ["host", "device"])
def test_a_training_step_on_cuda_does_not_synchronise(augment_on: str) -> None:
    step = _Step(_config(augment_on), torch.device("cuda"))
    step()  # the first step's one-off work (tables made once, kernels chosen) may wait
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            inputs, loss = step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss).item() and inputs.is_cuda
