"""Tiles of one job that cover the same ground: two years of one place, say.

A job's hectares sum its tiles as they are (:mod:`.summary`), so ground mapped twice counts
twice. Neighbouring NAIP DOQQs overlap at their edges by design (a few hundred metres of a
tile about 6 km across: about a tenth of it), and that is left as it is; but two tiles of
which one lies mostly on the other (two flights of one quarter quad, a tile listed from two
folders) are almost certainly the same ground mapped twice, and the job says so: a warning
line naming each such pair, ``overlaps`` in ``summary.json``, and the job's last line.
Counting each place once would mean choosing, pixel by pixel, which tile's classes hold
there (which year?): that is left to the user, who can map each year in its own job.

Two tiles cover the same ground when their footprints' intersection is at least
:data:`SAME_GROUND` of the smaller footprint: exact for north-up tiles in one CRS (their
bounds), and from the footprints' WGS 84 bounding boxes otherwise (within a few percent for
tiles of a few kilometres). Tiles are swept west to east, so a job of thousands of tiles
compares each only with the tiles beside it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rasterio.warp import transform_bounds

from landcover.mapping.records import TileRecord

log = logging.getLogger("landcover")

SAME_GROUND = 0.5
"""Share of the smaller tile's footprint two tiles must share to cover the same ground."""

NAMED = 10
"""Pairs named in warning lines; the others are counted in one more line."""

_Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Overlap:
    """Two tiles that cover the same ground.

    Attributes:
        tiles: The two tiles (in the job's order by path).
        fraction: The share of the smaller tile's footprint they share.
        hectares: About how much ground counts twice (the smaller tile's area times
            ``fraction``; ``None`` when its pixel area is unknown).
    """

    tiles: tuple[str, str]
    fraction: float
    hectares: float | None


def _area(box: _Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _shared(a: _Box, b: _Box) -> float:
    """The intersection of two boxes as a share of the smaller one's area."""
    inter = (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))
    smaller = min(_area(a), _area(b))
    return _area(inter) / smaller if smaller > 0 else 0.0


def _lonlat_box(record: TileRecord) -> _Box:
    assert record.grid is not None
    west, south, east, north = transform_bounds(
        record.grid.rasterio_crs, "EPSG:4326", *record.grid.bounds, densify_pts=21
    )
    return (west, south, east, north)


def _fraction(a: TileRecord, b: TileRecord, boxes: dict[str, _Box]) -> float:
    """The share of the smaller footprint that two tiles share."""
    assert a.grid is not None and b.grid is not None
    if a.grid.crs == b.grid.crs and a.grid.north_up and b.grid.north_up:
        return _shared(a.grid.bounds, b.grid.bounds)  # type: ignore[arg-type]
    return _shared(boxes[a.tile], boxes[b.tile])


def _hectares(a: TileRecord, b: TileRecord, fraction: float) -> float | None:
    areas = [
        r.grid.width * r.grid.height * r.pixel_area_m2 / 1e4
        for r in (a, b)
        if r.grid is not None and r.pixel_area_m2 is not None
    ]
    return min(areas) * fraction if len(areas) == 2 else None


def same_ground(records: list[TileRecord]) -> list[Overlap]:
    """The pairs of a job's mapped tiles that cover the same ground (see the module).

    Args:
        records: The job's records (tiles without maps or without a CRS are ignored).

    Returns:
        The pairs, by their first tile's path.
    """
    mapped = sorted(
        (r for r in records if r.has_maps and r.grid is not None and r.grid.crs),
        key=lambda r: r.tile,
    )
    boxes: dict[str, _Box] = {}
    for record in mapped:
        try:
            boxes[record.tile] = _lonlat_box(record)
        except Exception:  # a CRS that cannot reach WGS 84: nothing to compare it with
            continue
    found: list[Overlap] = []
    active: list[TileRecord] = []
    for record in sorted((r for r in mapped if r.tile in boxes), key=lambda r: boxes[r.tile][0]):
        box = boxes[record.tile]
        active = [a for a in active if boxes[a.tile][2] > box[0]]
        for other in active:
            if _shared(boxes[other.tile], box) <= 0:
                continue
            fraction = _fraction(other, record, boxes)
            if fraction >= SAME_GROUND:
                first, second = sorted((other, record), key=lambda r: r.tile)
                pair = (first.tile, second.tile)
                found.append(Overlap(pair, round(fraction, 4), _hectares(first, second, fraction)))
        active.append(record)
    return sorted(found, key=lambda o: o.tiles)


def warn_overlaps(records: list[TileRecord]) -> list[Overlap]:
    """Logs a warning line per pair of tiles that cover the same ground (the first :data:`NAMED`).

    Args:
        records: The job's records.

    Returns:
        Every such pair.
    """
    overlaps = same_ground(records)
    for overlap in overlaps[:NAMED]:
        log.warning(
            "%s and %s cover the same ground (%.0f %% of the smaller): it is counted twice in the "
            "job's hectares",
            *overlap.tiles,
            100 * overlap.fraction,
        )
    if len(overlaps) > NAMED:
        log.warning(
            "%d more pairs of tiles cover the same ground (summary.json: overlaps)",
            len(overlaps) - NAMED,
        )
    return overlaps


def describe(overlaps: list[Overlap]) -> str:
    """A few words for the job's last line ('' when no tiles cover the same ground).

    Args:
        overlaps: The pairs.

    Returns:
        ``2 pairs of tiles cover the same ground: about 1.5 ha counted twice (...)``.
    """
    if not overlaps:
        return ""
    n = len(overlaps)
    known = [o.hectares for o in overlaps if o.hectares is not None]
    twice = f"about {sum(known):,.1f} ha counted twice" if known else "counted twice"
    pairs = f"{n} pair{'s' if n != 1 else ''} of tiles {'cover' if n != 1 else 'covers'}"
    return f"{pairs} the same ground: {twice} (summary.json: overlaps)"
