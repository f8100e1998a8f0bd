"""The training feed: uint8 batches moved to the device and normalised there, as training runs.

The host path (augment and normalise on the host, then move a float32 batch: four times the
image bytes) and the device path (move the uint8 batch, then augment and normalise on the
device, :class:`~landcover.feed.inputs.TrainingInput`) must give the same batches. On the
CPU the device is the CPU; on a GPU the same test runs on CUDA. ``benchmarks/feed_bench.py``
measures both paths.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from landcover.classes import IGNORE_INDEX
from landcover.config import DataConfig
from landcover.data.raster import TileArrays
from landcover.feed.augment import d4_source_index, resolve_augment_on, transform_batch
from landcover.feed.inputs import TrainingInput
from landcover.feed.prefetch import Prefetcher
from landcover.feed.sampler import PatchSampler, epoch_rng

CLASSES = 5
PATCH = 32
BATCH = 8
STEPS = 3
SEED = 11

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
        ],
    ),
]


def _tiles() -> list[TileArrays]:
    """Three tiles of different brightness and contrast; the second has a no-data block."""
    rng = np.random.default_rng(0)
    tiles = []
    for i, (low, high) in enumerate(((0, 256), (40, 200), (90, 160))):
        image = rng.integers(low, high, (96, 80, 4)).astype(np.uint8)
        image[..., 3] = rng.integers(low, high, (96, 80)) // 2  # a darker band
        label = rng.integers(0, CLASSES, (96, 80)).astype(np.uint8)
        nodata = None
        if i == 1:
            nodata = np.zeros((96, 80), dtype=bool)
            nodata[:20, :30] = True
            image[nodata] = 0
            label[nodata] = IGNORE_INDEX
        tiles.append(TileArrays(f"t{i}", image, label, nodata))
    return tiles


def _config(photometric: float, normalize: str) -> DataConfig:
    return DataConfig(
        mean=[0.45, 0.4, 0.35, 0.2],
        std=[0.2, 0.18, 0.15, 0.1],
        photometric=photometric,
        normalize=normalize,
        class_balance=0.5,
        patch_size=PATCH,
    )


def _sampler(tiles: list[TileArrays]) -> PatchSampler:
    return PatchSampler(tiles, PATCH, CLASSES, class_balance=0.5, augment=True)


def _device_path(cfg: DataConfig, tiles: list[TileArrays], device: torch.device) -> list:
    """Training's path: uint8 batches from the prefetch thread, moved, prepared on the device."""
    sampler, rng = _sampler(tiles), epoch_rng(SEED, 0, 0)
    prepare = TrainingInput(cfg, tiles, device, SEED)
    prepare.start_epoch(0, 0)
    feed = Prefetcher(
        lambda: sampler.batch_with_tiles(BATCH, rng), STEPS, pin_memory=device.type == "cuda"
    )
    out = []
    for images, labels, index in feed:
        assert images.dtype == torch.uint8
        inputs = prepare(images.to(device, non_blocking=True), index)
        out.append((inputs, labels.to(device, non_blocking=True).long(), images))
    return out


def _host_path(cfg: DataConfig, tiles: list[TileArrays], device: torch.device) -> list:
    """The alternative: prepared on the host in the prefetch thread, float32 batches moved."""
    sampler, rng = _sampler(tiles), epoch_rng(SEED, 0, 0)
    prepare = TrainingInput(cfg, tiles, torch.device("cpu"), SEED)
    prepare.start_epoch(0, 0)

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        images, labels, index = sampler.batch_with_tiles(BATCH, rng)
        return prepare(images, index), labels

    feed = Prefetcher(make, STEPS, pin_memory=device.type == "cuda")
    return [
        (inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True).long())
        for inputs, labels in feed
    ]


@pytest.mark.parametrize("normalize", ["global", "per_tile"])
@pytest.mark.parametrize("photometric", [0.0, 0.8])
@pytest.mark.parametrize("device_name", DEVICES)
def test_uint8_to_device_path_gives_the_host_paths_batches(
    device_name: str, photometric: float, normalize: str
) -> None:
    if device_name == "cuda" and photometric > 0:
        pytest.skip(
            "CUDA's generator draws other pixel noise than the CPU's from the same seed (the "
            "per-patch draws are made on the host on both): the two paths are comparable bit "
            "for bit without photometric only"
        )
    device = torch.device(device_name)
    tiles = _tiles()
    cfg = _config(photometric, normalize)
    on_device = _device_path(cfg, tiles, device)
    on_host = _host_path(cfg, tiles, device)
    assert len(on_device) == len(on_host) == STEPS
    for (inputs, labels, images), (expected, expected_labels) in zip(
        on_device, on_host, strict=True
    ):
        assert inputs.dtype == expected.dtype == torch.float32
        assert inputs.shape == expected.shape == (BATCH, 4, PATCH, PATCH)
        assert inputs.device.type == expected.device.type == device.type
        if device.type == "cpu":
            assert torch.equal(inputs, expected)  # bit-identical
        else:  # the GPU's own arithmetic: the same operations, within 1e-6
            torch.testing.assert_close(inputs, expected, atol=1e-6, rtol=1e-6)
        assert torch.equal(labels, expected_labels)
        # a quarter of the bytes cross to the device
        assert images.nbytes * 4 == expected.nbytes
    if photometric > 0:  # the augmentation did act, on both paths alike
        plain = _host_path(_config(0.0, normalize), tiles, device)
        assert not torch.equal(on_device[0][0], plain[0][0])


