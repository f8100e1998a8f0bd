"""Between tiles the device does not wait: the next tile decoded ahead, the last strips written
behind (a writer thread shared from tile to tile). The maps stay the same, failures the same."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import rasterio

from landcover.data.normalize import dataset_band_stats
from landcover.errors import DataError
from landcover.inference.ahead import TileDecoder
from landcover.inference.loader import load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.pipeline import run_pipelined
from landcover.inference.predict import TileMapper
from landcover.inference.resolution import resolve_resolution
from landcover.inference.tileread import TileSource
from landcover.synthetic.synthetic import synthesize_scene, write_pair


def _tile(folder: Path, name: str, height: int, width: int, seed: int) -> Path:
    """A synthetic tile with a no-data corner."""
    image, label = synthesize_scene(height, width, np.random.default_rng(seed))
    image[:, : height // 5, : width // 7] = 0
    return write_pair(folder, name, image, label, (400000.0, 4300000.0))[0]


def _maps(folder: Path) -> dict[str, bytes]:
    """Every map's pixels and masks, by file name."""
    found = {}
    for path in sorted(folder.glob("*.tif")):
        with rasterio.open(path) as ds:
            found[path.name] = ds.read().tobytes() + ds.read_masks().tobytes()
    return found


def _decoder(checkpoint: Path, options: PredictOptions) -> TileDecoder:
    im = load_inference_model(checkpoint, "cpu")
    resolution = resolve_resolution(options.resolution, im.pixel_size_m, im.checkpoint)
    return TileDecoder(im, options, resolution)


def test_a_tile_decoded_ahead_holds_its_pixels_mask_and_stats(
    checkpoint: Path, tmp_path: Path
) -> None:
    tile = _tile(tmp_path, "ahead", 300, 420, seed=3)
    decoder = _decoder(checkpoint, PredictOptions(str(tmp_path / "out")))
    try:
        decoder.start(str(tile))
        decoded = decoder.take(str(tile))
        assert decoder.take(str(tile)) is None  # handed over once
    finally:
        decoder.close()
    assert decoded is not None and decoded.pixels is not None
    with rasterio.open(tile) as ds:
        assert np.array_equal(decoded.pixels, np.moveaxis(ds.read(), 0, -1))
        # the predicted tile takes those pixels, and its statistics equal a strip-by-strip read
        source = TileSource.open(ds, str(tile), decoded=decoded)
        assert source.pixels is decoded.pixels
        assert source.stats() == dataset_band_stats(ds)
        assert source.valid(0, ds.height, decoded.pixels).sum() == 300 * 420 - 60 * 60


def test_a_hint_for_another_shape_or_a_bad_tile_is_not_used(
    checkpoint: Path, tmp_path: Path
) -> None:
    small = _tile(tmp_path, "small", 64, 96, seed=1)
    large = _tile(tmp_path, "large", 128, 96, seed=2)
    broken = tmp_path / "broken_naip.tif"
    broken.write_bytes(b"not a tiff")
    decoder = _decoder(checkpoint, PredictOptions(str(tmp_path / "out")))
    try:
        decoder.start(str(broken))
        assert decoder.take(str(broken)) is None  # left for the tile's own prediction
        decoder.start(str(small))
        decoded = decoder.take(str(small))
    finally:
        decoder.close()
    with rasterio.open(large) as ds:
        assert TileSource.open(ds, str(large), decoded=decoded).pixels is not decoded.pixels


def test_maps_with_tiles_decoded_ahead_equal_maps_without(checkpoint: Path, tmp_path: Path) -> None:
    """Three tiles as a region job's worker maps them (the next one hinted before this one is
    submitted), against the same tiles mapped one by one by a mapper with no hints."""
    tiles = [str(_tile(tmp_path, f"t{i}", 200 + 50 * i, 260, seed=10 + i)) for i in range(3)]
    im = load_inference_model(checkpoint, "cpu")
    ahead, alone = tmp_path / "ahead", tmp_path / "alone"
    options = PredictOptions(str(ahead), preview=False, window=128)
    with TileMapper(im, options, decode_ahead=True) as mapper:  # as on a GPU
        futures = []
        for i, tile in enumerate(tiles):
            if i + 1 < len(tiles):
                mapper.prefetch(tiles[i + 1])
            futures.append(mapper.submit(tile))
            assert tile not in mapper._decoder._ahead  # its decoded pixels were taken
    for tile in tiles:
        with TileMapper(im, PredictOptions(str(alone), preview=False, window=128)) as mapper:
            mapper.submit(tile).result()
    assert [f.result().class_map for f in futures] == [
        str(ahead / f"t{i}_naip_class.tif") for i in range(3)
    ]
    maps = _maps(ahead)
    assert len(maps) == 6 and maps == _maps(alone)
    assert not [t for t in threading.enumerate() if t.name.startswith("landcover-")]


def test_a_bad_tile_hinted_ahead_fails_as_it_would_alone(checkpoint: Path, tmp_path: Path) -> None:
    good = str(_tile(tmp_path, "good", 150, 150, seed=4))
    broken = tmp_path / "broken_naip.tif"
    broken.write_bytes(b"not a tiff")
    im = load_inference_model(checkpoint, "cpu")
    options = PredictOptions(str(tmp_path / "out"), preview=False)
    with TileMapper(im, options, decode_ahead=True) as mapper:
        mapper.prefetch(str(broken))
        mapper.submit(good).result()
        with pytest.raises(DataError) as hinted:
            mapper.submit(str(broken))
    with TileMapper(im, options) as mapper, pytest.raises(DataError) as alone:
        mapper.submit(str(broken))
    assert str(hinted.value) == str(alone.value) and "broken_naip.tif" in str(hinted.value)


def test_a_shared_writer_keeps_order_and_hands_back_the_last_writes() -> None:
    """Two calls share one (slow) writer: their writes run in order; each call returns its
    unfinished writes, and a failure among them is raised by its future."""
    written: list[tuple[int, int]] = []

    def write(item: tuple[int, int]) -> None:
        threading.Event().wait(0.05)  # slower than compute: writes queue up
        if item == (1, 4):
            raise OSError("disk full")
        written.append(item)

    writer = ThreadPoolExecutor(1)
    try:
        first = run_pipelined(5, lambda i: i, lambda i, x: (0, x), write, depth=2, writer=writer)
        second = run_pipelined(5, lambda i: i, lambda i, x: (1, x), write, depth=2, writer=writer)
        assert first and second  # handed back, not waited for
        for future in first:
            future.result()
        with pytest.raises(OSError, match="disk full"):
            for future in second:
                future.result()
    finally:
        writer.shutdown(wait=True)
    assert written == [(0, i) for i in range(5)] + [(1, i) for i in range(4)]


def test_a_failed_compute_waits_for_its_started_writes() -> None:
    """A compute failing mid-way: the error is raised after the call's writes in the shared
    writer have ended (the caller closes the files they write to next)."""
    running = threading.Event()
    finished: list[int] = []

    def write(item: int) -> None:
        running.set()
        threading.Event().wait(0.2)
        finished.append(item)

    def compute(i: int, x: int) -> int:
        if i == 1:
            running.wait(5)
            raise ValueError("model failed")
        return x

    writer = ThreadPoolExecutor(1)
    try:
        with pytest.raises(ValueError, match="model failed"):
            run_pipelined(4, lambda i: i, compute, write, depth=2, writer=writer)
        assert finished == [0]  # ended before the error came out
    finally:
        writer.shutdown(wait=True)
