"""Bringing a label raster onto an image's grid: exact nearest-neighbour reprojection."""

from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.enums import Resampling
from rasterio.transform import Affine
from rasterio.warp import reproject, transform_bounds
from rasterio.windows import Window

from landcover.data.align import grids_match, label_on_image_grid, label_window
from landcover.errors import DataError

UTM = "EPSG:26918"
ALBERS = "EPSG:5070"
IMAGE_ORIGIN = (350_000.0, 4_300_000.0)
IMAGE_SIZE = (240, 300)  # height, width


def _write(path: Path, array: np.ndarray, crs: str | None, transform: Affine, **extra) -> Path:
    array = array if array.ndim == 3 else array[None]
    profile = {
        "driver": "GTiff",
        "count": array.shape[0],
        "height": array.shape[1],
        "width": array.shape[2],
        "dtype": "uint8",
        "crs": crs,
        "transform": transform,
        "tiled": True,
        "blockxsize": 64,
        "blockysize": 64,
        "compress": "deflate",
        **extra,
    }
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)
    return path


def _blocky_codes(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Label codes 1..6 in small random blocks, with some no-data (15)."""
    rng = np.random.default_rng(seed)
    coarse = rng.choice([1, 2, 3, 4, 5, 6, 15], size=(shape[0] // 3 + 1, shape[1] // 3 + 1))
    return np.kron(coarse, np.ones((3, 3), dtype=np.uint8))[: shape[0], : shape[1]].astype(np.uint8)


@pytest.fixture
def image(tmp_path: Path) -> Path:
    height, width = IMAGE_SIZE
    pixels = np.random.default_rng(0).integers(1, 255, (4, height, width), dtype=np.uint8)
    transform = Affine(1.0, 0.0, IMAGE_ORIGIN[0], 0.0, -1.0, IMAGE_ORIGIN[1])
    return _write(tmp_path / "tile_naip.tif", pixels, UTM, transform, nodata=0)


def _label_around(
    tmp_path: Path, image: Path, crs: str, res: float, shift: float = 0.0, pad: float = 30.0
) -> Path:
    """A label raster in ``crs`` at ``res`` m covering the image's footprint plus ``pad`` m."""
    with rasterio.open(image) as img:
        left, bottom, right, top = transform_bounds(img.crs, crs, *img.bounds, densify_pts=21)
    left, top = left - pad + shift, top + pad + shift
    width = int(np.ceil((right - left + pad) / res))
    height = int(np.ceil((top - bottom + pad) / res))
    transform = Affine(res, 0.0, left, 0.0, -res, top)
    codes = _blocky_codes((height, width), seed=int(res * 10))
    name = f"label_{crs.replace(':', '')}_{res}_{shift}.tif"
    return _write(tmp_path / name, codes, crs, transform, nodata=15)


def _reference(label: Path, image: Path, window: Window | None = None) -> np.ndarray:
    """A direct nearest-neighbour reproject of the whole label file onto the image grid."""
    with rasterio.open(label) as lab, rasterio.open(image) as img:
        window = window or Window(0, 0, img.width, img.height)
        out = np.full((window.height, window.width), 15, dtype=np.uint8)
        reproject(
            rasterio.band(lab, 1),
            out,
            dst_transform=rasterio.windows.transform(window, img.transform),
            dst_crs=img.crs,
            dst_nodata=15,
            resampling=Resampling.nearest,
        )
    return out


@pytest.mark.parametrize(
    ("crs", "res", "shift"),
    [
        (ALBERS, 1.0, 0.0),  # another CRS: Albers, rotated against UTM here
        (ALBERS, 2.0, 0.3),  # another CRS and resolution
        (UTM, 1.0, 0.5),  # same CRS, grid shifted by half a pixel
        (UTM, 0.6, 0.0),  # same CRS, finer resolution (newer NAIP years)
        (UTM, 1.0, 7.0),  # same CRS and pixels, a larger label raster (direct windowed read)
    ],
)
def test_aligned_equals_direct_reproject(
    tmp_path: Path, image: Path, crs: str, res: float, shift: float
) -> None:
    label = _label_around(tmp_path, image, crs, res, shift)
    expected = _reference(label, image)
    with rasterio.open(label) as lab, rasterio.open(image) as img:
        assert not grids_match(lab, img)
        aligned = label_on_image_grid(lab, img)
        assert aligned.dtype == np.uint8
        assert aligned.shape == (img.height, img.width)
        np.testing.assert_array_equal(aligned, expected)
        assert len(np.unique(aligned)) >= 5
        for window in (Window(0, 0, 64, 64), Window(100, 70, 130, 90), Window(250, 200, 50, 40)):
            part = label_on_image_grid(lab, img, window)
            np.testing.assert_array_equal(part, _reference(label, image, window))
            # GDAL's approximate transformer (0.125 px) depends on the destination extent, so a
            # window may differ from a slice of the whole-image result at rare boundary pixels.
            assert (part != expected[window.toslices()]).mean() < 1e-3


def test_matching_grid_reads_straight_through(tmp_path: Path, image: Path) -> None:
    with rasterio.open(image) as img:
        transform, height, width = img.transform, img.height, img.width
    codes = _blocky_codes((height, width), seed=3)
    label = _write(tmp_path / "tile_lc.tif", codes, UTM, transform, nodata=15)
    with rasterio.open(label) as lab, rasterio.open(image) as img:
        assert grids_match(lab, img)
        np.testing.assert_array_equal(label_on_image_grid(lab, img), codes)
        window = Window(17, 33, 100, 50)
        np.testing.assert_array_equal(label_on_image_grid(lab, img, window), codes[33:83, 17:117])


def test_outside_the_label_gets_nodata(tmp_path: Path, image: Path) -> None:
    # A label covering only the image's left half, without a declared nodata: 15 elsewhere.
    height, width = IMAGE_SIZE
    codes = np.full((height, width // 2), 3, dtype=np.uint8)
    transform = Affine(1.0, 0.0, IMAGE_ORIGIN[0], 0.0, -1.0, IMAGE_ORIGIN[1])
    label = _write(tmp_path / "half_lc.tif", codes, UTM, transform)
    with rasterio.open(label) as lab, rasterio.open(image) as img:
        aligned = label_on_image_grid(lab, img)
    assert (aligned[:, : width // 2] == 3).all()
    assert (aligned[:, width // 2 :] == 15).all()


def test_small_window_of_a_huge_label_reads_little(tmp_path: Path, image: Path) -> None:
    # A sparse 10000 x 10000 Albers label covering the image: a tile needs a small window.
    with rasterio.open(image) as img:
        left, _, _, top = transform_bounds(img.crs, ALBERS, *img.bounds)
    transform = Affine(1.0, 0.0, left - 5000, 0.0, -1.0, top + 5000)
    path = tmp_path / "huge_lc.tif"
    profile = {
        "driver": "GTiff",
        "count": 1,
        "height": 10_000,
        "width": 10_000,
        "dtype": "uint8",
        "crs": ALBERS,
        "transform": transform,
        "nodata": 15,
        "tiled": True,
        "blockxsize": 512,
        "blockysize": 512,
        "compress": "deflate",
    }
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.full((1, 1024, 1024), 2, dtype=np.uint8), window=Window(4608, 4608, 1024, 1024))
    with rasterio.open(path) as lab, rasterio.open(image) as img:
        needed = label_window(lab, img)
        assert needed is not None
        assert needed.width * needed.height < 400 * 400
        np.testing.assert_array_equal(label_on_image_grid(lab, img), _reference(path, image))


def test_no_overlap_is_a_data_error(tmp_path: Path, image: Path) -> None:
    far = Affine(1.0, 0.0, IMAGE_ORIGIN[0] + 50_000, 0.0, -1.0, IMAGE_ORIGIN[1])
    label = _write(tmp_path / "far_lc.tif", np.ones((100, 100), np.uint8), UTM, far)
    with (
        rasterio.open(label) as lab,
        rasterio.open(image) as img,
        pytest.raises(DataError, match="does not overlap") as info,
    ):
        label_on_image_grid(lab, img)
    assert str(info.value).startswith(str(label))
    assert "\n" not in str(info.value)


def test_label_without_crs_is_a_data_error(tmp_path: Path, image: Path) -> None:
    transform = Affine(1.0, 0.0, IMAGE_ORIGIN[0] + 0.5, 0.0, -1.0, IMAGE_ORIGIN[1])
    label = _write(tmp_path / "nocrs_lc.tif", np.ones((240, 300), np.uint8), None, transform)
    with (
        rasterio.open(label) as lab,
        rasterio.open(image) as img,
        pytest.raises(DataError, match="no CRS") as info,
    ):
        label_on_image_grid(lab, img)
    assert str(info.value).startswith(str(label))
