"""The job's area of interest, ``aoi.geojson``, as the browser draws it: GeoJSON in WGS 84.

The file is a GeoJSON FeatureCollection, Feature or bare geometry. GeoJSON is WGS 84
(RFC 7946); a file in another CRS says so in the older ``crs`` member
(``{"type": "name", "properties": {"name": "EPSG:26918"}}``, or an OGC URN), and its
geometries are reprojected (:mod:`landcover.aoi.area`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from landcover.aoi.area import read_geojson


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
    # the browser gets the outline, not the properties (an older job's held a host path)
    features = [{**f, "properties": {}} for f in read_geojson(path)]
    return {"type": "FeatureCollection", "features": features}
