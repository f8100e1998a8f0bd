"""The tiles ``data prepare`` writes: windows of a raster, each written as a GeoTIFF.

Each tile is tiled and compressed, and written atomically (a temporary file beside it, then a
rename).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.windows import Window

from landcover.fileio import make_temp_beside

BLOCK = 256
"""GeoTIFF block size of the written tiles."""


def tile_windows(width: int, height: int, tile_size: int) -> Iterator[tuple[int, int, Window]]:
    """Cuts a raster into windows of ``tile_size`` pixels, row by row.

    Args:
        width: Raster width.
        height: Raster height.
        tile_size: Tile side; edge tiles are smaller.

    Yields:
        ``(row index, column index, window)``.
    """
    for r, row in enumerate(range(0, height, tile_size)):
        for c, col in enumerate(range(0, width, tile_size)):
            yield r, c, Window(col, row, min(tile_size, width - col), min(tile_size, height - row))


def tile_profile(ds: Any, window: Window, count: int, nodata: float | None) -> dict:
    """The rasterio profile of one tile cut from a raster.

    Args:
        ds: The open source raster (its CRS and transform).
        window: The tile's window in it.
        count: The tile's bands.
        nodata: The nodata value written in the file's header, if any.

    Returns:
        A profile for ``rasterio.open(..., "w", **profile)``: uint8, deflate, 256 px blocks.
    """
    return {
        "driver": "GTiff",
        "width": int(window.width),
        "height": int(window.height),
        "count": count,
        "dtype": "uint8",
        "crs": ds.crs,
        "transform": ds.window_transform(window),
        "nodata": nodata,
        "tiled": True,
        "blockxsize": BLOCK,
        "blockysize": BLOCK,
        "compress": "deflate",
    }


def write_tile(
    path: Path,
    array: np.ndarray,
    profile: dict,
    src: Any | None = None,
    nodata: np.ndarray | None = None,
) -> None:
    """Writes a GeoTIFF atomically: a temporary file beside ``path``, then a rename.

    Args:
        path: The tile's final path.
        array: ``(bands, height, width)`` pixels.
        profile: Its profile (:func:`tile_profile`).
        src: The source raster, whose colour interpretation and band descriptions the tile
            keeps; without it the one band is described as ``land_cover``.
        nodata: True where there is no data, written as the file's internal mask.
    """
    tmp = make_temp_beside(path)
    try:
        env = rasterio.Env(GDAL_PAM_ENABLED="NO", GDAL_TIFF_INTERNAL_MASK=True)
        with env, rasterio.open(tmp, "w", **profile) as dst:
            dst.write(array)
            if nodata is not None:
                dst.write_mask(np.where(nodata, 0, 255).astype(np.uint8))
            if src is not None:
                dst.colorinterp = src.colorinterp
                for band, text in enumerate(src.descriptions, start=1):
                    if text:
                        dst.set_band_description(band, text)
            else:
                dst.set_band_description(1, "land_cover")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