def _numpy_stats(tile: TileArrays) -> tuple[np.ndarray, np.ndarray]:
    """Band mean and standard deviation of the tile's valid pixels on the 0..1 scale."""
    pixels = tile.image.reshape(-1, 4)
    if tile.nodata is not None:
        pixels = pixels[~tile.nodata.reshape(-1)]
    values = pixels.astype(np.float64) / 255.0
    return values.mean(axis=0), values.std(axis=0)


@pytest.mark.parametrize("normalize", ["global", "per_tile"])
@pytest.mark.parametrize("device_name", DEVICES)
def test_normalised_batches_match_numpy(device_name: str, normalize: str) -> None:
    device = torch.device(device_name)
    tiles = _tiles()
    cfg = _config(0.0, normalize)
    # patches from every tile, one over the second tile's no-data block
    windows = [(0, 0, 0), (0, 50, 40), (1, 0, 0), (1, 30, 20), (2, 64, 48), (2, 10, 5)]
    images = np.stack([tiles[t].image[y : y + PATCH, x : x + PATCH] for t, y, x in windows])
    index = torch.tensor([t for t, _, _ in windows])
    prepare = TrainingInput(cfg, tiles, device, SEED)
    out = prepare(torch.from_numpy(images).to(device), index).cpu().numpy()
    for i, (t, _, _) in enumerate(windows):
        if normalize == "per_tile":
            mean, std = _numpy_stats(tiles[t])
        else:
            mean, std = np.array(cfg.mean), np.array(cfg.std)
        x = images[i].astype(np.float64).transpose(2, 0, 1)
        expected = (x / 255.0 - mean[:, None, None]) / std[:, None, None]
        np.testing.assert_allclose(out[i], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("device_name", DEVICES)
def test_d4_on_the_device_gives_the_host_d4_batches(device_name: str) -> None:
    # data.augment_on: device: the sampler draws the same windows and D4 elements and leaves
    # the flips and transposes to one gather on the device (host: numpy flips, torch's transpose)
    device = torch.device(device_name)
    tiles = _tiles()
    host_rng, device_rng = epoch_rng(SEED, 0, 0), epoch_rng(SEED, 0, 0)
    host, on_device = _sampler(tiles), _sampler(tiles)
    table = d4_source_index(PATCH, device)
    seen: set[int] = set()
    for _ in range(STEPS):
        images, labels, index = host.batch_with_tiles(BATCH, host_rng)
        raw, raw_labels, raw_index, codes = on_device.batch_for_device(BATCH, device_rng)
        moved, moved_labels = transform_batch(
            raw.to(device), raw_labels.to(device), codes.to(device), table
        )
        assert torch.equal(moved.cpu(), images) and torch.equal(moved_labels.cpu(), labels)
        assert torch.equal(raw_index, index)
        seen |= set(codes.tolist())
    assert len(seen) > 4  # the augmentation acted: most of D4's 8 elements were drawn


def test_d4_goes_to_the_device_on_a_gpu_only_by_default() -> None:
    # data.augment_on: auto: the gather on a GPU (1.23x on an H100), the host's flips on the
    # CPU (where the gather costs about 5x them); an explicit setting holds everywhere
    assert DataConfig().augment_on == "auto"
    assert resolve_augment_on("auto", torch.device("cuda")) == "device"
    assert resolve_augment_on("auto", torch.device("cpu")) == "host"
    assert resolve_augment_on("host", torch.device("cuda")) == "host"
    assert resolve_augment_on("device", torch.device("cpu")) == "device"
    tiles = _tiles()
    for setting, on_device in (("auto", False), ("device", True), ("host", False)):
        cfg = _config(0.0, "global").model_copy(update={"augment_on": setting})
        prepare = TrainingInput(cfg, tiles, torch.device("cpu"), SEED)
        assert (prepare.d4_table is not None) == on_device, setting
