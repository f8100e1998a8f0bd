"""A predict job's outputs as GIS and STAC users read them (issue 42, item 9).

One real ``landcover predict`` run, started from a working directory two folders below the
data, maps five tiny tiles: two NAIP-named (old and new name forms; one lying on the other,
as two years of one quarter quad would), one with a space in its name and a TIFF date tag,
one without any date, and one in another CRS on the same ground as that one. The maps are
then read back with GDAL (its own ``gdalinfo``), rasterio and pystac; every expected value is
written out here, not taken from landcover.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import urlopen

import numpy as np
import pystac
import pytest
import rasterio
from gdalinfo import gdalinfo
from rio_cogeo.cogeo import cog_validate

from landcover.classes import resolve_mapping
from landcover.mapping.acquired import from_name, parse_time
from landcover.synthetic.synthetic import synthesize_scene

from conftest import REPO, write_naip_tile

MAPPING = resolve_mapping("chesapeake7")  # the tiny checkpoint's classes
K = len(MAPPING.names)
OLD_NAIP = "m_4709963_se_14_1_20100629"
NEW_NAIP = "m_3807504_ne_18_060_20180815"
DATED = "dated tile"
PLAIN = "plain"
OTHER_CRS = "plain utm84"
# name: (crs, upper-left corner); 96 x 96 px of 1 m. NEW_NAIP lies on OLD_NAIP (86 x 86 of
# its 96 x 96 m: 80 %), DATED shares a 10 m strip with OLD_NAIP and 20 x 86 m with NEW_NAIP
# (neighbours, as DOQQs overlap at their edges), OTHER_CRS is PLAIN's ground in WGS 84 / UTM.
TILES = {
    OLD_NAIP: ("EPSG:26918", (400000, 4300000)),
    NEW_NAIP: ("EPSG:26918", (400010, 4299990)),
    DATED: ("EPSG:26918", (400086, 4300000)),
    PLAIN: ("EPSG:26918", (401000, 4300000)),
    OTHER_CRS: ("EPSG:32618", (401000, 4300000)),
}
SIZE = 96


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, quick_checkpoint: Path) -> dict:
    """The tiles, written in ``base/my imagery``, mapped into ``base/maps`` from ``base/a/b``."""
    base = tmp_path_factory.mktemp("gis")
    imagery = base / "my imagery"
    imagery.mkdir()
    for seed, (name, (crs, corner)) in enumerate(TILES.items()):
        image, _ = synthesize_scene(SIZE, SIZE, np.random.default_rng(seed))
        write_naip_tile(imagery / f"{name}.tif", image, crs, 1.0, corner, tiled=False)
    with rasterio.open(imagery / f"{DATED}.tif", "r+") as ds:
        ds.update_tags(TIFFTAG_DATETIME="2015:07:04 10:30:00")  # the TIFF DateTime tag
    cwd = base / "a" / "b"
    cwd.mkdir(parents=True)
    inputs = [f"../../my imagery/{name}.tif" for name in TILES]
    result = subprocess.run(
        [sys.executable, "-m", "landcover", "predict", *inputs, "--out", "../../maps",
         "--checkpoint", str(quick_checkpoint), "--workers", "1"],
        cwd=cwd, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # this checkout's landcover
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    maps = base / "maps"
    collection = json.loads((maps / "stac_items.json").read_text())
    items = {feature["id"]: feature for feature in collection["features"]}
    assert set(items) == set(TILES)
    return {"maps": maps, "imagery": imagery, "items": items, "stderr": result.stderr}


# --- acquisition dates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "date"),
    [
        ("m_4709963_se_14_1_20100629.tif", "2010-06-29T00:00:00Z"),
        ("m_3807504_ne_18_060_20180815.tif", "2018-08-15T00:00:00Z"),
        ("az://naip/v002/md/2018/m_3807504_ne_18_060_20180815_20190206.tif", "2018-08-15T00:00:00Z"),
        ("/data/m_3807504_ne_18_060_20180815_naip.tif", "2018-08-15T00:00:00Z"),
        ("M_4709963_SE_14_1_20100629.TIF", "2010-06-29T00:00:00Z"),
        ("m_4709963_se_14_1_20101399.tif", None),  # no 13th month
        ("tile_20100629.tif", None),  # a date, but not a NAIP name
        ("xm_4709963_se_14_1_20100629.tif", None),
    ],
)  # fmt: skip
def test_naip_file_names_carry_the_acquisition_date(name: str, date: str | None) -> None:
    found = from_name(name)
    assert (found.time if found else None) == date


def test_date_tags_parse_as_tiff_exif_and_iso_write_them() -> None:
    assert str(parse_time("2015:07:04 10:30:00")) == "2015-07-04 10:30:00+00:00"
    assert str(parse_time("2015-07-04T10:30:00+02:00")) == "2015-07-04 08:30:00+00:00"
    assert str(parse_time("20150704")) == "2015-07-04 00:00:00+00:00"
    assert parse_time("0000:00:00 00:00:00") is None and parse_time("yesterday") is None
    assert parse_time("2999-01-01") is None  # not yet


def test_stac_datetime_is_the_acquisition_and_created_the_processing(job: dict) -> None:
    expected = {
        OLD_NAIP: ("2010-06-29T00:00:00Z", "file name"),
        NEW_NAIP: ("2018-08-15T00:00:00Z", "file name"),
        DATED: ("2015-07-04T10:30:00Z", "TIFFTAG_DATETIME tag"),
    }
    for name, feature in job["items"].items():
        properties = feature["properties"]
        created = properties["created"]
        assert created.endswith("Z") and created > "2026-01-01"
        item = pystac.Item.from_dict(feature)
        if name in expected:
            assert (properties["datetime"], properties["landcover:datetime_source"]) == (
                expected[name]
            )
            assert "start_datetime" not in properties
        else:  # unknown: null, with a range that ends when it was mapped
            assert properties["datetime"] is None and item.datetime is None
            assert properties["start_datetime"] == "1900-01-01T00:00:00Z"
            assert properties["end_datetime"] == created
            assert item.common_metadata.end_datetime is not None


# --- hrefs ---------------------------------------------------------------------------------


def _local(href: str, collection: Path) -> Path:
    """An href resolved by pystac from the collection's URI, as a local path."""
    uri = pystac.utils.make_absolute_href(href, collection.as_uri())
    parsed = urlparse(uri)
    assert parsed.scheme == "file", uri
    return Path(unquote(parsed.path))


