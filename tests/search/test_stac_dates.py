"""predict --stac: each tile's acquisition date is its STAC item's, in the maps' items and the
area's "latest flight first" rule, where the file itself says nothing of it.

Two 96 m tiles of one June 2021 flight, west and east, share a 32 m strip (a third of each:
two places, both mapped). Their names are not NAIP's and they have no date tags, so only
the catalogue (a local ItemCollection) knows that the west tile was flown three days after
the east one. The area cuts both and the strip: its pixels there are the west tile's, the
later flight's. Without the dates the job's order decides (equal sizes: by path, east
first), so the strip would be the east tile's.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pystac
import pytest
from shapely.geometry import box
from stacserver import naip_item, write_area

from conftest import run_cli, write_naip_tile

CRS = "EPSG:26918"
SIDE = 96  # metres (1 m pixels)
TILES = {  # name: upper-left corner, when flown
    "west": ((400000, 4300000), datetime(2021, 6, 5, 16, 30, tzinfo=timezone.utc)),
    "east": ((400064, 4300000), datetime(2021, 6, 2, tzinfo=timezone.utc)),
}
AREA = box(400010, 4299920, 400150, 4299990)  # in UTM 18N: both tiles and their strip


def _footprint(corner: tuple[int, int]):
    return box(corner[0], corner[1] - SIDE, corner[0] + SIDE, corner[1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("stacdates")
    rng = np.random.default_rng(1)
    items = []
    for name, (corner, flown) in TILES.items():
        image = rng.integers(1, 255, size=(4, SIDE, SIDE), dtype=np.uint8)
        path = write_naip_tile(folder / f"{name}_naip.tif", image, CRS, 1.0, corner)
        item = naip_item(name, _footprint(corner), CRS, flown.year, path.as_uri())
        item.datetime = flown
        items.append(item)
    items_file = folder / "items.json"
    items_file.write_text(json.dumps(pystac.ItemCollection(items).to_dict()))
    return {"items": items_file, "aoi": write_area(folder / "aoi.geojson", AREA, CRS)}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_stac_items_dates_reach_the_maps_items_and_the_latest_flight_counts_first(
    world: dict[str, Path], quick_checkpoint: Path, tmp_path: Path, workers: str
) -> None:
    out = tmp_path / "maps"
    result = run_cli(
        "predict", "--aoi", str(world["aoi"]), "--stac", str(world["items"]),
        "--collection", "naip", "--datetime", "2021", "-k", str(quick_checkpoint),
        "--out", str(out), "--no-preview", "--no-probs", "--workers", workers, "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr

    items = json.loads((out / "stac_items.json").read_text())["features"]
    times = {i["id"].removesuffix("_naip"): i["properties"] for i in items}
    assert set(times) == set(TILES)
    for name, (_, flown) in TILES.items():
        assert times[name]["datetime"] == flown.isoformat().replace("+00:00", "Z"), name
        assert times[name]["landcover:datetime_source"] == "STAC item"
        assert "start_datetime" not in times[name]

    # the later flight (west) claims the strip; the east tile counts the rest of its ground
    west, east = (_footprint(TILES[n][0]) for n in ("west", "east"))
    expected = {
        "west": round(AREA.intersection(west).area),
        "east": round(AREA.intersection(east).difference(west).area),
    }
    with (out / "summary.csv").open(newline="") as f:
        rows = {Path(r["tile"]).name.removesuffix("_naip.tif"): r for r in csv.DictReader(f)}
    assert {name: int(row["aoi_pixels"]) for name, row in rows.items()} == expected
