"""``landcover data prepare``: tiles of a large raster with labels on each tile's exact grid."""

import csv
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.enums import Resampling
from rasterio.transform import Affine
from rasterio.warp import reproject, transform
from rasterio.windows import Window

from landcover.classes import IGNORE_INDEX, resolve_mapping
from landcover.data.pairs import TilePair
from landcover.data.prepare import prepare_tiles
from landcover.data.raster import read_pair
from landcover.data.tilefiles import tile_windows
from landcover.errors import DataError
from landcover.synthetic.synthetic import synthesize_scene

from conftest import REPO, assert_one_line_error, run_cli, write_with_alpha_band

REALDATA = REPO.parent / "shared" / "realdata"
ALBERS_LABEL = REALDATA / "Baywide_7class_20132014_E1300000_N1770000.tif"
UTM17 = "EPSG:26917"  # West Virginia
UTM18 = "EPSG:26918"
TABLE = resolve_mapping("chesapeake7").lookup_table()


def _write_image(path: Path, pixels: np.ndarray, crs: str, transform_: Affine) -> Path:
    profile = {
        "driver": "GTiff",
        "count": pixels.shape[0],
        "height": pixels.shape[1],
        "width": pixels.shape[2],
        "dtype": "uint8",
        "crs": crs,
        "transform": transform_,
        "nodata": 0,
        "tiled": True,
        "blockxsize": 512,
        "blockysize": 512,
        "compress": "deflate",
        "photometric": "RGB",
    }
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(pixels)
    return path


def _write_label(path: Path, codes: np.ndarray, crs: str, transform_: Affine) -> Path:
    profile = {
        "driver": "GTiff",
        "count": 1,
        "height": codes.shape[0],
        "width": codes.shape[1],
        "dtype": "uint8",
        "crs": crs,
        "transform": transform_,
        "nodata": 15,
    }
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(codes[None])
    return path


def _reference(label: Path, crs: str, grid: Affine, shape: tuple[int, int]) -> np.ndarray:
    """A direct nearest-neighbour reproject of a whole label file onto a grid."""
    out = np.full(shape, 15, dtype=np.uint8)
    with rasterio.open(label) as lab:
        reproject(
            rasterio.band(lab, 1),
            out,
            dst_transform=grid,
            dst_crs=crs,
            dst_nodata=15,
            resampling=Resampling.nearest,
        )
    return out


