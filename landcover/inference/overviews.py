"""Overviews of the maps, built strip by strip while the tile is predicted.

A COG carries reduced-resolution copies (overviews) of its image, each half the size of the
one before, down to one block. GDAL's COG driver computes them after the fact by reading the
whole map back; for the probability map (one band per class, with a no-data mask) its masked
average was most of the time spent turning the scratch file into a COG (about 4.5 of 5.6 CPU
seconds for a 6,000 x 7,500 tile). Here each strip, as it is written, is averaged 2 x 2 into
the first overview, whose finished rows are averaged into the next, and so on: a few numpy
passes per strip in the writer thread, overlapping the model. Each level goes to its own
scratch GeoTIFF; :meth:`OverviewPyramid.vrt` describes the map with these as its overviews, and
the COG driver copies them as they are (``OVERVIEWS=FORCE_USE_EXISTING``).

A level's pixel is the mean of the valid pixels among its 2 x 2 source pixels (uint8 values
rounded half up, like GDAL's ``AVERAGE``), no-data where none is valid. Level sizes are
``ceil(size / 2)`` of the level above, as GDAL's, until the larger side fits in one block.

The class map's overviews (``nearest``) take the top-left pixel of each 2 x 2 block, so level
``k``'s pixel ``(i, j)`` is the map's ``(i * 2**k, j * 2**k)``: GDAL's ``NEAREST`` picks the
same where the sizes halve evenly. Built by GDAL after the fact they took about 0.6 s of one
core for a 6,000 x 7,500 tile (a serial part of publishing it), here a strided copy per strip.

The first level of the probability map is most of the writer thread's work (about 1.2 of its
1.6 s of one core per 6,000 x 7,500 tile with 7 classes): with ``threads``, its classes are
averaged in parallel, a group of bands per thread (numpy releases the GIL), the same numbers.
On a GPU host the writer thread is the one serial stage left between the device and the disk.
"""

from __future__ import annotations

import html
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import Affine


