"""Reading an area of interest: a GeoJSON polygon or multipolygon, in WGS 84.

The file is a GeoJSON FeatureCollection, a Feature or a bare geometry. GeoJSON is WGS 84
(RFC 7946); a file in another CRS says so in the older ``crs`` member
(``{"type": "name", "properties": {"name": "EPSG:26918"}}``, or an OGC URN), and its
geometries are reprojected here (rasterio). Its polygons (every Polygon and MultiPolygon of
its features) make one area, their union (shapely); any other geometry (a point, a line) is
refused with one line that says what the file holds instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import shapely
from rasterio.crs import CRS
from rasterio.errors import CRSError
from rasterio.warp import transform_geom
from shapely.geometry import mapping, shape

from landcover.errors import DataError

WGS84 = "EPSG:4326"
_POLYGONS = ("Polygon", "MultiPolygon")


@dataclass(frozen=True)
class AreaOfInterest:
    """An area of interest in WGS 84.

    Attributes:
        geometry: Its GeoJSON Polygon or MultiPolygon (longitude, latitude).
        source: The file it was read from (named in messages).
    """

    geometry: dict[str, Any]
    source: str

    @property
    def shape(self) -> shapely.Geometry:
        """The area as a shapely geometry (WGS 84)."""
        return shape(self.geometry)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """West, south, east, north in degrees."""
        return tuple(self.shape.bounds)  # type: ignore[return-value]

    def feature_collection(self) -> dict[str, Any]:
        """The area as a one-feature GeoJSON FeatureCollection (``aoi.geojson``).

        Its ``source`` property is the file's name (redacted), not where it lies: the job's
        folder travels (STAC, the viewer) and a host path or a URL's query would go with it.
        """
        from landcover import storage
        from landcover.redaction import redact

        feature = {"type": "Feature", "properties": {"source": storage.name(redact(self.source))}}
        return {"type": "FeatureCollection", "features": [{**feature, "geometry": self.geometry}]}


def features(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The features of a FeatureCollection, a Feature or a bare geometry (those with one)."""
    kind = document.get("type")
    if kind == "FeatureCollection":
        return [f for f in document["features"] if f.get("geometry")]
    if kind == "Feature":
        return [document] if document.get("geometry") else []
    return [{"type": "Feature", "properties": {}, "geometry": document}]


def declared_crs(document: dict[str, Any]) -> str | None:
    """The CRS a document declares in its ``crs`` member, or ``None`` (WGS 84)."""
    member = document.get("crs")
    if not member:
        return None
    name = str(member["properties"]["name"])
    if name.startswith("urn:ogc:def:crs:"):  # urn:ogc:def:crs:EPSG::26918, urn:...:OGC:1.3:CRS84
        authority, code = name.split(":")[4], name.split(":")[-1]
        name = WGS84 if code == "CRS84" else f"{authority}:{code}"
    return CRS.from_user_input(name).to_string()


def _read_text(path: str) -> str:
    """A file's text: a local path, or a blob URL read through the storage layer."""
    from landcover import storage

    if storage.is_remote(path):
        return storage.read_bytes(path).decode("utf-8")
    return Path(path).read_text()


def read_geojson(path: str | Path) -> list[dict[str, Any]]:
    """The features of a GeoJSON file, their geometries in WGS 84.

    Args:
        path: The file: a path or a blob URL (``az://``, ``abfs://``).

    Returns:
        Its features (those with a geometry).

    Raises:
        DataError: If the file is missing, not GeoJSON, or declares a CRS rasterio does not
            know.
        StorageError: If a blob cannot be read (after bounded retries), or the URL is not
            one landcover reads.
    """
    try:
        document = json.loads(_read_text(str(path)))
        found = features(document)
        crs = declared_crs(document)
        if crs is not None and crs != WGS84:
            found = [{**f, "geometry": transform_geom(crs, WGS84, f["geometry"])} for f in found]
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except CRSError as exc:
        raise DataError(f"{path}: its CRS is not one rasterio knows ({exc})") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: not a GeoJSON area of interest ({exc})") from None
    return found


def read_area(path: str | Path) -> AreaOfInterest:
    """Reads an area of interest: the union of a GeoJSON file's polygons, in WGS 84.

    Args:
        path: A GeoJSON file (FeatureCollection, Feature or geometry) of polygons or
            multipolygons.

    Returns:
        The area.

    Raises:
        DataError: If the file cannot be read as GeoJSON, holds no polygon (what it holds is
            named), its polygons cover no area, or its coordinates cannot be longitude and
            latitude (a projected file without a ``crs`` member).
    """
    found = read_geojson(path)
    kinds = sorted({str(f["geometry"].get("type")) for f in found})
    if not found or any(kind not in _POLYGONS for kind in kinds):
        held = ", ".join(kinds) if kinds else "no geometry"
        raise DataError(
            f"{path}: an area of interest must be polygons or multipolygons; it holds {held}"
        )
    try:
        union = shapely.union_all([shapely.make_valid(shape(f["geometry"])) for f in found])
    except (shapely.errors.ShapelyError, ValueError, TypeError) as exc:
        raise DataError(f"{path}: its polygons are not valid geometry ({exc})") from None
    polygons = [g for g in getattr(union, "geoms", [union]) if g.geom_type in _POLYGONS]
    area = shapely.union_all(polygons) if polygons else None
    if area is None or area.is_empty or area.area == 0:
        raise DataError(f"{path}: its polygons cover no area")
    west, south, east, north = area.bounds
    if west < -180 or east > 180 or south < -90 or north > 90:
        raise DataError(
            f"{path}: its coordinates (x {west:.6g} to {east:.6g}, y {south:.6g} to {north:.6g}) "
            "are not longitude and latitude, which GeoJSON is (RFC 7946): reproject it to "
            'WGS 84, or name its CRS in a "crs" member'
        )
    return AreaOfInterest(mapping(area), str(path))
