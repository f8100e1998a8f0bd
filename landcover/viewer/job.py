"""A region job's output folder, as the viewer shows it: its tiles, classes, table and AOI.

The viewer reads what ``landcover predict`` writes (:mod:`landcover.mapping.stac`,
:mod:`landcover.mapping.summary`):

- ``stac_items.json``: one item per tile with maps: its footprint's bbox in WGS 84, the
  ``class`` and ``probabilities`` assets (hrefs relative to the folder), the class map's
  classes with their colours (the classification extension), the probabilities' scale (the
  raster extension) and a ``derived_from`` link to the input image (the imagery layer);
- ``classes.csv``: the per-class table (the page shows each class's hectares, share and
  hectares inside the area of interest, with the totals, and every column below them, so
  columns a later job adds appear without a change here);
- ``aoi.geojson``, when the job has an area of interest (:mod:`.aoi`);
- ``mosaic_class*.vrt``, the class maps' VRTs, which the class layer is cut from
  (:mod:`.mosaics`);
- ``summary.json``'s ``job.signing``: how the job read its blob tiles (``planetary-computer``:
  with the Planetary Computer's tokens), so that their imagery is read alike.

The maps are local files; the input images may be blobs (``az://``, ``abfs://``: a job of the
Planetary Computer's NAIP), read through :mod:`landcover.storage` as the job read them.

Tiles keep the collection's order (by path, as the job's VRT mosaics draw them): where tiles
overlap, the later one is on top.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from landcover.errors import DataError
from landcover.storage.urls import is_azure
from landcover.viewer.aoi import read_aoi
from landcover.viewer.mosaics import ClassMosaic, read_mosaics

ITEMS = "stac_items.json"
CLASSES = "classes.csv"
AOI = "aoi.geojson"
SUMMARY = "summary.json"
_COLOUR_FALLBACK = "808080"


@dataclass(frozen=True)
class ClassStyle:
    """A class of the map and its colour.

    Attributes:
        value: The class map's value.
        name: The class name.
        colour: ``#rrggbb``.
    """

    value: int
    name: str
    colour: str

    @property
    def rgb(self) -> tuple[int, int, int]:
        """The colour as 0-255 red, green and blue."""
        return (int(self.colour[1:3], 16), int(self.colour[3:5], 16), int(self.colour[5:7], 16))


@dataclass(frozen=True)
class MapTile:
    """One tile of the job: its maps, its input and where it lies.

    Attributes:
        id: The STAC item's id (the tile's output stem).
        class_map: ``{stem}_class.tif``.
        prob_map: ``{stem}_prob.tif`` (``None`` for a job run with ``--no-probs``).
        prob_scale: What a probability map's value is multiplied by (1/255 for uint8).
        image: The input image (a local path or an http(s) URL; ``None`` when the viewer
            cannot read it: a blob URL, or a file that is gone).
        bbox: The footprint's bounds in WGS 84: west, south, east, north.
    """

    id: str
    class_map: str
    prob_map: str | None
    prob_scale: float
    image: str | None
    bbox: tuple[float, float, float, float]

    def contains(self, lon: float, lat: float) -> bool:
        """Whether a point lies in the tile's bbox."""
        west, south, east, north = self.bbox
        return west <= lon <= east and south <= lat <= north


@dataclass(frozen=True)
class Table:
    """A CSV file's header and rows, as text.

    Attributes:
        columns: The header.
        rows: The rows, one value per column.
    """

    columns: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class ViewerJob:
    """What the viewer shows of a region job.

    Attributes:
        folder: The job's output folder.
        tiles: Its tiles with maps, in the job's order.
        classes: The classes and their colours, in value order.
        nodata: The class maps' no-data value.
        table: ``classes.csv`` (``None`` when missing).
        aoi: The area of interest as GeoJSON in WGS 84 (``None`` when the job has none).
        mosaics: The job's VRTs of its class maps (:mod:`.mosaics`).
        signing: How the job read its blob tiles (``summary.json``'s ``job.signing``).
    """

    folder: Path
    tiles: list[MapTile]
    classes: list[ClassStyle]
    nodata: int
    table: Table | None
    aoi: dict[str, Any] | None
    mosaics: list[ClassMosaic] = field(default_factory=list)
    signing: str | None = None

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """West, south, east, north of all tiles, in WGS 84."""
        boxes = [t.bbox for t in self.tiles]
        return (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        )

    @property
    def has_imagery(self) -> bool:
        """Whether any tile's input image can be read."""
        return any(t.image for t in self.tiles)


