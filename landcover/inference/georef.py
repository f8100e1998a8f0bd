"""Georeferencing a map keeps from its tile: ground control points where the tile has no CRS."""

from __future__ import annotations

from typing import Any

from rasterio.control import GroundControlPoint
from rasterio.crs import CRS


def ground_control(src: Any) -> tuple[list[GroundControlPoint], CRS] | None:
    """A raster's ground control points where they are its only georeferencing.

    Args:
        src: The open raster.

    Returns:
        ``(gcps, crs)`` for a raster with GCPs and no CRS of its own (a scan or an
        unrectified image), else None.
    """
    points, crs = src.gcps
    return (list(points), crs) if points and src.crs is None else None


def no_crs_note(src: Any) -> str:
    """How a tile without a CRS is mapped, for its log line.

    Args:
        src: The open tile.

    Returns:
        A few words: its pixel grid, or the GCPs the maps keep.
    """
    gcps = ground_control(src)
    if gcps is None:
        return "no CRS (the maps keep its pixel grid)"
    return f"no CRS but {len(gcps[0])} GCPs in {gcps[1] or 'no CRS'} (the maps keep them)"
