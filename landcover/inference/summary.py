"""The job summary: ``summary.csv``, ``summary.json`` and ``classes.csv`` beside the maps.

Per tile: status, worker rank, seconds, megapixels, grid, and per class its share of the
tile's valid pixels and its area in hectares (pixel count x pixel area; the pixel area comes
from the transform, in the CRS's linear unit converted to metres). Per class over the whole
job: pixels, share and hectares, summed over the tiles with maps. Tiles in a geographic CRS
(pixels in degrees) have no fixed pixel area: their hectares are left empty, with a warning.
Neighbouring NAIP tiles overlap by a few hundred metres, and the job's totals sum tiles as
they are, so the overlaps count twice.
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
from landcover.inference.records import TileRecord

log = logging.getLogger("landcover")


@dataclass(frozen=True)
class ClassTotal:
    """One class over the whole job.

    Attributes:
        value: The class map's value.
        name: The class name.
        pixels: Pixels of the class.
        fraction: Its share of all valid pixels.
        hectares: Its area (over the tiles whose pixel area is known).
    """

    value: int
    name: str
    pixels: int
    fraction: float
    hectares: float


def class_totals(records: list[TileRecord], mapping: ClassMapping) -> list[ClassTotal]:
    """Pixels, shares and hectares per class over the tiles with maps.

    Args:
        records: The job's records.
        mapping: The classes.

    Returns:
        One total per class, in class order.
    """
    pixels = [0] * mapping.num_classes
    hectares = [0.0] * mapping.num_classes
    for record in records:
        if record.counts is None:
            continue
        for i, n in enumerate(record.counts.pixels):
            pixels[i] += n
        for i, ha in enumerate(record.hectares() or []):
            hectares[i] += ha
    valid = sum(pixels)
    return [
        ClassTotal(i, name, pixels[i], pixels[i] / valid if valid else 0.0, hectares[i])
        for i, name in enumerate(mapping.names)
    ]


def _crs_text(record: TileRecord) -> str:
    crs = record.grid.rasterio_crs if record.grid else None
    return crs.to_string() if crs else ""


def tile_row(record: TileRecord, mapping: ClassMapping) -> dict[str, Any]:
    """A tile's row of ``summary.csv``.

    Args:
        record: The tile's record.
        mapping: The classes.

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
    row["class_map"] = record.outputs.class_map if record.has_maps and record.outputs else ""
    row["error"] = record.error or ""
    return row


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def summary_document(
    records: list[TileRecord], mapping: ClassMapping, job: dict[str, Any]
) -> dict[str, Any]:
    """The content of ``summary.json``.

    Args:
        records: The job's records, in the job's order.
        mapping: The classes.
        job: What the job was (checkpoint, fingerprint, options, workers, times).

    Returns:
        ``{"job", "tiles_by_status", "classes", "tiles"}`` as JSON-safe data.
    """
    statuses = ("done", "skipped", "failed", "not_run")
    tiles = []
    for record in records:
        entry = record.to_dict()
        entry["mpx"] = record.mpx
        entry["class_fractions"] = record.fractions()
        entry["class_hectares"] = record.hectares()
        tiles.append(entry)
    return {
        "job": job,
        "tiles_by_status": {s: sum(r.status == s for r in records) for s in statuses},
        "classes": [asdict(t) for t in class_totals(records, mapping)],
        "tiles": tiles,
    }


def write_summary(
    records: list[TileRecord], mapping: ClassMapping, out: str, job: dict[str, Any]
) -> list[str]:
    """Writes ``summary.csv``, ``summary.json`` and ``classes.csv`` into the output folder.

    Args:
        records: The job's records, in the job's order.
        mapping: The classes.
        out: The output folder (path or URL).
        job: What the job was, for ``summary.json``.

    Returns:
        The files written.
    """
    written = []
    if records:
        path = storage.join(out, "summary.csv")
        storage.write_text(path, _csv([tile_row(r, mapping) for r in records]))
        written.append(path)
    path = storage.join(out, "summary.json")
    document = summary_document(records, mapping, job)
    storage.write_text(path, json.dumps(document, indent=1))
    written.append(path)
    path = storage.join(out, "classes.csv")
    rows = [
        {
            "value": t.value,
            "class": t.name,
            "pixels": t.pixels,
            "fraction": round(t.fraction, 6),
            "hectares": round(t.hectares, 4),
        }
        for t in class_totals(records, mapping)
    ]
    storage.write_text(path, _csv(rows))
    written.append(path)
    return written
