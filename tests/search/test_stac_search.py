"""predict --aoi --stac: a region's tiles from a STAC API on loopback (rustac serve) or a file.

Four places of 96 m tiles in UTM 18N, one flown twice (2018, 2021), one beyond the area; the
area of interest (declared in UTM) cuts three of them. The expected tiles come from the
test's own geometry: footprints against the area, in the tiles' CRS.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pystac
import pytest
from shapely.geometry import box
from shapely.ops import unary_union
from stacserver import naip_collection, naip_item, stac_api, write_area

from landcover.aoi import read_area
from landcover.search import SearchRequest, find_tiles

from conftest import assert_one_line_error, run_cli, write_naip_tile

CRS = "EPSG:26918"
SIDE = 96  # metres (1 m pixels)
# name, upper-left corner, year of the flight
TILES = [
    ("p1_2018", (400000, 4300000), 2018),
    ("p1_2021", (400000, 4300000), 2021),  # the same place, flown again
    ("p2_2021", (400090, 4300000), 2021),  # beside p1, sharing a 6 m strip
    ("p3_2021", (400000, 4299900), 2021),
    ("p4_2021", (401000, 4300000), 2021),  # beyond the area
]
AREA = box(400050, 4299880, 400150, 4299980)  # in UTM 18N: cuts p1, p2 and p3


def _footprint(corner: tuple[int, int]):
    return box(corner[0], corner[1] - SIDE, corner[0] + SIDE, corner[1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("stacworld")
    rng = np.random.default_rng(0)
    items = []
    for name, corner, year in TILES:
        image = rng.integers(1, 255, size=(4, SIDE, SIDE), dtype=np.uint8)
        path = write_naip_tile(folder / f"{name}_naip.tif", image, CRS, 1.0, corner)
        items.append(naip_item(name, _footprint(corner), CRS, year, path.as_uri()))
    collection = naip_collection("NAIP, a few tiles of it")
    items_file = folder / "items.json"
    items_file.write_text(json.dumps(pystac.ItemCollection(items).to_dict()))
    catalogue = pystac.Catalog("local", "the same items as a catalogue on disk")
    on_disk = naip_collection("NAIP, a few tiles of it")
    catalogue.add_child(on_disk)
    on_disk.add_items([item.clone() for item in items])
    catalogue.normalize_hrefs(str(folder / "catalogue"))
    on_disk.make_all_asset_hrefs_relative()  # as a self-contained catalogue holds its images
    catalogue.save(pystac.CatalogType.SELF_CONTAINED)
    aoi = write_area(folder / "aoi.geojson", AREA, CRS)
    with stac_api(folder, collection, items) as url:
        yield {
            "folder": folder,
            "url": url,
            "file": items_file,
            "catalogue": folder / "catalogue" / "catalog.json",
            "aoi": aoi,
        }


def _expected(dates: range) -> set[str]:
    """The test's own answer: the latest flight in ``dates`` of each place the area cuts."""
    places: dict[tuple[int, int], tuple[int, str]] = {}
    for name, corner, year in TILES:
        if year in dates and _footprint(corner).intersects(AREA):
            places[corner] = max(places.get(corner, (0, "")), (year, name))
    return {f"{name}_naip.tif" for _, name in places.values()}


@pytest.mark.parametrize(
    ("dates", "years"), [(None, range(2000, 2100)), ("2018", range(2018, 2019))]
)
def test_the_api_and_a_file_give_the_latest_flight_of_each_place_the_area_cuts(
    world: dict, dates: str | None, years: range
) -> None:
    area = read_area(world["aoi"])
    for source in (world["url"], str(world["file"]), str(world["catalogue"])):
        found = find_tiles(SearchRequest(source, area, "naip", dates))
        assert {Path(t.href).name for t in found} == _expected(years), source
        assert all(Path(t.href).is_file() for t in found), source  # relative hrefs resolved
        assert all(t.collection == "naip" and t.acquired is not None for t in found)


def test_predict_maps_the_tiles_the_area_touches_and_a_rerun_skips_them(
    world: dict, quick_checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    args = (
        "predict", "--aoi", str(world["aoi"]), "--stac", world["url"], "--collection", "naip",
        "-k", str(quick_checkpoint), "--out", str(out), "--no-preview", "--no-probs",
    )  # fmt: skip
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    tiles = json.loads((out / "summary.json").read_text())["tiles"]
    assert {Path(t["tile"]).name for t in tiles} == _expected(range(2000, 2100))
    assert {t["status"] for t in tiles} == {"done"}
    assert "older flights of those places left out" in first.stderr
    # each 1 m pixel whose centre is inside the area and some kept tile, once: on this grid
    # of whole metres, the square metres of the area's intersection with the tiles' union
    kept = [c for n, c, _ in TILES if f"{n}_naip.tif" in _expected(range(2000, 2100))]
    inside = AREA.intersection(unary_union([_footprint(c) for c in kept])).area
    summary = json.loads((out / "summary.json").read_text())
    assert summary["aoi"]["pixels"] == round(inside)
    assert (out / "aoi.geojson").is_file()
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    tiles = json.loads((out / "summary.json").read_text())["tiles"]
    assert {t["status"] for t in tiles} == {"skipped"}


def _outside(folder: Path) -> Path:
    path = folder / "far.geojson"
    ring = [[-100.0, 40.0], [-99.9, 40.0], [-99.9, 40.1], [-100.0, 40.1], [-100.0, 40.0]]
    path.write_text(json.dumps({"type": "Polygon", "coordinates": [ring]}))
    return path


def _line(folder: Path) -> Path:
    path = folder / "line.geojson"
    path.write_text(json.dumps({"type": "LineString", "coordinates": [[-76, 38], [-75, 39]]}))
    return path


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("no such collection", "--collection landsat: no such collection"),
        ("outside every item", "touches the area of interest"),
        ("not a polygon", "must be polygons or multipolygons"),
        ("a refusing API", "the STAC API cannot be reached or refused"),
        ("a file that is not STAC", "not a STAC file"),
        ("plain http off loopback", "use https"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(
    world: dict, quick_checkpoint: Path, tmp_path: Path, case: str, says: str
) -> None:
    aoi, url, collection = str(world["aoi"]), world["url"], "naip"
    if case == "no such collection":
        collection = "landsat"
    elif case == "outside every item":
        aoi = str(_outside(tmp_path))
    elif case == "not a polygon":
        aoi = str(_line(tmp_path))
    elif case == "a refusing API":
        url = "http://127.0.0.1:9"  # discard: nothing listens
    elif case == "a file that is not STAC":
        url = str(world["aoi"])
    elif case == "plain http off loopback":
        url = "http://stac.example.com/api"
    out = tmp_path / "maps"
    result = run_cli(
        "predict", "--aoi", aoi, "--stac", url, "--collection", collection,
        "-k", str(quick_checkpoint), "--out", str(out),
    )  # fmt: skip
    assert_one_line_error(result, says)
    assert not out.exists()
