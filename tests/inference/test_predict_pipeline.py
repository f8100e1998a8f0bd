"""The pipelined predictor: same maps as an independent whole-image loop; failures in its threads."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
import torch

from landcover.errors import DataError
from landcover.inference.blend import blend_weights
from landcover.inference.loader import load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.predict import TileMapper, predict_tile
from landcover.inference.sliding import SlidingWindowPredictor, window_starts
from landcover.synthetic.synthetic import synthesize_scene, write_pair

from conftest import REPO, assert_one_line_error, run_cli


def _tile(folder: Path, name: str, height: int, width: int, seed: int) -> Path:
    """A synthetic tile with a no-data corner."""
    image, label = synthesize_scene(height, width, np.random.default_rng(seed))
    image[:, : height // 5, : width // 7] = 0
    return write_pair(folder, name, image, label, (400000.0, 4300000.0))[0]


def reference_probs(checkpoint: Path, image: np.ndarray, window: int, overlap: int, batch: int):
    """Blended probabilities of a whole in-memory image, by a plain loop over its windows.

    The image is padded to at least one window; windows are visited row by row, ``batch`` at a
    time, and their weighted softmax added into whole-image sums (the order in which the
    streamed predictor adds them too), then divided by the summed weights.
    """
    im = load_inference_model(checkpoint, "cpu")
    height, width = image.shape[:2]
    ph, pw = max(height, window), max(width, window)
    padded = np.zeros((ph, pw, image.shape[2]), dtype=np.uint8)
    padded[:height, :width] = image
    weights = blend_weights(window, overlap)
    acc = norm = None
    xs = window_starts(pw, window, overlap)
    with torch.no_grad():
        for y in window_starts(ph, window, overlap):
            for j in range(0, len(xs), batch):
                chunk = xs[j : j + batch]
                crops = torch.from_numpy(
                    np.stack([padded[y : y + window, x : x + window] for x in chunk])
                )
                logits = im.model(im.prepare(crops))
                probs = torch.softmax(logits.float(), dim=1) * weights
                if acc is None:
                    acc = torch.zeros((probs.shape[1], ph, pw))
                    norm = torch.zeros((ph, pw))
                for x, prob in zip(chunk, probs, strict=True):
                    acc[:, y : y + window, x : x + window] += prob
                    norm[y : y + window, x : x + window] += weights
    return (acc / norm)[:, :height, :width]


@pytest.mark.parametrize(
    ("height", "width", "window"),
    [(300, 517, 128), (517, 300, 128), (40, 50, 64)],  # the last is smaller than a window
)
def test_maps_equal_an_independent_whole_image_loop(
    checkpoint: Path, tmp_path: Path, height: int, width: int, window: int
) -> None:
    tile = _tile(tmp_path, "odd", height, width, seed=height + width)
    with rasterio.open(tile) as ds:
        image = np.moveaxis(ds.read(), 0, -1)
        assert ds.nodata == 0
        valid = ~(ds.read() == 0).all(axis=0)  # no-data: every band equals the nodata value
    overlap, batch = 16, 3  # 5 windows a row at 517 px: a full and a partial batch
    expected = reference_probs(checkpoint, image, window, overlap, batch)
    geometry = ["--window", str(window), "--overlap", str(overlap), "--batch-size", str(batch)]
    out = tmp_path / "cli"
    result = run_cli(
        "predict", str(tile), "--checkpoint", str(checkpoint), "--out", str(out), *geometry
    )
    assert result.returncode == 0, result.stderr
    want_classes = np.where(valid, expected.argmax(dim=0).numpy(), 255)
    with rasterio.open(out / "odd_naip_class.tif") as ds:
        np.testing.assert_array_equal(ds.read(1), want_classes)
    with rasterio.open(out / "odd_naip_prob.tif") as ds:
        want = np.rint(expected.numpy() * 255.0).astype(np.uint8)
        np.testing.assert_array_equal(ds.read(), np.where(valid, want, 0))
    # float32 probabilities, in this process: exactly the loop's
    im = load_inference_model(checkpoint, "cpu")
    options = PredictOptions(
        str(tmp_path / "f32"), overlap, batch, window, "float32", preview=False
    )
    summary = predict_tile(str(tile), im, options)
    with rasterio.open(summary.prob_map) as ds:
        np.testing.assert_array_equal(ds.read(), np.where(valid, expected.numpy(), 0))
    with rasterio.open(summary.class_map) as ds:
        np.testing.assert_array_equal(ds.read(1), want_classes)
    # a tile too large to hold in memory is read row by row: the same maps
    streamed = predict_tile(
        str(tile), im, replace(options, out=str(tmp_path / "rows"), tile_memory=0)
    )
    with rasterio.open(streamed.prob_map) as ds:
        np.testing.assert_array_equal(ds.read(), np.where(valid, expected.numpy(), 0))
    with rasterio.open(streamed.class_map) as ds:
        np.testing.assert_array_equal(ds.read(1), want_classes)
    # the sequential path (in-memory image, one step at a time) gives the same probabilities
    sequential = SlidingWindowPredictor(
        im.model, window, overlap, batch, im.prepare, im.device
    ).predict_array(image)
    torch.testing.assert_close(sequential, expected, rtol=0, atol=0)


@pytest.fixture
def truncated_tile(tmp_path: Path) -> Path:
    """A tile whose header and first blocks are intact and whose later blocks are cut off."""
    source = _tile(tmp_path, "whole", 600, 517, seed=5)
    cog = tmp_path / "cog.tif"  # a COG has its header first, then the blocks in row order
    rasterio.shutil.copy(source, cog, driver="COG", BLOCKSIZE="256", OVERVIEWS="NONE")
    data = cog.read_bytes()
    cut = tmp_path / "cut.tif"
    cut.write_bytes(data[: len(data) * 6 // 10])
    with rasterio.open(cut) as ds:  # opens, and its first rows read
        assert ds.read(window=((0, 200), (0, 517))).shape == (4, 200, 517)
    return cut


def assert_no_maps(out: Path, tile: str) -> None:
    """Only the job's record is left: no map, no preview, no scratch file or folder."""
    names = sorted(p.name for p in out.iterdir())
    assert names == ["classes.csv", "logs", "summary.csv", "summary.json"], names
    assert not [p for p in out.rglob("*") if p.suffix in (".tif", ".png", ".tmp")]
    tiles = json.loads((out / "summary.json").read_text())["tiles"]
    assert [(Path(t["tile"]).name, t["status"]) for t in tiles] == [(tile, "failed")]


