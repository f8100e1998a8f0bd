"""The job summary: ``summary.csv``, ``summary.json`` and ``classes.csv`` beside the maps.

Per tile: status, worker rank, seconds, megapixels, grid, and per class its share of the
tile's valid pixels and its area in hectares (pixel count x pixel area; the pixel area comes
from the transform, in the CRS's linear unit converted to metres). Per class over the whole
job: pixels and share summed over the tiles with maps, and hectares summed over the tiles
whose CRS is projected with a linear unit (metres, feet). Tiles in a geographic CRS (pixels in
degrees) or with no CRS have no fixed pixel area: their hectares are left empty, with a
warning, and they are counted apart (:class:`AreaCoverage`): ``summary.json`` (``area``),
``classes.csv`` (``pixels_without_area``, ``tiles_without_area``) and the job's last line say
how many tiles and pixels the hectares leave out.
Neighbouring NAIP tiles overlap by a few hundred metres, and the job's totals sum tiles as
they are, so the overlaps count twice. Tiles that cover the same ground (two years of one
place: :mod:`.overlaps`) count twice too, and are named: a warning line per pair,
``overlaps`` in ``summary.json`` and the job's last line.

A job with an area of interest (``--aoi``) counts its classes inside it too, each place once
(:mod:`.aoiarea`): ``summary.json`` (``aoi``), ``classes.csv`` (``aoi_hectares``),
``summary.csv`` (``aoi_pixels``, ``aoi_ha`` per tile) and the job's last line.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from landcover import storage
from landcover.classes import ClassMapping
from landcover.mapping.aoiarea import InsideArea
from landcover.mapping.overlaps import describe, same_ground
from landcover.mapping.records import TileRecord

log = logging.getLogger("landcover")


@dataclass(frozen=True)
class ClassTotal:
    """One class over the whole job.

    Attributes:
        value: The class map's value.
        name: The class name.
        pixels: Pixels of the class.
        fraction: Its share of all valid pixels.
        hectares: Its area over the tiles whose pixel area is known (``None`` when no tile
            with maps has one).
        pixels_without_area: Its pixels in tiles with no pixel area (left out of hectares).
    """

    value: int
    name: str
    pixels: int
    fraction: float
    hectares: float | None
    pixels_without_area: int = 0


@dataclass(frozen=True)
class AreaCoverage:
    """Which of a job's mapped tiles its hectares cover.

    Attributes:
        tiles_with_area: Tiles with maps and a pixel area (a projected CRS in metres or feet).
        tiles_without_area: Tiles with maps but no pixel area (geographic CRS, or none).
        pixels_without_area: Valid (classified) pixels of the tiles without area.
        tiles: The tiles without area.
    """

    tiles_with_area: int
    tiles_without_area: int
    pixels_without_area: int
    tiles: list[str]

    def describe(self) -> str:
        """A few words for the job's last line ('' when every mapped tile has an area)."""
        if not self.tiles_without_area:
            return ""
        n = self.tiles_without_area
        return (
            f"{n} tile{'s' if n != 1 else ''} ({self.pixels_without_area:,} pixels) "
            f"{'have' if n != 1 else 'has'} no area (geographic CRS or none) and "
            f"{'are' if n != 1 else 'is'} left out of the hectares"
        )


def area_coverage(records: list[TileRecord]) -> AreaCoverage:
    """Counts the mapped tiles with and without a pixel area.

    Args:
        records: The job's records.

    Returns:
        The coverage of the job's hectares.
    """
    mapped = [r for r in records if r.counts is not None]
    without = [r for r in mapped if r.pixel_area_m2 is None]
    return AreaCoverage(
        tiles_with_area=len(mapped) - len(without),
        tiles_without_area=len(without),
        pixels_without_area=sum(r.counts.valid for r in without if r.counts is not None),
        tiles=[r.tile for r in without],
    )


def class_totals(records: list[TileRecord], mapping: ClassMapping) -> list[ClassTotal]:
    """Pixels, shares and hectares per class over the tiles with maps.

    Hectares sum only the tiles with a pixel area; the pixels of the others are counted
    apart (``pixels_without_area``).

    Args:
        records: The job's records.
        mapping: The classes.

    Returns:
        One total per class, in class order.
    """
    k = mapping.num_classes
    pixels, apart, hectares = [0] * k, [0] * k, [0.0] * k
    any_area = False
    for record in records:
        if record.counts is None:
            continue
        for i, n in enumerate(record.counts.pixels):
            pixels[i] += n
        tile_hectares = record.hectares()
        if tile_hectares is None:
            for i, n in enumerate(record.counts.pixels):
                apart[i] += n
            continue
        any_area = True
        for i, ha in enumerate(tile_hectares):
            hectares[i] += ha
    valid = sum(pixels)
    return [
        ClassTotal(
            i,
            name,
            pixels[i],
            pixels[i] / valid if valid else 0.0,
            hectares[i] if any_area else None,
            apart[i],
        )
        for i, name in enumerate(mapping.names)
    ]


