"""The training step captured as one CUDA graph trains as the eager step does.

Two copies of the trainer's step (the same model, optimizer, loss, moving average and input
path with its photometric draws, from the same seed; the pixel noise, which the graph draws
from the device's own generator, off) train on the same batches: one eagerly, one through
:class:`~landcover.training.steprunner.StepRunner` with ``graph=True`` (three eager warm-up
steps on a side stream, then the capture, then replays). After every step the two runs'
losses, and at the end their weights and averages, must agree to float rounding (cuDNN's
deterministic algorithms; the capturable optimizer computes its bias correction on the device).
Without a GPU the runner's choice is checked: ``run.cuda_graph: true`` on the CPU says why in
one line and steps eagerly.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from stepparts import CLASSES, random_tiles, step_config, step_parts

from landcover.config import Config
from landcover.data.raster import TileArrays
from landcover.feed.photometric import PhotometricDraw
from landcover.feed.photoranges import PhotometricRanges
from landcover.feed.sampler import PatchSampler, epoch_rng
from landcover.feed.staging import PinnedStaging
from landcover.training.steprunner import StepParts, StepRunner, build_step_runner

PATCH = 64
BATCH = 4
STEPS = 8


def _config() -> Config:
    """configs/cpu.yaml's model and input path (photometric, per-tile, D4 on the device)."""
    return step_config(PATCH, BATCH, "device", **{"run.cuda_graph": True})


def _tiles() -> list[TileArrays]:
    return random_tiles(128)


def _parts(config: Config, device: torch.device) -> StepParts:
    """The step's parts; the photometric noise off (the graph draws it on the device)."""
    parts = step_parts(config, _tiles(), device, ema_decay=0.9)
    parts.prepare.ranges = dataclasses.replace(parts.prepare.ranges, noise=0.0, blur_p=0.5)
    return parts


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
    # the eager reference takes the optimizer's capturable arithmetic too (its bias
    # correction computed on the device): the same step, captured or not
    for group in eager_parts.optimizer.param_groups:
        group["capturable"] = True
    lrs = [1e-3 * (i + 1) / STEPS for i in range(STEPS)]  # a warm-up ramp: lr changes
    for step, (batch, lr) in enumerate(zip(batches, lrs, strict=True)):
        a = eager([batch], lr).item()
        b = graphed([batch], lr).item()
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (step, a, b)
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
    assert lines == [
        "run.cuda_graph true: the step runs eagerly: the device is cpu, not a CUDA GPU"
    ]
    # auto (the default) on the CPU: eager, and nothing said
    caplog.clear()
    auto = config.model_copy(update={"run": config.run.model_copy(update={"cuda_graph": "auto"})})
    with caplog.at_level(logging.INFO, logger="landcover"):
        assert build_step_runner(parts, auto, world_size=1).graphed is None
    assert not [r for r in caplog.records if "run.cuda_graph" in r.getMessage()]
    batch = _batches(config, pin=False)[0]
    before = [p.detach().clone() for p in parts.model.parameters()]
    loss = runner([batch], 1e-3)
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, parts.model.parameters(), strict=True))


def test_the_branch_free_photometric_pass_equals_the_drawn_one() -> None:
    """What the graph runs (every patch through one pass) is the draw's own perturbation."""
    gen = torch.Generator().manual_seed(7)
    images = torch.randint(0, 256, (12, 40, 36, 4), generator=gen, dtype=torch.uint8)
    shape = (12, 4, 40, 36)
    ranges = PhotometricRanges(noise=0.0, blur_p=0.5)
    draw = PhotometricDraw.draw(shape, 0.6, gen, ranges, torch.device("cpu"))
    chosen, blurred = draw.chosen.tolist(), draw.blurred.tolist()
    assert 0 < sum(chosen) < 12 and 0 < sum(blurred) < sum(chosen)
    scale, shift = torch.rand((12, 4), generator=gen) + 1, torch.rand((12, 4), generator=gen)
    expected = draw.apply_uint8(images, True, scale, shift)
    every = PhotometricDraw.unpack(draw.packed.clone(), shape)
    torch.testing.assert_close(every.apply_uint8(images, True, scale, shift), expected)
    # with noise: the chosen patches get it at their own strength, the others none
    noisy_ranges = PhotometricRanges(noise=0.05, blur_p=0.0)
    gen.manual_seed(8)
    draw = PhotometricDraw.draw(shape, 0.6, gen, noisy_ranges, torch.device("cpu"))
    quiet = dataclasses.replace(draw, noise_sd=torch.zeros(12))
    base = quiet.apply_uint8(images)
    out = PhotometricDraw.unpack(draw.packed.clone(), shape).apply_uint8(images)
    for i, picked in enumerate(draw.chosen.tolist()):
        diff = (out[i] - base[i])[(base[i] > 0.2) & (base[i] < 0.8)]  # away from the clamp
        sd = float(draw.noise_sd[i])
        if not picked:
            assert sd == 0.0 and float(diff.abs().max()) == 0.0
        else:
            assert abs(float(diff.std()) - sd) < 0.1 * sd, (i, float(diff.std()), sd)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pinned_staging_copies_every_turn_right() -> None:
    """More copies than buffers, of two sizes and dtypes: each arrives as it was sent."""
    device = torch.device("cuda")
    staging = PinnedStaging(device, depth=3)
    sent, arrived = [], []
    for i in range(10):
        host = torch.arange(5 + i % 2, dtype=torch.float32 if i % 3 else torch.int64) * (i + 1)
        sent.append(host.clone())
        arrived.append(staging.to_device(host))
        host.fill_(-1)  # the caller's tensor is free again at once
    out = torch.empty(6, device=device)
    staging.to_device(torch.full((6,), 7.0), out=out)
    torch.cuda.synchronize()
    for a, b in zip(sent, arrived, strict=True):
        assert b.is_cuda and torch.equal(a, b.cpu())
    assert torch.equal(out.cpu(), torch.full((6,), 7.0))
