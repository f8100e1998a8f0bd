"""Resolution: a 1 m model over 0.6 m imagery (``--resolution``, ``data.resolution``).

One synthetic scene of 240 x 240 m is written at 1 m (the generator's pixel size) and at
0.6 m and 2.5 m pixels over the same ground, resampled here with plain numpy/scipy
(bilinear imagery, nearest labels), independently of landcover's own resampling. The model is
the tiny one of ``conftest.py``, trained on 1 m tiles.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import torch
import yaml
from affine import Affine
from rasterio.enums import ColorInterp, Resampling
from scipy.ndimage import map_coordinates

from landcover.classes import resolve_mapping
from landcover.data.bandview import image_view
from landcover.data.pairs import discover_pairs
from landcover.data.raster import nodata_mask
from landcover.data.resolution import on_grid
from landcover.feed.memory import load_tiles
from landcover.synthetic.synthetic import synthesize_scene, write_pair

from conftest import TINY_CONFIG, run_cli, train_args, write_with_alpha_band

GROUND_M = 240
"""Side of the scene in metres."""
ORIGIN = (400_000.0, 4_300_000.0)
CRS = "EPSG:26918"


def nearest_index(n_out: int, size_out: float, size_in: float) -> np.ndarray:
    """For each output pixel along an axis, the input pixel whose cell holds its centre."""
    return np.floor((np.arange(n_out) + 0.5) * size_out / size_in).astype(int)


def resample_scene(
    image: np.ndarray, label: np.ndarray, size_m: float
) -> tuple[np.ndarray, np.ndarray]:
    """A 1 m scene on a grid of ``size_m`` pixels over the same ground.

    Imagery by bilinear interpolation at the new pixel centres (scipy), labels and the image's
    no-data by nearest (the 1 m cell holding each centre).
    """
    n = round(GROUND_M / size_m)
    centres = (np.arange(n) + 0.5) * size_m - 0.5  # in 1 m pixel coordinates
    rows, cols = np.meshgrid(centres, centres, indexing="ij")
    out = np.stack(
        [
            map_coordinates(band.astype(np.float32), [rows, cols], order=1, mode="nearest")
            for band in image
        ]
    )
    out = np.clip(np.rint(out), 1, 255).astype(np.uint8)
    idx = nearest_index(n, size_m, 1.0)
    nodata = np.all(image == 0, axis=0)[np.ix_(idx, idx)]
    out[:, nodata] = 0
    return out, label[np.ix_(idx, idx)].copy()


def write_at(folder: Path, name: str, image: np.ndarray, label: np.ndarray, size_m: float) -> Path:
    """Writes an image/label pair with ``size_m`` pixels at the scene's origin."""
    folder.mkdir(parents=True, exist_ok=True)
    common = {
        "driver": "GTiff",
        "height": label.shape[0],
        "width": label.shape[1],
        "dtype": "uint8",
        "crs": CRS,
        "transform": Affine(size_m, 0.0, ORIGIN[0], 0.0, -size_m, ORIGIN[1]),
    }
    image_path = folder / f"{name}_naip.tif"
    with rasterio.open(image_path, "w", **common, count=4, nodata=0) as dst:
        dst.write(image)
    with rasterio.open(folder / f"{name}_lc.tif", "w", **common, count=1, nodata=15) as dst:
        dst.write(label[None])
    return image_path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The scene at 1 m, 0.6 m and 2.5 m, each pair in its own folder."""
    root = tmp_path_factory.mktemp("resolution")
    image, label = synthesize_scene(GROUND_M, GROUND_M, np.random.default_rng([2024, 6]))
    paths = {"1": write_pair(root / "m1", "scene1m", image, label, ORIGIN, CRS)[0]}
    for key, size in (("0.6", 0.6), ("2.5", 2.5)):
        img, lab = resample_scene(image, label, size)
        paths[key] = write_at(root / f"m{key}", f"scene{key.replace('.', '')}m", img, lab, size)
    return paths


def read_map(path: Path) -> tuple[np.ndarray, dict]:
    """A map's first band and its grid and tags."""
    with rasterio.open(path) as ds:
        return ds.read(1), {
            "crs": ds.crs,
            "transform": ds.transform,
            "shape": (ds.height, ds.width),
            "count": ds.count,
            "tags": ds.tags(),
        }


def grid_of(path: Path) -> dict:
    with rasterio.open(path) as ds:
        return {"crs": ds.crs, "transform": ds.transform, "shape": (ds.height, ds.width)}


def agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Share of pixels (valid in both) where two class maps agree."""
    valid = (a != 255) & (b != 255)
    return float((a[valid] == b[valid]).mean())


def predict(checkpoint: Path, out: Path, *tiles: Path, extra: tuple[str, ...] = ()) -> str:
    result = run_cli(
        "predict",
        *map(str, tiles),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--no-preview",
        *extra,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def checkpoint(
    tiny_data: Path, tiny_config: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A tiny model trained on the 1 m tiny data (2 short epochs: cheaper than conftest's)."""
    run = tmp_path_factory.mktemp("resolution-run") / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run),
        "--epochs",
        "2",
        "--samples-per-epoch",
        "128",
        "--workers",
        "1",
    )
    assert result.returncode == 0, result.stderr
    return run / "checkpoints" / "last.pt"


def test_checkpoint_records_training_pixel_size(checkpoint: Path) -> None:
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    assert state["pixel_size_m"] == pytest.approx(1.0)


def test_train_resolution_agrees_with_1m_map(
    checkpoint: Path, scene: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    log = predict(checkpoint, out, scene["1"], scene["0.6"])
    assert "off the" not in log  # 0.6 m is less than 2x off 1 m: no warning
    map_1m, _ = read_map(out / "scene1m_naip_class.tif")
    train, info = read_map(out / "scene06m_naip_class.tif")
    expected_grid = grid_of(scene["0.6"])
    for name in ("scene06m_naip_class.tif", "scene06m_naip_prob.tif"):
        assert grid_of(out / name) == expected_grid, name
    assert info["tags"]["PREDICTED_PIXEL_SIZE_M"] == "1"
    idx = nearest_index(400, 0.6, 1.0)
    reference = map_1m[np.ix_(idx, idx)]  # the 1 m map on the 0.6 m grid, nearest

    # same folder, another --resolution: the fingerprint differs, so the tile is redone
    log = predict(checkpoint, out, scene["0.6"], extra=("--resolution", "native"))
    assert "predicting it again" in log and "1 predicted, 0 skipped" in log, log
    native, info = read_map(out / "scene06m_naip_class.tif")
    assert "PREDICTED_PIXEL_SIZE_M" not in info["tags"]
    assert grid_of(out / "scene06m_naip_class.tif") == expected_grid
    assert grid_of(out / "scene06m_naip_prob.tif") == expected_grid
    summary = json.loads((out / "summary.json").read_text())
    assert summary["job"]["options"]["resolution"] == "native"

    train_agreement, native_agreement = agreement(train, reference), agreement(native, reference)
    print(
        f"agreement with the 1 m map on the 0.6 m grid: --resolution train "
        f"{train_agreement:.3f}, --resolution native {native_agreement:.3f}"
    )
    assert train_agreement > 0.97
    assert 1 - native_agreement > 3 * (1 - train_agreement)  # 3x the disagreement, at least


def test_evaluate_resolution(checkpoint: Path, scene: dict[str, Path], tmp_path: Path) -> None:
    data = tmp_path / "pairs"
    data.mkdir()
    for key in ("1", "0.6"):
        for path in scene[key].parent.iterdir():
            (data / path.name).symlink_to(path)
    labelled = 0
    for name in ("scene1m_lc.tif", "scene06m_lc.tif"):
        with rasterio.open(data / name) as ds:
            labelled += int((ds.read(1) != 15).sum())
    accuracy = {}
    for choice in ("train", "native"):
        result = run_cli(
            "evaluate",
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(data),
            "--out",
            str(tmp_path / choice),
            "--device",
            "cpu",
            "--resolution",
            choice,
        )
        assert result.returncode == 0, result.stderr
        metrics = json.loads((tmp_path / choice / "metrics.json").read_text())
        assert metrics["resolution"] == (1.0 if choice == "train" else "native")
        # scored on each image's grid: every labelled pixel of both tiles counts
        assert metrics["pixels"] == labelled
        accuracy[choice] = {t["tile"]: t["accuracy"] for t in metrics["tiles"]}
    print(
        f"evaluate accuracy: 1 m tile {accuracy['train']['scene1m']:.3f}; 0.6 m tile "
        f"--resolution train {accuracy['train']['scene06m']:.3f}, "
        f"native {accuracy['native']['scene06m']:.3f}"
    )
    # the 1 m tile is predicted as it is either way; at the training pixel size the 0.6 m
    # tile of the same ground scores what the 1 m tile scores
    assert accuracy["native"]["scene1m"] == accuracy["train"]["scene1m"]
    assert abs(accuracy["train"]["scene06m"] - accuracy["train"]["scene1m"]) < 0.01


def test_far_off_tile_warns_once(checkpoint: Path, scene: dict[str, Path], tmp_path: Path) -> None:
    log = predict(checkpoint, tmp_path / "maps", scene["2.5"])
    warnings = [line for line in log.splitlines() if "off the" in line]
    assert len(warnings) == 1, log
    assert str(scene["2.5"]) in warnings[0]
    assert re.search(r"2\.5 m pixels, more than 2x off the 1 m", warnings[0]), warnings[0]
    assert grid_of(tmp_path / "maps" / "scene25m_naip_class.tif") == grid_of(scene["2.5"])


def _write_4band(path: Path, image: np.ndarray, transform: Affine, **extra: Any) -> None:
    profile = {"driver": "GTiff", "height": image.shape[1], "width": image.shape[2]}
    with rasterio.open(
        path, "w", **profile, count=4, dtype="uint8", crs=CRS, transform=transform, **extra
    ) as dst:
        dst.write(image)


@pytest.mark.parametrize("nodata", [None, 0, 255])
def test_a_nir_band_tagged_alpha_stays_data_on_another_grid(tmp_path: Path, nodata) -> None:
    """rasterio tags a 4-band uint8 GeoTIFF's fourth band alpha, as many NAIP files are; GDAL's
    warper took it for the mask, so resampled pixels with NIR = 0 (deep water) became no-data.
    Read at twice the pixels by nearest, each pixel must be its 2 x 2 block, unchanged."""
    rng = np.random.default_rng(7)
    image = rng.integers(1, 250, size=(4, 32, 32), dtype=np.uint8)
    image[3, 4:12, 4:12] = 0  # NIR = 0 beside data in R, G, B
    image[3, 20:24, :] = rng.integers(0, 3, size=(4, 32))  # NIR about 0: no partial weights
    path = tmp_path / "alpha.tif"
    _write_4band(path, image, Affine(1.0, 0, ORIGIN[0], 0, -1.0, ORIGIN[1]), nodata=nodata)
    fine = (Affine(0.5, 0, ORIGIN[0], 0, -0.5, ORIGIN[1]), 64, 64)
    with rasterio.open(path) as ds:
        assert ds.colorinterp[3] == ColorInterp.alpha  # the case under test
        with on_grid(ds, fine, Resampling.nearest) as vrt:
            read = vrt.read()
            nodata_read = nodata_mask(vrt)
    expected = image.repeat(2, axis=1).repeat(2, axis=2)
    if nodata == 0:  # GDAL may move a valid band value equal to nodata off it (0 -> 1)
        zero = expected == 0
        assert np.all(read[zero] <= 1)
        np.testing.assert_array_equal(read[~zero], expected[~zero])
    else:
        np.testing.assert_array_equal(read, expected)
    assert not nodata_read.any()


def test_an_internal_mask_is_no_data_on_another_grid(tmp_path: Path) -> None:
    """A file with an internal mask and no nodata value (as JPEG-compressed NAIP has): its
    masked pixels are no-data when read on another grid, not zeros counted as data."""
    rng = np.random.default_rng(8)
    image = rng.integers(1, 250, size=(4, 32, 32), dtype=np.uint8)
    valid = np.ones((32, 32), dtype=bool)
    valid[:, 20:] = False
    path = tmp_path / "masked.tif"
    with (
        rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True),
        rasterio.open(
            path,
            "w",
            driver="GTiff",
            height=32,
            width=32,
            count=4,
            dtype="uint8",
            crs=CRS,
            transform=Affine(1.0, 0, ORIGIN[0], 0, -1.0, ORIGIN[1]),
            photometric="MINISBLACK",
        ) as dst,
    ):
        dst.write(image)
        dst.write_mask(valid.astype(np.uint8) * 255)
    fine = (Affine(0.5, 0, ORIGIN[0], 0, -0.5, ORIGIN[1]), 64, 64)
    with rasterio.open(path) as ds, on_grid(ds, fine, Resampling.nearest) as vrt:
        read = vrt.read()
        nodata_read = nodata_mask(vrt)
    expected_nodata = ~valid.repeat(2, axis=0).repeat(2, axis=1)
    np.testing.assert_array_equal(nodata_read, expected_nodata)
    expected = image.repeat(2, axis=1).repeat(2, axis=2)
    np.testing.assert_array_equal(read[:, ~expected_nodata], expected[:, ~expected_nodata])


