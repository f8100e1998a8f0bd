"""``landcover predict --aoi``: the tiles that meet the area, and each class's hectares inside it.

The expected hectares are built here on a common 1 m grid under the tiles: each pixel inside
the area (its centre in the polygon, by shapely's point test in the polygon's own CRS) is
claimed by the latest-acquired tile that covers it, ties by the job's largest-first order,
and counts its class in that tile's class map.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
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


def expected_inside(out: Path, num_classes: int) -> tuple[np.ndarray, dict[str, int]]:
    """Pixels per class inside the area, and per tile, from the class maps (see the module)."""
    west = min(c[0] for n, (_, _, _, c) in TILES.items() if n != "d")
    north = max(c[1] for n, (_, _, _, c) in TILES.items() if n != "d")
    width, height = 200, 200
    claimed = np.full((height, width), NODATA, dtype=np.int32)  # the claiming tile's class
    owner = np.full((height, width), "", dtype=object)
    for key in CLAIM_ORDER:
        name, w, h, (x, y) = TILES[key]
        with rasterio.open(out / f"{name}_naip_class.tif") as ds:
            classes = ds.read(1)
        col, row = int(x - west), int(north - y)
        free = owner[row : row + h, col : col + w] == ""
        claimed[row : row + h, col : col + w][free] = classes[free]
        owner[row : row + h, col : col + w][free] = key
    cols, rows = np.meshgrid(np.arange(width), np.arange(height))
    inside = shapely.contains_xy(AREA, west + cols + 0.5, north - rows - 0.5)
    counted = inside & (claimed != NODATA)
    pixels = np.bincount(claimed[counted], minlength=num_classes)
    per_tile = {TILES[k][0]: int((counted & (owner == k)).sum()) for k in CLAIM_ORDER}
    return pixels, per_tile


def job_numbers(out: Path) -> tuple[dict, list[dict], list[dict]]:
    summary = json.loads((out / "summary.json").read_text())["aoi"]
    classes = list(csv.DictReader((out / "classes.csv").read_text().splitlines()))
    tiles = list(csv.DictReader((out / "summary.csv").read_text().splitlines()))
    return summary, classes, tiles


def test_hectares_inside_the_area_count_each_place_once_and_hold_on_a_rerun(
    region: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    area = write_area(tmp_path / "area.geojson", mapping(AREA))
    out = tmp_path / "maps"
    result = predict(region, quick_checkpoint, out, "--aoi", str(area))
    assert result.returncode == 0, result.stderr
    assert "1 of 5 tiles left out: they lie outside the area of interest" in result.stderr
    assert not (out / f"{TILES['d'][0]}_naip_class.tif").exists()
    summary, classes, tiles = job_numbers(out)
    names = [row["class"] for row in classes]
    pixels, per_tile = expected_inside(out, len(names))

    assert [c["pixels"] for c in summary["classes"]] == pixels.tolist()
    assert [c["hectares"] for c in summary["classes"]] == pytest.approx(pixels / 1e4)
    assert summary["pixels"] == pixels.sum() and summary["tiles"] == 3
    assert summary["source"] == str(area)
    assert [float(row["aoi_hectares"]) for row in classes] == pytest.approx(pixels / 1e4)
    rows = {Path(row["tile"]).name.removesuffix("_naip.tif"): row for row in tiles}
    assert {k: int(rows[k]["aoi_pixels"]) for k in per_tile} == per_tile
    assert all(per_tile.values())  # each tile counts some ground of its own
    assert rows["geo"]["status"] == "done" and rows["geo"]["aoi_pixels"] == "0"
    for row in tiles:  # beside the CSV, whatever folder the command ran in
        if row["status"] == "done":
            expected = Path(row["tile"]).name.removesuffix(".tif") + "_class.tif"
            assert row["class_map"] == expected and (out / expected).is_file()
    last = result.stderr.strip().splitlines()[-1]
    assert f"inside {area}:" in last and f"({pixels.sum() / 1e4:,.1f} ha in all)" in last

    written = json.loads((out / "aoi.geojson").read_text())
    assert written == json.loads(json.dumps(read_area(area).feature_collection()))
    assert written["features"][0]["properties"] == {"source": area.name}  # not where it lay
    for item in json.loads((out / "stac_items.json").read_text())["features"]:
        assert item["properties"]["landcover:checkpoint"] == quick_checkpoint.name
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left

    # a rerun skips every tile and counts the same
    again = predict(region, quick_checkpoint, out, "--aoi", str(area))
    assert again.returncode == 0, again.stderr
    statuses = {r["status"] for r in csv.DictReader((out / "summary.csv").open())}
    assert statuses == {"skipped"}
    summary_again, classes_again, tiles_again = job_numbers(out)
    assert (summary_again, classes_again) == (summary, classes)
    inside = [(r["tile"], r["aoi_pixels"], r["aoi_ha"]) for r in tiles]
    assert [(r["tile"], r["aoi_pixels"], r["aoi_ha"]) for r in tiles_again] == inside


def test_a_job_without_an_area_has_no_aoi_columns(
    region: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = predict(region / f"{TILES['d'][0]}_naip.tif", quick_checkpoint, out)
    assert result.returncode == 0, result.stderr
    assert "aoi" not in json.loads((out / "summary.json").read_text())
    assert "aoi_hectares" not in (out / "classes.csv").read_text()
    assert "aoi_pixels" not in (out / "summary.csv").read_text()
    assert not (out / "aoi.geojson").exists()


def _swapped(area: Polygon) -> dict:
    """The area in WGS 84 with latitude first: a common slip that reads as another place."""
    xs, ys = transform(UTM, "EPSG:4326", *map(list, area.exterior.xy))
    return mapping(Polygon(zip(ys, xs, strict=True)))


@pytest.mark.parametrize(
    ("geometry", "crs", "needle"),
    [
        ({"type": "Point", "coordinates": [400100, 4299900]}, UTM, "it holds Point"),
        (mapping(shapely.affinity.translate(AREA, 5000)), UTM, "none of the 5 tiles meet"),
        (mapping(AREA), None, "x {:.6g} to {:.6g}, y {:.6g} to {:.6g}) are not longitude and"),
        (_swapped(AREA), None, "position is longitude first"),
    ],
    ids=["not-a-polygon", "outside-every-tile", "utm-without-crs", "latitude-first"],
)
def test_a_bad_area_is_one_line_and_writes_nothing(
    region: Path,
    quick_checkpoint: Path,
    tmp_path: Path,
    geometry: dict,
    crs: str | None,
    needle: str,
) -> None:
    area = write_area(tmp_path / "area.geojson", geometry, crs)
    w, s, e, n = AREA.bounds
    needle = needle.format(w, e, s, n)
    out = tmp_path / "maps"
    result = predict(region, quick_checkpoint, out, "--aoi", str(area))
    assert_one_line_error(result, str(area), needle)
    assert not out.exists()
