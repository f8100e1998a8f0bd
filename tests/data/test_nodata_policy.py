"""One no-data policy everywhere: training load, stats, check, predict and evaluate agree.

The policy: a pixel is no-data when the file declares a nodata value and every band equals it,
or when the file's per-dataset (internal) mask marks it. A 4th band tagged alpha is NAIP's NIR:
its zeros are data. A 5th band tagged alpha (``gdalwarp -dstalpha``, GIS exports) is the mask:
its zeros are no-data, and the model reads the 4 bands before it. Every expectation here is computed with numpy from the arrays this test
writes, never through rasterio's ``dataset_mask`` or landcover's own mask function.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from rasterio.enums import ColorInterp, Resampling
from rasterio.transform import from_origin

from landcover.classes import resolve_mapping
from landcover.data.bandview import image_view
from landcover.data.check import check_folder
from landcover.data.measure import measure_pairs
from landcover.data.nodatafill import zero_nodata
from landcover.data.pairs import TilePair
from landcover.data.raster import nodata_mask, read_pair
from landcover.data.resolution import on_grid
from landcover.data.stats import DataStats
from landcover.errors import DataError

from conftest import run_cli, write_with_alpha_band

NAMES = ["water", "tree_canopy", "low_vegetation", "barren", "impervious", "road"]
CODE_TO_CLASS = {1: 0, 2: 1, 3: 2}  # chesapeake7 codes used here; 15 is the label's no-data
HEIGHT, WIDTH = 40, 48
CASES = ("alpha", "nodata", "mask", "extra_alpha")


def _arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Imagery with NIR = 0 in one block and every band 0 in a corner, labels, a mask."""
    rng = np.random.default_rng(5)
    image = rng.integers(30, 200, size=(4, HEIGHT, WIDTH), dtype=np.uint8)
    image[3, 5:15, 10:30] = 0  # NIR = 0 only: data under every case
    image[:, 30:40, 0:8] = 0  # every band 0: no-data where the file declares nodata 0
    codes = rng.choice(np.array([1, 2, 3, 15], dtype=np.uint8), size=(HEIGHT, WIDTH))
    codes[5:15, 10:30] = 2  # the NIR = 0 block is labelled, so counting it matters
    mask = np.full((HEIGHT, WIDTH), 255, dtype=np.uint8)
    mask[20:26, 30:40] = 0
    return image, codes, mask


def _expected_nodata(case: str) -> np.ndarray:
    """Where the image has no data, from the written arrays and the case's declarations."""
    image, _, mask = _arrays()
    if case == "alpha":  # no nodata value, no mask: the alpha-tagged NIR hides nothing
        return np.zeros((HEIGHT, WIDTH), dtype=bool)
    if case == "extra_alpha":  # no nodata value: the alpha band alone says where
        return mask == 0
    declared = (image[0] == 0) & (image[1] == 0) & (image[2] == 0) & (image[3] == 0)
    if case == "nodata":
        return declared
    return declared | (mask == 0)


def _expected_classes(case: str) -> np.ndarray:
    """Training's class indices: 255 for label no-data and image no-data."""
    _, codes, _ = _arrays()
    classes = np.full(codes.shape, 255, dtype=np.uint8)
    for code, index in CODE_TO_CLASS.items():
        classes[codes == code] = index
    classes[_expected_nodata(case)] = 255
    return classes


def _write_case(folder: Path, case: str) -> TilePair:
    image, codes, mask = _arrays()
    common = {
        "driver": "GTiff",
        "width": WIDTH,
        "height": HEIGHT,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(350000, 4300000, 1, 1),
    }
    nodata = None if case in ("alpha", "extra_alpha") else 0
    img_path, lab_path = folder / f"{case}_naip.tif", folder / f"{case}_lc.tif"
    if case == "extra_alpha":  # as gdalwarp -dstalpha writes it: RGB, NIR, alpha
        write_with_alpha_band(img_path, image, mask, common["crs"], common["transform"])
    else:
        with (
            rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True),
            rasterio.open(
                img_path, "w", count=4, nodata=nodata, photometric="RGB", alpha="YES", **common
            ) as ds,
        ):
            ds.write(image)
            if case == "mask":
                ds.write_mask(mask)
    with rasterio.open(lab_path, "w", count=1, nodata=15, **common) as ds:
        ds.write(codes, 1)
    with rasterio.open(img_path) as ds:  # the trap is armed: band 4 is tagged alpha
        assert ds.colorinterp[3] == ColorInterp.alpha or case == "extra_alpha"
        if case == "alpha":  # and GDAL's own dataset mask would hide the NIR = 0 pixels
            assert not ds.dataset_mask()[5:15, 10:30].any()
    return TilePair(case, str(img_path), str(lab_path))


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, TilePair]]:
    """One data folder per case, each holding one image/label pair."""
    out = {}
    for case in CASES:
        folder = tmp_path_factory.mktemp(case)
        out[case] = (folder, _write_case(folder, case))
    return out