def test_predict_keeps_nir_zero_pixels_of_a_resampled_tile(
    checkpoint: Path, scene: dict[str, Path], tmp_path: Path
) -> None:
    """The 0.6 m tile (mapped at the model's 1 m) with a block of NIR = 0: every pixel with
    data in the input has a class in the map."""
    with rasterio.open(scene["0.6"]) as ds:
        image, transform = ds.read(), ds.transform
    image[3, 100:160, 100:160] = 0
    tile = tmp_path / "tiles" / "water_naip.tif"
    tile.parent.mkdir()
    _write_4band(tile, image, transform, nodata=0)
    predict(checkpoint, tmp_path / "maps", tile)
    classes, _ = read_map(tmp_path / "maps" / "water_naip_class.tif")
    has_data = np.any(image != 0, axis=0)
    assert has_data[100:160, 100:160].all()
    assert np.all(classes[has_data] != 255), int(np.sum(classes[has_data] == 255))


def test_an_extra_alpha_band_is_the_mask_on_another_grid(tmp_path: Path) -> None:
    """A 5th band tagged alpha is the image's mask: seen through ``image_view`` on a grid of
    twice the pixels (nearest), the 4 bands are each pixel's 2 x 2 block and alpha = 0 is
    no-data, while NIR = 0 stays data."""
    rng = np.random.default_rng(9)
    image = rng.integers(1, 250, size=(4, 32, 32), dtype=np.uint8)
    image[3, 4:12, 4:12] = 0  # NIR = 0: data
    alpha = np.full((32, 32), 255, dtype=np.uint8)
    alpha[:, 20:] = 0
    path = tmp_path / "five.tif"
    write_with_alpha_band(path, image, alpha, CRS, Affine(1.0, 0, ORIGIN[0], 0, -1.0, ORIGIN[1]))
    fine = (Affine(0.5, 0, ORIGIN[0], 0, -0.5, ORIGIN[1]), 64, 64)
    with (
        rasterio.open(path) as ds,
        image_view(ds, 4) as view,
        on_grid(view, fine, Resampling.nearest) as vrt,
    ):
        assert vrt.count == 4
        read = vrt.read()
        nodata_read = nodata_mask(vrt)
    expected_nodata = (alpha == 0).repeat(2, axis=0).repeat(2, axis=1)
    np.testing.assert_array_equal(nodata_read, expected_nodata)
    expected = image.repeat(2, axis=1).repeat(2, axis=2)
    np.testing.assert_array_equal(read[:, ~expected_nodata], expected[:, ~expected_nodata])


