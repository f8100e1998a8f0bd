"""Measuring tile pairs window by window, in bounded memory: the streaming half of ``data stats``.

:func:`measure_pairs` streams pairs from local disk, an NFS mount or blob storage window by
window (remote files are downloaded to a temporary file one pair at a time), so no tile is ever
held whole in memory; labels on another grid are brought onto the image grid window by window
(:func:`landcover.data.align.label_on_image_grid`). The pixels go into one
:class:`~landcover.data.stats.DataStats`.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import rasterio
from rasterio.errors import RasterioError
from rasterio.windows import Window

from landcover import storage
from landcover.classes import ClassMapping
from landcover.data.align import check_alignable, label_on_image_grid, read_error
from landcover.data.maskfile import download_mask_file, mask_file_of
from landcover.data.pairs import TilePair
from landcover.data.raster import (
    check_codes,
    checked_image,
    has_nodata,
    nodata_mask,
    open_raster,
)
from landcover.data.stats import WINDOW_PIXELS, DataStats
from landcover.errors import DataError

GDAL_CACHE_MB = 8
"""GDAL's block cache while measuring: small, so memory stays bounded on any tile size."""


@dataclass
class MeasuredPairs:
    """What :func:`measure_pairs` measured.

    Attributes:
        stats: The accumulated statistics.
        tiles: Names of the measured tiles, in order.
        pixels: Image pixels read (valid or not).
    """

    stats: DataStats
    tiles: list[str] = field(default_factory=list)
    pixels: int = 0


def stat_windows(width: int, height: int, block: tuple[int, int]) -> Iterator[Window]:
    """Windows covering a raster, aligned to its blocks, of about :data:`WINDOW_PIXELS` each.

    Strip-organised files (blocks as wide as the raster) are read in bands of whole strips;
    tiled files in rectangles of whole blocks.

    Args:
        width: Raster width.
        height: Raster height.
        block: ``(block height, block width)`` of the file.

    Yields:
        The windows, row by row.
    """
    bh, bw = max(1, block[0]), max(1, min(block[1], width))
    side = max(1, math.isqrt(WINDOW_PIXELS))
    if bw >= width:
        cols = width
        rows = max(bh, (WINDOW_PIXELS // max(width, 1)) // bh * bh)
    else:
        cols = max(bw, side // bw * bw)
        rows = max(bh, side // bh * bh)
    for top in range(0, height, rows):
        for left in range(0, width, cols):
            yield Window(left, top, min(cols, width - left), min(rows, height - top))


def _measure_open_pair(
    img: rasterio.io.DatasetReader,
    lab: rasterio.io.DatasetReader,
    pair: TilePair,
    mapping: ClassMapping,
    stats: DataStats,
) -> None:
    """Adds one opened pair to ``stats``, window by window."""
    table = mapping.lookup_table()
    masked = has_nodata(img)
    for window in stat_windows(img.width, img.height, img.block_shapes[0]):
        try:
            image = np.moveaxis(img.read(window=window), 0, -1)
            nodata = nodata_mask(img, window, pixels=image) if masked else None
        except RasterioError as exc:
            raise DataError(
                f"{pair.image}: corrupt or truncated GeoTIFF ({read_error(exc)})"
            ) from None
        codes = label_on_image_grid(lab, img, window, label_name=pair.label, image_name=pair.image)
        check_codes(codes, mapping, pair.label)
        stats.add(image, table[codes], nodata)


@contextmanager
def _local_copy(url: str, folder: Path, with_mask: bool = False) -> Iterator[str]:
    """A local path to read ``url`` from: itself when local, else a temporary download.

    An image's download takes its external mask file along (:mod:`landcover.data.maskfile`).
    """
    if not storage.is_remote(url):
        yield url
        return
    path = folder / storage.name(url)
    try:
        storage.download_file(url, path)
        if with_mask:
            download_mask_file(url, path)
        yield str(path)
    finally:
        path.unlink(missing_ok=True)
        Path(mask_file_of(str(path))).unlink(missing_ok=True)


def _measure_pair(
    image: str, label: str, pair: TilePair, mapping: ClassMapping, bands: int, stats: DataStats
) -> int:
    """Measures one pair read from local files (downloads of remote ones); returns its pixels."""
    try:
        with (
            open_raster(image) as img_file,
            open_raster(label) as lab,
            checked_image(img_file, pair.image, bands) as img,
        ):
            check_alignable(lab, img, label_name=pair.label, image_name=pair.image)
            _measure_open_pair(img, lab, pair, mapping, stats)
            stats.tiles += 1
            return img.width * img.height
    except DataError as exc:  # name the remote file, not its temporary download
        raise DataError(str(exc).replace(image, pair.image).replace(label, pair.label)) from None


def measure_pairs(
    pairs: list[TilePair],
    mapping: ClassMapping,
    bands: int,
    on_tile: Callable[[int, str], None] | None = None,
) -> MeasuredPairs:
    """Measures band statistics and class counts of tile pairs, in bounded memory.

    Every file is read window by window (about :data:`WINDOW_PIXELS` pixels each, aligned to
    its blocks) with a small GDAL block cache. Remote (blob) files are downloaded to a
    temporary folder one pair at a time (the next pair downloads while this one is measured)
    and deleted after.

    Args:
        pairs: The pairs.
        mapping: The class mapping for the label codes; unknown codes are an error.
        bands: Expected number of image bands.
        on_tile: Called after each tile with its index and name (for progress).

    Returns:
        The statistics and what was measured.

    Raises:
        DataError: If a file is missing or unreadable, has the wrong band count or dtype, holds
            label codes outside the mapping, or its label cannot be brought onto its grid.
        StorageError: If downloading a remote file fails after bounded retries.
    """
    result = MeasuredPairs(DataStats.empty(bands, mapping.num_classes))
    with (
        tempfile.TemporaryDirectory(prefix="landcover-stats-") as tmp,
        ThreadPoolExecutor(max_workers=1) as pool,
        rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB),
    ):
        folder = Path(tmp)

        def fetch(index: int) -> tuple[ExitStack, str, str]:
            stack = ExitStack()
            try:
                sub = folder / str(index)
                sub.mkdir()
                image = stack.enter_context(_local_copy(pairs[index].image, sub, with_mask=True))
                label = stack.enter_context(_local_copy(pairs[index].label, sub))
            except BaseException:
                stack.close()
                raise
            return stack, image, label

        pending: Future | None = pool.submit(fetch, 0) if pairs else None
        for index, pair in enumerate(pairs):
            assert pending is not None
            stack, image, label = pending.result()
            pending = pool.submit(fetch, index + 1) if index + 1 < len(pairs) else None
            with stack:
                result.pixels += _measure_pair(image, label, pair, mapping, bands, result.stats)
            result.tiles.append(pair.name)
            if on_tile is not None:
                on_tile(index, pair.name)
    return result
