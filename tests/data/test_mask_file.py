"""An image's external mask file (GDAL's ``tile.tif.msk``) is read wherever the image is.

GDAL finds the mask beside a file it opens by its path; training reads every tile as bytes,
and predict and evaluate read remote tiles as bytes or a downloaded copy, so before
landcover.data.maskfile those saw no mask: the pixels under it were imagery to train on
(with their labels) and to map. The tests write a tile whose mask lives only in the sidecar,
with noise under it, and check each reader against the mask array they wrote.
"""

from pathlib import Path

import fsspec
import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from landcover.classes import IGNORE_INDEX, resolve_mapping
from landcover.data.measure import measure_pairs
from landcover.data.pairs import TilePair
from landcover.data.raster import has_nodata, nodata_mask, open_raster
from landcover.feed.memory import load_tiles
from landcover.inference.loader import load_inference_model
from landcover.inference.options import PredictOptions
from landcover.inference.predict import predict_tile
from landcover.synthetic.synthetic import synthesize_scene

SIZE = (96, 112)
NODATA_CLASS = 255  # the class map's no-data value
Pair = tuple[Path, Path, np.ndarray, np.ndarray]


def _profile(count: int) -> dict:
    return {
        "driver": "GTiff",
        "height": SIZE[0],
        "width": SIZE[1],
        "count": count,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(400000, 4300000, 1.0, 1.0),
    }


@pytest.fixture(scope="module")
def sidecar_pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """A tile whose mask (a corner and a strip) is only in ``t_naip.tif.msk``, noise under
    it; its label; the mask (True: no data); the image's bands as written."""
    folder = tmp_path_factory.mktemp("sidecar")
    image, label = synthesize_scene(*SIZE, np.random.default_rng(3))
    masked = np.zeros(SIZE, dtype=bool)
    masked[:40, :50] = True
    masked[:, -9:] = True
    rng = np.random.default_rng(4)
    image[:, masked] = rng.integers(1, 256, size=(4, int(masked.sum())), dtype=np.uint8)
    path = folder / "t_naip.tif"
    with (
        rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False),
        rasterio.open(path, "w", **_profile(4)) as ds,
    ):
        ds.write(image)
        ds.write_mask(np.where(masked, 0, 255).astype(np.uint8))
    assert (folder / "t_naip.tif.msk").is_file()
    with rasterio.open(path) as ds:  # by path GDAL finds the sidecar; the file alone has none
        assert ds.nodata is None and ((ds.dataset_mask() == 0) == masked).all()
    lab = folder / "t_lc.tif"
    with rasterio.open(lab, "w", nodata=15, **_profile(1)) as ds:
        ds.write(label, 1)
    return path, lab, masked, image


def _check_training_tile(
    pair: TilePair, masked: np.ndarray, stored: np.ndarray, **load: object
) -> None:
    (tile,), _ = load_tiles([pair], resolve_mapping("chesapeake7"), 4, concurrency=2, **load)
    assert tile.nodata is not None and np.array_equal(tile.nodata, masked)
    assert (tile.image[masked] == 0).all()  # the noise under the mask is not trained on
    assert (tile.label[masked] == IGNORE_INDEX).all()  # nor are its labels
    assert np.array_equal(tile.image[~masked], np.moveaxis(stored, 0, -1)[~masked])
    assert (tile.label[~masked] != IGNORE_INDEX).any()


def test_training_tiles_read_the_mask_file_beside_a_local_image(
    sidecar_pair: Pair,
) -> None:
    path, lab, masked, stored = sidecar_pair
    _check_training_tile(TilePair("t", str(path), str(lab)), masked, stored)


def _to_memory(paths: list[Path], prefix: str) -> list[str]:
    fs = fsspec.filesystem("memory")
    urls = []
    for p in paths:
        url = f"memory://{prefix}/{p.name}"
        fs.pipe_file(url, p.read_bytes())
        urls.append(url)
    return urls


def test_remote_tiles_read_their_mask_file(sidecar_pair: Pair, tmp_path: Path) -> None:
    path, lab, masked, stored = sidecar_pair
    image, _, label = _to_memory([path, Path(f"{path}.msk"), lab], "mask-remote")
    pair = TilePair("t", image, label)
    _check_training_tile(pair, masked, stored)
    _check_training_tile(pair, masked, stored, cache_dir=str(tmp_path / "cache"))  # read through it
    with open_raster(image) as ds:  # evaluate's and the data tools' reader
        assert np.array_equal(nodata_mask(ds), masked)
    # a remote image without a mask file still reads as all data
    bare, _ = _to_memory([path, lab], "mask-none")
    with open_raster(bare) as ds:
        assert not has_nodata(ds)


def test_predict_of_a_remote_tile_reads_its_mask_file(
    sidecar_pair: Pair, checkpoint: Path, tmp_path: Path
) -> None:
    path, _, masked, _ = sidecar_pair
    remote, _ = _to_memory([path, Path(f"{path}.msk")], "mask-predict")
    im = load_inference_model(checkpoint, "cpu")
    maps = []
    for tile, out in ((str(path), "local"), (remote, "remote")):
        options = PredictOptions(str(tmp_path / out), 16, 4, 64, preview=False)
        result = predict_tile(tile, im, options)
        with rasterio.open(result.class_map) as ds:
            maps.append(ds.read(1))
    local, remote_map = maps
    assert np.array_equal(local == NODATA_CLASS, masked)  # GDAL's own read of the local file
    assert np.array_equal(remote_map, local)


def test_data_stats_of_remote_tiles_read_their_mask_file(sidecar_pair: Pair) -> None:
    """``data stats`` downloads a remote pair to measure it: the mask file comes along, so the
    band statistics count the valid pixels only, as for the local file."""
    path, lab, masked, stored = sidecar_pair
    image, _, label = _to_memory([path, Path(f"{path}.msk"), lab], "mask-stats")
    mapping = resolve_mapping("chesapeake7")
    remote = measure_pairs([TilePair("t", image, label)], mapping, 4).stats
    local = measure_pairs([TilePair("t", str(path), str(lab))], mapping, 4).stats
    valid = int((~masked).sum())
    assert int(local.band_hist[0].sum()) == valid  # GDAL finds the local file's mask itself
    assert np.array_equal(remote.band_hist, local.band_hist)
    expected = np.bincount(stored[0][~masked], minlength=256)
    assert np.array_equal(remote.band_hist[0], expected)
