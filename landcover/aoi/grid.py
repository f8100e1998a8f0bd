"""Geometry on a raster's grid: a grid's footprint, geometries between CRSs, pixels inside.

A grid's footprint is the polygon of its four corners in its own CRS (a rotated grid's too).
A geometry goes from one CRS to another vertex by vertex (rasterio), its edges first cut into
:data:`SEGMENTS` pieces each (shapely's ``segmentize``), so that a straight edge in one CRS
stays close to its curve in the other; between equal CRSs it is left as it is. A pixel is
inside a geometry when its centre is (GDAL's rasterisation without ``all_touched``, as
``rasterio.features.geometry_mask`` does it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shapely
from affine import Affine
from rasterio.crs import CRS
from rasterio.features import geometry_mask, geometry_window
from rasterio.warp import transform
from rasterio.windows import Window
from shapely.geometry import Polygon, mapping

SEGMENTS = 64
"""Pieces an edge as long as the geometry's larger side is cut into before reprojecting."""


def footprint(affine: Affine, width: int, height: int) -> Polygon:
    """The polygon a grid covers, in its own CRS.

    Args:
        affine: The grid's transform.
        width: Its columns.
        height: Its rows.

    Returns:
        The polygon of its four corners.
    """
    corners = [(0, 0), (width, 0), (width, height), (0, height)]
    return Polygon([affine * corner for corner in corners])


def reproject(geometry: shapely.Geometry, source: CRS, target: CRS) -> shapely.Geometry:
    """A geometry in another CRS, its edges densified first (see the module).

    Args:
        geometry: The geometry, in ``source``.
        source: Its CRS.
        target: The CRS wanted.

    Returns:
        The geometry in ``target`` (the same object when the CRSs are equal).
    """
    if source == target or geometry.is_empty:
        return geometry
    west, south, east, north = geometry.bounds
    step = max(east - west, north - south) / SEGMENTS
    dense = shapely.segmentize(geometry, step) if step > 0 else geometry

    def move(xy: np.ndarray) -> np.ndarray:
        xs, ys = transform(source, target, xy[:, 0], xy[:, 1])
        return np.column_stack([xs, ys])

    return shapely.make_valid(shapely.transform(dense, move))


def centres_inside(dataset: Any, geometry: shapely.Geometry) -> tuple[Window, np.ndarray] | None:
    """The window of a raster around a geometry and which of its pixels have their centre inside.

    Args:
        dataset: An open rasterio dataset (its transform, width and height are used).
        geometry: The geometry, in the dataset's CRS.

    Returns:
        ``(window, inside)``: the window (within the raster) that holds the geometry's part on
        it, and a boolean array of the window's shape, true where a pixel's centre is inside;
        ``None`` when no pixel's centre is.
    """
    polygons = [p for p in getattr(geometry, "geoms", [geometry]) if p.area > 0]
    if not polygons:
        return None
    shapes = [mapping(p) for p in polygons]
    try:
        window = geometry_window(dataset, shapes)
    except Exception:  # rasterio's WindowError: the geometry is off the raster
        return None
    if window.width <= 0 or window.height <= 0:
        return None
    inside = geometry_mask(
        shapes,
        out_shape=(int(window.height), int(window.width)),
        transform=dataset.window_transform(window),
        all_touched=False,
        invert=True,
    )
    return (window, inside) if inside.any() else None
