"""landcover predict: georeferenced maps of whole tiles, as GIS software expects them."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from rasterio.transform import from_origin
from rio_cogeo.cogeo import cog_validate

from landcover.classes import resolve_mapping
from landcover.inference.sliding import window_starts
from landcover.synthetic.synthetic import synthesize_scene, write_pair

from conftest import REPO, assert_one_line_error, run_cli

REALDATA = REPO.parent / "shared" / "realdata"
NAMES = ["water", "tree_canopy", "low_vegetation", "barren", "impervious", "road"]


def _assert_same_grid(out: Path, src: Path) -> None:
    with rasterio.open(out) as o, rasterio.open(src) as s:
        assert o.crs == s.crs
        assert o.transform == s.transform
        assert (o.width, o.height) == (s.width, s.height)


def _declared_nodata(pixels: np.ndarray, nodata: float | None) -> np.ndarray:
    """Pixels whose every band equals the declared nodata value (none when none is declared)."""
    if nodata is None:
        return np.zeros(pixels.shape[1:], dtype=bool)
    return (pixels == nodata).all(axis=0)


def _nodata_matches(class_map: Path, expected: np.ndarray) -> None:
    """The class map's no-data (255) is exactly ``expected``, computed by the test."""
    with rasterio.open(class_map) as c:
        classes = c.read(1)
    assert c.nodata == 255
    assert expected.shape == classes.shape
    np.testing.assert_array_equal(classes == 255, expected)
    assert (classes[~expected] < len(NAMES)).all()


def _odd_image() -> np.ndarray:
    """The pixels of :func:`odd_tile`: a synthetic scene with an all-zero corner."""
    image, _ = synthesize_scene(250, 333, np.random.default_rng(3))
    image[:, :40, :60] = 0
    return image


@pytest.fixture(scope="module")
def odd_tile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 250 x 333 px synthetic tile with an image no-data corner (nodata 0)."""
    folder = tmp_path_factory.mktemp("odd")
    image = _odd_image()
    _, label = synthesize_scene(250, 333, np.random.default_rng(3))
    label[:40, :60] = 15
    path = write_pair(folder, "odd", image, label, (400000.0, 4300000.0))[0]
    with rasterio.open(path) as ds:
        assert ds.nodata == 0
    return path


def test_class_and_probability_maps(odd_tile: Path, checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "maps"
    result = run_cli("predict", str(odd_tile), "--checkpoint", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    class_map, prob_map = out / "odd_naip_class.tif", out / "odd_naip_prob.tif"
    for path in (class_map, prob_map):
        _assert_same_grid(path, odd_tile)
        valid, errors, _ = cog_validate(str(path))
        assert valid, errors
    with rasterio.open(class_map) as ds:
        assert ds.dtypes[0] == "uint8"
        cmap = ds.colormap(1)
        assert cmap[0][:3] == resolve_mapping("chesapeake7").classes[0].rgb
        assert cmap[255][3] == 0
        assert json.loads(ds.tags()["CLASS_NAMES"]) == NAMES
        assert ds.overviews(1), "COG needs internal overviews"
        assert ds.compression is not None
    with rasterio.open(prob_map) as ds:
        assert ds.count == len(NAMES)
        assert list(ds.descriptions) == NAMES
        probs = ds.read()
        classes = rasterio.open(class_map).read(1)
    valid = classes != 255
    # uint8 probabilities of a pixel sum to ~255, and the class map is their argmax
    sums = probs[:, valid].astype(int).sum(axis=0)
    assert np.abs(sums - 255).max() <= len(NAMES)
    agree = probs.argmax(axis=0)[valid] == classes[valid]
    assert agree.mean() > 0.99  # ties after rounding to uint8 may differ
    corner = np.zeros(classes.shape, dtype=bool)
    corner[:40, :60] = True
    assert (_declared_nodata(_odd_image(), 0) == corner).all()  # no other all-zero pixel
    _nodata_matches(class_map, corner)
    assert (out / "odd_naip_preview.png").stat().st_size > 10_000
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no scratch left


def test_float32_probabilities(odd_tile: Path, checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "maps"
    result = run_cli(
        "predict",
        str(odd_tile),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--prob-dtype",
        "float32",
        "--no-preview",
    )
    assert result.returncode == 0, result.stderr
    with rasterio.open(out / "odd_naip_prob.tif") as ds:
        assert ds.dtypes[0] == "float32"
        probs = ds.read()
    valid = rasterio.open(out / "odd_naip_class.tif").read(1) != 255
    np.testing.assert_allclose(probs[:, valid].sum(axis=0), 1.0, atol=1e-4)
    assert not (out / "odd_naip_preview.png").exists()


@pytest.mark.skipif(not REALDATA.is_dir(), reason="shared/realdata is not beside the checkout")
def test_a_real_naip_tile_cut_short_is_said_so_in_one_line(
    checkpoint: Path, tmp_path: Path
) -> None:
    """A download cut off: libtiff's short read (its -1 as 'row 4294967295') is told plainly."""
    tile = tmp_path / "m_4709963_se_14_1_20100629.tif"
    tile.write_bytes((REALDATA / tile.name).read_bytes()[:300_000])
    out = tmp_path / "maps"
    result = run_cli("predict", str(tile), "--checkpoint", str(checkpoint), "--out", str(out))
    line = assert_one_line_error(result, tile.name, "got 0 bytes")
    assert "the file is cut short (truncated) or corrupt" in line
    assert "4294967295" not in line