@pytest.fixture(scope="module")
def constant_checkpoint(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with its head rewired to predict tree_canopy (class 1) everywhere."""
    state = torch.load(checkpoint, weights_only=True)
    state["model"]["segmentation_head.0.weight"].zero_()
    bias = torch.zeros_like(state["model"]["segmentation_head.0.bias"])
    bias[1] = 10.0
    state["model"]["segmentation_head.0.bias"] = bias
    path = tmp_path_factory.mktemp("constant") / "constant.pt"
    torch.save(state, path)
    return path


def test_expectations_differ_between_cases() -> None:
    """The cases test something: NIR = 0 pixels exist, and the three masks differ."""
    image, _, _ = _arrays()
    assert (image[3] == 0).sum() > (image == 0).all(axis=0).sum() > 0
    sizes = [int(_expected_nodata(case).sum()) for case in CASES]
    assert sizes == [0, 80, 80 + 60, 60]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fetched", [False, True], ids=["file", "bytes"])
def test_training_load(folders: dict, case: str, fetched: bool) -> None:
    """From the file, and from its bytes (as a blob is read: an in-memory file)."""
    _, pair = folders[case]
    data = {}
    if fetched:
        data = {
            "image_bytes": Path(pair.image).read_bytes(),
            "label_bytes": Path(pair.label).read_bytes(),
        }
    tile = read_pair(pair, resolve_mapping("chesapeake7"), 4, **data)
    np.testing.assert_array_equal(tile.label, _expected_classes(case))
    expected = _expected_nodata(case)
    if expected.any():
        np.testing.assert_array_equal(tile.nodata, expected)
    else:
        assert tile.nodata is None


@pytest.mark.parametrize("case", CASES)
def test_stats_count_the_same_pixels(folders: dict, case: str) -> None:
    _, pair = folders[case]
    image, _, _ = _arrays()
    valid = ~_expected_nodata(case)
    classes = _expected_classes(case)
    want_hist = np.stack([np.bincount(image[b][valid], minlength=256) for b in range(4)])
    want_classes = np.bincount(classes[classes != 255], minlength=6)
    mapping = resolve_mapping("chesapeake7")
    streamed = measure_pairs([pair], mapping, 4).stats
    held = DataStats.empty(4, 6)
    held.add_tile(read_pair(pair, mapping, 4))
    for stats in (streamed, held):
        np.testing.assert_array_equal(stats.band_hist, want_hist)
        np.testing.assert_array_equal(stats.class_counts, want_classes)


@pytest.mark.parametrize("case", CASES)
def test_check_counts_image_nodata(folders: dict, case: str) -> None:
    folder, _ = folders[case]
    report = check_folder(folder, resolve_mapping("chesapeake7"))
    assert report.ok, report.problems
    (tile,) = report.tiles
    shares = report.fractions(tile.counts, tile.masked)
    classes = _expected_classes(case)
    assert shares.nodata == pytest.approx((classes == 255).mean(), abs=1e-12)
    assert shares.unknown == 0
    for k in range(6):
        assert shares.per_class[k] == pytest.approx((classes == k).mean(), abs=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_predict_maps_exactly_the_data_pixels(
    folders: dict, checkpoint: Path, tmp_path: Path, case: str
) -> None:
    _, pair = folders[case]
    out = tmp_path / "maps"
    result = run_cli("predict", pair.image, "--checkpoint", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    with rasterio.open(out / f"{case}_naip_class.tif") as ds:
        classes = ds.read(1)
    expected = _expected_nodata(case)
    np.testing.assert_array_equal(classes == 255, expected)
    assert (classes[~expected] < len(NAMES)).all()
    assert (out / f"{case}_naip_preview.png").stat().st_size > 1_000


@pytest.mark.parametrize("case", CASES)
def test_evaluate_counts_exactly_the_data_pixels(
    folders: dict, constant_checkpoint: Path, tmp_path: Path, case: str
) -> None:
    folder, _ = folders[case]
    out = tmp_path / "eval"
    result = run_cli(
        "evaluate",
        "--checkpoint",
        str(constant_checkpoint),
        "--data",
        str(folder),
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    classes = _expected_classes(case)
    assert metrics["pixels"] == int((classes != 255).sum())
    assert metrics["support"] == {name: int((classes == k).sum()) for k, name in enumerate(NAMES)}
    # every prediction is tree_canopy: accuracy is the labelled tree share
    assert metrics["accuracy"] == pytest.approx((classes == 1).sum() / (classes != 255).sum())


def test_a_4_band_file_with_nir_tagged_alpha_is_not_a_3_band_image_and_its_mask(
    folders: dict,
) -> None:
    """An extra alpha band is the mask only beyond 4 or more bands: NAIP's NIR tagged alpha
    (the ``alpha`` case's file) read by a 3-band model stays a band-count error."""
    _, pair = folders["alpha"]
    with pytest.raises(DataError) as raised:
        read_pair(pair, resolve_mapping("chesapeake7"), 3)
    assert str(raised.value) == f"{pair.image}: has 4 bands, the model expects 3"


def test_the_view_keeps_the_files_blocks_and_band_descriptions(tmp_path: Path) -> None:
    """A striped 5-band file (gdalwarp's default layout): the view's blocks are the file's, so
    reads aligned to them decode each strip once, and the band names travel with it."""
    image, _, mask = _arrays()
    path = write_with_alpha_band(
        tmp_path / "striped.tif", image, mask, "EPSG:26918", from_origin(350000, 4300000, 1, 1)
    )
    names = ["red", "green", "blue", "nir", "alpha"]
    with rasterio.open(path, "r+") as ds:
        for band, name in enumerate(names, start=1):
            ds.set_band_description(band, name)
    with rasterio.open(path) as ds, image_view(ds, 4) as view:
        assert ds.block_shapes[0][1] == WIDTH  # strips, as written
        assert view.count == 4 and view.block_shapes == ds.block_shapes[:4]
        assert view.descriptions == tuple(names[:4])


def test_an_internal_mask_and_an_alpha_band_both_mask(tmp_path: Path) -> None:
    """A 5-band file with an internal mask too: no data where either says so, in training's
    load as in a resampled read."""
    image, codes, alpha = _arrays()
    image[:, 30:40, 0:8] = 1  # no all-zero pixels: on another grid on_grid's nodata 0 hides them
    internal = np.full((HEIGHT, WIDTH), 255, dtype=np.uint8)
    internal[:, :5] = 0  # beside the alpha's block, overlapping none of it
    transform = from_origin(350000, 4300000, 1, 1)
    path = write_with_alpha_band(tmp_path / "both_naip.tif", image, alpha, "EPSG:26918", transform)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(path, "r+") as ds:
        ds.write_mask(internal)
    label = tmp_path / "both_lc.tif"
    profile = {"driver": "GTiff", "width": WIDTH, "height": HEIGHT, "count": 1, "dtype": "uint8"}
    with rasterio.open(
        label, "w", **profile, crs="EPSG:26918", transform=transform, nodata=15
    ) as ds:
        ds.write(codes, 1)
    expected = (alpha == 0) | (internal == 0)
    assert (alpha == 0).sum() > 0 and (internal == 0).sum() > 0
    tile = read_pair(TilePair("both", str(path), str(label)), resolve_mapping("chesapeake7"), 4)
    np.testing.assert_array_equal(tile.nodata, expected)
    fine = (from_origin(350000, 4300000, 0.5, 0.5), 2 * WIDTH, 2 * HEIGHT)
    with (
        rasterio.open(path) as ds,
        image_view(ds, 4) as view,
        on_grid(view, fine, Resampling.nearest) as vrt,
    ):
        np.testing.assert_array_equal(
            nodata_mask(vrt), expected.repeat(2, axis=0).repeat(2, axis=1)
        )


@pytest.mark.parametrize(("bands", "extra"), [(4, 0), (4, 1), (3, 0), (5, 0)])
def test_zero_nodata_zeroes_every_band_of_the_masked_pixels_only(bands: int, extra: int) -> None:
    rng = np.random.default_rng(bands + extra)
    whole = rng.integers(1, 256, size=(12, 14, bands + extra), dtype=np.uint8)
    expected = whole.copy()
    pixels = whole[1:10, 2:13, :bands]  # a view: rows, columns and bands of a larger buffer
    nodata = rng.random((9, 11)) < 0.4
    expected[1:10, 2:13, :bands][nodata] = 0
    zero_nodata(pixels, nodata)
    assert np.array_equal(whole, expected)
    zero_nodata(pixels, None)  # no mask: nothing changes
    assert np.array_equal(whole, expected)
