"""The probe findings of issue 16 on predict, evaluate, train and data check (5 to 9).

Each test writes real GeoTIFFs with rasterio and runs ``python -m landcover`` as a subprocess
with a tiny checkpoint trained here for one short epoch (no test needs a good model). Expectations
are computed here from the arrays written and read back with numpy (hectares as pixel counts x
pixel area).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
from PIL import Image

from landcover.classes import resolve_mapping

from conftest import assert_one_line_error, run_cli, write_naip_tile

NAMES = resolve_mapping("chesapeake7").names
UTM = "EPSG:26918"


@pytest.fixture
def checkpoint(quick_checkpoint: Path) -> Path:
    """These tests need maps, not good ones: conftest's one-epoch checkpoint."""
    return quick_checkpoint


def write_tile(
    path: Path,
    height: int,
    width: int,
    crs: str | None = UTM,
    pixel: float = 1.0,
    corner: tuple[float, float] = (400000.0, 4300000.0),
    seed: int = 0,
    empty: bool = False,
) -> Path:
    """Writes a 4-band uint8 NAIP-like tile (nodata 0); ``empty``: every pixel is no-data."""
    rng = np.random.default_rng(seed)
    image = rng.integers(20, 230, size=(4, height, width), dtype=np.uint8)
    if empty:
        image[:] = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_naip_tile(path, image, crs, pixel, corner)


def write_label(path: Path, image: Path, seed: int = 0) -> Path:
    """Writes a Chesapeake label (codes 1-6) on exactly an image's grid."""
    with rasterio.open(image) as src:
        profile = {
            "driver": "GTiff",
            "height": src.height,
            "width": src.width,
            "count": 1,
            "dtype": "uint8",
            "crs": src.crs,
            "transform": src.transform,
            "nodata": 15,
        }
    codes = np.random.default_rng(seed).integers(1, 7, size=(profile["height"], profile["width"]))
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(codes.astype(np.uint8), 1)
    return path


def predict(checkpoint: Path, out: Path, *tiles: Path, extra: tuple[str, ...] = ()):
    return run_cli(
        "predict",
        *map(str, tiles),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--device",
        "cpu",
        *extra,
    )


def class_counts(path: Path) -> np.ndarray:
    """Pixels per class of a class map (no-data 255 left out), with numpy."""
    with rasterio.open(path) as ds:
        classes = ds.read(1)
    return np.bincount(classes[classes != 255].ravel(), minlength=len(NAMES))[: len(NAMES)]


# --- 5: a tile exactly one block (256 px) wide is complete on a rerun -------------------------


def test_256_px_wide_tile_is_skipped_on_rerun(checkpoint: Path, tmp_path: Path) -> None:
    tile = write_tile(tmp_path / "in" / "wide_naip.tif", 96, 256)
    out = tmp_path / "maps"
    first = predict(checkpoint, out, tile)
    assert first.returncode == 0, first.stderr
    maps = [out / "wide_naip_class.tif", out / "wide_naip_prob.tif"]
    with rasterio.open(maps[0]) as ds:  # the case: rasterio calls a 256 px wide COG untiled
        assert ds.width == 256 and not ds.profile.get("tiled")
    mtimes = [p.stat().st_mtime_ns for p in maps]

    second = predict(checkpoint, out, tile)
    assert second.returncode == 0, second.stderr
    assert "wide_naip.tif: skipped, its outputs are complete" in second.stderr, second.stderr
    assert "predicting it again" not in second.stderr
    assert [p.stat().st_mtime_ns for p in maps] == mtimes
    tiles = json.loads((out / "summary.json").read_text())["tiles"]
    assert [t["status"] for t in tiles] == ["skipped"]


# --- 6: hectares cover the projected tiles, and say which tiles have no area -----------------


