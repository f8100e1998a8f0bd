"""Whether a GeoTIFF just written is whole, before it is renamed to its final name."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import rasterio
import rasterio.enums
from rasterio._err import CPLE_BaseError
from rasterio.errors import RasterioError
from rasterio.windows import Window

from landcover.diskerrors import free_bytes


def check_complete(path: str | Path) -> None:
    """Checks that a GeoTIFF just written holds all its blocks before it is renamed into place.

    GDAL 3.10's COG driver with ``NUM_THREADS`` can return success from a copy whose writes
    hit a full disk (the failure stays in a worker thread): the file then ends before its
    last directory or blocks, and renamed into place it would be a broken map under a final
    name. A COG writes the full resolution's blocks last, each followed by its block of the
    mask where it has one (the probability map), so it is complete when its directories
    read, its full-resolution blocks end inside the file and the mask of the last block
    reads.

    Args:
        path: The file.

    Raises:
        OSError: ``ENOSPC`` if it is incomplete and its disk is (about) full, else ``EIO``.
    """
    size = os.path.getsize(path)
    end = size + 1  # a directory that does not read: incomplete
    try:
        with rasterio.open(path) as ds:
            ds.overviews(1)  # reads the overviews' directories
            rows = -(-ds.height // ds.block_shapes[0][0])
            cols = -(-ds.width // ds.block_shapes[0][1])
            bands = ds.indexes if ds.interleaving == rasterio.enums.Interleaving.band else (1,)
            end = 0
            for band in bands:
                for row in range(rows):
                    for col in range(cols):
                        offset = ds.get_tag_item(f"BLOCK_OFFSET_{col}_{row}", "TIFF", bidx=band)
                        length = ds.get_tag_item(f"BLOCK_SIZE_{col}_{row}", "TIFF", bidx=band)
                        if offset is None or length is None:  # offsets cut off
                            raise RasterioError(f"block {col},{row} of band {band} unknown")
                        end = max(end, int(offset) + int(length))
            if rasterio.enums.MaskFlags.per_dataset in ds.mask_flag_enums[0]:
                height, width = ds.block_shapes[0]
                last = Window((cols - 1) * width, (rows - 1) * height, width, height)
                ds.read_masks(1, window=last.intersection(Window(0, 0, ds.width, ds.height)))
    except (RasterioError, CPLE_BaseError):
        end = max(end, size + 1)
    if end <= size:
        return
    free = free_bytes(Path(path).parent)
    full = free is not None and free < max(end - size, 1 << 20)
    code = errno.ENOSPC if full else errno.EIO
    raise OSError(code, f"{os.strerror(code)} ({size} of at least {end} bytes written)", str(path))