def totals_line(
    records: list[TileRecord], mapping: ClassMapping, inside: InsideArea | None = None
) -> str:
    """The classes over the whole job, for its last line: hectares, shares, what they miscount.

    Args:
        records: The job's records.
        mapping: The classes.
        inside: The classes inside the job's area of interest, if it has one.

    Returns:
        ``water 1.2 ha (3.4 %), ...`` (``no class mapped`` when no tile was), followed by what
        the hectares leave out and the ground they count twice, if anything, and the hectares
        inside the area.
    """
    coverage = area_coverage(records)
    parts = []
    totals = class_totals(records, mapping)
    for t in totals:
        share = f"{100 * t.fraction:.1f} %"  # no hectares: tiles in a geographic CRS or none
        parts.append(
            f"{t.name} {share}"
            if t.hectares is None
            else f"{t.name} {t.hectares:,.1f} ha ({share})"
        )
    line = ", ".join(parts) if any(t.pixels for t in totals) else "no class mapped"
    if coverage.tiles_without_area:
        line += f"; {coverage.describe()}"
    twice = describe(same_ground(records))
    line = f"{line}; {twice}" if twice else line
    return f"{line}; {inside.describe(mapping)}" if inside is not None else line


def _crs_text(record: TileRecord) -> str:
    crs = record.grid.rasterio_crs if record.grid else None
    return crs.to_string() if crs else ""


def tile_row(
    record: TileRecord, mapping: ClassMapping, inside: InsideArea | None = None
) -> dict[str, Any]:
    """A tile's row of ``summary.csv``.

    Args:
        record: The tile's record.
        mapping: The classes.
        inside: The classes inside the job's area of interest (its columns ``aoi_pixels``
            and ``aoi_ha``: what this tile counts there), if it has one.

    Returns:
        Column name to value ('' where unknown).
    """
    grid = record.grid
    row: dict[str, Any] = {
        "tile": record.tile,
        "status": record.status,
        "rank": "" if record.rank is None else record.rank,
        "seconds": round(record.seconds, 3),
        "mpx": round(record.mpx, 6) if grid else "",
        "width": grid.width if grid else "",
        "height": grid.height if grid else "",
        "crs": _crs_text(record),
        "pixel_area_m2": "" if record.pixel_area_m2 is None else record.pixel_area_m2,
    }
    fractions, hectares = record.fractions(), record.hectares()
    for i, name in enumerate(mapping.names):
        row[f"{name}_fraction"] = "" if fractions is None else round(fractions[i], 6)
    for i, name in enumerate(mapping.names):
        row[f"{name}_ha"] = "" if hectares is None else round(hectares[i], 4)
    if inside is not None:
        mine = inside.of(record.tile)
        row["aoi_pixels"] = sum(mine.pixels) if mine else 0
        row["aoi_ha"] = round(mine.hectares, 4) if mine else 0
    # the file's name: the maps lie beside this CSV (the folder's path, as typed, is not
    # where a reader of the CSV resolves it from, and the folder moves)
    has = record.has_maps and record.outputs
    row["class_map"] = storage.name(record.outputs.class_map) if has else ""
    row["error"] = record.error or ""
    return row


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def summary_document(
    records: list[TileRecord],
    mapping: ClassMapping,
    job: dict[str, Any],
    inside: InsideArea | None = None,
) -> dict[str, Any]:
    """The content of ``summary.json``.

    Args:
        records: The job's records, in the job's order.
        mapping: The classes.
        job: What the job was (checkpoint, fingerprint, options, workers, times).
        inside: The classes inside the job's area of interest, if it has one.

    Returns:
        ``{"job", "tiles_by_status", "classes", "area", "overlaps", "tiles"}`` as JSON-safe
        data (``area``: the :class:`AreaCoverage` of the hectares; ``overlaps``: the pairs of
        tiles that cover the same ground, counted twice in them), and ``aoi`` (the classes
        inside the area) when the job has an area.
    """
    statuses = ("done", "skipped", "failed", "not_run")
    tiles = []
    for record in records:
        entry = record.to_dict()
        entry["mpx"] = record.mpx
        entry["class_fractions"] = record.fractions()
        entry["class_hectares"] = record.hectares()
        tiles.append(entry)
    document = {
        "job": job,
        "tiles_by_status": {s: sum(r.status == s for r in records) for s in statuses},
        "classes": [asdict(t) for t in class_totals(records, mapping)],
        "area": asdict(area_coverage(records)),
        "overlaps": [asdict(o) for o in same_ground(records)],
        "tiles": tiles,
    }
    if inside is not None:
        document["aoi"] = inside.document(mapping)
    return document


def write_summary(
    records: list[TileRecord],
    mapping: ClassMapping,
    out: str,
    job: dict[str, Any],
    inside: InsideArea | None = None,
) -> list[str]:
    """Writes ``summary.csv``, ``summary.json`` and ``classes.csv`` into the output folder.

    Args:
        records: The job's records, in the job's order.
        mapping: The classes.
        out: The output folder (path or URL).
        job: What the job was, for ``summary.json``.
        inside: The classes inside the job's area of interest, if it has one.

    Returns:
        The files written.
    """
    written = []
    if records:
        path = storage.join(out, "summary.csv")
        storage.write_text(path, _csv([tile_row(r, mapping, inside) for r in records]))
        written.append(path)
    path = storage.join(out, "summary.json")
    document = summary_document(records, mapping, job, inside)
    storage.write_text(path, json.dumps(document, indent=1))
    written.append(path)
    path = storage.join(out, "classes.csv")
    without_area = area_coverage(records).tiles_without_area
    rows = []
    for t in class_totals(records, mapping):
        row: dict[str, Any] = {
            "value": t.value,
            "class": t.name,
            "pixels": t.pixels,
            "fraction": round(t.fraction, 6),
            "hectares": "" if t.hectares is None else round(t.hectares, 4),
        }
        if inside is not None:
            row["aoi_hectares"] = round(inside.hectares()[t.value], 4)
        row["pixels_without_area"] = t.pixels_without_area
        row["tiles_without_area"] = without_area
        rows.append(row)
    storage.write_text(path, _csv(rows))
    written.append(path)
    return written
