"""What predicting one tile gives: its grid, its class counts and where its maps are.

:func:`~landcover.inference.predict.predict_tile` and
:meth:`~landcover.inference.predict.TileMapper.submit` return a :class:`TileResult`; the region
job (:mod:`landcover.mapping`) builds its per-tile records from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import rasterio
from affine import Affine
from rasterio.crs import CRS
from rasterio.errors import CRSError


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
        """``(left, bottom, right, top)`` in the CRS: the envelope of the four corners.

        Rotated and sheared grids too; a north-up grid's own bounds.
        """
        a, b, c, d, e, f = self.transform
        corners = [(col, row) for col in (0, self.width) for row in (0, self.height)]
        xs = [c + a * col + b * row for col, row in corners]
        ys = [f + d * col + e * row for col, row in corners]
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


@dataclass(frozen=True)
class MapFile:
    """One file a map writer wrote for a tile (or that a complete tile has).

    Attributes:
        path: The file: a local path, or a URL once uploaded.
        writer: The map writer that writes it (its registered name, ``cog``...).
        key: Its STAC asset key (``class``, ``probabilities``...), unique in a tile;
            ``None`` for a sidecar that is no asset of its own (a map's ``.aux.xml``).
        media_type: Its media type (``image/png``...).
        role: Its STAC asset role: ``data``, ``overview`` or ``metadata``.
        title: A few words for a STAC asset.
    """

    path: str
    writer: str
    key: str | None
    media_type: str = ""
    role: str = "data"
    title: str = ""

    def moved(self, path: str) -> MapFile:
        """The same file at another path (its upload's URL, its place in the output folder)."""
        return replace(self, path=path)


@dataclass(frozen=True)
class TileResult:
    """A predicted tile: its maps, grid, class counts and speed.

    Attributes:
        tile: The input image (path or URL).
        class_map: The class map (path or URL).
        prob_map: The probability map (``None`` with ``--no-probs``).
        preview: The preview PNG (``None`` without one).
        grid: The tile's grid (its maps lie on it).
        counts: Pixels per class of the class map, and no-data pixels.
        seconds: Wall time from the start of its prediction to its maps' publishing.
        files: Every file its map writers wrote (the class map's and the others), in the
            order they were published.
    """

    tile: str
    class_map: str
    prob_map: str | None
    preview: str | None
    grid: Grid
    counts: ClassCounts
    seconds: float
    files: tuple[MapFile, ...] = ()

    @property
    def width(self) -> int:
        """Columns of the tile."""
        return self.grid.width

    @property
    def height(self) -> int:
        """Rows of the tile."""
        return self.grid.height

    @property
    def mpx_per_s(self) -> float:
        """Megapixels predicted per second."""
        return self.width * self.height / 1e6 / self.seconds if self.seconds > 0 else 0.0
