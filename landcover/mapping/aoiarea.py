"""Hectares inside a job's area of interest, each place counted once.

Each mapped tile with a pixel area (a projected CRS: tiles without one are left out, as of
the whole-tile hectares) claims the ground inside the area and its own footprint that no tile
before it claims. Tiles go in order of acquisition, the latest first (:mod:`.acquired`; an
unknown date after every known one), then in the job's order; a tile's claim is the area
(brought to the tile's CRS) cut by its footprint, less the footprints of the tiles before it
that meet it (shapely, in the tile's CRS: tiles of one CRS are compared exactly). Its class
map's pixels whose centres lie in its claim (:func:`landcover.aoi.grid.centres_inside`) are
counted per class, and times the pixel area give its hectares inside.

The counts are made at the job's end, by rank 0, from the class maps as they are (read in a
few threads, each only in the window of its tile's claim), rather than by each worker for its
tiles: a tile's claim depends on every other tile of the job (their footprints and dates,
which a worker does not know), and a rerun that skips complete tiles then counts them as the
first run did, from their maps, with nothing more to record or keep in step. The cost is one
more read of each class map's part inside the area.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely
from rasterio.crs import CRS

from landcover.aoi import AreaOfInterest
from landcover.aoi.area import WGS84
from landcover.aoi.grid import centres_inside, footprint, reproject
from landcover.classes import ClassMapping
from landcover.errors import DataError
from landcover.inference.sinks import open_dataset
from landcover.mapping.records import TileRecord

THREADS = 4
"""Class maps read at once."""


@dataclass(frozen=True)
class InsideTile:
    """What one tile counts inside the area (its claim).

    Attributes:
        tile: The input image.
        pixels: Pixels per class of its class map whose centres lie in its claim.
        pixel_area_m2: The area of one of its pixels.
    """

    tile: str
    pixels: list[int]
    pixel_area_m2: float

    @property
    def hectares(self) -> float:
        """Its classified ground inside the area, in hectares."""
        return sum(self.pixels) * self.pixel_area_m2 / 1e4


@dataclass(frozen=True)
class InsideArea:
    """A job's classes inside its area of interest.

    Attributes:
        source: The area's file.
        num_classes: Classes of the maps.
        tiles: The tiles that claim some ground inside the area, in claim order.
    """

    source: str
    num_classes: int
    tiles: list[InsideTile]

    def pixels(self) -> list[int]:
        """Pixels per class inside the area."""
        return [sum(t.pixels[i] for t in self.tiles) for i in range(self.num_classes)]

    def hectares(self) -> list[float]:
        """Hectares per class inside the area."""
        return [
            sum(t.pixels[i] * t.pixel_area_m2 for t in self.tiles) / 1e4
            for i in range(self.num_classes)
        ]

    def of(self, tile: str) -> InsideTile | None:
        """A tile's count, or ``None`` when it counts nothing (outside, or no pixel area)."""
        return next((t for t in self.tiles if t.tile == tile), None)

    def document(self, mapping: ClassMapping) -> dict[str, Any]:
        """The ``aoi`` block of ``summary.json``.

        Args:
            mapping: The classes.

        Returns:
            The source, the tiles that count pixels inside, the totals and each class's
            pixels and hectares inside.
        """
        pixels, hectares = self.pixels(), self.hectares()
        return {
            "source": self.source,
            "tiles": sum(sum(t.pixels) > 0 for t in self.tiles),
            "pixels": sum(pixels),
            "hectares": sum(hectares),
            "classes": [
                {"value": i, "name": name, "pixels": pixels[i], "hectares": hectares[i]}
                for i, name in enumerate(mapping.names)
            ],
        }

    def describe(self, mapping: ClassMapping) -> str:
        """A few words for the job's last line: the hectares per class inside the area."""
        hectares = self.hectares()
        parts = ", ".join(
            f"{n} {ha:,.1f} ha" for n, ha in zip(mapping.names, hectares, strict=True)
        )
        return f"inside {self.source}: {parts} ({sum(hectares):,.1f} ha in all)"


def _claim_order(records: list[TileRecord]) -> list[TileRecord]:
    """The mapped tiles with a pixel area, the latest acquired first, then in the job's order."""
    counted = [
        r
        for r in records
        if r.has_maps and r.grid is not None and r.grid.crs and r.pixel_area_m2 is not None
    ]

    def key(r: TileRecord) -> tuple[bool, float, int]:
        when = -r.acquired.datetime.timestamp() if r.acquired is not None else 0.0
        return (r.acquired is None, when, r.index)

    return sorted(counted, key=key)


def claims(records: list[TileRecord], area: AreaOfInterest) -> list[tuple[TileRecord, Any]]:
    """Each counted tile and its claim in its own CRS (see the module).

    Args:
        records: The job's records.
        area: The area of interest.

    Returns:
        ``(record, claim)`` in claim order, for the tiles whose claim is not empty.
    """
    ordered = _claim_order(records)
    crss: list[CRS] = [r.grid.rasterio_crs for r in ordered]  # type: ignore[union-attr,misc]
    shapes = [footprint(r.grid.affine, r.grid.width, r.grid.height) for r in ordered]  # type: ignore[union-attr]
    lonlat = [reproject(s, c, WGS84) for s, c in zip(shapes, crss, strict=True)]
    tree = shapely.STRtree(lonlat)
    inside: dict[str, Any] = {}  # the area in each CRS
    found = []
    for i, record in enumerate(ordered):
        crs = crss[i]
        if crs.to_wkt() not in inside:
            inside[crs.to_wkt()] = reproject(area.shape, WGS84, crs)
        claim = shapes[i].intersection(inside[crs.to_wkt()])
        before = [j for j in tree.query(lonlat[i]) if j < i]
        if before and not claim.is_empty:
            taken = shapely.union_all([reproject(shapes[j], crss[j], crs) for j in before])
            claim = claim.difference(taken)
        if claim.area > 0:
            found.append((record, claim))
    return found


def _count(record: TileRecord, claim: Any, num_classes: int) -> InsideTile:
    """Pixels per class of a tile's class map whose centres lie in its claim."""
    assert record.outputs is not None and record.pixel_area_m2 is not None
    path = record.outputs.class_map
    pixels = [0] * num_classes
    try:
        with open_dataset(path) as ds:
            found = centres_inside(ds, claim)
            if found is not None:
                window, inside = found
                classes = ds.read(1, window=window)
                kept = inside & (classes < num_classes)
                if ds.nodata is not None:
                    kept &= classes != ds.nodata
                pixels = np.bincount(classes[kept], minlength=num_classes)[:num_classes].tolist()
    except Exception as exc:
        raise DataError(
            f"{path}: could not be read to count the area of interest ({exc})"
        ) from None
    return InsideTile(record.tile, pixels, record.pixel_area_m2)


def count_inside(records: list[TileRecord], area: AreaOfInterest, num_classes: int) -> InsideArea:
    """Counts each class inside the area over a job's class maps, each place once.

    Args:
        records: The job's records (the mapped tiles' class maps are read).
        area: The area of interest.
        num_classes: Classes of the maps.

    Returns:
        The counts, tile by tile.

    Raises:
        DataError: If a class map cannot be read.
    """
    found = claims(records, area)
    counted: list[InsideTile] = []
    if found:
        with ThreadPoolExecutor(max_workers=min(THREADS, len(found))) as pool:
            counted = list(pool.map(lambda rc: _count(*rc, num_classes), found))
    return InsideArea(area.source, num_classes, counted)
