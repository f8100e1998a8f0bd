"""Bad input: one clear line naming the file and the problem, a non-zero exit, no traceback."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.transform import Affine

from conftest import assert_one_line_error, relabel_in_albers, run_cli


@pytest.fixture
def data(tiny_data: Path, tmp_path: Path) -> Path:
    """A private copy of four tiny pairs that a test may damage."""
    folder = tmp_path / "data"
    folder.mkdir()
    for path in sorted(tiny_data.glob("synth_00[0-3]_*.tif")):
        shutil.copy(path, folder / path.name)
    return folder


def _rewrite(path: Path, array: np.ndarray, **changes) -> None:
    with rasterio.open(path) as ds:
        profile = ds.profile
    profile.update(count=array.shape[0], **changes)
    path.unlink()
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)


def _train(data: Path, tiny_config: Path, tmp_path: Path, workers: int = 1):
    return run_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "run"),
        "--epochs",
        "1",
        "--workers",
        str(workers),
    )


def test_folder_without_pairs(tmp_path: Path, tiny_config: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _train(empty, tiny_config, tmp_path)
    assert_one_line_error(result, str(empty), "no tile pairs found")


def test_missing_folder(tmp_path: Path, tiny_config: Path) -> None:
    result = _train(tmp_path / "nope", tiny_config, tmp_path)
    assert_one_line_error(result, "nope", "data folder not found")


def test_missing_partner(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    (data / "synth_001_lc.tif").unlink()
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_001_naip.tif", "no label file")


def test_three_band_image(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    image = data / "synth_002_naip.tif"
    with rasterio.open(image) as ds:
        rgb = ds.read([1, 2, 3])
    _rewrite(image, rgb, photometric="RGB")
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_002_naip.tif", "has 3 bands, the model expects 4")


def test_label_that_does_not_overlap_the_image(
    data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    label = data / "synth_001_lc.tif"
    with rasterio.open(label) as ds:
        codes, transform = ds.read(), ds.transform
    _rewrite(label, codes, transform=transform @ Affine.translation(100_000, 0))
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_001_lc.tif", "does not overlap the image")


def test_label_without_crs(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    label = data / "synth_001_lc.tif"
    with rasterio.open(label) as ds:
        codes, transform = ds.read(), ds.transform
    _rewrite(label, codes, crs=None, transform=transform @ Affine.translation(3, 0))
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_001_lc.tif", "no CRS")


def test_label_in_another_crs_is_reprojected(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    """Labels in Albers (like the Bay-wide files) are brought onto the image grid, nearest."""
    relabel_in_albers(data / "synth_001_lc.tif")
    result = _train(data, tiny_config, tmp_path)
    assert result.returncode == 0, result.stderr


def test_file_that_is_not_a_geotiff(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    (data / "synth_003_naip.tif").write_bytes(b"this is not a tiff" * 100)
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_003_naip.tif", "not a readable GeoTIFF")


@pytest.mark.parametrize("workers", [1, 2])
def test_truncated_geotiff(data: Path, tiny_config: Path, tmp_path: Path, workers: int) -> None:
    image = data / "synth_000_naip.tif"
    raw = image.read_bytes()
    image.write_bytes(raw[: len(raw) // 2])
    result = _train(data, tiny_config, tmp_path, workers)
    assert_one_line_error(result, "synth_000_naip.tif")
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_label_codes_outside_the_mapping(
    data: Path, tiny_config: Path, tmp_path: Path, workers: int
) -> None:
    # synth_001 is held by rank 1 when there are two workers: the message crosses processes
    label = data / "synth_001_lc.tif"
    with rasterio.open(label) as ds:
        codes = ds.read()
    codes[0, :5, :5] = 9
    _rewrite(label, codes)
    result = _train(data, tiny_config, tmp_path, workers)
    assert_one_line_error(result, "synth_001_lc.tif", "label codes [9]", "chesapeake7")


def test_bad_config_value(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data), "--set", "optim.lr=0"
    )
    assert_one_line_error(result, "optim.lr", "greater than 0")


def test_missing_config_file(tmp_path: Path) -> None:
    result = run_cli("train", "--config", str(tmp_path / "none.yaml"))
    assert_one_line_error(result, "none.yaml", "config file not found")
