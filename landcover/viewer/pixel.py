"""What the job says about one place: the class and the per-class probabilities of its pixel.

The point (longitude, latitude in WGS 84) is taken into each tile's CRS and read from its
class map and probability map (rasterio, one pixel each). Where tiles overlap the later one
in the collection's order (by path, as the VRT mosaics) answers, as it is the one drawn on top
(:mod:`.render`); a tile whose
class map has no data there lets the next one answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import rasterio
from rasterio.errors import CRSError, RasterioError
from rasterio.warp import transform
from rasterio.windows import Window

from landcover.errors import DataError, error_reason
from landcover.viewer.job import MapTile, ViewerJob


@dataclass(frozen=True)
class ClassProbability:
    """One class's probability at a pixel.

    Attributes:
        value: The class map's value.
        name: The class name.
        probability: 0 to 1.
    """

    value: int
    name: str
    probability: float


@dataclass(frozen=True)
class PixelReport:
    """A pixel of the job's map.

    Attributes:
        tile: The tile's id.
        row: The pixel's row in the tile.
        col: Its column.
        value: Its class value.
        name: Its class name.
        probabilities: Each class's probability (empty for a job run with ``--no-probs``).
    """

    tile: str
    row: int
    col: int
    value: int
    name: str
    probabilities: list[ClassProbability]


def _read_pixel(path: str, lon: float, lat: float) -> tuple[int, int, list[float]] | None:
    """Row, column and every band's value of the pixel under a point, or ``None`` if outside.

    Raises:
        DataError: If the map cannot be read, naming it (GDAL's "Read failed" names nothing).
    """
    try:
        with rasterio.open(path) as ds:
            xs, ys = transform("EPSG:4326", ds.crs, [lon], [lat])
            row, col = ds.index(xs[0], ys[0])
            if not (0 <= row < ds.height and 0 <= col < ds.width):
                return None
            values = ds.read(window=Window(col, row, 1, 1))[:, 0, 0]
    except (RasterioError, CRSError, OSError) as exc:
        raise DataError(f"{path}: {error_reason(exc)}") from None
    return int(row), int(col), [float(v) for v in values]


def _report(job: ViewerJob, tile: MapTile, lon: float, lat: float) -> PixelReport | None:
    found = _read_pixel(tile.class_map, lon, lat)
    if found is None or int(found[2][0]) == job.nodata:
        return None
    row, col, (value, *_) = found
    names = {c.value: c.name for c in job.classes}
    probabilities = []
    if tile.prob_map is not None:
        prob = _read_pixel(tile.prob_map, lon, lat)
        if prob is not None:
            probabilities = [
                ClassProbability(c.value, c.name, p * tile.prob_scale)
                for c, p in zip(job.classes, prob[2], strict=False)
            ]
    return PixelReport(
        tile.id, row, col, int(value), names.get(int(value), str(int(value))), probabilities
    )


def pixel_at(job: ViewerJob, lon: float, lat: float) -> PixelReport | None:
    """The class and probabilities of the job's pixel under a point (see the module).

    Args:
        job: The job.
        lon: Longitude (WGS 84).
        lat: Latitude.

    Returns:
        The report, or ``None`` where no tile has a class.
    """
    for tile in reversed(job.tiles):
        if tile.contains(lon, lat):
            report = _report(job, tile, lon, lat)
            if report is not None:
                return report
    return None