def test_mixed_crs_job_counts_tiles_without_area_apart(checkpoint: Path, tmp_path: Path) -> None:
    utm = write_tile(tmp_path / "in" / "utm_naip.tif", 80, 96, UTM, 1.0, seed=1)
    geo = write_tile(tmp_path / "in" / "geo_naip.tif", 64, 72, "EPSG:4326", 1e-5, (-76.5, 38.8), 2)
    out = tmp_path / "maps"
    result = predict(checkpoint, out, utm, geo, extra=("--no-preview",))
    assert result.returncode == 0, result.stderr

    utm_counts = class_counts(out / "utm_naip_class.tif")
    geo_counts = class_counts(out / "geo_naip_class.tif")
    expected_ha = utm_counts * 1.0 / 10_000  # 1 m x 1 m pixels
    geo_pixels = int(geo_counts.sum())
    assert geo_pixels == 64 * 72  # the random image has no no-data pixel

    document = json.loads((out / "summary.json").read_text())
    np.testing.assert_allclose([c["hectares"] for c in document["classes"]], expected_ha)
    assert [c["pixels_without_area"] for c in document["classes"]] == geo_counts.tolist()
    area = document["area"]
    assert area["tiles_with_area"] == 1
    assert area["tiles_without_area"] == 1
    assert area["pixels_without_area"] == geo_pixels
    assert [Path(t).name for t in area["tiles"]] == ["geo_naip.tif"]

    rows = list(csv.DictReader((out / "classes.csv").read_text().splitlines()))
    np.testing.assert_allclose([float(r["hectares"]) for r in rows], expected_ha, atol=1e-4)
    assert [int(r["pixels_without_area"]) for r in rows] == geo_counts.tolist()
    assert {r["tiles_without_area"] for r in rows} == {"1"}

    last = [ln for ln in result.stderr.splitlines() if "2 tiles: 2 predicted" in ln]
    assert last, result.stderr
    assert f"1 tile ({geo_pixels:,} pixels) has no area" in last[-1], last[-1]
    water_ha = f"{NAMES[0]} {expected_ha[0]:,.1f} ha"
    assert water_ha in last[-1], last[-1]


@pytest.mark.parametrize("crs", ["EPSG:4326", None])
def test_job_without_projected_tiles_reports_no_hectares(
    checkpoint: Path, tmp_path: Path, crs: str | None
) -> None:
    corner = (-76.5, 38.8) if crs else (0.0, 0.0)
    pixel = 1e-5 if crs else 1.0
    geo = write_tile(tmp_path / "in" / "geo_naip.tif", 64, 64, crs, pixel, corner)
    out = tmp_path / "maps"
    result = predict(checkpoint, out, geo, extra=("--no-preview",))
    assert result.returncode == 0, result.stderr
    assert "0.0 ha" not in result.stderr and " ha " not in result.stderr  # no 'no ha'
    document = json.loads((out / "summary.json").read_text())
    assert {c["hectares"] for c in document["classes"]} == {None}
    shares = [f"{c['name']} {100 * c['fraction']:.1f} %" for c in document["classes"]]
    assert ", ".join(shares) in result.stderr  # the last line: each class's share alone
    rows = list(csv.DictReader((out / "classes.csv").read_text().splitlines()))
    assert {r["hectares"] for r in rows} == {""}
    assert "1 tile (4,096 pixels) has no area" in result.stderr


# --- 7: previews of thin tiles stay small ----------------------------------------------------


@pytest.mark.parametrize("shape", [(256, 1), (1, 256), (384, 16)])
def test_thin_tile_preview_is_at_most_2000_px(
    checkpoint: Path, tmp_path: Path, shape: tuple[int, int]
) -> None:
    height, width = shape
    tile = write_tile(tmp_path / "in" / "thin_naip.tif", height, width)
    out = tmp_path / "maps"
    result = predict(checkpoint, out, tile)
    assert result.returncode == 0, result.stderr
    with Image.open(out / "thin_naip_preview.png") as png:
        assert max(png.size) <= 2000, png.size


# --- 8: absurd --resolution is refused in one line -------------------------------------------


