"""The tiles of a job that meet its area of interest (``landcover predict --aoi``).

Each tile's footprint (its grid's four corners, from its header: a range read for a blob) is
brought to WGS 84 and tested against the area; the tiles it does not meet are left out of the
job, with one line saying how many. A tile without a CRS cannot be placed: it is left out
with them, and named. A tile whose header cannot be read is kept: the job reports it as
failed, as it does without an area. Any list of tiles can be narrowed so (the arguments of
``landcover predict`` once resolved, or the tiles of a catalogue search).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import shapely

from landcover.aoi import AreaOfInterest
from landcover.aoi.area import WGS84
from landcover.aoi.grid import footprint, reproject
from landcover.errors import DataError
from landcover.inference.results import Grid
from landcover.mapping.outputs import read_grid

log = logging.getLogger("landcover")


def _ground(grid: Grid) -> shapely.Geometry:
    """A grid's footprint in WGS 84 (the grid has a CRS)."""
    crs = grid.rasterio_crs
    assert crs is not None
    return reproject(footprint(grid.affine, grid.width, grid.height), crs, WGS84)


def _meets(ground: shapely.Geometry, area: AreaOfInterest) -> bool:
    return ground.intersection(area.shape).area > 0


@dataclass(frozen=True)
class _Placed:
    """Where a tile lies, as read once from its header.

    Attributes:
        ground: Its footprint in WGS 84; ``None`` when it cannot be read or has no CRS.
        has_crs: Whether it has a CRS (an unreadable tile counts as having one: it is kept,
            and the job says why it fails).
    """

    ground: shapely.Geometry | None
    has_crs: bool = True


def _place(tile: str) -> _Placed:
    try:
        grid = read_grid(tile)
    except Exception:  # unreadable: kept, and the job says why it fails
        return _Placed(None)
    if grid.rasterio_crs is None:
        return _Placed(None, has_crs=False)
    return _Placed(_ground(grid))


def _span(placed: list[_Placed]) -> str:
    """Where the tiles lie in longitude and latitude, for the message of an area none meets."""
    bounds = [p.ground.bounds for p in placed if p.ground is not None]
    if not bounds:
        return ""
    w, s, e, n = (f(b[i] for b in bounds) for i, f in enumerate((min, min, max, max)))
    which = "the tile lies" if len(placed) == 1 else "the tiles lie"
    return f"; {which} at longitude {w:.5f} to {e:.5f}, latitude {s:.5f} to {n:.5f}"


def tiles_in_area(tiles: list[str], area: AreaOfInterest, concurrency: int = 16) -> list[str]:
    """The tiles that meet an area, in their order; the others are left out (see the module).

    Args:
        tiles: The job's tiles (paths or URLs).
        area: The area of interest.
        concurrency: Headers read at once.

    Returns:
        The tiles whose footprint meets the area, and those that cannot be read.

    Raises:
        DataError: If no tile meets the area.
    """
    if not tiles:
        return []
    with ThreadPoolExecutor(max_workers=min(concurrency, len(tiles))) as pool:
        placed = list(pool.map(_place, tiles))
    for tile, where in zip(tiles, placed, strict=True):
        if not where.has_crs:
            log.warning("%s: no CRS, it cannot be placed in %s: left out", tile, area.source)
    kept = [
        t
        for t, where in zip(tiles, placed, strict=True)
        if where.has_crs and (where.ground is None or _meets(where.ground, area))
    ]
    if not kept:
        which = "the tile does not" if len(tiles) == 1 else f"none of the {len(tiles)} tiles"
        w, s, e, n = area.bounds
        raise DataError(
            f"{area.source}: {which} meet the area of interest (--aoi), which spans longitude "
            f"{w:.5f} to {e:.5f}, latitude {s:.5f} to {n:.5f}{_span(placed)} (a GeoJSON "
            "position is longitude first)"
        )
    if len(kept) < len(tiles):
        log.info(
            "%d of %d tiles left out: they lie outside the area of interest %s",
            len(tiles) - len(kept),
            len(tiles),
            area.source,
        )
    return kept