def test_predict_reads_a_resampled_tiles_extra_alpha_band_as_its_mask(
    checkpoint: Path, scene: dict[str, Path], tmp_path: Path
) -> None:
    """The 0.6 m tile (mapped at the model's 1 m) with a 5th band tagged alpha, 0 over a block:
    that block is no-data in the map, and the rest (NIR = 0 included) has classes."""
    with rasterio.open(scene["0.6"]) as ds:
        image, transform = ds.read(), ds.transform
    height, width = image.shape[1:]
    image[3, 20:80, 20:80] = 0  # NIR = 0: data
    alpha = np.full((height, width), 255, dtype=np.uint8)
    alpha[100:200, 150:300] = 0
    tile = tmp_path / "tiles" / "masked_naip.tif"
    tile.parent.mkdir()
    write_with_alpha_band(tile, image, alpha, CRS, transform)
    predict(checkpoint, tmp_path / "maps", tile)
    classes, info = read_map(tmp_path / "maps" / "masked_naip_class.tif")
    assert info["shape"] == (height, width)
    assert np.all(classes[105:195, 155:295] == 255)  # inside the block, clear of its edges
    keep = np.ones((height, width), dtype=bool)
    keep[95:205, 145:305] = False  # clear of the block's resampled edges
    assert np.all(classes[keep] != 255), int(np.sum(classes[keep] == 255))


