"""What a predict job knows about each tile: its grid, its outcome and its class counts.

Workers make one :class:`TileRecord` per tile; the job's outputs (summary, mosaic, STAC items)
are all written from these records by rank 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import rasterio
from affine import Affine
from rasterio.crs import CRS
from rasterio.errors import CRSError

Status = Literal["done", "skipped", "failed", "not_run"]
"""``done``: predicted by this job; ``skipped``: its outputs were already complete;
``failed``: an error (in ``error``); ``not_run``: the job stopped first (``--fail-fast``)."""


@dataclass(frozen=True)
class Grid:
    """A raster's grid.

    Attributes:
        crs: The CRS as WKT ('' when the raster has none).
        transform: The affine transform's six coefficients ``(a, b, c, d, e, f)``.
        width: Columns.
        height: Rows.
    """

    crs: str
    transform: tuple[float, float, float, float, float, float]
    width: int
    height: int

    @classmethod
    def of(cls, dataset: rasterio.io.DatasetReader) -> Grid:
        """The grid of an open dataset."""
        t = dataset.transform
        return cls(
            dataset.crs.to_wkt() if dataset.crs else "",
            (t.a, t.b, t.c, t.d, t.e, t.f),
            dataset.width,
            dataset.height,
        )

    @property
    def affine(self) -> Affine:
        """The transform as an :class:`affine.Affine`."""
        return Affine(*self.transform)

    @property
    def rasterio_crs(self) -> CRS | None:
        """The CRS, or ``None`` when the raster has none."""
        return CRS.from_wkt(self.crs) if self.crs else None

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """``(left, bottom, right, top)`` in the CRS (north-up grids)."""
        a, b, c, d, e, f = self.transform
        xs = (c, c + a * self.width + b * self.height)
        ys = (f, f + d * self.width + e * self.height)
        return min(xs), min(ys), max(xs), max(ys)

    @property
    def north_up(self) -> bool:
        """Whether the grid has no rotation (``b == d == 0``, ``e < 0``)."""
        a, b, _, d, e, _ = self.transform
        return b == 0 and d == 0 and a > 0 and e < 0

    def pixel_area_m2(self) -> float:
        """The ground area of one pixel in square metres.

        Returns:
            ``|a * e - b * d|`` in the CRS's linear unit, converted to metres.

        Raises:
            ValueError: If the grid has no CRS or a geographic one (degrees have no fixed
                area).
        """
        crs = self.rasterio_crs
        if crs is None:
            raise ValueError("it has no CRS")
        if crs.is_geographic:
            raise ValueError(f"its CRS {crs.to_string()} is geographic (pixels in degrees)")
        try:
            _, to_metres = crs.linear_units_factor
        except CRSError as exc:
            raise ValueError(f"its CRS has no linear unit ({exc})") from None
        a, b, _, d, e, _ = self.transform
        return abs(a * e - b * d) * to_metres**2


@dataclass
class ClassCounts:
    """Pixels per class of one class map.

    Attributes:
        pixels: Pixels of each class, by class index.
        nodata: Pixels where the input has no data.
    """

    pixels: list[int]
    nodata: int = 0

    @property
    def valid(self) -> int:
        """Pixels with a class."""
        return sum(self.pixels)


@dataclass
class TileOutputs:
    """Where a tile's outputs are: paths or URLs.

    Attributes:
        class_map: ``{stem}_class.tif``.
        prob_map: ``{stem}_prob.tif`` (``None`` with ``--no-probs``).
        preview: ``{stem}_preview.png`` (``None`` with ``--no-preview``).
        stats: ``{stem}_stats.json``.
    """

    class_map: str
    prob_map: str | None
    preview: str | None
    stats: str


@dataclass
class TileRecord:
    """One tile's outcome in a predict job.

    Attributes:
        tile: The input image (path or URL).
        index: Its position in the job's largest-first order.
        status: ``done``, ``skipped``, ``failed`` or ``not_run``.
        rank: The worker that handled it (``None`` if none did).
        seconds: Time spent on it by that worker.
        error: The one-line error of a failed tile.
        grid: The tile's grid (when it could be read).
        counts: Pixels per class of its class map (done and skipped tiles).
        pixel_area_m2: Area of one pixel (``None`` for geographic or missing CRSs).
        outputs: Its outputs (done and skipped tiles).
    """

    tile: str
    index: int
    status: Status
    rank: int | None = None
    seconds: float = 0.0
    error: str | None = None
    grid: Grid | None = None
    counts: ClassCounts | None = None
    pixel_area_m2: float | None = None
    outputs: TileOutputs | None = None

    @property
    def mpx(self) -> float:
        """Megapixels of the tile (0 when its grid is unknown)."""
        return self.grid.width * self.grid.height / 1e6 if self.grid else 0.0

    @property
    def has_maps(self) -> bool:
        """Whether the tile's maps exist (done or skipped)."""
        return self.status in ("done", "skipped") and self.outputs is not None

    def hectares(self) -> list[float] | None:
        """Area per class in hectares, or ``None`` when the pixel area is unknown."""
        if self.counts is None or self.pixel_area_m2 is None:
            return None
        return [n * self.pixel_area_m2 / 1e4 for n in self.counts.pixels]

    def fractions(self) -> list[float] | None:
        """Share of each class among the tile's valid pixels."""
        if self.counts is None:
            return None
        valid = self.counts.valid
        return [n / valid if valid else 0.0 for n in self.counts.pixels]

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-safe data."""
        return asdict(self)