def overview_shapes(height: int, width: int, block: int = 256) -> list[tuple[int, int]]:
    """The ``(height, width)`` of each overview level, halving until one block holds it.

    Args:
        height: Image height.
        width: Image width.
        block: The COG's block size.

    Returns:
        One shape per level (none when the image fits in a block).
    """
    shapes = []
    while max(height, width) > block:
        height, width = -(-height // 2), -(-width // 2)
        shapes.append((height, width))
    return shapes


def halve(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Averages ``2 x 2`` blocks of valid pixels (odd sizes: the last row/column alone).

    Args:
        values: ``(K, h, w)`` uint8 or float32.
        valid: ``(h, w)`` bool.

    Returns:
        ``(K, ceil(h / 2), ceil(w / 2))`` averages (uint8 rounded half up; 0 where nothing is
        valid) and their validity.
    """
    k, h, w = values.shape
    if h % 2 or w % 2:
        padded = np.zeros((k, h + h % 2, w + w % 2), dtype=values.dtype)
        padded[:, :h, :w] = values
        mask = np.zeros(padded.shape[1:], dtype=bool)
        mask[:h, :w] = valid
        values, valid = padded, mask
    wide = np.float32 if values.dtype == np.float32 else np.uint16
    if valid.all():
        total = values[:, 0::2, 0::2].astype(wide)
        total += values[:, 1::2, 0::2]
        total += values[:, 0::2, 1::2]
        total += values[:, 1::2, 1::2]
        if wide is np.float32:
            return total / 4, np.ones(total.shape[1:], dtype=bool)
        return ((total + 2) >> 2).astype(values.dtype), np.ones(total.shape[1:], dtype=bool)
    weight = valid.astype(wide)
    count = weight[0::2, 0::2] + weight[1::2, 0::2] + weight[0::2, 1::2] + weight[1::2, 1::2]
    masked = values * weight
    total = masked[:, 0::2, 0::2] + masked[:, 1::2, 0::2]
    total += masked[:, 0::2, 1::2]
    total += masked[:, 1::2, 1::2]
    if wide is np.float32:
        mean = total / np.maximum(count, 1)
    else:
        mean = ((total + count // 2) // np.maximum(count, 1)).astype(values.dtype)
    return mean, count > 0


def pick(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keeps the top-left pixel of each ``2 x 2`` block (odd sizes: the last row/column's).

    Args:
        values: ``(K, h, w)`` values.
        valid: ``(h, w)`` bool.

    Returns:
        ``(K, ceil(h / 2), ceil(w / 2))`` values and their validity.
    """
    return np.ascontiguousarray(values[:, 0::2, 0::2]), valid[0::2, 0::2]


class OverviewPyramid:
    """Builds the overview levels of a map from its strips, in order, into scratch GeoTIFFs.

    Args:
        profile: The full-resolution scratch file's profile (driver, size, transform, bands,
            dtype, tiling); each level gets the same, scaled.
        folder: Where the level files go.
        stem: Level ``i`` is ``{stem}_ov{2 ** (i + 1)}.tif``.
        nearest: Each level keeps the top-left pixel of each 2 x 2 block (:func:`pick`; a
            class map, whose no-data is a value of the profile), instead of averaging the
            valid ones (:func:`halve`) and writing a mask.
        threads: Threads that average the first level's bands in parallel (1: in the
            calling thread).
    """

    def __init__(
        self, profile: dict, folder: Path, stem: str, nearest: bool = False, threads: int = 1
    ) -> None:
        self.reduce = pick if nearest else halve
        groups = min(threads, profile["count"]) if not nearest else 1
        self.band_groups = [
            (g * profile["count"] // groups, (g + 1) * profile["count"] // groups)
            for g in range(groups)
        ]
        self.pool: ThreadPoolExecutor | None = None
        if groups > 1:
            self.pool = ThreadPoolExecutor(groups - 1, thread_name_prefix="landcover-overview")
        self.masked = not nearest
        height, width = profile["height"], profile["width"]
        transform: Affine = profile["transform"]
        self.levels: list[rasterio.io.DatasetWriter] = []
        self.paths: list[Path] = []
        try:
            for i, (h, w) in enumerate(overview_shapes(height, width)):
                path = folder / f"{stem}_ov{2 ** (i + 1)}.tif"
                scaled = transform @ Affine.scale(width / w, height / h)
                level = {**profile, "height": h, "width": w, "transform": scaled}
                self.levels.append(rasterio.open(path, "w", **level))
                self.paths.append(path)
        except BaseException:
            self.close()
            raise
        self.rows = [0] * len(self.levels)  # rows written per level
        self.pending: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(self.levels)

    def add(self, values: np.ndarray, valid: np.ndarray) -> None:
        """Adds the next strip of the full-resolution map.

        Args:
            values: ``(K, h, W)`` values as written to the map.
            valid: ``(h, W)`` bool.
        """
        self._feed(0, values, valid)

    def _feed(self, level: int, values: np.ndarray, valid: np.ndarray) -> None:
        """Gives the next rows of the level above (or of the map) to ``level``."""
        if level >= len(self.levels):
            return
        waiting = self.pending[level]
        if waiting is not None:
            values = np.concatenate([waiting[0], values], axis=1)
            valid = np.concatenate([waiting[1], valid], axis=0)
            self.pending[level] = None
        rows = values.shape[1] - values.shape[1] % 2
        if rows < values.shape[1]:  # an odd row waits for its partner in the next strip
            self.pending[level] = (values[:, rows:].copy(), valid[rows:].copy())
        if rows:
            self._write(level, *self._reduce(level, values[:, :rows], valid[:rows]))

    def _reduce(self, level: int, values: np.ndarray, valid: np.ndarray) -> tuple:
        """Reduces rows of the level above; the first level's band groups in parallel."""
        if self.pool is None or level > 0:
            return self.reduce(values, valid)
        parts = [self.pool.submit(self.reduce, values[a:b], valid) for a, b in self.band_groups[1:]]
        a, b = self.band_groups[0]
        first = self.reduce(values[a:b], valid)  # in this thread, meanwhile
        reduced = [first[0], *(part.result()[0] for part in parts)]
        return np.concatenate(reduced), first[1]

    def _write(self, level: int, values: np.ndarray, valid: np.ndarray) -> None:
        """Writes the next rows of ``level`` and feeds them to the level below."""
        window = ((self.rows[level], self.rows[level] + values.shape[1]), (0, values.shape[2]))
        self.levels[level].write(values, window=window)
        if self.masked:
            self.levels[level].write_mask(np.where(valid, 255, 0).astype(np.uint8), window=window)
        self.rows[level] += values.shape[1]
        self._feed(level + 1, values, valid)

    def finish(self) -> None:
        """Averages the rows still waiting (the last row of an odd height) and closes the files.

        Raises:
            AssertionError: If the strips did not cover the map.
        """
        for level in range(len(self.levels)):
            waiting = self.pending[level]
            if waiting is not None:
                self.pending[level] = None
                self._write(level, *self._reduce(level, *waiting))
        assert self.rows == [dst.height for dst in self.levels], "the strips missed rows"
        self.close()

    def close(self) -> None:
        """Closes the level files (and stops the averaging threads)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        for dst in self.levels:
            dst.close()

    def cog_source(self, source: Path, options: dict[str, str]) -> tuple[Path, dict[str, str]]:
        """What the COG driver copies: ``source`` with these levels as its overviews.

        Args:
            source: The full-resolution scratch map (the levels must be finished).
            options: The COG's creation options.

        Returns:
            The VRT beside ``source`` and ``options`` with ``OVERVIEWS=FORCE_USE_EXISTING``,
            or ``source`` and ``options`` as they are for a map too small for overviews.
        """
        if not self.levels:
            return source, dict(options)
        vrt = self.vrt(source, source.with_suffix(".vrt"))
        return vrt, {**options, "OVERVIEWS": "FORCE_USE_EXISTING"}

    def vrt(self, source: Path, path: Path) -> Path:
        """Writes a VRT of ``source`` (the full-resolution map) with these levels as overviews.

        Its metadata, band descriptions, no-data value, colour table and band scales and
        offsets are the source's, so a copy keeps them.

        Args:
            source: The full-resolution GeoTIFF: with a per-dataset mask (averaged levels)
                or a no-data value (``nearest`` levels).
            path: The VRT to write.

        Returns:
            ``path``.
        """
        with rasterio.open(source) as src:
            size = f'rasterXSize="{src.width}" rasterYSize="{src.height}"'
            gdal_type = {"uint8": "Byte", "float32": "Float32"}[src.dtypes[0]]
            georef = _georeferencing(src)
            tags = "".join(
                f'<MDI key="{html.escape(k)}">{html.escape(v)}</MDI>' for k, v in src.tags().items()
            )
            names = src.descriptions
            scaled = [  # GDAL's band scale and offset (uint8 probabilities: 1/255, 0)
                f"<Offset>{offset!r}</Offset><Scale>{scale!r}</Scale>"
                if (scale, offset) != (1.0, 0.0)
                else ""
                for scale, offset in zip(src.scales, src.offsets, strict=True)
            ]
            nodata = "" if src.nodata is None else f"<NoDataValue>{src.nodata!r}</NoDataValue>"
            colors = ""
            if src.count == 1 and src.colorinterp[0].name == "palette":
                entries = "".join(
                    f'<Entry c1="{r}" c2="{g}" c3="{b}" c4="{a}"/>'
                    for _, (r, g, b, a) in sorted(src.colormap(1).items())
                )
                colors = f"<ColorInterp>Palette</ColorInterp><ColorTable>{entries}</ColorTable>"

        def band(index: str, head: str) -> str:
            overviews = "".join(
                f"<Overview><SourceFilename>{html.escape(str(p))}</SourceFilename>"
                f"<SourceBand>{index}</SourceBand></Overview>"
                for p in self.paths
            )
            return (
                f"{head}<SimpleSource><SourceFilename>{html.escape(str(source))}"
                f"</SourceFilename><SourceBand>{index}</SourceBand></SimpleSource>{overviews}"
                "</VRTRasterBand>"
            )

        mask = band("mask,1", '<VRTRasterBand dataType="Byte">') if self.masked else ""
        bands = "".join(
            band(
                str(i),
                f'<VRTRasterBand dataType="{gdal_type}" band="{i}">'
                f"<Description>{html.escape(name or '')}</Description>{nodata}{colors}"
                f"{scaled[i - 1]}",
            )
            for i, name in enumerate(names, start=1)
        )
        mask_band = f"<MaskBand>{mask}</MaskBand>" if mask else ""
        path.write_text(
            f"<VRTDataset {size}>{georef}<Metadata>{tags}</Metadata>{mask_band}{bands}</VRTDataset>"
        )
        return path


def _georeferencing(src: rasterio.DatasetReader) -> str:
    """A VRT's georeferencing elements, as the map has them.

    A CRS and a geotransform (no CRS: a tile without one keeps its pixel grid), or GCPs alone
    (a scan).
    """
    gcps, gcp_crs = src.gcps
    if gcps and src.transform == Affine.identity():
        points = "".join(
            f'<GCP Id="{html.escape(p.id or "")}" Pixel="{p.col!r}" Line="{p.row!r}" '
            f'X="{p.x!r}" Y="{p.y!r}"' + ("" if p.z is None else f' Z="{p.z!r}"') + "/>"
            for p in gcps
        )
        projection = "" if gcp_crs is None else html.escape(gcp_crs.to_wkt())
        return f'<GCPList Projection="{projection}">{points}</GCPList>'
    srs = "" if src.crs is None else f"<SRS>{html.escape(src.crs.to_wkt())}</SRS>"
    return f"{srs}<GeoTransform>{','.join(repr(v) for v in src.transform.to_gdal())}</GeoTransform>"
