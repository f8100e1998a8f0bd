"""Reading a tile for prediction: decoded once, on every core, into memory when it fits.

``landcover predict`` needs a tile's pixels twice under ``data.normalize: per_tile``: once for
its band statistics (before the first window can be normalised) and once window row by window
row. Decoding a compressed NAIP tile is one of the largest host costs of mapping (about 1 s of
one core for a 6,000 x 7,500 DEFLATE tile, ``benchmarks/ceiling_bench.py``), so a tile whose
pixels fit in :data:`IN_MEMORY_BYTES` is decoded once, whole, with GDAL decoding its blocks
in parallel threads (``GDAL_NUM_THREADS``; GDAL releases the GIL), and the statistics and the
window rows both come from that array. A larger tile (or a warped working-grid view, which
GDAL resamples as it reads) is read strip by strip as before: the statistics in one pass, the
rows as they are predicted, so memory stays bounded by the tile's width.

In a region job on a GPU the next tile is decoded while this one is predicted
(:meth:`TileSource.decode`, called by :meth:`~landcover.inference.predict.TileMapper.prefetch`
in a thread of its own): the device does not wait for a tile's decoding between tiles.

Either way the rows, the no-data mask and the statistics are the same numbers: the same
:func:`~landcover.data.raster.nodata_mask` policy, and exact integer band sums that do not
depend on how the pixels are cut into strips.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rasterio
from rasterio.errors import RasterioError
from rasterio.windows import Window

from landcover.data.normalize import TileStats, array_band_stats, dataset_band_stats
from landcover.data.raster import has_nodata, nodata_mask
from landcover.errors import DataError, error_reason
from landcover.threads import gdal_threads

IN_MEMORY_BYTES = 2 << 30
"""Largest decoded tile held whole in memory (a 0.6 m NAIP DOQQ, 10,000 x 12,500 x 4 bytes, is
0.5 GB); larger ones are read strip by strip."""


class TileSource:
    """A tile's pixels and no-data mask for prediction, whole in memory or read on demand.

    Args:
        src: The open dataset (a file, or a warped VRT of it on a working grid).
        name: The tile's path or URL, for messages.
        in_memory: Decode the whole tile into memory now (see :meth:`open`).
        decoded: The tile already decoded (by :meth:`decode`, ahead of time): its pixels and
            mask are used as they are.

    Raises:
        DataError: If the tile cannot be read.
    """

    def __init__(
        self, src: Any, name: str, in_memory: bool, decoded: TileSource | None = None
    ) -> None:
        self.src = src
        self.name = name
        self.height, self.width, self.bands = src.height, src.width, src.count
        self.pixels: np.ndarray | None = None
        self.nodata: np.ndarray | None = None
        self.measured: tuple[TileStats | None] | None = None
        if decoded is not None and decoded.pixels is not None:
            self.pixels, self.nodata, self.measured = (
                decoded.pixels,
                decoded.nodata,
                decoded.measured,
            )
        elif in_memory:
            pixels = np.empty((self.height, self.width, self.bands), dtype=np.uint8)
            try:
                # GDAL takes its decoding threads when a file is opened: open it again
                with (
                    rasterio.Env(GDAL_NUM_THREADS=gdal_threads()),
                    rasterio.open(src.name) as threaded,
                ):
                    threaded.read(out=np.moveaxis(pixels, -1, 0))
                if has_nodata(src):
                    self.nodata = nodata_mask(src, None, pixels=pixels)
            except RasterioError as exc:
                raise DataError(
                    f"{name}: cannot read rows 0-{self.height} ({error_reason(exc)})"
                ) from None
            self.pixels = pixels

    @classmethod
    def open(
        cls,
        src: Any,
        name: str,
        limit: int = IN_MEMORY_BYTES,
        decoded: TileSource | None = None,
    ) -> TileSource:
        """The source of a tile: in memory when it is a file whose pixels fit in ``limit``.

        Args:
            src: The open dataset.
            name: The tile's path or URL, for messages.
            limit: Largest decoded size (bytes) held in memory.
            decoded: The same tile decoded ahead of time (:meth:`decode`), used when it holds
                pixels of ``src``'s shape.

        Returns:
            The source.

        Raises:
            DataError: If the tile cannot be read.
        """
        warped = not isinstance(src, rasterio.io.DatasetReader)
        fits = src.height * src.width * src.count <= limit
        shape = (src.height, src.width, src.count)
        if decoded is not None and (decoded.pixels is None or decoded.pixels.shape != shape):
            decoded = None
        return cls(src, name, in_memory=fits and not warped, decoded=decoded)

    @classmethod
    def decode(
        cls, src: Any, name: str, limit: int = IN_MEMORY_BYTES, stats: bool = False
    ) -> TileSource:
        """A tile decoded ahead of time, for :meth:`open` to take (in another thread).

        Args:
            src: The tile, opened by the calling thread (and used by it alone).
            name: The tile's path or URL, for messages.
            limit: Largest decoded size (bytes) held in memory.
            stats: Measure its band statistics too (``data.normalize: per_tile``).

        Returns:
            The source, with the pixels in memory where the tile fits (else nothing decoded).

        Raises:
            DataError: If the tile cannot be read.
        """
        source = cls.open(src, name, limit)
        if stats and source.pixels is not None:
            source.stats()
        return source

    def stats(self) -> TileStats | None:
        """The tile's band statistics over its valid pixels (measured once).

        Returns:
            The statistics, or ``None`` when no pixel has data.

        Raises:
            DataError: If the tile cannot be read.
        """
        if self.measured is None:
            self.measured = (self._measure_stats(),)
        return self.measured[0]

    def _measure_stats(self) -> TileStats | None:
        if self.pixels is not None:
            return array_band_stats(self.pixels, self.nodata)
        try:
            return dataset_band_stats(self.src)
        except RasterioError as exc:
            raise DataError(
                f"{self.name}: cannot read it for its band statistics ({error_reason(exc)})"
            ) from None

    def read_rows(self, start: int, stop: int, out: np.ndarray) -> None:
        """Reads image rows ``[start, stop)`` into the top left of a channels-last buffer.

        Args:
            start: First row.
            stop: Row after the last.
            out: ``(h, w, C)`` uint8 buffer with ``h >= stop - start`` and ``w >= width``.

        Raises:
            DataError: If the rows cannot be read.
        """
        target = out[: stop - start, : self.width]
        if self.pixels is not None:
            target[...] = self.pixels[start:stop]
            return
        try:  # GDAL interleaves the bands straight into the buffer
            self.src.read(
                window=Window(0, start, self.width, stop - start), out=np.moveaxis(target, -1, 0)
            )
        except RasterioError as exc:
            raise DataError(
                f"{self.name}: cannot read rows {start}-{stop} ({error_reason(exc)})"
            ) from None

    def valid(self, row: int, count: int, pixels: np.ndarray) -> np.ndarray:
        """Where rows ``[row, row + count)`` have data.

        Args:
            row: First row.
            count: Rows.
            pixels: ``(count, width, C)`` those rows' pixels, as read.

        Returns:
            ``(count, width)`` bool, True where there is data.

        Raises:
            DataError: If the mask cannot be read.
        """
        if self.pixels is not None:
            if self.nodata is None:
                return np.ones((count, self.width), dtype=bool)
            return ~self.nodata[row : row + count]
        try:
            return ~nodata_mask(self.src, Window(0, row, self.width, count), pixels=pixels)
        except RasterioError as exc:
            raise DataError(
                f"{self.name}: cannot read rows {row}-{row + count} ({error_reason(exc)})"
            ) from None
