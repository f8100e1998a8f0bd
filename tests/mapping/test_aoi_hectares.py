"""``landcover predict --aoi``: the tiles that meet the area are mapped, the others left out."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import shapely
from rasterio.warp import transform
from shapely.geometry import Polygon, mapping

from landcover.aoi import read_area
from landcover.synthetic.synthetic import synthesize_scene

from conftest import assert_one_line_error, run_cli, write_naip_tile

UTM = "EPSG:26918"
NODATA = 255
# (name, width, height, upper-left corner): 1 m tiles on one integer grid. B, acquired last,
# lies on A and C; A and C, of one date, overlap too (A is larger: first in the job's order).
# D lies outside the area.
TILES = {
    "a": ("m_3807501_ne_18_1_20150601", 128, 128, (400000, 4300000)),
    "b": ("m_3807501_nw_18_1_20180701", 96, 80, (400064, 4299960)),
    "c": ("m_3807502_ne_18_1_20150601", 96, 96, (400100, 4299900)),
    "d": ("m_3807503_ne_18_1_20150601", 64, 64, (401000, 4300000)),
}
CLAIM_ORDER = ("b", "a", "c")
# the area, in UTM: it cuts every tile but D and covers ground no tile does; its edges are
# axis-aligned or at 45 degrees, at least 0.17 m from any pixel centre
AREA = Polygon(
    [
        (400030.25, 4299990),
        (400140.25, 4299990),
        (400180.25, 4299950),
        (400180.25, 4299830),
        (400030.25, 4299830),
    ]
)


def write_area(path: Path, geometry: dict, crs: str | None = UTM) -> Path:
    document: dict = {"type": "Feature", "properties": {}, "geometry": geometry}
    if crs is not None:
        document["crs"] = {"type": "name", "properties": {"name": crs}}
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aoi-region")
    for seed, (name, width, height, corner) in enumerate(TILES.values()):
        image, _ = synthesize_scene(height, width, np.random.default_rng(seed))
        write_naip_tile(folder / f"{name}_naip.tif", image, UTM, 1.0, corner)
    # a tile in degrees on the area: mapped, but with no pixel area it counts nothing
    lon, lat = transform(UTM, "EPSG:4326", [400120], [4299900])
    image, _ = synthesize_scene(64, 64, np.random.default_rng(9))
    write_naip_tile(folder / "geo_naip.tif", image, "EPSG:4326", 1e-5, (lon[0], lat[0]))
    return folder


def predict(tiles: Path, checkpoint: Path, out: Path, *extra: str):
    args = ["predict", str(tiles), "--checkpoint", str(checkpoint), "--out", str(out)]
    return run_cli(*args, "--workers", "1", "--device", "cpu", "--no-probs", "--no-preview", *extra)


def test_only_the_tiles_that_meet_the_area_are_mapped(
    region: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    area = write_area(tmp_path / "area.geojson", mapping(AREA))
    out = tmp_path / "maps"
    result = predict(region, quick_checkpoint, out, "--aoi", str(area))
    assert result.returncode == 0, result.stderr
    assert "1 of 5 tiles left out: they lie outside the area of interest" in result.stderr
    assert not (out / f"{TILES['d'][0]}_naip_class.tif").exists()
    statuses = {r["status"] for r in csv.DictReader((out / "summary.csv").open())}
    assert (
        statuses == {"done"} and len(json.loads((out / "summary.json").read_text())["tiles"]) == 4
    )
    written = json.loads((out / "aoi.geojson").read_text())
    assert written == json.loads(json.dumps(read_area(area).feature_collection()))
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_job_without_an_area_writes_no_area(
    region: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = predict(region / f"{TILES['d'][0]}_naip.tif", quick_checkpoint, out)
    assert result.returncode == 0, result.stderr
    assert not (out / "aoi.geojson").exists()


@pytest.mark.parametrize(
    ("geometry", "needle"),
    [
        ({"type": "Point", "coordinates": [400100, 4299900]}, "it holds Point"),
        (mapping(shapely.affinity.translate(AREA, 5000)), "none of the 5 tiles meet"),
    ],
    ids=["not-a-polygon", "outside-every-tile"],
)
def test_a_bad_area_is_one_line_and_writes_nothing(
    region: Path, quick_checkpoint: Path, tmp_path: Path, geometry: dict, needle: str
) -> None:
    area = write_area(tmp_path / "area.geojson", geometry)
    out = tmp_path / "maps"
    result = predict(region, quick_checkpoint, out, "--aoi", str(area))
    assert_one_line_error(result, str(area), needle)
    assert not out.exists()