@pytest.mark.skipif(not REALDATA.is_dir(), reason="shared/realdata is not beside the checkout")
def test_real_naip_tiles(checkpoint: Path, tmp_path: Path) -> None:
    tiles = sorted(REALDATA.glob("m_*.tif"))
    assert len(tiles) == 2
    out = tmp_path / "maps"
    result = run_cli(
        "predict", str(REALDATA / "m_*.tif"), "--checkpoint", str(checkpoint), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    for tile in tiles:
        class_map = out / f"{tile.stem}_class.tif"
        _assert_same_grid(class_map, tile)
        with rasterio.open(class_map) as ds:
            assert ds.crs.to_epsg() == 26914
        with rasterio.open(tile) as ds:  # real NAIP: nodata 0, no mask, no alpha band
            assert [f.name for f in ds.mask_flag_enums[0]] == ["nodata"]
            expected = _declared_nodata(ds.read(), ds.nodata)
        _nodata_matches(class_map, expected)


def _variant(tile: Path, folder: Path, name: str, **changes) -> tuple[Path, np.ndarray]:
    """A copy of ``tile`` with ``changes``; returns it and where it has no data (by numpy)."""
    with rasterio.open(tile) as ds:
        data, profile = ds.read(), ds.profile
    size = changes.pop("size", None)
    if size is not None:
        data = data[:, : size[0], : size[1]]
        profile.update(height=size[0], width=size[1])
        if profile.get("tiled"):
            profile.update(tiled=False)
            profile.pop("blockxsize", None)
            profile.pop("blockysize", None)
    alpha = changes.pop("alpha", False)
    if alpha:  # NIR tagged alpha (extra sample), with NIR = 0 over a block of otherwise data
        changes.update(photometric="RGB", alpha="YES")
        data[3, 100:140, 150:250] = 0
    profile.update(**changes)
    path = folder / f"{name}.tif"
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data)
    if alpha:
        with rasterio.open(path) as ds:
            assert ds.colorinterp[3] == rasterio.enums.ColorInterp.alpha
    return path, _declared_nodata(data, profile.get("nodata"))