def test_derived_from_resolves_from_the_items_folder(job: dict) -> None:
    collection = job["maps"] / "stac_items.json"
    for name, feature in job["items"].items():
        (link,) = [link for link in feature["links"] if link["rel"] == "derived_from"]
        assert " " not in link["href"] and "my%20imagery" in link["href"], link["href"]
        source = _local(link["href"], collection)
        assert source.is_file(), link["href"]
        assert source.samefile(job["imagery"] / f"{name}.tif")


@contextmanager
def _served(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on the loopback (as a catalogue on blob storage is read)."""
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_hrefs_with_spaces_are_percent_encoded(job: dict) -> None:
    collection = job["maps"] / "stac_items.json"
    feature = job["items"][DATED]
    assert feature["assets"]["class"]["href"] == "./dated%20tile_class.tif"
    assert feature["assets"]["probabilities"]["href"] == "./dated%20tile_prob.tif"
    for asset in feature["assets"].values():
        assert _local(asset["href"], collection).is_file(), asset["href"]
        with urlopen(pystac.utils.make_absolute_href(asset["href"], collection.as_uri())):
            pass  # a file: URI that the standard library opens
    # the collection served over HTTP: pystac reads it, resolves each asset and reads it
    with _served(job["maps"]) as root:
        items = pystac.ItemCollection.from_file(f"{root}/stac_items.json")
        item = next(i for i in items if i.id == DATED)
        stats_url = pystac.utils.make_absolute_href(
            item.assets["stats"].href, f"{root}/stac_items.json"
        )
        assert stats_url == f"{root}/dated%20tile_stats.json"
        stats = json.loads(pystac.StacIO.default().read_text(stats_url))
        assert stats["tile"].endswith("dated tile.tif")
        for asset in item.assets.values():
            with urlopen(pystac.utils.make_absolute_href(asset.href, f"{root}/stac_items.json")):
                pass


# --- the maps in GDAL -----------------------------------------------------------------------


def _colour_table(report: str) -> dict[int, tuple[int, ...]]:
    table = report.split("Color Table", 1)[1].splitlines()[1:]
    entries = {}
    for line in table:
        value, _, rgba = line.strip().partition(": ")
        if not value.isdigit():
            break
        entries[int(value)] = tuple(int(v) for v in rgba.split(","))
    return entries


def test_class_cog_has_category_names_and_transparent_unused_colours(job: dict) -> None:
    path = job["maps"] / f"{OLD_NAIP}_class.tif"
    report = gdalinfo(path)
    categories = report.split("Categories:", 1)[1].splitlines()[1 : K + 1]
    assert [line.strip() for line in categories] == [
        f"{i}: {name}" for i, name in enumerate(MAPPING.names)
    ]
    table = _colour_table(report)
    assert len(table) == 256
    for value in range(256):
        if value < K:
            assert table[value] == (*MAPPING.classes[value].rgb, 255), value
        else:  # no-data and every value past the classes
            assert table[value][3] == 0, value
    with rasterio.open(path) as ds:
        assert ds.colormap(1)[K][3] == 0 and ds.colormap(1)[0][3] == 255
    assert cog_validate(str(path), strict=True)[0]
    # the mosaic agrees with the tiles' maps
    vrt = _colour_table(gdalinfo(job["maps"] / "mosaic_class_epsg26918.vrt"))
    assert vrt == table


def test_probability_cog_has_gdal_scale_and_offset(job: dict) -> None:
    path = job["maps"] / f"{OLD_NAIP}_prob.tif"
    report = gdalinfo(path)
    assert report.count("Offset: 0,   Scale:0.00392156862745098") == K
    with rasterio.open(path) as ds:
        assert ds.scales == (1 / 255,) * K and ds.offsets == (0.0,) * K
        assert ds.tags()["PROBABILITY_SCALE"] == "255"
        probabilities = ds.read(masked=True).astype(np.float64) * ds.scales[0] + ds.offsets[0]
        assert np.allclose(probabilities.sum(axis=0).compressed(), 1.0, atol=K / 255)
    assert cog_validate(str(path), strict=True)[0]
    with rasterio.open(job["maps"] / "mosaic_prob_epsg26918.vrt") as ds:
        assert ds.scales == (1 / 255,) * K and ds.offsets == (0.0,) * K
    root = ET.parse(job["maps"] / "mosaic_prob_epsg26918.vrt").getroot()
    assert len(root.findall("VRTRasterBand/Scale")) == K


# --- ground mapped twice ---------------------------------------------------------------------


def test_tiles_on_the_same_ground_are_named_and_counted_in_the_summary(job: dict) -> None:
    warnings = [line for line in job["stderr"].splitlines() if "cover the same ground" in line]
    pairs = {
        frozenset(Path(t).name for t in line.split(" cover the same ground")[0].split(" and "))
        for line in warnings
        if " and " in line
    }
    old_new = frozenset({f"{OLD_NAIP}.tif", f"{NEW_NAIP}.tif"})
    plain = frozenset({f"{PLAIN}.tif", f"{OTHER_CRS}.tif"})
    assert pairs == {old_new, plain}, job["stderr"]  # not the neighbours sharing an edge strip
    summary = json.loads((job["maps"] / "summary.json").read_text())
    overlaps = {frozenset(Path(t).name for t in o["tiles"]): o for o in summary["overlaps"]}
    assert set(overlaps) == {old_new, plain}
    assert overlaps[old_new]["fraction"] == pytest.approx(86 * 86 / 96**2, abs=1e-4)
    assert overlaps[old_new]["hectares"] == pytest.approx(86 * 86 / 1e4, rel=1e-3)
    assert overlaps[plain]["fraction"] > 0.95  # NAD83 and WGS 84 UTM: about a metre apart
    last = job["stderr"].strip().splitlines()[-1]
    assert "2 pairs of tiles cover the same ground" in last, last
