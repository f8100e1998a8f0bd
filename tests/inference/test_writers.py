"""The map writer (landcover.inference.writers), in process: strips in, COGs out.

The expected maps are built here with numpy (arg-max with the first index on ties, round half
to even of p x 255, no-data where the input has none) and read back through rasterio.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
from affine import Affine
from rio_cogeo.cogeo import cog_validate

from landcover.classes import resolve_mapping
from landcover.inference.encode import EncodedStrip, encode_probs, first_argmax
from landcover.inference.writers import MapWriter

HEIGHT, WIDTH = 700, 600  # more than two 256 px blocks each way, and an odd overview


def _source(path: Path) -> Path:
    with rasterio.open(
        path, "w", driver="GTiff", height=HEIGHT, width=WIDTH, count=4, dtype="uint8",
        crs="EPSG:26918", transform=Affine(1.0, 0, 400000, 0, -1.0, 4300000), nodata=0,
    ) as ds:  # fmt: skip
        ds.write(np.full((4, HEIGHT, WIDTH), 90, dtype=np.uint8))
    return path


@pytest.mark.parametrize("classes", [1, 2, 6, 13, 255])
def test_first_argmax_is_numpys_first_maximum(classes: int) -> None:
    # few distinct values: most pixels tie between several classes, and numpy's argmax
    # returns the first of them
    rng = np.random.default_rng(classes)
    values = rng.integers(0, 4, size=(classes, 37, 53)).astype(np.float32)
    values[:, 0, :] = 2.0  # a row where every class ties
    got = first_argmax(torch.from_numpy(values))
    assert got.dtype == torch.uint8
    np.testing.assert_array_equal(got.numpy(), np.argmax(values, axis=0))
    # a strided view, as the blender's strips are (the first rows of a buffer)
    wide = torch.from_numpy(rng.random((classes, 20, 64), dtype=np.float32))
    np.testing.assert_array_equal(first_argmax(wide[:, :7]).numpy(), wide[:, :7].numpy().argmax(0))


def test_strips_become_cogs_equal_to_numpy_maps(tmp_path: Path) -> None:
    mapping = resolve_mapping("chesapeake7")
    k = mapping.num_classes
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(k), size=(HEIGHT, WIDTH)).transpose(2, 0, 1).astype(np.float32)
    probs[:, :5, :] = 1.0 / k  # ties: the first class wins
    valid = np.ones((HEIGHT, WIDTH), dtype=bool)
    valid[600:, 500:] = False  # a corner without image data

    expected_classes = np.argmax(probs, axis=0).astype(np.uint8)
    expected_classes[~valid] = 255
    expected_probs = np.round(probs * np.float32(255)).astype(np.uint8)  # in float32, as stored
    expected_probs[:, ~valid] = 0

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with rasterio.open(_source(tmp_path / "in.tif")) as src:
        writer = MapWriter(src, mapping, scratch, "uint8", tags={"RUN": "t"})
        for row in range(0, HEIGHT, 128):  # strips of 128 rows, the last one shorter
            part = torch.from_numpy(probs[:, row : row + 128].copy())
            classes, stored = encode_probs(part, "uint8", overwrite=True)
            writer.write(EncodedStrip(row, classes, stored, valid[row : row + 128].copy()))
        writer.publish(tmp_path / "class.tif", tmp_path / "prob.tif")
        grid = (src.crs, src.transform)

    for name in ("class.tif", "prob.tif"):
        assert cog_validate(str(tmp_path / name))[0], name
    with rasterio.open(tmp_path / "class.tif") as ds:
        assert (ds.crs, ds.transform) == grid
        assert ds.nodata == 255 and ds.tags()["RUN"] == "t"
        assert ds.overviews(1)  # a pyramid for a reader zoomed out
        np.testing.assert_array_equal(ds.read(1), expected_classes)
    _assert_nearest_overviews(tmp_path / "class.tif", expected_classes, mapping)
    with rasterio.open(tmp_path / "prob.tif") as ds:
        assert ds.count == k and ds.tags()["PROBABILITY_SCALE"] == "255"
        assert [ds.descriptions[i] for i in range(k)] == mapping.names
        np.testing.assert_array_equal(ds.read(), expected_probs)
        assert ds.overviews(1)
    # the histogram counts what was written, no-data included
    counts = np.bincount(expected_classes.ravel(), minlength=256)
    np.testing.assert_array_equal(writer.histogram, counts)
    assert not list(tmp_path.glob("*.tmp*"))  # nothing half-written left beside the maps


def test_no_probs_writes_the_class_map_alone(tmp_path: Path) -> None:
    mapping = resolve_mapping("chesapeake7")
    k = mapping.num_classes
    logits = torch.randn(k, HEIGHT, WIDTH, generator=torch.Generator().manual_seed(1))
    classes, stored = encode_probs(logits.softmax(0), None)
    assert stored is None
    np.testing.assert_array_equal(classes, logits.argmax(0).numpy())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with rasterio.open(_source(tmp_path / "in.tif")) as src:
        writer = MapWriter(src, mapping, scratch, None)
        valid = np.ones((HEIGHT, WIDTH), dtype=bool)
        writer.write(EncodedStrip(0, classes.copy(), None, valid))
        writer.publish(tmp_path / "class.tif", None)
    # the overviews copied are those built while writing, not GDAL's made after the fact
    assert sorted(p.name for p in scratch.glob("class*")) == [
        "class.tif", "class.vrt", "class_ov2.tif", "class_ov4.tif"
    ]  # fmt: skip
    with rasterio.open(tmp_path / "class.tif") as ds:
        np.testing.assert_array_equal(ds.read(1), classes)
    _assert_nearest_overviews(tmp_path / "class.tif", classes, mapping)
    assert sorted(p.name for p in tmp_path.glob("*.tif")) == ["class.tif", "in.tif"]


def test_tags_naming_a_credential_are_written_redacted(tmp_path: Path) -> None:
    """A tag (the source image's path, a user's tag) that carries a signature is written
    redacted into both maps; the rest of its text stays."""
    mapping = resolve_mapping("chesapeake7")
    secret = "TAGSECRET0123456789"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with rasterio.open(_source(tmp_path / "in.tif")) as src:
        tags = {"SOURCE_IMAGE": f"tiles/t.tif?sv=2024-01-01&sig={secret}", "RUN": "r1"}
        writer = MapWriter(src, mapping, scratch, "uint8", tags=tags)
        probs = torch.full((mapping.num_classes, HEIGHT, WIDTH), 1.0 / mapping.num_classes)
        classes, stored = encode_probs(probs, "uint8")
        writer.write(EncodedStrip(0, classes, stored, np.ones((HEIGHT, WIDTH), dtype=bool)))
        writer.publish(tmp_path / "class.tif", tmp_path / "prob.tif")
    for name in ("class.tif", "prob.tif"):
        assert secret.encode() not in (tmp_path / name).read_bytes()
        with rasterio.open(tmp_path / name) as ds:
            assert ds.tags()["SOURCE_IMAGE"].startswith("tiles/t.tif?sv=")
            assert ds.tags()["RUN"] == "r1"


def _assert_nearest_overviews(path: Path, classes: np.ndarray, mapping) -> None:
    """The class COG's overviews: level k's pixel (i, j) is the map's (i * 2**k, j * 2**k)
    (the top-left of each block, as GDAL's NEAREST where sizes halve evenly); the colour
    table and no-data value are the full map's."""
    assert cog_validate(str(path))[0]
    with rasterio.open(path) as ds:
        factors = ds.overviews(1)
        assert factors == [2, 4]  # 700 x 600: 350 x 300, then 175 x 150 fits a block
        colors = ds.colormap(1)
    assert colors[0][:3] == mapping.classes[0].rgb and colors[255] == (0, 0, 0, 0)
    for level, factor in enumerate(factors):
        with rasterio.open(path, overview_level=level) as ov:
            assert (ov.height, ov.width) == (-(-HEIGHT // factor), -(-WIDTH // factor))
            assert ov.nodata == 255
            np.testing.assert_array_equal(ov.read(1), classes[::factor, ::factor])