@pytest.mark.parametrize(
    ("resolution", "factor"),
    [("1e6", "shrinks it 64x"), ("0.1", "enlarges it 10x")],
)
def test_absurd_resolution_is_refused(
    checkpoint: Path, tmp_path: Path, resolution: str, factor: str
) -> None:
    tile = write_tile(tmp_path / "in" / "small_naip.tif", 64, 64)
    out = tmp_path / "maps"
    result = predict(checkpoint, out, tile, extra=("--resolution", resolution))
    assert_one_line_error(result, str(tile), factor, "--resolution")
    assert not list(out.glob("*_class.tif")) if out.exists() else True


@pytest.mark.parametrize(
    ("size", "pixel", "metres", "refused"),
    [
        (256, 0.6, 1.0, False),  # 0.6 m NAIP at 1 m: 154 px, under a patch, but only 1.7x
        (2000, 0.1, 1.0, False),  # 10x smaller, still 200 px: more than a 64 px patch
        (256, 0.1, 1.0, True),  # 10x smaller, 26 px: under a patch
        (64, 1.0, 0.125, False),  # 8x larger: the limit
        (64, 1.0, 0.1, True),  # 10x larger
    ],
)
def test_resolution_limits(
    tmp_path: Path, size: int, pixel: float, metres: float, refused: bool
) -> None:
    from landcover.data.resolution import resampled_grid, silly_resampling

    tile = write_tile(tmp_path / "t_naip.tif", size, size, pixel=pixel)
    with rasterio.open(tile) as ds:
        grid = resampled_grid(ds, metres)
        assert grid is not None
        assert (silly_resampling(ds, grid, patch=64) is not None) == refused


# --- 9: all-no-data input is named ------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two image/label pairs whose images are all no-data (every band 0, nodata 0)."""
    folder = tmp_path_factory.mktemp("empty") / "data"
    for i in range(2):
        image = write_tile(
            folder / f"e{i}_naip.tif", 64, 64, empty=True, corner=(400000 + 100 * i, 4300000)
        )
        write_label(folder / f"e{i}_lc.tif", image, seed=i)
    return folder


def warnings_naming(text: str, path: Path, words: str) -> list[str]:
    return [ln for ln in text.splitlines() if str(path) in ln and words in ln]


def test_all_nodata_predict_warns_naming_the_file(
    checkpoint: Path, empty_pairs: Path, tmp_path: Path
) -> None:
    image = empty_pairs / "e0_naip.tif"
    result = predict(checkpoint, tmp_path / "maps", image, extra=("--no-preview",))
    assert result.returncode == 0, result.stderr
    assert warnings_naming(result.stderr, image, "every pixel is no-data"), result.stderr


def test_all_nodata_evaluate_warns_naming_the_file(
    checkpoint: Path, empty_pairs: Path, tmp_path: Path
) -> None:
    result = run_cli(
        "evaluate",
        "--checkpoint",
        str(checkpoint),
        "--data",
        str(empty_pairs),
        "--out",
        str(tmp_path / "eval"),
        "--device",
        "cpu",
    )
    # nothing to score is an error (issue 42, item 8), after a warning naming each tile
    assert result.returncode != 0 and "error: " in result.stderr, result.stderr
    assert "no pixel to score" in result.stderr
    for i in range(2):
        image = empty_pairs / f"e{i}_naip.tif"
        assert warnings_naming(result.stderr, image, "every image pixel is no-data"), result.stderr


def test_all_nodata_train_error_names_the_file(
    empty_pairs: Path, tiny_config: Path, tmp_path: Path
) -> None:
    result = run_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        str(empty_pairs),
        "--out",
        str(tmp_path / "run"),
        "--epochs",
        "1",
        "--workers",
        "1",
    )
    line = assert_one_line_error(result, "no-data")
    assert "_naip.tif" in line and str(empty_pairs) in line, line


def test_data_check_blames_the_all_nodata_image(empty_pairs: Path) -> None:
    result = run_cli("data", "check", str(empty_pairs))
    text = result.stdout + result.stderr
    for i in range(2):
        image, label = empty_pairs / f"e{i}_naip.tif", empty_pairs / f"e{i}_lc.tif"
        assert warnings_naming(text, image, "all no-data"), text
        assert not warnings_naming(text, label, "no-data"), text