@pytest.mark.parametrize(
    ("name", "changes"),
    [
        ("small", {"size": (40, 50)}),  # smaller than the 64 px window
        ("alpha", {"alpha": True, "nodata": None}),  # NIR tagged alpha: its zeros are data
        ("alpha0", {"alpha": True}),  # the same with nodata 0: only all-zero pixels are not
        ("pixels06", {"transform": from_origin(400000, 4300000, 0.6, 0.6)}),
        ("pixels5", {"transform": from_origin(400000, 4300000, 5.0, 5.0)}),
        ("plain", {"compress": None, "nodata": None}),  # uncompressed, no nodata value
    ],
)
def test_inputs_seen_in_practice(
    odd_tile: Path, checkpoint: Path, tmp_path: Path, name: str, changes: dict
) -> None:
    tile, expected = _variant(odd_tile, tmp_path, name, **changes)
    out = tmp_path / "maps"
    result = run_cli("predict", str(tile), "--checkpoint", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    _assert_same_grid(out / f"{name}_class.tif", tile)
    _nodata_matches(out / f"{name}_class.tif", expected)


def test_two_workers_spread_tiles(tiny_data: Path, checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "maps"
    result = run_cli(
        "predict",
        str(tiny_data / "synth_00[0-2]_naip.tif"),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--workers",
        "2",
        "--no-preview",
    )
    assert result.returncode == 0, result.stderr
    for i in range(3):
        _assert_same_grid(out / f"synth_00{i}_naip_class.tif", tiny_data / f"synth_00{i}_naip.tif")


def test_no_seams_at_window_borders(checkpoint: Path, tmp_path: Path) -> None:
    """Accuracy within 8 px of interior window borders matches accuracy elsewhere."""
    image, label = synthesize_scene(512, 512, np.random.default_rng(11))
    tile = write_pair(tmp_path, "seams", image, label, (500000.0, 4300000.0))[0]
    out = tmp_path / "maps"
    result = run_cli(
        "predict",
        str(tile),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--overlap",
        "16",
        "--window",
        "128",
    )
    assert result.returncode == 0, result.stderr
    pred = rasterio.open(out / "seams_naip_class.tif").read(1)
    target = resolve_mapping("chesapeake7").encode(label)
    valid = target != 255
    window = 128  # twice the tiny model's patch: 5 windows a side, 8 interior borders
    edges = sorted({e for s in window_starts(512, window, 16) for e in (s, s + window)} - {0, 512})
    near = np.zeros(512, dtype=bool)
    for e in edges:
        near[max(0, e - 8) : e + 8] = True
    border = (near[:, None] | near[None, :]) & valid
    inner = ~(near[:, None] | near[None, :]) & valid
    acc_border = (pred[border] == target[border]).mean()
    acc_inner = (pred[inner] == target[inner]).mean()
    assert border.sum() > 50_000 and inner.sum() > 20_000
    assert acc_inner > 0.7, (
        acc_inner
    )  # the model has learnt something: the comparison means something
    assert abs(acc_border - acc_inner) <= 0.02, (acc_border, acc_inner)


def test_missing_tile(checkpoint: Path, tmp_path: Path) -> None:
    result = run_cli(
        "predict",
        str(tmp_path / "none.tif"),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(tmp_path),
    )
    assert_one_line_error(result, "none.tif", "not found")


def test_glob_matching_nothing(checkpoint: Path, tmp_path: Path) -> None:
    result = run_cli(
        "predict", str(tmp_path / "*.tif"), "--checkpoint", str(checkpoint), "--out", str(tmp_path)
    )
    assert_one_line_error(result, "no files match")


def test_not_a_raster(checkpoint: Path, tmp_path: Path) -> None:
    bogus = tmp_path / "notes.tif"
    bogus.write_text("hello, I am not a raster\n" * 50)
    result = run_cli("predict", str(bogus), "--checkpoint", str(checkpoint), "--out", str(tmp_path))
    assert_one_line_error(result, "notes.tif", "not a readable GeoTIFF")


def test_band_mismatch(odd_tile: Path, checkpoint: Path, tmp_path: Path) -> None:
    with rasterio.open(odd_tile) as ds:
        rgb, profile = ds.read([1, 2, 3]), ds.profile
    profile.update(count=3, photometric="RGB")
    three = tmp_path / "rgb.tif"
    with rasterio.open(three, "w", **profile) as ds:
        ds.write(rgb)
    result = run_cli(
        "predict", str(three), "--checkpoint", str(checkpoint), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(result, "rgb.tif", "has 3 bands, the checkpoint expects 4")
    assert not (tmp_path / "o").exists()
    profile.update(count=1, photometric="MINISBLACK")  # a label raster given as an image
    one = tmp_path / "label.tif"
    with rasterio.open(one, "w", **profile) as ds:
        ds.write(rgb[:1])
    result = run_cli("predict", str(one), "--checkpoint", str(checkpoint), "--out", str(tmp_path))
    assert_one_line_error(result, "label.tif", "has 1 band, the checkpoint expects 4")


def test_a_fifth_band_not_tagged_alpha_is_refused(
    odd_tile: Path, checkpoint: Path, tmp_path: Path
) -> None:
    """One band more than the model reads is its mask only when tagged alpha: the message
    says so, and names the band's tag."""
    with rasterio.open(odd_tile) as ds:
        pixels, profile = ds.read(), ds.profile
    profile.update(count=5, photometric="MINISBLACK", nodata=None)
    five = tmp_path / "five.tif"
    with rasterio.open(five, "w", **profile) as ds:
        ds.write(np.concatenate([pixels, pixels[:1]]))
    with rasterio.open(five) as ds:
        assert ds.colorinterp[4] == rasterio.enums.ColorInterp.undefined
    result = run_cli(
        "predict", str(five), "--checkpoint", str(checkpoint), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(
        result,
        "five.tif",
        "has 5 bands, the checkpoint expects 4 (an extra band is read as the mask only when "
        "tagged alpha: band 5 is tagged undefined)",
    )
    assert not (tmp_path / "o").exists()


def test_corrupt_checkpoint_keeps_earlier_outputs(
    odd_tile: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    assert (
        run_cli(
            "predict",
            str(odd_tile),
            "--checkpoint",
            str(checkpoint),
            "--out",
            str(out),
            "--no-preview",
        ).returncode
        == 0
    )
    before = (out / "odd_naip_class.tif").read_bytes()
    broken = tmp_path / "broken.pt"
    broken.write_bytes(checkpoint.read_bytes()[:5000])
    result = run_cli("predict", str(odd_tile), "--checkpoint", str(broken), "--out", str(out))
    assert_one_line_error(result, "broken.pt", "not a loadable checkpoint")
    assert (out / "odd_naip_class.tif").read_bytes() == before


def test_foreign_checkpoint(odd_tile: Path, tmp_path: Path) -> None:
    foreign = tmp_path / "resnet.pt"
    torch.save({"conv1.weight": torch.zeros(3, 3)}, foreign)
    result = run_cli("predict", str(odd_tile), "--checkpoint", str(foreign), "--out", str(tmp_path))
    assert_one_line_error(result, "resnet.pt", "not a landcover checkpoint")


def test_missing_checkpoint(odd_tile: Path, tmp_path: Path) -> None:
    result = run_cli(
        "predict", str(odd_tile), "--checkpoint", str(tmp_path / "x.pt"), "--out", str(tmp_path)
    )
    assert_one_line_error(result, "x.pt", "checkpoint not found")


def test_copied_checkpoint_predicts_alone(odd_tile: Path, checkpoint: Path, tmp_path: Path) -> None:
    """The checkpoint alone carries classes, bands, normalisation and patch size."""
    alone = tmp_path / "elsewhere" / "model.pt"
    alone.parent.mkdir()
    shutil.copy(checkpoint, alone)
    result = run_cli(
        "predict",
        str(odd_tile),
        "--checkpoint",
        str(alone),
        "--out",
        str(tmp_path / "o"),
        "--no-preview",
    )
    assert result.returncode == 0, result.stderr