def _landcover_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("landcover-")]


def test_reader_failure_is_one_line_and_leaves_nothing(
    truncated_tile: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = run_cli(
        "predict", str(truncated_tile), "--checkpoint", str(checkpoint), "--out", str(out)
    )
    line = assert_one_line_error(result, "cut.tif", "cannot read rows")
    assert "the file is cut short (truncated) or corrupt" in line  # GDAL's short read, said
    assert "4294967295" not in line  # libtiff's -1 for a place it does not know
    assert_no_maps(out, "cut.tif")
    # in this process: a DataError, and no pipeline thread left running
    im = load_inference_model(checkpoint, "cpu")
    before = _landcover_threads()
    with pytest.raises(DataError, match=r"cut\.tif: cannot read rows"):
        predict_tile(str(truncated_tile), im, PredictOptions(str(out), window=128))
    # read row by row (a tile too large to hold): the reader thread fails mid-tile
    with pytest.raises(DataError, match=r"cut\.tif: cannot read rows [1-9]"):
        predict_tile(str(truncated_tile), im, PredictOptions(str(out), window=128, tile_memory=0))
    assert _landcover_threads() == before == []
    assert_no_maps(out, "cut.tif")


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # Python ignores SIGXFSZ


def test_writer_failure_is_one_line_and_leaves_nothing(checkpoint: Path, tmp_path: Path) -> None:
    """Files may not grow past 200 kB: writing the scratch maps fails (as on a full disk)."""
    tile = _tile(tmp_path, "big", 600, 517, seed=6)
    out = tmp_path / "maps"
    args = ["--checkpoint", str(checkpoint), "--out", str(out), "--prob-dtype", "float32"]
    result = subprocess.run(  # 7 MB of float32 probabilities to write
        [sys.executable, "-m", "landcover", "predict", str(tile), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        preexec_fn=_limit_file_size,
    )
    assert_one_line_error(result, "big_naip", "writing the maps failed")
    assert_no_maps(out, "big_naip.tif")


def test_mapper_publishes_every_tile_before_close(checkpoint: Path, tmp_path: Path) -> None:
    tiles = [_tile(tmp_path, f"t{i}", 150 + 40 * i, 200, seed=i) for i in range(3)]
    im = load_inference_model(checkpoint, "cpu")
    out = tmp_path / "maps"
    with TileMapper(im, PredictOptions(str(out), preview=False)) as mapper:
        futures = [mapper.submit(str(t)) for t in tiles]
    assert all(f.done() for f in futures)
    for tile, future in zip(tiles, futures, strict=True):
        summary = future.result()
        with rasterio.open(summary.class_map) as c, rasterio.open(tile) as s:
            assert (c.width, c.height, c.transform) == (s.width, s.height, s.transform)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"t{i}_naip_{kind}"
        for i in range(3)
        for kind in ("class.tif", "prob.tif", "class.tif.aux.xml")
    )  # the class map's category names and alpha beside it (GDAL's PAM file)
    assert _landcover_threads() == []


def _map_bytes(path: Path) -> list[bytes]:
    """Every level of a map (pixels and masks), full resolution first."""
    levels = []
    with rasterio.open(path) as ds:
        count = len(ds.overviews(1))
    for level in range(-1, count):
        kwargs = {} if level < 0 else {"overview_level": level}
        with rasterio.open(path, **kwargs) as ds:
            levels.append(ds.read().tobytes() + ds.read_masks().tobytes())
    return levels


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to take one away")
def test_one_core_gives_the_same_maps(checkpoint: Path, tmp_path: Path) -> None:
    """A tile mapped on one core (torch's and GDAL's threads follow the affinity mask) gives
    the same maps, every COG level, as on all cores."""
    tile = _tile(tmp_path, "cores", 700, 600, seed=11)
    args = ["predict", str(tile), "--checkpoint", str(checkpoint), "--window", "256"]
    one = run_cli(*args, "--out", str(tmp_path / "one"), one_core=True)
    assert one.returncode == 0, one.stderr
    both = run_cli(*args, "--out", str(tmp_path / "both"))
    assert both.returncode == 0, both.stderr
    for kind in ("class", "prob"):
        name = f"cores_naip_{kind}.tif"
        levels = _map_bytes(tmp_path / "one" / name)
        assert len(levels) > 1  # overviews too
        assert levels == _map_bytes(tmp_path / "both" / name)
