"""Bringing a label raster onto an image's exact grid (nearest neighbour).

Chesapeake labels often come in another CRS or on another grid than the NAIP imagery (the
Bay-wide files are in an Albers projection). :func:`label_on_image_grid` returns the label codes
on the image's grid, or on a window of it, reading only the part of the label raster that the
window needs: the window's outline is projected into the label's pixel space, that label window
(plus a small margin) is read, and it is reprojected with nearest neighbour, so aligning a small
tile never reads a whole 10,000 x 10,000 label file.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.errors import RasterioError
from rasterio.warp import reproject
from rasterio.warp import transform as transform_points
from rasterio.windows import Window

from landcover.errors import DataError, first_line

LABEL_NODATA: int = 15
"""Label code used where a label raster declares no nodata value (Chesapeake's no-data)."""

_MARGIN_PX = 2
"""Label pixels read beyond the projected outline of a window, on every side."""

_EDGE_POINTS = 21
"""Points per window edge projected into the label CRS (the outline may curve)."""


def grids_match(a: Any, b: Any) -> bool:
    """Tells whether two rasters lie on exactly the same grid (CRS, transform and size).

    Args:
        a: An open dataset (anything with ``crs``, ``transform``, ``width`` and ``height``).
        b: Another.

    Returns:
        True when the CRS, the size and the transform (to 1e-6) agree.
    """
    return (
        a.crs == b.crs
        and (a.width, a.height) == (b.width, b.height)
        and a.transform.almost_equals(b.transform, precision=1e-6)
    )


def read_error(exc: Exception) -> str:
    """The first useful line of a rasterio read error (GDAL's, when rasterio only points to it).

    Args:
        exc: The exception.

    Returns:
        One line saying what failed.
    """
    for err in (exc, exc.__cause__ or exc.__context__):
        text = first_line(err) if err is not None and str(err).strip() else ""
        if text and "See previous exception" not in text:
            return text
    return exc.__class__.__name__


def label_nodata(label_ds: Any) -> int:
    """The no-data code of a label raster: its declared nodata, else :data:`LABEL_NODATA`.

    Args:
        label_ds: The open label raster.

    Returns:
        The no-data code.
    """
    return LABEL_NODATA if label_ds.nodata is None else int(label_ds.nodata)


def _same_lattice(label_ds: Any, image_ds: Any) -> tuple[int, int] | None:
    """The integer pixel offset of the image grid in the label grid, if they share pixels.

    Returns:
        ``(col, row)`` of the image's upper-left pixel in the label raster when both have the
        same CRS and pixel size and the image's origin falls on a label pixel corner; else None.
    """
    lt, it = label_ds.transform, image_ds.transform
    if label_ds.crs != image_ds.crs or not lt.is_rectilinear or not it.is_rectilinear:
        return None
    if not (math.isclose(lt.a, it.a, rel_tol=1e-9) and math.isclose(lt.e, it.e, rel_tol=1e-9)):
        return None
    col, row = ~lt * (it.c, it.f)
    if abs(col - round(col)) > 1e-6 or abs(row - round(row)) > 1e-6:
        return None
    return round(col), round(row)


def _outline_in_label_pixels(
    label_ds: Any, image_ds: Any, window: Window
) -> tuple[np.ndarray, np.ndarray]:
    """Projects the outline of an image window into the label raster's pixel coordinates."""
    height, width = int(window.height), int(window.width)
    edge_c = np.linspace(0.0, width, _EDGE_POINTS)
    edge_r = np.linspace(0.0, height, _EDGE_POINTS)
    cols = np.concatenate([edge_c, edge_c, np.zeros(_EDGE_POINTS), np.full(_EDGE_POINTS, width)])
    rows = np.concatenate([np.zeros(_EDGE_POINTS), np.full(_EDGE_POINTS, height), edge_r, edge_r])
    cols = cols + float(window.col_off)
    rows = rows + float(window.row_off)
    xs, ys = image_ds.transform * (cols, rows)
    if image_ds.crs != label_ds.crs:
        xs, ys = transform_points(image_ds.crs, label_ds.crs, list(xs), list(ys))
    lc, lr = ~label_ds.transform * (np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    return np.asarray(lc, dtype=float), np.asarray(lr, dtype=float)


def label_window(label_ds: Any, image_ds: Any, window: Window | None = None) -> Window | None:
    """The part of a label raster that an image window needs, plus a margin.

    Args:
        label_ds: The open label raster.
        image_ds: The open image.
        window: A window of the image; the whole image when None.

    Returns:
        The label window, clipped to the label raster, or None when the image window does not
        overlap the label raster.
    """
    if window is None:
        window = Window(0, 0, image_ds.width, image_ds.height)
    cols, rows = _outline_in_label_pixels(label_ds, image_ds, window)
    finite = np.isfinite(cols) & np.isfinite(rows)
    if not finite.any():
        return None
    c0 = max(math.floor(cols[finite].min()) - _MARGIN_PX, 0)
    c1 = min(math.ceil(cols[finite].max()) + _MARGIN_PX, label_ds.width)
    r0 = max(math.floor(rows[finite].min()) - _MARGIN_PX, 0)
    r1 = min(math.ceil(rows[finite].max()) + _MARGIN_PX, label_ds.height)
    if c0 >= c1 or r0 >= r1:
        return None
    return Window(c0, r0, c1 - c0, r1 - r0)


def check_alignable(
    label_ds: Any, image_ds: Any, *, label_name: str | None = None, image_name: str | None = None
) -> None:
    """Checks that a label raster can be brought onto an image's grid.

    Args:
        label_ds: The open label raster.
        image_ds: The open image.
        label_name: The label's path or URL for messages (default: the dataset's name).
        image_name: The image's path or URL for messages (default: the dataset's name).

    Raises:
        DataError: If the label has several bands or is not uint8, or, when the grids differ,
            if either raster has no CRS or the label does not overlap the image at all.
    """
    label, image = label_name or label_ds.name, image_name or image_ds.name
    if label_ds.count != 1:
        raise DataError(f"{label}: label raster has {label_ds.count} bands, expected 1")
    if label_ds.dtypes[0] != "uint8":
        raise DataError(f"{label}: label raster has dtype {label_ds.dtypes[0]}, expected uint8")
    if grids_match(label_ds, image_ds):
        return
    if label_ds.crs is None:
        raise DataError(f"{label}: label raster has no CRS, so it cannot be aligned with {image}")
    if image_ds.crs is None:
        raise DataError(f"{image}: image has no CRS, so the label {label} cannot be aligned")
    if label_window(label_ds, image_ds) is None:
        raise DataError(f"{label}: label raster does not overlap the image {image}")


def label_on_image_grid(
    label_ds: Any,
    image_ds: Any,
    window: Window | None = None,
    *,
    label_name: str | None = None,
    image_name: str | None = None,
) -> np.ndarray:
    """Returns a label raster's codes on an image's grid (or on a window of it).

    Matching grids, and grids that share the image's pixels (same CRS and pixel size, origin on
    a label pixel corner), are read directly; anything else is reprojected with nearest
    neighbour from the part of the label raster the window covers.

    Args:
        label_ds: The open label raster (one uint8 band).
        image_ds: The open image whose grid the labels are wanted on.
        window: A window of the image (integer offsets and size); the whole image when None.
        label_name: The label's path or URL for messages (default: the dataset's name).
        image_name: The image's path or URL for messages (default: the dataset's name).

    Returns:
        A ``(height, width)`` uint8 array of label codes, equal to a direct nearest-neighbour
        ``rasterio.warp.reproject`` of the label onto the window's grid; pixels outside the
        label raster get the label's nodata (:data:`LABEL_NODATA` when it declares none).
        (GDAL's approximate transformer, accurate to 0.125 px, depends on the destination
        extent, so a window can differ from a slice of the whole-image result at rare pixels
        on class boundaries.)

    Raises:
        DataError: If the label cannot be aligned (see :func:`check_alignable`) or a block of it
            is unreadable.
    """
    check_alignable(label_ds, image_ds, label_name=label_name, image_name=image_name)
    if window is None:
        window = Window(0, 0, image_ds.width, image_ds.height)
    window = Window(
        round(window.col_off), round(window.row_off), round(window.width), round(window.height)
    )
    nodata = label_nodata(label_ds)
    out = np.full((int(window.height), int(window.width)), nodata, dtype=np.uint8)
    try:
        offset = _same_lattice(label_ds, image_ds)
        if offset is not None:
            _read_shared_pixels(label_ds, window, offset, out)
            return out
        src_window = label_window(label_ds, image_ds, window)
        if src_window is None:
            return out
        source = label_ds.read(1, window=src_window)
        reproject(
            source,
            out,
            src_transform=label_ds.window_transform(src_window),
            src_crs=label_ds.crs,
            src_nodata=nodata,
            dst_transform=rasterio.windows.transform(window, image_ds.transform),
            dst_crs=image_ds.crs,
            dst_nodata=nodata,
            resampling=Resampling.nearest,
        )
    except RasterioError as exc:
        name = label_name or label_ds.name
        raise DataError(f"{name}: corrupt or truncated GeoTIFF ({read_error(exc)})") from None
    return out


def _read_shared_pixels(
    label_ds: Any, window: Window, offset: tuple[int, int], out: np.ndarray
) -> None:
    """Copies the label pixels under an image window into ``out`` (grids share pixels)."""
    c0 = int(window.col_off) + offset[0]
    r0 = int(window.row_off) + offset[1]
    c1, r1 = c0 + int(window.width), r0 + int(window.height)
    cc0, rr0 = max(c0, 0), max(r0, 0)
    cc1, rr1 = min(c1, label_ds.width), min(r1, label_ds.height)
    if cc0 >= cc1 or rr0 >= rr1:
        return
    part = label_ds.read(1, window=Window(cc0, rr0, cc1 - cc0, rr1 - rr0))
    out[rr0 - r0 : rr1 - r0, cc0 - c0 : cc1 - c0] = part
