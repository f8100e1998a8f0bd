"""The job's area of interest, ``aoi.geojson``, as the browser draws it: GeoJSON in WGS 84.

The file is a GeoJSON FeatureCollection, Feature or bare geometry. GeoJSON is WGS 84
(RFC 7946); a file in another CRS says so in the older ``crs`` member
(``{"type": "name", "properties": {"name": "EPSG:26918"}}``, or an OGC URN), and its
geometries are reprojected here (rasterio).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rasterio.crs import CRS
from rasterio.errors import CRSError
from rasterio.warp import transform_geom

from landcover.errors import DataError

WGS84 = "EPSG:4326"


def _features(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The features of a FeatureCollection, a Feature or a bare geometry."""
    kind = document.get("type")
    if kind == "FeatureCollection":
        return [f for f in document["features"] if f.get("geometry")]
    if kind == "Feature":
        return [document] if document.get("geometry") else []
    return [{"type": "Feature", "properties": {}, "geometry": document}]


def _declared_crs(document: dict[str, Any]) -> str | None:
    """The CRS a document declares in its ``crs`` member, or ``None`` (WGS 84)."""
    member = document.get("crs")
    if not member:
        return None
    name = str(member["properties"]["name"])
    if name.startswith("urn:ogc:def:crs:"):  # urn:ogc:def:crs:EPSG::26918, urn:...:OGC:1.3:CRS84
        authority, code = name.split(":")[4], name.split(":")[-1]
        name = WGS84 if code == "CRS84" else f"{authority}:{code}"
    return CRS.from_user_input(name).to_string()


def read_aoi(path: Path) -> dict[str, Any] | None:
    """The area of interest as a GeoJSON FeatureCollection in WGS 84.

    Args:
        path: ``aoi.geojson`` in the job's folder.

    Returns:
        The collection, or ``None`` when there is no such file.

    Raises:
        DataError: If the file is not GeoJSON, or declares a CRS rasterio does not know.
    """
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text())
        features = _features(document)
        crs = _declared_crs(document)
        if crs is not None and crs != WGS84:
            features = [
                {**f, "geometry": transform_geom(crs, WGS84, f["geometry"])} for f in features
            ]
    except CRSError as exc:
        raise DataError(f"{path}: its CRS is not one rasterio knows ({exc})") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: not a GeoJSON area of interest ({exc})") from None
    return {"type": "FeatureCollection", "features": features}
