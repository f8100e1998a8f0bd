"""Probability-map overviews built strip by strip equal GDAL's averaged overviews."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.enums import Resampling
from rasterio.transform import from_origin

from landcover.inference.overviews import OverviewPyramid, overview_shapes


def _map(height: int, width: int, dtype: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """A random 3-band map with no-data: a corner, a few rows, a column."""
    rng = np.random.default_rng(height * width)
    values = (
        rng.integers(0, 256, (3, height, width)).astype(np.uint8)
        if dtype == "uint8"
        else rng.random((3, height, width), dtype=np.float32)
    )
    valid = np.ones((height, width), dtype=bool)
    valid[: height // 4, : width // 5] = False
    valid[height // 2 : height // 2 + 3] = False
    valid[:, width - 7] = False
    values[:, ~valid] = 0
    profile = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": 3,
        "dtype": dtype,
        "crs": "EPSG:26918",
        "transform": from_origin(400000, 4300000, 1, 1),
        "tiled": True,
        "blockxsize": 256,
        "blockysize": 256,
    }
    return values, valid, profile


def _build(
    values: np.ndarray,
    valid: np.ndarray,
    profile: dict,
    folder: Path,
    nearest: bool = False,
    threads: int = 1,
) -> list[Path]:
    """Feeds the map in strips of awkward heights (odd, a single row, the rest)."""
    pyramid = OverviewPyramid(profile, folder, "prob", nearest=nearest, threads=threads)
    height = values.shape[1]
    cuts = [0, 333, 430, 431, 433, 833, height]
    for a, b in itertools.pairwise(cuts):
        pyramid.add(values[:, a:b], valid[a:b])
    pyramid.finish()
    return pyramid.paths


@pytest.mark.parametrize("threads", [1, 2, 3])  # the first level's bands: 1, 1 + 2, 1 + 1 + 1
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_power_of_two_sizes_equal_gdal_average(tmp_path: Path, dtype: str, threads: int) -> None:
    values, valid, profile = _map(1024, 768, dtype)
    paths = _build(values, valid, profile, tmp_path, threads=threads)
    reference = tmp_path / "reference.tif"
    with rasterio.open(reference, "w", **profile) as ds:
        ds.write(values)
        ds.write_mask(np.where(valid, 255, 0).astype(np.uint8))
        ds.build_overviews([2, 4], Resampling.average)
    assert len(paths) == len(overview_shapes(1024, 768)) == 2
    for level, path in enumerate(paths):
        with rasterio.open(reference, OVERVIEW_LEVEL=level) as want, rasterio.open(path) as got:
            np.testing.assert_array_equal(got.read_masks(1), want.read_masks(1))
            if dtype == "uint8":
                np.testing.assert_array_equal(got.read(), want.read())
            else:
                np.testing.assert_allclose(got.read(), want.read(), rtol=0, atol=1e-6)


def _halve(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masked 2 x 2 means, pixel by pixel (uint8: rounded half up)."""
    k, h, w = values.shape
    out = np.zeros((k, -(-h // 2), -(-w // 2)), dtype=values.dtype)
    ok = np.zeros(out.shape[1:], dtype=bool)
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            block = valid[2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
            if block.any():
                pixels = values[:, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2][:, block].astype(float)
                mean = pixels.mean(axis=1)
                out[:, i, j] = np.floor(mean + 0.5) if values.dtype == np.uint8 else mean
                ok[i, j] = True
    return out, ok


@pytest.mark.parametrize("threads", [1, 2])
def test_odd_sizes_are_2x2_means_with_short_edges(tmp_path: Path, threads: int) -> None:
    values, valid, profile = _map(1111, 517, "uint8")
    paths = _build(values, valid, profile, tmp_path, threads=threads)
    assert [p.name for p in paths] == ["prob_ov2.tif", "prob_ov4.tif", "prob_ov8.tif"]
    for path in paths:
        values, valid = _halve(values, valid)
        with rasterio.open(path) as got:
            np.testing.assert_array_equal(got.read_masks(1) > 0, valid)
            np.testing.assert_array_equal(got.read(), values)


def test_nearest_levels_keep_the_top_left_pixel_of_each_block(tmp_path: Path) -> None:
    # the class map's pyramid: level k's (i, j) is the map's (i * 2**k, j * 2**k), odd sizes
    # included (ceil), fed in awkward strips; no mask (the class map's no-data is a value)
    values, valid, profile = _map(1111, 517, "uint8")
    paths = _build(values, valid, profile, tmp_path, nearest=True)
    assert len(paths) == 3
    for level, path in enumerate(paths, start=1):
        step = 2**level
        with rasterio.open(path) as got:
            assert (got.height, got.width) == (-(-1111 // step), -(-517 // step))
            np.testing.assert_array_equal(got.read(), values[:, ::step, ::step])
            assert got.read_masks(1).all()
