"""The training step captured as one CUDA graph trains as the eager step does.

Two copies of the trainer's step (the same model, optimizer, loss, moving average and input
path, from the same seed) train on the same batches: one eagerly, one through
:class:`~landcover.training.steprunner.StepRunner` with ``graph=True`` (three eager warm-up
steps on a side stream, then the capture, then replays). After every step the two runs'
losses, and at the end their weights and averages, must agree to float rounding (cuDNN's
deterministic algorithms; the capturable optimizer computes its bias correction on the device).
Without a GPU the runner's choice is checked: ``run.cuda_graph: true`` on the CPU says why in
one line and steps eagerly.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from landcover.config import Config
from landcover.config.loading import load_config
from landcover.data.raster import TileArrays
from landcover.data.sampler import PatchSampler, epoch_rng
from landcover.models.factory import build_model
from landcover.parallel.engine import Replica
from landcover.training.ema import ModelEMA
from landcover.training.inputs import TrainingInput
from landcover.training.losses import SegmentationLoss
from landcover.training.step import build_optimizer
from landcover.training.steprunner import StepParts, StepRunner, build_step_runner

REPO = Path(__file__).resolve().parents[2]
CLASSES = 6
PATCH = 64
BATCH = 4
STEPS = 8


def _config() -> Config:
    """configs/cpu.yaml without the photometric draws (which branch on the host)."""
    config = load_config(REPO / "configs" / "cpu.yaml", {"run.cuda_graph": True})
    data = config.data.model_copy(
        update={
            "mean": [0.4, 0.4, 0.35, 0.5],
            "std": [0.15, 0.14, 0.1, 0.18],
            "patch_size": PATCH,
            "augment_on": "device",
            "photometric": 0.0,
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
            rng.integers(0, 256, (128, 128, 4)).astype(np.uint8),
            rng.integers(0, CLASSES, (128, 128)).astype(np.uint8),
            None,
        )
        for i in range(2)
    ]


def _parts(config: Config, device: torch.device) -> StepParts:
    tiles = _tiles()
    torch.manual_seed(0)
    model = build_model(config.model, 4, CLASSES).to(device)
    return StepParts(
        replica=Replica(model, model),
        model=model,
        criterion=SegmentationLoss(config.optim.loss, CLASSES).to(device),
        optimizer=build_optimizer(model.parameters(), config),
        prepare=TrainingInput(config.data, tiles, device, seed=5),
        ema=ModelEMA(model, 0.9),
        autocast_dtype=None,
        grad_clip=config.optim.grad_clip,
        scaler=None,
        channels_last=False,
    )


def _batches(config: Config, pin: bool) -> list[tuple[torch.Tensor, ...]]:
    sampler = PatchSampler(_tiles(), PATCH, CLASSES, class_balance=0.5, augment=True)
    rng = epoch_rng(0, 0, 0)
    batches = [sampler.batch_for_device(BATCH, rng) for _ in range(STEPS)]
    return [tuple(t.pin_memory() for t in b) if pin else b for b in batches]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_captured_step_trains_as_the_eager_step() -> None:
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    device = torch.device("cuda")
    config = _config()
    batches = _batches(config, pin=True)
    eager_parts, graph_parts = _parts(config, device), _parts(config, device)
    eager, graphed = StepRunner(eager_parts), StepRunner(graph_parts, graph=True)
    lrs = [1e-3 * (i + 1) / STEPS for i in range(STEPS)]  # a warm-up ramp: lr changes
    for batch, lr in zip(batches, lrs, strict=True):
        a = eager([batch], lr).item()
        b = graphed([batch], lr).item()
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (a, b)
    assert graphed.graphed is not None and graphed.graphed.graph is not None
    assert graph_parts.ema is not None and eager_parts.ema is not None
    assert graph_parts.ema.updates == eager_parts.ema.updates == STEPS
    for mine, theirs in (
        (graph_parts.model, eager_parts.model),
        (graph_parts.ema.module, eager_parts.ema.module),
    ):
        pairs = zip(mine.state_dict().items(), theirs.state_dict().values(), strict=True)
        for (name, x), y in pairs:
            torch.testing.assert_close(x, y, atol=2e-5, rtol=1e-4, msg=name)
    # the steps trained: the weights moved from the initial ones
    first = _parts(config, device).model.state_dict()
    moved = [
        float((v - first[k]).abs().max())
        for k, v in graph_parts.model.state_dict().items()
        if v.is_floating_point()
    ]
    assert max(moved) > 1e-3


def test_on_the_cpu_the_step_stays_eager_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    config = _config()
    parts = _parts(config, torch.device("cpu"))
    with caplog.at_level(logging.INFO, logger="landcover"):
        runner = build_step_runner(parts, config, world_size=1)
    assert runner.graphed is None
    lines = [r.getMessage() for r in caplog.records if "run.cuda_graph" in r.getMessage()]
    assert lines == ["run.cuda_graph: the step runs eagerly: the device is cpu, not a CUDA GPU"]
    batch = _batches(config, pin=False)[0]
    before = [p.detach().clone() for p in parts.model.parameters()]
    loss = runner([batch], 1e-3)
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, parts.model.parameters(), strict=True))
