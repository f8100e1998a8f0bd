"""What lies under an image's no-data mask does not reach a model, the maps or the metrics.

A no-data pixel's stored values are not imagery (0 in a collar, anything under an internal
mask: a JPEG-compressed COG's ringing); training tiles, predict and evaluate read 0 there
(landcover.data.nodatafill.zero_nodata), what NAIP's collars hold. Two files that differ only
under their mask therefore give the same maps, byte for byte, and the same confusion matrix;
before, the values under the mask reached the windows around them.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from landcover.classes import IGNORE_INDEX, resolve_mapping
from landcover.data.pairs import TilePair
from landcover.data.raster import read_pair
from landcover.inference.loader import load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.predict import predict_tile
from landcover.synthetic.synthetic import synthesize_scene

from conftest import run_cli

SIZE = (150, 170)


def _write(path: Path, image: np.ndarray, mask: np.ndarray) -> Path:
    """A 4-band tile with an internal mask (no nodata value): 0 in ``mask`` is no data."""
    profile = {
        "driver": "GTiff",
        "height": image.shape[1],
        "width": image.shape[2],
        "count": 4,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(400000, 4300000, 1.0, 1.0),
    }
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(path, "w", **profile) as ds:
        ds.write(image)
        ds.write_mask(mask)
    return path


@pytest.fixture(scope="module")
def masked_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """The same scene three times: zeros and noise under a masked corner and strip, and the
    zeros with no mask at all (every pixel data); its label."""
    folder = tmp_path_factory.mktemp("under-mask")
    image, label = synthesize_scene(*SIZE, np.random.default_rng(11))
    mask = np.full(SIZE, 255, dtype=np.uint8)
    mask[:50, :60] = 0
    mask[:, -12:] = 0
    zeros = image.copy()
    zeros[:, mask == 0] = 0
    noise = image.copy()
    rng = np.random.default_rng(5)
    noise[:, mask == 0] = rng.integers(0, 256, size=(4, int((mask == 0).sum())), dtype=np.uint8)
    a = _write(folder / "a_naip.tif", zeros, mask)
    b = _write(folder / "b_naip.tif", noise, mask)
    c = _write(folder / "c_naip.tif", zeros, np.full(SIZE, 255, dtype=np.uint8))
    with rasterio.open(a) as ds:
        assert ds.nodata is None
        assert (ds.read_masks(1) == mask).all()
    lab = folder / "lab.tif"
    profile = {
        "driver": "GTiff",
        "height": SIZE[0],
        "width": SIZE[1],
        "count": 1,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(400000, 4300000, 1.0, 1.0),
        "nodata": 15,
    }
    with rasterio.open(lab, "w", **profile) as ds:
        ds.write(label, 1)
    return a, b, c, lab


def _pixels(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read()


GEOMETRY = ("--window", "64", "--overlap", "16", "--batch-size", "3")
"""Several rows of windows (the masked corner spans two), several windows a row."""


def test_predict_maps_read_zero_whatever_lies_under_the_mask(
    masked_pair: tuple[Path, Path, Path, Path], checkpoint: Path, tmp_path: Path
) -> None:
    a, b, c, _ = masked_pair
    assert not np.array_equal(_pixels(a), _pixels(b))
    maps = {}
    for tile in (a, b, c):
        out = tmp_path / tile.stem
        result = run_cli(
            "predict", str(tile), "--checkpoint", str(checkpoint), "--out", str(out), *GEOMETRY
        )
        assert result.returncode == 0, result.stderr
        maps[tile.stem] = (
            _pixels(out / f"{tile.stem}_class.tif"),
            _pixels(out / f"{tile.stem}_prob.tif"),
        )
    (class_a, prob_a), (class_b, prob_b) = maps["a_naip"], maps["b_naip"]
    assert np.array_equal(class_a, class_b)
    assert np.array_equal(prob_a, prob_b)
    with rasterio.open(a) as ds:
        valid = ds.read_masks(1) > 0
    assert (class_a[0][~valid] == 255).all()  # the mask is still no data in the map
    assert (class_a[0][valid] != 255).all()
    # the model read 0 under the mask: the file that stores those zeros as data maps its
    # valid pixels the same
    class_c, prob_c = maps["c_naip"]
    assert np.array_equal(class_c[0][valid], class_a[0][valid])
    assert np.array_equal(prob_c[:, valid], prob_a[:, valid])
    # read row by row from the file (a tile too large to decode whole): the same maps
    im = load_inference_model(checkpoint, "cpu")
    options = PredictOptions(str(tmp_path / "rows"), 16, 3, 64, preview=False, tile_memory=0)
    streamed = predict_tile(str(b), im, options)
    assert np.array_equal(_pixels(Path(streamed.class_map)), class_a)
    assert np.array_equal(_pixels(Path(streamed.prob_map)), prob_a)


def test_evaluate_ignores_what_lies_under_the_mask(
    masked_pair: tuple[Path, Path, Path], checkpoint: Path, tmp_path: Path
) -> None:
    a, b, _, lab = masked_pair
    confusions = []
    for tile in (a, b):
        folder = tmp_path / f"data-{tile.stem}"
        folder.mkdir()
        (folder / "t_naip.tif").symlink_to(tile)
        (folder / "t_lc.tif").symlink_to(lab)
        out = tmp_path / f"eval-{tile.stem}"
        result = run_cli(
            "evaluate", "--checkpoint", str(checkpoint), "--data", str(folder), "--out", str(out),
            *GEOMETRY,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        confusions.append((out / "confusion.csv").read_text())
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["accuracy"] > 0
    assert confusions[0] == confusions[1]


def test_a_training_tile_reads_zero_under_its_mask(
    masked_pair: tuple[Path, Path, Path, Path],
) -> None:
    a, b, _, lab = masked_pair
    mapping = resolve_mapping("chesapeake7")
    tiles = [read_pair(TilePair("t", str(path), str(lab)), mapping, 4) for path in (a, b)]
    with rasterio.open(a) as ds:
        nodata = ds.read_masks(1) == 0
        pixels = np.moveaxis(ds.read(), 0, -1)
    for tile in tiles:
        assert np.array_equal(tile.nodata, nodata)
        assert (tile.image[nodata] == 0).all()
        assert np.array_equal(tile.image[~nodata], pixels[~nodata])
        assert (tile.label[nodata] == IGNORE_INDEX).all()
    assert np.array_equal(tiles[0].image, tiles[1].image)