def _local(href: str, folder: Path) -> str | None:
    """A relative or ``file://`` href as a local path; an http(s) URL as itself; else ``None``."""
    parsed = urlparse(href)
    if parsed.scheme in ("http", "https"):
        return href
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme:  # az://, s3://...: the viewer reads local files and plain URLs alone
        return None
    return str((folder / unquote(href)).resolve())


def _classes(asset: dict[str, Any]) -> tuple[list[ClassStyle], int]:
    """The classes and no-data value of a class asset (the classification extension)."""
    styles, nodata = [], 255
    for entry in asset.get("classification:classes", []):
        if entry.get("nodata"):
            nodata = int(entry["value"])
            continue
        hint = str(entry.get("color_hint") or _COLOUR_FALLBACK)
        styles.append(ClassStyle(int(entry["value"]), str(entry["name"]), f"#{hint.lower()}"))
    return sorted(styles, key=lambda s: s.value), nodata


def _tile(item: dict[str, Any], folder: Path) -> MapTile:
    """A tile from its STAC item (KeyError, ValueError or TypeError when malformed)."""
    assets = item["assets"]
    prob = assets.get("probabilities")
    scale = 1.0
    if prob is not None:
        bands = prob.get("raster:bands") or [{}]
        scale = float(bands[0].get("scale", 1.0))
    source = next((link["href"] for link in item["links"] if link["rel"] == "derived_from"), None)
    image = (source if is_azure(source) else _local(source, folder)) if source else None
    if image is not None and "://" not in image and not os.path.isfile(image):
        image = None
    prob_map = _local(prob["href"], folder) if prob is not None else None
    west, south, east, north = (float(v) for v in item["bbox"][:4])
    class_map = _local(assets["class"]["href"], folder)
    if class_map is None:
        raise ValueError(f"class map {assets['class']['href']} is not a local file")
    return MapTile(str(item["id"]), class_map, prob_map, scale, image, (west, south, east, north))


def read_table(path: Path) -> Table | None:
    """A CSV file's header and rows, or ``None`` when it is missing.

    Args:
        path: The file.

    Returns:
        The table.

    Raises:
        DataError: If it cannot be read as CSV.
    """
    if not path.is_file():
        return None
    try:
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path}: cannot be read as CSV ({exc})") from None
    return Table(rows[0], rows[1:]) if rows else Table([], [])


def load_job(folder: str | os.PathLike[str]) -> ViewerJob:
    """Reads a region job's output folder (see the module).

    Args:
        folder: The folder ``landcover predict --out`` wrote.

    Returns:
        What the viewer shows.

    Raises:
        DataError: If the folder is missing, is not a region job's output folder (no
            ``stac_items.json``), or its files cannot be read.
    """
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise DataError(f"{folder}: no such folder (the --out folder of landcover predict)")
    items_file = root / ITEMS
    if not items_file.is_file():
        raise DataError(
            f"{folder} is not a region job's output folder: it has no {ITEMS} "
            "(landcover predict writes one beside the maps)"
        )
    try:
        features = json.loads(items_file.read_text())["features"]
        tiles = [_tile(item, root) for item in features]
        classes, nodata = _classes(features[0]["assets"]["class"]) if features else ([], 255)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise DataError(
            f"{items_file}: not a STAC ItemCollection of landcover maps ({exc})"
        ) from None
    if not tiles:
        raise DataError(f"{items_file}: the job has no tile with maps")
    missing = [t.class_map for t in tiles if not os.path.isfile(t.class_map)]
    if missing:
        raise DataError(f"{missing[0]}: class map missing ({len(missing)} of {len(tiles)} tiles)")
    mosaics = read_mosaics(root, [t.class_map for t in tiles])
    table, aoi = read_table(root / CLASSES), read_aoi(root / AOI)
    return ViewerJob(root, tiles, classes, nodata, table, aoi, mosaics, read_signing(root))


def read_signing(folder: Path) -> str | None:
    """How the job read its blob tiles: ``summary.json``'s ``job.signing`` (``None``: none).

    Args:
        folder: The job's output folder.

    Returns:
        The signing service, or ``None`` (no summary, or an older one without the field).
    """
    try:
        job = json.loads((folder / SUMMARY).read_text()).get("job", {})
    except (OSError, ValueError, AttributeError):
        return None
    signing = job.get("signing") if isinstance(job, dict) else None
    return str(signing) if signing else None
