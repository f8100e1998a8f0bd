"""A training step reads nothing back from the device, so a GPU never waits for the host.

A CUDA GPU runs the work the host queues; each value read back on the host (``.item()``,
``.tolist()``, ``bool(tensor)``, a blocking copy) empties that queue first, and the host's own
work then stops overlapping the GPU's. On the ``meta`` device (shapes without values) every
read back is an error, so the step of :class:`~landcover.training.trainer.Trainer`, its
:class:`~landcover.training.steprunner.StepRunner` (the sampler's batch made model input by ``TrainingInput.model_batch``: moved, D4 on the device,
photometric and per-tile normalisation; the loss; AdamW with a gradient clip; the weights'
moving average) is run there on the CPU; on a GPU the same step runs under torch's sync
debug mode, which also catches blocking copies.
"""

from __future__ import annotations

import pytest
import torch
from stepparts import CLASSES, random_tiles, step_config, step_parts

from landcover.config import Config
from landcover.feed.sampler import PatchSampler, epoch_rng
from landcover.training.steprunner import StepRunner

PATCH = 32
BATCH = 4


def _config(augment_on: str) -> Config:
    """configs/cpu.yaml's model and data settings (photometric, per_tile, class balance)."""
    return step_config(PATCH, BATCH, augment_on)


class _Step:
    """The trainer's step on ``device`` (its StepRunner), fed by the sampler."""

    def __init__(self, config: Config, device: torch.device) -> None:
        tiles = random_tiles(64)
        self.sampler = PatchSampler(tiles, PATCH, CLASSES, class_balance=0.5, augment=True)
        parts = step_parts(config, tiles, device, ema_decay=0.99)
        self.prepare = parts.prepare
        self.runner = StepRunner(parts)
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
        inputs, _ = self.prepare.model_batch(batch)  # the model's input, as the step makes it
        return inputs, self.runner([batch], 1e-3)


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
