"""Reading an area of interest (landcover.aoi.area): polygons in any declared CRS, to WGS 84."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyproj import Transformer

from landcover.aoi import read_area
from landcover.errors import DataError

SQUARE_UTM = [[400000, 4300000], [401000, 4300000], [401000, 4301000], [400000, 4301000]]


def _write(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_a_polygon_in_a_declared_utm_crs_is_read_in_wgs84(tmp_path: Path) -> None:
    ring = [*SQUARE_UTM, SQUARE_UTM[0]]
    path = _write(
        tmp_path / "aoi.geojson",
        {
            "type": "FeatureCollection",
            "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::26918"}},
            "features": [
                {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [ring]}}
            ],
        },
    )  # fmt: skip
    area = read_area(path)
    to_wgs84 = Transformer.from_crs("EPSG:26918", "EPSG:4326", always_xy=True)
    corners = [to_wgs84.transform(x, y) for x, y in SQUARE_UTM]
    west, south, east, north = area.bounds
    assert west == pytest.approx(min(c[0] for c in corners), abs=1e-9)
    assert south == pytest.approx(min(c[1] for c in corners), abs=1e-9)
    assert east == pytest.approx(max(c[0] for c in corners), abs=1e-9)
    assert north == pytest.approx(max(c[1] for c in corners), abs=1e-9)
    assert area.geometry["type"] == "Polygon"
    written = area.feature_collection()
    assert written["features"][0]["geometry"] == area.geometry


def test_features_of_a_collection_make_one_area(tmp_path: Path) -> None:
    def square(x: float) -> dict:
        ring = [[x, 38.0], [x + 0.01, 38.0], [x + 0.01, 38.01], [x, 38.01], [x, 38.0]]
        return {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [ring]}}  # fmt: skip

    path = _write(
        tmp_path / "two.geojson",
        {"type": "FeatureCollection", "features": [square(-76.0), square(-75.5)]},
    )
    area = read_area(path)
    assert area.geometry["type"] == "MultiPolygon"
    assert area.shape.area == pytest.approx(2 * 0.01 * 0.01)


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"type": "LineString", "coordinates": [[-76, 38], [-75, 39]]}, "it holds LineString"),
        ({"type": "FeatureCollection", "features": []}, "it holds no geometry"),
        ({"type": "Polygon", "coordinates": [[[-76, 38], [-75, 38], [-76, 38]]]}, "no area"),
        ({"type": "Polygon", "crs": 5}, "not a GeoJSON area of interest"),
    ],
)
def test_what_is_not_an_area_is_one_line(tmp_path: Path, document: dict, says: str) -> None:
    path = _write(tmp_path / "bad.geojson", document)
    with pytest.raises(DataError, match=says) as raised:
        read_area(path)
    assert "\n" not in str(raised.value) and str(path) in str(raised.value)


def test_a_file_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "aoi.geojson"
    path.write_text("POLYGON ((0 0, 1 0, 1 1, 0 0))")
    with pytest.raises(DataError, match="not a GeoJSON area of interest"):
        read_area(path)
    with pytest.raises(DataError, match="no such file"):
        read_area(tmp_path / "missing.geojson")


def test_an_area_in_blob_storage_is_read_as_a_local_one(tmp_path: Path) -> None:
    """``--aoi az://...``: read through the storage layer (here its in-process ``memory://``),
    not as a local path (which turned ``https://`` into ``https:/``)."""
    import fsspec

    ring = [*SQUARE_UTM, SQUARE_UTM[0]]
    document = {
        "type": "Feature",
        "crs": {"type": "name", "properties": {"name": "EPSG:26918"}},
        "properties": {},
        "geometry": {"type": "Polygon", "coordinates": [ring]},
    }
    local = _write(tmp_path / "aoi.geojson", document)
    fsspec.filesystem("memory").pipe_file("memory://aoi-test/aoi.geojson", local.read_bytes())
    remote = read_area("memory://aoi-test/aoi.geojson")
    assert remote.geometry == read_area(local).geometry
    assert remote.source == "memory://aoi-test/aoi.geojson"
    with pytest.raises(DataError, match=r"memory://aoi-test/none\.geojson: no such file"):
        read_area("memory://aoi-test/none.geojson")