def _manifest(out: Path) -> list[dict[str, str]]:
    with (out / "manifest.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def naip_over_albers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic 3000 x 2500 px UTM 17N image straddling the west edge of the real labels."""
    if not REALDATA.is_dir():
        pytest.skip(f"the real sample data folder {REALDATA} does not exist")
    with rasterio.open(ALBERS_LABEL) as lab:
        valid = lab.read(1, out_shape=(100, 100)) != 15  # 100 m cells
        row = int(valid.sum(axis=1).argmax())  # the row of cells with the most labels
        col = int(np.flatnonzero(valid[row])[0])  # its westmost labelled cell
        x, y = lab.xy(row * 100 + 50, col * 100 + 50)
        xs, ys = transform(lab.crs, UTM17, [x], [y])
    # The image's west third lies west of the labelled area.
    left, top = round(xs[0]) - 1000, round(ys[0]) + 1250
    pixels, _ = synthesize_scene(2500, 3000, np.random.default_rng(11))
    path = tmp_path_factory.mktemp("naip") / "m_3808053_ne_17_1_20140701.tif"
    return _write_image(path, pixels, UTM17, Affine(1.0, 0.0, left, 0.0, -1.0, top))


def test_prepare_with_the_real_albers_labels(naip_over_albers: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    result = run_cli(
        "data",
        "prepare",
        "--images",
        str(naip_over_albers),
        "--labels",
        str(ALBERS_LABEL),
        "--out",
        str(out),
        "--tile-size",
        "1024",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "wrote" in result.stdout and "dropped" in result.stdout

    stem = naip_over_albers.stem
    written, dropped = [], []
    with rasterio.open(naip_over_albers) as src:
        for r, c, window in tile_windows(src.width, src.height, 1024):
            name = f"{stem}_r{r:03d}_c{c:03d}"
            grid = src.window_transform(window)
            expected = _reference(ALBERS_LABEL, UTM17, grid, (window.height, window.width))
            pixels = src.read(window=window)
            # Labelled pixels, not counting those where the image has no data.
            valid = (TABLE[expected] != IGNORE_INDEX) & (pixels != 0).any(axis=0)
            image_path, label_path = out / f"{name}_naip.tif", out / f"{name}_lc.tif"
            if valid.mean() < 0.5:
                dropped.append(name)
                assert not image_path.exists() and not label_path.exists()
                continue
            written.append(name)
            with rasterio.open(image_path) as img, rasterio.open(label_path) as lab:
                # The label lies exactly on its image's grid, which is the source window's grid.
                assert lab.crs == img.crs == src.crs
                assert lab.transform == img.transform == grid
                assert (lab.width, lab.height) == (img.width, img.height)
                assert (img.width, img.height) == (window.width, window.height)
                assert lab.nodata == 15 and lab.block_shapes == [(256, 256)]
                assert lab.compression.value == "DEFLATE"
                np.testing.assert_array_equal(lab.read(1), expected)
                np.testing.assert_array_equal(img.read(), pixels)
    assert written and dropped, (written, dropped)
    assert len(written) + len(dropped) == 9
    rows = _manifest(out)
    assert [row["image"] for row in rows] == [f"{n}_naip.tif" for n in written]
    assert [row["label"] for row in rows] == [f"{n}_lc.tif" for n in written]
    assert all(row["split"] == "" for row in rows)
    assert not list(out.glob(".*.tmp"))
    assert f"wrote {len(written)} tile pairs" in result.stdout
    assert f"dropped {len(dropped)} of 9 tiles" in result.stdout


def test_several_label_rasters_fill_in_turn(tmp_path: Path) -> None:
    height, width = 256, 384
    pixels, _ = synthesize_scene(height, width, np.random.default_rng(2))
    origin = (400_000.0, 4_200_000.0)
    image = _write_image(
        tmp_path / "big.tif", pixels, UTM18, Affine(1.0, 0.0, origin[0], 0.0, -1.0, origin[1])
    )
    rng = np.random.default_rng(3)
    # West: a 1 m grid shifted by half a pixel, x 0..200 m, with a hole of no-data.
    west_codes = np.kron(rng.integers(1, 7, (53, 41)), np.ones((5, 5))).astype(np.uint8)[:260, :200]
    west_codes[100:150, 150:200] = 15
    west = _write_label(
        tmp_path / "west_lc.tif",
        west_codes,
        UTM18,
        Affine(1.0, 0.0, origin[0] - 0.5, 0.0, -1.0, origin[1] + 0.5),
    )
    # East: a 2 m grid, x 140..300 m, overlapping the west one and filling its hole.
    east_codes = np.kron(rng.integers(1, 7, (26, 16)), np.ones((5, 5))).astype(np.uint8)[:130, :80]
    east = _write_label(
        tmp_path / "east_lc.tif",
        east_codes,
        UTM18,
        Affine(2.0, 0.0, origin[0] + 140, 0.0, -2.0, origin[1]),
    )
    out = tmp_path / "tiles"
    summary = prepare_tiles(
        [str(image)],
        [str(west), str(east)],
        out,
        resolve_mapping("chesapeake7"),
        tile_size=128,
        min_valid=0.5,
    )
    names = [p.name for p, _ in summary.written]
    assert names == [f"big_r{r:03d}_c{c:03d}_naip.tif" for r in (0, 1) for c in (0, 1)]
    assert summary.dropped == ["big_r000_c002", "big_r001_c002"]  # x 256..384: 34 % labelled
    with rasterio.open(image) as src:
        for (_, label_path), (_, _, window) in zip(
            summary.written, [w for w in tile_windows(width, height, 128) if w[1] < 2], strict=True
        ):
            grid = src.window_transform(window)
            shape = (window.height, window.width)
            first = _reference(west, UTM18, grid, shape)
            second = _reference(east, UTM18, grid, shape)
            expected = np.where(first != 15, first, second)
            with rasterio.open(label_path) as lab:
                assert lab.transform == grid and lab.crs == src.crs
                np.testing.assert_array_equal(lab.read(1), expected)
    hole = np.zeros((height, width), dtype=bool)
    hole[100:150, 150:200] = True
    with rasterio.open(summary.written[1][1]) as lab:  # r0 c1 holds part of the hole, filled
        assert (lab.read(1)[100:128, 22:72] != 15).all()
    assert [row["image"] for row in _manifest(out)] == names


def test_image_without_overlapping_labels_writes_nothing(tmp_path: Path) -> None:
    pixels = np.full((4, 64, 64), 90, dtype=np.uint8)
    image = _write_image(
        tmp_path / "lonely.tif", pixels, UTM18, Affine(1.0, 0.0, 500_000, 0.0, -1.0, 4_000_000)
    )
    label = _write_label(
        tmp_path / "far_lc.tif",
        np.ones((64, 64), np.uint8),
        UTM18,
        Affine(1.0, 0.0, 600_000, 0.0, -1.0, 4_000_000),
    )
    out = tmp_path / "tiles"
    with pytest.raises(DataError, match="overlaps it"):
        prepare_tiles([str(image)], [str(label)], out, resolve_mapping("chesapeake7"))
    assert not out.exists()
    result = run_cli(
        "data", "prepare", "--images", str(image), "--labels", str(label), "--out", str(out)
    )
    assert_one_line_error(result, str(image), "none of the 1 label raster(s) overlaps it")
    assert not out.exists()  # the command's preflight made it; an empty one is taken back
    (out / "kept").mkdir(parents=True)  # a folder that was there stays
    result = run_cli(
        "data", "prepare", "--images", str(image), "--labels", str(label), "--out", str(out)
    )
    assert result.returncode == 2 and (out / "kept").is_dir()


def test_an_image_with_other_bands_than_asked_is_refused_and_a_rerun_cleans_up(
    tmp_path: Path,
) -> None:
    """A 3-band image (the model expects 4 by default, as data check and train do) is refused
    before any tile is written; --bands 3 takes it."""
    grid = Affine(1.0, 0.0, 500_000, 0.0, -1.0, 4_000_000)
    image = _write_image(tmp_path / "rgb.tif", np.full((3, 64, 64), 90, np.uint8), UTM18, grid)
    label = _write_label(tmp_path / "rgb_lc.tif", np.full((64, 64), 2, np.uint8), UTM18, grid)
    out = tmp_path / "tiles"
    args = ("data", "prepare", "--images", str(image), "--labels", str(label), "--out", str(out))
    result = run_cli(*args, "--tile-size", "32")
    assert_one_line_error(result, str(image), "has 3 bands, expected 4")
    assert not list(out.glob("*.tif"))
    stale = out / ".rgb_r000_c000_naip.tif.k1ll3d.tmp"  # a killed run's half-written tile
    out.mkdir(exist_ok=True)
    stale.write_bytes(b"II*\x00")
    result = run_cli(*args, "--tile-size", "32", "--bands", "3")
    assert result.returncode == 0, result.stderr
    assert not stale.exists()
    written = sorted(out.glob("*_naip.tif"))
    assert len(written) == 4
    with rasterio.open(written[0]) as ds:
        assert ds.count == 3


def test_unknown_label_codes_name_the_label_file(tmp_path: Path) -> None:
    pixels = np.full((4, 64, 64), 90, dtype=np.uint8)
    grid = Affine(1.0, 0.0, 500_000, 0.0, -1.0, 4_000_000)
    image = _write_image(tmp_path / "img.tif", pixels, UTM18, grid)
    codes = np.full((64, 64), 2, np.uint8)
    codes[0, 0] = 42
    label = _write_label(tmp_path / "odd_lc.tif", codes, UTM18, grid)
    with pytest.raises(DataError, match=r"label codes \[42\]") as info:
        prepare_tiles([str(image)], [str(label)], tmp_path / "o", resolve_mapping("cvpr4"))
    assert str(info.value).startswith(str(label))


def test_tile_windows_cover_the_raster() -> None:
    windows = list(tile_windows(300, 200, 128))
    assert [(r, c) for r, c, _ in windows] == [(r, c) for r in range(2) for c in range(3)]
    assert windows[-1][2] == Window(256, 128, 44, 72)
    assert sum(w.width * w.height for _, _, w in windows) == 300 * 200


def test_image_mask_and_nodata_follow_the_tiles(tmp_path: Path) -> None:
    """A source's internal mask travels with its tiles; its alpha-tagged NIR zeros stay data."""
    pixels = np.full((4, 128, 128), 90, dtype=np.uint8)
    pixels[3, 0:20, 0:40] = 0  # NIR = 0 (band 4 tagged alpha): data
    pixels[:, 100:128, 0:10] = 0  # every band = nodata 0: no data
    mask = np.full((128, 128), 255, dtype=np.uint8)
    mask[10:30, 70:100] = 0  # the internal mask: no data
    mask[64:128, 64:128] = 0  # the whole bottom-right tile: dropped
    grid = Affine(1.0, 0.0, 500_000, 0.0, -1.0, 4_000_000)
    profile = {
        "driver": "GTiff",
        "count": 4,
        "height": 128,
        "width": 128,
        "dtype": "uint8",
        "crs": UTM18,
        "transform": grid,
        "nodata": 0,
        "photometric": "RGB",
        "alpha": "YES",
    }
    image = tmp_path / "img.tif"
    with (
        rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True),
        rasterio.open(image, "w", **profile) as ds,
    ):
        ds.write(pixels)
        ds.write_mask(mask)
    label = _write_label(tmp_path / "img_lc.tif", np.full((128, 128), 2, np.uint8), UTM18, grid)
    out = tmp_path / "tiles"
    mapping = resolve_mapping("chesapeake7")
    summary = prepare_tiles([str(image)], [str(label)], out, mapping, tile_size=64)
    assert summary.dropped == ["img_r001_c001"]
    nodata = (mask == 0) | (pixels == 0).all(axis=0)
    assert len(summary.written) == 3
    for image_path, label_path in summary.written:
        r, c = int(image_path.name[5:8]), int(image_path.name[10:13])
        rows, cols = slice(64 * r, 64 * r + 64), slice(64 * c, 64 * c + 64)
        tile = read_pair(TilePair(image_path.name, str(image_path), str(label_path)), mapping, 4)
        want = np.where(nodata[rows, cols], IGNORE_INDEX, 1)  # code 2 is tree_canopy (1)
        np.testing.assert_array_equal(tile.label, want)


def test_an_extra_alpha_band_becomes_the_tiles_mask(tmp_path: Path) -> None:
    """A 5-band source (RGB, NIR, alpha: ``gdalwarp -dstalpha``) gives 4-band tiles whose
    internal mask is the alpha band; a tile with no alpha left is dropped."""
    pixels = np.full((4, 128, 128), 90, dtype=np.uint8)
    pixels[3, 0:20, 0:40] = 0  # NIR = 0: data
    alpha = np.full((128, 128), 255, dtype=np.uint8)
    alpha[10:30, 70:100] = 0
    alpha[64:128, 0:64] = 0  # the whole bottom-left tile: dropped
    grid = Affine(1.0, 0.0, 500_000, 0.0, -1.0, 4_000_000)
    image = write_with_alpha_band(tmp_path / "img.tif", pixels, alpha, UTM18, grid)
    label = _write_label(tmp_path / "img_lc.tif", np.full((128, 128), 2, np.uint8), UTM18, grid)
    out = tmp_path / "tiles"
    mapping = resolve_mapping("chesapeake7")
    summary = prepare_tiles([str(image)], [str(label)], out, mapping, tile_size=64, bands=4)
    assert summary.dropped == ["img_r001_c000"]
    assert len(summary.written) == 3
    for image_path, label_path in summary.written:
        r, c = int(image_path.name[5:8]), int(image_path.name[10:13])
        rows, cols = slice(64 * r, 64 * r + 64), slice(64 * c, 64 * c + 64)
        with rasterio.open(image_path) as ds:
            assert ds.count == 4
            np.testing.assert_array_equal(ds.read(), pixels[:, rows, cols])
            np.testing.assert_array_equal(ds.read_masks(1) == 0, alpha[rows, cols] == 0)
        tile = read_pair(TilePair(image_path.name, str(image_path), str(label_path)), mapping, 4)
        want = np.where(alpha[rows, cols] == 0, IGNORE_INDEX, 1)  # code 2 is tree_canopy (1)
        np.testing.assert_array_equal(tile.label, want)