def test_old_checkpoint_predicts_natively(
    checkpoint: Path, scene: dict[str, Path], tmp_path: Path
) -> None:
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    del state["pixel_size_m"]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    log = predict(old, tmp_path / "maps", scene["2.5"])
    assert log.count("records no training pixel size") == 1, log
    assert "off the" not in log  # no training pixel size to be off
    _, info = read_map(tmp_path / "maps" / "scene25m_naip_class.tif")
    assert "PREDICTED_PIXEL_SIZE_M" not in info["tags"]
    assert grid_of(tmp_path / "maps" / "scene25m_naip_class.tif") == grid_of(scene["2.5"])


def test_bad_resolution_is_a_usage_error(
    checkpoint: Path, scene: dict[str, Path], tmp_path: Path
) -> None:
    result = run_cli(
        "predict",
        str(scene["1"]),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(tmp_path),
        "--resolution",
        "fine",
    )
    assert result.returncode != 0
    assert "--resolution" in result.stderr and "Traceback" not in result.stderr


def test_training_tiles_resampled_on_load(scene: dict[str, Path]) -> None:
    pairs = [
        pair
        for key in ("1", "0.6")
        for pair in discover_pairs(str(scene[key].parent), "_naip.tif", "_lc.tif")
    ]
    mapping = resolve_mapping("chesapeake7")
    tiles, _ = load_tiles(pairs, mapping, 4, resolution=1.0)
    assert [t.image.shape for t in tiles] == [(240, 240, 4), (240, 240, 4)]
    assert [t.label.shape for t in tiles] == [(240, 240), (240, 240)]
    assert [t.pixel_size_m for t in tiles] == [pytest.approx(1.0), pytest.approx(1.0)]
    # the 0.6 m labels brought back to 1 m by nearest are the 1 m labels, but for ties
    same = tiles[0].label == tiles[1].label
    assert same.mean() > 0.97
    native, _ = load_tiles(pairs[1:], mapping, 4)
    assert native[0].image.shape == (400, 400, 4)
    assert native[0].pixel_size_m == pytest.approx(0.6)
    coarse, _ = load_tiles(pairs[1:], mapping, 4, resolution=2.0)
    assert coarse[0].image.shape == (120, 120, 4)


def test_training_with_data_resolution(scene: dict[str, Path], tmp_path: Path) -> None:
    data = tmp_path / "mixed"
    data.mkdir()
    for key in ("1", "0.6"):
        for path in scene[key].parent.iterdir():
            (data / path.name).symlink_to(path)
    config = tmp_path / "tiny.yaml"
    config.write_text(
        yaml.safe_dump({**TINY_CONFIG, "data": {"patch_size": 64, "val_fraction": 0.5}})
    )
    run = tmp_path / "run"
    result = run_cli(
        "train",
        "--config",
        str(config),
        "--data",
        str(data),
        "--out",
        str(run),
        "--epochs",
        "1",
        "--samples-per-epoch",
        "8",
        "--workers",
        "1",
        "--set",
        "data.resolution=2",
    )
    assert result.returncode == 0, result.stderr
    state = torch.load(run / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    assert state["pixel_size_m"] == pytest.approx(2.0)
    assert state["config"]["data"]["resolution"] == pytest.approx(2.0)
    # one training tile of 120 x 120 px (4 bands and a label): 72,000 bytes
    assert re.search(r"holds 1 of 1 training tiles \[\w+\]: .* 0\.1 MB in memory", result.stderr), (
        result.stderr
    )


@pytest.mark.parametrize(
    ("crs", "pixel", "expected"),
    [
        ("EPSG:26918", 0.6, "0.60 m pixels"),  # UTM, metres
        ("EPSG:2263", 2.0, f"{2.0 * 1200 / 3937:.2f} m pixels"),  # US survey feet
        ("EPSG:4326", 1e-5, "1e-05 degree pixels"),  # not 0.00 m
        (None, 1.0, "1-unit pixels"),
    ],
)
def test_a_pixel_size_is_described_in_the_units_it_has(
    crs: str | None, pixel: float, expected: str
) -> None:
    from rasterio.io import MemoryFile
    from rasterio.transform import from_origin

    from landcover.data.resolution import describe_pixel_size

    profile = {"driver": "GTiff", "width": 8, "height": 8, "count": 1, "dtype": "uint8"}
    with MemoryFile() as mem:
        transform = from_origin(10.0, 20.0, pixel, pixel)
        with mem.open(**profile, crs=crs, transform=transform) as ds:
            ds.write(np.zeros((1, 8, 8), dtype=np.uint8))
        with mem.open() as ds:
            assert describe_pixel_size(ds) == expected
